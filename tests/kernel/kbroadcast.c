/* SPDX-License-Identifier: MIT */
/* LTP's heaviest pthread test, pthread_cond_broadcast/1-2, in small: N
 * threads (argv[1], 16000 by default) wait on one condition variable,
 * one broadcast wakes them, every one is joined. For broadcast.py. */
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

static pthread_mutex_t m = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t c = PTHREAD_COND_INITIALIZER;
static int waiting, go;

static void *waiter(void *arg)
{
	(void)arg;
	pthread_mutex_lock(&m);
	waiting++;
	while (!go)
		pthread_cond_wait(&c, &m);
	pthread_mutex_unlock(&m);
	return NULL;
}

int main(int argc, char **argv)
{
	int n = argc > 1 ? atoi(argv[1]) : 16000, made = 0;
	alarm(120);
	pthread_t *t = calloc((size_t)n, sizeof(*t));
	pthread_attr_t at;
	pthread_attr_init(&at);
	pthread_attr_setstacksize(&at, 64 * 1024);
	while (made < n && pthread_create(&t[made], &at, waiter, NULL) == 0)
		made++;
	for (;;) { /* every one waiting: a condition polled, not a sleep */
		pthread_mutex_lock(&m);
		int k = waiting;
		pthread_mutex_unlock(&m);
		if (k == made)
			break;
		sched_yield();
	}
	pthread_mutex_lock(&m);
	go = 1;
	pthread_cond_broadcast(&c);
	pthread_mutex_unlock(&m);
	for (int i = 0; i < made; i++)
		pthread_join(t[i], NULL);
	printf("kbroadcast: %d\n", made);
	free(t);
	return made == n ? 0 : 1;
}
