/* SPDX-License-Identifier: MIT */
/* The breakpoint table, XOL pages, stepping over; see ptw_breakpoints.h. */
#define _GNU_SOURCE
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <fcntl.h>
#include <unistd.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/syscall.h>

#include "journal.h"
#include "ptw_attach.h"
#include "ptw_breakpoints.h"
#include "ptw_util.h"

#ifndef MAP_FIXED_NOREPLACE
#define MAP_FIXED_NOREPLACE 0x100000
#endif

#define PAGE 4096u
#define XOL_SLOTS (PAGE / PTW_XOL_SLOT_SIZE)
/* rel32 reaches +-2 GiB; stay well inside so any slot in the page works. */
#define XOL_REACH (1ull << 30)

struct xol_page {
	uint64_t addr;
	unsigned used;
};

struct ptw_bptab {
	struct ptw_proc *proc;
	struct ptw_map by_addr; /* addr -> struct ptw_bp* */
	struct journal *journal;
	struct xol_page *pages;
	size_t npages;
	uint64_t syscall_insn; /* a `syscall` instruction in the target (vdso) */
	size_t inserted;       /* over the whole session */
	size_t moved;	       /* hooks ever moved beside another tool's int3 (take_back) */
	/* /proc/PID/maps, parsed once per stop: with 10,000 threads it has
	 * 20,000 lines, and every insertion needs a mapping identity. */
	struct ptw_mapping *maps;
	int nmaps;
	uint64_t maps_gen;
};

static int maps_now(struct ptw_bptab *t, const struct ptw_mapping **ret)
{
	if (!t->maps || t->maps_gen != ptw_proc_root(t->proc)->counts.total) {
		free(t->maps);
		t->maps = NULL;
		t->nmaps = ptw_maps_read(t->proc->mem_pid, &t->maps);
		if (t->nmaps < 0) {
			int r = t->nmaps;
			t->nmaps = 0;
			return r;
		}
		t->maps_gen = ptw_proc_root(t->proc)->counts.total;
	}
	*ret = t->maps;
	return t->nmaps;
}

static void maps_changed(struct ptw_bptab *t)
{
	free(t->maps);
	t->maps = NULL;
}

/* For ptw_bp_emergency_restore: the live tables (one per traced process). */
#define MAX_TABLES JOURNAL_SLOTS
static struct ptw_bptab *volatile live_tables[MAX_TABLES];

/*
 * The shared journals (ptw_bp_journal_prepare), one slot per traced
 * process, or NULL. A slot is taken by a table (pid set at its first
 * entry) and given back when the table is freed; the guardian restores
 * every slot that has a pid.
 */
static struct journal *shared_journals;

