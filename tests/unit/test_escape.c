/* SPDX-License-Identifier: MIT */
/* Hostile strings (issue 18, item 7): what the target controls (thread
 * names, paths, symbols) reaches the text output escaped, as strace writes
 * it, and the JSON keeps it whole. */
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "ptw_live.h"
#include "ptw_output.h"
#include "ptw_symbols.h"
#include "ptw_util.h"

static void escaped(const char *in, const char *want)
{
	struct ptw_buf b = { 0 };
	ptw_buf_put_escaped(&b, in);
	CHECK_STR(b.p ? b.p : "", want);
	ptw_buf_free(&b);
	char *dup = ptw_escape_str(in);
	CHECK_STR(dup, want);
	CHECK_EQ(ptw_needs_escape(in), strcmp(in, want) != 0);
	free(dup);
}

/* No byte a terminal acts on: C0 but newline, DEL, C1, bidi controls. */
static bool terminal_safe(const char *s)
{
	const unsigned char *p = (const unsigned char *)s;
	for (size_t i = 0; p[i]; i++) {
		if ((p[i] < 0x20 && p[i] != '\n') || p[i] == 0x7f)
			return false;
		if (p[i] == 0xc2 && p[i + 1] >= 0x80 && p[i + 1] < 0xa0)
			return false;
		if (p[i] == 0xe2 && p[i + 1] == 0x80 && (p[i + 2] == 0x8e || p[i + 2] == 0x8f ||
							 (p[i + 2] >= 0xaa && p[i + 2] <= 0xae)))
			return false;
		if (p[i] == 0xe2 && p[i + 1] == 0x81 && p[i + 2] >= 0xa6 && p[i + 2] <= 0xa9)
			return false;
		size_t n = ptw_utf8_sequence(p + i, 4);
		if (p[i] >= 0x80 && !n)
			return false; /* not UTF-8: a Latin-1 terminal's C1 (0x9b: CSI) */
		if (n > 1)
			i += n - 1;
	}
	return true;
}

static void test_escape(void)
{
	escaped("worker-3", "worker-3");
	escaped("", "");
	/* the name of issue 18: OSC retitle, BEL, ED (clear the screen) */
	escaped("\x1b]0;pwn\a\x1b[2J", "\\x1b]0;pwn\\x07\\x1b[2J");
	escaped("a\nb\tc\rd", "a\\nb\\tc\\rd");
	escaped("back\\slash", "back\\\\slash");
	escaped("\x01\x7f", "\\x01\\x7f");
	escaped("w\xc3\xb6rker \xe2\x82\xac \xf0\x9f\x98\x80", "w\xc3\xb6rker \xe2\x82\xac \xf0\x9f\x98\x80");
	escaped("\x9b" "2J", "\\x9b2J");			/* 8-bit CSI, not UTF-8 */
	escaped("\xc2\x9b" "2J", "\\xc2\\x9b2J");		/* U+009B, C1 CSI */
	escaped("\xc2\xa0nbsp", "\xc2\xa0nbsp");		/* U+00A0 is text */
	escaped("x\xffy\xc0\xaf", "x\\xffy\\xc0\\xaf");		/* stray, overlong */
	escaped("\xe2\x82", "\\xe2\\x82");			/* cut short */
	escaped("abc\xe2\x80\xae" "cba", "abc\\xe2\\x80\\xaecba"); /* U+202E RLO */
	escaped("\xe2\x81\xa6x", "\\xe2\\x81\\xa6x");		/* U+2066 LRI */
	char *n = ptw_escape_str(NULL);
	CHECK(n == NULL);
	struct ptw_buf b = { 0 };
	ptw_buf_put_escaped_n(&b, "a\0b", 3); /* a NUL in a length-given string */
	CHECK_STR(b.p, "a\\x00b");
	ptw_buf_free(&b);
}

