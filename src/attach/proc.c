/* SPDX-License-Identifier: MIT */
/*
 * The attach layer proper: the wait loop, the LWP table, resume,
 * stop-all, detach, registers, syscall injection. See ptw_attach.h.
 */
#define _GNU_SOURCE
#include <time.h>

#include "attach_int.h"

/* ---- LWP table ---- */

struct ptw_proc *att_proc_new(pid_t pid)
{
	struct ptw_proc *p = xcalloc(1, sizeof(*p));
	p->pid = pid;
	p->mem_pid = pid;
	p->sigfd = ptw_signals_fd();
	p->mem_fd = -1;
	p->wake_fd = -1;
	p->lwps = &p->lwps_own;
	att_reopen_mem(p);
	return p;
}

/* Another process of root's session: root's LWP table and signals. */
static struct ptw_proc *proc_child(struct ptw_proc *root, pid_t pid)
{
	struct ptw_proc *p = xcalloc(1, sizeof(*p));
	p->pid = pid;
	p->mem_pid = pid;
	p->sigfd = root->sigfd;
	p->wake_fd = -1;
	p->mem_fd = -1;
	p->root = root;
	p->lwps = root->lwps;
	return p;
}

int ptw_proc_follow(struct ptw_proc *root, pid_t pid, struct ptw_proc **ret)
{
	root = ptw_proc_root(root);
	if (ptw_map_get(&root->procs, (uint64_t)pid))
		return -EEXIST;
	struct ptw_proc *p = proc_child(root, pid);
	p->options = root->options;
	att_reopen_mem(p);
	if (p->mem_fd < 0) {
		int e = errno ? errno : ESRCH;
		free(p);
		return -e;
	}
	ptw_map_put(&root->procs, (uint64_t)pid, p);
	*ret = p;
	return 0;
}

static int drop_queued(struct ptw_proc *p, struct ptw_lwp *l);

struct ptw_lwp *att_lwp_add(struct ptw_proc *p, pid_t tid, pid_t tgid)
{
	struct ptw_lwp *l = ptw_map_get(p->lwps, (uint64_t)tid);
	if (l) {
		if (l->state != PTW_LWP_GONE)
			return l;
		/* The tid was reused: start a new generation in the same block. */
		unsigned gen = l->gen + 1;
		memset(l, 0, sizeof(*l));
		l->gen = gen;
	} else {
		l = xcalloc(1, sizeof(*l));
		ptw_map_put(p->lwps, (uint64_t)tid, l);
	}
	l->tid = tid;
	l->tgid = tgid;
	l->state = PTW_LWP_RUNNING;
	return l;
}

struct ptw_lwp *ptw_lwp_get(struct ptw_proc *p, pid_t tid)
{
	return ptw_map_get(p->lwps, (uint64_t)tid);
}

void ptw_lwp_forget(struct ptw_proc *p, struct ptw_lwp *l)
{
	drop_queued(p, l);
	ptw_map_del(p->lwps, (uint64_t)l->tid);
	free(l);
}

size_t ptw_lwp_count_alive(struct ptw_proc *p)
{
	size_t n = 0, it = 0;
	void *v;
	while (ptw_map_next(p->lwps, &it, NULL, &v)) {
		struct ptw_lwp *l = v;
		if (l->state != PTW_LWP_GONE && l->tgid == p->pid)
			n++;
	}
	return n;
}

/* ---- turning a wait status into a stop ---- */

