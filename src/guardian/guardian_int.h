/* SPDX-License-Identifier: MIT */
/*
 * Inside the guardian (see ptw_guardian.h): what the front (guardian.c)
 * and the restorer (restorer.c) share; the messages and packets of the
 * three processes, with the tracer's side (src/record/to_guardian.c), are
 * ptw_guardian_wire.h. None of them calls another but the split, which
 * starts the restorer and sets up the tracer's side.
 */
#ifndef PTW_GUARDIAN_INT_H
#define PTW_GUARDIAN_INT_H

#include <string.h>
#include <sys/socket.h>
#include <sys/types.h>

#include "ptw_guardian.h"
#include "ptw_guardian_wire.h"

/* ---- the terminal (terminal.c) ---- */

/* Before the split, when the live table will take the terminal: its modes
 * as they are (standard error's). */
void ptw_term_save(void);
/* The live table was on when the tracer died: the terminal's modes as they
 * were before it, then the normal screen and cursor (terminfo). Once, by
 * the restorer before it writes the summary, else by the front. */
void ptw_term_restore(void);

/* ---- the memory fds (memfds.c) ---- */

/*
 * The memory fds the tracer passed (/proc/TID/mem of each traced process),
 * by process: the latest for a process replaces the one before (exec), and
 * fds of processes that are gone are closed as new ones come.
 */
#define JOURNAL_PIDS_MAX 64
struct ptw_memfds {
	pid_t *pid;
	int *fd;
	size_t n;
	size_t prune_at; /* the ended ones are looked for when n reaches it */
};
void ptw_memfds_put(struct ptw_memfds *m, int fd);
int ptw_memfds_get(const struct ptw_memfds *m, pid_t pid);
/* Restores every journaled byte of every process; *ret_restored. Returns
 * the number that could not be restored. */
int ptw_memfds_restore(const struct ptw_memfds *m, int *ret_restored);

/* ---- a tracer that does not answer (stuck.c) ---- */

/*
 * When a session signal is not answered (the front's, ptw_guardian_split)
 * or the front is gone (the restorer's), the tracer must end: how long
 * it may take without doing anything before it is made to let go, and
 * after a second signal. A tracer that works (CPU time, reads and writes
 * move: a large document written, symbols loaded) is not stuck.
 */
#define PTW_STUCK_GRACE_MS 5000
#define PTW_STUCK_AGAIN_MS 1000
/* After a SIGCONT to a stopped tracer: how long it has to answer. */
#define PTW_STUCK_CONT_MS 2000

/* What a process has done so far: CPU time, bytes and calls of I/O. */
struct ptw_progress {
	uint64_t cpu, io;
};
/* Reads it; false if the process is gone. */
bool ptw_stuck_progress(pid_t pid, struct ptw_progress *ret);
/* Where it is, for a message: "stuck in write() (pipe_write)", "stopped
 * (by SIGSTOP or SIGTSTP)", "stopped by its debugger (process 42)",
 * "in uninterruptible sleep in read() (nfs_wait_bit_killable)". */
void ptw_stuck_describe(pid_t pid, char *buf, size_t size);

/* ---- the restorer (restorer.c) ---- */

/* What the restorer tells the front when the tracer died. */
struct ptw_restorer_outcome {
	int restored, failed; /* journaled bytes */
	int xol_left;	      /* out-of-line pages still mapped */
	int alive;	      /* the target still ran afterwards */
	int terminal;	      /* it put the terminal back (live table) */
	int lost_err;	      /* an output it could not write (errno), 0: none */
	char lost[240];	      /* which (ptw_session_lost), escaped */
};

/*
 * Runs the restorer: record from the tracer on `from_tracer` (packets; one
 * with SCM_RIGHTS carries a memory fd instead of record bytes), the outcome
 * to the front on `to_front`. Never returns.
 */
void ptw_restorer_run(const struct ptw_guardian_opts *o, int from_tracer, int to_front)
	__attribute__((noreturn));

#endif
