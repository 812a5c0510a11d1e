/* SPDX-License-Identifier: MIT */
/*
 * The journal of patched bytes. It lives in a MAP_SHARED anonymous mapping
 * so that a guardian process forked from ptwatch sees the same entries and
 * can restore them if the process holding ptrace dies; and it is read with
 * nothing but loads and pwrite, so a fatal-signal handler can restore too.
 */
#ifndef PTW_BP_JOURNAL_H
#define PTW_BP_JOURNAL_H

#include <stdint.h>
#include <sys/types.h>

#include "ptw_util.h"

enum { JOURNAL_FREE = 0, JOURNAL_ACTIVE = 1, JOURNAL_RESTORED = 2 };

struct journal_entry {
	uint64_t addr;
	uint64_t file_offset; /* offset of addr in the mapped file (identity) */
	uint64_t inode;
	uint32_t dev;
	uint8_t orig;
	volatile uint8_t state;
};

#define JOURNAL_CAPACITY 65536
#define JOURNAL_XOL_PAGES 64

/* Traced processes at once, each with a journal (ptw_bp_journal_prepare). */
#define JOURNAL_SLOTS 64

struct journal {
	volatile int32_t pid; /* the thread group (any live thread's maps will do) */
	volatile int32_t in_use; /* a table holds this slot */
	volatile uint32_t count;
	/* Out-of-line pages mapped in pid (0: unmapped since), and a `syscall`
	 * instruction there to unmap them with, for the restorer. */
	uint64_t syscall_insn;
	volatile uint32_t nxol;
	uint64_t xol[JOURNAL_XOL_PAGES];
	struct journal_entry entries[JOURNAL_CAPACITY];
};

/* Maps a new empty journal; NULL on failure. */
struct journal *journal_new(pid_t pid);
void journal_free(struct journal *j);
/* Does mapping m still hold the file range entry e was made in? */
bool journal_same_mapping(const struct journal_entry *e, const struct ptw_mapping *m);
/* Records addr (in mapping m) before it is poked; -ENOSPC when full. */
int journal_add(struct journal *j, const struct ptw_mapping *m, uint64_t addr, uint8_t orig);
/* Restores every active entry of pid's memory whose mapping is unchanged
 * (read from any live thread of the group; if no maps can be read, an entry
 * is restored only if its byte still is our int3). Returns the number of
 * entries that could not be restored. */
int journal_restore(struct journal *j, pid_t pid, int mem_fd, int *ret_restored);
/* Notes a page mapped for out-of-line execution (pages past the capacity
 * are not noted: the restorer then cannot offer to unmap them). */
void journal_add_xol(struct journal *j, uint64_t page, uint64_t syscall_insn);
/* The page is unmapped. */
void journal_drop_xol(struct journal *j, uint64_t page);
/* Forgets every entry (exec: the address space they described is gone). */
void journal_clear(struct journal *j);
/* Async-signal-safe: pwrite every active entry through mem_fd, no checks. */
void journal_emergency_restore(struct journal *j, int mem_fd);

#endif
