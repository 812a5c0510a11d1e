/* SPDX-License-Identifier: MIT */
/* Frame spans (--trace) of code entered without a call, on synthetic streams:
 * signal handlers (FRAME_ENTRY with sig) and contexts (CONTEXT_SWITCH); the
 * rules are in ptw_frames.h. */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>

#include "check.h"
#include "ptw_frames.h"
#include "ptw_spans.h"
#include "ptw_symbols.h"

#define MAIN	   100
#define RESTORE_RT 0x7f00000f050ull /* the sigreturn trampoline */
#define START_CTX  0x7f0000249c0ull /* glibc's __start_context */

static const struct ptw_location fmain = { .addr = 0x401000, .symbol = "main_fn" };
static const struct ptw_location foo = { .addr = 0x401100, .symbol = "foo" };
static const struct ptw_location bar = { .addr = 0x401200, .symbol = "bar" };
static const struct ptw_location baz = { .addr = 0x401300, .symbol = "baz" };
static const struct ptw_location handler = { .addr = 0x401400, .symbol = "handler" };

static struct ptw_spans *s;
static uint64_t now;

static struct ptw_event ev(enum ptw_event_kind kind)
{
	return ptw_event_init(kind, now += 1000, MAIN);
}

static const struct ptw_frame *feed(struct ptw_event e)
{
	ptw_spans_consume(s, &e);
	return ptw_spans_last_frame(s);
}

static const struct ptw_frame *call_sig(const struct ptw_location *fn, uint64_t sp, uint64_t ret,
					int sig)
{
	struct ptw_event e = ev(PTW_EV_FRAME_ENTRY);
	e.routine = fn;
	e.sp = sp;
	e.ret_addr = ret;
	e.sig = sig;
	return feed(e);
}

static const struct ptw_frame *call(const struct ptw_location *fn, uint64_t sp, uint64_t ret)
{
	return call_sig(fn, sp, ret, 0);
}

static const struct ptw_frame *ret_to(uint64_t ret, uint64_t sp)
{
	struct ptw_event e = ev(PTW_EV_FRAME_RETURN);
	e.ret_addr = ret;
	e.sp = sp;
	e.has_value = true;
	return feed(e);
}

/* swapcontext (resume: where the context left resumes) or setcontext (0). */
static void switch_to(uint64_t sp, uint64_t resume)
{
	struct ptw_event e = ev(PTW_EV_CONTEXT_SWITCH);
	e.sp = sp;
	e.has_arg = resume != 0;
	e.arg = resume;
	feed(e);
}

static const struct ptw_frame *frame(uint32_t id)
{
	return ptw_frames_get(ptw_spans_frames(s), id - 1);
}

static void setup(void)
{
	ptw_spans_free(s);
	s = ptw_spans_new();
	now = 0;
	feed(ev(PTW_EV_IMAGE));
	feed(ev(PTW_EV_MAIN_START));
}

/* id's symbol, depth, parent, status, reason and signal */
static void expect(uint32_t id, const struct ptw_location *fn, unsigned depth, uint32_t parent,
		   enum ptw_frame_status st, const char *reason, int sig)
{
	const struct ptw_frame *fr = frame(id);
	if (getenv("DBG") && fr)
		fprintf(stderr, "frame %u %s depth %u parent %u status %d reason %s sig %d\n",
			fr->id, fr->function->symbol, fr->depth, fr->parent, fr->status,
			fr->reason ? fr->reason : "-", fr->sig);
	CHECK(fr != NULL);
	if (!fr)
		return;
	CHECK(fr->function == fn);
	CHECK_EQ(fr->depth, depth);
	CHECK_EQ(fr->parent, parent);
	CHECK_EQ(fr->status, st);
	if (reason)
		CHECK_STR(fr->reason, reason);
	else
		CHECK(fr->reason == NULL);
	CHECK_EQ(fr->sig, sig);
}

/* main{foo sighandler{bar} foo}: the handler interrupts main between two
 * calls of foo, calls bar and returns through the trampoline. */
