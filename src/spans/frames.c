/* SPDX-License-Identifier: MIT */
/* Frame spans; see ptw_frames.h. Pure: events in, frames out. */
#define _GNU_SOURCE
#include "ptw_frames.h"

#include <stdlib.h>
#include <string.h>

#include "ptw_dist.h"
#include "ptw_spans.h"
#include "ptw_symbols.h"
#include "ptw_timeouts.h"
#include "ptw_util.h"

/* ---- frame spans ---- */

/* What a thread's frames are going through. */
enum leaving {
	LEAVE_NONE,
	LEAVE_EXCEPTION, /* _Unwind_RaiseException seen, no catch yet */
	LEAVE_LONGJMP,	 /* longjmp called, not landed yet */
};

/*
 * A thread's open frames: its shadow stack (ptw_observe.h), each frame's
 * tag its struct ptw_frame, each context's base what its outermost frames
 * nest under (a context started by a switch: the frame that switched;
 * BASE(parent id, depth)).
 */
struct fthread {
	pid_t tid;
	uint32_t process; /* -f: its process's id in the session (ptw_event.process) */
	struct ptw_shadow sh;
	enum leaving leaving;
	size_t thrown_over; /* LEAVE_EXCEPTION: how many of the frames open at the throw
			     * are still open (the outermost ones) */
	bool exiting;	    /* pthread_exit called */
};

#define BASE(parent, depth) ((uint64_t)(parent) << 32 | (depth))
#define FRAME(f)	    ((struct ptw_frame *)(f)->tag)

struct ptw_frames {
	struct ptw_frame **frames;
	size_t n, cap;
	struct ptw_map threads; /* tid -> struct fthread* */
	ptw_frame_closed_fn closed;
	void *closed_ctx;
	uint32_t next_id;
	/* streaming: closed frames go into the totals and the per-function
	 * figures at the next collect, and are freed */
	bool streaming;
	size_t ndead; /* closed since the last collect */
	uint64_t acc_calls, acc_completed, acc_unmatched;
	struct acc_fn *fns;
	size_t nfns;
	struct ptw_map fn_idx; /* function_key -> index + 1 */
	struct ptw_timeouts *timeouts; /* borrowed, may be NULL */
};

/* What the freed frames of one function leave behind. */
struct acc_fn {
	uint64_t key;
	const struct ptw_location *function;
	uint64_t calls, completed, timed, total, self;
	struct ptw_dacc durations;
};

static uint64_t function_key(const struct ptw_location *loc);

void ptw_frames_set_streaming(struct ptw_frames *f)
{
	f->streaming = true;
}

static struct acc_fn *acc_fn_of(struct ptw_frames *f, const struct ptw_location *fn)
{
	uint64_t key = function_key(fn);
	uintptr_t i = (uintptr_t)ptw_map_get(&f->fn_idx, key);
	if (!i) {
		f->fns = xreallocarray(f->fns, f->nfns + 1, sizeof(*f->fns));
		memset(&f->fns[f->nfns], 0, sizeof(f->fns[0]));
		f->fns[f->nfns].key = key;
		f->fns[f->nfns].function = fn;
		f->fns[f->nfns].durations.exact_max = PTW_DACC_EXACT;
		i = ++f->nfns;
		ptw_map_put(&f->fn_idx, key, (void *)i);
	}
	return &f->fns[i - 1];
}

/* A closed frame's figures, kept; the frame itself can go. */
static void account_frame(struct ptw_frames *f, const struct ptw_frame *fr)
{
	struct acc_fn *a = acc_fn_of(f, fr->function);
	f->acc_calls++;
	a->calls++;
	if (fr->status == PTW_FRAME_UNMATCHED)
		f->acc_unmatched++;
	if (fr->status != PTW_FRAME_COMPLETED || fr->return_ns < fr->entry_ns)
		return;
	uint64_t d = fr->return_ns - fr->entry_ns;
	f->acc_completed++;
	a->completed++;
	if (fr->entry_unknown)
		return; /* no duration */
	a->timed++;
	a->total += d;
	a->self += d > fr->child_ns ? d - fr->child_ns : 0;
	ptw_dacc_add(&a->durations, d);
}

