/* SPDX-License-Identifier: MIT */
/*
 * Thread churn for bench/run.sh: P creator threads each create and join N
 * empty threads, one at a time. Prints "churn: TOTAL" when all were made
 * (the benchmark checks it: a tracer that breaks the target must not look
 * fast), and the time the work took by its own clock (", work NS ns"):
 * without a tool's start and end (bench/kernel.py).
 * Usage: churn N [P]
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

static long n;

static void *empty(void *arg)
{
	return arg;
}

static void *creator(void *arg)
{
	for (long i = 0; i < n; i++) {
		pthread_t t;
		if (pthread_create(&t, NULL, empty, NULL) || pthread_join(t, NULL))
			abort();
	}
	return arg;
}

static long long now_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

int main(int argc, char **argv)
{
	n = argc > 1 ? atol(argv[1]) : 1000;
	long p = argc > 2 ? atol(argv[2]) : 1;
	alarm(600);
	long long t0 = now_ns();
	if (p <= 1) {
		creator(NULL);
		printf("churn: %ld, work %lld ns\n", n, now_ns() - t0);
		return 0;
	}
	pthread_t *c = calloc((size_t)p, sizeof(*c));
	for (long i = 0; i < p; i++)
		pthread_create(&c[i], NULL, creator, NULL);
	for (long i = 0; i < p; i++)
		pthread_join(c[i], NULL);
	printf("churn: %ld, work %lld ns\n", n * p, now_ns() - t0);
	return 0;
}
