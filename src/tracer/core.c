/* SPDX-License-Identifier: MIT */
/*
 * The tracer's core: what every other file of the tracer uses (the
 * dispatcher, the features, attaching, following, letting go). It calls
 * none of them, and the features only through t->features: the files
 * above it call down into it, never back up (no cycle).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "tracer_internal.h"

/* What the document says of process c (-f), now. */
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

void tracer_say_process(struct ptw_tracer *t)
{
	if (!t->o.follow_forks)
		return;
	struct ptw_process p;
	fill_process(t, &p);
	struct ptw_event ev = ptw_event_init(PTW_EV_PROCESS, ptw_now_ns(), t->pid);
	ev.proc = &p;
	tracer_emit(t, &ev);
}

void tracer_emit(struct ptw_tracer *t, struct ptw_event *ev)
{
	if (!ev->pid)
		ev->pid = t->proc ? t->proc->pid : t->pid;
	ev->process = t->serial;
	t->o.sink(t->o.sink_ctx, ev);
	/* -f: a process began (its image, a fork child's leader), exec'd or
	 * ended: the session keeps what the document says of it */
	if (ev->kind == PTW_EV_IMAGE || ev->kind == PTW_EV_EXEC ||
	    ev->kind == PTW_EV_PROCESS_EXIT || (ev->kind == PTW_EV_PREEXISTING && ev->tid == ev->pid))
		tracer_say_process(t);
}

/* Said to the session as an event: it merges and counts them, and names
 * a followed process's (ev.process). */
void tracer_warn(struct ptw_tracer *t, enum ptw_warning_code w, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	char *msg;
	if (vasprintf(&msg, fmt, ap) < 0)
		msg = NULL;
	va_end(ap);
	if (!msg)
		return;
	struct ptw_event ev = ptw_event_init(PTW_EV_WARNING, ptw_now_ns(), t->pid);
	ev.warning = w;
	ev.name = msg;
	tracer_emit(t, &ev);
	free(msg);
}

struct thread *tracer_thread_of(struct ptw_lwp *l)
{
	if (!l->user) {
		struct thread *th = xcalloc(1, sizeof(*th));
		th->attr_detached = -1;
		l->user = th;
	}
	return l->user;
}

void tracer_thread_free(struct thread *th)
{
	if (!th)
		return;
	for (int id = 0; id < FEATURES; id++)
		if (th->fdata[id])
			th->fdata[id]->free(th->fdata[id]);
	free(th);
}

struct feature_thread *tracer_feature_thread(struct ptw_lwp *l, enum feature_id id, size_t size,
					    void (*free_fn)(struct feature_thread *ft))
{
	struct thread *th = tracer_thread_of(l);
	if (!th->fdata[id]) {
		th->fdata[id] = xcalloc(1, size);
		th->fdata[id]->free = free_fn;
	}
	return th->fdata[id];
}

struct feature_thread *tracer_feature_peek(struct ptw_lwp *l, enum feature_id id)
{
	struct thread *th = l->user;
	return th ? th->fdata[id] : NULL;
}

void tracer_thread_renew(struct ptw_tracer *t, struct thread *th)
{
	for (size_t i = 0; i < t->nfeatures; i++)
		if (t->features[i]->thread_gone)
			t->features[i]->thread_gone(t, th);
	for (int id = 0; id < FEATURES; id++)
		if (th->fdata[id])
			th->fdata[id]->free(th->fdata[id]);
	memset(th, 0, sizeof(*th));
	th->attr_detached = -1;
}

/* ---- the features' moments ---- */

void tracer_features_prepare(struct ptw_tracer *t)
{
	for (size_t i = 0; i < t->nfeatures; i++)
		if (t->features[i]->prepare)
			t->features[i]->prepare(t);
}

void tracer_features_under_way(struct ptw_tracer *t, struct ptw_lwp *l)
{
	for (size_t i = 0; i < t->nfeatures; i++)
		if (t->features[i]->under_way)
			t->features[i]->under_way(t, l);
}

void tracer_image_ready(struct ptw_tracer *t, struct ptw_lwp *l)
{
	for (size_t i = 0; i < t->nfeatures; i++)
		if (t->features[i]->image_ready)
			t->features[i]->image_ready(t, l);
}

void tracer_libc_ready(struct ptw_tracer *t, struct ptw_lwp *l)
{
	for (size_t i = 0; i < t->nfeatures; i++)
		if (t->features[i]->libc_ready)
			t->features[i]->libc_ready(t, l);
}

