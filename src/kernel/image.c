/* SPDX-License-Identifier: MIT */
/*
 * The image of a watched process: its symbols and memory, its libc and
 * glibc's facts (main's caller, start_thread, nptl's version), where code
 * is; the converter's sink.
 */
#define _GNU_SOURCE
#include "kernel_int.h"

/* ---- the sink, memory, symbols ---- */

/* k's process died of SIGTRAP: whether the trap was a uprobe's (a
 * breakpoint the kernel put in for ptwatch, or for another tool, that no
 * longer applied there) or the program's own, in a warning. The file's
 * byte tells: an int3 the file does not hold was put there. */
static void trap_death(struct ptw_kernel *k)
{
	const struct ptwk_conv *c = &k->conv;
	if (!c->trap.seen) {
		ptwk_note_as(
			k, PTW_W_SIGTRAP_DEATH,
			"process %d died of SIGTRAP, which ptwatch did not see delivered to it",
			k->pid);
		return;
	}
	uint64_t at = c->trap.int3 ? c->trap.ip - 1 : c->trap.ip;
	const struct ptw_location *loc = k->syms ? ptw_symbols_locate(k->syms, at) : NULL;
	uint8_t byte;
	enum ptw_trap_verdict v = PTW_TRAP_RAISED;
	if (c->trap.int3 && (!k->syms || ptw_symbols_read_file(k->syms, at, &byte, 1) < 0))
		v = PTW_TRAP_RUNTIME_INT3;
	else if (c->trap.int3)
		v = byte == 0xcc ? PTW_TRAP_PROGRAM_INT3 : PTW_TRAP_PROBE_GONE;
	char *text = ptw_sigtrap_death_text(v, k->pid, c->trap.tid, loc ? loc->symbol : NULL,
					    loc ? loc->symbol_offset : 0, at);
	ptwk_note_as(k, PTW_W_SIGTRAP_DEATH, "%s", text);
	free(text);
}

void ptwk_sink(void *ctx, const struct ptw_event *ev)
{
	struct ptw_kernel *k = ctx;
	if (ev->kind == PTW_EV_PROCESS_EXIT) {
		/* Its every thread's exit is in (or lost): no longer watched
		 * (its pid may come back as another's) */
		struct ptw_kernel *root = k->root ? k->root : k;
		uint32_t key = (uint32_t)k->pid;
		struct ptwk_watch w;
		if (root->skel &&
		    bpf_map__lookup_elem(root->skel->maps.watched, &key, sizeof(key), &w, sizeof(w),
					 0) == 0 &&
		    w.since <= ev->ns) /* (not a process forked since with its pid) */
			bpf_map__delete_elem(root->skel->maps.watched, &key, sizeof(key), 0);
		if (root->book && k != root) /* (-f: its own links go) */
			ptwk_book_forget(root->book, k->pid, k->start_ns);
		if (ev->sig == SIGTRAP)
			trap_death(k);
	}
	(k->root ? k->root : k)->stats.events++;
	if (!ev->pid) { /* (--locks': the converter's carry theirs) */
		struct ptw_event e = *ev;
		e.pid = k->pid;
		e.process = k->conv.process;
		k->o.sink(k->o.sink_ctx, &e);
	} else {
		k->o.sink(k->o.sink_ctx, ev);
	}
	/* --locks, -f: a wait under way of a thread made before its process's
	 * links, kept until its creation is told (locks.c) */
	if ((ev->kind == PTW_EV_THREAD_CREATE || ev->kind == PTW_EV_LWP_CREATE) && k->locks)
		ptwk_locks_thread_listed(k->locks, ev->other_tid);
	/* -f: a process began (its image, a fork child's leader), exec'd or
	 * ended: the session keeps what the document says of it */
	if (ev->kind == PTW_EV_IMAGE || ev->kind == PTW_EV_EXEC ||
	    ev->kind == PTW_EV_PROCESS_EXIT ||
	    (ev->kind == PTW_EV_PREEXISTING && ev->tid == (ev->pid ? ev->pid : k->pid)))
		ptwk_say_process(k);
}

