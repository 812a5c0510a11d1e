/* SPDX-License-Identifier: MIT */
/* What a blocked thread waits for, from its frames (snapshot). */
#include "check.h"
#include "ptw_observe.h"
#include "ptw_util.h"
#include "ptw_waits.h"

#define N(a) (sizeof(a) / sizeof((a)[0]))

int main(void)
{
	/* with libc's debug file */
	const char *mutex[] = { "__lll_lock_wait", "pthread_mutex_lock", "worker_a", "start_thread",
				"__clone3" };
	CHECK_EQ(ptw_wait_classify(mutex, N(mutex)), PTW_WAIT_MUTEX);
	/* without it: the internal function takes its exported neighbour's name */
	const char *mutex2[] = { "__lll_lock_wait_private", "pthread_mutex_lock", "worker_a" };
	CHECK_EQ(ptw_wait_classify(mutex2, N(mutex2)), PTW_WAIT_MUTEX);
	const char *cond[] = { "__futex_abstimed_wait_common", "pthread_cond_wait", "sleeper" };
	CHECK_EQ(ptw_wait_classify(cond, N(cond)), PTW_WAIT_COND);
	/* woken from a condvar, re-taking its mutex: that is a mutex wait */
	const char *relock[] = { "__lll_lock_wait", "__pthread_mutex_cond_lock", "pthread_cond_wait" };
	CHECK_EQ(ptw_wait_classify(relock, N(relock)), PTW_WAIT_MUTEX);
	const char *join[] = { "__futex_abstimed_wait_common", "__pthread_clockjoin_ex", "main" };
	CHECK_EQ(ptw_wait_classify(join, N(join)), PTW_WAIT_JOIN);
	const char *rw[] = { NULL, "__pthread_rwlock_wrlock_full64", "pthread_rwlock_wrlock" };
	CHECK_EQ(ptw_wait_classify(rw, N(rw)), PTW_WAIT_RWLOCK);
	const char *sem[] = { "do_futex_wait", "__new_sem_wait_slow64", "sem_wait" };
	CHECK_EQ(ptw_wait_classify(sem, N(sem)), PTW_WAIT_OTHER);
	const char *plain[] = { "read", "worker", "start_thread" };
	CHECK_EQ(ptw_wait_classify(plain, N(plain)), PTW_WAIT_NONE);
	CHECK_EQ(ptw_wait_classify(NULL, 0), PTW_WAIT_NONE);

	/* condvar waiters sleep on __g_signals[0] (+40) or [1] (+44) */
	CHECK_EQ(ptw_wait_object(PTW_WAIT_COND, 0x55aa1dd10228), 0x55aa1dd10200);
	CHECK_EQ(ptw_wait_object(PTW_WAIT_COND, 0x55aa1dd1022c), 0x55aa1dd10200);
	CHECK_EQ(ptw_wait_object(PTW_WAIT_MUTEX, 0x55aa1dd10080), 0x55aa1dd10080);

	CHECK_STR(ptw_syscall_name(202), "futex");
	CHECK(ptw_syscall_name(99999) == NULL);

	/* where the holder of a waited-on object is written, for both backends */
	CHECK_EQ(ptw_wait_owner_at(PTW_WAIT_MUTEX, 0x1000, 0), 0x1000 + PTW_MUTEX_OWNER);
	CHECK_EQ(ptw_wait_owner_at(PTW_WAIT_RWLOCK_WRITE, 0x2000, 0), 0x2000 + PTW_RWLOCK_CUR_WRITER);
	CHECK_EQ(ptw_wait_owner_at(PTW_WAIT_RWLOCK_READ, 0x2000, 0), 0x2000 + PTW_RWLOCK_CUR_WRITER);
	CHECK_EQ(ptw_wait_owner_at(PTW_WAIT_JOIN, 0x3000, 0x3abc), 0x3abc);
	CHECK_EQ(ptw_wait_owner_at(PTW_WAIT_COND, 0x4000, 0), 0);
	CHECK_EQ(ptw_wait_owner_at(PTW_WAIT_SEM, 0x4000, 0), 0);

	/* a cycle's key: the same from any member, another for other waits */
	pid_t a[3] = { 11, 12, 13 }, b[3] = { 12, 13, 11 };
	uint64_t wa[3] = { 0x100, 0x200, 0x300 }, wb[3] = { 0x200, 0x300, 0x100 };
	uint64_t wc[3] = { 0x200, 0x100, 0x300 };
	CHECK_EQ(ptw_wait_cycle_key(a, wa, 3), ptw_wait_cycle_key(b, wb, 3));
	CHECK(ptw_wait_cycle_key(a, wa, 3) != ptw_wait_cycle_key(a, wc, 3));
	CHECK(ptw_wait_cycle_key(a, wa, 1) != 0);
	CHECK_DONE();
}
