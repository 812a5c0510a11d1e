/* SPDX-License-Identifier: MIT */
/*
 * The shadow stack (ptw_observe.h) that the tracer, the kernel path's
 * converter and the span engine each keep per thread, on synthetic
 * observations: every case the three handled before they shared it.
 * Stacks grow down: a callee's sp is below its caller's.
 */
#include <stdlib.h>

#include "check.h"
#include "ptw_observe.h"

/* What the stack left, in order. */
static struct {
	uint64_t sp;
	uintptr_t tag;
	enum ptw_shadow_how how;
} out[64];
static size_t nout;

static void left(void *ctx, const struct ptw_shadow_frame *f, enum ptw_shadow_how how)
{
	(void)ctx;
	if (nout < 64)
		out[nout++] = (typeof(out[0])){ f->sp, f->tag, how };
}

static struct ptw_shadow sh;

static void reset(void)
{
	ptw_shadow_clear(&sh, NULL, NULL);
	nout = 0;
}

static void enter(uint64_t sp, uint64_t ret, uintptr_t tag)
{
	ptw_shadow_enter(&sh, sp, ret, tag, false, true, left, NULL);
}

#define CHECK_LEFT(i, sp_, how_)                                                                   \
	do {                                                                                       \
		CHECK((i) < nout);                                                                 \
		CHECK_EQ(out[i].sp, sp_);                                                          \
		CHECK_EQ(out[i].how, how_);                                                        \
	} while (0)

/* Calls and returns: a return leaves its frame (RETURNED); a deeper call
 * leaves nothing; a return to the middle leaves the top without a return. */
static void test_calls_and_returns(void)
{
	reset();
	enter(0x1000, 0x11, 1);
	enter(0xf00, 0x22, 2);
	enter(0xe00, 0x33, 3);
	CHECK_EQ(nout, 0);
	CHECK_EQ(sh.run.n, 3);
	/* a return from the top */
	CHECK_EQ(ptw_shadow_return(&sh, 0xe08, 0x33, left, NULL), 1);
	CHECK_LEFT(0, 0xe00, PTW_SHADOW_RETURNED);
	/* the same return site reached again: nothing ends */
	CHECK_EQ(ptw_shadow_return(&sh, 0xe08, 0x33, left, NULL), 0);
	enter(0xe00, 0x33, 4);
	/* a return from the middle skips the top */
	nout = 0;
	CHECK_EQ(ptw_shadow_return(&sh, 0xf08, 0x22, left, NULL), 2);
	CHECK_LEFT(0, 0xe00, PTW_SHADOW_LEFT);
	CHECK_LEFT(1, 0xf00, PTW_SHADOW_RETURNED);
	CHECK_EQ(sh.run.n, 1);
	/* a hit at a return site that is no return of ours (another address):
	 * the frames below are left, none returned */
	enter(0xf00, 0x22, 5);
	nout = 0;
	CHECK_EQ(ptw_shadow_return(&sh, 0xf08, 0x55, left, NULL), 1);
	CHECK_LEFT(0, 0xf00, PTW_SHADOW_LEFT);
	CHECK_EQ(ptw_shadow_top(&sh)->tag, 1);
}

/* Tail calls: an entry in the same slot with the same return address
 * leaves the frame it replaces as TAIL_CALL; another return address at
 * that slot is something else (LEFT); a shallower entry leaves all below. */
static void test_tail_calls(void)
{
	reset();
	enter(0x1000, 0x11, 1);
	enter(0xf00, 0x22, 2);
	enter(0xf00, 0x22, 3); /* b jmp's to c */
	CHECK_EQ(nout, 1);
	CHECK_LEFT(0, 0xf00, PTW_SHADOW_TAIL_CALL);
	CHECK_EQ(out[0].tag, 2);
	CHECK_EQ(ptw_shadow_top(&sh)->tag, 3);
	nout = 0;
	enter(0xf00, 0x99, 4); /* the slot reused by a call from elsewhere */
	CHECK_LEFT(0, 0xf00, PTW_SHADOW_LEFT);
	nout = 0;
	enter(0xe00, 0x44, 5);
	enter(0x1000 + 0x80, 0x99, 6); /* shallower than both: two left */
	CHECK_EQ(nout, 3);
	CHECK_LEFT(0, 0xe00, PTW_SHADOW_LEFT);
	CHECK_LEFT(1, 0xf00, PTW_SHADOW_LEFT);
	CHECK_LEFT(2, 0x1000, PTW_SHADOW_LEFT);
	CHECK_EQ(sh.run.n, 1);
}

