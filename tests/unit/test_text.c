/* SPDX-License-Identifier: MIT */
/* Locations in the text output: names, module+offset when nothing names
 * the address (as eu-stack and perf), a known name, no module at all; the
 * summary of threads seen only as LWPs (strategy lwp). */
#define _GNU_SOURCE /* memmem */
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "ptw_output.h"
#include "ptw_symbols.h"
#include "ptw_util.h"

static void check(const struct ptw_location *loc, const char *known, const char *want)
{
	struct ptw_buf b = { 0 };
	ptw_text_location(&b, loc, known);
	CHECK_STR(b.p, want);
	ptw_buf_free(&b);
}

/* --trace: each thread's frames nested below it, a table per function. */
static void test_frames_summary(void)
{
	static const struct ptw_location fn = { .addr = 0x401000, .symbol = "rec", .file = "r.c",
						.line = 3 };
	struct ptw_spans *s = ptw_spans_new();
	struct ptw_event e = ptw_event_init(PTW_EV_IMAGE, 1000, 100);
	ptw_spans_consume(s, &e);
	for (int i = 0; i < 2; i++) {
		e = ptw_event_init(PTW_EV_FRAME_ENTRY, 2000 + 1000 * (uint64_t)i, 100);
		e.routine = &fn;
		e.sp = 0x7000 - 0x40 * (uint64_t)i;
		e.ret_addr = i ? 0x401050 : 0x401f00;
		ptw_spans_consume(s, &e);
	}
	e = ptw_event_init(PTW_EV_FRAME_RETURN, 10000, 100);
	e.sp = 0x7000 - 0x40 + 8;
	e.ret_addr = 0x401050;
	ptw_spans_consume(s, &e);
	e = ptw_event_init(PTW_EV_PROCESS_EXIT, 20000, 100);
	ptw_spans_consume(s, &e);
	struct ptw_report r = { .spans = s, .strategy = "debuginfo", .fate = PTW_FATE_ENDED };
	struct ptw_buf b = { 0 };
	ptw_text_summary(&b, &r);
	CHECK(strstr(b.p, "frames: 2 calls, 1 completed, 1 unmatched, 0 open\n") != NULL);
	CHECK(strstr(b.p, "    {1} rec (r.c:3)  unmatched (process_exit) after 18.0 us\n") != NULL);
	CHECK(strstr(b.p, "      {2} rec (r.c:3)  7.0 us\n") != NULL);
	CHECK(strstr(b.p, "FUNCTION") != NULL);
	if (check_failures)
		fprintf(stderr, "%s", b.p);
	ptw_buf_free(&b);
	ptw_spans_free(s);
}

/* A process whose threads were only seen as LWPs: the main thread (main()
 * not found) and n raw clones that exited by themselves, one still open. */
static struct ptw_spans *lwp_spans(int n)
{
	struct ptw_spans *s = ptw_spans_new();
	uint64_t ns = 1000;
	struct ptw_event e = ptw_event_init(PTW_EV_IMAGE, ns, 100);
	ptw_spans_consume(s, &e);
	for (int i = 0; i < n; i++) {
		e = ptw_event_init(PTW_EV_LWP_CREATE, ns += 1000, 100);
		e.other_tid = 101 + i;
		ptw_spans_consume(s, &e);
	}
	for (int i = 0; i + 1 < n; i++) {
		e = ptw_event_init(PTW_EV_LWP_EXIT, ns += 2000000, 101 + i);
		e.exit_how = PTW_EXIT_SELF;
		ptw_spans_consume(s, &e);
	}
	ptw_spans_finish(s);
	return s;
}

static char *summary(struct ptw_spans *s)
{
	struct ptw_report r = { .pid = 100, .mode = "launch", .fate = PTW_FATE_ENDED,
				.end_reason = "target_exited", .strategy = "lwp", .spans = s };
	struct ptw_buf b = { 0 };
	ptw_text_summary(&b, &r);
	return b.p;
}

