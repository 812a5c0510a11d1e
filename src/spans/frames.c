/* SPDX-License-Identifier: MIT */
/* Frame spans; see ptw_frames.h. Pure: events in, frames out. */
#define _GNU_SOURCE
#include "ptw_frames.h"

#include <stdlib.h>
#include <string.h>

#include "ptw_spans.h"
#include "ptw_symbols.h"
#include "ptw_timeouts.h"
#include "ptw_util.h"

/* ---- shadow stack rules ---- */

/* Is a frame entered at fsp left once the thread is at sp (above it)? */
static bool above(uint64_t fsp, uint64_t sp)
{
	return fsp < sp && sp - fsp < PTW_SHADOW_WINDOW;
}

/* The rules, on any stack layout: sp_of(i) for i = 0 (innermost) up. */
#define LEFT_AT_ENTRY(n, sp_of, ret_of, sp, ret, tail)                                            \
	do {                                                                                      \
		size_t k_ = 0;                                                                    \
		/* A new call at sp: every frame whose slot is at or below sp is over       \
		 * (its slot is being reused, or was popped). */                            \
		while (k_ < (n) && (above(sp_of(k_), (sp)) || sp_of(k_) == (sp)))                 \
			k_++;                                                                     \
		/* same slot, same return address: a jmp */                                       \
		*(tail) = k_ && sp_of(k_ - 1) == (sp) && ret_of(k_ - 1) == (ret);                 \
		left_ = k_;                                                                       \
	} while (0)

#define LEFT_AT(n, sp_of, ret_of, sp, ret, returned)                                              \
	do {                                                                                      \
		size_t k_ = 0;                                                                    \
		while (k_ < (n) && above(sp_of(k_), (sp)))                                        \
			k_++;                                                                     \
		*(returned) = k_ && (ret) && sp_of(k_ - 1) + 8 == (sp) && ret_of(k_ - 1) == (ret); \
		left_ = k_;                                                                       \
	} while (0)

size_t ptw_shadow_left_at_entry(const struct ptw_shadow_frame *st, size_t n, uint64_t sp,
				uint64_t ret, bool *ret_tail_call)
{
	size_t left_;
#define SP(i) st[n - 1 - (i)].sp
#define RET(i) st[n - 1 - (i)].ret
	LEFT_AT_ENTRY(n, SP, RET, sp, ret, ret_tail_call);
	return left_;
}

size_t ptw_shadow_left_at(const struct ptw_shadow_frame *st, size_t n, uint64_t sp, uint64_t ret,
			  bool *ret_returned)
{
	size_t left_;
	LEFT_AT(n, SP, RET, sp, ret, ret_returned);
	return left_;
#undef SP
#undef RET
}

/* ---- frame spans ---- */

/* What a thread's frames are going through. */
enum leaving {
	LEAVE_NONE,
	LEAVE_EXCEPTION, /* _Unwind_RaiseException seen, no catch yet */
	LEAVE_LONGJMP,	 /* longjmp called, not landed yet */
};

struct fthread {
	pid_t tid;
	struct ptw_frame **stack; /* innermost last */
	size_t n, cap;
	enum leaving leaving;
	bool exiting; /* pthread_exit called */
};

struct ptw_frames {
	struct ptw_frame **frames;
	size_t n, cap;
	struct ptw_map threads;	       /* tid -> struct fthread* */
	struct ptw_timeouts *timeouts; /* borrowed, may be NULL */
};

struct ptw_frames *ptw_frames_new(void)
{
	return xcalloc(1, sizeof(struct ptw_frames));
}

static void fthread_free(struct fthread *ft)
{
	if (ft) {
		free(ft->stack);
		free(ft);
	}
}

