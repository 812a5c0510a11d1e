/* SPDX-License-Identifier: MIT */
/*
 * The span engine; see ptw_spans.h. Pure: events in, spans out.
 */
#define _GNU_SOURCE
#include "spans_int.h"

/* ---- the engine ---- */

struct ptw_spans *ptw_spans_new(void)
{
	struct ptw_spans *s = xcalloc(1, sizeof(struct ptw_spans));
	s->frames = ptw_frames_new();
	s->locks = ptw_locks_new();
	return s;
}

const struct ptw_frames *ptw_spans_frames(const struct ptw_spans *s)
{
	return s->frames;
}

struct ptw_frames *ptw_spans_frames_mut(struct ptw_spans *s)
{
	return s->frames;
}

const struct ptw_frame *ptw_spans_last_frame(const struct ptw_spans *s)
{
	return s->last_frame;
}

const struct ptw_locks *ptw_spans_locks(const struct ptw_spans *s)
{
	return s->locks;
}

struct ptw_locks *ptw_spans_locks_mut(struct ptw_spans *s)
{
	return s->locks;
}

const struct ptw_wait *ptw_spans_last_wait(const struct ptw_spans *s)
{
	return s->last_wait;
}

static void span_free(struct ptw_span *sp)
{
	if (!sp)
		return;
	free(sp->name);
	free(sp->state);
	free(sp->wchan);
	free(sp->open_state);
	free(sp->open_wchan);
	free(sp->stack);
	free(sp);
}

void ptw_spans_free(struct ptw_spans *s)
{
	if (!s)
		return;
	for (size_t i = 0; i < s->n; i++)
		span_free(s->spans[i]);
	free(s->spans);
	free(s->pending);
	ptw_map_free(&s->by_id);
	ptw_dacc_free(&s->spawn);
	ptw_dacc_free(&s->life);
	ptw_dacc_free(&s->wait);
	ptw_groups_free(s->groups, s->ngroups);
	ptw_map_free(&s->group_idx);
	ptw_map_free(&s->by_tid);
	ptw_map_free(&s->ended_by_tid);
	ptw_map_free(&s->by_pthread);
	ptw_map_free(&s->joins);
	free(s->series);
	ptw_frames_free(s->frames);
	ptw_locks_free(s->locks);
	free(s);
}

void ptw_spans_set_timeouts(struct ptw_spans *s, struct ptw_timeouts *to)
{
	s->timeouts = to;
	ptw_frames_set_timeouts(s->frames, to);
}

void sp_compact(struct ptw_spans *s)
{
	if (!s->holes)
		return;
	size_t k = 0;
	for (size_t i = 0; i < s->n; i++)
		if (s->spans[i]) {
			s->spans[i]->slot = k;
			s->spans[k++] = s->spans[i];
		}
	s->n = k;
	s->holes = 0;
}

size_t ptw_spans_count(const struct ptw_spans *s)
{
	sp_compact((struct ptw_spans *)s); /* the holes are no state of the engine */
	return s->n;
}

const struct ptw_span *ptw_spans_get(const struct ptw_spans *s, size_t i)
{
	sp_compact((struct ptw_spans *)s);
	return i < s->n ? s->spans[i] : NULL;
}

uint64_t ptw_spans_active(const struct ptw_spans *s)
{
	return s->active;
}

uint64_t ptw_spans_total(const struct ptw_spans *s)
{
	return s->next_id;
}

