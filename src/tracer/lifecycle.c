/* SPDX-License-Identifier: MIT */
/*
 * The thread lifecycle feature: thread spans. libthread_db's events,
 * thread creation (the clone event) and death, start routines and their
 * returns, main(), and the libc entry points that end, cancel, detach or
 * join a thread (pthread_exit, pthread_cancel, pthread_detach, joins).
 * It finds out when libc is ready and tells the other features then.
 *
 * Stops per thread lifecycle (see docs/features.md, "Stops per thread lifecycle"):
 *   creator: the clone event (kernel, unavoidable with TRACECLONE)
 *   thread:  its first stop (kernel), start routine entry, TD_DEATH
 *   + TD_CREATE in the creator when --create-events asks for it
 *   + start_thread's return site and pthread_create's entry when libc's
 *     debug file is missing (return value, detach state)
 *   + join entry and return in the joiner, for threads that are joined.
 */
#define _GNU_SOURCE
#include <elf.h>
#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ptrace.h>
#include <unistd.h>

#include "ptw_libc_waits.h"
#include "tracer_internal.h"

#define SYS_CLONE 56
#define SYS_CLONE3 435
#define RT_CONSISTENT 0
#define R_STATE_OFFSET 24 /* struct r_debug: int r_version; map; r_brk; r_state */

/* ---- images ---- */

/* ld.so's functions that call _dl_debug_state (r_brk), for hook_callers. */
struct callers {
	struct ptw_tracer *t;
	struct ptw_lwp *l;
	int hooked;
};

static void hook_caller(void *ctx, uint64_t addr, const char *name)
{
	(void)name;
	struct callers *cs = ctx;
	struct ptw_tracer *t = cs->t;
	uint64_t lo, hi, sites[8];
	if (ptw_symbols_function_range(t->img.syms, addr, &lo, &hi) < 0 || lo != addr || hi <= lo ||
	    hi - lo > 65536)
		return;
	uint8_t *code = xmalloc(hi - lo);
	int n = 0;
	if (ptw_bp_read_original(t->bps, lo, code, hi - lo) == 0)
		n = ptw_insn_find_return_sites(code, hi - lo, lo, t->img.dl_debug_state, sites, 8);
	free(code);
	for (int i = 0; i < n; i++)
		cs->hooked += tracer_insert_bp(t, sites[i], HOOK_DL_DEBUG_STATE, cs->l) == 0;
}

/*
 * r_brk's own breakpoint cannot be had (another tool's int3 there, and it
 * is a lone ret that cannot move; or the kernel takes its trap): the
 * instruction after each call of it in ld.so sees the same moment (the
 * state is set in r_debug before the call). Returns how many are hooked.
 */
static int hook_r_brk_callers(struct ptw_tracer *t, struct ptw_lwp *l)
{
	struct image *img = &t->img;
	const char *ld = ptw_symbols_module_of(img->syms, img->dl_debug_state);
	struct callers cs = { t, l, 0 };
	for (size_t i = 0; ld && i < ptw_symbols_module_count(img->syms); i++) {
		const char *path;
		uint64_t start;
		bool exe;
		if (ptw_symbols_module_info(img->syms, i, &path, &start, &exe) == 0 &&
		    !strcmp(path, ld))
			ptw_symbols_module_functions(img->syms, i, hook_caller, &cs);
	}
	ptw_dbg(PTW_DBG_TRACER, "_dl_debug_state's return sites hooked: %d", cs.hooked);
	return cs.hooked;
}

static void image_hooks(struct ptw_tracer *t, struct ptw_lwp *l)
{
	struct image *img = &t->img;
	int r;
	img->r_brk_hooked = false;
	if (img->dl_debug_state &&
	    (r = tracer_insert_bp(t, img->dl_debug_state, HOOK_DL_DEBUG_STATE, l)) < 0) {
		int n = r == -EBUSY ? hook_r_brk_callers(t, l) : 0;
		if (n > 0)
			img->r_brk_hooked = true; /* (its callers' return sites) */
		else
			tracer_warn(t, PTW_W_NO_DL_DEBUG_STATE,
				    "cannot break at _dl_debug_state: %s; libraries are read when "
				    "main() starts, and those loaded later (dlopen) are not followed",
				    strerror(-r));
	} else if (img->dl_debug_state) {
		img->r_brk_hooked = true;
	}
	if (img->main_addr && img->fresh)
		tracer_insert_bp(t, img->main_addr, HOOK_MAIN, l);
}

/* ---- libthread_db and the libc hooks ---- */

/* Whether libc's function name is hooked now. */
static bool hook_symbol(struct ptw_tracer *t, struct ptw_lwp *l, const char *name, unsigned hook)
{
	uint64_t addr;
	if (ptw_symbols_lookup(t->img.syms, image_libc_module(t), name, &addr, NULL) < 0)
		return false;
	int r = tracer_insert_entry_bp(t, addr, hook, l);
	/* (a process on its way out has no memory left to write: EIO, or its
	 * thread is gone: nothing to warn of, its end is said) */
	if (r < 0 && !((r == -EIO || r == -ESRCH) &&
		       ptw_proc_exiting(t->proc->pid, l ? l->tid : t->proc->pid)))
		tracer_warn(t, PTW_W_HOOK_FAILED, "cannot break at %s: %s", name, strerror(-r));
	return r >= 0;
}

