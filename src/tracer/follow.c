/* SPDX-License-Identifier: MIT */
/*
 * -f: following forks. Every process the target forks (fork, vfork,
 * clone without CLONE_THREAD, posix_spawn) gets a process tracer of its
 * own (tracer_new), listed in the root, its stops routed to it
 * (follow_owner); a fork child is traced from its first stop as if
 * attached, a vfork child from its exec as if launched. With -p, the
 * descendants that run at the attach are attached to
 * (follow_attach_descendants).
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


/* Whether pid's program is set-user-ID or set-group-ID: the kernel runs it
 * without its privileges under ptrace, and it is not ours to look into. */
static bool setuid_exec(pid_t pid)
{
	char path[64];
	struct stat sb;
	snprintf(path, sizeof(path), "/proc/%d/exe", pid);
	return stat(path, &sb) == 0 && (sb.st_mode & (S_ISUID | S_ISGID));
}

/* -f: the record of a process the traced process t forked (st: its fork
 * event), listed in the root; its tracing is set up at its first stop
 * (fork) or its exec (vfork). */
static struct ptw_tracer *followed_new(struct ptw_tracer *t, const struct ptw_stop *st)
{
	struct ptw_tracer *c = follow_add(t, (pid_t)st->msg, t->proc->pid, st->tid, st->ns);
	c->xol_parent = t;
	c->owned_argv = ptw_argv_dup(t->argv);
	c->argv = c->owned_argv;
	return c;
}

struct ptw_tracer *follow_add(struct ptw_tracer *t, pid_t pid, pid_t ppid, pid_t parent_tid,
				uint64_t ns)
{
	struct ptw_tracer *root = tracer_root(t);
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
	root->followed =
		xreallocarray(root->followed, root->nfollowed + 1, sizeof(*root->followed));
	root->followed[root->nfollowed++] = c;
	ptw_map_put(&root->by_pid, (uint64_t)c->pid, c);
	return c;
}

/* /proc/PID/exe (malloc'd), or NULL once it is gone. */
static char *read_exe(pid_t pid)
{
	char path[64], exe[4096];
	snprintf(path, sizeof(path), "/proc/%d/exe", pid);
	ssize_t n = readlink(path, exe, sizeof(exe) - 1);
	if (n <= 0)
		return NULL;
	exe[n] = 0;
	return xstrdup(exe);
}

/* What c held of its process (image, breakpoint table, memory view) goes;
 * its record (exe, counts) stays for the report. */