int ptw_bp_journal_prepare(void)
{
	if (!shared_journals) {
		void *m = mmap(NULL, JOURNAL_SLOTS * sizeof(struct journal), PROT_READ | PROT_WRITE,
			       MAP_SHARED | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
		if (m != MAP_FAILED)
			shared_journals = m;
	}
	return shared_journals ? 0 : -ENOMEM;
}

size_t ptw_bp_journal_pids(pid_t *pids, size_t max)
{
	size_t n = 0;
	for (size_t i = 0; shared_journals && i < JOURNAL_SLOTS && n < max; i++) {
		pid_t pid = shared_journals[i].pid;
		if (pid && shared_journals[i].in_use)
			pids[n++] = pid;
	}
	return n;
}

static struct journal *slot_of(pid_t pid)
{
	for (size_t i = 0; shared_journals && pid && i < JOURNAL_SLOTS; i++)
		if (shared_journals[i].in_use && shared_journals[i].pid == pid)
			return &shared_journals[i];
	return NULL;
}

int ptw_bp_journal_restore(pid_t pid, int mem_fd, int *ret_restored)
{
	*ret_restored = 0;
	struct journal *j = slot_of(pid);
	if (!j)
		return 0;
	return journal_restore(j, pid, mem_fd, ret_restored);
}

/*
 * Child holds a copy of the address space j is about (fork). Every byte
 * j ever patched goes back where the child's copy still has our int3 in
 * the same file range, whatever the entry's state: the copy was taken at
 * the fork, and the parent's byte may have been put back (a return
 * breakpoint nobody needs any more) or patched again since, before the
 * fork was seen. Returns how many writes failed (-errno: the child's
 * memory or maps cannot be read); *ret_restored counts the bytes put back.
 */
static int restore_copy(struct journal *j, pid_t child, int *ret_restored)
{
	*ret_restored = 0;
	char path[64];
	snprintf(path, sizeof(path), "/proc/%d/mem", child);
	int fd = open(path, O_RDWR | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	struct ptw_mapping *maps = NULL;
	int n = ptw_maps_read(child, &maps);
	if (n < 0) {
		close(fd);
		return n;
	}
	int failed = 0;
	uint32_t count = __atomic_load_n(&j->count, __ATOMIC_ACQUIRE);
	for (uint32_t i = 0; i < count; i++) {
		struct journal_entry *e = &j->entries[i];
		uint8_t now;
		if (e->state == JOURNAL_FREE ||
		    !journal_same_mapping(e, ptw_maps_find(maps, n, e->addr)) ||
		    pread(fd, &now, 1, (off_t)e->addr) != 1 || now != 0xcc)
			continue;
		if (pwrite(fd, &e->orig, 1, (off_t)e->addr) == 1)
			(*ret_restored)++;
		else
			failed++;
	}
	free(maps);
	close(fd);
	return failed;
}

int ptw_bp_journal_restore_copy(pid_t parent, pid_t child, int *ret_restored)
{
	*ret_restored = 0;
	struct journal *j = slot_of(parent);
	if (!j)
		return 0;
	int r = restore_copy(j, child, ret_restored);
	return r < 0 ? r : 0;
}

pid_t ptw_bp_journal_pid(void)
{
	pid_t pid;
	return ptw_bp_journal_pids(&pid, 1) ? pid : 0;
}

size_t ptw_bp_journal_xol(pid_t pid, uint64_t *pages, size_t max, uint64_t *ret_syscall_insn)
{
	size_t n = 0;
	struct journal *j = slot_of(pid);
	if (!j)
		return 0;
	uint32_t count = __atomic_load_n(&j->nxol, __ATOMIC_ACQUIRE);
	for (uint32_t i = 0; i < count && n < max; i++)
		if (j->xol[i])
			pages[n++] = j->xol[i];
	*ret_syscall_insn = j->syscall_insn;
	return n;
}

void ptw_bp_journal_xol_unmapped(pid_t pid, uint64_t page)
{
	struct journal *j = slot_of(pid);
	if (j)
		journal_drop_xol(j, page);
}

int ptw_bptab_new(struct ptw_proc *proc, struct ptw_bptab **ret)
{
	struct ptw_bptab *t = xcalloc(1, sizeof(*t));
	t->proc = proc;
	if (shared_journals) {
		for (size_t i = 0; i < JOURNAL_SLOTS && !t->journal; i++) {
			struct journal *j = &shared_journals[i];
			if (j->in_use)
				continue;
			journal_clear(j);
			j->pid = 0;
			__atomic_store_n(&j->in_use, 1, __ATOMIC_RELEASE);
			t->journal = j;
		}
		if (!t->journal) {
			free(t);
			return -ENOSPC; /* every slot holds a live process's bytes */
		}
	} else {
		t->journal = journal_new(proc->pid);
	}
	if (!t->journal) {
		free(t);
		return -ENOMEM;
	}
	for (size_t i = 0; i < MAX_TABLES; i++)
		if (!live_tables[i]) {
			live_tables[i] = t;
			break;
		}
	*ret = t;
	return 0;
}

static bool is_shared(const struct journal *j)
{
	return shared_journals && j >= shared_journals && j < shared_journals + JOURNAL_SLOTS;
}

static void free_bps(struct ptw_bptab *t)
{
	size_t it = 0;
	void *v;
	while (ptw_map_next(&t->by_addr, &it, NULL, &v))
		free(v);
	ptw_map_free(&t->by_addr);
}

void ptw_bptab_free(struct ptw_bptab *t)
{
	if (!t)
		return;
	for (size_t i = 0; i < MAX_TABLES; i++)
		if (live_tables[i] == t)
			live_tables[i] = NULL;
	free_bps(t);
	if (is_shared(t->journal)) {
		/* Whatever it holds is restored or gone with the process. */
		journal_clear(t->journal);
		t->journal->pid = 0;
		__atomic_store_n(&t->journal->in_use, 0, __ATOMIC_RELEASE);
	} else {
		journal_free(t->journal);
	}
	free(t->pages);
	free(t->maps);
	free(t);
}

struct ptw_bp *ptw_bp_find(struct ptw_bptab *t, uint64_t addr)
{
	return ptw_map_get(&t->by_addr, addr);
}

size_t ptw_bp_count(const struct ptw_bptab *t)
{
	return t ? t->inserted : 0;
}

size_t ptw_bp_xol_pages(const struct ptw_bptab *t)
{
	return t->npages;
}

int ptw_bp_read_original(struct ptw_bptab *t, uint64_t addr, void *buf, size_t len)
{
	int r = ptw_mem_read(t->proc, addr, buf, len);
	if (r < 0)
		return r;
	for (size_t i = 0; i < len; i++) {
		struct ptw_bp *bp = ptw_bp_find(t, addr + i);
		if (bp)
			((uint8_t *)buf)[i] = bp->orig;
	}
	return 0;
}

/* ---- XOL pages ---- */

/* A `syscall` (0f 05) in the vdso: executing those two bytes is a system
 * call wherever they sit, so any occurrence will do. */
static int find_syscall_insn(struct ptw_bptab *t)
{
	if (t->syscall_insn)
		return 0;
	const struct ptw_mapping *maps;
	int n = maps_now(t, &maps);
	if (n < 0)
		return n;
	int r = -ENOENT;
	for (int i = 0; i < n && r < 0; i++) {
		if (strcmp(maps[i].path, "[vdso]") && !strstr(maps[i].path, "/libc.so"))
			continue;
		if (maps[i].perms[2] != 'x')
			continue;
		/* In small pieces: the first one is near the start, and reading
		 * all of libc's text (faulting it into the target) took ms. */
		enum { CHUNK = 16384 };
		uint8_t buf[CHUNK];
		uint64_t end = maps[i].end - maps[i].start > (1u << 22) ? maps[i].start + (1u << 22)
								      : maps[i].end;
		for (uint64_t a = maps[i].start; a + 1 < end && r < 0; a += CHUNK - 1) {
			size_t len = end - a < CHUNK ? (size_t)(end - a) : CHUNK;
			if (ptw_bp_read_original(t, a, buf, len) < 0)
				break;
			for (size_t k = 0; k + 1 < len; k++)
				if (buf[k] == 0x0f && buf[k + 1] == 0x05) {
					t->syscall_insn = a + k;
					r = 0;
					break;
				}
		}
	}
	return r;
}

static uint64_t distance(uint64_t a, uint64_t b)
{
	return a > b ? a - b : b - a;
}

/* Where the brk heap starts (/proc/PID/stat field 47), or 0. */
static uint64_t start_brk(pid_t pid)
{
	unsigned long long brk;
	return ptw_proc_stat_field(pid, 47, &brk) ? brk : 0;
}

/*
 * Free page-aligned addresses near target, best first (up to max). Never in
 * room the target grows into: the heap grows up from brk (so only the top
 * end of the gap above it), the stack grows down (skip the gap below it).
 * The top end of a gap is where the kernel's own top-down mmap would go.
 */
static int gap_candidates(const struct ptw_mapping *maps, int n, uint64_t target, uint64_t brk,
			  uint64_t *out, int max)
{
	int k = 0;
	for (int i = 0; i <= n && k < max; i++) {
		uint64_t lo = i == 0 ? 0x10000 : maps[i - 1].end;
		uint64_t hi = i == n ? 0x7ffffffff000ull : maps[i].start;
		if (hi < lo + 3 * PAGE || (i < n && !strcmp(maps[i].path, "[stack]")))
			continue;
		bool heap_below = (i > 0 && !strcmp(maps[i - 1].path, "[heap]")) ||
				  (brk && lo <= brk && brk < hi);
		/* Keep a page of distance from neighbours (guard gaps). */
		uint64_t cand = heap_below || target > hi - 2 * PAGE ? hi - 2 * PAGE
				: target < lo + PAGE		    ? lo + PAGE
								    : (target & ~(uint64_t)(PAGE - 1));
		if (distance(cand, target) < XOL_REACH)
			out[k++] = cand;
	}
	/* Nearest first. */
	for (int i = 1; i < k; i++)
		for (int j = i; j > 0 && distance(out[j], target) < distance(out[j - 1], target); j--) {
			uint64_t tmp = out[j];
			out[j] = out[j - 1];
			out[j - 1] = tmp;
		}
	return k;
}

static int xol_page_new(struct ptw_bptab *t, uint64_t near, struct ptw_lwp *host,
			struct xol_page **ret)
{
	if (!ptw_lwp_injectable(host))
		return -EAGAIN;
	int r = find_syscall_insn(t);
	if (r < 0)
		return r;
	const struct ptw_mapping *maps;
	int n = maps_now(t, &maps);
	if (n < 0)
		return n;
	uint64_t cands[16];
	int k = gap_candidates(maps, n, near, start_brk(t->proc->mem_pid), cands, 16);
	maps_changed(t); /* we are about to map a page */
	for (int i = 0; i < k; i++) {
		uint64_t args[6] = { cands[i], PAGE, PROT_READ | PROT_EXEC,
				     MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED_NOREPLACE, (uint64_t)-1, 0 };
		int64_t got;
		r = ptw_inject_syscall(t->proc, host, t->syscall_insn, SYS_mmap, args, &got);
		if (r < 0)
			return r;
		if (got < 0 && got > -4096)
			continue; /* EEXIST: raced with the target's own mmap */
		if ((uint64_t)got != cands[i]) {
			/* A kernel without MAP_FIXED_NOREPLACE took it as a hint. */
			if (distance((uint64_t)got, near) >= XOL_REACH) {
				uint64_t un[6] = { (uint64_t)got, PAGE, 0, 0, 0, 0 };
				int64_t ignored;
				ptw_inject_syscall(t->proc, host, t->syscall_insn, SYS_munmap, un, &ignored);
				continue;
			}
		}
		t->pages = xreallocarray(t->pages, t->npages + 1, sizeof(*t->pages));
		struct xol_page *pg = &t->pages[t->npages++];
		pg->addr = (uint64_t)got;
		pg->used = 0;
		journal_add_xol(t->journal, pg->addr, t->syscall_insn);
		ptw_dbg(PTW_DBG_BP, "xol page at %#llx (near %#llx)", (unsigned long long)pg->addr,
			(unsigned long long)near);
		*ret = pg;
		return 0;
	}
	return -ENOMEM;
}

/* A slot for plan's copy (of the instruction at addr): in a page already
 * mapped (any, when nothing in the copy is rip-relative: it jumps back
 * absolutely), else in a new one near addr that host maps (NULL: no new
 * page, -EAGAIN). */
static int xol_slot(struct ptw_bptab *t, const struct ptw_insn_plan *plan, uint64_t addr,
		    struct ptw_lwp *host, uint64_t *ret)
{
	struct xol_page *pg = NULL;
	for (size_t i = 0; i < t->npages && !pg; i++)
		if (t->pages[i].used < XOL_SLOTS &&
		    (!plan->rip_relative || distance(t->pages[i].addr, addr) < XOL_REACH))
			pg = &t->pages[i];
	if (!pg && !host)
		return -EAGAIN;
	if (!pg) {
		int r = xol_page_new(t, addr, host, &pg);
		if (r < 0)
			return r;
	}
	uint64_t slot = pg->addr + pg->used * PTW_XOL_SLOT_SIZE;
	uint8_t code[PTW_XOL_SLOT_SIZE];
	int n = ptw_insn_xol_code(plan, addr, slot, code);
	if (n < 0)
		return n;
	int r = ptw_mem_write(t->proc, slot, code, PTW_XOL_SLOT_SIZE);
	if (r < 0)
		return r;
	pg->used++;
	*ret = slot;
	return 0;
}

/* ---- insert / step over ---- */

/* The bytes of m's file at addr (m maps it): 0, or -errno (-ESTALE: the
 * file at that path is no longer the one mapped). */
static int file_bytes(const struct ptw_mapping *m, uint64_t addr, uint8_t *buf, size_t len)
{
	if (!m->inode || m->path[0] != '/')
		return -ENOENT;
	int fd = open(m->path, O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK);
	if (fd < 0)
		return -errno;
	struct stat st;
	int r = 0;
	if (fstat(fd, &st) < 0)
		r = -errno;
	else if (!S_ISREG(st.st_mode) || st.st_ino != m->inode ||
		 major(st.st_dev) != m->dev_major || minor(st.st_dev) != m->dev_minor)
		r = -ESTALE;
	else if (pread(fd, buf, len, (off_t)(m->offset + (addr - m->start))) != (ssize_t)len)
		r = -EIO;
	close(fd);
	return r;
}

/* The hooks for a function's entry at addr (code: its first bytes), at
 * its next instruction (bp->entry = addr): 1, or -ENOTSUP when the first
 * instruction cannot be undone (stack_only: is not one that moves the
 * stack pointer, or a test before its jump, and so cannot be a branch
 * target inside the function). */
static int insert_past(struct ptw_bptab *t, const struct ptw_mapping *m, uint64_t addr,
		       const uint8_t *code, size_t len, bool stack_only, unsigned hooks,
		       struct ptw_lwp *host, struct ptw_bp **ret)
{
	uint64_t next;
	uint32_t shift;
	int k = ptw_insn_entry_step(code, len, addr, &next, &shift);
	if (k < 0 || next >= m->end || (stack_only && !shift && k != 1))
		return -ENOTSUP;
	struct ptw_bp *bp = NULL;
	int r = ptw_bp_insert(t, next, hooks, host, &bp);
	if (r < 0)
		return r;
	bp->entry = addr;
	bp->entry_sp = shift;
	ptw_dbg(PTW_DBG_BP, "%#llx: hooked past the entry, at %#llx (rsp +%u)",
		(unsigned long long)addr, (unsigned long long)next, shift);
	if (ret)
		*ret = bp;
	return 1;
}

int ptw_bp_insert_past_entry(struct ptw_bptab *t, uint64_t addr, unsigned hooks,
			     struct ptw_lwp *host, struct ptw_bp **ret)
{
	uint8_t code[16];
	int r = ptw_bp_read_original(t, addr, code, sizeof(code));
	/* (one of ours there already: its hooks join it; another tool's:
	 * ptw_bp_insert moves them) */
	if (r < 0 || code[0] == 0xcc || ptw_bp_find(t, addr))
		return ptw_bp_insert(t, addr, hooks, host, ret);
	const struct ptw_mapping *maps;
	int nmaps = maps_now(t, &maps);
	const struct ptw_mapping *m = nmaps > 0 ? ptw_maps_find(maps, nmaps, addr) : NULL;
	if (!m)
		return ptw_bp_insert(t, addr, hooks, host, ret);
	r = insert_past(t, m, addr, code, sizeof(code), true, hooks, host, ret);
	return r == -ENOTSUP ? ptw_bp_insert(t, addr, hooks, host, ret) : r;
}

/*
 * addr holds an int3 that is not ptwatch's. Its file's, the program's own
 * (-EEXIST: left to the program); another tool's (a kernel uprobe, which
 * takes the trap before ptrace would see it, or another debugger's):
 * the hook moves to the function's next instruction when the first one
 * can be undone (ptw_insn_entry_step), and the handlers see the
 * registers as at addr (bp->entry): 1 and that breakpoint. -EBUSY when
 * it cannot move.
 */
static int insert_beside(struct ptw_bptab *t, uint64_t addr, unsigned hooks, struct ptw_lwp *host,
			 struct ptw_bp **ret)
{
	const struct ptw_mapping *maps;
	int nmaps = maps_now(t, &maps);
	const struct ptw_mapping *m = nmaps > 0 ? ptw_maps_find(maps, nmaps, addr) : NULL;
	uint8_t file[16];
	if (!m || file_bytes(m, addr, file, sizeof(file)) < 0 || file[0] == 0xcc)
		return -EEXIST;
	struct ptw_bp *bp = NULL;
	int r = insert_past(t, m, addr, file, sizeof(file), false, hooks, host, &bp);
	if (r == 1) {
		bp->beside = true;
		t->moved++;
	}
	if (ret)
		*ret = bp;
	return r == -ENOTSUP || r == -EEXIST ? -EBUSY : r;
}

/* The hooks moved from addr (insert_beside) leave the breakpoint they
 * moved to: addr is free again. */
static void take_back(struct ptw_bptab *t, uint64_t addr, unsigned hooks)
{
	size_t it = 0;
	void *v;
	while (ptw_map_next(&t->by_addr, &it, NULL, &v)) {
		struct ptw_bp *bp = v;
		if (bp->entry != addr || !bp->beside)
			continue;
		ptw_bp_remove_hooks(t, bp, hooks);
		if (!bp->hooks) {
			bp->entry = 0;
			bp->beside = false;
		}
		return;
	}
}

int ptw_bp_insert(struct ptw_bptab *t, uint64_t addr, unsigned hooks, struct ptw_lwp *host,
		  struct ptw_bp **ret)
{
	struct ptw_bp *bp = ptw_bp_find(t, addr);
	if (bp && bp->idle) {
		/* Put back where nothing needed it any more: the same journal
		 * entry is active again before the byte is poked. */
		static const uint8_t int3 = 0xcc;
		__atomic_store_n(&t->journal->entries[bp->journal_index].state, JOURNAL_ACTIVE,
				 __ATOMIC_SEQ_CST);
		int r = ptw_mem_poke(t->proc, addr, &int3, 1);
		if (r < 0) {
			t->journal->entries[bp->journal_index].state = JOURNAL_RESTORED;
			return r;
		}
		bp->idle = false;
		bp->disabled = false;
	}
	if (bp) {
		bp->hooks |= hooks;
		if (ret)
			*ret = bp;
		return 0;
	}
	uint8_t code[16];
	int r = ptw_bp_read_original(t, addr, code, sizeof(code));
	if (r < 0)
		r = ptw_bp_read_original(t, addr, code, 1); /* at the end of a mapping */
	if (r < 0)
		return r;
	if (code[0] == 0xcc) /* the program's own, or another tool's */
		return insert_beside(t, addr, hooks, host, ret);
	if (t->moved) /* the other tool's int3 went: these hooks come back */
		take_back(t, addr, hooks);
	/* Code only: an int3 anywhere else would corrupt data. */
	const struct ptw_mapping *maps;
	int nmaps = maps_now(t, &maps);
	const struct ptw_mapping *m = nmaps > 0 ? ptw_maps_find(maps, nmaps, addr) : NULL;
	if (!m)
		return nmaps < 0 ? nmaps : -ENOENT;
	if (m->perms[2] != 'x')
		return -EFAULT;

	struct ptw_bp tmp;
	memset(&tmp, 0, sizeof(tmp));
	tmp.addr = addr;
	tmp.orig = code[0];
	tmp.hooks = hooks;
	r = ptw_insn_plan(code, sizeof(code), addr, &tmp.plan);
	if (r < 0) {
		ptw_dbg(PTW_DBG_BP, "%#llx: cannot step over (%s)", (unsigned long long)addr,
			strerror(-r));
		return r == -EINVAL ? -ENOTSUP : r;
	}
	if (tmp.plan.kind == PTW_INSN_XOL) {
		r = xol_slot(t, &tmp.plan, addr, host, &tmp.xol_slot);
		if (r < 0)
			return r;
	}
	/* Journal first, then poke: a crash in between leaves nothing unjournaled.
	 * (An XOL page may have been mapped: the mapping list is read again.) */
	nmaps = maps_now(t, &maps);
	m = nmaps > 0 ? ptw_maps_find(maps, nmaps, addr) : NULL;
	if (!m)
		return nmaps < 0 ? nmaps : -ENOENT;
	t->journal->pid = t->proc->pid;
	tmp.journal_index = t->journal->count;
	r = journal_add(t->journal, m, addr, tmp.orig);
	if (r < 0)
		return r;
	static const uint8_t int3 = 0xcc;
	r = ptw_mem_poke(t->proc, addr, &int3, 1);
	if (r < 0)
		return r;
	bp = xmalloc(sizeof(*bp));
	*bp = tmp;
	ptw_map_put(&t->by_addr, addr, bp);
	t->inserted++;
	ptw_dbg(PTW_DBG_BP, "insert %#llx (%s) %s", (unsigned long long)addr, bp->plan.text,
		bp->plan.kind == PTW_INSN_XOL ? "out of line" : "emulated");
	if (ret)
		*ret = bp;
	return 0;
}

static int mem_write_cb(void *ctx, uint64_t addr, const void *buf, size_t len)
{
	return ptw_mem_write(ctx, addr, buf, len);
}

/*
 * An emulated push or ret reads or writes the stack at every hit (one
 * system call); out of line it costs none. Once a page is there anyway,
 * its copy goes there (tried at the first hit: only hot points pay the
 * slot's write).
 */
static void prefer_out_of_line(struct ptw_bptab *t, struct ptw_bp *bp)
{
	if (bp->xol_tried || (bp->plan.kind != PTW_INSN_PUSH_REG && bp->plan.kind != PTW_INSN_RET))
		return;
	bp->xol_tried = true;
	struct ptw_insn_plan xol = bp->plan;
	xol.kind = PTW_INSN_XOL;
	uint64_t slot;
	if (t->npages && xol_slot(t, &xol, bp->addr, NULL, &slot) == 0) {
		bp->plan = xol;
		bp->xol_slot = slot;
		ptw_dbg(PTW_DBG_BP, "%#llx (%s): out of line from now on",
			(unsigned long long)bp->addr, bp->plan.text);
	}
}

int ptw_bp_step_over(struct ptw_bptab *t, struct ptw_bp *bp, struct ptw_lwp *l)
{
	struct user_regs_struct *regs;
	int r = ptw_getregs(t->proc, l, &regs);
	if (r < 0)
		return r;
	prefer_out_of_line(t, bp);
	if (bp->plan.kind == PTW_INSN_XOL) {
		regs->rip = bp->xol_slot;
	} else {
		struct ptw_insn_mem mem = { ptw_mem_reader, mem_write_cb, t->proc };
		r = ptw_insn_emulate(&bp->plan, bp->addr, regs, &mem);
		if (r < 0)
			return r;
	}
	ptw_regs_dirty(l);
	return 0;
}

int ptw_bp_disable(struct ptw_bptab *t, struct ptw_bp *bp)
{
	if (bp->disabled)
		return 0;
	int r = ptw_mem_poke(t->proc, bp->addr, &bp->orig, 1);
	if (r == 0) {
		bp->disabled = true;
		t->journal->entries[bp->journal_index].state = JOURNAL_RESTORED;
	}
	return r;
}

int ptw_bp_remove_hooks(struct ptw_bptab *t, struct ptw_bp *bp, unsigned hooks)
{
	bp->hooks &= ~hooks;
	if (bp->hooks || bp->disabled)
		return 0;
	int r = ptw_bp_disable(t, bp);
	if (r == 0)
		bp->idle = true;
	return r;
}

int ptw_bp_revalidate(struct ptw_bptab *t)
{
	const struct ptw_mapping *maps;
	maps_changed(t);
	int n = maps_now(t, &maps);
	if (n < 0)
		return 0;
	size_t it = 0;
	void *v;
	struct ptw_bp **gone = NULL;
	size_t ngone = 0;
	while (ptw_map_next(&t->by_addr, &it, NULL, &v)) {
		struct ptw_bp *bp = v;
		struct journal_entry *e = &t->journal->entries[bp->journal_index];
		if (journal_same_mapping(e, ptw_maps_find(maps, n, bp->addr)))
			continue;
		e->state = JOURNAL_RESTORED; /* unmapped with its library: nothing to write */
		gone = xreallocarray(gone, ngone + 1, sizeof(*gone));
		gone[ngone++] = bp;
	}
	for (size_t i = 0; i < ngone; i++) {
		ptw_dbg(PTW_DBG_BP, "forget %#llx: its library is gone", (unsigned long long)gone[i]->addr);
		ptw_map_del(&t->by_addr, gone[i]->addr);
		free(gone[i]);
	}
	free(gone);
	return (int)ngone;
}

static bool in_xol_page(const struct ptw_bptab *t, uint64_t addr)
{
	for (size_t i = 0; i < t->npages; i++)
		if (addr >= t->pages[i].addr && addr < t->pages[i].addr + PAGE)
			return true;
	return false;
}

bool ptw_bp_refers_to_xol(const struct ptw_bptab *t, const void *buf, size_t len)
{
	const uint8_t *b = buf;
	for (size_t off = 0; off + 8 <= len; off += 8) {
		uint64_t q;
		memcpy(&q, b + off, 8);
		if (in_xol_page(t, q))
			return true;
	}
	return false;
}

/* ---- leaving ---- */

bool ptw_bp_xol_origin(const struct ptw_bptab *t, uint64_t rip, uint64_t *ret_rip)
{
	if (!in_xol_page(t, rip))
		return false;
	size_t it = 0;
	void *v;
	while (ptw_map_next(&t->by_addr, &it, NULL, &v)) {
		const struct ptw_bp *bp = v;
		if (bp->plan.kind != PTW_INSN_XOL)
			continue;
		if (rip == bp->xol_slot) {
			*ret_rip = bp->addr;
			return true;
		}
		if (rip == bp->xol_slot + bp->plan.len) {
			*ret_rip = bp->addr + bp->plan.len;
			return true;
		}
	}
	return false;
}

int ptw_bp_unmap_xol(struct ptw_bptab *t, struct ptw_lwp *host)
{
	int left = 0;
	for (size_t i = 0; i < t->npages; i++) {
		uint64_t args[6] = { t->pages[i].addr, PAGE, 0, 0, 0, 0 };
		int64_t ret = -1;
		if (!ptw_lwp_injectable(host) || find_syscall_insn(t) < 0 ||
		    ptw_inject_syscall(t->proc, host, t->syscall_insn, SYS_munmap, args, &ret) < 0 ||
		    ret != 0)
			left++;
		else
			journal_drop_xol(t->journal, t->pages[i].addr);
	}
	if (!left) {
		free(t->pages);
		t->pages = NULL;
		t->npages = 0;
		maps_changed(t);
	}
	return left;
}

void ptw_bp_adopt_xol(struct ptw_bptab *child, const struct ptw_bptab *parent)
{
	if (!parent->npages)
		return;
	child->pages = xreallocarray(child->pages, child->npages + parent->npages,
				     sizeof(*child->pages));
	for (size_t i = 0; i < parent->npages; i++) {
		child->pages[child->npages++] = parent->pages[i];
		journal_add_xol(child->journal, parent->pages[i].addr, parent->syscall_insn);
	}
	if (!child->syscall_insn)
		child->syscall_insn = parent->syscall_insn;
	maps_changed(child);
}

/* ---- restore ---- */

int ptw_bp_restore_all(struct ptw_bptab *t)
{
	int restored = 0;
	int failed = journal_restore(t->journal, t->proc->pid, t->proc->mem_fd, &restored);
	ptw_mem_invalidate(t->proc);
	ptw_dbg(PTW_DBG_BP, "restored %d bytes, %d failed", restored, failed);
	free_bps(t);
	return failed;
}

int ptw_bp_restore_in(struct ptw_bptab *t, pid_t pid)
{
	/* The child's copy of the journal is ours: restore without marking. */
	int restored;
	int failed = restore_copy(t->journal, pid, &restored);
	if (failed < 0) {
		/* Nothing could be checked: every byte ours now, blindly. */
		failed = 0;
		for (uint32_t i = 0; i < t->journal->count; i++) {
			struct journal_entry *e = &t->journal->entries[i];
			if (e->state == JOURNAL_ACTIVE &&
			    ptw_mem_poke_pid(pid, -1, e->addr, &e->orig, 1) < 0)
				failed++;
		}
	}
	ptw_dbg(PTW_DBG_BP, "fork child %d: %d bytes restored, %d failed", pid, restored, failed);
	return failed;
}

void ptw_bp_forget_all(struct ptw_bptab *t)
{
	maps_changed(t);
	journal_clear(t->journal);
	free_bps(t);
	free(t->pages);
	t->pages = NULL;
	t->npages = 0;
	t->syscall_insn = 0;
}

void ptw_bp_emergency_restore(void)
{
	for (size_t i = 0; i < MAX_TABLES; i++) {
		struct ptw_bptab *t = live_tables[i];
		if (t && t->proc->mem_fd >= 0)
			journal_emergency_restore(t->journal, t->proc->mem_fd);
	}
}
