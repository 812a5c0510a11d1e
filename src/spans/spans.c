/* SPDX-License-Identifier: MIT */
/* The span engine; see ptw_spans.h. Pure: events in, spans out. */
#define _GNU_SOURCE
#include "ptw_spans.h"

#include <signal.h>
#include <stdlib.h>
#include <string.h>

#include "ptw_timeouts.h"
#include "ptw_frames.h"
#include "ptw_util.h"

#define PTHREAD_CANCELED_VALUE UINT64_MAX /* (void *)-1 */

struct ptw_spans {
	struct ptw_span **spans;
	size_t n, cap;
	struct ptw_map by_tid;	   /* tid -> live span */
	struct ptw_map by_pthread; /* pthread_t -> most recent span with it */
	struct ptw_map joins;	   /* joiner tid -> span it is joining */
	uint64_t threads_created;
	unsigned max_depth;
	uint64_t active, max_active;
	uint64_t (*series)[2];
	size_t nseries, series_cap;
	struct ptw_timeouts *timeouts; /* borrowed, may be NULL */
	bool let_go;		       /* PTW_EV_DETACHED seen */
	bool multi;		       /* events from more than one process (-f) */
	pid_t pid;		       /* the process of the event being consumed, */
	uint32_t process;	       /* and its id in the session (ptw_event.process) */
	struct ptw_frames *frames; /* --trace: frame spans (frames.c) */
	const struct ptw_frame *last_frame;
};

/* pthread_t values repeat across processes (a fork child has its parent's
 * layout): the key mixes in the process (a collision only costs a miss, as
 * the span's process is checked). Processes are told apart by their id in
 * the session, not their pid, which the kernel hands out again. */
static uint64_t pthread_key(uint32_t process, uint64_t pthread)
{
	return pthread ^ ((uint64_t)process * 0x9e3779b97f4a7c15ull);
}

struct ptw_spans *ptw_spans_new(void)
{
	struct ptw_spans *s = xcalloc(1, sizeof(struct ptw_spans));
	s->frames = ptw_frames_new();
	return s;
}

const struct ptw_frames *ptw_spans_frames(const struct ptw_spans *s)
{
	return s->frames;
}

const struct ptw_frame *ptw_spans_last_frame(const struct ptw_spans *s)
{
	return s->last_frame;
}

void ptw_spans_free(struct ptw_spans *s)
{
	if (!s)
		return;
	for (size_t i = 0; i < s->n; i++) {
		free(s->spans[i]->name);
		free(s->spans[i]->state);
		free(s->spans[i]->wchan);
		free(s->spans[i]->open_state);
		free(s->spans[i]->open_wchan);
		free(s->spans[i]->stack);
		free(s->spans[i]);
	}
	free(s->spans);
	ptw_map_free(&s->by_tid);
	ptw_map_free(&s->by_pthread);
	ptw_map_free(&s->joins);
	free(s->series);
	ptw_frames_free(s->frames);
	free(s);
}

void ptw_spans_set_timeouts(struct ptw_spans *s, struct ptw_timeouts *to)
{
	s->timeouts = to;
}

size_t ptw_spans_count(const struct ptw_spans *s)
{
	return s->n;
}

const struct ptw_span *ptw_spans_get(const struct ptw_spans *s, size_t i)
{
	return i < s->n ? s->spans[i] : NULL;
}

const struct ptw_span *ptw_spans_by_tid(const struct ptw_spans *s, pid_t tid)
{
	return ptw_map_get(&s->by_tid, (uint64_t)tid);
}

static struct ptw_span *live(struct ptw_spans *s, pid_t tid)
{
	return tid > 0 ? ptw_map_get(&s->by_tid, (uint64_t)tid) : NULL;
}

static void series_push(struct ptw_spans *s, uint64_t ns)
{
	if (s->nseries == s->series_cap) {
		s->series_cap = s->series_cap ? s->series_cap * 2 : 64;
		s->series = xreallocarray(s->series, s->series_cap, sizeof(*s->series));
	}
	s->series[s->nseries][0] = ns;
	s->series[s->nseries][1] = s->active;
	s->nseries++;
}

static void set_opt(struct ptw_opt *o, uint64_t v)
{
	o->set = true;
	o->v = v;
}