/*
 * Joins: the entry of the function all joins go through, and no more where
 * the joined thread's end tells the return (one stop per join). A plain
 * join (blocking, without a time limit) of a thread that nobody else joins
 * and that is not detached returns 0 once that thread is gone: its death
 * stop checks that no other thread claimed it (joinid), and the return is
 * told at its exit (the kernel has cleared its tid: the joiner wakes) or
 * at the joiner's next stop, whichever comes first; glibc's cancellation
 * of the joiner (SIGCANCEL) while it is still in the join means no join.
 * Any other call (timed, try, an error to come) gets a breakpoint where it
 * returns to, for that call. Every ret of the join function is hooked
 * instead where struct pthread's joinid or tid is unknown (no libc6-dbg),
 * or where --locks waits there anyway.
 */
static void hook_joins(struct ptw_tracer *t, struct ptw_lwp *l)
{
	struct image *img = &t->img;
	struct ptw_libc_join join;
	int fr = ptw_libc_join_find(img->syms, image_libc_module(t), tracer_read_code, t, &join);
	ptw_dbg(PTW_DBG_TRACER, "join function: %d [%#llx, %#llx)", fr, (unsigned long long)join.lo,
		(unsigned long long)join.hi);
	img->join_clockjoin = join.clockjoin;
	if (fr == -ENOENT)
		return;
	if (fr < 0) {
		tracer_warn(t, PTW_W_NO_JOIN_HOOKS,
			    "cannot find the extent of the join function; joins are not reported");
		return;
	}
	uint64_t lo = join.lo, hi = join.hi; /* (its entry is lo) */
	img->join_rets = !img->have_joinid || !image_tls_layout(t)->have_tid ||
			 tracer_hooks_beside(t, HOOK_JOIN_RET);
	img->join_lo = lo;
	img->join_hi = hi;
	size_t len = hi - lo;
	uint8_t *code = xmalloc(len);
	uint64_t rets[64];
	int nrets = 0;
	if (img->join_rets && ptw_bp_read_original(t->bps, lo, code, len) == 0)
		nrets = ptw_insn_find_rets(code, len, lo, rets, 64);
	free(code);
	if ((img->join_rets && nrets == 0) ||
	    tracer_insert_entry_bp(t, lo, HOOK_JOIN | tracer_hooks_beside(t, HOOK_JOIN), l) < 0) {
		tracer_warn(t, PTW_W_NO_JOIN_HOOKS,
			    "cannot break in the join function; joins are not reported");
		return;
	}
	for (int i = 0; i < nrets; i++)
		tracer_insert_bp(t, rets[i], HOOK_JOIN_RET | tracer_hooks_beside(t, HOOK_JOIN_RET),
				 l);
}

static void enable_thread(struct ptw_tracer *t, struct ptw_lwp *l)
{
	struct thread *th = tracer_thread_of(l);
	if (!th->pd && ptw_tdb_map_lwp(t->img.tdb, l->tid, &th->pd) < 0)
		return;
	if (ptw_tdb_thread_enable(t->img.tdb, th->pd) < 0)
		tracer_warn(t, PTW_W_NO_DEATH_EVENTS,
			    "cannot enable thread events for %d: its end is seen only when its LWP "
			    "exits",
			    l->tid);
}

int lifecycle_setup(struct ptw_tracer *t, struct ptw_lwp *l)
{
	struct image *img = &t->img;
	uint64_t create_bp, death_bp;
	int r = ptw_tdb_enable_events(img->tdb, t->o.create_events, &create_bp, &death_bp);
	if (r == 0)
		r = tracer_insert_bp(t, death_bp, HOOK_TD_DEATH, l);
	if (r == 0 && t->o.create_events)
		r = tracer_insert_bp(t, create_bp, HOOK_TD_CREATE, l);
	if (r < 0) {
		tracer_warn(t, PTW_W_NO_THREAD_EVENTS, "cannot enable libthread_db events: %s",
			    strerror(-r));
		ptw_tdb_disable_events(img->tdb);
		ptw_tdb_free(img->tdb);
		img->tdb = NULL;
		img->tdb_failed = true;
		return r;
	}
	/* report_events is per thread and not inherited: every thread we know. */
	size_t it = 0, n = 0;
	void *v;
	uint64_t *pds = xcalloc(t->proc->lwps->count + 1, sizeof(*pds));
	while (ptw_map_next(t->proc->lwps, &it, NULL, &v)) {
		struct ptw_lwp *o = v;
		struct thread *th = tracer_thread_of(o);
		if (o->tgid != t->proc->pid || o->state != PTW_LWP_STOPPED || th->foreign)
			continue;
		if (!th->pd)
			ptw_tdb_map_lwp(img->tdb, o->tid, &th->pd);
		if (th->pd)
			pds[n++] = th->pd;
	}
	if (n && ptw_tdb_threads_enable(img->tdb, pds, n) < 0)
		tracer_warn(t, PTW_W_NO_DEATH_EVENTS,
			    "cannot enable thread events for some threads: their end is seen only "
			    "when their LWP exits");
	free(pds);
	if (!img->have_result && img->dynamic)
		tracer_warn(
			t, PTW_W_NO_LIBC_DEBUGINFO,
			"libc's debug file is not available (install libc6-dbg): start routine returns "
			"and thread attributes cost extra stops");
	else if (!img->have_result)
		/* libc.a's code is in the program: libc6-dbg describes libc.so.6,
		 * not this copy, and cannot help. */
		tracer_warn(
			t, PTW_W_NO_LIBC_DEBUGINFO,
			"the static program %s has no DWARF for the libc linked into it (libc6-dbg "
			"describes the shared libc.so.6, not this copy; linking dynamically, or a "
			"libc.a with debug information, would help): start routine returns and thread "
			"attributes cost extra stops",
			img->exe ? img->exe : "?");
	if (!img->have_joinid)
		hook_symbol(t, l, "pthread_create", HOOK_PTHREAD_CREATE);
	img->exit_hooked = hook_symbol(t, l, "pthread_exit", HOOK_PTHREAD_EXIT);
	hook_symbol(t, l, "pthread_cancel", HOOK_PTHREAD_CANCEL);
	hook_symbol(t, l, "pthread_detach", HOOK_PTHREAD_DETACH);
	hook_joins(t, l);
	if (!img->main_addr && img->fresh)
		hook_symbol(t, l, "__libc_start_main", HOOK_LIBC_START_MAIN);
	tracer_libc_ready(t, l);
	/* What this start cost to learn, for the next one. */
	ptw_symbols_save_cache(img->syms);
	ptw_dbg(PTW_DBG_TRACER, "thread_db ready: glibc %s, result %s, joinid %s",
		img->glibc ? img->glibc : "?", img->have_result ? "dwarf" : "breakpoint",
		img->have_joinid ? "dwarf" : "breakpoint");
	return 0;
}

