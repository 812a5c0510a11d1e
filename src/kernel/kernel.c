/* SPDX-License-Identifier: MIT */
/*
 * The kernel-assisted backend (ptw_kernel.h): a session's start (attach,
 * launch, a static program's probes, the programs loaded and linked), its
 * end (detach, free). Nothing here stops or writes to the
 * target: its memory is only read (process_vm_readv), for the threads
 * running at the attach and for call sites. The backend's other jobs are
 * in the files kernel_int.h lists.
 */
#define _GNU_SOURCE
#include "kernel_int.h"

#include <sys/resource.h>

static int start(const struct ptw_kernel_opts *o, pid_t pid, bool launched, const char *static_exe,
		 struct ptw_kernel **ret, char *why, size_t why_size);
static void static_probes(struct ptw_kernel *k, const char *exe);

/* libbpf talks on stderr unless told otherwise: into the debug log. */
static int libbpf_log(enum libbpf_print_level level, const char *fmt, va_list ap)
{
	if (level == LIBBPF_DEBUG)
		return 0;
	char line[512];
	vsnprintf(line, sizeof(line), fmt, ap);
	line[strcspn(line, "\n")] = '\0';
	ptw_dbg(PTW_DBG_TRACER, "libbpf: %s", line);
	return 0;
}

static void quiet_libbpf(void)
{
	libbpf_set_print(libbpf_log);
}

/* ---- is it possible here ---- */

int ptw_kernel_available(char *why, size_t size)
{
	quiet_libbpf();
	if (access("/sys/kernel/btf/vmlinux", R_OK) < 0) {
		ptwk_why_set(
			why, size,
			"this kernel has no BTF (/sys/kernel/btf/vmlinux, CONFIG_DEBUG_INFO_BTF): "
			"the BPF programs cannot be relocated to it");
		return -ENOTSUP;
	}
	if (access("/sys/bus/event_source/devices/uprobe/type", R_OK) < 0) {
		ptwk_why_set(why, size, "this kernel has no uprobes (CONFIG_UPROBE_EVENTS)");
		return -ENOTSUP;
	}
	/* r0 = 0; exit: a kprobe-type program needs what a uprobe program does. */
	struct bpf_insn insns[] = {
		{ .code = BPF_ALU64 | BPF_MOV | BPF_K, .dst_reg = BPF_REG_0, .imm = 0 },
		{ .code = BPF_JMP | BPF_EXIT },
	};
	int fd = bpf_prog_load(BPF_PROG_TYPE_KPROBE, "ptw_probe", "GPL", insns,
			       PTW_ARRAY_SIZE(insns), NULL);
	if (fd < 0) {
		int err = errno;
		if (err == EPERM || err == EACCES)
			ptwk_why_set(
				why, size,
				"not allowed to load BPF programs (%s): needs root, or CAP_BPF and "
				"CAP_PERFMON (and CAP_SYS_ADMIN where uprobe_multi is missing)",
				strerror(err));
		else
			ptwk_why_set(why, size, "cannot load a BPF program: %s", strerror(err));
		return -(err == EACCES ? EPERM : err);
	}
	close(fd);
	return 0;
}

/* -f with a link per process: the book of the session's links
 * (links.h), the target's own counted as its own. */
static void start_book(struct ptw_kernel *k)
{
	ptwk_book_free(k->book);
	k->book = NULL;
	if (!ptwk_links_per_child(k))
		return;
	k->book = ptwk_book_new();
	ptwk_book_own(k->book, k->pid);
}

/* The ring's reader: its pages mapped (0.9 ms for the default 8 MiB, some
 * 6 ms for --locks' 64 MiB). */
static int open_ring(struct ptw_kernel *k, char *why, size_t why_size)
{
	k->rb = ring_buffer__new(bpf_map__fd(k->skel->maps.rb), ptwk_on_record, k, NULL);
	if (k->rb) {
		k->pending = ptwk_ring_pending();
		return 0;
	}
	int r = -errno;
	ptwk_why_set(why, why_size, "cannot read the ring buffer: %s", strerror(-r));
	return r;
}

