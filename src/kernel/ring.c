/* SPDX-License-Identifier: MIT */
/*
 * The ring buffer: the drain thread that reads it (and at once what a
 * short process's exec or fork needs from /proc), the queue it fills, and
 * the conversion of that queue on the session's thread; the run loop.
 */
#define _GNU_SOURCE
#include "kernel_int.h"

#include <sys/resource.h>
#include <sys/syscall.h>

static int drain(struct ptw_kernel *k);

/* pid's modules now: NULL if it is gone, or maps nothing (a zombie). */
static struct ptw_symbols *image_now(struct ptw_kernel *k, pid_t pid, const char *cache_dir)
{
	struct ptw_symbols *s;
	if (ptw_symbols_new(pid, k->o.use_debug_files, cache_dir, ptwk_pid_memread,
			    (void *)(intptr_t)pid, &s) < 0)
		return NULL;
	if (!ptw_symbols_module_count(s)) {
		ptw_symbols_free(s);
		return NULL;
	}
	return s;
}

/* An exec record, or main() about to run: the image's modules (and at an
 * exec its exe and command line), now. In the drain thread: nothing here
 * touches what the converting thread uses. */
static void drain_capture(struct ptw_kernel *k, struct drained *d)
{
	pid_t pid = (pid_t)d->r.tgid;
	if (d->r.kind == PTWK_MAIN && d->r.tid != d->r.tgid)
		return;
	/* With ld.so's list walked in the target ("---- modules") its
	 * memory map is not read while it runs: at its exec nothing is
	 * mapped but the program and ld.so, and at main() the list came. */
	bool listed = d->r.kind == PTWK_MAIN && ptw_map_get(&k->drain_listed, (uint64_t)pid);
	if (d->r.kind == PTWK_EXEC && k->static_exec && pid == k->pid) {
		/* A launched static program: one file, where its headers put it
		 * (ET_EXEC), the one probed. A short run may be gone before
		 * /proc could be read. */
		struct ptw_module_spec m = { .path = k->probes.path, .is_exe = true };
		char *cache_dir = k->o.use_cache ? ptw_cache_default_dir() : NULL;
		k->static_exec = false;
		if (ptw_symbols_new_listed(pid, &m, 1, k->o.use_debug_files, cache_dir,
					   ptwk_pid_memread, (void *)(intptr_t)pid, &d->syms) < 0)
			d->syms = NULL;
		else /* (and none read at main) */
			ptw_map_put(&k->drain_listed, (uint64_t)pid, (void *)1);
		free(cache_dir);
		listed = true;
	}
	if (!listed && !(d->r.kind == PTWK_EXEC && k->mods_on)) {
		char *cache_dir = k->o.use_cache ? ptw_cache_default_dir() : NULL;
		if (d->r.kind == PTWK_MAIN && k->o.main_read_delay_ms)
			ptw_sleep_ms(k->o.main_read_delay_ms);
		d->syms = image_now(k, pid, cache_dir); /* (NULL: gone already) */
		free(cache_dir);
		/* The image read is the record's: at an exec its entry point (b,
		 * from its auxv), at main() main (a) and where libc calls it (c)
		 * are in it. Else the process has exec'd again since (a fast
		 * exec chain, a drain behind) and /proc showed a later image,
		 * its files elsewhere: as one gone (the image keeps ld.so's
		 * list, or is named later; said when nothing named it). */
		if (d->syms &&
		    ((d->r.kind == PTWK_MAIN && (!ptw_symbols_module_of(d->syms, d->r.a) ||
						 !ptw_symbols_module_of(d->syms, d->r.c))) ||
		     (d->r.kind == PTWK_EXEC && d->r.b &&
		      !ptw_symbols_module_of(d->syms, d->r.b)))) {
			ptw_dbg(PTW_DBG_SYM, "process %d: the modules read are a later image's",
				pid);
			ptw_symbols_free(d->syms);
			d->syms = NULL;
		}
	}
	if (d->r.kind != PTWK_EXEC)
		return;
	/* (/proc/PID/exe does not take the memory-map lock; cmdline would.) */
	char path[64], exe[4096];
	snprintf(path, sizeof(path), "/proc/%d/exe", pid);
	ssize_t n = readlink(path, exe, sizeof(exe) - 1);
	if (n > 0) {
		exe[n] = '\0';
		d->exe = xstrdup(exe);
	}
	/* (its command line: the PTWK_EXEC_ARGS record that follows) */
}

