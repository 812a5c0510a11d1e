/*
 * --trace records to frame events, pure (see convert.h). The tracer
 * (src/tracer/trace.c) emits a FRAME_RETURN only when its shadow stack of
 * (entry sp, return address) says a frame ended there, a THROW, CATCH or
 * LONGJMP only while a frame of ours is open, and a LONGJMP with the sp it
 * lands at; this keeps the same shadow stack per thread (ptw_observe.h)
 * so that the span engine sees the same stream and makes the same frames.
 *
 * What the kernel path sees (kframes.c says which, per function): an
 * entry at sp (the return slot), and either
 *  - a traced function's ret at its slot (sent as the return it makes:
 *    sp + 8 and [sp]) and a jump out of it into code not traced at its
 *    slot (a tail call: FRAME_TAIL). Nothing of the target is changed:
 *    an exception or a longjmp goes through as untraced, and the frames
 *    it skipped are left at the next thing seen above them, as on the
 *    ptrace path;
 *  - or a uretprobe's return. The kernel replaces the return address in
 *    the slot with its trampoline: a function entered by a tail call from
 *    a traced one finds the trampoline at [sp] (its real return address
 *    is the frame's whose slot it is), and the kernel reports that return
 *    twice. It drops the return instances a longjmp or an exception
 *    skipped, and keeps at most 64 pending per thread.
 */
#define _GNU_SOURCE /* REG_RSP */
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <ucontext.h>

#include "convert.h"
#include "ptw_underway.h"
#include "ptw_frames.h"

/* The kernel keeps at most this many uretprobe return instances pending
 * per thread (MAX_URETPROBE_DEPTH): a call entered deeper gets no return
 * probe. */
#define KERNEL_URETPROBE_DEPTH 64

/* A shadow frame's tag: how its return is seen (its low two bits), and
 * its function's --trace index + 1 (the rest). */
#define FRAME_EXITS 0	  /* probes on its function's exits (or under way at the attach) */
#define FRAME_URETPROBE 1 /* a uretprobe instance of its own */
#define FRAME_UNWATCHED 2 /* none (the kernel's depth limit) */
#define FRAME_JUMPED 3	  /* exits' probes; it jumped into code not traced, whose
			   * return is watched where it lands (on_tail) */
#define FRAME_JUMPED_LATE                                                                          \
	4 /* the same, the watch's probe put in at that jump:                                      \
	   * the return may have come before it */
#define FRAME_HOW(tag) ((tag)&7)
#define JUMPED(tag)    (FRAME_HOW(tag) == FRAME_JUMPED || FRAME_HOW(tag) == FRAME_JUMPED_LATE)

static uintptr_t frame_tag(unsigned how, uint64_t index)
{
	return how | (uintptr_t)(index + 1) << 3;
}

static void frame_set_how(struct ptw_shadow_frame *f, unsigned how)
{
	f->tag = (f->tag & ~(uintptr_t)7) | how;
}

/* A thread's shadow stack (the signals being handled as the
 * signal_deliver tracepoint and the sigreturn probe tell them). */
struct fthread {
	struct ptw_shadow sh;
	size_t watched; /* frames (parked ones too) with a uretprobe instance */
	struct ptwk_conv *c;
	pid_t tid;
	bool jumped; /* a return was watched for it (on_tail) */
	uint64_t returned_sp; /* the last return's sp (the kernel tells a tail call's twice) */
};

static void emit(struct ptwk_conv *c, struct ptw_event *ev);

/* A frame is over; one that had no return probe and did not return is
 * counted (a note says so). One that jumped into code not traced whose
 * return was not seen (its probe was not in yet) ends as the jump did: a
 * tail call, told now, before what showed it over. */
static void left(void *ctx, const struct ptw_shadow_frame *f, enum ptw_shadow_how how)
{
	struct fthread *ft = ctx;
	if (FRAME_HOW(f->tag) == FRAME_URETPROBE)
		ft->watched--;
	else if (FRAME_HOW(f->tag) == FRAME_UNWATCHED && how != PTW_SHADOW_RETURNED)
		ft->c->frames_too_deep++;
	if (!JUMPED(f->tag) || how == PTW_SHADOW_RETURNED || how == PTW_SHADOW_ABANDONED)
		return; /* (an abandoned context's: the engine abandons it too) */
	/* (its watch stays until the thread ends: the program runs ahead of
	 * this, and a newer call in the same slot may have set it again) */
	struct ptw_event ev = ptw_event_init(PTW_EV_FRAME_TAIL, ft->c->frames_ns, ft->tid);
	ev.sp = f->sp;
	emit(ft->c, &ev);
}

