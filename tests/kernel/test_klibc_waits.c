/* SPDX-License-Identifier: MIT */
/*
 * Where glibc's threads wait (ptw_libc_waits.h) without libc's debug file,
 * as the kernel path finds them for a process that may be gone: from this
 * machine's libc file alone (ptw_symbols_new_file, its code read from the
 * file), no process at all. Then which kinds of futex wait cannot be told
 * (ptw_libc_waits_blind) on synthetic finds. And the join function.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <link.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "ptw_libc_waits.h"
#include "ptw_symbols.h"

static char libc_path[4096];

static int find_libc(struct dl_phdr_info *info, size_t size, void *data)
{
	(void)size;
	(void)data;
	const char *base = strrchr(info->dlpi_name, '/');
	if (base && !strncmp(base, "/libc.so", 8)) {
		snprintf(libc_path, sizeof(libc_path), "%s", info->dlpi_name);
		return 1;
	}
	return 0;
}

static int read_file(void *ctx, uint64_t addr, void *buf, size_t len)
{
	return ptw_symbols_read_file(ctx, addr, buf, len);
}

/* A process gone: nothing can be read (what the kernel path read before). */
static int read_nothing(void *ctx, uint64_t addr, void *buf, size_t len)
{
	(void)ctx;
	(void)addr;
	(void)buf;
	(void)len;
	return -1;
}

static void test_libc_file(void)
{
	dl_iterate_phdr(find_libc, NULL);
	if (!libc_path[0]) {
		printf("SKIP: no libc.so mapped (a static test?)\n");
		return;
	}
	struct ptw_symbols *s = NULL;
	int r = ptw_symbols_new_file(libc_path, false, NULL, &s);
	CHECK_EQ(r, 0);
	if (r < 0)
		return;
	struct ptw_libc_waits w;
	ptw_libc_waits_find(s, PTW_MOD_EXE, read_file, s, &w);
	printf("%s: symbol table %d, __lll_lock_wait %#" PRIx64 ", futex wait %#" PRIx64
	       ", %zu ranges, blind %#x\n",
	       libc_path, w.symtab, w.lll_lock_wait, w.futex_wait, w.nranges,
	       ptw_libc_waits_blind(&w));
	CHECK(w.lll_lock_wait != 0);
	CHECK(w.futex_wait != 0);
	CHECK_EQ(ptw_libc_waits_blind(&w), 0);
	if (!w.symtab) {
		/* sem_wait's slow path (a local function) is a range of its own:
		 * a futex wait called from it is a semaphore wait */
		CHECK(!w.sem_tail_unknown);
		uint64_t sem_ret = 0, sem_wait = 0;
		CHECK_EQ(ptw_symbols_lookup(s, PTW_MOD_EXE, "sem_wait", &sem_wait, NULL), 0);
		for (size_t k = 0; k < w.nranges && !sem_ret; k++)
			if (w.ranges[k].kind == PTW_WAIT_SEM && w.ranges[k].lo != sem_wait)
				sem_ret = w.ranges[k].lo + 8;
		CHECK(sem_ret != 0);
		uint64_t pcs[] = { w.futex_wait, sem_ret, 0x1000 };
		CHECK_EQ(ptw_libc_waits_classify(&w, s, NULL, pcs, 3), PTW_WAIT_SEM);
	}

	/* the join function: where pthread_join jumps (__pthread_clockjoin_ex,
	 * glibc 2.34+), its extent from the CFI; unreadable code, no join */
	struct ptw_libc_join join;
	uint64_t pthread_join = 0;
	CHECK_EQ(ptw_libc_join_find(s, PTW_MOD_EXE, read_file, s, &join), 0);
	CHECK_EQ(ptw_symbols_lookup(s, PTW_MOD_EXE, "pthread_join", &pthread_join, NULL), 0);
	CHECK(join.clockjoin && join.lo != pthread_join && join.hi > join.lo);
	CHECK(w.symtab || ptw_libc_join_find(s, PTW_MOD_EXE, read_nothing, NULL, &join) == -ENOENT);

	/* the code unreadable (the old way for a process gone): nothing
	 * found but the exported ranges, the sem slow path unknown */
	struct ptw_libc_waits gone;
	ptw_libc_waits_find(s, PTW_MOD_EXE, read_nothing, NULL, &gone);
	if (!gone.symtab) {
		CHECK_EQ(gone.lll_lock_wait, 0);
		CHECK_EQ(gone.futex_wait, 0);
		CHECK(gone.sem_tail_unknown);
	}
	ptw_symbols_free(s);
}

static void test_blind(void)
{
	struct ptw_libc_waits w = { .futex_wait = 0x1000 };
	const enum ptw_wait_kind kinds[] = { PTW_WAIT_RWLOCK_READ, PTW_WAIT_RWLOCK_WRITE,
					     PTW_WAIT_COND, PTW_WAIT_SEM, PTW_WAIT_MUTEX };
	for (size_t i = 0; i < sizeof(kinds) / sizeof(kinds[0]); i++)
		w.ranges[w.nranges++] =
			(struct ptw_wait_range){ 0x2000 + i * 0x100, 0x2080 + i * 0x100, kinds[i] };
	CHECK_EQ(ptw_libc_waits_blind(&w), 0);
	/* sem_wait's slow path of no known extent */
	w.sem_tail_unknown = true;
	CHECK_EQ(ptw_libc_waits_blind(&w), 1u << PTW_WAIT_SEM);
	w.sem_tail_unknown = false;
	/* no condition variable function found */
	w.ranges[2].kind = PTW_WAIT_MUTEX;
	CHECK_EQ(ptw_libc_waits_blind(&w), 1u << PTW_WAIT_COND);
	/* no range at all: every futex kind */
	size_t n = w.nranges;
	w.nranges = 0;
	CHECK_EQ(ptw_libc_waits_blind(&w), (1u << PTW_WAIT_RWLOCK_READ) |
						   (1u << PTW_WAIT_RWLOCK_WRITE) |
						   (1u << PTW_WAIT_COND) | (1u << PTW_WAIT_SEM));
	w.nranges = n;
	/* with the symbol table names classify; without the futex wait its
	 * own warning says it all */
	w.symtab = true;
	CHECK_EQ(ptw_libc_waits_blind(&w), 0);
	w.symtab = false;
	w.futex_wait = 0;
	CHECK_EQ(ptw_libc_waits_blind(&w), 0);
}

int main(void)
{
	test_blind();
	test_libc_file();
	CHECK_DONE();
}