void att_record_status(struct ptw_proc *p, pid_t tid, int status, struct ptw_stop *st)
{
	p = ptw_proc_root(p);
	struct ptw_status_class c = ptw_classify_status(status);
	struct ptw_lwp *l = ptw_lwp_get(p, tid);

	if (!l || l->state == PTW_LWP_GONE) {
		/* A tid we never heard of: its first stop beat its parent's clone
		 * event (or it reused the tid of a dead thread). Its parent's
		 * event will say what it is. */
		l = att_lwp_add(p, tid, 0);
	}

	memset(st, 0, sizeof(*st));
	st->ns = ptw_now_ns();
	st->tid = tid;
	st->lwp = l;
	st->kind = c.kind;
	st->sig = c.sig;
	st->exit_code = c.exit_code;
	st->core_dumped = c.core_dumped;
	l->regs_valid = false;
	l->regs_dirty = false;
	l->unstoppable = false;

	switch (c.kind) {
	case PTW_STOP_EXITED:
	case PTW_STOP_KILLED:
		l->state = PTW_LWP_GONE;
		break;
	case PTW_STOP_NEW:
		if (l->interrupt_sent || l->group_stopped || l->last_stop != PTW_STOP_NONE)
			st->kind = PTW_STOP_INTERRUPT;
		l->interrupt_sent = false;
		l->group_stopped = false;
		l->state = PTW_LWP_STOPPED;
		break;
	case PTW_STOP_GROUP:
		/* Like any PTRACE_EVENT_STOP, it consumes a pending interrupt. */
		l->interrupt_sent = false;
		l->group_stopped = true;
		l->state = PTW_LWP_STOPPED;
		break;
	case PTW_STOP_CLONE:
	case PTW_STOP_FORK:
	case PTW_STOP_VFORK:
	case PTW_STOP_EXEC:
	case PTW_STOP_EXIT:
		if (ptrace(PTRACE_GETEVENTMSG, tid, 0, &st->msg) < 0)
			st->msg = 0;
		l->state = PTW_LWP_STOPPED;
		if (c.kind == PTW_STOP_CLONE || c.kind == PTW_STOP_FORK || c.kind == PTW_STOP_VFORK) {
			/* Announce the child now so that stop-all waits for it. A
			 * clone event is a thread unless its flags (which the tracer
			 * reads) lack CLONE_THREAD; fork and vfork make processes. */
			pid_t child = (pid_t)st->msg;
			pid_t tgid = c.kind == PTW_STOP_CLONE ? l->tgid : child;
			struct ptw_lwp *cl = child ? ptw_lwp_get(p, child) : NULL;
			if (child && (!cl || cl->state == PTW_LWP_GONE))
				att_lwp_add(p, child, tgid);
			else if (cl && !cl->tgid)
				cl->tgid = tgid;
		} else if (c.kind == PTW_STOP_EXEC && l->tgid) {
			struct ptw_proc *xp = l->tgid == p->pid
						      ? p
						      : ptw_map_get(&p->procs, (uint64_t)l->tgid);
			/* After an exec by another thread this entry (the leader's
			 * tid) is that thread now: nothing of the old leader, who
			 * may have reported its exit, applies to it. */
			if (st->msg && (pid_t)st->msg != tid) {
				l->exiting = false;
				l->interrupt_sent = false;
				l->group_stopped = false;
				l->unstoppable = false;
				l->gen++;
			}
			/* /proc/PID/mem is bound to the address space it was opened
			 * on: exec made a new one. */
			if (xp) {
				if (xp->cache)
					ptw_mem_invalidate(xp);
				xp->mem_pid = xp->pid;
				att_reopen_mem(xp);
			}
		}
		if (c.kind == PTW_STOP_EXEC && st->msg && (pid_t)st->msg != tid) {
			/* A non-leader thread exec'd: it now has the leader's tid, and
			 * its old tid vanishes without any notification. */
			struct ptw_lwp *old = ptw_lwp_get(p, (pid_t)st->msg);
			if (old)
				old->state = PTW_LWP_GONE;
		}
		break;
	default:
		l->state = PTW_LWP_STOPPED;
		break;
	}
	if (l->state == PTW_LWP_STOPPED)
		l->last_stop = st->kind;
	if ((unsigned)st->kind <= PTW_STOP_TRACER_SIGNAL)
		p->counts.by_kind[st->kind]++;
	p->counts.total++;
	ptw_dbg(PTW_DBG_ATTACH, "%d: %s sig=%d msg=%lu", tid, ptw_stop_kind_name(st->kind), st->sig,
		st->msg);
}

static void defer(struct ptw_proc *p, const struct ptw_stop *st)
{
	p = ptw_proc_root(p);
	if (p->ndeferred == p->deferred_cap) {
		p->deferred_cap = p->deferred_cap ? p->deferred_cap * 2 : 8;
		p->deferred = xreallocarray(p->deferred, p->deferred_cap, sizeof(*p->deferred));
	}
	p->deferred[p->ndeferred++] = *st;
	if (st->lwp)
		st->lwp->queued++;
}

/* Removes the deferred record i (its LWP's count too) into *ret if given. */
static void deferred_remove(struct ptw_proc *root, size_t i, struct ptw_stop *ret)
{
	struct ptw_stop *d = &root->deferred[i];
	if (d->lwp && d->lwp->queued)
		d->lwp->queued--;
	if (ret)
		*ret = *d;
	memmove(d, d + 1, (--root->ndeferred - i) * sizeof(*d));
}

int ptw_take_queued(struct ptw_proc *p, struct ptw_lwp *l, struct ptw_stop *ret)
{
	struct ptw_proc *root = ptw_proc_root(p);
	for (size_t i = 0; l->queued && i < root->ndeferred; i++)
		if (root->deferred[i].lwp == l) {
			deferred_remove(root, i, ret);
			return 1;
		}
	return 0;
}

/* Every record of l's goes (l is let go of or forgotten); the signal of
 * the last signal-delivery stop among them, or 0. */
static int drop_queued(struct ptw_proc *p, struct ptw_lwp *l)
{
	struct ptw_proc *root = ptw_proc_root(p);
	int sig = 0;
	for (size_t i = root->ndeferred; l->queued && i-- > 0;)
		if (root->deferred[i].lwp == l) {
			if (!sig && root->deferred[i].kind == PTW_STOP_SIGNAL)
				sig = root->deferred[i].sig;
			deferred_remove(root, i, NULL);
		}
	return sig;
}

bool ptw_is_session_signal(int sig)
{
	static const int sigs[] = PTW_SESSION_SIGNALS;
	for (size_t i = 0; i < PTW_ARRAY_SIZE(sigs); i++)
		if (sigs[i] == sig)
			return true;
	return false;
}

