/* SPDX-License-Identifier: MIT */
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
#ifndef PTW_KERNEL_MAIN_CALLER_H
#define PTW_KERNEL_MAIN_CALLER_H

#include <stdint.h>

struct ptw_symbols;

/* libc's text in its file: an address in the process (a probe's), its
 * offset in the file fd, and the same segment around it. */
struct ptwk_code {
	int fd;
	uint64_t addr, offset;
};

/*
 * [*ret_lo, *ret_hi): the one function (its CFI range) that
 * __libc_start_main (at start_main) calls directly and that itself calls
 * exit (at exit_fn) directly.
 * Returns 0, or -ENOENT when there is not exactly one such function.
 */
int ptwk_main_caller(struct ptw_symbols *syms, const struct ptwk_code *code, uint64_t start_main,
		     uint64_t exit_fn, uint64_t *ret_lo, uint64_t *ret_hi);

/*
 * *ret_addr: the one function whose address a `lea disp(%rip)` in
 * pthread_create (at create) or in a function it calls directly computes
 * and that calls __call_tls_dtors (at tls_dtors) directly. Returns 0, or
 * -ENOENT when there is not exactly one.
 */
int ptwk_start_thread(struct ptw_symbols *syms, const struct ptwk_code *code, uint64_t create,
		      uint64_t tls_dtors, uint64_t *ret_addr);

#endif
