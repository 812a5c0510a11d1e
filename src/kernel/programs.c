/* SPDX-License-Identifier: MIT */
/*
 * The BPF programs: the skeleton opened and sized; the probes of a
 * process's libc and the tracepoints linked (links.c puts each in), and
 * closed in the background (closer.c).
 */
#define _GNU_SOURCE
#include "kernel_int.h"

/* A number from a /proc/sys file, else 0. */
static unsigned long sysctl_number(const char *path)
{
	char buf[32];
	if (ptw_read_small_file(path, buf, sizeof(buf)) < 0)
		return 0;
	char *end;
	errno = 0;
	unsigned long v = strtoul(buf, &end, 10);
	return errno || end == buf ? 0 : v;
}

/* As many tasks as this machine can have at once: pid_max bounds them,
 * and threads-max (kernel.threads-max). 4096 to 4 Mi. */
static uint32_t machine_tasks(void)
{
	unsigned long n = sysctl_number("/proc/sys/kernel/pid_max");
	unsigned long t = sysctl_number("/proc/sys/kernel/threads-max");
	if (!n || (t && t < n))
		n = t;
	if (n < 4096)
		n = 4096;
	return n > (4ul << 20) ? 4u << 20 : (uint32_t)n;
}

struct ptw_kernel_bpf *ptwk_skeleton_open(bool no_min_btf, int *btf_fd, const char **btf)
{
	/* CO-RE against the BTF made at build time for this very kernel
	 * (minbtf.h), else the kernel's own (parsed whole by libbpf). */
	char btf_path[64];
	const char *why_not = "not tried";
	*btf_fd = no_min_btf ? -1 : ptwk_min_btf_open(btf_path, sizeof(btf_path), &why_not);
	LIBBPF_OPTS(bpf_object_open_opts, oo, .btf_custom_path = *btf_fd >= 0 ? btf_path : NULL);
	*btf = *btf_fd >= 0 ? "minimal (made at build time for this kernel)" : "the kernel's";
	ptw_dbg(PTW_DBG_TRACER, "CO-RE: %s BTF%s%s", *btf, *btf_fd >= 0 ? "" : "; minimal: ",
		*btf_fd >= 0 ? "" : why_not);
	struct ptw_kernel_bpf *s = ptw_kernel_bpf__open_opts(&oo);
	if (!s) {
		int e = errno ? errno : ENOMEM;
		if (*btf_fd >= 0)
			close(*btf_fd);
		*btf_fd = -1;
		errno = e;
		return NULL;
	}
	struct stat ns;
	if (stat("/proc/self/ns/pid", &ns) == 0 && ns.st_ino != PROC_PID_INIT_INO) {
		/* a container: every pid in its namespace, as ptwatch sees them */
		s->rodata->pidns_on = 1;
		s->rodata->pidns_dev = ns.st_dev;
		s->rodata->pidns_ino = ns.st_ino;
	}
	return s;
}

struct ptwk_ring_maker {
	pthread_t th;
	uint32_t bytes;
	int fd; /* or -errno */
};

static void *make_ring(void *arg)
{
	struct ptwk_ring_maker *m = arg;
	m->fd = bpf_map_create(BPF_MAP_TYPE_RINGBUF, "rb", 0, 0, m->bytes, NULL);
	if (m->fd < 0)
		m->fd = -errno;
	return NULL;
}

struct ptwk_ring_maker *ptwk_ring_start(uint32_t bytes)
{
	struct ptwk_ring_maker *m = xcalloc(1, sizeof(*m));
	m->bytes = bytes;
	if (ptw_thread_start(&m->th, 64 * 1024, make_ring, m) != 0) {
		free(m);
		return NULL;
	}
	return m;
}

/* The ring made (its descriptor, the caller's), or -errno; m freed. */
static int ring_take(struct ptwk_ring_maker *m)
{
	if (!m)
		return -ENOENT;
	pthread_join(m->th, NULL);
	int fd = m->fd;
	free(m);
	return fd;
}

void ptwk_ring_drop(struct ptwk_ring_maker *m)
{
	int fd = ring_take(m);
	if (fd >= 0)
		close(fd);
}