static void end_span(struct ptw_spans *s, struct ptw_span *sp, uint64_t ns, enum ptw_status status,
		     enum ptw_method method, const char *reason)
{
	if (sp->ended)
		return;
	ptw_timeouts_unwatch(s->timeouts, PTW_SPAN_THREAD, sp->id);
	sp->ended = true;
	sp->status = status;
	sp->method = method;
	sp->reason = reason;
	if (!sp->end_ns.set)
		set_opt(&sp->end_ns, ns);
	if (sp->active) {
		sp->active = false;
		s->active--;
		series_push(s, sp->end_ns.v);
	}
}

/* The thread behind tid is gone for good: its tid may be given out again. */
static void unbind_tid(struct ptw_spans *s, struct ptw_span *sp)
{
	/* Whatever its status becomes, its thread is no longer open. */
	ptw_timeouts_unwatch(s->timeouts, PTW_SPAN_THREAD, sp->id);
	if (live(s, sp->tid) == sp)
		ptw_map_del(&s->by_tid, (uint64_t)sp->tid);
}

static struct ptw_span *new_span(struct ptw_spans *s, pid_t tid, enum ptw_origin origin, uint64_t ns)
{
	struct ptw_span *old = live(s, tid);
	if (old) {
		/* We never saw the old thread leave, yet its tid is back: keep the
		 * old span, flag it if it had not ended, never merge the two. */
		if (!old->ended) {
			old->uncertain = true;
			end_span(s, old, ns, PTW_STATUS_UNMATCHED, PTW_METHOD_UNKNOWN, "tid_reused");
		}
		unbind_tid(s, old);
	}
	struct ptw_span *sp = xcalloc(1, sizeof(*sp));
	if (s->n == s->cap) {
		s->cap = s->cap ? s->cap * 2 : 64;
		s->spans = xreallocarray(s->spans, s->cap, sizeof(*s->spans));
	}
	s->spans[s->n++] = sp;
	sp->id = (uint32_t)s->n;
	sp->pid = s->pid;
	sp->process = s->process;
	sp->tid = tid;
	sp->origin = origin;
	sp->detached = -1;
	sp->status = PTW_STATUS_OPEN;
	sp->active = true;
	s->active++;
	if (s->active > s->max_active)
		s->max_active = s->active;
	series_push(s, ns);
	ptw_map_put(&s->by_tid, (uint64_t)tid, sp);
	ptw_timeouts_watch(s->timeouts, PTW_SPAN_THREAD, sp->id, tid, ns);
	return sp;
}

static void set_creator(struct ptw_spans *s, struct ptw_span *sp, pid_t creator_tid)
{
	struct ptw_span *creator = live(s, creator_tid);
	sp->creator_tid = creator_tid;
	if (creator) {
		sp->creator_span = creator->id;
		sp->depth = creator->depth + 1;
	} else {
		sp->depth = 1;
	}
	if (sp->depth > s->max_depth)
		s->max_depth = sp->depth;
}

static struct ptw_span *by_pthread(struct ptw_spans *s, uint64_t pthread)
{
	struct ptw_span *sp = pthread ? ptw_map_get(&s->by_pthread, pthread_key(s->process, pthread))
				      : NULL;
	return sp && sp->process == s->process ? sp : NULL;
}

/* A start routine entry or end for a tid we never saw created. */
static struct ptw_span *adopt(struct ptw_spans *s, pid_t tid, uint64_t ns)
{
	struct ptw_span *sp = live(s, tid);
	if (!sp) {
		sp = new_span(s, tid, PTW_ORIGIN_CREATED, ns);
		sp->uncertain = true;
		sp->depth = 1;
	}
	return sp;
}

