/* SPDX-License-Identifier: MIT */
/* The session record: what the restorer rebuilds from the bytes is what
 * the tracer had (events with their locations, the report's header), in any
 * split of the bytes; corrupt bytes are refused; tracer_died closes what
 * was open. */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>

#include "check.h"
#include "ptw_frames.h"
#include "ptw_record.h"
#include "ptw_spans.h"
#include "ptw_symbols.h"

static const struct ptw_location worker = { .addr = 0x401000, .symbol = "worker",
					    .module = "/bin/app", .has_offset = true,
					    .offset = 0x1000, .file = "app.c", .line = 12 };
static const struct ptw_location site = { .addr = 0x401200, .symbol = "main" };

struct got {
	struct ptw_spans *spans;
	int events, reports, ends;
	char routine[64];
	int line;
	const struct ptw_report *report;
};

static void on_event(void *ctx, const struct ptw_event *ev)
{
	struct got *g = ctx;
	g->events++;
	if (ev->routine) {
		snprintf(g->routine, sizeof(g->routine), "%s %s %s", ev->routine->symbol,
			 ev->routine->module, ev->routine->file);
		g->line = ev->routine->line;
	}
	ptw_spans_consume(g->spans, ev);
}

static void on_report(void *ctx, const struct ptw_report *r)
{
	struct got *g = ctx;
	g->reports++;
	g->report = r;
}

static void on_end(void *ctx)
{
	((struct got *)ctx)->ends++;
}

static const struct ptw_record_handlers handlers = { on_event, on_report, on_end };

static void encode(struct ptw_buf *b)
{
	struct ptw_record_writer *w = ptw_record_writer_new();
	struct ptw_event e = ptw_event_init(PTW_EV_IMAGE, 10, 100);
	e.name = "/bin/app";
	ptw_record_event(w, b, &e);
	e = ptw_event_init(PTW_EV_MAIN_START, 11, 100);
	e.routine = &site;
	ptw_record_event(w, b, &e);
	for (int i = 0; i < 3; i++) {
		e = ptw_event_init(PTW_EV_THREAD_CREATE, 20 + (uint64_t)i, 100);
		e.other_tid = 101 + i;
		e.pid = 100; /* -f: the process travels with each event */
		e.process = 3;
		e.pthread = 0x7f0000001000ull * (uint64_t)(i + 1);
		e.routine = &worker; /* sent once, named by number after */
		e.site = &site;
		e.detached = 0;
		ptw_record_event(w, b, &e);
		e = ptw_event_init(PTW_EV_THREAD_START, 30 + (uint64_t)i, 101 + i);
		e.routine = &worker;
		e.pid = 100;
		e.process = 3;
		ptw_record_event(w, b, &e);
	}
	e = ptw_event_init(PTW_EV_THREAD_RETURN, 40, 101);
	e.has_value = true;
	e.value = 7;
	ptw_record_event(w, b, &e);
	e = ptw_event_init(PTW_EV_LWP_EXIT, 41, 101);
	ptw_record_event(w, b, &e);
	/* tid 102 (span 3) past the open timeout, where it is */
	e = ptw_event_init(PTW_EV_SPAN_OPEN, 45, 102);
	e.span_kind = PTW_SPAN_THREAD;
	e.span_id = 3;
	e.has_value = true;
	e.value = 15;
	e.state = "S futex";
	e.wchan = "futex_wait_queue";
	e.name = "holder";
	e.routine = &worker; /* its PC: a location named by number */
	ptw_record_event(w, b, &e);
	e = ptw_event_init(PTW_EV_FRAME_ENTRY, 42, 102); /* --trace */
	e.routine = &worker;
	e.sp = 0x7ffd00001000ull;
	e.ret_addr = 0x401234;
	ptw_record_event(w, b, &e);

	char a0[] = "app", a1[] = "-x", code[] = "no_libc_debuginfo", msg[] = "install libc6-dbg";
	char *argv[] = { a0, a1, NULL };
	struct ptw_warning warn[] = { { code, msg, 3 } };
	const char *names[] = { "clone", "breakpoint" };
	uint64_t counts[] = { 3, 9 };
	struct ptw_report r = { .pid = 100, .exe = "/bin/app", .argv = argv, .mode = "attach",
				.glibc = NULL, .start_ns = 5, .strategy = "debuginfo",
				.stops_total = 12, .stop_names = names, .stop_counts = counts,
				.nstop_kinds = 2, .breakpoints = 8, .warnings = warn,
				.nwarnings = 1, .open_timeout_ns = 200000000 };
	ptw_record_report(w, b, &r);
	ptw_record_writer_free(w);
}

