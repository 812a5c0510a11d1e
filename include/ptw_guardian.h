/* SPDX-License-Identifier: MIT */
/*
 * No way of ending ptwatch may harm the target (DESIGN.md, "Safety
 * invariants"). ptwatch runs as three processes:
 *
 *   ptwatch         the front: the pid the shell knows, in the shell's process
 *                   group. Forwards the session signals to the tracer, mirrors
 *                   its exit, and inherits a launched command if it dies.
 *   ptwatch-tracer  its child: every ptrace call, symbols, spans, output. It
 *                   streams the session record (ptw_record.h) and its memory
 *                   fd to the restorer.
 *   ptw-restorer    its other child, in a session (and process group) of its
 *                   own, named so that neither `pidof ptwatch` nor `pkill
 *                   ptwatch` find it. It holds the shared journal of patched
 *                   bytes and keeps a copy of the record. When the tracer ends
 *                   without having finished (it sends an end mark when it
 *                   has), the restorer puts every journaled byte back, unmaps
 *                   the out-of-line pages (briefly tracing the target to run
 *                   munmap), and writes the document and summary with what
 *                   was seen, open spans unmatched with reason tracer_died.
 *
 * How each way of ending ptwatch comes out:
 * - front killed (any signal, SIGKILL too): the tracer gets SIGTERM
 *   (PR_SET_PDEATHSIG) and detaches cleanly, restoring everything itself;
 * - tracer killed, or both (`kill -9 $(pidof ptwatch)` finds only the
 *   front; `pkill -9 ptwatch`, `kill -9 -- -PGID` and `timeout -s KILL`
 *   find both): the restorer and, if it lives, the front restore the bytes
 *   within about a millisecond; the restorer writes the record. (A launched
 *   command is in ptwatch's process group: a signal to the group is its
 *   too, as without ptwatch.)
 * - SIGTERM/SIGINT/SIGHUP/SIGPIPE/SIGQUIT, a closed terminal (SIGHUP): the
 *   front forwards them, the tracer detaches cleanly. The restorer ignores
 *   them while the tracer runs; only SIGKILL ends it early.
 * What can still harm the target: (1) the kernel lets a tracee go when its
 * tracer dies, before anyone can restore, so a thread that sat in the stop
 * of one of our int3s, not yet reaped, then gets its SIGTRAP and the process
 * dies (measured rates in bench/kill.py); (2) killing all three processes at
 * once, which only a signal to the restorer by name or pid, or to a whole
 * cgroup (systemd's KillMode=control-group stop of a unit that runs
 * ptwatch), does: nothing is left to restore the bytes, and the next thread
 * that reaches one dies of SIGTRAP. Run ptwatch outside the unit it traces.
 */
#ifndef PTW_GUARDIAN_H
#define PTW_GUARDIAN_H

#include <stdbool.h>
#include <sys/types.h>

#include "ptw_output.h"
#include "ptw_util.h"

struct ptw_guardian_opts {
	char **argv;		    /* main's: rewritten to name each process */
	struct ptw_output_opts out; /* what the restorer writes if the tracer dies */
};

/*
 * Splits ptwatch. Returns 0 in the tracer. In the front it does not
 * return: it guards, then exits as the tracer did. Returns -errno if the
 * split failed (ptwatch then runs as one process). Call after
 * ptw_signals_init() and ptw_bp_journal_prepare(), and after copying what
 * is still needed of argv.
 */
int ptw_guardian_split(const struct ptw_guardian_opts *o);

/* Tracer: the target's /proc/PID/mem, to the front and the restorer. */
void ptw_guardian_share_mem(int fd);

/* Tracer: about to die of sig on purpose (the target did): the front will
 * die of it too instead of treating it as a tracer crash. */
void ptw_guardian_mirror_signal(int sig);

/* Tracer: does a restorer keep the record? (If not, do not encode it.) */
bool ptw_guardian_keeps_record(void);
/* Tracer: queues the record bytes in b (b is emptied) for the restorer and
 * sends what the socket takes now; never blocks. */
void ptw_guardian_record(struct ptw_buf *b);

#endif