static void open_mark_free(struct ptw_open_mark *m)
{
	if (!m)
		return;
	free(m->state);
	free(m->wchan);
	free(m);
}

static void frame_free(struct ptw_frame *fr)
{
	open_mark_free(fr->open);
	free(fr);
}

void ptw_frames_collect(struct ptw_frames *f)
{
	if (!f->ndead)
		return;
	/* in streaming mode the frames held are the open ones */
	size_t k = 0;
	for (size_t i = 0; i < f->n; i++) {
		struct ptw_frame *fr = f->frames[i];
		if (fr->status == PTW_FRAME_OPEN) {
			f->frames[k++] = fr;
			continue;
		}
		account_frame(f, fr);
		frame_free(fr);
	}
	f->n = k;
	f->ndead = 0;
}

void ptw_frames_totals(const struct ptw_frames *f, uint64_t *calls, uint64_t *completed,
		       uint64_t *unmatched)
{
	*calls = f->acc_calls;
	*completed = f->acc_completed;
	*unmatched = f->acc_unmatched;
	for (size_t i = 0; i < f->n; i++) {
		const struct ptw_frame *fr = f->frames[i];
		(*calls)++;
		*completed += fr->status == PTW_FRAME_COMPLETED;
		*unmatched += fr->status == PTW_FRAME_UNMATCHED;
	}
}

/* A frame got its final status: in streaming mode it goes at the next
 * collect (it is still the one the last event concerned until then). */
static void closed(struct ptw_frames *f, struct ptw_frame *fr)
{
	if (f->closed)
		f->closed(f->closed_ctx, fr);
	if (f->streaming)
		f->ndead++;
}

void ptw_frames_set_closed(struct ptw_frames *f, ptw_frame_closed_fn fn, void *ctx)
{
	f->closed = fn;
	f->closed_ctx = ctx;
}

struct ptw_frames *ptw_frames_new(void)
{
	return xcalloc(1, sizeof(struct ptw_frames));
}

static void fthread_free(struct fthread *ft)
{
	if (ft) {
		ptw_shadow_clear(&ft->sh, NULL, NULL); /* (the frames are f's) */
		free(ft);
	}
}

void ptw_frames_free(struct ptw_frames *f)
{
	if (!f)
		return;
	for (size_t i = 0; i < f->n; i++)
		frame_free(f->frames[i]);
	free(f->frames);
	for (size_t i = 0; i < f->nfns; i++)
		ptw_dacc_free(&f->fns[i].durations);
	free(f->fns);
	ptw_map_free(&f->fn_idx);
	size_t it = 0;
	void *v;
	while (ptw_map_next(&f->threads, &it, NULL, &v))
		fthread_free(v);
	ptw_map_free(&f->threads);
	free(f);
}

void ptw_frames_add(struct ptw_frames *f, const struct ptw_frame *fr)
{
	if (f->streaming && fr->status != PTW_FRAME_OPEN) {
		account_frame(f, fr);
		return;
	}
	if (f->n == f->cap) {
		f->cap = f->cap ? f->cap * 2 : 256;
		f->frames = xreallocarray(f->frames, f->cap, sizeof(*f->frames));
	}
	struct ptw_frame *copy = xmalloc(sizeof(*copy));
	*copy = *fr;
	if (fr->open) {
		copy->open = xmalloc(sizeof(*copy->open));
		*copy->open = *fr->open;
		copy->open->state = fr->open->state ? xstrdup(fr->open->state) : NULL;
		copy->open->wchan = fr->open->wchan ? xstrdup(fr->open->wchan) : NULL;
	}
	f->frames[f->n++] = copy;
	if (fr->id > f->next_id)
		f->next_id = fr->id;
}

size_t ptw_frames_count(const struct ptw_frames *f)
{
	return f->n;
}

