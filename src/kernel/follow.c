/* SPDX-License-Identifier: MIT */
/*
 * -f on the kernel path: every process the target forks is a struct
 * ptw_kernel of its own that shares the root's programs, links and ring.
 */
#define _GNU_SOURCE
#include "kernel_int.h"

static void follow_release(struct ptw_kernel *c);

/* ---- -f: the processes the target forks ---- */

/* The process a record is about: the latest followed one with that pid,
 * else the root (NULL: none of ours). */
struct ptw_kernel *ptwk_follow_process_of(struct ptw_kernel *k, uint32_t tgid)
{
	struct ptw_kernel *p = k->nfollowed ? ptw_map_get(&k->by_pid, tgid) : NULL;
	if (p)
		return p;
	return tgid == (uint32_t)k->pid ? k : NULL;
}

/* /proc/PID/cmdline as an argv (NULL: gone, unreadable or empty). */
char **ptwk_read_cmdline(pid_t pid)
{
	char **argv = ptw_proc_cmdline(pid);
	if (argv && !argv[0]) {
		free(argv);
		return NULL;
	}
	return argv;
}

/* p's image is new (an exec, or the attach): its exe and command line,
 * read now (the exec record woke us: it most likely still runs). */
void ptwk_follow_exec(struct ptw_kernel *p)
{
	char path[64];
	snprintf(path, sizeof(path), "/proc/%d/exe", p->pid);
	ssize_t n = readlink(path, p->exe, sizeof(p->exe) - 1);
	p->exe[n > 0 ? n : 0] = '\0';
	char **argv = ptwk_read_cmdline(p->pid);
	if (!argv)
		return; /* gone: the one it had (a fork child's: its parent's) */
	ptw_argv_free(p->argv);
	p->argv = argv;
}

/*
 * A watched process forked (r: its PTWK_FORK record, in ring order, before
 * anything the child did): the child is followed from here. Its memory is
 * a copy of its parent's at this moment, so it looks code up in its
 * parent's symbols (borrowed, kept whole) until it execs: it may be gone
 * by now, and loading them again for each fork would cost far more. A
 * fork child's one thread is a span at once (as the tracer's: found, begun
 * at the fork); a vfork or posix_spawn child, which runs in its parent's
 * memory, begins at its exec, as a launched command does.
 */
/* A followed process of k's (its record for the report, its converter),
 * forked by parent's thread parent_tid. */
static struct ptw_kernel *follow_new(struct ptw_kernel *k, struct ptw_kernel *parent, pid_t pid,
				     pid_t parent_tid, uint64_t ns)
{
	struct ptw_kernel *c = xcalloc(1, sizeof(*c));
	c->o = k->o;
	c->root = k;
	c->pid = pid;
	c->id = (uint32_t)k->nfollowed + 1;
	c->parent_id = parent->id;
	c->ppid = parent->pid;
	c->parent_tid = parent_tid;
	c->start_ns = ns;
	c->multi_fds[0] = c->multi_fds[1] = -1;
	c->epfd = c->pidfd = -1;
	c->wake_fd = c->notify_fd = c->drain_epfd = -1;
	/* A memory view of root's (read by pid, no descriptor of its own to
	 * hand to the caller's hook), released at its end; the one that had
	 * this pid before goes now. */
	struct ptw_kernel *old = ptw_map_get(&k->by_pid, (uint64_t)pid);
	if (old)
		follow_release(old);
	if (!k->proc || ptw_proc_follow(k->proc, pid, &c->proc) < 0)
		c->proc = ptw_proc_open(c->pid);
	struct ptwk_conv_ops ops = k->conv.ops;
	ops.ctx = c;
	ptwk_conv_init(&c->conv, c->pid, &ops);
	c->conv.process = c->id;
	if (k->locks) {
		struct ptwk_locks_env env = ptwk_locks_env_of(c);
		c->locks = ptwk_locks_follow(&env);
	}
	c->conv.main_caller_size = k->conv.main_caller_size;
	c->conv.main_caller_delta = k->conv.main_caller_delta;
	k->followed = xreallocarray(k->followed, k->nfollowed + 1, sizeof(*k->followed));
	k->followed[k->nfollowed++] = c;
	ptw_map_put(&k->by_pid, (uint64_t)c->pid, c);
	return c;
}