/* libc is ready: the thread agent, then tracing (once). */
static int libc_ready(struct ptw_tracer *t, struct ptw_lwp *l)
{
	if (t->img.tdb || t->img.tdb_failed)
		return 0;
	int r = image_tdb_open(t);
	return r < 0 ? r : lifecycle_setup(t, l);
}

/*
 * libc is ready and ld.so's breakpoint did not say so: at main(), or at a
 * thread made before it (a constructor's). Static programs: libc is ready
 * by now. So it is for one whose library loads ld.so's breakpoint could
 * not follow: its modules are read now. One whose breakpoint went in and
 * never fired had its trap taken by the kernel (a uprobe it keeps there,
 * in a process that has uprobes: docs/design.md, Facts, 15): the
 * instruction after each call of it is hooked for the loads to come, or,
 * without them, that is said.
 */
static void libc_ready_late(struct ptw_tracer *t, struct ptw_lwp *l)
{
	struct image *img = &t->img;
	bool r_brk_taken = img->dl_debug_state && img->r_brk_hooked && !img->tdb_failed;
	if (r_brk_taken && hook_r_brk_callers(t, l) == 0)
		tracer_warn(t, PTW_W_NO_DL_DEBUG_STATE,
			    "ld.so's _dl_debug_state never reached ptwatch's breakpoint (the "
			    "kernel took the trap: a uprobe it keeps there, another tool's or "
			    "left over); libraries are read once libc runs (main(), or a thread "
			    "made before it), and those loaded later (dlopen) are not followed");
	if (img->dl_debug_state)
		ptw_symbols_refresh(img->syms);
	libc_ready(t, l);
}

/* A pthread made before main() in a dynamic program whose libc nobody
 * said is ready (ld.so's breakpoint never fired): it is, pthread_create
 * runs; ld.so is between loads (not inside a dlopen's). */
static bool made_before_main_unannounced(struct ptw_tracer *t, uint64_t flags)
{
	struct image *img = &t->img;
	int32_t state;
	return !img->tdb && !img->tdb_failed && img->dynamic && !img->main_seen &&
	       (flags & CLONE_SETTLS) && img->r_debug &&
	       ptw_mem_read(t->proc, img->r_debug + R_STATE_OFFSET, &state, sizeof(state)) == 0 &&
	       state == RT_CONSISTENT;
}

/* ---- creation ---- */

/* The length of the call instruction that returns to ret (0: not a call
 * we know), read once per return address and module list. */
static int call_length(struct ptw_tracer *t, uint64_t ret)
{
	struct image *img = &t->img;
	uint64_t gen = (uint64_t)img->modules_gen + 1;
	uintptr_t v = (uintptr_t)ptw_map_get(&img->call_lengths, ret);
	if (v && v >> 8 == gen)
		return (int)(v & 0xff);
	uint8_t before[8];
	int k = 0;
	if (ptw_bp_read_original(t->bps, ret - 8, before, 8) == 0)
		k = ptw_insn_call_length(before, ret);
	ptw_map_put(&img->call_lengths, ret, (void *)(uintptr_t)(gen << 8 | (uint64_t)k));
	return k;
}

/* Where the creator called pthread_create: unwind to the first frame
 * outside it. */
static const struct ptw_location *create_site(struct ptw_tracer *t, struct ptw_lwp *l)
{
	struct user_regs_struct *regs;
	if (!t->img.create_lo || ptw_getregs(t->proc, l, &regs) < 0)
		return NULL;
	uint64_t pcs[8];
	int n = ptw_symbols_unwind(t->img.syms, l->tid, regs, pcs, 8);
	ptw_dbg(PTW_DBG_TRACER, "create site of %d: %d frames, first %#llx", l->tid, n,
		(unsigned long long)(n > 0 ? pcs[0] : 0));
	for (int i = 0; i + 1 < n; i++) {
		if (pcs[i] < t->img.create_lo || pcs[i] >= t->img.create_hi)
			continue;
		uint64_t ret = pcs[i + 1];
		int k = call_length(t, ret);
		return tracer_locate(t, ret - (uint64_t)(k ? k : 1));
	}
	return NULL;
}

