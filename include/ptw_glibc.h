/* SPDX-License-Identifier: MIT */
/*
 * What glibc is, in one place for both backends: struct pthread's layout
 * (from libc's DWARF, from libthread_db's descriptors, or derived without
 * either), glibc's static functions found by what they do, and its
 * sigreturn trampoline. The wait functions and objects are ptw_waits.h
 * (pure) and ptw_libc_waits.h (where libc's slow paths are).
 */
#ifndef PTW_GLIBC_H
#define PTW_GLIBC_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

struct ptw_symbols;
struct ptw_tdb;

/* ---- struct pthread ---- */

/* cancelhandling's bits (nptl/descr.h, the same since 2.25): CANCELED, set
 * by pthread_cancel; EXITING, set when the thread begins to unwind
 * (pthread_exit, a cancellation) and, for one that returned, only after
 * TD_DEATH. And the result a cancellation leaves (PTHREAD_CANCELED). */
#define PTW_GLIBC_CANCELED_BITMASK 0x08u
#define PTW_GLIBC_EXITING_BITMASK 0x10u
#define PTW_GLIBC_PTHREAD_CANCELED UINT64_MAX

/* The members ptwatch reads, and where each is (have_X: known). */
struct ptw_pthread_layout {
	bool have_result, have_joinid, have_start_routine, have_arg, have_cancelhandling;
	uint64_t result, joinid, start_routine, arg, cancelhandling;
	/* pd->tid (libthread_db's descriptor): a new thread's check of its
	 * fs base at the clone's return (bpf: ptw_clone_exit) */
	bool have_tid;
	uint64_t tid;
	/* Without the debug file: which of arg (1), result (2), joinid (4)
	 * came from their neighbours (below), and why the rest did not. */
	unsigned derived;
	char underived[96];
};

/*
 * A member's offset in struct pthread from libc's DWARF (module: libc's
 * name in syms, or the executable of a static program). 0 or -ENOENT.
 */
int ptw_glibc_pthread_member(struct ptw_symbols *syms, const char *module, const char *member,
			     uint64_t *ret_off);

/*
 * The whole layout: each member from libc's DWARF (use_debug_files), else
 * from libthread_db's descriptors, read through tdb (a live process), or
 * when tdb is NULL in file (a static program's symbols: its .rodata has
 * them); arg, result and joinid, when neither has them, derived from their
 * neighbours (ptw_glibc_layout_derive).
 */
void ptw_glibc_pthread_layout(struct ptw_symbols *syms, const char *module, struct ptw_tdb *tdb,
			      struct ptw_symbols *file, bool use_debug_files,
			      struct ptw_pthread_layout *l);

/*
 * Thread tid's start routine from its own struct pthread, at pd (its TLS,
 * its fs base), for a thread libthread_db did not give: the struct is
 * taken when it names the thread (its tid, or 0 while its clone has not
 * returned to its creator). Returns the routine, 0 when it cannot be had.
 */
struct ptw_proc;
uint64_t ptw_glibc_tls_routine(struct ptw_proc *p, const struct ptw_pthread_layout *l,
			       uint64_t pd, pid_t tid);

/*
 * struct pthread's layout without libc's debug file: the members that
 * libthread_db has no descriptor for (arg, result, joinid) derived from
 * the neighbours it does describe, and refused when those neighbours are
 * not where glibc's nptl/descr.h puts them. Pure (the descriptors are read
 * by the caller), unit-tested in tests/kernel/test_kconvert.c.
 *
 * glibc 2.36's order (nptl/descr.h):
 *
 *   ... bool report_events; ... struct pthread *joinid; void *result;
 *   struct sched_param schedparam; int schedpolicy;
 *   void *(*start_routine)(void *); void *arg; td_eventbuf_t eventbuf; ...
 *
 * libc.so.6 exports descriptors (_thread_db_pthread_*, each { bits,
 * count, offset }) for report_events, schedparam_sched_priority,
 * schedpolicy, start_routine and eventbuf. So:
 *   arg    = start_routine + 8, when eventbuf begins 16 bytes after
 *            start_routine (one pointer between them);
 *   result = schedparam - 8 and joinid = schedparam - 16, when schedparam
 *            (a 4-byte int), schedpolicy and start_routine follow each
 *            other with no gap (the order above), schedparam is 8-aligned
 *            (no padding hides between result and it) and report_events
 *            lies before joinid.
 * Checked against libc6-dbg's DWARF for Debian 12's glibc 2.36
 * (ptype/o struct pthread): joinid 1568, result 1576, schedparam 1584,
 * schedpolicy 1588, start_routine 1592, arg 1600, eventbuf 1608.
 */