/* Every string a hostile target chooses, in one session: its exe, a thread
 * name, a symbol, a module and a source file. */
static const char *const evil = "\x1b]0;pwn\a\x1b[2J\n\xc2\x9b\xff";
static const char *const evil_text = "\\x1b]0;pwn\\x07\\x1b[2J\\n\\xc2\\x9b\\xff";

static struct ptw_spans *evil_spans(const struct ptw_location *loc)
{
	struct ptw_spans *s = ptw_spans_new();
	struct ptw_event e = ptw_event_init(PTW_EV_IMAGE, 1000, 100);
	e.name = evil;
	ptw_spans_consume(s, &e);
	e = ptw_event_init(PTW_EV_THREAD_CREATE, 2000, 100);
	e.other_tid = 101;
	e.pthread = 0x7f00;
	e.routine = loc;
	ptw_spans_consume(s, &e);
	e = ptw_event_init(PTW_EV_THREAD_START, 3000, 101);
	e.routine = loc;
	ptw_spans_consume(s, &e);
	e = ptw_event_init(PTW_EV_THREAD_NAME, 4000, 101);
	e.name = evil;
	ptw_spans_consume(s, &e);
	return s;
}

static void test_text_output(void)
{
	struct ptw_location loc = { .addr = 0x401000, .symbol = evil, .module = evil,
				    .has_offset = true, .offset = 0x1000, .file = evil, .line = 7 };
	struct ptw_location anon = { .addr = 0x401000, .module = "/x/\x1b[31mlib.so",
				     .has_offset = true, .offset = 0x10 };
	struct ptw_buf b = { 0 };
	ptw_text_location(&b, &loc, NULL);
	ptw_buf_putc(&b, '|');
	ptw_text_location(&b, &anon, "main");
	char *want = xasprintf("%s (%s:7)|main (\\x1b[31mlib.so+0x10)", evil_text, evil_text);
	CHECK_STR(b.p, want);
	free(want);
	ptw_buf_free(&b);

	struct ptw_spans *s = evil_spans(&loc);
	struct ptw_text_style st = { .start_ns = 0 };
	struct ptw_event e = ptw_event_init(PTW_EV_IMAGE, 1000, 100);
	e.name = evil;
	ptw_text_event(&b, &st, &e, NULL);
	CHECK(strstr(b.p, evil_text) != NULL);
	e = ptw_event_init(PTW_EV_SPAN_OPEN, 5000, 101);
	e.span_kind = PTW_SPAN_THREAD;
	e.value = 1000;
	e.state = "S read";
	e.wchan = "pipe_read\x1b[2J";
	ptw_text_event(&b, &st, &e, ptw_spans_by_tid(s, 101));
	CHECK(strstr(b.p, "pipe_read\\x1b[2J") != NULL);
	/* -v: the raw line names the event's name too */
	struct ptw_text_filter f = { .verbose = true };
	e = ptw_event_init(PTW_EV_THREAD_NAME, 4000, 101);
	e.name = evil;
	ptw_text_event_filtered(&b, &st, &e, ptw_spans_by_tid(s, 101), NULL, &f);
	CHECK(terminal_safe(b.p));
	if (!terminal_safe(b.p))
		fprintf(stderr, "%s", b.p);
	ptw_buf_free(&b);

	char code[] = "x", *message = xstrdup(evil);
	struct ptw_warning w = { .code = code, .message = message };
	struct ptw_report r = { .pid = 100, .mode = "launch", .fate = PTW_FATE_LIVES_ON,
				.end_reason = "detached\x1b[2J", .strategy = "debuginfo\a", .exe = evil,
				.spans = s, .warnings = &w, .nwarnings = 1 };
	ptw_spans_finish(s);
	ptw_text_summary(&b, &r);
	CHECK(terminal_safe(b.p));
	CHECK(strstr(b.p, evil_text) != NULL); /* the NAME column and the routine */
	CHECK(strstr(b.p, "warning: \\x1b]0;pwn") != NULL);
	CHECK(strstr(b.p, "detached (detached\\x1b[2J)") != NULL);
	CHECK(strstr(b.p, "strategy debuginfo\\x07") != NULL);
	if (!terminal_safe(b.p) || !strstr(b.p, evil_text))
		fprintf(stderr, "%s", b.p);
	ptw_buf_free(&b);
	r.snapshot = true;
	ptw_text_snapshot(&b, &r);
	CHECK(terminal_safe(b.p));
	CHECK(strstr(b.p, "snapshot of 100 (\\x1b]0;pwn") != NULL);
	ptw_buf_free(&b);

	/* The JSON keeps the name whole: control characters as \uXXXX (\n as
	 * \n), valid UTF-8 as it is, a byte that is not UTF-8 as the code
	 * point of its value (0xff: \u00ff). */
	struct ptw_json j = { .out = &b };
	ptw_json_span(&j, ptw_spans_by_tid(s, 101));
	CHECK(strstr(b.p, "\"name\":\"\\u001b]0;pwn\\u0007\\u001b[2J\\n\xc2\x9b\\u00ff\"") != NULL);
	if (!strstr(b.p, "\"name\":\"\\u001b]0;pwn"))
		fprintf(stderr, "%s\n", b.p);
	ptw_buf_free(&b);
	ptw_spans_free(s);
	free(message);
}