static void thread_created(struct ptw_tracer *t, struct ptw_lwp *creator, struct ptw_lwp *cl,
			   const struct ptw_tdb_thread *info, uint64_t ns)
{
	struct image *img = &t->img;
	struct thread *pth = tracer_thread_of(creator), *cth = tracer_thread_of(cl);
	cth->pd = info->pthread;
	cth->start_routine = info->startfunc;
	/* Its end at its exit stop, which it has anyway: struct pthread says
	 * all by then (result, cancelhandling; not freed before the kernel
	 * clears its tid, after that stop), and its pthread_exit is hooked
	 * from its start. TD_DEATH would cost a breakpoint stop and a write of
	 * report_events in it. (--create-events keeps libthread_db's events.) */
	const struct ptw_pthread_layout *lay = image_tls_layout(t);
	cth->death_at_exit = img->have_result && lay->have_cancelhandling && img->exit_hooked &&
			     !t->o.create_events;
	if (!cth->death_at_exit && ptw_tdb_thread_enable(img->tdb, cth->pd) < 0)
		tracer_warn(t, PTW_W_NO_DEATH_EVENTS,
			    "cannot enable thread events for %d: its end is seen only when its LWP "
			    "exits",
			    cl->tid);
	if (cth->start_routine && img->have_result && !t->o.create_events) {
		/* The result comes from struct pthread at its death: its start
		 * is the moment it is let run (lifecycle_released), into
		 * start_thread and its routine, with no stop of its own. */
		cth->start_at_release = true;
		/* (glibc stored it before the clone; its page is read already) */
		cth->has_start_arg = lay->have_arg &&
				     tracer_read_u64(t, cth->pd + lay->arg, &cth->start_arg) == 0;
	} else if (cth->start_routine) {
		int r = tracer_insert_bp(t, cth->start_routine, HOOK_START, creator);
		cth->awaiting_start = r == 0;
		if (r < 0) {
			const struct ptw_location *loc = tracer_locate(t, cth->start_routine);
			tracer_warn(
				t, PTW_W_START_ROUTINE_UNHOOKABLE,
				"cannot break at start routine %s (%#llx): %s; its start is not reported",
				loc && loc->symbol ? loc->symbol : "?",
				(unsigned long long)cth->start_routine, strerror(-r));
		}
	}
	int detached = -1;
	uint64_t joinid;
	if (img->have_joinid && tracer_read_u64(t, cth->pd + img->joinid_off, &joinid) == 0)
		detached = joinid == cth->pd;
	else if (pth->attr_detached >= 0)
		detached = pth->attr_detached;
	pth->attr_detached = -1;

	struct ptw_event ev = ptw_event_init(PTW_EV_THREAD_CREATE, ns, creator->tid);
	ev.other_tid = cl->tid;
	ev.pthread = cth->pd;
	ev.routine = tracer_locate(t, cth->start_routine);
	ev.site = create_site(t, creator);
	ev.detached = detached;
	tracer_emit(t, &ev);
}

void lifecycle_clone_args(struct ptw_tracer *t, struct ptw_lwp *l, uint64_t *ret_flags,
			  uint64_t *ret_tls)
{
	/* The clone arguments are still in the creator's registers. */
	struct user_regs_struct *regs;
	*ret_flags = *ret_tls = 0;
	if (ptw_getregs(t->proc, l, &regs) < 0)
		return;
	if (regs->orig_rax == SYS_CLONE3) {
		uint64_t args[8]; /* struct clone_args up to tls */
		if (ptw_mem_read(t->proc, regs->rdi, args, sizeof(args)) == 0) {
			*ret_flags = args[0];
			*ret_tls = args[7];
		}
	} else if (regs->orig_rax == SYS_CLONE) {
		*ret_flags = regs->rdi;
		*ret_tls = regs->r8;
	}
}

bool lifecycle_shares_memory(struct ptw_tracer *t, struct ptw_lwp *parent, pid_t child)
{
	int same = ptw_proc_same_vm(parent->tid, child);
	if (same >= 0)
		return same;
	uint64_t flags, tls;
	lifecycle_clone_args(t, parent, &flags, &tls);
	return flags & CLONE_VM;
}

/*
 * The function and argument of a raw clone() made through glibc's wrapper
 * (sysdeps/unix/sysv/linux/x86_64/clone.S): it leaves them at the top of
 * the child's stack, the syscall's rsi, for the child to pop and call.
 * Only when the creator is in that wrapper (named clone in .dynsym): a
 * clone syscall made any other way, or clone3 (glibc's pthreads, whose
 * function is its own start_thread), leaves nothing to read there.
 */
static bool raw_clone_fn(struct ptw_tracer *t, struct ptw_lwp *l, uint64_t *ret_fn,
			 uint64_t *ret_arg)
{
	struct user_regs_struct *regs;
	uint64_t top[2];
	if (ptw_getregs(t->proc, l, &regs) < 0 || regs->orig_rax != SYS_CLONE || !regs->rsi)
		return false;
	const struct ptw_location *at = tracer_locate(t, regs->rip);
	if (!ptw_location_is_clone_wrapper(at) ||
	    ptw_mem_read(t->proc, regs->rsi, top, sizeof(top)) < 0 || !top[0])
		return false;
	*ret_fn = top[0];
	*ret_arg = top[1];
	return true;
}

void lifecycle_released(struct ptw_tracer *t, struct ptw_lwp *cl)
{
	struct thread *th = tracer_thread_of(cl);
	if (!th->start_at_release)
		return;
	th->start_at_release = false;
	th->started = true;
	struct ptw_event ev = ptw_event_init(PTW_EV_THREAD_START, ptw_now_ns(), cl->tid);
	ev.routine = tracer_locate(t, th->start_routine);
	ev.has_arg = th->has_start_arg;
	ev.arg = th->start_arg;
	tracer_emit(t, &ev);
}

