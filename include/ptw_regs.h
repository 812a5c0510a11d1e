/* SPDX-License-Identifier: MIT */
/*
 * Threads' registers and stacks read without stopping them, from the
 * kernel: what --snapshot takes where it may load BPF programs and sample
 * with perf (root, or CAP_BPF and CAP_PERFMON) instead of ptrace stops.
 * The kernel path makes one (ptw_kernel_regs_reader, ptw_kernel.h); the
 * snapshot (ptw_tracer_snapshot) only calls through it.
 */
#ifndef PTW_REGS_H
#define PTW_REGS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>
#include <sys/user.h>

#define PTW_TASK_RETS 4

/* One thread as the kernel holds it now. */
struct ptw_task_regs {
	pid_t tid;
	bool on_cpu;	   /* running on a CPU: regs are not its registers now */
	bool regs_ok;	   /* regs were read */
	uint64_t switches; /* context switches so far: a thread that ran since has more */
	/* its user registers as the kernel saved them at its last entry (a
	 * system call, an interrupt, a fault): true while it is off a CPU;
	 * orig_rax is the system call it is in (-1: none) */
	struct user_regs_struct regs;
	/* its innermost pending uretprobe returns (another tool's, or a
	 * ptwatch kernel session's, on the process): the stack slot whose
	 * return address the kernel replaced with its trampoline, and the
	 * original address; nrets 0: none, or unknown */
	uint32_t nrets;
	uint64_t rets[PTW_TASK_RETS][2];
};

/* One sample of a running thread: its user registers and the top of its
 * user stack, taken at one moment (perf, as `perf record --call-graph
 * dwarf` takes them). */
struct ptw_thread_sample {
	pid_t tid;
	int err; /* 0: taken; -EAGAIN: it did not run in the time given; -errno */
	struct user_regs_struct regs; /* (fs_base: the caller's, kept) */
	uint8_t *stack; /* malloc'd: len bytes from regs.rsp */
	size_t len;
};

struct ptw_regs_reader {
	/* Every thread of the process now (*ret malloc'd). Returns how many,
	 * or -errno. */
	int (*tasks)(struct ptw_regs_reader *r, struct ptw_task_regs **ret);
	/* One sample of each of the n threads v[i].tid, taken as each runs,
	 * waiting at most timeout_ms for all: each v[i].err says. Returns 0
	 * or -errno (none could be sampled). */
	int (*sample)(struct ptw_regs_reader *r, struct ptw_thread_sample *v, size_t n,
		      int timeout_ms);
	void (*free)(struct ptw_regs_reader *r);
	const char *what; /* how it reads, for the session's backend_why */
};

#endif
