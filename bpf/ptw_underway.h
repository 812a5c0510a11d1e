/* SPDX-License-Identifier: MIT */
/*
 * Calls under way at an attach on the kernel path (bpf/ptw_underway.bpf.h,
 * src/kernel/underway.c): what the task iterator says of each thread, and
 * the key of a return site watched for one frame. Shared by both sides:
 * plain fixed-width types only.
 */
#ifndef PTW_UNDERWAY_H
#define PTW_UNDERWAY_H

#ifndef __bpf__
#include <linux/types.h>
#endif

#define PTWK_UW_RETS 4

/* One thread of the process, as the task iterator read it. */
struct ptwk_uw_task {
	__u32 tid;
	__u32 on_cpu;	/* running on a CPU now: regs are not its registers */
	__u64 switches; /* nvcsw + nivcsw: a thread that ran since has more */
	__u32 regs_ok;	/* regs were read */
	__u32 pad;
	/* its user registers as the kernel saved them at its last entry
	 * (a system call, an interrupt), DWARF's x86-64 order: rax rdx rcx rbx
	 * rsi rdi rbp rsp r8-r15 rip */
	__u64 regs[17];
	__u64 fsbase; /* its TLS: glibc's struct pthread (0 unread) */
	__u64 orig_ax; /* the system call it is in (-1: none), with regs */
	__u64 flags;   /* eflags, with regs */
	/* its innermost pending uretprobe returns (a uretprobe's, ours or
	 * another tool's; a fork child's: copied from its parent's): the
	 * stack slot whose return address the kernel replaced with its
	 * trampoline, and that address (nrets 0: none, or unknown) */
	__u32 nrets;
	__u32 pad2;
	__u64 rets[PTWK_UW_RETS][2];
};

/* underway_sites' value: the traced function's index (--trace), or'ed
 * with what else returns at that site and stack pointer (the BPF program
 * passes it on as the FRAME_RETURN record's a). */
#define PTWK_UW_WAIT	   (1ull << 63) /* --locks: a wait's slow path under way */
#define PTWK_UW_JOIN	   (1ull << 62) /* --locks: a join wait's join function */
#define PTWK_UW_INDEX_MASK ((1ull << 62) - 1)

/* A frame under way whose return is watched: that thread at that return
 * site with this stack pointer (the caller's, after the return). */
struct ptwk_uw_key {
	__u32 tid;
	__u32 pad;
	__u64 sp;
};

#endif