void lifecycle_on_clone(struct ptw_tracer *t, struct ptw_lwp *l, pid_t child, uint64_t flags,
			uint64_t tls, uint64_t ns)
{
	struct image *img = &t->img;
	struct thread *pth = tracer_thread_of(l);
	struct ptw_lwp *cl = ptw_lwp_get(t->proc, child);
	if (!cl)
		return;
	struct thread *cth = tracer_thread_of(cl);

	if (!img->tdb && !img->tdb_failed && !img->dynamic)
		libc_ready(t, l); /* static and main() not found: now or never */
	else if (made_before_main_unannounced(t, flags))
		libc_ready_late(t, l);

	/* A pthread's TLS is its struct pthread, and pd->tid is the new tid. */
	struct ptw_tdb_thread info;
	bool pthread = img->tdb && (flags & CLONE_THREAD) && (flags & CLONE_SETTLS) && tls &&
		       ptw_tdb_thread_info(img->tdb, tls, &info) == 0 && info.lid == child;
	cth->announced = true;
	if (!pthread) {
		struct ptw_event ev = ptw_event_init(PTW_EV_LWP_CREATE, ns, l->tid);
		ev.other_tid = child;
		uint64_t fn;
		if (raw_clone_fn(t, l, &fn, &ev.arg)) {
			ev.routine = tracer_locate(t, fn);
			ev.has_arg = true;
		}
		tracer_emit(t, &ev);
		return;
	}
	if (t->o.create_events) {
		/* TD_CREATE will claim it; the new thread waits on a lock in
		 * start_thread until the creator leaves the event function. */
		pth->child = child;
		pth->child_tls = tls;
		pth->child_ns = ns;
		return;
	}
	thread_created(t, l, cl, &info, ns);
}

/* ---- breakpoint handlers ---- */

struct drained {
	struct ptw_tracer *t;
	uint64_t pds[8];
	td_event_e events[8];
	int n;
};

static void collect_msg(void *ctx, td_event_e event, uint64_t pd)
{
	struct drained *d = ctx;
	if (d->n < 8) {
		d->events[d->n] = event;
		d->pds[d->n++] = pd;
	}
}

static void on_td_create(struct ptw_tracer *t, struct ptw_lwp *l, uint64_t ns)
{
	struct thread *th = tracer_thread_of(l);
	struct drained d = { .t = t };
	/* Advice only (docs/design.md, Facts, 7): the hit is the truth. */
	ptw_tdb_drain(t->img.tdb, 8, collect_msg, &d);
	struct ptw_tdb_thread info;
	if (th->child) {
		struct ptw_lwp *cl = ptw_lwp_get(t->proc, th->child);
		if (cl && ptw_tdb_thread_info(t->img.tdb, th->child_tls, &info) == 0)
			thread_created(t, l, cl, &info, th->child_ns);
		th->child = 0;
		return;
	}
	/* No clone seen for this creation: reconstruct it from the messages. */
	for (int i = 0; i < d.n; i++) {
		if (d.events[i] != TD_CREATE ||
		    ptw_tdb_thread_info(t->img.tdb, d.pds[i], &info) < 0)
			continue;
		struct ptw_lwp *cl = ptw_lwp_get(t->proc, info.lid);
		if (cl && !tracer_thread_of(cl)->pd)
			thread_created(t, l, cl, &info, ns);
	}
}

/* Thread th has died (its death stop; see hook_joins): is a plain join of it due? */
static void joinee_died(struct ptw_tracer *t, struct thread *th)
{
	th->died = true;
	pid_t joiner = (pid_t)(intptr_t)ptw_map_get(&t->img.joiners, th->pd);
	struct ptw_lwp *jl = joiner ? ptw_lwp_get(t->proc, joiner) : NULL;
	if (!jl)
		return;
	struct thread *jt = tracer_thread_of(jl);
	uint64_t joinid = 0;
	/* claimed by the joiner, or not (glibc 2.36 never stores the joiner
	 * there; a later one does, once past the entry where we held it):
	 * either way it returns 0 now; another's (detached since, say): not
	 * this join's end */
	if (jt->in_join && jt->join_pd == th->pd &&
	    tracer_read_u64(t, th->pd + t->img.joinid_off, &joinid) == 0 &&
	    (joinid == jt->pd || !joinid))
		jt->join_due = true;
	else
		ptw_map_del(&t->img.joiners, th->pd);
}

static void on_td_death(struct ptw_tracer *t, struct ptw_lwp *l, uint64_t ns)
{
	struct image *img = &t->img;
	struct thread *th = tracer_thread_of(l);
	if (!th->pd)
		ptw_tdb_map_lwp(img->tdb, l->tid, &th->pd);
	struct ptw_event ev = ptw_event_init(PTW_EV_THREAD_DEATH, ns, l->tid);
	struct ptw_tdb_thread info;
	if (th->pd && ptw_tdb_thread_info(img->tdb, th->pd, &info) == 0)
		ev.unwinding = info.exiting;
	if (th->pd && img->have_result &&
	    tracer_read_u64(t, th->pd + img->result_off, &ev.value) == 0)
		ev.has_value = true;
	tracer_read_end(t, l->tid, ns);
	tracer_emit(t, &ev);
	if (th->pd)
		joinee_died(t, th);
	/* It leaves through its own exit syscall now: its exit stop would buy
	 * nothing. (One syscall here saves a stop.) */
	if (ptw_set_options(t->proc, l, t->proc->options & ~(unsigned)PTRACE_O_TRACEEXIT) == 0)
		th->exit_stop_off = true;
	/* The hit is the truth (docs/design.md, Facts, 7): its message is
	 * popped only where TD_CREATE's are read too; detach empties the list. */
	if (t->o.create_events)
		ptw_tdb_drain(img->tdb, 8, NULL, NULL);
}