const struct ptw_frame *ptw_frames_get(const struct ptw_frames *f, size_t i)
{
	return i < f->n ? f->frames[i] : NULL;
}

const char *ptw_frame_status_name(enum ptw_frame_status st)
{
	static const char *const names[] = { "open", "completed", "unmatched" };
	return (unsigned)st < PTW_ARRAY_SIZE(names) ? names[st] : "unmatched";
}

/* The thread of ev (ev->tid, in process ev->process), made if create. */
static struct fthread *fthread(struct ptw_frames *f, const struct ptw_event *ev, bool create)
{
	struct fthread *ft = ptw_map_get(&f->threads, (uint64_t)ev->tid);
	if (!ft && create) {
		ft = xcalloc(1, sizeof(*ft));
		ft->tid = ev->tid;
		ptw_map_put(&f->threads, (uint64_t)ev->tid, ft);
	}
	if (ft && create)
		ft->process = ev->process; /* (a tid of a process gone, used again) */
	return ft;
}

void ptw_frames_set_timeouts(struct ptw_frames *f, struct ptw_timeouts *to)
{
	f->timeouts = to;
}

const struct ptw_frame *ptw_frames_mark_open(struct ptw_frames *f, const struct ptw_event *ev)
{
	if (ev->span_kind != PTW_SPAN_FRAME || !ev->span_id)
		return NULL;
	ptw_timeouts_unwatch(f->timeouts, PTW_SPAN_FRAME, ev->span_id);
	/* An open frame is on its thread's shadow stack (ended ones may be
	 * gone: streaming frees them). */
	struct fthread *ft = fthread(f, ev, false);
	struct ptw_frame *fr = NULL;
	for (size_t i = ft ? ft->sh.run.n : 0; i-- > 0 && !fr;)
		if (FRAME(&ft->sh.run.st[i])->id == ev->span_id)
			fr = FRAME(&ft->sh.run.st[i]);
	for (size_t c = 0; ft && c < ft->sh.nparked && !fr; c++)
		for (size_t i = 0; i < ft->sh.parked[c].n && !fr; i++)
			if (FRAME(&ft->sh.parked[c].st[i])->id == ev->span_id)
				fr = FRAME(&ft->sh.parked[c].st[i]);
	if (!fr || fr->open)
		return NULL;
	fr->open = xcalloc(1, sizeof(*fr->open));
	fr->open->set = true;
	fr->open->after_ns = ev->ns;
	fr->open->for_ns = ev->has_value ? ev->value : 0;
	fr->open->state = ev->state ? xstrdup(ev->state) : NULL;
	fr->open->wchan = ev->wchan ? xstrdup(ev->wchan) : NULL;
	fr->open->at = ev->routine;
	return fr;
}

static void complete(struct ptw_frames *f, struct fthread *ft, struct ptw_frame *fr, uint64_t ns)
{
	ptw_timeouts_unwatch(f->timeouts, PTW_SPAN_FRAME, fr->id);
	fr->status = PTW_FRAME_COMPLETED;
	fr->has_return = true;
	fr->return_ns = ns;
	/* Its time counts as its parent's children's (self time). */
	struct ptw_shadow_frame *parent = ptw_shadow_top(&ft->sh);
	if (parent && ns >= fr->entry_ns && !fr->entry_unknown)
		FRAME(parent)->child_ns += ns - fr->entry_ns;
	closed(f, fr);
}

static void unmatched(struct ptw_frames *f, struct ptw_frame *fr, uint64_t ns, const char *reason)
{
	ptw_timeouts_unwatch(f->timeouts, PTW_SPAN_FRAME, fr->id);
	fr->status = PTW_FRAME_UNMATCHED;
	fr->reason = reason;
	fr->has_left = true;
	fr->left_ns = ns;
	closed(f, fr);
}

/* Why frames skipped without their return (not a tail call) were left. */
static const char *skip_reason(const struct fthread *ft, const struct ptw_span *thread)
{
	if (ft->leaving == LEAVE_EXCEPTION)
		return "exception";
	if (ft->leaving == LEAVE_LONGJMP)
		return "longjmp";
	if (ft->exiting)
		return "thread_exit"; /* pthread_exit's unwinding */
	if (thread && thread->cancel_requested)
		return "cancel"; /* cancellation's unwinding */
	return "longjmp";	 /* the stack pointer jumped past them */
}