const struct ptw_location *ptwk_locate(void *ctx, uint64_t addr)
{
	struct ptw_kernel *k = ctx;
	return k->syms ? ptw_symbols_locate(k->syms, addr) : NULL;
}

/* What --locks reads of process k, and where its waits go. */
struct ptwk_locks_env ptwk_locks_env_of(struct ptw_kernel *k)
{
	return (struct ptwk_locks_env){
		.pid = k->pid,
		.live_pid = ptwk_live_pid(k),
		.proc = k->proc,
		.syms = &k->syms,
		.conv = &k->conv,
		.sink = ptwk_sink,
		.call_site = ptwk_call_site,
		.ctx = k,
		/* (struct pthread's tid: the root's probes found it) */
		.have_tid = (k->root ? k->root : k)->locks_config.have_tid,
		.tid_off = (uint32_t)(k->root ? k->root : k)->locks_config.off_tid
	};
}

/* --trace's, one for the session: -f's processes share the root's (their
 * probes are on the files, for every watched process). */
struct ptwk_frames *ptwk_frames_of(const struct ptw_kernel *k)
{
	return k->root ? k->root->frames : k->frames;
}

/* A process's memory by pid alone (process_vm_readv): for the symbols the
 * drain thread reads, which must not open a memory view (ptw_proc_open
 * hands its descriptor to the caller's hook, not made for threads). */
int ptwk_pid_memread(void *ctx, uint64_t addr, void *buf, size_t len)
{
	struct iovec local = { buf, len }, remote = { (void *)(uintptr_t)addr, len };
	ssize_t n = process_vm_readv((pid_t)(intptr_t)ctx, &local, 1, &remote, 1, 0);
	return n == (ssize_t)len ? 0 : n < 0 ? -errno : -EIO;
}

int ptwk_load_symbols(struct ptw_kernel *k)
{
	char *cache_dir = k->o.use_cache ? ptw_cache_default_dir() : NULL;
	int r = k->root ? ptw_symbols_new(k->pid, k->o.use_debug_files, cache_dir, ptwk_pid_memread,
					  (void *)(intptr_t)k->pid, &k->syms)
			: ptw_symbols_new(k->proc->mem_pid, k->o.use_debug_files, cache_dir,
					  ptw_mem_reader, k->proc, &k->syms);
	free(cache_dir);
	return r;
}

/*
 * The probes are on one file: after an exec (a launch's, or the target's)
 * they fire only if the new image maps that same libc. Said once its
 * ld.so has mapped one (or given up after 100 reads: a static program).
 */
void ptwk_check_libc(struct ptw_kernel *k)
{
	const struct ptwk_probes *probes = k->root ? &k->root->probes : &k->probes;
	/* ld.so's list says (modules_apply): /proc/PID/maps only if none
	 * came within a second (another ld.so than the probed one). */
	if ((k->root ? k->root : k)->mods_on && ptw_now_ns() - k->exec_ns < 1000000000ull)
		return;
	struct stat st;
	struct ptw_mapping *maps = NULL;
	int n = ptw_maps_read(k->pid, &maps);
	k->libc_checks--;
	const struct ptw_mapping *libc = NULL;
	for (int i = 0; i < n && !libc; i++)
		if (strstr(maps[i].path, "/libc.so") || strstr(maps[i].path, "/libc-"))
			libc = &maps[i];
	if (libc && stat(probes->path, &st) == 0 &&
	    (st.st_ino != libc->inode || major(st.st_dev) != libc->dev_major ||
	     minor(st.st_dev) != libc->dev_minor)) {
		ptwk_watch_probed(k, k->pid, false);
		ptwk_note_as(k, PTW_W_KERNEL_NOT_SEEN,
			     "%s maps %s, not the %s the probes are on: " PTWK_SEEN_BY_TRACEPOINTS,
			     k->exe, libc->path, probes->module);
	} else if (!libc && n >= 0 && k->libc_checks == 0) { /* (n < 0: gone, not static) */
		ptwk_watch_probed(k, k->pid, false);
		ptwk_note_as(k, PTW_W_KERNEL_NOT_SEEN,
			     "%s maps no libc.so (static, or not glibc): " PTWK_SEEN_BY_TRACEPOINTS,
			     k->exe);
	}
	if (libc || n < 0)
		k->libc_checks = 0;
	free(maps);
}

