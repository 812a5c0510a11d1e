/* SPDX-License-Identifier: MIT */
/* Where a wait's object and holder are; a cycle's key. */
#include "check.h"
#include "ptw_observe.h"
#include "ptw_util.h"
#include "ptw_waits.h"

int main(void)
{
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
