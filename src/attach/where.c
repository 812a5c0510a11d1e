/* SPDX-License-Identifier: MIT */
/*
 * Where a running thread is, from /proc alone (the open-timeout event): the
 * thread is not stopped, so this costs the target nothing. /proc/TID/syscall
 * reads the registers the thread saved at its system call entry: the number
 * and the user PC it called from ("running" when it is on a CPU).
 */
#define _GNU_SOURCE
#include "ptw_attach.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ptw_waits.h"

int ptw_where_read(pid_t pid, pid_t tid, struct ptw_where *w)
{
	char path[64], buf[512];
	memset(w, 0, sizeof(*w));
	char state = ptw_proc_state(pid, tid);
	if (!state) {
		snprintf(w->state, sizeof(w->state), "?");
		return -ESRCH;
	}
	snprintf(path, sizeof(path), "/proc/%d/task/%d/wchan", pid, tid);
	if (ptw_read_small_file(path, w->wchan, sizeof(w->wchan)) <= 0 || !strcmp(w->wchan, "0"))
		w->wchan[0] = '\0';
	/* "202 0xADDR ... 0xSP 0xPC" in a system call, "-1 0xSP 0xPC" blocked
	 * outside one, or "running". */
	long nr = -1;
	snprintf(path, sizeof(path), "/proc/%d/task/%d/syscall", pid, tid);
	if (ptw_read_small_file(path, buf, sizeof(buf)) > 0 && buf[0] != 'r') {
		char *p = buf, *last = NULL;
		nr = strtol(p, &p, 10);
		for (char *q = strtok(p, " \n"); q; q = strtok(NULL, " \n"))
			last = q;
		if (last)
			w->pc = strtoull(last, NULL, 16);
	}
	snprintf(path, sizeof(path), "/proc/%d/task/%d/comm", pid, tid);
	if (ptw_read_small_file(path, w->name, sizeof(w->name)) > 0)
		ptw_chomp(w->name);
	const char *sys = nr >= 0 ? ptw_syscall_name(nr) : NULL;
	if (sys)
		snprintf(w->state, sizeof(w->state), "%c %s", state, sys);
	else if (nr >= 0)
		snprintf(w->state, sizeof(w->state), "%c syscall %ld", state, nr);
	else
		snprintf(w->state, sizeof(w->state), "%c", state);
	return 0;
}