bool ptw_signals_read(int fd, struct ptw_session_signal *q)
{
	struct signalfd_siginfo si;
	while (read(fd, &si, sizeof(si)) == (ssize_t)sizeof(si)) {
		if (si.ssi_signo == SIGCHLD)
			continue;
		q->sig = (int)si.ssi_signo;
		q->code = si.ssi_code;
		q->pid = si.ssi_code == SI_USER || si.ssi_code == SI_TKILL ? (pid_t)si.ssi_pid : 0;
		if (si.ssi_code == SI_QUEUE && (pid_t)si.ssi_pid == getppid()) {
			/* forwarded by the front: as the front got it */
			q->code = (int)(uint32_t)si.ssi_ptr;
			q->pid = (pid_t)(si.ssi_ptr >> 32);
		}
		q->ns = ptw_now_ns();
		return true;
	}
	return false;
}

static size_t drain_sigfd(struct ptw_proc *p)
{
	struct ptw_session_signal q;
	size_t n = 0;
	while (ptw_signals_read(p->sigfd, &q)) {
		if (p->nsigq == PTW_ARRAY_SIZE(p->sigq))
			continue;
		p->sigq[p->nsigq++] = q;
		n++;
	}
	return n;
}

/* The oldest queued session signal as a PTW_STOP_TRACER_SIGNAL stop. */
static void pop_session_signal(struct ptw_proc *p, struct ptw_stop *ret)
{
	memset(ret, 0, sizeof(*ret));
	ret->kind = PTW_STOP_TRACER_SIGNAL;
	ret->sig = p->sigq[0].sig;
	ret->sig_code = p->sigq[0].code;
	ret->sig_pid = p->sigq[0].pid;
	ret->ns = p->sigq[0].ns;
	memmove(p->sigq, p->sigq + 1, --p->nsigq * sizeof(*p->sigq));
}

static int reap_one(struct ptw_proc *p, pid_t which, struct ptw_stop *st)
{
	int status;
	for (;;) {
		pid_t tid = waitpid(which, &status, __WALL | WNOHANG);
		if (tid > 0) {
			att_record_status(p, tid, status, st);
			return 1;
		}
		if (tid == 0)
			return 0;
		if (errno == EINTR)
			continue;
		return -errno;
	}
}

int ptw_wait(struct ptw_proc *p, int timeout_ms, struct ptw_stop *ret)
{
	if (p->nsigq) {
		pop_session_signal(p, ret);
		return 0;
	}
	if (p->ndeferred) {
		deferred_remove(p, 0, ret);
		return 0;
	}
	uint64_t deadline = timeout_ms >= 0 ? ptw_now_ns() + (uint64_t)timeout_ms * 1000000u : 0;
	for (;;) {
		int r = reap_one(p, -1, ret);
		if (r != 0)
			return r < 0 ? r : 0;
		int wait_ms = -1;
		if (timeout_ms >= 0) {
			uint64_t now = ptw_now_ns();
			if (now >= deadline) {
				memset(ret, 0, sizeof(*ret));
				ret->kind = PTW_STOP_TIMEOUT;
				ret->ns = now;
				return 0;
			}
			wait_ms = (int)((deadline - now + 999999) / 1000000);
		}
		if (p->before_block)
			p->before_block(p->before_block_ctx);
		struct pollfd pfd[2] = { { .fd = p->sigfd, .events = POLLIN },
					 { .fd = p->wake_fd, .events = POLLIN } };
		int n = poll(pfd, p->wake_fd >= 0 ? 2 : 1, wait_ms);
		if (n < 0 && errno != EINTR)
			return -errno;
		if (n > 0 && (pfd[0].revents & POLLIN) && drain_sigfd(p)) {
			pop_session_signal(p, ret);
			return 0;
		}
		if (n > 0 && pfd[1].revents) {
			memset(ret, 0, sizeof(*ret));
			ret->kind = PTW_STOP_TIMEOUT;
			ret->ns = ptw_now_ns();
			p->woke = true;
			return 0;
		}
	}
}

int ptw_wait_session_signal(struct ptw_proc *p, int timeout_ms, struct ptw_stop *ret)
{
	uint64_t deadline = ptw_now_ns() + (uint64_t)(timeout_ms > 0 ? timeout_ms : 0) * 1000000u;
	for (;;) {
		if (p->nsigq || drain_sigfd(p)) {
			pop_session_signal(p, ret);
			return 1;
		}
		uint64_t now = ptw_now_ns();
		if (now >= deadline)
			return 0;
		struct pollfd pfd = { .fd = p->sigfd, .events = POLLIN };
		if (poll(&pfd, 1, (int)((deadline - now + 999999) / 1000000)) < 0 && errno != EINTR)
			return -errno;
	}
}

int ptw_wait_tid(struct ptw_proc *p, struct ptw_lwp *l, struct ptw_stop *ret)
{
	int status;
	pid_t t;
	do
		t = waitpid(l->tid, &status, __WALL);
	while (t < 0 && errno == EINTR);
	if (t < 0)
		return -errno;
	att_record_status(p, t, status, ret);
	return 0;
}

int ptw_wait_tid_within(struct ptw_proc *p, pid_t tid, int timeout_ms, struct ptw_stop *ret)
{
	uint64_t deadline = ptw_now_ns() + (uint64_t)timeout_ms * 1000000;
	for (;;) {
		int status;
		pid_t t = waitpid(tid, &status, __WALL | WNOHANG);
		if (t == tid) {
			att_record_status(p, t, status, ret);
			return 0;
		}
		if (t < 0 && errno != EINTR)
			return -errno;
		if (ptw_now_ns() >= deadline)
			return -ETIMEDOUT;
		/* (rare: a stop due at once that has not come yet) */
		nanosleep(&(struct timespec){ .tv_nsec = 100000 }, NULL);
	}
}

