/* SPDX-License-Identifier: MIT */
/* A tracing session: events to the engine and the outputs, then the end;
 * see ptw_session.h. */
#define _GNU_SOURCE
#include "ptw_session.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

#include "config.h"
#include "facts.h"
#include "ptw_attach.h"
#include "ptw_backend.h"
#include "ptw_frames.h"
#include "ptw_guardian.h"
#include "ptw_live.h"
#include "ptw_record.h"
#include "ptw_spans.h"
#include "ptw_timeouts.h"
#include "ptw_util.h"

/* The outputs at most: the format's, the text, the live table. */
#define OUTPUTS_MAX 3

struct ptw_session {
	struct ptw_session_opts opts;
	struct ptw_spans *spans;
	struct ptw_timeouts *timeouts; /* spans open too long (--open-timeout) */
	struct ptw_buf log;
	bool restorer_behind; /* record_before_line gave up waiting for it */
	struct ptw_output_host host;
	/* Every event goes to each, in this order (ptw_output.h). */
	struct ptw_output *outs[OUTPUTS_MAX];
	size_t nouts;
	bool progress; /* an output wants progress before the tracer blocks */
	/* The record for the restorer (ptw_guardian.h), when there is one. */
	struct ptw_record_writer *rec;
	struct ptw_buf record;
	struct ptw_backend *backend; /* once launched or attached: the header */
	size_t header_sig;	   /* what the last header sent said, roughly */
	struct ptw_output *live;   /* --live, until it begins */
	struct session_facts facts; /* warnings, processes, interrupts */
	char *lost;		   /* the first output that could not be written */
	int lost_err;
};

/* ---- lost outputs ---- */

static void on_lost(void *ctx, const char *what, int err)
{
	struct ptw_session *s = ctx;
	if (err == EPIPE || s->lost) /* a reader that closed: SIGPIPE's, not a loss */
		return;
	s->lost = xstrdup(what);
	s->lost_err = err;
}

bool ptw_session_lost(const struct ptw_session *s, const char **what, int *err)
{
	if (!s->lost)
		return false;
	*what = s->lost;
	*err = s->lost_err;
	return true;
}

/* ---- the record for the restorer ---- */

/* The backend's part of the report, which backend it is, and what it
 * told the session (warnings, interrupts, processes). */
static void backend_report(struct ptw_session *s, struct ptw_report *r)
{
	s->backend->ops->report(s->backend, r);
	facts_fill(&s->facts, r);
	r->backend = s->backend->name;
	r->backend_why = s->backend->why[0] ? s->backend->why : NULL;
}

/* The report's header goes to the restorer again when it changed (a new
 * warning, libthread_db found, the end seen). */
static void record_header(struct ptw_session *s)
{
	struct ptw_report rep = { 0 };
	rep.realtime_offset_ns = ptw_realtime_offset_ns();
	backend_report(s, &rep);
	rep.open_timeout_ns = ptw_timeouts_limit(s->timeouts);
	size_t sig = 1 + rep.nwarnings * 16 + (rep.glibc != NULL) * 2 + (size_t)rep.exit_kind * 4 +
		     (rep.strategy && rep.strategy[0] == 'd');
	if (sig == s->header_sig)
		return;
	s->header_sig = sig;
	ptw_record_report(s->rec, &s->record, &rep);
}

static void flush_record(struct ptw_session *s)
{
	if (!s->rec)
		return;
	if (s->backend)
		record_header(s);
	ptw_guardian_record(&s->record);
}

/* A stream line: the restorer gets the record before a line says more
 * than it knows (if the tracer died now, it writes the rest). What its
 * socket does not take at once is waited for, a little: a burst of
 * events (the kernel path's) would otherwise leave the stream's lines
 * ahead of the record, and a span begun in the stream never ended there
 * by the restorer. A restorer that did not keep up within LINE_WAIT_MS is
 * not waited for again until it has caught up (a stopped one must not
 * hold the tracer up line after line). */
