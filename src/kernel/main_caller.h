/* SPDX-License-Identifier: MIT */
/*
 * Which libc function calls main() when libc's symbol table is missing (no
 * debug file): glibc 2.34+ calls main from __libc_start_call_main, a static
 * function, and hands main's value to exit() from there. Without its name
 * the kernel path could not tell main's return from an exit() call.
 */
#ifndef PTW_KERNEL_MAIN_CALLER_H
#define PTW_KERNEL_MAIN_CALLER_H

#include <stdint.h>

struct ptw_symbols;
struct ptw_proc;

/*
 * [*ret_lo, *ret_hi): the one function (its CFI range) that
 * __libc_start_main (at start_main) calls directly and that itself calls
 * exit (at exit_fn) directly. Code read from proc, decoded, never run.
 * Returns 0, or -ENOENT when there is not exactly one such function.
 */
int ptwk_main_caller(struct ptw_symbols *syms, struct ptw_proc *proc, uint64_t start_main,
		     uint64_t exit_fn, uint64_t *ret_lo, uint64_t *ret_hi);

#endif
