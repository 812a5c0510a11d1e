/* SPDX-License-Identifier: MIT */
/* What a session signal means (ptw_observe.h, "session signals"), the
 * model both backends share, from synthetic observations: ptwatch's
 * copies (with si_code and whether the command is in ptwatch's group),
 * the command's deliveries (the ptrace path's stops), the time passing
 * and what the command holds. */
#include <signal.h>
#include <stdint.h>

#include "check.h"
#include "ptw_observe.h"
#include "ptw_util.h"

#define MS 1000000ull

static struct {
	int sig;
	uint64_t ns;
	enum ptw_interrupt_action action;
	enum ptw_interrupt_why why;
} seen[16];
static size_t nseen;

static void decided(void *ctx, int sig, uint64_t ns, enum ptw_interrupt_action action,
		    enum ptw_interrupt_why why)
{
	(void)ctx;
	if (nseen < PTW_ARRAY_SIZE(seen))
		seen[nseen++] = (typeof(seen[0])){ sig, ns, action, why };
}

static struct ptw_signal_model fresh(bool launched)
{
	nseen = 0;
	return (struct ptw_signal_model){ .launched = launched, .decided = decided };
}

static bool holds_sigint(void *ctx, int sig)
{
	(void)ctx;
	return sig == SIGINT;
}

static bool holds_nothing(void *ctx, int sig)
{
	(void)ctx;
	(void)sig;
	return false;
}

#define LAST(s, a, w)                                                                              \
	do {                                                                                       \
		CHECK(nseen > 0);                                                                  \
		if (nseen) {                                                                       \
			CHECK_EQ(seen[nseen - 1].sig, (s));                                        \
			CHECK_EQ(seen[nseen - 1].action, (a));                                     \
			CHECK_EQ(seen[nseen - 1].why, (w));                                        \
		}                                                                                  \
	} while (0)

int main(void)
{
	/* -p: any session signal lets go */
	struct ptw_signal_model m = fresh(false);
	ptw_signal_got(&m, SIGINT, SI_KERNEL, 10 * MS, true);
	LAST(SIGINT, PTW_INTR_DETACHED, PTW_INTR_ATTACHED);
	CHECK_EQ(m.end_signal, SIGINT);

	/* the terminal's Ctrl-C, the command in ptwatch's group: traced on;
	 * a second within PTW_INTERRUPT_AGAIN_MS lets go */
	m = fresh(true);
	ptw_signal_got(&m, SIGINT, SI_KERNEL, 10 * MS, true);
	LAST(SIGINT, PTW_INTR_TRACED_ON, PTW_INTR_TERMINAL);
	CHECK_EQ(m.end_signal, 0);
	ptw_signal_got(&m, SIGINT, SI_KERNEL, 900 * MS, true);
	LAST(SIGINT, PTW_INTR_DETACHED, PTW_INTR_AGAIN);
	CHECK_EQ(m.end_signal, SIGINT);
	/* ... but not one PTW_INTERRUPT_AGAIN_MS later */
	m = fresh(true);
	ptw_signal_got(&m, SIGINT, SI_KERNEL, 10 * MS, true);
	ptw_signal_got(&m, SIGINT, SI_KERNEL, 10 * MS + PTW_INTERRUPT_AGAIN_MS * MS + 1, true);
	LAST(SIGINT, PTW_INTR_TRACED_ON, PTW_INTR_TERMINAL);
	/* the terminal's, the command in a group of its own: ptwatch's alone
	 * once nothing says the command got it */
	m = fresh(true);
	ptw_signal_got(&m, SIGINT, SI_KERNEL, 10 * MS, false);
	CHECK_EQ(nseen, 0);
	CHECK_EQ(ptw_signal_deadline(&m), 10 * MS + PTW_SIGNAL_MATCH_NS);
	ptw_signal_expire(&m, 100 * MS, holds_nothing, NULL); /* not yet */
	CHECK_EQ(nseen, 0);
	ptw_signal_expire(&m, 10 * MS + PTW_SIGNAL_MATCH_NS, holds_nothing, NULL);
	LAST(SIGINT, PTW_INTR_DETACHED, PTW_INTR_PTWATCH_ALONE);
	CHECK_EQ(ptw_signal_deadline(&m), 0);

	/* kill -TERM to the group: ptwatch's copy, then the command's
	 * delivery stop: both, one press at the copy's time */
	m = fresh(true);
	ptw_signal_got(&m, SIGTERM, SI_USER, 10 * MS, true);
	CHECK_EQ(nseen, 0);
	ptw_signal_delivered(&m, SIGTERM, 20 * MS, false);
	LAST(SIGTERM, PTW_INTR_TRACED_ON, PTW_INTR_GROUP);
	CHECK_EQ(seen[0].ns, 10 * MS);
	/* in the other order */
	m = fresh(true);
	ptw_signal_delivered(&m, SIGTERM, 10 * MS, false);
	CHECK_EQ(nseen, 0);
	CHECK(!ptw_signal_copy_owed(&m)); /* not the terminal's */
	ptw_signal_got(&m, SIGTERM, SI_USER, 20 * MS, true);
	LAST(SIGTERM, PTW_INTR_TRACED_ON, PTW_INTR_GROUP);
	/* a copy the command holds blocked (or, ended, died of): both */
	m = fresh(true);
	ptw_signal_got(&m, SIGINT, SI_USER, 10 * MS, true);
	ptw_signal_expire(&m, UINT64_MAX, holds_sigint, NULL);
	LAST(SIGINT, PTW_INTR_TRACED_ON, PTW_INTR_GROUP);
	/* kill -INT to ptwatch alone */
	m = fresh(true);
	ptw_signal_got(&m, SIGINT, SI_USER, 10 * MS, true);
	ptw_signal_expire(&m, 10 * MS + PTW_SIGNAL_MATCH_NS, holds_nothing, NULL);
	LAST(SIGINT, PTW_INTR_DETACHED, PTW_INTR_PTWATCH_ALONE);
	CHECK_EQ(m.end_signal, SIGINT);

	/* the terminal's press seen by ptwatch first, then the command's
	 * delivery: one press, not a second */
	m = fresh(true);
	ptw_signal_got(&m, SIGINT, SI_KERNEL, 10 * MS, true);
	ptw_signal_delivered(&m, SIGINT, 12 * MS, true);
	CHECK_EQ(nseen, 1);
	CHECK(!ptw_signal_copy_owed(&m));

	/* the command delivered the terminal's signal and died of it before
	 * ptwatch's copy came: the copy is owed, and when it comes the
	 * session says what the user did */
	m = fresh(true);
	ptw_signal_delivered(&m, SIGQUIT, 10 * MS, true);
	CHECK(ptw_signal_copy_owed(&m));
	ptw_signal_late(&m, SIGQUIT, SI_KERNEL, 30 * MS);
	LAST(SIGQUIT, PTW_INTR_TRACED_ON, PTW_INTR_TERMINAL);
	CHECK(!ptw_signal_copy_owed(&m));
	ptw_signal_late(&m, SIGQUIT, SI_KERNEL, 40 * MS); /* once */
	CHECK_EQ(nseen, 1);

	/* out of range: ptwatch's alone, no crash */
	m = fresh(true);
	ptw_signal_got(&m, 200, SI_USER, 10 * MS, true);
	LAST(200, PTW_INTR_DETACHED, PTW_INTR_PTWATCH_ALONE);
	ptw_signal_delivered(&m, -1, 10 * MS, true);
	ptw_signal_late(&m, 999, SI_KERNEL, 10 * MS);
	CHECK_DONE();
}
