/* SPDX-License-Identifier: MIT */
/*
 * A second example (README): a "bank" whose two tellers move money between
 * two accounts in opposite orders and deadlock, while a clerk waits for
 * work on a condition variable that never comes. It hangs, as a stuck
 * service does, until SIGALRM ends it after the seconds given (default 60).
 *
 *   ./build/examples/bank &
 *   ptwatch -p $! --snapshot                 # every thread's stack; the DEADLOCK
 *   ptwatch --locks -- ./build/examples/bank 3   # the deadlock as it forms
 */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

struct account {
	pthread_mutex_t lock;
	long balance;
};

static struct account savings = { PTHREAD_MUTEX_INITIALIZER, 100 };
static struct account checking = { PTHREAD_MUTEX_INITIALIZER, 100 };
static pthread_mutex_t queue_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t work = PTHREAD_COND_INITIALIZER;
static pthread_barrier_t both_hold;

static void transfer(struct account *from, struct account *to, long amount)
{
	pthread_mutex_lock(&from->lock);
	pthread_barrier_wait(&both_hold); /* each holds its first lock: a sure deadlock */
	pthread_mutex_lock(&to->lock);
	from->balance -= amount;
	to->balance += amount;
	pthread_mutex_unlock(&to->lock);
	pthread_mutex_unlock(&from->lock);
}

static void *teller(void *arg)
{
	if (arg)
		transfer(&savings, &checking, 10);
	else
		transfer(&checking, &savings, 20);
	return NULL;
}

static void *clerk(void *arg)
{
	(void)arg;
	pthread_mutex_lock(&queue_lock);
	pthread_cond_wait(&work, &queue_lock); /* nobody signals */
	pthread_mutex_unlock(&queue_lock);
	return NULL;
}

int main(int argc, char **argv)
{
	alarm(argc > 1 ? (unsigned)atoi(argv[1]) : 60);
	pthread_barrier_init(&both_hold, NULL, 2);
	pthread_t a, b, c;
	pthread_create(&c, NULL, clerk, NULL);
	pthread_create(&a, NULL, teller, (void *)1);
	pthread_create(&b, NULL, teller, NULL);
	pthread_setname_np(a, "teller-1");
	pthread_setname_np(b, "teller-2");
	pthread_setname_np(c, "clerk");
	pthread_join(a, NULL);
	pthread_join(b, NULL);
	puts("bank: done");
	return 0;
}
