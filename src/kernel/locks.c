/* SPDX-License-Identifier: MIT */
/*
 * --locks on the kernel backend; see locks.h. The target is only read:
 * its stack as the BPF program copied it (unwound here, after the thread
 * ran on), its memory now (process_vm_readv) and /proc/TID/syscall for a
 * deadlock's confirmation.
 */
#define _GNU_SOURCE
#include "locks.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <sys/user.h>

#include "lockconv.h"
#include "underway.h"
#include "ptw_attach.h"
#include "ptw_breakpoints.h"
#include "ptw_libc_waits.h"
#include "ptw_symbols.h"
#include "ptw_thread_db.h"
#include "ptw_underway.h"
#include "ptw_util.h"
#include "ptw_warnings.h"

/* A wait under way of a thread the converter does not know yet (a -f
 * child's, made before its links: its creation record comes after its
 * fork's, when the waits under way are read). */
struct pending_wait {
	pid_t tid;
	struct ptwk_lock_under_way u;
	uint64_t ns;
};

struct ptwk_locks {
	struct ptwk_locks_env env;
	struct ptwk_lockconv conv;
	struct pending_wait *pending;
	size_t npending;
	struct ptw_libc_waits lw;
	const char *libc_path; /* NULL: a static program (libc in it) */
	bool found;	       /* lw is the current image's */
	struct ptw_join_at join; /* the join function (waits under way) */
};

static struct ptw_symbols *syms_of(struct ptwk_locks *l)
{
	return *l->env.syms;
}

/* libc's code as its file has it: the process may have ended before its
 * first wait is read from the ring (a short run), and its memory holds
 * the uprobes' breakpoints. The process only for what no file holds. */
static int read_code(void *ctx, uint64_t addr, void *buf, size_t len)
{
	struct ptwk_locks *l = ctx;
	if (syms_of(l) && ptw_symbols_read_file(syms_of(l), addr, buf, len) == 0)
		return 0;
	return ptw_mem_read(l->env.proc, addr, buf, len);
}

/* The join function (a join under way at an attach ends at its return). */
static void find_join(struct ptwk_locks *l, const char *module)
{
	struct ptw_libc_join join;
	memset(&l->join, 0, sizeof(l->join));
	if (l->env.have_tid && ptw_libc_join_find(syms_of(l), module, read_code, l, &join) == 0)
		l->join = (struct ptw_join_at){ join.lo, join.hi, true, l->env.tid_off };
}

/* The slow paths of the current image's libc (after an exec, again). */
static void find(struct ptwk_locks *l)
{
	struct ptw_symbols *s = syms_of(l);
	if (l->found || !s)
		return;
	l->libc_path = ptw_symbols_module_path(s, "libc.so");
	ptw_mem_invalidate(l->env.proc);
	ptw_libc_waits_find(s, l->libc_path ? "libc.so" : PTW_MOD_EXE, read_code, l, &l->lw);
	find_join(l, l->libc_path ? "libc.so" : PTW_MOD_EXE);
	/* Right after an exec the new libc may not be mapped yet (a lock
	 * taken by a constructor): look again at the next wait. */
	l->found = l->lw.lll_lock_wait || l->lw.futex_wait || l->lw.nranges;
}

/* ---- the ops of the converter ---- */

static void sink(void *ctx, const struct ptw_event *ev)
{
	struct ptwk_locks *l = ctx;
	l->env.sink(l->env.ctx, ev);
}

static int unwind(void *ctx, const struct ptwk_lock_record *r, uint64_t *pcs, int max)
{
	struct ptwk_locks *l = ctx;
	if (!syms_of(l))
		return 0;
	const __u64 *g = r->regs; /* DWARF's order */
	struct user_regs_struct regs = { 0 };
	ptwk_regs_from_dwarf(g, &regs);
	/* What the copy does not hold (older frames of a deep stack) is read
	 * from the process now: still true while the thread waits. */
	struct ptw_stack_copy copy = { g[7], r->stack_len, r->stack };
	ptw_mem_invalidate(l->env.proc);
	/* (in its own memory: a fork child shares its parent's symbols, not
	 * its stack; past a traced caller's uretprobe: the original return
	 * address) */
	struct ptw_unwind_rets rets = { r->tramp, r->tramp + 1, (const uint64_t(*)[2])r->rets,
					r->nrets < PTWK_LOCK_RETS ? r->nrets : PTWK_LOCK_RETS };
	return ptw_symbols_unwind_copy_in(syms_of(l), ptw_mem_reader, l->env.proc,
					  r->tramp ? &rets : NULL, (pid_t)r->h.tid, &regs, &copy,
					  pcs, max);
}