static int load_and_attach(struct ptw_kernel *k, char *why, size_t why_size)
{
	uint64_t t0 = ptw_now_ns();
	int r = -ENOTSUP;
	k->multi = false;
	if (!k->o.no_multi && !k->anchor && ptwk_open_skeleton(k, true) == 0) {
		k->multi = true;
		r = 0;
	}
	if (!k->multi)
		r = ptwk_open_skeleton(k, false);
	if (r < 0) {
		ptwk_why_set(why, why_size, "cannot load the BPF programs: %s", strerror(-r));
		return r;
	}
	uint32_t key = (uint32_t)k->pid;
	struct ptwk_watch w = { .follow_forks = k->o.follow_forks,
				.root = 1,
				.anchor = (uint32_t)k->anchor };
	if (bpf_map__update_elem(k->skel->maps.watched, &key, sizeof(key), &w, sizeof(w), BPF_ANY) <
	    0) {
		r = -errno;
		ptwk_why_set(why, why_size, "cannot watch %d: %s", k->pid, strerror(-r));
		return r;
	}
	/* Creations and exits first, then the probes that need them. */
	if ((r = ptwk_attach_tracepoints(k)) < 0) {
		ptwk_why_set(why, why_size, "cannot attach to the scheduler tracepoints: %s",
			     strerror(-r));
		return r;
	}
	start_book(k);
	/* The primer's grace period over (the first uprobe registered after
	 * a quiet spell waits for one: 4-16 ms here, more than the programs
	 * take to load), the uprobes go in. The tracepoints, and the ring's
	 * reader, do not wait for it. */
	if ((r = open_ring(k, why, why_size)) < 0)
		return r;
	ptwk_primer_join(k->primer, k->primer_fds);
	k->primer = NULL;
	if (k->multi && (r = ptwk_attach_multi(k)) < 0) {
		/* Older kernel, or CAP_BPF without what uprobe_multi needs:
		 * load again for ordinary uprobes. */
		ptw_dbg(PTW_DBG_TRACER, "uprobe_multi: %s; one uprobe per probe instead",
			strerror(-r));
		ptwk_close_links(k);
		ring_buffer__free(k->rb); /* (the next skeleton has a ring of its own) */
		k->rb = NULL;
		ptw_kernel_bpf__destroy(k->skel);
		k->skel = NULL;
		k->multi = false;
		k->stats.probes = 0;
		start_book(k); /* (none: the file's probes) */
		if ((r = ptwk_open_skeleton(k, false)) < 0) {
			ptwk_why_set(why, why_size, "cannot load the BPF programs: %s",
				     strerror(-r));
			return r;
		}
		if (bpf_map__update_elem(k->skel->maps.watched, &key, sizeof(key), &w, sizeof(w),
					 BPF_ANY) < 0 ||
		    (r = ptwk_attach_tracepoints(k)) < 0) {
			r = r < 0 ? r : -errno;
			ptwk_why_set(why, why_size, "cannot attach the BPF programs: %s",
				     strerror(-r));
			return r;
		}
	}
	if (ptwk_links_per_child(k))
		k->warmer = ptwk_warmer_start();
	else if (k->o.follow_forks && !k->o.follow_file_wide)
		ptwk_note_as(
			k, PTW_W_KERNEL_LIMIT,
			"-f without uprobe_multi (Linux 6.6): a process's links cannot be made "
			"for each child, so the probes are on libc's file for every process "
			"that maps it while the session runs (int3 bytes in each)");
	if (!k->multi && (r = ptwk_attach_each(k)) < 0) {
		ptwk_why_set(why, why_size, "cannot attach uprobes to %s in %d: %s",
			     k->probes.module, k->pid, strerror(-r));
		return r;
	}
	if (k->mods_on && (r = ptwk_modules_attach(k)) < 0) {
		/* (then /proc, as before) */
		ptw_dbg(PTW_DBG_TRACER, "no probe on %s's _dl_debug_state: %s", k->mods_ld,
			strerror(-r));
		k->mods_on = false;
	}
	k->stats.mode = k->multi ? "uprobe_multi" : "uprobe";
	if (!k->multi && ptwk_probe_pid(k) > 0 && !k->anchor) /* (inode-wide ones keep firing) */
		ptwk_note(
			k,
			"ordinary per-process uprobes (no uprobe_multi): they stop firing for the "
			"other threads once the main thread has exited");
	if (!k->rb && (r = open_ring(k, why, why_size)) < 0)
		return r;
	k->stats.probes_ns = ptw_now_ns() - t0;
	return 0;
}