/* Recursion: every level its own frame, each return ends one. */
static void test_recursion(void)
{
	reset();
	for (int i = 0; i < 40; i++)
		enter(0x10000 - 0x40 * (uint64_t)i, i ? 0x401050 : 0x401f00, (uintptr_t)i);
	CHECK_EQ(sh.run.n, 40);
	for (int i = 39; i >= 0; i--)
		CHECK_EQ(ptw_shadow_return(&sh, 0x10000 - 0x40 * (uint64_t)i + 8,
					   i ? 0x401050 : 0x401f00, left, NULL),
			 1);
	CHECK_EQ(nout, 40);
	CHECK_EQ(sh.run.n, 0);
	for (size_t i = 0; i < nout; i++)
		CHECK_EQ(out[i].how, PTW_SHADOW_RETURNED);
}

/* longjmp and exceptions: the landing point leaves every frame below it
 * (LEFT), in order; a catch lands at the catching frame's sp. */
static void test_longjmp_and_catch(void)
{
	reset();
	enter(0x1000, 0x11, 1); /* setjmp's caller's callee */
	enter(0xf00, 0x22, 2);
	enter(0xe00, 0x33, 3);
	ptw_shadow_land(&sh, 0xf80, left, NULL); /* longjmp to between 1 and 2 */
	CHECK_EQ(nout, 2);
	CHECK_LEFT(0, 0xe00, PTW_SHADOW_LEFT);
	CHECK_LEFT(1, 0xf00, PTW_SHADOW_LEFT);
	CHECK_EQ(sh.run.n, 1);
	/* a later hit at a left frame's return site is no return */
	CHECK_EQ(ptw_shadow_return(&sh, 0xf08, 0x22, left, NULL), 0);
	/* a catch in frame 1 (its sp above what it called) */
	enter(0xf00, 0x22, 4);
	enter(0xe00, 0x33, 5);
	nout = 0;
	ptw_shadow_land(&sh, 0xf08, left, NULL);
	CHECK_EQ(nout, 2);
	CHECK_EQ(sh.run.n, 1);
	/* a landing on another stack says nothing */
	nout = 0;
	ptw_shadow_land(&sh, 0x1000 + PTW_SHADOW_WINDOW + 64, left, NULL);
	CHECK_EQ(nout, 0);
}

/* Signals: a handler's entry (the sigreturn trampoline as its return
 * address) leaves nothing, nor does the first traced call of a handler
 * that is not traced; a second call in that handler, or one after the
 * sigreturn, does; a siglongjmp out of the handler ends its handling. */