/* ---- per-LWP operations ---- */

static int lwp_gone_or_err(struct ptw_lwp *l, const char *op)
{
	int e = errno;
	if (e == ESRCH) {
		/* Killed while stopped (exit_group, SIGKILL): its exit status
		 * will still be reported by waitpid. */
		l->state = PTW_LWP_RUNNING;
		l->exiting = true;
		return -ESRCH;
	}
	ptw_dbg(PTW_DBG_ATTACH, "%s(%d): %s", op, l->tid, strerror(e));
	return -e;
}

int ptw_getregs(struct ptw_proc *p, struct ptw_lwp *l, struct user_regs_struct **ret_regs)
{
	(void)p;
	if (!l->regs_valid) {
		if (ptrace(PTRACE_GETREGS, l->tid, 0, &l->regs) < 0)
			return lwp_gone_or_err(l, "PTRACE_GETREGS");
		l->regs_valid = true;
	}
	*ret_regs = &l->regs;
	return 0;
}

void ptw_regs_dirty(struct ptw_lwp *l)
{
	l->regs_dirty = true;
}

static int flush_regs(struct ptw_lwp *l)
{
	if (l->regs_dirty) {
		if (ptrace(PTRACE_SETREGS, l->tid, 0, &l->regs) < 0)
			return lwp_gone_or_err(l, "PTRACE_SETREGS");
		l->regs_dirty = false;
	}
	return 0;
}

int ptw_regs_flush(struct ptw_proc *p, struct ptw_lwp *l)
{
	(void)p;
	return flush_regs(l);
}

static int resume_with(struct ptw_proc *p, struct ptw_lwp *l, enum __ptrace_request req)
{
	(void)p;
	if (l->state != PTW_LWP_STOPPED)
		return 0;
	if (l->queued) {
		ptw_dbg(PTW_DBG_ATTACH, "%d: not resumed: its stop is still queued", l->tid);
		return -EBUSY;
	}
	int r = flush_regs(l);
	if (r < 0)
		return r;
	long sig = l->resume_sig;
	if (l->group_stopped && req == PTRACE_CONT) {
		req = PTRACE_LISTEN;
		sig = 0;
	}
	if (ptrace(req, l->tid, 0, sig) < 0)
		return lwp_gone_or_err(l, "resume");
	if (l->last_stop == PTW_STOP_EXIT)
		l->exiting = true;
	l->resume_sig = 0;
	l->regs_valid = false;
	l->state = PTW_LWP_RUNNING;
	return 0;
}

int ptw_resume(struct ptw_proc *p, struct ptw_lwp *l)
{
	return resume_with(p, l, PTRACE_CONT);
}

int ptw_resume_syscall(struct ptw_proc *p, struct ptw_lwp *l)
{
	return resume_with(p, l, PTRACE_SYSCALL);
}

int ptw_getfpregs(struct ptw_proc *p, struct ptw_lwp *l, struct user_fpregs_struct *ret)
{
	(void)p;
	if (ptrace(PTRACE_GETFPREGS, l->tid, 0, ret) < 0)
		return lwp_gone_or_err(l, "PTRACE_GETFPREGS");
	return 0;
}

int ptw_setfpregs(struct ptw_proc *p, struct ptw_lwp *l, const struct user_fpregs_struct *fp)
{
	(void)p;
	if (ptrace(PTRACE_SETFPREGS, l->tid, 0, fp) < 0)
		return lwp_gone_or_err(l, "PTRACE_SETFPREGS");
	return 0;
}

int ptw_getsiginfo(struct ptw_proc *p, struct ptw_lwp *l, siginfo_t *ret)
{
	(void)p;
	if (ptrace(PTRACE_GETSIGINFO, l->tid, 0, ret) < 0)
		return lwp_gone_or_err(l, "PTRACE_GETSIGINFO");
	return 0;
}

bool ptw_signal_queued(struct ptw_proc *p, struct ptw_lwp *l, int sig, int code)
{
	(void)p;
	siginfo_t si[16];
	struct __ptrace_peeksiginfo_args args = { .off = 0, .flags = 0, .nr = 16 };
	long n = ptrace(PTRACE_PEEKSIGINFO, l->tid, &args, si);
	for (long i = 0; i < n; i++)
		if (si[i].si_signo == sig && si[i].si_code == code)
			return true;
	return false;
}

int ptw_set_options(struct ptw_proc *p, struct ptw_lwp *l, unsigned options)
{
	(void)p;
	if (ptrace(PTRACE_SETOPTIONS, l->tid, 0, (long)options) < 0)
		return lwp_gone_or_err(l, "PTRACE_SETOPTIONS");
	return 0;
}

int ptw_interrupt(struct ptw_proc *p, struct ptw_lwp *l)
{
	(void)p;
	if (ptrace(PTRACE_INTERRUPT, l->tid, 0, 0) < 0)
		return lwp_gone_or_err(l, "PTRACE_INTERRUPT");
	l->interrupt_sent = true;
	return 0;
}

