/* SPDX-License-Identifier: MIT */
/*
 * The lifecycle fixture (tests/fixtures/lifecycle.c: every way a thread
 * can end), behind an attach handshake (attach.h): one thread is already
 * running when it says "ready PID"; it waits for the command 'g' (the test
 * has attached), then lets that thread return 0xbb, runs the lifecycle
 * scenario and joins the first thread. main returns 3.
 */
#define main lifecycle_main
int lifecycle_main(void);
#include "lifecycle.c"
#undef main

#include "attach.h"

static int pre_pipe[2];

static void *pre_worker(void *arg)
{
	struct job *job = arg;
	char c;

	announce(job);
	/* Until the test has attached and main has released us. */
	if (read(pre_pipe[0], &c, 1) != 1)
		die("pre_worker read", errno);
	record(__func__, pre_worker, job, "return", (void *)0xbb, "false");
	return (void *)0xbb;
}

int main(void)
{
	struct job j_pre = JOB_INIT("main");
	pthread_t t_pre;
	int rc;

	truth_init(30);
	CHECK_SYS(pipe(pre_pipe));
	CHECK_PT(pthread_create(&t_pre, NULL, pre_worker, &j_pre));
	wait_blocked(tid_box_get(&j_pre.box));
	reply("ready %d", (int)getpid());
	if (next_command() != 'g')
		die("unexpected command", 0);
	CHECK_SYS(write(pre_pipe[1], "x", 1));
	rc = lifecycle_main();
	join_checked(t_pre, &j_pre, (void *)0xbb);
	return rc;
}
