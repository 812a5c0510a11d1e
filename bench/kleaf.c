/* Traced-call cost on both backends, for bench/ktrace.py: leaf_push
 * (first instruction push %rbp, which the kernel's uprobes emulate),
 * leaf_lea (first instruction lea, which they must single-step),
 * leaf_endbr (endbr64 and a move, then the push) or
 * leaf_self (leaf_push's, but it can call itself: its return is probed at
 * its ret, single-stepped, not with a uretprobe) called
 * N times (argv[1]) from T threads (argv[3], 1 or 2; 2 by default: N/2
 * each). It says "ready PID", waits
 * for one byte on stdin (a tool attaches meanwhile), then times the calls
 * alone: "N calls in NS ns, cpu CPU ns, sum S" (wall time, and the user +
 * system time of the process meanwhile: the kernel's uprobe and BPF work
 * is charged to the calling thread). */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

__attribute__((noinline)) int leaf_push(int x);
__attribute__((noinline)) int leaf_push(int x)
{
	/* rbx is callee-saved: the compiler saves it first (push %rbx) */
	__asm__ volatile("" ::: "rbx", "memory");
	return x * 3 + 1;
}

__attribute__((noinline)) int leaf_lea(int x);
__attribute__((noinline)) int leaf_lea(int x)
{
	__asm__ volatile("" ::: "memory");
	return x * 3 + 1;
}

/* leaf_push as a compiler with -fcf-protection (Ubuntu's default) makes
 * it, endbr64 first, and a move before the push: the kernel would
 * single-step the endbr64; the kernel path probes the push */
int leaf_endbr(int x);
__asm__(".text\n.globl leaf_endbr\n.type leaf_endbr,@function\nleaf_endbr:\n"
	"	endbr64\n"
	"	mov %edi,%eax\n"
	"	push %rbx\n"
	"	lea 1(%rax,%rax,2),%eax\n"
	"	pop %rbx\n"
	"	ret\n"
	".size leaf_endbr,.-leaf_endbr\n");

/* leaf_push that can call itself (never does here): the kernel path
 * probes its returns at its exits, not with a uretprobe (a recursion may
 * nest past the kernel's 64 pending returns) */
__attribute__((noipa)) int leaf_self(int x);
__attribute__((noipa)) int leaf_self(int x)
{
	__asm__ volatile("" ::: "rbx", "memory");
	if (__builtin_expect(x < 0, 0))
		return leaf_self(x + 1) ^ x;
	return x * 3 + 1;
}

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
	long n = argc > 1 ? atol(argv[1]) : 20000;
	fn = argc > 2 && !strcmp(argv[2], "lea")     ? leaf_lea
	     : argc > 2 && !strcmp(argv[2], "self")  ? leaf_self
	     : argc > 2 && !strcmp(argv[2], "endbr") ? leaf_endbr
						     : leaf_push;
	int nt = argc > 3 && atoi(argv[3]) == 1 ? 1 : 2;
	pthread_t t[2];
	long total = 0;
	char c;
	per_thread = n / nt;
	printf("ready %d\n", (int)getpid());
	fflush(stdout);
	if (read(0, &c, 1) != 1)
		return 97;
	struct timespec a, b;
	struct rusage ra, rb;
	getrusage(RUSAGE_SELF, &ra);
	clock_gettime(CLOCK_MONOTONIC, &a);
	for (int i = 0; i < nt; i++)
		pthread_create(&t[i], NULL, worker, NULL);
	for (int i = 0; i < nt; i++) {
		void *v;
		pthread_join(t[i], &v);
		total += (long)v;
	}
	clock_gettime(CLOCK_MONOTONIC, &b);
	getrusage(RUSAGE_SELF, &rb);
	long long ns = (b.tv_sec - a.tv_sec) * 1000000000ll + (b.tv_nsec - a.tv_nsec);
	long long cpu = ((rb.ru_utime.tv_sec + rb.ru_stime.tv_sec) -
			 (ra.ru_utime.tv_sec + ra.ru_stime.tv_sec)) *
				1000000000ll +
			((rb.ru_utime.tv_usec + rb.ru_stime.tv_usec) -
			 (ra.ru_utime.tv_usec + ra.ru_stime.tv_usec)) *
				1000ll;
	printf("%ld calls in %lld ns, cpu %lld ns, sum %ld\n", per_thread * nt, ns, cpu, total);
	/* "hold" (argv[4]): stay until stdin ends, for a look at its text */
	if (argc > 4 && !strcmp(argv[4], "hold")) {
		fflush(stdout);
		while (read(0, &c, 1) > 0)
			;
	}
	return 0;
}
