/* SPDX-License-Identifier: MIT */
/* The strict JSON reader: valid and invalid texts, exact integers, and a
 * little fuzzing (every truncation, byte flips, garbage): never a crash,
 * never a leak (make check-asan runs it under ASan and LeakSanitizer;
 * meson test --setup=valgrind under memcheck). */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "ptw_jsonread.h"
#include "ptw_output.h"

static int parse(const char *s, struct ptw_jv **v, char *err, size_t n)
{
	return ptw_json_parse(s, strlen(s), v, err, n);
}

static void valid(const char *s)
{
	struct ptw_jv *v = NULL;
	char err[128];
	int r = parse(s, &v, err, sizeof(err));
	if (r)
		fprintf(stderr, "valid input rejected: %s: %s\n", s, err);
	CHECK_EQ(r, 0);
	ptw_jv_free(v);
}

static void invalid(const char *s)
{
	struct ptw_jv *v = NULL;
	char err[128];
	int r = parse(s, &v, err, sizeof(err));
	if (!r)
		fprintf(stderr, "invalid input accepted: %s\n", s);
	CHECK_EQ(r, -EINVAL);
	CHECK(v == NULL);
	CHECK(err[0] != '\0');
	CHECK(strchr(err, '\n') == NULL);
}

static const char doc[] =
	"{\"schema\": \"ptwatch.spans/3\", \"n\": 18446744073709551615, \"neg\": -9223372036854775808,\n"
	" \"a\": [1, 2.5, -0.5e-3, true, false, null, \"x\\u00e9\\ud83d\\ude00\\n\\\"\\/\"],\n"
	" \"o\": {\"k\": {}, \"e\": [], \"addr\": \"0x7f00dead\"}, \"\xc3\xa9\": \"\xe2\x82\xac\"}";

static void test_values(void)
{
	struct ptw_jv *v;
	char err[128];
	CHECK_EQ(parse(doc, &v, err, sizeof(err)), 0);
	CHECK_STR(ptw_jv_str(ptw_jv_get(v, "schema")), "ptwatch.spans/3");
	uint64_t u = 0;
	CHECK(ptw_jv_u64(ptw_jv_get(v, "n"), &u));
	CHECK(u == UINT64_MAX);
	int64_t i = 0;
	CHECK(ptw_jv_i64(ptw_jv_get(v, "neg"), &i));
	CHECK(i == INT64_MIN);
	CHECK(!ptw_jv_u64(ptw_jv_get(v, "neg"), &u));
	const struct ptw_jv *a = ptw_jv_get(v, "a");
	CHECK_EQ(a->len, 7);
	CHECK(!ptw_jv_u64(ptw_jv_at(a, 1), &u)); /* 2.5 */
	CHECK(ptw_jv_at(a, 3)->type == PTW_J_BOOL && ptw_jv_at(a, 3)->b);
	CHECK(ptw_jv_is_null(ptw_jv_at(a, 5)));
	CHECK(ptw_jv_is_null(ptw_jv_get(v, "missing")));
	CHECK_STR(ptw_jv_str(ptw_jv_at(a, 6)), "x\xc3\xa9\xf0\x9f\x98\x80\n\"/");
	CHECK(ptw_jv_at(a, 7) == NULL);
	uint64_t h = 0;
	CHECK(ptw_jv_hex(ptw_jv_get(ptw_jv_get(v, "o"), "addr"), &h));
	CHECK_EQ(h, 0x7f00dead);
	CHECK_STR(ptw_jv_str(ptw_jv_get(v, "\xc3\xa9")), "\xe2\x82\xac");
	ptw_jv_free(v);
	/* one more than UINT64_MAX is not a u64 */
	CHECK_EQ(parse("18446744073709551616", &v, err, sizeof(err)), 0);
	CHECK(!ptw_jv_u64(v, &u));
	ptw_jv_free(v);
}