const struct ptw_span *ptw_spans_by_id(const struct ptw_spans *s, uint32_t id)
{
	return ptw_map_get(&s->by_id, id);
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
	if (s->streaming)
		return; /* two entries per thread: not bounded */
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

/* Thread sp ends in a join that did not return (cancelled there, killed):
 * that join never happened, the thread it was joining may be joined
 * later by another. */
static void abandon_join(struct ptw_spans *s, const struct ptw_span *sp)
{
	struct ptw_span *target = ptw_map_get(&s->joins, (uint64_t)sp->tid);
	if (!target || target->joiner_tid != sp->tid || target->join_return_ns.set)
		return;
	ptw_map_del(&s->joins, (uint64_t)sp->tid);
	target->joined = false;
	target->joiner_tid = 0;
	target->join_call_ns = 0;
}

static void end_span(struct ptw_spans *s, struct ptw_span *sp, uint64_t ns, enum ptw_status status,
		     enum ptw_method method, const char *reason)
{
	if (sp->ended)
		return;
	abandon_join(s, sp);
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
	if (live(s, sp->tid) == sp) {
		ptw_map_del(&s->by_tid, (uint64_t)sp->tid);
		ptw_map_put(&s->ended_by_tid, (uint64_t)sp->tid, sp);
	}
}

static void hold(struct ptw_spans *s, struct ptw_span *sp)
{
	if (s->n == s->cap) {
		sp_compact(s);
		if (s->n == s->cap) {
			s->cap = s->cap ? s->cap * 2 : 64;
			s->spans = xreallocarray(s->spans, s->cap, sizeof(*s->spans));
		}
	}
	sp->slot = s->n;
	s->spans[s->n++] = sp;
}

static void candidate(struct ptw_spans *s, struct ptw_span *sp)
{
	if (!s->streaming || !sp || sp->retired)
		return;
	if (s->npending == s->pending_cap) {
		s->pending_cap = s->pending_cap ? s->pending_cap * 2 : 16;
		s->pending = xreallocarray(s->pending, s->pending_cap, sizeof(*s->pending));
	}
	s->pending[s->npending++] = sp;
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
	hold(s, sp);
	sp->id = ++s->next_id;
	ptw_map_put(&s->by_id, sp->id, sp);
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
	ptw_map_del(&s->ended_by_tid, (uint64_t)tid);
	ptw_timeouts_watch(s->timeouts, PTW_SPAN_THREAD, sp->id, tid, ns);
	return sp;
}

/* pthread is now sp's: the span that had it can no longer be joined. */
static void put_pthread(struct ptw_spans *s, struct ptw_span *sp)
{
	struct ptw_span *old =
		ptw_map_put(&s->by_pthread, pthread_key(sp->process, sp->pthread), sp);
	if (old && old != sp)
		candidate(s, old);
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

/* The span a wait waits for: its owner's. A join's owner is the thread it
 * joins, by its pthread_t when no tid came: it ended before the join began
 * (its tid word, where a backend reads it, is cleared by then). */
static struct ptw_span *wait_owner(struct ptw_spans *s, const struct ptw_event *ev)
{
	if (ev->kind != PTW_EV_WAIT_BEGIN)
		return NULL;
	struct ptw_span *owner = live(s, ev->wait_owner);
	if (!owner && !ev->wait_owner && ev->wait_kind == PTW_WAIT_JOIN)
		owner = by_pthread(s, ev->wait_object);
	return owner;
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
		} else if (ev->cancelled == 0) {
			/* Its pthread_exit call was not seen (it came before the
			 * probes were in), but the thread says no cancellation
			 * acted: the value is the one it passed. */
			end_span(s, sp, ev->ns, PTW_STATUS_EXITED, PTW_METHOD_PTHREAD_EXIT, NULL);
		} else {
			/* Unwound without pthread_exit: cancellation is glibc's only
			 * other way there. */
			if (!sp->value.set)
				set_opt(&sp->value, PTHREAD_CANCELED_VALUE);
			if (!sp->cancel_requested && ev->cancelled != 1)
				sp->uncertain = true;
			end_span(s, sp, ev->ns, PTW_STATUS_CANCELLED, PTW_METHOD_CANCEL, NULL);
		}
	} else {
		sp->uncertain = true;
		end_span(s, sp, ev->ns, PTW_STATUS_UNMATCHED, PTW_METHOD_UNKNOWN, "death_unclassified");
	}
}

/*
 * No TD_DEATH can come for this thread: a raw clone, or a thread no pthread
 * describes (libthread_db unusable, or it did not list the thread at the
 * attach, so its events could not be enabled). Threads created while traced
 * always have one; the main thread has one once main() started.
 */