void tracer_signal_delivery(struct ptw_tracer *t, struct ptw_lwp *l, int sig, uint64_t ns)
{
	for (size_t i = 0; i < t->nfeatures; i++)
		if (t->features[i]->signal_delivery)
			t->features[i]->signal_delivery(t, l, sig, ns);
}

unsigned tracer_hooks_beside(struct ptw_tracer *t, unsigned hooks)
{
	unsigned more = 0;
	for (size_t i = 0; i < t->nfeatures; i++)
		if (t->features[i]->hooks_beside)
			more |= t->features[i]->hooks_beside(t, hooks);
	return more;
}

void tracer_image_reset(struct ptw_tracer *t)
{
	for (size_t i = 0; i < t->nfeatures; i++)
		if (t->features[i]->image_reset)
			t->features[i]->image_reset(t);
}

void tracer_features_finish(struct ptw_tracer *t)
{
	for (size_t i = 0; i < t->nfeatures; i++)
		if (t->features[i]->finish)
			t->features[i]->finish(t);
}

void tracer_features_free(struct ptw_tracer *t)
{
	/* Its threads' state goes with it: another process's tracer (-f: the
	 * root's, which takes over the LWPs let go) must never see it. */
	size_t it = 0;
	void *v;
	while (t->proc && ptw_map_next(t->proc->lwps, &it, NULL, &v)) {
		struct ptw_lwp *l = v;
		struct thread *th = l->user;
		for (int id = 0; th && l->tgid == t->pid && id < FEATURES; id++)
			if (th->fdata[id]) {
				th->fdata[id]->free(th->fdata[id]);
				th->fdata[id] = NULL;
			}
	}
	for (size_t i = t->nfeatures; i-- > 0;)
		if (t->features[i]->free)
			t->features[i]->free(t);
	t->nfeatures = 0;
}

void tracer_forget_lwp(struct ptw_tracer *t, struct ptw_lwp *l)
{
	struct thread *th = l->user;
	for (size_t i = 0; th && i < t->nfeatures; i++)
		if (t->features[i]->thread_gone)
			t->features[i]->thread_gone(t, th);
	tracer_thread_free(th);
	l->user = NULL;
	ptw_lwp_forget(t->proc, l);
}

size_t tracer_tids_where(struct ptw_tracer *t, bool (*keep)(struct ptw_tracer *, struct ptw_lwp *),
			 pid_t **ret)
{
	size_t it = 0, n = 0;
	void *v;
	pid_t *tids = xcalloc(t->proc->lwps->count + 1, sizeof(*tids));
	while (ptw_map_next(t->proc->lwps, &it, NULL, &v))
		if (keep(t, v))
			tids[n++] = ((struct ptw_lwp *)v)->tid;
	*ret = tids;
	return n;
}

bool tracer_is_target_lwp(struct ptw_tracer *t, struct ptw_lwp *l)
{
	return l->tgid == t->proc->pid && !tracer_thread_of(l)->foreign;
}

const struct ptw_location *tracer_locate(struct ptw_tracer *t, uint64_t addr)
{
	return addr && t->img.syms ? ptw_symbols_locate(t->img.syms, addr) : NULL;
}

int tracer_read_u64(struct ptw_tracer *t, uint64_t addr, uint64_t *ret)
{
	return ptw_mem_read(t->proc, addr, ret, sizeof(*ret));
}

int tracer_read_code(void *ctx, uint64_t addr, void *buf, size_t len)
{
	struct ptw_tracer *t = ctx;
	return ptw_bp_read_original(t->bps, addr, buf, len);
}

uint64_t tracer_return_slot(struct ptw_tracer *t, const uint64_t *pcs, const uint64_t *sps, int i)
{
	uint64_t at;
	if (!sps[i + 1] || tracer_read_u64(t, sps[i + 1] - 8, &at) < 0 || at != pcs[i + 1])
		return 0;
	return sps[i + 1] - 8;
}

/*
 * An LWP stopped inside a system call (clone, exec and exit event stops)
 * cannot run an injected one: interrupt it and let that call finish first.
 * One extra stop, only when an out-of-line page must be mapped.
 */
