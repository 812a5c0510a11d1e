/* SPDX-License-Identifier: MIT */
/*
 * Inside src/symbols: struct ptw_symbols and what its files share (each
 * calls only those before it: listed.c, symbols.c, dwarf_layout.c,
 * unwind.c).
 */
#ifndef PTW_SYMBOLS_INT_H
#define PTW_SYMBOLS_INT_H

#include "ptw_symbols.h"

#include <dwarf.h>
#include <elfutils/libdw.h>
#include <elfutils/libdwelf.h>
#include <elfutils/libdwfl.h>
#include <gelf.h>
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <inttypes.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "ptw_cache.h"
#include "ptw_demangle.h"
#include "ptw_util.h"
#include "debugfile.h"

/* One symbol of a module, chained in a per-module name index. */
struct sym_entry {
	const char *name; /* points into the ELF string table (lives with the module) */
	size_t name_len;  /* without a version suffix ("pthread_create@@GLIBC_2.34") */
	uint64_t addr, size;
	int rank; /* higher wins: global default version > global > local */
	struct sym_entry *next;
};

/* The on-disk cache of one module (by build-id); outlives refreshes. */
struct sym_module_cache {
	uint64_t key; /* ptw_str_hash(build-id hex) */
	struct ptw_cache *cache;
};

struct module_index {
	Dwfl_Module *mod;
	const char *path;
	bool is_exe;
	bool built;
	struct ptw_map names; /* ptw_str_hash(name) -> struct sym_entry* chain */
	struct sym_entry *entries;
	bool cache_looked;	 /* cache and bias below are valid */
	struct ptw_cache *cache; /* NULL: none (no build-id, --no-cache) */
	uint64_t bias;
};

/* A module of a list (ptw_symbols_new_listed), checked. */
struct listed_module {
	char *path;
	uint64_t start, end;
	dev_t dev;
	ino_t ino;
};

/* A cached answer (hit or miss) of ptw_symbols_lookup, chained by hash. */
struct lookup_result {
	char *key; /* module \001 name */
	bool found;
	uint64_t addr, size;
	struct lookup_result *next;
};

struct ptw_symbols {
	pid_t pid;
	bool offline; /* ptw_symbols_new_file: one file, no process */
	bool use_debug_files;
	char *cache_dir; /* NULL: no cache */
	bool cache_unwritable;
	struct sym_module_cache *caches;
	size_t ncaches;
	Dwfl *dwfl;
	Dwfl_Callbacks callbacks;
	char *debuginfo_path;
	char *exe_path;
	struct module_index *mods;
	size_t nmods;
	struct ptw_map lookups;	  /* hash(module \0 name) -> struct lookup_result* */
	size_t answers_from_disk; /* lookups answered by records read from a cache file */
	struct ptw_map locations; /* addr -> struct ptw_location* (current module list) */
	struct ptw_location **all_locations; /* every one handed out: spans keep them */
	size_t nall, all_cap;
	char **strings; /* interned strings for locations */
	size_t nstrings, strings_cap;
	ptw_memread_fn read;
	void *read_ctx;
	/* ptw_symbols_new_listed: the modules as the dynamic linker lists
	 * them, reported instead of /proc/PID/maps ("---- listed modules") */
	struct listed_module *listed;
	size_t nlisted;
	bool use_list;
	/* unwinding */
	bool attached;
	pid_t unwind_tid;
	const struct user_regs_struct *unwind_regs;
	const struct ptw_stack_copy *unwind_stack; /* NULL: read the live stack */
	/* the unwound thread's memory, when not the symbols' own (NULL) */
	ptw_memread_fn unwind_read;
	void *unwind_read_ctx;
	const struct ptw_unwind_rets *unwind_rets; /* NULL: none */
	bool unwind_sp_pc_only;	  /* the other registers are unknown (UNKNOWN_REG) */
	bool unwind_used_unknown; /* ... and one was used: the unwind is not true */
	bool unwind_read_live;	  /* memory beyond the stack copy was read */
	bool unwind_complete;	  /* the last unwind reached the outermost frame */
};

/* ---- symbols.c ---- */

struct ptw_symbols *sym_symbols_alloc(pid_t pid, bool use_debug_files, const char *cache_dir,
				      ptw_memread_fn read, void *read_ctx,
				      __typeof__(((Dwfl_Callbacks *)0)->find_elf) find_elf);
struct ptw_cache *sym_module_cache(struct ptw_symbols *s, struct module_index *mi);
int sym_cache_get(struct ptw_symbols *s, struct ptw_cache *c, const char *kind, const char *what,
		  struct ptw_cache_value *ret);
void sym_cache_put(struct ptw_cache *c, const char *kind, const char *what, bool found, uint64_t a,
		   uint64_t b, const char *text);
bool sym_module_matches(const struct module_index *mi, const char *module);
Dwfl_Module *sym_module_at(struct ptw_symbols *s, uint64_t addr);
struct module_index *sym_index_of(struct ptw_symbols *s, Dwfl_Module *mod);

/* ---- listed.c ---- */

bool sym_listed_check(const struct ptw_module_spec *m, struct listed_module *ret);
int sym_listed_find_elf(Dwfl_Module *mod, void **userdata, const char *name, Dwarf_Addr base,
			char **file_name, Elf **elfp);

int sym_report_listed(struct ptw_symbols *s);

#endif