static bool lwp_only(const struct ptw_span *sp)
{
	return sp->origin == PTW_ORIGIN_CLONE || (!sp->pthread && sp->origin != PTW_ORIGIN_CREATED);
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
			} else if (lwp_only(sp)) {
				/* Its own exit is its normal end, and all of it that
				 * can be seen: not a pthread_exit, and the syscall's
				 * argument is not the start routine's value (glibc's
				 * start_thread always passes 0). */
				set_opt(&sp->exit_code, (uint64_t)(unsigned)ev->exit_code);
				end_span(s, sp, ev->ns, PTW_STATUS_LWP_EXITED, PTW_METHOD_UNKNOWN,
					 "lwp_exit");
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
	candidate(s, sp);
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

/* Nothing can join process's spans any more (it exited or exec'd; every
 * process's with all, or without -f). */
static void gone(struct ptw_spans *s, bool all, uint32_t process)
{
	for (size_t i = 0; i < s->n; i++) {
		if (s->spans[i] && (all || !s->multi || s->spans[i]->process == process)) {
			s->spans[i]->final = true;
			candidate(s, s->spans[i]);
		}
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
	gone(s, false, ev->process);
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
	gone(s, false, ev->process);
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
	gone(s, true, 0);
}

const struct ptw_span *ptw_spans_consume(struct ptw_spans *s, const struct ptw_event *ev)
{
	struct ptw_span *sp = NULL;

	if (ev->kind == PTW_EV_WARNING || ev->kind == PTW_EV_PROCESS)
		return NULL; /* the session's facts: no span's */
	ptw_spans_collect(s);
	/* Frames first: a thread's end closes its frames with what its span
	 * knew just before (pthread_exit called, cancel requested). */
	s->last_frame = ptw_frames_consume(s->frames, ev, live(s, ev->tid));
	s->pid = ev->pid;
	s->process = ev->process;
	if (ev->process)
		s->multi = true;
	s->last_wait = ptw_locks_consume(s->locks, ev, live(s, ev->tid), wait_owner(s, ev));
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
			put_pthread(s, sp);
		break;
	case PTW_EV_MAIN_START:
		sp = live(s, ev->tid);
		if (sp && !sp->start_ns.set) {
			set_opt(&sp->start_ns, ev->ns);
			sp->start_routine = ev->routine;
			if (ev->pthread) {
				sp->pthread = ev->pthread;
				put_pthread(s, sp);
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
			put_pthread(s, sp);
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
		if (ev->pthread && !sp->pthread) {
			/* (a thread listed without it: its start tells) */
			sp->pthread = ev->pthread;
			put_pthread(s, sp);
		}
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
		candidate(s, sp);
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
		candidate(s, sp);
		break;
	case PTW_EV_THREAD_DEATH:
		sp = adopt(s, ev->tid, ev->ns);
		on_death(s, sp, ev);
		candidate(s, sp);
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
		if (ev->span_kind == PTW_SPAN_FRAME)
			s->last_frame = ptw_frames_mark_open(s->frames, ev);
		if (ev->span_kind != PTW_SPAN_THREAD || !ptw_map_get(&s->by_id, ev->span_id))
			break; /* another engine's span, or one handed out */
		sp = ptw_map_get(&s->by_id, ev->span_id);
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
	case PTW_EV_WARNING:
	case PTW_EV_PROCESS:
		break;
	case PTW_EV_FRAME_ENTRY:
	case PTW_EV_FRAME_RETURN:
	case PTW_EV_FRAME_TAIL:
	case PTW_EV_THROW:
	case PTW_EV_CATCH:
	case PTW_EV_LONGJMP:
	case PTW_EV_CONTEXT_SWITCH:
	case PTW_EV_SIGNAL_DELIVER:
	case PTW_EV_SIGRETURN:
		sp = live(s, ev->tid);
		break;
	case PTW_EV_WAIT_BEGIN:
	case PTW_EV_WAIT_END:
		sp = live(s, ev->tid);
		break;
	case PTW_EV_THREAD_CPU:
		/* at its end, or just after (the kernel path's final figure
		 * comes after its exit) */
		sp = live(s, ev->tid);
		if (!sp)
			sp = ptw_map_get(&s->ended_by_tid, (uint64_t)ev->tid);
		if (sp && ev->cpu.set && !sp->retired)
			sp->cpu = ev->cpu;
		break;
	case PTW_EV_DEADLOCK:
		/* A member of a live deadlock: its stack and wait, as a
		 * snapshot would show them. */
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

/* ---- a span's lifetime ---- */

bool ptw_span_lifetime(const struct ptw_span *sp, uint64_t *ret)
{
	if (sp->status == PTW_STATUS_OPEN || !sp->end_ns.set)
		return false;
	const struct ptw_opt *from = sp->start_ns.set ? &sp->start_ns : &sp->create_ns;
	if (!from->set || sp->end_ns.v < from->v)
		return false;
	*ret = sp->end_ns.v - from->v;
	return true;
}

/* ---- streaming: retiring spans ---- */

void ptw_spans_set_streaming(struct ptw_spans *s, ptw_span_retire_fn retire, void *ctx)
{
	s->streaming = true;
	ptw_frames_set_streaming(s->frames);
	ptw_locks_set_streaming(s->locks);
	s->retire = retire;
	s->retire_ctx = ctx;
	s->spawn.exact_max = s->life.exact_max = s->wait.exact_max = PTW_DACC_EXACT;
}

void ptw_spans_set_counters(struct ptw_spans *s, uint64_t threads_created, uint64_t max_active,
			    uint64_t max_depth)
{
	s->threads_created = threads_created;
	s->max_active = max_active;
	s->max_depth = (unsigned)max_depth;
	s->counters_set = true;
}

bool sp_spawn_of(const struct ptw_span *sp, uint64_t *ret)
{
	if (sp->origin == PTW_ORIGIN_MAIN || !sp->create_ns.set || !sp->start_ns.set ||
	    sp->start_ns.v < sp->create_ns.v)
		return false;
	*ret = sp->start_ns.v - sp->create_ns.v;
	return true;
}

bool sp_life_of(const struct ptw_span *sp, uint64_t *ret)
{
	return ptw_span_lifetime(sp, ret);
}

bool sp_is_unjoined(const struct ptw_span *sp)
{
	bool finished = sp->status == PTW_STATUS_COMPLETED || sp->status == PTW_STATUS_EXITED ||
			sp->status == PTW_STATUS_CANCELLED || sp->status == PTW_STATUS_LWP_EXITED;
	return sp->origin != PTW_ORIGIN_MAIN && sp->detached == 0 && finished &&
	       !(sp->joined && sp->join_return_ns.set);
}

char *ptw_span_group_name(const struct ptw_span *sp)
{
	const struct ptw_location *loc = sp->start_routine;
	if (loc && loc->symbol)
		return xstrdup(loc->symbol);
	if (!loc) /* a raw clone's, or main() not found: unknown */
		return xstrdup("-");
	if (sp->origin == PTW_ORIGIN_MAIN)
		return xstrdup("main");
	if (loc->module && loc->has_offset) {
		const char *b = strrchr(loc->module, '/');
		return xasprintf("%s+%#" PRIx64, b ? b + 1 : loc->module, loc->offset);
	}
	return xasprintf("%#" PRIx64, loc->addr);
}

static struct ptw_group *group_for(struct ptw_group **g, size_t *n, struct ptw_map *idx, char *name,
				   size_t exact_max)
{
	uint64_t h = ptw_str_hash(name) | 1;
	for (;; h += 2) { /* open addressing on the hash: collisions step on */
		uintptr_t k = (uintptr_t)ptw_map_get(idx, h);
		if (!k)
			break;
		if (!strcmp((*g)[k - 1].routine, name)) {
			free(name);
			return &(*g)[k - 1];
		}
	}
	*g = xreallocarray(*g, *n + 1, sizeof(**g));
	struct ptw_group *ng = &(*g)[*n];
	memset(ng, 0, sizeof(*ng));
	ng->routine = name;
	ng->spawn.exact_max = ng->life.exact_max = exact_max;
	(*n)++;
	ptw_map_put(idx, h, (void *)(uintptr_t)*n);
	return ng;
}

static void group_add(struct ptw_group *g, const struct ptw_span *sp)
{
	uint64_t v;
	if (!g->count || sp->id < g->first_id)
		g->first_id = sp->id;
	g->count++;
	g->by_status[(unsigned)sp->status < PTW_STATUS_N ? sp->status : PTW_STATUS_UNMATCHED]++;
	if (sp_spawn_of(sp, &v))
		ptw_dacc_add(&g->spawn, v);
	if (sp_life_of(sp, &v))
		ptw_dacc_add(&g->life, v);
	if (sp->cpu.set) {
		g->cpu_ns += sp->cpu.on_cpu_ns;
		g->cpu_spans++;
	}
}

/* A span's figures, into the accumulators of the freed ones. */
static void account(struct ptw_spans *s, const struct ptw_span *sp)
{
	uint64_t v;
	if (sp_spawn_of(sp, &v))
		ptw_dacc_add(&s->spawn, v);
	if (sp_life_of(sp, &v))
		ptw_dacc_add(&s->life, v);
	if (sp->joined && sp->join_return_ns.set)
		ptw_dacc_add(&s->wait, sp->join_return_ns.v - sp->join_call_ns);
	s->open_spans += sp->status == PTW_STATUS_OPEN;
	s->unmatched += sp->status == PTW_STATUS_UNMATCHED;
	s->open_timeouts += sp->open_after_ns.set;
	s->unjoined += sp_is_unjoined(sp);
	s->freed++;
	group_add(group_for(&s->groups, &s->ngroups, &s->group_idx, ptw_span_group_name(sp),
			    PTW_DACC_EXACT),
		  sp);
}

/* Can nothing change sp any more? */
static bool done(struct ptw_spans *s, struct ptw_span *sp)
{
	if (sp->retired)
		return false;
	if (sp->final)
		return true;
	if (!sp->ended || live(s, sp->tid) == sp)
		return false;
	if (sp->joined && !sp->join_return_ns.set)
		return false; /* its joiner is still in the join */
	if (sp->detached == 1 || (sp->joined && sp->join_return_ns.set) || !sp->pthread)
		return true;
	/* joinable (or not known) and not joined: until its pthread_t is
	 * someone else's, a join may still come */
	return ptw_map_get(&s->by_pthread, pthread_key(sp->process, sp->pthread)) != sp;
}

static void release(struct ptw_spans *s, struct ptw_span *sp)
{
	ptw_timeouts_unwatch(s->timeouts, PTW_SPAN_THREAD, sp->id);
	if (live(s, sp->tid) == sp)
		ptw_map_del(&s->by_tid, (uint64_t)sp->tid);
	if (ptw_map_get(&s->ended_by_tid, (uint64_t)sp->tid) == sp)
		ptw_map_del(&s->ended_by_tid, (uint64_t)sp->tid);
	if (sp->pthread && ptw_map_get(&s->by_pthread, pthread_key(sp->process, sp->pthread)) == sp)
		ptw_map_del(&s->by_pthread, pthread_key(sp->process, sp->pthread));
	if (sp->joined && ptw_map_get(&s->joins, (uint64_t)sp->joiner_tid) == sp)
		ptw_map_del(&s->joins, (uint64_t)sp->joiner_tid);
	ptw_map_del(&s->by_id, sp->id);
	account(s, sp);
	s->spans[sp->slot] = NULL;
	s->holes++;
	span_free(sp);
}

static void retire(struct ptw_spans *s, struct ptw_span *sp)
{
	sp->retired = true;
	if (s->retire)
		s->retire(s->retire_ctx, sp);
	if (s->next_id > PTW_SPANS_KEEP)
		release(s, sp);
	else
		s->kept++;
}

void ptw_spans_collect(struct ptw_spans *s)
{
	if (!s->streaming)
		return;
	ptw_frames_collect(s->frames);
	ptw_locks_collect(s->locks);
	s->last_wait = NULL; /* it may have been freed */
	/* Past the table's size: the kept ones go too. */
	if (s->next_id > PTW_SPANS_KEEP && s->kept) {
		for (size_t i = 0; i < s->n; i++)
			if (s->spans[i] && s->spans[i]->retired)
				release(s, s->spans[i]);
		s->kept = 0;
	}
	for (size_t i = 0; i < s->npending; i++) {
		struct ptw_span *sp = s->pending[i];
		/* a span may be pending twice: the first retirement frees it */
		bool twice = false;
		for (size_t k = 0; k < i && !twice; k++)
			twice = s->pending[k] == sp;
		if (!twice && done(s, sp))
			retire(s, sp);
		else if (twice)
			continue;
	}
	s->npending = 0;
	sp_compact(s);
}

void ptw_spans_retire_all(struct ptw_spans *s)
{
	if (!s->streaming)
		return;
	ptw_spans_collect(s);
	for (size_t i = 0; i < s->n; i++)
		if (s->spans[i] && !s->spans[i]->retired)
			retire(s, s->spans[i]);
	sp_compact(s);
}

void ptw_spans_add_final(struct ptw_spans *s, struct ptw_span *sp)
{
	sp->ended = sp->status != PTW_STATUS_OPEN;
	sp->final = true;
	sp->active = false;
	s->added++;
	hold(s, sp);
	if (!sp->ended && sp->tid > 0)
		ptw_map_put(&s->by_tid, (uint64_t)sp->tid, sp); /* a snapshot's waits-for */
	/* in order of id (a stream has them in order of their end) */
	for (size_t i = sp->slot; i > 0 && s->spans[i - 1] && s->spans[i - 1]->id > sp->id; i--) {
		s->spans[i] = s->spans[i - 1];
		s->spans[i]->slot = i;
		s->spans[i - 1] = sp;
		sp->slot = i - 1;
	}
	if (sp->id > s->next_id)
		s->next_id = sp->id;
	ptw_map_put(&s->by_id, sp->id, sp);
	if (!s->counters_set) {
		s->threads_created += sp->origin == PTW_ORIGIN_CREATED || sp->origin == PTW_ORIGIN_CLONE;
		if (sp->depth > s->max_depth)
			s->max_depth = sp->depth;
	}
	candidate(s, sp);
}

static int by_first_id(const void *x, const void *y)
{
	const struct ptw_group *a = x, *b = y;
	return a->first_id < b->first_id ? -1 : a->first_id > b->first_id;
}

size_t ptw_spans_groups(const struct ptw_spans *s, struct ptw_group **ret)
{
	struct ptw_group *g = NULL;
	size_t n = 0;
	struct ptw_map idx = { 0 };
	for (size_t i = 0; i < s->ngroups; i++) {
		struct ptw_group *ng = group_for(&g, &n, &idx, xstrdup(s->groups[i].routine), 0);
		ng->count = s->groups[i].count;
		ng->first_id = s->groups[i].first_id;
		memcpy(ng->by_status, s->groups[i].by_status, sizeof(ng->by_status));
		ptw_dacc_merge(&ng->spawn, &s->groups[i].spawn);
		ptw_dacc_merge(&ng->life, &s->groups[i].life);
	}
	for (size_t i = 0; i < s->n; i++)
		if (s->spans[i])
			group_add(group_for(&g, &n, &idx, ptw_span_group_name(s->spans[i]), 0),
				  s->spans[i]);
	ptw_map_free(&idx);
	if (n > 1) /* (none: g NULL) */
		qsort(g, n, sizeof(*g), by_first_id);
	*ret = g;
	return n;
}

void ptw_groups_free(struct ptw_group *g, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		free(g[i].routine);
		ptw_dacc_free(&g[i].spawn);
		ptw_dacc_free(&g[i].life);
	}
	free(g);
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
		while (sp && !colour[sp->slot]) {
			colour[sp->slot] = 1;
			path[len++] = sp;
			sp = waits_on(s, sp);
		}
		if (sp && colour[sp->slot] == 1) {
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
			colour[path[j]->slot] = 2;
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
		[PTW_EV_FRAME_TAIL] = "tail",
		[PTW_EV_THROW] = "throw",
		[PTW_EV_CATCH] = "catch",
		[PTW_EV_LONGJMP] = "longjmp",
		[PTW_EV_CONTEXT_SWITCH] = "context_switch",
		[PTW_EV_SIGNAL_DELIVER] = "signal_deliver",
		[PTW_EV_SIGRETURN] = "sigreturn",
		[PTW_EV_WAIT_BEGIN] = "wait",
		[PTW_EV_WAIT_END] = "waited",
		[PTW_EV_DEADLOCK] = "deadlock",
		[PTW_EV_THREAD_CPU] = "cpu",
		[PTW_EV_WARNING] = "warning",
		[PTW_EV_PROCESS] = "process",
	};
	return (unsigned)kind < PTW_ARRAY_SIZE(names) && names[kind] ? names[kind] : "?";
}
