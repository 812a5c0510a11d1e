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
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "ptw_waits.h"
#include "tracer_internal.h"

#define MAX_FRAMES 48
#define STOP_DEADLINE_MS 1000

/* What /proc says about a thread while it still runs. */
struct kstate {
	char state;	 /* R, S, D, T, t, Z */
	char wchan[64];
	long syscall;	 /* -1: not in a syscall (or running) */
	uint64_t args[6];
	char *name;
};

static void read_kstate(pid_t pid, pid_t tid, struct kstate *k)
{
	char path[64], buf[512];
	k->syscall = -1;
	k->wchan[0] = '\0';
	k->state = ptw_proc_state(pid, tid);
	if (!k->state)
		k->state = '?';
	snprintf(path, sizeof(path), "/proc/%d/task/%d/wchan", pid, tid);
	if (ptw_read_small_file(path, k->wchan, sizeof(k->wchan)) > 0 && !strcmp(k->wchan, "0"))
		k->wchan[0] = '\0';
	/* "202 0xADDR 0x80 ..." blocked in futex, "running", or "-1 sp pc" */
	snprintf(path, sizeof(path), "/proc/%d/task/%d/syscall", pid, tid);
	if (ptw_read_small_file(path, buf, sizeof(buf)) > 0 && buf[0] != 'r') {
		char *p = buf;
		k->syscall = strtol(p, &p, 10);
		for (int i = 0; i < 6 && k->syscall >= 0; i++)
			k->args[i] = strtoull(p, &p, 16);
	}
	snprintf(path, sizeof(path), "/proc/%d/task/%d/comm", pid, tid);
	if (ptw_read_small_file(path, buf, sizeof(buf)) > 0) {
		buf[strcspn(buf, "\n")] = '\0';
		k->name = xstrdup(buf);
	}
}

/* The kernel's view of every thread before we seize any: once seized, a
 * group-stopped thread shows as "tracing stop" instead of "stopped". */
static void read_kstates(pid_t pid, struct ptw_map *kstates)
{
	pid_t *tids;
	int n = ptw_proc_tids(pid, &tids);
	for (int i = 0; i < n; i++) {
		if (ptw_map_get(kstates, (uint64_t)tids[i]))
			continue;
		struct kstate *k = xcalloc(1, sizeof(*k));
		read_kstate(pid, tids[i], k);
		ptw_map_put(kstates, (uint64_t)tids[i], k);
	}
	free(tids);
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

/* The thread whose struct pthread is pd, if we hold it. */
static pid_t tid_of_pd(struct ptw_tracer *t, uint64_t pd)
{
	size_t it = 0;
	void *v;
	while (ptw_map_next(&t->proc->lwps, &it, NULL, &v)) {
		struct ptw_lwp *l = v;
		struct thread *th = l->user;
		if (th && th->pd == pd)
			return l->tid;
	}
	return 0;
}

static bool live_tid(struct ptw_tracer *t, int32_t tid)
{
	struct ptw_lwp *l = tid > 0 ? ptw_lwp_get(t->proc, tid) : NULL;
	return l && l->state != PTW_LWP_GONE;
}

/* Object and owner of a futex wait, now that we know its kind. */
static void wait_target(struct ptw_tracer *t, struct ptw_event *ev, uint64_t futex,
			uint32_t tid_off, bool have_tid_off)
{
	int32_t v;
	switch (ev->wait_kind) {
	case PTW_WAIT_MUTEX:
		/* __lll_lock_wait(&mutex->__lock): the mutex starts there. */
		ev->wait_object = futex;
		if (ptw_mem_read(t->proc, futex + PTW_MUTEX_OWNER, &v, sizeof(v)) == 0 &&
		    live_tid(t, v))
			ev->wait_owner = v;
		break;
	case PTW_WAIT_JOIN:
		/* A joiner sleeps on the joined thread's pd->tid. */
		if (have_tid_off) {
			ev->wait_object = futex - tid_off;
			ev->wait_owner = tid_of_pd(t, ev->wait_object);
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
			if (ptw_mem_read(t->proc, bases[i] + PTW_RWLOCK_CUR_WRITER, &v, sizeof(v)) == 0 &&
			    live_tid(t, v)) {
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

static void record(struct ptw_tracer *t, struct ptw_lwp *l, const struct kstate *k,
		   uint32_t tid_off, bool have_tid_off, uint64_t ns)
{
	struct image *img = &t->img;
	attach_emit_preexisting(t, l, k->name, ns);

	struct ptw_event st = ptw_event_init(PTW_EV_THREAD_STATE, ns, l->tid);
	char state[64];
	state_text(k, state, sizeof(state));
	st.state = state;
	st.wchan = k->wchan[0] ? k->wchan : NULL;
	const struct ptw_location *locs[MAX_FRAMES];
	const char *names[MAX_FRAMES];
	struct user_regs_struct *regs;
	if (img->syms && l->state == PTW_LWP_STOPPED && ptw_getregs(t->proc, l, &regs) == 0) {
		uint64_t pcs[MAX_FRAMES];
		int n = ptw_symbols_unwind(img->syms, l->tid, regs, pcs, MAX_FRAMES);
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
		wait_target(t, &st, k->args[0], tid_off, have_tid_off);
	}
	emit(t, &st);
}

int ptw_tracer_snapshot(const struct ptw_tracer_opts *o, pid_t pid, struct ptw_tracer **ret)
{
	struct ptw_proc *proc;
	struct ptw_seize_info info;
	uint64_t start = ptw_now_ns();
	struct ptw_map kstates = { 0 };
	read_kstates(pid, &kstates);
	int r = ptw_seize(pid, &proc, &info);
	if (r < 0) {
		free_kstates(&kstates);
		return r;
	}
	struct ptw_tracer *t = attached_tracer_new(o, proc, &info, start, true);
	r = ptw_bptab_new(proc, &t->bps);
	if (r < 0) {
		free_kstates(&kstates);
		ptw_tracer_detach(t);
		ptw_tracer_free(t);
		return r;
	}
	bool have_tdb = image_load(t) == 0 && tdb_open(t) == 0;
	/* threads born since the first reading: still running, still true */
	read_kstates(pid, &kstates);

	uint64_t frozen_from = ptw_now_ns();
	int stuck = attach_stop_all(t, ": no stack for them");
	uint32_t tid_off = 0;
	bool have_tid_off = false;
	if (have_tdb) {
		attach_list_threads(t, stuck);
		have_tid_off = ptw_tdb_pthread_field(t->img.tdb, "tid", &tid_off) == 0;
	}

	uint64_t ns = ptw_now_ns();
	struct kstate none = { .state = '?', .syscall = -1 };
	size_t nthreads;
	struct ptw_lwp **threads = attach_threads(t, &nthreads);
	for (size_t i = 0; i < nthreads; i++) {
		struct kstate *k = ptw_map_get(&kstates, (uint64_t)threads[i]->tid);
		record(t, threads[i], k ? k : &none, tid_off, have_tid_off, ns);
	}
	free(threads);
	free_kstates(&kstates);
	t->frozen_ns += ptw_now_ns() - frozen_from;
	ptw_dbg(PTW_DBG_TRACER, "snapshot of %d: %d threads, frozen %.3f ms before detach", pid,
		info.threads, (double)t->frozen_ns / 1e6);
	*ret = t;
	return 0;
}