static void test_handler_returns(void)
{
	setup();
	call(&fmain, 0x7000, 0x400f00);
	call(&foo, 0x6f00, 0x401010);
	ret_to(0x401010, 0x6f08);
	/* the kernel pushes its signal frame below main's (red zone, the
	 * context): the handler's slot holds the trampoline */
	call_sig(&handler, 0x6a38, RESTORE_RT, SIGUSR1);
	call(&bar, 0x6a00, 0x401410);
	ret_to(0x401410, 0x6a08);
	const struct ptw_frame *fr = ret_to(RESTORE_RT, 0x6a40);
	CHECK(fr && fr->id == 3 && fr->status == PTW_FRAME_COMPLETED);
	call(&foo, 0x6f00, 0x401020);
	ret_to(0x401020, 0x6f08);
	ret_to(0x400f00, 0x7008);
	expect(1, &fmain, 1, 0, PTW_FRAME_COMPLETED, NULL, 0);
	expect(2, &foo, 2, 1, PTW_FRAME_COMPLETED, NULL, 0);
	expect(3, &handler, 2, 1, PTW_FRAME_COMPLETED, NULL, SIGUSR1);
	expect(4, &bar, 3, 3, PTW_FRAME_COMPLETED, NULL, 0);
	expect(5, &foo, 2, 1, PTW_FRAME_COMPLETED, NULL, 0);
}

/* A handler interrupting foo at its very slot's level, and one whose
 * stack (sigaltstack) lies above the interrupted frames: neither leaves
 * them. */
static void test_handler_leaves_nothing(void)
{
	setup();
	call(&fmain, 0x7000, 0x400f00);
	call(&foo, 0x6f00, 0x401010);
	call_sig(&handler, 0x6f00 - 0x800, RESTORE_RT, SIGUSR1);
	ret_to(RESTORE_RT, 0x6f00 - 0x7f8);
	call_sig(&handler, 0x9000, RESTORE_RT, SIGUSR2); /* on an alternate stack above */
	ret_to(RESTORE_RT, 0x9008);
	ret_to(0x401010, 0x6f08);
	expect(2, &foo, 2, 1, PTW_FRAME_COMPLETED, NULL, 0);
	expect(3, &handler, 3, 2, PTW_FRAME_COMPLETED, NULL, SIGUSR1);
	expect(4, &handler, 3, 2, PTW_FRAME_COMPLETED, NULL, SIGUSR2);
}

/* Nested signals: SIGUSR2's handler interrupts SIGUSR1's, inside bar. */
static void test_nested_signals(void)
{
	setup();
	call(&fmain, 0x7000, 0x400f00);
	call_sig(&handler, 0x6a38, RESTORE_RT, SIGUSR1);
	call(&bar, 0x6a00, 0x401410);
	call_sig(&handler, 0x6438, RESTORE_RT, SIGUSR2);
	call(&baz, 0x6400, 0x401420);
	ret_to(0x401420, 0x6408);
	ret_to(RESTORE_RT, 0x6440);
	ret_to(0x401410, 0x6a08);
	ret_to(RESTORE_RT, 0x6a40);
	ret_to(0x400f00, 0x7008);
	expect(2, &handler, 2, 1, PTW_FRAME_COMPLETED, NULL, SIGUSR1);
	expect(3, &bar, 3, 2, PTW_FRAME_COMPLETED, NULL, 0);
	expect(4, &handler, 4, 3, PTW_FRAME_COMPLETED, NULL, SIGUSR2);
	expect(5, &baz, 5, 4, PTW_FRAME_COMPLETED, NULL, 0);
}

/* siglongjmp out of a handler (in bar) back into main's sigsetjmp. */
static void test_handler_siglongjmp(void)
{
	setup();
	call(&fmain, 0x7000, 0x400f00);
	call(&foo, 0x6f00, 0x401010);
	call_sig(&handler, 0x6a38, RESTORE_RT, SIGUSR1);
	call(&bar, 0x6a00, 0x401410);
	struct ptw_event e = ev(PTW_EV_LONGJMP);
	e.sp = 0x6f40; /* main's frame */
	feed(e);
	call(&baz, 0x6f00, 0x401030);
	ret_to(0x401030, 0x6f08);
	ret_to(0x400f00, 0x7008);
	expect(1, &fmain, 1, 0, PTW_FRAME_COMPLETED, NULL, 0);
	expect(2, &foo, 2, 1, PTW_FRAME_UNMATCHED, "longjmp", 0);
	expect(3, &handler, 3, 2, PTW_FRAME_UNMATCHED, "longjmp", SIGUSR1);
	expect(4, &bar, 4, 3, PTW_FRAME_UNMATCHED, "longjmp", 0);
	expect(5, &baz, 2, 1, PTW_FRAME_COMPLETED, NULL, 0);
}

/* main{foo{bar} baz}: foo swapcontexts to a new context running bar, whose
 * stack lies just above main's; bar returns to uc_link (setcontext back to
 * foo's context). */