/* ---- glibc: main's caller, start_thread ---- */

/* libc's text from its file (main_caller.h), placed by the first probe. */
static int code_open(const struct ptw_kernel *k, struct ptw_glibc_code *ret)
{
	if (!k->probes.n || (ret->fd = open(k->probes.path, O_RDONLY | O_CLOEXEC)) < 0)
		return -1;
	ret->addr = k->probes.p[0].addr;
	ret->offset = k->probes.p[0].offset;
	return 0;
}

/* No libc symbol table (no debug file): main is called from a static
 * function, found as the one __libc_start_main calls that calls exit
 * (main_caller.h); else main's return is not told from an exit() call. */
void ptwk_main_caller_derive(struct ptw_kernel *k)
{
	uint64_t start_main = 0, exit_fn = 0, lo, hi;
	for (size_t i = 0; i < k->probes.n; i++) {
		const struct ptwk_probe *p = &k->probes.p[i];
		if (p->kind == PTWK_MAIN && !strcmp(p->function, "__libc_start_main"))
			start_main = p->addr;
		else if (p->kind == PTWK_EXIT_FN)
			exit_fn = p->addr;
	}
	struct ptw_glibc_code code;
	if (k->conv.main_caller_size || !start_main || !exit_fn || code_open(k, &code) < 0)
		return;
	int r = ptw_glibc_main_caller(k->syms, &code, start_main, exit_fn, &lo, &hi);
	close(code.fd);
	if (r < 0) {
		ptw_dbg(PTW_DBG_TRACER, "main's caller in libc not found: main's return unknown");
		return;
	}
	k->main_caller_lo = lo;
	k->main_caller_hi = hi;
	k->conv.main_caller_delta = (int64_t)(lo - start_main);
	k->conv.main_caller_size = hi - lo;
	ptw_dbg(PTW_DBG_TRACER, "main's caller: __libc_start_main%+lld, %llu bytes",
		(long long)k->conv.main_caller_delta, (unsigned long long)(hi - lo));
}

/* No libc symbol table: start_thread found by what pthread_create does
 * with it (main_caller.h), probed as if by name. */
static void start_thread_derive(struct ptw_kernel *k)
{
	const struct ptwk_probe *create = NULL, *death = NULL;
	for (size_t i = 0; i < k->probes.n; i++)
		if (k->probes.p[i].kind == PTWK_CREATE_CALL)
			create = &k->probes.p[i];
		else if (k->probes.p[i].kind == PTWK_DEATH)
			death = &k->probes.p[i];
	uint64_t addr;
	struct ptw_glibc_code code;
	int r = -ENOENT;
	if (create && death && k->probes.n < PTWK_MAX_PROBES && code_open(k, &code) == 0) {
		r = ptw_glibc_start_thread(k->syms, &code, create->addr, death->addr, &addr);
		close(code.fd);
	}
	if (r < 0) {
		ptw_dbg(PTW_DBG_TRACER, "start_thread not found without its name");
		return;
	}
	/* (the same file and text segment as pthread_create) */
	k->probes.p[k->probes.n++] =
		(struct ptwk_probe){ PTWK_START, "start_thread", addr,
				     create->offset + (addr - create->addr), false };
	k->start_derived = true;
	ptw_dbg(PTW_DBG_TRACER, "start_thread found at pthread_create%+lld",
		(long long)(addr - create->addr));
}

