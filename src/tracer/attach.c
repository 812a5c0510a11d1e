/* SPDX-License-Identifier: MIT */
/*
 * Attaching to a running process: seize every thread, stop them all, learn
 * what they are (libthread_db, stacks), set up tracing, let them go. The
 * time they stay stopped is reported as session.frozen_ns.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "tracer_internal.h"

/* Deadline for every thread to stop after PTRACE_INTERRUPT. A thread in
 * uninterruptible sleep may not stop for seconds: report it, never hang. */
#define STOP_DEADLINE_MS 1000

/* Stops that arrive while we attach. Nothing is patched yet: no trap is
 * ours, signals are kept for delivery, children are noted. */
static void attach_on_stop(void *ctx, struct ptw_stop *st)
{
	struct ptw_tracer *t = ctx;
	struct ptw_lwp *l = st->lwp;
	struct thread *th = tracer_thread_of(l);
	switch (st->kind) {
	case PTW_STOP_SIGNAL:
		l->resume_sig = st->sig;
		break;
	case PTW_STOP_CLONE: {
		struct ptw_lwp *cl = ptw_lwp_get(t->proc, (pid_t)st->msg);
		if (cl)
			tracer_thread_of(cl)->announced = true;
		break;
	}
	case PTW_STOP_FORK:
	case PTW_STOP_VFORK: {
		/* A fork child has its own copy of a memory without int3s yet: it
		 * can go. A vfork child shares ours, where int3s are about to be
		 * put: keep it and step it over them until it execs or exits. */
		struct ptw_lwp *cl = ptw_lwp_get(t->proc, (pid_t)st->msg);
		if (cl) {
			struct thread *cth = tracer_thread_of(cl);
			cth->foreign = true;
			cth->announced = true;
			if (st->kind == PTW_STOP_VFORK || lifecycle_shares_memory(t, l, cl->tid)) {
				cth->vfork_child = true; /* (clone(CLONE_VM): it is ours too) */
				cth->vm_parent = t->pid;
			} else {
				cth->detach_asap = true;
			}
		}
		break;
	}
	case PTW_STOP_EXEC:
		t->exec_while_attaching = true;
		break;
	case PTW_STOP_EXITED:
	case PTW_STOP_KILLED:
		if (l->tid == t->proc->pid)
			t->target_gone = true;
		tracer_thread_free(th);
		l->user = NULL;
		break;
	default:
		break;
	}
}

/* ---- learning return sites from stacks ---- */

/*
 * The return address of the frame running function [lo, hi) in a stopped
 * thread's stack: where that function will return to. 0 if not found.
 */
static uint64_t return_site(struct ptw_tracer *t, struct ptw_lwp *l, uint64_t lo, uint64_t hi)
{
	struct user_regs_struct *regs;
	uint64_t pcs[64];
	if (!t->img.syms || ptw_getregs(t->proc, l, &regs) < 0)
		return 0;
	int n = ptw_symbols_unwind(t->img.syms, l->tid, regs, pcs, 64);
	for (int i = 0; i + 1 < n; i++)
		if (pcs[i] >= lo && pcs[i] < hi)
			return pcs[i + 1];
	return 0;
}

/* main() is running: break where it returns, for its value. */
void attach_learn_main_return(struct ptw_tracer *t, struct ptw_lwp *main_lwp)
{
	uint64_t lo, hi;
	if (!t->img.main_addr ||
	    ptw_symbols_function_range(t->img.syms, t->img.main_addr, &lo, &hi) < 0)
		return;
	uint64_t ret = return_site(t, main_lwp, lo, hi);
	if (ret)
		tracer_insert_bp(t, ret, HOOK_MAIN_RETURN, main_lwp);
}

/* Without libc's DWARF, start routine returns are caught where start_thread
 * resumes after the call; the stack of any running pthread shows where. */
void attach_learn_start_return(struct ptw_tracer *t, struct ptw_lwp *host)
{
	size_t it = 0;
	void *v;
	while (ptw_map_next(t->proc->lwps, &it, NULL, &v)) {
		struct ptw_lwp *l = v;
		struct thread *th = l->user;
		uint64_t lo, hi;
		if (!th || !th->start_routine || l->state != PTW_LWP_STOPPED ||
		    l->tgid != t->proc->pid ||
		    ptw_symbols_function_range(t->img.syms, th->start_routine, &lo, &hi) < 0)
			continue;
		uint64_t ret = return_site(t, l, lo, hi);
		if (ret && tracer_insert_bp(t, ret, HOOK_START_RETURN, host) == 0) {
			t->img.start_return_sites[t->img.nstart_return_sites++] = ret;
			return;
		}
	}
}

