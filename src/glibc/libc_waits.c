/* SPDX-License-Identifier: MIT */
/* Where glibc's threads wait; see ptw_libc_waits.h. */
#include "ptw_libc_waits.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "ptw_breakpoints.h"
#include "ptw_util.h"
#include "ptw_waits.h"

struct finder {
	struct ptw_symbols *syms;
	const char *module;
	ptw_memread_fn read;
	void *ctx;
	struct ptw_libc_waits *w;
};

/* Targets of the direct calls in the exported function name (tail_jumps:
 * of its tail calls instead). */
static int branches_of(const struct finder *f, const char *name, bool tail_jumps, uint64_t *out,
		       int max)
{
	uint64_t addr, size = 0;
	if (ptw_symbols_lookup(f->syms, f->module, name, &addr, &size) < 0 || !size || size > 65536)
		return 0;
	uint8_t *code = xmalloc(size);
	int n = 0;
	if (f->read(f->ctx, addr, code, size) == 0)
		n = ptw_insn_find_calls(code, size, addr, tail_jumps, out, max);
	free(code);
	return n;
}

static bool among(const uint64_t *v, int n, uint64_t x)
{
	for (int i = 0; i < n; i++)
		if (v[i] == x)
			return true;
	return false;
}

/* __lll_lock_wait: by name, or the call of pthread_mutex_lock that lands
 * between __lll_lock_wait_private and __lll_lock_wake_private (the three
 * are lowlevellock.c, one object file, in that order). */
static uint64_t find_lll_lock_wait(const struct finder *f, uint64_t lll_private)
{
	uint64_t addr, wake;
	if (ptw_symbols_lookup(f->syms, f->module, "__lll_lock_wait", &addr, NULL) == 0) {
		f->w->symtab = true;
		return addr;
	}
	if (!lll_private)
		return 0;
	if (ptw_symbols_lookup(f->syms, f->module, "__lll_lock_wake_private", &wake, NULL) < 0 ||
	    wake <= lll_private)
		wake = lll_private + 512;
	uint64_t calls[64];
	int n = branches_of(f, "pthread_mutex_lock", false, calls, 64);
	for (int i = 0; i < n; i++)
		if (calls[i] > lll_private && calls[i] < wake)
			return calls[i];
	return 0;
}

/* __futex_abstimed_wait_common, where __futex_abstimed_wait64 and
 * __futex_abstimed_wait_cancelable64 both jump: by name; else the call
 * that both pthread_rwlock_rdlock and pthread_rwlock_wrlock make and
 * pthread_cond_timedwait does not (the non-cancelable wait), and where it
 * jumps. */
static uint64_t find_futex_wait(const struct finder *f)
{
	uint64_t addr;
	if (ptw_symbols_lookup(f->syms, f->module, "__futex_abstimed_wait_common", &addr, NULL) ==
	    0)
		return addr;
	uint64_t wrapper = 0;
	if (ptw_symbols_lookup(f->syms, f->module, "__futex_abstimed_wait64", &wrapper, NULL) < 0) {
		uint64_t rd[64], wr[64], cond[64];
		int nrd = branches_of(f, "pthread_rwlock_rdlock", false, rd, 64);
		int nwr = branches_of(f, "pthread_rwlock_wrlock", false, wr, 64);
		int ncond = branches_of(f, "pthread_cond_timedwait", false, cond, 64);
		for (int i = 0; i < nrd && !wrapper; i++)
			if (among(wr, nwr, rd[i]) && !among(cond, ncond, rd[i]))
				wrapper = rd[i];
	}
	uint8_t code[32];
	uint64_t target;
	if (wrapper && f->read(f->ctx, wrapper, code, sizeof(code)) == 0 &&
	    ptw_insn_tail_jump(code, sizeof(code), wrapper, &target) == 0)
		return target;
	return 0; /* an unknown layout: better no hook than a wrong one */
}

static void add_range(const struct finder *f, const char *name, enum ptw_wait_kind kind)
{
	struct ptw_libc_waits *w = f->w;
	uint64_t addr, size = 0;
	if (w->nranges < PTW_ARRAY_SIZE(w->ranges) &&
	    ptw_symbols_lookup(f->syms, f->module, name, &addr, &size) == 0 && size)
		w->ranges[w->nranges++] = (struct ptw_wait_range){ addr, addr + size, kind };
}

