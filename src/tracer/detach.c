/* SPDX-License-Identifier: MIT */
/*
 * Letting go of a live process: every thread stopped, every patched byte
 * restored, thread_db's event mask cleared, out-of-line pages unmapped
 * where no thread can come back to them, pending signals re-injected,
 * then detached (tracer_let_go, ptw_tracer_detach).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ptrace.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "tracer_internal.h"


/* An LWP of t's process (the root also takes those no one else does). */
static bool mine(const struct ptw_tracer *t, const struct ptw_lwp *l)
{
	return !t->root || l->tgid == t->pid;
}

/* ---- detach ---- */

static void on_stop_detaching(void *ctx, struct ptw_stop *st)
{
	struct ptw_tracer *t = ctx;
	struct ptw_lwp *l = st->lwp;
	switch (st->kind) {
	case PTW_STOP_EXITED:
	case PTW_STOP_KILLED:
		tracer_lwp_gone(t, l, st);
		break;
	case PTW_STOP_SIGNAL:
		/* Our trap is undone (rip rewound): the original instruction
		 * runs once the bytes are restored. Any other signal is kept
		 * for delivery at detach. */
		l->resume_sig = tracer_our_trap(t, l, st) ? 0 : st->sig;
		break;
	case PTW_STOP_FORK:
	case PTW_STOP_VFORK: {
		struct ptw_lwp *cl = ptw_lwp_get(t->proc, (pid_t)st->msg);
		if (cl) {
			tracer_thread_of(cl)->foreign = true;
			/* (a child sharing our memory has no copy to restore) */
			if (st->kind == PTW_STOP_FORK && !lifecycle_shares_memory(t, l, cl->tid))
				ptw_bp_restore_in(t->bps, cl->tid);
		}
		break;
	}
	default:
		break;
	}
}

/* Puts the thread_db state back: event mask cleared, report_events off on
 * every thread we turned it on for. */
static void disable_thread_events(struct ptw_tracer *t)
{
	ptw_tdb_disable_events(t->img.tdb);
	size_t it = 0, n = 0;
	void *v;
	uint64_t *pds = xcalloc(t->proc->lwps->count + 1, sizeof(*pds));
	while (ptw_map_next(t->proc->lwps, &it, NULL, &v)) {
		struct ptw_lwp *l = v;
		struct thread *th = l->user;
		if (th && th->pd && tracer_is_target_lwp(t, l) && l->state != PTW_LWP_GONE)
			pds[n++] = th->pd;
	}
	ptw_tdb_threads_disable(t->img.tdb, pds, n);
	free(pds);
}

/*
 * Could a thread still come back into an out-of-line page after we unmap
 * it? Only one that ran a slot: if it did not stop, or if its stack holds a
 * word pointing into a page (a signal interrupted it in the slot and its
 * handler has not returned). Conservative: a stray word keeps the pages.
 */
static bool xol_still_referenced(struct ptw_tracer *t)
{
	enum { SCAN = 64 * 1024 };
	uint8_t *buf = xmalloc(SCAN);
	bool found = false;
	size_t it = 0;
	void *v;
	while (!found && ptw_map_next(t->proc->lwps, &it, NULL, &v)) {
		struct ptw_lwp *l = v;
		struct thread *th = l->user;
		struct user_regs_struct *regs;
		if (!th || !th->used_xol || l->state == PTW_LWP_GONE || !mine(t, l))
			continue;
		if (l->state != PTW_LWP_STOPPED || ptw_getregs(t->proc, l, &regs) < 0) {
			found = true;
			break;
		}
		/* Scan up from rsp in pages (the stack's end stops the read). */
		for (size_t off = 0; off < SCAN && !found; off += 4096) {
			uint64_t a = (regs->rsp & ~4095ull) + off;
			if (ptw_mem_read(t->proc, a, buf, 4096) < 0)
				break;
			found = ptw_bp_refers_to_xol(t->bps, buf, 4096);
		}
	}
	free(buf);
	return found;
}

/* Threads in an out-of-line slot go back to the same point in the original
 * code; then the pages go, unless a thread may still return into one. */