static void test_signals(void)
{
	reset();
	enter(0x1000, 0x11, 1);
	enter(0xf00, 0x22, 2);
	/* a traced handler, entered below the interrupted code */
	ptw_shadow_signal(&sh, 0xef0, 10);
	ptw_shadow_enter(&sh, 0xd00, 0x7f0, 3, true, true, left, NULL);
	CHECK_EQ(nout, 0);
	CHECK_EQ(ptw_shadow_return(&sh, 0xd08, 0x7f0, left, NULL), 1);
	ptw_shadow_sigreturn(&sh);
	/* an untraced handler on a sigaltstack above: its first traced call
	 * lies above every open frame and leaves none of them */
	nout = 0;
	ptw_shadow_signal(&sh, 0xef0, 12);
	CHECK(ptw_shadow_handling(&sh) != NULL);
	CHECK_EQ(ptw_shadow_handling(&sh)->sig, 12);
	enter(0x1800, 0x44, 4);
	CHECK_EQ(nout, 0);
	CHECK(ptw_shadow_handling(&sh) == NULL); /* its first call is open */
	CHECK_EQ(sh.run.n, 3);
	CHECK_EQ(ptw_shadow_return(&sh, 0x1808, 0x44, left, NULL), 1);
	nout = 0;
	/* siglongjmp from the handler back into frame 1: frame 2 is left and
	 * the signal is no longer being handled */
	ptw_shadow_land(&sh, 0xf80, left, NULL);
	CHECK_EQ(nout, 1);
	CHECK_LEFT(0, 0xf00, PTW_SHADOW_LEFT);
	CHECK_EQ(sh.nsigs, 0);
	/* marks not trusted: a call above the frames leaves them */
	reset();
	enter(0xf00, 0x22, 1);
	ptw_shadow_signal(&sh, 0xef0, 12);
	ptw_shadow_enter(&sh, 0x1800, 0x44, 2, false, false, left, NULL);
	CHECK_EQ(nout, 1);
	/* a sigreturn with no signal being handled changes nothing */
	reset();
	ptw_shadow_sigreturn(&sh);
	CHECK_EQ(sh.nsigs, 0);
	/* nested signals: each sigreturn ends the innermost */
	ptw_shadow_signal(&sh, 0xf00, 10);
	ptw_shadow_signal(&sh, 0xe00, 12);
	ptw_shadow_sigreturn(&sh);
	CHECK_EQ(sh.nsigs, 1);
	CHECK_EQ(sh.sigs[0].sig, 10);
}

/* sigaltstack: a frame on another stack (farther than the window) says
 * nothing about the frames of this one, either way. */
static void test_sigaltstack(void)
{
	reset();
	enter(0x7fff0000, 0x11, 1);
	enter(0x10000, 0x22, 2); /* far below: another stack */
	CHECK_EQ(nout, 0);
	CHECK_EQ(sh.run.n, 2);
	CHECK_EQ(ptw_shadow_return(&sh, 0x10008, 0x22, left, NULL), 1);
	CHECK_EQ(sh.run.n, 1);
	enter(0x7fff0000 + PTW_SHADOW_WINDOW + 64, 0x33, 3); /* far above */
	CHECK_EQ(nout, 1);
	CHECK_EQ(sh.run.n, 2);
}

/* Contexts: swapcontext parks the running frames by where it resumes;
 * switching back resumes them; setcontext away abandons them; setcontext
 * within the running context is a landing; clear abandons parked ones. */
static void test_contexts(void)
{
	reset();
	enter(0x7000, 0x11, 1);
	enter(0x6f00, 0x22, 2);
	sh.run.base = 7;
	/* swapcontext from 2 (sp 0x6e00) to a coroutine at 0x100000 */
	unsigned d = ptw_shadow_switch(&sh, 0x100000, 0x6e08, left, NULL);
	CHECK_EQ(d, PTW_SHADOW_PARKED);
	CHECK_EQ(sh.run.n, 0);
	CHECK_EQ(sh.run.base, 0);
	CHECK_EQ(sh.nparked, 1);
	enter(0xff000, 0x33, 3);
	sh.run.base = 9;
	/* the coroutine swaps back: its frames parked, the first resumed */
	d = ptw_shadow_switch(&sh, 0x6e08, 0xfef08, left, NULL);
	CHECK_EQ(d, PTW_SHADOW_PARKED | PTW_SHADOW_RESUMED);
	CHECK_EQ(sh.run.n, 2);
	CHECK_EQ(sh.run.base, 7);
	CHECK_EQ(ptw_shadow_top(&sh)->tag, 2);
	CHECK_EQ(nout, 0);
	/* a return in the resumed context */
	CHECK_EQ(ptw_shadow_return(&sh, 0x6f08, 0x22, left, NULL), 1);
	/* setcontext away to a new context: the running frames abandoned */
	nout = 0;
	d = ptw_shadow_switch(&sh, 0x40000000, 0, left, NULL);
	CHECK_EQ(d, PTW_SHADOW_DROPPED);
	CHECK_EQ(nout, 1);
	CHECK_LEFT(0, 0x7000, PTW_SHADOW_ABANDONED);
	/* setcontext within the running context (back to a getcontext): a
	 * landing, no context change */
	enter(0x3ffff000, 0x44, 4);
	enter(0x3fffe000, 0x55, 5);
	nout = 0;
	d = ptw_shadow_switch(&sh, 0x3ffff800, 0, left, NULL);
	CHECK_EQ(d, PTW_SHADOW_JUMPED);
	CHECK_EQ(nout, 2);
	CHECK_LEFT(0, 0x3fffe000, PTW_SHADOW_LEFT);
	CHECK_LEFT(1, 0x3ffff000, PTW_SHADOW_LEFT);
	/* the end: running frames LEFT, the parked coroutine's ABANDONED */
	enter(0x3ffff000, 0x44, 6);
	nout = 0;
	ptw_shadow_clear(&sh, left, NULL);
	CHECK_EQ(nout, 2);
	CHECK_LEFT(0, 0x3ffff000, PTW_SHADOW_LEFT);
	CHECK_LEFT(1, 0xff000, PTW_SHADOW_ABANDONED);
	CHECK_EQ(sh.nparked, 0);
	CHECK_EQ(sh.run.n, 0);
	/* a swapcontext with nothing open still parks (coming back must not
	 * look like a new context) */
	d = ptw_shadow_switch(&sh, 0x100000, 0x6e08, left, NULL);
	CHECK_EQ(d, PTW_SHADOW_PARKED);
	d = ptw_shadow_switch(&sh, 0x6e08, 0, left, NULL);
	CHECK_EQ(d, PTW_SHADOW_DROPPED | PTW_SHADOW_RESUMED);
	CHECK_EQ(sh.nparked, 0);
}