static struct fthread *fthread_of(struct ptwk_conv *c, pid_t tid, bool make)
{
	struct fthread *ft = ptw_map_get(&c->frames, (uint64_t)tid);
	if (!ft && make) {
		ft = xcalloc(1, sizeof(*ft));
		ft->c = c;
		ft->tid = tid;
		ptw_map_put(&c->frames, (uint64_t)tid, ft);
	}
	return ft;
}

/* (the thread's end: the engine ends its frames as the tracer does; the
 * returns watched for it are forgotten, its tid may come again) */
static void fthread_free(struct fthread *ft)
{
	if (ft) {
		if (ft->jumped && ft->c->ops.unwatch_returns)
			ft->c->ops.unwatch_returns(ft->c->ops.ctx, ft->tid);
		ptw_shadow_clear(&ft->sh, NULL, NULL);
		free(ft);
	}
}

/* A frame innermost at its thread's end that jumped before its return's
 * probe went in may have returned long before: it ends as its jump did, a
 * tail call, not as ended by the thread's or the process's end. */
static void end_late_jumps(struct fthread *ft)
{
	struct ptw_shadow_frame *top;
	while ((top = ptw_shadow_top(&ft->sh)) && FRAME_HOW(top->tag) == FRAME_JUMPED_LATE)
		ptw_shadow_tail(&ft->sh, top->sp, left, ft);
}

