/* SPDX-License-Identifier: MIT */
/*
 * --snapshot: record every thread (kernel state, backtrace, what it waits
 * for) and detach. Nothing is patched, and a thread asleep in the kernel is
 * not even stopped: /proc gives its system call, stack pointer and pc, its
 * stack is copied as it sleeps, and schedstat read before and after says it
 * did not run meanwhile. The others are seized and stopped for as long as
 * their registers and stacks are copied. What the kernel says about a
 * thread (state, wchan) is read before it is stopped: once we interrupt
 * it, it is in "tracing stop" and its syscall is unwound.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "ptw_libc_waits.h"
#include "ptw_regs.h"
#include "ptw_waits.h"
#include "tracer_internal.h"

#define MAX_FRAMES 48
/* Stack copied per thread: to the end of its mapping, at most this. */
#define STACK_COPY_MAX (32 * 1024)
#define STACK_COPY_MIN 4096 /* when no mapping holds the stack pointer */
/* Bytes copied around a futex word: the mutex owner and the rwlock writer
 * fields next to it. */
#define FUTEX_BEFORE 32
#define FUTEX_WINDOW 64

/* What /proc says about a thread while it still runs. */
struct kstate {
	char state;	 /* R, S, D, T, t, Z */
	char wchan[64];
	long syscall;	 /* -1: not in a syscall (or running) */
	uint64_t args[6];
	char *name;
	/*
	 * A thread asleep in the kernel (S, D) is read without being stopped:
	 * /proc/TID/syscall gives its stack pointer and pc, and schedstat,
	 * read before that and again once its stack is copied, that it did
	 * not run in between (its run count and times are the same).
	 */
	char sched[64];	 /* schedstat at the first reading; "" if none */
	uint64_t sp, pc; /* from /proc/TID/syscall; 0: unknown */
	bool still;	 /* it did not run while read: no stop needed */
	bool reread;	 /* read asleep, then found to have run: read its state again */
};

/* What /proc says of the kernel function a thread sleeps in. */
static void read_wchan(int task_fd, pid_t tid, struct kstate *k)
{
	char path[64];
	snprintf(path, sizeof(path), "%d/wchan", tid);
	if (ptw_read_small_file_at(task_fd, path, k->wchan, sizeof(k->wchan)) > 0 &&
	    !strcmp(k->wchan, "0"))
		k->wchan[0] = '\0';
}

/* /proc/TID/syscall: "202 0xADDR 0x80 ... SP PC" blocked in futex, "-1 SP
 * PC" blocked elsewhere (a page fault), or "running". */
static void read_syscall(int task_fd, pid_t tid, struct kstate *k)
{
	char path[64], buf[512];
	snprintf(path, sizeof(path), "%d/syscall", tid);
	if (ptw_read_small_file_at(task_fd, path, buf, sizeof(buf)) <= 0 || buf[0] == 'r')
		return;
	char *p = buf, *end;
	long nr = strtol(p, &end, 10);
	if (end == p)
		return;
	p = end;
	uint64_t args[6] = { 0 };
	for (int i = 0; i < 6 && nr >= 0; i++)
		args[i] = strtoull(p, &p, 16);
	uint64_t sp = strtoull(p, &p, 16), pc = strtoull(p, &end, 16);
	if (end == p)
		return; /* cut short: trust none of it */
	k->syscall = nr;
	memcpy(k->args, args, sizeof(args));
	k->sp = sp;
	k->pc = pc;
}

/* A thread's wchan and system call as /proc says (a thread we could not
 * stop: it stays where it is). */
static void read_kernel_wait(int task_fd, pid_t tid, struct kstate *k)
{
	read_wchan(task_fd, tid, k);
	read_syscall(task_fd, tid, k);
}

static struct kstate *kstate_new(void)
{
	struct kstate *k = xcalloc(1, sizeof(*k));
	k->state = '?';
	k->syscall = -1;
	return k;
}

/* schedstat (run time, wait time, times run): the same twice, the thread
 * did not run in between. */
static bool read_sched(int task_fd, pid_t tid, char *buf, size_t len)
{
	char path[64];
	snprintf(path, sizeof(path), "%d/schedstat", tid);
	return ptw_read_small_file_at(task_fd, path, buf, len) > 0;
}

/*
 * Files opened relative to /proc/PID/task (with 10,000 threads the path
 * walks are much of the cost): state and name; for a thread asleep in the
 * kernel, schedstat then its system call, stack pointer and pc (the others
 * are stopped, and their system call read from their registers); wchan
 * only for an uninterruptible sleep, where it says what the system call
 * does not.
 */
static void read_state(int task_fd, pid_t tid, struct kstate *k)
{
	char path[64], buf[512];
	k->state = '?';
	k->wchan[0] = '\0';
	/* "TID (comm) S ...": the name may hold blanks and parentheses */
	snprintf(path, sizeof(path), "%d/stat", tid);
	if (ptw_read_small_file_at(task_fd, path, buf, sizeof(buf)) > 0) {
		char *open = strchr(buf, '('), *close = strrchr(buf, ')');
		if (open && close && close > open && close[1] == ' ' && close[2]) {
			k->state = close[2];
			*close = '\0';
			free(k->name);
			k->name = xstrdup(open + 1);
		}
	}
	if (k->state == 'D')
		read_wchan(task_fd, tid, k);
}

static void read_kstate(int task_fd, pid_t tid, struct kstate *k)
{
	read_state(task_fd, tid, k);
	/* "0 0 0": no scheduler accounting in this kernel, nothing to compare */
	if ((k->state == 'S' || k->state == 'D') &&
	    read_sched(task_fd, tid, k->sched, sizeof(k->sched)) && strcmp(k->sched, "0 0 0\n"))
		read_syscall(task_fd, tid, k);
}

/* The second reading of a thread whose stack was copied while it slept:
 * still, if schedstat says it did not run since the first. */
static void recheck_kstate(int task_fd, pid_t tid, struct kstate *k)
{
	char now[sizeof(k->sched)];
	k->still = read_sched(task_fd, tid, now, sizeof(now)) && !strcmp(now, k->sched);
}

/* A thread to stop after all: what was read of its sleep is not kept, and
 * its state is read again before it is stopped (it ran since). */
static void not_still(struct kstate *k)
{
	k->reread = k->state == 'S' || k->state == 'D';
	k->still = false;
	k->sp = k->pc = 0;
	k->syscall = -1;
}

