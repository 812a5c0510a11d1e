/* SPDX-License-Identifier: MIT */
/* ptwatch report: a document and a stream read back render the same
 * document, summary and Chrome trace as the session that wrote them; bad
 * input (every prefix, byte flips, garbage, another schema) is a one-line
 * error, never a crash (make check-asan runs it under ASan; meson test
 * --setup=valgrind under memcheck). */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "ptw_frames.h"
#include "ptw_load.h"
#include "ptw_output.h"
#include "ptw_spans.h"
#include "ptw_symbols.h"
#include "ptw_util.h"

#define MAIN 100

static const struct ptw_location worker = { .addr = 0x401000, .symbol = "worker",
					    .module = "/bin/app", .has_offset = true,
					    .offset = 0x1000, .file = "/src/app.c", .line = 12 };
static const struct ptw_location anon = { .addr = 0x402000, .module = "/bin/app",
					  .has_offset = true, .offset = 0x2000 };
static const struct ptw_location site = { .addr = 0x401200, .symbol = "main" };

static uint64_t now;

static void feed(struct ptw_spans *s, struct ptw_event e)
{
	ptw_spans_consume(s, &e);
	ptw_spans_collect(s);
}

static struct ptw_event ev(enum ptw_event_kind k, pid_t tid)
{
	return ptw_event_init(k, now += 1777, tid);
}

/* A session: threads that return, exit, are cancelled, detached, never
 * joined, a frame, an open timeout; the process exits. */
static void session(struct ptw_spans *s, int nthreads)
{
	now = 5000000;
	feed(s, ev(PTW_EV_IMAGE, MAIN));
	struct ptw_event e = ev(PTW_EV_MAIN_START, MAIN);
	e.pthread = 0x7f00;
	e.routine = &site;
	feed(s, e);
	for (int i = 0; i < nthreads; i++) {
		pid_t tid = 200 + i;
		uint64_t pt = 0x10000 + (uint64_t)i * 0x1000;
		e = ev(PTW_EV_THREAD_CREATE, MAIN);
		e.other_tid = tid;
		e.pthread = pt;
		e.routine = i % 7 == 6 ? &anon : &worker;
		e.site = &site;
		e.detached = i % 5 == 4;
		e.has_arg = true;
		e.arg = (uint64_t)i;
		feed(s, e);
		e = ev(PTW_EV_THREAD_START, tid);
		e.routine = i % 7 == 6 ? &anon : &worker;
		feed(s, e);
		if (i % 3 == 0) {
			e = ev(PTW_EV_THREAD_NAME, tid);
			e.name = "w\"q\xc3\xa9";
			feed(s, e);
		}
		if (i == 1) {
			e = ev(PTW_EV_SPAN_OPEN, tid);
			e.span_kind = PTW_SPAN_THREAD;
			e.span_id = 3;
			e.has_value = true;
			e.value = 123456;
			e.state = "S futex";
			e.wchan = "futex_wait";
			e.routine = &worker;
			feed(s, e);
			e = ev(PTW_EV_FRAME_ENTRY, tid);
			e.routine = &worker;
			e.sp = 0x7000;
			e.ret_addr = 0x401f00;
			feed(s, e);
			e = ev(PTW_EV_FRAME_RETURN, tid);
			e.sp = 0x7008;
			e.ret_addr = 0x401f00;
			e.has_value = true;
			e.value = 9;
			feed(s, e);
		}
		if (i % 4 == 1) {
			e = ev(PTW_EV_EXIT_CALL, tid);
			e.value = 0x77;
			feed(s, e);
			e = ev(PTW_EV_THREAD_DEATH, tid);
			e.unwinding = 1;
			feed(s, e);
		} else if (i % 4 == 2) {
			e = ev(PTW_EV_CANCEL_REQUEST, MAIN);
			e.pthread = pt;
			feed(s, e);
			e = ev(PTW_EV_THREAD_DEATH, tid);
			e.unwinding = 1;
			feed(s, e);
		} else {
			e = ev(PTW_EV_THREAD_RETURN, tid);
			e.value = (uint64_t)i * 3;
			feed(s, e);
			e = ev(PTW_EV_THREAD_DEATH, tid);
			e.unwinding = 0;
			feed(s, e);
		}
		e = ev(PTW_EV_LWP_EXIT, tid);
		e.exit_how = PTW_EXIT_SELF;
		feed(s, e);
		if (i % 5 != 4 && i % 11 != 10) {
			e = ev(PTW_EV_JOIN_CALL, MAIN);
			e.pthread = pt;
			feed(s, e);
			e = ev(PTW_EV_JOIN_RETURN, MAIN);
			e.has_value = true;
			feed(s, e);
		}
	}
	e = ev(PTW_EV_THREAD_RETURN, MAIN);
	e.value = 3;
	feed(s, e);
	e = ev(PTW_EV_PROCESS_EXIT, MAIN);
	e.exit_code = 3;
	feed(s, e);
	ptw_spans_finish(s);
}