/*
 * A process whose main thread has exited (pthread_exit: a zombie now). A
 * uprobe_multi link for it filters by its leader's memory, which it no
 * longer has: nothing would fire. Ordinary uprobes (a perf event per
 * probe) for one of its live threads filter by that thread's memory, the
 * process's: they fire in every thread of it, and in no other process.
 * They are tied to the oldest live thread; when it ends they stop firing
 * (the BPF exit program makes the process blind: the scheduler's
 * tracepoints alone see it), and new ones are tied to the oldest thread
 * left (ring.c: anchor_ended; said, with the time in between). -f needs
 * uprobe_multi for its links per child (the probes would go on libc's
 * file, in every process),
 * and a process with no live thread left has nothing to tie them to: the
 * kernel path refuses both (why), the ptrace path serves them.
 */
static int zombie_anchor(struct ptw_kernel *k, char *why, size_t why_size)
{
	if (k->o.follow_forks) {
		ptwk_why_set(
			why, why_size,
			"the main thread of %d has exited (pthread_exit): -f on the kernel path "
			"would put its probes in every process (a process's own probes need its "
			"main thread's memory); --backend=ptrace follows it",
			k->pid);
		return -ENOTSUP;
	}
	k->anchor = ptwk_oldest_thread(k->pid, 0);
	if (!k->anchor) {
		ptwk_why_set(why, why_size,
			     "the main thread of %d has exited (pthread_exit) and no other thread "
			     "is left to tie the probes to",
			     k->pid);
		return -ENOTSUP;
	}
	ptwk_note_as(k, PTW_W_ZOMBIE_LEADER,
		     "the main thread of %d has exited (pthread_exit) and is a zombie: the "
		     "probes are tied to its thread %d instead (ordinary uprobes, one per "
		     "probe: a uprobe_multi link for the process would need its main "
		     "thread's memory); if that thread ends first, they are tied to the oldest "
		     "one left (in between, the scheduler's tracepoints alone see the others)",
		     k->pid, k->anchor);
	return 0;
}

/* ---- the public entry points ---- */

static int open_fds(struct ptw_kernel *k)
{
	k->epfd = epoll_create1(EPOLL_CLOEXEC);
	if (k->epfd < 0)
		return -errno;
	int r = ptwk_drainer_start(k);
	if (r < 0)
		return r;
	/* The drain thread says when the kernel woke it with records. */
	struct epoll_event ev = { .events = EPOLLIN, .data.u32 = 0 };
	if (epoll_ctl(k->epfd, EPOLL_CTL_ADD, k->notify_fd, &ev) < 0)
		return -errno;
	/* Readable once every thread of the process is gone: the end, even
	 * if its record did not fit in the ring. */
	k->pidfd = (int)syscall(SYS_pidfd_open, k->pid, 0);
	if (k->pidfd >= 0) {
		ev.data.u32 = 1;
		if (epoll_ctl(k->epfd, EPOLL_CTL_ADD, k->pidfd, &ev) < 0)
			return -errno;
	}
	return 0;
}

