/* SPDX-License-Identifier: MIT */
/*
 * --locks on the kernel backend: uprobes and uretprobes on glibc's slow
 * paths (the same points as the tracer's, ptw_libc_waits.h), BPF that
 * reads what the tracer reads there (bpf/ptw_locks.bpf.h), and the
 * records turned into wait spans and live deadlocks (lockconv.h), the
 * deadlocks confirmed without stopping anyone. Used by kernel.c only.
 */
#ifndef PTW_KERNEL_LOCKS_H
#define PTW_KERNEL_LOCKS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>
#include <sys/user.h>

#include "convert.h"
#include "lockconv.h"
#include "probes.h"
#include "ptw_libc_waits.h"

struct ptw_proc;
struct ptw_symbols;
struct ptw_tdb;
struct ptwk_locks;

struct ptwk_locks_env {
	pid_t pid;
	pid_t live_pid; /* whose /proc maps show its memory (a zombie leader's: none) */
	struct ptw_proc *proc;	      /* its memory (read only) */
	struct ptw_symbols **syms;    /* the current image's (replaced at exec) */
	const struct ptwk_conv *conv; /* which threads live */
	void (*sink)(void *ctx, const struct ptw_event *ev);
	/* The call instruction before a return address (kernel.c's). */
	const struct ptw_location *(*call_site)(void *ctx, uint64_t ret);
	void *ctx; /* of sink and call_site */
	/* -f: struct pthread's tid (ptwk_locks_new finds it for the root) */
	bool have_tid;
	uint32_t tid_off;
};

/* What the BPF programs need to know before they are loaded. */
struct ptwk_locks_config {
	bool on;
	bool join_always_blocks; /* the join probe is pthread_join's (no symbol table) */
	bool have_tid;
	uint64_t off_tid; /* struct pthread: tid */
};

/*
 * Finds the slow paths in the libc the probes are on and adds their entry
 * and return probes to p (whose lifecycle probes are found: the join's is
 * shared). What cannot be found goes to p->missing, with what it costs.
 */
struct ptwk_locks *ptwk_locks_new(const struct ptwk_locks_env *env, struct ptw_tdb *tdb,
				  struct ptwk_probes *p, struct ptwk_locks_config *ret_config);
/* -f: the waits of a process followed from the one ptwk_locks_new was
 * for, whose probes (on libc's file) fire in it too. */
struct ptwk_locks *ptwk_locks_follow(const struct ptwk_locks_env *env);
void ptwk_locks_free(struct ptwk_locks *l);

/* A record of the ring: a --locks one, or any lifecycle one (those that
 * end waits count). */
void ptwk_locks_record(struct ptwk_locks *l, const void *data, size_t size);

/* A thread found asleep in futex at an attach (regs: its registers, its
 * system call's arguments; pcs, n: its frames): the wait it is in, as its
 * slow path's entry would have recorded it (ret->kind PTW_WAIT_NONE: none;
 * ptw_libc_waits_under_way). */
void ptwk_locks_wait_of(struct ptwk_locks *l, const struct user_regs_struct *regs,
			const uint64_t *pcs, int n, struct ptw_wait_under_way *ret);
/* Such a wait, its return watched (underway.c): a WAIT_BEGIN before_attach
 * (ptwk_lockconv_under_way); kept until the converter knows the thread
 * (a -f child's made before its links: ptwk_locks_thread_listed, when
 * its creation is converted). */
void ptwk_locks_under_way(struct ptwk_locks *l, pid_t tid, const struct ptwk_lock_under_way *u,
			  uint64_t ns);
void ptwk_locks_thread_listed(struct ptwk_locks *l, pid_t tid);

/* After a batch was read: live deadlocks found in it are checked against
 * the present, then drain(ctx) reads what came meanwhile, then those
 * still standing are emitted. */
void ptwk_locks_after_batch(struct ptwk_locks *l, void (*drain)(void *ctx), void *ctx);

/* Waits reported, futex waits of no kind, deadlocks reported. */
void ptwk_locks_counts(const struct ptwk_locks *l, uint64_t *waits, uint64_t *unclassified,
		       uint32_t *deadlocks);

#endif