int ptwk_open_skeleton(struct ptw_kernel *k, bool multi)
{
	int btf_fd;
	struct ptw_kernel_bpf *s = ptwk_skeleton_open(k->o.no_min_btf, &btf_fd, &k->stats.btf);
	if (!s)
		return -errno;
	const struct ptw_pthread_layout *l = &k->probes.layout;
	/* --trace: caught signals' deliveries (a signal handler that is not
	 * traced: what it calls carries its signal) */
	s->rodata->trace_signals = k->o.ntrace != 0;
	s->rodata->off_result = l->result;
	s->rodata->have_result = l->have_result;
	s->rodata->off_joinid = l->joinid;
	s->rodata->have_joinid = l->have_joinid;
	s->rodata->off_start_routine = l->start_routine;
	s->rodata->have_start_routine = l->have_start_routine;
	s->rodata->off_arg = l->arg;
	s->rodata->have_arg = l->have_arg;
	s->rodata->off_cancelhandling = l->cancelhandling;
	s->rodata->have_cancelhandling = l->have_cancelhandling;
	s->rodata->exiting_mask = PTW_GLIBC_EXITING_BITMASK;
	s->rodata->canceled_mask = PTW_GLIBC_CANCELED_BITMASK;
	s->rodata->off_pd_tid = l->tid;
	s->rodata->have_pd_tid = l->have_tid;
	s->rodata->wake_bytes = k->o.wake_bytes;
	s->rodata->rdebug_from_probe = k->rdebug_from_probe;
	s->rodata->wake_on_fork = k->o.follow_forks && !k->o.follow_file_wide && multi;
	s->rodata->locks_on = k->locks_config.on;
	s->rodata->join_always_blocks = k->locks_config.join_always_blocks;
	s->rodata->have_tid = k->locks_config.have_tid;
	s->rodata->off_tid = k->locks_config.off_tid;
	int r = bpf_map__set_max_entries(s->maps.rb, (uint32_t)k->o.ring_bytes);
	/* the ring made meanwhile, fresh (the first skeleton's only: a second,
	 * loaded after the first failed, gets one of its own) */
	int ring = ring_take(k->ring_maker);
	k->ring_maker = NULL;
	if (r == 0 && ring >= 0)
		r = bpf_map__reuse_fd(s->maps.rb, ring);
	if (ring >= 0)
		close(ring); /* (the skeleton holds its own descriptor of it) */
	/* -f: as many processes as the machine can have at once; in a PID
	 * namespace, a tid for every thread of theirs (no_prealloc maps:
	 * their buckets, 16 bytes each, are what is paid up front) */
	uint32_t tasks = machine_tasks();
	k->watch_slots = k->o.follow_forks ? tasks : 4096;
	k->ns_tid_slots = s->rodata->pidns_on ? tasks : 1;
	if (r == 0)
		r = bpf_map__set_max_entries(s->maps.watched, k->watch_slots);
	if (r == 0)
		r = bpf_map__set_max_entries(s->maps.ns_tids, k->ns_tid_slots);
	if (r == 0) /* (a thread each, while it lives: one per task) */
		r = bpf_map__set_max_entries(s->maps.gap_tids, k->o.follow_forks ? tasks : 1);
	if (r == 0 && multi) {
		r = bpf_program__set_expected_attach_type(
			s->progs.ptw_entry, (enum bpf_attach_type)PTWK_BPF_TRACE_UPROBE_MULTI);
		if (r == 0)
			r = bpf_program__set_expected_attach_type(
				s->progs.ptw_return,
				(enum bpf_attach_type)PTWK_BPF_TRACE_UPROBE_MULTI);
	}
	/* --trace's (kframes.c) */
	struct bpf_program *frame_progs[] = { s->progs.ptw_frame_entry, s->progs.ptw_frame_return,
					      s->progs.ptw_frame_exit,
					      s->progs.ptw_frame_helper };
	/* an attach's task iterator: calls under way (underway.c), and the
	 * fs base of threads libthread_db's walk did not give (threads.c) */
	/* (--locks -f: and of a child forked while followed, whose waits
	 * begun before its own links are read so: follow.c) */
	bool child_waits = k->o.locks && k->o.follow_forks;
	if (r == 0 && k->launched && !child_waits)
		r = bpf_program__set_autoload(s->progs.ptw_underway_regs, false);
	/* (and the returns of code a traced function jumped into; --locks:
	 * of the waits under way at an attach, or in a child) */
	bool return_sites = k->o.ntrace || (k->o.locks && (!k->launched || child_waits));
	if (r == 0 && !return_sites)
		r = bpf_program__set_autoload(s->progs.ptw_underway_return, false);
	else if (r == 0 && multi)
		r = bpf_program__set_expected_attach_type(
			s->progs.ptw_underway_return,
			(enum bpf_attach_type)PTWK_BPF_TRACE_UPROBE_MULTI);
	/* (and their maps: a hash map's buckets are paid up front, 1 MiB each
	 * here, about a millisecond of the start-up) */
	if (r == 0 && !k->o.ntrace)
		r = bpf_map__set_autocreate(s->maps.frame_jumps, false);
	if (r == 0 && !return_sites)
		r = bpf_map__set_autocreate(s->maps.underway_sites, false);
	for (size_t i = 0; i < PTW_ARRAY_SIZE(frame_progs) && r == 0; i++)
		if (!k->o.ntrace)
			r = bpf_program__set_autoload(frame_progs[i], false);
		else if (multi)
			r = bpf_program__set_expected_attach_type(
				frame_progs[i], (enum bpf_attach_type)PTWK_BPF_TRACE_UPROBE_MULTI);
	/* (machine-wide tracepoints: loaded only when they start threads) */
	s->rodata->start_at_clone = k->start_at_clone;
	if (r == 0 && !k->start_at_clone && !s->rodata->wake_on_fork)
		r = bpf_program__set_autoload(s->progs.ptw_clone_exit, false);
	if (r == 0)
		r = !k->mods_on ? bpf_program__set_autoload(s->progs.ptw_modules, false)
		    : multi	? bpf_program__set_expected_attach_type(
					  s->progs.ptw_modules,
					  (enum bpf_attach_type)PTWK_BPF_TRACE_UPROBE_MULTI)
			    : 0;
	if (r == 0)
		r = ptw_kernel_bpf__load(s);
	if (btf_fd >= 0)
		close(btf_fd);
	if (r < 0) {
		ptw_kernel_bpf__destroy(s);
		return r;
	}
	k->skel = s;
	return 0;
}