static void check_decoded(struct got *g)
{
	CHECK_EQ(g->events, 12);
	CHECK_EQ(g->reports, 1);
	CHECK_STR(g->routine, "worker /bin/app app.c");
	CHECK_EQ(g->line, 12);
	CHECK_EQ(g->report->pid, 100);
	CHECK_STR(g->report->argv[1], "-x");
	CHECK(g->report->argv[2] == NULL);
	CHECK(g->report->glibc == NULL);
	CHECK_STR(g->report->mode, "attach");
	CHECK_EQ(g->report->nstop_kinds, 2);
	CHECK_STR(g->report->stop_names[1], "breakpoint");
	CHECK_EQ(g->report->stop_counts[1], 9);
	CHECK_STR(g->report->warnings[0].code, "no_libc_debuginfo");
	CHECK_EQ(g->report->warnings[0].count, 3u);
	CHECK_EQ(ptw_spans_count(g->spans), 4);
	CHECK_EQ(ptw_spans_get(g->spans, 1)->status, PTW_STATUS_COMPLETED);
	CHECK_EQ(ptw_spans_get(g->spans, 1)->value.v, 7);
	CHECK_EQ(g->report->open_timeout_ns, 200000000);
	const struct ptw_span *slow = ptw_spans_get(g->spans, 2);
	CHECK_EQ(slow->tid, 102);
	CHECK_EQ(slow->pid, 100);
	CHECK_EQ(slow->process, 3);
	CHECK_EQ(slow->status, PTW_STATUS_OPEN);
	CHECK(slow->open_after_ns.set);
	CHECK_EQ(slow->open_after_ns.v, 45);
	CHECK_EQ(slow->open_for_ns, 15);
	CHECK_STR(slow->name, "holder");
	CHECK_STR(slow->open_state, "S futex");
	CHECK_STR(slow->open_wchan, "futex_wait_queue");
	CHECK(slow->open_at && slow->open_at->line == 12);
	const struct ptw_frame *fr = ptw_frames_get(ptw_spans_frames(g->spans), 0);
	CHECK(fr != NULL);
	if (fr) {
		CHECK_EQ(fr->sp, 0x7ffd00001000ull);
		CHECK_EQ(fr->ret, 0x401234);
		CHECK_EQ(fr->tid, 102);
		CHECK_EQ(fr->status, PTW_FRAME_OPEN);
	}
}

/* Fed in pieces of every size: a record split anywhere comes out whole. */
/* -f: processes, the latest record of each pid kept, in order of first. */
static void test_processes(void)
{
	struct ptw_buf b = { 0 };
	char a0[] = "srv", a1[] = "-w", why[] = "too many processes traced at once";
	char *argv[] = { a0, a1, NULL };
	struct ptw_process p = { .id = 0, .pid = 100, .exe = "/bin/srv", .argv = argv, .start_ns = 5,
				 .followed = true };
	ptw_record_process(&b, &p);
	struct ptw_process c = { .id = 2, .pid = 101, .ppid = 100, .parent_tid = 100, .exe = "/bin/srv",
				 .argv = argv, .start_ns = 7, .followed = true };
	ptw_record_process(&b, &c);
	c.end_ns = 9;
	c.exit_kind = PTW_EXIT_SIGNAL;
	c.exit_signal = SIGKILL;
	ptw_record_process(&b, &c);
	struct ptw_process d = { .id = 1, .pid = 102, .ppid = 100, .parent_tid = 100, .argv = argv,
				 .not_followed_why = why };
	ptw_record_process(&b, &d);
	struct got g = { .spans = ptw_spans_new() };
	struct ptw_record_reader *r = ptw_record_reader_new();
	for (size_t at = 0; at < b.len; at += 7)
		CHECK_EQ(ptw_record_feed(r, b.p + at, b.len - at < 7 ? b.len - at : 7, &handlers, &g),
			 0);
	const struct ptw_process *ps;
	CHECK_EQ(ptw_record_processes(r, &ps), 3);
	CHECK_EQ(ps[0].pid, 100);
	CHECK_STR(ps[0].argv[1], "-w");
	CHECK(ps[0].argv[2] == NULL);
	/* by id */
	CHECK_EQ(ps[2].id, 2);
	CHECK_EQ(ps[2].pid, 101);
	CHECK_EQ(ps[2].ppid, 100);
	CHECK_EQ(ps[2].exit_kind, PTW_EXIT_SIGNAL);
	CHECK_EQ(ps[2].exit_signal, SIGKILL);
	CHECK_EQ(ps[2].end_ns, 9);
	CHECK_EQ(ps[1].id, 1);
	CHECK_EQ(ps[1].pid, 102);
	CHECK(!ps[1].followed);
	CHECK(ps[1].exe == NULL);
	CHECK_STR(ps[1].not_followed_why, why);
	ptw_spans_free(g.spans);
	ptw_record_reader_free(r);
	ptw_buf_free(&b);
}