/*
 * -f with a link per child: a child that exec'd before its links were in
 * may have gone past ld.so's list and main() unseen, where its modules
 * are read. They are read at its next record then (any but its list's:
 * it runs its code by then), as at main(): the converter takes them
 * (gap_syms). One gone by then (or a zombie: nothing mapped) has its
 * program named from its file alone, where its exec put its entry point
 * (PTWK_EXEC's auxv); its libraries stay unnamed, and said.
 */
struct gap_image {
	char *path;	/* /proc/PID/exe, else the path it was exec'd by */
	uint64_t entry; /* its AT_ENTRY (0: unknown) */
};

static void gap_forget(struct ptw_kernel *k, uint64_t pid)
{
	struct gap_image *g = ptw_map_del(&k->drain_gap_exec, pid);
	if (g) {
		free(g->path);
		free(g);
	}
}

void ptwk_gap_images_free(struct ptw_kernel *k)
{
	size_t it = 0;
	uint64_t pid;
	void *g;
	while (ptw_map_next(&k->drain_gap_exec, &it, &pid, &g)) {
		free(((struct gap_image *)g)->path);
		free(g);
	}
	ptw_map_free(&k->drain_gap_exec);
}

static void gap_exec(struct ptw_kernel *k, struct drained *d)
{
	uint64_t pid = d->r.tgid;
	if (d->r.kind != PTWK_EXEC && d->r.kind != PTWK_EXIT && !k->drain_gap_exec.count)
		return; /* (most records: no exec before its links waits for one) */
	if (d->r.kind == PTWK_EXIT && (d->r.f & PTWK_F_GROUP_DEAD)) {
		ptw_map_del(&k->drain_links_in, pid); /* (gone: nothing kept of it) */
		gap_forget(k, pid);
		return;
	}
	if (d->r.kind == PTWK_EXEC) {
		uint64_t in = (uint64_t)(uintptr_t)ptw_map_get(&k->drain_links_in, pid);
		ptw_map_del(&k->drain_links_in, pid); /* (a later exec is after them) */
		gap_forget(k, pid);
		if (in > d->r.ns) {
			struct gap_image *g = xcalloc(1, sizeof(*g));
			g->path = d->exe ? xstrdup(d->exe) : NULL;
			g->entry = d->r.b;
			ptw_map_put(&k->drain_gap_exec, pid, g);
		}
		return;
	}
	struct gap_image *g = ptw_map_get(&k->drain_gap_exec, pid);
	if (!g)
		return;
	if (d->r.kind == PTWK_MAIN ||
	    (d->r.kind == PTWK_MODULES_END && (d->r.f & PTWK_F_MODULES_WHOLE))) {
		gap_forget(k, pid); /* (seen after all) */
		return;
	}
	if (d->r.kind == PTWK_MODULE || d->r.kind == PTWK_EXEC_ARGS ||
	    d->r.kind == PTWK_MODULES_END)
		return;
	char *cache_dir = k->o.use_cache ? ptw_cache_default_dir() : NULL;
	d->syms = image_now(k, (pid_t)pid, cache_dir);
	struct ptw_module_spec m = { .path = g->path, .entry = g->entry, .is_exe = true };
	if (!d->syms && g->path && g->path[0] == '/' && g->entry &&
	    ptw_symbols_new_listed((pid_t)pid, &m, 1, k->o.use_debug_files, cache_dir,
				   ptwk_pid_memread, (void *)(intptr_t)pid, &d->syms) == 0)
		__atomic_fetch_add(&k->images_from_file, 1, __ATOMIC_RELAXED);
	else if (!d->syms) /* said with those gone before their main() */
		__atomic_fetch_add(&k->images_unread, 1, __ATOMIC_RELAXED);
	free(cache_dir);
	gap_forget(k, pid);
	d->gap_syms = d->syms != NULL;
}