static void on_death(struct ptw_spans *s, struct ptw_span *sp, const struct ptw_event *ev)
{
	if (sp->ended)
		return;
	if (ev->has_value)
		set_opt(&sp->value, ev->value);
	if (sp->returned) {
		set_opt(&sp->value, sp->return_value);
		end_span(s, sp, ev->ns, PTW_STATUS_COMPLETED, PTW_METHOD_RETURN, NULL);
	} else if (ev->unwinding == 0) {
		end_span(s, sp, ev->ns, PTW_STATUS_COMPLETED, PTW_METHOD_RETURN, NULL);
	} else if (ev->unwinding == 1 || sp->exit_called) {
		if (sp->exit_called) {
			set_opt(&sp->value, sp->exit_value);
			end_span(s, sp, ev->ns, PTW_STATUS_EXITED, PTW_METHOD_PTHREAD_EXIT, NULL);
		} else {
			/* Unwound without pthread_exit: cancellation is glibc's only
			 * other way there. */
			if (!sp->value.set)
				set_opt(&sp->value, PTHREAD_CANCELED_VALUE);
			if (!sp->cancel_requested)
				sp->uncertain = true;
			end_span(s, sp, ev->ns, PTW_STATUS_CANCELLED, PTW_METHOD_CANCEL, NULL);
		}
	} else {
		sp->uncertain = true;
		end_span(s, sp, ev->ns, PTW_STATUS_UNMATCHED, PTW_METHOD_UNKNOWN, "death_unclassified");
	}
}

static void on_lwp_exit(struct ptw_spans *s, struct ptw_span *sp, const struct ptw_event *ev)
{
	if (!sp->ended) {
		if (ev->exit_how == PTW_EXIT_SELF) {
			if (sp->returned) {
				set_opt(&sp->value, sp->return_value);
				end_span(s, sp, ev->ns, PTW_STATUS_COMPLETED, PTW_METHOD_RETURN, NULL);
			} else if (sp->exit_called) {
				set_opt(&sp->value, sp->exit_value);
				end_span(s, sp, ev->ns, PTW_STATUS_EXITED, PTW_METHOD_PTHREAD_EXIT, NULL);
			} else if (sp->origin == PTW_ORIGIN_CLONE) {
				/* A raw clone LWP's own exit is its normal end. */
				set_opt(&sp->value, (uint64_t)ev->exit_code);
				end_span(s, sp, ev->ns, PTW_STATUS_EXITED, PTW_METHOD_UNKNOWN, "lwp_exit");
			} else {
				sp->uncertain = true;
				end_span(s, sp, ev->ns, PTW_STATUS_UNMATCHED, PTW_METHOD_UNKNOWN,
					 "missed_death");
			}
		} else {
			/* Going down with the whole process: how it ends is only
			 * known at PROCESS_EXIT (exit code or signal). */
			if (!sp->end_ns.set)
				set_opt(&sp->end_ns, ev->ns);
		}
	}
	unbind_tid(s, sp);
}

static bool is_crash_signal(int sig)
{
	switch (sig) {
	case SIGSEGV:
	case SIGBUS:
	case SIGFPE:
	case SIGILL:
	case SIGABRT:
	case SIGTRAP:
	case SIGSYS:
		return true;
	default:
		return false;
	}
}

/* The pthread_t values of process pid mean nothing any more (its exit or
 * exec), nor do its joins in progress: the other processes' stay. */
static void forget_pthreads(struct ptw_spans *s, uint32_t process)
{
	for (size_t i = 0; i < s->n; i++) {
		struct ptw_span *sp = s->spans[i];
		uint64_t key = pthread_key(sp->process, sp->pthread);
		if (sp->process == process && sp->pthread && ptw_map_get(&s->by_pthread, key) == sp)
			ptw_map_del(&s->by_pthread, key);
	}
	/* and the joins in progress there */
	uint64_t *gone = xcalloc(s->joins.count + 1, sizeof(*gone));
	size_t n = 0, it = 0;
	uint64_t joiner;
	void *v;
	while (ptw_map_next(&s->joins, &it, &joiner, &v))
		if (((struct ptw_span *)v)->process == process)
			gone[n++] = joiner;
	for (size_t i = 0; i < n; i++)
		ptw_map_del(&s->joins, gone[i]);
	free(gone);
}

static void on_process_exit(struct ptw_spans *s, const struct ptw_event *ev)
{
	bool by_signal = ev->sig != 0;
	bool crash = by_signal && is_crash_signal(ev->sig);
	const char *reason = crash ? "crash" : by_signal ? "killed" : "process_exit";
	for (size_t i = 0; i < s->n; i++) {
		struct ptw_span *sp = s->spans[i];
		if (sp->ended || sp->process != ev->process)
			continue;
		uint64_t at = sp->end_ns.set ? sp->end_ns.v : ev->ns;
		if (sp->returned) {
			set_opt(&sp->value, sp->return_value);
			end_span(s, sp, at, PTW_STATUS_COMPLETED, PTW_METHOD_RETURN, NULL);
		} else if (by_signal && sp->fatal_sig == ev->sig) {
			sp->signal = ev->sig;
			end_span(s, sp, at, PTW_STATUS_UNMATCHED, PTW_METHOD_KILLED, reason);
		} else {
			if (by_signal)
				sp->signal = ev->sig;
			end_span(s, sp, at, PTW_STATUS_UNMATCHED, PTW_METHOD_PROCESS_EXIT, reason);
		}
		unbind_tid(s, sp);
	}
	if (!s->multi)
		ptw_map_free(&s->joins);
	else
		forget_pthreads(s, ev->process);
}