bool lifecycle_exit_stop(struct ptw_tracer *t, struct ptw_lwp *l, bool own_exit, uint64_t ns)
{
	struct image *img = &t->img;
	struct thread *th = tracer_thread_of(l);
	const struct ptw_pthread_layout *lay = image_tls_layout(t);
	uint32_t ch;
	if (!th->death_at_exit || th->died || !own_exit || !th->pd ||
	    ptw_mem_read(t->proc, th->pd + lay->cancelhandling, &ch, sizeof(ch)) < 0 ||
	    !(ch & PTW_GLIBC_EXITING_BITMASK))
		return false; /* (still in its routine: exit() or the exit syscall from there) */
	/* Past start_thread's end: returned, or unwound by its pthread_exit
	 * (hooked) or a cancellation, which stores PTHREAD_CANCELED. (EXITING
	 * is set for all by now: it tells them apart at TD_DEATH only.) */
	struct ptw_event ev = ptw_event_init(PTW_EV_THREAD_DEATH, ns, l->tid);
	ev.has_value = tracer_read_u64(t, th->pd + img->result_off, &ev.value) == 0;
	bool cancelled = !th->exit_called && (ch & PTW_GLIBC_CANCELED_BITMASK) && ev.has_value &&
			 ev.value == PTW_GLIBC_PTHREAD_CANCELED;
	ev.unwinding = th->exit_called || cancelled;
	ev.cancelled = cancelled;
	tracer_emit(t, &ev);
	joinee_died(t, th);
	return true;
}

void hook_dl_debug_state(struct ptw_tracer *t, struct ptw_lwp *l, struct ptw_bp *bp,
			 const struct user_regs_struct *regs, uint64_t ns)
{
	(void)bp, (void)regs, (void)ns;
	struct image *img = &t->img;
	int32_t state;
	if (img->r_debug &&
	    ptw_mem_read(t->proc, img->r_debug + R_STATE_OFFSET, &state, sizeof(state)) == 0 &&
	    state == RT_CONSISTENT) {
		ptw_symbols_refresh(img->syms);
		image_debuginfod_warning(t);
		img->modules_gen++;
		ptw_bp_revalidate(t->bps); /* a dlclose may have unmapped some */
		libc_ready(t, l);
	}
}

void hook_td_create(struct ptw_tracer *t, struct ptw_lwp *l, struct ptw_bp *bp,
		    const struct user_regs_struct *regs, uint64_t ns)
{
	(void)bp, (void)regs;
	if (t->img.tdb)
		on_td_create(t, l, ns);
}

void hook_td_death(struct ptw_tracer *t, struct ptw_lwp *l, struct ptw_bp *bp,
		   const struct user_regs_struct *regs, uint64_t ns)
{
	(void)bp, (void)regs;
	if (t->img.tdb)
		on_td_death(t, l, ns);
}

void hook_start(struct ptw_tracer *t, struct ptw_lwp *l, struct ptw_bp *bp,
		const struct user_regs_struct *regs, uint64_t ns)
{
	struct thread *th = tracer_thread_of(l);
	if (!th->awaiting_start || th->start_routine != bp->addr)
		return; /* an ordinary call of a function that is also a start routine */
	th->awaiting_start = false;
	th->started = true;
	struct ptw_event ev = ptw_event_init(PTW_EV_THREAD_START, ns, l->tid);
	ev.routine = tracer_locate(t, bp->addr);
	ev.has_arg = true;
	ev.arg = regs->rdi;
	tracer_emit(t, &ev);

	struct image *img = &t->img;
	uint64_t ret;
	if (img->have_result || tracer_read_u64(t, regs->rsp, &ret) < 0)
		return;
	/* Without libc's DWARF the return value is caught where start_thread
	 * resumes after the start routine (the same place for every thread). */
	for (int i = 0; i < img->nstart_return_sites; i++)
		if (img->start_return_sites[i] == ret)
			return;
	if (img->nstart_return_sites < (int)PTW_ARRAY_SIZE(img->start_return_sites) &&
	    tracer_insert_bp(t, ret, HOOK_START_RETURN, l) == 0)
		img->start_return_sites[img->nstart_return_sites++] = ret;
}

void hook_start_return(struct ptw_tracer *t, struct ptw_lwp *l, struct ptw_bp *bp,
		       const struct user_regs_struct *regs, uint64_t ns)
{
	(void)bp;
	struct thread *th = tracer_thread_of(l);
	if (!th->started || th->returned)
		return;
	th->returned = true;
	struct ptw_event ev = ptw_event_init(PTW_EV_THREAD_RETURN, ns, l->tid);
	ev.has_value = true;
	ev.value = regs->rax;
	tracer_emit(t, &ev);
}

void hook_main(struct ptw_tracer *t, struct ptw_lwp *l, struct ptw_bp *bp,
	       const struct user_regs_struct *regs, uint64_t ns)
{
	struct thread *th = tracer_thread_of(l);
	struct image *img = &t->img;
	if (!th->is_main || img->main_seen)
		return;
	img->main_seen = true;
	if (!img->tdb)
		libc_ready_late(t, l);
	else if (!th->pd)
		enable_thread(t, l);
	struct ptw_event ev = ptw_event_init(PTW_EV_MAIN_START, ns, l->tid);
	ev.routine = tracer_locate(t, bp->addr);
	ev.pthread = th->pd;
	tracer_emit(t, &ev);
	uint64_t ret;
	if (tracer_read_u64(t, regs->rsp, &ret) == 0)
		tracer_insert_bp(t, ret, HOOK_MAIN_RETURN, l);
}

void hook_main_return(struct ptw_tracer *t, struct ptw_lwp *l, struct ptw_bp *bp,
		      const struct user_regs_struct *regs, uint64_t ns)
{
	(void)bp;
	struct thread *th = tracer_thread_of(l);
	if (!th->is_main || th->returned)
		return;
	th->returned = true;
	struct ptw_event ev = ptw_event_init(PTW_EV_THREAD_RETURN, ns, l->tid);
	ev.has_value = true;
	ev.value = (uint32_t)regs->rax; /* main returns int */
	tracer_emit(t, &ev);
}

