/* SPDX-License-Identifier: MIT */
/*
 * --locks: wait spans and live deadlocks.
 *
 * Only glibc's slow paths are hooked (ptw_libc_waits.h: which, and how
 * they are found), never a lock's fast path, so an uncontended lock or
 * unlock costs nothing. At an entry the return address is read from [sp]
 * and an int3 put there while some wait returns there (refcounted, as
 * --trace's return breakpoints): two stops per contended wait.
 *
 * Who a thread waits for is read from the object (mutex __owner, rwlock
 * __cur_writer, the joined thread's tid). When a wait begins, the chain of
 * owners is followed with the owners read again now; a chain that comes
 * back to the waiting thread is a deadlock candidate, reported only once
 * the other threads of the cycle are stopped and the owners, read once
 * more, still form it (ptw_stop_lwps; they run on right after).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>

#include "ptw_libc_waits.h"
#include "ptw_locks.h"
#include "ptw_waits.h"
#include "tracer_internal.h"

#define SITE_FRAMES 8	   /* unwound at a wait's entry */
#define DEADLOCK_FRAMES 32 /* a deadlocked thread's stack */
#define MAX_CYCLE 64
#define STOP_DEADLINE_MS 500

struct lock_wait {
	enum ptw_wait_kind kind;
	uint64_t object;
	uint64_t ret; /* its return breakpoint (0: a join, ended at the join's rets) */
	uint64_t sp;  /* at the entry */
};

/* Its state for a thread: the waits it is in, innermost last. */
struct locks_thread {
	struct feature_thread base;
	struct lock_wait *lwaits;
	size_t nlwaits, lwaits_cap;
};

static void locks_thread_free(struct feature_thread *ft)
{
	struct locks_thread *lt = (struct locks_thread *)ft;
	free(lt->lwaits);
	free(lt);
}

/* The thread's, made on first use. */
static struct locks_thread *locks_of(struct ptw_lwp *l)
{
	return (struct locks_thread *)tracer_feature_thread(l, FEATURE_LOCKS,
							    sizeof(struct locks_thread),
							    locks_thread_free);
}

/* The thread's if it has one (NULL: in no wait). */
static struct locks_thread *locks_peek(struct ptw_lwp *l)
{
	return (struct locks_thread *)tracer_feature_peek(l, FEATURE_LOCKS);
}

struct locks {
	bool ready;
	const char *libc_path;	/* for the call site: the first frame outside it */
	struct ptw_libc_waits lw; /* where glibc waits */
	struct retbps retbps; /* where waits under way return */
	bool have_tid_off;
	uint32_t tid_off;	/* struct pthread: tid */
	bool under_way_said;	/* a wait under way not reported (said once) */
	uint32_t ndeadlocks;
	struct ptw_map reported; /* a deadlock's hash -> 1 */
};

static struct locks *locks_state(struct ptw_tracer *t)
{
	return t->fstate[FEATURE_LOCKS];
}

static bool locks_wanted(const struct ptw_backend_opts *o)
{
	return o->locks;
}

static void locks_attached(struct ptw_tracer *t)
{
	t->fstate[FEATURE_LOCKS] = xcalloc(1, sizeof(struct locks));
}

static void locks_image_reset(struct ptw_tracer *t)
{
	struct locks *lk = locks_state(t);
	if (!lk)
		return;
	tracer_retbps_free(&lk->retbps);
	ptw_map_free(&lk->reported);
	lk->ready = false;
	memset(&lk->lw, 0, sizeof(lk->lw));
	lk->libc_path = NULL;
}

static void locks_free(struct ptw_tracer *t)
{
	if (!locks_state(t))
		return;
	locks_image_reset(t);
	free(locks_state(t));
	t->fstate[FEATURE_LOCKS] = NULL;
}

/* ---- finding the slow paths ---- */

static void hook_at(struct ptw_tracer *t, struct ptw_lwp *l, uint64_t addr, unsigned hook,
		    const char *what)
{
	int r = tracer_insert_bp(t, addr, hook, l);
	if (r < 0 && r != -EEXIST)
		tracer_warn(t, PTW_W_LOCKS_PARTIAL,
			    "--locks: cannot break at %s (%#llx): %s; those waits are not seen",
			    what, (unsigned long long)addr, strerror(-r));
}

