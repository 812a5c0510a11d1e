/* SPDX-License-Identifier: MIT */
/*
 * N calls (argv[2], default 20000; N/2 in each of 2 threads) of one traced
 * function, for bench/kernel.py's cost per traced call. argv[1] picks it:
 *   push  call_push, whose first instruction is push %rbp (the kernel
 *         emulates it: no single step)
 *   lea   call_lea, whose first instruction is lea (the kernel single-steps
 *         it out of line)
 * Prints "calls: N, sum S, work NS ns": the work by its own clock, without
 * a tool's start and end. Usage: calls push|lea [N]
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* Written out, so that no compiler option changes their first instruction:
 * x * 3 + 1 each, call_push with a frame (push %rbp first), call_lea
 * without (lea first). */
int call_push(int x);
int call_lea(int x);
__asm__(".text\n"
	".globl call_push\n"
	".type call_push, @function\n"
	"call_push:\n"
	"	push %rbp\n"
	"	mov %rsp, %rbp\n"
	"	lea 0x1(%rdi,%rdi,2), %eax\n"
	"	pop %rbp\n"
	"	ret\n"
	".size call_push, .-call_push\n"
	".globl call_lea\n"
	".type call_lea, @function\n"
	"call_lea:\n"
	"	lea 0x1(%rdi,%rdi,2), %eax\n"
	"	ret\n"
	".size call_lea, .-call_lea\n");

static long per_thread;
static int (*fn)(int);

static void *worker(void *arg)
{
	long sum = 0;
	(void)arg;
	for (long i = 0; i < per_thread; i++)
		sum += fn((int)i);
	return (void *)sum;
}

int main(int argc, char **argv)
{
	if (argc < 2 || (strcmp(argv[1], "push") && strcmp(argv[1], "lea"))) {
		fprintf(stderr, "usage: calls push|lea [N]\n");
		return 2;
	}
	fn = strcmp(argv[1], "push") ? call_lea : call_push;
	long n = argc > 2 ? atol(argv[2]) : 20000;
	pthread_t t[2];
	long total = 0;
	struct timespec t0, t1;
	per_thread = n / 2;
	clock_gettime(CLOCK_MONOTONIC, &t0);
	for (int i = 0; i < 2; i++)
		if (pthread_create(&t[i], NULL, worker, NULL))
			abort();
	for (int i = 0; i < 2; i++) {
		void *v;
		pthread_join(t[i], &v);
		total += (long)v;
	}
	clock_gettime(CLOCK_MONOTONIC, &t1);
	printf("calls: %ld, sum %ld, work %lld ns\n", per_thread * 2, total,
	       (t1.tv_sec - t0.tv_sec) * 1000000000LL + (t1.tv_nsec - t0.tv_nsec));
	return 0;
}
