/* SPDX-License-Identifier: MIT */
/*
 * Code on another stack than the one its traced callers' return slots are
 * on, in a thread (its stack mapped after the other one, so below it):
 *   ctxup     a traced call makecontexts a function onto a stack mmap'd
 *             before the thread was made (above the thread's stack), and
 *             swaps to it; the function calls a traced one and returns to
 *             uc_link; the first call returns
 *   altstack  a handler that is not traced runs on a sigaltstack mmap'd
 *             before the thread was made (above it), interrupting two
 *             traced calls, and calls a traced function
 * Each prints "MODE result N" (the same untraced and under ptrace). Under
 * --backend=kernel --trace the kernel drops the pending returns of the
 * calls below the other stack (tests/kernel/kframes_stacks.py says what
 * it checks). alarm() watchdog.
 */
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <ucontext.h>
#include <unistd.h>

#define NOINLINE __attribute__((noinline))
#define STACK	 (64 * 1024)

static char *other; /* the stack mapped before the thread */
static ucontext_t back, uc;
static volatile int got;

static NOINLINE int ks_leaf(int x)
{
	return x + 1;
}

static NOINLINE void ks_on_context(void)
{
	got += ks_leaf(3);
}

static NOINLINE int ks_switcher(int v)
{
	if (getcontext(&uc) < 0)
		abort();
	uc.uc_stack.ss_sp = other;
	uc.uc_stack.ss_size = STACK;
	uc.uc_link = &back;
	makecontext(&uc, ks_on_context, 0);
	if (swapcontext(&back, &uc) < 0)
		abort();
	return v + got;
}

static void on_usr1(int sig)
{
	got += ks_leaf(sig);
}

static NOINLINE int ks_inner(int v)
{
	raise(SIGUSR1);
	return v * 2;
}

static NOINLINE int ks_outer(int v)
{
	return ks_inner(v) + 1;
}

static void *run(void *arg)
{
	const char *mode = arg;
	int r;
	if (!strcmp(mode, "ctxup")) {
		r = ks_switcher(10);
	} else {
		stack_t ss = { .ss_sp = other, .ss_size = STACK };
		struct sigaction sa;
		memset(&sa, 0, sizeof(sa));
		sa.sa_handler = on_usr1;
		sa.sa_flags = SA_ONSTACK;
		if (sigaltstack(&ss, NULL) < 0 || sigaction(SIGUSR1, &sa, NULL) < 0)
			abort();
		r = ks_outer(20);
	}
	/* the precondition: the other stack lies above this thread's */
	printf("%s other-above %d\n", mode, (char *)&r < other);
	printf("%s result %d\n", mode, r);
	return NULL;
}

int main(int argc, char **argv)
{
	const char *mode = argc > 1 ? argv[1] : "ctxup";
	if (strcmp(mode, "ctxup") && strcmp(mode, "altstack")) {
		fprintf(stderr, "fixture: unknown mode %s\n", mode);
		return 98;
	}
	alarm(30);
	setvbuf(stdout, NULL, _IOLBF, 0);
	other = mmap(NULL, STACK, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (other == MAP_FAILED)
		abort();
	pthread_t t;
	if (pthread_create(&t, NULL, run, (void *)mode) || pthread_join(t, NULL))
		abort();
	return 0;
}