#define LINE_WAIT_MS 100
static void record_before_line(void *ctx)
{
	struct ptw_session *s = ctx;
	if (!s->rec)
		return;
	if (s->record.len)
		ptw_guardian_record(&s->record);
	/* (returns at once when nothing is queued) */
	s->restorer_behind = !ptw_guardian_record_wait(s->restorer_behind ? 0 : LINE_WAIT_MS);
}

/* ---- the outputs ---- */

/* What the tracer learnt since (warnings for the stream, -v's stops). */
static void report_progress(struct ptw_session *s)
{
	if (!s->backend || !s->progress)
		return;
	struct ptw_report rep = { 0 };
	backend_report(s, &rep);
	for (size_t i = 0; i < s->nouts; i++)
		if (s->outs[i]->wants_progress)
			s->outs[i]->ops->progress(s->outs[i], &rep);
}

/* Before the tracer blocks, and when an output needs it now. */
static void flush_log(void *ctx)
{
	struct ptw_session *s = ctx;
	flush_record(s);
	report_progress(s);
	/* EPIPE: SIGPIPE (blocked) ends the session */
	int r = ptw_write_all(STDERR_FILENO, s->log.p, s->log.len);
	if (r < 0)
		on_lost(s, "standard error", -r);
	ptw_buf_reset(&s->log);
}

static void add_output(struct ptw_session *s, struct ptw_output *o)
{
	s->outs[s->nouts++] = o;
	s->progress |= o->wants_progress;
}

static void drop_output(struct ptw_session *s, struct ptw_output *o)
{
	size_t k = 0;
	for (size_t i = 0; i < s->nouts; i++)
		if (s->outs[i] != o)
			s->outs[k++] = s->outs[i];
	s->nouts = k;
	s->progress = false;
	for (size_t i = 0; i < s->nouts; i++)
		s->progress |= s->outs[i]->wants_progress;
	o->ops->free(o);
}

static void on_retire(void *ctx, const struct ptw_span *sp)
{
	struct ptw_session *s = ctx;
	for (size_t i = 0; i < s->nouts; i++)
		if (s->outs[i]->ops->span_retired)
			s->outs[i]->ops->span_retired(s->outs[i], sp);
}

static void on_frame_closed(void *ctx, const struct ptw_frame *fr)
{
	struct ptw_session *s = ctx;
	for (size_t i = 0; i < s->nouts; i++)
		if (s->outs[i]->ops->frame_closed)
			s->outs[i]->ops->frame_closed(s->outs[i], fr);
}

/* The tracer's sink: the session's facts, the engine, the record, then
 * every output. One call per event: no allocation here. */
static void sink(void *ctx, const struct ptw_event *ev)
{
	struct ptw_session *s = ctx;
	if (facts_take(&s->facts, ev)) {
		/* -f: a process began, exec'd, ended: the restorer keeps what
		 * the document would say of it (warnings: the header's) */
		if (s->rec && ev->kind == PTW_EV_PROCESS && ev->proc)
			ptw_record_process(&s->record, ev->proc);
		return;
	}
	const struct ptw_span *sp = ptw_spans_consume(s->spans, ev);
	if (s->rec) {
		ptw_record_event(s->rec, &s->record, ev);
		if (s->record.len > 65536)
			flush_record(s);
	}
	if (ev->kind == PTW_EV_INTERRUPT) /* the tracer is not stuck: it took one in */
		ptw_guardian_signal_answered();
	switch (ev->kind) {
	case PTW_EV_WAIT_BEGIN:
	case PTW_EV_WAIT_END:
	case PTW_EV_DEADLOCK: {
		const struct ptw_wait *w = ptw_spans_last_wait(s->spans);
		for (size_t i = 0; i < s->nouts; i++)
			if (s->outs[i]->ops->wait)
				s->outs[i]->ops->wait(s->outs[i], ev, sp, w);
		break;
	}
	case PTW_EV_SPAN_OPEN:
		for (size_t i = 0; i < s->nouts; i++)
			if (s->outs[i]->ops->open)
				s->outs[i]->ops->open(s->outs[i], ev, sp);
		break;
	default:
		for (size_t i = 0; i < s->nouts; i++)
			if (s->outs[i]->ops->event)
				s->outs[i]->ops->event(s->outs[i], ev, sp);
		break;
	}
	/* the span the log line used may go now (streaming) */
	ptw_spans_collect(s->spans);
}