/* The stack the forking thread's calls under way leave in a -f child (the
 * outermost is rarely further than this above its stack pointer: past
 * it, a slot is taken on the stack pointer's word). */
#define FORK_STACK_BYTES (16 * 1024)

struct returns_of {
	struct ptw_kernel *root;
	const struct ptwk_pending *pending;
	pid_t tid;
	uint64_t since;
};

static bool returned(void *ctx, uint64_t sp)
{
	const struct returns_of *rs = ctx;
	return rs->pending->returned(rs->root, rs->tid, sp, rs->since);
}

/*
 * --trace: the child c's share of its forking thread's calls under way
 * (ptwk_frames_forked). It ran unseen until its own links were in, and
 * may have returned from some: its stack is read now (no stop: while it
 * sleeps, else one perf sample as it runs), and a call it has left since
 * has its return among the records not converted yet (those made until
 * now are read from the ring first). Read only when there are calls to
 * tell about.
 */
static void follow_frames(struct ptw_kernel *k, struct ptw_kernel *c, struct ptw_kernel *parent,
			  const struct ptwk_record *r, uint64_t links_in_ns,
			  const struct ptwk_pending *pending)
{
	if (!ptwk_frames_open(&parent->conv, (pid_t)r->tid))
		return;
	uint64_t t0 = ptw_now_ns();
	struct ptw_thread_sample sample;
	int err = links_in_ns ? ptwk_thread_stack(c->pid, c->pid, FORK_STACK_BYTES, 5, &sample)
			      : -ENOLINK;
	if (err == 0)
		pending->read_ring(k);
	struct returns_of rs = { k, pending, c->pid, links_in_ns };
	struct ptwk_fork_stack st = { 0 };
	if (err == 0)
		st = (struct ptwk_fork_stack){ sample.regs.rsp, sample.stack, sample.len, returned,
					       &rs };
	ptwk_frames_forked(&c->conv, &parent->conv, (pid_t)r->tid, r->ns, &st);
	ptw_dbg(PTW_DBG_TRACER,
		"process %d: its stack %.3f ms after its fork: %s (%zu bytes, %.3f ms)", c->pid,
		(double)(t0 - r->ns) / 1e6, err < 0 ? strerror(-err) : "read",
		err == 0 ? sample.len : 0, (double)(ptw_now_ns() - t0) / 1e6);
	if (err == 0)
		free(sample.stack);
}

void ptwk_follow_fork(struct ptw_kernel *k, struct ptw_kernel *parent, const struct ptwk_record *r,
		      uint64_t links_in_ns, const struct ptwk_pending *pending)
{
	struct ptw_kernel *c = follow_new(k, parent, (pid_t)r->a, (pid_t)r->tid, r->ns);
	memcpy(c->exe, parent->exe, sizeof(c->exe));
	c->argv = ptw_argv_dup(parent->argv);
	if (parent->syms) {
		c->syms = parent->syms;
		c->syms_borrowed = true;
		parent->syms_lent = true;
	}
	c->conv.main_addr = parent->conv.main_addr;
	c->conv.main_caller = parent->conv.main_caller;
	c->main_caller_lo = parent->main_caller_lo; /* (its memory is a copy) */
	c->main_caller_hi = parent->main_caller_hi;
	if (r->f & PTWK_F_UNWATCHED) {
		/* The watched map was full (as many processes as the machine
		 * can have at once are followed): listed, let go, said. */
		c->unfollowed_why = "the kernel path's map of followed processes was full";
		c->conv.ended = true;
		ptwk_note_as(
			k, PTW_W_PROCESS_NOT_FOLLOWED,
			"processes forked while %u were followed at once are not followed: the "
			"kernel path's map of followed processes (%u entries) was full",
			k->watch_slots, k->watch_slots);
		return;
	}
	if (r->f & PTWK_F_SHARED_VM) {
		c->launched = true;
		c->conv.launched = true;
		return;
	}
	char comm[PTWK_COMM_LEN + 1];
	memcpy(comm, r->comm, PTWK_COMM_LEN);
	comm[PTWK_COMM_LEN] = '\0';
	int detached = (r->f & PTWK_F_JOINID_KNOWN) ? (r->f & PTWK_F_DETACHED) != 0 : -1;
	ptwk_conv_forked(&c->conv, r->b, detached, comm, r->ns);
	if (k->o.ntrace)
		follow_frames(k, c, parent, r, links_in_ns, pending);
}