/* ---- enumeration ---- */

struct listing {
	struct ptw_tracer *t;
	struct ptw_map *unseized;
};

/* td_ta_thr_iter callback: pd and start routine onto our LWPs, or into
 * the list of those we did not seize. */
static void found_thread(void *ctx, const struct ptw_tdb_thread *info)
{
	struct listing *ls = ctx;
	struct ptw_tracer *t = ls->t;
	struct ptw_lwp *l = ptw_lwp_get(t->proc, info->lid);
	if (!l && ls->unseized && info->lid > 0) {
		struct ptw_tdb_thread *copy = xmalloc(sizeof(*copy));
		*copy = *info;
		free(ptw_map_get(ls->unseized, (uint64_t)info->lid));
		ptw_map_put(ls->unseized, (uint64_t)info->lid, copy);
	}
	if (!l || l->tgid != t->proc->pid)
		return;
	struct thread *th = tracer_thread_of(l);
	th->pd = info->pthread;
	th->start_routine = info->startfunc;
	th->started = true; /* long ago: its start is not ours to see */
}

int attach_stop_all(struct ptw_tracer *t, const char *consequence)
{
	int stuck = ptw_stop_all(t->proc, STOP_DEADLINE_MS, attach_on_stop, t);
	if (stuck > 0) {
		/* which: the first few */
		char tids[96] = "";
		size_t len = 0, it = 0, shown = 0;
		void *v;
		while (ptw_map_next(t->proc->lwps, &it, NULL, &v) && len + 16 < sizeof(tids)) {
			struct ptw_lwp *l = v;
			if (l->unstoppable && l->state == PTW_LWP_RUNNING)
				len += (size_t)snprintf(tids + len, sizeof(tids) - len, "%s%d",
							shown++ ? " " : "", l->tid);
		}
		tracer_warn(t, PTW_W_THREADS_NOT_STOPPED,
			    "%d threads did not stop within %d ms (uninterruptible sleep?%s%s%s)%s",
			    stuck, STOP_DEADLINE_MS, shown ? " tid" : "",
			    shown > 1 ? "s "
			    : shown   ? " "
				      : "",
			    tids, consequence);
	}
	/* Everyone we hold is a thread of the target now, or a fork child
	 * (-p -f: of this process; the others' are theirs). */
	pid_t pid = t->proc->pid;
	size_t it = 0;
	void *v;
	while (ptw_map_next(t->proc->lwps, &it, NULL, &v)) {
		struct ptw_lwp *l = v;
		if (t->root && l->tgid != pid)
			continue;
		struct thread *th = tracer_thread_of(l);
		if (l->tgid == 0)
			l->tgid = pid;
		th->announced = true;
		th->is_main = l->tid == pid;
	}
	return stuck;
}

void attach_list_threads(struct ptw_tracer *t, bool all_stopped, struct ptw_map *unseized)
{
	struct listing ls = { t, unseized };
	int r = ptw_tdb_iterate(t->img.tdb, all_stopped, found_thread, &ls);
	if (r == -ELOOP)
		tracer_warn(t, PTW_W_THREAD_DB_ITERATION, "%s", PTW_TDB_LOOP_WARNING);
	else if (r < 0)
		tracer_warn(t, PTW_W_THREAD_DB_ITERATION,
			    "libthread_db could not list the threads: %s", strerror(-r));
}

struct ptw_lwp **attach_threads(struct ptw_tracer *t, size_t *ret_n)
{
	pid_t pid = t->proc->pid;
	struct ptw_lwp **out = xcalloc(t->proc->lwps->count + 1, sizeof(*out));
	size_t n = 0;
	struct ptw_lwp *main_lwp = ptw_lwp_get(t->proc, pid);
	if (main_lwp && main_lwp->tgid == pid && main_lwp->state != PTW_LWP_GONE)
		out[n++] = main_lwp;
	size_t it = 0;
	void *v;
	while (ptw_map_next(t->proc->lwps, &it, NULL, &v)) {
		struct ptw_lwp *l = v;
		if (l != main_lwp && l->tgid == pid && l->state != PTW_LWP_GONE &&
		    !tracer_thread_of(l)->foreign)
			out[n++] = l;
	}
	*ret_n = n;
	return out;
}

/* Names are read while the threads still run: not frozen time. */
static void collect_names(struct ptw_tracer *t, struct ptw_map *names)
{
	size_t it = 0;
	void *v;
	while (ptw_map_next(t->proc->lwps, &it, NULL, &v)) {
		struct ptw_lwp *l = v;
		if (l->tgid && l->tgid != t->proc->pid)
			continue; /* -p -f: another process's */
		char *name = tracer_comm_str(t, l->tid);
		if (name)
			ptw_map_put(names, (uint64_t)l->tid, name);
	}
}