static enum ptw_wait_kind classify(void *ctx, const uint64_t *pcs, int n, uint64_t futex,
				   uint32_t expected, uint64_t *ret_object)
{
	struct ptwk_locks *l = ctx;
	find(l);
	if (!syms_of(l))
		return PTW_WAIT_NONE;
	enum ptw_wait_kind kind = ptw_libc_waits_classify(&l->lw, syms_of(l), l->libc_path, pcs, n);
	*ret_object = ptw_libc_waits_object(kind, futex, expected);
	return kind;
}

static const struct ptw_location *locate(void *ctx, uint64_t pc)
{
	struct ptwk_locks *l = ctx;
	return pc && syms_of(l) ? ptw_symbols_locate(syms_of(l), pc) : NULL;
}

/* A wait's call site (ptw_libc_waits_site_frame), named as the tracer
 * names it. */
static const struct ptw_location *site(void *ctx, const uint64_t *pcs, int n)
{
	struct ptwk_locks *l = ctx;
	find(l);
	if (!syms_of(l) || !l->env.call_site)
		return NULL;
	int at = ptw_libc_waits_site_frame(&l->lw, syms_of(l), l->libc_path, pcs, n);
	return at > 0 ? l->env.call_site(l->env.ctx, pcs[at]) : NULL;
}

static const struct ptw_location *object(void *ctx, uint64_t addr)
{
	struct ptwk_locks *l = ctx;
	if (!addr || !syms_of(l) || !ptw_symbols_module_of(syms_of(l), addr))
		return NULL;
	const struct ptw_location *loc = locate(l, addr);
	return loc && loc->symbol ? loc : NULL;
}

static bool live(void *ctx, pid_t tid)
{
	struct ptwk_locks *l = ctx;
	return ptwk_conv_knows(l->env.conv, tid);
}

static int read_i32(void *ctx, uint64_t addr, int32_t *ret)
{
	struct ptwk_locks *l = ctx;
	ptw_mem_invalidate(l->env.proc); /* now, not a page read before */
	return ptw_mem_read(l->env.proc, addr, ret, sizeof(*ret));
}

/* /proc/PID/task/TID/syscall: "202 0xFUTEX ..." while it sleeps in futex
 * on that word ("running" or another call otherwise). */
static bool asleep_on(void *ctx, pid_t tid, uint64_t futex)
{
	struct ptwk_locks *l = ctx;
	char path[64], buf[256];
	snprintf(path, sizeof(path), "/proc/%d/task/%d/syscall", l->env.pid, tid);
	if (ptw_read_small_file(path, buf, sizeof(buf)) < 0)
		return false;
	char *end;
	long nr = strtol(buf, &end, 10);
	if (end == buf || nr != SYS_futex || *end != ' ')
		return false;
	unsigned long long arg = strtoull(end + 1, &end, 16);
	return arg == futex;
}

/* ---- set-up ---- */

static void missing(struct ptwk_probes *p, const char *text)
{
	if (p->nmissing < PTW_ARRAY_SIZE(p->missing)) {
		p->missing_code[p->nmissing] = PTW_W_LOCKS_PARTIAL; /* as the tracer says it */
		snprintf(p->missing[p->nmissing++], sizeof(p->missing[0]), "%s", text);
	}
}

/* An entry probe at addr, and a return probe, in the file of the others
 * (a launched static program's, not mapped yet: by its own headers). */
