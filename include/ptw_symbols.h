/* SPDX-License-Identifier: MIT */
/*
 * Symbols of one process image, through libdwfl: the loaded modules,
 * name -> address (with a negative cache), address -> location (function,
 * module, file:line; interned and never freed while the session lives),
 * function bounds, struct member offsets from DWARF, and unwinding.
 *
 * No ptrace here: memory comes through the read callback given at creation.
 */
#ifndef PTW_SYMBOLS_H
#define PTW_SYMBOLS_H

#include <stdbool.h>
#include <stdint.h>
#include <string.h>
#include <sys/types.h>
#include <sys/user.h>

struct ptw_symbols;

/* A resolved code address. Strings are owned by the symbols object and live
 * as long as it does. symbol is NULL when nothing names the address; it is
 * demangled (C++, Rust), and linkage_name is then the name as mangled in the
 * symbol table (NULL when the two are the same). */
struct ptw_location {
	uint64_t addr;
	const char *symbol;
	const char *linkage_name;
	uint64_t symbol_offset; /* addr - symbol start */
	const char *module;	/* path of the ELF file, NULL if unknown */
	bool has_offset;
	uint64_t offset;	/* addr - module load bias */
	const char *file;	/* source file, NULL if unknown */
	int line;		/* 0 if unknown */
};

/* Whether at is in glibc's clone() wrapper, which leaves the function and
 * argument of a raw clone's child at the top of its stack (both paths
 * read them there). */
static inline bool ptw_location_is_clone_wrapper(const struct ptw_location *at)
{
	return at && at->symbol && (!strcmp(at->symbol, "clone") || !strcmp(at->symbol, "__clone"));
}

/* Reads target memory; returns 0 or -errno. */
typedef int (*ptw_memread_fn)(void *ctx, uint64_t addr, void *buf, size_t len);

/*
 * Reports the modules of pid. use_debug_files = false ignores separate debug
 * files (/usr/lib/debug, debuginfod): only what the loaded files carry is used.
 * With debug files and DEBUGINFOD_URLS set, the debug file of every module
 * that has none on this machine is fetched here (and by ptw_symbols_refresh
 * for new modules), within DEBUGINFOD_TIMEOUT (5 s unless set), not at the
 * first lookup.
 * cache_dir: where the answers of name lookups, member offsets, function
 * ranges and locations are kept per module build-id (ptw_cache.h) so that
 * the next session need not read the symbol tables and DWARF again; NULL:
 * no cache. Returns 0 or -errno; *ret untouched on failure.
 */
int ptw_symbols_new(pid_t pid, bool use_debug_files, const char *cache_dir, ptw_memread_fn read,
		    void *read_ctx, struct ptw_symbols **ret);
/*
 * The symbols of one ELF file that no process maps yet (a command about to
 * be exec'd): one module, the executable, at the addresses libdwfl gives
 * it; no memory, nothing to refresh, no unwinding. Lookups, function
 * lists and locations work as for a process. Returns 0, -ENOEXEC (not an
 * ELF file it can read) or -errno.
 */
int ptw_symbols_new_file(const char *path, bool use_debug_files, const char *cache_dir,
			 struct ptw_symbols **ret);
/*
 * A module as a process's dynamic linker lists it (its link_map entry):
 * the file, its load bias (l_addr) and its dynamic section's address
 * (l_ld; 0 unknown). is_exe: the program itself.
 */
struct ptw_module_spec {
	const char *path;
	uint64_t bias, dynamic;
	/* not 0: where the file's entry point is instead of bias (auxv's
	 * AT_ENTRY for the program): bias = entry - its e_entry */
	uint64_t entry;
	bool is_exe;
};
/*
 * The symbols of pid from such a list instead of /proc/PID/maps (which
 * takes the process's memory-map lock while it runs): each file opened
 * without blocking, checked against its entry (a regular ELF file, its
 * dynamic section where the entry says, an aligned bias), an entry that
 * does not fit left out (debug message); [vdso] is not listed. Lookups,
 * locations and unwinding as ptw_symbols_new; refreshes report the list
 * again, never /proc. Returns 0 or -errno.
 */
