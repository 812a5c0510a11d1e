/* N threads (argv[1], default 4) take one mutex ITERS times each (argv[2],
 * default 20000), holding it for CS spins (argv[3], default 200) and
 * working OUT spins between (argv[4], default 2000), for bench/locks.py:
 * the cost of ptwatch --locks with a known contention rate. Each lock is a
 * trylock first: the failures (printed, "contended N") are the lock calls
 * that had to wait, the contended ones glibc's slow path sees. With 1
 * thread nothing ever contends. Last on the line: the time the work took
 * by its own clock (", work NS ns", bench/kernel.py). */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

static pthread_mutex_t queue_lock = PTHREAD_MUTEX_INITIALIZER;
static long iters, cs, out;
static long shared_counter;

static void spin(long n)
{
	for (volatile long i = 0; i < n; i++)
		;
}

static void *worker(void *arg)
{
	long contended = 0;
	(void)arg;
	for (long i = 0; i < iters; i++) {
		if (pthread_mutex_trylock(&queue_lock) != 0) {
			contended++;
			pthread_mutex_lock(&queue_lock);
		}
		shared_counter++;
		spin(cs);
		pthread_mutex_unlock(&queue_lock);
		spin(out);
	}
	return (void *)contended;
}

int main(int argc, char **argv)
{
	int n = argc > 1 ? atoi(argv[1]) : 4;
	iters = argc > 2 ? atol(argv[2]) : 20000;
	cs = argc > 3 ? atol(argv[3]) : 200;
	out = argc > 4 ? atol(argv[4]) : 2000;
	pthread_t *t = calloc((size_t)n, sizeof(*t));
	long contended = 0;
	struct timespec t0, t1;
	clock_gettime(CLOCK_MONOTONIC, &t0);
	for (int i = 0; i < n; i++)
		pthread_create(&t[i], NULL, worker, NULL);
	for (int i = 0; i < n; i++) {
		void *v;
		pthread_join(t[i], &v);
		contended += (long)v;
	}
	clock_gettime(CLOCK_MONOTONIC, &t1);
	printf("%d threads x %ld locks, counter %ld, contended %ld, work %lld ns\n", n, iters,
	       shared_counter, contended,
	       (t1.tv_sec - t0.tv_sec) * 1000000000LL + (t1.tv_nsec - t0.tv_nsec));
	free(t);
	return shared_counter == n * iters ? 0 : 1;
}