static void add_probe(struct ptwk_locks *l, struct ptwk_probes *p, const struct ptw_mapping *maps,
		      int nmaps, uint64_t addr, enum ptwk_lock_kind kind, const char *name)
{
	const struct ptw_mapping *m = p->in_exe ? NULL : ptw_maps_find(maps, nmaps, addr);
	uint64_t off = 0;
	bool in = p->in_exe ? ptw_symbols_file_offset(syms_of(l), addr, &off) == 0
			    : m && !strcmp(m->path, p->module);
	if (!in || p->n + 2 > PTW_ARRAY_SIZE(p->p)) {
		char text[160];
		snprintf(text, sizeof(text),
			 "--locks: %.40s is not in the file of the other probes: those waits "
			 "are not seen",
			 name);
		missing(p, text);
		return;
	}
	if (m)
		off = addr - m->start + m->offset;
	p->p[p->n++] = (struct ptwk_probe){ (enum ptwk_kind)kind, name, addr, off, false };
	p->p[p->n++] = (struct ptwk_probe){ (enum ptwk_kind)PTWK_LOCK_RET, name, addr, off, true };
}

struct ptwk_locks *ptwk_locks_follow(const struct ptwk_locks_env *env)
{
	struct ptwk_locks *l = xcalloc(1, sizeof(*l));
	l->env = *env;
	struct ptwk_lockconv_ops ops = { .sink = sink,
					 .unwind = unwind,
					 .classify = classify,
					 .locate = locate,
					 .site = site,
					 .object = object,
					 .live = live,
					 .read_i32 = read_i32,
					 .asleep_on = asleep_on,
					 .ctx = l };
	ptwk_lockconv_init(&l->conv, env->pid, &ops);
	return l;
}

struct ptwk_locks *ptwk_locks_new(const struct ptwk_locks_env *env, struct ptw_tdb *tdb,
				  struct ptwk_probes *p, struct ptwk_locks_config *ret_config)
{
	struct ptwk_locks *l = ptwk_locks_follow(env);
	memset(ret_config, 0, sizeof(*ret_config));
	ret_config->on = true;
	uint32_t off;
	if (p->layout.have_tid) { /* (the program's own: a static one's from its file) */
		ret_config->have_tid = true;
		ret_config->off_tid = (uint32_t)p->layout.tid;
	} else if (tdb && ptw_tdb_pthread_field(tdb, "tid", &off) == 0) {
		ret_config->have_tid = true;
		ret_config->off_tid = off;
	}
	bool join = false;
	for (size_t i = 0; i < p->n; i++)
		if (p->p[i].kind == PTWK_JOIN) {
			join = true;
			ret_config->join_always_blocks = !strcmp(p->p[i].function, "pthread_join");
		}
	if (!join || !ret_config->have_tid)
		missing(p, "--locks: the join function or struct pthread's tid is unknown: join "
			   "waits are not seen");
	l->env.have_tid = ret_config->have_tid;
	l->env.tid_off = (uint32_t)ret_config->off_tid;
	find(l);
	struct ptw_mapping *maps = NULL;
	int nmaps = ptw_maps_read(env->live_pid, &maps);
	if (l->lw.lll_lock_wait)
		add_probe(l, p, maps, nmaps, l->lw.lll_lock_wait, PTWK_LOCK_WAIT,
			  "__lll_lock_wait");
	else
		missing(p, "--locks: __lll_lock_wait not found in libc: mutex waits are not seen");
	if (l->lw.lll_lock_wait_private)
		add_probe(l, p, maps, nmaps, l->lw.lll_lock_wait_private, PTWK_LOCK_WAIT_PRIVATE,
			  "__lll_lock_wait_private");
	if (l->lw.futex_wait)
		add_probe(l, p, maps, nmaps, l->lw.futex_wait, PTWK_FUTEX_WAIT,
			  "__futex_abstimed_wait_common");
	else
		missing(p, "--locks: glibc's futex wait function not found: rwlock, condition "
			   "variable and semaphore waits are not seen");
	unsigned blind = ptw_libc_waits_blind(&l->lw);
	for (unsigned kind = 0; blind >> kind; kind++)
		if (blind & (1u << kind)) {
			char text[200];
			snprintf(text, sizeof(text),
				 "--locks: %s waits cannot be told from other futex waits without "
				 "libc's symbol table (where they wait was not found in its code): "
				 "they are not seen",
				 ptw_wait_kind_name((enum ptw_wait_kind)kind));
			missing(p, text);
		}
	free(maps);
	return l;
}

