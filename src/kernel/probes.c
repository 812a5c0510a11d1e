/* SPDX-License-Identifier: MIT */
/* Probe points and struct pthread's layout; see probes.h. */
#define _GNU_SOURCE
#include "probes.h"
#include "ptw_glibc.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include "ptw_breakpoints.h"
#include "ptw_symbols.h"
#include "ptw_thread_db.h"
#include "ptw_util.h"

struct wanted {
	enum ptwk_kind kind;
	const char *names[3]; /* tried in order */
	bool required;
	bool also_return;    /* a return probe too (cookie kind + 1) */
	const char *without; /* what is lost without it */
};

/*
 * The uprobes: each one's first instruction decides its cost (the kernel
 * emulates push and call, and must single-step most others: about 10 us
 * instead of 1): on Debian 12's glibc 2.36 all are a push but
 * pthread_detach's (a test, rare enough).
 */
static const struct wanted WANTED[] = {
	{ .kind = PTWK_CREATE_CALL,
	  .names = { "pthread_create", "__pthread_create_2_1" },
	  .required = true },
	{ .kind = PTWK_START,
	  .names = { "start_thread" },
	  .without = "start_thread not found (libc's debug file, libc6-dbg): thread starts are "
		     "not reported" },
	/* A static program links __call_tls_dtors only if it uses
	 * thread_local destructors; start_thread calls
	 * __nptl_deallocate_tsd next (so does main's caller, after a
	 * pthread_exit by the main thread: not a thread's end, convert.c). */
	{ .kind = PTWK_DEATH,
	  .names = { "__call_tls_dtors", "__nptl_deallocate_tsd" },
	  .without = "__call_tls_dtors not found: how threads end is seen only when they exit" },
	{ .kind = PTWK_EXIT_CALL,
	  .names = { "__pthread_exit", "pthread_exit" },
	  .without = "pthread_exit not found: pthread_exit calls are not reported" },
	{ .kind = PTWK_CANCEL,
	  .names = { "__pthread_cancel", "pthread_cancel" },
	  .without = "pthread_cancel not found: cancellations are not attributed" },
	{ .kind = PTWK_DETACH,
	  .names = { "__pthread_detach", "pthread_detach" },
	  .without = "pthread_detach not found: detach calls are not reported" },
	/* All joins go through __pthread_clockjoin_ex; without .symtab,
	 * pthread_join alone (its tail call returns through the same
	 * return probe). */
	{ .kind = PTWK_JOIN,
	  .names = { "__pthread_clockjoin_ex", "pthread_join" },
	  .also_return = true,
	  .without = "no join function found: joins are not reported" },
	/* Where libc calls main (after the constructors): a launch's
	 * PTW_EV_MAIN_START. Its first instruction is single-stepped: once
	 * per process. */
	{ .kind = PTWK_MAIN,
	  .names = { "__libc_start_call_main", "__libc_start_main" },
	  .without = "__libc_start_main not found: main's start is not reported" },
	/* main() returns into exit(); its caller tells a return from a call. */
	{ .kind = PTWK_EXIT_FN,
	  .names = { "exit" },
	  .without = "exit not found: main's return is not reported" },
};

int ptwk_file_of(pid_t pid, const struct ptw_mapping *maps, int nmaps, uint64_t addr, char *path,
		 size_t size, char *module, size_t msize, uint64_t *file_off)
{
	const struct ptw_mapping *m = ptw_maps_find(maps, nmaps, addr);
	if (!m || !m->path[0] || m->path[0] != '/' || !strchr(m->perms, 'x'))
		return -ENOENT;
	*file_off = addr - m->start + m->offset;
	snprintf(module, msize, "%s", m->path);
	struct stat st;
	if (stat(m->path, &st) == 0 && st.st_ino == m->inode && major(st.st_dev) == m->dev_major &&
	    minor(st.st_dev) == m->dev_minor) {
		snprintf(path, size, "%s", m->path);
		return 0;
	}
	snprintf(path, size, "/proc/%d/map_files/%llx-%llx", pid, (unsigned long long)m->start,
		 (unsigned long long)m->end);
	return access(path, R_OK) == 0 ? 0 : -errno;
}

/* Where the probes' code is in the file the kernel is to probe: by a
 * process's mappings, or (file set) in a file not mapped yet, by its
 * own program headers (syms are its symbols). */