int ptwk_on_record(void *ctx, void *data, size_t size)
{
	struct ptw_kernel *k = ctx;
	struct drained d = { 0 };
	if (size < sizeof(d.r))
		return 0;
	memcpy(&d.r, data, sizeof(d.r)); /* the ring's alignment is 8: copy anyway */
	/* -f, a link per child: its links before the converter sees its
	 * fork (the drain thread reads a fork as soon as it is made) */
	if (d.r.kind == PTWK_FORK && k->book && !(d.r.f & PTWK_F_UNWATCHED)) {
		if (k->o.follow_link_delay_ms)
			ptw_sleep_ms(k->o.follow_link_delay_ms);
		d.links_in_ns = ptwk_own_links(k, (pid_t)d.r.a, d.r.ns);
		ptw_map_put(&k->drain_links_in, d.r.a, (void *)(uintptr_t)d.links_in_ns);
	}
	if (d.r.kind == PTWK_EXEC)
		ptw_map_del(&k->drain_listed, d.r.tgid); /* a new image: its list to come */
	if (d.r.kind == PTWK_MODULES_END && (d.r.f & PTWK_F_MODULES_WHOLE))
		ptw_map_put(&k->drain_listed, d.r.tgid, (void *)1);
	if (d.r.kind == PTWK_MODULE && size >= sizeof(*d.module)) {
		d.module = xmalloc(sizeof(*d.module));
		memcpy(d.module, data, sizeof(*d.module));
	}
	if (d.r.kind == PTWK_EXEC_ARGS && size >= sizeof(*d.args)) {
		d.args = xmalloc(sizeof(*d.args));
		memcpy(d.args, data, sizeof(*d.args));
	}
	if (d.r.kind == PTWK_EXEC || d.r.kind == PTWK_MAIN)
		drain_capture(k, &d);
	if (k->locks && d.r.kind >= PTWK_LOCK_FIRST) {
		d.lock_record = xmalloc(size);
		memcpy(d.lock_record, data, size);
		d.lock_size = size;
	}
	if (d.r.kind == PTWK_EXEC && !d.exe && size >= sizeof(struct ptwk_exec_record)) {
		/* Gone already: the path it was exec'd by (not resolved). */
		const char *path = (const char *)data + offsetof(struct ptwk_exec_record, path);
		size_t n = strnlen(path, PTWK_PATH_LEN);
		if (n && n < PTWK_PATH_LEN) {
			d.exe = xcalloc(n + 1, 1);
			memcpy(d.exe, path, n);
		}
	}
	if (k->book) /* (after the exe's path: an exec before its links keeps it) */
		gap_exec(k, &d);
	if (k->nbatch == k->capbatch) {
		k->capbatch = k->capbatch ? k->capbatch * 2 : 256;
		k->batch = xreallocarray(k->batch, k->capbatch, sizeof(*k->batch));
	}
	k->batch[k->nbatch++] = d;
	/* (libbpf has taken this record from the ring: it is kept; the next
	 * stay there until the converter takes inq) */
	return k->inq_seen + k->nbatch >= INQ_MAX ? -ENOBUFS : 0;
}

/* What a read of the ring took, into inq (qlock held). */
static void batch_to_inq(struct ptw_kernel *k)
{
	if (k->ninq + k->nbatch > k->capinq) {
		k->capinq = k->ninq + k->nbatch + 256;
		k->inq = xreallocarray(k->inq, k->capinq, sizeof(*k->inq));
	}
	memcpy(k->inq + k->ninq, k->batch, k->nbatch * sizeof(*k->batch));
	k->ninq += k->nbatch;
	k->stats.records += k->nbatch;
	k->nbatch = 0;
}

/*
 * The drain thread: reads the ring whenever the kernel wakes it (a batch
 * is full; an exec, main() about to run, a process's end), or the
 * converting thread asks (drain_sync), into inq, reading each new image
 * at once; tells the converting thread through notify_fd. It blocks every
 * signal: the caller's signals are the caller's.
 */
