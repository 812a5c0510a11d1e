/* SPDX-License-Identifier: MIT */
/*
 * The reader's ground: its one-line error, the store everything read
 * points into, and JSON values read as the document's types.
 */
#define _GNU_SOURCE
#include "read_int.h"

/* ---- errors: one line, the first one ---- */

bool ld_bad(struct ld *ld, const char *fmt, ...)
{
	if (ld->failed)
		return false;
	ld->failed = true;
	if (!ld->err || !ld->errlen)
		return false;
	char msg[512];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	if (ld->lineno)
		snprintf(ld->err, ld->errlen, "line %zu: %s", ld->lineno, msg);
	else
		snprintf(ld->err, ld->errlen, "%s%s", ld->ctx, msg);
	return false;
}

/* ---- the store ---- */

const char *ld_keep(struct store *st, const char *s)
{
	if (!s)
		return NULL;
	if (st->nstrings == st->capstrings) {
		st->capstrings = st->capstrings ? 2 * st->capstrings : 64;
		st->strings = xreallocarray(st->strings, st->capstrings, sizeof(char *));
	}
	return st->strings[st->nstrings++] = xstrdup(s);
}

void ld_free_argv(char **argv)
{
	for (size_t i = 0; argv && argv[i]; i++)
		free(argv[i]);
	free(argv);
}

void ld_free_warnings(struct store *st)
{
	for (size_t i = 0; i < st->nwarnings; i++) {
		free(st->warnings[i].code);
		free(st->warnings[i].message);
	}
	free(st->warnings);
	st->warnings = NULL;
	st->nwarnings = 0;
}

void ld_add_warning(struct store *st, const char *code, const char *message, unsigned count)
{
	st->warnings = xreallocarray(st->warnings, st->nwarnings + 1, sizeof(*st->warnings));
	st->warnings[st->nwarnings].code = xstrdup(code);
	st->warnings[st->nwarnings].message = xstrdup(message);
	st->warnings[st->nwarnings].count = count;
	st->nwarnings++;
}

/* ---- values (absent, null or of another type: unknown) ---- */

json_object *ld_get(json_object *o, const char *k)
{
	json_object *v = NULL;
	if (!o || !json_object_is_type(o, json_type_object) || !json_object_object_get_ex(o, k, &v))
		return NULL;
	return v;
}

bool ld_is(json_object *v, json_type t)
{
	return v && json_object_is_type(v, t);
}

size_t ld_arr_len(json_object *v)
{
	return ld_is(v, json_type_array) ? json_object_array_length(v) : 0;
}

const char *ld_str_max(struct ld *ld, json_object *o, const char *k, size_t max)
{
	json_object *v = ld_get(o, k);
	if (!ld_is(v, json_type_string))
		return NULL;
	size_t n = (size_t)json_object_get_string_len(v);
	if (n > max) {
		ld_bad(ld, "\"%s\" is a string of %zu bytes (report reads at most %zu)", k, n, max);
		return NULL;
	}
	return json_object_get_string(v);
}

const char *ld_str(struct ld *ld, json_object *o, const char *k)
{
	return ld_str_max(ld, o, k, PTW_LOAD_MAX_STRING);
}

bool ld_str_is(struct ld *ld, json_object *o, const char *k, const char *want)
{
	const char *s = ld_str(ld, o, k);
	return s && !strcmp(s, want);
}

bool ld_boolean(json_object *o, const char *k)
{
	json_object *v = ld_get(o, k);
	return ld_is(v, json_type_boolean) && json_object_get_boolean(v);
}

/*
 * An integer within [0, max]: true and *ret; false (*ret 0) when absent,
 * null or not an integer. Beyond the range the file ld_is refused. json-c
 * saturates what does not fit 64 bits: UINT64_MAX and INT64_MIN, which no
 * field of a session takes, are refused as out of range.
 */
bool ld_u64_of(struct ld *ld, json_object *v, const char *what, uint64_t max, uint64_t *ret)
{
	*ret = 0;
	if (!ld_is(v, json_type_int))
		return false;
	int64_t i = json_object_get_int64(v);
	uint64_t u = json_object_get_uint64(v);
	if (i < 0)
		return ld_bad(ld, "\"%s\" is %" PRId64 " (it is at least 0)", what, i);
	if (u == UINT64_MAX || u > max)
		return ld_bad(ld,
			      "\"%s\" is %" PRIu64
			      ", more than a session can reach (at most %" PRIu64 ")",
			      what, u, max);
	*ret = u;
	return true;
}

uint64_t ld_u64m(struct ld *ld, json_object *o, const char *k, uint64_t max)
{
	uint64_t v;
	ld_u64_of(ld, ld_get(o, k), k, max, &v);
	return v;
}

/* A timestamp, a duration, a count. */
uint64_t ld_num(struct ld *ld, json_object *o, const char *k)
{
	return ld_u64m(ld, o, k, UINT64_MAX - 1);
}