static void keep_link(struct ptw_kernel *k, struct bpf_link *l)
{
	k->links = xreallocarray(k->links, k->nlinks + 1, sizeof(*k->links));
	k->links[k->nlinks++] = l;
}

/*
 * Which processes the uprobes are in. A uprobe for one process
 * (per-pid uprobe_multi, or a perf uprobe with a pid) filters by that
 * process's memory (mm), so nothing else on the machine hits it. With -f
 * each followed process gets links of its own too (the book, links.h),
 * made by the drain thread as soon as its fork record is read: the child
 * runs meanwhile (0.1-1 ms here), and what it does then comes from the
 * scheduler's tracepoints (bpf/ptw_kernel.bpf.c: ptwk_watch) and
 * is counted (report.c). A link follows its process through an exec (the
 * filter is the task's memory of the moment): the new image's libc is
 * probed as it is mapped. The probes are on a file for every process that
 * maps it (pid 0 / -1, the BPF programs keeping the watched tgids) only
 * where a link for one process cannot work: -f on a kernel without
 * uprobe_multi, or with follow_file_wide (measuring: bench/kfollow.py); a
 * zombie leader's are tied to a live thread instead (below; -f on it is
 * refused, kernel.c: zombie_anchor).
 */
bool ptw_kernel_probes_everywhere(const struct ptw_kernel *k)
{
	return ptwk_probe_pid(k) <= 0;
}

bool ptwk_links_per_child(const struct ptw_kernel *k)
{
	/* (a link per child needs uprobe_multi: without it, the file's) */
	return k->o.follow_forks && !k->o.follow_file_wide && k->multi;
}