static void *drainer(void *arg)
{
	struct ptw_kernel *k = arg;
	/* -f, a link per child: a fork is read, and the child linked, as soon
	 * as the kernel wakes this thread; at the default priority it waited
	 * for a CPU behind the traced processes, 0.03-2.8 ms (median about
	 * 0.5 ms for a shell's children) against 0.02-0.14 ms at -20 (a
	 * thread's own nice: nobody else's changes) */
	if (k->book && setpriority(PRIO_PROCESS, (id_t)syscall(SYS_gettid), -20) < 0)
		ptw_dbg(PTW_DBG_TRACER, "the drain thread's priority: %s", strerror(errno));
	for (;;) {
		struct epoll_event evs[2];
		int n = epoll_wait(k->drain_epfd, evs, 2, -1);
		bool woken = false;
		for (int i = 0; i < n; i++) {
			uint64_t v;
			if (evs[i].data.u32 == 0)
				woken = true;
			else if (read(k->wake_fd, &v, sizeof(v)) < 0)
				(void)v;
		}
		pthread_mutex_lock(&k->qlock);
		/* inq full: wait for the converter to take it, answering its
		 * requests meanwhile (what it asks for is as read as it gets) */
		while (k->ninq >= INQ_MAX && !k->drainer_stop) {
			k->drain_done = k->drain_req;
			pthread_cond_broadcast(&k->qcond);
			pthread_cond_wait(&k->qroom, &k->qlock);
		}
		uint64_t req = k->drain_req;
		bool stop = k->drainer_stop;
		k->inq_seen = k->ninq; /* (only this thread adds to it) */
		pthread_mutex_unlock(&k->qlock);
		if (stop)
			break;
		int got = ring_buffer__consume(k->rb);
		pthread_mutex_lock(&k->qlock);
		batch_to_inq(k);
		k->drain_done = req;
		pthread_cond_broadcast(&k->qcond);
		pthread_mutex_unlock(&k->qlock);
		if ((woken && got > 0) || got == -ENOBUFS)
			eventfd_write(k->notify_fd, 1);
	}
	pthread_mutex_lock(&k->qlock);
	k->drain_done = UINT64_MAX;
	pthread_cond_broadcast(&k->qcond);
	pthread_mutex_unlock(&k->qlock);
	return NULL;
}

int ptwk_drainer_start(struct ptw_kernel *k)
{
	k->wake_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	k->notify_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	k->drain_epfd = epoll_create1(EPOLL_CLOEXEC);
	if (k->wake_fd < 0 || k->notify_fd < 0 || k->drain_epfd < 0)
		return -errno;
	struct epoll_event ev = { .events = EPOLLIN, .data.u32 = 0 };
	if (epoll_ctl(k->drain_epfd, EPOLL_CTL_ADD, ring_buffer__epoll_fd(k->rb), &ev) < 0)
		return -errno;
	ev.data.u32 = 1;
	if (epoll_ctl(k->drain_epfd, EPOLL_CTL_ADD, k->wake_fd, &ev) < 0)
		return -errno;
	int r = ptw_thread_start(&k->drainer, 0, drainer, k);
	if (r)
		return -r;
	k->drainer_on = true;
	return 0;
}

void ptwk_drainer_stop(struct ptw_kernel *k)
{
	if (!k->drainer_on)
		return;
	pthread_mutex_lock(&k->qlock);
	k->drainer_stop = true;
	pthread_cond_broadcast(&k->qroom);
	pthread_mutex_unlock(&k->qlock);
	eventfd_write(k->wake_fd, 1);
	pthread_join(k->drainer, NULL);
	k->drainer_on = false;
}

static bool is_return(const struct ptwk_record *r, pid_t tid, uint64_t sp, uint64_t after_ns)
{
	return r->kind == PTWK_FRAME_RETURN && (pid_t)r->tid == tid && r->b == sp &&
	       r->ns >= after_ns;
}

/* What ptwk_pending looks for among the records not converted yet: thread
 * tid's slow path entered at sp (entry), or its traced call returning with
 * sp after it, at or after after_ns. */
struct wanted {
	bool entry;
	pid_t tid;
	uint64_t sp, after_ns;
};

static bool is_entry(const struct drained *d, pid_t tid, uint64_t sp)
{
	const struct ptwk_lock_record *r = d->lock_record;
	return r && d->lock_size >= sizeof(*r) && d->r.kind >= PTWK_LOCK_WAIT &&
	       d->r.kind <= PTWK_LOCK_JOIN && (pid_t)d->r.tid == tid && r->regs[7] == sp;
}