struct place {
	pid_t pid;
	const struct ptw_mapping *maps;
	int nmaps;
	const char *file;
	struct ptw_symbols *syms;
};

static int place_of(const struct place *pl, uint64_t addr, char *path, size_t size, char *module,
		    size_t msize, uint64_t *off)
{
	if (!pl->file)
		return ptwk_file_of(pl->pid, pl->maps, pl->nmaps, addr, path, size, module, msize,
				    off);
	int r = ptw_symbols_file_offset(pl->syms, addr, off);
	if (r < 0)
		return r;
	snprintf(path, size, "%s", pl->file);
	snprintf(module, msize, "%s", pl->file);
	return 0;
}

/* A static program links in only the functions it uses: one its symbol
 * table lacks is never called, and its probe is not missed. (Not so for
 * what start_thread calls, nor for a shared libc.) */
static bool never_called(enum ptwk_kind kind, bool in_exe)
{
	return in_exe && (kind == PTWK_EXIT_CALL || kind == PTWK_CANCEL || kind == PTWK_DETACH ||
			  kind == PTWK_JOIN);
}

/*
 * A static program's thread end, __nptl_deallocate_tsd, begins with an
 * instruction the kernel single-steps (xor: some 6 us more per thread,
 * measured with bench/churn): start_thread's one call of it, a call rel32
 * the kernel emulates, is the same point in a thread (and leaves out main's
 * caller's call). Its address, or 0 unless start_thread (at fn) calls
 * callee there once, by decoding and by its bytes alike.
 */
static uint64_t death_call_site(struct ptw_symbols *syms, uint64_t fn, uint64_t callee)
{
	uint64_t lo, hi, targets[64], site = 0;
	uint8_t code[4096];
	if (ptw_symbols_function_range(syms, fn, &lo, &hi) < 0 || lo != fn || hi <= lo ||
	    hi - lo > sizeof(code) || ptw_symbols_read_file(syms, lo, code, hi - lo) < 0)
		return 0;
	size_t len = hi - lo;
	int n = ptw_insn_find_calls(code, len, lo, false, targets, 64), decoded = 0, bytes = 0;
	for (int i = 0; i < n; i++)
		decoded += targets[i] == callee;
	for (size_t i = 0; i + 5 <= len; i++) {
		int32_t rel;
		memcpy(&rel, code + i + 1, sizeof(rel));
		if (code[i] == 0xe8 && lo + i + 5 + (uint64_t)(int64_t)rel == callee) {
			site = lo + i;
			bytes++;
		}
	}
	if (decoded != 1 || bytes != 1 || site + 5 - lo < 8 ||
	    ptw_insn_call_length(code + (site + 5 - lo) - 8, site + 5) != 5)
		return 0;
	return site;
}

/* The DEATH probe at start_thread's call of __nptl_deallocate_tsd (above). */
static void death_at_call(struct ptw_symbols *syms, const struct place *pl, struct ptwk_probes *p)
{
	struct ptwk_probe *death = NULL, *start = NULL;
	for (size_t i = 0; i < p->n; i++)
		if (p->p[i].kind == PTWK_DEATH &&
		    !strcmp(p->p[i].function, "__nptl_deallocate_tsd"))
			death = &p->p[i];
		else if (p->p[i].kind == PTWK_START)
			start = &p->p[i];
	uint64_t site = death && start ? death_call_site(syms, start->addr, death->addr) : 0;
	char path[sizeof(p->path)], mod[sizeof(p->module)];
	uint64_t off;
	if (!site || place_of(pl, site, path, sizeof(path), mod, sizeof(mod), &off) < 0 ||
	    strcmp(path, p->path))
		return;
	ptw_dbg(PTW_DBG_TRACER, "thread end at start_thread%+lld (its call of %s)",
		(long long)(site - start->addr), death->function);
	death->addr = site;
	death->offset = off;
}

