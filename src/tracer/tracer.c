/* SPDX-License-Identifier: MIT */
/*
 * The tracer's dispatcher and its public entry points: launch, attach,
 * the wait loop; one stop in, events out, the LWP resumed. What
 * breakpoints mean lives in the features (lifecycle.c, trace.c, locks.c);
 * fork following in follow.c, session signals in signals.c, letting go in
 * detach.c, the report in report.c.
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



/* ---- stops ---- */

/* PTRACE_EVENT_EXIT: the registers say whose exit this is. */
static void on_exit_stop(struct ptw_tracer *t, struct ptw_lwp *l, struct ptw_stop *st)
{
	struct thread *th = tracer_thread_of(l);
	if (!tracer_is_target_lwp(t, l) || th->exit_reported)
		return;
	struct user_regs_struct *regs;
	enum ptw_exit_how how = PTW_EXIT_KILLED;
	if (ptw_getregs(t->proc, l, &regs) == 0) {
		if (regs->orig_rax == SYS_exit)
			how = PTW_EXIT_SELF;
		else if (regs->orig_rax == SYS_exit_group)
			how = PTW_EXIT_GROUP;
	}
	if (how != PTW_EXIT_SELF)
		follow_going_down(t, true);
	tracer_read_end(t, l->tid, st->ns);
	if (lifecycle_exit_stop(t, l, how != PTW_EXIT_KILLED, st->ns)) {
		/* Its death, told here: its LWP's exit is told as it is reaped,
		 * as after TD_DEATH (tracer_lwp_gone). */
		th->exit_stop_off = true;
		return;
	}
	struct ptw_event ev = ptw_event_init(PTW_EV_LWP_EXIT, st->ns, l->tid);
	ev.exit_how = how;
	int status = (int)st->msg;
	ev.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : 0;
	ev.sig = WIFSIGNALED(status) ? WTERMSIG(status) : 0;
	tracer_emit(t, &ev);
	th->exit_reported = true;
}
/* The first stop of an LWP: run it only once we know what it is. */
static bool on_new_stop(struct ptw_tracer *t, struct ptw_lwp *l)
{
	struct thread *th = tracer_thread_of(l);
	if (th->follow_setup && t->pid == l->tgid) {
		follow_setup(t, l, ptw_now_ns());
		if (!t->proc)
			t = tracer_root(t); /* could not be followed: let go as without -f */
	}
	if (th->detach_asap) {
		ptw_detach_lwp(t->proc, l);
		tracer_forget_lwp(t, l);
		return false;
	}
	/* Its parent's clone/fork event has not been seen yet: hold it,
	 * unless that event cannot come any more (follow.c, orphans). */
	if (th->announced)
		lifecycle_released(t, l);
	else if (follow_orphan_stop(tracer_root(t), l))
		return false;
	return th->announced;
}

static void on_exec_stop(struct ptw_tracer *t, struct ptw_lwp *l, struct ptw_stop *st)
{
	struct thread *th = tracer_thread_of(l);
	if (th->foreign && follow_vfork_exec(t, l))
		return;
	if (th->foreign) {
		/* A vfork child exec'd: its memory is its own now. */
		ptw_detach_lwp(t->proc, l);
		tracer_forget_lwp(t, l);
		return;
	}
	struct ptw_event ev = ptw_event_init(PTW_EV_EXEC, st->ns, l->tid);
	ev.other_tid = (pid_t)st->msg;
	tracer_emit(t, &ev);
	/* Forks the threads it killed made and never reported: set up while
	 * the old image's journal is still there. */
	follow_orphans(t);
	follow_going_down(t, false);
	if (t->root && !follow_exec(t, l))
		return;

	/* A process still in the old memory (clone(CLONE_VM)) keeps its int3s:
	 * give them back through it, now, while the journal knows them. */
	tracer_release_vm_children(t);
	/* The old image's return breakpoints must not be touched any more
	 * (their addresses now belong to the new one). */
	tracer_image_reset(t);
	/* Every other thread of the old image is dead, some without notice. */
	size_t it = 0;
	void *v;
	struct ptw_lwp **gone = NULL;
	size_t ngone = 0;
	while (ptw_map_next(t->proc->lwps, &it, NULL, &v)) {
		struct ptw_lwp *o = v;
		if (o != l && o->tgid == t->proc->pid && !tracer_thread_of(o)->foreign) {
			gone = xreallocarray(gone, ngone + 1, sizeof(*gone));
			gone[ngone++] = o;
		}
	}
	for (size_t i = 0; i < ngone; i++)
		tracer_forget_lwp(t, gone[i]);
	free(gone);

	image_release(t);
	tracer_thread_renew(t, th);
	th->announced = true;
	th->is_main = true;
	/* The former thread keeps running as the new image's main thread with
	 * TRACEEXIT cleared if it had died... it has not: restore options. */
	ptw_set_options(t->proc, l, t->proc->options);
	image_init(t, l);
}

