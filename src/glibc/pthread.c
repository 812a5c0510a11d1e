/* SPDX-License-Identifier: MIT */
/*
 * struct pthread's layout, for both backends (ptw_glibc.h): each member
 * from libc's DWARF, else libthread_db's descriptor of it, else derived
 * from its described neighbours (layout.c).
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "ptw_glibc.h"
#include "ptw_attach.h"
#include "ptw_symbols.h"
#include "ptw_thread_db.h"
#include "ptw_util.h"

/* Where glibc defines struct pthread for its DWARF (the compile unit). */
static const char *const HINTS[] = { "nptl/pthread_create.c", "pthread_create.c", NULL };

static const char *known_how(unsigned derived, bool have)
{
	return derived ? "derived" : have ? "known" : "unknown";
}

/* Where libthread_db's descriptors of struct pthread (_thread_db_*
 * symbols) are read: in the process, through libthread_db, or in a static
 * program's file (its symbol table has them too, in .rodata), never in
 * ptwatch's own libc. */
struct tdb_source {
	struct ptw_tdb *tdb;
	struct ptw_symbols *file; /* (when tdb is NULL) */
};

static int tdb_symbol(const struct tdb_source *t, const char *name, void *buf, size_t size)
{
	uint64_t addr;
	if (t->tdb)
		return ptw_tdb_read_symbol(t->tdb, name, buf, size);
	if (!t->file || ptw_symbols_lookup(t->file, PTW_MOD_EXE, name, &addr, NULL) < 0)
		return -ENOENT;
	return ptw_symbols_read_file(t->file, addr, buf, size);
}

/* A member's offset from its descriptor { bits, count, offset }. */
static int tdb_field(const struct tdb_source *t, const char *member, uint32_t *ret_off)
{
	char name[96];
	uint32_t v[3];
	if (t->tdb)
		return ptw_tdb_pthread_field(t->tdb, member, ret_off);
	snprintf(name, sizeof(name), "_thread_db_pthread_%s", member);
	if (tdb_symbol(t, name, v, sizeof(v)) < 0)
		return -ENOENT;
	*ret_off = v[2];
	return 0;
}

/* No debug file: arg, result and joinid from libthread_db's descriptors
 * of their neighbours (ptw_glibc.h), or refused with a reason. */
static void layout_derive(const struct tdb_source *tdb, struct ptw_pthread_layout *l)
{
	struct ptw_glibc_tdb_descs d = { 0 };
	struct ptw_glibc_tdb_desc *descs[] = { &d.report_events, &d.sched_priority, &d.schedpolicy,
					       &d.start_routine, &d.eventbuf };
	for (size_t i = 0; i < PTW_ARRAY_SIZE(descs); i++) {
		char name[96];
		uint32_t v[3];
		snprintf(name, sizeof(name), "_thread_db_pthread_%s", ptw_glibc_tdb_desc_names[i]);
		if (tdb_symbol(tdb, name, v, sizeof(v)) == 0)
			*descs[i] = (struct ptw_glibc_tdb_desc){ true, v[0], v[1], v[2] };
	}
	uint32_t size;
	if (tdb_symbol(tdb, "_thread_db_sizeof_pthread", &size, sizeof(size)) == 0)
		d.sizeof_pthread = size;
	ptw_glibc_layout_derive(&d, l, &l->derived, l->underived, sizeof(l->underived));
	ptw_dbg(PTW_DBG_TRACER,
		"struct pthread without the debug file: arg %s, result %s, joinid %s%s%s",
		known_how(l->derived & 1, l->have_arg), known_how(l->derived & 2, l->have_result),
		known_how(l->derived & 4, l->have_joinid), l->underived[0] ? ": " : "",
		l->underived);
}

int ptw_glibc_pthread_member(struct ptw_symbols *syms, const char *module, const char *member,
			     uint64_t *ret_off)
{
	return ptw_symbols_member_offset(syms, module, HINTS, "pthread", member, ret_off);
}

void ptw_glibc_pthread_layout(struct ptw_symbols *syms, const char *module, struct ptw_tdb *tdb,
			      struct ptw_symbols *file, bool use_debug_files,
			      struct ptw_pthread_layout *l)
{
	const struct tdb_source src = { .tdb = tdb, .file = tdb ? NULL : file };
	struct {
		const char *member;
		bool *have;
		uint64_t *off;
		bool tdb_knows; /* libthread_db describes it (no debug file needed) */
	} fields[] = {
		{ "result", &l->have_result, &l->result, false },
		{ "joinid", &l->have_joinid, &l->joinid, false },
		{ "start_routine", &l->have_start_routine, &l->start_routine, true },
		{ "arg", &l->have_arg, &l->arg, false },
		{ "cancelhandling", &l->have_cancelhandling, &l->cancelhandling, true },
		{ "tid", &l->have_tid, &l->tid, true },
	};
	for (size_t i = 0; i < PTW_ARRAY_SIZE(fields); i++) {
		if (use_debug_files &&
		    ptw_glibc_pthread_member(syms, module, fields[i].member, fields[i].off) == 0) {
			*fields[i].have = true;
			continue;
		}
		uint32_t off;
		if (fields[i].tdb_knows && tdb_field(&src, fields[i].member, &off) == 0) {
			*fields[i].off = off;
			*fields[i].have = true;
		}
	}
	if ((src.tdb || src.file) && (!l->have_arg || !l->have_result || !l->have_joinid))
		layout_derive(&src, l);
}

uint64_t ptw_glibc_tls_routine(struct ptw_proc *p, const struct ptw_pthread_layout *l, uint64_t pd,
			       pid_t tid)
{
	int32_t named = 0;
	uint64_t routine = 0;
	if (!pd || !l->have_tid || !l->have_start_routine ||
	    ptw_mem_read(p, pd + l->tid, &named, sizeof(named)) < 0 ||
	    (named != tid && named != 0) ||
	    ptw_mem_read(p, pd + l->start_routine, &routine, sizeof(routine)) < 0)
		return 0;
	return routine;
}