int tracer_make_injectable(struct ptw_tracer *t, struct ptw_lwp *l)
{
	if (l->group_stopped)
		return -EAGAIN; /* it must not run while its process is stopped */
	if (l->queued)
		return -EAGAIN; /* its own stop is still to be handled */
	int r = ptw_interrupt(t->proc, l);
	if (r == 0)
		r = ptw_resume(t->proc, l);
	while (r == 0) {
		struct ptw_stop st;
		r = ptw_wait_tid(t->proc, l, &st);
		if (r < 0)
			break;
		if (st.kind == PTW_STOP_INTERRUPT || st.kind == PTW_STOP_NEW)
			return 0;
		if (st.kind == PTW_STOP_SIGNAL) {
			/* Keep the signal for later; this stop will do (and the
			 * interrupt stays pending: one more harmless stop). */
			l->resume_sig = st.sig;
			return 0;
		}
		if (st.kind == PTW_STOP_EXITED || st.kind == PTW_STOP_KILLED ||
		    st.kind == PTW_STOP_EXIT)
			return -ESRCH;
		if (st.kind == PTW_STOP_GROUP)
			return -EAGAIN; /* stopped now; it stays so until SIGCONT */
		r = ptw_resume(t->proc, l);
	}
	return r;
}

bool tracer_take_first_stop(struct ptw_tracer *t, struct ptw_lwp *cl)
{
	if (cl->state != PTW_LWP_STOPPED || cl->last_stop != PTW_STOP_NEW)
		return false;
	struct ptw_stop st;
	ptw_take_queued(t->proc, cl, &st);
	return true;
}

/* Another tool's int3 at addr (ptw_bp_insert: 1, moved beside it; -EBUSY,
 * not): said once per address. */
static void foreign_breakpoint(struct ptw_tracer *t, uint64_t addr, const struct ptw_bp *moved)
{
	if (ptw_map_get(&t->foreign_said, addr))
		return;
	ptw_map_put(&t->foreign_said, addr, (void *)1);
	const struct ptw_location *at = tracer_locate(t, addr);
	char where[512];
	if (at && at->symbol)
		snprintf(where, sizeof(where), "%s%s%s (%#llx)", at->symbol,
			 at->module ? " in " : "", at->module ? at->module : "",
			 (unsigned long long)addr);
	else
		snprintf(where, sizeof(where), "%#llx", (unsigned long long)addr);
	if (moved)
		tracer_warn(t, PTW_W_FOREIGN_BREAKPOINT,
			    "another tool's breakpoint is at %s (an int3 its file does not have: most "
			    "likely a kernel uprobe, bpftrace's, perf's or a profiler's, or a "
			    "debugger's): ptwatch's hook there moved to the next instruction "
			    "(+%llu), which sees the same call",
			    where, (unsigned long long)(moved->addr - addr));
	else
		tracer_warn(t, PTW_W_FOREIGN_BREAKPOINT,
			    "another tool's breakpoint is at %s (an int3 its file does not have: most "
			    "likely a kernel uprobe, bpftrace's, perf's or a profiler's, or a "
			    "debugger's), and its first instruction cannot be stepped past: "
			    "ptwatch does not hook that instruction",
			    where);
}

/* An int3 at addr that is not ptwatch's (a hook moved past it). */
static bool foreign_int3(struct ptw_tracer *t, uint64_t addr)
{
	uint8_t b = 0;
	return !ptw_bp_find(t->bps, addr) && ptw_mem_read(t->proc, addr, &b, 1) == 0 && b == 0xcc;
}

static int insert_bp(struct ptw_tracer *t, uint64_t addr, unsigned hooks, struct ptw_lwp *host,
		     bool entry)
{
	struct ptw_bp *bp = NULL;
	/* libc's thread functions are hooked past their first instruction:
	 * where the kernel keeps a uprobe at an entry (another tool's, or one
	 * it never let go of), it takes a debugger's int3 there in any
	 * process that has uprobes (ptw_bp_insert_past_entry), and nothing
	 * says whether this one has. */
	int (*insert)(struct ptw_bptab *, uint64_t, unsigned, struct ptw_lwp *, struct ptw_bp **) =
		entry ? ptw_bp_insert_past_entry : ptw_bp_insert;
	int r = insert(t->bps, addr, hooks, host, &bp);
	if (r == -EAGAIN && host && tracer_make_injectable(t, host) == 0)
		r = insert(t->bps, addr, hooks, host, &bp);
	if ((r == 1 && foreign_int3(t, addr)) || r == -EBUSY)
		foreign_breakpoint(t, addr, r == 1 ? bp : NULL);
	return r == 1 ? 0 : r;
}