/*
 * The system call a stopped thread was in: our interrupt ended its sleep
 * with a restart code (the kernel restarts the call as it resumes), or it
 * sleeps still (S, D before we stopped it); orig_rax says which, the
 * argument registers with what.
 */
static void syscall_from_regs(const struct user_regs_struct *r, struct kstate *k)
{
	long nr = (long)r->orig_rax, ret = (long)r->rax;
	bool restarting = ret == -512 /* ERESTARTSYS */ || ret == -513 /* ERESTARTNOINTR */ ||
			  ret == -514 /* ERESTARTNOHAND */ ||
			  ret == -516 /* ERESTART_RESTARTBLOCK */;
	if (nr < 0 || !(restarting || k->state == 'S' || k->state == 'D'))
		return;
	k->syscall = nr;
	uint64_t args[6] = { r->rdi, r->rsi, r->rdx, r->r10, r->r8, r->r9 };
	memcpy(k->args, args, sizeof(args));
}

/* The kernel's view of the threads seized that the first reading did not
 * see (born since), before we stop them: once stopped, a group-stopped
 * thread shows as "tracing stop" instead of "stopped". */
static void read_kstates(struct ptw_proc *proc, int task_fd, struct ptw_map *kstates)
{
	size_t it = 0;
	void *v;
	while (ptw_map_next(proc->lwps, &it, NULL, &v)) {
		struct ptw_lwp *l = v;
		if ((l->tgid && l->tgid != proc->pid) || ptw_map_get(kstates, (uint64_t)l->tid))
			continue;
		struct kstate *k = kstate_new();
		read_state(task_fd, l->tid, k); /* (seized: its call comes from its registers) */
		ptw_map_put(kstates, (uint64_t)l->tid, k);
	}
}

/* The state of the threads that ran since they were read asleep, before
 * they are stopped. */
static void read_states_again(struct ptw_map *kstates, int task_fd)
{
	size_t it = 0;
	uint64_t tid;
	void *v;
	while (ptw_map_next(kstates, &it, &tid, &v)) {
		struct kstate *k = v;
		if (k->reread) {
			read_state(task_fd, (pid_t)tid, k);
			k->reread = false;
		}
	}
}

/*
 * A reading of many threads' /proc files, shared by a thread of its own,
 * which starts at once, and the tracer, which joins in once it is done
 * with what it does meanwhile (the first reading runs while the symbols
 * load): with thousands of threads, each reading takes long.
 */
struct kpass {
	int task_fd;
	pid_t *tids;
	struct kstate **states; /* [n] */
	int n;
	void (*read)(int task_fd, pid_t tid, struct kstate **slot);
	atomic_int next;
	pthread_t thread;
	bool running;
};

static void kpass_work(struct kpass *kp)
{
	for (int i; (i = atomic_fetch_add(&kp->next, 1)) < kp->n;)
		kp->read(kp->task_fd, kp->tids[i], &kp->states[i]);
}

static void *kpass_main(void *arg)
{
	kpass_work(arg);
	return NULL;
}

static void kpass_start(struct kpass *kp)
{
	atomic_init(&kp->next, 0);
	kp->running = kp->n > 1 && pthread_create(&kp->thread, NULL, kpass_main, kp) == 0;
}

/* Helps with what is left and waits for the other thread. */
static void kpass_finish(struct kpass *kp)
{
	kpass_work(kp);
	if (kp->running)
		pthread_join(kp->thread, NULL);
	kp->running = false;
}

static void first_reading(int task_fd, pid_t tid, struct kstate **slot)
{
	struct kstate *k = kstate_new();
	read_kstate(task_fd, tid, k);
	*slot = k;
}

static void second_reading(int task_fd, pid_t tid, struct kstate **slot)
{
	recheck_kstate(task_fd, tid, *slot);
}

/* A thread in a group stop that we seized before its state was read shows
 * "t (tracing stop)": nobody else traces it (the seize would have failed)
 * and we have not interrupted it yet, so it is the group stop ("T"). */
static void held_group_stops(struct ptw_proc *proc, struct ptw_map *kstates)
{
	size_t it = 0;
	uint64_t tid;
	void *v;
	while (ptw_map_next(kstates, &it, &tid, &v)) {
		struct kstate *k = v;
		if (k->state == 't' && ptw_lwp_get(proc, (pid_t)tid))
			k->state = 'T';
	}
}

static void free_kstates(struct ptw_map *kstates)
{
	size_t it = 0;
	void *v;
	while (ptw_map_next(kstates, &it, NULL, &v)) {
		free(((struct kstate *)v)->name);
		free(v);
	}
	ptw_map_free(kstates);
}

static void state_text(const struct kstate *k, char *out, size_t len)
{
	const char *sys = k->syscall >= 0 ? ptw_syscall_name(k->syscall) : NULL;
	if (sys)
		snprintf(out, len, "%c %s", k->state, sys);
	else if (k->syscall >= 0)
		snprintf(out, len, "%c syscall %ld", k->state, k->syscall);
	else
		snprintf(out, len, "%c", k->state);
}

/*
 * What is copied from a thread, while it is stopped or (still) while it
 * sleeps. Everything slow (unwinding, naming the code, classifying the
 * wait) is done from these copies once the threads run again, as perf
 * does with sampled stacks: the target's threads are frozen for the
 * copying only.
 */
struct frozen {
	pid_t tid; /* 0: gone before we could stop it */
	struct kstate *k;
	struct preexisting facts;
	bool have_regs; /* all of them; a still thread has only sp and pc */
	struct user_regs_struct regs;
	struct ptw_stack_copy stack;
	bool have_futex;
	uint8_t futex_window[FUTEX_WINDOW]; /* from futex - FUTEX_BEFORE */
	int stack_piece, futex_piece, joinid_piece; /* -1: none */
	uint64_t *pcs;	/* a still thread's frames, unwound before the others stop */
	int npcs;
	bool pcs_whole;	/* else the innermost frames only: kept for a thread
			   that must be stopped, if it cannot be */
	bool read_live;	/* its unwind read the process beyond the copy */
	bool copied_asleep; /* its stack was copied while it slept */
	bool unstopped;	/* every register read without a stop (the kernel's reader) */
	int tries;	/* times the kernel's reader was asked for it */
};