static void on_exec(struct ptw_spans *s, const struct ptw_event *ev)
{
	for (size_t i = 0; i < s->n; i++) {
		struct ptw_span *sp = s->spans[i];
		if (sp->process != ev->process)
			continue;
		if (!sp->ended) {
			uint64_t at = sp->end_ns.set ? sp->end_ns.v : ev->ns;
			end_span(s, sp, at, PTW_STATUS_UNMATCHED, PTW_METHOD_EXEC, "exec");
		}
		unbind_tid(s, sp);
	}
	if (!s->multi) {
		ptw_map_free(&s->joins);
		ptw_map_free(&s->by_pthread);
	} else {
		forget_pthreads(s, ev->process);
	}
}

static void on_join_return(struct ptw_spans *s, const struct ptw_event *ev)
{
	struct ptw_span *target = ptw_map_del(&s->joins, (uint64_t)ev->tid);
	if (!target || !target->joined || target->joiner_tid != ev->tid ||
	    target->join_return_ns.set)
		return;
	if (ev->has_value && ev->value == 0) {
		set_opt(&target->join_return_ns, ev->ns);
		target->detached = 0; /* only joinable threads can be joined */
	} else {
		/* EBUSY, ETIMEDOUT, EDEADLK...: that was no join. */
		target->joined = false;
		target->joiner_tid = 0;
	}
}

/* Whatever was still open is unmatched: how it ends will not be seen. The
 * thread may well run on, so no end time is made up. Unless ptwatch had let
 * go of the process already: then they were open at the detach, and stay so. */
static void on_tracer_died(struct ptw_spans *s, uint64_t ns)
{
	if (s->let_go)
		return;
	for (size_t i = 0; i < s->n; i++) {
		struct ptw_span *sp = s->spans[i];
		if (sp->ended)
			continue;
		ptw_timeouts_unwatch(s->timeouts, PTW_SPAN_THREAD, sp->id);
		sp->ended = true;
		sp->status = PTW_STATUS_UNMATCHED;
		sp->method = PTW_METHOD_UNKNOWN;
		sp->reason = "tracer_died";
		if (sp->active) {
			sp->active = false;
			s->active--;
			series_push(s, ns);
		}
	}
}

