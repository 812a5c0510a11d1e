/* SPDX-License-Identifier: MIT */
/*
 * N idle threads for bench/attach.py: each blocks in read() on a pipe
 * nobody writes. Prints "ready N" once they all exist, then waits.
 * Usage: idle N
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

static int fds[2];

static void *idle(void *arg)
{
	char c;
	ssize_t r = read(fds[0], &c, 1);
	(void)r;
	return arg;
}

int main(int argc, char **argv)
{
	int n = argc > 1 ? atoi(argv[1]) : 1000;
	pthread_attr_t attr;
	pthread_attr_init(&attr);
	pthread_attr_setstacksize(&attr, 64 * 1024);
	if (pipe(fds) < 0)
		return 1;
	for (int i = 0; i < n; i++) {
		pthread_t t;
		if (pthread_create(&t, &attr, idle, NULL)) {
			perror("pthread_create");
			return 1;
		}
	}
	printf("ready %d\n", n);
	fflush(stdout);
	for (;;)
		pause();
}
