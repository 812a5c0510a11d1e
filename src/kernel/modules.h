/* SPDX-License-Identifier: MIT */
/*
 * ld.so's list of modules as the BPF program walked it in the target
 * (bpf/ptw_modules.bpf.h: PTWK_MODULE records, then PTWK_MODULES_END),
 * gathered into one list: pure (no /proc, no files), so that unit tests
 * feed it synthetic records. The records are the target's memory: a
 * walk with a record missing, out of order, cut short or malformed is
 * thrown away whole, never half used. The files themselves are checked
 * by the symbols layer (ptw_symbols_new_listed).
 */
#ifndef PTW_KERNEL_MODULES_H
#define PTW_KERNEL_MODULES_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct ptwk_module {
	char *path;	  /* as ld.so has it ("" for the program: its exe); may be relative */
	uint64_t bias;	  /* l_addr */
	uint64_t dynamic; /* l_ld */
	bool is_exe;	  /* the list's first entry: the program */
};

struct ptwk_modlist {
	uint64_t walk; /* the walk being gathered (its records' e), 0: none */
	bool bad;      /* that walk is thrown away */
	size_t sent;   /* its records seen, in order */
	struct ptwk_module *v;
	size_t n, cap;
	uint64_t lists, bad_lists; /* whole lists, lists thrown away */
};

#define PTWK_MODLIST_MORE 0 /* part of a walk: more to come */
#define PTWK_MODLIST_DONE 1 /* l->v[0..n) is the process's list now */
#define PTWK_MODLIST_BAD  (-1)

/*
 * One PTWK_MODULE (a struct ptwk_module_record of size bytes) or
 * PTWK_MODULES_END record of one process, in ring order. Entries that
 * name no file (no '/': the vdso) are left out of the list; the first
 * entry is the program whatever its name. Returns PTWK_MODLIST_MORE,
 * _DONE (the list stays in l until the next record) or _BAD (a walk
 * thrown away, or a record that is not one of these).
 */
int ptwk_modlist_feed(struct ptwk_modlist *l, const void *rec, size_t size);
void ptwk_modlist_free(struct ptwk_modlist *l);

struct ptwk_args_record;
/* An exec's command line (PTWK_EXEC_ARGS) as an argv (ptw_argv_free);
 * NULL when it was not read, was cut (longer than the record holds) or
 * is empty. */
char **ptwk_args_parse(const struct ptwk_args_record *x);

#endif
