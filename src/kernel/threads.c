/* SPDX-License-Identifier: MIT */
/*
 * The threads already running at an attach (libthread_db's list, named
 * from /proc), and their calls under way (--trace).
 */
#define _GNU_SOURCE
#include "kernel_int.h"
#include "ptw_underway.h"

/* ---- the threads already running ---- */

struct listed {
	pid_t tid;
	uint64_t pthread, routine;
};

struct listing {
	struct listed *v;
	size_t n, cap;
};

static void listed_add(struct listing *l, pid_t tid, uint64_t pthread, uint64_t routine)
{
	for (size_t i = 0; i < l->n; i++)
		if (l->v[i].tid == tid)
			return;
	if (l->n == l->cap) {
		l->cap = l->cap ? l->cap * 2 : 64;
		l->v = xreallocarray(l->v, l->cap, sizeof(*l->v));
	}
	l->v[l->n++] = (struct listed){ tid, pthread, routine };
}

static void on_thread(void *ctx, const struct ptw_tdb_thread *th)
{
	if (th->lid > 0)
		listed_add(ctx, th->lid, th->pthread, th->startfunc);
}

static char *comm_of(pid_t pid, pid_t tid)
{
	char path[64], buf[64];
	snprintf(path, sizeof(path), "/proc/%d/task/%d/comm", pid, tid);
	if (ptw_read_small_file(path, buf, sizeof(buf)) < 0)
		return NULL;
	buf[strcspn(buf, "\n")] = '\0';
	return xstrdup(buf);
}

/*
 * The threads libthread_db's walk did not give (it met a list changing
 * under it too often: a program that makes and ends threads without a
 * pause; or a thread on its way through pthread_create, in the list
 * before its clone gave it a tid): their pthread_t and routine from their
 * struct pthread, their TLS (ptw_glibc_tls_routine), at the fs base the
 * task iterator reads without stopping them.
 */
static void from_tls(struct ptw_kernel *k, struct listing *l)
{
	const struct ptw_pthread_layout *lay = &k->probes.layout;
	struct ptwk_uw_task *tasks = NULL;
	int n = -1;
	if (!lay->have_tid || !lay->have_start_routine || !k->skel)
		return;
	for (size_t i = 0; i < l->n; i++) {
		struct listed *t = &l->v[i];
		if (t->pthread || t->tid == k->pid)
			continue;
		if (n < 0) {
			if ((n = ptwk_read_tasks(k->skel->progs.ptw_underway_regs, k->pid,
						 &tasks)) < 0)
				return;
			/* A page cached by the walk may hold an older thread's
			 * struct pthread where this one's now is (a reused stack):
			 * read them as they are now. */
			ptw_mem_invalidate(k->proc);
		}
		for (int j = 0; j < n; j++) {
			if ((pid_t)tasks[j].tid != t->tid)
				continue;
			uint64_t pd = tasks[j].fsbase;
			if ((t->routine = ptw_glibc_tls_routine(k->proc, lay, pd, t->tid)))
				t->pthread = pd;
			break;
		}
	}
	free(tasks);
}

/*
 * libthread_db's list of threads, walked in memory while they run (a
 * list that changes under the walk is walked again; one that loops ends
 * the walk: ptw_tdb_iterate), then whatever
 * else /proc lists (raw clones, threads libthread_db cannot see). A thread
 * created from now on has its creation in the ring (the probes are in);
 * one in both is the same thread (convert.c keeps the first).
 */