int ptw_symbols_new_listed(pid_t pid, const struct ptw_module_spec *mods, size_t n,
			   bool use_debug_files, const char *cache_dir, ptw_memread_fn read,
			   void *read_ctx, struct ptw_symbols **ret);
/* The module list replaced by mods (dlopen, dlclose; s may have come
 * from /proc): locations handed out stay valid. Returns how many modules
 * were taken, or -errno. */
int ptw_symbols_set_listed(struct ptw_symbols *s, const struct ptw_module_spec *mods, size_t n);
/* len bytes at addr as the module's file has them (text: what a uprobe's
 * breakpoint hides in memory), without reading the process. Returns 0 or
 * -ENOENT (no module's file holds them). */
int ptw_symbols_read_file(struct ptw_symbols *s, uint64_t addr, void *buf, size_t len);

/* Where the code at addr is in its module's file (the PT_LOAD that holds
 * it): what a uprobe is given. Returns 0 or -ENOENT. */
int ptw_symbols_file_offset(struct ptw_symbols *s, uint64_t addr, uint64_t *ret_off);

/* Saves the caches (as ptw_symbols_save_cache), then frees. */
void ptw_symbols_free(struct ptw_symbols *s);
/* The image is gone (exec, process exit): keeps only the locations handed
 * out (spans point at them) and frees the rest (libdwfl's state, indexes,
 * caches, after saving them); nothing but ptw_symbols_free may follow. */
void ptw_symbols_retire(struct ptw_symbols *s);
/* Writes what was learned since the last save to the cache directory; a
 * directory that cannot be written is a debug message, nothing more. */
void ptw_symbols_save_cache(struct ptw_symbols *s);

/* The answers read from cache files may be wrong (libthread_db, say,
 * cannot work with them): if any lookup was answered from one, every
 * cache of the session is emptied (and rewritten at the next save) and
 * the lookups are forgotten, so that the next ones read the modules.
 * Returns how many answers had come from files (0: none, nothing was
 * done; asking again would change nothing). */
size_t ptw_symbols_forget_cache(struct ptw_symbols *s);

/* Re-reads /proc/PID/maps (after dlopen/dlclose); drops name caches. */
int ptw_symbols_refresh(struct ptw_symbols *s);

/* Which modules a lookup searches. */
#define PTW_MOD_ANY NULL    /* every module, in load order */
#define PTW_MOD_EXE "<exe>" /* the main executable only */
/* Any other string: modules whose file name starts with it ("libc.so"). */

/*
 * Finds a symbol by name: .dynsym, .symtab, then the separate debug file.
 * Hits and misses are cached. Returns 0, or -ENOENT.
 * ret_size may be NULL.
 */
int ptw_symbols_lookup(struct ptw_symbols *s, const char *module, const char *name,
		       uint64_t *ret_addr, uint64_t *ret_size);

/*
 * Like ptw_symbols_lookup, but only in the symbol tables of the loaded files
 * themselves (and the cache): never a search for a separate debug file, so
 * cheap on the start path for what can be found another way.
 */
int ptw_symbols_lookup_loaded(struct ptw_symbols *s, const char *module, const char *name,
			      uint64_t *ret_addr);

/*
 * debuginfod (DEBUGINFOD_URLS) in this process: NULL while it works or is
 * not used; else the first failure other than "not found" (no answer within
 * DEBUGINFOD_TIMEOUT, connection refused...), after which no more queries
 * are made. Owned here; the same string every time (one warning).
 */
const char *ptw_symbols_debuginfod_error(void);

/*
 * Whether ptw_symbols_new fetches from debuginfod, as it reads a process's
 * modules, the debug files they will need (on, the default), or leaves it
 * to a lookup that needs one: the kernel path's launch reads its held
 * command while it is still ptwatch's copy, whose libraries are not
 * looked up but for libc.
 */
