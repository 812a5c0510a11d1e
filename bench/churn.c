/* SPDX-License-Identifier: MIT */
/*
 * Thread churn for bench/run.sh: P creator threads each create and join N
 * empty threads, one at a time. Prints "churn: TOTAL" when all were made
 * (the benchmark checks it: a tracer that breaks the target must not look
 * fast).
 * Usage: churn N [P]
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
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

int main(int argc, char **argv)
{
	n = argc > 1 ? atol(argv[1]) : 1000;
	long p = argc > 2 ? atol(argv[2]) : 1;
	alarm(600);
	if (p <= 1) {
		creator(NULL);
		printf("churn: %ld\n", n);
		return 0;
	}
	pthread_t *c = calloc((size_t)p, sizeof(*c));
	for (long i = 0; i < p; i++)
		pthread_create(&c[i], NULL, creator, NULL);
	for (long i = 0; i < p; i++)
		pthread_join(c[i], NULL);
	printf("churn: %ld\n", n * p);
	return 0;
}
