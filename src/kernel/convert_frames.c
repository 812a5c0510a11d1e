/* SPDX-License-Identifier: MIT */
/*
 * --trace records to frame events, pure (see convert.h). The tracer
 * (src/tracer/trace.c) emits a FRAME_RETURN only when its shadow stack of
 * (entry sp, return address) says a frame ended there, a THROW, CATCH or
 * LONGJMP only while a frame of ours is open, and a LONGJMP with the sp it
 * lands at; this keeps the same shadow stack per thread (ptw_observe.h)
 * so that the span engine sees the same stream and makes the same frames.
 *
 * What the kernel changes: a uretprobe replaces the return address in the
 * slot with its trampoline. A function entered by a tail call from a
 * traced one finds the trampoline at [sp]: its real return address is the
 * frame's whose slot it is. The kernel drops the return instances a
 * longjmp or an exception skipped, so no return ever comes for those.
 */
#define _GNU_SOURCE /* REG_RSP */
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <ucontext.h>

#include "convert.h"
#include "ptw_frames.h"

/* The kernel keeps at most this many return instances pending per thread
 * (MAX_URETPROBE_DEPTH): a call entered deeper gets no return probe. */
#define KERNEL_URETPROBE_DEPTH 64

/* A shadow frame's tag: how its return is seen. */
#define FRAME_URETPROBE 0 /* a uretprobe instance of its own */
#define FRAME_UNWATCHED 1 /* none (the kernel's depth limit) */
#define FRAME_UNDER_WAY 2 /* under way at the attach: a uprobe at its return site */
#define FRAME_DROPPED 3   /* its instance dropped by the kernel (another stack) */

/* A thread's shadow stack (tag: FRAME_*; the signals being handled as the
 * signal_deliver tracepoint and the sigreturn probe tell them). */
struct fthread {
	struct ptw_shadow sh;
	size_t watched; /* frames (parked ones too) with a return probe */
	struct ptwk_conv *c;
	/* The innermost handler made a traced call below what it
	 * interrupted: it runs on that stack, not an alternate one. */
	bool handler_below;
};

/* A frame is over; one that had no return probe and did not return is
 * counted (a note says so). */
static void left(void *ctx, const struct ptw_shadow_frame *f, enum ptw_shadow_how how)
{
	struct fthread *ft = ctx;
	if (f->tag == FRAME_URETPROBE)
		ft->watched--;
	else if (f->tag == FRAME_UNWATCHED && how != PTW_SHADOW_RETURNED)
		ft->c->frames_too_deep++;
}

static struct fthread *fthread_of(struct ptwk_conv *c, pid_t tid, bool make)
{
	struct fthread *ft = ptw_map_get(&c->frames, (uint64_t)tid);
	if (!ft && make) {
		ft = xcalloc(1, sizeof(*ft));
		ft->c = c;
		ptw_map_put(&c->frames, (uint64_t)tid, ft);
	}
	return ft;
}

static void fthread_free(struct fthread *ft)
{
	if (ft) {
		ptw_shadow_clear(&ft->sh, NULL, NULL);
		free(ft);
	}
}

void ptwk_frames_forget(struct ptwk_conv *c, pid_t tid)
{
	if (tid) {
		fthread_free(ptw_map_del(&c->frames, (uint64_t)tid));
		return;
	}
	size_t it = 0;
	void *v;
	while (ptw_map_next(&c->frames, &it, NULL, &v))
		fthread_free(v);
	ptw_map_free(&c->frames);
}

static void emit(struct ptwk_conv *c, struct ptw_event *ev)
{
	ev->pid = c->pid;
	c->events++;
	c->ops.sink(c->ops.ctx, ev);
}

/* The return address the entry read is the kernel's trampoline (in its
 * uprobe area, a page). */
static bool trampoline(const struct ptwk_record *r)
{
	return r->e && r->c >= r->e && r->c - r->e < 4096;
}

/*
 * A traced call in a signal handler, at sp: the kernel drops the pending
 * returns whose slot is at or below sp, newest first, taking them for
 * frames a longjmp left. A handler on an alternate stack above the frames
 * it interrupted (sigaltstack; the kernel's "TODO: sigaltstack()") makes
 * it drop theirs although they live: when they return, the kernel finds
 * another call's return, or none and kills the thread's process with
 * SIGILL (checked on 6.18). Counted for a note; they get no return.
 * chained: a tail call from a traced frame, whose slot is that frame's:
 * the kernel keeps the instance whose slot is sp (arch_uretprobe_is_alive,
 * RP_CHECK_CHAIN_CALL: sp <= its slot), and drops only those below.
 */