static void test_strict(void)
{
	valid("0");
	valid(" [ ] ");
	valid("\"\"");
	valid("-0");
	valid("1E+2");
	invalid("");
	invalid("   ");
	invalid("[1,]");
	invalid("{\"a\":1,}");
	invalid("{\"a\" 1}");
	invalid("{a:1}");
	invalid("01");
	invalid("1.");
	invalid(".5");
	invalid("+1");
	invalid("1e");
	invalid("tru");
	invalid("nul");
	invalid("[1] [2]");
	invalid("\"abc");
	invalid("\"a\tb\"");
	invalid("\"\\x\"");
	invalid("\"\\ud800\"");
	invalid("\"\\udc00\"");
	invalid("\"\\ud800\\u0041\"");
	invalid("\"\\u12\"");
	invalid("\"\xff\"");
	invalid("\"\xc0\xaf\"");     /* overlong */
	invalid("\"\xed\xa0\x80\""); /* a surrogate in UTF-8 */
	invalid("// comment\n1");
	invalid("[1 2]");
	invalid("{\"a\":1 \"b\":2}");
	invalid("NaN");
	/* depth */
	char deep[300];
	memset(deep, '[', 200);
	deep[200] = '\0';
	invalid(deep);
	char ok[2 * PTW_JSON_MAX_DEPTH + 1];
	memset(ok, '[', PTW_JSON_MAX_DEPTH);
	memset(ok + PTW_JSON_MAX_DEPTH, ']', PTW_JSON_MAX_DEPTH);
	ok[2 * PTW_JSON_MAX_DEPTH] = '\0';
	valid(ok);
	/* the error says where */
	struct ptw_jv *v;
	char err[128];
	CHECK_EQ(parse("{\n  \"a\": [1,\n  2,]}", &v, err, sizeof(err)), -EINVAL);
	CHECK(strstr(err, "line 3") != NULL);
}

/* What our own writer writes, we read back. */
static void test_roundtrip(void)
{
	struct ptw_buf b = { 0 };
	struct ptw_json j = { .out = &b, .pretty = true };
	ptw_json_begin_object(&j, NULL);
	ptw_json_string(&j, "s", "tab\there \"q\" \x01 \xff raw \xe2\x82\xac");
	ptw_json_uint(&j, "u", UINT64_MAX);
	ptw_json_int(&j, "i", -42);
	ptw_json_hex(&j, "h", 0xabcdef);
	ptw_json_double(&j, "d", 1.5);
	ptw_json_end_object(&j);
	struct ptw_jv *v;
	char err[128];
	CHECK_EQ(ptw_json_parse(b.p, b.len, &v, err, sizeof(err)), 0);
	CHECK_STR(ptw_jv_str(ptw_jv_get(v, "s")), "tab\there \"q\" \x01 \xc3\xbf raw \xe2\x82\xac");
	uint64_t u;
	CHECK(ptw_jv_u64(ptw_jv_get(v, "u"), &u) && u == UINT64_MAX);
	int64_t i;
	CHECK(ptw_jv_i64(ptw_jv_get(v, "i"), &i) && i == -42);
	ptw_jv_free(v);
	ptw_buf_free(&b);
}

/* Never a crash: every prefix, every single-byte change to a few values,
 * and random bytes. */
static void test_fuzz(void)
{
	size_t n = strlen(doc);
	char *buf = malloc(n + 1);
	char err[128];
	for (size_t k = 0; k < n; k++) {
		memcpy(buf, doc, k);
		struct ptw_jv *v = NULL;
		/* no proper prefix of an object is valid JSON */
		CHECK_EQ(ptw_json_parse(buf, k, &v, err, sizeof(err)), -EINVAL);
	}
	static const char subst[] = { '"', '\\', '{', '}', '[', ']', ',', ':', '0', 'x', '\0', '\x80',
				      '\xff', ' ', 'e', '-' };
	size_t accepted = 0;
	for (size_t k = 0; k < n; k++) {
		for (size_t s = 0; s < sizeof(subst); s++) {
			memcpy(buf, doc, n);
			buf[k] = subst[s];
			struct ptw_jv *v = NULL;
			if (ptw_json_parse(buf, n, &v, err, sizeof(err)) == 0) {
				accepted++;
				ptw_jv_free(v);
			}
		}
	}
	CHECK(accepted > 0);
	unsigned seed = 12345;
	char rnd[256];
	for (int round = 0; round < 20000; round++) {
		size_t len = (size_t)(rand_r(&seed) % sizeof(rnd));
		for (size_t k = 0; k < len; k++) {
			int r = rand_r(&seed) % 20;
			rnd[k] = r < 12 ? "{}[]\",:0 1tn\\"[r] : (char)rand_r(&seed);
		}
		struct ptw_jv *v = NULL;
		if (ptw_json_parse(rnd, len, &v, NULL, 0) == 0)
			ptw_jv_free(v);
	}
	free(buf);
}

int main(void)
{
	test_values();
	test_strict();
	test_roundtrip();
	test_fuzz();
	return check_failures ? 1 : 0;
}