int ptw_detach_lwp(struct ptw_proc *p, struct ptw_lwp *l)
{
	if (l->queued) {
		/* Its stop was never handled: a signal of the program's goes
		 * with the detach (an int3 trap is no signal of the program's;
		 * a SIGTRAP it raised itself is). */
		int sig = drop_queued(p, l);
		siginfo_t si;
		if (sig && !l->resume_sig &&
		    (sig != SIGTRAP ||
		     (ptrace(PTRACE_GETSIGINFO, l->tid, 0, &si) == 0 && si.si_code != SI_KERNEL)))
			l->resume_sig = sig;
	}
	int r = flush_regs(l);
	if (r == 0 && ptrace(PTRACE_DETACH, l->tid, 0, (long)l->resume_sig) < 0)
		r = lwp_gone_or_err(l, "PTRACE_DETACH");
	l->resume_sig = 0;
	l->state = PTW_LWP_GONE;
	return r;
}

bool ptw_reap_launched(pid_t pid, int *ret_status)
{
	return waitpid(pid, ret_status, WNOHANG) == pid;
}

bool ptw_reap_dying(pid_t pid, int *ret_status)
{
	bool reaped = false;
	int st;
	pid_t w;
	while ((w = waitpid(-1, &st, __WALL | WNOHANG)) > 0) {
		if (w == pid && !WIFSTOPPED(st)) {
			reaped = true;
			*ret_status = st;
		}
		/* A thread of pid still ours, stopped (its exit event: it was
		 * past our reach as we let go): let go of it now, with the
		 * signal of a signal-delivery stop, or it and its process wait
		 * for us there until we exit. */
		if (WIFSTOPPED(st) && ptw_proc_state(pid, w))
			ptrace(PTRACE_DETACH, w, 0,
			       (void *)(uintptr_t)(st >> 16 ? 0 : WSTOPSIG(st)));
	}
	return reaped;
}

/* ---- attach ---- */

/* TracerPid of a thread, 0 if none or unknown. */
static pid_t tracer_of(pid_t tid)
{
	long tracer = ptw_proc_status_field(tid, "TracerPid");
	return tracer > 0 ? (pid_t)tracer : 0;
}

static int seize_into(struct ptw_proc *root, struct ptw_proc *given, pid_t pid,
		      ptw_seize_skip_fn skip, void *ctx, struct ptw_proc **ret_proc,
		      struct ptw_seize_info *ret_info);

int ptw_seize(pid_t pid, struct ptw_proc **ret_proc, struct ptw_seize_info *ret_info)
{
	return seize_into(NULL, NULL, pid, NULL, NULL, ret_proc, ret_info);
}

struct ptw_proc *ptw_proc_open(pid_t pid)
{
	struct ptw_proc *p = att_proc_new(pid);
	if (ptw_proc_state(pid, pid) == 'Z') /* a zombie main thread has no memory */
		att_repick_mem_pid(p);
	return p;
}

int ptw_seize_some(struct ptw_proc *p, ptw_seize_skip_fn skip, void *ctx,
		   struct ptw_seize_info *ret_info)
{
	struct ptw_proc *same;
	return seize_into(NULL, p, p->pid, skip, ctx, &same, ret_info);
}

int ptw_seize_follow(struct ptw_proc *root, pid_t pid, struct ptw_proc **ret_proc,
		     struct ptw_seize_info *ret_info)
{
	root = ptw_proc_root(root);
	if (ptw_map_get(&root->procs, (uint64_t)pid))
		return -EEXIST;
	return seize_into(root, NULL, pid, NULL, NULL, ret_proc, ret_info);
}

static void keep_signal(void *ctx, struct ptw_stop *st)
{
	(void)ctx;
	if (st->kind == PTW_STOP_SIGNAL)
		st->lwp->resume_sig = st->sig; /* theirs: delivered at the detach */
}

/* A followed process whose seizing failed: let go of the threads seized
 * (running: stop each, then detach), then of the view. */
static void unseize(struct ptw_proc *p)
{
	if (p->root) {
		ptw_stop_all(p, 1000, keep_signal, NULL);
		size_t it = 0;
		void *v;
		struct ptw_lwp **mine = NULL;
		size_t n = 0;
		while (ptw_map_next(p->lwps, &it, NULL, &v)) {
			struct ptw_lwp *l = v;
			if (l->tgid != p->pid)
				continue;
			mine = xreallocarray(mine, n + 1, sizeof(*mine));
			mine[n++] = l;
		}
		for (size_t i = 0; i < n; i++) {
			if (mine[i]->state == PTW_LWP_STOPPED)
				ptw_detach_lwp(p, mine[i]);
			ptw_lwp_forget(p, mine[i]);
		}
		free(mine);
	}
	ptw_proc_free(p);
}

