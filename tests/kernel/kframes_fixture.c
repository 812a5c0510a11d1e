/* SPDX-License-Identifier: MIT */
/*
 * tests/fixtures/frames.c (its modes and truth records, unchanged) behind
 * an attach handshake (attach.h): says "ready PID", waits for 'g' (the
 * test has attached with its --trace patterns), then runs the mode given
 * as argv[1]; deep runs at once (its recursion is under way at the attach,
 * its "ready" is frames.c's). Plus one mode of its own:
 *   sigtrap  a thread that blocks every signal and has a SIGTRAP handler
 *            calls a traced function SIGTRAP_CALLS times, then reports
 *            whether its mask and its SIGTRAP disposition are still what
 *            it set (the ptrace path's int3 unblocks SIGTRAP and resets
 *            the handler: man page, BUGS).
 */
#define main frames_main
int frames_main(int argc, char **argv);
#include "frames.c"
#undef main

#define SIGTRAP_CALLS 1000

static void on_trap(int sig)
{
	(void)sig;
	static const char msg[] = "fixture: SIGTRAP delivered\n";
	(void)!write(2, msg, sizeof(msg) - 1);
}

static NOINLINE long fr_masked(long x)
{
	return x * 3 + 1;
}

static void *masked_thread(void *arg)
{
	(void)arg;
	sigset_t all, now;
	struct sigaction sa, after;
	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = on_trap;
	sigemptyset(&sa.sa_mask);
	CHECK_SYS(sigaction(SIGTRAP, &sa, NULL));
	sigfillset(&all);
	CHECK_PT(pthread_sigmask(SIG_SETMASK, &all, NULL));
	long sum = 0;
	for (int i = 0; i < SIGTRAP_CALLS; i++)
		sum += fr_masked(i);
	CHECK_PT(pthread_sigmask(SIG_SETMASK, NULL, &now));
	CHECK_SYS(sigaction(SIGTRAP, NULL, &after));
	/* every signal the kernel lets one block (not SIGKILL, SIGSTOP) */
	int all_blocked = 1;
	for (int s = 1; s < NSIG; s++)
		if (s != SIGKILL && s != SIGSTOP && sigismember(&all, s) == 1 &&
		    sigismember(&now, s) != 1)
			all_blocked = 0;
	truth_write("{\"kind\":\"sigtrap\",\"tid\":%d,\"calls\":%d,\"sum\":%ld,\"trap_blocked\":%s,"
		    "\"all_blocked\":%s,\"handler_kept\":%s}",
		    (int)truth_tid(), SIGTRAP_CALLS, sum,
		    sigismember(&now, SIGTRAP) == 1 ? "true" : "false",
		    all_blocked ? "true" : "false", after.sa_handler == on_trap ? "true" : "false");
	return NULL;
}

static int mode_sigtrap(void)
{
	pthread_t t;
	CHECK_PT(pthread_create(&t, NULL, masked_thread, NULL));
	CHECK_PT(pthread_join(t, NULL));
	return 0;
}

int main(int argc, char **argv)
{
	/* deep: the recursion is under way before the attach (no 'g') */
	if (argc > 1 && !strcmp(argv[1], "deep"))
		return frames_main(argc, argv);
	reply("ready %d", (int)getpid());
	if (next_command() != 'g')
		die("unexpected command", 0);
	if (argc > 1 && !strcmp(argv[1], "sigtrap")) {
		truth_init(30);
		return mode_sigtrap();
	}
	return frames_main(argc, argv);
}