const struct ptw_span *ptw_spans_consume(struct ptw_spans *s, const struct ptw_event *ev)
{
	struct ptw_span *sp = NULL;

	/* Frames first: a thread's end closes its frames with what its span
	 * knew just before (pthread_exit called, cancel requested). */
	s->last_frame = ptw_frames_consume(s->frames, ev, live(s, ev->tid));
	s->pid = ev->pid;
	s->process = ev->process;
	if (ev->process)
		s->multi = true;
	switch (ev->kind) {
	case PTW_EV_IMAGE:
		sp = new_span(s, ev->tid, PTW_ORIGIN_MAIN, ev->ns);
		set_opt(&sp->create_ns, ev->ns);
		if (ev->pthread)
			sp->pthread = ev->pthread;
		break;
	case PTW_EV_PREEXISTING:
		sp = new_span(s, ev->tid, ev->other_tid == ev->tid ? PTW_ORIGIN_MAIN
								   : PTW_ORIGIN_PREEXISTING,
			      ev->ns);
		sp->pthread = ev->pthread;
		sp->start_routine = ev->routine;
		if (ev->has_value) /* when it began, if known (a fork child's: the fork) */
			set_opt(&sp->start_ns, ev->value);
		sp->depth = sp->origin == PTW_ORIGIN_MAIN ? 0 : 1;
		sp->detached = ev->detached;
		if (sp->depth > s->max_depth)
			s->max_depth = sp->depth;
		if (sp->pthread)
			ptw_map_put(&s->by_pthread, pthread_key(sp->process, sp->pthread), sp);
		break;
	case PTW_EV_MAIN_START:
		sp = live(s, ev->tid);
		if (sp && !sp->start_ns.set) {
			set_opt(&sp->start_ns, ev->ns);
			sp->start_routine = ev->routine;
			if (ev->pthread) {
				sp->pthread = ev->pthread;
				ptw_map_put(&s->by_pthread, pthread_key(sp->process, sp->pthread), sp);
			}
		}
		break;
	case PTW_EV_THREAD_CREATE:
	case PTW_EV_LWP_CREATE:
		sp = new_span(s, ev->other_tid,
			      ev->kind == PTW_EV_THREAD_CREATE ? PTW_ORIGIN_CREATED : PTW_ORIGIN_CLONE,
			      ev->ns);
		set_opt(&sp->create_ns, ev->ns);
		set_creator(s, sp, ev->tid);
		sp->pthread = ev->pthread;
		sp->start_routine = ev->routine;
		sp->create_site = ev->site;
		sp->detached = ev->detached;
		if (ev->has_arg)
			set_opt(&sp->arg, ev->arg);
		if (sp->pthread)
			ptw_map_put(&s->by_pthread, pthread_key(sp->process, sp->pthread), sp);
		s->threads_created++;
		break;
	case PTW_EV_THREAD_START:
		sp = adopt(s, ev->tid, ev->ns);
		if (sp->start_ns.set)
			break; /* a later call of the same function, not the start */
		set_opt(&sp->start_ns, ev->ns);
		if (ev->routine)
			sp->start_routine = ev->routine;
		if (ev->has_arg)
			set_opt(&sp->arg, ev->arg);
		break;
	case PTW_EV_THREAD_RETURN:
		sp = live(s, ev->tid);
		if (!sp || sp->ended || sp->returned)
			break;
		sp->returned = true;
		sp->return_value = ev->value;
		if (sp->origin == PTW_ORIGIN_MAIN) {
			/* main() returned: the main thread's logical span is over. */
			set_opt(&sp->value, ev->value);
			end_span(s, sp, ev->ns, PTW_STATUS_COMPLETED, PTW_METHOD_RETURN, NULL);
		}
		break;
	case PTW_EV_EXIT_CALL:
		sp = live(s, ev->tid);
		if (sp && !sp->ended && !sp->exit_called) {
			sp->exit_called = true;
			sp->exit_value = ev->value;
		}
		break;
	case PTW_EV_CANCEL_REQUEST:
		sp = by_pthread(s, ev->pthread);
		if (sp && !sp->ended && !sp->cancel_requested) {
			sp->cancel_requested = true;
			sp->cancel_by = ev->tid;
		}
		break;
	case PTW_EV_DETACH_CALL:
		sp = by_pthread(s, ev->pthread);
		if (sp)
			sp->detached = 1;
		break;
	case PTW_EV_JOIN_CALL:
		sp = by_pthread(s, ev->pthread);
		if (sp && !sp->joined && sp->origin != PTW_ORIGIN_MAIN) {
			sp->joined = true;
			sp->joiner_tid = ev->tid;
			sp->join_call_ns = ev->ns;
			ptw_map_put(&s->joins, (uint64_t)ev->tid, sp);
		}
		break;
	case PTW_EV_JOIN_RETURN:
		sp = ptw_map_get(&s->joins, (uint64_t)ev->tid);
		on_join_return(s, ev);
		break;
	case PTW_EV_THREAD_DEATH:
		sp = adopt(s, ev->tid, ev->ns);
		on_death(s, sp, ev);
		break;
	case PTW_EV_THREAD_NAME:
		sp = live(s, ev->tid);
		if (sp && ev->name) {
			free(sp->name);
			sp->name = xstrdup(ev->name);
		}
		break;
	case PTW_EV_LWP_EXIT:
		sp = live(s, ev->tid);
		if (sp)
			on_lwp_exit(s, sp, ev);
		break;
	case PTW_EV_FATAL_SIGNAL:
		sp = live(s, ev->tid);
		if (sp)
			sp->fatal_sig = ev->sig;
		break;
	case PTW_EV_EXEC:
		sp = live(s, ev->other_tid);
		on_exec(s, ev);
		break;
	case PTW_EV_PROCESS_EXIT:
		on_process_exit(s, ev);
		break;
	case PTW_EV_DETACHED:
		/* The threads run on untraced: their spans stay open. */
		s->let_go = true;
		for (size_t i = 0; i < s->n; i++)
			ptw_timeouts_unwatch(s->timeouts, PTW_SPAN_THREAD, s->spans[i]->id);
		break;
	case PTW_EV_INTERRUPT:
		break;
	case PTW_EV_SPAN_OPEN:
		if (ev->span_kind != PTW_SPAN_THREAD || !ev->span_id || ev->span_id > s->n)
			break; /* another engine's span */
		sp = s->spans[ev->span_id - 1];
		ptw_timeouts_unwatch(s->timeouts, PTW_SPAN_THREAD, sp->id);
		if (sp->ended || sp->open_after_ns.set)
			break;
		if (ev->name) {
			free(sp->name);
			sp->name = xstrdup(ev->name);
		}
		set_opt(&sp->open_after_ns, ev->ns);
		sp->open_for_ns = ev->has_value ? ev->value : 0;
		sp->open_state = ev->state ? xstrdup(ev->state) : NULL;
		sp->open_wchan = ev->wchan ? xstrdup(ev->wchan) : NULL;
		sp->open_at = ev->routine;
		break;
	case PTW_EV_TRACER_DIED:
		on_tracer_died(s, ev->ns);
		break;
	case PTW_EV_FRAME_ENTRY:
	case PTW_EV_FRAME_RETURN:
	case PTW_EV_THROW:
	case PTW_EV_CATCH:
	case PTW_EV_LONGJMP:
		sp = live(s, ev->tid);
		break;
	case PTW_EV_THREAD_STATE:
		sp = live(s, ev->tid);
		if (!sp)
			break;
		free(sp->state);
		free(sp->wchan);
		free(sp->stack);
		sp->state = ev->state ? xstrdup(ev->state) : NULL;
		sp->wchan = ev->wchan ? xstrdup(ev->wchan) : NULL;
		sp->stack = xcalloc(ev->nstack + 1, sizeof(*sp->stack));
		for (size_t i = 0; i < ev->nstack; i++)
			sp->stack[i] = ev->stack[i];
		sp->nstack = ev->nstack;
		sp->wait_kind = ev->wait_kind;
		sp->wait_object = ev->wait_object;
		sp->wait_owner = ev->wait_owner;
		break;
	}
	ptw_dbg(PTW_DBG_SPANS, "%s tid=%d -> span %u", ptw_event_kind_name(ev->kind), ev->tid,
		sp ? sp->id : 0);
	return sp;
}