uint64_t ptwk_own_links(struct ptw_kernel *k, pid_t pid, uint64_t since)
{
	uint64_t t0 = ptw_now_ns();
	int r = ptwk_book_link_pid(k->book, pid, since);
	if (r < 0 && !ptw_proc_exited(pid, pid)) {
		/* (a set refused while the process runs on, seen during its
		 * exec: once more, whole) */
		ptw_dbg(PTW_DBG_TRACER, "links for %d: %s; again", (int)pid, strerror(-r));
		ptwk_book_forget(k->book, pid, since);
		r = ptwk_book_link_pid(k->book, pid, since);
	}
	uint64_t now = ptw_now_ns();
	ptw_dbg(PTW_DBG_TRACER, "process %d: its fork read %.3f ms after it, linked in %.3f ms",
		(int)pid, since && t0 > since ? (double)(t0 - since) / 1e6 : 0.0,
		(double)(now - t0) / 1e6);
	if (r < 0 && !ptw_proc_exited(pid, pid)) {
		/* its threads stay seen by the tracepoints alone: said when its
		 * end is converted (report.c) */
		ptw_dbg(PTW_DBG_TRACER, "links for %d: %s", (int)pid, strerror(-r));
		__atomic_fetch_add(&k->links_failed, 1, __ATOMIC_RELAXED);
		return now;
	}
	ptwk_watch_probed(k, pid, true);
	return now;
}

void ptwk_watch_probed(struct ptw_kernel *k, pid_t pid, bool probed)
{
	struct ptw_kernel *root = k->root ? k->root : k;
	uint32_t key = (uint32_t)pid;
	struct ptwk_watch w;
	if (!root->skel ||
	    bpf_map__lookup_elem(root->skel->maps.watched, &key, sizeof(key), &w, sizeof(w), 0) < 0)
		return; /* (gone) */
	if (probed) {
		w.unlinked = 0; /* (its links are in) */
	} else {
		w.blind = 1;
		if (k->pid == pid)
			k->conv.probes_blind = true;
	}
	(void)bpf_map__update_elem(root->skel->maps.watched, &key, sizeof(key), &w, sizeof(w),
				   BPF_EXIST);
}

pid_t ptwk_oldest_thread(pid_t pid, pid_t except)
{
	pid_t *tids = NULL, oldest = 0;
	int n = ptw_proc_tids(pid, &tids);
	for (int i = 0; i < n; i++)
		if (tids[i] != pid && tids[i] != except && !ptw_proc_exited(pid, tids[i]) &&
		    (!oldest || tids[i] < oldest))
			oldest = tids[i];
	free(tids);
	return oldest;
}

pid_t ptwk_live_pid(const struct ptw_kernel *k)
{
	return k->anchor ? k->anchor : k->pid;
}

pid_t ptwk_probe_pid(const struct ptw_kernel *k)
{
	/* A uprobe_multi link for a pid filters by its leader's memory: once
	 * the leader has exited (pthread_exit from main, a zombie now) it
	 * has none, and nothing would fire: a live thread's perf events then
	 * (kernel.c: zombie_anchor). */
	if (k->o.follow_forks && !ptwk_links_per_child(k))
		return -1;
	return ptwk_live_pid(k);
}

/*
 * The order the kernel puts the probes in (a link registers its offsets one
 * by one, each a walk over the processes that map libc: milliseconds, in
 * which the target runs on). What ends a thread goes in before what starts
 * one, and a creation last: a thread whose creation was seen has its start
 * and end seen. Before the first, a thread is a clone without a routine;
 * DEATH itself says whether its unwinding was pthread_exit's.
 */
static int probe_rank(enum ptwk_kind kind)
{
	switch (kind) {
	case PTWK_DEATH:
		return 0;
	case PTWK_START:
		return 1;
	case PTWK_CREATE_CALL:
		return 3;
	default:
		return 2;
	}
}

/* One link per program with every offset (return, then entry: a join whose
 * call is seen has its return seen). */
