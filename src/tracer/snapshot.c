/* SPDX-License-Identifier: MIT */
/*
 * --snapshot: attach, record every thread (kernel state, backtrace, what it
 * waits for), detach. Nothing is patched. What the kernel says about a
 * thread (state, wchan, syscall) is read before it is stopped: once we
 * interrupt it, it is in "tracing stop" and its syscall is unwound.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

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

/* A thread's wchan and system call as /proc says (a thread we could not
 * stop: it stays where it is). */
static void read_kernel_wait(int task_fd, pid_t tid, struct kstate *k)
{
	char path[64], buf[512];
	read_wchan(task_fd, tid, k);
	/* "202 0xADDR 0x80 ..." blocked in futex, "running", or "-1 sp pc" */
	snprintf(path, sizeof(path), "%d/syscall", tid);
	if (ptw_read_small_file_at(task_fd, path, buf, sizeof(buf)) > 0 && buf[0] != 'r') {
		char *p = buf;
		k->syscall = strtol(p, &p, 10);
		for (int i = 0; i < 6 && k->syscall >= 0; i++)
			k->args[i] = strtoull(p, &p, 16);
	}
}

/*
 * One file per thread, opened relative to /proc/PID/task (with 10,000
 * threads the path walks are much of the cost): its state and name. The
 * system call it sleeps in is read from its registers once stopped; wchan
 * only for an uninterruptible sleep, where it says what the system call
 * does not.
 */
static void read_kstate(int task_fd, pid_t tid, struct kstate *k)
{
	char path[64], buf[512];
	k->state = '?';
	k->syscall = -1;
	k->wchan[0] = '\0';
	/* "TID (comm) S ...": the name may hold blanks and parentheses */
	snprintf(path, sizeof(path), "%d/stat", tid);
	if (ptw_read_small_file_at(task_fd, path, buf, sizeof(buf)) > 0) {
		char *open = strchr(buf, '('), *close = strrchr(buf, ')');
		if (open && close && close > open && close[1] == ' ' && close[2]) {
			k->state = close[2];
			*close = '\0';
			k->name = xstrdup(open + 1);
		}
	}
	if (k->state == 'D')
		read_wchan(task_fd, tid, k);
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
			  ret == -514 /* ERESTARTNOHAND */ || ret == -516 /* ERESTART_RESTARTBLOCK */;
	if (nr < 0 || !(restarting || k->state == 'S' || k->state == 'D'))
		return;
	k->syscall = nr;
	uint64_t args[6] = { r->rdi, r->rsi, r->rdx, r->r10, r->r8, r->r9 };
	memcpy(k->args, args, sizeof(args));
}

/* The kernel's view of every thread before we seize any: once seized, a
 * group-stopped thread shows as "tracing stop" instead of "stopped". */
static void read_kstates(pid_t pid, struct ptw_map *kstates)
{
	char path[64];
	snprintf(path, sizeof(path), "/proc/%d/task", pid);
	int task_fd = open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (task_fd < 0)
		return;
	pid_t *tids;
	int n = ptw_proc_tids(pid, &tids);
	for (int i = 0; i < n; i++) {
		if (ptw_map_get(kstates, (uint64_t)tids[i]))
			continue;
		struct kstate *k = xcalloc(1, sizeof(*k));
		read_kstate(task_fd, tids[i], k);
		ptw_map_put(kstates, (uint64_t)tids[i], k);
	}
	free(tids);
	close(task_fd);
}

/*
 * The first reading of every thread, shared by a thread of its own, which
 * starts at once, and the tracer, which joins in once it has seized the
 * threads and loaded the symbols: with thousands of threads it is the
 * longest step before they are stopped.
 */
struct kreader {
	int task_fd;
	pid_t *tids;
	int n;
	struct kstate **states; /* [n], filled by whoever takes index i */
	atomic_int next;
	pthread_t thread;
	bool running;
};

static void kreader_work(struct kreader *kr)
{
	for (int i; (i = atomic_fetch_add(&kr->next, 1)) < kr->n;) {
		struct kstate *k = xcalloc(1, sizeof(*k));
		read_kstate(kr->task_fd, kr->tids[i], k);
		kr->states[i] = k;
	}
}

static void *kreader_main(void *arg)
{
	kreader_work(arg);
	return NULL;
}

