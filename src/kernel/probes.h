/* SPDX-License-Identifier: MIT */
/*
 * Where the kernel backend puts its uprobes in a process, found with
 * ptwatch's own symbols layer (ptw_symbols.h): glibc's functions by name
 * (static ones such as start_thread from libc's debug file), as offsets in
 * the file the kernel is to probe, and struct pthread's layout (libc's
 * DWARF, else libthread_db's own descriptors of it).
 */
#ifndef PTW_KERNEL_PROBES_H
#define PTW_KERNEL_PROBES_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "ptw_kernel_records.h"
#include "ptw_warnings.h"

struct ptw_symbols;
struct ptw_tdb;

struct ptwk_probe {
	enum ptwk_kind kind;  /* the attach cookie */
	const char *function; /* the symbol it was found as (static storage) */
	uint64_t addr;	      /* in the process */
	uint64_t offset;      /* in the file */
	bool ret;	      /* a return probe */
};

struct ptwk_layout {
	bool have_result, have_joinid, have_start_routine, have_arg, have_cancelhandling;
	uint64_t result, joinid, start_routine, arg, cancelhandling;
};

#define PTWK_MAX_PROBES 20 /* the lifecycle's 10, --locks' 6 */

struct ptwk_probes {
	char path[4096];   /* the file for the kernel (libc, or a static executable) */
	char module[4096]; /* its name as the process maps it, for messages */
	struct ptwk_probe p[PTWK_MAX_PROBES];
	size_t n;
	struct ptwk_layout layout;
	uint64_t main_addr; /* main() in the executable, 0 unknown */
	/* What could not be found: one line each, for ptw_kernel_notes. */
	char missing[8][160];
	enum ptw_warning_code missing_code[8];
	size_t nmissing;
};

/*
 * Finds every probe point of pid's libc and the layout (tdb may be NULL).
 * Returns 0, or -ENOENT with a one-line reason in why when the process
 * cannot be watched at all (no glibc, no pthread_create).
 */
int ptwk_find_probes(struct ptw_symbols *syms, struct ptw_tdb *tdb, pid_t pid, bool use_debug_files,
		     struct ptwk_probes *ret, char *why, size_t why_size);

#endif
