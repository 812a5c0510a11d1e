/* SPDX-License-Identifier: MIT */
/* Is the tracer stuck, and where: its progress and its state from /proc,
 * for the front and the restorer; see guardian_int.h. */
#define _GNU_SOURCE
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "guardian_int.h"
#include "ptw_util.h"
#include "ptw_waits.h"

bool ptw_stuck_progress(pid_t pid, struct ptw_progress *ret)
{
	char path[64], buf[1024];
	memset(ret, 0, sizeof(*ret));
	/* utime and stime (fields 14, 15), after the name's last ')' */
	snprintf(path, sizeof(path), "/proc/%d/stat", pid);
	if (ptw_read_small_file(path, buf, sizeof(buf)) <= 0)
		return false;
	const char *p = strrchr(buf, ')');
	unsigned long long ut = 0, st = 0;
	if (!p || sscanf(p + 2, "%*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %llu %llu", &ut,
			 &st) != 2)
		return false;
	ret->cpu = ut + st;
	/* what it read and wrote, and its system calls (/proc/PID/io) */
	snprintf(path, sizeof(path), "/proc/%d/io", pid);
	if (ptw_read_small_file(path, buf, sizeof(buf)) > 0)
		for (char *line = strtok(buf, "\n"); line; line = strtok(NULL, "\n")) {
			unsigned long long v;
			if (sscanf(line, "%*[a-z_]: %llu", &v) == 1 &&
			    (!strncmp(line, "rchar", 5) || !strncmp(line, "wchar", 5) ||
			     !strncmp(line, "syscr", 5) || !strncmp(line, "syscw", 5)))
				ret->io += v;
		}
	return true;
}

/* The calls a tracer may block in that ptw_syscall_name does not know. */
static const char *more_syscall_name(long nr)
{
	switch (nr) {
	case SYS_open:
		return "open";
	case SYS_openat:
		return "openat";
	case SYS_writev:
		return "writev";
	case SYS_pwrite64:
		return "pwrite64";
	case SYS_close:
		return "close";
	case SYS_fsync:
		return "fsync";
	case SYS_fdatasync:
		return "fdatasync";
	case SYS_stat:
		return "stat";
	case SYS_newfstatat:
		return "newfstatat";
	default:
		return NULL;
	}
}

void ptw_stuck_describe(pid_t pid, char *buf, size_t size)
{
	char path[64], text[512], wchan[64] = "";
	snprintf(path, sizeof(path), "/proc/%d/stat", pid);
	char state = '?';
	if (ptw_read_small_file(path, text, sizeof(text)) > 0) {
		const char *p = strrchr(text, ')');
		if (p && p[1] == ' ')
			state = p[2];
	}
	snprintf(path, sizeof(path), "/proc/%d/wchan", pid);
	if (ptw_read_small_file(path, wchan, sizeof(wchan)) <= 0 || !strcmp(wchan, "0"))
		wchan[0] = 0;
	long nr = -1;
	snprintf(path, sizeof(path), "/proc/%d/syscall", pid);
	if (ptw_read_small_file(path, text, sizeof(text)) > 0 && text[0] != 'r')
		nr = strtol(text, NULL, 10);
	char call[48] = "";
	if (nr >= 0) {
		const char *name = ptw_syscall_name(nr);
		if (!name)
			name = more_syscall_name(nr);
		if (name)
			snprintf(call, sizeof(call), "%s()", name);
		else
			snprintf(call, sizeof(call), "system call %ld", nr);
	}
	switch (state) {
	case 'T':
		snprintf(buf, size, "stopped (by SIGSTOP or SIGTSTP)");
		return;
	case 't': {
		long by = ptw_proc_status_field(pid, "TracerPid");
		snprintf(buf, size, "stopped by its debugger (process %ld)", by);
		return;
	}
	case 'R':
		snprintf(buf, size, "running, without getting anywhere");
		return;
	case 'Z':
	case 'X':
		snprintf(buf, size, "ending");
		return;
	default:
		break;
	}
	const char *how = state == 'D' ? "in uninterruptible sleep" : "stuck";
	if (call[0] && wchan[0])
		snprintf(buf, size, "%s in %s (%s)", how, call, wchan);
	else if (call[0] || wchan[0])
		snprintf(buf, size, "%s in %s", how, call[0] ? call : wchan);
	else
		snprintf(buf, size, "%s (state %c)", how, state);
}
