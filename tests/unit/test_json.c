/* SPDX-License-Identifier: MIT */
/* JSON string escaping and the writer's punctuation. */
#include <stdint.h>

#include "check.h"
#include "ptw_output.h"
#include "ptw_symbols.h"

static void escaped(const char *in, const char *want)
{
	struct ptw_buf b = { 0 };
	ptw_json_escape(&b, in);
	CHECK_STR(b.p, want);
	ptw_buf_free(&b);
}

int main(void)
{
	escaped("plain", "\"plain\"");
	escaped("q\"b\\", "\"q\\\"b\\\\\"");
	escaped("a\nb\tc\rd", "\"a\\nb\\tc\\rd\"");
	escaped("\x01\x1f\x7f", "\"\\u0001\\u001f\\u007f\"");
	escaped("caf\xc3\xa9", "\"caf\xc3\xa9\"");		   /* valid UTF-8 passes */
	escaped("\xe2\x82\xac", "\"\xe2\x82\xac\"");		   /* euro sign */
	escaped("\xf0\x9f\x98\x80", "\"\xf0\x9f\x98\x80\"");	   /* 4-byte */
	escaped("x\xffy", "\"x\\u00ffy\"");			   /* not UTF-8 */
	escaped("\xc0\xaf", "\"\\u00c0\\u00af\"");		   /* overlong '/' */
	escaped("\xed\xa0\x80", "\"\\u00ed\\u00a0\\u0080\"");	   /* surrogate */
	escaped("\xe2\x82", "\"\\u00e2\\u0082\"");		   /* truncated */
	escaped("", "\"\"");

	struct ptw_buf b = { 0 };
	struct ptw_json j = { .out = &b };
	ptw_json_begin_object(&j, NULL);
	ptw_json_string(&j, "s", "v");
	ptw_json_string(&j, "n", NULL);
	ptw_json_int(&j, "i", -3);
	ptw_json_uint(&j, "u", 18446744073709551615ull);
	ptw_json_hex(&j, "h", 0xdead);
	ptw_json_bool(&j, "b", true);
	ptw_json_begin_array(&j, "a");
	ptw_json_uint(&j, NULL, 1);
	ptw_json_begin_object(&j, NULL);
	ptw_json_end_object(&j);
	ptw_json_begin_array(&j, NULL);
	ptw_json_end_array(&j);
	ptw_json_end_array(&j);
	ptw_json_double(&j, "d", 1.25);
	ptw_json_end_object(&j);
	CHECK_STR(b.p, "{\"s\":\"v\",\"n\":null,\"i\":-3,\"u\":18446744073709551615,\"h\":\"0xdead\","
		       "\"b\":true,\"a\":[1,{},[]],\"d\":1.2}");
	ptw_buf_free(&b);

	/* numbers at their limits (written without printf) */
	struct ptw_buf nb = { 0 };
	struct ptw_json nj = { .out = &nb };
	ptw_json_begin_array(&nj, NULL);
	ptw_json_int(&nj, NULL, 0);
	ptw_json_int(&nj, NULL, INT64_MIN);
	ptw_json_int(&nj, NULL, INT64_MAX);
	ptw_json_uint(&nj, NULL, 0);
	ptw_json_hex(&nj, NULL, 0);
	ptw_json_hex(&nj, NULL, UINT64_MAX);
	ptw_json_end_array(&nj);
	CHECK_STR(nb.p, "[0,-9223372036854775808,9223372036854775807,0,\"0x0\","
			"\"0xffffffffffffffff\"]");
	ptw_buf_free(&nb);

	/* Stack frames written once and then copied (by location and depth):
	 * the same text as without the copies, at every depth. */
	struct ptw_location f1 = { .addr = 0x401000, .symbol = "f", .symbol_offset = 4,
				   .module = "/bin/x", .has_offset = true, .offset = 0x1000,
				   .file = "x.c", .line = 7 };
	struct ptw_location f2 = { .addr = 0x7f00, .module = "/lib/y" };
	const struct ptw_location *stack[] = { &f1, &f2, &f1, &f2 };
	struct ptw_buf plain = { 0 }, memo_out = { 0 };
	struct ptw_map frames = { 0 };
	for (int pass = 0; pass < 2; pass++) {
		struct ptw_json w = { .out = pass ? &memo_out : &plain, .pretty = true,
				      .frames = pass ? &frames : NULL };
		ptw_json_begin_array(&w, NULL);
		for (int depth = 0; depth < 3; depth++) {
			ptw_json_begin_object(&w, NULL);
			ptw_json_location(&w, "named", &f1, "??", false);
			ptw_json_begin_array(&w, "stack");
			for (size_t i = 0; i < 4; i++)
				ptw_json_location(&w, NULL, stack[i], "??", false);
			ptw_json_end_array(&w);
			ptw_json_begin_array(&w, "deeper");
			ptw_json_begin_array(&w, NULL);
			for (size_t i = 0; i < 4; i++)
				ptw_json_location(&w, NULL, stack[i], "??", false);
			ptw_json_end_array(&w);
			ptw_json_end_array(&w);
		}
		for (int depth = 0; depth < 3; depth++)
			ptw_json_end_object(&w);
		ptw_json_end_array(&w);
	}
	CHECK_STR(memo_out.p, plain.p);
	CHECK(frames.count == 8); /* two frames at four depths */
	ptw_json_frames_free(&frames);
	ptw_buf_free(&plain);
	ptw_buf_free(&memo_out);
	CHECK_DONE();
}