static const struct hook_desc hook_table[HOOK_KINDS] = {
#define PTW_HOOK_DESC(name, fn) [HK_##name] = { #fn, hook_##fn },
	PTW_HOOK_KINDS(PTW_HOOK_DESC)
#undef PTW_HOOK_DESC
};

/* LWP l is stopped on bp (rip rewound): step it over, then call the
 * handler of each hook kind the breakpoint carries. */
static void on_breakpoint(struct ptw_tracer *t, struct ptw_lwp *l, struct ptw_bp *bp, uint64_t ns)
{
	struct thread *th = tracer_thread_of(l);
	struct user_regs_struct *cur, pre;
	if (bp->disabled)
		return; /* a late trap on a byte we put back: rewound, nothing else */
	if (ptw_getregs(t->proc, l, &cur) < 0)
		return;
	/*
	 * Step over first and write the registers at once: if ptwatch died
	 * from here on, the kernel would let the thread go with a correct
	 * rip instead of one inside the int3. The hooks see the registers
	 * as they were at the breakpoint.
	 */
	pre = *cur;
	int r = ptw_bp_step_over(t->bps, bp, l);
	if (r == 0)
		r = ptw_regs_flush(t->proc, l);
	if (r < 0) {
		if (r != -ESRCH) {
			/* Resuming on the int3 would trap forever: give the byte
			 * back (rip is on it: the original instruction runs). */
			tracer_warn(t, PTW_W_STEP_OVER_FAILED,
				    "cannot step thread %d over %#llx (%s): %s; breakpoint removed",
				    l->tid, (unsigned long long)bp->addr, bp->plan.text,
				    strerror(-r));
			ptw_bp_disable(t->bps, bp);
		}
		return;
	}
	if (bp->plan.kind == PTW_INSN_XOL)
		th->used_xol = true;
	if (th->foreign)
		return; /* a vfork child in our memory: just stepped over */
	/* A handler may change bp->hooks (or forget bp): take the set first. */
	unsigned hooks = bp->hooks;
	/* A hook moved beside another tool's int3 at a function's entry: its
	 * handlers see the call as at the entry (ptw_bp_insert). */
	struct ptw_bp at = *bp;
	if (bp->entry) {
		at.addr = bp->entry;
		pre.rip = bp->entry;
		pre.rsp += bp->entry_sp;
	}
	for (int k = 0; k < HOOK_KINDS; k++) {
		if (!(hooks & HOOK(k)))
			continue;
		ptw_dbg(PTW_DBG_TRACER, "%d: %s hook at %#llx", l->tid, hook_table[k].name,
			(unsigned long long)pre.rip);
		hook_table[k].on_hit(t, l, bp->entry ? &at : bp, &pre, ns);
	}
}

static void on_signal_stop(struct ptw_tracer *t, struct ptw_lwp *l, struct ptw_stop *st)
{
	struct ptw_bp *bp = tracer_our_trap(t, l, st);
	if (bp) {
		on_breakpoint(t, l, bp, st->ns);
		return;
	}
	if (tracer_is_target_lwp(t, l) && tracer_sig_kills(st->sig)) {
		struct ptw_event ev = ptw_event_init(PTW_EV_FATAL_SIGNAL, st->ns, l->tid);
		ev.sig = st->sig;
		tracer_emit(t, &ev);
	}
	if (tracer_is_target_lwp(t, l)) {
		if (st->sig == SIGTRAP)
			tracer_note_sigtrap(t, l);
		signals_note_delivery(tracer_root(t), l, st->sig,
				      st->ns); /* -f: any process's counts */
		tracer_signal_delivery(t, l, st->sig, st->ns);
	}
	/* Signals belong to the target: deliver it unchanged. */
	l->resume_sig = st->sig;
}