/* What the frames a thread's shadow stack leaves become. */
struct leave {
	struct ptw_frames *f;
	struct fthread *ft;
	const struct ptw_event *ev;
	const char *reason;	      /* of those left without a return */
	const char *abandoned_reason; /* of those in a context left for good */
	bool tail_call_is_one;	      /* a tail call's frame is unmatched "tail_call" */
	size_t left;		      /* how many were left */
	struct ptw_frame *returned;   /* the one that returned */
};

static void leave_frame(void *ctx, const struct ptw_shadow_frame *sf, enum ptw_shadow_how how)
{
	struct leave *lv = ctx;
	struct ptw_frame *fr = FRAME(sf);
	lv->left++;
	/* (the frames open at a throw are fewer by each one that ends) */
	if (lv->ft->thrown_over > lv->ft->sh.run.n)
		lv->ft->thrown_over = lv->ft->sh.run.n;
	if (how == PTW_SHADOW_RETURNED) {
		if (lv->ev->has_value) { /* before complete(): its closed callback sees it */
			fr->has_value = true;
			fr->value = lv->ev->value;
		}
		complete(lv->f, lv->ft, fr, lv->ev->ns);
		lv->returned = fr;
	} else if (how == PTW_SHADOW_ABANDONED) {
		unmatched(lv->f, fr, lv->ev->ns, lv->abandoned_reason);
	} else if (how == PTW_SHADOW_TAIL_CALL && lv->tail_call_is_one) {
		unmatched(lv->f, fr, lv->ev->ns, "tail_call");
	} else {
		unmatched(lv->f, fr, lv->ev->ns, lv->reason);
	}
}

static struct ptw_frame *on_entry(struct ptw_frames *f, const struct ptw_event *ev,
				  const struct ptw_span *thread)
{
	struct fthread *ft = fthread(f, ev, true);
	struct ptw_frame *fr = xcalloc(1, sizeof(*fr));
	/* A signal handler leaves nothing: the kernel entered it below (or
	 * beside, on sigaltstack) the frame it interrupted; nor does the first
	 * traced call of a handler that is not traced (above what it
	 * interrupted, on a sigaltstack there). */
	struct leave lv = { f, ft, ev, skip_reason(ft, thread), NULL, ft->leaving == LEAVE_NONE, 0,
			    NULL };
	ptw_shadow_enter(&ft->sh, ev->sp, ev->ret_addr, (uintptr_t)fr, ev->sig != 0, true,
			 leave_frame, &lv);
	if (lv.left && ft->leaving == LEAVE_LONGJMP)
		ft->leaving = LEAVE_NONE; /* landed */
	size_t n = ft->sh.run.n; /* fr is the innermost */
	const struct ptw_shadow_frame *parent = n > 1 ? &ft->sh.run.st[n - 2] : NULL;
	const struct ptw_shadow_signal *sg = ft->sh.nsigs ? &ft->sh.sigs[ft->sh.nsigs - 1] : NULL;
	if (f->n == f->cap) {
		f->cap = f->cap ? f->cap * 2 : 256;
		f->frames = xreallocarray(f->frames, f->cap, sizeof(*f->frames));
	}
	f->frames[f->n++] = fr;
	fr->id = ++f->next_id;
	fr->thread_span = thread ? thread->id : 0;
	fr->tid = ev->tid;
	fr->pid = thread ? thread->pid : ev->pid;
	fr->process = thread ? thread->process : ev->process;
	fr->function = ev->routine;
	fr->entry_ns = ev->ns;
	fr->entry_unknown = ev->before_attach;
	fr->sp = ev->sp;
	fr->ret = ev->ret_addr;
	/* the first traced frame of a handler that is not traced */
	fr->sig = ev->sig ? ev->sig : sg && sg->n == n - 1 ? sg->sig : 0;
	fr->status = PTW_FRAME_OPEN;
	ptw_timeouts_watch(f->timeouts, PTW_SPAN_FRAME, fr->id, fr->tid, fr->entry_ns);
	if (parent) {
		fr->parent = FRAME(parent)->id;
		fr->depth = FRAME(parent)->depth + 1;
	} else {
		fr->parent = (uint32_t)(ft->sh.run.base >> 32);
		fr->depth = (unsigned)ft->sh.run.base + 1;
	}
	return fr;
}