/*
 * A child forked while followed, its own links in since links_in_ns
 * (before, the tracepoints alone saw it). With --locks, the waits its
 * threads are in already are read as at an attach (threads.c, underway.c):
 * a child that at once locks a mutex its fork copied locked (held by a
 * thread of its parent's, none of its own) sleeps before its links are
 * in, and was not seen at all (the ptrace path sees the entry: its
 * breakpoints are copied with the child's memory). A wait it begins once
 * the links are in has its entry record, the same wait (lockconv.c).
 */
void ptwk_follow_linked(struct ptw_kernel *k, struct ptw_kernel *c, uint64_t links_in_ns)
{
	c->conv.probes_in_ns = links_in_ns;
	if (!c->locks || c->conv.ended || c->underway || ptw_proc_exited(c->pid, c->pid))
		return; /* (gone: an end read later, or a short life, in no wait now) */
	ptwk_calls_under_way(c);
	k->stats.probes += ptwk_underway_take(c->underway);
	c->conv.gap_waits += ptwk_underway_woke(c->underway);
	ptwk_underway_emit(c->underway, &c->conv, ptw_now_ns());
}

/* A followed process ended: its memory view and libthread_db go (its
 * symbols read memory by pid, or its parent's view). */
static void follow_release(struct ptw_kernel *c)
{
	if (c->locks_busy)
		return; /* (ptwk_follow_consume releases it once it has ended) */
	/* (its locks read the memory that goes: their counts stay) */
	ptwk_tally_locks(c->locks, &c->root->released);
	ptwk_locks_free(c->locks);
	c->locks = NULL;
	ptwk_underway_close(c->underway); /* (its return sites' probes) */
	ptw_tdb_free(c->tdb);
	c->tdb = NULL;
	if (c->proc)
		ptw_proc_free(c->proc);
	c->proc = NULL;
}

/* Whether every followed process has ended. */
bool ptwk_follow_ended(struct ptw_kernel *k)
{
	for (size_t i = 0; i < k->nfollowed; i++)
		if (!k->followed[i]->conv.ended)
			return false;
	return true;
}

/* Before a read of the ring, once the root has ended: which followed
 * processes are gone (their end, if recorded, is in the ring by now: the
 * exit tracepoint runs before a task is a zombie). */
void ptwk_follow_check_gone(struct ptw_kernel *k)
{
	if (!k->conv.ended)
		return;
	for (size_t i = 0; i < k->nfollowed; i++) {
		struct ptw_kernel *c = k->followed[i];
		if (!c->conv.ended && !c->end_lost && ptw_proc_exited(c->pid, c->pid))
			c->end_lost = true; /* unless its record is read now */
	}
}

/* After a read of the ring: the libc checks of exec'd children, and the
 * ends that were not recorded. */