/* ---- open timeouts, and the outputs' ticks ---- */

static uint64_t next_timer(void *ctx)
{
	struct ptw_session *s = ctx;
	uint64_t next = ptw_timeouts_next(s->timeouts);
	for (size_t i = 0; i < s->nouts; i++) {
		uint64_t t = s->outs[i]->ops->next_tick ? s->outs[i]->ops->next_tick(s->outs[i]) : 0;
		if (t && (!next || t < next))
			next = t;
	}
	return next;
}

/* Every span that crossed the limit: one event each, saying where its
 * thread is now (read from /proc; the thread is not stopped). */
static void on_timer(void *ctx, uint64_t now)
{
	struct ptw_session *s = ctx;
	struct ptw_timeout due;
	while (ptw_timeouts_pop(s->timeouts, now, &due)) {
		struct ptw_where w;
		s->backend->ops->where(s->backend, due.tid, &w);
		struct ptw_event ev = ptw_event_init(PTW_EV_SPAN_OPEN, now, due.tid);
		const struct ptw_span *th = ptw_spans_by_tid(s->spans, due.tid);
		ev.pid = th ? th->pid : 0; /* -f: its process */
		ev.span_kind = due.kind;
		ev.span_id = due.id;
		ev.has_value = true;
		ev.value = now - due.start_ns;
		ev.state = w.state;
		ev.wchan = w.wchan[0] ? w.wchan : NULL;
		ev.name = w.name[0] ? w.name : NULL;
		ev.routine = w.at;
		sink(s, &ev);
	}
	for (size_t i = 0; i < s->nouts; i++)
		if (s->outs[i]->ops->tick && s->outs[i]->ops->tick(s->outs[i], now))
			s->backend->ops->stop(s->backend);
}

/* ---- the session ---- */

struct ptw_session *ptw_session_new(const struct ptw_session_opts *o)
{
	struct ptw_session *s = xcalloc(1, sizeof(*s));
	s->opts = *o;
	s->spans = ptw_spans_new();
	s->host = (struct ptw_output_host){ .spans = s->spans, .start_ns = ptw_now_ns(),
					    .filter = o->filter, .log = &s->log, .flush = flush_log,
					    .before_line = record_before_line, .lost = on_lost,
					    .ctx = s };
	if (o->record)
		s->rec = ptw_record_writer_new();
	struct ptw_output_conf c = { .format = o->format, .fd = o->fd, .path = o->path,
				     .snapshot = o->snapshot, .resume = o->resume };
	if (o->format == PTW_OUTPUT_LINES)
		add_output(s, ptw_output_lines_new(&c, &s->host));
	else if (o->format == PTW_OUTPUT_JSON || o->format == PTW_OUTPUT_CHROME)
		add_output(s, ptw_output_doc_new(&c, &s->host));
	/* A snapshot has no events to tell as they happen: it is its report. */
	struct ptw_output_conf tc = { .format = PTW_OUTPUT_TEXT, .fd = -1,
				      .quiet = o->quiet || o->snapshot, .snapshot = o->snapshot,
				      .stdout_taken = o->format != PTW_OUTPUT_TEXT && o->fd < 0,
				      .resume = o->resume };
	add_output(s, ptw_output_text_new(&tc, &s->host));
	/* Spans retired as they end: the tracer's while it is not a
	 * snapshot; the restorer's always, as the tracer's are, so that its
	 * memory stays bounded too. */
	bool streams = s->outs[0]->streams;
	if (streams && (!o->snapshot || o->resume))
		ptw_spans_set_streaming(s->spans, on_retire, s);
	/* Frames that end: the stream writes them, the live table counts them. */
	ptw_frames_set_closed(ptw_spans_frames_mut(s->spans), on_frame_closed, s);
	if (!o->snapshot && !o->resume) {
		s->timeouts = ptw_timeouts_new(o->open_timeout_ns);
		ptw_spans_set_timeouts(s->spans, s->timeouts);
	}
	return s;
}

