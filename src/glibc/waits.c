/* SPDX-License-Identifier: MIT */
/* Where a wait's object and holder are; see ptw_waits.h. Pure. */
#include "ptw_waits.h"

#include "ptw_util.h"

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
