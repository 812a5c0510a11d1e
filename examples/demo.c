/* SPDX-License-Identifier: MIT */
/*
 * The demo program `make demo` traces: a small pool of named workers that
 * return results, a thread that ends with pthread_exit, one cancelled while
 * it waits, a detached logger, and a thread that creates a thread of its own.
 */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

static pthread_barrier_t ready;

static void *worker(void *arg)
{
	uintptr_t n = (uintptr_t)arg, sum = 0;
	char name[16];
	snprintf(name, sizeof(name), "worker-%u", (unsigned)n);
	pthread_setname_np(pthread_self(), name);
	for (uintptr_t i = 0; i < 200000 * (n + 1); i++)
		sum += i % 7;
	return (void *)(sum % 1000);
}

static void *quitter(void *arg)
{
	(void)arg;
	pthread_exit((void *)0x51);
}

static void *waiter(void *arg)
{
	int *fds = arg;
	char c;
	pthread_barrier_wait(&ready);
	ssize_t r = read(fds[0], &c, 1); /* a cancellation point; nobody writes */
	return (void *)r;
}

static void *logger(void *arg)
{
	(void)arg;
	pthread_setname_np(pthread_self(), "logger");
	return NULL;
}

static void *child(void *arg)
{
	return arg;
}

static void *parent(void *arg)
{
	pthread_t t;
	void *r;
	pthread_create(&t, NULL, child, arg);
	pthread_join(t, &r);
	return r;
}

int main(void)
{
	pthread_t pool[4], q, w, l, p;
	int fds[2];
	void *r;

	alarm(30);
	if (pipe(fds) < 0)
		return 1;
	pthread_barrier_init(&ready, NULL, 2);
	for (uintptr_t i = 0; i < 4; i++)
		pthread_create(&pool[i], NULL, worker, (void *)i);
	pthread_create(&q, NULL, quitter, NULL);
	pthread_create(&w, NULL, waiter, fds);
	pthread_create(&l, NULL, logger, NULL);
	pthread_detach(l);
	pthread_create(&p, NULL, parent, (void *)7);

	for (int i = 0; i < 4; i++)
		pthread_join(pool[i], &r);
	pthread_join(q, &r);
	pthread_join(p, &r);
	pthread_barrier_wait(&ready);
	pthread_cancel(w);
	pthread_join(w, &r);
	puts(r == PTHREAD_CANCELED ? "demo: done" : "demo: waiter was not cancelled");
	return 0;
}