static void test_context_runs_and_returns(void)
{
	setup();
	call(&fmain, 0x7000, 0x400f00);
	call(&foo, 0x6f00, 0x401010);
	switch_to(0x8ff8, 0x6e08); /* swapcontext from foo: resumes at 0x6e08 */
	call(&bar, 0x8ff8, START_CTX);
	ret_to(START_CTX, 0x9000);
	switch_to(0x6e08, 0); /* __start_context: setcontext(uc_link) */
	ret_to(0x401010, 0x6f08);
	call(&baz, 0x6f00, 0x401020);
	ret_to(0x401020, 0x6f08);
	ret_to(0x400f00, 0x7008);
	expect(1, &fmain, 1, 0, PTW_FRAME_COMPLETED, NULL, 0);
	expect(2, &foo, 2, 1, PTW_FRAME_COMPLETED, NULL, 0);
	expect(3, &bar, 3, 2, PTW_FRAME_COMPLETED, NULL, 0);
	expect(4, &baz, 2, 1, PTW_FRAME_COMPLETED, NULL, 0);
}

/* Two contexts ping-ponging, each with a traced frame open across the
 * switches; the stacks are adjacent (either is "above" the other): no
 * switch ends the other's frames. */
static void test_ping_pong(void)
{
	setup();
	call(&fmain, 0x7000, 0x400f00);
	switch_to(0x10ff8, 0x6f08);	/* main -> A (new) */
	call(&foo, 0x10ff8, START_CTX); /* A: foo */
	call(&bar, 0x10f00, 0x401110);	/* A: foo{bar} */
	switch_to(0x20ff8, 0x10e08);	/* A -> B (new) */
	call(&baz, 0x20ff8, START_CTX); /* B: baz */
	switch_to(0x10e08, 0x20f08);	/* B -> A */
	ret_to(0x401110, 0x10f08);	/* A: bar returns */
	call(&bar, 0x10f00, 0x401120);	/* A: again */
	switch_to(0x20f08, 0x10e08);	/* A -> B */
	ret_to(START_CTX, 0x21000);	/* B: baz returns to uc_link */
	switch_to(0x10e08, 0);		/* setcontext(uc_link = A) */
	ret_to(0x401120, 0x10f08);
	ret_to(START_CTX, 0x11000); /* A: foo returns */
	switch_to(0x6f08, 0);	    /* back to main */
	ret_to(0x400f00, 0x7008);
	expect(1, &fmain, 1, 0, PTW_FRAME_COMPLETED, NULL, 0);
	expect(2, &foo, 2, 1, PTW_FRAME_COMPLETED, NULL, 0);
	expect(3, &bar, 3, 2, PTW_FRAME_COMPLETED, NULL, 0);
	expect(4, &baz, 4, 3, PTW_FRAME_COMPLETED, NULL, 0);
	expect(5, &bar, 3, 2, PTW_FRAME_COMPLETED, NULL, 0);
}

static void deliver(int sig, uint64_t sp)
{
	struct ptw_event e = ev(PTW_EV_SIGNAL_DELIVER);
	e.sig = sig;
	e.sp = sp;
	feed(e);
}

static void returned_from_handler(uint64_t sp)
{
	struct ptw_event e = ev(PTW_EV_SIGRETURN);
	e.sp = sp;
	feed(e);
}

/* A handler that is not traced: what it calls nests under the interrupted
 * frame and carries the signal (both of its calls, not their callees);
 * after its sigreturn, calls are plain again. A traced handler after a
 * delivery is marked once. A siglongjmp out of an untraced handler ends
 * its handling too. */
static void test_untraced_handler(void)
{
	setup();
	call(&fmain, 0x7000, 0x400f00);
	deliver(SIGUSR1, 0x6f80);
	call(&bar, 0x6a00, 0x401510); /* called by the untraced handler */
	call(&baz, 0x6900, 0x401210); /* bar's callee */
	ret_to(0x401210, 0x6908);
	ret_to(0x401510, 0x6a08);
	call(&bar, 0x6a00, 0x401520);
	ret_to(0x401520, 0x6a08);
	returned_from_handler(0x6a40);
	call(&foo, 0x6f00, 0x401010);
	ret_to(0x401010, 0x6f08);
	deliver(SIGUSR2, 0x6f80);
	call_sig(&handler, 0x6a38, RESTORE_RT, SIGUSR2);
	call(&bar, 0x6a00, 0x401410);
	ret_to(0x401410, 0x6a08);
	ret_to(RESTORE_RT, 0x6a40);
	returned_from_handler(0x6a40);
	expect(2, &bar, 2, 1, PTW_FRAME_COMPLETED, NULL, SIGUSR1);
	expect(3, &baz, 3, 2, PTW_FRAME_COMPLETED, NULL, 0);
	expect(4, &bar, 2, 1, PTW_FRAME_COMPLETED, NULL, SIGUSR1);
	expect(5, &foo, 2, 1, PTW_FRAME_COMPLETED, NULL, 0);
	expect(6, &handler, 2, 1, PTW_FRAME_COMPLETED, NULL, SIGUSR2);
	expect(7, &bar, 3, 6, PTW_FRAME_COMPLETED, NULL, 0);

	setup();
	call(&fmain, 0x7000, 0x400f00);
	deliver(SIGUSR1, 0x6f80);
	call(&bar, 0x6a00, 0x401510);
	struct ptw_event e = ev(PTW_EV_LONGJMP);
	e.sp = 0x6fc0;
	feed(e);
	call(&foo, 0x6f00, 0x401010);
	expect(2, &bar, 2, 1, PTW_FRAME_UNMATCHED, "longjmp", SIGUSR1);
	expect(3, &foo, 2, 1, PTW_FRAME_OPEN, NULL, 0);
}