static void leave_xol_pages(struct ptw_tracer *t)
{
	if (!t->bps || !ptw_bp_xol_pages(t->bps))
		return;
	if (xol_still_referenced(t)) {
		tracer_warn(
			t, PTW_W_XOL_PAGE_LEFT,
			"%zu out-of-line pages (r-x, 4 KiB each) stay mapped in %d: a thread may still "
			"return into one (a signal frame, or a thread that did not stop)",
			ptw_bp_xol_pages(t->bps), t->proc->pid);
		return;
	}
	size_t it = 0;
	void *v;
	while (ptw_map_next(t->proc->lwps, &it, NULL, &v)) {
		struct ptw_lwp *l = v;
		struct user_regs_struct *regs;
		uint64_t rip;
		if (l->state != PTW_LWP_STOPPED || !mine(t, l) ||
		    ptw_getregs(t->proc, l, &regs) < 0)
			continue;
		if (ptw_bp_xol_origin(t->bps, regs->rip, &rip)) {
			regs->rip = rip;
			ptw_regs_dirty(l);
		}
	}
	/* The munmap runs in a thread stopped outside any system call, or in
	 * one we let finish its call first (it stops again at once). */
	struct ptw_lwp *host = tracer_injection_host(t);
	if (host && !ptw_lwp_injectable(host) && tracer_make_injectable(t, host) < 0)
		host = NULL;
	int left = ptw_bp_unmap_xol(t->bps, host);
	if (left)
		tracer_warn(t, PTW_W_XOL_PAGE_LEFT,
			    "%d out-of-line pages (r-x, 4 KiB) stay mapped in %d", left,
			    t->proc->pid);
}

/* l is held at an interrupt stop: a trap on our int3 can be queued behind
 * it (it hit the int3 as we interrupted it): let it be reported (the
 * thread runs no user code before that) and undo it. l may be gone after
 * (then forgotten). */
static void undo_queued_trap(struct ptw_tracer *t, struct ptw_lwp *l)
{
	if (l->state != PTW_LWP_STOPPED || l->last_stop != PTW_STOP_INTERRUPT ||
	    !ptw_signal_queued(t->proc, l, SIGTRAP, SI_KERNEL))
		return;
	int saved = l->resume_sig;
	pid_t tid = l->tid;
	l->resume_sig = 0;
	struct ptw_stop st;
	if (ptw_resume(t->proc, l) == 0 && ptw_wait_tid(t->proc, l, &st) == 0) {
		on_stop_detaching(t, &st);
		l = ptw_lwp_get(t->proc, tid); /* (forgotten if it is gone) */
		if (l && !l->resume_sig)
			l->resume_sig = saved;
	}
}

/* Stops l (running or not) with nothing of ours pending: a trap on our
 * int3 is undone (rip rewound), another signal kept for its detach.
 * 0, or -ESRCH when it is gone (then forgotten). */
static int stop_clean(struct ptw_tracer *t, struct ptw_lwp *l)
{
	pid_t tid = l->tid;
	int r = 0;
	struct ptw_stop st;
	if (ptw_take_queued(t->proc, l, &st))
		on_stop_detaching(t, &st); /* a stop reaped out of band, not handled yet */
	else if (l->state != PTW_LWP_STOPPED && (r = ptw_interrupt(t->proc, l)) == 0 &&
		 (r = ptw_wait_tid(t->proc, l, &st)) == 0)
		on_stop_detaching(t, &st); /* its next stop, whatever it is */
	if (r < 0)
		return r;
	if ((l = ptw_lwp_get(t->proc, tid)))
		undo_queued_trap(t, l);
	return ptw_lwp_get(t->proc, tid) ? 0 : -ESRCH;
}

/* A process in t's memory (vfork, clone(CLONE_VM)), there still. */
static bool vm_child(struct ptw_tracer *t, struct ptw_lwp *l)
{
	struct thread *th = l->user;
	return th && th->vm_parent == t->pid && l->tgid != t->pid && l->state != PTW_LWP_GONE;
}

void tracer_release_vm_children(struct ptw_tracer *t)
{
	if (!t->proc || !t->bps)
		return;
	pid_t *tids;
	size_t n = tracer_tids_where(t, vm_child, &tids);
	struct ptw_tracer *root = tracer_root(t);
	for (size_t i = 0; i < n; i++) {
		struct ptw_lwp *l = ptw_lwp_get(t->proc, tids[i]);
		if (!l || stop_clean(t, l) < 0)
			continue;
		int failed = ptw_bp_restore_in(t->bps, l->tid);
		if (failed)
			tracer_warn(t, PTW_W_RESTORE_FAILED,
				    "%d patched bytes could not be restored in %d, which shares the "
				    "memory of %d",
				    failed, l->tid, t->pid);
		/* -f: its record ends here, untraced from now on. */
		struct ptw_tracer *c = ptw_map_get(&root->by_pid, (uint64_t)l->tgid);
		if (c && c->vfork_pending) {
			c->detached = true;
			c->end_ns = ptw_now_ns();
			ptw_map_del(&root->by_pid, (uint64_t)c->pid);
		}
		ptw_detach_lwp(t->proc, l);
		tracer_forget_lwp(t, l);
	}
	free(tids);
}

