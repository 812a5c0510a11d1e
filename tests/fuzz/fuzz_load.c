/* SPDX-License-Identifier: MIT */
/*
 * libFuzzer target for `ptwatch report`'s reader (src/output/load.c): any
 * bytes, as a document or a stream, loaded as the summary loads it
 * (streaming) and as --format=json and chrome load it (every span held),
 * unfiltered and filtered, then rendered. Never a crash, a leak, a hang or
 * an allocation beyond the bounds of ptw_load.h; a refusal is one line.
 * And a round trip: what was accepted, written as a document (as report
 * --format=json writes it), is accepted again and written the same, byte
 * for byte (the reader reads back everything the writer writes: same
 * spans, frames, waits, processes, metrics and warnings; a stream from
 * its first writing as a document on).
 *
 * Built with clang -fsanitize=fuzzer,address,undefined (tests/fuzz/
 * meson.build); `make check` runs a short seeded run over tests/fuzz/corpus,
 * `make fuzz` a long one (FUZZ_TIME seconds, default 3600).
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ptw_load.h"
#include "ptw_output.h"

/* What an output may be for an input of n bytes: the summary lists at most
 * 40 spans, 20 frames a thread, 10 objects, every string bounded. */
static size_t output_bound(size_t n)
{
	return (size_t)4096 * n + ((size_t)64 << 20);
}

static void check_refusal(const char *err)
{
	if (!err[0] || strchr(err, '\n')) {
		fprintf(stderr, "a refusal that is not one line: \"%s\"\n", err);
		abort();
	}
}

static void render(const struct ptw_loaded *l, bool summary, size_t n)
{
	struct ptw_buf out = { 0 };
	if (summary) {
		if (l->report.snapshot)
			ptw_text_snapshot(&out, &l->report);
		else
			ptw_text_summary(&out, &l->report);
	} else {
		ptw_report_json(&l->report, &out);
		ptw_report_chrome(&l->report, &out);
	}
	if (out.len > output_bound(n)) {
		fprintf(stderr, "%zu bytes of output for %zu of input\n", out.len, n);
		abort();
	}
	ptw_buf_free(&out);
}

/* The document l is written as, read back: refused never (ptwatch wrote
 * it). */
static struct ptw_loaded *reread(const struct ptw_buf *doc)
{
	struct ptw_loaded *again = NULL;
	char err[640];
	if (ptw_load(doc->p ? doc->p : "", doc->len, false, NULL, &again, err, sizeof(err)) < 0) {
		fprintf(stderr, "a document ptwatch wrote is refused: %s\n%.*s\n", err,
			(int)(doc->len < 4096 ? doc->len : 4096), doc->p);
		abort();
	}
	return again;
}

static void same(const struct ptw_buf *a, const struct ptw_buf *b)
{
	if (a->len == b->len && !memcmp(a->p, b->p, a->len))
		return;
	size_t i = 0;
	while (i < a->len && i < b->len && a->p[i] == b->p[i])
		i++;
	size_t from = i > 200 ? i - 200 : 0;
	fprintf(stderr, "written, read back and written again, it differs at byte %zu:\n"
			"once:  %.*s\ntwice: %.*s\n",
		i, (int)(a->len - from < 400 ? a->len - from : 400), a->p + from,
		(int)(b->len - from < 400 ? b->len - from : 400), b->p + from);
	abort();
}

/* l (held whole, unfiltered), written as a document, read back and
 * written again: the same bytes. A stream is a document once written (it
 * has lines for the waits that ended only, and its metrics line counts
 * every wait: the document keeps those figures): from then on the same. */
static void round_trip(const struct ptw_loaded *l)
{
	struct ptw_buf once = { 0 }, twice = { 0 };
	ptw_report_json(&l->report, &once);
	struct ptw_loaded *again = reread(&once);
	ptw_report_json(&again->report, &twice);
	if (l->stream) {
		struct ptw_buf thrice = { 0 };
		struct ptw_loaded *third = reread(&twice);
		ptw_report_json(&third->report, &thrice);
		same(&twice, &thrice);
		ptw_loaded_free(third);
		ptw_buf_free(&thrice);
	} else {
		same(&once, &twice);
	}
	ptw_loaded_free(again);
	ptw_buf_free(&once);
	ptw_buf_free(&twice);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static pid_t tids[] = { 1, 2, 100, 201, 202 };
	struct ptw_span_filter f = { .tids = tids, .ntids = 5 };
	const struct ptw_span_filter *filter = size % 4 == 3 ? &f : NULL;
	for (int streaming = 1; streaming >= 0; streaming--) {
		struct ptw_loaded *l = NULL;
		char err[640];
		if (ptw_load((const char *)data, size, streaming, filter, &l, err, sizeof(err)) < 0) {
			check_refusal(err);
			return 0;
		}
		render(l, streaming, size);
		if (!streaming && !filter)
			round_trip(l);
		ptw_loaded_free(l);
	}
	return 0;
}