/* The local functions the exported function name tail-calls (sem_wait
 * jumps to __new_sem_wait_slow64, which .dynsym does not name): their
 * extent from the CFI, with the same kind. */
static bool add_tail_ranges(const struct finder *f, const char *name, enum ptw_wait_kind kind)
{
	struct ptw_libc_waits *w = f->w;
	uint64_t targets[16], lo, hi;
	int n = branches_of(f, name, true, targets, 16);
	bool known = false;
	for (int i = 0; i < n && w->nranges < PTW_ARRAY_SIZE(w->ranges); i++)
		if (ptw_symbols_function_range(f->syms, targets[i], &lo, &hi) == 0 &&
		    lo == targets[i] && hi - lo < 65536) {
			bool dup = false;
			for (size_t k = 0; k < w->nranges && !dup; k++)
				dup = w->ranges[k].lo == lo;
			if (!dup)
				w->ranges[w->nranges++] = (struct ptw_wait_range){ lo, hi, kind };
			known = true;
		}
	return known;
}

/* The exported functions that wait, by kind. */
static const struct {
	const char *name;
	enum ptw_wait_kind kind;
} waiters[] = {
	{ "pthread_mutex_lock", PTW_WAIT_MUTEX },
	{ "pthread_mutex_timedlock", PTW_WAIT_MUTEX },
	{ "pthread_mutex_clocklock", PTW_WAIT_MUTEX },
	{ "pthread_rwlock_rdlock", PTW_WAIT_RWLOCK_READ },
	{ "pthread_rwlock_timedrdlock", PTW_WAIT_RWLOCK_READ },
	{ "pthread_rwlock_clockrdlock", PTW_WAIT_RWLOCK_READ },
	{ "pthread_rwlock_wrlock", PTW_WAIT_RWLOCK_WRITE },
	{ "pthread_rwlock_timedwrlock", PTW_WAIT_RWLOCK_WRITE },
	{ "pthread_rwlock_clockwrlock", PTW_WAIT_RWLOCK_WRITE },
	{ "pthread_cond_wait", PTW_WAIT_COND },
	{ "pthread_cond_timedwait", PTW_WAIT_COND },
	{ "pthread_cond_clockwait", PTW_WAIT_COND },
	{ "sem_wait", PTW_WAIT_SEM },
	{ "sem_timedwait", PTW_WAIT_SEM },
	{ "sem_clockwait", PTW_WAIT_SEM },
	{ "pthread_join", PTW_WAIT_JOIN },
	{ "pthread_timedjoin_np", PTW_WAIT_JOIN },
	{ "pthread_clockjoin_np", PTW_WAIT_JOIN },
	{ "pthread_barrier_wait", PTW_WAIT_BARRIER },
};

void ptw_libc_waits_find(struct ptw_symbols *syms, const char *libc_module,
			 ptw_memread_fn read_code, void *ctx, struct ptw_libc_waits *ret)
{
	memset(ret, 0, sizeof(*ret));
	struct finder f = { syms, libc_module, read_code, ctx, ret };
	ptw_symbols_lookup(syms, libc_module, "__lll_lock_wait_private",
			   &ret->lll_lock_wait_private, NULL);
	ret->lll_lock_wait = find_lll_lock_wait(&f, ret->lll_lock_wait_private);
	ret->futex_wait = find_futex_wait(&f);
	for (size_t i = 0; i < PTW_ARRAY_SIZE(waiters); i++)
		add_range(&f, waiters[i].name, waiters[i].kind);
	if (!ret->symtab) {
		/* (sem_wait's slow path is the one a blocked sem_wait shows) */
		ret->sem_tail_unknown = !add_tail_ranges(&f, "sem_wait", PTW_WAIT_SEM);
		add_tail_ranges(&f, "sem_timedwait", PTW_WAIT_SEM);
		add_tail_ranges(&f, "sem_clockwait", PTW_WAIT_SEM);
	}
}

