/* SPDX-License-Identifier: MIT */
/* Locations in the text output: names, module+offset when nothing names
 * the address (as eu-stack and perf), a known name, no module at all. */
#include <stdlib.h>

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

int main(void)
{
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
	CHECK_DONE();
}