static char w_code[] = "w1", w_msg[] = "a warning \"quoted\"";
static const struct ptw_warning warnings[] = { { w_code, w_msg } };
static const char *const stop_names[] = { "signal", "clone" };
static const uint64_t stop_counts[] = { 40, 12 };
static char a0[] = "app", a1[] = "--x";
static char *const argv_[] = { a0, a1, NULL };

static void header(struct ptw_report *r, struct ptw_spans *s)
{
	memset(r, 0, sizeof(*r));
	r->tool_version = "0.1.0";
	r->realtime_offset_ns = 17;
	r->pid = MAIN;
	r->exe = "/bin/app";
	r->argv = argv_;
	r->mode = "launch";
	r->glibc = "2.36";
	r->exit_kind = PTW_EXIT_CODE;
	r->exit_code = 3;
	r->fate = PTW_FATE_ENDED;
	r->start_ns = 4000000;
	r->end_ns = now + 1000;
	r->end_reason = "target_exited";
	r->strategy = "debuginfo";
	r->stops_total = 52;
	r->stop_names = stop_names;
	r->stop_counts = stop_counts;
	r->nstop_kinds = 2;
	r->breakpoints = 9;
	r->open_timeout_ns = 5000000000ull;
	r->spans = s;
	r->warnings = warnings;
	r->nwarnings = 1;
}

static void lines_of(struct ptw_lines *l, const struct ptw_span *sp)
{
	ptw_lines_span(l, "span", sp, 0);
}

static void frame_line(void *ctx, const struct ptw_frame *fr)
{
	ptw_lines_frame(ctx, fr);
}

/* What `--json-lines` writes for the same session, into a file. */
static char *stream_text(int nthreads, size_t *len, struct ptw_buf *summary)
{
	FILE *f = tmpfile();
	struct ptw_lines l = { .fd = fileno(f) };
	struct ptw_spans *s = ptw_spans_new();
	ptw_spans_set_streaming(s, (ptw_span_retire_fn)lines_of, &l);
	ptw_frames_set_closed(ptw_spans_frames_mut(s), frame_line, &l); /* as main.c */
	struct ptw_report r;
	header(&r, s);
	ptw_lines_header(&l, &r);
	session(s, nthreads);
	ptw_spans_retire_all(s);
	const struct ptw_frames *fr = ptw_spans_frames(s);
	for (size_t i = 0; i < ptw_frames_count(fr); i++) /* those still open */
		ptw_lines_frame(&l, ptw_frames_get(fr, i));
	ptw_lines_end(&l, &r);
	ptw_text_summary(summary, &r);
	ptw_spans_free(s);
	fflush(f);
	long n = ftell(f);
	char *text = malloc((size_t)n + 1);
	rewind(f);
	CHECK_EQ(fread(text, 1, (size_t)n, f), (size_t)n);
	fclose(f);
	*len = (size_t)n;
	return text;
}

/* The document without its active_series (a loaded document has none). */
static void strip_series(struct ptw_buf *b)
{
	char *at = strstr(b->p, "\"active_series\": [");
	if (!at)
		return;
	char *end = at + 18;
	for (int depth = 1; *end && depth; end++)
		depth += *end == '[' ? 1 : *end == ']' ? -1 : 0;
	memmove(at + 18, end - 1, strlen(end - 1) + 1);
	b->len = strlen(b->p);
}