void ptwk_follow_consume(struct ptw_kernel *k)
{
	for (size_t i = 0; i < k->nfollowed; i++) {
		struct ptw_kernel *c = k->followed[i];
		if (c->libc_checks > 0 && !c->conv.ended)
			ptwk_check_libc(c);
		if (c->conv.ended)
			follow_release(c);
		if (c->end_lost && ptwk_conv_end_pending(&c->conv))
			follow_release(c); /* (its last thread's exit was in) */
		if (!c->end_lost || c->conv.ended) {
			c->end_lost = false;
			continue;
		}
		ptwk_note_as(k, PTW_W_KERNEL_EVENTS_LOST,
			     "the end of process %d was not recorded (lost)", c->pid);
		struct ptw_event ev = ptw_event_init(PTW_EV_PROCESS_EXIT, ptw_now_ns(), c->pid);
		ev.pid = c->pid;
		ev.process = c->id;
		c->conv.ended = true;
		c->conv.end_ns = ev.ns;
		ptwk_sink(c, &ev);
	}
}

/* -p -f: a process the target had forked (or one of theirs) running at the
 * attach: watched, then its threads listed as the target's were (its own
 * symbols and libthread_db). Its records before it is watched are lost:
 * it ran unwatched until now. */
static void follow_attached(struct ptw_kernel *k, struct ptw_kernel *parent, pid_t pid,
			    pid_t parent_tid)
{
	struct ptw_kernel *c = follow_new(k, parent, pid, parent_tid, ptw_now_ns());
	ptwk_follow_exec(c);
	if (ptwk_load_symbols(c) < 0) {
		ptwk_note_as(k, PTW_W_KERNEL_NOT_SEEN,
			     "process %d (forked before the attach) has gone or cannot be read",
			     pid);
		return;
	}
	td_err_e err;
	if (ptw_tdb_new(c->proc, c->syms, &c->tdb, &err) < 0)
		c->tdb = NULL;
	c->probes.layout = k->probes.layout;
	if (ptw_symbols_lookup(c->syms, PTW_MOD_EXE, "main", &c->probes.main_addr, NULL) < 0)
		c->probes.main_addr = ptw_symbols_main_from_entry(c->syms, ptwk_pid_memread,
								  (void *)(intptr_t)pid,
								  ptw_proc_auxv(pid, AT_ENTRY));
	c->conv.main_addr = c->probes.main_addr;
	ptwk_calls_under_way(c); /* (--locks: its waits under way) */
	uint32_t key = (uint32_t)pid;
	struct ptwk_watch w = { .follow_forks = 1, .root = 0 };
	if (bpf_map__update_elem(k->skel->maps.watched, &key, sizeof(key), &w, sizeof(w), BPF_ANY) <
	    0)
		ptwk_note_as(k, PTW_W_KERNEL_NOT_SEEN,
			     "process %d (forked before the attach) cannot be watched: %s", pid,
			     strerror(errno));
	else if (k->book)
		c->conv.probes_in_ns = ptwk_own_links(k, pid, c->start_ns);
	k->stats.probes += ptwk_underway_take(c->underway);
	ptwk_list_threads(c);
	ptwk_underway_emit(c->underway, &c->conv, c->start_ns);
	c->libc_checks = 1; /* the probes are on the target's libc: does it map that one */
}

void ptwk_follow_descendants(struct ptw_kernel *k)
{
	/* Breadth first from the target. One forked meanwhile by a process
	 * already watched is in the ring (its fork record); by one not yet
	 * watched, found by the walk. */
	pid_t *queue = xcalloc(1, sizeof(*queue));
	size_t nq = 0, head = 0;
	queue[nq++] = k->pid;
	while (head < nq && nq < 65536) {
		pid_t p = queue[head++];
		pid_t *kids = NULL, *tids = NULL;
		size_t n = ptw_proc_children(p, &kids, &tids, 0);
		struct ptw_kernel *parent = ptwk_follow_process_of(k, (uint32_t)p);
		for (size_t i = 0; i < n && parent; i++) {
			if (ptw_map_get(&k->by_pid, (uint64_t)kids[i]))
				continue;
			follow_attached(k, parent, kids[i], tids[i]);
			queue = xreallocarray(queue, nq + 1, sizeof(*queue));
			queue[nq++] = kids[i];
		}
		free(kids);
		free(tids);
	}
	free(queue);
}