static void locks_setup(struct ptw_tracer *t, struct ptw_lwp *l)
{
	struct locks *lk = locks_state(t);
	if (!lk || lk->ready || !t->img.syms)
		return;
	lk->ready = true;
	struct ptw_symbols *syms = t->img.syms;
	lk->libc_path = t->img.dynamic ? ptw_symbols_module_path(syms, "libc.so") : NULL;
	struct ptw_libc_waits *lw = &lk->lw;
	ptw_libc_waits_find(syms, image_libc_module(t), tracer_read_code, t, lw);
	if (lw->lll_lock_wait)
		hook_at(t, l, lw->lll_lock_wait, HOOK_LOCK_WAIT, "__lll_lock_wait");
	else
		tracer_warn(t, PTW_W_LOCKS_PARTIAL,
			    "--locks: __lll_lock_wait not found in libc: mutex waits "
			    "are not seen");
	if (lw->lll_lock_wait_private)
		hook_at(t, l, lw->lll_lock_wait_private, HOOK_LOCK_WAIT_PRIVATE,
			"__lll_lock_wait_private");
	if (lw->futex_wait)
		hook_at(t, l, lw->futex_wait, HOOK_FUTEX_WAIT, "__futex_abstimed_wait_common");
	else
		tracer_warn(t, PTW_W_LOCKS_PARTIAL,
			    "--locks: glibc's futex wait function not found: rwlock, "
			    "condition variable and semaphore waits are not seen");
	unsigned blind = ptw_libc_waits_blind(lw);
	for (unsigned kind = 0; blind >> kind; kind++)
		if (blind & (1u << kind))
			tracer_warn(t, PTW_W_LOCKS_PARTIAL,
				    "--locks: %s waits cannot be told from other futex waits "
				    "without libc's symbol table (where they wait was not found in "
				    "its code): they are not seen",
				    ptw_wait_kind_name((enum ptw_wait_kind)kind));
	for (size_t i = 0; i < lw->nranges; i++)
		ptw_dbg(PTW_DBG_TRACER, "--locks: range [%#llx, %#llx) kind %d",
			(unsigned long long)lw->ranges[i].lo, (unsigned long long)lw->ranges[i].hi,
			lw->ranges[i].kind);
	lk->have_tid_off =
		t->img.tdb && ptw_tdb_pthread_field(t->img.tdb, "tid", &lk->tid_off) == 0;
	ptw_dbg(PTW_DBG_TRACER,
		"--locks: __lll_lock_wait %#llx (%s), private %#llx, futex wait %#llx",
		(unsigned long long)lw->lll_lock_wait,
		lw->symtab ? "symbol table" : "found from pthread_mutex_lock",
		(unsigned long long)lw->lll_lock_wait_private, (unsigned long long)lw->futex_wait);
}

/* The joins are waits too: at the join function's entry and rets. */
static unsigned locks_hooks_beside(struct ptw_tracer *t, unsigned hooks)
{
	if (!locks_state(t))
		return 0;
	return (hooks & HOOK_JOIN ? HOOK_WAIT_JOIN : 0) |
	       (hooks & HOOK_JOIN_RET ? HOOK_WAIT_JOIN_RET : 0);
}

static void pop_wait(struct ptw_tracer *t, struct locks_thread *th)
{
	if (th->nlwaits)
		tracer_retbp_put(t, &locks_state(t)->retbps, th->lwaits[--th->nlwaits].ret,
				 HOOK_WAIT_RETURN);
}

static void locks_thread_gone(struct ptw_tracer *t, struct thread *th)
{
	struct locks_thread *lt = (struct locks_thread *)th->fdata[FEATURE_LOCKS];
	if (!lt)
		return;
	while (lt->nlwaits)
		pop_wait(t, lt);
	locks_thread_free(&lt->base);
	th->fdata[FEATURE_LOCKS] = NULL;
}

/* ---- who waits for whom ---- */

static bool live_target_tid(struct ptw_tracer *t, int32_t tid)
{
	struct ptw_lwp *o = tid > 0 ? ptw_lwp_get(t->proc, tid) : NULL;
	return o && o->state != PTW_LWP_GONE && tracer_is_target_lwp(t, o);
}

static int32_t read_i32(struct ptw_tracer *t, uint64_t addr)
{
	int32_t v = 0;
	if (ptw_mem_read(t->proc, addr, &v, sizeof(v)) < 0)
		return 0;
	return v;
}

/* The thread that holds the object now (or that a join waits for), 0 none
 * known. */
static pid_t owner_now(struct ptw_tracer *t, enum ptw_wait_kind kind, uint64_t object)
{
	struct locks *lk = locks_state(t);
	uint64_t at = ptw_wait_owner_at(kind, object,
					      lk->have_tid_off ? object + lk->tid_off : 0);
	int32_t v = at ? read_i32(t, at) : 0;
	return live_target_tid(t, v) ? v : 0;
}

