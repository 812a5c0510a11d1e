/* SPDX-License-Identifier: MIT */
/* ld.so's module list from the BPF walk's records; see modules.h. */
#include "modules.h"

#include <stdlib.h>
#include <string.h>

#include "ptw_kernel_records.h"
#include "ptw_util.h"

static void clear(struct ptwk_modlist *l)
{
	for (size_t i = 0; i < l->n; i++)
		free(l->v[i].path);
	l->n = 0;
	l->sent = 0;
	l->walk = 0;
	l->bad = false;
}

static int thrown(struct ptwk_modlist *l)
{
	if (!l->bad)
		l->bad_lists++;
	l->bad = true;
	return PTWK_MODLIST_BAD;
}

static int entry(struct ptwk_modlist *l, const struct ptwk_module_record *m)
{
	if (m->r.e != l->walk) {
		/* A new walk: one before it that did not end is thrown away. */
		if (l->walk && !l->bad)
			l->bad_lists++;
		clear(l);
		l->walk = m->r.e;
	}
	if (l->bad)
		return PTWK_MODLIST_BAD;
	if (!m->r.e || m->r.c != l->sent || l->sent >= PTWK_MAX_MODULES)
		return thrown(l); /* a record missing (lost), or not in order */
	size_t len = strnlen(m->path, PTWK_PATH_LEN);
	if (!(m->r.f & PTWK_F_READ) || len == PTWK_PATH_LEN)
		return thrown(l); /* its name unread, or cut: the list is not whole */
	bool is_exe = l->sent == 0;
	l->sent++;
	if (!is_exe && !memchr(m->path, '/', len))
		return PTWK_MODLIST_MORE; /* no file: the vdso */
	if (l->n == l->cap) {
		l->cap = l->cap ? l->cap * 2 : 16;
		l->v = xreallocarray(l->v, l->cap, sizeof(*l->v));
	}
	struct ptwk_module *v = &l->v[l->n++];
	v->path = xcalloc(len + 1, 1);
	memcpy(v->path, m->path, len);
	v->bias = m->r.a;
	v->dynamic = m->r.b;
	v->is_exe = is_exe;
	return PTWK_MODLIST_MORE;
}

int ptwk_modlist_feed(struct ptwk_modlist *l, const void *rec, size_t size)
{
	struct ptwk_record r;
	if (!rec || size < sizeof(r))
		return thrown(l);
	memcpy(&r, rec, sizeof(r));
	if (r.kind == PTWK_MODULE) {
		if (size < sizeof(struct ptwk_module_record))
			return thrown(l);
		struct ptwk_module_record m;
		memcpy(&m, rec, sizeof(m));
		return entry(l, &m);
	}
	if (r.kind != PTWK_MODULES_END)
		return PTWK_MODLIST_BAD;
	/* The end of a walk: whole only if it read to the list's end and
	 * every entry it sent came, in order. An end of no walk gathered
	 * (r_debug unreadable, every entry lost) ends nothing. */
	bool ok = l->walk && r.e == l->walk && !l->bad && (r.f & PTWK_F_MODULES_WHOLE) &&
		  r.a == l->sent && l->sent > 0;
	if (!ok) {
		if (!l->bad || r.e != l->walk)
			l->bad_lists++;
		clear(l);
		return PTWK_MODLIST_BAD;
	}
	l->lists++;
	l->walk = 0; /* the next record begins a new walk; v stays till then */
	l->sent = 0;
	return PTWK_MODLIST_DONE;
}

void ptwk_modlist_free(struct ptwk_modlist *l)
{
	clear(l);
	free(l->v);
	memset(l, 0, sizeof(*l));
}

char **ptwk_args_parse(const struct ptwk_args_record *x)
{
	if (!(x->r.f & PTWK_F_READ) || !x->r.a || x->r.a > PTWK_ARGS_LEN || x->r.b != x->r.a)
		return NULL;
	size_t len = (size_t)x->r.a, n = 0;
	for (size_t i = 0; i < len; i++)
		n += x->args[i] == '\0' || i == len - 1;
	char **argv = xcalloc(n + 1, sizeof(*argv));
	size_t k = 0;
	for (size_t i = 0; i < len && k < n;) {
		size_t l = strnlen(x->args + i, len - i);
		argv[k] = xcalloc(l + 1, 1);
		memcpy(argv[k++], x->args + i, l);
		i += l + 1;
	}
	return argv;
}
