/* SPDX-License-Identifier: MIT */
/*
 * The tracer's dispatcher: one stop in, events out, the LWP resumed.
 * What breakpoints mean lives in hooks.c.
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

const char *ptw_end_reason_name(enum ptw_end_reason r)
{
	switch (r) {
	case PTW_END_TARGET_EXITED:
		return "target_exited";
	case PTW_END_INTERRUPTED:
		return "interrupted";
	case PTW_END_DURATION:
		return "duration";
	case PTW_END_SNAPSHOT:
		return "snapshot";
	case PTW_END_DETACHED:
		return "detached";
	default:
		return "error";
	}
}

/* An LWP of t's process (the root also takes those no one else does). */
static bool mine(const struct ptw_tracer *t, const struct ptw_lwp *l)
{
	return !t->root || l->tgid == t->pid;
}

/* ---- stops ---- */

static void on_gone(struct ptw_tracer *t, struct ptw_lwp *l, struct ptw_stop *st)
{
	struct thread *th = thread_of(l);
	if (is_target_lwp(t, l)) {
		if (!th->exit_reported) {
			struct ptw_event ev = ptw_event_init(PTW_EV_LWP_EXIT, st->ns, l->tid);
			ev.exit_how = PTW_EXIT_SELF;
			ev.exit_code = st->exit_code;
			emit(t, &ev);
		}
		if (l->tid == t->proc->pid) {
			/* The leader is reported last: the process is over. */
			struct ptw_event ev = ptw_event_init(PTW_EV_PROCESS_EXIT, st->ns, l->tid);
			t->end_ns = st->ns;
			if (st->kind == PTW_STOP_KILLED) {
				ev.sig = st->sig;
				ev.core_dumped = st->core_dumped;
				t->exit_signal = st->sig;
				t->core_dumped = st->core_dumped;
			} else {
				ev.exit_code = st->exit_code;
				t->exit_code = st->exit_code;
			}
			t->target_gone = true;
			emit(t, &ev);
		}
	}
	tracer_forget_lwp(t, l);
}

/* PTRACE_EVENT_EXIT: the registers say whose exit this is. */
static void on_exit_stop(struct ptw_tracer *t, struct ptw_lwp *l, struct ptw_stop *st)
{
	struct thread *th = thread_of(l);
	if (!is_target_lwp(t, l) || th->exit_reported)
		return;
	struct user_regs_struct *regs;
	enum ptw_exit_how how = PTW_EXIT_KILLED;
	if (ptw_getregs(t->proc, l, &regs) == 0) {
		if (regs->orig_rax == SYS_exit)
			how = PTW_EXIT_SELF;
		else if (regs->orig_rax == SYS_exit_group)
			how = PTW_EXIT_GROUP;
	}
	read_comm(t, l->tid, st->ns);
	struct ptw_event ev = ptw_event_init(PTW_EV_LWP_EXIT, st->ns, l->tid);
	ev.exit_how = how;
	int status = (int)st->msg;
	ev.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : 0;
	ev.sig = WIFSIGNALED(status) ? WTERMSIG(status) : 0;
	emit(t, &ev);
	th->exit_reported = true;
}

static struct ptw_tracer *root_of(struct ptw_tracer *t)
{
	return t->root ? t->root : t;
}

/* Whether pid's program is set-user-ID or set-group-ID: the kernel runs it
 * without its privileges under ptrace, and it is not ours to look into. */
static bool setuid_exec(pid_t pid)
{
	char path[64];
	struct stat sb;
	snprintf(path, sizeof(path), "/proc/%d/exe", pid);
	return stat(path, &sb) == 0 && (sb.st_mode & (S_ISUID | S_ISGID));
}

static char **dup_argv(char *const *argv)
{
	size_t n = 0;
	while (argv && argv[n])
		n++;
	char **out = xcalloc(n + 1, sizeof(*out));
	for (size_t i = 0; i < n; i++)
		out[i] = xstrdup(argv[i]);
	return out;
}

static void free_argv(char **argv)
{
	for (char **a = argv; a && *a; a++)
		free(*a);
	free(argv);
}

/* -f: the record of a process the traced process t forked (st: its fork
 * event), listed in the root; its tracing is set up at its first stop
 * (fork) or its exec (vfork). */
static struct ptw_tracer *followed_new(struct ptw_tracer *t, const struct ptw_stop *st)
{
	struct ptw_tracer *c = followed_add(t, (pid_t)st->msg, t->proc->pid, st->tid, st->ns);
	c->xol_parent = t;
	c->owned_argv = dup_argv(t->argv);
	c->argv = c->owned_argv;
	return c;
}

struct ptw_tracer *followed_add(struct ptw_tracer *t, pid_t pid, pid_t ppid, pid_t parent_tid,
				uint64_t ns)
{
	struct ptw_tracer *root = root_of(t);
	struct ptw_tracer *c = tracer_new(&root->o, root, pid, ns, true);
	c->ppid = ppid;
	c->parent_tid = parent_tid;
	c->serial = (uint32_t)root->nfollowed + 1;
	/* The parent: t itself (a fork event), else the latest process with
	 * that pid (-p -f: a descendant found by walking /proc). */
	if (t->pid == ppid) {
		c->pserial = t->serial;
	} else {
		for (size_t i = root->nfollowed; i-- > 0;)
			if (root->followed[i]->pid == ppid) {
				c->pserial = root->followed[i]->serial;
				break;
			}
	}
	c->launched = root->launched;
	root->followed = xreallocarray(root->followed, root->nfollowed + 1, sizeof(*root->followed));
	root->followed[root->nfollowed++] = c;
	ptw_map_put(&root->by_pid, (uint64_t)c->pid, c);
	return c;
}

