/* SPDX-License-Identifier: MIT */
/*
 * --locks records (bpf/ptw_locks.bpf.h) to the tracer's events: WAIT_BEGIN
 * and WAIT_END as src/tracer/locks.c makes them (kind, object, owner,
 * call site, stack), and live deadlocks (PTW_EV_DEADLOCK), confirmed
 * without stopping anyone. Pure: what needs the process (unwinding,
 * symbols, /proc, its memory now) comes through the ops, so that unit
 * tests feed synthetic records (tests/kernel/test_klocks.c).
 *
 * A deadlock: when a wait with an owner begins, the chain "waits for the
 * owner of" is followed through the waits under way (owners as recorded at
 * each wait's entry); a chain back to the waiting thread is a candidate.
 * The ring is read in batches, so a candidate is checked against the
 * present once the batch is read (ptwk_lockconv_check): every member still
 * in the same wait, asleep in futex on its object, and the owners, read
 * again from the process, still forming the cycle. Then, once whatever the
 * ring holds from meanwhile is read too (ptwk_lockconv_confirm), members
 * still in those same waits (no slow path returned: a thread inside
 * glibc's slow path does not hold what it waits for, and cannot let go of
 * what it holds) make it a deadlock. A candidate whose member is not yet
 * asleep stays for the next batch while its waits are under way.
 */
#ifndef PTW_KERNEL_LOCKCONV_H
#define PTW_KERNEL_LOCKCONV_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "ptw_events.h"
#include "ptw_kernel_records.h"
#include "ptw_util.h"

#define PTWK_SITE_FRAMES     8	/* a wait's stack (as the tracer's) */
#define PTWK_DEADLOCK_FRAMES 32 /* a deadlocked thread's stack */

struct ptwk_lockconv_ops {
	void (*sink)(void *ctx, const struct ptw_event *ev);
	/* The frames of an entry record's thread (pcs[0] its pc, then return
	 * addresses), at most max; >= 1. */
	int (*unwind)(void *ctx, const struct ptwk_lock_record *r, uint64_t *pcs, int max);
	/* A futex wait's kind from its frames, and its object from the futex
	 * and the value expected; PTW_WAIT_NONE (or JOIN): no span. */
	enum ptw_wait_kind (*classify)(void *ctx, const uint64_t *pcs, int n, uint64_t futex,
				       uint32_t expected, uint64_t *ret_object);
	const struct ptw_location *(*locate)(void *ctx, uint64_t pc);
	/* The call that waited: the first frame outside libc. */
	const struct ptw_location *(*site)(void *ctx, const uint64_t *pcs, int n);
	/* A global's name, when the object is one. */
	const struct ptw_location *(*object)(void *ctx, uint64_t object);
	/* tid is a live thread of the process. */
	bool (*live)(void *ctx, pid_t tid);
	/* Now: a 32-bit word of the process (0 or -errno); whether tid sleeps
	 * in futex on that word. */
	int (*read_i32)(void *ctx, uint64_t addr, int32_t *ret);
	bool (*asleep_on)(void *ctx, pid_t tid, uint64_t futex);
	void *ctx;
};

struct ptwk_lockconv {
	pid_t pid;
	struct ptwk_lockconv_ops ops;
	struct ptw_map threads;	 /* tid -> its waits under way */
	struct ptw_map reported; /* a cycle's key -> 1 */
	struct ptwk_candidate **cands;
	size_t ncands;
	uint32_t seq;	       /* waits seen */
	uint32_t ndeadlocks;   /* reported */
	uint64_t waits;	       /* WAIT_BEGIN emitted */
	uint64_t unclassified; /* futex waits that are none of the kinds */
};

/* A wait under way at an attach: its thread found asleep in it
 * (underway.c), as its slow path's entry would have recorded it. */
struct ptwk_lock_under_way {
	enum ptw_wait_kind kind;
	uint64_t object, futex; /* futex: the word it sleeps on */
	uint64_t sp;		/* the slow path's return slot (a join: the join function's) */
	bool join;		/* ends at the join function's return */
	uint64_t pcs[PTWK_DEADLOCK_FRAMES]; /* from the slow path's frame out */
	int npcs;
};

void ptwk_lockconv_init(struct ptwk_lockconv *c, pid_t pid, const struct ptwk_lockconv_ops *ops);
void ptwk_lockconv_free(struct ptwk_lockconv *c);

/* A --locks record (h->kind >= PTWK_LOCK_FIRST; an entry is size bytes of
 * struct ptwk_lock_record), or a lifecycle record that ends waits
 * (PTWK_JOIN_RET, PTWK_EXIT, PTWK_EXEC; others are ignored). */
void ptwk_lockconv_record(struct ptwk_lockconv *c, const struct ptwk_record *h, size_t size);

/* Before any record: thread tid's wait under way at the attach, a
 * WAIT_BEGIN before_attach (ns: when it was found in it), the owner read
 * now; its return comes as a PTWK_LOCK_RET (a join's, PTWK_JOIN_RET); an
 * entry record of the same wait (it began once the probes were in, before
 * it was found) is the same wait. */
void ptwk_lockconv_under_way(struct ptwk_lockconv *c, pid_t tid,
			     const struct ptwk_lock_under_way *u, uint64_t ns);

/* Candidates waiting for a check or a confirmation. */
size_t ptwk_lockconv_pending(const struct ptwk_lockconv *c);
/* After a batch: checks the candidates against the present. */
void ptwk_lockconv_check(struct ptwk_lockconv *c);
/* After the next batch: emits the checked ones still in their waits. */
void ptwk_lockconv_confirm(struct ptwk_lockconv *c, uint64_t ns);

#endif
