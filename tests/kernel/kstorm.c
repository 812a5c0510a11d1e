/* SPDX-License-Identifier: MIT */
/*
 * A thread storm for tests/kernel/kill9.sh: P creator threads each create
 * and join N threads that return their index, plus one detached thread in
 * every 16; every value is checked. Prints "kstorm: TOTAL" once all were
 * made and checked; any failure aborts (the test then sees a signal).
 * With "hold", it then reads its standard input to its end before it
 * exits (tests/kernel/killall.py reads its memory meanwhile). With
 * "until", the creators go on in rounds of N until standard input ends
 * (the test decides when the storm is over, not the machine's speed),
 * then it prints the total made.
 * Usage: kstorm N [P [hold|until]]
 */
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static long n;
static int until;	    /* rounds of n until stop */
static volatile int stop;   /* standard input ended */

static void *leaf(void *arg)
{
	return arg;
}

static void *creator(void *arg)
{
	pthread_attr_t detached;
	if (pthread_attr_init(&detached) ||
	    pthread_attr_setdetachstate(&detached, PTHREAD_CREATE_DETACHED))
		abort();
	long made = 0;
	do {
		for (long i = 0; i < n; i++) {
			pthread_t t;
			void *ret;
			if (pthread_create(&t, NULL, leaf, (void *)(uintptr_t)(i + 1)) ||
			    pthread_join(t, &ret) || ret != (void *)(uintptr_t)(i + 1))
				abort();
			if (i % 16 == 0 && pthread_create(&t, &detached, leaf, NULL))
				abort();
		}
		made += n;
	} while (until && !__atomic_load_n(&stop, __ATOMIC_ACQUIRE));
	*(long *)arg = made;
	return arg;
}

int main(int argc, char **argv)
{
	n = argc > 1 ? atol(argv[1]) : 1000;
	long p = argc > 2 ? atol(argv[2]) : 2;
	until = argc > 3 && !strcmp(argv[3], "until");
	alarm(300);
	pthread_t *t = calloc((size_t)p, sizeof(*t));
	long *made = calloc((size_t)p, sizeof(*made));
	if (!t || !made)
		abort();
	for (long i = 0; i < p; i++)
		if (pthread_create(&t[i], NULL, creator, &made[i]))
			abort();
	if (until) {
		char buf[64];
		while (read(0, buf, sizeof(buf)) > 0)
			;
		__atomic_store_n(&stop, 1, __ATOMIC_RELEASE);
	}
	long total = 0;
	for (long i = 0; i < p; i++) {
		void *ret;
		if (pthread_join(t[i], &ret) || ret != &made[i])
			abort();
		total += made[i];
	}
	printf("kstorm: %ld\n", total);
	if (argc > 3 && !strcmp(argv[3], "hold")) {
		char buf[64];
		fflush(stdout);
		while (read(0, buf, sizeof(buf)) > 0)
			;
	}
	return 0;
}
