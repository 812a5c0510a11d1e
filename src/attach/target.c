/* SPDX-License-Identifier: MIT */
/*
 * Can ptwatch attach to this pid, and if not, why: the refusals name the
 * cause (docs/design.md, "Safety invariants"). Only /proc is read here.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "ptw_attach.h"

#define PF_KTHREAD 0x00200000

static void comm_of(pid_t pid, char *buf, size_t len)
{
	char path[64];
	snprintf(path, sizeof(path), "/proc/%d/comm", pid);
	if (ptw_read_small_file(path, buf, len) < 0)
		snprintf(buf, len, "?");
	ptw_chomp(buf);
}

int ptw_check_target(pid_t pid, char *why, size_t len)
{
	if (pid <= 0) {
		snprintf(why, len, "%d is not a process id", pid);
		return -EINVAL;
	}
	if (pid == getpid() || pid == getppid()) {
		snprintf(why, len, "%d is ptwatch itself", pid);
		return -EINVAL;
	}
	char state = ptw_proc_state(pid, pid);
	unsigned long long flags = 0;
	if (!state || !ptw_proc_stat_field(pid, 9, &flags)) {
		snprintf(why, len, "no such process");
		return -ESRCH;
	}
	if (flags & PF_KTHREAD) {
		snprintf(why, len, "it is a kernel thread");
		return -EINVAL;
	}
	/* A zombie leader with live workers is fine: attach those. */
	if ((state == 'Z' || state == 'X') && !ptw_proc_alive(pid)) {
		snprintf(why, len, "it is a zombie (it has exited and its parent has not reaped it)");
		return -ESRCH;
	}
	/* Its threads' ids in its own namespace (what glibc and libthread_db
	 * hold, a mutex's owner) are not those ptwatch sees from another:
	 * refused, never silently wrong. */
	if (!ptw_same_pid_ns(pid)) {
		snprintf(why, len,
			 "it is in another PID namespace than ptwatch (its thread ids there are "
			 "not ptwatch's): run ptwatch in its namespace (nsenter -t %d -p -m)",
			 pid);
		return -EXDEV;
	}
	long tracer = ptw_proc_status_field(pid, "TracerPid");
	if (tracer > 0 && tracer != getpid()) {
		char comm[64];
		comm_of((pid_t)tracer, comm, sizeof(comm));
		snprintf(why, len, "it is already traced by PID %ld (%s)", tracer, comm);
		return -EBUSY;
	}
	return 0;
}

bool ptw_same_pid_ns(pid_t pid)
{
	char mine[64], its[64], path[64];
	snprintf(path, sizeof(path), "/proc/%d/ns/pid", pid);
	ssize_t a = readlink("/proc/self/ns/pid", mine, sizeof(mine));
	ssize_t b = readlink(path, its, sizeof(its));
	return a <= 0 || b <= 0 || (a == b && !memcmp(mine, its, (size_t)a));
}

void ptw_explain_eperm(pid_t pid, char *why, size_t len)
{
	char path[64], buf[4096];
	uid_t me = geteuid();
	long uid = -1;
	snprintf(path, sizeof(path), "/proc/%d/status", pid);
	if (ptw_read_small_file(path, buf, sizeof(buf)) > 0) {
		const char *p = strstr(buf, "\nUid:");
		if (p) { /* real, effective, saved, fs: the effective one */
			char *end;
			strtol(p + 5, &end, 10);
			uid = strtol(end, NULL, 10);
		}
	}
	char scope[16] = "";
	if (ptw_read_small_file("/proc/sys/kernel/yama/ptrace_scope", scope, sizeof(scope)) > 0)
		scope[strcspn(scope, "\n")] = '\0';
	if (uid >= 0 && (uid_t)uid != me && me != 0)
		snprintf(why, len,
			 "Operation not permitted (it runs as uid %ld, ptwatch as uid %u: run as the "
			 "same user or with CAP_SYS_PTRACE)",
			 uid, (unsigned)me);
	else if (scope[0] && strcmp(scope, "0"))
		snprintf(why, len,
			 "Operation not permitted (kernel.yama.ptrace_scope is %s: only descendants "
			 "can be traced; set it to 0 or use CAP_SYS_PTRACE)",
			 scope);
	else
		snprintf(why, len,
			 "Operation not permitted (same user needed, or CAP_SYS_PTRACE; a setuid or "
			 "non-dumpable process needs CAP_SYS_PTRACE too)");
}