/* No libc symbol table: the joins' probes on pthread_join alone would miss
 * pthread_tryjoin_np and pthread_timedjoin_np; pthread_join is a tail call
 * into the function they all go through (__pthread_clockjoin_ex), which
 * is probed instead, as the tracer hooks it. */
void ptwk_join_where(struct ptw_kernel *k)
{
	uint64_t join = 0, target = 0; /* (decoded once, for its entry and return probes) */
	for (size_t i = 0; i < k->probes.n; i++) {
		struct ptwk_probe *p = &k->probes.p[i];
		if ((p->kind != PTWK_JOIN && p->kind != PTWK_JOIN_RET) ||
		    strcmp(p->function, "pthread_join"))
			continue;
		if (!join) {
			struct ptw_glibc_code code;
			uint8_t bytes[32];
			if (code_open(k, &code) < 0)
				return;
			bool read = p->addr >= code.addr - code.offset &&
				    pread(code.fd, bytes, sizeof(bytes),
					  (off_t)(code.offset + (p->addr - code.addr))) ==
					    (ssize_t)sizeof(bytes);
			close(code.fd);
			if (!read || ptw_insn_tail_jump(bytes, sizeof(bytes), p->addr, &target) < 0)
				return; /* (an older glibc: pthread_join does the work) */
			join = p->addr;
			ptw_dbg(PTW_DBG_TRACER, "joins: pthread_join%+lld, the function it jumps to",
				(long long)(target - join));
		}
		if (p->addr != join)
			continue;
		p->offset += target - p->addr;
		p->addr = target;
		p->function = "__pthread_clockjoin_ex";
	}
}

/* Where threads start: start_thread's uprobe (by name, else derived),
 * else the clone's return in the new thread, which needs struct pthread's
 * tid to tell a pthread from a raw clone (and costs a detach 100-150 ms
 * longer: measured with ptw-kernel-demo). opts.start_at_clone: the clone's
 * return even with start_thread (measuring); its uprobe is then left out. */
void ptwk_start_where(struct ptw_kernel *k)
{
	if (k->probes.missing_start && !k->o.start_at_clone)
		start_thread_derive(k);
	if (k->start_derived)
		return;
	k->start_at_clone =
		(k->probes.missing_start || k->o.start_at_clone) && k->probes.layout.have_tid;
	if (!k->start_at_clone || k->probes.missing_start)
		return;
	size_t n = 0;
	for (size_t i = 0; i < k->probes.n; i++)
		if (k->probes.p[i].kind != PTWK_START)
			k->probes.p[n++] = k->probes.p[i];
	k->probes.n = n;
}

/* nptl's version in the process, read once an image's libc is mapped. */
void ptwk_read_glibc(struct ptw_kernel *k)
{
	if (!k->glibc)
		k->glibc = ptw_nptl_version(k->proc, k->syms);
}

/* The call instruction before a return address, as the tracer names a
 * create site (the process may have gone: then the byte before it). */
const struct ptw_location *ptwk_call_site(void *ctx, uint64_t ret)
{
	struct ptw_kernel *k = ctx;
	const struct ptw_location *site = ptw_map_get(&k->sites, ret);
	if (site)
		return site;
	uint8_t before[8];
	int len = 0;
	/* From the module's file: reading the process takes its memory-map
	 * lock, which a thread being made waits for. */
	int got = ret > 8 && k->syms
			  ? ptw_symbols_read_file(k->syms, ret - 8, before, sizeof(before))
			  : -ENOENT;
	if (got < 0 && ret > 8) {
		ptw_mem_invalidate(k->proc);
		got = ptw_mem_read(k->proc, ret - 8, before, sizeof(before));
	}
	if (got == 0)
		len = ptw_insn_call_length(before, ret);
	site = ptwk_locate(k, ret - (uint64_t)(len ? len : 1));
	if (site)
		ptw_map_put(&k->sites, ret, (void *)(uintptr_t)site);
	return site;
}