void hook_libc_start_main(struct ptw_tracer *t, struct ptw_lwp *l, struct ptw_bp *bp,
			  const struct user_regs_struct *regs, uint64_t ns)
{
	(void)bp, (void)ns;
	struct image *img = &t->img;
	if (img->main_addr || !regs->rdi)
		return;
	img->main_addr = regs->rdi;
	tracer_insert_bp(t, regs->rdi, HOOK_MAIN, l);
}

void hook_pthread_create(struct ptw_tracer *t, struct ptw_lwp *l, struct ptw_bp *bp,
			 const struct user_regs_struct *regs, uint64_t ns)
{
	(void)bp, (void)ns;
	struct thread *th = tracer_thread_of(l);
	/* pthread_create(thread, attr, start, arg): the attr's flags (an int
	 * after sched_param and schedpolicy) say detached or not. */
	int32_t flags;
	if (!regs->rsi)
		th->attr_detached = 0;
	else if (t->img.attr_layout_known &&
		 ptw_mem_read(t->proc, regs->rsi + 8, &flags, sizeof(flags)) == 0)
		th->attr_detached = flags & 1;
}

/* pthread_exit, pthread_cancel, pthread_detach, join entries: their first
 * argument is the event's. */
static void libc_call(struct ptw_tracer *t, struct ptw_lwp *l, enum ptw_event_kind kind,
		      const struct user_regs_struct *regs, uint64_t ns)
{
	struct ptw_event ev = ptw_event_init(kind, ns, l->tid);
	if (kind == PTW_EV_EXIT_CALL) {
		ev.has_value = true;
		ev.value = regs->rdi;
	} else {
		ev.pthread = regs->rdi;
	}
	if (kind == PTW_EV_JOIN_CALL)
		tracer_thread_of(l)->in_join = true;
	tracer_emit(t, &ev);
}

void hook_pthread_exit(struct ptw_tracer *t, struct ptw_lwp *l, struct ptw_bp *bp,
		       const struct user_regs_struct *regs, uint64_t ns)
{
	(void)bp;
	tracer_thread_of(l)->exit_called = true;
	libc_call(t, l, PTW_EV_EXIT_CALL, regs, ns);
}

void hook_pthread_cancel(struct ptw_tracer *t, struct ptw_lwp *l, struct ptw_bp *bp,
			 const struct user_regs_struct *regs, uint64_t ns)
{
	(void)bp;
	libc_call(t, l, PTW_EV_CANCEL_REQUEST, regs, ns);
}

void hook_pthread_detach(struct ptw_tracer *t, struct ptw_lwp *l, struct ptw_bp *bp,
			 const struct user_regs_struct *regs, uint64_t ns)
{
	(void)bp;
	libc_call(t, l, PTW_EV_DETACH_CALL, regs, ns);
}

static void join_return(struct ptw_tracer *t, pid_t tid, struct thread *th, uint32_t value,
			uint64_t ns)
{
	th->in_join = th->join_due = false;
	struct ptw_event ev = ptw_event_init(PTW_EV_JOIN_RETURN, ns, tid);
	ev.has_value = true;
	ev.value = value; /* an errno value, 0 = joined */
	tracer_emit(t, &ev);
}

/* Thread tid no longer joins th->join_pd (img.joiners: pd -> its joiner). */
static void unclaim(struct ptw_tracer *t, pid_t tid, const struct thread *th)
{
	if (ptw_map_get(&t->img.joiners, th->join_pd) == (void *)(intptr_t)tid)
		ptw_map_del(&t->img.joiners, th->join_pd);
}

/* The plain join's return, told by the joined thread's end (hook_joins). */
static void plain_join_return(struct ptw_tracer *t, pid_t tid, struct thread *th, uint64_t ns)
{
	unclaim(t, tid, th);
	join_return(t, tid, th, 0, ns);
}

/*
 * A plain join (hook_joins) of thread pd by l: blocking without a time
 * limit, of a thread of ours that is not detached and that nobody joins
 * yet (glibc then claims it and returns 0 once it ended). *gone: it has
 * ended already (its tid cleared).
 */
static bool plain_join(struct ptw_tracer *t, struct ptw_lwp *l,
		       const struct user_regs_struct *regs, struct thread **joinee,
		       pid_t *joinee_tid, bool *gone)
{
	struct image *img = &t->img;
	struct thread *self = tracer_thread_of(l);
	uint64_t pd = regs->rdi, joinid;
	int32_t tid;
	const struct ptw_pthread_layout *lay = image_tls_layout(t);
	if (img->join_clockjoin && (regs->rcx || !(regs->r8 & 0xff)))
		return false; /* (thread, retval, clockid, abstime, block) */
	if (!self->pd)
		ptw_tdb_map_lwp(img->tdb, l->tid, &self->pd);
	if (!pd || !self->pd || pd == self->pd ||
	    tracer_read_u64(t, pd + img->joinid_off, &joinid) < 0 || joinid ||
	    ptw_mem_read(t->proc, pd + lay->tid, &tid, sizeof(tid)) < 0 || tid < 0)
		return false;
	*gone = tid == 0;
	if (*gone)
		return true;
	struct ptw_lwp *jl = ptw_lwp_get(t->proc, tid);
	*joinee = jl && jl->tgid == t->proc->pid ? tracer_thread_of(jl) : NULL;
	*joinee_tid = tid;
	return *joinee && (*joinee)->pd == pd &&
	       !ptw_map_get(&img->joiners, pd); /* (a second joiner: not plain) */
}