static void handle_stop(struct ptw_tracer *t, struct ptw_stop *st)
{
	struct ptw_lwp *l = st->lwp;
	if (tracer_thread_of(l)->join_due)
		lifecycle_stopped(t, l, st);
	switch (st->kind) {
	case PTW_STOP_EXITED:
	case PTW_STOP_KILLED: {
		bool leader = l->tid == t->pid; /* the process is over (l is freed below) */
		if (tracer_is_target_lwp(t, l) && !tracer_thread_of(l)->exit_reported &&
		    !tracer_thread_of(l)->exit_stop_off)
			follow_going_down(t, true); /* killed: follow.c, orphans */
		tracer_lwp_gone(t, l, st);
		if (leader && t->target_gone)
			tracer_release_vm_children(t); /* its memory lives on in them */
		return;
	}
	case PTW_STOP_EXIT:
		on_exit_stop(t, l, st);
		break;
	case PTW_STOP_CLONE: {
		struct ptw_lwp *cl = ptw_lwp_get(t->proc, (pid_t)st->msg);
		uint64_t flags, tls;
		lifecycle_clone_args(t, l, &flags, &tls);
		if (cl && flags && !(flags & CLONE_THREAD)) {
			/* clone() without CLONE_THREAD: another process, sharing
			 * our memory (like vfork) or with a copy of it (like fork). */
			cl->tgid = cl->tid;
			st->kind = (flags & CLONE_VM) ? PTW_STOP_VFORK : PTW_STOP_FORK;
			follow_fork_stop(t, st);
		} else if (tracer_thread_of(l)->foreign) {
			if (cl) {
				tracer_thread_of(cl)->foreign = true;
				tracer_thread_of(cl)->vfork_child = true;
				tracer_thread_of(cl)->announced = true;
			}
		} else {
			lifecycle_on_clone(t, l, (pid_t)st->msg, flags, tls, st->ns);
		}
		if (cl && tracer_thread_of(cl)->announced && tracer_take_first_stop(t, cl)) {
			lifecycle_released(t, cl);
			ptw_resume(t->proc, cl);
		}
		break;
	}
	case PTW_STOP_FORK:
		if (lifecycle_shares_memory(t, l, (pid_t)st->msg))
			st->kind = PTW_STOP_VFORK; /* clone(CLONE_VM): our memory, not a copy */
		follow_fork_stop(t, st);
		break;
	case PTW_STOP_VFORK:
		follow_fork_stop(t, st);
		break;
	case PTW_STOP_EXEC:
		on_exec_stop(t, l, st);
		if (!t->proc || !ptw_lwp_get(t->proc, st->tid))
			return; /* let go of (a vfork child, a set-uid exec) */
		break;
	case PTW_STOP_NEW:
		if (!on_new_stop(t, l))
			return;
		break;
	case PTW_STOP_SIGNAL:
		on_signal_stop(t, l, st);
		break;
	default:
		break;
	}
	ptw_resume(t->proc, l);
}

/* ---- session ---- */

int ptw_tracer_launch(const struct ptw_backend_opts *o, char *const argv[], int child_stdout,
		      struct ptw_tracer **ret)
{
	struct ptw_launch l = { .argv = argv, .child_stdout = child_stdout };
	struct ptw_proc *proc;
	struct ptw_stop st;
	uint64_t start = ptw_now_ns();
	int r = ptw_launch(&l, &proc, &st);
	if (r < 0)
		return r;
	struct ptw_tracer *t = tracer_new(o, NULL, proc->pid, start, true);
	t->launched = true;
	t->proc = proc;
	t->argv = argv;
	proc->before_block = o->before_block;
	proc->before_block_ctx = o->before_block_ctx;
	r = ptw_bptab_new(proc, &t->bps);
	if (r < 0) {
		kill(proc->pid, SIGKILL);
		ptw_tracer_free(t);
		return r;
	}
	struct thread *th = tracer_thread_of(st.lwp);
	th->announced = true;
	th->is_main = true;
	image_init(t, st.lwp);
	ptw_resume(proc, st.lwp);
	*ret = t;
	return 0;
}

int ptw_tracer_attach(const struct ptw_backend_opts *o, pid_t pid, struct ptw_tracer **ret)
{
	struct ptw_proc *proc;
	struct ptw_seize_info info;
	uint64_t start = ptw_now_ns();
	int r = ptw_seize(pid, &proc, &info);
	if (r < 0)
		return r;
	struct ptw_tracer *t = attach_tracer_new(o, proc, start, false);
	attach_seized(t, &info);
	proc->before_block = o->before_block;
	proc->before_block_ctx = o->before_block_ctx;
	r = attach_process(t, &info, start);
	if (r < 0) {
		ptw_tracer_detach(t);
		ptw_tracer_free(t);
		return r;
	}
	if (o->follow_forks)
		follow_attach_descendants(t);
	*ret = t;
	return 0;
}