static void handler_above(struct ptwk_conv *c, struct fthread *ft, uint64_t sp, bool chained)
{
	struct ptw_shadow_context *run = &ft->sh.run;
	if (ft->sh.nsigs && sp < ft->sh.sigs[ft->sh.nsigs - 1].sp)
		ft->handler_below = true;
	for (size_t i = run->n; i-- > 0 && (chained ? run->st[i].sp < sp : run->st[i].sp <= sp);)
		if (run->st[i].tag == FRAME_URETPROBE) {
			run->st[i].tag = FRAME_DROPPED; /* (not the depth limit's) */
			ft->watched--;
			/* A handler that ran on the interrupted stack and is now
			 * above its frames has left them (a cancellation's forced
			 * unwind, a longjmp out of it): the kernel drops them as
			 * it should; no sigaltstack. */
			c->frames_sigaltstack += !ft->handler_below;
		}
}

/* The same for contexts: a traced call at sp, in one context, above the
 * return slots of traced calls open in a context it left (its stack lies
 * above theirs: a thread's stack below one malloc mapped). The kernel
 * drops their pending returns (checked on 6.18: SIGILL when the call
 * that switched returned). Counted for a note; they get no return. */
static void context_above(struct ptwk_conv *c, struct fthread *ft, uint64_t sp)
{
	for (size_t k = 0; k < ft->sh.nparked; k++) {
		struct ptw_shadow_context *p = &ft->sh.parked[k];
		for (size_t i = p->n; i-- > 0 && p->st[i].sp <= sp;)
			if (p->st[i].tag == FRAME_URETPROBE) {
				p->st[i].tag = FRAME_DROPPED;
				ft->watched--;
				c->frames_ctx_dropped++;
			}
	}
}

/* A signal handler's entry: the return address is the sigreturn
 * trampoline, and the kernel passed the signal as the first argument. */
static int handler_signal(struct ptwk_conv *c, const struct ptwk_record *r, uint64_t ret)
{
	int sig = (int)((r->f >> PTWK_F_SIG_SHIFT) & 0xff);
	return sig >= 1 && sig <= 64 && c->ops.is_sigreturn && c->ops.is_sigreturn(c->ops.ctx, ret)
		       ? sig
		       : 0;
}

static void on_entry(struct ptwk_conv *c, const struct ptwk_record *r)
{
	if (!(r->f & PTWK_F_READ))
		return; /* no return address: the tracer reports no such call either */
	struct fthread *ft = fthread_of(c, (pid_t)r->tid, true);
	uint64_t sp = r->b, ret = r->c;
	/* A tail call from a traced frame: the slot is that frame's, and the
	 * kernel put its trampoline there. */
	struct ptw_shadow_frame *top = ptw_shadow_top(&ft->sh);
	bool chained = trampoline(r) && top && top->sp == sp;
	if (chained)
		ret = top->ret;
	int sig = handler_signal(c, r, ret);
	if (sig || ft->sh.nsigs)
		handler_above(c, ft, sp, chained);
	if (ft->sh.nparked)
		context_above(c, ft, sp);
	/* the signal marks count (for the first traced call of a handler
	 * that is not traced) when the engine is told of the deliveries */
	ptw_shadow_enter(&ft->sh, sp, ret, FRAME_URETPROBE, sig != 0, c->sigreturn_probed, left, ft);
	if (ft->watched >= KERNEL_URETPROBE_DEPTH)
		ptw_shadow_top(&ft->sh)->tag = FRAME_UNWATCHED;
	else
		ft->watched++;
	struct ptw_event ev = ptw_event_init(PTW_EV_FRAME_ENTRY, r->ns, (pid_t)r->tid);
	ev.routine = c->ops.frame_function ? c->ops.frame_function(c->ops.ctx, r->a) : NULL;
	if (!ev.routine && c->ops.locate)
		ev.routine = c->ops.locate(c->ops.ctx, r->d);
	ev.sp = sp;
	ev.ret_addr = ret;
	ev.sig = sig;
	emit(c, &ev);
}