/* Calls under way at an attach go below what is open already, and the
 * signal marks keep counting the same frames. */
static void test_under_way(void)
{
	reset();
	enter(0x5000, 0x66, 9);
	ptw_shadow_signal(&sh, 0x4ff0, 10);
	struct ptw_shadow_frame v[2] = { { 0x8000, 0x11, 1 }, { 0x7000, 0x22, 2 } };
	ptw_shadow_under_way(&sh, v, 2);
	CHECK_EQ(sh.run.n, 3);
	CHECK_EQ(sh.run.st[0].tag, 1);
	CHECK_EQ(sh.run.st[1].tag, 2);
	CHECK_EQ(sh.run.st[2].tag, 9);
	CHECK_EQ(sh.sigs[0].n, 3);
	CHECK(ptw_shadow_handling(&sh) != NULL);
	/* their returns come as any return does */
	CHECK_EQ(ptw_shadow_return(&sh, 0x7008, 0x22, left, NULL), 2);
	CHECK_LEFT(0, 0x5000, PTW_SHADOW_LEFT);
	CHECK_LEFT(1, 0x7000, PTW_SHADOW_RETURNED);
}

/* The kernel path's tail jump into code not traced: the frame whose slot
 * it is ends tail_call, those below it are left; at a slot no frame has,
 * nothing ends. */
static void test_tail_jump(void)
{
	reset();
	enter(0x7000, 0xa1, 1);
	enter(0x6f00, 0xb1, 2);
	enter(0x6e00, 0xc1, 3);
	CHECK_EQ(ptw_shadow_tail(&sh, 0x6f80, left, NULL), 0);
	CHECK_EQ(nout, 0);
	CHECK_EQ(ptw_shadow_tail(&sh, 0x6f00, left, NULL), 2);
	CHECK_LEFT(0, 0x6e00, PTW_SHADOW_LEFT);
	CHECK_LEFT(1, 0x6f00, PTW_SHADOW_TAIL_CALL);
	CHECK_EQ(sh.run.n, 1);
	CHECK_EQ(ptw_shadow_tail(&sh, 0x7000, left, NULL), 1);
	CHECK_EQ(sh.run.n, 0);
}

int main(void)
{
	test_tail_jump();
	test_calls_and_returns();
	test_tail_calls();
	test_recursion();
	test_longjmp_and_catch();
	test_signals();
	test_sigaltstack();
	test_contexts();
	test_under_way();
	reset();
	CHECK_DONE();
}
