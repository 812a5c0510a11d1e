/* SPDX-License-Identifier: MIT */
/* The memory fds of the traced processes, kept by the front and the
 * restorer to put every journaled byte back; see guardian_int.h. */
#define _GNU_SOURCE
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "guardian_int.h"
#include "ptw_attach.h"
#include "ptw_breakpoints.h"
#include "ptw_util.h"

/* The thread group of the process an fd opened as /proc/TID/mem belongs to. */
static pid_t fd_tgid(int fd)
{
	char link[64], path[64];
	snprintf(link, sizeof(link), "/proc/self/fd/%d", fd);
	ssize_t n = readlink(link, path, sizeof(path) - 1);
	if (n <= 0)
		return 0;
	path[n] = 0;
	int tid;
	if (sscanf(path, "/proc/%d/mem", &tid) != 1)
		return 0;
	unsigned long long tgid = 0;
	/* field 4 of stat is the parent; Tgid is in status */
	char st[64], line[128];
	snprintf(st, sizeof(st), "/proc/%d/status", tid);
	FILE *f = fopen(st, "re");
	if (!f)
		return tid;
	while (fgets(line, sizeof(line), f))
		if (sscanf(line, "Tgid: %llu", &tgid) == 1)
			break;
	fclose(f);
	return tgid ? (pid_t)tgid : tid;
}

/* The fds of processes that have ended go; at most one per pid stays:
 * a /proc look per fd kept, so only once the list has doubled since the
 * last time (-f with thousands of processes alive: not a look at every
 * one at each fork). */
void ptw_memfds_put(struct ptw_memfds *m, int fd)
{
	pid_t pid = fd_tgid(fd);
	bool prune = m->n >= m->prune_at;
	size_t keep = 0;
	for (size_t i = 0; i < m->n; i++) {
		if (m->pid[i] == pid || (prune && !ptw_proc_alive(m->pid[i]))) {
			close(m->fd[i]);
			continue;
		}
		m->pid[keep] = m->pid[i];
		m->fd[keep++] = m->fd[i];
	}
	m->n = keep;
	if (prune)
		m->prune_at = keep < 32 ? 64 : 2 * keep;
	m->pid = xreallocarray(m->pid, m->n + 1, sizeof(*m->pid));
	m->fd = xreallocarray(m->fd, m->n + 1, sizeof(*m->fd));
	m->pid[m->n] = pid;
	m->fd[m->n++] = fd;
}

int ptw_memfds_get(const struct ptw_memfds *m, pid_t pid)
{
	for (size_t i = 0; i < m->n; i++)
		if (m->pid[i] == pid)
			return m->fd[i];
	return -1;
}

static bool among(pid_t pid, const pid_t *pids, size_t n)
{
	for (size_t i = 0; i < n; i++)
		if (pids[i] == pid)
			return true;
	return false;
}

int ptw_memfds_restore(const struct ptw_memfds *m, int *ret_restored)
{
	pid_t pids[JOURNAL_PIDS_MAX];
	size_t n = ptw_bp_journal_pids(pids, JOURNAL_PIDS_MAX);
	int failed = 0;
	*ret_restored = 0;
	for (size_t i = 0; i < n; i++) {
		int restored = 0, fd = ptw_memfds_get(m, pids[i]);
		if (fd < 0)
			continue;
		failed += ptw_bp_journal_restore(pids[i], fd, &restored);
		*ret_restored += restored;
	}
	/* A process forked by a traced one that the tracer had not set up
	 * yet (or let go of) may still hold a copy of its parent's int3s; so
	 * may its own children, forked before it ran any of ours. */
	for (size_t i = 0; i < n; i++) {
		pid_t *queue = NULL;
		size_t nq = 0;
		nq = ptw_proc_children(pids[i], &queue, NULL, nq);
		for (size_t k = 0; k < nq && k < 4096; k++) {
			if (among(queue[k], pids, n))
				continue;
			int restored = 0;
			if (ptw_bp_journal_restore_copy(pids[i], queue[k], &restored) == 0) {
				*ret_restored += restored;
				if (restored)
					nq = ptw_proc_children(queue[k], &queue, NULL, nq);
			}
		}
		free(queue);
	}
	return failed;
}