static int seize_into(struct ptw_proc *root, struct ptw_proc *given, pid_t pid,
		      ptw_seize_skip_fn skip, void *ctx, struct ptw_proc **ret_proc,
		      struct ptw_seize_info *ret_info)
{
	unsigned options = PTRACE_O_TRACECLONE | PTRACE_O_TRACEFORK | PTRACE_O_TRACEVFORK |
			   PTRACE_O_TRACEEXEC | PTRACE_O_TRACEEXIT | PTRACE_O_TRACESYSGOOD;
	struct ptw_seize_info info = { 0 };
	struct ptw_proc *p = given;
	if (p)
		p->options = options;
	int first_error = 0;
	bool found_new = true;

	while (found_new) {
		found_new = false;
		pid_t *tids;
		int ntids = ptw_proc_tids(pid, &tids);
		if (ntids < 0) {
			if (p && info.threads)
				break; /* it exited under us; the caller will see */
			if (p && p != given)
				unseize(p);
			return ntids == -ENOENT ? -ESRCH : ntids;
		}
		info.passes++;
		for (int i = 0; i < ntids; i++) {
			pid_t tid = tids[i];
			if (!p) {
				if (root) {
					p = proc_child(root, pid);
					ptw_map_put(&root->procs, (uint64_t)pid, p);
				} else {
					p = att_proc_new(pid);
				}
				p->options = options;
			}
			struct ptw_lwp *l = ptw_lwp_get(p, tid);
			if (l && l->state != PTW_LWP_GONE)
				continue;
			if (tid == pid && info.zombie_leader)
				continue;
			if (skip && skip(ctx, tid)) {
				info.skipped = true;
				continue;
			}
			if (ptrace(PTRACE_SEIZE, tid, 0, (long)options) < 0) {
				if (errno == ESRCH)
					continue; /* exited meanwhile */
				int e = errno;
				if (e == EPERM && tracer_of(tid) == getpid()) {
					/* Already ours: born to a thread we seized
					 * (TRACECLONE) since this pass began. What it
					 * creates is ours too: no pass more for it (a
					 * process that creates threads without a pause
					 * would keep us passing for ever). */
					att_lwp_add(p, tid, pid);
					info.threads++;
					continue;
				}
				if (e == EPERM && ptw_proc_exited(pid, tid)) {
					/* Exited already (PTRACE_SEIZE says EPERM once
					 * exit_state is set). The main thread may have
					 * exited alone (pthread_exit): its workers live
					 * on and can be traced. */
					if (tid == pid)
						info.zombie_leader = true;
					continue;
				}
				if (!first_error && !ptw_proc_exited(pid, tid))
					first_error = e == EPERM && tracer_of(tid) > 0 ? EBUSY : e;
				continue;
			}
			att_lwp_add(p, tid, pid);
			info.threads++;
			found_new = true;
		}
		free(tids);
	}
	if (!p || !(info.threads || info.skipped) || first_error) {
		/* A live thread we could not seize would die of SIGTRAP at the
		 * first int3 it reached: all or nothing. (The seized ones are
		 * running; the kernel lets them go when ptwatch exits, or,
		 * for a followed process, we do now.) */
		if (p && p != given) /* given: its owner lets go of what we seized */
			unseize(p);
		return first_error ? -first_error : -ESRCH;
	}
	if (info.zombie_leader || !(ptw_lwp_get(p, pid) || (skip && skip(ctx, pid))))
		att_repick_mem_pid(p);
	else
		att_reopen_mem(p);
	if (ret_info)
		*ret_info = info;
	*ret_proc = p;
	return 0;
}

/* ---- stopping a few ---- */

int ptw_stop_lwps(struct ptw_proc *p, struct ptw_lwp *const *lwps, size_t n, int deadline_ms,
		  bool *ret_held)
{
	bool *pending = xcalloc(n + 1, sizeof(*pending));
	int clean = 0;
	for (size_t i = 0; i < n; i++) {
		struct ptw_lwp *l = lwps[i];
		ret_held[i] = false;
		if (l->state == PTW_LWP_STOPPED)
			clean++; /* already ours to look at */
		else if (l->state == PTW_LWP_RUNNING && !l->exiting && !l->unstoppable &&
			 (l->interrupt_sent || ptw_interrupt(p, l) == 0))
			pending[i] = true;
	}
	uint64_t deadline = ptw_now_ns() + (uint64_t)deadline_ms * 1000000u;
	for (;;) {
		bool left = false, progress = false;
		for (size_t i = 0; i < n; i++) {
			if (!pending[i])
				continue;
			struct ptw_stop st;
			int r = reap_one(p, lwps[i]->tid, &st);
			if (r == 0) {
				left = true;
				continue;
			}
			pending[i] = false;
			progress = true;
			if (r < 0)
				continue;
			if (st.kind == PTW_STOP_INTERRUPT) {
				ret_held[i] = true;
				clean++;
			} else {
				/* Something that means something (a trap, a signal, an
				 * exit): the tracer's loop gets it, and the LWP stays
				 * stopped until then. */
				defer(p, &st);
			}
		}
		if (!left)
			break;
		if (progress)
			continue;
		if (ptw_now_ns() >= deadline)
			break; /* their interrupt stops come to ptw_wait() later */
		struct pollfd pfd = { .fd = p->sigfd, .events = POLLIN };
		if (poll(&pfd, 1, 1) > 0)
			drain_sigfd(p);
	}
	free(pending);
	return clean;
}

/* ---- stop-all ---- */