void ptw_symbols_prefetch(bool on);

/* The executable's path (/proc/PID/exe at creation), or NULL. */
const char *ptw_symbols_exe(const struct ptw_symbols *s);
/* Path of the module containing addr, or NULL. */
const char *ptw_symbols_module_of(struct ptw_symbols *s, uint64_t addr);
/* Path of the first module whose file name starts with prefix (or the exe). */
const char *ptw_symbols_module_path(struct ptw_symbols *s, const char *module);

/* The modules now loaded (the executable first), by index. */
size_t ptw_symbols_module_count(const struct ptw_symbols *s);
/* Path (NULL if unknown), load address and whether it is the executable. */
int ptw_symbols_module_info(struct ptw_symbols *s, size_t i, const char **ret_path,
			    uint64_t *ret_start, bool *ret_is_exe);
typedef void (*ptw_function_fn)(void *ctx, uint64_t addr, const char *linkage_name);
/*
 * Calls fn for every function symbol defined in module i (address in the
 * process; the linkage name without a version suffix, valid during the
 * call). IFUNC resolvers are left out. Returns 1 when a full symbol table
 * was searched (.symtab or a debug file), 0 when only .dynsym was (a
 * stripped file without a debug file: static functions cannot be found),
 * -ENOENT when the module has no symbols at all.
 */
int ptw_symbols_module_functions(struct ptw_symbols *s, size_t i, ptw_function_fn fn, void *ctx);

/* One value of /proc/PID/auxv (AT_ENTRY, AT_BASE ...), 0 when missing. */
uint64_t ptw_proc_auxv(pid_t pid, uint64_t type);
/* main() of a program without a symbol for it (stripped), from glibc's
 * _start at entry (AT_ENTRY), read with readmem(ctx): 0 when that is not
 * glibc's _start or main is not in the executable (src/symbols/main_entry.c). */
uint64_t ptw_symbols_main_from_entry(struct ptw_symbols *s, ptw_memread_fn readmem, void *ctx,
				     uint64_t entry);

/* Interned location for addr (never NULL), valid until ptw_symbols_free.
 * Cached; an address no module covers refreshes the module list once. */
const struct ptw_location *ptw_symbols_locate(struct ptw_symbols *s, uint64_t addr);

/* Where the next symbol after addr (a symbol's) begins in the same
 * section, or that section ends: the most a function whose symbol has no
 * size (crt's, some assembly) and no CFI can span. Returns 0 or -ENOENT. */
int ptw_symbols_next_symbol(struct ptw_symbols *s, uint64_t addr, uint64_t *ret);

/* Whether the function's frame is set up at pc, by its .eh_frame CFI: the
 * canonical frame address is not rsp + 8 there, so the stack pointer is
 * not at its return slot (a jump there is no tail call). false: it may
 * be, or nothing says. */
bool ptw_symbols_frame_set_up(struct ptw_symbols *s, uint64_t pc);

/* [lo, hi) of the function containing addr, from the symbol table or, failing
 * that, from the CFI (FDE range). Returns 0 or -ENOENT. */
int ptw_symbols_function_range(struct ptw_symbols *s, uint64_t addr, uint64_t *ret_lo,
			       uint64_t *ret_hi);

/*
 * Offset of member in `struct struct_name` from the DWARF of module (only the
 * compilation units whose name ends with one of cu_hints are searched first;
 * cu_hints may be NULL). Returns 0, -ENOENT (no such member / no DWARF).
 */
int ptw_symbols_member_offset(struct ptw_symbols *s, const char *module, const char *const *cu_hints,
			      const char *struct_name, const char *member, uint64_t *ret_offset);

/*
 * Unwinds the stopped thread tid from regs with the CFI of the loaded modules.
 * pcs[0] is regs->rip; the others are return addresses. Returns the number of
 * frames (>= 1) or -errno.
 */