void ptw_spans_finish(struct ptw_spans *s)
{
	for (size_t i = 0; i < s->n; i++) {
		struct ptw_span *sp = s->spans[i];
		if (!sp->ended) {
			sp->status = PTW_STATUS_OPEN;
			sp->method = PTW_METHOD_NONE;
			sp->end_ns.set = false;
		}
	}
}

/* ---- metrics ---- */

static int cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
	return x < y ? -1 : x > y;
}

void ptw_distribution(uint64_t *v, size_t n, struct ptw_distribution *d)
{
	memset(d, 0, sizeof(*d));
	d->count = n;
	if (!n)
		return;
	qsort(v, n, sizeof(*v), cmp_u64);
	double sum = 0;
	for (size_t i = 0; i < n; i++)
		sum += (double)v[i];
	/* nearest rank: the smallest value with at least p% at or below it */
#define RANK(p) v[(size_t)(((p) * n + 99) / 100) - 1]
	d->min = v[0];
	d->p50 = RANK(50);
	d->p90 = RANK(90);
	d->p99 = RANK(99);
#undef RANK
	d->max = v[n - 1];
	d->mean = sum / (double)n;
}

static int cmp_edge(const void *a, const void *b)
{
	const int64_t *x = a, *y = b;
	if (x[0] != y[0])
		return x[0] < y[0] ? -1 : 1;
	return x[1] < y[1] ? -1 : x[1] > y[1]; /* an end before a start at the same ns */
}

