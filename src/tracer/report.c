/* SPDX-License-Identifier: MIT */
/* What the tracer tells the report: the target, the session, the
 * processes (-f), and what became of the target once let go. */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ptrace.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "tracer_internal.h"


/* ---- report ---- */

static const char *stop_names[PTW_STOP_TRACER_SIGNAL + 1];

/*
 * What became of a target we let go of, checked now: a message that says
 * "lives on" must be true when it is printed. A launched command is still
 * our child: if it has ended (the signal we passed on at detach, say), how
 * is ours to read, and ptwatch exits as it did.
 */
void ptw_tracer_check_fate(struct ptw_tracer *t, struct ptw_report *r)
{
	pid_t pid = t->proc->pid;
	int status = 0;
	bool reaped = false;
	if (!t->target_gone && t->detached && t->launched)
		reaped = ptw_reap_launched(pid, &status);
	/* A signal we delivered as we let go, one still pending there (held
	 * during an injected call and queued again), or an exit under way:
	 * say how it ended, not "lives on" a moment before it dies (bounded:
	 * a thread may be stuck in D). */
	/* Every thread's status only if one may still be traced (by us: one we
	 * could not let go of); else the main thread's says enough: a group
	 * stop and shared signals are the process's, and a signal for one
	 * thread would have stopped it as we stopped them all. */
	bool every_thread = t->left_traced > 0 || !t->detached || t->exiting_at_detach;
	struct ptw_census c = { 0 };
	if (!t->target_gone && !reaped)
		ptw_proc_census(pid, every_thread, &c);
	unsigned long long flags = 0;
	bool doomed =
		!t->target_gone && t->detached && !reaped &&
		(t->fatal_at_detach || t->all_exiting_at_detach || c.fatal_signal || !c.alive ||
		 (ptw_proc_stat_field(pid, 9, &flags) && (flags & PTW_PF_EXITING)));
	for (int ms = 0; doomed && !reaped && ms < 1000; ms++) {
		/* Threads that were dying as we let go are still ours to reap
		 * (a traced thread's death waits for its tracer), and the main
		 * thread cannot be reaped before them. */
		int st;
		if (ptw_reap_dying(pid, &st) && t->launched) {
			reaped = true;
			status = st;
		}
		if (!t->launched && ptw_proc_exited(pid, pid) && !ptw_proc_alive(pid))
			break;
		if (!reaped)
			usleep(1000);
	}
	if (reaped) {
		t->target_gone = true;
		t->after_detach = true;
		if (WIFSIGNALED(status)) {
			t->exit_signal = WTERMSIG(status);
			t->core_dumped = WCOREDUMP(status);
		} else {
			t->exit_code = WEXITSTATUS(status);
		}
	}
	if (t->target_gone) {
		r->fate = PTW_FATE_ENDED;
		r->after_detach = t->after_detach;
		return;
	}
	if (doomed)
		ptw_proc_census(pid, every_thread, &c); /* it may have ended meanwhile */
	if (!c.alive) {
		r->fate = ptw_proc_state(pid, pid) == 'Z' ? PTW_FATE_ZOMBIE : PTW_FATE_GONE;
		return;
	}
	r->fate = c.traced_by ? PTW_FATE_TRACED : c.stopped ? PTW_FATE_STOPPED : PTW_FATE_LIVES_ON;
	r->traced_by = c.traced_by;
}

void ptw_tracer_finish(struct ptw_tracer *t)
{
	image_debuginfod_warning(t); /* a failure at a lookup after the last image load */
	if (!t->finished) {
		/* (a pattern may still match a library loaded later: not before) */
		t->finished = true;
		tracer_features_finish(t);
	}
	tracer_say_process(t);
	for (size_t i = 0; i < t->nfollowed; i++)
		tracer_say_process(t->followed[i]);
}

void ptw_tracer_report(struct ptw_tracer *t, struct ptw_report *r)
{
	image_debuginfod_warning(t); /* a failure at a lookup after the last image load */
	r->pid = t->proc->pid;
	r->exe = t->img.exe;
	r->argv = t->argv;
	r->mode = t->launched ? "launch" : "attach";
	r->snapshot = t->snapshot;
	r->glibc = t->img.glibc;
	if (t->target_gone) {
		r->exit_kind = t->exit_signal ? PTW_EXIT_SIGNAL : PTW_EXIT_CODE;
		r->exit_code = t->exit_code;
		r->exit_signal = t->exit_signal;
		r->core_dumped = t->core_dumped;
	} else {
		r->exit_kind = PTW_EXIT_NONE;
	}
	r->start_ns = t->start_ns;
	r->frozen_ns = t->frozen_ns;
	r->strategy = !t->img.tdb ? "lwp" : t->img.have_result ? "debuginfo" : "breakpoints";
	r->stops_total = t->proc->counts.total;
	for (int k = 0; k <= PTW_STOP_TRACER_SIGNAL; k++)
		stop_names[k] = ptw_stop_kind_name((enum ptw_stop_kind)k);
	r->stop_names = stop_names;
	r->stop_counts = t->proc->counts.by_kind;
	r->nstop_kinds = PTW_STOP_TRACER_SIGNAL + 1;
	r->breakpoints = ptw_bp_count(t->bps);
	for (size_t i = 0; i < t->nfollowed; i++)
		r->breakpoints += ptw_bp_count(t->followed[i]->bps) + t->followed[i]->bps_retired;
}

bool ptw_tracer_target_exit(struct ptw_tracer *t, int *ret_code, int *ret_signal, bool *ret_core)
{
	if (!t->target_gone)
		return false;
	*ret_code = t->exit_code;
	*ret_signal = t->exit_signal;
	*ret_core = t->core_dumped;
	return true;
}