void ptwk_list_threads(struct ptw_kernel *k)
{
	struct listing l = { 0 };
	uint64_t ns = ptw_now_ns();
	if (k->tdb) {
		ptw_mem_invalidate(k->proc);
		int r = ptw_tdb_iterate(k->tdb, false, on_thread, &l);
		if (r == -ELOOP)
			ptwk_note_as(k, PTW_W_THREAD_DB_ITERATION, "%s", PTW_TDB_LOOP_WARNING);
		else if (r < 0)
			ptwk_note_as(k, PTW_W_THREAD_DB_ITERATION,
				     "libthread_db could not list the threads: %s", strerror(-r));
	}
	if (k->o.list_delay_ms)
		ptw_sleep_ms(k->o.list_delay_ms);
	pid_t *tids = NULL;
	int n = ptw_proc_tids(k->pid, &tids);
	for (int i = 0; i < n; i++)
		listed_add(&l, tids[i], 0, 0);
	free(tids);
	from_tls(k, &l);
	/* The main thread first: its span is the root of the others. */
	for (size_t i = 0; i < l.n; i++)
		if (l.v[i].tid == k->pid && i) {
			struct listed t = l.v[0];
			l.v[0] = l.v[i];
			l.v[i] = t;
		}
	for (size_t i = 0; i < l.n; i++) {
		struct listed *t = &l.v[i];
		if (ptw_proc_exited(k->pid, t->tid))
			continue; /* gone meanwhile: nothing more will come of it */
		int detached = -1;
		uint64_t joinid;
		if (t->pthread && k->probes.layout.have_joinid &&
		    ptw_mem_read(k->proc, t->pthread + k->probes.layout.joinid, &joinid,
				 sizeof(joinid)) == 0)
			detached = joinid == t->pthread;
		uint64_t routine = t->tid == k->pid ? k->probes.main_addr : t->routine;
		char *name = comm_of(k->pid, t->tid);
		ptwk_conv_preexisting(&k->conv, t->tid, t->pthread, routine, detached, name, ns);
		free(name);
		(k->root ? k->root : k)->stats.preexisting++;
	}
	free(l.v);
}

static void wait_of(void *ctx, const struct user_regs_struct *regs, const uint64_t *pcs, int n,
		    struct ptw_wait_under_way *ret)
{
	ptwk_locks_wait_of(((struct ptw_kernel *)ctx)->locks, regs, pcs, n, ret);
}

/* (a -f child's thread made before its links is known once its creation
 * record is converted, after its fork's, which reads its waits: its wait
 * is kept until then, locks.c. At an attach, a thread not listed was made
 * once the probes were in: its waits are seen) */
static void wait_emit(void *ctx, pid_t tid, const struct ptwk_lock_under_way *w, uint64_t ns)
{
	struct ptw_kernel *k = ctx;
	if (!k->root && !ptwk_conv_knows(&k->conv, tid)) {
		ptw_dbg(PTW_DBG_TRACER, "--locks: %d: a wait under way of a thread not listed",
			(int)tid);
		return;
	}
	ptwk_locks_under_way(k->locks, tid, w, ns);
}

/* Every record the ring holds now among those not converted yet: a wait
 * entered before a thread was read has its entry record there. */
static void records_read(void *ctx)
{
	struct ptw_kernel *k = ctx, *root = k->root ? k->root : k;
	if (root->pending)
		root->pending->read_ring(root);
}

/* Whether the records not converted yet hold the slow path's entry record
 * of tid at sp (records_read since the thread was read). */
static bool entry_seen(void *ctx, pid_t tid, uint64_t sp)
{
	struct ptw_kernel *k = ctx, *root = k->root ? k->root : k;
	return root->pending && root->pending->entered(root, tid, sp);
}

/* -p with --trace or --locks: the calls and waits under way at the attach
 * (underway.c): the threads read before the entry probes go in. -p -f, a
 * process forked before the attach: its waits. */
void ptwk_calls_under_way(struct ptw_kernel *k)
{
	struct ptw_kernel *root = k->root ? k->root : k;
	bool calls = k->o.ntrace && !k->root;
	if ((!calls && !k->locks) || !root->skel)
		return;
	struct ptwk_underway_env env = { .pid = k->pid,
					 .live_pid = ptwk_live_pid(k),
					 .proc = k->proc,
					 .syms = k->syms,
					 .frames = calls ? k->frames : NULL,
					 .iter = root->skel->progs.ptw_underway_regs,
					 .ret = root->skel->progs.ptw_underway_return,
					 .sites = root->skel->maps.underway_sites,
					 .multi = root->multi,
					 .note = ptwk_note_line,
					 .ctx = k,
					 .wait_of = k->locks ? wait_of : NULL,
					 .wait_emit = wait_emit,
					 .entry_seen = entry_seen,
					 .records_read = records_read,
					 /* (-f: a child's, read once its links are in) */
					 .links_in = k->root && k->conv.probes_in_ns,
					 .between = k->o.underway_between,
					 .between_ctx = k->o.sink_ctx };
	k->underway = ptwk_underway_begin(&env);
}
