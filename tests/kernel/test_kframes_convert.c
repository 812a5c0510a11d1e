/* SPDX-License-Identifier: MIT */
/*
 * The kernel backend's --trace records (src/kernel/convert_frames.c) on
 * synthetic records, through the span engine: the frame trees must be the
 * ones the tracer's events make (tests/unit/test_frames.c's rules):
 * nesting and return values, recursion, a tail call into a traced
 * function and one into code not traced (FRAME_TAIL), a longjmp whose
 * jmp_buf sp is mangled, an exception thrown and caught, helpers with no
 * frame open, a thread's end, an entry whose return address could not be
 * read, a return whose [sp] could not be read, recursion 1,000 deep,
 * calls under way at the attach (ptwk_frames_under_way) and how they end;
 * a -f child's copy of its forking thread's calls (ptwk_frames_forked);
 * code entered without a call (issue 20): signal handlers, traced or not,
 * returning or siglongjmp'ing out, nested, on an alternate stack;
 * contexts (swapcontext, setcontext) with a shadow stack each, one never
 * resumed, two with calls open across their switches.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "convert.h"
#include "xol.h"
#include "ptw_frames.h"
#include "ptw_spans.h"
#include "ptw_symbols.h"
#include "ptw_util.h"

#define PID   100
#define TRAMP 0x7fffffffe000ull /* the uprobe area */
#define GUARD 0x5a5a1234abcd0000ull
#define SIGRET 0x5000ull /* glibc's __restore_rt */

static struct ptw_location fns[4] = {
	{ .addr = 0x1000, .symbol = "f0" },
	{ .addr = 0x2000, .symbol = "f1" },
	{ .addr = 0x3000, .symbol = "f2" },
	{ .addr = 0x4000, .symbol = "f3" },
};

static const struct ptw_location *frame_function(void *ctx, uint64_t index)
{
	(void)ctx;
	return index < 4 ? &fns[index] : NULL;
}

static void sink(void *ctx, const struct ptw_event *ev)
{
	ptw_spans_consume(ctx, ev);
}

static uint64_t clock_ns = 1000;

static struct ptwk_record rec(enum ptwk_kind kind, pid_t tid)
{
	struct ptwk_record r = { .kind = kind, .tid = (uint32_t)tid, .tgid = PID };
	r.ns = clock_ns += 1000;
	return r;
}

/* fn entered at sp with ret at [sp], its return probed at its exits or
 * (flags PTWK_F_URETPROBE) watched by a uretprobe ([sp] may then be the
 * trampoline) */
static void entry_as(struct ptwk_conv *c, pid_t tid, uint64_t fn, uint64_t sp, uint64_t ret,
		     uint32_t flags)
{
	struct ptwk_record r = rec(PTWK_FRAME_ENTRY, tid);
	r.a = fn;
	r.b = sp;
	r.c = ret;
	r.d = fns[fn].addr;
	r.e = TRAMP;
	r.f = PTWK_F_READ | flags;
	ptwk_conv_record(c, &r);
}

static void entry(struct ptwk_conv *c, pid_t tid, uint64_t fn, uint64_t sp, uint64_t ret)
{
	entry_as(c, tid, fn, sp, ret, 0);
}

static void uentry(struct ptwk_conv *c, pid_t tid, uint64_t fn, uint64_t sp, uint64_t ret)
{
	entry_as(c, tid, fn, sp, ret, PTWK_F_URETPROBE);
}

/* fn returned to ret, sp after the return (its slot + 8), rax value */
static void ret_(struct ptwk_conv *c, pid_t tid, uint64_t fn, uint64_t sp, uint64_t ret,
		 uint64_t value)
{
	struct ptwk_record r = rec(PTWK_FRAME_RETURN, tid);
	r.a = fn;
	r.b = sp;
	r.c = ret;
	r.d = value;
	r.f = PTWK_F_READ;
	ptwk_conv_record(c, &r);
}

/* fn jumped out of itself into code not traced, at its slot sp, which
 * holds to (0: not read) */
static void tail(struct ptwk_conv *c, pid_t tid, uint64_t fn, uint64_t sp, uint64_t to)
{
	struct ptwk_record r = rec(PTWK_FRAME_TAIL, tid);
	r.a = fn;
	r.b = sp;
	r.d = to;
	r.f = to ? PTWK_F_READ : 0;
	ptwk_conv_record(c, &r);
}

static void helper(struct ptwk_conv *c, enum ptwk_kind kind, pid_t tid, uint64_t sp,
		   uint64_t target)
{
	struct ptwk_record r = rec(kind, tid);
	r.b = sp;
	if (kind == PTWK_LONGJMP) {
		/* glibc's PTR_MANGLE: xor the guard, rotate left 17 */
		uint64_t x = target ^ GUARD;
		r.c = GUARD;
		r.d = (x << 17) | (x >> 47);
		r.f = PTWK_F_READ;
	}
	ptwk_conv_record(c, &r);
}

static const struct ptw_frame *frame_by_id(const struct ptw_frames *f, uint32_t id)
{
	for (size_t i = 0; i < ptw_frames_count(f); i++)
		if (ptw_frames_get(f, i)->id == id)
			return ptw_frames_get(f, i);
	return NULL;
}

/* "symbol depth parent status reason [=value];..." in entry order */
static char *tree(const struct ptw_spans *s)
{
	const struct ptw_frames *f = ptw_spans_frames(s);
	struct ptw_buf b = { 0 };
	for (uint32_t id = 1;; id++) {
		const struct ptw_frame *fr = frame_by_id(f, id);
		if (!fr)
			break;
		const struct ptw_frame *p = fr->parent ? frame_by_id(f, fr->parent) : NULL;
		ptw_buf_printf(&b, "%s%s %u %s %s %s", b.len ? ";" : "",
			       fr->function ? fr->function->symbol : "?", fr->depth,
			       p ? p->function->symbol : "-", ptw_frame_status_name(fr->status),
			       fr->reason ? fr->reason : "-");
		if (fr->status == PTW_FRAME_COMPLETED)
			ptw_buf_printf(&b, " =%llx", (unsigned long long)fr->value);
	}
	return b.p ? b.p : xstrdup("");
}

static struct ptw_spans *spans;

static bool is_sigreturn(void *ctx, uint64_t addr)
{
	(void)ctx;
	return addr == SIGRET;
}

/* fn entered by the kernel as the handler of sig: [sp] is the trampoline */
static void handler_entry(struct ptwk_conv *c, pid_t tid, uint64_t fn, uint64_t sp, int sig)
{
	struct ptwk_record r = rec(PTWK_FRAME_ENTRY, tid);
	r.a = fn;
	r.b = sp;
	r.c = SIGRET;
	r.d = fns[fn].addr;
	r.f = PTWK_F_READ | (uint32_t)sig << PTWK_F_SIG_SHIFT;
	ptwk_conv_record(c, &r);
}