/* static_exe: a launch of that static program (ptw_kernel_launch). */
static int start(const struct ptw_kernel_opts *o, pid_t pid, bool launched, const char *static_exe,
		 struct ptw_kernel **ret, char *why, size_t why_size)
{
	uint64_t t0 = ptw_now_ns();
	char path[64];
	quiet_libbpf();
	snprintf(path, sizeof(path), "/proc/%d", pid);
	if (pid <= 0 || access(path, F_OK) < 0) {
		ptwk_why_set(why, why_size, "no such process %d", pid);
		return -ESRCH;
	}
	int r = ptw_kernel_available(why, why_size);
	if (r < 0)
		return r;
	struct ptw_kernel *k = xcalloc(1, sizeof(*k));
	k->o = *o;
	if (!k->o.flush_ms)
		k->o.flush_ms = DEFAULT_FLUSH_MS;
	if (!k->o.ring_bytes)
		k->o.ring_bytes = o->locks ? DEFAULT_RING_LOCKS : DEFAULT_RING;
	if (!k->o.wake_bytes)
		k->o.wake_bytes = k->o.ring_bytes / 4;
	k->ring_maker = ptwk_ring_start((uint32_t)k->o.ring_bytes);
	k->pid = pid;
	k->launched = launched;
	k->multi_fds[0] = k->multi_fds[1] = k->mods_fd = -1;
	k->primer_fds[0] = k->primer_fds[1] = -1;
	/* (its grace period while the symbols are read and the programs load) */
	k->primer = k->o.no_multi ? NULL : ptwk_primer_start();
	k->epfd = k->pidfd = -1;
	k->wake_fd = k->notify_fd = k->drain_epfd = -1;
	pthread_mutex_init(&k->qlock, NULL);
	pthread_cond_init(&k->qcond, NULL);
	pthread_cond_init(&k->qroom, NULL);
	k->proc = ptw_proc_open(pid);
	struct ptwk_conv_ops ops = ptwk_conv_ops_of(k);
	ptwk_conv_init(&k->conv, pid, &ops);
	k->conv.launched = launched;

	/* (a launch's process is ptwatch's copy until it execs: nothing of
	 * its libraries but libc is looked up, no debug file fetched for them) */
	ptw_symbols_prefetch(!launched);
	r = ptwk_load_symbols(k);
	ptw_symbols_prefetch(true);
	if (r < 0) {
		ptwk_why_set(why, why_size, "cannot read the modules of %d: %s", pid, strerror(-r));
		goto fail;
	}
	td_err_e err;
	if (ptw_tdb_new(k->proc, k->syms, &k->tdb, &err) < 0) {
		k->tdb = NULL;
		ptwk_note_as(
			k, PTW_W_NO_THREAD_DB,
			"libthread_db cannot be used for this process (%s): threads running at the "
			"attach have no pthread_t or start routine",
			ptw_tdb_strerror(err));
	}
	if (static_exe)
		static_probes(k, static_exe);
	if (!k->probes.in_exe &&
	    (r = ptwk_find_probes(k->syms, k->tdb, k->proc->mem_pid, o->use_debug_files, &k->probes,
				  why, why_size)) < 0)
		goto fail;
	if (k->static_noted) {
		/* (ptwatch's own libc and libthread_db: nothing of them applies
		 * to the static program, which is seen as LWPs) */
		k->probes.nmissing = k->probes.missing_start = 0;
		k->probes.layout = (struct ptw_pthread_layout){ 0 };
		ptw_tdb_free(k->tdb);
		k->tdb = NULL;
	}
	if (!launched && ptw_proc_state(pid, pid) == 'Z') {
		k->zombie_leader = true;
		if ((r = zombie_anchor(k, why, why_size)) < 0)
			goto fail;
	}
	ptwk_join_where(k);
	if (o->locks) {
		struct ptwk_locks_env env = ptwk_locks_env_of(k);
		k->locks = ptwk_locks_new(&env, k->tdb, &k->probes, &k->locks_config);
	}
	ptwk_start_where(k);
	for (size_t i = 0; i < k->probes.nmissing; i++)
		if ((!k->start_at_clone && !k->start_derived) || i + 1 != k->probes.missing_start)
			ptwk_note_as(k, k->probes.missing_code[i], "%s", k->probes.missing[i]);
	if (!k->probes.main_addr) /* a stripped program: from its entry code */
		k->probes.main_addr = ptw_symbols_main_from_entry(k->syms, ptwk_pid_memread,
								  (void *)(intptr_t)pid,
								  ptw_proc_auxv(pid, AT_ENTRY));
	/* (An attach reads /proc as it begins, and again for a library loaded
	 * since: it keeps the probe count, the load and the exit of before.
	 * With -f its descendants' execs need the list.) */
	if (!o->modules_from_proc && (launched || o->follow_forks))
		ptwk_modules_find(k);
	k->conv.main_addr = k->probes.main_addr;
	for (size_t i = 0; i < k->probes.n; i++)
		/* (Only __libc_start_call_main calls main: __libc_start_main,
		 * the fallback, does not contain main's return address.) */
		if (k->probes.p[i].kind == PTWK_MAIN && !k->probes.p[i].ret &&
		    !strcmp(k->probes.p[i].function, "__libc_start_call_main") &&
		    ptw_symbols_lookup(k->syms, NULL, k->probes.p[i].function, &(uint64_t){ 0 },
				       &k->conv.main_caller_size) < 0)
			k->conv.main_caller_size = 0;
	ptwk_main_caller_derive(k);
	k->start_ns = t0;
	if (!launched)
		ptwk_follow_exec(k); /* its exe and command line, for the report */
	if ((r = load_and_attach(k, why, why_size)) < 0)
		goto fail;
	if (!launched)
		k->conv.probes_in_ns = ptw_now_ns();
	k->frames = ptwk_frames_new(o->trace, o->ntrace);
	if (!launched)
		ptwk_calls_under_way(k);
	if (!launched)
		ptwk_scan_frames(k);
	if ((r = open_fds(k)) < 0) {
		ptwk_why_set(why, why_size, "epoll: %s", strerror(-r));
		goto fail;
	}
	if (!launched) {
		k->stats.probes += ptwk_underway_take(k->underway);
		ptwk_list_threads(k);
		ptwk_read_glibc(k);
		ptwk_underway_emit(k->underway, &k->conv, k->start_ns);
	}
	if (!launched && k->o.follow_forks)
		ptwk_follow_descendants(k);
	ptw_symbols_save_cache(k->syms);
	/* The caller's thread converts the records: at nice -20, as the drain
	 * thread (its own nice: nobody else's). At the default priority, among
	 * ten thousand runnable threads on two CPUs, it fell behind, the drain
	 * thread stopped at INQ_MAX, and the ring filled (the Open POSIX
	 * suite's pthread_cond_broadcast/1-2: 831,365 and 886,549 records lost
	 * in two runs, 167,762 at -20). */
	if (setpriority(PRIO_PROCESS, (id_t)syscall(SYS_gettid), -20) < 0)
		ptw_dbg(PTW_DBG_TRACER, "the converting thread's priority: %s", strerror(errno));
	k->stats.attach_ns = ptw_now_ns() - t0;
	*ret = k;
	return 0;
fail:
	ptw_kernel_free(k);
	return r;
}