int tracer_insert_bp(struct ptw_tracer *t, uint64_t addr, unsigned hooks, struct ptw_lwp *host)
{
	return insert_bp(t, addr, hooks, host, false);
}

int tracer_insert_entry_bp(struct ptw_tracer *t, uint64_t addr, unsigned hooks,
			   struct ptw_lwp *host)
{
	return insert_bp(t, addr, hooks, host, true);
}

struct ptw_lwp *tracer_injection_host(struct ptw_tracer *t)
{
	struct ptw_lwp *main_lwp = ptw_lwp_get(t->proc, t->proc->pid), *any = NULL;
	if (main_lwp && tracer_is_target_lwp(t, main_lwp) && ptw_lwp_injectable(main_lwp))
		return main_lwp;
	size_t it = 0;
	void *v;
	while (ptw_map_next(t->proc->lwps, &it, NULL, &v)) {
		struct ptw_lwp *l = v;
		if (!tracer_is_target_lwp(t, l) || l->state != PTW_LWP_STOPPED)
			continue;
		if (ptw_lwp_injectable(l))
			return l;
		/* leaving (exit, exec): it cannot be made to run our call */
		if (!any && l->last_stop != PTW_STOP_EXIT && l->last_stop != PTW_STOP_EXEC)
			any = l;
	}
	return any;
}