static bool is_wanted(const struct drained *d, const struct wanted *w)
{
	return w->entry ? is_entry(d, w->tid, w->sp) : is_return(&d->r, w->tid, w->sp, w->after_ns);
}

/* In the converter's queue past the record being converted, or in inq. */
static bool queued(struct ptw_kernel *k, const struct wanted *w)
{
	for (size_t i = k->converting ? k->cur + 1 : 0; i < k->nqueue; i++)
		if (is_wanted(&k->queue[i], w))
			return true;
	pthread_mutex_lock(&k->qlock);
	bool seen = false;
	for (size_t i = 0; i < k->ninq && !seen; i++)
		seen = is_wanted(&k->inq[i], w);
	pthread_mutex_unlock(&k->qlock);
	return seen;
}

/* ptwk_pending's returned and entered */
static bool queued_return(struct ptw_kernel *k, pid_t tid, uint64_t sp, uint64_t after_ns)
{
	return queued(k, &(struct wanted){ false, tid, sp, after_ns });
}

static bool queued_entry(struct ptw_kernel *k, pid_t tid, uint64_t sp)
{
	return queued(k, &(struct wanted){ true, tid, sp, 0 });
}

/* Every record in the ring now into inq (by the drain thread when it
 * runs), but when inq is full (INQ_MAX: the ring keeps the rest). */
static int ring_to_inq(struct ptw_kernel *k)
{
	int r = 0;
	if (!k->drainer_on) {
		pthread_mutex_lock(&k->qlock);
		k->inq_seen = k->ninq;
		pthread_mutex_unlock(&k->qlock);
		r = ring_buffer__consume(k->rb); /* (stopped: this thread reads) */
		r = r == -ENOBUFS ? 0 : r;
		pthread_mutex_lock(&k->qlock);
		batch_to_inq(k);
		pthread_mutex_unlock(&k->qlock);
	} else {
		pthread_mutex_lock(&k->qlock);
		uint64_t req = ++k->drain_req;
		pthread_cond_broadcast(&k->qroom);
		pthread_mutex_unlock(&k->qlock);
		eventfd_write(k->wake_fd, 1);
		pthread_mutex_lock(&k->qlock);
		while (k->drain_done < req)
			pthread_cond_wait(&k->qcond, &k->qlock);
		pthread_mutex_unlock(&k->qlock);
	}
	return r;
}

/* Every record in the ring now into inq, then inq taken into queue. */
static int drain(struct ptw_kernel *k)
{
	int r = ring_to_inq(k);
	uint64_t v;
	if (k->notify_fd >= 0 && read(k->notify_fd, &v, sizeof(v)) < 0)
		(void)v; /* (nothing to clear) */
	pthread_mutex_lock(&k->qlock);
	struct drained *q = k->queue;
	size_t cap = k->capqueue;
	k->queue = k->inq;
	k->nqueue = k->ninq;
	k->capqueue = k->capinq;
	k->inq = q;
	k->ninq = 0;
	k->capinq = cap;
	k->queue_full = k->nqueue >= INQ_MAX;
	pthread_cond_broadcast(&k->qroom);
	pthread_mutex_unlock(&k->qlock);
	return r;
}

void ptwk_drained_free(struct drained *d)
{
	if (d->syms)
		ptw_symbols_free(d->syms);
	free(d->exe);
	ptw_argv_free(d->argv);
	free(d->lock_record);
	free(d->module);
	free(d->args);
}

/* A zombie leader's anchor has ended (at ns; the BPF exit program made
 * the process blind then): its probes are tied to another thread, and what
 * came between is said. */