void ptw_session_free(struct ptw_session *s)
{
	if (!s)
		return;
	for (size_t i = 0; i < s->nouts; i++)
		s->outs[i]->ops->free(s->outs[i]);
	if (s->live)
		s->live->ops->free(s->live);
	ptw_spans_free(s->spans);
	ptw_timeouts_free(s->timeouts);
	ptw_buf_free(&s->log);
	ptw_record_writer_free(s->rec);
	ptw_buf_free(&s->record);
	facts_free(&s->facts);
	free(s->lost);
	free(s);
}

void ptw_session_tracer_opts(struct ptw_session *s, struct ptw_backend_opts *to)
{
	to->sink = sink;
	to->sink_ctx = s;
	to->before_block = flush_log;
	to->before_block_ctx = s;
	to->next_timer = next_timer;
	to->on_timer = on_timer;
	to->timer_ctx = s;
}

void ptw_session_add_live(struct ptw_session *s, const struct ptw_live_opts *lo)
{
	s->live = ptw_output_live_new(lo, &s->host);
}

void ptw_session_replay(struct ptw_session *s, const struct ptw_event *ev)
{
	ptw_spans_consume(s->spans, ev);
}

void ptw_session_begin(struct ptw_session *s, const struct ptw_report *head)
{
	for (size_t i = 0; i < s->nouts;) {
		struct ptw_output *o = s->outs[i];
		if (o->ops->begin && o->ops->begin(o, head) < 0)
			drop_output(s, o);
		else
			i++;
	}
}

void ptw_session_end(struct ptw_session *s, struct ptw_report *r)
{
	ptw_spans_finish(s->spans);
	r->spans = s->spans;
	for (size_t i = 0; i < s->nouts; i++)
		if (s->outs[i]->ops->end)
			s->outs[i]->ops->end(s->outs[i], r);
}

/* The report once the target is known: what the outputs begin with. */
static void session_start(struct ptw_session *s)
{
	/* The live table first (it takes the terminal), then the rest. */
	struct ptw_output *live = s->live;
	s->live = NULL;
	if (live && live->ops->begin(live, NULL) < 0) {
		live->ops->free(live);
		live = NULL;
	}
	if (live)
		s->backend->ops->set_wake_fd(s->backend, live->wake_fd);
	flush_record(s); /* the restorer learns what is traced */
	/* all of it: an output that blocks from here on (a pipe nobody
	 * reads) may get the tracer killed, and the restorer then writes
	 * the end from the record */
	if (s->rec)
		ptw_guardian_record_wait(1000);
	struct ptw_report head = { 0 };
	head.tool_version = PTW_VERSION;
	head.realtime_offset_ns = ptw_realtime_offset_ns();
	backend_report(s, &head);
	head.open_timeout_ns = ptw_timeouts_limit(s->timeouts);
	ptw_session_begin(s, &head);
	if (live) /* last: events go to it from now on */
		add_output(s, live);
}

static void __attribute__((noreturn)) die_of_signal(int sig)
{
	/* The guardian is told, so that it dies of it too. */
	ptw_guardian_mirror_signal(sig);
	ptw_die_of_signal(sig);
}

/*
 * The threads that live on once the session ends (ptwatch let go of
 * them): their CPU so far, from /proc, as the backends tell it at a
 * thread's end. Not for a snapshot (a state, not a session).
 */
static void say_cpu_of_live(struct ptw_session *s)
{
	uint64_t ns = ptw_now_ns();
	pid_t dir_pid = 0;
	int dir = -1;
	for (size_t i = 0; i < ptw_spans_count(s->spans); i++) {
		const struct ptw_span *sp = ptw_spans_get(s->spans, i);
		if (sp->ended || sp->cpu.set || sp->pid <= 0 || sp->tid <= 0)
			continue;
		if (sp->pid != dir_pid) { /* (openat beside it: cheaper than a path each) */
			char path[64];
			if (dir >= 0)
				close(dir);
			snprintf(path, sizeof(path), "/proc/%d/task", (int)sp->pid);
			dir = open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
			dir_pid = sp->pid;
		}
		struct ptw_event ev = ptw_event_init(PTW_EV_THREAD_CPU, ns, sp->tid);
		ev.pid = sp->pid;
		ev.process = sp->process;
		if (dir >= 0 && ptw_proc_thread_cpu(dir, sp->pid, sp->tid, &ev.cpu, NULL, 0) == 0)
			sink(s, &ev);
	}
	if (dir >= 0)
		close(dir);
}