static void test_round_trip(void)
{
	struct ptw_buf b = { 0 };
	encode(&b);
	ptw_record_end(&b);
	for (size_t piece = 1; piece <= 64; piece *= 3) {
		struct got g = { .spans = ptw_spans_new() };
		struct ptw_record_reader *r = ptw_record_reader_new();
		for (size_t at = 0; at < b.len; at += piece) {
			size_t n = b.len - at < piece ? b.len - at : piece;
			CHECK_EQ(ptw_record_feed(r, b.p + at, n, &handlers, &g), 0);
		}
		check_decoded(&g);
		CHECK_EQ(g.ends, 1);
		ptw_spans_free(g.spans);
		ptw_record_reader_free(r);
	}
	ptw_buf_free(&b);
}

/* What the restorer does when the tracer died: whatever was open is
 * unmatched (tracer_died), with no end time made up; ended spans keep
 * theirs. */
static void test_tracer_died(void)
{
	struct ptw_buf b = { 0 };
	encode(&b);
	struct got g = { .spans = ptw_spans_new() };
	struct ptw_record_reader *r = ptw_record_reader_new();
	CHECK_EQ(ptw_record_feed(r, b.p, b.len, &handlers, &g), 0);
	CHECK_EQ(g.ends, 0);
	struct ptw_event e = ptw_event_init(PTW_EV_TRACER_DIED, 50, 100);
	ptw_spans_consume(g.spans, &e);
	ptw_spans_finish(g.spans);
	for (size_t i = 0; i < ptw_spans_count(g.spans); i++) {
		const struct ptw_span *sp = ptw_spans_get(g.spans, i);
		if (sp->tid == 101) {
			CHECK_EQ(sp->status, PTW_STATUS_COMPLETED);
			continue;
		}
		CHECK_EQ(sp->status, PTW_STATUS_UNMATCHED);
		CHECK_STR(sp->reason, "tracer_died");
		CHECK(!sp->end_ns.set);
		CHECK_EQ(sp->open_after_ns.set, sp->tid == 102); /* seen slow, still */
	}
	struct ptw_metrics m;
	ptw_spans_metrics(g.spans, &m);
	CHECK_EQ(m.open_spans, 0);
	CHECK_EQ(m.unmatched_spans, 3);
	CHECK_EQ(m.open_timeouts, 1);
	ptw_spans_free(g.spans);
	ptw_record_reader_free(r);
	ptw_buf_free(&b);
}

/* The tracer died after it had let go (attach: detach, --duration, Ctrl-C):
 * the spans were open at the detach, and the restorer's document says so. */
static void test_tracer_died_after_detach(void)
{
	struct ptw_buf b = { 0 };
	encode(&b);
	struct ptw_record_writer *w = ptw_record_writer_new();
	struct ptw_event e = ptw_event_init(PTW_EV_DETACHED, 48, 100);
	ptw_record_event(w, &b, &e);
	ptw_record_writer_free(w);
	struct got g = { .spans = ptw_spans_new() };
	struct ptw_record_reader *r = ptw_record_reader_new();
	CHECK_EQ(ptw_record_feed(r, b.p, b.len, &handlers, &g), 0);
	e = ptw_event_init(PTW_EV_TRACER_DIED, 50, 100);
	ptw_spans_consume(g.spans, &e);
	ptw_spans_finish(g.spans);
	struct ptw_metrics m;
	ptw_spans_metrics(g.spans, &m);
	CHECK_EQ(m.open_spans, 3);
	CHECK_EQ(m.unmatched_spans, 0);
	CHECK_EQ(m.open_timeouts, 1);
	ptw_spans_free(g.spans);
	ptw_record_reader_free(r);
	ptw_buf_free(&b);
}