int ptw_libc_join_find(struct ptw_symbols *syms, const char *libc_module, ptw_memread_fn read_code,
		       void *ctx, struct ptw_libc_join *ret)
{
	uint64_t entry, join, lo, hi;
	uint8_t code[32];
	memset(ret, 0, sizeof(*ret));
	ret->clockjoin = true;
	if (ptw_symbols_lookup(syms, libc_module, "__pthread_clockjoin_ex", &entry, NULL) < 0) {
		/* no .symtab: pthread_join is a tail call into it */
		if (ptw_symbols_lookup(syms, libc_module, "pthread_join", &join, NULL) < 0 ||
		    read_code(ctx, join, code, sizeof(code)) < 0)
			return -ENOENT;
		if (ptw_insn_tail_jump(code, sizeof(code), join, &entry) < 0) {
			entry = join; /* an older glibc: pthread_join does the work */
			ret->clockjoin = false;
		}
	}
	if (ptw_symbols_function_range(syms, entry, &lo, &hi) < 0 || lo != entry || hi - lo > 65536)
		return -EINVAL;
	ret->lo = lo;
	ret->hi = hi;
	return 0;
}

unsigned ptw_libc_waits_blind(const struct ptw_libc_waits *w)
{
	static const enum ptw_wait_kind futex_kinds[] = { PTW_WAIT_RWLOCK_READ,
							  PTW_WAIT_RWLOCK_WRITE, PTW_WAIT_COND,
							  PTW_WAIT_SEM };
	if (w->symtab || !w->futex_wait)
		return 0;
	unsigned blind = w->sem_tail_unknown ? 1u << PTW_WAIT_SEM : 0;
	for (size_t i = 0; i < PTW_ARRAY_SIZE(futex_kinds); i++) {
		bool found = false;
		for (size_t k = 0; k < w->nranges && !found; k++)
			found = w->ranges[k].kind == futex_kinds[i];
		if (!found)
			blind |= 1u << futex_kinds[i];
	}
	return blind;
}

bool ptw_libc_waits_in_range(const struct ptw_libc_waits *w, uint64_t pc)
{
	for (size_t k = 0; k < w->nranges; k++)
		if (pc >= w->ranges[k].lo && pc < w->ranges[k].hi)
			return true;
	return false;
}

/* A static program is one module, libc in it: every pc may be libc's. */
static bool in_libc(struct ptw_symbols *syms, const char *libc_path, uint64_t pc)
{
	if (!libc_path)
		return true;
	const char *m = ptw_symbols_module_of(syms, pc);
	return m && !strcmp(m, libc_path);
}

enum ptw_wait_kind ptw_libc_waits_classify(const struct ptw_libc_waits *w, struct ptw_symbols *syms,
					   const char *libc_path, const uint64_t *pcs, int n)
{
	static const struct {
		const char *needle;
		enum ptw_wait_kind kind;
	} rules[] = {
		{ "cond_wait", PTW_WAIT_COND },	      { "cond_timedwait", PTW_WAIT_COND },
		{ "cond_clockwait", PTW_WAIT_COND },  { "rdlock", PTW_WAIT_RWLOCK_READ },
		{ "wrlock", PTW_WAIT_RWLOCK_WRITE },  { "sem_wait", PTW_WAIT_SEM },
		{ "sem_timedwait", PTW_WAIT_SEM },    { "sem_clockwait", PTW_WAIT_SEM },
		{ "clocklock", PTW_WAIT_MUTEX },      { "timedlock", PTW_WAIT_MUTEX },
		{ "mutex_lock", PTW_WAIT_MUTEX },     { "join", PTW_WAIT_JOIN },
		{ "barrier_wait", PTW_WAIT_BARRIER },
	};
	for (int i = 1; i < n; i++) {
		uint64_t pc = pcs[i] - 1;
		for (size_t k = 0; k < w->nranges; k++)
			if (pc >= w->ranges[k].lo && pc < w->ranges[k].hi)
				return w->ranges[k].kind;
		if (!in_libc(syms, libc_path, pc))
			continue;
		const struct ptw_location *loc = ptw_symbols_locate(syms, pc);
		uint64_t lo, hi;
		/* Without libc's symbol table a local function is named after
		 * the exported one before it: a name counts only if it is the
		 * function's own (pthread_cond_wait@@GLIBC_2.3.2, say). */
		if (!w->symtab &&
		    (!loc || !loc->symbol || ptw_symbols_function_range(syms, pc, &lo, &hi) < 0 ||
		     lo != pc - loc->symbol_offset))
			continue;
		for (size_t k = 0; loc && loc->symbol && k < PTW_ARRAY_SIZE(rules); k++)
			if (strstr(loc->symbol, rules[k].needle))
				return rules[k].kind;
	}
	return PTW_WAIT_NONE;
}

