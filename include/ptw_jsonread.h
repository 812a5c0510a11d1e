/* SPDX-License-Identifier: MIT */
/*
 * A small, strict JSON reader (RFC 8259) for `ptwatch report`: the whole
 * text into a tree. Strict: no comments, no trailing commas, no leading
 * zeros, no control characters in strings, UTF-8 checked, surrogate pairs
 * checked, nesting at most PTW_JSON_MAX_DEPTH, nothing after the value but
 * white space. Numbers keep their text, so that 64-bit integers (nanosecond
 * timestamps) come back exactly. Pure: no I/O.
 */
#ifndef PTW_JSONREAD_H
#define PTW_JSONREAD_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define PTW_JSON_MAX_DEPTH 64

enum ptw_jtype { PTW_J_NULL, PTW_J_BOOL, PTW_J_NUM, PTW_J_STR, PTW_J_ARR, PTW_J_OBJ };

struct ptw_jv {
	enum ptw_jtype type;
	bool b;		     /* BOOL */
	char *s;	     /* STR: the decoded UTF-8 (NUL-terminated); NUM: its text */
	size_t len;	     /* STR: bytes in s; ARR, OBJ: members */
	struct ptw_jv *items; /* ARR, OBJ: the values */
	char **keys;	     /* OBJ: the keys, in the order of the text */
};

/*
 * Parses text[0..len). Returns 0 and *ret (free it with ptw_jv_free), or
 * -EINVAL with a one-line reason in err ("line 3, column 7: expected ','")
 * and *ret untouched. Allocation failure is fatal.
 */
int ptw_json_parse(const char *text, size_t len, struct ptw_jv **ret, char *err, size_t errlen);
void ptw_jv_free(struct ptw_jv *v); /* NULL is fine */

/* Lookups that accept NULL and the wrong type (they then return NULL / false). */
const struct ptw_jv *ptw_jv_get(const struct ptw_jv *obj, const char *key);
const struct ptw_jv *ptw_jv_at(const struct ptw_jv *arr, size_t i);
const char *ptw_jv_str(const struct ptw_jv *v); /* a string's value */
/* A number that is an integer in range (no fraction, no exponent). */
bool ptw_jv_u64(const struct ptw_jv *v, uint64_t *ret);
bool ptw_jv_i64(const struct ptw_jv *v, int64_t *ret);
/* A string "0x..." (as the document writes addresses). */
bool ptw_jv_hex(const struct ptw_jv *v, uint64_t *ret);
bool ptw_jv_is_null(const struct ptw_jv *v); /* missing counts as null */

#endif
