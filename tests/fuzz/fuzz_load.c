/* SPDX-License-Identifier: MIT */
/*
 * libFuzzer target for `ptwatch report`'s reader (src/output/load.c): any
 * bytes, as a document or a stream, loaded as the summary loads it
 * (streaming) and as --format=json and chrome load it (every span held),
 * unfiltered and filtered, then rendered. Never a crash, a leak, a hang or
 * an allocation beyond the bounds of ptw_load.h; a refusal is one line.
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

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static pid_t tids[] = { 1, 2, 100, 201, 202 };
	struct ptw_text_filter f = { .tids = tids, .ntids = 5 };
	const struct ptw_text_filter *filter = size % 4 == 3 ? &f : NULL;
	for (int streaming = 1; streaming >= 0; streaming--) {
		struct ptw_loaded *l = NULL;
		char err[640];
		if (ptw_load((const char *)data, size, streaming, filter, &l, err, sizeof(err)) < 0) {
			check_refusal(err);
			return 0;
		}
		render(l, streaming, size);
		ptw_loaded_free(l);
	}
	return 0;
}