void ptwk_locks_free(struct ptwk_locks *l)
{
	if (!l)
		return;
	ptwk_lockconv_free(&l->conv);
	free(l->pending);
	free(l);
}

void ptwk_locks_record(struct ptwk_locks *l, const void *data, size_t size)
{
	struct ptwk_record h;
	if (size < sizeof(h))
		return;
	memcpy(&h, data, sizeof(h));
	if (h.kind == PTWK_FRAME_RETURN && (h.a & (PTWK_UW_WAIT | PTWK_UW_JOIN))) {
		/* a wait under way at the attach returned (underway.c): its
		 * return site's probe, as the slow path's return probe says it */
		bool join = h.a & PTWK_UW_JOIN;
		h.kind = join ? PTWK_JOIN_RET : PTWK_LOCK_RET;
		h.a = h.d; /* rax */
		ptwk_lockconv_record(&l->conv, &h, sizeof(h));
		return;
	}
	if (h.kind < PTWK_LOCK_FIRST) {
		if (h.kind == PTWK_EXEC)
			l->found = false; /* another image: found again when needed */
		ptwk_lockconv_record(&l->conv, &h, sizeof(h));
		return;
	}
	if (h.kind >= PTWK_LOCK_KIND_END)
		return;
	if (h.kind == PTWK_LOCK_RET) {
		ptwk_lockconv_record(&l->conv, &h, sizeof(h));
		return;
	}
	/* The ring's alignment is 8; an entry record is taken whole. */
	if (size < sizeof(struct ptwk_lock_record))
		return;
	struct ptwk_lock_record *r = xmalloc(sizeof(*r));
	memcpy(r, data, sizeof(*r));
	ptwk_lockconv_record(&l->conv, &r->h, sizeof(*r));
	free(r);
}

void ptwk_locks_wait_of(struct ptwk_locks *l, const struct user_regs_struct *regs,
			const uint64_t *pcs, int n, struct ptw_wait_under_way *ret)
{
	find(l);
	ret->kind = PTW_WAIT_NONE;
	if (!syms_of(l))
		return;
	/* futex (uaddr, op, val): the word, and the value the wait expects */
	ptw_libc_waits_under_way(&l->lw, syms_of(l), l->libc_path, &l->join, regs->rdi,
				 (uint32_t)regs->rdx, pcs, n, ret);
}

void ptwk_locks_under_way(struct ptwk_locks *l, pid_t tid, const struct ptwk_lock_under_way *u,
			  uint64_t ns)
{
	if (l->env.conv && !ptwk_conv_knows(l->env.conv, tid)) {
		l->pending = xreallocarray(l->pending, l->npending + 1, sizeof(*l->pending));
		l->pending[l->npending++] = (struct pending_wait){ tid, *u, ns };
		return;
	}
	ptwk_lockconv_under_way(&l->conv, tid, u, ns);
}

void ptwk_locks_thread_listed(struct ptwk_locks *l, pid_t tid)
{
	for (size_t i = 0; l && i < l->npending;) {
		if (l->pending[i].tid != tid) {
			i++;
			continue;
		}
		struct pending_wait w = l->pending[i];
		l->pending[i] = l->pending[--l->npending];
		ptwk_lockconv_under_way(&l->conv, tid, &w.u, w.ns);
	}
}

void ptwk_locks_after_batch(struct ptwk_locks *l, void (*drain)(void *ctx), void *ctx)
{
	if (!ptwk_lockconv_pending(&l->conv))
		return;
	ptwk_lockconv_check(&l->conv);
	drain(ctx);
	ptwk_lockconv_confirm(&l->conv, ptw_now_ns());
}

void ptwk_locks_counts(const struct ptwk_locks *l, uint64_t *waits, uint64_t *unclassified,
		       uint32_t *deadlocks)
{
	*waits = l->conv.waits;
	*unclassified = l->conv.unclassified;
	*deadlocks = l->conv.ndeadlocks;
}
