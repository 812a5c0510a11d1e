/* SPDX-License-Identifier: MIT */
/* JSON string escaping and the writer's punctuation. */
#include "check.h"
#include "ptw_output.h"

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
	CHECK_DONE();
}