struct ptw_opt ld_opt(struct ld *ld, json_object *o, const char *k)
{
	struct ptw_opt r = { 0 };
	r.set = ld_u64_of(ld, ld_get(o, k), k, UINT64_MAX - 1, &r.v);
	return r;
}

int64_t ld_i64m(struct ld *ld, json_object *o, const char *k, int64_t min, int64_t max)
{
	json_object *v = ld_get(o, k);
	if (!ld_is(v, json_type_int))
		return 0;
	int64_t i = json_object_get_int64(v);
	uint64_t u = json_object_get_uint64(v);
	if (i == INT64_MIN || i < min || (i >= 0 && u > (uint64_t)max)) {
		if (i >= 0)
			ld_bad(ld, "\"%s\" is %" PRIu64 " (at most %" PRId64 ")", k, u, max);
		else
			ld_bad(ld, "\"%s\" is %" PRId64 " (at least %" PRId64 ")", k, i, min);
		return 0;
	}
	return i;
}

/* A pid or tid, 0 when unknown. */
pid_t ld_pid_of(struct ld *ld, json_object *o, const char *k)
{
	return (pid_t)ld_i64m(ld, o, k, 0, PTW_LOAD_MAX_PID);
}

/* "0x..." as the document writes addresses and values. */
bool ld_hex_of(json_object *v, uint64_t *ret)
{
	if (!ld_is(v, json_type_string))
		return false;
	const char *s = json_object_get_string(v);
	if (s[0] != '0' || (s[1] != 'x' && s[1] != 'X') || !s[2] || strlen(s) > 18)
		return false;
	uint64_t x = 0;
	for (const char *c = s + 2; *c; c++) {
		int d = *c >= '0' && *c <= '9'	 ? *c - '0'
			: *c >= 'a' && *c <= 'f' ? *c - 'a' + 10
			: *c >= 'A' && *c <= 'F' ? *c - 'A' + 10
						 : -1;
		if (d < 0)
			return false;
		x = x << 4 | (uint64_t)d;
	}
	*ret = x;
	return true;
}

struct ptw_opt ld_hexopt(json_object *o, const char *k)
{
	struct ptw_opt r = { 0 };
	r.set = ld_hex_of(ld_get(o, k), &r.v);
	return r;
}

int ld_signum(const char *name)
{
	for (int i = 1; name && i < 65; i++)
		if (!strcmp(ptw_signame(i), name))
			return i;
	return 0;
}

int ld_name_index(const char *s, const char *const *names, size_t n, int fallback)
{
	for (size_t i = 0; s && i < n; i++)
		if (names[i] && !strcmp(names[i], s))
			return (int)i;
	return fallback;
}

struct ptw_location *ld_new_location(struct store *st)
{
	struct ptw_location *loc = xcalloc(1, sizeof(*loc));
	if (st->nlocs == st->caplocs) {
		st->caplocs = st->caplocs ? 2 * st->caplocs : 64;
		st->locs = xreallocarray(st->locs, st->caplocs, sizeof(*st->locs));
	}
	st->locs[st->nlocs++] = loc;
	return loc;
}

const struct ptw_location *ld_location(struct ld *ld, json_object *v)
{
	if (!ld_is(v, json_type_object))
		return NULL;
	struct store *st = ld->st;
	struct ptw_location *loc = ld_new_location(st);
	ld_hex_of(ld_get(v, "addr"), &loc->addr);
	/* a placeholder ("pthread_start_routine", "??") ld_is no symbol. (A
	 * stripped program's "main", known otherwise, reads back as a symbol.) */
	if (!ld_boolean(v, "placeholder"))
		loc->symbol = ld_keep(st, ld_str(ld, v, "symbol"));
	loc->linkage_name = ld_keep(st, ld_str(ld, v, "linkage_name"));
	if (loc->symbol)
		ld_hex_of(ld_get(v, "symbol_offset"), &loc->symbol_offset);
	loc->module = ld_keep(st, ld_str(ld, v, "module"));
	loc->has_offset = ld_hex_of(ld_get(v, "offset"), &loc->offset);
	loc->file = ld_keep(st, ld_str(ld, v, "file"));
	loc->line = (int)ld_i64m(ld, v, "line", 0, INT_MAX);
	return loc;
}

/* A stack: at most PTW_LOAD_MAX_STACK frames. */
const struct ptw_location **ld_stack_of(struct ld *ld, json_object *arr, size_t *ret_n)
{
	size_t n = ld_arr_len(arr);
	*ret_n = 0;
	if (n > PTW_LOAD_MAX_STACK) {
		ld_bad(ld, "a stack of %zu frames (report reads at most %d)", n,
		       PTW_LOAD_MAX_STACK);
		n = 0;
	}
	const struct ptw_location **stack = xcalloc(n + 1, sizeof(*stack));
	for (size_t i = 0; i < n; i++)
		if ((stack[*ret_n] = ld_location(ld, json_object_array_get_idx(arr, i))))
			(*ret_n)++;
	return stack;
}
