/* SPDX-License-Identifier: MIT */
/* The restorer process (see ptw_guardian.h), started by the split. */
#ifndef PTW_GUARDIAN_RESTORER_H
#define PTW_GUARDIAN_RESTORER_H

#include "ptw_guardian.h"

/* What the restorer tells the front when the tracer died. */
struct restorer_outcome {
	int restored, failed; /* journaled bytes */
	int xol_left;	      /* out-of-line pages still mapped */
	int alive;	      /* the target still ran afterwards */
	int terminal;	      /* it put the terminal back (live table) */
};

/* The live table was on when the tracer died: the terminal's modes as they
 * were before it, then the normal screen and cursor (terminfo). Once, by
 * the restorer before it writes the summary, else by the front. */
void guardian_restore_terminal(void);

/*
 * The memory fds the tracer passed (/proc/TID/mem of each traced process),
 * by process: the latest for a process replaces the one before (exec), and
 * fds of processes that are gone are closed as new ones come.
 */
#define JOURNAL_PIDS_MAX 64
struct memfds {
	pid_t *pid;
	int *fd;
	size_t n;
};
void memfds_put(struct memfds *m, int fd);
int memfds_get(const struct memfds *m, pid_t pid);
/* Restores every journaled byte of every process; *ret_restored. Returns
 * the number that could not be restored. */
int memfds_restore(const struct memfds *m, int *ret_restored);

/*
 * Runs the restorer: record from the tracer on `from_tracer` (packets; one
 * with SCM_RIGHTS carries a memory fd instead of record bytes), the outcome
 * to the front on `to_front`. Never returns.
 */
void restorer_run(const struct ptw_guardian_opts *o, int from_tracer, int to_front)
	__attribute__((noreturn));

#endif