int ptw_kernel_attach(const struct ptw_kernel_opts *o, pid_t pid, struct ptw_kernel **ret,
		      char *why, size_t why_size)
{
	return start(o, pid, false, NULL, ret, why, why_size);
}

/* The ELF type of the file at path, 0 unknown. */
static unsigned elf_type(const char *path)
{
	Elf64_Ehdr eh;
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	bool ok = fd >= 0 && pread(fd, &eh, sizeof(eh), 0) == (ssize_t)sizeof(eh) &&
		  !memcmp(eh.e_ident, ELFMAG, SELFMAG);
	if (fd >= 0)
		close(fd);
	return ok ? eh.e_type : 0;
}

/*
 * A launched static program maps no libc: the probes go on its own file,
 * found in it before it runs (probes.h), and the uprobe_multi link for the
 * held child's pid fires once the exec maps it. Its file's symbols are k's
 * until then (main's caller, start_thread without a name). Without a
 * symbol table the probes stay on ptwatch's libc, where they see nothing
 * but its threads' clones and exits: a ptwk_note says so.
 */
static void static_probes(struct ptw_kernel *k, const char *exe)
{
	struct ptw_symbols *fs = NULL;
	struct stat st;
	char why[512];
	int r = ptw_symbols_new_file(exe, k->o.use_debug_files, NULL, &fs);
	if (r < 0)
		snprintf(why, sizeof(why), "cannot read its symbols: %s", strerror(-r));
	else if (stat(exe, &st) < 0)
		snprintf(why, sizeof(why), "%s", strerror(errno));
	else if (ptwk_find_probes_file(fs, exe, k->o.use_debug_files, &k->probes, why,
				       sizeof(why)) == 0) {
		k->static_dev = st.st_dev;
		k->static_ino = st.st_ino;
		ptw_symbols_free(k->syms);
		k->syms = fs;
		k->static_exec = elf_type(exe) == ET_EXEC;
		ptw_dbg(PTW_DBG_TRACER, "static program: %zu probes on %s", k->probes.n, exe);
		return;
	}
	ptw_symbols_free(fs);
	k->static_noted = true;
	ptwk_note_as(k, PTW_W_KERNEL_NOT_SEEN,
		     "%s is a static program and the kernel path cannot probe it (%s): its threads "
		     "are seen only as clones and exits (the ptrace path sees them)",
		     exe, why);
}