void ptwk_frames_end(struct ptwk_conv *c, pid_t tid, uint64_t ns)
{
	c->frames_ns = ns;
	struct fthread *ft = tid ? ptw_map_get(&c->frames, (uint64_t)tid) : NULL;
	if (ft)
		end_late_jumps(ft);
	size_t it = 0;
	void *v;
	while (!tid && ptw_map_next(&c->frames, &it, NULL, &v))
		end_late_jumps(v);
	ptwk_frames_forget(c, tid);
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

/* A signal handler's entry: the return address is the sigreturn
 * trampoline, and the kernel passed the signal as the first argument. */
static int handler_signal(struct ptwk_conv *c, const struct ptwk_record *r, uint64_t ret)
{
	int sig = (int)((r->f >> PTWK_F_SIG_SHIFT) & 0xff);
	return sig >= 1 && sig <= 64 && c->ops.is_sigreturn && c->ops.is_sigreturn(c->ops.ctx, ret)
		       ? sig
		       : 0;
}

/* The return address the entry read is the kernel's uretprobe
 * trampoline (in its uprobe area, a page). */
static bool trampoline(const struct ptwk_record *r)
{
	return r->e && r->c >= r->e && r->c - r->e < 4096;
}

static void on_entry(struct ptwk_conv *c, const struct ptwk_record *r)
{
	if (!(r->f & PTWK_F_READ))
		return; /* no return address: the tracer reports no such call either */
	struct fthread *ft = fthread_of(c, (pid_t)r->tid, true);
	uint64_t sp = r->b, ret = r->c;
	/* A tail call from a frame whose return a uretprobe watches: the
	 * slot is that frame's, and the kernel put its trampoline there. */
	struct ptw_shadow_frame *top = ptw_shadow_top(&ft->sh);
	if (trampoline(r) && top && top->sp == sp)
		ret = top->ret;
	/* A function that jumps back to its start did so, its call's slot
	 * and return address as they were (pthread_spin_lock's retry after a
	 * spin): the same call, as on the ptrace path (trace.c). A call of
	 * its own would be deeper. (Only such a function: for any other, the
	 * same place again means a return not seen, a record lost. And not a
	 * frame whose return cannot be seen: one that jumped out before its
	 * return site's probe was in, or past the kernel's depth.) */
	if ((r->f & PTWK_F_LOOPS) && top && top->sp == sp && top->ret == ret &&
	    top->tag == frame_tag(FRAME_HOW(top->tag), r->a) &&
	    (FRAME_HOW(top->tag) == FRAME_EXITS || FRAME_HOW(top->tag) == FRAME_URETPROBE))
		return;
	if (r->e)
		c->tramp = r->e; /* (a -f child's is at the same address: ptwk_frames_forked) */
	int sig = handler_signal(c, r, ret);
	/* the signal marks count (for the first traced call of a handler
	 * that is not traced) when the engine is told of the deliveries */
	ptw_shadow_enter(&ft->sh, sp, ret, frame_tag(FRAME_EXITS, r->a), sig != 0,
			 c->sigreturn_probed, left, ft);
	if (r->f & PTWK_F_URETPROBE) {
		bool deep = ft->watched >= KERNEL_URETPROBE_DEPTH;
		frame_set_how(ptw_shadow_top(&ft->sh), deep ? FRAME_UNWATCHED : FRAME_URETPROBE);
		ft->watched += !deep;
	}
	struct ptw_event ev = ptw_event_init(PTW_EV_FRAME_ENTRY, r->ns, (pid_t)r->tid);
	ev.routine = c->ops.frame_function ? c->ops.frame_function(c->ops.ctx, r->a) : NULL;
	if (!ev.routine && c->ops.locate)
		ev.routine = c->ops.locate(c->ops.ctx, r->d);
	ev.sp = sp;
	ev.ret_addr = ret;
	ev.sig = sig;
	emit(c, &ev);
}

/* A traced function's ret (or a return site's probe: a call under way at
 * an attach returned there): sp after it, returning to c. */
static void on_return(struct ptwk_conv *c, const struct ptwk_record *r)
{
	struct fthread *ft = fthread_of(c, (pid_t)r->tid, false);
	uint64_t sp = r->b, ip = r->c;
	if (!ft || !ft->sh.run.n) {
		/* A -f child's call entered before its own links (no return of a
		 * wait under way at them, nor a tail call's second one): counted */
		if (c->gap_calls_possible && !(r->a & (PTWK_UW_WAIT | PTWK_UW_JOIN)) &&
		    (!ft || ft->returned_sp != sp))
			c->gap_returns++;
		return;
	}
	if (!(r->f & PTWK_F_READ) || trampoline(r)) {
		/* [sp] unread (a page out), or the trampoline of a uretprobe'd
		 * caller that tail-called this one: the frame whose slot it is
		 * knows */
		ip = 0;
		for (size_t i = ft->sh.run.n; i-- > 0 && !ip;)
			if (ft->sh.run.st[i].sp == sp - 8)
				ip = ft->sh.run.st[i].ret;
		if (!ip)
			return;
	}
	const struct ptw_shadow_frame *top = ptw_shadow_top(&ft->sh);
	uint64_t top_sp = top ? top->sp : 0;
	if (!ptw_shadow_return(&ft->sh, sp, ip, left, ft)) {
		/* no frame of ours there (a call entered before the probes, the
		 * second uretprobe instance of a tail call): a -f child's inside
		 * the frames it was forked in is counted */
		if (c->gap_calls_possible && !(r->a & (PTWK_UW_WAIT | PTWK_UW_JOIN)) &&
		    ft->returned_sp != sp && sp <= top_sp)
			c->gap_returns++;
		return;
	}
	ft->returned_sp = sp;
	struct ptw_event ev = ptw_event_init(PTW_EV_FRAME_RETURN, r->ns, (pid_t)r->tid);
	ev.sp = sp;
	ev.ret_addr = ip;
	ev.has_value = true;
	ev.value = r->d;
	emit(c, &ev);
}

/* A traced function jumped out of itself into code not traced, at its
 * return slot sp. Where that code returns (d, [sp]) is watched: a uprobe
 * there (put in once per address, the first time: that first return may
 * come before it) reports the return for this thread and sp, and the
 * frame ends there, as the tracer's does. Without that, the frame ends at
 * the jump, a tail call. */
static void on_tail(struct ptwk_conv *c, const struct ptwk_record *r)
{
	struct fthread *ft = fthread_of(c, (pid_t)r->tid, false);
	if (!ft)
		return;
	if ((r->f & PTWK_F_READ) && c->ops.watch_return) {
		/* the frames below it are over */
		ptw_shadow_land(&ft->sh, r->b, left, ft);
		struct ptw_shadow_frame *top = ptw_shadow_top(&ft->sh);
		int w = top && top->sp == r->b && top->ret == r->d
				? c->ops.watch_return(c->ops.ctx, r->d)
				: -1;
		if (w >= 0) {
			ft->jumped = true;
			frame_set_how(top, w ? FRAME_JUMPED : FRAME_JUMPED_LATE);
			return;
		}
		/* (a site no probe can watch: the frame ends at the jump) */
	}
	if (!ptw_shadow_tail(&ft->sh, r->b, left, ft))
		return;
	struct ptw_event ev = ptw_event_init(PTW_EV_FRAME_TAIL, r->ns, (pid_t)r->tid);
	ev.sp = r->b;
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
 */
static void on_context(struct ptwk_conv *c, const struct ptwk_record *r)
{
	uint64_t to = r->d;
	if (!(r->f & PTWK_F_READ) || !to)
		return; /* it will fail (EFAULT) or crash: the next events tell */
	bool swap = r->kind == PTWK_CONTEXT_SWAP;
	uint64_t resume = swap ? r->b + 8 : 0;
	struct fthread *ft = fthread_of(c, (pid_t)r->tid, true);
	ptw_shadow_switch(&ft->sh, to, resume, left, ft);
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
	if (ft && r->kind == PTWK_SIGNAL && (r->f & PTWK_F_READ))
		ptw_shadow_signal(&ft->sh, r->b, (int)r->a);
	else if (ft && r->kind == PTWK_SIGRETURN)
		ptw_shadow_sigreturn(&ft->sh);
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
	c->frames_ns = r->ns;
	if (r->kind == PTWK_FRAME_ENTRY) {
		on_entry(c, r);
		return;
	}
	if (r->kind == PTWK_FRAME_RETURN) {
		on_return(c, r);
		return;
	}
	if (r->kind == PTWK_FRAME_TAIL) {
		on_tail(c, r);
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
 * (PTWK_FRAME_RETURN, from their function's ret, and from a uprobe at the
 * return site: the second finds its frame gone).
 */
/* Frames fs (outermost first, v their functions) under way in thread tid:
 * below what its records pushed, and told as begun before ptwatch came. */
static void under_way(struct ptwk_conv *c, pid_t tid, const struct ptw_shadow_frame *fs,
		      const struct ptwk_under_way *v, size_t n, uint64_t ns)
{
	struct fthread *ft = fthread_of(c, tid, true);
	ptw_shadow_under_way(&ft->sh, fs, n);
	for (size_t i = 0; i < n; i++)
		ft->watched += FRAME_HOW(fs[i].tag) == FRAME_URETPROBE;
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

void ptwk_frames_under_way(struct ptwk_conv *c, pid_t tid, const struct ptwk_under_way *v, size_t n,
			   uint64_t ns)
{
	if (!n)
		return;
	struct ptw_shadow_frame *fs = xcalloc(n, sizeof(*fs));
	for (size_t i = 0; i < n; i++)
		fs[i] = (struct ptw_shadow_frame){ v[i].sp, v[i].ret,
						   frame_tag(FRAME_EXITS, v[i].index) };
	under_way(c, tid, fs, v, n, ns);
	free(fs);
}

size_t ptwk_frames_open(const struct ptwk_conv *c, pid_t tid)
{
	const struct fthread *ft = ptw_map_get(&c->frames, (uint64_t)tid);
	return ft ? ft->sh.run.n : 0;
}

/* Frame f (of a uretprobe'd function when uretprobe) is still on the
 * stack st shows: its slot at or above the stack pointer, holding its
 * return address or (a uretprobe's) the trampoline (a slot past what was
 * read: on the stack pointer's word); or it returned since. */
static bool still_on(const struct ptwk_fork_stack *st, const struct ptw_shadow_frame *f,
		     bool uretprobe, uint64_t tramp)
{
	if (st->returned && st->returned(st->ctx, f->sp + 8))
		return true;
	if (f->sp < st->sp)
		return false;
	if (st->len < 8 || f->sp - st->sp > st->len - 8)
		return true;
	uint64_t v;
	memcpy(&v, st->bytes + (f->sp - st->sp), sizeof(v));
	return v == f->ret || (uretprobe && tramp && v - tramp < 4096);
}

void ptwk_frames_forked(struct ptwk_conv *child, const struct ptwk_conv *parent, pid_t parent_tid,
			uint64_t ns, const struct ptwk_fork_stack *st)
{
	const struct fthread *pt = ptw_map_get(&parent->frames, (uint64_t)parent_tid);
	if (!pt || !pt->sh.run.n)
		return;
	/* The running context's frames (those the fork was made in), from
	 * the outermost while each is still on the child's stack (once one
	 * is not, none inside it is). */
	size_t n = pt->sh.run.n, to = 0;
	while (to < n && st && st->len &&
	       still_on(st, &pt->sh.run.st[to], FRAME_HOW(pt->sh.run.st[to].tag) == FRAME_URETPROBE,
			parent->tramp))
		to++;
	child->gap_frames += n - to;
	child->tramp = parent->tramp;
	if (!to)
		return;
	struct ptwk_under_way *v = xcalloc(to, sizeof(*v));
	for (size_t i = 0; i < to; i++) {
		const struct ptw_shadow_frame *f = &pt->sh.run.st[i];
		v[i] = (struct ptwk_under_way){ f->sp, f->ret, 0, (f->tag >> 3) - 1 };
	}
	under_way(child, child->pid, pt->sh.run.st, v, to, ns);
	free(v);
}