static pid_t waits_for(void *ctx, pid_t tid)
{
	struct ptw_tracer *t = ctx;
	struct ptw_lwp *o = ptw_lwp_get(t->proc, tid);
	struct locks_thread *th = o ? locks_peek(o) : NULL;
	if (!th || !th->nlwaits)
		return 0;
	const struct lock_wait *w = &th->lwaits[th->nlwaits - 1];
	return owner_now(t, w->kind, w->object);
}

/* ---- frames ---- */

/* The location of the call that returns to ret. */
static const struct ptw_location *call_at(struct ptw_tracer *t, uint64_t ret)
{
	uint8_t before[8];
	int k = 0;
	if (ret > 8 && ptw_bp_read_original(t->bps, ret - 8, before, 8) == 0)
		k = ptw_insn_call_length(before, ret);
	return tracer_locate(t, ret - (uint64_t)(k > 0 ? k : 1));
}

/* A global's name, when the object is one. */
static const struct ptw_location *object_location(struct ptw_tracer *t, uint64_t object)
{
	if (!object || !ptw_symbols_module_of(t->img.syms, object))
		return NULL;
	const struct ptw_location *loc = tracer_locate(t, object);
	return loc && loc->symbol ? loc : NULL;
}

/* ---- waits ---- */

/* Where a wait began: the stack pointer at the slow path's entry (the
 * slot of its return address; a join's, the join function's), and whether
 * that was before the attach (found under way). */
struct wait_entry {
	uint64_t sp;
	bool join; /* ends at the join function's rets, not a return breakpoint */
	bool before_attach;
};

static void begin_wait(struct ptw_tracer *t, struct ptw_lwp *l, const struct user_regs_struct *regs,
		       enum ptw_wait_kind kind, uint64_t object, pid_t owner, const uint64_t *pcs,
		       int n, struct wait_entry entry, uint64_t ns);

/* A deadlock through this thread's new wait? */
static void check_deadlock(struct ptw_tracer *t, struct ptw_lwp *l,
			   const struct user_regs_struct *regs, uint64_t ns);

static void wait_entry(struct ptw_tracer *t, struct ptw_lwp *l, const struct user_regs_struct *regs,
		       enum ptw_wait_kind kind, uint64_t object, uint64_t ns, bool classify_it)
{
	uint64_t pcs[SITE_FRAMES];
	int n = ptw_symbols_unwind(t->img.syms, l->tid, regs, pcs, SITE_FRAMES);
	if (n < 1) {
		pcs[0] = regs->rip;
		n = 1;
	}
	if (classify_it) {
		kind = ptw_libc_waits_classify(&locks_state(t)->lw, t->img.syms,
					       t->img.dynamic ? locks_state(t)->libc_path : NULL,
					       pcs, n);
		switch (kind) {
		case PTW_WAIT_COND:
		case PTW_WAIT_RWLOCK_READ:
		case PTW_WAIT_RWLOCK_WRITE:
			object = ptw_libc_waits_object(kind, object, (uint32_t)regs->rsi);
			break;
		case PTW_WAIT_MUTEX: /* a timed lock: on __lock, the mutex's first word */
		case PTW_WAIT_SEM:   /* on the value, the semaphore's first word */
		case PTW_WAIT_BARRIER:
			break;
		default:
			ptw_dbg(PTW_DBG_TRACER,
				"--locks: futex wait of %d not classified: %d frames, "
				"%#llx %#llx %#llx %#llx",
				l->tid, n, (unsigned long long)(n > 1 ? pcs[1] : 0),
				(unsigned long long)(n > 2 ? pcs[2] : 0),
				(unsigned long long)(n > 3 ? pcs[3] : 0),
				(unsigned long long)(n > 4 ? pcs[4] : 0));
			/* a join (seen at the join function) or a wait that is
			 * none of the above (aio, getaddrinfo_a): no span */
			return;
		}
	}
	begin_wait(t, l, regs, kind, object, owner_now(t, kind, object), pcs, n,
		   (struct wait_entry){ .sp = regs->rsp }, ns);
}