static void test_lwp_summary(void)
{
	struct ptw_spans *s = lwp_spans(3);
	char *text = summary(s);
	/* one row per span: main's routine unknown, lwp_exited with a lifetime */
	CHECK(strstr(text, "     1 100       - -    -             open") != NULL);
	CHECK(strstr(text, "     2 101     100 -    -             lwp_exited -         - 2.00 ms") !=
	      NULL);
	CHECK(strstr(text, "pthread_start_routine") == NULL);
	CHECK(strstr(text, "LWP EXITED") == NULL);
	CHECK(strstr(text, "lifetime      n=2 ") != NULL);
	if (!strstr(text, "lwp_exited -         - 2.00 ms"))
		fprintf(stderr, "%s", text);
	free(text);
	ptw_spans_free(s);

	/* grouped (more than 40 spans): an LWP EXITED column */
	s = lwp_spans(50);
	text = summary(s);
	CHECK(strstr(text, " LWP EXITED ") != NULL);
	/* main (no main() found) and the clones in one group, "-" */
	CHECK(strstr(text, "      51 -                     0      0         49         0         0    2 -") !=
	      NULL);
	if (!strstr(text, "      51 -"))
		fprintf(stderr, "%s", text);
	free(text);
	ptw_spans_free(s);
}

/* A name of 100 KB is printed whole in its row, and pads no other row
 * (a hostile binary's symbol, or a document that claims one). */
static void test_long_name_pads_nothing(void)
{
	size_t n = 100000;
	char *longname = xmalloc(n + 1);
	memset(longname, 'x', n);
	longname[n] = '\0';
	struct ptw_location big = { .addr = 0x401000, .symbol = longname };
	struct ptw_location small = { .addr = 0x402000, .symbol = "w" };
	struct ptw_spans *s = ptw_spans_new();
	struct ptw_event e = ptw_event_init(PTW_EV_IMAGE, 1000, 100);
	ptw_spans_consume(s, &e);
	for (int i = 0; i < 2; i++) {
		e = ptw_event_init(PTW_EV_THREAD_CREATE, 2000 + 10 * (uint64_t)i, 100);
		e.other_tid = 101 + i;
		e.pthread = 0x7f0000001000ull * (uint64_t)(i + 1);
		e.routine = i ? &small : &big;
		ptw_spans_consume(s, &e);
	}
	e = ptw_event_init(PTW_EV_PROCESS_EXIT, 20000, 100);
	ptw_spans_consume(s, &e);
	ptw_spans_finish(s);
	struct ptw_report r = { .spans = s, .strategy = "debuginfo", .fate = PTW_FATE_ENDED };
	struct ptw_buf b = { 0 };
	ptw_text_summary(&b, &r);
	CHECK(strstr(b.p, longname) != NULL); /* whole */
	size_t longest_other = 0;
	for (char *line = b.p, *nl; line && *line; line = nl ? nl + 1 : NULL) {
		nl = strchr(line, '\n');
		size_t len = nl ? (size_t)(nl - line) : strlen(line);
		if (!memmem(line, len, "xxxxxxxxxx", 10) && len > longest_other)
			longest_other = len;
	}
	CHECK(longest_other < 400);
	ptw_buf_free(&b);
	ptw_spans_free(s);
	free(longname);
}

int main(void)
{
	test_frames_summary();
	test_long_name_pads_nothing();
	struct ptw_location named = { .addr = 0x401136, .symbol = "fixture::Worker::run(void*)",
				      .linkage_name = "_ZN7fixture6Worker3runEPv",
				      .module = "/usr/bin/app", .has_offset = true, .offset = 0x1136,
				      .file = "/src/app/worker.cpp", .line = 12 };
	check(&named, NULL, "fixture::Worker::run(void*) (worker.cpp:12)");
	struct ptw_location inside = { .addr = 0x7f0000001010, .symbol = "start_thread",
				       .symbol_offset = 0x10, .module = "/lib/libc.so.6",
				       .has_offset = true, .offset = 0x1010 };
	check(&inside, NULL, "start_thread+0x10");
	struct ptw_location stripped = { .addr = 0x55555555a2b0, .module = "/usr/bin/memcached",
					 .has_offset = true, .offset = 0x62b0 };
	check(&stripped, NULL, "memcached+0x62b0");
	check(&stripped, "main", "main (memcached+0x62b0)");
	struct ptw_location jit = { .addr = 0x7f12345678 };
	check(&jit, NULL, "0x7f12345678");
	check(NULL, "main", "main");
	check(NULL, NULL, "?");
	test_lwp_summary();
	CHECK_DONE();
}