/* What the threads were while stopped: the live ones, and who is which pd. */
struct held {
	struct ptw_map live; /* tid -> 1 */
	struct ptw_map pds;  /* pd -> tid */
};

/* The memory to copy, read in one batch. */
struct pieces {
	struct ptw_mem_piece *v;
	size_t n, cap;
};

static int piece(struct pieces *ps, uint64_t addr, void *buf, size_t len)
{
	if (ps->n == ps->cap) {
		ps->cap = ps->cap ? 2 * ps->cap : 1024;
		ps->v = xreallocarray(ps->v, ps->cap, sizeof(*ps->v));
	}
	ps->v[ps->n] = (struct ptw_mem_piece){ .addr = addr, .buf = buf, .len = len };
	return (int)ps->n++;
}

/* Where the threads' stacks end: the maps, read again once if a stack is
 * not there (a thread born since). */
struct stacks {
	pid_t pid;
	struct ptw_mapping *maps;
	int nmaps;
	bool fresh;
	/* the threads' pending uretprobe returns (tid -> struct thread_rets
	 * *, owned; those with some), where the process has the kernel's
	 * trampoline page mapped ([uprobes]: tramp_lo 0 none), from the
	 * kernel's reader: their stacks are unwound past the trampoline */
	struct ptw_map rets;
	uint64_t tramp_lo, tramp_hi;
};

struct thread_rets {
	size_t n;
	uint64_t slots[PTW_TASK_RETS][2];
};

/* Thread tid's returns to read past (buf filled), or NULL: none. */
static const struct ptw_unwind_rets *rets_of(const struct stacks *st, pid_t tid,
					     struct ptw_unwind_rets *buf)
{
	const struct thread_rets *r =
		st->tramp_lo ? ptw_map_get((struct ptw_map *)&st->rets, (uint64_t)tid) : NULL;
	if (!r)
		return NULL;
	*buf = (struct ptw_unwind_rets){ st->tramp_lo, st->tramp_hi, (const uint64_t(*)[2])r->slots,
					 r->n };
	return buf;
}

/* Where the kernel's trampoline page is mapped, and (its reader: one
 * pass of the task iterator) every thread's pending returns. A process
 * with no uprobe hit has none: nothing read. */
static void read_rets(struct stacks *st, struct ptw_regs_reader *reader)
{
	const struct ptw_mapping *m = ptw_maps_named(st->maps, st->nmaps, "[uprobes]");
	if (m) {
		st->tramp_lo = m->start;
		st->tramp_hi = m->end;
	}
	struct ptw_task_regs *tasks = NULL;
	int n = st->tramp_lo && reader ? reader->tasks(reader, &tasks) : 0;
	for (int i = 0; i < n; i++)
		if (tasks[i].nrets) {
			struct thread_rets *r = xcalloc(1, sizeof(*r));
			r->n = tasks[i].nrets < PTW_TASK_RETS ? tasks[i].nrets : PTW_TASK_RETS;
			memcpy(r->slots, tasks[i].rets, r->n * sizeof(r->slots[0]));
			free(ptw_map_put(&st->rets, (uint64_t)tasks[i].tid, r));
		}
	if (n >= 0)
		free(tasks);
	ptw_dbg(PTW_DBG_TRACER, "snapshot: %zu threads with pending uretprobe returns",
		st->rets.count);
}

/* How much stack to copy: from the stack pointer to the end of its mapping,
 * no more than STACK_COPY_MAX (older frames beyond are read from the
 * process, where callers' frames stay while their callees run). */
static size_t stack_extent(struct stacks *st, uint64_t sp)
{
	const struct ptw_mapping *m = ptw_maps_find(st->maps, st->nmaps, sp);
	if (!m && !st->fresh) {
		free(st->maps);
		st->nmaps = ptw_maps_read(st->pid, &st->maps);
		if (st->nmaps < 0)
			st->nmaps = 0;
		st->fresh = true;
		m = ptw_maps_find(st->maps, st->nmaps, sp);
	}
	size_t len = m ? (size_t)(m->end - sp) : STACK_COPY_MIN;
	return len > STACK_COPY_MAX ? STACK_COPY_MAX : len;
}

/* The stack from sp. */
static void copy_stack(struct frozen *f, uint64_t sp, struct stacks *st, struct pieces *ps)
{
	size_t len = stack_extent(st, sp);
	f->stack = (struct ptw_stack_copy){ .addr = sp, .len = len, .bytes = xmalloc(len) };
	f->stack_piece = piece(ps, sp, (void *)f->stack.bytes, len);
}

/* The words around the futex it waits on (a mutex's owner, a rwlock's
 * writer), read with the stopped threads' registers: the owner can change
 * without waking the waiter. */
static void copy_futex(struct frozen *f, struct pieces *ps)
{
	if (f->k->syscall == 202 /* futex */)
		f->futex_piece = piece(ps, f->k->args[0] - FUTEX_BEFORE, f->futex_window,
				       sizeof(f->futex_window));
}

/* Which pieces were read, back onto the threads. */
static void copied(struct frozen *f, const struct pieces *ps)
{
	if (f->joinid_piece >= 0)
		f->facts.have_joinid = ps->v[f->joinid_piece].ok;
	if (f->stack_piece >= 0 && !ps->v[f->stack_piece].ok) {
		free((void *)f->stack.bytes);
		f->stack = (struct ptw_stack_copy){ 0 };
	}
	if (f->futex_piece >= 0)
		f->have_futex = ps->v[f->futex_piece].ok;
	f->joinid_piece = f->stack_piece = f->futex_piece = -1;
}

/* The facts every thread's span needs, and the word that says whether it
 * is detached (read with the rest). */
static void hold(struct ptw_tracer *t, struct frozen *f, uint64_t pd, uint64_t start_routine,
		 struct held *h, struct pieces *ps)
{
	ptw_map_put(&h->live, (uint64_t)f->tid, (void *)1);
	if (pd)
		ptw_map_put(&h->pds, pd, (void *)(intptr_t)f->tid);
	attach_facts(t, f->tid, pd, start_routine, &f->facts);
	if (f->facts.have_joinid)
		f->joinid_piece = piece(ps, f->facts.joinid_at, &f->facts.joinid,
					sizeof(f->facts.joinid));
	copy_futex(f, ps);
}

/* Takes what a stopped thread's record needs: registers now, memory as
 * pieces read together once every thread is listed. */