uint64_t ptw_libc_waits_object(enum ptw_wait_kind kind, uint64_t futex, uint32_t expected)
{
	switch (kind) {
	case PTW_WAIT_COND:
		return ptw_wait_object(PTW_WAIT_COND, futex);
	case PTW_WAIT_RWLOCK_READ:
	case PTW_WAIT_RWLOCK_WRITE:
		/* readers sleep on __readers (0) or __wrphase_futex (8),
		 * writers on __writers_futex (12) or __wrphase_futex; the
		 * lock is 8-aligned, and a wrphase wait expects 3 */
		return (futex & 7) == 4 ? futex - PTW_RWLOCK_WRITERS_FUTEX
		       : expected == PTW_RWLOCK_FUTEX_WRPHASE_WAIT
			       ? futex - PTW_RWLOCK_WRPHASE_FUTEX
			       : futex;
	default:
		/* a timed mutex lock: on __lock, the mutex's first word; a
		 * semaphore: on its value, its first word; a barrier */
		return futex;
	}
}

/* What frame i says (see ptw_libc_waits_under_way); false: not a wait. */
static bool wait_of_frame(const struct ptw_libc_waits *w, struct ptw_symbols *syms,
			  const char *libc_path, const struct ptw_join_at *join, uint64_t futex,
			  uint32_t expected, const uint64_t *pcs, int n, int i,
			  struct ptw_wait_under_way *ret)
{
	uint64_t pc = i ? pcs[i] - 1 : pcs[i], lo, hi;
	if (join && join->has_tid && pc >= join->lo && pc < join->hi && futex >= join->tid_off) {
		/* the joiner sleeps on the joined thread's pd->tid */
		*ret = (struct ptw_wait_under_way){ PTW_WAIT_JOIN, futex - join->tid_off, i, true };
		return true;
	}
	if (ptw_symbols_function_range(syms, pc, &lo, &hi) < 0)
		return false;
	enum ptw_wait_kind kind = PTW_WAIT_NONE;
	if (w->lll_lock_wait && lo == w->lll_lock_wait)
		kind = PTW_WAIT_MUTEX; /* on the mutex's __lock, its first word */
	else if (w->lll_lock_wait_private && lo == w->lll_lock_wait_private)
		kind = PTW_WAIT_LOCK;
	else if (w->futex_wait && lo == w->futex_wait)
		kind = ptw_libc_waits_classify(w, syms, libc_path, pcs + i, n - i);
	switch (kind) {
	case PTW_WAIT_MUTEX:
	case PTW_WAIT_LOCK:
	case PTW_WAIT_COND:
	case PTW_WAIT_RWLOCK_READ:
	case PTW_WAIT_RWLOCK_WRITE:
	case PTW_WAIT_SEM:
	case PTW_WAIT_BARRIER:
		*ret = (struct ptw_wait_under_way){ kind,
						    ptw_libc_waits_object(kind, futex, expected), i,
						    false };
		return true;
	default:
		/* not a slow path, or a futex wait of no kind reported (a
		 * join's: its join function's frame is further out) */
		return false;
	}
}

void ptw_libc_waits_under_way(const struct ptw_libc_waits *w, struct ptw_symbols *syms,
			      const char *libc_path, const struct ptw_join_at *join, uint64_t futex,
			      uint32_t expected, const uint64_t *pcs, int n,
			      struct ptw_wait_under_way *ret)
{
	memset(ret, 0, sizeof(*ret));
	ret->kind = PTW_WAIT_NONE;
	/* (the outermost frame has no return slot to watch) */
	for (int i = 0; i + 1 < n; i++)
		if (wait_of_frame(w, syms, libc_path, join, futex, expected, pcs, n, i, ret))
			return;
}

int ptw_libc_waits_site_frame(const struct ptw_libc_waits *w, struct ptw_symbols *syms,
			      const char *libc_path, const uint64_t *pcs, int n)
{
	for (int i = 1; i < n; i++) {
		if (libc_path) {
			if (!in_libc(syms, libc_path, pcs[i]))
				return i;
			continue;
		}
		/* a static program: libc's functions are the program's */
		const struct ptw_location *loc = ptw_symbols_locate(syms, pcs[i] - 1);
		bool primitive = !loc || !loc->symbol || loc->symbol[0] == '_' ||
				 ptw_libc_waits_in_range(w, pcs[i] - 1);
		if (!primitive)
			return i;
	}
	return -1;
}
