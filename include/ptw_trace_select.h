/* SPDX-License-Identifier: MIT */
/*
 * What --trace selects in a process, the same for both backends: which
 * functions of a module the patterns take (and which they must not: entered
 * without a call), the helpers that tell how frames are left without a
 * return, and what is said at the end (a pattern that matched nothing, the
 * functions that could not be traced, the ones refused). A backend only
 * places what it is given: int3s and return breakpoints, or uprobes. Pure:
 * it reads no process; the backend walks a module's functions
 * (ptw_symbols_module_functions) through ptw_trace_select_function.
 */
#ifndef PTW_TRACE_SELECT_H
#define PTW_TRACE_SELECT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* ---- the helpers ---- */

enum ptw_trace_helper_kind {
	PTW_TRACE_THROW,	   /* an exception starts unwinding */
	PTW_TRACE_CATCH,	   /* ... and lands in a catch block */
	PTW_TRACE_LONGJMP,	   /* a longjmp (its jmp_buf: where it lands) */
	PTW_TRACE_CONTEXT_SWAP,	   /* swapcontext(oucp, ucp) */
	PTW_TRACE_CONTEXT_SET,	   /* setcontext(ucp) */
	PTW_TRACE_SIGRETURN,	   /* glibc's sigreturn trampoline: a handler's end */
	PTW_TRACE_MODULES_CHANGED, /* ld.so's _dl_debug_state: libraries came or went */
};

struct ptw_trace_helper {
	const char *name;
	const char *module; /* where to look it up (a ptw_symbols module name), or NULL: any */
	enum ptw_trace_helper_kind kind;
};

/* Every helper, in the order to place them. */
extern const struct ptw_trace_helper ptw_trace_helpers[];
extern const size_t ptw_trace_nhelpers;

/* ---- the selection ---- */

struct ptw_trace_select;

/* The patterns of --trace (n of them; those that do not parse are
 * dropped: the command line checked them), NULL for none. */
struct ptw_trace_select *ptw_trace_select_new(char *const *trace, size_t n);
void ptw_trace_select_free(struct ptw_trace_select *s);
size_t ptw_trace_select_patterns(const struct ptw_trace_select *s);

/* Does a pattern apply to the module at path? Its functions are to be
 * walked (through ptw_trace_select_function) only then. */
bool ptw_trace_select_applies(struct ptw_trace_select *s, const char *path);

/* A function the patterns select: address and name for people
 * (demangled), valid during the call. */
typedef void (*ptw_trace_want_fn)(void *ctx, uint64_t addr, const char *name);

struct ptw_trace_scan {
	struct ptw_trace_select *sel;
	ptw_trace_want_fn want;
	void *ctx;
};

/* A ptw_function_fn (scan: a struct ptw_trace_scan *): one function of
 * the module last asked about; want() when the patterns that apply to it
 * take it and it may be traced. */
void ptw_trace_select_function(void *scan, uint64_t addr, const char *name);

/* The walk of the module at path is over: what ptw_symbols_module_functions
 * returned (0: only its dynamic symbols could be searched). */
void ptw_trace_select_walked(struct ptw_trace_select *s, const char *path, int r);

/* A function want() was given cannot be traced: why (the first few per
 * pattern are said). */
void ptw_trace_select_failed(struct ptw_trace_select *s, const char *name, const char *why);

/*
 * What is said at the end, of the selections of every process of a
 * session (-f: the root's first; all of the same patterns): per process, the functions refused and
 * those that could not be traced; per pattern, once for the session, one
 * that matched nothing anywhere. fn gets the index of the process it is
 * about (0 for the session's).
 */
void ptw_trace_select_notes(struct ptw_trace_select *const *all, size_t n,
			    void (*fn)(void *ctx, size_t which, int code, const char *line),
			    void *ctx);

#endif