char *tracer_comm_str(struct ptw_tracer *t, pid_t tid)
{
	if (t->img.task_dirfd < 0)
		return NULL;
	char path[32], buf[64];
	snprintf(path, sizeof(path), "%d/comm", tid);
	int fd = openat(t->img.task_dirfd, path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return NULL;
	ssize_t n = read(fd, buf, sizeof(buf) - 1);
	close(fd);
	if (n <= 0)
		return NULL;
	buf[n] = '\0';
	ptw_chomp(buf); /* the file's newline; the name's own stay */
	return xstrdup(buf);
}

void tracer_read_comm(struct ptw_tracer *t, pid_t tid, uint64_t ns)
{
	char *name = tracer_comm_str(t, tid);
	if (!name)
		return;
	struct ptw_event ev = ptw_event_init(PTW_EV_THREAD_NAME, ns, tid);
	ev.name = name;
	tracer_emit(t, &ev);
	free(name);
}

void tracer_read_end(struct ptw_tracer *t, pid_t tid, uint64_t ns)
{
	struct ptw_event ev = ptw_event_init(PTW_EV_THREAD_CPU, ns, tid);
	char name[64];
	if (ptw_proc_thread_cpu(t->img.task_dirfd, t->proc->pid, tid, &ev.cpu, name,
				sizeof(name)) < 0) {
		tracer_read_comm(t, tid, ns);
		return;
	}
	struct ptw_event nev = ptw_event_init(PTW_EV_THREAD_NAME, ns, tid);
	nev.name = name;
	tracer_emit(t, &nev);
	tracer_emit(t, &ev);
}

/* ---- return breakpoints ---- */

int tracer_retbp_get(struct ptw_tracer *t, struct retbps *rb, struct ptw_lwp *l, uint64_t ret,
	      unsigned hook)
{
	uintptr_t n = (uintptr_t)ptw_map_get(&rb->refs, ret);
	if (n) {
		ptw_map_put(&rb->refs, ret, (void *)(n + 1));
		return 0;
	}
	uintptr_t c = (uintptr_t)ptw_map_get(&rb->checked, ret);
	if (!c) {
		uint8_t before[8];
		c = ret > 8 && ptw_bp_read_original(t->bps, ret - 8, before, 8) == 0 &&
				    ptw_insn_call_length(before, ret) > 0
			    ? 1
			    : 2;
		ptw_map_put(&rb->checked, ret, (void *)c);
	}
	if (c != 1)
		return -EINVAL;
	int r = tracer_insert_bp(t, ret, hook, l);
	if (r < 0)
		return r;
	ptw_map_put(&rb->refs, ret, (void *)1);
	return 0;
}

void tracer_retbp_allow(struct retbps *rb, uint64_t ret)
{
	ptw_map_put(&rb->checked, ret, (void *)1);
}

void tracer_retbp_put(struct ptw_tracer *t, struct retbps *rb, uint64_t ret, unsigned hook)
{
	uintptr_t n = ret ? (uintptr_t)ptw_map_get(&rb->refs, ret) : 0;
	if (!n)
		return; /* forgotten (exec, an unloaded library): never touch it */
	if (n > 1) {
		ptw_map_put(&rb->refs, ret, (void *)(n - 1));
		return;
	}
	ptw_map_del(&rb->refs, ret);
	struct ptw_bp *bp = ptw_bp_find(t->bps, ret);
	if (bp)
		ptw_bp_remove_hooks(t->bps, bp, hook);
}

void tracer_retbps_free(struct retbps *rb)
{
	ptw_map_free(&rb->refs);
	ptw_map_free(&rb->checked);
}

/* ---- what the dispatcher and letting go share ---- */


struct ptw_tracer *tracer_root(struct ptw_tracer *t)
{
	return t->root ? t->root : t;
}

void tracer_note_sigtrap(struct ptw_tracer *t, struct ptw_lwp *l)
{
	siginfo_t si;
	struct user_regs_struct *regs;
	if (ptw_getsiginfo(t->proc, l, &si) < 0 || ptw_getregs(t->proc, l, &regs) < 0)
		return;
	t->trap.seen = true;
	t->trap.tid = l->tid;
	t->trap.int3 = si.si_code == SI_KERNEL;
	/* An int3 leaves rip after it; another trap (a single step, a
	 * hardware breakpoint, raise()) where it happened. */
	t->trap.addr = t->trap.int3 ? regs->rip - 1 : regs->rip;
	/* (right after a byte of ours, whatever its siginfo says: a trap of
	 * ours that went astray) */
	t->trap.patched = t->bps && (ptw_bp_find(t->bps, t->trap.addr) ||
				     ptw_bp_find(t->bps, regs->rip - 1));
	if (t->trap.patched)
		t->trap.addr = regs->rip - 1;
}

void tracer_sigtrap_death(struct ptw_tracer *t)
{
	struct ptw_tracer *root = tracer_root(t);
	if (!t->trap.seen) {
		tracer_warn(root, PTW_W_SIGTRAP_DEATH,
			    "process %d died of SIGTRAP, which ptwatch did not see delivered to "
			    "it (sent to it as it ended)",
			    t->pid);
		return;
	}
	const struct ptw_location *at = tracer_locate(t, t->trap.addr);
	enum ptw_trap_verdict v = t->trap.patched ? PTW_TRAP_PATCHED
				  : t->trap.int3  ? PTW_TRAP_PROGRAM_INT3
						  : PTW_TRAP_RAISED;
	char *text = ptw_sigtrap_death_text(v, t->pid, t->trap.tid, at ? at->symbol : NULL,
					    at ? at->symbol_offset : 0, t->trap.addr);
	tracer_warn(root, PTW_W_SIGTRAP_DEATH, "%s", text);
	free(text);
}

void tracer_lwp_gone(struct ptw_tracer *t, struct ptw_lwp *l, struct ptw_stop *st)
{
	struct thread *th = tracer_thread_of(l);
	if (tracer_is_target_lwp(t, l)) {
		if (!th->exit_reported) {
			/* No exit stop: none was due (its death event turned it
			 * off), or a thread killed (another thread's exec or
			 * exit_group, SIGKILL) skips it when the kill is already
			 * pending. Then it is not its own exit, whatever its
			 * status (0 after an exec, the group's code after an
			 * exit_group): it ended with its process or image (the
			 * caller looks for the forks it may not have reported). */
			struct ptw_event ev = ptw_event_init(PTW_EV_LWP_EXIT, st->ns, l->tid);
			ev.exit_how = th->exit_stop_off ? PTW_EXIT_SELF : PTW_EXIT_GROUP;
			if (st->kind == PTW_STOP_KILLED)
				ev.exit_how = PTW_EXIT_KILLED;
			ev.exit_code = st->exit_code;
			ev.sig = st->kind == PTW_STOP_KILLED ? st->sig : 0;
			tracer_emit(t, &ev);
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
			tracer_emit(t, &ev);
			if (t->exit_signal == SIGTRAP)
				tracer_sigtrap_death(t);
		}
	}
	tracer_forget_lwp(t, l);
}

bool tracer_sig_kills(int sig)
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
struct ptw_bp *tracer_our_trap(struct ptw_tracer *t, struct ptw_lwp *l, const struct ptw_stop *st)
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

