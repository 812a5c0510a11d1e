/* SPDX-License-Identifier: MIT */
/*
 * glibc's synchronisation objects as a waiter sees them (x86-64): which
 * word of an object a waiter sleeps on, where its holder's TID is written.
 * Pure: the caller reads memory. What kind of wait a thread is in is told
 * by ptw_libc_waits.h, for --locks and --snapshot alike.
 */
#ifndef PTW_WAITS_H
#define PTW_WAITS_H

#include <stddef.h>
#include <stdint.h>

#include "ptw_events.h"

/* struct pthread_rwlock (x86-64 glibc): which futex a waiter sleeps on
 * gives the lock's address; __cur_writer is the writer's tid. */
#define PTW_RWLOCK_WRPHASE_FUTEX 8
#define PTW_RWLOCK_WRITERS_FUTEX 12
#define PTW_RWLOCK_CUR_WRITER 24
/* pthread_mutex_t: __lock at 0 (the futex), __owner at 8. */
#define PTW_MUTEX_OWNER 8
/* pthread_cond_t (glibc >= 2.25): waiters sleep on __g_signals[g], at 40 + 4g;
 * the condvar is 8-aligned, so (futex - 40) & ~7 is its start. */
#define PTW_COND_G_SIGNALS 40

/* The object a futex wait of this kind is about, from the futex address. */
uint64_t ptw_wait_object(enum ptw_wait_kind kind, uint64_t futex);

/* Where the thread that holds a waited-on object is written (its TID): a
 * mutex's owner, a rwlock's writer, a joined thread's tid (tid_at); 0 for
 * what nobody holds (a condition variable, a semaphore). */
uint64_t ptw_wait_owner_at(enum ptw_wait_kind kind, uint64_t object, uint64_t tid_at);


#endif