/* The live table's rows: the name and routine escaped (the screen gets
 * what the text output gets). */
static void test_live_rows(void)
{
	struct ptw_location loc = { .addr = 0x401000, .symbol = "w\x1b[2J" };
	struct ptw_spans *s = evil_spans(&loc);
	struct ptw_live_model *m = ptw_live_model_new();
	ptw_live_model_note(m, ptw_spans_by_tid(s, 101), 5000);
	struct ptw_live_query q = { .view = PTW_LIVE_THREADS };
	const struct ptw_live_row *rows;
	const struct ptw_live_group *groups;
	size_t n = ptw_live_model_build(m, 6000, &q, &rows, &groups);
	CHECK_EQ(n, 1);
	if (n == 1) {
		CHECK_STR(rows[0].name, evil_text);
		CHECK_STR(rows[0].routine, "w\\x1b[2J");
		CHECK(terminal_safe(rows[0].state));
	}
	ptw_live_model_free(m);
	ptw_spans_free(s);
}

/* A thread's name read from /proc/PID/status at its end (one file fewer
 * than comm and status): the kernel escapes only a backslash and a
 * newline there (checked on 6.18 with "a\\b\nc d\t\x01"). */
static void test_status_name(void)
{
	char name[16];
	CHECK(ptw_proc_status_name("Name:\tworker\nUmask:\t0022\n", name, sizeof(name)));
	CHECK_STR(name, "worker");
	CHECK(ptw_proc_status_name("Name:\ta\\\\b\\nc d\t\x01\nState:\tS\n", name, sizeof(name)));
	CHECK_STR(name, "a\\b\nc d\t\x01");
	/* a backslash before another letter is the name's own */
	CHECK(ptw_proc_status_name("Name:\ta\\x\\\n", name, sizeof(name)));
	CHECK_STR(name, "a\\x\\");
	CHECK(ptw_proc_status_name("Name:\t\n", name, sizeof(name)));
	CHECK_STR(name, "");
	/* cut to size, and nothing read past the end of the text */
	char small[4];
	CHECK(ptw_proc_status_name("Name:\tabcdef\\", small, sizeof(small)));
	CHECK_STR(small, "abc");
	CHECK(!ptw_proc_status_name("State:\tS\n", name, sizeof(name)));
	CHECK(!ptw_proc_status_name("Name:\tx", name, 0));
}

int main(void)
{
	test_status_name();
	test_escape();
	test_text_output();
	test_live_rows();
	CHECK_DONE();
}