static void on_return(struct ptwk_conv *c, const struct ptwk_record *r)
{
	struct fthread *ft = fthread_of(c, (pid_t)r->tid, false);
	uint64_t sp = r->b, ip = r->c;
	if (!ft || !ft->sh.run.n)
		return;
	/* The frame whose return slot this was, and where the kernel sent
	 * the thread: another call's return address when its list of
	 * pending returns was mixed up by contexts (see on_context). */
	for (size_t i = ft->sh.run.n; i-- > 0;)
		if (ft->sh.run.st[i].sp == sp - 8) {
			c->frames_misrouted += ft->sh.run.st[i].ret != ip;
			break;
		}
	if (!ptw_shadow_return(&ft->sh, sp, ip, left, ft))
		return; /* a second return instance of a tail call: already over */
	struct ptw_event ev = ptw_event_init(PTW_EV_FRAME_RETURN, r->ns, (pid_t)r->tid);
	ev.sp = sp;
	ev.ret_addr = ip;
	ev.has_value = true;
	ev.value = r->d;
	emit(c, &ev);
}

/* glibc x86-64's PTR_DEMANGLE: rotate right by 17, xor with the guard.
 * Where a longjmp lands, if it makes sense (above the caller's sp, on the
 * same stack); else 0 (the next event tells). */
static uint64_t longjmp_target(const struct ptwk_record *r)
{
	if (!(r->f & PTWK_F_READ))
		return 0;
	uint64_t sp = ((r->d >> 17) | (r->d << 47)) ^ r->c;
	return sp > r->b && sp - r->b < PTW_SHADOW_WINDOW ? sp : 0;
}

/* The ucontext_t offset the BPF program reads. */
_Static_assert(offsetof(ucontext_t, uc_mcontext.gregs[REG_RSP]) == PTWK_UC_RSP,
	       "ucontext_t's saved RSP");

/*
 * swapcontext(oucp, ucp) or setcontext(ucp): the thread goes to ucp's
 * saved stack pointer; swapcontext saves in oucp the one it resumes at
 * (its entry sp + 8). The shadow stacks follow as the tracer's do
 * (trace.c's hook_context, ptw_frames.h): one per context, parked by
 * that resume sp; setcontext within the running context is a jump.
 *
 * What the kernel does meanwhile (kernel/events/uprobes.c, x86-64): one
 * list of pending return instances per thread, newest first, each with
 * the sp of its return slot. At every traced entry it drops the newest
 * ones whose slot is at or below the new sp (taken for frames a longjmp
 * left); at a return through its trampoline it takes the newest one, and
 * if the next is below the sp returned to, drops it unreported and takes
 * the next: the thread goes to the return address of the one it keeps.
 * Stacks of contexts are anywhere: a context left with traced calls open
 * (their slots hold the trampoline) has them dropped when the context run
 * next enters a traced function above them, or taken by that context's
 * returns; when such a call returns at last, the kernel sends the thread
 * to another call's return address (or SIGILL when none is pending). A
 * context that runs its traced calls to their end before switching back
 * (a call-like context), or is never resumed, is safe.
 */
static void on_context(struct ptwk_conv *c, const struct ptwk_record *r)
{
	uint64_t to = r->d;
	if (!(r->f & PTWK_F_READ) || !to)
		return; /* it will fail (EFAULT) or crash: the next events tell */
	bool swap = r->kind == PTWK_CONTEXT_SWAP;
	uint64_t resume = swap ? r->b + 8 : 0;
	struct fthread *ft = fthread_of(c, (pid_t)r->tid, true);
	bool probed = false;
	for (size_t i = 0; i < ft->sh.run.n && !probed; i++)
		probed = ft->sh.run.st[i].tag == FRAME_URETPROBE;
	if (ptw_shadow_switch(&ft->sh, to, resume, left, ft) & PTW_SHADOW_PARKED)
		c->frames_ctx_open += probed;
	struct ptw_event ev = ptw_event_init(PTW_EV_CONTEXT_SWITCH, r->ns, (pid_t)r->tid);
	ev.sp = to;
	ev.has_arg = swap;
	ev.arg = resume;
	emit(c, &ev);
}

/* A caught signal's delivery and a handler's sigreturn, as the tracer
 * emits them (trace.c): a delivery only when the sigreturn probe is in
 * (a delivery without its sigreturn would mark every later call). */