static void kreader_start(struct kreader *kr, pid_t pid)
{
	char path[64];
	snprintf(path, sizeof(path), "/proc/%d/task", pid);
	kr->task_fd = open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	kr->n = kr->task_fd < 0 ? 0 : ptw_proc_tids(pid, &kr->tids);
	if (kr->n < 0)
		kr->n = 0;
	kr->states = xcalloc((size_t)kr->n + 1, sizeof(*kr->states));
	atomic_init(&kr->next, 0);
	kr->running = pthread_create(&kr->thread, NULL, kreader_main, kr) == 0;
}

/* Helps with what is left, waits for the other thread, and hands over. */
static void kreader_finish(struct kreader *kr, struct ptw_map *kstates)
{
	kreader_work(kr);
	if (kr->running)
		pthread_join(kr->thread, NULL);
	kr->running = false;
	for (int i = 0; i < kr->n; i++)
		ptw_map_put(kstates, (uint64_t)kr->tids[i], kr->states[i]);
	free(kr->states);
	free(kr->tids);
	if (kr->task_fd >= 0)
		close(kr->task_fd);
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
 * What is copied from a thread while it is stopped. Everything slow
 * (unwinding, naming the code, classifying the wait) is done from these
 * copies once the threads run again, as perf does with sampled stacks: the
 * target's threads are frozen for the copying only.
 */
struct frozen {
	pid_t tid;
	struct kstate *k;
	struct preexisting facts;
	bool have_regs;
	struct user_regs_struct regs;
	struct ptw_stack_copy stack;
	bool have_futex;
	uint8_t futex_window[FUTEX_WINDOW]; /* from futex - FUTEX_BEFORE */
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

static struct ptw_mem_piece *piece(struct pieces *ps, uint64_t addr, void *buf, size_t len)
{
	if (ps->n == ps->cap) {
		ps->cap = ps->cap ? 2 * ps->cap : 1024;
		ps->v = xreallocarray(ps->v, ps->cap, sizeof(*ps->v));
	}
	ps->v[ps->n] = (struct ptw_mem_piece){ .addr = addr, .buf = buf, .len = len };
	return &ps->v[ps->n++];
}

/* How much stack to copy: from the stack pointer to the end of its mapping,
 * no more than STACK_COPY_MAX (older frames beyond are read from the
 * process, where callers' frames stay while their callees run). */
static size_t stack_extent(pid_t pid, uint64_t sp, struct ptw_mapping **maps, int *nmaps,
			   bool *maps_fresh)
{
	const struct ptw_mapping *m = ptw_maps_find(*maps, *nmaps, sp);
	if (!m && !*maps_fresh) {
		/* a stack mapped since we read the maps (a thread born meanwhile) */
		free(*maps);
		*nmaps = ptw_maps_read(pid, maps);
		if (*nmaps < 0)
			*nmaps = 0;
		*maps_fresh = true;
		m = ptw_maps_find(*maps, *nmaps, sp);
	}
	size_t len = m ? (size_t)(m->end - sp) : STACK_COPY_MIN;
	return len > STACK_COPY_MAX ? STACK_COPY_MAX : len;
}

/* Takes what the thread's record needs while it is stopped: registers now,
 * memory as pieces read together once every thread is listed. */
static void freeze(struct ptw_tracer *t, int task_fd, struct ptw_lwp *l, struct kstate *k,
		   struct frozen *f, struct held *h, struct pieces *ps, struct ptw_mapping **maps,
		   int *nmaps, bool *maps_fresh)
{
	f->tid = l->tid;
	f->k = k;
	ptw_map_put(&h->live, (uint64_t)l->tid, (void *)1);
	struct thread *th = l->user;
	if (th && th->pd)
		ptw_map_put(&h->pds, th->pd, (void *)(intptr_t)l->tid);
	attach_preexisting_facts(t, l, &f->facts);
	if (f->facts.have_joinid)
		piece(ps, f->facts.joinid_at, &f->facts.joinid, sizeof(f->facts.joinid));
	struct user_regs_struct *regs;
	if (l->state == PTW_LWP_STOPPED && ptw_getregs(t->proc, l, &regs) == 0) {
		syscall_from_regs(regs, k);
		f->have_regs = true;
		f->regs = *regs;
	} else {
		read_kernel_wait(task_fd, l->tid, k);
	}
	if (f->have_regs && t->img.syms) {
		size_t len = stack_extent(t->proc->pid, regs->rsp, maps, nmaps, maps_fresh);
		f->stack = (struct ptw_stack_copy){ .addr = regs->rsp, .len = len,
						    .bytes = xmalloc(len) };
		piece(ps, f->stack.addr, (void *)f->stack.bytes, len);
	}
	if (k->syscall == 202 /* futex */)
		piece(ps, k->args[0] - FUTEX_BEFORE, f->futex_window, sizeof(f->futex_window));
}

/* Which pieces were read, back onto the threads. */
static void thaw(struct frozen *frozen, size_t n, const struct pieces *ps)
{
	size_t j = 0;
	for (size_t i = 0; i < n; i++) {
		struct frozen *f = &frozen[i];
		if (f->facts.have_joinid)
			f->facts.have_joinid = ps->v[j++].ok;
		if (f->stack.bytes && !ps->v[j++].ok) {
			free((void *)f->stack.bytes);
			f->stack = (struct ptw_stack_copy){ 0 };
		}
		if (f->k->syscall == 202)
			f->have_futex = ps->v[j++].ok;
	}
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

/* Object and owner of a futex wait, now that we know its kind. */
static void wait_target(const struct frozen *f, const struct held *c, struct ptw_event *ev,
			uint32_t tid_off, bool have_tid_off)
{
	uint64_t futex = f->k->args[0];
	int32_t v;
	switch (ev->wait_kind) {
	case PTW_WAIT_MUTEX:
		/* __lll_lock_wait(&mutex->__lock): the mutex starts there. */
		ev->wait_object = futex;
		if (futex_word(f, futex, futex + PTW_MUTEX_OWNER, &v) && live_tid(c, v))
			ev->wait_owner = v;
		break;
	case PTW_WAIT_JOIN:
		/* A joiner sleeps on the joined thread's pd->tid. */
		if (have_tid_off) {
			ev->wait_object = futex - tid_off;
			ev->wait_owner = (int32_t)(intptr_t)ptw_map_get((struct ptw_map *)&c->pds,
									ev->wait_object);
		} else {
			ev->wait_object = futex;
		}
		break;
	case PTW_WAIT_RWLOCK: {
		/* Writers sleep on __writers_futex, everyone on __wrphase_futex:
		 * the base whose __cur_writer is a live thread is the lock. */
		uint64_t bases[2] = { futex - PTW_RWLOCK_WRITERS_FUTEX, futex - PTW_RWLOCK_WRPHASE_FUTEX };
		ev->wait_object = bases[1];
		for (int i = 0; i < 2; i++)
			if (futex_word(f, futex, bases[i] + PTW_RWLOCK_CUR_WRITER, &v) &&
			    live_tid(c, v)) {
				ev->wait_object = bases[i];
				ev->wait_owner = v;
				break;
			}
		break;
	}
	default:
		ev->wait_object = ptw_wait_object(ev->wait_kind, futex);
		break;
	}
}

/* The thread's state, stack and wait, from what was copied. */
static void record(struct ptw_tracer *t, const struct frozen *f, const struct held *c,
		   uint32_t tid_off, bool have_tid_off, uint64_t ns)
{
	struct image *img = &t->img;
	const struct kstate *k = f->k;
	struct ptw_event st = ptw_event_init(PTW_EV_THREAD_STATE, ns, f->tid);
	char state[64];
	state_text(k, state, sizeof(state));
	st.state = state;
	st.wchan = k->wchan[0] ? k->wchan : NULL;
	const struct ptw_location *locs[MAX_FRAMES];
	const char *names[MAX_FRAMES];
	if (f->have_regs && img->syms) {
		uint64_t pcs[MAX_FRAMES];
		int n = ptw_symbols_unwind_copy(img->syms, f->tid, &f->regs,
						f->stack.bytes ? &f->stack : NULL, pcs, MAX_FRAMES);
		for (int i = 0; i < n; i++) {
			/* Return addresses point after the call: name the call. */
			locs[i] = ptw_symbols_locate(img->syms, i ? pcs[i] - 1 : pcs[i]);
			names[i] = locs[i]->symbol;
		}
		st.stack = locs;
		st.nstack = (size_t)(n > 0 ? n : 0);
	}
	if (k->syscall == 202 /* futex */) {
		st.wait_kind = ptw_wait_classify(names, st.nstack);
		if (st.wait_kind == PTW_WAIT_NONE)
			st.wait_kind = PTW_WAIT_OTHER;
		wait_target(f, c, &st, tid_off, have_tid_off);
	}
	emit(t, &st);
}

int ptw_tracer_snapshot(const struct ptw_tracer_opts *o, pid_t pid, struct ptw_tracer **ret)
{
	struct ptw_proc *proc;
	struct ptw_seize_info info;
	uint64_t start = ptw_now_ns();
	/* /proc is read while we seize and load symbols: with thousands of
	 * threads, both take long, and neither needs the other. */
	struct kreader kr = { 0 };
	struct ptw_map kstates = { 0 };
	kreader_start(&kr, pid);
	int r = ptw_seize(pid, &proc, &info);
	if (r < 0) {
		kreader_finish(&kr, &kstates);
		free_kstates(&kstates);
		return r;
	}
	struct ptw_tracer *t = attached_tracer_new(o, proc, &info, start, true);
	r = ptw_bptab_new(proc, &t->bps);
	bool have_tdb = r == 0 && image_load(t) == 0 && tdb_open(t) == 0;
	uint64_t ns_loaded = ptw_now_ns();
	kreader_finish(&kr, &kstates);
	uint64_t ns_read = ptw_now_ns();
	if (r < 0) {
		free_kstates(&kstates);
		ptw_tracer_detach(t);
		ptw_tracer_free(t);
		return r;
	}
	/* threads born since the first reading: still running, still true */
	read_kstates(pid, &kstates);
	held_group_stops(proc, &kstates);

	/* Where each thread's stack ends; read again if a thread's is not here. */
	struct ptw_mapping *maps = NULL;
	int nmaps = ptw_maps_read(pid, &maps);
	if (nmaps < 0)
		nmaps = 0;

	uint64_t frozen_from = ptw_now_ns();
	int stuck = attach_stop_all(t, ": no stack for them");
	uint32_t tid_off = 0;
	bool have_tid_off = false;
	if (have_tdb) {
		attach_list_threads(t, stuck);
		have_tid_off = ptw_tdb_pthread_field(t->img.tdb, "tid", &tid_off) == 0;
	}

	uint64_t ns_listed = ptw_now_ns();
	uint64_t ns = ptw_now_ns();
	char task_path[64];
	snprintf(task_path, sizeof(task_path), "/proc/%d/task", pid);
	int task_fd = open(task_path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	size_t nthreads;
	struct ptw_lwp **threads = attach_threads(t, &nthreads);
	struct frozen *frozen = xcalloc(nthreads + 1, sizeof(*frozen));
	struct held held = { 0 };
	struct pieces pieces = { 0 };
	bool maps_fresh = false;
	for (size_t i = 0; i < nthreads; i++) {
		struct kstate *k = ptw_map_get(&kstates, (uint64_t)threads[i]->tid);
		if (!k) { /* not listed in /proc when we read it */
			k = xcalloc(1, sizeof(*k));
			k->state = '?';
			k->syscall = -1;
			ptw_map_put(&kstates, (uint64_t)threads[i]->tid, k);
		}
		freeze(t, task_fd, threads[i], k, &frozen[i], &held, &pieces, &maps, &nmaps,
		       &maps_fresh);
	}
	free(threads);
	uint64_t ns_regs = ptw_now_ns();
	if (task_fd >= 0)
		close(task_fd);
	ptw_mem_read_many(t->proc, pieces.v, pieces.n);
	thaw(frozen, nthreads, &pieces);
	free(pieces.v);
	/* The spans exist before we let go: a thread that ends while we do
	 * (one we could not stop) ends a span it has. */
	for (size_t i = 0; i < nthreads; i++)
		attach_emit_facts(t, &frozen[i].facts, frozen[i].k->name, ns);
	uint64_t ns_copied = ptw_now_ns();
	t->frozen_ns += ns_copied - frozen_from;
	tracer_let_go(t);
	ptw_mem_invalidate(t->proc);
	uint64_t ns_free = ptw_now_ns();

	/* They run again: now the slow part, from the copies. */
	for (size_t i = 0; i < nthreads; i++) {
		record(t, &frozen[i], &held, tid_off, have_tid_off, ns);
		free((void *)frozen[i].stack.bytes);
	}
	free(frozen);
	free(maps);
	ptw_map_free(&held.live);
	ptw_map_free(&held.pds);
	free_kstates(&kstates);
#define MS(a, b) ((double)((b) - (a)) / 1e6)
	ptw_dbg(PTW_DBG_TRACER,
		"snapshot of %d: %d threads; /proc read %.1f ms (seize and symbols %.1f ms "
		"meanwhile), then frozen %.1f ms: stopped and listed %.1f, registers %.1f, "
		"memory and spans %.1f, let go %.1f; unwound and named %.1f ms",
		pid, info.threads, MS(start, ns_read), MS(start, ns_loaded), MS(frozen_from, ns_free),
		MS(frozen_from, ns_listed), MS(ns_listed, ns_regs), MS(ns_regs, ns_copied),
		MS(ns_copied, ns_free), MS(ns_free, ptw_now_ns()));
#undef MS
	*ret = t;
	return 0;
}
