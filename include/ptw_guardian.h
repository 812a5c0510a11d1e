/* SPDX-License-Identifier: MIT */
/*
 * No way of ending ptwatch may harm the target (docs/design.md, "Safety invariants").
 * ptwatch runs as three processes:
 *
 *   ptwatch       the front: the pid the shell knows, in the shell's process
 *                 group. Forwards the session signals to the tracer, mirrors
 *                 its exit, and inherits a launched command if it dies.
 *   ptw-tracer    its child, in a process group of its own: every ptrace
 *                 call, symbols, spans, output. Streams the session record
 *                 (ptw_record.h) and its memory fd to the restorer
 *                 (src/record/to_guardian.c).
 *   pt-restorer   its other child, in a session of its own: holds the shared
 *                 journal of patched bytes and keeps a copy of the record.
 *                 When the tracer ends without its end mark, it puts every
 *                 journaled byte back, unmaps the out-of-line pages (tracing
 *                 the target for a moment to run munmap), and writes the
 *                 document and summary with what was seen, open spans
 *                 unmatched with reason tracer_died. It ignores every signal
 *                 but SIGKILL and exits when the tracer has.
 *
 * The names and groups are chosen so that the usual ways of ending a tool
 * reach the front only: `kill -9 $(pidof ptwatch)`, `pkill -9 ptwatch`,
 * `kill -9 -- -PGID` of the group ptwatch was started in, `timeout -s KILL`,
 * a shell's job control, a closed terminal (SIGHUP). The front's death
 * (PR_SET_PDEATHSIG) or any session signal it forwards makes the tracer
 * detach cleanly: every byte restored, every page unmapped, the document
 * written. A tracer that does not answer is made to let go (see
 * ptw_guardian_signal_answered): no ending of ptwatch leaves the target
 * stopped. (A launched command is in ptwatch's process group, as without
 * ptwatch: a signal to the group is its too.)
 *
 * What can still harm the target: a SIGKILL of the tracer itself (by its pid
 * or its own group, `pkill -9 ptw`, a whole cgroup: systemd's
 * KillMode=control-group stop of a unit that runs ptwatch, the OOM killer).
 * The kernel lets its tracees go before anyone can undo anything: a thread
 * that sat in the stop of one of our int3s, not yet reaped, gets its SIGTRAP
 * and the process dies (rates in bench/kill.py: most kills of a process that
 * creates threads non-stop, none of one whose threads wait). The restorer
 * (or the front) restores the rest within about a millisecond. If the
 * restorer dies too (the cgroup kill), nothing is left to restore: the next
 * thread that reaches an int3 dies of SIGTRAP. Run ptwatch outside the unit
 * it traces.
 */
#ifndef PTW_GUARDIAN_H
#define PTW_GUARDIAN_H

#include <stdbool.h>
#include <sys/types.h>

#include "ptw_session.h"
#include "ptw_util.h"

struct ptw_guardian_opts {
	char **argv;		    /* main's: rewritten to name each process */
	/* The tracer's session: the restorer's is the same, resumed, and
	 * writes its end if the tracer dies. */
	struct ptw_session_opts session;
	/* The live table (ptw_live.h), else all -1: the front, which is in the
	 * terminal's foreground group, reads keys from key_tty and writes them
	 * to key_w (the tracer reads key_r), and passes SIGWINCH on; when the
	 * tracer closes key_r, it stops reading. If the tracer dies of a
	 * signal, the restorer (else the front) puts the terminal back as it
	 * was before writing anything. The split closes them in the front and
	 * the restorer as they need; ptw_guardian_keys_input in the tracer. */
	int key_tty, key_w, key_r;
};

/*
 * Splits ptwatch. Returns 0 in the tracer. In the front it does not
 * return: it guards, then exits as the tracer did. Returns -errno if the
 * split failed (ptwatch then runs as one process). Call after
 * ptw_signals_init() and ptw_bp_journal_prepare(), and after copying what
 * is still needed of argv.
 */
int ptw_guardian_split(const struct ptw_guardian_opts *o);

/*
 * The live table's keys (ptw_live.h), before the split: a pipe, the
 * terminal of standard error opened for reading, SIGWINCH and SIGTTIN
 * blocked (a launched command gets its own mask back). Fills o->key_*;
 * returns 0 or -errno (then no live table).
 */
int ptw_guardian_keys_prepare(struct ptw_guardian_opts *o);
/* After the split (or its failure: split false): the fd the tracer reads
 * keys from, the pipe's end, or the terminal itself when ptwatch runs as
 * one process (it is then in the foreground group); closes the rest. */
int ptw_guardian_keys_input(struct ptw_guardian_opts *o, bool split);

/* Tracer: the target's /proc/PID/mem, to the front and the restorer. */
void ptw_guardian_share_mem(int fd);

/* Tracer: about to die of sig on purpose (the target did): the front will
 * die of it too instead of treating it as a tracer crash. */
void ptw_guardian_mirror_signal(int sig);

/* Tracer: the session is over, its outputs written, and what the tracer
 * still has to do (closing the kernel path's links: tens of ms of grace
 * periods) concerns nobody: the front ends now, with exit status status,
 * or dying of sig when sig (the command's), while the tracer finishes on
 * its own. Whether a front was told (false: none; the caller ends as
 * before). */
bool ptw_guardian_exit_early(int status, int sig);

/* Tracer: it has taken a session signal in (traced on, or lets go): the
 * front stops counting the grace period of the signals it forwarded. A
 * tracer that answers none within PTW_STUCK_GRACE_MS while doing nothing
 * (stuck in a write to a pipe nobody reads, stopped) is said to be stuck,
 * continued if stopped, else killed: the kernel lets go of the target and
 * the restorer puts its bytes back and writes the record. The restorer
 * does the same when the front is gone (SIGKILL) and the tracer does not
 * end. */
void ptw_guardian_signal_answered(void);

/* Tracer: does a restorer keep the record? (If not, do not encode it.) */
bool ptw_guardian_keeps_record(void);
/* Tracer: queues the record bytes in b (b is emptied) for the restorer and
 * sends what the socket takes now; never blocks. */
void ptw_guardian_record(struct ptw_buf *b);
/* Tracer: waits up to deadline_ms for the restorer to take what is queued
 * (once the target is known: before an output may block the tracer, the
 * restorer must have the record's header to write the end for it).
 * Whether it took it all. */
bool ptw_guardian_record_wait(int deadline_ms);

#endif