static void anchor_ended(struct ptw_kernel *k, uint64_t ns)
{
	pid_t old = k->anchor, next = ptwk_reanchor(k);
	uint64_t now = ptw_now_ns();
	if (next && k->mods_on && ptwk_modules_attach(k) < 0)
		k->mods_on = false; /* (dlopens then from /proc, as without it) */
	if (!next) {
		k->conv.probes_blind = true;
		ptwk_note_as(
			k, PTW_W_KERNEL_NOT_SEEN,
			"thread %d, which the probes were tied to (the main thread of %d is a "
			"zombie), ended, and no other thread was left to tie them to: from then "
			"on the process's threads are seen by the scheduler's tracepoints alone "
			"(creations and ends with routines and values, ends unclassified; no "
			"joins, waits or calls)",
			old, k->pid);
		return;
	}
	/* (threads made before now may have had calls unseen, as at a start) */
	k->conv.probes_in_ns = now;
	k->conv.probes_blind = false;
	ptwk_note_as(k, PTW_W_KERNEL_NOT_SEEN,
		     "thread %d, which the probes were tied to (the main thread of %d is a "
		     "zombie), ended: they are tied to thread %d from %.1f ms later; in between, "
		     "the process's threads were seen by the scheduler's tracepoints alone "
		     "(creations and ends, no joins, waits or calls)%s",
		     old, k->pid, next, now > ns ? (double)(now - ns) / 1e6 : 0.0,
		     k->o.ntrace ? "; --trace's probes stay tied to the thread that ended: no "
				   "call is seen since"
				 : "");
}

static void read_ring(struct ptw_kernel *k)
{
	ring_to_inq(k);
}

static const struct ptwk_pending pending = { read_ring, queued_return, queued_entry };

const struct ptwk_pending *ptwk_ring_pending(void)
{
	return &pending;
}

/* Converts what drain() took. */
static void convert_queue(struct ptw_kernel *k)
{
	k->converting = true;
	for (k->cur = 0; k->cur < k->nqueue; k->cur++) {
		struct drained *d = &k->queue[k->cur];
		struct ptw_kernel *p = ptwk_follow_process_of(k, d->r.tgid);
		if (p) {
			if (d->gap_syms && p->conv.ops.image_ready) /* (gap_exec: before a
								     * fork child borrows them) */
				p->conv.ops.image_ready(p->conv.ops.ctx);
			if (d->r.kind == PTWK_FORK && k->o.follow_forks) {
				ptwk_follow_fork(k, p, &d->r, d->links_in_ns, &pending);
				if (d->links_in_ns) /* (its own links) */
					ptwk_follow_linked(k, k->followed[k->nfollowed - 1],
							   d->links_in_ns);
			}
			if (d->r.kind == PTWK_MODULE || d->r.kind == PTWK_MODULES_END)
				ptwk_modules_record(p, d);
			else if (d->r.kind == PTWK_EXEC_ARGS)
				ptwk_exec_args_record(p, d);
			else if (d->r.kind < PTWK_LOCK_FIRST)
				ptwk_conv_record(&p->conv, &d->r);
			if (d->r.kind == PTWK_EXIT && p->anchor && (pid_t)d->r.tid == p->anchor)
				anchor_ended(p, d->r.ns);
		}
		/* (each process's waits its own: locks.c reads its memory) */
		if (p && p->locks) /* (a join's return too) */
			ptwk_locks_record(p->locks, d->lock_record ? d->lock_record : (void *)&d->r,
					  d->lock_record ? d->lock_size : sizeof(d->r));
		ptwk_drained_free(&k->queue[k->cur]);
	}
	k->converting = false;
	k->nqueue = 0;
	k->cur = 0;
}

/* --locks: what came while a deadlock was checked, read and converted. */
static void drain_more(void *ctx)
{
	struct ptw_kernel *k = ctx;
	drain(k);
	convert_queue(k);
}

int ptw_kernel_consume(struct ptw_kernel *k)
{
	if (!k->rb)
		return 0;
	if (k->libc_checks > 0 && !k->conv.ended)
		ptwk_check_libc(k);
	k->last_consume_ns = ptw_now_ns();
	ptwk_follow_check_gone(k);
	int r = drain(k);
	size_t n = k->nqueue;
	convert_queue(k);
	/* Taken at INQ_MAX: the rest of what is in the ring now, a bounded
	 * number of times (the caller's loop must run: Ctrl-C, --duration). */
	for (int i = 0; r >= 0 && k->queue_full && i < 64; i++) {
		r = drain(k);
		n += k->nqueue;
		convert_queue(k);
	}
	ptwk_underway_poll(k->underway);
	for (size_t i = 0; i < k->nfollowed; i++)
		ptwk_underway_poll(k->followed[i]->underway);
	if (r < 0)
		return r;
	if (k->locks)
		ptwk_locks_after_batch(k->locks, drain_more, k);
	for (size_t i = 0; i < k->nfollowed; i++) {
		struct ptw_kernel *c = k->followed[i];
		if (!c->locks)
			continue;
		/* (what drain_more converts may end c: its release waits) */
		c->locks_busy = true;
		ptwk_locks_after_batch(c->locks, drain_more, k);
		c->locks_busy = false;
	}
	ptwk_follow_consume(k);
	return (int)n;
}

