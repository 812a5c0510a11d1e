/* SPDX-License-Identifier: MIT */
/*
 * The locks fixture (tests/fixtures/locks.c: contended mutexes, a join, a
 * rwlock, a condition variable, a semaphore, a deadlock, each reporting
 * its own truth), behind an attach handshake (attach.h): it says "ready
 * PID" before anything happens and waits for the command 'g' (the test
 * has attached), then runs the mode of its arguments. The deadlock mode
 * then has its own handshake ("ready", 'd', "deadlocked").
 */
#define main locks_main
int locks_main(int argc, char **argv);
#include "locks.c"
#undef main

int main(int argc, char **argv)
{
	truth_init(60);
	reply("ready %d", (int)getpid());
	if (next_command() != 'g')
		die("unexpected command", 0);
	return locks_main(argc, argv);
}