/* sig delivered to a thread interrupted at sp; a handler's sigreturn */
static void delivered(struct ptwk_conv *c, pid_t tid, int sig, uint64_t sp)
{
	struct ptwk_record r = rec(PTWK_SIGNAL, tid);
	r.a = (uint64_t)sig;
	r.b = sp;
	r.f = PTWK_F_READ;
	ptwk_conv_record(c, &r);
}

static void sigreturn(struct ptwk_conv *c, pid_t tid, uint64_t sp)
{
	struct ptwk_record r = rec(PTWK_SIGRETURN, tid);
	r.b = sp;
	ptwk_conv_record(c, &r);
}

/* swapcontext (entered at sp: resumes at sp + 8) or setcontext to a
 * context whose saved sp is to */
static void context(struct ptwk_conv *c, enum ptwk_kind kind, pid_t tid, uint64_t sp, uint64_t to)
{
	struct ptwk_record r = rec(kind, tid);
	r.b = sp;
	r.c = 0x600000; /* ucp */
	r.d = to;
	r.f = PTWK_F_READ;
	ptwk_conv_record(c, &r);
}

/* the signal of the n-th frame (1, 2, ... in entry order) */
static int sig_of(uint32_t id)
{
	const struct ptw_frames *f = ptw_spans_frames(spans);
	for (size_t i = 0; i < ptw_frames_count(f); i++)
		if (ptw_frames_get(f, i)->id == id)
			return ptw_frames_get(f, i)->sig;
	return -1;
}

static void start(struct ptwk_conv *c)
{
	spans = ptw_spans_new();
	struct ptwk_conv_ops ops = { .sink = sink,
				     .frame_function = frame_function,
				     .is_sigreturn = is_sigreturn,
				     .ctx = spans };
	ptwk_conv_init(c, PID, &ops);
	c->sigreturn_probed = true;
	ptwk_conv_preexisting(c, PID, 0, 0, 0, NULL, clock_ns);
	ptwk_conv_preexisting(c, 101, 0, 0, 0, NULL, clock_ns);
}

static void finish(struct ptwk_conv *c, const char *want)
{
	ptwk_conv_detached(c, clock_ns += 1000);
	ptw_spans_finish(spans);
	char *got = tree(spans);
	CHECK_STR(got, want);
	free(got);
	ptwk_conv_free(c);
	ptw_spans_free(spans);
}

/* Nesting, values, recursion in two threads at once. */
static void test_nesting(void)
{
	struct ptwk_conv c;
	start(&c);
	entry(&c, PID, 0, 0x7000, 0xa1);
	entry(&c, 101, 1, 0x9000, 0xb1);
	entry(&c, PID, 1, 0x6ff0, 0x1010);
	entry(&c, PID, 1, 0x6fe0, 0x2010); /* recursion */
	entry(&c, 101, 1, 0x8ff0, 0x2010);
	ret_(&c, PID, 1, 0x6fe8, 0x2010, 1);
	ret_(&c, 101, 1, 0x8ff8, 0x2010, 7);
	ret_(&c, PID, 1, 0x6ff8, 0x1010, 2);
	ret_(&c, PID, 0, 0x7008, 0xa1, 3);
	ret_(&c, 101, 1, 0x9008, 0xb1, 8);
	entry(&c, PID, 2, 0x7000, 0xa2); /* the same slot again: a new call */
	finish(&c, "f0 1 - completed - =3;f1 1 - completed - =8;f1 2 f0 completed - =2;"
		   "f1 3 f1 completed - =1;f1 2 f1 completed - =7;f2 1 - unmatched detach");
}

/* f0 tail-calls f1 (traced): f1's slot and return address are f0's; f1
 * returns (f0's ret is never reached). f2 jumps into code not traced:
 * its frame ends there (tail_call); the return that follows lands where
 * no frame is. Then a tail jump at a slot no frame has is nothing. */
static void test_tail_call(void)
{
	struct ptwk_conv c;
	start(&c);
	entry(&c, PID, 0, 0x7000, 0xa1);
	entry(&c, PID, 1, 0x7000, 0xa1);
	ret_(&c, PID, 1, 0x7008, 0xa1, 0x2a);
	entry(&c, PID, 2, 0x7000, 0xa3);
	entry(&c, PID, 3, 0x6f00, 0x1010);
	tail(&c, PID, 2, 0x7000, 0); /* f3 left open below it */
	tail(&c, PID, 2, 0x7000, 0);
	tail(&c, PID, 2, 0x6000, 0);
	entry(&c, PID, 0, 0x7000, 0xa4);
	ret_(&c, PID, 0, 0x7008, 0xa4, 5);
	finish(&c, "f0 1 - unmatched tail_call;f1 1 - completed - =2a;f2 1 - unmatched tail_call;"
		   "f3 2 f2 unmatched longjmp;f0 1 - completed - =5");
}

static uint64_t watched[4];
static size_t nwatched, nunwatched;

static bool watch_in_time; /* a site's first watch: its probe was in already */

static int watch_cb(void *ctx, uint64_t addr)
{
	(void)ctx;
	for (size_t i = 0; i < nwatched; i++)
		if (watched[i] == addr)
			return 1; /* (its probe was in) */
	if (nwatched < 4)
		watched[nwatched++] = addr;
	return watch_in_time ? 1 : 0;
}

static void unwatch_cb(void *ctx, pid_t tid)
{
	(void)ctx;
	nunwatched += tid == PID;
}

/* A jump into code not traced whose return is watched: f0 stays open
 * (f1, called by that code, nests under it) and completes at the return
 * its site's probe reports. The next one's return comes before its
 * site's probe: at the next call in its slot it ends as a tail call (its
 * watch kept until the thread ends). A jump whose [sp] was not read ends
 * at once. */
static void test_tail_watched(void)
{
	struct ptwk_conv c;
	start(&c);
	c.ops.watch_return = watch_cb;
	c.ops.unwatch_returns = unwatch_cb;
	nwatched = nunwatched = 0;
	entry(&c, PID, 0, 0x7000, 0xa1);
	tail(&c, PID, 0, 0x7000, 0xa1);
	entry(&c, PID, 1, 0x6f00, 0x3010);
	ret_(&c, PID, 1, 0x6f08, 0x3010, 1);
	ret_(&c, PID, 0, 0x7008, 0xa1, 9); /* the site's probe */
	entry(&c, PID, 0, 0x7000, 0xa2);
	tail(&c, PID, 0, 0x7000, 0xa2);
	entry(&c, PID, 2, 0x7000, 0xa3);
	tail(&c, PID, 2, 0x7000, 0); /* ([sp] not read) */
	CHECK_EQ(nwatched, 2);
	CHECK_EQ(watched[0], 0xa1);
	CHECK_EQ(watched[1], 0xa2);
	CHECK_EQ(nunwatched, 0); /* (the program may have set it again since) */
	struct ptwk_record e = rec(PTWK_EXIT, PID);
	e.f = PTWK_F_HOW_KNOWN | PTWK_F_EXIT_CALL;
	ptwk_conv_record(&c, &e);
	CHECK_EQ(nunwatched, 1); /* its thread ended: all of them */
	finish(&c, "f0 1 - completed - =9;f1 2 f0 completed - =1;f0 1 - unmatched tail_call;"
		   "f2 1 - unmatched tail_call");
}

