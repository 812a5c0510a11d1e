/* SPDX-License-Identifier: MIT */
/* The warning codes and their meanings, from the one list (ptw_warnings.h). */
#include <stdlib.h>
#include <string.h>

#include "ptw_util.h"
#include "ptw_warnings.h"

static const struct {
	const char *code, *meaning;
} warnings[PTW_WARNING_CODES] = {
#define PTW_WARNING_ROW(id, code, meaning) [PTW_W_##id] = { #code, meaning },
	PTW_WARNINGS(PTW_WARNING_ROW)
#undef PTW_WARNING_ROW
};

const char *ptw_warning_code(enum ptw_warning_code w)
{
	return (unsigned)w < PTW_WARNING_CODES ? warnings[w].code : NULL;
}

const char *ptw_warning_meaning(enum ptw_warning_code w)
{
	return (unsigned)w < PTW_WARNING_CODES ? warnings[w].meaning : NULL;
}

void ptw_warning_list_add(struct ptw_warning_list *l, enum ptw_warning_code w, const char *key,
			  char *message)
{
	const char *code = ptw_warning_code(w);
	if (!code || !message) {
		free(message);
		return;
	}
	if (!key)
		key = message;
	if (!l->index)
		l->index = xcalloc(1, sizeof(struct ptw_map));
	struct ptw_map *index = l->index;
	uint64_t h = (ptw_str_hash(code) * 31 + ptw_str_hash(key)) | 1;
	/* (open addressing over the hash: a collision moves on, never merges
	 * two different warnings; keys odd, never 0) */
	for (;; h += 2) {
		uintptr_t at = (uintptr_t)ptw_map_get(index, h);
		if (!at)
			break;
		struct ptw_warning *e = &l->v[at - 1];
		if (!strcmp(e->code, code) && !strcmp(l->keys[at - 1], key)) {
			e->count++;
			free(message);
			return;
		}
	}
	l->v = xreallocarray(l->v, l->n + 1, sizeof(*l->v));
	l->keys = xreallocarray(l->keys, l->n + 1, sizeof(*l->keys));
	l->keys[l->n] = xstrdup(key);
	l->v[l->n] = (struct ptw_warning){ .code = xstrdup(code), .message = message, .count = 1 };
	l->n++;
	ptw_map_put(index, h, (void *)(uintptr_t)l->n);
}

void ptw_warning_list_free(struct ptw_warning_list *l)
{
	for (size_t i = 0; i < l->n; i++) {
		free(l->v[i].code);
		free(l->v[i].message);
		free(l->keys[i]);
	}
	free(l->v);
	free(l->keys);
	if (l->index) {
		ptw_map_free(l->index);
		free(l->index);
	}
	memset(l, 0, sizeof(*l));
}
