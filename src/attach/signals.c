/* SPDX-License-Identifier: MIT */
/*
 * The session's signals (ptw_attach.h): blocked from the start and read
 * from a signalfd by the wait loop; the mask and process group a launched
 * command gets back.
 */
#define _GNU_SOURCE
#include "attach_int.h"

/* ---- signals ---- */

static sigset_t original_mask;
static sigset_t session_set;
static int session_sigfd = -1;
/* ptwatch's process group at start: a launched command joins it again (the
 * tracer has a group of its own, see ptw_guardian.h). */
static pid_t original_pgid;

int ptw_signals_init(void)
{
	static const int sigs[] = PTW_SESSION_SIGNALS;
	sigemptyset(&session_set);
	sigaddset(&session_set, SIGCHLD);
	for (size_t i = 0; i < PTW_ARRAY_SIZE(sigs); i++)
		sigaddset(&session_set, sigs[i]);
	if (sigprocmask(SIG_BLOCK, &session_set, &original_mask) < 0)
		return -errno;
	session_sigfd = signalfd(-1, &session_set, SFD_CLOEXEC | SFD_NONBLOCK);
	if (session_sigfd < 0)
		return -errno;
	original_pgid = getpgrp();
	return 0;
}

pid_t ptw_original_pgrp(void)
{
	return original_pgid;
}

const sigset_t *ptw_signals_original_mask(void)
{
	return &original_mask;
}

/*
 * Reads the signalfd; queues every session signal (with its sender) in
 * p->sigq: wherever it is read (stop-all while attaching, say), ptw_wait()
 * reports it. Returns the number queued.
 */
int ptw_signals_fd(void)
{
	return session_sigfd;
}