static bool lwp_needs_stop(const struct ptw_lwp *l)
{
	return l->state == PTW_LWP_RUNNING && !l->exiting && !l->unstoppable;
}

static void list_tid(pid_t **list, size_t *n, size_t *cap, pid_t tid)
{
	if (*n == *cap) {
		*cap = *cap ? *cap * 2 : 64;
		*list = xreallocarray(*list, *cap, sizeof(**list));
	}
	(*list)[(*n)++] = tid;
}

/* Interrupts every LWP that needs it and lists its tid in *list. */
static void interrupt_running(struct ptw_proc *p, pid_t **list, size_t *n, size_t *cap)
{
	size_t it = 0;
	void *v;
	while (ptw_map_next(p->lwps, &it, NULL, &v)) {
		struct ptw_lwp *l = v;
		if (!lwp_needs_stop(l) || (p->root && l->tgid != p->pid))
			continue;
		if (!l->interrupt_sent)
			ptw_interrupt(p, l);
		list_tid(list, n, cap, l->tid);
	}
}

int ptw_stop_all(struct ptw_proc *p, int deadline_ms, ptw_stop_cb on_stop, void *ctx)
{
	/*
	 * Wait for each interrupted LWP by its tid: with 10,000 tracees every
	 * waitpid(-1) walks the kernel's list of them (O(n) per call, O(n^2)
	 * to stop them all), while waiting for one pid is a direct lookup.
	 * LWPs that appear meanwhile (clone events) join the list. It holds
	 * tids, looked up again each time: on_stop may forget an LWP (gone).
	 */
	pid_t *list = NULL;
	size_t n = 0, cap = 0;
	struct ptw_proc *root = ptw_proc_root(p);
	interrupt_running(p, &list, &n, &cap);
	/* Statuses reaped before this call are still owed to the caller (a
	 * followed process's only: the others stay queued at the root). */
	for (size_t i = 0; i < root->ndeferred;) {
		struct ptw_stop d;
		if (p->root && root->deferred[i].lwp->tgid != p->pid) {
			i++;
			continue;
		}
		deferred_remove(root, i, &d);
		on_stop(ctx, &d); /* (may defer or drop records: look again at i) */
	}

	uint64_t deadline = ptw_now_ns() + (uint64_t)deadline_ms * 1000000u;
	int left = 0;
	for (;;) {
		bool progress = false;
		size_t keep = 0;
		for (size_t i = 0; i < n; i++) {
			pid_t tid = list[i];
			struct ptw_lwp *l = ptw_lwp_get(p, tid);
			struct ptw_stop st;
			int r = l && lwp_needs_stop(l) ? reap_one(p, tid, &st) : 0;
			if (r > 0) {
				progress = true;
				on_stop(ctx, &st); /* (l may be freed now) */
				if ((st.kind == PTW_STOP_CLONE || st.kind == PTW_STOP_FORK ||
				     st.kind == PTW_STOP_VFORK) && st.msg) {
					struct ptw_lwp *child = ptw_lwp_get(p, (pid_t)st.msg);
					if (child && lwp_needs_stop(child) && !child->interrupt_sent) {
						ptw_interrupt(p, child);
						list_tid(&list, &n, &cap, child->tid);
					}
				}
			} else if (r < 0 && r != -ECHILD) {
				lwp_gone_or_err(l, "waitpid");
			}
			l = ptw_lwp_get(p, tid);
			if (l && lwp_needs_stop(l))
				list[keep++] = tid;
		}
		n = keep;
		if (!n) {
			/* Anything we did not know about (a first stop that beat its
			 * parent's clone event) is caught by a final sweep. */
			interrupt_running(p, &list, &n, &cap);
			if (!n)
				break;
			continue;
		}
		if (progress)
			continue;
		uint64_t now = ptw_now_ns();
		if (now >= deadline) {
			left = (int)n;
			for (size_t i = 0; i < n; i++) {
				struct ptw_lwp *l = ptw_lwp_get(p, list[i]);
				if (l)
					l->unstoppable = true;
			}
			break;
		}
		struct pollfd pfd = { .fd = root->sigfd, .events = POLLIN };
		if (poll(&pfd, 1, 1) > 0)
			drain_sigfd(root); /* queued for ptw_wait() */
	}
	free(list);
	return left;
}

/* ---- syscall injection ---- */

bool ptw_lwp_injectable(const struct ptw_lwp *l)
{
	/* A signal waiting to be delivered would be lost: resuming from its
	 * stop with PTRACE_SYSCALL and no signal discards it, and ptrace only
	 * promises to inject one from a signal-delivery-stop. A thread in a
	 * group-stop would run while its process is stopped (it left the
	 * group-stop and will not re-enter it). */
	if (!l || l->state != PTW_LWP_STOPPED || l->exiting || l->resume_sig || l->group_stopped ||
	    l->queued)
		return false;
	switch (l->last_stop) {
	case PTW_STOP_SIGNAL:
	case PTW_STOP_NEW:
	case PTW_STOP_INTERRUPT:
	case PTW_STOP_SYSCALL: /* only ever our own injection's exit stop */
		return true;
	default:
		return false;
	}
}

