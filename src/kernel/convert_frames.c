/* SPDX-License-Identifier: MIT */
/*
 * --trace records to frame events, pure (see convert.h). The tracer
 * (src/tracer/trace.c) emits a FRAME_RETURN only when its shadow stack of
 * (entry sp, return address) says a frame ended there, a THROW, CATCH or
 * LONGJMP only while a frame of ours is open, and a LONGJMP with the sp it
 * lands at; this keeps the same shadow stack per thread (ptw_frames.h's
 * rules) so that the span engine sees the same stream and makes the same
 * frames.
 *
 * What the kernel changes: a uretprobe replaces the return address in the
 * slot with its trampoline. A function entered by a tail call from a
 * traced one finds the trampoline at [sp]: its real return address is the
 * frame's whose slot it is. The kernel drops the return instances a
 * longjmp or an exception skipped, so no return ever comes for those.
 */
#include <stdlib.h>
#include <string.h>

#include "convert.h"
#include "ptw_frames.h"

/* The kernel keeps at most this many return instances pending per thread
 * (MAX_URETPROBE_DEPTH): a call entered deeper gets no return probe. */
#define KERNEL_URETPROBE_DEPTH 64

/* A shadow frame's id: how its return is seen. */
#define FRAME_URETPROBE 0 /* a uretprobe instance of its own */
#define FRAME_UNWATCHED 1 /* none (the kernel's depth limit) */
#define FRAME_UNDER_WAY 2 /* under way at the attach: a uprobe at its return site */

struct fthread {
	struct ptw_shadow_frame *st; /* innermost last; id: FRAME_* */
	size_t n, cap;
	size_t watched; /* of those, with a return probe */
};

/* The k innermost frames are over; those that had no return probe and
 * did not return are counted (a note says so). */
static void drop(struct ptwk_conv *c, struct fthread *ft, size_t k, bool last_returned)
{
	for (size_t i = 0; i < k && ft->n; i++) {
		const struct ptw_shadow_frame *fr = &ft->st[--ft->n];
		if (fr->id == FRAME_URETPROBE)
			ft->watched--;
		else if (fr->id == FRAME_UNWATCHED && !(last_returned && i == k - 1))
			c->frames_too_deep++;
	}
}

static struct fthread *fthread_of(struct ptwk_conv *c, pid_t tid, bool make)
{
	struct fthread *ft = ptw_map_get(&c->frames, (uint64_t)tid);
	if (!ft && make) {
		ft = xcalloc(1, sizeof(*ft));
		ptw_map_put(&c->frames, (uint64_t)tid, ft);
	}
	return ft;
}

static void fthread_free(struct fthread *ft)
{
	if (ft) {
		free(ft->st);
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

static void on_entry(struct ptwk_conv *c, const struct ptwk_record *r)
{
	if (!(r->f & PTWK_F_READ))
		return; /* no return address: the tracer reports no such call either */
	struct fthread *ft = fthread_of(c, (pid_t)r->tid, true);
	uint64_t sp = r->b, ret = r->c;
	/* A tail call from a traced frame: the slot is that frame's, and the
	 * kernel put its trampoline there. */
	if (trampoline(r) && ft->n && ft->st[ft->n - 1].sp == sp)
		ret = ft->st[ft->n - 1].ret;
	bool tail;
	drop(c, ft, ptw_shadow_left_at_entry(ft->st, ft->n, sp, ret, &tail), false);
	if (ft->n == ft->cap) {
		ft->cap = ft->cap ? ft->cap * 2 : 16;
		ft->st = xreallocarray(ft->st, ft->cap, sizeof(*ft->st));
	}
	bool unwatched = ft->watched >= KERNEL_URETPROBE_DEPTH;
	ft->watched += !unwatched;
	ft->st[ft->n++] = (struct ptw_shadow_frame){ sp, ret, unwatched };
	struct ptw_event ev = ptw_event_init(PTW_EV_FRAME_ENTRY, r->ns, (pid_t)r->tid);
	ev.routine = c->ops.frame_function ? c->ops.frame_function(c->ops.ctx, r->a) : NULL;
	if (!ev.routine && c->ops.locate)
		ev.routine = c->ops.locate(c->ops.ctx, r->d);
	ev.sp = sp;
	ev.ret_addr = ret;
	emit(c, &ev);
}

static void on_return(struct ptwk_conv *c, const struct ptwk_record *r)
{
	struct fthread *ft = fthread_of(c, (pid_t)r->tid, false);
	uint64_t sp = r->b, ip = r->c;
	if (!ft || !ft->n)
		return;
	bool returned;
	size_t k = ptw_shadow_left_at(ft->st, ft->n, sp, ip, &returned);
	if (!k)
		return; /* a second return instance of a tail call: already over */
	drop(c, ft, k, returned);
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
	/* The helpers say something only while a frame of ours is open. */
	struct fthread *ft = fthread_of(c, (pid_t)r->tid, false);
	if (!ft || !ft->n)
		return;
	bool returned;
	struct ptw_event ev = ptw_event_init(PTW_EV_THROW, r->ns, (pid_t)r->tid);
	switch ((enum ptwk_kind)r->kind) {
	case PTWK_THROW:
		break;
	case PTWK_CATCH:
		/* __cxa_begin_catch is called by the catching frame: its sp is
		 * the one above our return address. */
		ev.kind = PTW_EV_CATCH;
		ev.sp = r->b + 8;
		drop(c, ft, ptw_shadow_left_at(ft->st, ft->n, ev.sp, 0, &returned), false);
		break;
	case PTWK_LONGJMP:
		ev.kind = PTW_EV_LONGJMP;
		ev.sp = longjmp_target(r);
		if (ev.sp)
			drop(c, ft, ptw_shadow_left_at(ft->st, ft->n, ev.sp, 0, &returned), false);
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
	if (ft->n + n > ft->cap) {
		ft->cap = ft->n + n + 16;
		ft->st = xreallocarray(ft->st, ft->cap, sizeof(*ft->st));
	}
	memmove(ft->st + n, ft->st, ft->n * sizeof(*ft->st));
	for (size_t i = 0; i < n; i++)
		ft->st[i] = (struct ptw_shadow_frame){ v[i].sp, v[i].ret, FRAME_UNDER_WAY };
	ft->n += n;
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