/* Every field of an event crosses, the interrupt's action and why too
 * (the restorer's session said what ptwatch did about a Ctrl-C). */
static struct ptw_event last_event;
static void keep_event(void *ctx, const struct ptw_event *ev)
{
	(void)ctx;
	last_event = *ev;
}

static void test_interrupt_fields(void)
{
	struct ptw_buf b = { 0 };
	struct ptw_record_writer *w = ptw_record_writer_new();
	struct ptw_event e = ptw_event_init(PTW_EV_INTERRUPT, 77, 100);
	e.sig = 2;
	e.action = PTW_INTR_DETACHED;
	e.why = PTW_INTR_AGAIN;
	e.core_dumped = true;
	ptw_record_event(w, &b, &e);
	ptw_record_writer_free(w);
	struct ptw_record_handlers h = { .event = keep_event };
	struct ptw_record_reader *r = ptw_record_reader_new();
	CHECK_EQ(ptw_record_feed(r, b.p, b.len, &h, NULL), 0);
	CHECK_EQ(last_event.kind, PTW_EV_INTERRUPT);
	CHECK_EQ(last_event.sig, 2);
	CHECK_EQ(last_event.action, PTW_INTR_DETACHED);
	CHECK_EQ(last_event.why, PTW_INTR_AGAIN);
	CHECK_EQ(last_event.core_dumped, true);
	ptw_record_reader_free(r);
	ptw_buf_free(&b);
}

/* A live deadlock's proof crosses: the restorer's document says how it
 * was confirmed (the kernel backend's without a stop). */
static void test_deadlock_proof(void)
{
	struct ptw_buf b = { 0 };
	struct ptw_record_writer *w = ptw_record_writer_new();
	struct ptw_event e = ptw_event_init(PTW_EV_DEADLOCK, 77, 100);
	e.span_id = 1;
	e.proof = PTW_PROOF_REREAD;
	ptw_record_event(w, &b, &e);
	ptw_record_writer_free(w);
	struct ptw_record_handlers h = { .event = keep_event };
	struct ptw_record_reader *r = ptw_record_reader_new();
	CHECK_EQ(ptw_record_feed(r, b.p, b.len, &h, NULL), 0);
	CHECK_EQ(last_event.kind, PTW_EV_DEADLOCK);
	CHECK_EQ(last_event.proof, PTW_PROOF_REREAD);
	ptw_record_reader_free(r);
	ptw_buf_free(&b);
}

/* Bytes that make no sense are refused, and nothing after them is read. */
static void test_corrupt(void)
{
	struct ptw_buf b = { 0 };
	encode(&b);
	/* the first record's type and length (a number in a payload can be
	 * anything: that is not what this is about) */
	static const size_t spots[] = { 0, 1, 2, 4 };
	for (size_t k = 0; k < sizeof(spots) / sizeof(spots[0]); k++) {
		struct ptw_buf c = { 0 };
		ptw_buf_add(&c, b.p, b.len);
		c.p[spots[k]] = (char)0xee;
		struct got g = { .spans = ptw_spans_new() };
		struct ptw_record_reader *r = ptw_record_reader_new();
		int rc = ptw_record_feed(r, c.p, c.len, &handlers, &g);
		/* refused, or (a length made larger) still waiting for the
		 * rest: never all the events, as if nothing were wrong */
		CHECK(rc == -EPROTO || (rc == 0 && g.events < 11));
		if (rc == -EPROTO) /* and nothing more is read */
			CHECK_EQ(ptw_record_feed(r, b.p, b.len, &handlers, &g), -EPROTO);
		ptw_spans_free(g.spans);
		ptw_record_reader_free(r);
		ptw_buf_free(&c);
	}
	ptw_buf_free(&b);
}

int main(void)
{
	test_round_trip();
	test_processes();
	test_tracer_died();
	test_tracer_died_after_detach();
	test_corrupt();
	test_interrupt_fields();
	test_deadlock_proof();
	CHECK_DONE();
}