int tracer_let_go(struct ptw_tracer *t)
{
	if (t->target_gone || t->detached)
		return 0;
	t->letting_go = true; /* (a fork seen now is not followed: follow_fork_stop) */
	/* -f: every followed process first, each on its own (its threads,
	 * its bytes); what is left (the root's, vfork children) after. */
	int stuck_followed = 0;
	for (size_t i = 0; i < t->nfollowed; i++) {
		struct ptw_tracer *c = t->followed[i];
		if (c->proc && !c->target_gone && !c->vfork_pending && !c->detached) {
			stuck_followed += tracer_let_go(c);
			ptw_map_del(&t->by_pid, (uint64_t)c->pid);
			c->end_ns = ptw_now_ns();
		}
	}
	uint64_t t0 = ptw_now_ns();
	int stuck = ptw_stop_all(t->proc, 3000, on_stop_detaching, t);
	if (stuck < 0)
		stuck = 0;

	/* A trap of ours queued behind an interrupt stop is undone. (A
	 * snapshot patches nothing.) */
	size_t it = 0;
	void *v;
	while (!t->snapshot && ptw_map_next(t->proc->lwps, &it, NULL, &v))
		if (mine(t, v))
			undo_queued_trap(t, v);

	/* (A snapshot enabled none: it writes nothing, and must not clear a
	 * debugger's.) */
	if (t->img.tdb && !t->snapshot)
		disable_thread_events(t);
	leave_xol_pages(t);
	int failed = t->bps ? ptw_bp_restore_all(t->bps) : 0;
	if (failed)
		tracer_warn(t, PTW_W_RESTORE_FAILED, "%d patched bytes could not be restored",
			    failed);

	/*
	 * Threads with a signal to deliver go last: one that is fatal (a
	 * second Ctrl-C) kills the others as soon as it is delivered, and a
	 * thread still traced then stops at its exit event and stays traced,
	 * its process unreaped, until ptwatch exits.
	 */
	it = 0;
	struct ptw_lwp **all = NULL;
	size_t n = 0, nquiet = 0;
	while (ptw_map_next(t->proc->lwps, &it, NULL, &v)) {
		if (!mine(t, v))
			continue;
		all = xreallocarray(all, n + 1, sizeof(*all));
		all[n++] = v;
		if (!all[n - 1]->resume_sig) {
			struct ptw_lwp *q = all[nquiet];
			all[nquiet++] = all[n - 1];
			all[n - 1] = q;
		}
	}
	pid_t *open_tids = xcalloc(n + 1, sizeof(*open_tids));
	size_t nopen = 0, nlive = 0;
	for (size_t i = 0; i < n; i++) {
		int sig = all[i]->resume_sig;
		if (sig && all[i]->state == PTW_LWP_STOPPED && tracer_is_target_lwp(t, all[i]) &&
		    tracer_sig_kills(sig) && ptw_proc_sig_default(t->proc->pid, sig))
			t->fatal_at_detach = sig; /* a second Ctrl-C it does not handle */
		if (tracer_is_target_lwp(t, all[i]) && all[i]->state != PTW_LWP_GONE)
			open_tids[nopen++] = all[i]->tid;
		/* Held at its exit event, or resumed from it (only its death
		 * follows: a zombie for us to reap): if it is a process-wide
		 * exit, the others have SIGKILL pending (every thread's status
		 * says) or none is left (they were all past it). */
		if (tracer_is_target_lwp(t, all[i]) && all[i]->state != PTW_LWP_GONE &&
		    (all[i]->state == PTW_LWP_STOPPED || all[i]->exiting)) {
			bool exiting = all[i]->exiting || all[i]->last_stop == PTW_STOP_EXIT;
			t->exiting_at_detach |= exiting;
			nlive += !exiting;
		}
		if (all[i]->state == PTW_LWP_STOPPED) {
			int r = ptw_detach_lwp(t->proc, all[i]);
			t->left_traced += r < 0 && r != -ESRCH;
		} else if (all[i]->state != PTW_LWP_GONE) {
			t->left_traced++; /* never stopped: the kernel lets it go as we exit */
		}
		tracer_forget_lwp(t, all[i]);
	}
	free(all);
	t->all_exiting_at_detach = t->exiting_at_detach && !nlive;
	if (n) /* (a snapshot may have stopped none) */
		t->frozen_ns += ptw_now_ns() - t0;
	/* Name the threads that stay open, now that they run again (a
	 * snapshot read every name before it stopped them). */
	for (size_t i = 0; i < nopen && !t->snapshot; i++)
		tracer_read_comm(t, open_tids[i], t0);
	free(open_tids);
	if (stuck)
		tracer_warn(
			t, PTW_W_THREADS_NOT_STOPPED,
			"%d threads did not stop within 3 s (uninterruptible sleep?); the kernel "
			"detaches them when ptwatch exits",
			stuck);
	t->detached = true;
	if (!t->end_ns)
		t->end_ns = ptw_now_ns();
	return stuck + stuck_followed;
}

int ptw_tracer_detach(struct ptw_tracer *t)
{
	if (t->target_gone || t->detach_told)
		return 0;
	int stuck = tracer_let_go(t);
	t->detach_told = true;
	struct ptw_event ev = ptw_event_init(PTW_EV_DETACHED, ptw_now_ns(), t->proc->pid);
	tracer_emit(t, &ev);
	return stuck;
}