static void test_document(int nthreads)
{
	struct ptw_spans *s = ptw_spans_new();
	struct ptw_report r;
	session(s, nthreads);
	header(&r, s);
	struct ptw_buf doc = { 0 }, sum = { 0 }, chrome = { 0 };
	ptw_report_json(&r, &doc);
	ptw_text_summary(&sum, &r);
	ptw_report_chrome(&r, &chrome);

	struct ptw_loaded *l = NULL;
	char err[256];
	CHECK_EQ(ptw_load(doc.p, doc.len, true, NULL, &l, err, sizeof(err)), 0);
	if (!l) {
		fprintf(stderr, "load: %s\n", err);
		return;
	}
	struct ptw_buf doc2 = { 0 }, sum2 = { 0 }, chrome2 = { 0 };
	ptw_report_json(&l->report, &doc2);
	ptw_text_summary(&sum2, &l->report);
	ptw_report_chrome(&l->report, &chrome2);
	strip_series(&doc);
	strip_series(&doc2);
	CHECK_STR(doc2.p, doc.p);
	CHECK_STR(sum2.p, sum.p);
	CHECK_STR(chrome2.p, chrome.p);
	if (strcmp(sum.p, sum2.p))
		fprintf(stderr, "live:\n%s\nreport:\n%s\n", sum.p, sum2.p);
	ptw_loaded_free(l);

	/* filtered: only the cancelled ones' tids */
	struct ptw_text_filter f = { 0 };
	CHECK_EQ(ptw_text_filter_tids(&f, "202,206"), 0);
	if (ptw_load(doc.p, doc.len, false, &f, &l, err, sizeof(err)) < 0) {
		fprintf(stderr, "filtered load: %s\n", err);
		check_failures++;
		return;
	}
	CHECK_EQ(ptw_spans_count(l->report.spans), 2);
	ptw_loaded_free(l);
	free(f.tids);
	f = (struct ptw_text_filter){ .routine = "app+0x2*" };
	CHECK_EQ(ptw_load(doc.p, doc.len, false, &f, &l, err, sizeof(err)), 0);
	CHECK_EQ(ptw_spans_count(l->report.spans), (size_t)(nthreads + 1) / 7);
	ptw_loaded_free(l);

	/* another version: one line naming it */
	char *old = strdup(doc.p);
	memcpy(strstr(old, "ptwatch.spans/4"), "ptwatch.spans/2", 15);
	CHECK_EQ(ptw_load(old, strlen(old), true, NULL, &l, err, sizeof(err)), -EINVAL);
	CHECK(strstr(err, "schema ptwatch.spans/2 is not supported") != NULL);
	free(old);

	/* every prefix, and a byte changed here and there */
	size_t accepted = 0;
	for (size_t k = 0; k < doc.len; k += 1 + k / 64) {
		if (ptw_load(doc.p, k, true, NULL, &l, err, sizeof(err)) == 0) {
			accepted++;
			ptw_loaded_free(l);
		} else {
			CHECK(err[0] && !strchr(err, '\n'));
		}
	}
	CHECK_EQ(accepted, 0);
	char *m = malloc(doc.len);
	unsigned seed = 9;
	for (int round = 0; round < 400; round++) {
		memcpy(m, doc.p, doc.len);
		for (int n = 0; n < 3; n++)
			m[rand_r(&seed) % doc.len] = "0\"{}[],:-x\\n1"[rand_r(&seed) % 13];
		if (ptw_load(m, doc.len, round & 1, NULL, &l, err, sizeof(err)) == 0) {
			struct ptw_buf out = { 0 };
			ptw_text_summary(&out, &l->report);
			ptw_report_chrome(&l->report, &out);
			ptw_buf_free(&out);
			ptw_loaded_free(l);
		}
	}
	free(m);
	ptw_buf_free(&doc);
	ptw_buf_free(&doc2);
	ptw_buf_free(&sum);
	ptw_buf_free(&sum2);
	ptw_buf_free(&chrome);
	ptw_buf_free(&chrome2);
	ptw_spans_free(s);
}

static void test_stream(int nthreads)
{
	size_t len;
	struct ptw_buf live = { 0 };
	char *text = stream_text(nthreads, &len, &live);
	struct ptw_loaded *l = NULL;
	char err[256];
	CHECK_EQ(ptw_load(text, len, true, NULL, &l, err, sizeof(err)), 0);
	if (!l) {
		fprintf(stderr, "load: %s\n", err);
		return;
	}
	CHECK(l->stream && !l->truncated);
	struct ptw_buf sum = { 0 };
	ptw_text_summary(&sum, &l->report);
	CHECK_STR(sum.p, live.p);
	if (strcmp(sum.p, live.p))
		fprintf(stderr, "live:\n%s\nreport:\n%s\n", live.p, sum.p);
	ptw_buf_free(&sum);
	ptw_loaded_free(l);
	/* cut anywhere: a report with a warning, or one line of error */
	for (size_t k = 0; k < len; k += 1 + k / 50) {
		int r = ptw_load(text, k, true, NULL, &l, err, sizeof(err));
		if (r == 0) {
			CHECK(l->truncated);
			ptw_buf_reset(&sum);
			ptw_text_summary(&sum, &l->report);
			ptw_loaded_free(l);
		} else {
			CHECK(err[0] && !strchr(err, '\n'));
		}
	}
	ptw_buf_free(&sum);
	ptw_buf_free(&live);
	free(text);
}

int main(void)
{
	test_document(12);
	test_document(100); /* the summary groups them */
	test_stream(12);
	test_stream(300);
	CHECK_EQ(ptw_load("", 0, true, NULL, &(struct ptw_loaded *){ NULL }, NULL, 0), -EINVAL);
	return check_failures ? 1 : 0;
}
