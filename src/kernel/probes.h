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

#include "ptw_glibc.h"
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


#define PTWK_MAX_PROBES 20 /* the lifecycle's 10, --locks' 6 */

struct ptwk_probes {
	char path[4096];   /* the file for the kernel (libc, or a static executable) */
	char module[4096]; /* its name as the process maps it, for messages */
	struct ptwk_probe p[PTWK_MAX_PROBES];
	size_t n;
	struct ptw_pthread_layout layout;
	uint64_t main_addr; /* main() in the executable, 0 unknown */
	/* What could not be found: one line each, the report's warnings. */
	char missing[8][256];
	enum ptw_warning_code missing_code[8];
	size_t nmissing;
	/* 1 + start_thread's line in missing[] (0: it was found): the
	 * caller may start threads at their clone's return instead */
	size_t missing_start;
	/* The probes are on a static program's file, found before it runs
	 * (ptwk_find_probes_file). */
	bool in_exe;
};

/*
 * Finds every probe point of pid's libc and the layout (tdb may be NULL).
 * Returns 0, or -ENOENT with a one-line reason in why when the process
 * cannot be watched at all (no glibc, no pthread_create).
 */
int ptwk_find_probes(struct ptw_symbols *syms, struct ptw_tdb *tdb, pid_t pid, bool use_debug_files,
		     struct ptwk_probes *ret, char *why, size_t why_size);

/*
 * The same for a static program about to be exec'd (libc linked into it):
 * in its file's own symbols (file_syms: ptw_symbols_new_file), at offsets
 * in the file at path, and struct pthread's layout from its DWARF or the
 * libthread_db descriptors in its symbol table. -ENOENT with a reason
 * when it has no pthread_create (stripped, or no threads).
 */
int ptwk_find_probes_file(struct ptw_symbols *file_syms, const char *path, bool use_debug_files,
			  struct ptwk_probes *ret, char *why, size_t why_size);

/* Linux 6.6's uprobe_multi link (include/uapi/linux/bpf.h), which the
 * headers and libbpf of Debian 12 predate: the attach type, the flag and
 * the layout of BPF_LINK_CREATE's attributes for it. */
#define PTWK_BPF_TRACE_UPROBE_MULTI    48
#define PTWK_BPF_F_UPROBE_MULTI_RETURN 1u
struct ptwk_link_create_uprobe_multi {
	uint32_t prog_fd;
	uint32_t target_fd;
	uint32_t attach_type;
	uint32_t flags;
	uint64_t path;
	uint64_t offsets;
	uint64_t ref_ctr_offsets;
	uint64_t cookies;
	uint32_t cnt;
	uint32_t multi_flags;
	uint32_t pid;
	uint32_t pad;
};

struct ptw_mapping;

/* The file that maps addr, as the kernel should open it: the path in
 * /proc/PID/maps when it is that very file here (same device and inode),
 * else /proc/PID/map_files/START-END (a deleted or replaced file, another
 * mount namespace); module: the path as mapped. file_off: addr's offset in
 * it. Returns 0, or -ENOENT (not a file's executable mapping) or -errno. */
int ptwk_file_of(pid_t pid, const struct ptw_mapping *maps, int nmaps, uint64_t addr, char *path,
		 size_t size, char *module, size_t msize, uint64_t *file_off);

#endif