/* f1 jumps into code not traced, then its thread ends. Its return's probe
 * went in at that jump (the site's first): the return may have come
 * before, so f1 ends as the jump did, a tail call, not as the thread's
 * end ended it; with the probe in before it cannot have returned unseen,
 * and the thread's end ends it. */
static void test_tail_late_end(void)
{
	for (int late = 0; late < 2; late++) {
		struct ptwk_conv c;
		start(&c);
		c.ops.watch_return = watch_cb;
		c.ops.unwatch_returns = unwatch_cb;
		nwatched = nunwatched = 0;
		watch_in_time = !late;
		entry(&c, PID, 0, 0x7000, 0xa1);
		entry(&c, PID, 1, 0x6f00, 0x1010);
		tail(&c, PID, 1, 0x6f00, 0x1010);
		struct ptwk_record e = rec(PTWK_EXIT, PID);
		e.f = PTWK_F_HOW_KNOWN | PTWK_F_EXIT_CALL;
		ptwk_conv_record(&c, &e);
		finish(&c, late ? "f0 1 - unmatched thread_exit;f1 2 f0 unmatched tail_call"
				: "f0 1 - unmatched thread_exit;f1 2 f0 unmatched thread_exit");
	}
	watch_in_time = false;
}

/* f1 jumps into code not traced whose return site no probe can watch (a
 * VEX instruction there): f1 ends at the jump, and f2, called by that
 * code, nests under f0, not under f1. */
static int watch_refused(void *ctx, uint64_t addr)
{
	(void)ctx, (void)addr;
	return -ENOEXEC;
}

static void test_tail_unwatchable(void)
{
	struct ptwk_conv c;
	start(&c);
	c.ops.watch_return = watch_refused;
	c.ops.unwatch_returns = unwatch_cb;
	entry(&c, PID, 0, 0x7000, 0xa1);
	entry(&c, PID, 1, 0x6f00, 0x1010);
	tail(&c, PID, 1, 0x6f00, 0x1010);
	entry(&c, PID, 2, 0x6e00, 0x3010);
	ret_(&c, PID, 2, 0x6e08, 0x3010, 5);
	ret_(&c, PID, 0, 0x7008, 0xa1, 1);
	finish(&c, "f0 1 - completed - =1;f1 2 f0 unmatched tail_call;f2 2 f0 completed - =5");
}

/* In a handler (on the stack it interrupted), f1 tail-calls f2 (traced):
 * f2 completes, f1 tail_call; the interrupted f0 completes. */
static void test_tail_call_in_handler(void)
{
	struct ptwk_conv c;
	start(&c);
	entry(&c, PID, 0, 0x7000, 0xa1);
	delivered(&c, PID, 10, 0x6f00);
	entry(&c, PID, 1, 0x6a00, 0x1010); /* called by the untraced handler */
	entry(&c, PID, 2, 0x6a00, 0x1010); /* f1's tail call */
	ret_(&c, PID, 2, 0x6a08, 0x1010, 4);
	sigreturn(&c, PID, 0x6a08);
	ret_(&c, PID, 0, 0x7008, 0xa1, 1);
	finish(&c, "f0 1 - completed - =1;f1 2 f0 unmatched tail_call;f2 2 f0 completed - =4");
}

/* A handler on the stack it interrupted (glibc's cancellation: f1 in it at
 * 0x6a00, below the delivery at 0x6f00) unwinds out of it and of f0's
 * callee frames: the next call is above them (0x7100, start_thread's
 * cleanup): f0 and f1 are left. */
static void test_unwound_out_of_handler(void)
{
	struct ptwk_conv c;
	start(&c);
	entry(&c, PID, 0, 0x7000, 0xa1);
	delivered(&c, PID, 32, 0x6f00);
	entry(&c, PID, 1, 0x6a00, 0x1010); /* called by the untraced handler */
	entry(&c, PID, 2, 0x7100, 0xb1);   /* after the forced unwind */
	ret_(&c, PID, 2, 0x7108, 0xb1, 0);
	finish(&c, "f0 1 - unmatched longjmp;f1 2 f0 unmatched longjmp;f2 1 - completed - =0");
}

/* f0 -> f1 -> f2, f2 longjmps to f0's level (the kernel never returns
 * f1 and f2), then f0 calls f3 and returns. */
static void test_longjmp(void)
{
	struct ptwk_conv c;
	start(&c);
	entry(&c, PID, 0, 0x7000, 0xa1);
	entry(&c, PID, 1, 0x6f00, 0x1010);
	entry(&c, PID, 2, 0x6e00, 0x2010);
	helper(&c, PTWK_LONGJMP, PID, 0x6d00, 0x6f80); /* lands in f0's frame */
	entry(&c, PID, 3, 0x6f00, 0x1020);
	ret_(&c, PID, 3, 0x6f08, 0x1020, 4);
	ret_(&c, PID, 0, 0x7008, 0xa1, 0x2a);
	/* a longjmp whose jmp_buf makes no sense: the next event tells */
	entry(&c, PID, 1, 0x7000, 0xa2);
	entry(&c, PID, 2, 0x6e00, 0x2010);
	helper(&c, PTWK_LONGJMP, PID, 0x6d00, 0x10);
	entry(&c, PID, 3, 0x7000, 0xa3);
	finish(&c, "f0 1 - completed - =2a;f1 2 f0 unmatched longjmp;f2 3 f1 unmatched longjmp;"
		   "f3 2 f0 completed - =4;f1 1 - unmatched longjmp;f2 2 f1 unmatched longjmp;"
		   "f3 1 - unmatched detach");
}

/* f0 catches what f2 throws through f1 (__cxa_begin_catch called by f0,
 * at 0x6f08: its sp is 0x6f10); f0 then calls f3. */
static void test_exception(void)
{
	struct ptwk_conv c;
	start(&c);
	helper(&c, PTWK_THROW, PID, 0x7100, 0); /* no frame open: nothing */
	entry(&c, PID, 0, 0x7000, 0xa1);
	entry(&c, PID, 1, 0x6f00, 0x1010);
	entry(&c, PID, 2, 0x6e00, 0x2010);
	helper(&c, PTWK_THROW, PID, 0x6d00, 0);
	helper(&c, PTWK_CATCH, PID, 0x6f08, 0);
	entry(&c, PID, 3, 0x6f00, 0x1030);
	ret_(&c, PID, 3, 0x6f08, 0x1030, 9);
	ret_(&c, PID, 0, 0x7008, 0xa1, 0x2c);
	finish(&c, "f0 1 - completed - =2c;f1 2 f0 unmatched exception;"
		   "f2 3 f1 unmatched exception;f3 2 f0 completed - =9");
}