static void release_process(struct ptw_tracer *c)
{
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

void follow_failed(struct ptw_tracer *c, const char *why)
{
	struct ptw_tracer *root = tracer_root(c);
	free(c->fail_why);
	c->fail_why = xstrdup(why);
	if (!c->img.exe && !c->last_exe)
		c->last_exe = read_exe(c->pid);
	tracer_warn(c, PTW_W_PROCESS_NOT_FOLLOWED, "%s is not traced: %s",
		    c->img.exe ? c->img.exe : c->last_exe ? c->last_exe : "?", why);
	ptw_map_del(&root->by_pid, (uint64_t)c->pid);
	tracer_features_free(c);
	release_process(c);
}

/* Its own view of memory, breakpoint table and journal. */
static int followed_open(struct ptw_tracer *c)
{
	struct ptw_tracer *root = tracer_root(c);
	int r = ptw_proc_follow(root->proc, c->pid, &c->proc);
	if (r < 0)
		return r;
	return ptw_bptab_new(c->proc, &c->bps);
}

/* A forked process's first thread stopped for the first time: trace it as
 * if attached (its copy of the parent's bytes is already restored). */
void follow_setup(struct ptw_tracer *c, struct ptw_lwp *l, uint64_t ns)
{
	struct thread *th = tracer_thread_of(l);
	th->follow_setup = false;
	if (!ptw_same_pid_ns(c->pid)) {
		/* (unshare -p -f, clone(CLONE_NEWPID)): libthread_db would name
		 * its threads by ids ptwatch does not know */
		follow_failed(c, "it runs in a PID namespace of its own (its thread ids there are "
				 "not ptwatch's; the kernel path follows it)");
		th->foreign = true;
		th->detach_asap = true;
		return;
	}
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
	bool have_tdb = image_load(c) == 0 && image_tdb_open(c) == 0;
	tracer_features_prepare(c);
	tracer_image_ready(c, l);
	if (have_tdb) {
		ptw_tdb_map_lwp(c->img.tdb, l->tid, &th->pd);
		if (c->parent_tid == c->ppid) {
			attach_learn_main_return(c, l);
			c->img.main_seen = true;
		}
		if (!c->img.have_result)
			attach_learn_start_return(c, l);
		lifecycle_setup(c, l);
	}
	/* Its one thread began at the fork. */
	struct preexisting f;
	attach_preexisting_facts(c, l, &f);
	if (f.have_joinid)
		f.have_joinid =
			ptw_mem_read(c->proc, f.joinid_at, &f.joinid, sizeof(f.joinid)) == 0;
	f.began_ns = c->start_ns;
	attach_emit_facts(c, &f, NULL, ns);
	/* The calls its forking thread had under way are its own too (its
	 * stack is a copy): --trace's frames, begun before the fork, whose
	 * returns it makes (its copy of their return breakpoints was just
	 * taken away with the others). */
	tracer_features_under_way(c, l);
}

void follow_fork_stop(struct ptw_tracer *t, struct ptw_stop *st)
{
	struct ptw_lwp *cl = ptw_lwp_get(t->proc, (pid_t)st->msg);
	if (!cl)
		return;
	struct thread *cth = tracer_thread_of(cl);
	if (cth->announced)
		return; /* set up already (follow_orphans) */
	cth->foreign = true;
	cth->announced = true;
	struct ptw_tracer *c = t->o.follow_forks && !tracer_root(t)->letting_go ? followed_new(t, st)
									      : NULL;
	if (c && st->kind == PTW_STOP_VFORK) {
		/* It runs in our memory until it execs: we step it over our
		 * int3s; at its exec it becomes a process of its own. */
		c->vfork_pending = true;
		c->vfork_parent = t;
		/* Until then it runs our program (an exec names its own). */
		const char *exe = t->img.exe ? t->img.exe : t->last_exe;
		c->last_exe = exe ? xstrdup(exe) : NULL;
	}
	if (st->kind == PTW_STOP_VFORK) {
		/* It shares our memory, int3s included, until it execs or
		 * exits: keep it traced and step it over them. */
		cth->vfork_child = true;
		cth->vm_parent = t->pid;
		if (tracer_take_first_stop(t, cl))
			ptw_resume(t->proc, cl);
		return;
	}
	/* A fork child got a copy of every int3: give it the original bytes
	 * back, then let it go. It must not die at its first pthread_create. */
	int failed = ptw_bp_restore_in(t->bps, cl->tid);
	if (failed)
		tracer_warn(t, PTW_W_FORK_CHILD_UNCLEAN,
			    "could not restore %d patched bytes in fork child %d", failed, cl->tid);
	if (c && !failed) {
		/* -f: it is a process of its own, traced from its first stop. */
		cth->foreign = false;
		cth->is_main = true;
		cth->follow_setup = true;
		if (tracer_take_first_stop(t, cl)) {
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

/*
 * Orphans. A thread killed (another thread's exec or exit_group, SIGKILL)
 * between the fork it made and the report of it never reports it: the
 * kernel skips a ptrace stop when a fatal signal is pending, and the exit
 * stop too. Its child lives on, traced from birth, with a copy of our
 * int3s, and waits at its first stop for a fork event that never comes.
 * It is set up as that event would have (with -f followed; else its bytes
 * restored and let go), with t's table: before an exec forgets it.
 */

/* Whether held LWP l (no event announced it) is a new process, not a
 * thread (one is killed with its creator's process); then *parent is the
 * tracer of its parent process, NULL once that is gone (l was reparented
 * to a reaper). */
static bool held_process(struct ptw_tracer *root, const struct ptw_lwp *l,
			 struct ptw_tracer **parent)
{
	if (ptw_proc_status_field(l->tid, "Tgid") != l->tid)
		return false;
	long ppid = ptw_proc_status_field(l->tid, "PPid");
	*parent = ppid == root->pid ? root : ptw_map_get(&root->by_pid, (uint64_t)ppid);
	return true;
}

/* A fresh child's first stop is microseconds away. */
#define FIRST_STOP_MS 500

static void adopt(struct ptw_tracer *t, struct ptw_lwp *cl)
{
	cl->tgid = cl->tid;
	struct ptw_stop st = { .kind = ptw_proc_same_vm(t->pid, cl->tid) == 1 ? PTW_STOP_VFORK
									: PTW_STOP_FORK,
			       .msg = (uint64_t)cl->tid,
			       .ns = ptw_now_ns() };
	ptw_dbg(PTW_DBG_ATTACH, "process %d: fork event lost (its parent killed), set up now",
		cl->tid);
	follow_fork_stop(t, &st);
}

bool follow_orphan_stop(struct ptw_tracer *root, struct ptw_lwp *l)
{
	struct ptw_tracer *pt;
	if (!root->ngoing_down || tracer_thread_of(l)->announced || !held_process(root, l, &pt) ||
	    (pt && !pt->going_down))
		return false; /* (a process going on: its fork event is still to come) */
	if (!pt || !pt->proc)
		pt = root; /* its parent process is gone: reparented */
	if (!pt->proc)
		return false;
	adopt(pt, l);
	return true;
}

void follow_going_down(struct ptw_tracer *t, bool down)
{
	struct ptw_tracer *root = tracer_root(t);
	if (down == t->going_down)
		return;
	t->going_down = down;
	if (down) {
		root->ngoing_down++;
		follow_orphans(t);
	} else {
		root->ngoing_down--;
	}
}

/* Held at its first stop: no event announced it yet. */
static bool held_first_stop(struct ptw_tracer *t, struct ptw_lwp *l)
{
	(void)t;
	return !l->tgid && l->state == PTW_LWP_STOPPED && l->last_stop == PTW_STOP_NEW &&
	       !tracer_thread_of(l)->announced;
}

void follow_orphans(struct ptw_tracer *t)
{
	if (!t->proc)
		return;
	pid_t *held; /* held at their first stop */
	size_t n = tracer_tids_where(t, held_first_stop, &held);
	for (size_t i = 0; i < n; i++) {
		struct ptw_lwp *l = ptw_lwp_get(t->proc, held[i]);
		struct ptw_tracer *pt;
		if (l && held_process(tracer_root(t), l, &pt) && (!pt || pt == t))
			adopt(t, l);
	}
	free(held);
	/* not stopped yet: its first stop is owed, and comes at once (a
	 * tracee of ours that is no such child does not stop: let be) */
	pid_t *kids = NULL;
	n = ptw_proc_children(t->pid, &kids, NULL, 0);
	for (size_t i = 0; i < n; i++) {
		struct ptw_lwp *l = ptw_lwp_get(t->proc, kids[i]);
		if ((l && l->state != PTW_LWP_GONE) ||
		    ptw_proc_status_field(kids[i], "TracerPid") != getpid())
			continue;
		struct ptw_stop st;
		if (ptw_wait_tid_within(t->proc, kids[i], FIRST_STOP_MS, &st) < 0)
			continue;
		if (st.kind == PTW_STOP_EXITED || st.kind == PTW_STOP_KILLED)
			tracer_forget_lwp(t, st.lwp);
		else
			adopt(t, st.lwp);
	}
	free(kids);
}

/* A followed process exec'd (l: the thread that did): its command line
 * is the new program's. False if that program is set-user-ID or
 * set-group-ID: then it has been let go. */
bool follow_exec(struct ptw_tracer *t, struct ptw_lwp *l)
{
	ptw_argv_free(t->owned_argv);
	t->owned_argv = ptw_proc_cmdline(t->pid);
	t->argv = t->owned_argv;
	if (setuid_exec(l->tid)) {
		/* Its old image's bytes went with it: only let go. */
		tracer_image_reset(t);
		image_release(t);
		/* The new program's, read while it is still stopped at its exec
		 * (once let go it may be gone at once). */
		free(t->last_exe);
		t->last_exe = read_exe(t->pid);
		ptw_detach_lwp(t->proc, l);
		tracer_forget_lwp(t, l);
		follow_failed(t, "it exec'd a set-user-ID or set-group-ID program");
		return false;
	}
	return true;
}

/* -f: l, a vfork child sharing t's memory, exec'd: a process of its own
 * now, traced as a launched one is. False if it is not followed (then it
 * is let go as without -f). */
bool follow_vfork_exec(struct ptw_tracer *t, struct ptw_lwp *l)
{
	struct thread *th = tracer_thread_of(l);
	struct ptw_tracer *c =
		th->foreign ? ptw_map_get(&tracer_root(t)->by_pid, (uint64_t)l->tgid) : NULL;
	if (c && c->vfork_pending && l->tid == c->pid) {
		/* -f: a vfork child exec'd: a process of its own now, traced as
		 * a launched one is. */
		c->vfork_pending = false;
		c->vfork_parent = NULL;
		free(c->last_exe);
		c->last_exe = read_exe(c->pid); /* the new program, not ours */
		ptw_argv_free(c->owned_argv);
		c->owned_argv = ptw_proc_cmdline(c->pid);
		c->argv = c->owned_argv;
		int r = followed_open(c);
		if (r == 0 && setuid_exec(l->tid))
			r = -EPERM;
		if (r == 0) {
			tracer_thread_renew(c, th);
			th->announced = true;
			th->is_main = true;
			image_init(c, l);
			return true;
		}
		follow_failed(c, r == -EPERM	? "it exec'd a set-user-ID or set-group-ID program"
				 : r == -ENOSPC ? "too many processes traced at once"
						: strerror(-r));
	}
	return false;
}

/* The tracer of the process l belongs to (root: every stop arrives there). */
struct ptw_tracer *follow_owner(struct ptw_tracer *root, struct ptw_lwp *l)
{
	if (!root->nfollowed || !l->tgid || l->tgid == root->proc->pid)
		return root;
	struct ptw_tracer *c = ptw_map_get(&root->by_pid, (uint64_t)l->tgid);
	if (!c)
		return root;
	if (!c->vfork_pending)
		return c; /* (set up at its first stop: no proc before) */
	/* The memory it runs in is its parent's, while that is traced. */
	c = c->vfork_parent;
	return c && c->proc ? c : root;
}

/* A followed process ended (its leader was reaped): what it left goes. */
void follow_done(struct ptw_tracer *c, const struct ptw_stop *st)
{
	struct ptw_tracer *root = tracer_root(c);
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
		tracer_emit(c, &ev);
		if (c->exit_signal == SIGTRAP)
			tracer_sigtrap_death(c);
	}
	c->end_ns = st->ns;
	ptw_map_del(&root->by_pid, (uint64_t)c->pid);
	tracer_image_reset(c);
	release_process(c);
	/* (its orphans were set up as it went down: none can come now) */
	follow_going_down(c, false);
}

/* ---- -p PID -f: the descendants that run at the attach ---- */

/* One descendant: seized and set up as the target was, or warned about
 * and left alone. */
static void attach_descendant(struct ptw_tracer *root, pid_t pid, pid_t ppid, pid_t parent_tid)
{
	uint64_t start = ptw_now_ns();
	struct ptw_tracer *c = follow_add(root, pid, ppid, parent_tid, start);
	c->owned_argv = ptw_proc_cmdline(pid);
	c->argv = c->owned_argv;
	char why[160];
	if (ptw_check_target(pid, why, sizeof(why)) < 0) {
		follow_failed(c, why);
		return;
	}
	struct ptw_seize_info info;
	int r = ptw_seize_follow(root->proc, pid, &c->proc, &info);
	if (r < 0) {
		if (r == -EPERM)
			ptw_explain_eperm(pid, why, sizeof(why));
		else
			snprintf(why, sizeof(why), "%s",
				 r == -EBUSY ? "a thread is traced by another process"
					     : strerror(-r));
		follow_failed(c, why);
		return;
	}
	if (info.zombie_leader)
		tracer_warn(
			c, PTW_W_ZOMBIE_LEADER,
			"the main thread of %d has exited (pthread_exit) and is a zombie; its other "
			"threads are traced",
			pid);
	r = attach_process(c, &info, start);
	if (r < 0) {
		tracer_let_go(c);
		follow_failed(c, strerror(-r));
	}
}

void follow_attach_descendants(struct ptw_tracer *root)
{
	/* Breadth first from the target, again until a pass finds no one new:
	 * a process forked meanwhile by one already traced is followed through
	 * its fork event (and is then known), one forked by one not yet traced
	 * turns up in the next pass. */
	for (int pass = 0; pass < 64; pass++) {
		bool found = false;
		pid_t *queue = xcalloc(1, sizeof(*queue));
		size_t nq = 0, head = 0;
		queue[nq++] = root->pid;
		while (head < nq) {
			pid_t p = queue[head++];
			pid_t *kids = NULL, *tids = NULL;
			size_t n = 0;
			n = ptw_proc_children(p, &kids, &tids, n);
			for (size_t i = 0; i < n; i++) {
				/* Traced by us already: forked by a process we
				 * hold since it was seized, its fork event (still
				 * queued) will tell (its bytes are its parent's). */
				bool known =
					ptw_proc_status_field(kids[i], "TracerPid") == getpid();
				for (size_t k = 0; k < root->nfollowed && !known; k++)
					known = root->followed[k]->pid == kids[i];
				if (!known) {
					attach_descendant(root, kids[i], p, tids[i]);
					found = true;
				}
				queue = xreallocarray(queue, nq + 1, sizeof(*queue));
				queue[nq++] = kids[i];
			}
			free(kids);
			free(tids);
		}
		free(queue);
		if (!found)
			break;
	}
}