/* Everything in the ring now, however many chunks of INQ_MAX it takes
 * (the end, the detach). */
void ptwk_consume_all(struct ptw_kernel *k)
{
	do
		ptw_kernel_consume(k);
	while (k->queue_full);
}

int ptw_kernel_fd(const struct ptw_kernel *k)
{
	return k->epfd;
}

unsigned ptw_kernel_flush_ms(const struct ptw_kernel *k)
{
	return k->o.flush_ms;
}

int ptw_kernel_run(struct ptw_kernel *k, int timeout_ms)
{
	uint64_t deadline = timeout_ms >= 0 ? ptw_now_ns() + (uint64_t)timeout_ms * 1000000 : 0;
	bool first = true; /* timeout 0: one pass that does not wait */
	while (!k->conv.ended || !ptwk_follow_ended(k)) {
		int wait = (int)k->o.flush_ms;
		if (timeout_ms >= 0) {
			uint64_t now = ptw_now_ns();
			if (now >= deadline && !first)
				return 0;
			uint64_t left = now >= deadline ? 0 : (deadline - now + 999999) / 1000000;
			if (left < (uint64_t)wait)
				wait = (int)left;
		}
		first = false;
		uint64_t due = k->last_consume_ns + (uint64_t)k->o.flush_ms * 1000000;
		uint64_t now = ptw_now_ns();
		if (due > now && (due - now) / 1000000 < (uint64_t)wait)
			wait = (int)((due - now) / 1000000) + 1;
		struct epoll_event evs[2];
		int n = epoll_wait(k->epfd, evs, 2, due > now ? wait : 0);
		if (n < 0 && errno == EINTR)
			return -EINTR;
		/* Read when the kernel woke us (a batch is full, the end) or the
		 * flush period is over: not at every timeout of the caller's. */
		if (n > 0 || ptw_now_ns() >= due) {
			int r = ptw_kernel_consume(k);
			if (r < 0)
				return r;
		}
		bool gone = false;
		for (int i = 0; i < n; i++)
			gone |= evs[i].data.u32 == 1;
		if (gone && !k->conv.ended) {
			/* The process is gone; its last records are in by now
			 * (written before its last thread left the kernel). */
			ptwk_consume_all(k);
			/* (its last thread's exit is in, another's is not: lost) */
			ptwk_conv_end_pending(&k->conv);
			if (!k->conv.ended) {
				/* Its end did not fit in the ring: say so, and end. */
				ptwk_note_as(k, PTW_W_KERNEL_EVENTS_LOST,
					     "the end of process %d was not recorded (lost)",
					     k->pid);
				struct ptw_event ev =
					ptw_event_init(PTW_EV_PROCESS_EXIT, ptw_now_ns(), k->pid);
				ev.pid = k->pid;
				k->conv.ended = true;
				k->end_lost = true; /* how it ended is unknown */
				ptwk_sink(k, &ev);
			}
		}
		if (gone && k->pidfd >= 0) {
			/* -f: followed processes may live on; the pidfd of one
			 * gone stays readable. */
			epoll_ctl(k->epfd, EPOLL_CTL_DEL, k->pidfd, NULL);
			close(k->pidfd);
			k->pidfd = -1;
		}
	}
	/* Everything watched has ended: nothing more can come. The links
	 * close (some 40 ms of the kernel's grace periods) while the caller
	 * writes its report. */
	if (k->skel && !k->detached && !k->closing)
		ptwk_close_links_start(k);
	return 1;
}

bool ptw_kernel_target_exit(const struct ptw_kernel *k, int *ret_code, int *ret_signal,
			    bool *ret_core)
{
	if (!k->conv.ended || k->end_lost)
		return false;
	if (ret_code)
		*ret_code = k->conv.exit_code;
	if (ret_signal)
		*ret_signal = k->conv.exit_signal;
	if (ret_core)
		*ret_core = k->conv.core_dumped;
	return true;
}