/* An entry whose return address could not be read is no frame (the tracer
 * reports none); a thread's end closes its frames and its shadow stack. */
static void test_unread_and_end(void)
{
	struct ptwk_conv c;
	start(&c);
	struct ptwk_record r = rec(PTWK_FRAME_ENTRY, PID);
	r.a = 0;
	r.b = 0x7000;
	ptwk_conv_record(&c, &r);
	entry(&c, 101, 1, 0x9000, 0xb1);
	struct ptwk_record e = rec(PTWK_EXIT, 101);
	e.f = PTWK_F_HOW_KNOWN | PTWK_F_EXIT_CALL;
	ptwk_conv_record(&c, &e);
	ret_(&c, 101, 1, 0x9008, 0xb1, 1); /* a late record of a gone thread */
	finish(&c, "f1 1 - unmatched thread_exit");
}

/* Returns by uretprobes: f0 tail-calls f1, whose slot holds the
 * kernel's trampoline (f0's return is hijacked); the kernel then reports
 * both return instances at f1's return. The tracer's stream: f0
 * tail_call, f1 completed. */
static void test_uretprobe_tail_call(void)
{
	struct ptwk_conv c;
	start(&c);
	uentry(&c, PID, 0, 0x7000, 0xa1);
	uentry(&c, PID, 1, 0x7000, TRAMP);
	ret_(&c, PID, 1, 0x7008, 0xa1, 0x2a);
	ret_(&c, PID, 0, 0x7008, 0xa1, 0x2a);
	uentry(&c, PID, 2, 0x7000, 0xa3);
	ret_(&c, PID, 2, 0x7008, 0xa3, 5);
	/* f3's returns are probed at its exits (a library loaded once the
	 * process could throw): tail-called from f0, it reads the
	 * trampoline at [sp] at its entry and at its ret */
	uentry(&c, PID, 0, 0x7000, 0xa4);
	entry(&c, PID, 3, 0x7000, TRAMP);
	struct ptwk_record r = rec(PTWK_FRAME_RETURN, PID);
	r.a = 3, r.b = 0x7008, r.c = TRAMP, r.d = 6, r.e = TRAMP, r.f = PTWK_F_READ;
	ptwk_conv_record(&c, &r);
	ret_(&c, PID, 0, 0x7008, 0xa4, 6); /* the uretprobe's: nothing left */
	finish(&c, "f0 1 - unmatched tail_call;f1 1 - completed - =2a;f2 1 - completed - =5;"
		   "f0 1 - unmatched tail_call;f3 1 - completed - =6");
}

/* 70 nested calls with uretprobes: the kernel watches the returns of the
 * 64 outer ones only (its depth limit); the 6 inner ones are left
 * unmatched at the 64th one's return, and counted. Calls whose exits are
 * probed do not count against it. */
static void test_uretprobe_too_deep(void)
{
	struct ptwk_conv c;
	start(&c);
	for (uint64_t i = 0; i < 10; i++)
		entry(&c, PID, 0, 0x8000 - i * 0x10, 0x1010);
	for (uint64_t i = 0; i < 70; i++)
		uentry(&c, PID, 1, 0x7000 - i * 0x10, 0x2010);
	for (uint64_t i = 64; i-- > 0;)
		ret_(&c, PID, 1, 0x7008 - i * 0x10, 0x2010, i);
	for (uint64_t i = 10; i-- > 0;)
		ret_(&c, PID, 0, 0x8008 - i * 0x10, 0x1010, i);
	CHECK_EQ(c.frames_too_deep, 6);
	const struct ptw_frames *f = ptw_spans_frames(spans);
	size_t completed = 0, left = 0;
	for (size_t i = 0; i < ptw_frames_count(f); i++) {
		completed += ptw_frames_get(f, i)->status == PTW_FRAME_COMPLETED;
		left += ptw_frames_get(f, i)->status == PTW_FRAME_UNMATCHED &&
			ptw_frames_get(f, i)->depth > 74;
	}
	CHECK_EQ(completed, 74);
	CHECK_EQ(left, 6);
	ptwk_conv_free(&c);
	ptw_spans_free(spans);
}

/* 1,000 nested calls, all returned (no depth limit: the kernel's list of
 * pending uretprobe returns was 64 deep); a return whose [sp] could not
 * be read is the frame's whose slot it is. */
static void test_deep(void)
{
	struct ptwk_conv c;
	start(&c);
	for (uint64_t i = 0; i < 1000; i++)
		entry(&c, PID, 1, 0x100000 - i * 0x10, 0x2010);
	for (uint64_t i = 1000; i-- > 1;)
		ret_(&c, PID, 1, 0x100008 - i * 0x10, 0x2010, i);
	struct ptwk_record r = rec(PTWK_FRAME_RETURN, PID);
	r.a = 1, r.b = 0x100008, r.d = 0; /* (not read) */
	ptwk_conv_record(&c, &r);
	const struct ptw_frames *f = ptw_spans_frames(spans);
	size_t completed = 0;
	for (size_t i = 0; i < ptw_frames_count(f); i++)
		completed += ptw_frames_get(f, i)->status == PTW_FRAME_COMPLETED;
	CHECK_EQ(ptw_frames_count(f), 1000);
	CHECK_EQ(completed, 1000);
	CHECK_EQ(c.frames_too_deep, 0);
	ptwk_conv_free(&c);
	ptw_spans_free(spans);
}

/* A launch: the held fork's own calls (execvp, traced in libc) before the
 * command's exec are not the command's. */
static void test_launch_before_exec(void)
{
	struct ptwk_conv c;
	spans = ptw_spans_new();
	struct ptwk_conv_ops ops = { .sink = sink, .frame_function = frame_function, .ctx = spans };
	ptwk_conv_init(&c, PID, &ops);
	c.launched = true;
	entry(&c, PID, 0, 0x7000, 0xa1);
	struct ptwk_record e = rec(PTWK_EXEC, PID);
	e.a = PID;
	ptwk_conv_record(&c, &e);
	entry(&c, PID, 1, 0x8000, 0xb1);
	ret_(&c, PID, 1, 0x8008, 0xb1, 3);
	finish(&c, "f1 1 - completed - =3");
}

/* Thread tid's calls under way at the attach (underway.c's result):
 * n calls of fn, the outermost at sp0 returning to ret0, each inner one
 * 0x20 lower returning to ret (a recursion: one return site). */