void hook_join(struct ptw_tracer *t, struct ptw_lwp *l, struct ptw_bp *bp,
	       const struct user_regs_struct *regs, uint64_t ns)
{
	(void)bp;
	libc_call(t, l, PTW_EV_JOIN_CALL, regs, ns);
	struct image *img = &t->img;
	struct thread *th = tracer_thread_of(l), *joinee = NULL;
	th->join_pd = regs->rdi;
	th->join_due = false;
	th->join_ret = 0;
	th->join_tid = 0;
	bool gone = false;
	if (img->join_rets)
		return;
	pid_t joinee_tid = 0;
	if (plain_join(t, l, regs, &joinee, &joinee_tid, &gone)) {
		if (gone) { /* it returns at once */
			join_return(t, l->tid, th, 0, ns);
			return;
		}
		ptw_map_put(&img->joiners, th->join_pd, (void *)(intptr_t)l->tid);
		th->join_due = joinee->died; /* (ended, its tid not yet cleared) */
		th->join_tid = joinee_tid;
		return;
	}
	/* This call only: where it returns to. */
	uint64_t ret = 0;
	if (!img->join_retbps)
		img->join_retbps = xcalloc(1, sizeof(*img->join_retbps));
	if (tracer_read_u64(t, regs->rsp, &ret) == 0 &&
	    tracer_retbp_get(t, img->join_retbps, l, ret, HOOK_JOIN_RET) == 0) {
		th->join_ret = ret;
		th->join_sp = regs->rsp + 8;
	} else {
		tracer_warn(t, PTW_W_NO_JOIN_HOOKS,
			    "cannot break where a join returns (%#llx): its return is not reported",
			    (unsigned long long)ret);
	}
}

void hook_join_ret(struct ptw_tracer *t, struct ptw_lwp *l, struct ptw_bp *bp,
		   const struct user_regs_struct *regs, uint64_t ns)
{
	struct thread *th = tracer_thread_of(l);
	if (!th->in_join)
		return;
	if (!t->img.join_rets) { /* this call's own breakpoint */
		if (!th->join_ret || bp->addr != th->join_ret || regs->rsp != th->join_sp)
			return;
		tracer_retbp_put(t, t->img.join_retbps, th->join_ret, HOOK_JOIN_RET);
		th->join_ret = 0;
	}
	join_return(t, l->tid, th, (uint32_t)regs->rax, ns);
}

/* Is thread l (stopped) inside the join function? */
static bool in_join_function(struct ptw_tracer *t, struct ptw_lwp *l)
{
	struct user_regs_struct *regs;
	uint64_t pcs[8];
	int n = ptw_getregs(t->proc, l, &regs) == 0
			? ptw_symbols_unwind(t->img.syms, l->tid, regs, pcs, 8)
			: 0;
	for (int i = 0; i < n; i++)
		if (pcs[i] - (i ? 1 : 0) - t->img.join_lo < t->img.join_hi - t->img.join_lo)
			return true;
	return false;
}

void lifecycle_stopped(struct ptw_tracer *t, struct ptw_lwp *l, const struct ptw_stop *st)
{
	struct thread *th = tracer_thread_of(l);
	if (!th->join_due || !th->in_join)
		return;
	/* glibc's cancellation (SIGCANCEL) of a thread still in the join: it
	 * unwinds out of it, and the join is not done */
	if (st->kind == PTW_STOP_SIGNAL && st->sig == 32 /* SIGCANCEL */ && in_join_function(t, l)) {
		th->join_due = false;
		unclaim(t, l->tid, th);
		return;
	}
	plain_join_return(t, l->tid, th, st->ns); /* it ran past the join */
}

/* Thread th is forgotten: its end is the return of a plain join of it;
 * a join it was in (cancelled there) is no more. */
static void lifecycle_thread_gone(struct ptw_tracer *t, struct thread *th)
{
	if (th->join_ret) /* (a timed join it was cancelled in) */
		tracer_retbp_put(t, t->img.join_retbps, th->join_ret, HOOK_JOIN_RET);
	th->join_ret = 0;
	if (th->in_join) {
		pid_t tid = (pid_t)(intptr_t)ptw_map_get(&t->img.joiners, th->join_pd);
		struct ptw_lwp *self = tid ? ptw_lwp_get(t->proc, tid) : NULL;
		if (self && self->user == th)
			ptw_map_del(&t->img.joiners, th->join_pd);
	}
	pid_t joiner = th->pd ? (pid_t)(intptr_t)ptw_map_get(&t->img.joiners, th->pd) : 0;
	struct ptw_lwp *jl = joiner ? ptw_lwp_get(t->proc, joiner) : NULL;
	if (!jl)
		return;
	struct thread *jt = tracer_thread_of(jl);
	/* (th's pd may be the joined thread's by now: glibc reuses a stack
	 * once the kernel cleared its thread's tid, before we reap it) */
	struct ptw_lwp *joined = jt->join_tid ? ptw_lwp_get(t->proc, jt->join_tid) : NULL;
	if (joined && joined->user != th)
		return;
	if (jt->in_join && jt->join_pd == th->pd && (jt->join_due || th->exit_reported))
		plain_join_return(t, joiner, jt, ptw_now_ns());
	else if (!jt->in_join || jt->join_pd != th->pd)
		ptw_map_del(&t->img.joiners, th->pd);
}

/* Thread spans: always on. It finds out when libc is ready (and tells the
 * others, tracer_libc_ready); its per-thread state is struct thread's. */
const struct tracer_feature feature_lifecycle = {
	.name = "lifecycle",
	.image_ready = image_hooks,
	.thread_gone = lifecycle_thread_gone,
};
