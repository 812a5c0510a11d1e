/* SPDX-License-Identifier: MIT */
/*
 * ptwatch runs as two processes so that the one the user sees can die
 * without taking the target with it (DESIGN.md, "Safety invariants"):
 *
 *   front (the pid the shell knows)  guardian: holds the shared journal of
 *                                    patched bytes and the target's memory fd,
 *                                    forwards session signals, mirrors the exit
 *   tracer (its child, "ptw-tracer") every ptrace call, symbols, spans, output
 *
 * - front killed (even SIGKILL): the tracer gets SIGTERM (PR_SET_PDEATHSIG)
 *   and detaches cleanly, restoring everything;
 * - tracer killed: the guardian restores every journaled byte through the
 *   memory fd within a millisecond. What it cannot undo: a thread that was
 *   stopped on an int3 and not yet reaped resumes one byte into it.
 */
#ifndef PTW_GUARDIAN_H
#define PTW_GUARDIAN_H

#include <sys/types.h>

/*
 * Splits ptwatch. Returns 0 in the tracer. In the front it does not
 * return: it guards, then exits as the tracer did. Returns -errno if the
 * split failed (ptwatch then runs as one process). Call after
 * ptw_signals_init() and ptw_bp_journal_prepare().
 */
int ptw_guardian_split(void);

/* Tracer: the target's /proc/PID/mem, to the guardian (SCM_RIGHTS). */
void ptw_guardian_share_mem(int fd);

/* Tracer: about to die of sig on purpose (the target did): the front will
 * die of it too instead of treating it as a tracer crash. */
void ptw_guardian_mirror_signal(int sig);

#endif