static void freeze(struct ptw_tracer *t, int task_fd, struct ptw_lwp *l, struct frozen *f,
		   struct held *h, struct pieces *ps, struct stacks *st)
{
	struct kstate *k = f->k;
	struct thread *th = l->user;
	struct user_regs_struct *regs;
	if (l->state == PTW_LWP_STOPPED && ptw_getregs(t->proc, l, &regs) == 0) {
		syscall_from_regs(regs, k);
		f->have_regs = true;
		f->regs = *regs;
		if (th && !th->start_routine && l->tid != t->proc->pid)
			attach_facts_from_tls(t, l->tid, regs->fs_base, th);
	} else {
		read_kernel_wait(task_fd, l->tid, k);
	}
	hold(t, f, th ? th->pd : 0, th ? th->start_routine : 0, h, ps);
	if (f->have_regs && t->img.syms)
		copy_stack(f, regs->rsp, st, ps);
}

/* A word of the copy around the futex, if it holds it. */
static bool futex_word(const struct frozen *f, uint64_t futex, uint64_t addr, int32_t *ret)
{
	uint64_t lo = futex - FUTEX_BEFORE;
	if (!f->have_futex || addr < lo || addr + sizeof(*ret) > lo + sizeof(f->futex_window))
		return false;
	memcpy(ret, f->futex_window + (addr - lo), sizeof(*ret));
	return true;
}

static bool live_tid(const struct held *c, int32_t tid)
{
	return tid > 0 && ptw_map_get((struct ptw_map *)&c->live, (uint64_t)tid);
}

/*
 * What the threads asleep in futex wait for, as --locks reads a wait under
 * way at an attach (ptw_libc_waits_under_way: glibc's slow paths and the
 * join function, found in libc once, at the first such thread): the same
 * kinds and objects on either path, by the code, not by frame names.
 */
struct snap_waits {
	bool found;
	struct ptw_libc_waits lw;
	const char *libc_path; /* NULL: a static program */
	struct ptw_join_at join;
};

static void find_waits(struct ptw_tracer *t, struct snap_waits *sw)
{
	struct ptw_libc_join join;
	sw->found = true;
	sw->libc_path = t->img.dynamic ? ptw_symbols_module_path(t->img.syms, "libc.so") : NULL;
	ptw_libc_waits_find(t->img.syms, image_libc_module(t), tracer_read_code, t, &sw->lw);
	if (ptw_libc_join_find(t->img.syms, image_libc_module(t), tracer_read_code, t, &join) ==
	    0) {
		sw->join.lo = join.lo;
		sw->join.hi = join.hi;
	}
	ptw_dbg(PTW_DBG_TRACER,
		"snapshot: __lll_lock_wait %#llx, private %#llx, futex wait %#llx, %zu ranges, "
		"join [%#llx, %#llx)",
		(unsigned long long)sw->lw.lll_lock_wait,
		(unsigned long long)sw->lw.lll_lock_wait_private,
		(unsigned long long)sw->lw.futex_wait, sw->lw.nranges,
		(unsigned long long)sw->join.lo, (unsigned long long)sw->join.hi);
}

/* Kind, object and owner of a thread's futex wait, from its frames (pcs,
 * n) and the words copied around the futex (an owner can change without
 * waking the waiter: read with the others). A futex wait of no kind
 * --locks knows is "other", on the futex word. */
static void wait_target(struct ptw_tracer *t, struct snap_waits *sw, const struct frozen *f,
			const struct held *c, const uint64_t *pcs, int n, struct ptw_event *ev)
{
	uint64_t futex = f->k->args[0];
	struct ptw_wait_under_way uw = { .kind = PTW_WAIT_NONE };
	if (t->img.syms && n > 0) {
		if (!sw->found)
			find_waits(t, sw);
		ptw_libc_waits_under_way(&sw->lw, t->img.syms, sw->libc_path, &sw->join, futex,
					 (uint32_t)f->k->args[2], pcs, n, &uw);
	}
	if (uw.kind == PTW_WAIT_NONE) {
		ev->wait_kind = PTW_WAIT_OTHER;
		ev->wait_object = futex;
		return;
	}
	ev->wait_kind = uw.kind;
	ev->wait_object = uw.object;
	int32_t v;
	uint64_t owner_at = ptw_wait_owner_at(uw.kind, uw.object, 0);
	if (uw.kind == PTW_WAIT_JOIN)
		ev->wait_owner =
			(int32_t)(intptr_t)ptw_map_get((struct ptw_map *)&c->pds, uw.object);
	else if (owner_at && futex_word(f, futex, owner_at, &v) && live_tid(c, v))
		ev->wait_owner = v;
}

/* The thread's state, stack and wait, from what was copied. */
static void record(struct ptw_tracer *t, const struct frozen *f, const struct held *c,
		   struct snap_waits *sw, const struct stacks *stacks, uint64_t ns)
{
	struct image *img = &t->img;
	const struct kstate *k = f->k;
	struct ptw_event st = ptw_event_init(PTW_EV_THREAD_STATE, ns, f->tid);
	char state[64];
	state_text(k, state, sizeof(state));
	st.state = state;
	st.wchan = k->wchan[0] ? k->wchan : NULL;
	const struct ptw_location *locs[MAX_FRAMES];
	uint64_t own[MAX_FRAMES];
	const uint64_t *pcs = NULL;
	int n = 0;
	/* from its registers if it was stopped, else as read asleep (all of
	 * it, or the innermost frames of one that would not stop) */
	if ((f->have_regs || f->pcs) && img->syms) {
		pcs = f->have_regs ? own : f->pcs;
		struct ptw_unwind_rets rb;
		n = !f->have_regs
			    ? f->npcs
			    : ptw_symbols_unwind_copy_in(
				      img->syms, NULL, NULL, rets_of(stacks, f->tid, &rb), f->tid,
				      &f->regs, f->stack.bytes ? &f->stack : NULL, own, MAX_FRAMES);
		for (int i = 0; i < n; i++)
			/* Return addresses point after the call: name the call. */
			locs[i] = ptw_symbols_locate(img->syms, i ? pcs[i] - 1 : pcs[i]);
		st.stack = locs;
		st.nstack = (size_t)(n > 0 ? n : 0);
	}
	if (k->syscall == 202 /* futex */)
		wait_target(t, sw, f, c, pcs, n, &st);
	tracer_emit(t, &st);
}