void follow_failed(struct ptw_tracer *c, const char *why)
{
	struct ptw_tracer *root = root_of(c);
	free(c->fail_why);
	c->fail_why = xstrdup(why);
	if (!c->img.exe && !c->last_exe) {
		char path[64], exe[4096];
		snprintf(path, sizeof(path), "/proc/%d/exe", c->pid);
		ssize_t n = readlink(path, exe, sizeof(exe) - 1);
		if (n > 0) {
			exe[n] = 0;
			c->last_exe = xstrdup(exe);
		}
	}
	warn(c, "process_not_followed", "%s is not traced: %s",
	     c->img.exe ? c->img.exe : c->last_exe ? c->last_exe : "?", why);
	ptw_map_del(&root->by_pid, (uint64_t)c->pid);
	if (c->bps) {
		ptw_bptab_free(c->bps);
		c->bps = NULL;
	}
	tracer_features_free(c);
	if (c->img.exe) {
		free(c->last_exe);
		c->last_exe = xstrdup(c->img.exe);
	}
	image_release(c);
	if (c->proc) {
		ptw_proc_free(c->proc);
		c->proc = NULL;
	}
}

/* Its own view of memory, breakpoint table and journal. */
static int followed_open(struct ptw_tracer *c)
{
	struct ptw_tracer *root = root_of(c);
	int r = ptw_proc_follow(root->proc, c->pid, &c->proc);
	if (r < 0)
		return r;
	return ptw_bptab_new(c->proc, &c->bps);
}

/* A forked process's first thread stopped for the first time: trace it as
 * if attached (its copy of the parent's bytes is already restored). */
static void follow_setup(struct ptw_tracer *c, struct ptw_lwp *l, uint64_t ns)
{
	struct thread *th = thread_of(l);
	th->follow_setup = false;
	int r = followed_open(c);
	if (r < 0) {
		follow_failed(c, r == -ENOSPC ? "too many processes traced at once"
					       : strerror(-r));
		th->foreign = true;
		th->detach_asap = true;
		return;
	}
	/* Its copy of the parent's out-of-line pages becomes its own: no
	 * system call injected to map others, and unmapped at its detach. (A
	 * parent gone since the fork left no table to tell: they stay.) */
	struct ptw_tracer *parent = c->xol_parent;
	c->xol_parent = NULL;
	if (parent && parent->bps)
		ptw_bp_adopt_xol(c->bps, parent->bps);
	bool have_tdb = image_load(c) == 0 && tdb_open(c) == 0;
	tracer_features_prepare(c);
	tracer_image_ready(c, l);
	if (have_tdb) {
		ptw_tdb_map_lwp(c->img.tdb, l->tid, &th->pd);
		if (c->parent_tid == c->ppid) {
			learn_main_return(c, l);
			c->img.main_seen = true;
		}
		if (!c->img.have_result)
			learn_start_return(c, l);
		tracing_setup(c, l);
	}
	/* Its one thread began at the fork. */
	struct preexisting f;
	attach_preexisting_facts(c, l, &f);
	if (f.have_joinid)
		f.have_joinid = ptw_mem_read(c->proc, f.joinid_at, &f.joinid, sizeof(f.joinid)) == 0;
	f.began_ns = c->start_ns;
	attach_emit_facts(c, &f, NULL, ns);
}

static void on_fork_stop(struct ptw_tracer *t, struct ptw_stop *st)
{
	struct ptw_lwp *cl = ptw_lwp_get(t->proc, (pid_t)st->msg);
	if (!cl)
		return;
	struct thread *cth = thread_of(cl);
	cth->foreign = true;
	cth->announced = true;
	struct ptw_tracer *c = t->o.follow_forks ? followed_new(t, st) : NULL;
	if (c && st->kind == PTW_STOP_VFORK) {
		/* It runs in our memory until it execs: we step it over our
		 * int3s; at its exec it becomes a process of its own. */
		c->vfork_pending = true;
		c->vfork_parent = t;
	}
	if (st->kind == PTW_STOP_VFORK) {
		/* It shares our memory, int3s included, until it execs or
		 * exits: keep it traced and step it over them. */
		cth->vfork_child = true;
		if (cl->state == PTW_LWP_STOPPED)
			ptw_resume(t->proc, cl);
		return;
	}
	/* A fork child got a copy of every int3: give it the original bytes
	 * back, then let it go. It must not die at its first pthread_create. */
	int failed = ptw_bp_restore_in(t->bps, cl->tid);
	if (failed)
		warn(t, "fork_child_unclean", "could not restore %d patched bytes in fork child %d",
		     failed, cl->tid);
	if (c && !failed) {
		/* -f: it is a process of its own, traced from its first stop. */
		cth->foreign = false;
		cth->is_main = true;
		cth->follow_setup = true;
		if (cl->state == PTW_LWP_STOPPED && cl->last_stop == PTW_STOP_NEW) {
			follow_setup(c, cl, st->ns);
			if (!cth->detach_asap)
				ptw_resume(c->proc, cl);
		}
		if (!cth->detach_asap)
			return;
	} else if (c) {
		follow_failed(c, "its copy of the breakpoints could not be removed");
	}
	cth->detach_asap = true;
	if (cl->state == PTW_LWP_STOPPED) {
		ptw_detach_lwp(t->proc, cl);
		tracer_forget_lwp(t, cl);
	}
}