void attach_facts(struct ptw_tracer *t, pid_t tid, uint64_t pd, uint64_t start_routine,
		  struct preexisting *ret)
{
	struct image *img = &t->img;
	*ret = (struct preexisting){ .tid = tid, .pd = pd };
	ret->routine = tid == t->proc->pid ? img->main_addr : start_routine;
	ret->have_joinid = pd && img->have_joinid;
	ret->joinid_at = ret->have_joinid ? pd + img->joinid_off : 0;
}

/*
 * A thread libthread_db's walk did not give (it met a loop in the list; a
 * thread in the list before its clone gave it a tid): its pthread_t and
 * routine from its struct pthread, its TLS (fs_base: the stopped thread's
 * register; ptw_glibc_tls_routine).
 */
void attach_facts_from_tls(struct ptw_tracer *t, pid_t tid, uint64_t fs_base, struct thread *th)
{
	struct image *img = &t->img;
	uint64_t routine, pd = th->pd ? th->pd : fs_base;
	if (!img->syms)
		return;
	if ((routine = ptw_glibc_tls_routine(t->proc, image_tls_layout(t), pd, tid))) {
		th->pd = pd;
		th->start_routine = routine;
	}
}

void attach_preexisting_facts(struct ptw_tracer *t, struct ptw_lwp *l, struct preexisting *ret)
{
	struct thread *th = tracer_thread_of(l);
	struct user_regs_struct *regs;
	if (!th->start_routine && l->tid != t->proc->pid && ptw_getregs(t->proc, l, &regs) == 0)
		attach_facts_from_tls(t, l->tid, regs->fs_base, th);
	attach_facts(t, l->tid, th->pd, th->start_routine, ret);
}

void attach_emit_facts(struct ptw_tracer *t, const struct preexisting *f, const char *name,
		       uint64_t ns)
{
	struct image *img = &t->img;
	struct ptw_event ev = ptw_event_init(PTW_EV_PREEXISTING, ns, f->tid);
	ev.other_tid = t->proc->pid;
	ev.pthread = f->pd;
	ev.routine = f->routine && img->syms ? ptw_symbols_locate(img->syms, f->routine) : NULL;
	ev.detached = f->have_joinid && f->joinid == f->pd;
	if (f->began_ns) {
		ev.has_value = true;
		ev.value = f->began_ns;
	}
	tracer_emit(t, &ev);
	if (name) {
		struct ptw_event named = ptw_event_init(PTW_EV_THREAD_NAME, ns, f->tid);
		named.name = name;
		tracer_emit(t, &named);
	} else {
		tracer_read_comm(t, f->tid, ns); /* a thread born while we attached */
	}
}

struct ptw_tracer *attach_tracer_new(const struct ptw_backend_opts *o, struct ptw_proc *proc,
				      uint64_t start_ns, bool snapshot)
{
	struct ptw_tracer *t = tracer_new(o, NULL, proc->pid, start_ns, !snapshot);
	t->proc = proc;
	t->snapshot = snapshot;
	t->owned_argv = ptw_proc_cmdline(proc->mem_pid);
	t->argv = t->owned_argv;
	return t;
}

void attach_seized(struct ptw_tracer *t, const struct ptw_seize_info *info)
{
	if (info->zombie_leader)
		tracer_warn(
			t, PTW_W_ZOMBIE_LEADER,
			"the main thread of %d has exited (pthread_exit) and is a zombie; its other "
			"threads are %s",
			t->pid, t->snapshot ? "shown" : "traced");
}

/*
 * The part of an attach after the seize (the threads run): symbols and
 * agent, stop, list, breakpoints, spans, resume. t->proc is seized.
 * Returns 0 or -errno (nothing of ours left in the process then but
 * what ptw_tracer_detach / follow_failed undo).
 */