static void begin_wait(struct ptw_tracer *t, struct ptw_lwp *l, const struct user_regs_struct *regs,
		       enum ptw_wait_kind kind, uint64_t object, pid_t owner, const uint64_t *pcs,
		       int n, struct wait_entry entry, uint64_t ns)
{
	struct locks_thread *th = locks_of(l);
	uint64_t sp = entry.sp, ret = 0;
	/* Waits entered at or below this stack pointer were left (a longjmp
	 * out of a signal handler that waited): the span engine does the same. */
	while (th->nlwaits && th->lwaits[th->nlwaits - 1].sp <= sp)
		pop_wait(t, th);
	if (!entry.join) {
		int r = tracer_read_u64(t, sp, &ret);
		if (r == 0)
			r = tracer_retbp_get(t, &locks_state(t)->retbps, l, ret, HOOK_WAIT_RETURN);
		if (r < 0) {
			const struct ptw_location *loc = tracer_locate(t, regs->rip);
			tracer_warn(t, PTW_W_LOCKS_NO_RETURN,
				    "--locks: waits in %s returning to %#llx are not reported: %s",
				    loc && loc->symbol ? loc->symbol : "?", (unsigned long long)ret,
				    r == -EINVAL ? "no call precedes that address" : strerror(-r));
			return;
		}
	}
	if (th->nlwaits == th->lwaits_cap) {
		th->lwaits_cap = th->lwaits_cap ? 2 * th->lwaits_cap : 4;
		th->lwaits = xreallocarray(th->lwaits, th->lwaits_cap, sizeof(*th->lwaits));
	}
	th->lwaits[th->nlwaits++] = (struct lock_wait){ kind, object, ret, sp };

	const struct ptw_location *stack[SITE_FRAMES];
	for (int i = 0; i < n; i++)
		stack[i] = i ? tracer_locate(t, pcs[i] - 1) : tracer_locate(t, pcs[i]);
	int at = ptw_libc_waits_site_frame(&locks_state(t)->lw, t->img.syms,
					   t->img.dynamic ? locks_state(t)->libc_path : NULL, pcs,
					   n);
	const struct ptw_location *site = at > 0 ? call_at(t, pcs[at]) : NULL;
	struct ptw_event ev = ptw_event_init(PTW_EV_WAIT_BEGIN, ns, l->tid);
	ev.wait_kind = kind;
	ev.wait_object = object;
	ev.wait_owner = owner;
	ev.object = object_location(t, object);
	ev.site = site;
	ev.stack = stack;
	ev.nstack = (size_t)n;
	ev.sp = sp;
	ev.before_attach = entry.before_attach;
	tracer_emit(t, &ev);
	if (owner)
		check_deadlock(t, l, regs, ns);
}

static void end_wait(struct ptw_tracer *t, struct ptw_lwp *l, const struct user_regs_struct *regs,
		     uint64_t ns)
{
	struct locks_thread *th = locks_of(l);
	pop_wait(t, th);
	struct ptw_event ev = ptw_event_init(PTW_EV_WAIT_END, ns, l->tid);
	ev.has_value = true;
	ev.value = (uint32_t)regs->rax;
	ev.sp = regs->rsp;
	tracer_emit(t, &ev);
}

void hook_lock_wait(struct ptw_tracer *t, struct ptw_lwp *l, struct ptw_bp *bp,
		    const struct user_regs_struct *regs, uint64_t ns)
{
	(void)bp;
	/* __lll_lock_wait (int *futex, int private): the mutex's __lock */
	if (locks_state(t) && tracer_is_target_lwp(t, l))
		wait_entry(t, l, regs, PTW_WAIT_MUTEX, regs->rdi, ns, false);
}

void hook_lock_wait_private(struct ptw_tracer *t, struct ptw_lwp *l, struct ptw_bp *bp,
			    const struct user_regs_struct *regs, uint64_t ns)
{
	(void)bp;
	if (locks_state(t) && tracer_is_target_lwp(t, l))
		wait_entry(t, l, regs, PTW_WAIT_LOCK, regs->rdi, ns, false);
}

void hook_futex_wait(struct ptw_tracer *t, struct ptw_lwp *l, struct ptw_bp *bp,
		     const struct user_regs_struct *regs, uint64_t ns)
{
	(void)bp;
	/* (futex_word, expected, clockid, abstime, private, cancel) */
	if (locks_state(t) && tracer_is_target_lwp(t, l))
		wait_entry(t, l, regs, PTW_WAIT_NONE, regs->rdi, ns, true);
}