static void under_way(struct ptwk_conv *c, pid_t tid, uint64_t fn, size_t n, uint64_t sp0,
		      uint64_t ret0, uint64_t ret)
{
	struct ptwk_under_way v[8];
	for (size_t i = 0; i < n; i++)
		v[i] = (struct ptwk_under_way){ sp0 - i * 0x20, i ? ret : ret0, fns[fn].addr, fn };
	ptwk_frames_under_way(c, tid, v, n, 500);
}

/* Six calls of f1 under way, blocked at the bottom (frames-under-way's
 * fixture): a call seen after the attach nests under the innermost; the
 * six return to one site, told apart by their sp, innermost first, each
 * with its value; each return is told twice (the function's ret, then the
 * return site's probe): the second is nothing. A return that matches no
 * frame (a site's probe firing for another call) is nothing. */
static void test_under_way(void)
{
	struct ptwk_conv c;
	start(&c);
	under_way(&c, PID, 1, 6, 0x7000, 0xa1, 0x2010);
	entry(&c, 101, 2, 0x9000, 0xb1); /* another thread meanwhile */
	entry(&c, PID, 2, 0x6f00, 0x1050);
	ret_(&c, PID, 2, 0x6f08, 0x1050, 9);
	ret_(&c, PID, 1, 0x6e08, 0x7777, 0x66); /* below them all: no frame ended */
	for (uint64_t i = 6; i-- > 0;) {
		ret_(&c, PID, 1, 0x7008 - i * 0x20, i ? 0x2010 : 0xa1, 6 - i);
		ret_(&c, PID, 1, 0x7008 - i * 0x20, i ? 0x2010 : 0xa1, 6 - i);
	}
	ret_(&c, 101, 2, 0x9008, 0xb1, 1);
	finish(&c, "f1 1 - completed - =6;f1 2 f1 completed - =5;f1 3 f1 completed - =4;"
		   "f1 4 f1 completed - =3;f1 5 f1 completed - =2;f1 6 f1 completed - =1;"
		   "f2 1 - completed - =1;f2 7 f1 completed - =9");
	const struct ptw_frames *f;
	start(&c);
	under_way(&c, PID, 1, 6, 0x8000, 0xa1, 0x2010);
	for (uint64_t i = 0; i < 64; i++)
		entry(&c, PID, 2, 0x7000 - i * 0x10, 0x3010);
	for (uint64_t i = 64; i-- > 0;)
		ret_(&c, PID, 2, 0x7008 - i * 0x10, 0x3010, i);
	for (uint64_t i = 6; i-- > 0;)
		ret_(&c, PID, 1, 0x8008 - i * 0x20, i ? 0x2010 : 0xa1, i);
	f = ptw_spans_frames(spans);
	size_t completed = 0, before = 0;
	for (size_t i = 0; i < ptw_frames_count(f); i++) {
		completed += ptw_frames_get(f, i)->status == PTW_FRAME_COMPLETED;
		before += ptw_frames_get(f, i)->entry_unknown;
	}
	CHECK_EQ(completed, 70);
	CHECK_EQ(before, 6);
	ptwk_conv_free(&c);
	ptw_spans_free(spans);
}

/* Calls under way left without their return: a longjmp from a call seen
 * after the attach lands in the second under-way frame (the three inner
 * ones are over); the outer two then return; in thread 101 the thread
 * ends with two under way, and a late return of theirs is nothing. */
static void test_under_way_left(void)
{
	struct ptwk_conv c;
	start(&c);
	under_way(&c, PID, 1, 4, 0x7000, 0xa1, 0x2010);
	under_way(&c, 101, 3, 2, 0x9000, 0xb1, 0x4010);
	entry(&c, PID, 2, 0x6f00, 0x1050);
	helper(&c, PTWK_LONGJMP, PID, 0x6e00, 0x6fd0); /* in the 2nd's frame (0x6fe0..0x7000) */
	ret_(&c, PID, 1, 0x6fe8, 0x2010, 2);
	ret_(&c, PID, 1, 0x7008, 0xa1, 1);
	struct ptwk_record e = rec(PTWK_EXIT, 101);
	e.f = PTWK_F_HOW_KNOWN | PTWK_F_EXIT_CALL;
	ptwk_conv_record(&c, &e);
	ret_(&c, 101, 3, 0x8fe8, 0x4010, 1);
	finish(&c, "f1 1 - completed - =1;f1 2 f1 completed - =2;f1 3 f1 unmatched longjmp;"
		   "f1 4 f1 unmatched longjmp;f3 1 - unmatched thread_exit;"
		   "f3 2 f3 unmatched thread_exit;f2 5 f1 unmatched longjmp");
}

/* A traced handler (SIGUSR1) interrupting f0 calls f2; then a handler
 * that is not traced (SIGUSR2) calls f2 and f3: they nest under f0 and
 * carry its signal (the first traced frame of its handling, as the tracer
 * has it). A first argument that looks like a signal means nothing for
 * an ordinary call. */
static void test_signal_handlers(void)
{
	struct ptwk_conv c;
	start(&c);
	entry(&c, PID, 0, 0x7000, 0xa1);
	delivered(&c, PID, 10, 0x6f00);
	handler_entry(&c, PID, 1, 0x6a00, 10);
	entry(&c, PID, 2, 0x6900, 0x1010);
	ret_(&c, PID, 2, 0x6908, 0x1010, 4);
	ret_(&c, PID, 1, 0x6a08, SIGRET, 0);
	sigreturn(&c, PID, 0x6a08);
	delivered(&c, PID, 12, 0x6f00);
	entry(&c, PID, 2, 0x6a00, 0x9010); /* called by the untraced handler */
	ret_(&c, PID, 2, 0x6a08, 0x9010, 5);
	entry(&c, PID, 3, 0x6a00, 0x9020);
	ret_(&c, PID, 3, 0x6a08, 0x9020, 6);
	sigreturn(&c, PID, 0x6a08);
	struct ptwk_record r = rec(PTWK_FRAME_ENTRY, PID); /* f3(10), a plain call */
	r.a = 3, r.b = 0x6f00, r.c = 0x1030;
	r.f = PTWK_F_READ | 10u << PTWK_F_SIG_SHIFT;
	ptwk_conv_record(&c, &r);
	ret_(&c, PID, 3, 0x6f08, 0x1030, 7);
	ret_(&c, PID, 0, 0x7008, 0xa1, 1);
	CHECK_EQ(sig_of(2), 10);
	CHECK_EQ(sig_of(3), 0);
	CHECK_EQ(sig_of(4), 12);
	CHECK_EQ(sig_of(5), 12);
	CHECK_EQ(sig_of(6), 0);
	finish(&c, "f0 1 - completed - =1;f1 2 f0 completed - =0;f2 3 f1 completed - =4;"
		   "f2 2 f0 completed - =5;f3 2 f0 completed - =6;f3 2 f0 completed - =7");
}

/* A handler siglongjmps out through the frame it interrupted (f1) back
 * into f0; nested handlers nest. Without the sigreturn probe a delivery
 * is not told (nothing would end it). */