int attach_process(struct ptw_tracer *t, const struct ptw_seize_info *info, uint64_t start)
{
	struct ptw_proc *proc = t->proc;
	pid_t pid = t->pid;
	int r = ptw_bptab_new(proc, &t->bps);
	if (r < 0)
		return r;

	/* Everything that can be learnt with the threads running is learnt
	 * before they are stopped: modules, debug info, the thread agent. */
	bool have_tdb = image_load(t) == 0 && image_tdb_open(t) == 0;
	tracer_features_prepare(t);
	struct ptw_map names = { 0 };
	collect_names(t, &names);

	uint64_t frozen_from = ptw_now_ns();
	ptw_dbg(PTW_DBG_TRACER, "attach: seized %d threads in %d passes, loaded in %.1f ms",
		info->threads, info->passes, (double)(frozen_from - start) / 1e6);
	int stuck = attach_stop_all(t, "; they are traced from the moment they stop");
	ptw_dbg(PTW_DBG_TRACER, "attach: all stopped after %.1f ms",
		(double)(ptw_now_ns() - frozen_from) / 1e6);
	struct ptw_lwp *host = tracer_injection_host(t);
	if (!host)
		return -ESRCH;
	if (t->exec_while_attaching) {
		/* What we learnt is about the old image: start again. */
		return -EAGAIN;
	}
	tracer_image_ready(t, host);
	if (have_tdb) {
		attach_list_threads(t, stuck == 0, NULL);
		ptw_dbg(PTW_DBG_TRACER, "attach: thread_db listed them after %.1f ms",
			(double)(ptw_now_ns() - frozen_from) / 1e6);
		struct ptw_lwp *main_lwp = ptw_lwp_get(proc, pid);
		if (main_lwp && main_lwp->state == PTW_LWP_STOPPED) {
			attach_learn_main_return(t, main_lwp);
			t->img.main_seen = true;
		}
		if (!t->img.have_result)
			attach_learn_start_return(t, host);
		lifecycle_setup(t, host);
		ptw_dbg(PTW_DBG_TRACER, "attach: tracing set up after %.1f ms",
			(double)(ptw_now_ns() - frozen_from) / 1e6);
	}

	uint64_t ns = ptw_now_ns();
	size_t nthreads;
	struct ptw_lwp **threads = attach_threads(t, &nthreads);
	/* Each thread's pd->joinid (detached?) in one batch of reads, not one
	 * system call per thread. */
	struct preexisting *facts = xcalloc(nthreads + 1, sizeof(*facts));
	struct ptw_mem_piece *pieces = xcalloc(nthreads + 1, sizeof(*pieces));
	size_t npieces = 0;
	for (size_t i = 0; i < nthreads; i++) {
		attach_preexisting_facts(t, threads[i], &facts[i]);
		if (facts[i].have_joinid)
			pieces[npieces++] =
				(struct ptw_mem_piece){ .addr = facts[i].joinid_at,
							.buf = &facts[i].joinid,
							.len = sizeof(facts[i].joinid) };
	}
	ptw_mem_read_many(proc, pieces, npieces);
	for (size_t i = 0, k = 0; i < nthreads; i++) {
		if (facts[i].have_joinid)
			facts[i].have_joinid = pieces[k++].ok;
		attach_emit_facts(t, &facts[i], ptw_map_get(&names, (uint64_t)threads[i]->tid), ns);
	}
	/* What each thread is in the middle of (--trace: the calls under way),
	 * while it is stopped anyway. */
	uint64_t under_way_from = ptw_now_ns();
	for (size_t i = 0; i < nthreads; i++)
		tracer_features_under_way(t, threads[i]);
	ptw_dbg(PTW_DBG_TRACER, "attach: what %zu threads were doing read in %.1f ms", nthreads,
		(double)(ptw_now_ns() - under_way_from) / 1e6);
	free(pieces);
	free(facts);
	free(threads);
	size_t it = 0;
	void *v;
	while (ptw_map_next(&names, &it, NULL, &v))
		free(v);
	ptw_map_free(&names);

	ptw_dbg(PTW_DBG_TRACER, "attach: spans emitted after %.1f ms",
		(double)(ptw_now_ns() - frozen_from) / 1e6);
	/* Let go: fork children for good, the target's threads to run. */
	struct ptw_lwp **all = NULL;
	size_t n = 0;
	it = 0;
	while (ptw_map_next(proc->lwps, &it, NULL, &v)) {
		struct ptw_lwp *l = v;
		if (t->root && l->tgid != pid && !tracer_thread_of(l)->detach_asap)
			continue;
		all = xreallocarray(all, n + 1, sizeof(*all));
		all[n++] = v;
	}
	for (size_t i = 0; i < n; i++) {
		struct thread *th = tracer_thread_of(all[i]);
		if (th->detach_asap && all[i]->state == PTW_LWP_STOPPED) {
			ptw_detach_lwp(proc, all[i]);
			tracer_forget_lwp(t, all[i]);
		} else {
			ptw_resume(proc, all[i]);
		}
	}
	free(all);
	t->frozen_ns += ptw_now_ns() - frozen_from;
	ptw_dbg(PTW_DBG_TRACER, "attached to %d: %d threads, %d passes, frozen %.3f ms", pid,
		info->threads, info->passes, (double)t->frozen_ns / 1e6);
	return 0;
}
