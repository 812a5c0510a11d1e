/* SPDX-License-Identifier: MIT */
/*
 * Where glibc's threads wait (--locks), for both backends: the tracer
 * breaks there (src/tracer/locks.c), the kernel backend puts uprobes there
 * (src/kernel/locks.c). Only the slow paths, never a lock's fast path, so
 * an uncontended lock or unlock costs nothing:
 *   __lll_lock_wait          a mutex is contended (pthread_mutex_lock, and
 *                            pthread_cond_wait taking its mutex back);
 *   __lll_lock_wait_private  a lock inside glibc (stdio, malloc arenas);
 *   __futex_abstimed_wait_common, where both futex wait functions go
 *                            (rwlocks, condition variables, semaphores,
 *                            timed mutex locks): its callers, found by
 *                            unwinding, say which kind of wait it is
 *                            (ptw_libc_waits_classify);
 *   the join function (the lifecycle's): a join waits when the joined
 *                            thread still runs.
 * With libc's symbol table (libc6-dbg) these are found by name; without
 * it, from the code of the exported functions that call them.
 */
#ifndef PTW_LIBC_WAITS_H
#define PTW_LIBC_WAITS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "ptw_events.h"
#include "ptw_symbols.h"

/* __futex_abstimed_wait_common (futex_word, expected, clockid, abstime,
 * private, cancel): a rwlock's wrphase wait expects 1 | FUTEX_USED. */
#define PTW_RWLOCK_FUTEX_WRPHASE_WAIT 3

struct ptw_wait_range {
	uint64_t lo, hi;
	enum ptw_wait_kind kind;
};

struct ptw_libc_waits {
	bool symtab; /* libc's full symbol table: frame names classify */
	uint64_t lll_lock_wait, lll_lock_wait_private, futex_wait; /* 0: not found */
	/* the exported functions that wait (and, without the symbol table,
	 * the local ones sem_wait and co. tail-call), for classifying */
	struct ptw_wait_range ranges[32];
	size_t nranges;
	/* without the symbol table: sem_wait's code unreadable, or the local
	 * function it tail-calls of no known extent (its waits' frames show
	 * only that function) */
	bool sem_tail_unknown;
};

/*
 * Finds them in the libc module of syms (libc_module: "libc.so", or
 * PTW_MOD_EXE for a static program). read_code reads the process's code as
 * the file has it (the tracer: without its int3 bytes). Never fails: what
 * is not found is 0 (the caller says what that costs).
 */
void ptw_libc_waits_find(struct ptw_symbols *syms, const char *libc_module,
			 ptw_memread_fn read_code, void *ctx, struct ptw_libc_waits *ret);

/*
 * What a futex wait is for, from the frames of the thread at
 * __futex_abstimed_wait_common's entry (pcs[0] there, then return
 * addresses). libc_path: libc's module path (NULL: a static program, every
 * pc may be libc's). PTW_WAIT_NONE: none of the kinds --locks reports (a
 * join, seen at the join function; aio, getaddrinfo_a).
 */
enum ptw_wait_kind ptw_libc_waits_classify(const struct ptw_libc_waits *w, struct ptw_symbols *syms,
					   const char *libc_path, const uint64_t *pcs, int n);

/* The object a classified futex wait is about, from the futex word and the
 * value the wait expects (rwlocks: which of its futexes). */
uint64_t ptw_libc_waits_object(enum ptw_wait_kind kind, uint64_t futex, uint32_t expected);

/* The kinds of futex wait (rwlock read and write, condition variable,
 * semaphore) that ptw_libc_waits_classify cannot tell from w, a bit
 * (1u << kind) each: without libc's symbol table, no range of that kind
 * was found (those waits would pass for no kind: the caller says they are
 * not seen). 0 with the symbol table, or without the futex wait at all
 * (its own warning). */
unsigned ptw_libc_waits_blind(const struct ptw_libc_waits *w);

/* Whether pc lies in one of the exported waiting functions. */
bool ptw_libc_waits_in_range(const struct ptw_libc_waits *w, uint64_t pc);

/*
 * Where a wait is called from: the frame (of pcs, as for classify) whose
 * call is its site, the first out of libc; in a static program (libc_path
 * NULL) the first neither in an exported primitive nor named like an
 * internal one. -1: none.
 */
int ptw_libc_waits_site_frame(const struct ptw_libc_waits *w, struct ptw_symbols *syms,
			      const char *libc_path, const uint64_t *pcs, int n);

/* The join function, where every join goes (and waits when the joined
 * thread still runs): __pthread_clockjoin_ex by name, else the one
 * pthread_join tail-calls (pthread_tryjoin_np and pthread_timedjoin_np go
 * there too), else (an older glibc) pthread_join itself; its extent from
 * the symbols (CFI). */
struct ptw_libc_join {
	uint64_t lo, hi;
	bool clockjoin; /* pthread_join is not the join function itself */
};

/* 0; -ENOENT: no join function in libc_module (a program without
 * threads); -EINVAL: none of a known extent (no more than 64 KiB).
 * read_code as for ptw_libc_waits_find. */
int ptw_libc_join_find(struct ptw_symbols *syms, const char *libc_module, ptw_memread_fn read_code,
		       void *ctx, struct ptw_libc_join *ret);

/* Frames of a thread's stack worth unwinding to find the wait it is in
 * (and a few of its callers, for its stack and call site). */
#define PTW_WAIT_UNDER_WAY_FRAMES 16

/* A wait under way at an attach, as a thread's stack shows it. */
struct ptw_wait_under_way {
	enum ptw_wait_kind kind; /* PTW_WAIT_NONE: none */
	uint64_t object;
	int frame; /* the slow path's frame in pcs (a join: the join function's) */
	bool join; /* it ends at the join function's return */
};

/* Where the join function is, and struct pthread's tid (a join sleeps on
 * the joined thread's): has_tid false, joins are not told. */
struct ptw_join_at {
	uint64_t lo, hi;
	bool has_tid;
	uint32_t tid_off;
};

/*
 * The wait a thread asleep in futex is in, from its frames (pcs, n: its pc
 * then return addresses, as unwound) and its system call's arguments (the
 * futex word, the value it expects): the innermost frame in one of w's
 * slow paths (a futex wait of a kind --locks reports, by its callers) or in
 * the join function gives its kind and object, as the slow path's entry
 * would have. Both backends: the tracer stops the thread, the kernel path
 * reads its saved registers. ret->kind PTW_WAIT_NONE: no wait reported.
 */
void ptw_libc_waits_under_way(const struct ptw_libc_waits *w, struct ptw_symbols *syms,
			      const char *libc_path, const struct ptw_join_at *join, uint64_t futex,
			      uint32_t expected, const uint64_t *pcs, int n,
			      struct ptw_wait_under_way *ret);

#endif