void hook_wait_return(struct ptw_tracer *t, struct ptw_lwp *l, struct ptw_bp *bp,
		      const struct user_regs_struct *regs, uint64_t ns)
{
	(void)bp;
	struct locks_thread *th = locks_peek(l);
	if (!locks_state(t) || !th || !th->nlwaits)
		return; /* another thread's fast path through the same code */
	const struct lock_wait *w = &th->lwaits[th->nlwaits - 1];
	if (w->ret != regs->rip || w->sp + 8 != regs->rsp)
		return;
	end_wait(t, l, regs, ns);
}

void hook_wait_join(struct ptw_tracer *t, struct ptw_lwp *l, struct ptw_bp *bp,
		    const struct user_regs_struct *regs, uint64_t ns)
{
	(void)bp;
	struct locks *lk = locks_state(t);
	/* __pthread_clockjoin_ex (thread, retval, clockid, abstime, block):
	 * pthread_tryjoin_np does not block; a thread whose tid is 0 has
	 * ended already: no wait. */
	if (!lk || !lk->have_tid_off || !(regs->r8 & 0xff) || !regs->rdi)
		return;
	int32_t tid = read_i32(t, regs->rdi + lk->tid_off);
	if (tid <= 0)
		return;
	uint64_t pcs[SITE_FRAMES];
	int n = ptw_symbols_unwind(t->img.syms, l->tid, regs, pcs, SITE_FRAMES);
	if (n < 1) {
		pcs[0] = regs->rip;
		n = 1;
	}
	begin_wait(t, l, regs, PTW_WAIT_JOIN, regs->rdi, live_target_tid(t, tid) ? tid : 0, pcs, n,
		   (struct wait_entry){ .sp = regs->rsp, .join = true }, ns);
}

void hook_wait_join_ret(struct ptw_tracer *t, struct ptw_lwp *l, struct ptw_bp *bp,
			const struct user_regs_struct *regs, uint64_t ns)
{
	(void)bp;
	struct locks_thread *th = locks_peek(l);
	if (!locks_state(t) || !th || !th->nlwaits)
		return;
	const struct lock_wait *w = &th->lwaits[th->nlwaits - 1];
	if (w->kind != PTW_WAIT_JOIN || w->ret || w->sp != regs->rsp)
		return;
	end_wait(t, l, regs, ns);
}

/* ---- waits under way at an attach ---- */

/*
 * Attach: thread l, stopped by the attach, may have been waiting already
 * (a deadlock formed before ptwatch came is the one most worth finding).
 * Asleep in futex, its stack shows which slow path it is in: the futex
 * (the system call's first argument) is the object, as at the slow path's
 * entry, and the frame's return slot is where its return breakpoint goes.
 * The wait span begins now, its start before (unknown: it lasts at least
 * from now, when the thread is seen in it); a cycle it closes is checked
 * as any other, with its members stopped.
 */
static void locks_under_way(struct ptw_tracer *t, struct ptw_lwp *l)
{
	struct locks *lk = locks_state(t);
	struct user_regs_struct *regs;
	if (!lk || !lk->ready || !t->img.syms || l->state != PTW_LWP_STOPPED ||
	    !tracer_is_target_lwp(t, l) || ptw_getregs(t->proc, l, &regs) < 0 ||
	    (long)regs->orig_rax != SYS_futex)
		return;
	uint64_t pcs[PTW_WAIT_UNDER_WAY_FRAMES], sps[PTW_WAIT_UNDER_WAY_FRAMES];
	bool whole;
	int n = ptw_symbols_unwind_sps(t->img.syms, l->tid, regs, pcs, sps,
				       PTW_WAIT_UNDER_WAY_FRAMES, &whole);
	struct ptw_join_at join = { t->img.join_lo, t->img.join_hi, lk->have_tid_off, lk->tid_off };
	struct ptw_wait_under_way w;
	/* futex (uaddr, op, val): the word, and the value the wait expects */
	ptw_libc_waits_under_way(&lk->lw, t->img.syms, t->img.dynamic ? lk->libc_path : NULL, &join,
				 regs->rdi, (uint32_t)regs->rdx, pcs, n, &w);
	if (w.kind == PTW_WAIT_NONE)
		return;
	int i = w.frame;
	uint64_t sp = tracer_return_slot(t, pcs, sps, i);
	if (!sp) {
		if (!lk->under_way_said)
			tracer_warn(
				t, PTW_W_LOCKS_NO_RETURN,
				"--locks: a wait under way at the attach in thread %d (the first "
				"such) is not reported: its stack slot could not be trusted",
				l->tid);
		lk->under_way_said = true;
		return;
	}
	begin_wait(t, l, regs, w.kind, w.object, owner_now(t, w.kind, w.object), pcs + i,
		   n - i > SITE_FRAMES ? SITE_FRAMES : n - i,
		   (struct wait_entry){ .sp = sp, .join = w.join, .before_attach = true },
		   ptw_now_ns());
}

