/* SPDX-License-Identifier: MIT */
/*
 * What a uprobe costs where it is placed: the kernel emulates a few x86
 * instructions at a probe (push of a register, nop, call, jmp, jcc) and
 * runs any other out of line, a single step in a page of its own: a trap
 * more per hit. Measured on Linux 6.18 (a function of 3 instructions,
 * --trace on it, 100,000 calls): push 1.0 us a call, nop 1.2, a 5-byte
 * nop 0.7; lea, mov, sub, endbr64 16 us. (nop is emulated on recent
 * kernels only: older ones step it.)
 *
 * And where a uprobe must not go: the kernel (6.18 here) takes the opcode
 * of a VEX- or EVEX-encoded instruction without the opcode map its prefix
 * names, so `vpbroadcastb %esi,%ymm17` (62 .. 7a) is emulated as a jp and
 * not run: strchr at such a probe returned NULL in every call (glibc's
 * __strchr_evex; bpftrace's own uprobe there does the same). Pure but for
 * ptwk_xol_misread_at, which reads the file.
 */
#ifndef PTW_KERNEL_XOL_H
#define PTW_KERNEL_XOL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Whether the instruction at code (n bytes read) is one the kernel
 * emulates at a uprobe, not one it single-steps out of line. */
bool ptwk_xol_emulated(const uint8_t *code, size_t n);

/* Whether the kernel would misread the instruction at code at a uprobe
 * (VEX or EVEX-encoded): no probe may go there. _at: the instruction at
 * off in the file at path (false if it cannot be read). */
bool ptwk_xol_misread(const uint8_t *code, size_t n);
/* Whether the instruction at code has a lock prefix (uprobes refuse it). */
bool ptwk_xol_locked(const uint8_t *code, size_t n);
bool ptwk_xol_misread_at(const char *path, uint64_t off);

#endif