/* One libthread_db descriptor of a struct pthread member. */
struct ptw_glibc_tdb_desc {
	bool known;
	uint32_t bits, count, offset;
};

struct ptw_glibc_tdb_descs {
	struct ptw_glibc_tdb_desc report_events, sched_priority, schedpolicy, start_routine,
		eventbuf;
	uint32_t sizeof_pthread; /* 0 unknown */
};

/* The descriptor names (without "_thread_db_pthread_"), in the order of
 * struct ptw_glibc_tdb_descs' members. */
extern const char *const ptw_glibc_tdb_desc_names[5];

/*
 * Fills what l does not have yet of arg, result and joinid from d, and
 * sets *derived for each one it filled (bit 0 arg, bit 1 result, bit 2
 * joinid). Returns the number of members it could not derive (0: all
 * there), with the first reason in why.
 */
int ptw_glibc_layout_derive(const struct ptw_glibc_tdb_descs *d, struct ptw_pthread_layout *l,
			    unsigned *derived, char *why, size_t why_size);

/* ---- glibc's code ---- */

/*
 * glibc's static functions the kernel path needs, found without libc's
 * symbol table (no debug file) by what their exported neighbours do with
 * them, decoded from libc's file (not the process's copy, where uprobes of
 * this or another session put int3s), bounded by the CFI:
 * - main's caller: glibc 2.34+ calls main from __libc_start_call_main and
 *   hands main's value to exit() from there; without it main's return is
 *   not told from an exit() call;
 * - start_thread, where every pthread begins: pthread_create (or a
 *   function it calls, create_thread) hands its address to clone, and it
 *   is the one such function that calls __call_tls_dtors (the DEATH probe:
 *   after the start routine returned).
 */
/* libc's text in its file: an address in the process (a probe's), its
 * offset in the file fd, and the same segment around it. */
struct ptw_glibc_code {
	int fd;
	uint64_t addr, offset;
};

/*
 * [*ret_lo, *ret_hi): the one function (its CFI range) that
 * __libc_start_main (at start_main) calls directly and that itself calls
 * exit (at exit_fn) directly.
 * Returns 0, or -ENOENT when there is not exactly one such function.
 */
int ptw_glibc_main_caller(struct ptw_symbols *syms, const struct ptw_glibc_code *code,
			  uint64_t start_main, uint64_t exit_fn, uint64_t *ret_lo,
			  uint64_t *ret_hi);

/*
 * *ret_addr: the one function whose address a `lea disp(%rip)` in
 * pthread_create (at create) or in a function it calls directly computes
 * and that calls __call_tls_dtors (at tls_dtors) directly. Returns 0, or
 * -ENOENT when there is not exactly one.
 */
int ptw_glibc_start_thread(struct ptw_symbols *syms, const struct ptw_glibc_code *code,
			   uint64_t create, uint64_t tls_dtors, uint64_t *ret_addr);

/*
 * Whether the code at a signal handler's return address is glibc's
 * sigreturn trampoline (__restore_rt on x86-64: `mov $15, %rax; syscall`),
 * given at least PTW_GLIBC_SIGRETURN_LEN bytes of it.
 */
#define PTW_GLIBC_SIGRETURN_LEN 9
bool ptw_glibc_is_sigreturn(const uint8_t *code, size_t n);

#endif