int ptw_symbols_unwind(struct ptw_symbols *s, pid_t tid, const struct user_regs_struct *regs,
		       uint64_t *pcs, int max);

/*
 * The same, with each frame's stack pointer: sps[0] is regs->rsp, sps[i]
 * the caller's stack pointer once frame i-1 returned (its CFA: frame i-1's
 * return address pcs[i] is at sps[i] - 8); 0 when unknown. *whole: the
 * unwind reached the outermost frame (or max).
 */
int ptw_symbols_unwind_sps(struct ptw_symbols *s, pid_t tid, const struct user_regs_struct *regs,
			   uint64_t *pcs, uint64_t *sps, int max, bool *whole);

/* A copy of a thread's stack, taken while it was stopped: addr is the lowest
 * address copied (its stack pointer), len bytes from there. */
struct ptw_stack_copy {
	uint64_t addr;
	size_t len;
	const uint8_t *bytes;
};

/*
 * The same, for a thread that may run again: memory in the stack copy is
 * read from it (what the thread's stack held when regs were read), the rest
 * (older frames above the copy, if it was cut short) from the process.
 */
int ptw_symbols_unwind_copy(struct ptw_symbols *s, pid_t tid, const struct user_regs_struct *regs,
			    const struct ptw_stack_copy *stack, uint64_t *pcs, int max);
/* Return addresses the kernel replaced with a uretprobe's trampoline (a
 * value in [tramp_lo, tramp_hi) read at one of the slots): the original
 * at each stack slot, as the kernel keeps them (its pending returns). */
struct ptw_unwind_rets {
	uint64_t tramp_lo, tramp_hi;
	const uint64_t (*slots)[2]; /* (slot address, original return address) */
	size_t n;
};

/* v as read at addr, or the original return address if it is r's
 * trampoline at one of r's slots. r NULL: v. */
uint64_t ptw_unwind_rets_fix(const struct ptw_unwind_rets *r, uint64_t addr, uint64_t v);

/*
 * ptw_symbols_unwind_sps and _copy with the thread's memory read by read
 * (ctx) instead of the symbols' own reader (read NULL: that one): a process that shares
 * another's symbols (a fork child's are its parent's until it execs) is
 * unwound in its own memory, not in its parent's at the same addresses.
 * rets (NULL: none): the return addresses a uretprobe replaced, so that
 * the unwind goes past them.
 */
int ptw_symbols_unwind_sps_in(struct ptw_symbols *s, ptw_memread_fn read, void *ctx,
			      const struct ptw_unwind_rets *rets, pid_t tid,
			      const struct user_regs_struct *regs, uint64_t *pcs, uint64_t *sps,
			      int max, bool *whole);
int ptw_symbols_unwind_copy_in(struct ptw_symbols *s, ptw_memread_fn read, void *ctx,
			       const struct ptw_unwind_rets *rets, pid_t tid,
			       const struct user_regs_struct *regs,
			       const struct ptw_stack_copy *stack, uint64_t *pcs, int max);

/*
 * The same from the stack pointer and pc alone (what /proc/TID/syscall
 * says of a thread asleep in the kernel), the other registers unknown:
 * never guessed. Returns the number of frames found. *whole says whether
 * the unwind reached the outermost frame (or max): then they are the
 * frames an unwind from every register gives. If not, a frame needed a
 * register it does not have (its frame pointer, say) or the unwind failed:
 * the frames found are true but not all (stop the thread and read its
 * registers to have them all). *read_live says whether memory beyond the
 * copy was read from the process (true only if the thread did not run
 * before that read). rets as for ptw_symbols_unwind_sps_in (NULL: none).
 */
int ptw_symbols_unwind_sp_pc(struct ptw_symbols *s, pid_t tid, uint64_t sp, uint64_t pc,
			     const struct ptw_stack_copy *stack, const struct ptw_unwind_rets *rets,
			     uint64_t *pcs, int max, bool *whole, bool *read_live);

#endif
