/* SPDX-License-Identifier: MIT */
#define _GNU_SOURCE
#include "journal.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include "ptw_attach.h"

struct journal *journal_new(pid_t pid)
{
	struct journal *j = mmap(NULL, sizeof(*j), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS,
				 -1, 0);
	if (j == MAP_FAILED)
		return NULL;
	j->pid = pid;
	return j;
}

void journal_free(struct journal *j)
{
	if (j)
		munmap(j, sizeof(*j));
}

bool journal_same_mapping(const struct journal_entry *e, const struct ptw_mapping *m)
{
	return m && m->inode == e->inode && makedev(m->dev_major, m->dev_minor) == e->dev &&
	       m->offset + (e->addr - m->start) == e->file_offset;
}

int journal_add(struct journal *j, const struct ptw_mapping *m, uint64_t addr, uint8_t orig)
{
	if (j->count >= JOURNAL_CAPACITY)
		return -ENOSPC;
	struct journal_entry *e = &j->entries[j->count];
	e->addr = addr;
	e->file_offset = m->offset + (addr - m->start);
	e->inode = m->inode;
	e->dev = makedev(m->dev_major, m->dev_minor);
	e->orig = orig;
	e->state = JOURNAL_ACTIVE;
	/* Publish the entry only once it is complete. */
	__atomic_store_n(&j->count, j->count + 1, __ATOMIC_RELEASE);
	return 0;
}

/* The maps of the group: a zombie leader's are empty, so any live thread's. */
static int group_maps(pid_t tgid, struct ptw_mapping **ret)
{
	int n = ptw_maps_read(tgid, ret);
	if (n > 0)
		return n;
	free(*ret);
	*ret = NULL;
	pid_t *tids;
	int ntids = ptw_proc_tids(tgid, &tids);
	for (int i = 0; i < ntids; i++) {
		if (tids[i] == tgid)
			continue;
		if ((n = ptw_maps_read(tids[i], ret)) > 0)
			break;
		free(*ret);
		*ret = NULL;
	}
	free(tids);
	return n;
}

int journal_restore(struct journal *j, pid_t pid, int mem_fd, int *ret_restored)
{
	if (ret_restored)
		*ret_restored = 0;
	uint32_t active = 0;
	for (uint32_t i = 0; i < j->count && !active; i++)
		active += j->entries[i].state == JOURNAL_ACTIVE;
	if (!active) /* (the maps of 10,000 threads take long to read) */
		return 0;
	struct ptw_mapping *maps = NULL;
	int n = group_maps(pid, &maps);
	int failed = 0, restored = 0;
	for (uint32_t i = 0; i < j->count; i++) {
		struct journal_entry *e = &j->entries[i];
		if (e->state != JOURNAL_ACTIVE)
			continue;
		if (n <= 0) {
			/* No maps to check identity against: write only where our
			 * int3 still is. */
			uint8_t now;
			if (mem_fd < 0 || pread(mem_fd, &now, 1, (off_t)e->addr) != 1) {
				failed++;
				continue;
			}
			if (now != 0xcc) {
				e->state = JOURNAL_RESTORED; /* not ours any more */
				continue;
			}
		} else {
			if (!journal_same_mapping(e, ptw_maps_find(maps, n, e->addr))) {
				/* The mapping changed (dlclose, exec): never write there. */
				e->state = JOURNAL_RESTORED;
				continue;
			}
		}
		if (ptw_mem_poke_pid(pid, mem_fd, e->addr, &e->orig, 1) == 0) {
			e->state = JOURNAL_RESTORED;
			restored++;
		} else {
			failed++;
		}
	}
	free(maps);
	if (ret_restored)
		*ret_restored = restored;
	return failed;
}

void journal_add_xol(struct journal *j, uint64_t page, uint64_t syscall_insn)
{
	j->syscall_insn = syscall_insn;
	if (j->nxol < JOURNAL_XOL_PAGES) {
		j->xol[j->nxol] = page;
		__atomic_store_n(&j->nxol, j->nxol + 1, __ATOMIC_RELEASE);
	}
}

void journal_drop_xol(struct journal *j, uint64_t page)
{
	for (uint32_t i = 0; i < j->nxol; i++)
		if (j->xol[i] == page)
			j->xol[i] = 0;
}

void journal_clear(struct journal *j)
{
	for (uint32_t i = 0; i < j->count; i++)
		j->entries[i].state = JOURNAL_FREE;
	j->count = 0;
	j->nxol = 0;
}

void journal_emergency_restore(struct journal *j, int mem_fd)
{
	uint32_t count = __atomic_load_n(&j->count, __ATOMIC_ACQUIRE);
	for (uint32_t i = 0; i < count; i++) {
		struct journal_entry *e = &j->entries[i];
		if (e->state == JOURNAL_ACTIVE &&
		    pwrite(mem_fd, &e->orig, 1, (off_t)e->addr) == 1)
			e->state = JOURNAL_RESTORED;
	}
}
