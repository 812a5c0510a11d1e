/* SPDX-License-Identifier: MIT */
/* Classifying waits; see ptw_waits.h. Pure. */
#include "ptw_waits.h"

#include <string.h>

#include "ptw_util.h"

static const struct {
	const char *needle;
	enum ptw_wait_kind kind;
} rules[] = {
	/* lock waits first: cond_wait re-locks its mutex through them */
	{ "lll_lock_wait", PTW_WAIT_MUTEX },
	{ "mutex_lock", PTW_WAIT_MUTEX },
	{ "mutex_timedlock", PTW_WAIT_MUTEX },
	{ "mutex_clocklock", PTW_WAIT_MUTEX },
	{ "mutex_cond_lock", PTW_WAIT_MUTEX },
	{ "rwlock_rdlock", PTW_WAIT_RWLOCK },
	{ "rwlock_wrlock", PTW_WAIT_RWLOCK },
	{ "rwlock_timedrdlock", PTW_WAIT_RWLOCK },
	{ "rwlock_timedwrlock", PTW_WAIT_RWLOCK },
	{ "rwlock_clockrdlock", PTW_WAIT_RWLOCK },
	{ "rwlock_clockwrlock", PTW_WAIT_RWLOCK },
	{ "cond_wait", PTW_WAIT_COND },
	{ "cond_timedwait", PTW_WAIT_COND },
	{ "cond_clockwait", PTW_WAIT_COND },
	{ "clockjoin", PTW_WAIT_JOIN },
	{ "pthread_join", PTW_WAIT_JOIN },
	{ "timedjoin", PTW_WAIT_JOIN },
	{ "sem_wait", PTW_WAIT_OTHER },
	{ "sem_timedwait", PTW_WAIT_OTHER },
	{ "sem_clockwait", PTW_WAIT_OTHER },
	{ "barrier_wait", PTW_WAIT_OTHER },
};

enum ptw_wait_kind ptw_wait_classify(const char *const *symbols, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		if (!symbols[i])
			continue;
		for (size_t k = 0; k < PTW_ARRAY_SIZE(rules); k++)
			if (strstr(symbols[i], rules[k].needle))
				return rules[k].kind;
	}
	return PTW_WAIT_NONE;
}

uint64_t ptw_wait_object(enum ptw_wait_kind kind, uint64_t futex)
{
	switch (kind) {
	case PTW_WAIT_COND:
		return (futex - PTW_COND_G_SIGNALS) & ~(uint64_t)7;
	default:
		return futex; /* mutex: __lock is its first word */
	}
}

uint64_t ptw_wait_owner_at(enum ptw_wait_kind kind, uint64_t object, uint64_t tid_at)
{
	switch (kind) {
	case PTW_WAIT_MUTEX:
		return object + PTW_MUTEX_OWNER;
	case PTW_WAIT_RWLOCK_READ:
	case PTW_WAIT_RWLOCK_WRITE:
		return object + PTW_RWLOCK_CUR_WRITER;
	case PTW_WAIT_JOIN:
		return tid_at;
	default:
		return 0; /* a condition variable, a semaphore: nobody holds them */
	}
}