/* schedstat again, on the other thread (kpass_finish: the end), for the
 * threads pick() says: still if the same. */
static void recheck_start(struct kpass *kp, struct frozen *fs, size_t n, int task_fd,
			  bool (*pick)(const struct frozen *))
{
	*kp = (struct kpass){ .task_fd = task_fd, .read = second_reading,
			      .tids = xcalloc(n + 1, sizeof(*kp->tids)),
			      .states = xcalloc(n + 1, sizeof(*kp->states)) };
	for (size_t i = 0; i < n; i++)
		if (pick(&fs[i])) {
			kp->tids[kp->n] = fs[i].tid;
			kp->states[kp->n++] = fs[i].k;
		}
	kpass_start(kp);
}

static void recheck_finish(struct kpass *kp)
{
	kpass_finish(kp);
	free(kp->tids);
	free(kp->states);
}

/* A thread read asleep that is to be stopped after all (or read by the
 * kernel: then says so): why, and what was read of it goes (but the
 * innermost frames of one that slept throughout: true, and all we have if
 * it does not stop). */
static void to_stop(struct frozen *f, const char *then, const char *why, bool keep_frames)
{
	ptw_dbg(PTW_DBG_TRACER, "snapshot: %d is %s: %s", f->tid, then, why);
	not_still(f->k);
	if (!keep_frames) {
		free(f->pcs);
		f->pcs = NULL;
	}
	f->pcs_whole = false;
	free((void *)f->stack.bytes);
	f->stack = (struct ptw_stack_copy){ 0 };
}

static bool copied_asleep(const struct frozen *f)
{
	return f->copied_asleep;
}

static bool read_still(const struct frozen *f)
{
	return f->tid && f->k->still && !f->unstopped;
}

/*
 * The threads asleep in the kernel, read while they sleep on: stack
 * copied, then schedstat again (did it run?), then unwound from its stack
 * pointer and pc. Those that ran, or whose unwind needs a register we do
 * not have, are stopped with the others (then: "stopped"), or read by the
 * kernel ("read by the kernel").
 */
static void read_sleepers(struct ptw_tracer *t, struct frozen *fs, size_t n, int task_fd,
			  struct stacks *st, const char *then)
{
	/* One block for every copy, mapped at once: 10,000 small allocations,
	 * each touching a new page, cost more than the copying. Only the
	 * unwinds need the copies. */
	size_t total = 0;
	for (size_t i = 0; i < n; i++)
		if (fs[i].k->sp && t->img.syms)
			total += fs[i].stack.len = stack_extent(st, fs[i].k->sp);
	uint8_t *block = NULL;
	if (total) {
		block = mmap(NULL, total, PROT_READ | PROT_WRITE,
			     MAP_PRIVATE | MAP_ANONYMOUS | MAP_POPULATE, -1, 0);
		if (block == MAP_FAILED)
			block = NULL;
	}
	struct pieces ps = { 0 };
	for (size_t i = 0, at = 0; i < n && block; i++) {
		struct frozen *f = &fs[i];
		if (!f->stack.len)
			continue;
		size_t len = f->stack.len;
		f->stack = (struct ptw_stack_copy){ .addr = f->k->sp,
						    .len = len,
						    .bytes = block + at };
		f->stack_piece = piece(&ps, f->k->sp, block + at, len);
		at += len;
	}
	ptw_mem_read_many(t->proc, ps.v, ps.n);
	for (size_t i = 0; i < n; i++) {
		struct frozen *f = &fs[i];
		if (f->stack_piece >= 0 && !ps.v[f->stack_piece].ok)
			f->stack = (struct ptw_stack_copy){ 0 };
		f->stack_piece = -1;
		f->copied_asleep = f->stack.bytes != NULL;
	}
	free(ps.v);
	/* The second reading on the other thread while this one unwinds
	 * (from the copies: what a thread that ran meanwhile did is not in
	 * them, and its unwind is dropped). */
	struct kpass again;
	recheck_start(&again, fs, n, task_fd, copied_asleep);
	uint64_t pcs[MAX_FRAMES];
	for (size_t i = 0; i < n; i++) {
		struct frozen *f = &fs[i];
		if (!f->stack.bytes)
			continue;
		struct ptw_unwind_rets rb;
		int got = ptw_symbols_unwind_sp_pc(t->img.syms, f->tid, f->k->sp, f->k->pc,
						   &f->stack, rets_of(st, f->tid, &rb), pcs,
						   MAX_FRAMES, &f->pcs_whole, &f->read_live);
		if (got <= 0) { /* libdwfl cannot unwind this process at all */
			f->pcs_whole = false;
			continue;
		}
		f->pcs = xmalloc((size_t)got * sizeof(*pcs));
		memcpy(f->pcs, pcs, (size_t)got * sizeof(*pcs));
		f->npcs = got;
	}
	recheck_finish(&again);
	/* An unwind that read beyond the copy may have read after the second
	 * reading: one more, after it. (Few: stacks deeper than the copy.) */
	for (size_t i = 0; i < n; i++)
		if (fs[i].read_live && fs[i].k->still) {
			ptw_dbg(PTW_DBG_TRACER,
				"snapshot: %d: its unwind read beyond the %zu bytes of stack copied",
				fs[i].tid, fs[i].stack.len);
			recheck_kstate(task_fd, fs[i].tid, fs[i].k);
		}
	for (size_t i = 0; i < n; i++)
		fs[i].stack = (struct ptw_stack_copy){ 0 }; /* (in the block) */
	if (block)
		munmap(block, total);
	for (size_t i = 0; i < n; i++) {
		struct frozen *f = &fs[i];
		if (f->k->still && f->pcs_whole)
			continue; /* read asleep */
		if (!t->img.syms)
			not_still(f->k); /* nothing to unwind with: stopped */
		else if (!f->k->sp)
			to_stop(f, then,
				f->k->state == 'S' || f->k->state == 'D'
					? "it woke as it was read"
					: "it was not asleep in the kernel",
				false);
		else if (!f->copied_asleep)
			to_stop(f, then, "its stack could not be read", false);
		else if (!f->k->still)
			to_stop(f, then, "it ran while read", false);
		else if (!f->pcs)
			to_stop(f, then, "it could not be unwound from its stack pointer and pc", false);
		else
			to_stop(f, then, "its unwind needs more than sp and pc", true);
	}
}