static void test_signal_jump_and_nesting(void)
{
	struct ptwk_conv c;
	start(&c);
	entry(&c, PID, 0, 0x7000, 0xa1);
	entry(&c, PID, 1, 0x6f00, 0x1010);
	delivered(&c, PID, 10, 0x6e00);
	handler_entry(&c, PID, 2, 0x6a00, 10);
	helper(&c, PTWK_LONGJMP, PID, 0x6900, 0x6f80);
	entry(&c, PID, 3, 0x6f00, 0x1020);
	delivered(&c, PID, 10, 0x6e00);
	handler_entry(&c, PID, 1, 0x6a00, 10);
	delivered(&c, PID, 12, 0x6900);
	handler_entry(&c, PID, 2, 0x6500, 12);
	ret_(&c, PID, 2, 0x6508, SIGRET, 0);
	sigreturn(&c, PID, 0x6508);
	ret_(&c, PID, 1, 0x6a08, SIGRET, 0);
	sigreturn(&c, PID, 0x6a08);
	ret_(&c, PID, 3, 0x6f08, 0x1020, 3);
	c.sigreturn_probed = false;
	delivered(&c, PID, 12, 0x6f00);
	entry(&c, PID, 3, 0x6a00, 0x9020);
	ret_(&c, PID, 3, 0x6a08, 0x9020, 6);
	ret_(&c, PID, 0, 0x7008, 0xa1, 1);
	CHECK_EQ(sig_of(3), 10);
	CHECK_EQ(sig_of(5), 10);
	CHECK_EQ(sig_of(6), 12);
	CHECK_EQ(sig_of(7), 0);
	finish(&c, "f0 1 - completed - =1;f1 2 f0 unmatched longjmp;f2 3 f1 unmatched longjmp;"
		   "f3 2 f0 completed - =3;f1 3 f3 completed - =0;f2 4 f1 completed - =0;"
		   "f3 2 f0 completed - =6");
}

/* A traced handler is known by its entry alone (no delivery told: the
 * sigreturn probe is missing): it carries its signal, and entered above
 * an open frame (an alternate stack there) it leaves none. */
static void test_handler_by_entry(void)
{
	struct ptwk_conv c;
	start(&c);
	c.sigreturn_probed = false;
	entry(&c, PID, 0, 0x7000, 0xa1);
	entry(&c, PID, 1, 0x6f00, 0x1010);
	delivered(&c, PID, 10, 0x6e00);
	handler_entry(&c, PID, 2, 0x6f80, 10);
	ret_(&c, PID, 2, 0x6f88, SIGRET, 0);
	sigreturn(&c, PID, 0x6f88);
	ret_(&c, PID, 1, 0x6f08, 0x1010, 2);
	ret_(&c, PID, 0, 0x7008, 0xa1, 1);
	CHECK_EQ(sig_of(3), 10);
	finish(&c, "f0 1 - completed - =1;f1 2 f0 completed - =2;f2 3 f1 completed - =0");
}

/* A handler that is not traced runs on an alternate stack above the two
 * calls it interrupted and calls f2 there: they live on (with uretprobes
 * the kernel dropped their returns, and the program died of SIGILL);
 * once it returned, a call above a frame is no handler's. */
static void test_sigaltstack_above(void)
{
	struct ptwk_conv c;
	start(&c);
	entry(&c, 101, 0, 0x7000, 0xa1);
	entry(&c, 101, 1, 0x6f00, 0x1010);
	delivered(&c, 101, 10, 0x6e00);
	entry(&c, 101, 2, 0x20000, 0x9010);
	ret_(&c, 101, 2, 0x20008, 0x9010, 3);
	sigreturn(&c, 101, 0x20008);
	ret_(&c, 101, 1, 0x6f08, 0x1010, 1);
	entry(&c, 101, 3, 0x6f00, 0x1020);
	entry(&c, 101, 2, 0x6f80, 0x1030);
	CHECK_EQ(sig_of(3), 10);
	/* f2 nested under f1, which it did not leave (the engine's rule) */
	finish(&c, "f0 1 - unmatched detach;f1 2 f0 completed - =1;f2 3 f1 completed - =3;"
		   "f3 2 f0 unmatched longjmp;f2 2 f0 unmatched detach");
}

/* Thread 101: f0 -> f1 swaps to a new context (another stack) running f2
 * -> f3; f2 swaps back with f2 open; f1 and f0 return; the thread ends
 * with that context
 * never resumed: f2 context_abandoned. A setcontext within the running
 * context is a jump (f1 left). */
static void test_contexts(void)
{
	struct ptwk_conv c;
	start(&c);
	entry(&c, 101, 0, 0x7ff000, 0xa1);
	entry(&c, 101, 1, 0x7fef00, 0x1010);
	context(&c, PTWK_CONTEXT_SWAP, 101, 0x7fee00, 0x100000);
	entry(&c, 101, 2, 0x0fff00, 0x5100); /* (__start_context) */
	entry(&c, 101, 3, 0x0ffe00, 0x2010);
	ret_(&c, 101, 3, 0x0ffe08, 0x2010, 3);
	context(&c, PTWK_CONTEXT_SWAP, 101, 0x0ffd00, 0x7fee08);
	ret_(&c, 101, 1, 0x7fef08, 0x1010, 1);
	entry(&c, 101, 1, 0x7fef00, 0x1020);
	context(&c, PTWK_CONTEXT_SET, 101, 0x7fee00, 0x7fef80); /* back into f0's frame */
	entry(&c, 101, 3, 0x7fef00, 0x1030);
	ret_(&c, 101, 3, 0x7fef08, 0x1030, 4);
	ret_(&c, 101, 0, 0x7ff008, 0xa1, 0);
	struct ptwk_record e = rec(PTWK_EXIT, 101);
	e.f = PTWK_F_HOW_KNOWN | PTWK_F_EXIT_CALL;
	ptwk_conv_record(&c, &e);
	finish(&c, "f0 1 - completed - =0;f1 2 f0 completed - =1;"
		   "f2 3 f1 unmatched context_abandoned;f3 4 f2 completed - =3;"
		   "f1 2 f0 unmatched longjmp;f3 2 f0 completed - =4");
}

/* Two contexts with traced calls open across the switches (pingpong):
 * each return is its own frame's (with uretprobes the kernel sent one
 * context's return to the other's call site). */