/* A handler that is not traced runs on an alternate stack above the
 * frame it interrupted (a thread's stack below its sigaltstack): the
 * traced call it makes nests under that frame, which is not left. */
static void test_untraced_handler_above(void)
{
	setup();
	call(&fmain, 0x7000, 0x400f00);
	call(&foo, 0x6f00, 0x401010);
	deliver(SIGUSR1, 0x6e80);
	call(&bar, 0x6f80, 0x401510);
	ret_to(0x401510, 0x6f88);
	returned_from_handler(0x6fc0);
	ret_to(0x401010, 0x6f08);
	ret_to(0x400f00, 0x7008);
	expect(1, &fmain, 1, 0, PTW_FRAME_COMPLETED, NULL, 0);
	expect(2, &foo, 2, 1, PTW_FRAME_COMPLETED, NULL, 0);
	expect(3, &bar, 3, 2, PTW_FRAME_COMPLETED, NULL, SIGUSR1);
}

/* A context switched away from and never resumed: its frames are
 * unmatched with a reason of their own when the process ends; the one
 * running then ends as usual. setcontext from a context with open frames
 * abandons them at once. */
static void test_abandoned(void)
{
	setup();
	call(&fmain, 0x7000, 0x400f00);
	switch_to(0x10ff8, 0x6f08);
	call(&foo, 0x10ff8, START_CTX);
	switch_to(0x6f08, 0x10f08); /* foo swaps back to main, never resumed */
	call(&bar, 0x6f00, 0x401010);
	struct ptw_event e = ev(PTW_EV_PROCESS_EXIT);
	feed(e);
	expect(1, &fmain, 1, 0, PTW_FRAME_UNMATCHED, "process_exit", 0);
	expect(2, &foo, 2, 1, PTW_FRAME_UNMATCHED, "context_abandoned", 0);
	expect(3, &bar, 2, 1, PTW_FRAME_UNMATCHED, "process_exit", 0);

	setup();
	call(&fmain, 0x7000, 0x400f00);
	switch_to(0x10ff8, 0x6f08);
	call(&foo, 0x10ff8, START_CTX);
	switch_to(0x6f08, 0); /* setcontext back: foo's context is not saved */
	expect(2, &foo, 2, 1, PTW_FRAME_UNMATCHED, "context_abandoned", 0);
	ret_to(0x400f00, 0x7008);
	expect(1, &fmain, 1, 0, PTW_FRAME_COMPLETED, NULL, 0);

	/* letting go says nothing about a parked context */
	setup();
	call(&fmain, 0x7000, 0x400f00);
	switch_to(0x10ff8, 0x6f08);
	call(&foo, 0x10ff8, START_CTX);
	switch_to(0x6f08, 0x10f08);
	feed(ev(PTW_EV_DETACHED));
	expect(2, &foo, 2, 1, PTW_FRAME_UNMATCHED, "detach", 0);
}

/* setcontext back to a point of the context it runs (a getcontext in
 * main): like a longjmp. */
static void test_setcontext_within(void)
{
	setup();
	call(&fmain, 0x7000, 0x400f00);
	call(&foo, 0x6f00, 0x401010);
	call(&bar, 0x6e00, 0x401110);
	switch_to(0x6f40, 0);
	expect(2, &foo, 2, 1, PTW_FRAME_UNMATCHED, "longjmp", 0);
	expect(3, &bar, 3, 2, PTW_FRAME_UNMATCHED, "longjmp", 0);
	ret_to(0x400f00, 0x7008);
	expect(1, &fmain, 1, 0, PTW_FRAME_COMPLETED, NULL, 0);
}

int main(void)
{
	test_handler_returns();
	test_handler_leaves_nothing();
	test_nested_signals();
	test_handler_siglongjmp();
	test_untraced_handler();
	test_untraced_handler_above();
	test_context_runs_and_returns();
	test_ping_pong();
	test_abandoned();
	test_setcontext_within();
	ptw_spans_free(s);
	CHECK_DONE();
}