/*
 * The threads read asleep, once the others are stopped: asleep still (and
 * so every thread is seen at one moment: now), or stopped too. Returns
 * how many are to be stopped.
 */
static size_t asleep_still(struct frozen *fs, size_t n, int task_fd)
{
	struct kpass again;
	recheck_start(&again, fs, n, task_fd, read_still);
	recheck_finish(&again);
	size_t woke = 0;
	for (size_t i = 0; i < n; i++)
		if (fs[i].tid && !fs[i].k->still && fs[i].pcs_whole) {
			to_stop(&fs[i], "stopped", "it woke while the others were stopped", false);
			woke++;
		}
	return woke;
}

static bool is_still(void *ctx, pid_t tid)
{
	struct kstate *k = ptw_map_get(ctx, (uint64_t)tid);
	return k && k->still;
}

/* A snapshot under way: every thread we know of, and what was read. */
struct snap {
	struct ptw_tracer *t;
	pid_t pid;
	int task_fd;		/* /proc/PID/task */
	struct ptw_map kstates; /* tid -> struct kstate * (owned) */
	struct frozen *v;	/* the threads, the main thread first */
	size_t n, cap;
	struct stacks stacks;
	struct ptw_map unseized; /* tid -> libthread_db's struct ptw_tdb_thread */
	struct held held;
	struct ptw_seize_info seized;
	int stuck; /* threads that did not stop */
	uint64_t frozen_from; /* when the first was stopped */
	struct ptw_regs_reader *reader; /* registers without a stop, or NULL */
	size_t unstopped;		/* threads it read (they ran meanwhile) */
};

static struct frozen *frozen_add(struct snap *sn, pid_t tid, struct kstate *k)
{
	if (sn->n == sn->cap) {
		sn->cap = sn->cap ? 2 * sn->cap : 64;
		sn->v = xreallocarray(sn->v, sn->cap, sizeof(*sn->v));
	}
	struct frozen *f = &sn->v[sn->n++];
	*f = (struct frozen){ .tid = tid, .k = k, .stack_piece = -1, .futex_piece = -1,
			      .joinid_piece = -1 };
	return f;
}

/* The threads of the first reading, in the list, the main thread first. */
static void list_first_reading(struct snap *sn, const struct kpass *first)
{
	for (int pass = 0; pass < 2; pass++)
		for (int i = 0; i < first->n; i++)
			if ((first->tids[i] == sn->pid) == (pass == 0)) {
				ptw_map_put(&sn->kstates, (uint64_t)first->tids[i],
					    first->states[i]);
				frozen_add(sn, first->tids[i], first->states[i]);
			}
}

/*
 * Without stops (sn->reader, the kernel's): a thread not read asleep gets
 * every register from the task iterator while it is off a CPU (its state
 * read and its stack copied, then the iterator again: the same context
 * switches, so it did not run in between), or from a perf sample of its
 * registers and stack as it runs. Those the kernel does not give within a
 * few rounds (a thread that keeps waking as it is read) are stopped after
 * all, and said. Unlike a stopped snapshot's, each thread is read at a
 * moment of its own (within milliseconds).
 */
#define UNSTOPPED_ROUNDS 6
#define SAMPLE_WAIT_MS 100

static bool unread(const struct frozen *f)
{
	return f->tid && !f->k->still;
}

static size_t count_unread(const struct snap *sn)
{
	size_t n = 0;
	for (size_t i = 0; i < sn->n; i++)
		n += unread(&sn->v[i]);
	return n;
}

static void keep_unstopped(struct snap *sn, struct frozen *f)
{
	f->have_regs = true;
	f->unstopped = true;
	f->k->still = true;
	f->k->reread = false;
	sn->unstopped++;
}

/* The threads off a CPU in tasks: state, registers and stack; kept if the
 * iterator finds them off a CPU with as many switches again. The others
 * are listed in *runs. */
static void read_off_cpu(struct snap *sn, const struct ptw_task_regs *tasks, int n,
			 struct ptw_thread_sample **runs, size_t *nruns)
{
	struct ptw_tracer *t = sn->t;
	struct ptw_map by_tid = { 0 };
	for (int i = 0; i < n; i++)
		ptw_map_put(&by_tid, (uint64_t)tasks[i].tid, (void *)&tasks[i]);
	struct pieces ps = { 0 };
	uint64_t *seen = xcalloc(sn->n + 1, sizeof(*seen));
	for (size_t i = 0; i < sn->n; i++) {
		struct frozen *f = &sn->v[i];
		const struct ptw_task_regs *tr = unread(f) ? ptw_map_get(&by_tid, (uint64_t)f->tid)
							   : NULL;
		if (!tr)
			continue;
		/* (one that ran while read is sampled next: it runs often) */
		if (tr->on_cpu || !tr->regs_ok || f->tries++ % 2) {
			*runs = xreallocarray(*runs, *nruns + 1, sizeof(**runs));
			(*runs)[(*nruns)++] = (struct ptw_thread_sample){ .tid = f->tid,
									  .regs = tr->regs };
			continue;
		}
		read_state(sn->task_fd, f->tid, f->k);
		f->regs = tr->regs;
		seen[i] = tr->switches + 1;
		if (t->img.syms)
			copy_stack(f, tr->regs.rsp, &sn->stacks, &ps);
	}
	ptw_mem_read_many(t->proc, ps.v, ps.n);
	for (size_t i = 0; i < sn->n; i++)
		copied(&sn->v[i], &ps);
	free(ps.v);
	ptw_map_free(&by_tid);

	struct ptw_task_regs *again = NULL;
	int m = sn->reader->tasks(sn->reader, &again);
	struct ptw_map now = { 0 };
	for (int i = 0; i < m; i++)
		ptw_map_put(&now, (uint64_t)again[i].tid, (void *)&again[i]);
	for (size_t i = 0; i < sn->n; i++) {
		struct frozen *f = &sn->v[i];
		if (!seen[i])
			continue;
		const struct ptw_task_regs *tr = ptw_map_get(&now, (uint64_t)f->tid);
		if (tr && !tr->on_cpu && tr->switches + 1 == seen[i]) {
			f->k->syscall = -1;
			syscall_from_regs(&f->regs, f->k);
			keep_unstopped(sn, f);
		} else {
			free((void *)f->stack.bytes);
			f->stack = (struct ptw_stack_copy){ 0 };
		}
	}
	ptw_map_free(&now);
	free(again);
	free(seen);
}