/* The first stop of an LWP: run it only once we know what it is. */
static bool on_new_stop(struct ptw_tracer *t, struct ptw_lwp *l)
{
	struct thread *th = thread_of(l);
	if (th->follow_setup && t->pid == l->tgid) {
		follow_setup(t, l, ptw_now_ns());
		if (!t->proc)
			t = root_of(t); /* could not be followed: let go as without -f */
	}
	if (th->detach_asap) {
		ptw_detach_lwp(t->proc, l);
		tracer_forget_lwp(t, l);
		return false;
	}
	/* Its parent's clone/fork event has not been seen yet: hold it. */
	return th->announced;
}

static void on_exec_stop(struct ptw_tracer *t, struct ptw_lwp *l, struct ptw_stop *st)
{
	struct thread *th = thread_of(l);
	struct ptw_tracer *c = th->foreign ? ptw_map_get(&root_of(t)->by_pid, (uint64_t)l->tgid) : NULL;
	if (c && c->vfork_pending && l->tid == c->pid) {
		/* -f: a vfork child exec'd: a process of its own now, traced as
		 * a launched one is. */
		c->vfork_pending = false;
		c->vfork_parent = NULL;
		free_argv(c->owned_argv);
		c->owned_argv = attach_cmdline(c->pid);
		c->argv = c->owned_argv;
		int r = followed_open(c);
		if (r == 0 && setuid_exec(l->tid))
			r = -EPERM;
		if (r == 0) {
			tracer_thread_renew(c, th);
			th->announced = true;
			th->is_main = true;
			image_init(c, l);
			return;
		}
		follow_failed(c, r == -EPERM	  ? "it exec'd a set-user-ID or set-group-ID program"
				 : r == -ENOSPC ? "too many processes traced at once"
						: strerror(-r));
	}
	if (th->foreign) {
		/* A vfork child exec'd: its memory is its own now. */
		ptw_detach_lwp(t->proc, l);
		tracer_forget_lwp(t, l);
		return;
	}
	struct ptw_event ev = ptw_event_init(PTW_EV_EXEC, st->ns, l->tid);
	ev.other_tid = (pid_t)st->msg;
	emit(t, &ev);
	if (t->root) {
		/* A followed process: its command line is the new program's. */
		free_argv(t->owned_argv);
		t->owned_argv = attach_cmdline(t->pid);
		t->argv = t->owned_argv;
		if (setuid_exec(l->tid)) {
			/* Its old image's bytes went with it: only let go. */
			tracer_image_reset(t);
			image_release(t);
			free(t->last_exe);
			t->last_exe = NULL; /* the new program's, read by follow_failed */
			ptw_detach_lwp(t->proc, l);
			tracer_forget_lwp(t, l);
			follow_failed(t, "it exec'd a set-user-ID or set-group-ID program");
			return;
		}
	}

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
		if (o != l && o->tgid == t->proc->pid && !thread_of(o)->foreign) {
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

/* ---- session signals ---- */

/*
 * In launch mode the command stays in ptwatch's process group and terminal
 * (DESIGN.md: launch leaves them alone), so the terminal's Ctrl-C reaches
 * both, as it does under strace. The command must meet it as it would
 * without ptwatch, and be traced until it has reacted: died of it, exited,
 * or gone on (then so does the trace). Only a signal that did not reach the
 * command, or the same one reaching both again within
 * PTW_INTERRUPT_AGAIN_MS (a second Ctrl-C), makes ptwatch let go.
 *
 * Whether a signal reached the command too:
 * - a copy with si_code SI_KERNEL comes from the terminal (a key, its
 *   hangup), which signals its whole foreground process group: the command
 *   got it if it is still in ours (it may have made a group of its own);
 * - any other copy (kill(2)): if the command has a delivery stop of the same
 *   signal within MATCH_NS of it, in either order, or holds it pending
 *   (blocked) once MATCH_NS passed; else it was for ptwatch alone.
 * The tracer has a process group of its own (ptw_guardian.h): the terminal
 * signals reach it only through the front, which passes on their si_code.
 */
#define MATCH_NS (500ull * 1000000u)
#define AGAIN_NS ((uint64_t)PTW_INTERRUPT_AGAIN_MS * 1000000u)

static bool is_session_signal(int sig)
{
	static const int sigs[] = PTW_SESSION_SIGNALS;
	for (size_t i = 0; i < PTW_ARRAY_SIZE(sigs); i++)
		if (sigs[i] == sig)
			return true;
	return false;
}

/* The process that stands for the command: the target, or once it has
 * ended (-f), the oldest followed process still traced. */
static pid_t session_pid(struct ptw_tracer *t)
{
	if (!t->target_gone)
		return t->proc->pid;
	for (size_t i = 0; i < t->nfollowed; i++)
		if (t->followed[i]->proc && !t->followed[i]->target_gone)
			return t->followed[i]->pid;
	return t->proc->pid;
}

/* Records what ptwatch does about sig; a detach ends the session. */
static void interrupt(struct ptw_tracer *t, int sig, uint64_t ns, bool reached,
		      enum ptw_interrupt_why why)
{
	enum ptw_interrupt_action action =
		reached && why != PTW_INTR_AGAIN ? PTW_INTR_TRACED_ON : PTW_INTR_DETACHED;
	t->interrupts = xreallocarray(t->interrupts, t->ninterrupts + 1, sizeof(*t->interrupts));
	t->interrupts[t->ninterrupts++] = (struct ptw_interrupt){
		.sig = sig, .ns = ns, .reached_target = reached, .action = action, .why = why
	};
	if (action == PTW_INTR_DETACHED && !t->end_signal)
		t->end_signal = sig;
	struct ptw_event ev = ptw_event_init(PTW_EV_INTERRUPT, ns, t->proc->pid);
	ev.sig = sig;
	ev.action = action;
	ev.why = why;
	emit(t, &ev);
}

/* Both ptwatch and the command got sig: one press. */
static void press(struct ptw_tracer *t, int sig, uint64_t ns, bool delivered,
		  enum ptw_interrupt_why why)
{
	struct session_signal *s = &t->ssig[sig];
	bool again = s->press_ns && ns - s->press_ns <= AGAIN_NS;
	s->press_ns = ns;
	s->press_delivered = delivered;
	s->copy_ns = 0;
	s->delivery_ns = 0;
	interrupt(t, sig, ns, true, again ? PTW_INTR_AGAIN : why);
}

/* The command is being delivered sig (its signal-delivery stop). */
static void note_delivery(struct ptw_tracer *t, struct ptw_lwp *l, int sig, uint64_t ns)
{
	if (!t->launched || sig <= 0 || sig >= (int)PTW_ARRAY_SIZE(t->ssig) ||
	    !is_session_signal(sig))
		return;
	struct session_signal *s = &t->ssig[sig];
	if (s->copy_ns) { /* ptwatch's copy waits for this (it is not MATCH_NS old) */
		press(t, sig, s->copy_ns, true, PTW_INTR_GROUP);
	} else if (s->press_ns && ns - s->press_ns <= MATCH_NS && !s->press_delivered) {
		s->press_delivered = true; /* the terminal's press, seen first by ptwatch */
	} else {
		s->delivery_ns = ns;
		/* From the terminal (SI_KERNEL), the front got it too: its copy
		 * is on its way (settle_session_signals). */
		siginfo_t si;
		s->copy_owed = ptw_getsiginfo(t->proc, l, &si) == 0 && si.si_code == SI_KERNEL;
	}
}

/* ptwatch got a session signal (st: PTW_STOP_TRACER_SIGNAL). */
static void on_session_signal(struct ptw_tracer *t, const struct ptw_stop *st)
{
	int sig = st->sig;
	if (!t->launched || sig <= 0 || sig >= (int)PTW_ARRAY_SIZE(t->ssig)) {
		interrupt(t, sig, st->ns, false,
			  t->launched ? PTW_INTR_PTWATCH_ALONE : PTW_INTR_ATTACHED);
		return;
	}
	struct session_signal *s = &t->ssig[sig];
	bool delivered = s->delivery_ns && st->ns - s->delivery_ns <= MATCH_NS;
	if (st->sig_code == SI_KERNEL && getpgid(session_pid(t)) == ptw_original_pgrp())
		press(t, sig, st->ns, delivered, PTW_INTR_TERMINAL);
	else if (delivered)
		press(t, sig, st->ns, true, PTW_INTR_GROUP);
	else if (!s->copy_ns)
		s->copy_ns = st->ns; /* does the command get it too? */
}

/* The copies that waited MATCH_NS for the command's delivery stop. */
static void expire_copies(struct ptw_tracer *t, uint64_t now)
{
	for (int sig = 1; sig < (int)PTW_ARRAY_SIZE(t->ssig); sig++) {
		struct session_signal *s = &t->ssig[sig];
		if (!s->copy_ns || now - s->copy_ns < MATCH_NS)
			continue;
		uint64_t ns = s->copy_ns;
		s->copy_ns = 0;
		if (ptw_proc_sig_pending(session_pid(t), sig))
			press(t, sig, ns, false, PTW_INTR_GROUP); /* blocked there, for now */
		else
			interrupt(t, sig, ns, false, PTW_INTR_PTWATCH_ALONE);
	}
}

/*
 * The command ended of (or after) a session signal that ptwatch's copy has
 * not come for yet: the front passes the terminal's copy on, and on a busy
 * machine the command can die of its own first. Wait a moment for the copy
 * so that the session says what the user did (bounded: a copy that never
 * comes costs SETTLE_MS once).
 */
#define SETTLE_MS 250

static void settle_session_signals(struct ptw_tracer *t)
{
	if (!t->launched)
		return;
	uint64_t until = ptw_now_ns() + SETTLE_MS * 1000000ull;
	for (;;) {
		bool owed = false;
		for (size_t sig = 1; sig < PTW_ARRAY_SIZE(t->ssig); sig++)
			owed |= t->ssig[sig].delivery_ns && t->ssig[sig].copy_owed;
		uint64_t now = ptw_now_ns();
		struct ptw_stop st;
		if (!owed || now >= until ||
		    ptw_wait_session_signal(t->proc, (int)((until - now) / 1000000u), &st) <= 0)
			return;
		int sig = st.sig;
		if (sig > 0 && sig < (int)PTW_ARRAY_SIZE(t->ssig) && t->ssig[sig].delivery_ns) {
			/* it reached the command, which reacted: traced until then */
			t->ssig[sig].delivery_ns = 0;
			t->ssig[sig].copy_owed = false;
			interrupt(t, sig, st.ns, true,
				  st.sig_code == SI_KERNEL ? PTW_INTR_TERMINAL : PTW_INTR_GROUP);
		}
	}
}

/* When the next copy stops waiting; 0: none waits. */
static uint64_t copies_deadline(const struct ptw_tracer *t)
{
	uint64_t d = 0;
	for (size_t sig = 1; sig < PTW_ARRAY_SIZE(t->ssig); sig++) {
		uint64_t c = t->ssig[sig].copy_ns;
		if (c && (!d || c + MATCH_NS < d))
			d = c + MATCH_NS;
	}
	return d;
}

static bool default_action_kills(int sig)
{
	switch (sig) {
	case SIGCHLD:
	case SIGCONT:
	case SIGSTOP:
	case SIGTSTP:
	case SIGTTIN:
	case SIGTTOU:
	case SIGURG:
	case SIGWINCH:
		return false;
	default:
		/* glibc's internal SIGCANCEL (32) and SIGSETXID (33) have handlers. */
		return sig < 32 || sig > 33;
	}
}

/*
 * The breakpoint a SIGTRAP stop is for, with rip rewound to it, or NULL.
 * Ours only if it is an int3 trap (SI_KERNEL) right after one of our
 * addresses; raise(SIGTRAP) and the program's own int3 are the program's.
 */
static struct ptw_bp *our_trap(struct ptw_tracer *t, struct ptw_lwp *l, const struct ptw_stop *st)
{
	siginfo_t si;
	struct user_regs_struct *regs;
	if (st->sig != SIGTRAP || ptw_getsiginfo(t->proc, l, &si) < 0 || si.si_code != SI_KERNEL ||
	    ptw_getregs(t->proc, l, &regs) < 0)
		return NULL;
	struct ptw_bp *bp = ptw_bp_find(t->bps, regs->rip - 1);
	if (bp) {
		regs->rip = bp->addr;
		ptw_regs_dirty(l);
	}
	return bp;
}

/* Each hook kind's name and handler, from the one list (tracer_internal.h). */
static const struct hook_desc hook_table[HOOK_KINDS] = {
#define PTW_HOOK_DESC(name, fn) [HK_##name] = { #fn, hook_##fn },
	PTW_HOOK_KINDS(PTW_HOOK_DESC)
#undef PTW_HOOK_DESC
};

/* LWP l is stopped on bp (rip rewound): step it over, then call the
 * handler of each hook kind the breakpoint carries. */
static void on_breakpoint(struct ptw_tracer *t, struct ptw_lwp *l, struct ptw_bp *bp, uint64_t ns)
{
	struct thread *th = thread_of(l);
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
			warn(t, "step_over_failed",
			     "cannot step thread %d over %#llx (%s): %s; breakpoint removed", l->tid,
			     (unsigned long long)bp->addr, bp->plan.text, strerror(-r));
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
	for (int k = 0; k < HOOK_KINDS; k++) {
		if (!(hooks & HOOK(k)))
			continue;
		ptw_dbg(PTW_DBG_TRACER, "%d: %s hook at %#llx", l->tid, hook_table[k].name,
			(unsigned long long)pre.rip);
		hook_table[k].on_hit(t, l, bp, &pre, ns);
	}
}

static void on_signal_stop(struct ptw_tracer *t, struct ptw_lwp *l, struct ptw_stop *st)
{
	struct ptw_bp *bp = our_trap(t, l, st);
	if (bp) {
		on_breakpoint(t, l, bp, st->ns);
		return;
	}
	if (is_target_lwp(t, l) && default_action_kills(st->sig)) {
		struct ptw_event ev = ptw_event_init(PTW_EV_FATAL_SIGNAL, st->ns, l->tid);
		ev.sig = st->sig;
		emit(t, &ev);
	}
	if (is_target_lwp(t, l))
		note_delivery(root_of(t), l, st->sig, st->ns); /* -f: any process's counts */
	/* Signals belong to the target: deliver it unchanged. */
	l->resume_sig = st->sig;
}

/* The tracer of the process l belongs to (root: every stop arrives there). */
static struct ptw_tracer *owner_of(struct ptw_tracer *root, struct ptw_lwp *l)
{
	if (!root->nfollowed || !l->tgid || l->tgid == root->proc->pid)
		return root;
	struct ptw_tracer *c = ptw_map_get(&root->by_pid, (uint64_t)l->tgid);
	if (!c)
		return root;
	return c->vfork_pending ? c->vfork_parent : c;
}

/* A followed process ended (its leader was reaped): what it left goes. */
static void followed_done(struct ptw_tracer *c, const struct ptw_stop *st)
{
	struct ptw_tracer *root = root_of(c);
	if (!c->target_gone) {
		/* Never set up (a vfork child that did not exec, say). */
		struct ptw_event ev = ptw_event_init(PTW_EV_PROCESS_EXIT, st->ns, c->pid);
		ev.pid = c->pid;
		if (st->kind == PTW_STOP_KILLED) {
			ev.sig = c->exit_signal = st->sig;
			ev.core_dumped = c->core_dumped = st->core_dumped;
		} else {
			ev.exit_code = c->exit_code = st->exit_code;
		}
		c->target_gone = true;
		emit(c, &ev);
	}
	c->end_ns = st->ns;
	ptw_map_del(&root->by_pid, (uint64_t)c->pid);
	tracer_image_reset(c);
	if (c->img.exe) {
		free(c->last_exe);
		c->last_exe = xstrdup(c->img.exe);
	}
	image_release(c);
	if (c->bps) {
		c->bps_retired += ptw_bp_count(c->bps);
		ptw_bptab_free(c->bps);
		c->bps = NULL;
	}
	if (c->proc) {
		ptw_proc_free(c->proc);
		c->proc = NULL;
	}
}

static void handle_stop(struct ptw_tracer *t, struct ptw_stop *st)
{
	struct ptw_lwp *l = st->lwp;
	thread_of(l);
	switch (st->kind) {
	case PTW_STOP_EXITED:
	case PTW_STOP_KILLED:
		on_gone(t, l, st);
		return;
	case PTW_STOP_EXIT:
		on_exit_stop(t, l, st);
		break;
	case PTW_STOP_CLONE: {
		struct ptw_lwp *cl = ptw_lwp_get(t->proc, (pid_t)st->msg);
		uint64_t flags, tls;
		clone_args(t, l, &flags, &tls);
		if (cl && flags && !(flags & CLONE_THREAD)) {
			/* clone() without CLONE_THREAD: another process, sharing
			 * our memory (like vfork) or with a copy of it (like fork). */
			cl->tgid = cl->tid;
			st->kind = (flags & CLONE_VM) ? PTW_STOP_VFORK : PTW_STOP_FORK;
			on_fork_stop(t, st);
		} else if (thread_of(l)->foreign) {
			if (cl) {
				thread_of(cl)->foreign = true;
				thread_of(cl)->vfork_child = true;
				thread_of(cl)->announced = true;
			}
		} else {
			on_clone(t, l, (pid_t)st->msg, flags, tls, st->ns);
		}
		if (cl && cl->state == PTW_LWP_STOPPED && cl->last_stop == PTW_STOP_NEW &&
		    thread_of(cl)->announced)
			ptw_resume(t->proc, cl);
		break;
	}
	case PTW_STOP_FORK:
	case PTW_STOP_VFORK:
		on_fork_stop(t, st);
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

int ptw_tracer_launch(const struct ptw_tracer_opts *o, char *const argv[], int child_stdout,
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
	struct thread *th = thread_of(st.lwp);
	th->announced = true;
	th->is_main = true;
	image_init(t, st.lwp);
	ptw_resume(proc, st.lwp);
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
		expire_copies(t, now);
		if (t->end_signal) {
			*ret_reason = PTW_END_INTERRUPTED;
			*ret_signal = t->end_signal;
			return 0;
		}
		uint64_t wake = copies_deadline(t);
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
			settle_session_signals(t);
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
			on_session_signal(t, &st);
			continue;
		}
		struct ptw_tracer *owner = owner_of(t, st.lwp);
		struct ptw_tracer *ended = NULL;
		if ((st.kind == PTW_STOP_EXITED || st.kind == PTW_STOP_KILLED) && t->nfollowed &&
		    st.tid == st.lwp->tgid && st.tid != t->proc->pid)
			ended = ptw_map_get(&t->by_pid, (uint64_t)st.tid);
		handle_stop(owner, &st);
		if (ended)
			followed_done(ended, &st);
		if (t->target_gone && !t->by_pid.count && ptw_lwp_count_alive(t->proc) == 0 &&
		    !t->proc->ndeferred) {
			/* Fork children we still trace keep the loop going. */
			size_t it = 0;
			if (!ptw_map_next(t->proc->lwps, &it, NULL, NULL)) {
				settle_session_signals(t);
				*ret_reason = PTW_END_TARGET_EXITED;
				return 0;
			}
		}
	}
}

/* ---- detach ---- */

static void on_stop_detaching(void *ctx, struct ptw_stop *st)
{
	struct ptw_tracer *t = ctx;
	struct ptw_lwp *l = st->lwp;
	switch (st->kind) {
	case PTW_STOP_EXITED:
	case PTW_STOP_KILLED:
		on_gone(t, l, st);
		break;
	case PTW_STOP_SIGNAL:
		/* Our trap is undone (rip rewound): the original instruction
		 * runs once the bytes are restored. Any other signal is kept
		 * for delivery at detach. */
		l->resume_sig = our_trap(t, l, st) ? 0 : st->sig;
		break;
	case PTW_STOP_FORK:
	case PTW_STOP_VFORK: {
		struct ptw_lwp *cl = ptw_lwp_get(t->proc, (pid_t)st->msg);
		if (cl) {
			thread_of(cl)->foreign = true;
			if (st->kind == PTW_STOP_FORK)
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
		if (th && th->pd && is_target_lwp(t, l) && l->state != PTW_LWP_GONE)
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
		warn(t, "xol_page_left",
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
		if (l->state != PTW_LWP_STOPPED || !mine(t, l) || ptw_getregs(t->proc, l, &regs) < 0)
			continue;
		if (ptw_bp_xol_origin(t->bps, regs->rip, &rip)) {
			regs->rip = rip;
			ptw_regs_dirty(l);
		}
	}
	/* The munmap runs in a thread stopped outside any system call, or in
	 * one we let finish its call first (it stops again at once). */
	struct ptw_lwp *host = injection_host(t);
	if (host && !ptw_lwp_injectable(host) && make_injectable(t, host) < 0)
		host = NULL;
	int left = ptw_bp_unmap_xol(t->bps, host);
	if (left)
		warn(t, "xol_page_left", "%d out-of-line pages (r-x, 4 KiB) stay mapped in %d", left,
		     t->proc->pid);
}

int tracer_let_go(struct ptw_tracer *t)
{
	if (t->target_gone || t->detached)
		return 0;
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

	/* A trap on our int3 can be pending behind the interrupt stop (it hit
	 * the int3 as we interrupted it): let it be reported (the thread runs
	 * no user code before that) and undo it. (A snapshot patches nothing.) */
	size_t it = 0;
	void *v;
	while (!t->snapshot && ptw_map_next(t->proc->lwps, &it, NULL, &v)) {
		struct ptw_lwp *l = v;
		if (!mine(t, l) || l->state != PTW_LWP_STOPPED || l->last_stop != PTW_STOP_INTERRUPT ||
		    !ptw_signal_queued(t->proc, l, SIGTRAP, SI_KERNEL))
			continue;
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

	/* (A snapshot enabled none: it writes nothing, and must not clear a
	 * debugger's.) */
	if (t->img.tdb && !t->snapshot)
		disable_thread_events(t);
	leave_xol_pages(t);
	int failed = t->bps ? ptw_bp_restore_all(t->bps) : 0;
	if (failed)
		warn(t, "restore_failed", "%d patched bytes could not be restored", failed);

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
		if (sig && all[i]->state == PTW_LWP_STOPPED && is_target_lwp(t, all[i]) &&
		    default_action_kills(sig) && ptw_proc_sig_default(t->proc->pid, sig))
			t->fatal_at_detach = sig; /* a second Ctrl-C it does not handle */
		if (is_target_lwp(t, all[i]) && all[i]->state != PTW_LWP_GONE)
			open_tids[nopen++] = all[i]->tid;
		/* Held at its exit event: if it is a process-wide exit, the
		 * others have SIGKILL pending (every thread's status says) or
		 * none is left (they were all held there). */
		if (is_target_lwp(t, all[i]) && all[i]->state == PTW_LWP_STOPPED) {
			bool exiting = all[i]->last_stop == PTW_STOP_EXIT;
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
		read_comm(t, open_tids[i], t0);
	free(open_tids);
	if (stuck)
		warn(t, "threads_not_stopped",
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
	emit(t, &ev);
	return stuck;
}

/* ---- report ---- */

static const char *stop_names[PTW_STOP_TRACER_SIGNAL + 1];

/*
 * What became of a target we let go of, checked now: a message that says
 * "lives on" must be true when it is printed. A launched command is still
 * our child: if it has ended (the signal we passed on at detach, say), how
 * is ours to read, and ptwatch exits as it did.
 */
/* include/linux/sched.h: the task is exiting (set early in do_exit). */
#define PF_EXITING 0x00000004u

void ptw_tracer_check_fate(struct ptw_tracer *t, struct ptw_report *r)
{
	pid_t pid = t->proc->pid;
	int status = 0;
	bool reaped = false;
	if (!t->target_gone && t->detached && t->launched)
		reaped = waitpid(pid, &status, WNOHANG) == pid;
	/* A signal we delivered as we let go, one still pending there (held
	 * during an injected call and queued again), or an exit under way:
	 * say how it ended, not "lives on" a moment before it dies (bounded:
	 * a thread may be stuck in D). */
	/* Every thread's status only if one may still be traced (by us: one we
	 * could not let go of); else the main thread's says enough: a group
	 * stop and shared signals are the process's, and a signal for one
	 * thread would have stopped it as we stopped them all. */
	bool every_thread = t->left_traced > 0 || !t->detached || t->exiting_at_detach;
	struct ptw_census c = { 0 };
	if (!t->target_gone && !reaped)
		ptw_proc_census(pid, every_thread, &c);
	unsigned long long flags = 0;
	bool doomed = !t->target_gone && t->detached && !reaped &&
		      (t->fatal_at_detach || t->all_exiting_at_detach || c.fatal_signal || !c.alive ||
		       (ptw_proc_stat_field(pid, 9, &flags) && (flags & PF_EXITING)));
	for (int ms = 0; doomed && !reaped && ms < 1000; ms++) {
		/* Threads that were dying as we let go are still ours to reap
		 * (a traced thread's death waits for its tracer), and the main
		 * thread cannot be reaped before them. */
		int st;
		pid_t w;
		while ((w = waitpid(-1, &st, __WALL | WNOHANG)) > 0)
			if (w == pid && t->launched) {
				reaped = true;
				status = st;
			}
		if (!t->launched && ptw_proc_exited(pid, pid) && !ptw_proc_alive(pid))
			break;
		if (!reaped)
			usleep(1000);
	}
	if (reaped) {
		t->target_gone = true;
		t->after_detach = true;
		if (WIFSIGNALED(status)) {
			t->exit_signal = WTERMSIG(status);
			t->core_dumped = WCOREDUMP(status);
		} else {
			t->exit_code = WEXITSTATUS(status);
		}
	}
	if (t->target_gone) {
		r->fate = PTW_FATE_ENDED;
		r->after_detach = t->after_detach;
		return;
	}
	if (doomed)
		ptw_proc_census(pid, every_thread, &c); /* it may have ended meanwhile */
	if (!c.alive) {
		r->fate = ptw_proc_state(pid, pid) == 'Z' ? PTW_FATE_ZOMBIE : PTW_FATE_GONE;
		return;
	}
	r->fate = c.traced_by ? PTW_FATE_TRACED : c.stopped ? PTW_FATE_STOPPED : PTW_FATE_LIVES_ON;
	r->traced_by = c.traced_by;
}

/* What the document says of process c (-f). */
static void fill_process(struct ptw_tracer *c, struct ptw_process *p)
{
	memset(p, 0, sizeof(*p));
	p->id = c->serial;
	p->parent_id = c->pserial;
	p->pid = c->pid;
	p->ppid = c->root ? c->ppid : 0;
	p->parent_tid = c->root ? c->parent_tid : 0;
	p->exe = c->img.exe ? c->img.exe : c->last_exe;
	p->argv = c->argv;
	p->start_ns = c->start_ns;
	p->end_ns = c->end_ns;
	p->followed = !c->fail_why;
	p->not_followed_why = c->fail_why;
	p->detached = c->detached;
	if (c->target_gone) {
		p->exit_kind = c->exit_signal ? PTW_EXIT_SIGNAL : PTW_EXIT_CODE;
		p->exit_code = c->exit_code;
		p->exit_signal = c->exit_signal;
		p->core_dumped = c->core_dumped;
	}
}

bool ptw_tracer_process(struct ptw_tracer *t, uint32_t id, struct ptw_process *ret)
{
	if (!t->o.follow_forks)
		return false;
	if (id == 0) {
		fill_process(t, ret);
		return true;
	}
	if (id > t->nfollowed)
		return false;
	fill_process(t->followed[id - 1], ret);
	return true;
}

void ptw_tracer_report(struct ptw_tracer *t, struct ptw_report *r)
{
	debuginfod_warning(t); /* a failure at a lookup after the last image load */
	if (t->target_gone || t->detached)
		tracer_features_finish(t); /* a pattern may still match a library loaded later */
	r->pid = t->proc->pid;
	r->exe = t->img.exe;
	r->argv = t->argv;
	r->mode = t->launched ? "launch" : "attach";
	r->snapshot = t->snapshot;
	r->glibc = t->img.glibc;
	if (t->target_gone) {
		r->exit_kind = t->exit_signal ? PTW_EXIT_SIGNAL : PTW_EXIT_CODE;
		r->exit_code = t->exit_code;
		r->exit_signal = t->exit_signal;
		r->core_dumped = t->core_dumped;
	} else {
		r->exit_kind = PTW_EXIT_NONE;
	}
	r->start_ns = t->start_ns;
	r->frozen_ns = t->frozen_ns;
	r->interrupts = t->interrupts;
	r->ninterrupts = t->ninterrupts;
	r->strategy = !t->img.tdb ? "lwp" : t->img.have_result ? "debuginfo" : "breakpoints";
	r->stops_total = t->proc->counts.total;
	for (int k = 0; k <= PTW_STOP_TRACER_SIGNAL; k++)
		stop_names[k] = ptw_stop_kind_name((enum ptw_stop_kind)k);
	r->stop_names = stop_names;
	r->stop_counts = t->proc->counts.by_kind;
	r->nstop_kinds = PTW_STOP_TRACER_SIGNAL + 1;
	r->breakpoints = ptw_bp_count(t->bps);
	/* Every process of the session, the root first (-f). */
	free(t->report_procs);
	t->report_procs = NULL;
	r->processes = NULL;
	r->nprocesses = 0;
	if (t->o.follow_forks) {
		t->report_procs = xcalloc(t->nfollowed + 1, sizeof(*t->report_procs));
		for (size_t i = 0; i <= t->nfollowed; i++) {
			struct ptw_tracer *c = i ? t->followed[i - 1] : t;
			fill_process(c, &t->report_procs[i]);
			if (i)
				r->breakpoints += ptw_bp_count(c->bps) + c->bps_retired;
		}
		r->processes = t->report_procs;
		r->nprocesses = t->nfollowed + 1;
	}
	r->warnings = t->warnings;
	r->nwarnings = t->nwarnings;
}

bool ptw_tracer_target_exit(struct ptw_tracer *t, int *ret_code, int *ret_signal, bool *ret_core)
{
	if (!t->target_gone)
		return false;
	*ret_code = t->exit_code;
	*ret_signal = t->exit_signal;
	*ret_core = t->core_dumped;
	return true;
}