/* The thread is at sp (after a return to ret, or in a catch or after a
 * longjmp: ret 0). */
/*
 * A return to sp while an exception is on its way, of a frame open when it
 * was thrown: no such frame can return before a catch (its code does not
 * run meanwhile), so this is the catch landing where the return would
 * have (gcc puts the landing pad of a call that only throws at its return
 * address; the tracer's return breakpoint there fires with the return's
 * stack pointer). The frame is left by the exception.
 */
static bool landed(const struct fthread *ft, uint64_t sp)
{
	const struct ptw_shadow_context *run = &ft->sh.run;
	if (ft->leaving != LEAVE_EXCEPTION)
		return false;
	size_t k = 0; /* the frames that return leaves */
	while (k < run->n && ptw_shadow_above(run->st[run->n - 1 - k].sp, sp))
		k++;
	return k && run->n - k < ft->thrown_over;
}

static struct ptw_frame *on_at(struct ptw_frames *f, const struct ptw_event *ev,
			       const struct ptw_span *thread, uint64_t ret)
{
	struct fthread *ft = fthread(f, ev, false);
	if (!ft)
		return NULL;
	struct leave lv = { f, ft, ev, skip_reason(ft, thread), NULL, ev->kind == PTW_EV_FRAME_TAIL,
			    0, NULL };
	if (ev->kind == PTW_EV_FRAME_RETURN && !landed(ft, ev->sp))
		ptw_shadow_return(&ft->sh, ev->sp, ret, leave_frame, &lv);
	else if (ev->kind == PTW_EV_FRAME_TAIL)
		ptw_shadow_tail(&ft->sh, ev->sp, leave_frame, &lv);
	else
		ptw_shadow_land(&ft->sh, ev->sp, leave_frame, &lv);
	if (ft->leaving == LEAVE_LONGJMP || (ev->kind == PTW_EV_CATCH && ft->leaving == LEAVE_EXCEPTION))
		ft->leaving = LEAVE_NONE; /* landed, or caught */
	return lv.returned;
}

static struct ptw_frame *on_switch(struct ptw_frames *f, const struct ptw_event *ev)
{
	struct fthread *ft = fthread(f, ev, true);
	/* what a new context's frames nest under: the frame that switched */
	struct ptw_shadow_frame *top = ptw_shadow_top(&ft->sh);
	uint64_t base = top ? BASE(FRAME(top)->id, FRAME(top)->depth) : ft->sh.run.base;
	/* setcontext within the context it runs: frames below the landing
	 * point are left as by a longjmp */
	struct leave lv = { f, ft, ev, "longjmp", "context_abandoned", false, 0, NULL };
	unsigned done = ptw_shadow_switch(&ft->sh, ev->sp, ev->has_arg ? ev->arg : 0, leave_frame,
					  &lv);
	if (done & PTW_SHADOW_JUMPED) {
		if (ft->leaving == LEAVE_LONGJMP)
			ft->leaving = LEAVE_NONE; /* landed */
		return NULL;
	}
	if (!(done & PTW_SHADOW_RESUMED))
		ft->sh.run.base = base;
	ft->leaving = LEAVE_NONE;
	return NULL;
}