/* The running threads in runs, sampled. */
static void sample_running(struct snap *sn, struct ptw_thread_sample *runs, size_t nruns)
{
	if (!nruns || sn->reader->sample(sn->reader, runs, nruns, SAMPLE_WAIT_MS) < 0)
		return;
	struct ptw_map by_tid = { 0 };
	for (size_t i = 0; i < sn->n; i++)
		ptw_map_put(&by_tid, (uint64_t)sn->v[i].tid, &sn->v[i]);
	for (size_t i = 0; i < nruns; i++) {
		struct frozen *f = ptw_map_get(&by_tid, (uint64_t)runs[i].tid);
		if (runs[i].err || !f || !unread(f)) {
			free(runs[i].stack);
			continue;
		}
		f->regs = runs[i].regs; /* (fs_base: the iterator's) */
		free((void *)f->stack.bytes);
		f->stack = (struct ptw_stack_copy){ .addr = runs[i].regs.rsp,
						    .len = runs[i].len,
						    .bytes = runs[i].stack };
		f->k->state = 'R';
		f->k->syscall = -1;
		f->k->wchan[0] = '\0';
		keep_unstopped(sn, f);
	}
	ptw_map_free(&by_tid);
}

static void read_unstopped(struct snap *sn)
{
	for (int round = 0; round < UNSTOPPED_ROUNDS; round++) {
		if (!count_unread(sn))
			return;
		struct ptw_task_regs *tasks;
		int n = sn->reader->tasks(sn->reader, &tasks);
		if (n < 0) {
			tracer_warn(sn->t, PTW_W_KERNEL_LIMIT,
				    "--snapshot: the kernel's task iterator failed (%s): the "
				    "threads not asleep are stopped",
				    strerror(-n));
			return;
		}
		struct ptw_thread_sample *runs = NULL;
		size_t nruns = 0;
		read_off_cpu(sn, tasks, n, &runs, &nruns);
		free(tasks);
		sample_running(sn, runs, nruns);
		free(runs);
	}
	size_t left = count_unread(sn);
	if (left)
		tracer_warn(sn->t, PTW_W_KERNEL_LIMIT,
			    "--snapshot: %zu thread%s could not be read without a stop (%s "
			    "kept running and waking as %s read): stopped with ptrace",
			    left, left == 1 ? "" : "s", left == 1 ? "it" : "they",
			    left == 1 ? "it was" : "they were");
}

/*
 * Seizes and stops the threads not read asleep; then, while they are
 * stopped, checks that those read asleep still sleep (so that every thread
 * is seen at one moment) and stops the ones that woke too. Returns 0 or
 * -errno (the seize failed).
 */
static int stop_the_others(struct snap *sn)
{
	struct ptw_tracer *t = sn->t;
	read_states_again(&sn->kstates, sn->task_fd);
	int r = ptw_seize_some(t->proc, is_still, &sn->kstates, &sn->seized);
	if (r < 0)
		return r;
	attach_seized(t, &sn->seized);
	/* threads born since the first reading: seized, running, still true */
	read_kstates(t->proc, sn->task_fd, &sn->kstates);
	held_group_stops(t->proc, &sn->kstates);
	if (!sn->seized.threads)
		return 0;
	sn->frozen_from = ptw_now_ns();
	sn->stuck = attach_stop_all(
		t, ": their stacks are the innermost frames read while they slept, if any");
	if (asleep_still(sn->v, sn->n, sn->task_fd)) {
		read_states_again(&sn->kstates, sn->task_fd);
		struct ptw_seize_info more = { 0 };
		r = ptw_seize_some(t->proc, is_still, &sn->kstates, &more);
		if (r < 0)
			tracer_warn(
				t, PTW_W_THREADS_NOT_STOPPED,
				"threads that woke during the snapshot could not be stopped (%s): they "
				"are shown as /proc says, without a stack",
				strerror(-r));
		if (more.threads) {
			read_kstates(t->proc, sn->task_fd, &sn->kstates);
			held_group_stops(t->proc, &sn->kstates);
			sn->stuck += attach_stop_all(t, ": their stacks are the innermost frames "
							"read while they slept, if any");
			sn->seized.threads += more.threads;
		}
	}
	return 0;
}

/*
 * What every thread's span and record need, read in one batch: the facts
 * and detach word of all, registers and stacks of the stopped ones. Those
 * born since the first reading join the list first: the pieces to read
 * point into it.
 */
static void take_copies(struct snap *sn)
{
	struct ptw_tracer *t = sn->t;
	struct ptw_map listed = { 0 };
	for (size_t i = 0; i < sn->n; i++)
		ptw_map_put(&listed, (uint64_t)sn->v[i].tid, (void *)1);
	size_t nthreads;
	struct ptw_lwp **threads = attach_threads(t, &nthreads);
	for (size_t i = 0; i < nthreads; i++) {
		pid_t tid = threads[i]->tid;
		if (ptw_map_get(&listed, (uint64_t)tid))
			continue;
		struct kstate *k = ptw_map_get(&sn->kstates, (uint64_t)tid);
		if (!k) { /* not listed in /proc when we read it */
			k = kstate_new();
			ptw_map_put(&sn->kstates, (uint64_t)tid, k);
		}
		frozen_add(sn, tid, k);
	}
	free(threads);
	ptw_map_free(&listed);

	struct pieces pieces = { 0 };
	for (size_t i = 0; i < sn->n; i++) {
		struct frozen *f = &sn->v[i];
		if (f->k->still) {
			const struct ptw_tdb_thread *th =
				ptw_map_get(&sn->unseized, (uint64_t)f->tid);
			hold(t, f, th ? th->pthread : 0, th ? th->startfunc : 0, &sn->held,
			     &pieces);
			continue;
		}
		struct ptw_lwp *l = ptw_lwp_get(t->proc, f->tid);
		if (l && l->tgid == sn->pid && l->state != PTW_LWP_GONE) {
			freeze(t, sn->task_fd, l, f, &sn->held, &pieces, &sn->stacks);
		} else if (!ptw_proc_exited(sn->pid, f->tid)) {
			/* alive, but not ours (its seize failed): as /proc says */
			const struct ptw_tdb_thread *th =
				ptw_map_get(&sn->unseized, (uint64_t)f->tid);
			read_kernel_wait(sn->task_fd, f->tid, f->k);
			hold(t, f, th ? th->pthread : 0, th ? th->startfunc : 0, &sn->held,
			     &pieces);
		} else {
			f->tid = 0; /* gone before we could stop it */
		}
	}
	ptw_mem_read_many(t->proc, pieces.v, pieces.n);
	for (size_t i = 0; i < sn->n; i++)
		copied(&sn->v[i], &pieces);
	free(pieces.v);
}

