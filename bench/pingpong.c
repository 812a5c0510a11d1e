/* Two threads hand a turn back and forth N times (argv[1], default
 * 20000) through one mutex and condition variable: nearly every hand-off
 * is a futex wait in glibc's slow path (pthread_cond_wait, and sometimes
 * the mutex taken back), whatever the machine's load. For bench/klocks.py:
 * the time --locks adds per wait seen. Prints the rounds and the two
 * threads' elapsed time ("elapsed S s"). */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

static pthread_mutex_t m = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t c = PTHREAD_COND_INITIALIZER;
static int turn;
static long rounds;

static void *player(void *arg)
{
	int me = (int)(long)arg;
	for (long i = 0; i < rounds; i++) {
		pthread_mutex_lock(&m);
		while (turn != me)
			pthread_cond_wait(&c, &m);
		turn = 1 - me;
		pthread_cond_signal(&c);
		pthread_mutex_unlock(&m);
	}
	return NULL;
}

int main(int argc, char **argv)
{
	pthread_t t[2];
	struct timespec t0, t1;
	rounds = argc > 1 ? atol(argv[1]) : 20000;
	clock_gettime(CLOCK_MONOTONIC, &t0);
	for (long i = 0; i < 2; i++)
		pthread_create(&t[i], NULL, player, (void *)i);
	for (int i = 0; i < 2; i++)
		pthread_join(t[i], NULL);
	clock_gettime(CLOCK_MONOTONIC, &t1);
	printf("pingpong %ld rounds, contended -1, elapsed %.6f s\n", rounds,
	       (double)(t1.tv_sec - t0.tv_sec) + (double)(t1.tv_nsec - t0.tv_nsec) / 1e9);
	return 0;
}