static void metrics(struct ptw_spans *s, bool one, uint32_t process, struct ptw_metrics *m)
{
	memset(m, 0, sizeof(*m));
	uint64_t *spawn = xcalloc(s->n + 1, sizeof(uint64_t));
	uint64_t *life = xcalloc(s->n + 1, sizeof(uint64_t));
	uint64_t *wait = xcalloc(s->n + 1, sizeof(uint64_t));
	int64_t(*edges)[2] = one ? xcalloc(2 * s->n + 1, sizeof(*edges)) : NULL;
	size_t nspawn = 0, nlife = 0, nwait = 0, nedges = 0;
	for (size_t i = 0; i < s->n; i++) {
		const struct ptw_span *sp = s->spans[i];
		if (one) {
			/* One process's share: its spans, its own peaks. */
			if (sp->process != process)
				continue;
			m->threads_seen++;
			m->threads_created += sp->origin == PTW_ORIGIN_CREATED ||
					      sp->origin == PTW_ORIGIN_CLONE;
			if (sp->depth > m->max_depth)
				m->max_depth = sp->depth;
			const struct ptw_opt *from = sp->create_ns.set ? &sp->create_ns : &sp->start_ns;
			edges[nedges][0] = from->set ? (int64_t)from->v : 0;
			edges[nedges++][1] = 1;
			if (sp->end_ns.set) {
				edges[nedges][0] = (int64_t)sp->end_ns.v;
				edges[nedges++][1] = -1;
			}
		}
		if (sp->origin != PTW_ORIGIN_MAIN && sp->create_ns.set && sp->start_ns.set &&
		    sp->start_ns.v >= sp->create_ns.v)
			spawn[nspawn++] = sp->start_ns.v - sp->create_ns.v;
		if (sp->start_ns.set && sp->end_ns.set && sp->end_ns.v >= sp->start_ns.v)
			life[nlife++] = sp->end_ns.v - sp->start_ns.v;
		if (sp->joined && sp->join_return_ns.set)
			wait[nwait++] = sp->join_return_ns.v - sp->join_call_ns;
		if (sp->status == PTW_STATUS_OPEN)
			m->open_spans++;
		if (sp->status == PTW_STATUS_UNMATCHED)
			m->unmatched_spans++;
		if (sp->open_after_ns.set)
			m->open_timeouts++;
		bool finished = sp->status == PTW_STATUS_COMPLETED || sp->status == PTW_STATUS_EXITED ||
				sp->status == PTW_STATUS_CANCELLED;
		if (sp->origin != PTW_ORIGIN_MAIN && sp->detached == 0 && finished &&
		    !(sp->joined && sp->join_return_ns.set))
			m->unjoined++;
	}
	ptw_distribution(spawn, nspawn, &m->spawn_latency);
	ptw_distribution(life, nlife, &m->lifetime);
	ptw_distribution(wait, nwait, &m->join_wait);
	free(spawn);
	free(life);
	free(wait);
	if (one) {
		qsort(edges, nedges, sizeof(*edges), cmp_edge);
		int64_t active = 0;
		for (size_t i = 0; i < nedges; i++) {
			active += edges[i][1];
			if (active > (int64_t)m->max_active)
				m->max_active = (uint64_t)active;
		}
		free(edges);
		return;
	}
	m->threads_seen = s->n;
	m->threads_created = s->threads_created;
	m->max_active = s->max_active;
	m->max_depth = s->max_depth;
	m->active_series = (const uint64_t(*)[2])s->series;
	m->active_series_len = s->nseries;
}

void ptw_spans_metrics(struct ptw_spans *s, struct ptw_metrics *m)
{
	metrics(s, false, 0, m);
}

void ptw_spans_metrics_of(struct ptw_spans *s, uint32_t process, struct ptw_metrics *m)
{
	metrics(s, true, process, m);
}

const char *ptw_status_name(enum ptw_status st)
{
	static const char *const names[] = { "open", "completed", "exited", "cancelled", "unmatched" };
	return (unsigned)st < PTW_ARRAY_SIZE(names) ? names[st] : "unmatched";
}

const char *ptw_method_name(enum ptw_method m)
{
	static const char *const names[] = { "unknown", "return", "pthread_exit", "cancel",
					     "process_exit", "exec", "killed", "detach", "unknown" };
	return (unsigned)m < PTW_ARRAY_SIZE(names) ? names[m] : "unknown";
}

const char *ptw_origin_name(enum ptw_origin o)
{
	static const char *const names[] = { "main", "created", "preexisting", "clone" };
	return (unsigned)o < PTW_ARRAY_SIZE(names) ? names[o] : "created";
}