static void on_signal(struct ptwk_conv *c, const struct ptwk_record *r)
{
	struct fthread *ft = fthread_of(c, (pid_t)r->tid, r->kind == PTWK_SIGNAL);
	if (ft && r->kind == PTWK_SIGNAL && (r->f & PTWK_F_READ)) {
		ptw_shadow_signal(&ft->sh, r->b, (int)r->a);
		ft->handler_below = false;
	} else if (ft && r->kind == PTWK_SIGRETURN) {
		ptw_shadow_sigreturn(&ft->sh);
		ft->handler_below = false;
	}
	struct ptw_event ev;
	if (r->kind == PTWK_SIGNAL) {
		if (!c->sigreturn_probed || !(r->f & PTWK_F_READ) || r->a < 1 || r->a > 64)
			return;
		ev = ptw_event_init(PTW_EV_SIGNAL_DELIVER, r->ns, (pid_t)r->tid);
		ev.sig = (int)r->a;
	} else {
		ev = ptw_event_init(PTW_EV_SIGRETURN, r->ns, (pid_t)r->tid);
	}
	ev.sp = r->b;
	emit(c, &ev);
}

void ptwk_frames_record(struct ptwk_conv *c, const struct ptwk_record *r)
{
	/* A launch before its exec: ptwatch's own fork running its execvp
	 * (libc's probes are in already), not the command. */
	if (c->launched)
		return;
	if (r->kind == PTWK_FRAME_ENTRY) {
		on_entry(c, r);
		return;
	}
	if (r->kind == PTWK_FRAME_RETURN) {
		on_return(c, r);
		return;
	}
	if (r->kind == PTWK_DL_STATE) {
		if (c->ops.modules_changed)
			c->ops.modules_changed(c->ops.ctx);
		return;
	}
	if (r->kind == PTWK_CONTEXT_SWAP || r->kind == PTWK_CONTEXT_SET) {
		on_context(c, r);
		return;
	}
	if (r->kind == PTWK_SIGNAL || r->kind == PTWK_SIGRETURN) {
		on_signal(c, r);
		return;
	}
	/* The helpers say something only while a frame of ours is open. */
	struct fthread *ft = fthread_of(c, (pid_t)r->tid, false);
	if (!ft || !ft->sh.run.n)
		return;
	struct ptw_event ev = ptw_event_init(PTW_EV_THROW, r->ns, (pid_t)r->tid);
	switch ((enum ptwk_kind)r->kind) {
	case PTWK_THROW:
		break;
	case PTWK_CATCH:
		/* __cxa_begin_catch is called by the catching frame: its sp is
		 * the one above our return address. */
		ev.kind = PTW_EV_CATCH;
		ev.sp = r->b + 8;
		ptw_shadow_land(&ft->sh, ev.sp, left, ft);
		break;
	case PTWK_LONGJMP:
		ev.kind = PTW_EV_LONGJMP;
		ev.sp = longjmp_target(r);
		if (ev.sp)
			ptw_shadow_land(&ft->sh, ev.sp, left, ft);
		break;
	default:
		return;
	}
	emit(c, &ev);
}

/*
 * Calls under way at the attach (underway.c): they go BELOW whatever the
 * thread's records pushed already, outermost first, each a FRAME_ENTRY
 * whose entry was not seen. Their returns come as any return does
 * (PTWK_FRAME_RETURN, from a uprobe at the return site), and none has a
 * uretprobe instance: the kernel's depth limit is not theirs.
 */
void ptwk_frames_under_way(struct ptwk_conv *c, pid_t tid, const struct ptwk_under_way *v, size_t n,
			   uint64_t ns)
{
	if (!n)
		return;
	struct fthread *ft = fthread_of(c, tid, true);
	struct ptw_shadow_frame *fs = xcalloc(n, sizeof(*fs));
	for (size_t i = 0; i < n; i++)
		fs[i] = (struct ptw_shadow_frame){ v[i].sp, v[i].ret, FRAME_UNDER_WAY };
	ptw_shadow_under_way(&ft->sh, fs, n);
	free(fs);
	for (size_t i = 0; i < n; i++) {
		struct ptw_event ev = ptw_event_init(PTW_EV_FRAME_ENTRY, ns, tid);
		ev.routine = c->ops.frame_function ? c->ops.frame_function(c->ops.ctx, v[i].index)
						   : NULL;
		if (!ev.routine && c->ops.locate)
			ev.routine = c->ops.locate(c->ops.ctx, v[i].entry);
		ev.sp = v[i].sp;
		ev.ret_addr = v[i].ret;
		ev.before_attach = true;
		emit(c, &ev);
	}
}