int ptw_kernel_launch(const struct ptw_kernel_opts *o, char *const argv[], int child_stdout,
		      struct ptw_kernel **ret, pid_t *ret_pid, char *why, size_t why_size)
{
	/* (What execvp will run: a static program gets the probes in its file.) */
	char found[PATH_MAX], exe[PATH_MAX];
	bool is_static = ptw_command_path(argv[0], found, sizeof(found)) && realpath(found, exe) &&
			 ptw_elf_is_static(exe);
	struct ptw_held h;
	int r = ptw_held_spawn(argv, child_stdout, true, &h);
	if (r < 0) {
		ptwk_why_set(why, why_size, "fork: %s", strerror(-r));
		return r;
	}
	struct ptw_kernel *k;
	r = start(o, h.pid, true, is_static ? exe : NULL, &k, why, why_size);
	if (r == 0)
		ptwk_launch_frames(k, argv[0]);
	if (r < 0) {
		ptw_held_go(&h, false); /* it exits without running the command */
		ptw_held_exec_result(&h);
		waitpid(h.pid, NULL, 0);
		return r;
	}
	/* The probes are in: let it exec. */
	r = ptw_held_go(&h, true);
	int e = ptw_held_exec_result(&h);
	if (r == 0)
		r = e;
	if (r < 0) {
		/* The command's own failure (not found, not executable): why
		 * stays empty, the caller says it as for any launch. */
		if (why && why_size)
			why[0] = '\0';
		ptw_kernel_free(k);
		waitpid(h.pid, NULL, 0);
		return r;
	}
	*ret = k;
	*ret_pid = h.pid;
	return 0;
}

/* Nothing more is recorded from here on: every program looks its tgid up
 * in "watched" first. Emptied before the links close, since each
 * uprobe_multi link takes 60-90 ms to go and the tracepoints meanwhile
 * went on recording clones and exits without the uprobes' half (threads
 * without routines, deaths missed: kill9-front@kernel, attach-churner@kernel). */
static void stop_watching(struct ptw_kernel *k)
{
	if (!k->skel)
		return;
	const struct bpf_map *m = k->skel->maps.watched;
	uint32_t key;
	while (bpf_map__get_next_key(m, NULL, &key, sizeof(key)) == 0)
		if (bpf_map__delete_elem(m, &key, sizeof(key), 0) < 0)
			break;
}

int ptw_kernel_detach(struct ptw_kernel *k)
{
	if (k->detached)
		return 0;
	k->detached = true;
	stop_watching(k);
	ptwk_consume_all(k);
	ptwk_read_counters(k);
	uint64_t t0 = ptw_now_ns();
	ptwk_close_links(k);
	k->stats.detach_ns = ptw_now_ns() - t0;
	ptw_dbg(PTW_DBG_TRACER,
		"kernel path: attach %.1f ms (programs loaded and attached %.1f ms), probes "
		"removed in %.1f ms; %llu records, %llu wakeups, %llu lost",
		(double)k->stats.attach_ns / 1e6, (double)k->stats.probes_ns / 1e6,
		(double)k->stats.detach_ns / 1e6, (unsigned long long)k->stats.records,
		(unsigned long long)k->stats.wakeups, (unsigned long long)k->stats.lost);
	/* What was written before the links closed. */
	ptwk_consume_all(k);
	ptwk_drainer_stop(k);
	/* One DETACHED for the session, through a process that still runs. */
	struct ptw_kernel *live = k;
	for (size_t i = 0; i < k->nfollowed && live->conv.ended; i++)
		live = k->followed[i];
	ptwk_conv_detached(&live->conv, ptw_now_ns());
	ptwk_end_notes(k);
	return 0;
}