int ptwk_attach_multi_to(struct ptw_kernel *k, uint32_t pid, int fds[2], bool keep)
{
	for (int ret = 1; ret >= 0; ret--) {
		uint64_t offsets[PTWK_MAX_PROBES], cookies[PTWK_MAX_PROBES];
		uint32_t n = 0;
		for (int rank = 0; rank <= 3; rank++)
			for (size_t i = 0; i < k->probes.n; i++) {
				if (k->probes.p[i].ret != (ret == 1) ||
				    probe_rank(k->probes.p[i].kind) != rank)
					continue;
				offsets[n] = k->probes.p[i].offset;
				cookies[n++] = k->probes.p[i].kind;
			}
		if (!n)
			continue;
		struct ptwk_uprobe_set s = {
			.prog = ret ? k->skel->progs.ptw_return : k->skel->progs.ptw_entry,
			.path = k->probes.path,
			.offsets = offsets,
			.cookies = cookies,
			.n = n,
			.ret = ret,
			.pid = (pid_t)pid, /* 0: every process */
			.book = keep ? k->book : NULL,
			.rank = ret ? PTWK_RANK_RETURNS : PTWK_RANK_THREADS,
		};
		int fd = ptwk_link_multi(&s);
		if (fd < 0)
			return fd;
		fds[ret] = fd;
	}
	return 0;
}

int ptwk_attach_multi(struct ptw_kernel *k)
{
	int r = ptwk_attach_multi_to(k, ptwk_probe_pid(k) < 0 ? 0 : (uint32_t)k->pid, k->multi_fds,
				     true);
	if (r == 0)
		k->stats.probes += (unsigned)k->probes.n;
	return r;
}

/* The fallback: a perf event per probe, for this pid. */
int ptwk_attach_each(struct ptw_kernel *k)
{
	for (size_t i = 0; i < k->probes.n; i++) {
		const struct ptwk_probe *p = &k->probes.p[i];
		LIBBPF_OPTS(bpf_uprobe_opts, opts, .retprobe = p->ret, .bpf_cookie = p->kind);
		struct bpf_program *prog =
			p->ret ? k->skel->progs.ptw_return : k->skel->progs.ptw_entry;
		struct bpf_link *l = bpf_program__attach_uprobe_opts(
			prog, ptwk_probe_pid(k), k->probes.path, (size_t)p->offset, &opts);
		if (!l)
			return -errno;
		keep_link(k, l);
		k->stats.probes++;
	}
	return 0;
}

/*
 * A zombie leader's anchor has ended (its probes fire no more: their perf
 * events filtered by its memory): the oldest live thread left becomes the
 * anchor, with probes of its own (lifecycle and --locks'; ld.so's are the
 * caller's, ldlist.c), and the process is no longer blind. The old links
 * are inert: they go at the detach with the others (a perf uprobe's close
 * waits for a grace period, here, in the middle of the session, for
 * each). --trace's links stay the old anchor's (said). Returns the new
 * anchor, 0 if none (or its probes could not be made: it stays blind).
 */
pid_t ptwk_reanchor(struct ptw_kernel *k)
{
	pid_t old = k->anchor, next = ptwk_oldest_thread(k->pid, old);
	if (!next || !k->skel || k->detached)
		return 0;
	k->anchor = next;
	if (k->mods_link) { /* (ld.so's, tied to the old anchor) */
		keep_link(k, k->mods_link);
		k->mods_link = NULL;
	}
	int r = ptwk_attach_each(k);
	uint32_t key = (uint32_t)k->pid;
	struct ptwk_watch w;
	if (r == 0 &&
	    bpf_map__lookup_elem(k->skel->maps.watched, &key, sizeof(key), &w, sizeof(w), 0) == 0) {
		w.anchor = (uint32_t)next;
		w.blind = 0;
		if (bpf_map__update_elem(k->skel->maps.watched, &key, sizeof(key), &w, sizeof(w),
					 BPF_EXIST) < 0)
			r = -errno;
	} else if (r == 0) {
		r = -ESRCH;
	}
	ptw_dbg(PTW_DBG_TRACER, "anchor %d ended: probes tied to %d: %s", (int)old, (int)next,
		r < 0 ? strerror(-r) : "in");
	return r < 0 ? 0 : next;
}