int ptw_inject_syscall(struct ptw_proc *p, struct ptw_lwp *l, uint64_t syscall_insn, long nr,
		       const uint64_t args[6], int64_t *ret_value)
{
	if (!ptw_lwp_injectable(l))
		return -EAGAIN;
	struct user_regs_struct *cur;
	int r = ptw_getregs(p, l, &cur);
	if (r < 0)
		return r;
	struct user_regs_struct saved = *cur;
	int saved_sig = l->resume_sig;
	/*
	 * Stopped inside a system call the kernel means to restart (PTRACE_
	 * INTERRUPT on a futex wait, say): that restart happens on the way out
	 * of *this* stop, which the injected call replaces. Restart it by hand
	 * when we put the registers back, as the kernel would have done with
	 * no signal to deliver (a thread with one is not injectable).
	 */
	struct user_regs_struct restarted = saved;
	bool restart = ptw_syscall_restart(&restarted);
	siginfo_t *stray = NULL;
	size_t nstray = 0;

	struct user_regs_struct regs = saved;
	regs.rip = syscall_insn;
	regs.rax = (unsigned long long)nr;
	/* orig_rax = -1: the kernel must not "restart" whatever syscall the
	 * thread was stopped in when we return to user mode. */
	regs.orig_rax = (unsigned long long)-1;
	regs.rdi = args[0];
	regs.rsi = args[1];
	regs.rdx = args[2];
	regs.r10 = args[3];
	regs.r8 = args[4];
	regs.r9 = args[5];
	l->regs = regs;
	l->regs_dirty = true;
	l->resume_sig = 0;
	l->group_stopped = false;

	int phase = 0; /* 0: want syscall entry, 1: want syscall exit */
	while (phase < 2) {
		r = ptw_resume_syscall(p, l);
		if (r < 0)
			break;
		/* Any tracee, not l alone: if the process dies meanwhile, its main
		 * thread (l, often) is not reported before every other thread
		 * is reaped, and those are ours to reap. Theirs are kept for
		 * the caller. */
		int status;
		pid_t t;
		struct ptw_stop st;
		for (;;) {
			t = waitpid(-1, &status, __WALL);
			if (t < 0 && errno == EINTR)
				continue;
			if (t <= 0 || t == l->tid)
				break;
			struct ptw_stop other;
			att_record_status(p, t, status, &other);
			defer(p, &other);
		}
		if (t < 0) {
			r = -errno;
			break;
		}
		att_record_status(p, l->tid, status, &st);
		if (st.kind == PTW_STOP_SYSCALL) {
			phase++;
			continue;
		}
		if (st.kind == PTW_STOP_SIGNAL) {
			/* A signal arrived meanwhile: hold it (all of it), queue it
			 * again after. */
			stray = xreallocarray(stray, nstray + 1, sizeof(*stray));
			memset(&stray[nstray], 0, sizeof(stray[nstray]));
			if (ptw_getsiginfo(p, l, &stray[nstray]) < 0)
				stray[nstray].si_signo = st.sig;
			nstray++;
			continue;
		}
		if (st.kind == PTW_STOP_GROUP)
			continue; /* the group stopped meanwhile: it stops again after */
		if (st.kind == PTW_STOP_NEW || st.kind == PTW_STOP_INTERRUPT)
			continue;
		/* Exit, exec, kill: the thread is leaving. Hand the status back. */
		defer(p, &st);
		r = -ESRCH;
		break;
	}
	if (r == 0) {
		struct user_regs_struct *after;
		r = ptw_getregs(p, l, &after);
		if (r == 0)
			*ret_value = (int64_t)after->rax;
	}
	if (l->state == PTW_LWP_STOPPED) {
		l->regs = restart ? restarted : saved;
		l->regs_valid = true;
		l->regs_dirty = true;
		l->resume_sig = saved_sig;
		/* Not in a group-stop now whatever happened meanwhile (LISTEN only
		 * works there): a group-stop that began meanwhile catches it
		 * again when it is continued. */
		l->group_stopped = false;
		/*
		 * Delivered exactly once, to the same thread. A signal with a
		 * negative si_code other than SI_TKILL (sigqueue, timers, mq)
		 * is queued again with its siginfo intact, value included;
		 * the kernel refuses that for SI_TKILL and codes >= 0, which
		 * go again by tgkill (their si_pid is then ptwatch's).
		 */
		for (size_t i = 0; i < nstray; i++) {
			siginfo_t *si = &stray[i];
			if (si->si_code < 0 && si->si_code != SI_TKILL &&
			    syscall(SYS_rt_tgsigqueueinfo, l->tgid, l->tid, si->si_signo, si) == 0)
				continue;
			syscall(SYS_tgkill, l->tgid, l->tid, si->si_signo);
		}
	}
	free(stray);
	return r;
}

void ptw_proc_free(struct ptw_proc *p)
{
	if (!p)
		return;
	if (p->root) {
		ptw_map_del(&p->root->procs, (uint64_t)p->pid);
	} else {
		size_t it = 0;
		void *v;
		while (ptw_map_next(p->lwps, &it, NULL, &v))
			free(v);
		ptw_map_free(p->lwps);
		ptw_map_free(&p->procs);
	}
	if (p->mem_fd >= 0)
		close(p->mem_fd);
	free(p->deferred);
	free(p->cache);
	free(p);
}
