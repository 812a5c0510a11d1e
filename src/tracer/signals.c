/* SPDX-License-Identifier: MIT */
/* Session signals: what ptwatch got, whether the command got it too, and
 * whether that ends the session (see below). */
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


/* ---- session signals ----
 *
 * What a signal means is the one model both backends share (ptw_observe.h,
 * "session signals"); the tracer tells it what it sees: ptwatch's copies,
 * the command's delivery stops, the time, what is pending. The tracer has
 * a process group of its own (ptw_guardian.h): the terminal signals reach
 * it only through the front, which passes on their si_code.
 */

/* The process that stands for the command: the target, or once it has
 * ended (-f), the oldest followed process still traced. */
static pid_t session_pid(struct ptw_tracer *t)
{
	if (!t->target_gone)
		return t->proc->pid;
	for (size_t i = 0; i < t->nfollowed; i++)
		if (t->followed[i]->proc && !t->followed[i]->target_gone)
			return t->followed[i]->pid;
	return t->proc->pid;
}

/* What ptwatch does about sig, as an event. */
static void decided(void *ctx, int sig, uint64_t ns, enum ptw_interrupt_action action,
		    enum ptw_interrupt_why why)
{
	struct ptw_tracer *t = ctx;
	struct ptw_event ev = ptw_event_init(PTW_EV_INTERRUPT, ns, t->proc->pid);
	ev.sig = sig;
	ev.action = action;
	ev.why = why;
	tracer_emit(t, &ev);
}

static struct ptw_signal_model *model(struct ptw_tracer *t)
{
	t->sigs.launched = t->launched;
	t->sigs.decided = decided;
	t->sigs.ctx = t;
	return &t->sigs;
}

void signals_note_delivery(struct ptw_tracer *t, struct ptw_lwp *l, int sig, uint64_t ns)
{
	if (!t->launched || !ptw_is_session_signal(sig))
		return;
	siginfo_t si;
	bool terminal = ptw_getsiginfo(t->proc, l, &si) == 0 && si.si_code == SI_KERNEL;
	ptw_signal_delivered(model(t), sig, ns, terminal);
}

void signals_on_signal(struct ptw_tracer *t, const struct ptw_stop *st)
{
	ptw_signal_got(model(t), st->sig, st->sig_code, st->ns,
		       t->launched && getpgid(session_pid(t)) == ptw_original_pgrp());
}

/* The command holds sig (blocked there, for now). */
static bool held(void *ctx, int sig)
{
	return ptw_proc_sig_pending(session_pid(ctx), sig);
}

void signals_expire(struct ptw_tracer *t, uint64_t now)
{
	ptw_signal_expire(model(t), now, held, t);
}

/*
 * The command ended of (or after) a session signal that ptwatch's copy has
 * not come for yet: the front passes the terminal's copy on, and on a busy
 * machine the command can die of its own first. Wait a moment for the copy
 * so that the session says what the user did (bounded: a copy that never
 * comes costs SETTLE_MS once).
 */
#define SETTLE_MS 250

void signals_settle(struct ptw_tracer *t)
{
	if (!t->launched)
		return;
	uint64_t until = ptw_now_ns() + SETTLE_MS * 1000000ull;
	for (;;) {
		uint64_t now = ptw_now_ns();
		struct ptw_stop st;
		if (!ptw_signal_copy_owed(&t->sigs) || now >= until ||
		    ptw_wait_session_signal(t->proc, (int)((until - now) / 1000000u), &st) <= 0)
			return;
		ptw_signal_late(model(t), st.sig, st.sig_code, st.ns);
	}
}

uint64_t signals_deadline(const struct ptw_tracer *t)
{
	return ptw_signal_deadline(&t->sigs);
}