/* Thread starts at the clone's return (bpf/ptw_start.bpf.h: the raw
 * sys_exit tracepoint, no tracefs needed). Without it no start is seen:
 * said, not fatal. */
static void attach_clone_exits(struct ptw_kernel *k)
{
	struct bpf_link *l = bpf_program__attach(k->skel->progs.ptw_clone_exit);
	if (!l) {
		int e = errno;
		k->start_at_clone = false;
		if (k->probes.missing_start)
			ptwk_note_as(k, PTW_W_HOOK_FAILED,
				     "%s (and the raw sys_exit tracepoint: %s)",
				     k->probes.missing[k->probes.missing_start - 1], strerror(e));
		return;
	}
	keep_link(k, l);
}

int ptwk_attach_tracepoints(struct ptw_kernel *k)
{
	struct bpf_program *progs[] = { k->skel->progs.ptw_fork, k->skel->progs.ptw_exit,
					k->skel->progs.ptw_exec, k->skel->progs.ptw_signal,
					k->skel->progs.ptw_signal_sent };
	for (size_t i = 0; i < PTW_ARRAY_SIZE(progs); i++) {
		struct bpf_link *l = bpf_program__attach(progs[i]);
		if (!l)
			return -errno;
		keep_link(k, l);
	}
	/* a dead thread's last switch: its final CPU accounting (without
	 * it, the exit tracepoint's, up to a tick short) */
	struct bpf_link *l = bpf_program__attach(k->skel->progs.ptw_switch);
	if (l)
		keep_link(k, l);
	else
		ptw_dbg(PTW_DBG_TRACER, "sched_switch: %s: threads' CPU as at their exit tracepoint",
			strerror(errno));
	if (k->start_at_clone || ptwk_links_per_child(k))
		attach_clone_exits(k);
	return 0;
}

/*
 * Closing a uprobe link waits for grace periods (closer.h): 25-50 ms for
 * each uprobe_multi link here, about 110 ms for each ordinary uprobe
 * (perf event). Closed together, from several threads, they wait for the
 * same ones: the detach costs about one link's close, however many.
 */
void ptwk_close_links_start(struct ptw_kernel *k)
{
	/* (calls under way: their return sites' links, closed first) */
	ptwk_underway_close(k->underway);
	for (size_t i = 0; i < k->nfollowed; i++)
		ptwk_underway_close(k->followed[i]->underway);
	/* --trace's links with the others, all at once */
	int *fds = NULL;
	struct bpf_link **links = NULL;
	size_t nfds = 0, nlinks = 0;
	ptwk_frames_take_links(k->frames, &fds, &nfds, &links, &nlinks);
	fds = xreallocarray(fds, nfds + 4 + k->nstale, sizeof(*fds));
	fds[nfds++] = k->multi_fds[0];
	fds[nfds++] = k->multi_fds[1];
	k->multi_fds[0] = k->multi_fds[1] = -1;
	fds[nfds++] = k->primer_fds[0];
	fds[nfds++] = k->primer_fds[1];
	k->primer_fds[0] = k->primer_fds[1] = -1;
	ptwk_warmer_quit(k->warmer);
	ptwk_book_take(k->book, &fds, &nfds, &links, &nlinks); /* (-f: the children's) */
	fds = xreallocarray(fds, nfds + k->nstale + 1, sizeof(*fds));
	for (size_t i = 0; i < k->nstale; i++)
		fds[nfds++] = k->stale_fds[i];
	k->nstale = 0;
	links = xreallocarray(links, nlinks + k->nlinks + 1, sizeof(*links));
	for (size_t i = 0; i < k->nlinks; i++)
		links[nlinks++] = k->links[i];
	free(k->links);
	k->links = NULL;
	k->nlinks = 0;
	if (!k->closing)
		k->closing = ptwk_close_start(fds, nfds, links, nlinks);
	else { /* (the second of two: closed here) */
		ptwk_close_together(fds, nfds, links, nlinks);
		free(fds);
		free(links);
	}
}

void ptwk_close_links(struct ptw_kernel *k)
{
	ptwk_close_links_start(k);
	ptwk_close_wait(k->closing);
	k->closing = NULL;
	ptwk_frames_close(k->frames);
}
