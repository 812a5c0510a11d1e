/* SPDX-License-Identifier: MIT */
/* The strict JSON reader; see ptw_jsonread.h. */
#define _GNU_SOURCE
#include "ptw_jsonread.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ptw_util.h"

struct parser {
	const unsigned char *p, *end, *start;
	char *err;
	size_t errlen;
	bool failed;
};

static void fail(struct parser *ps, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void fail(struct parser *ps, const char *fmt, ...)
{
	if (ps->failed)
		return;
	ps->failed = true;
	size_t line = 1, col = 1;
	for (const unsigned char *q = ps->start; q < ps->p && q < ps->end; q++) {
		if (*q == '\n') {
			line++;
			col = 1;
		} else {
			col++;
		}
	}
	if (!ps->err || !ps->errlen)
		return;
	int n = snprintf(ps->err, ps->errlen, "line %zu, column %zu: ", line, col);
	if (n < 0 || (size_t)n >= ps->errlen)
		return;
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(ps->err + n, ps->errlen - (size_t)n, fmt, ap);
	va_end(ap);
}

static void skip_ws(struct parser *ps)
{
	while (ps->p < ps->end && (*ps->p == ' ' || *ps->p == '\t' || *ps->p == '\n' || *ps->p == '\r'))
		ps->p++;
}

static void free_members(struct ptw_jv *v)
{
	if (v->type == PTW_J_ARR || v->type == PTW_J_OBJ) {
		for (size_t i = 0; i < v->len; i++) {
			free_members(&v->items[i]);
			if (v->keys)
				free(v->keys[i]);
		}
		free(v->items);
		free(v->keys);
	}
	free(v->s);
	memset(v, 0, sizeof(*v));
}

void ptw_jv_free(struct ptw_jv *v)
{
	if (!v)
		return;
	free_members(v);
	free(v);
}

static bool literal(struct parser *ps, const char *word)
{
	size_t n = strlen(word);
	if ((size_t)(ps->end - ps->p) < n || memcmp(ps->p, word, n)) {
		fail(ps, "invalid literal (expected %s)", word);
		return false;
	}
	ps->p += n;
	return true;
}

static int hex4(struct parser *ps)
{
	if (ps->end - ps->p < 4) {
		fail(ps, "truncated \\u escape");
		return -1;
	}
	int v = 0;
	for (int i = 0; i < 4; i++) {
		unsigned c = ps->p[i];
		v <<= 4;
		if (c >= '0' && c <= '9')
			v |= (int)(c - '0');
		else if (c >= 'a' && c <= 'f')
			v |= (int)(c - 'a' + 10);
		else if (c >= 'A' && c <= 'F')
			v |= (int)(c - 'A' + 10);
		else {
			fail(ps, "invalid \\u escape");
			return -1;
		}
	}
	ps->p += 4;
	return v;
}

static void put_utf8(struct ptw_buf *b, uint32_t cp)
{
	char u[4];
	size_t n;
	if (cp < 0x80) {
		u[0] = (char)cp;
		n = 1;
	} else if (cp < 0x800) {
		u[0] = (char)(0xc0 | (cp >> 6));
		u[1] = (char)(0x80 | (cp & 0x3f));
		n = 2;
	} else if (cp < 0x10000) {
		u[0] = (char)(0xe0 | (cp >> 12));
		u[1] = (char)(0x80 | ((cp >> 6) & 0x3f));
		u[2] = (char)(0x80 | (cp & 0x3f));
		n = 3;
	} else {
		u[0] = (char)(0xf0 | (cp >> 18));
		u[1] = (char)(0x80 | ((cp >> 12) & 0x3f));
		u[2] = (char)(0x80 | ((cp >> 6) & 0x3f));
		u[3] = (char)(0x80 | (cp & 0x3f));
		n = 4;
	}
	ptw_buf_add(b, u, n);
}

/* At the opening quote; returns the decoded string (malloc'ed) or NULL. */
static char *string(struct parser *ps, size_t *ret_len)
{
	struct ptw_buf b = { 0 };
	ps->p++;
	for (;;) {
		if (ps->p >= ps->end) {
			fail(ps, "unterminated string");
			goto bad;
		}
		unsigned c = *ps->p;
		if (c == '"') {
			ps->p++;
			break;
		}
		if (c < 0x20) {
			fail(ps, "control character in a string");
			goto bad;
		}
		if (c == '\\') {
			ps->p++;
			if (ps->p >= ps->end) {
				fail(ps, "unterminated string");
				goto bad;
			}
			c = *ps->p++;
			switch (c) {
			case '"':
			case '\\':
			case '/':
				ptw_buf_putc(&b, (char)c);
				break;
			case 'b':
				ptw_buf_putc(&b, '\b');
				break;
			case 'f':
				ptw_buf_putc(&b, '\f');
				break;
			case 'n':
				ptw_buf_putc(&b, '\n');
				break;
			case 'r':
				ptw_buf_putc(&b, '\r');
				break;
			case 't':
				ptw_buf_putc(&b, '\t');
				break;
			case 'u': {
				int hi = hex4(ps);
				if (hi < 0)
					goto bad;
				uint32_t cp = (uint32_t)hi;
				if (hi >= 0xdc00 && hi <= 0xdfff) {
					fail(ps, "lone low surrogate");
					goto bad;
				}
				if (hi >= 0xd800 && hi <= 0xdbff) {
					if (ps->end - ps->p < 2 || ps->p[0] != '\\' || ps->p[1] != 'u') {
						fail(ps, "lone high surrogate");
						goto bad;
					}
					ps->p += 2;
					int lo = hex4(ps);
					if (lo < 0)
						goto bad;
					if (lo < 0xdc00 || lo > 0xdfff) {
						fail(ps, "invalid surrogate pair");
						goto bad;
					}
					cp = 0x10000 + (((uint32_t)hi - 0xd800) << 10) + ((uint32_t)lo - 0xdc00);
				}
				put_utf8(&b, cp);
				break;
			}
			default:
				ps->p--;
				fail(ps, "invalid escape '\\%c'", c >= 0x20 && c < 0x7f ? (char)c : '?');
				goto bad;
			}
			continue;
		}
		if (c < 0x80) {
			const unsigned char *run = ps->p;
			while (ps->p < ps->end && *ps->p >= 0x20 && *ps->p < 0x80 && *ps->p != '"' &&
			       *ps->p != '\\')
				ps->p++;
			ptw_buf_add(&b, run, (size_t)(ps->p - run));
			continue;
		}
		size_t n = ptw_utf8_sequence(ps->p, (size_t)(ps->end - ps->p));
		if (!n) {
			fail(ps, "invalid UTF-8 in a string");
			goto bad;
		}
		ptw_buf_add(&b, ps->p, n);
		ps->p += n;
	}
	*ret_len = b.len;
	ptw_buf_putc(&b, '\0');
	return b.p;
bad:
	ptw_buf_free(&b);
	return NULL;
}

static bool is_digit(const struct parser *ps)
{
	return ps->p < ps->end && *ps->p >= '0' && *ps->p <= '9';
}

static bool number(struct parser *ps, struct ptw_jv *v)
{
	const unsigned char *s = ps->p;
	if (ps->p < ps->end && *ps->p == '-')
		ps->p++;
	if (!is_digit(ps)) {
		fail(ps, "invalid number");
		return false;
	}
	if (*ps->p == '0') {
		ps->p++;
		if (is_digit(ps)) {
			fail(ps, "leading zero in a number");
			return false;
		}
	} else {
		while (is_digit(ps))
			ps->p++;
	}
	if (ps->p < ps->end && *ps->p == '.') {
		ps->p++;
		if (!is_digit(ps)) {
			fail(ps, "invalid number (digits after '.')");
			return false;
		}
		while (is_digit(ps))
			ps->p++;
	}
	if (ps->p < ps->end && (*ps->p == 'e' || *ps->p == 'E')) {
		ps->p++;
		if (ps->p < ps->end && (*ps->p == '+' || *ps->p == '-'))
			ps->p++;
		if (!is_digit(ps)) {
			fail(ps, "invalid number (exponent)");
			return false;
		}
		while (is_digit(ps))
			ps->p++;
	}
	v->type = PTW_J_NUM;
	v->s = xmalloc((size_t)(ps->p - s) + 1);
	memcpy(v->s, s, (size_t)(ps->p - s));
	v->s[ps->p - s] = '\0';
	return true;
}

static bool value(struct parser *ps, struct ptw_jv *v, int depth);

static void add_member(struct ptw_jv *v, size_t *cap, char *key)
{
	if (v->len == *cap) {
		*cap = *cap ? *cap * 2 : 4;
		v->items = xreallocarray(v->items, *cap, sizeof(*v->items));
		if (v->type == PTW_J_OBJ)
			v->keys = xreallocarray(v->keys, *cap, sizeof(*v->keys));
	}
	memset(&v->items[v->len], 0, sizeof(v->items[0]));
	if (v->type == PTW_J_OBJ)
		v->keys[v->len] = key;
	v->len++;
}

static bool container(struct parser *ps, struct ptw_jv *v, int depth, bool object)
{
	char close = object ? '}' : ']';
	size_t cap = 0;
	v->type = object ? PTW_J_OBJ : PTW_J_ARR;
	if (depth >= PTW_JSON_MAX_DEPTH) {
		fail(ps, "nested deeper than %d", PTW_JSON_MAX_DEPTH);
		return false;
	}
	ps->p++;
	skip_ws(ps);
	if (ps->p < ps->end && *ps->p == close) {
		ps->p++;
		return true;
	}
	for (;;) {
		char *key = NULL;
		skip_ws(ps);
		if (object) {
			size_t klen;
			if (ps->p >= ps->end || *ps->p != '"') {
				fail(ps, "expected a string key");
				return false;
			}
			key = string(ps, &klen);
			if (!key)
				return false;
			skip_ws(ps);
			if (ps->p >= ps->end || *ps->p != ':') {
				free(key);
				fail(ps, "expected ':'");
				return false;
			}
			ps->p++;
		}
		add_member(v, &cap, key);
		if (!value(ps, &v->items[v->len - 1], depth + 1))
			return false;
		skip_ws(ps);
		if (ps->p < ps->end && *ps->p == ',') {
			ps->p++;
			continue;
		}
		if (ps->p < ps->end && *ps->p == close) {
			ps->p++;
			return true;
		}
		fail(ps, ps->p < ps->end ? "expected ',' or '%c'" : "unexpected end (expected '%c')",
		     close);
		return false;
	}
}

static bool value(struct parser *ps, struct ptw_jv *v, int depth)
{
	skip_ws(ps);
	if (ps->p >= ps->end) {
		fail(ps, "unexpected end of input");
		return false;
	}
	switch (*ps->p) {
	case '{':
		return container(ps, v, depth, true);
	case '[':
		return container(ps, v, depth, false);
	case '"':
		v->type = PTW_J_STR;
		v->s = string(ps, &v->len);
		return v->s != NULL;
	case 't':
		v->type = PTW_J_BOOL;
		v->b = true;
		return literal(ps, "true");
	case 'f':
		v->type = PTW_J_BOOL;
		return literal(ps, "false");
	case 'n':
		v->type = PTW_J_NULL;
		return literal(ps, "null");
	default:
		if (*ps->p == '-' || (*ps->p >= '0' && *ps->p <= '9'))
			return number(ps, v);
		fail(ps, "unexpected character '%c'",
		     *ps->p >= 0x20 && *ps->p < 0x7f ? (char)*ps->p : '?');
		return false;
	}
}

int ptw_json_parse(const char *text, size_t len, struct ptw_jv **ret, char *err, size_t errlen)
{
	struct parser ps = { .p = (const unsigned char *)text, .end = (const unsigned char *)text + len,
			     .start = (const unsigned char *)text, .err = err, .errlen = errlen };
	if (err && errlen)
		err[0] = '\0';
	struct ptw_jv *v = xcalloc(1, sizeof(*v));
	bool ok = value(&ps, v, 0);
	if (ok) {
		skip_ws(&ps);
		if (ps.p < ps.end) {
			fail(&ps, "unexpected data after the value");
			ok = false;
		}
	}
	if (!ok) {
		ptw_jv_free(v);
		return -EINVAL;
	}
	*ret = v;
	return 0;
}

const struct ptw_jv *ptw_jv_get(const struct ptw_jv *obj, const char *key)
{
	if (!obj || obj->type != PTW_J_OBJ)
		return NULL;
	for (size_t i = 0; i < obj->len; i++)
		if (!strcmp(obj->keys[i], key))
			return &obj->items[i];
	return NULL;
}

const struct ptw_jv *ptw_jv_at(const struct ptw_jv *arr, size_t i)
{
	if (!arr || arr->type != PTW_J_ARR || i >= arr->len)
		return NULL;
	return &arr->items[i];
}

const char *ptw_jv_str(const struct ptw_jv *v)
{
	return v && v->type == PTW_J_STR ? v->s : NULL;
}

bool ptw_jv_u64(const struct ptw_jv *v, uint64_t *ret)
{
	if (!v || v->type != PTW_J_NUM || v->s[0] == '-')
		return false;
	uint64_t x = 0;
	for (const char *c = v->s; *c; c++) {
		if (*c < '0' || *c > '9')
			return false;
		unsigned d = (unsigned)(*c - '0');
		if (x > (UINT64_MAX - d) / 10)
			return false;
		x = x * 10 + d;
	}
	*ret = x;
	return true;
}

bool ptw_jv_i64(const struct ptw_jv *v, int64_t *ret)
{
	if (!v || v->type != PTW_J_NUM)
		return false;
	bool neg = v->s[0] == '-';
	struct ptw_jv abs = *v;
	abs.s = v->s + neg;
	uint64_t x;
	if (!ptw_jv_u64(&abs, &x))
		return false;
	if (neg ? x > (uint64_t)INT64_MAX + 1 : x > (uint64_t)INT64_MAX)
		return false;
	*ret = neg ? (int64_t)(0 - x) : (int64_t)x;
	return true;
}

bool ptw_jv_hex(const struct ptw_jv *v, uint64_t *ret)
{
	const char *s = ptw_jv_str(v);
	if (!s || s[0] != '0' || (s[1] != 'x' && s[1] != 'X') || !s[2])
		return false;
	uint64_t x = 0;
	for (const char *c = s + 2; *c; c++) {
		unsigned d;
		if (*c >= '0' && *c <= '9')
			d = (unsigned)(*c - '0');
		else if (*c >= 'a' && *c <= 'f')
			d = (unsigned)(*c - 'a' + 10);
		else if (*c >= 'A' && *c <= 'F')
			d = (unsigned)(*c - 'A' + 10);
		else
			return false;
		if (x >> 60)
			return false;
		x = x << 4 | d;
	}
	*ret = x;
	return true;
}

bool ptw_jv_is_null(const struct ptw_jv *v)
{
	return !v || v->type == PTW_J_NULL;
}