void ptw_frames_free(struct ptw_frames *f)
{
	if (!f)
		return;
	for (size_t i = 0; i < f->n; i++) {
		free(f->frames[i]->open.state);
		free(f->frames[i]->open.wchan);
		free(f->frames[i]);
	}
	free(f->frames);
	size_t it = 0;
	void *v;
	while (ptw_map_next(&f->threads, &it, NULL, &v))
		fthread_free(v);
	ptw_map_free(&f->threads);
	free(f);
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

static struct fthread *fthread(struct ptw_frames *f, pid_t tid, bool create)
{
	struct fthread *ft = ptw_map_get(&f->threads, (uint64_t)tid);
	if (!ft && create) {
		ft = xcalloc(1, sizeof(*ft));
		ft->tid = tid;
		ptw_map_put(&f->threads, (uint64_t)tid, ft);
	}
	return ft;
}

void ptw_frames_set_timeouts(struct ptw_frames *f, struct ptw_timeouts *to)
{
	f->timeouts = to;
}

const struct ptw_frame *ptw_frames_mark_open(struct ptw_frames *f, const struct ptw_event *ev)
{
	if (ev->span_kind != PTW_SPAN_FRAME || !ev->span_id || ev->span_id > f->n)
		return NULL;
	struct ptw_frame *fr = f->frames[ev->span_id - 1];
	ptw_timeouts_unwatch(f->timeouts, PTW_SPAN_FRAME, fr->id);
	if (fr->status != PTW_FRAME_OPEN || fr->open.set)
		return NULL;
	fr->open.set = true;
	fr->open.after_ns = ev->ns;
	fr->open.for_ns = ev->has_value ? ev->value : 0;
	fr->open.state = ev->state ? xstrdup(ev->state) : NULL;
	fr->open.wchan = ev->wchan ? xstrdup(ev->wchan) : NULL;
	fr->open.at = ev->routine;
	return fr;
}

static void complete(struct ptw_frames *f, struct fthread *ft, struct ptw_frame *fr, uint64_t ns)
{
	ptw_timeouts_unwatch(f->timeouts, PTW_SPAN_FRAME, fr->id);
	fr->status = PTW_FRAME_COMPLETED;
	fr->has_return = true;
	fr->return_ns = ns;
	/* Its time counts as its parent's children's (self time). */
	if (ft->n && ns >= fr->entry_ns)
		ft->stack[ft->n - 1]->child_ns += ns - fr->entry_ns;
}

static void unmatched(struct ptw_frames *f, struct ptw_frame *fr, uint64_t ns, const char *reason)
{
	ptw_timeouts_unwatch(f->timeouts, PTW_SPAN_FRAME, fr->id);
	fr->status = PTW_FRAME_UNMATCHED;
	fr->reason = reason;
	fr->has_left = true;
	fr->left_ns = ns;
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

/* Pops the k innermost frames, all unmatched with reason. */
static void pop_unmatched(struct ptw_frames *f, struct fthread *ft, size_t k, uint64_t ns,
			  const char *reason)
{
	for (size_t i = 0; i < k; i++)
		unmatched(f, ft->stack[--ft->n], ns, reason);
}

/* How many top frames a thread seen at sp has left (see ptw_shadow_*):
 * the same rules, on the thread's own stack (no copy: deep recursion). */
static size_t left_at(const struct fthread *ft, bool entry, uint64_t sp, uint64_t ret, bool *flag)
{
	size_t left_;
	size_t n = ft->n;
#define SP(i) ft->stack[n - 1 - (i)]->sp
#define RET(i) ft->stack[n - 1 - (i)]->ret
	if (entry)
		LEFT_AT_ENTRY(n, SP, RET, sp, ret, flag);
	else
		LEFT_AT(n, SP, RET, sp, ret, flag);
#undef SP
#undef RET
	return left_;
}

static struct ptw_frame *on_entry(struct ptw_frames *f, const struct ptw_event *ev,
				  const struct ptw_span *thread)
{
	struct fthread *ft = fthread(f, ev->tid, true);
	bool tail;
	size_t k = left_at(ft, true, ev->sp, ev->ret_addr, &tail);
	if (k) {
		const char *why = skip_reason(ft, thread);
		bool plain = ft->leaving == LEAVE_NONE;
		pop_unmatched(f, ft, k - 1, ev->ns, why);
		pop_unmatched(f, ft, 1, ev->ns, tail && plain ? "tail_call" : why);
		if (ft->leaving == LEAVE_LONGJMP)
			ft->leaving = LEAVE_NONE; /* landed */
	}
	struct ptw_frame *fr = xcalloc(1, sizeof(*fr));
	if (f->n == f->cap) {
		f->cap = f->cap ? f->cap * 2 : 256;
		f->frames = xreallocarray(f->frames, f->cap, sizeof(*f->frames));
	}
	f->frames[f->n++] = fr;
	fr->id = (uint32_t)f->n;
	fr->thread_span = thread ? thread->id : 0;
	fr->tid = ev->tid;
	fr->function = ev->routine;
	fr->entry_ns = ev->ns;
	fr->sp = ev->sp;
	fr->ret = ev->ret_addr;
	fr->status = PTW_FRAME_OPEN;
	ptw_timeouts_watch(f->timeouts, PTW_SPAN_FRAME, fr->id, fr->tid, fr->entry_ns);
	if (ft->n) {
		fr->parent = ft->stack[ft->n - 1]->id;
		fr->depth = ft->stack[ft->n - 1]->depth + 1;
	} else {
		fr->depth = 1;
	}
	if (ft->n == ft->cap) {
		ft->cap = ft->cap ? ft->cap * 2 : 16;
		ft->stack = xreallocarray(ft->stack, ft->cap, sizeof(*ft->stack));
	}
	ft->stack[ft->n++] = fr;
	return fr;
}

/* The thread is at sp (after a return to ret, or in a catch: ret 0). */
static struct ptw_frame *on_at(struct ptw_frames *f, const struct ptw_event *ev,
			       const struct ptw_span *thread, uint64_t ret)
{
	struct fthread *ft = fthread(f, ev->tid, false);
	if (!ft)
		return NULL;
	bool returned;
	size_t k = left_at(ft, false, ev->sp, ret, &returned);
	struct ptw_frame *fr = NULL;
	if (k) {
		pop_unmatched(f, ft, returned ? k - 1 : k, ev->ns, skip_reason(ft, thread));
		if (returned) {
			fr = ft->stack[--ft->n];
			complete(f, ft, fr, ev->ns);
			if (ev->has_value) {
				fr->has_value = true;
				fr->value = ev->value;
			}
		}
	}
	if (ft->leaving == LEAVE_LONGJMP || (ev->kind == PTW_EV_CATCH && ft->leaving == LEAVE_EXCEPTION))
		ft->leaving = LEAVE_NONE; /* landed, or caught */
	return fr;
}

/* Every open frame of ft ends without a return. */
static void close_thread(struct ptw_frames *f, struct fthread *ft, uint64_t ns, const char *reason)
{
	pop_unmatched(f, ft, ft->n, ns, reason);
	ptw_map_del(&f->threads, (uint64_t)ft->tid);
	fthread_free(ft);
}

static void close_all(struct ptw_frames *f, uint64_t ns, const char *reason)
{
	size_t it = 0;
	void *v;
	struct fthread **all = NULL;
	size_t n = 0;
	while (ptw_map_next(&f->threads, &it, NULL, &v)) {
		all = xreallocarray(all, n + 1, sizeof(*all));
		all[n++] = v;
	}
	for (size_t i = 0; i < n; i++)
		close_thread(f, all[i], ns, reason);
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
	case PTW_EV_CATCH:
		return on_at(f, ev, thread, 0);
	case PTW_EV_THROW:
		ft = fthread(f, ev->tid, false);
		if (ft)
			ft->leaving = LEAVE_EXCEPTION;
		break;
	case PTW_EV_LONGJMP:
		ft = fthread(f, ev->tid, false);
		if (ft && ft->leaving == LEAVE_NONE)
			ft->leaving = LEAVE_LONGJMP;
		if (ft && ev->sp)
			on_at(f, ev, thread, 0); /* where it lands is known */
		break;
	case PTW_EV_EXIT_CALL:
		ft = fthread(f, ev->tid, false);
		if (ft)
			ft->exiting = true;
		break;
	case PTW_EV_THREAD_DEATH:
	case PTW_EV_LWP_EXIT:
		ft = fthread(f, ev->tid, false);
		if (ft)
			close_thread(f, ft, ev->ns, end_reason(ft, ev, thread));
		break;
	case PTW_EV_PROCESS_EXIT:
		close_all(f, ev->ns, "process_exit");
		break;
	case PTW_EV_EXEC:
		close_all(f, ev->ns, "exec");
		break;
	case PTW_EV_DETACHED:
		close_all(f, ev->ns, "detach");
		break;
	case PTW_EV_TRACER_DIED:
		close_all(f, ev->ns, "tracer_died");
		break;
	default:
		break;
	}
	return NULL;
}

/* ---- statistics ---- */

struct group {
	const struct ptw_location *function;
	uint64_t calls, completed, total, self;
	uint64_t *durations;
	size_t nd, cap;
};

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
	struct group *groups = NULL;
	size_t ng = 0;
	for (size_t i = 0; i < f->n; i++) {
		const struct ptw_frame *fr = f->frames[i];
		uint64_t key = function_key(fr->function);
		uintptr_t gi = (uintptr_t)ptw_map_get(&idx, key);
		if (!gi) {
			groups = xreallocarray(groups, ng + 1, sizeof(*groups));
			memset(&groups[ng], 0, sizeof(*groups));
			groups[ng].function = fr->function;
			gi = ++ng;
			ptw_map_put(&idx, key, (void *)gi);
		}
		struct group *g = &groups[gi - 1];
		g->calls++;
		if (fr->status != PTW_FRAME_COMPLETED || fr->return_ns < fr->entry_ns)
			continue;
		uint64_t d = fr->return_ns - fr->entry_ns;
		g->completed++;
		g->total += d;
		g->self += d > fr->child_ns ? d - fr->child_ns : 0;
		if (g->nd == g->cap) {
			g->cap = g->cap ? g->cap * 2 : 16;
			g->durations = xreallocarray(g->durations, g->cap, sizeof(*g->durations));
		}
		g->durations[g->nd++] = d;
	}
	struct ptw_function_stats *out = xcalloc(ng + 1, sizeof(*out));
	for (size_t i = 0; i < ng; i++) {
		struct ptw_distribution d;
		ptw_distribution(groups[i].durations, groups[i].nd, &d);
		out[i] = (struct ptw_function_stats){
			.function = groups[i].function,
			.calls = groups[i].calls,
			.completed = groups[i].completed,
			.total_ns = groups[i].total,
			.self_ns = groups[i].self,
			.min_ns = d.min,
			.p50_ns = d.p50,
			.p99_ns = d.p99,
			.max_ns = d.max,
		};
		free(groups[i].durations);
	}
	free(groups);
	ptw_map_free(&idx);
	qsort(out, ng, sizeof(*out), by_total);
	*ret = out;
	return ng;
}
