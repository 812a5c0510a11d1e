/* SPDX-License-Identifier: MIT */
/*
 * --trace on the kernel path: the calls under way at an attach (issue 20),
 * without stopping anyone. The tracer stops each thread and unwinds it;
 * here a task iterator (bpf/ptw_underway.bpf.h) reads the user registers
 * the kernel saved for every thread that is off a CPU (asleep in a system
 * call, say), the stack is unwound from them with the process's memory
 * (process_vm_readv), every traced function on it becomes a frame whose
 * entry was before the attach (convert_frames.c: below anything the
 * thread's records push), and a uprobe at its return site reports its
 * return for that thread and stack pointer only. With --locks, the same for
 * the wait a thread asleep in futex is in (its slow path's frame, or the
 * join function's): a wait span whose start was before the attach, its
 * return at the frame's return site (lockconv.c), so that a deadlock that
 * formed before ptwatch came is found.
 *
 * Truthful only for a thread that did not run while ptwatch looked: its
 * context-switch count and "not on a CPU" are read before the entry probes
 * go in (ptwk_underway_begin) and again after the return sites' probes are
 * in (in ptwk_underway_take); a thread that ran meanwhile (or runs now)
 * gets no such frames, with a warning.
 */
#ifndef PTWK_UNDERWAY_H
#define PTWK_UNDERWAY_H

#include <linux/types.h>
#include <sys/user.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "lockconv.h"
#include "ptw_libc_waits.h"

struct bpf_program;
struct ptwk_uw_task;

struct bpf_program;
struct bpf_map;
struct ptw_proc;
struct ptw_symbols;
struct ptwk_conv;
struct ptwk_frames;
struct ptwk_underway;

struct ptwk_underway_env {
	pid_t pid;
	pid_t live_pid;		  /* whose /proc maps and perf events see its memory (a
				   * zombie leader's: none) */
	struct ptw_proc *proc;	  /* its memory */
	struct ptw_symbols *syms; /* its modules (unwinding) */
	struct ptwk_frames *frames;	/* --trace (NULL: no calls looked for) */
	struct bpf_program *iter, *ret; /* ptw_underway_regs, ptw_underway_return */
	struct bpf_map *sites;		/* underway_sites */
	bool multi;			/* uprobe_multi links (else one uprobe per site) */
	/* a warning (ptw_warnings.h code) */
	void (*note)(void *ctx, int code, const char *line);
	void *ctx;
	/* --locks (NULL: no waits looked for; ctx as note's): the wait a
	 * thread asleep in futex is in (ptwk_locks_wait_of), and each one
	 * found, emitted once the threads are listed (ptwk_underway_emit) */
	void (*wait_of)(void *ctx, const struct user_regs_struct *regs, const uint64_t *pcs, int n,
			struct ptw_wait_under_way *ret);
	void (*wait_emit)(void *ctx, pid_t tid, const struct ptwk_lock_under_way *w, uint64_t ns);
	/* a slow path's entry record of tid at sp, read and not converted
	 * yet (NULL: none looked for); records_read, once the threads were
	 * read, takes what the ring holds among those */
	bool (*entry_seen)(void *ctx, pid_t tid, uint64_t sp);
	void (*records_read)(void *ctx);
	/* the process's own probes were in at the begin (a -f child's, read
	 * once its links are): a thread that slept in futex then and could
	 * not be read is counted (ptwk_underway_woke), not said */
	bool links_in;
	/* (testing, NULL: none) called once take begins, before it reads
	 * the threads, ctx its own */
	void (*between)(void *ctx, pid_t pid);
	void *between_ctx;
};

/* Before the entry probes go in: every thread's context switches so far.
 * NULL when there is nothing to do or it cannot be done (said). */
struct ptwk_underway *ptwk_underway_begin(const struct ptwk_underway_env *env);

/* The user registers the BPF programs copy in DWARF's order (rax rdx rcx
 * rbx rsi rdi rbp rsp r8-r15 rip: bpf/ptw_underway.h) into r; the other
 * fields of r are left as they are. */
void ptwk_regs_from_dwarf(const __u64 g[17], struct user_regs_struct *r);

/* Every thread of process pid as the task iterator program iter reads it
 * now (its registers, its fs base: no stop). Returns how many (*ret
 * malloc'd), or -errno. */
int ptwk_read_tasks(struct bpf_program *iter, pid_t pid, struct ptwk_uw_task **ret);

/* After the entry probes are in: the calls under way found and their
 * return sites watched, for the threads that did not run meanwhile (the
 * others said). Before the threads are listed: once the session says it
 * attached, the program may go on. Returns the return-site probes
 * attached. */
unsigned ptwk_underway_take(struct ptwk_underway *u);

/* A -f child's (links_in): how many threads asleep in futex when its
 * probes went in woke before their wait could be read (a wait begun
 * before the probes that they were in then is not reported). */
size_t ptwk_underway_woke(const struct ptwk_underway *u);

/* Once the threads are listed (conv knows them), before any record is
 * converted: the frame entries of what take found (ns: the attach). */
void ptwk_underway_emit(struct ptwk_underway *u, struct ptwk_conv *conv, uint64_t ns);

/* Now and then: once every watched frame has returned or its thread is
 * gone, the return sites' probes are removed. */
void ptwk_underway_poll(struct ptwk_underway *u);

/* The probes removed (detach); free. NULL is fine. */
void ptwk_underway_close(struct ptwk_underway *u);
void ptwk_underway_free(struct ptwk_underway *u);

#endif