static void snap_free(struct snap *sn)
{
	for (size_t i = 0; i < sn->n; i++) {
		free((void *)sn->v[i].stack.bytes);
		free(sn->v[i].pcs);
	}
	free(sn->v);
	free(sn->stacks.maps);
	void *v;
	for (size_t it = 0; ptw_map_next(&sn->stacks.rets, &it, NULL, &v);)
		free(v);
	ptw_map_free(&sn->stacks.rets);
	if (sn->task_fd >= 0)
		close(sn->task_fd);
	free_kstates(&sn->kstates);
	ptw_map_free(&sn->held.live);
	ptw_map_free(&sn->held.pds);
	for (size_t it = 0; ptw_map_next(&sn->unseized, &it, NULL, &v);)
		free(v);
	ptw_map_free(&sn->unseized);
}

int ptw_tracer_snapshot(const struct ptw_backend_opts *o, pid_t pid,
			struct ptw_regs_reader *reader, struct ptw_tracer **ret)
{
	uint64_t start = ptw_now_ns();
	struct snap sn = { .pid = pid, .stacks = { .pid = pid }, .reader = reader };
	/* /proc is read while we load symbols: with thousands of threads,
	 * both take long, and neither needs the other. */
	char task_path[64];
	snprintf(task_path, sizeof(task_path), "/proc/%d/task", pid);
	sn.task_fd = open(task_path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	struct kpass first = { .read = first_reading, .task_fd = sn.task_fd };
	first.n = sn.task_fd < 0 ? -ENOENT : ptw_proc_tids(pid, &first.tids);
	if (first.n <= 0) {
		if (reader)
			reader->free(reader);
		snap_free(&sn);
		if (first.n == 0)
			free(first.tids);
		return -ESRCH;
	}
	first.states = xcalloc((size_t)first.n + 1, sizeof(*first.states));
	kpass_start(&first);
	struct ptw_tracer *t = attach_tracer_new(o, ptw_proc_open(pid), start, true);
	sn.t = t;
	int r = ptw_bptab_new(t->proc, &t->bps);
	bool have_tdb = r == 0 && image_load(t) == 0 && image_tdb_open(t) == 0;
	uint64_t ns_loaded = ptw_now_ns();
	kpass_finish(&first);
	uint64_t ns_read = ptw_now_ns();
	list_first_reading(&sn, &first);
	free(first.states);
	free(first.tids);

	/* The threads asleep are read as they sleep. */
	sn.stacks.nmaps = ptw_maps_read(pid, &sn.stacks.maps);
	if (sn.stacks.nmaps < 0)
		sn.stacks.nmaps = 0;
	read_rets(&sn.stacks, reader);
	if (r == 0)
		read_sleepers(t, sn.v, sn.n, sn.task_fd, &sn.stacks,
			      reader ? "read by the kernel" : "stopped");
	if (r == 0 && reader)
		read_unstopped(&sn);
	if (reader)
		reader->free(reader);
	sn.reader = NULL;
	uint64_t ns_still = ptw_now_ns();

	/* The others are stopped, copied and let go. */
	if (r == 0)
		r = stop_the_others(&sn);
	if (r < 0) {
		snap_free(&sn);
		ptw_tracer_detach(t);
		ptw_tracer_free(t);
		return r;
	}
	struct snap_waits sw = { 0 };
	if (have_tdb) {
		/* (threads read without a stop may run: listed twice alike) */
		attach_list_threads(t, sn.stuck == 0 && sn.unstopped == 0, &sn.unseized);
		sw.join.has_tid = ptw_tdb_pthread_field(t->img.tdb, "tid", &sw.join.tid_off) == 0;
	}
	uint64_t ns_listed = ptw_now_ns();
	take_copies(&sn);
	uint64_t ns_copied = ptw_now_ns();
	/* The spans exist before we let go: a thread that ends while we do
	 * (one we could not stop) ends a span it has. */
	uint64_t ns = ns_listed;
	size_t nthreads = 0, nstill = 0;
	for (size_t i = 0; i < sn.n; i++)
		if (sn.v[i].tid) {
			attach_emit_facts(t, &sn.v[i].facts, sn.v[i].k->name, ns);
			nthreads++;
			nstill += sn.v[i].k->still;
		}
	uint64_t ns_spans = ptw_now_ns();
	if (sn.seized.threads)
		t->frozen_ns += ns_spans - sn.frozen_from;
	tracer_let_go(t);
	ptw_mem_invalidate(t->proc);
	uint64_t ns_free = ptw_now_ns();

	/* They run again: now the slow part, from the copies. */
	for (size_t i = 0; i < sn.n; i++)
		if (sn.v[i].tid)
			record(t, &sn.v[i], &sn.held, &sw, &sn.stacks, ns);
	snap_free(&sn);
#define MS(a, b) ((double)((b) - (a)) / 1e6)
	ptw_dbg(PTW_DBG_TRACER,
		"snapshot of %d: %zu threads, %zu read asleep without a stop, %zu read by the "
		"kernel, %d stopped; "
		"/proc read %.1f ms (symbols %.1f ms meanwhile), sleepers copied and unwound "
		"%.1f ms, then frozen %.1f ms: seized, stopped and listed %.1f, copies %.1f, "
		"spans %.1f, let go %.1f; unwound and named %.1f ms",
		pid, nthreads, nstill - sn.unstopped, sn.unstopped, sn.seized.threads,
		MS(start, ns_read),
		MS(start, ns_loaded),
		MS(ns_read, ns_still), sn.seized.threads ? MS(sn.frozen_from, ns_free) : 0.0,
		MS(ns_still, ns_listed), MS(ns_listed, ns_copied), MS(ns_copied, ns_spans),
		MS(ns_spans, ns_free), MS(ns_free, ptw_now_ns()));
#undef MS
	*ret = t;
	return 0;
}