static void test_context_pingpong(void)
{
	struct ptwk_conv c;
	start(&c);
	entry(&c, PID, 0, 0x7ff000, 0xa1);
	context(&c, PTWK_CONTEXT_SWAP, PID, 0x7fef00, 0x100000);
	entry(&c, PID, 1, 0x0fff00, 0x1010);
	context(&c, PTWK_CONTEXT_SWAP, PID, 0x0ffe00, 0x200000);
	entry(&c, PID, 2, 0x1fff00, 0x2010);
	context(&c, PTWK_CONTEXT_SWAP, PID, 0x1ffe00, 0x0ffe08);
	ret_(&c, PID, 1, 0x0fff08, 0x1010, 1);
	context(&c, PTWK_CONTEXT_SWAP, PID, 0x0ffe00, 0x1ffe08);
	ret_(&c, PID, 2, 0x1fff08, 0x2010, 2);
	context(&c, PTWK_CONTEXT_SWAP, PID, 0x1ffe00, 0x7fef08);
	ret_(&c, PID, 0, 0x7ff008, 0xa1, 0);
	finish(&c, "f0 1 - completed - =0;f1 2 f0 completed - =1;f2 3 f1 completed - =2");
}

/* Which first instructions the kernel emulates at a uprobe (xol.h). */
static void test_xol(void)
{
	static const struct {
		uint8_t code[8];
		size_t n;
		bool emulated;
	} cases[] = {
		{ { 0x55 }, 1, true },			      /* push %rbp */
		{ { 0x41, 0x57 }, 2, true },		      /* push %r15 */
		{ { 0x53, 0x48 }, 2, true },		      /* push %rbx */
		{ { 0x90 }, 1, true },			      /* nop */
		{ { 0x66, 0x90 }, 2, true },		      /* xchg %ax,%ax */
		{ { 0x0f, 0x1f, 0x44, 0x00, 0x00 }, 5, true }, /* nopl 0(%rax,%rax) */
		{ { 0x66, 0x0f, 0x1f, 0x44, 0x00, 0x00 }, 6, true },
		{ { 0xe8, 0, 0, 0, 0 }, 5, true },	      /* call rel32 */
		{ { 0xe9, 0, 0, 0, 0 }, 5, true },	      /* jmp rel32 */
		{ { 0xeb, 0x02 }, 2, true },		      /* jmp rel8 */
		{ { 0x74, 0x02 }, 2, true },		      /* je rel8 */
		{ { 0x0f, 0x84, 0, 0, 0, 0 }, 6, true },    /* je rel32 */
		{ { 0x8d, 0x47, 0x01 }, 3, false },	      /* lea 1(%rdi),%eax */
		{ { 0xf3, 0x0f, 0x1e, 0xfa }, 4, false },   /* endbr64 */
		{ { 0x48, 0x83, 0xec, 0x08 }, 4, false },   /* sub $8,%rsp */
		{ { 0x48, 0x89, 0xe5 }, 3, false },	      /* mov %rsp,%rbp */
		{ { 0x41, 0x89, 0xf8 }, 3, false },	      /* mov %edi,%r8d (REX, not push) */
		{ { 0x0f, 0x1f, 0xc8 }, 3, false },	      /* 0f 1f /1: not a nop */
		{ { 0x66, 0x55 }, 2, false },		      /* push %bp: not the emulated one */
		{ { 0x41 }, 1, false },			      /* cut */
		{ { 0x0f }, 1, false },
		{ { 0 }, 0, false },
	};
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++)
		CHECK_EQ(ptwk_xol_emulated(cases[i].code, cases[i].n), cases[i].emulated);

	/* where no uprobe may go: VEX and EVEX, whatever their prefixes */
	static const struct {
		uint8_t code[8];
		size_t n;
		bool misread;
	} vex[] = {
		{ { 0xc5, 0xf9, 0x76, 0xc0 }, 4, true },	     /* vpcmpeqd: "jbe" */
		{ { 0xc4, 0xe2, 0x79, 0x58, 0xc0 }, 5, true },	     /* vpbroadcastd */
		{ { 0x62, 0xe2, 0x7d, 0x28, 0x7a, 0xce }, 6, true }, /* __strchr_evex's */
		{ { 0x3e, 0xc5, 0xf9, 0x76, 0xc0 }, 5, true },	     /* (a ds prefix) */
		{ { 0x66, 0x0f, 0x6e, 0xc6 }, 4, false },	     /* movd: SSE */
		{ { 0x74, 0x02 }, 2, false },
		{ { 0x48, 0x89, 0xe5 }, 3, false },
		{ { 0 }, 0, false },
	};
	for (size_t i = 0; i < sizeof(vex) / sizeof(vex[0]); i++)
		CHECK_EQ(ptwk_xol_misread(vex[i].code, vex[i].n), vex[i].misread);
}

/*
 * -f: a fork child's thread has its forking thread's calls under way
 * (ptwk_frames_forked), those still on its stack as its own probes came.
 * The parent is in f0 (exits probed, slot 0x7000), f1 (a uretprobe: its
 * slot holds the trampoline) and f2 (slot 0x6e00) when it forks.
 */
#define CHILD 200

/* The child's frames after a fork whose stack then is sp and stack (the
 * words at 0x6e00, 0x6f00, 0x7000), then the returns of those of its
 * calls at slots up to below, values 5, 6, 7 innermost first. */
/* (the returns "queued since the child's probes were in": their sp after) */
static uint64_t queued[3];

static bool queued_return(void *ctx, uint64_t sp)
{
	(void)ctx;
	return sp && (sp == queued[0] || sp == queued[1] || sp == queued[2]);
}

static char *forked(uint64_t sp, const uint64_t words[3], bool readable, uint64_t below,
		    uint64_t *gap)
{
	struct ptwk_conv c;
	start(&c);
	entry(&c, PID, 0, 0x7000, 0xa1);
	uentry(&c, PID, 1, 0x6f00, 0x1050);
	entry(&c, PID, 2, 0x6e00, 0x2050);
	struct ptw_spans *parent_spans = spans;
	struct ptw_spans *child_spans = ptw_spans_new();
	struct ptwk_conv cc;
	struct ptwk_conv_ops ops = { .sink = sink,
				     .frame_function = frame_function,
				     .ctx = child_spans };
	ptwk_conv_init(&cc, CHILD, &ops);
	ptwk_conv_forked(&cc, 0x1234, 0, "child", clock_ns);
	uint8_t stack[0x7100 - 0x6d00] = { 0 };
	if (sp <= 0x6e00) /* (the words the test gives, where the stack read has them) */
		memcpy(stack + (0x6e00 - sp), &words[0], 8);
	if (sp <= 0x6f00)
		memcpy(stack + (0x6f00 - sp), &words[1], 8);
	memcpy(stack + (0x7000 - sp), &words[2], 8);
	struct ptwk_fork_stack st = { sp, stack, readable ? 0x7100 - sp : 0, queued_return, NULL };
	ptwk_frames_forked(&cc, &c, PID, clock_ns, &st);
	*gap = cc.gap_frames;
	static const uint64_t slots[3] = { 0x6e00, 0x6f00, 0x7000 },
			      rets[3] = { 0x2050, 0x1050, 0xa1 };
	for (int i = 0; i < 3; i++)
		if (slots[i] <= below)
			ret_(&cc, CHILD, (uint64_t)(2 - i), slots[i] + 8, rets[i],
			     (uint64_t)(5 + i));
	ptwk_conv_detached(&cc, clock_ns += 1000);
	ptw_spans_finish(child_spans);
	spans = child_spans;
	char *got = tree(child_spans);
	size_t before = 0;
	for (size_t i = 0; i < ptw_frames_count(ptw_spans_frames(child_spans)); i++)
		before += ptw_frames_get(ptw_spans_frames(child_spans), i)->entry_unknown;
	CHECK_EQ(before, 3 - *gap);
	ptwk_conv_free(&cc);
	ptw_spans_free(child_spans);
	spans = parent_spans;
	finish(&c, "f0 1 - unmatched detach;f1 2 f0 unmatched detach;f2 3 f1 unmatched detach");
	return got;
}

