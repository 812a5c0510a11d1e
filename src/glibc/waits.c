/* SPDX-License-Identifier: MIT */
/* Classifying waits; see ptw_waits.h. Pure. */
#include "ptw_waits.h"

#include <string.h>
#include <sys/syscall.h>

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

const char *ptw_syscall_name(long nr)
{
	switch (nr) {
	case SYS_futex:
		return "futex";
	case SYS_read:
		return "read";
	case SYS_write:
		return "write";
	case SYS_readv:
		return "readv";
	case SYS_pread64:
		return "pread64";
	case SYS_poll:
		return "poll";
	case SYS_ppoll:
		return "ppoll";
	case SYS_select:
		return "select";
	case SYS_pselect6:
		return "pselect6";
	case SYS_epoll_wait:
		return "epoll_wait";
	case SYS_epoll_pwait:
		return "epoll_pwait";
	case SYS_nanosleep:
		return "nanosleep";
	case SYS_clock_nanosleep:
		return "clock_nanosleep";
	case SYS_restart_syscall:
		/* a sleep interrupted by a stop (ours, a debugger's, SIGSTOP)
		 * goes on in this call */
		return "restart_syscall";
	case SYS_pause:
		return "pause";
	case SYS_rt_sigsuspend:
		return "rt_sigsuspend";
	case SYS_rt_sigtimedwait:
		return "rt_sigtimedwait";
	case SYS_wait4:
		return "wait4";
	case SYS_waitid:
		return "waitid";
	case SYS_accept:
		return "accept";
	case SYS_accept4:
		return "accept4";
	case SYS_connect:
		return "connect";
	case SYS_recvfrom:
		return "recvfrom";
	case SYS_recvmsg:
		return "recvmsg";
	case SYS_sendto:
		return "sendto";
	case SYS_sendmsg:
		return "sendmsg";
	case SYS_flock:
		return "flock";
	case SYS_fcntl:
		return "fcntl";
	case SYS_fsync:
		return "fsync";
	case SYS_fdatasync:
		return "fdatasync";
	case SYS_ioctl:
		return "ioctl";
	case SYS_openat:
		return "openat";
	case SYS_msgrcv:
		return "msgrcv";
	case SYS_semop:
		return "semop";
	case SYS_semtimedop:
		return "semtimedop";
	case SYS_io_getevents:
		return "io_getevents";
	case SYS_io_uring_enter:
		return "io_uring_enter";
	case SYS_vfork:
		return "vfork";
	case SYS_clone:
		return "clone";
	case SYS_clone3:
		return "clone3";
	case SYS_execve:
		return "execve";
	case SYS_exit_group:
		return "exit_group";
	case SYS_msync:
		return "msync";
	case SYS_sync:
		return "sync";
	case SYS_close:
		return "close";
	case SYS_mmap:
		return "mmap";
	case SYS_munmap:
		return "munmap";
	default:
		return NULL;
	}
}