static int find(struct ptw_symbols *syms, const char *module, struct ptw_tdb *tdb,
		struct ptw_symbols *tdb_file, const struct place *pl, bool use_debug_files, struct ptwk_probes *p, char *why,
		size_t why_size)
{
	bool in_exe = !strcmp(module, PTW_MOD_EXE);
	for (size_t i = 0; i < PTW_ARRAY_SIZE(WANTED); i++) {
		const struct wanted *w = &WANTED[i];
		uint64_t addr = 0;
		const char *found = NULL;
		for (size_t k = 0; k < 3 && w->names[k] && !found; k++)
			if (ptw_symbols_lookup(syms, module, w->names[k], &addr, NULL) == 0)
				found = w->names[k];
		char path[sizeof(p->path)], mod[sizeof(p->module)];
		uint64_t off = 0;
		mod[0] = '\0';
		int fr = found ? place_of(pl, addr, path, sizeof(path), mod, sizeof(mod), &off)
			       : -ENOENT;
		if (fr == 0 && p->path[0] && strcmp(path, p->path))
			fr = -EXDEV; /* one file for every probe: one link */
		if (fr < 0) {
			if (w->required) {
				if (found)
					snprintf(why, why_size, "cannot probe %s in %s: %s",
						 w->names[0], mod[0] ? mod : "libc", strerror(-fr));
				else if (pl->file)
					snprintf(why, why_size,
						 "no %s in its symbols: stripped, or without "
						 "glibc's threads",
						 w->names[0]);
				else
					snprintf(
						why, why_size,
						"no %s in process %d: it does not use glibc's threads",
						w->names[0], pl->pid);
				return -ENOENT;
			}
			if (w->without && p->nmissing < PTW_ARRAY_SIZE(p->missing) &&
			    !(fr == -ENOENT && !found && never_called(w->kind, in_exe))) {
				if (w->kind == PTWK_START)
					p->missing_start = p->nmissing + 1;
				p->missing_code[p->nmissing] = PTW_W_HOOK_FAILED,
				snprintf(p->missing[p->nmissing++], sizeof(p->missing[0]), "%s",
					 w->without);
			}
			continue;
		}
		if (!p->path[0]) {
			snprintf(p->path, sizeof(p->path), "%s", path);
			snprintf(p->module, sizeof(p->module), "%s", mod);
		}
		p->p[p->n++] = (struct ptwk_probe){ w->kind, found, addr, off, false };
		if (w->also_return)
			p->p[p->n++] = (struct ptwk_probe){ w->kind + 1, found, addr, off, true };
	}
	if (in_exe)
		death_at_call(syms, pl, p);
	ptw_glibc_pthread_layout(syms, module, tdb, tdb_file, use_debug_files, &p->layout);
	if (!p->layout.have_result && p->nmissing < PTW_ARRAY_SIZE(p->missing)) {
		/* (the reason libthread_db's descriptors did not do: ptw_glibc.h) */
		p->missing_code[p->nmissing] = PTW_W_NO_LIBC_DEBUGINFO;
		snprintf(p->missing[p->nmissing++], sizeof(p->missing[0]),
			 "struct pthread's layout is unknown (%s%s%s): start routine return "
			 "values are not reported",
			 in_exe ? "the static program has no DWARF for its libc" : "libc6-dbg",
			 p->layout.underived[0] ? "; " : "", p->layout.underived);
	}
	uint64_t main_addr;
	if (ptw_symbols_lookup_loaded(syms, PTW_MOD_EXE, "main", &main_addr) == 0)
		p->main_addr = main_addr;
	return 0;
}

int ptwk_find_probes(struct ptw_symbols *syms, struct ptw_tdb *tdb, pid_t pid, bool use_debug_files,
		     struct ptwk_probes *ret, char *why, size_t why_size)
{
	memset(ret, 0, sizeof(*ret));
	/* libc.so, or the executable itself when libc is linked into it. */
	const char *module = ptw_symbols_module_path(syms, "libc.so") ? "libc.so" : PTW_MOD_EXE;
	struct ptw_mapping *maps = NULL;
	int nmaps = ptw_maps_read(pid, &maps);
	if (nmaps < 0) {
		snprintf(why, why_size, "cannot read /proc/%d/maps: %s", pid, strerror(-nmaps));
		return nmaps;
	}
	struct place pl = { .pid = pid, .maps = maps, .nmaps = nmaps };
	int r = find(syms, module, tdb, NULL, &pl, use_debug_files, ret, why, why_size);
	free(maps);
	return r;
}

int ptwk_find_probes_file(struct ptw_symbols *file_syms, const char *path, bool use_debug_files,
			  struct ptwk_probes *ret, char *why, size_t why_size)
{
	memset(ret, 0, sizeof(*ret));
	struct place pl = { .file = path, .syms = file_syms };
	int r = find(file_syms, PTW_MOD_EXE, NULL, file_syms, &pl, use_debug_files, ret, why,
		     why_size);
	ret->in_exe = r == 0;
	return r;
}