/* Every open frame of ft ends without a return. */
static void close_thread(struct ptw_frames *f, struct fthread *ft, const struct ptw_event *ev,
			 const char *reason)
{
	/* Contexts it never came back to; letting go says nothing of them. */
	bool ended = strcmp(reason, "detach") && strcmp(reason, "tracer_died");
	struct leave lv = { f, ft, ev, reason, ended ? "context_abandoned" : reason, false, 0, NULL };
	ptw_shadow_clear(&ft->sh, leave_frame, &lv);
	ptw_map_del(&f->threads, (uint64_t)ft->tid);
	fthread_free(ft);
}

/* The threads of ev's process end (its exit, its exec), or, with
 * everyone, those of every process (the session lets go, the tracer
 * died): with -f, one process's end is not its neighbours'. */
static void close_all(struct ptw_frames *f, const struct ptw_event *ev, bool everyone,
		      const char *reason)
{
	size_t it = 0;
	void *v;
	struct fthread **all = NULL;
	size_t n = 0;
	while (ptw_map_next(&f->threads, &it, NULL, &v)) {
		struct fthread *ft = v;
		if (!everyone && ft->process != ev->process)
			continue;
		all = xreallocarray(all, n + 1, sizeof(*all));
		all[n++] = v;
	}
	for (size_t i = 0; i < n; i++)
		close_thread(f, all[i], ev, reason);
	free(all);
}

/* How a thread that is ending leaves its open frames. */
static const char *end_reason(const struct fthread *ft, const struct ptw_event *ev,
			      const struct ptw_span *thread)
{
	if (ev->kind == PTW_EV_LWP_EXIT && ev->exit_how != PTW_EXIT_SELF)
		return "process_exit";
	if (ft->exiting || (thread && thread->exit_called))
		return "thread_exit";
	if (ev->kind == PTW_EV_THREAD_DEATH && ev->unwinding == 1 && ev->cancelled == 0)
		return "thread_exit"; /* its pthread_exit call came before the probes */
	if (ev->kind == PTW_EV_THREAD_DEATH && ev->unwinding == 1)
		return "cancel"; /* unwound without pthread_exit */
	if (thread && thread->cancel_requested && !thread->returned)
		return "cancel";
	return "thread_exit";
}

const struct ptw_frame *ptw_frames_consume(struct ptw_frames *f, const struct ptw_event *ev,
					   const struct ptw_span *thread)
{
	struct fthread *ft;
	switch (ev->kind) {
	case PTW_EV_FRAME_ENTRY:
		return on_entry(f, ev, thread);
	case PTW_EV_FRAME_RETURN:
		return on_at(f, ev, thread, ev->ret_addr);
	case PTW_EV_FRAME_TAIL:
		on_at(f, ev, thread, 0);
		break;
	case PTW_EV_CATCH:
		return on_at(f, ev, thread, 0);
	case PTW_EV_THROW:
		ft = fthread(f, ev, false);
		if (ft) {
			ft->leaving = LEAVE_EXCEPTION;
			ft->thrown_over = ft->sh.run.n;
		}
		break;
	case PTW_EV_LONGJMP:
		ft = fthread(f, ev, false);
		if (ft && ft->leaving == LEAVE_NONE)
			ft->leaving = LEAVE_LONGJMP;
		if (ft && ev->sp)
			on_at(f, ev, thread, 0); /* where it lands is known */
		break;
	case PTW_EV_CONTEXT_SWITCH:
		return on_switch(f, ev);
	case PTW_EV_SIGNAL_DELIVER:
		ptw_shadow_signal(&fthread(f, ev, true)->sh, ev->sp, ev->sig);
		break;
	case PTW_EV_SIGRETURN:
		ft = fthread(f, ev, false);
		if (ft)
			ptw_shadow_sigreturn(&ft->sh);
		break;
	case PTW_EV_EXIT_CALL:
		ft = fthread(f, ev, false);
		if (ft)
			ft->exiting = true;
		break;
	case PTW_EV_THREAD_DEATH:
	case PTW_EV_LWP_EXIT:
		ft = fthread(f, ev, false);
		if (ft)
			close_thread(f, ft, ev, end_reason(ft, ev, thread));
		break;
	case PTW_EV_PROCESS_EXIT:
		close_all(f, ev, false, "process_exit");
		break;
	case PTW_EV_EXEC:
		close_all(f, ev, false, "exec");
		break;
	case PTW_EV_DETACHED:
		/* The root's lets go of every process; a followed one's, of
		 * itself. */
		close_all(f, ev, ev->process == 0, "detach");
		break;
	case PTW_EV_TRACER_DIED:
		close_all(f, ev, true, "tracer_died");
		break;
	default:
		break;
	}
	return NULL;
}

