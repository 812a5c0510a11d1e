/* SPDX-License-Identifier: MIT */
/* What a session signal ptwatch got means, for both backends; see
 * ptw_observe.h, "session signals". Pure. */
#include <signal.h>
#include <stdint.h>

#include "ptw_observe.h"
#include "ptw_util.h"

#define AGAIN_NS ((uint64_t)PTW_INTERRUPT_AGAIN_MS * 1000000u)
#define NSLOTS ((int)PTW_ARRAY_SIZE(((struct ptw_signal_model *)0)->s))

/* What ptwatch does about sig; the first that lets go ends the session. */
static void decide(struct ptw_signal_model *m, int sig, uint64_t ns, bool reached,
		   enum ptw_interrupt_why why)
{
	enum ptw_interrupt_action action =
		reached && why != PTW_INTR_AGAIN ? PTW_INTR_TRACED_ON : PTW_INTR_DETACHED;
	if (action == PTW_INTR_DETACHED && !m->end_signal)
		m->end_signal = sig;
	m->decided(m->ctx, sig, ns, action, why);
}

/* Both ptwatch and the command got sig: one press. */
static void press(struct ptw_signal_model *m, int sig, uint64_t ns, bool delivered,
		  enum ptw_interrupt_why why)
{
	bool again = m->s[sig].press_ns && ns - m->s[sig].press_ns <= AGAIN_NS;
	m->s[sig].press_ns = ns;
	m->s[sig].press_delivered = delivered;
	m->s[sig].copy_ns = 0;
	m->s[sig].delivery_ns = 0;
	decide(m, sig, ns, true, again ? PTW_INTR_AGAIN : why);
}

void ptw_signal_got(struct ptw_signal_model *m, int sig, int code, uint64_t ns, bool in_group)
{
	if (!m->launched || sig <= 0 || sig >= NSLOTS) {
		decide(m, sig, ns, false, m->launched ? PTW_INTR_PTWATCH_ALONE : PTW_INTR_ATTACHED);
		return;
	}
	bool delivered = m->s[sig].delivery_ns && ns - m->s[sig].delivery_ns <= PTW_SIGNAL_MATCH_NS;
	if (code == SI_KERNEL && in_group)
		press(m, sig, ns, delivered, PTW_INTR_TERMINAL);
	else if (delivered)
		press(m, sig, ns, true, PTW_INTR_GROUP);
	else if (!m->s[sig].copy_ns)
		m->s[sig].copy_ns = ns; /* does the command get it too? */
}

void ptw_signal_delivered(struct ptw_signal_model *m, int sig, uint64_t ns, bool from_terminal)
{
	if (!m->launched || sig <= 0 || sig >= NSLOTS)
		return;
	if (m->s[sig].copy_ns) { /* ptwatch's copy waits for this (it is not MATCH old) */
		press(m, sig, m->s[sig].copy_ns, true, PTW_INTR_GROUP);
	} else if (m->s[sig].press_ns && ns - m->s[sig].press_ns <= PTW_SIGNAL_MATCH_NS &&
		   !m->s[sig].press_delivered) {
		m->s[sig].press_delivered = true; /* the terminal's press, seen first by ptwatch */
	} else {
		/* From the terminal, the front got it too: its copy is on its
		 * way (ptw_signal_copy_owed). */
		m->s[sig].delivery_ns = ns;
		m->s[sig].copy_owed = from_terminal;
	}
}

void ptw_signal_expire(struct ptw_signal_model *m, uint64_t now, bool (*held)(void *ctx, int sig),
		       void *ctx)
{
	for (int sig = 1; sig < NSLOTS; sig++) {
		uint64_t ns = m->s[sig].copy_ns;
		if (!ns || (now != UINT64_MAX && now - ns < PTW_SIGNAL_MATCH_NS))
			continue;
		m->s[sig].copy_ns = 0;
		if (held(ctx, sig))
			press(m, sig, ns, false, PTW_INTR_GROUP); /* blocked there, for now */
		else
			decide(m, sig, ns, false, PTW_INTR_PTWATCH_ALONE);
	}
}

uint64_t ptw_signal_deadline(const struct ptw_signal_model *m)
{
	uint64_t d = 0;
	for (int sig = 1; sig < NSLOTS; sig++) {
		uint64_t c = m->s[sig].copy_ns;
		if (c && (!d || c + PTW_SIGNAL_MATCH_NS < d))
			d = c + PTW_SIGNAL_MATCH_NS;
	}
	return d;
}

bool ptw_signal_copy_owed(const struct ptw_signal_model *m)
{
	for (int sig = 1; sig < NSLOTS; sig++)
		if (m->s[sig].delivery_ns && m->s[sig].copy_owed)
			return true;
	return false;
}

void ptw_signal_late(struct ptw_signal_model *m, int sig, int code, uint64_t ns)
{
	if (sig <= 0 || sig >= NSLOTS || !m->s[sig].delivery_ns)
		return;
	/* it reached the command, which reacted: traced until then */
	m->s[sig].delivery_ns = 0;
	m->s[sig].copy_owed = false;
	decide(m, sig, ns, true, code == SI_KERNEL ? PTW_INTR_TERMINAL : PTW_INTR_GROUP);
}