static void test_forked(void)
{
	const uint64_t on[3] = { 0x2050, TRAMP, 0xa1 };
	uint64_t gap;
	/* still in all three (f1's slot holds the trampoline): each returns
	 * in the child with its own value */
	char *got = forked(0x6d00, on, true, 0x7000, &gap);
	CHECK_STR(got, "f0 1 - completed - =7;f1 2 f0 completed - =6;f2 3 f1 completed - =5");
	CHECK_EQ(gap, 0);
	free(got);
	/* returned from f2 and f1 before its probes: f0 alone */
	got = forked(0x6f10, on, true, 0x7000, &gap);
	CHECK_STR(got, "f0 1 - completed - =7");
	CHECK_EQ(gap, 2);
	free(got);
	/* returned from f2, then another call from f1 at that level: its
	 * slot holds another return address */
	const uint64_t again[3] = { 0x2077, TRAMP, 0xa1 };
	got = forked(0x6d00, again, true, 0x7000, &gap);
	CHECK_STR(got, "f0 1 - completed - =7;f1 2 f0 completed - =6");
	CHECK_EQ(gap, 1);
	free(got);
	/* f1's slot no longer the trampoline nor its return address */
	const uint64_t gone[3] = { 0x2050, 0x3333, 0xa1 };
	got = forked(0x6d00, gone, true, 0x7000, &gap);
	CHECK_STR(got, "f0 1 - completed - =7");
	CHECK_EQ(gap, 2);
	free(got);
	/* its stack not read (gone, say): none reported, all three counted;
	 * their returns are nothing */
	got = forked(0x6d00, on, false, 0x7000, &gap);
	CHECK_STR(got, "");
	CHECK_EQ(gap, 3);
	free(got);
	/* read once it had returned from f2 and f1, both since its probes
	 * were in (their returns not converted yet): all three */
	queued[0] = 0x6e08;
	queued[1] = 0x6f08;
	got = forked(0x6f10, on, true, 0x7000, &gap);
	CHECK_STR(got, "f0 1 - completed - =7;f1 2 f0 completed - =6;f2 3 f1 completed - =5");
	CHECK_EQ(gap, 0);
	free(got);
	/* f1's since, f2's before them: f0 and f1 */
	queued[0] = 0;
	got = forked(0x6f10, on, true, 0x7000, &gap);
	CHECK_STR(got, "f0 1 - completed - =7;f1 2 f0 completed - =6");
	CHECK_EQ(gap, 1);
	free(got);
	queued[1] = 0;
	/* still in all three, and it exits in f0: the inner two returned */
	got = forked(0x6d00, on, true, 0x6f00, &gap);
	CHECK_STR(got, "f0 1 - unmatched detach;f1 2 f0 completed - =6;f2 3 f1 completed - =5");
	CHECK_EQ(gap, 0);
	free(got);
}

/* A -f child's calls entered before its links return once they are in:
 * counted (one deeper than the frame it was forked in; one with no frame
 * at all), not the second return the kernel tells of a tail call, nor
 * anything once it exec'd, nor in a process not forked. */
static void test_gap_returns(void)
{
	struct ptwk_conv c;
	start(&c);
	entry(&c, PID, 0, 0x7000, 0xa1);
	struct ptw_spans *parent_spans = spans;
	spans = ptw_spans_new();
	struct ptwk_conv cc;
	struct ptwk_conv_ops ops = { .sink = sink, .frame_function = frame_function, .ctx = spans };
	ptwk_conv_init(&cc, CHILD, &ops);
	ptwk_conv_forked(&cc, 0x1234, 0, "child", clock_ns);
	uint8_t stack[0x400] = { 0 };
	uint64_t word = 0xa1;
	memcpy(stack + (0x7000 - 0x6d00), &word, 8);
	struct ptwk_fork_stack st = { 0x6d00, stack, sizeof(stack), NULL, NULL };
	ptwk_frames_forked(&cc, &c, PID, clock_ns, &st);
	ret_(&cc, CHILD, 1, 0x6e08, 0x3000, 1); /* entered before its links */
	CHECK_EQ(cc.gap_returns, 1);
	entry(&cc, CHILD, 2, 0x6e00, 0x3000);
	ret_(&cc, CHILD, 2, 0x6e08, 0x3000, 2);
	ret_(&cc, CHILD, 2, 0x6e08, 0x3000, 2); /* (a tail call's second return) */
	CHECK_EQ(cc.gap_returns, 1);
	ret_(&cc, CHILD, 0, 0x7008, 0xa1, 3);	/* the frame it was forked in */
	ret_(&cc, CHILD, 1, 0x7108, 0x3000, 4); /* no frame left at all */
	CHECK_EQ(cc.gap_returns, 2);
	struct ptwk_record e = rec(PTWK_EXEC, CHILD);
	e.tgid = CHILD;
	ptwk_conv_record(&cc, &e);
	ret_(&cc, CHILD, 1, 0x6c08, 0x3000, 5); /* its new image's: said apart */
	CHECK_EQ(cc.gap_returns, 2);
	ptwk_conv_free(&cc);
	ptw_spans_free(spans);
	spans = parent_spans;
	ret_(&c, PID, 1, 0x6e08, 0x3000, 1); /* not a fork child */
	CHECK_EQ(c.gap_returns, 0);
	finish(&c, "f0 1 - unmatched detach");
}

int main(void)
{
	test_forked();
	test_gap_returns();
	test_xol();
	test_under_way();
	test_under_way_left();
	test_nesting();
	test_tail_call();
	test_tail_watched();
	test_tail_late_end();
	test_tail_unwatchable();
	test_tail_call_in_handler();
	test_unwound_out_of_handler();
	test_longjmp();
	test_exception();
	test_unread_and_end();
	test_deep();
	test_uretprobe_tail_call();
	test_uretprobe_too_deep();
	test_launch_before_exec();
	test_signal_handlers();
	test_signal_jump_and_nesting();
	test_handler_by_entry();
	test_sigaltstack_above();
	test_contexts();
	test_context_pingpong();
	CHECK_DONE();
}