/* Runs the session's timers that are due; when the next one is (0: none). */
static uint64_t session_timers(struct ptw_tracer *t, uint64_t now)
{
	if (!t->o.next_timer)
		return 0;
	uint64_t next = t->o.next_timer(t->o.timer_ctx);
	if (next && next <= now && t->o.on_timer) {
		t->o.on_timer(t->o.timer_ctx, now);
		next = t->o.next_timer(t->o.timer_ctx);
	}
	return next;
}

void ptw_tracer_set_wake_fd(struct ptw_tracer *t, int fd)
{
	t->proc->wake_fd = fd;
}

void ptw_tracer_stop(struct ptw_tracer *t)
{
	t->stop_requested = true;
}

int ptw_tracer_run(struct ptw_tracer *t, int duration_ms, enum ptw_end_reason *ret_reason,
		   int *ret_signal)
{
	uint64_t deadline = duration_ms >= 0 ? ptw_now_ns() + (uint64_t)duration_ms * 1000000u : 0;
	*ret_signal = 0;
	for (;;) {
		uint64_t now = ptw_now_ns();
		signals_expire(t, now);
		if (t->sigs.end_signal) {
			*ret_reason = PTW_END_INTERRUPTED;
			*ret_signal = t->sigs.end_signal;
			return 0;
		}
		uint64_t wake = signals_deadline(t);
		if (deadline && (!wake || deadline < wake))
			wake = deadline;
		uint64_t timer = session_timers(t, now);
		if (timer && (!wake || timer < wake))
			wake = timer;
		if (t->stop_requested) {
			*ret_reason = PTW_END_DETACHED;
			return 0;
		}
		int timeout = -1;
		if (wake)
			timeout = wake <= now ? 0 : (int)((wake - now + 999999) / 1000000u);
		struct ptw_stop st;
		int r = ptw_wait(t->proc, timeout, &st);
		if (r == -ECHILD) {
			signals_settle(t);
			*ret_reason = PTW_END_TARGET_EXITED;
			return 0;
		}
		if (r < 0) {
			*ret_reason = PTW_END_ERROR;
			return r;
		}
		if (st.kind == PTW_STOP_TIMEOUT) {
			if (t->proc->woke) {
				t->proc->woke = false;
				if (t->o.on_timer)
					t->o.on_timer(t->o.timer_ctx, ptw_now_ns());
			}
			if (deadline && ptw_now_ns() >= deadline) {
				*ret_reason = PTW_END_DURATION;
				return 0;
			}
			continue;
		}
		if (st.kind == PTW_STOP_TRACER_SIGNAL) {
			signals_on_signal(t, &st);
			continue;
		}
		struct ptw_tracer *owner = follow_owner(t, st.lwp);
		struct ptw_tracer *ended = NULL;
		if ((st.kind == PTW_STOP_EXITED || st.kind == PTW_STOP_KILLED) && t->nfollowed &&
		    st.tid == st.lwp->tgid && st.tid != t->proc->pid)
			ended = ptw_map_get(&t->by_pid, (uint64_t)st.tid);
		handle_stop(owner, &st);
		if (ended)
			follow_done(ended, &st);
		if (t->target_gone && !t->by_pid.count && ptw_lwp_count_alive(t->proc) == 0 &&
		    !t->proc->ndeferred) {
			/* Fork children we still trace keep the loop going. */
			size_t it = 0;
			if (!ptw_map_next(t->proc->lwps, &it, NULL, NULL)) {
				signals_settle(t);
				*ret_reason = PTW_END_TARGET_EXITED;
				return 0;
			}
		}
	}
}

/* The thread's own process (-f) reads it and names its pc. */
int ptw_tracer_where(struct ptw_tracer *t, pid_t tid, struct ptw_where *w)
{
	/* -f: the thread's own process, and its symbols. */
	struct ptw_lwp *l = ptw_lwp_get(t->proc, tid);
	if (l && l->tgid && l->tgid != t->proc->pid) {
		struct ptw_tracer *c = ptw_map_get(&t->by_pid, (uint64_t)l->tgid);
		if (c && c->proc)
			t = c;
	}
	int r = ptw_where_read(t->proc->pid, tid, w);
	if (r == 0 && w->pc && t->img.syms)
		w->at = ptw_symbols_locate(t->img.syms, w->pc);
	return r;
}