/* ---- deadlocks ---- */

static void check_deadlock(struct ptw_tracer *t, struct ptw_lwp *l,
			   const struct user_regs_struct *regs, uint64_t ns)
{
	struct locks *lk = locks_state(t);
	pid_t cyc[MAX_CYCLE];
	size_t n;
	if (waits_for(t, l->tid) == l->tid) {
		/* a normal mutex locked again by its owner: it waits for itself */
		cyc[0] = l->tid;
		n = 1;
	} else {
		n = ptw_wait_cycle(l->tid, waits_for, t, cyc, MAX_CYCLE);
	}
	if (n < 1)
		return;
	struct ptw_lwp *lwps[MAX_CYCLE];
	uint64_t objects[MAX_CYCLE];
	enum ptw_wait_kind kinds[MAX_CYCLE];
	bool held[MAX_CYCLE];
	for (size_t i = 0; i < n; i++) {
		lwps[i] = ptw_lwp_get(t->proc, cyc[i]);
		struct locks_thread *th = lwps[i] ? locks_peek(lwps[i]) : NULL;
		if (!th || !th->nlwaits)
			return;
		objects[i] = th->lwaits[th->nlwaits - 1].object;
		kinds[i] = th->lwaits[th->nlwaits - 1].kind;
	}
	uint64_t key = ptw_wait_cycle_key(cyc, objects, n);
	if (ptw_map_get(&lk->reported, key))
		return;
	/* A candidate. The owners were read while the others ran: stop them,
	 * read again, and only a cycle that still holds is one. */
	uint64_t t0 = ptw_now_ns();
	int stopped = ptw_stop_lwps(t->proc, lwps, n, STOP_DEADLINE_MS, held);
	ptw_mem_invalidate(t->proc);
	bool real = stopped == (int)n;
	for (size_t i = 0; i < n && real; i++)
		real = owner_now(t, kinds[i], objects[i]) == cyc[(i + 1) % n];
	ptw_dbg(PTW_DBG_TRACER, "--locks: %zu-thread cycle from %d %s", n, l->tid,
		real ? "confirmed" : stopped == (int)n ? "gone when checked" : "not checkable now");
	if (real) {
		ptw_map_put(&lk->reported, key, (void *)1);
		uint32_t id = ++lk->ndeadlocks;
		for (size_t i = 0; i < n; i++) {
			struct user_regs_struct *r;
			const struct user_regs_struct *use = regs;
			if (lwps[i] != l) {
				if (ptw_getregs(t->proc, lwps[i], &r) < 0)
					r = NULL;
				use = r;
			}
			uint64_t pcs[DEADLOCK_FRAMES];
			const struct ptw_location *stack[DEADLOCK_FRAMES];
			int k = use ? ptw_symbols_unwind(t->img.syms, cyc[i], use, pcs,
							 DEADLOCK_FRAMES)
				    : 0;
			for (int j = 0; j < k; j++)
				stack[j] =
					j ? tracer_locate(t, pcs[j] - 1) : tracer_locate(t, pcs[j]);
			struct ptw_event ev = ptw_event_init(PTW_EV_DEADLOCK, ns, cyc[i]);
			ev.span_id = id;
			ev.has_value = true;
			ev.value = n;
			ev.has_arg = true;
			ev.arg = i;
			ev.wait_kind = kinds[i];
			ev.wait_object = objects[i];
			ev.wait_owner = cyc[(i + 1) % n];
			ev.object = object_location(t, objects[i]);
			ev.stack = stack;
			ev.nstack = (size_t)(k > 0 ? k : 0);
			ev.state = use && (long)use->orig_rax == SYS_futex ? "S futex" : "R";
			tracer_emit(t, &ev);
		}
	}
	for (size_t i = 0; i < n; i++)
		if (held[i])
			ptw_resume(t->proc, lwps[i]);
	t->frozen_ns += ptw_now_ns() - t0;
}

const struct tracer_feature feature_locks = {
	.name = "locks",
	.wanted = locks_wanted,
	.attached = locks_attached,
	.libc_ready = locks_setup,
	.under_way = locks_under_way,
	.hooks_beside = locks_hooks_beside,
	.image_reset = locks_image_reset,
	.thread_gone = locks_thread_gone,
	.free = locks_free,
};
