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


/* ---- session signals ---- */

/*
 * In launch mode the command stays in ptwatch's process group and terminal
 * (docs/design.md, "Safety invariants": launch leaves them alone), so the terminal's Ctrl-C reaches
 * both, as it does under strace. The command must meet it as it would
 * without ptwatch, and be traced until it has reacted: died of it, exited,
 * or gone on (then so does the trace). Only a signal that did not reach the
 * command, or the same one reaching both again within
 * PTW_INTERRUPT_AGAIN_MS (a second Ctrl-C), makes ptwatch let go.
 *
 * Whether a signal reached the command too:
 * - a copy with si_code SI_KERNEL comes from the terminal (a key, its
 *   hangup), which signals its whole foreground process group: the command
 *   got it if it is still in ours (it may have made a group of its own);
 * - any other copy (kill(2)): if the command has a delivery stop of the same
 *   signal within MATCH_NS of it, in either order, or holds it pending
 *   (blocked) once MATCH_NS passed; else it was for ptwatch alone.
 * The tracer has a process group of its own (ptw_guardian.h): the terminal
 * signals reach it only through the front, which passes on their si_code.
 */
#define MATCH_NS (500ull * 1000000u)
#define AGAIN_NS ((uint64_t)PTW_INTERRUPT_AGAIN_MS * 1000000u)

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

/* Records what ptwatch does about sig; a detach ends the session. */
static void interrupt(struct ptw_tracer *t, int sig, uint64_t ns, bool reached,
		      enum ptw_interrupt_why why)
{
	enum ptw_interrupt_action action =
		reached && why != PTW_INTR_AGAIN ? PTW_INTR_TRACED_ON : PTW_INTR_DETACHED;
	if (action == PTW_INTR_DETACHED && !t->end_signal)
		t->end_signal = sig;
	struct ptw_event ev = ptw_event_init(PTW_EV_INTERRUPT, ns, t->proc->pid);
	ev.sig = sig;
	ev.action = action;
	ev.why = why;
	tracer_emit(t, &ev);
}

/* Both ptwatch and the command got sig: one press. */
static void press(struct ptw_tracer *t, int sig, uint64_t ns, bool delivered,
		  enum ptw_interrupt_why why)
{
	struct session_signal *s = &t->ssig[sig];
	bool again = s->press_ns && ns - s->press_ns <= AGAIN_NS;
	s->press_ns = ns;
	s->press_delivered = delivered;
	s->copy_ns = 0;
	s->delivery_ns = 0;
	interrupt(t, sig, ns, true, again ? PTW_INTR_AGAIN : why);
}

/* The command is being delivered sig (its signal-delivery stop). */
void signals_note_delivery(struct ptw_tracer *t, struct ptw_lwp *l, int sig, uint64_t ns)
{
	if (!t->launched || sig <= 0 || sig >= (int)PTW_ARRAY_SIZE(t->ssig) ||
	    !ptw_is_session_signal(sig))
		return;
	struct session_signal *s = &t->ssig[sig];
	if (s->copy_ns) { /* ptwatch's copy waits for this (it is not MATCH_NS old) */
		press(t, sig, s->copy_ns, true, PTW_INTR_GROUP);
	} else if (s->press_ns && ns - s->press_ns <= MATCH_NS && !s->press_delivered) {
		s->press_delivered = true; /* the terminal's press, seen first by ptwatch */
	} else {
		s->delivery_ns = ns;
		/* From the terminal (SI_KERNEL), the front got it too: its copy
		 * is on its way (signals_settle). */
		siginfo_t si;
		s->copy_owed = ptw_getsiginfo(t->proc, l, &si) == 0 && si.si_code == SI_KERNEL;
	}
}

/* ptwatch got a session signal (st: PTW_STOP_TRACER_SIGNAL). */
void signals_on_signal(struct ptw_tracer *t, const struct ptw_stop *st)
{
	int sig = st->sig;
	if (!t->launched || sig <= 0 || sig >= (int)PTW_ARRAY_SIZE(t->ssig)) {
		interrupt(t, sig, st->ns, false,
			  t->launched ? PTW_INTR_PTWATCH_ALONE : PTW_INTR_ATTACHED);
		return;
	}
	struct session_signal *s = &t->ssig[sig];
	bool delivered = s->delivery_ns && st->ns - s->delivery_ns <= MATCH_NS;
	if (st->sig_code == SI_KERNEL && getpgid(session_pid(t)) == ptw_original_pgrp())
		press(t, sig, st->ns, delivered, PTW_INTR_TERMINAL);
	else if (delivered)
		press(t, sig, st->ns, true, PTW_INTR_GROUP);
	else if (!s->copy_ns)
		s->copy_ns = st->ns; /* does the command get it too? */
}

/* The copies that waited MATCH_NS for the command's delivery stop. */
void signals_expire(struct ptw_tracer *t, uint64_t now)
{
	for (int sig = 1; sig < (int)PTW_ARRAY_SIZE(t->ssig); sig++) {
		struct session_signal *s = &t->ssig[sig];
		if (!s->copy_ns || now - s->copy_ns < MATCH_NS)
			continue;
		uint64_t ns = s->copy_ns;
		s->copy_ns = 0;
		if (ptw_proc_sig_pending(session_pid(t), sig))
			press(t, sig, ns, false, PTW_INTR_GROUP); /* blocked there, for now */
		else
			interrupt(t, sig, ns, false, PTW_INTR_PTWATCH_ALONE);
	}
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
		bool owed = false;
		for (size_t sig = 1; sig < PTW_ARRAY_SIZE(t->ssig); sig++)
			owed |= t->ssig[sig].delivery_ns && t->ssig[sig].copy_owed;
		uint64_t now = ptw_now_ns();
		struct ptw_stop st;
		if (!owed || now >= until ||
		    ptw_wait_session_signal(t->proc, (int)((until - now) / 1000000u), &st) <= 0)
			return;
		int sig = st.sig;
		if (sig > 0 && sig < (int)PTW_ARRAY_SIZE(t->ssig) && t->ssig[sig].delivery_ns) {
			/* it reached the command, which reacted: traced until then */
			t->ssig[sig].delivery_ns = 0;
			t->ssig[sig].copy_owed = false;
			interrupt(t, sig, st.ns, true,
				  st.sig_code == SI_KERNEL ? PTW_INTR_TERMINAL : PTW_INTR_GROUP);
		}
	}
}

/* When the next copy stops waiting; 0: none waits. */
uint64_t signals_deadline(const struct ptw_tracer *t)
{
	uint64_t d = 0;
	for (size_t sig = 1; sig < PTW_ARRAY_SIZE(t->ssig); sig++) {
		uint64_t c = t->ssig[sig].copy_ns;
		if (c && (!d || c + MATCH_NS < d))
			d = c + MATCH_NS;
	}
	return d;
}