void ptw_kernel_describe(struct ptw_kernel *k, struct ptw_kernel_desc *ret)
{
	if (!k->exe[0] && !k->conv.ended) {
		char path[64];
		snprintf(path, sizeof(path), "/proc/%d/exe", k->pid);
		ssize_t n = readlink(path, k->exe, sizeof(k->exe) - 1);
		k->exe[n > 0 ? n : 0] = '\0';
	}
	ret->exe = k->exe;
	ret->glibc = k->glibc;
	/* "descriptors": no debug file, struct pthread's result derived from
	 * libthread_db's descriptors of its neighbours (layout.h) */
	ret->strategy = !k->tdb				 ? "lwp"
			: (k->probes.layout.derived & 2) ? "descriptors"
			: k->probes.layout.have_result	 ? "debuginfo"
							 : "breakpoints";
}

const struct ptw_location *ptw_kernel_locate(struct ptw_kernel *k, uint64_t addr)
{
	return ptwk_locate(k, addr);
}

void ptw_kernel_free(struct ptw_kernel *k)
{
	if (!k)
		return;
	ptwk_primer_join(k->primer, k->primer_fds); /* (a start that failed before) */
	k->primer = NULL;
	ptwk_ring_drop(k->ring_maker);
	k->ring_maker = NULL;
	ptwk_warmer_stop(k->warmer);
	k->warmer = NULL;
	if (k->skel && !k->detached) {
		ptwk_close_links(k);
		k->detached = true;
	}
	ptwk_drainer_stop(k);
	ptwk_close_links(k);
	ptwk_book_free(k->book);
	k->book = NULL;
	ptwk_modules_close(k);
	ring_buffer__free(k->rb);
	ptw_kernel_bpf__destroy(k->skel);
	if (k->epfd >= 0)
		close(k->epfd);
	if (k->pidfd >= 0)
		close(k->pidfd);
	for (size_t i = 0; i < k->nfollowed; i++)
		ptw_kernel_free(k->followed[i]);
	free(k->followed);
	for (size_t i = 0; i < k->nqueue; i++)
		ptwk_drained_free(&k->queue[i]);
	free(k->queue);
	for (size_t i = 0; i < k->ninq; i++)
		ptwk_drained_free(&k->inq[i]);
	free(k->inq);
	for (size_t i = 0; i < k->nbatch; i++) /* (always moved into inq: none) */
		ptwk_drained_free(&k->batch[i]);
	free(k->batch);
	if (!k->root) {
		int fds[] = { k->wake_fd, k->notify_fd, k->drain_epfd };
		for (size_t i = 0; i < PTW_ARRAY_SIZE(fds); i++)
			if (fds[i] >= 0)
				close(fds[i]);
		pthread_mutex_destroy(&k->qlock);
		pthread_cond_destroy(&k->qcond);
		pthread_cond_destroy(&k->qroom);
	}
	ptw_map_free(&k->by_pid);
	ptw_argv_free(k->argv);
	ptwk_modlist_free(&k->modlist);
	ptw_map_free(&k->drain_listed);
	ptw_map_free(&k->drain_links_in);
	ptwk_gap_images_free(k);
	ptwk_conv_free(&k->conv);
	ptwk_frames_free(k->frames);
	ptwk_underway_free(k->underway);
	ptwk_locks_free(k->locks);
	ptw_map_free(&k->sites);
	ptw_map_free(&k->sigrets);
	ptw_tdb_free(k->tdb);
	if (!k->syms_borrowed)
		ptw_symbols_free(k->syms);
	for (size_t i = 0; i < k->nold_syms; i++)
		ptw_symbols_free(k->old_syms[i]);
	free(k->old_syms);
	if (k->proc)
		ptw_proc_free(k->proc);
	free(k->glibc);
	free(k);
}