/* ---- statistics ---- */

static uint64_t function_key(const struct ptw_location *loc)
{
	if (!loc)
		return 0;
	/* The same function may have several interned locations (a module
	 * list re-read): group by name and module. */
	uint64_t h = ptw_str_hash(loc->symbol ? loc->symbol : "?");
	if (loc->module)
		h ^= ptw_str_hash(loc->module) * 31;
	if (!loc->symbol)
		h ^= loc->has_offset ? loc->offset : loc->addr;
	return h ? h : 1;
}

static int by_total(const void *a, const void *b)
{
	const struct ptw_function_stats *x = a, *y = b;
	if (x->total_ns != y->total_ns)
		return x->total_ns < y->total_ns ? 1 : -1;
	return x->calls < y->calls ? 1 : x->calls > y->calls ? -1 : 0;
}

size_t ptw_frames_stats(const struct ptw_frames *f, struct ptw_function_stats **ret)
{
	struct ptw_map idx = { 0 };
	struct acc_fn *groups = NULL;
	size_t ng = 0;
	/* what the freed frames left (streaming), then the frames held */
	for (size_t i = 0; i < f->nfns; i++) {
		groups = xreallocarray(groups, ng + 1, sizeof(*groups));
		groups[ng] = f->fns[i];
		memset(&groups[ng].durations, 0, sizeof(groups[ng].durations));
		groups[ng].durations.exact_max = f->fns[i].durations.exact_max;
		ptw_dacc_merge(&groups[ng].durations, &f->fns[i].durations);
		ptw_map_put(&idx, groups[ng].key, (void *)(uintptr_t)(ng + 1));
		ng++;
	}
	for (size_t i = 0; i < f->n; i++) {
		const struct ptw_frame *fr = f->frames[i];
		uint64_t key = function_key(fr->function);
		uintptr_t gi = (uintptr_t)ptw_map_get(&idx, key);
		if (!gi) {
			groups = xreallocarray(groups, ng + 1, sizeof(*groups));
			memset(&groups[ng], 0, sizeof(*groups));
			groups[ng].key = key;
			groups[ng].function = fr->function;
			gi = ++ng;
			ptw_map_put(&idx, key, (void *)gi);
		}
		struct acc_fn *g = &groups[gi - 1];
		g->calls++;
		if (fr->status != PTW_FRAME_COMPLETED || fr->return_ns < fr->entry_ns)
			continue;
		uint64_t d = fr->return_ns - fr->entry_ns;
		g->completed++;
		if (fr->entry_unknown)
			continue; /* no duration */
		g->timed++;
		g->total += d;
		g->self += d > fr->child_ns ? d - fr->child_ns : 0;
		ptw_dacc_add(&g->durations, d);
	}
	struct ptw_function_stats *out = xcalloc(ng + 1, sizeof(*out));
	for (size_t i = 0; i < ng; i++) {
		struct ptw_distribution d;
		ptw_dacc_result(&groups[i].durations, &d);
		out[i] = (struct ptw_function_stats){
			.function = groups[i].function,
			.calls = groups[i].calls,
			.completed = groups[i].completed,
			.timed = groups[i].timed,
			.total_ns = groups[i].total,
			.self_ns = groups[i].self,
			.min_ns = d.min,
			.p50_ns = d.p50,
			.p99_ns = d.p99,
			.max_ns = d.max,
		};
		ptw_dacc_free(&groups[i].durations);
	}
	free(groups);
	ptw_map_free(&idx);
	qsort(out, ng, sizeof(*out), by_total);
	*ret = out;
	return ng;
}
