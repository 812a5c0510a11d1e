/* A leaf function called N times (argv[1], default 20000) from 2 threads
 * (N/2 each), for bench/trace.py: the cost per traced call under
 * ptwatch --trace leaf, ltrace -x leaf and gdb with a dprintf at leaf. */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>

__attribute__((noinline)) int leaf(int x);
__attribute__((noinline)) int leaf(int x)
{
	__asm__ volatile("" ::: "memory");
	return x * 3 + 1;
}

static long per_thread;

static void *worker(void *arg)
{
	long sum = 0;
	(void)arg;
	for (long i = 0; i < per_thread; i++)
		sum += leaf((int)i);
	return (void *)sum;
}

int main(int argc, char **argv)
{
	long n = argc > 1 ? atol(argv[1]) : 20000;
	pthread_t t[2];
	long total = 0;
	per_thread = n / 2;
	for (int i = 0; i < 2; i++)
		pthread_create(&t[i], NULL, worker, NULL);
	for (int i = 0; i < 2; i++) {
		void *v;
		pthread_join(t[i], &v);
		total += (long)v;
	}
	printf("%ld calls, sum %ld\n", per_thread * 2, total);
	return 0;
}