int ptw_session_run(struct ptw_session *s, struct ptw_backend *b, int duration_ms)
{
	enum ptw_end_reason reason = PTW_END_SNAPSHOT;
	int sig = 0, r = 0;
	s->backend = b;
	session_start(s);
	if (!s->opts.snapshot)
		r = b->ops->run(b, duration_ms, &reason, &sig);
	for (size_t i = 0; i < s->nouts; i++)
		if (s->outs[i]->ops->stop)
			s->outs[i]->ops->stop(s->outs[i]);
	if (r < 0)
		fprintf(stderr, "ptwatch: tracing failed: %s\n", strerror(-r));
	if (reason != PTW_END_TARGET_EXITED)
		b->ops->detach(b);
	if (!s->opts.snapshot)
		say_cpu_of_live(s);
	flush_log(s);

	struct ptw_report rep = { 0 };
	rep.tool_version = PTW_VERSION;
	rep.realtime_offset_ns = ptw_realtime_offset_ns();
	b->ops->check_fate(b, &rep);
	b->ops->finish(b); /* its last facts: what it could not do, every process */
	backend_report(s, &rep);
	rep.end_ns = ptw_now_ns();
	struct rusage ru;
	if (getrusage(RUSAGE_SELF, &ru) == 0) {
		rep.tracer_user_ns = (uint64_t)ru.ru_utime.tv_sec * 1000000000u +
				     (uint64_t)ru.ru_utime.tv_usec * 1000u;
		rep.tracer_sys_ns = (uint64_t)ru.ru_stime.tv_sec * 1000000000u +
				    (uint64_t)ru.ru_stime.tv_usec * 1000u;
	}
	rep.end_reason = ptw_end_reason_name(reason);
	rep.open_timeout_ns = ptw_timeouts_limit(s->timeouts);
	rep.locks = s->opts.locks;
	ptw_session_end(s, &rep);

	int code = 0, tsig = 0;
	bool core = false;
	bool ended = b->ops->target_exit(b, &code, &tsig, &core);
	bool observer = s->opts.attach;
	const char *lost;
	int lost_err;
	int status, die_sig = 0;
	if (ptw_session_lost(s, &lost, &lost_err)) {
		/* One line, and a status of its own: the command's is in it. */
		char *what = ptw_escape_str(lost);
		fprintf(stderr, "ptwatch: lost output %s: %s", what, strerror(lost_err));
		if (observer)
			fputc('\n', stderr);
		else if (ended && tsig)
			fprintf(stderr, " (command killed by %s%s)\n", ptw_signame(tsig),
				core ? ", core dumped" : "");
		else if (ended)
			fprintf(stderr, " (command exited with %d)\n", code);
		else
			fprintf(stderr, " (command runs on, untraced)\n");
		free(what);
		status = PTW_EXIT_LOST_OUTPUT;
	} else if (observer) { /* an observer: it let go, or saw the end */
		status = reason == PTW_END_ERROR ? 1 : 0;
	} else if (ended) {
		status = code;
		die_sig = tsig;
	} else if (reason == PTW_END_INTERRUPTED) {
		status = 128 + sig;
	} else { /* q: it runs on, as the user asked */
		status = reason == PTW_END_ERROR ? 1 : 0;
	}
	/* What the backend still has to do concerns nobody (the kernel
	 * path's links on a process that has ended): the user's shell need
	 * not wait for it. */
	bool told = b->ops->leaves_early && b->ops->leaves_early(b) &&
		    ptw_guardian_exit_early(status, die_sig);
	b->ops->free(b);
	ptw_session_free(s);
	if (die_sig && !told)
		die_of_signal(die_sig);
	return status;
}