const char *ptw_event_kind_name(enum ptw_event_kind kind)
{
	static const char *const names[] = {
		[PTW_EV_IMAGE] = "image",
		[PTW_EV_PREEXISTING] = "preexisting",
		[PTW_EV_MAIN_START] = "main_start",
		[PTW_EV_THREAD_CREATE] = "create",
		[PTW_EV_LWP_CREATE] = "clone",
		[PTW_EV_THREAD_START] = "start",
		[PTW_EV_THREAD_RETURN] = "return",
		[PTW_EV_EXIT_CALL] = "pthread_exit",
		[PTW_EV_CANCEL_REQUEST] = "cancel",
		[PTW_EV_DETACH_CALL] = "detach",
		[PTW_EV_JOIN_CALL] = "join",
		[PTW_EV_JOIN_RETURN] = "joined",
		[PTW_EV_THREAD_DEATH] = "death",
		[PTW_EV_THREAD_NAME] = "name",
		[PTW_EV_LWP_EXIT] = "lwp_exit",
		[PTW_EV_FATAL_SIGNAL] = "signal",
		[PTW_EV_EXEC] = "exec",
		[PTW_EV_PROCESS_EXIT] = "process_exit",
		[PTW_EV_DETACHED] = "detached",
		[PTW_EV_INTERRUPT] = "interrupt",
		[PTW_EV_THREAD_STATE] = "state",
		[PTW_EV_TRACER_DIED] = "tracer_died",
		[PTW_EV_SPAN_OPEN] = "open",
		[PTW_EV_FRAME_ENTRY] = "call",
		[PTW_EV_FRAME_RETURN] = "ret",
		[PTW_EV_THROW] = "throw",
		[PTW_EV_CATCH] = "catch",
		[PTW_EV_LONGJMP] = "longjmp",
	};
	return (unsigned)kind < PTW_ARRAY_SIZE(names) && names[kind] ? names[kind] : "?";
}

const char *ptw_wait_kind_name(enum ptw_wait_kind kind)
{
	static const char *const names[] = { "none", "mutex", "join", "rwlock", "cond", "other" };
	return (unsigned)kind < PTW_ARRAY_SIZE(names) ? names[kind] : "other";
}

/* ---- deadlocks ---- */

/* The span a live span waits for, by its owner tid; NULL when none. */
static const struct ptw_span *waits_on(const struct ptw_spans *s, const struct ptw_span *sp)
{
	if (sp->ended || !sp->wait_owner || sp->wait_owner == sp->tid)
		return NULL;
	const struct ptw_span *o = ptw_spans_by_tid(s, sp->wait_owner);
	return o && !o->ended ? o : NULL;
}

size_t ptw_spans_deadlocks(const struct ptw_spans *s, struct ptw_deadlock **ret)
{
	/* Each thread waits for at most one other: the graph is functional, so
	 * following the edges from every node finds every cycle. colour: 0
	 * unseen, 1 on the current path, 2 done. */
	uint8_t *colour = xcalloc(s->n + 1, 1);
	struct ptw_deadlock *out = NULL;
	size_t nout = 0;
	const struct ptw_span **path = xcalloc(s->n + 1, sizeof(*path));
	for (size_t i = 0; i < s->n; i++) {
		size_t len = 0;
		const struct ptw_span *sp = s->spans[i];
		while (sp && !colour[sp->id - 1]) {
			colour[sp->id - 1] = 1;
			path[len++] = sp;
			sp = waits_on(s, sp);
		}
		if (sp && colour[sp->id - 1] == 1) {
			/* sp is on this path: the cycle is path[k..len) */
			size_t k = 0;
			while (path[k] != sp)
				k++;
			out = xreallocarray(out, nout + 1, sizeof(*out));
			out[nout].n = len - k;
			out[nout].spans = xcalloc(len - k, sizeof(*out[nout].spans));
			for (size_t j = k; j < len; j++)
				out[nout].spans[j - k] = path[j];
			nout++;
		}
		for (size_t j = 0; j < len; j++)
			colour[path[j]->id - 1] = 2;
	}
	free(colour);
	free(path);
	*ret = out;
	return nout;
}

void ptw_deadlocks_free(struct ptw_deadlock *d, size_t n)
{
	for (size_t i = 0; i < n; i++)
		free(d[i].spans);
	free(d);
}
