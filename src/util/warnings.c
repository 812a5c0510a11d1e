/* SPDX-License-Identifier: MIT */
/* The warning codes and their meanings, from the one list (ptw_warnings.h). */
#include <stdio.h>
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

char *ptw_sigtrap_death_text(enum ptw_trap_verdict v, int pid, int tid, const char *symbol,
			     uint64_t symbol_offset, uint64_t addr)
{
	char where[256];
	if (symbol)
		snprintf(where, sizeof(where), "%s+%#llx", symbol, (unsigned long long)symbol_offset);
	else
		snprintf(where, sizeof(where), "%#llx", (unsigned long long)addr);
	switch (v) {
	case PTW_TRAP_RAISED:
		return xasprintf("process %d died of SIGTRAP in thread %d at %s, not a breakpoint "
				 "trap (raised or sent by the program): ptwatch had patched nothing "
				 "there",
				 pid, tid, where);
	case PTW_TRAP_PROGRAM_INT3:
		return xasprintf("process %d died of SIGTRAP at %s (thread %d), an int3 of the "
				 "program's own: ptwatch had patched nothing there",
				 pid, where, tid);
	case PTW_TRAP_RUNTIME_INT3:
		return xasprintf("process %d died of SIGTRAP at %s (thread %d), an int3 in code no "
				 "file holds (made at run time): not a probe of ptwatch's",
				 pid, where, tid);
	case PTW_TRAP_PATCHED:
		return xasprintf("process %d died of SIGTRAP at %s (thread %d), where ptwatch had "
				 "put a breakpoint: the trap was ptwatch's, not the program's (a bug "
				 "in ptwatch; please report it)",
				 pid, where, tid);
	case PTW_TRAP_PROBE_GONE:
		break;
	}
	return xasprintf("process %d died of SIGTRAP at %s (thread %d), where its file has no int3: "
			 "a uprobe's breakpoint (ptwatch's probes are uprobes) that the kernel no "
			 "longer applied there, its code copied or remapped: the trap was a probe's, "
			 "not the program's (a bug to report)",
			 pid, where, tid);
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
