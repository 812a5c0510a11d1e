/* SPDX-License-Identifier: MIT */
/*
 * The kernel-assisted backend (ptw_kernel.h): loads bpf/ptw_kernel.bpf.c
 * through its generated skeleton, attaches it to one process, reads the
 * ring buffer and hands the records to convert.c. Nothing here stops or
 * writes to the target: its memory is only read (process_vm_readv), for
 * the threads running at the attach and for call sites.
 */
#define _GNU_SOURCE
#include "ptw_kernel.h"

#include <bpf/bpf.h>
#include <bpf/libbpf.h>
#include <dirent.h>
#include <elf.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <sys/sysmacros.h>
#include <sys/wait.h>
#include <unistd.h>

#include "closer.h"
#include "convert.h"
#include "kframes.h"
#include "underway.h"
#include "locks.h"
#include "modules.h"
#include "minbtf.h"
#include "probes.h"
#include "ptw_glibc.h"
#include "ptw_attach.h"
#include "ptw_breakpoints.h"
#include "ptw_cache.h"
#include "ptw_output.h"
#include "ptw_symbols.h"
#include "ptw_thread_db.h"
#include "ptw_util.h"

#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wcast-align"
#pragma GCC diagnostic ignored "-Wmissing-prototypes"
#include "ptw_kernel.skel.h"
#pragma GCC diagnostic pop

#define DEFAULT_FLUSH_MS 50
#define DEFAULT_RING	 (8u << 20)
/* Records read ahead of the converter at most: the ring, not the heap,
 * holds a backlog (when the process makes records faster than they are
 * turned into spans), so memory does not grow with a session's length;
 * a ring that fills is counted, as ever. */
#define INQ_MAX 8192
/* --locks' records carry 1 KB of stack: room for as many */
#define DEFAULT_RING_LOCKS (64u << 20)

/* --locks' counts of one or more processes (ptwk_locks_counts). */
struct locks_tally {
	uint64_t waits, unclassified;
	uint32_t deadlocks;
};

struct ptw_kernel {
	struct ptw_kernel_opts o;
	pid_t pid;
	struct ptw_proc *proc; /* memory only: never traced */
	struct ptw_symbols *syms;
	struct ptw_symbols **old_syms; /* images before an exec: events point into them */
	size_t nold_syms;
	struct ptw_tdb *tdb;
	struct ptwk_probes probes;
	struct ptw_kernel_bpf *skel;
	bool multi;
	int multi_fds[2];
	/* links that match nothing since a thread other than the main one
	 * exec'd (their task is gone): closed with the others */
	int stale_fds[4];
	size_t nstale;
	struct ptwk_closing *closing; /* the links closing in the background */
	struct bpf_link **links; /* tracepoints, and per-probe uprobes */
	size_t nlinks;
	struct ring_buffer *rb;
	int epfd, pidfd;
	struct ptwk_conv conv;
	struct ptwk_frames *frames; /* --trace (kframes.c), NULL without */
	bool frames_noted;	    /* its notes are in (end_notes) */
	struct ptwk_underway *underway; /* --trace -p: calls under way at the attach (underway.c) */
	bool debuginfod_noted; /* its failure said */
	bool frames_gone_noted; /* --trace: gone before its image's scan, said */
	bool window_clones_noted;
	bool zombie_leader; /* attached with its main thread exited */
	/* Threads start at their clone's return (bpf/ptw_start.bpf.h), not
	 * at start_thread (no debug file, or opts.start_at_clone). */
	bool start_at_clone;
	bool start_derived; /* start_thread found without its name (main_caller.h) */
	/* main's caller found without its name in this process (main_caller.h;
	 * an attach has no MAIN record to place it from), else 0, 0 */
	uint64_t main_caller_lo, main_caller_hi;
	struct ptwk_locks *locks; /* --locks, NULL when off */
	struct ptwk_locks_config locks_config;
	struct locks_tally released; /* -f: the waits of the followed ones released */
	bool locks_busy;	    /* -f: its deadlocks being checked (follow_release waits) */
	struct ptw_map sites; /* return address -> its call's location (text does not change) */
	struct ptw_map sigrets; /* --trace: return address -> 1 sigreturn trampoline, 2 not */
	uint64_t last_consume_ns;
	bool launched;	 /* ptw_kernel_launch: held before its exec */
	bool static_noted; /* a launched static program's probes could not be placed: said */
	dev_t static_dev;  /* the static program file probed (probes.in_exe) */
	ino_t static_ino;
	int libc_checks; /* after an exec: reads of its maps left to find its libc */
	bool end_lost;
	bool detached;
	const char *unfollowed_why; /* -f: a fork child the BPF side could not watch */
	char exe[4096];
	char *glibc; /* nptl's version, once read */
	struct ptw_warning_list notes; /* root only: the session's (note_as) */
	uint64_t lost_kinds[PTWK_LOCK_KIND_END]; /* records the full ring refused, by kind */
	bool lost_noted;
	uint32_t watch_slots, ns_tid_slots; /* the watched and ns_tids maps' sizes */
	uint64_t watch_full, ns_tids_full;  /* and the entries they refused, full */
	const char **note_texts;       /* their messages (ptw_kernel_notes) */
	struct ptw_kernel_stats stats;
	/* -f (follow forks, "---- -f" below): every process the target forks
	 * is a struct ptw_kernel of its own (root set) that shares the root's
	 * programs, links and ring: its own memory view, symbols, converter
	 * and record for the report. The root lists them all. */
	struct ptw_kernel *root; /* NULL: this is the root */
	uint32_t id, parent_id;	 /* ptw_process.id: 0 the root, then in order of fork */
	pid_t ppid, parent_tid;
	bool syms_borrowed; /* syms is its parent's (a fork child before its exec) */
	bool syms_lent;	    /* a child borrows syms: keep it whole at an exec */
	char **argv;
	uint64_t start_ns;
	struct ptw_kernel **followed; /* root: followed[i] has id i + 1 */
	size_t nfollowed;
	struct ptw_map by_pid; /* root: pid -> its latest followed process */
	struct ptw_process *report_procs;
	/* Records read from the ring by the drain thread (root only, see
	 * drainer()) into inq, taken into queue and converted here. cur: the
	 * one being converted (its image, for on_exec and image_ready). */
	struct drained *inq, *queue;
	size_t ninq, capinq, nqueue, capqueue, cur;
	bool converting;
	pthread_t drainer;
	bool drainer_on, drainer_stop;
	pthread_mutex_t qlock; /* inq, drain_req, drain_done, drainer_stop, stats.records */
	pthread_cond_t qcond;  /* drain_done moved */
	pthread_cond_t qroom;  /* inq taken (or a drain asked for): room to read into */
	uint64_t drain_req, drain_done;
	bool queue_full; /* queue was taken at INQ_MAX: the ring holds more */
	int wake_fd;   /* eventfd: drain now, or stop */
	int notify_fd; /* eventfd: the kernel woke the drainer, records are queued */
	int drain_epfd;
	unsigned images_unread;	     /* exec'd images gone before drain_capture read them */
	/* ld.so's module lists, walked in the target ("---- modules"):
	 * root: the probe; each process: its list being gathered. */
	bool mods_on;
	int mods_fd;		    /* its uprobe_multi link, else: */
	struct bpf_link *mods_link; /* its ordinary uprobe */
	char mods_ld[4096];
	uint64_t mods_off;
	int64_t rdebug_from_probe;
	struct ptwk_modlist modlist;
	bool mods_listed;	     /* its symbols come from a list (this image) */
	uint64_t exec_ns;	     /* its exec converted (check_libc's wait for a list) */
	struct ptw_map drain_listed; /* drain thread only: tgid -> a whole list since its exec */
	/* drain thread only once started: a launched static program (ET_EXEC)
	 * whose exec is to come, its modules known without /proc */
	bool static_exec;
};

/*
 * A record taken from the ring, and for an exec (and main() about to run)
 * what was read of the image at once, by the drain thread: converting
 * (naming code: symbol tables, DWARF) can take long, tens of ms for a new
 * image, and a short process is gone by then, its /proc with it. The
 * tracer reads them at the exec stop; the kernel path as soon as the
 * record arrives (both wake the reader).
 */
struct drained {
	struct ptwk_record r;
	void *lock_record; /* --locks: the whole record (a struct ptwk_lock_record) */
	size_t lock_size;
	struct ptw_symbols *syms; /* its modules (at an exec: the exe and ld.so so far) */
	char *exe;		  /* EXEC: /proc/PID/exe */
	int link_fds[2];	  /* FORK, follow_per_child: the child's links */
	char **argv;		  /* EXEC: its command line */
	struct ptwk_module_record *module; /* MODULE: the whole record */
	struct ptwk_args_record *args;	   /* EXEC_ARGS: the whole record */
};

/* -f, defined at the end ("---- -f"). */
static struct ptw_kernel *follow_process_of(struct ptw_kernel *k, uint32_t tgid);
static void follow_fork(struct ptw_kernel *k, struct ptw_kernel *parent,
			const struct ptwk_record *r);
static void follow_exec(struct ptw_kernel *p);
static void follow_check_gone(struct ptw_kernel *k);
static void follow_consume(struct ptw_kernel *k);
static bool follow_ended(struct ptw_kernel *k);
static void follow_descendants(struct ptw_kernel *k);
static void follow_release(struct ptw_kernel *c);

/* What the backend could not do, as the report's warnings (the code
 * says what kind of thing; note() is the generic one). */
static void note_va(struct ptw_kernel *k, enum ptw_warning_code code, const char *fmt, va_list ap)
{
	if (k->root)
		k = k->root; /* -f: the caller reads the root's */
	struct ptw_buf b = { 0 };
	ptw_buf_vprintf(&b, fmt, ap);
	/* merged with the same one said before, counted, never dropped */
	ptw_warning_list_add(&k->notes, code, NULL, b.p ? b.p : xstrdup(""));
}

static void note_as(struct ptw_kernel *k, enum ptw_warning_code code, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));
static void note_as(struct ptw_kernel *k, enum ptw_warning_code code, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	note_va(k, code, fmt, ap);
	va_end(ap);
}

static void note(struct ptw_kernel *k, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void note(struct ptw_kernel *k, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	note_va(k, PTW_W_KERNEL_LIMIT, fmt, ap);
	va_end(ap);
}

/* The initial PID namespace's inode (include/linux/proc_ns.h): any
 * other is a namespace of its own. */
#define PROC_PID_INIT_INO 0xEFFFFFFCu

static void why_set(char *why, size_t size, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));
static void why_set(char *why, size_t size, const char *fmt, ...)
{
	if (!why || !size)
		return;
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(why, size, fmt, ap);
	va_end(ap);
}

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
		why_set(why, size,
			"this kernel has no BTF (/sys/kernel/btf/vmlinux, CONFIG_DEBUG_INFO_BTF): "
			"the BPF programs cannot be relocated to it");
		return -ENOTSUP;
	}
	if (access("/sys/bus/event_source/devices/uprobe/type", R_OK) < 0) {
		why_set(why, size, "this kernel has no uprobes (CONFIG_UPROBE_EVENTS)");
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
			why_set(why, size,
				"not allowed to load BPF programs (%s): needs root, or CAP_BPF and "
				"CAP_PERFMON (and CAP_SYS_ADMIN where uprobe_multi is missing)",
				strerror(err));
		else
			why_set(why, size, "cannot load a BPF program: %s", strerror(err));
		return -(err == EACCES ? EPERM : err);
	}
	close(fd);
	return 0;
}

/* ---- callbacks for the converter ---- */

/* k's process died of SIGTRAP: whether the trap was a uprobe's (a
 * breakpoint the kernel put in for ptwatch, or for another tool, that no
 * longer applied there) or the program's own, in a warning. The file's
 * byte tells: an int3 the file does not hold was put there. */
static void trap_death(struct ptw_kernel *k)
{
	const struct ptwk_conv *c = &k->conv;
	if (!c->trap.seen) {
		note_as(k, PTW_W_SIGTRAP_DEATH,
			"process %d died of SIGTRAP, which ptwatch did not see delivered to it", k->pid);
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
	note_as(k, PTW_W_SIGTRAP_DEATH, "%s", text);
	free(text);
}

static void sink(void *ctx, const struct ptw_event *ev)
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
		if (ev->sig == SIGTRAP)
			trap_death(k);
	}
	(k->root ? k->root : k)->stats.events++;
	if (!ev->pid) { /* (--locks': the converter's carry theirs) */
		struct ptw_event e = *ev;
		e.pid = k->pid;
		e.process = k->conv.process;
		k->o.sink(k->o.sink_ctx, &e);
		return;
	}
	k->o.sink(k->o.sink_ctx, ev);
}

static const struct ptw_location *locate(void *ctx, uint64_t addr)
{
	struct ptw_kernel *k = ctx;
	return k->syms ? ptw_symbols_locate(k->syms, addr) : NULL;
}

/* The call instruction before a return address, as the tracer names a
 * create site (the process may have gone: then the byte before it). */
static const struct ptw_location *call_site(void *ctx, uint64_t ret)
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
	site = locate(k, ret - (uint64_t)(len ? len : 1));
	if (site)
		ptw_map_put(&k->sites, ret, (void *)(uintptr_t)site);
	return site;
}

/* What --locks reads of process k, and where its waits go. */
static struct ptwk_locks_env locks_env(struct ptw_kernel *k)
{
	return (struct ptwk_locks_env){ .pid = k->pid,
					.proc = k->proc,
					.syms = &k->syms,
					.conv = &k->conv,
					.sink = sink,
					.call_site = call_site,
					.ctx = k };
}

/* glibc calls main from __libc_start_call_main (2.34+), before that from
 * __libc_start_main, and hands its value to exit() there. */
static bool main_returns_to(void *ctx, uint64_t ret)
{
	const struct ptw_kernel *k = ctx;
	if (ret - k->main_caller_lo < k->main_caller_hi - k->main_caller_lo)
		return true; /* no symbol table: its range, found (main_caller.h) */
	const struct ptw_location *l = locate(ctx, ret);
	return l && l->symbol &&
	       (!strcmp(l->symbol, "__libc_start_call_main") ||
		!strcmp(l->symbol, "__libc_start_main"));
}

static const struct ptw_location *frame_function(void *ctx, uint64_t index)
{
	return ptwk_frames_function(((struct ptw_kernel *)ctx)->frames, index);
}

static void scan_frames(struct ptw_kernel *k);

/* --trace's, one for the session: -f's processes share the root's (their
 * probes are on the files, for every watched process). */
static struct ptwk_frames *frames_of(const struct ptw_kernel *k)
{
	return k->root ? k->root->frames : k->frames;
}

/* The sigreturn trampoline a signal handler returns to, known by its code
 * (ptw_glibc.h; its first byte may be the int3 of ptwatch's own uprobe
 * there). Read once per return address. */
static bool is_sigreturn(void *ctx, uint64_t addr)
{
	struct ptw_kernel *k = ctx;
	uintptr_t known = (uintptr_t)ptw_map_get(&k->sigrets, addr);
	if (known || !addr || !k->proc)
		return known == 1;
	uint8_t got[PTW_GLIBC_SIGRETURN_LEN];
	bool yes = ptw_mem_read(k->proc, addr, got, sizeof(got)) == 0 &&
		   ptw_glibc_is_sigreturn(got, sizeof(got));
	ptw_map_put(&k->sigrets, addr, (void *)(uintptr_t)(yes ? 1 : 2));
	return yes;
}

/* dlopen, dlclose: the new libraries' traced functions get their probes
 * now; the process ran on meanwhile (kframes.h). */
static void modules_changed(void *ctx)
{
	struct ptw_kernel *k = ctx;
	if (!frames_of(k) || !k->syms)
		return;
	if (!(k->root ? k->root : k)->mods_on) /* (else ld.so's list, walked in it, says) */
		ptw_symbols_refresh(k->syms);
	scan_frames(k);
}

static int memread(void *ctx, uint64_t addr, void *buf, size_t len)
{
	return ptw_mem_read(ctx, addr, buf, len);
}

/* A process's memory by pid alone (process_vm_readv): for the symbols the
 * drain thread reads, which must not open a memory view (ptw_proc_open
 * hands its descriptor to the caller's hook, not made for threads). */
static int pid_memread(void *ctx, uint64_t addr, void *buf, size_t len)
{
	struct iovec local = { buf, len }, remote = { (void *)(uintptr_t)addr, len };
	ssize_t n = process_vm_readv((pid_t)(intptr_t)ctx, &local, 1, &remote, 1, 0);
	return n == (ssize_t)len ? 0 : n < 0 ? -errno : -EIO;
}

static int load_symbols(struct ptw_kernel *k)
{
	char *cache_dir = k->o.use_cache ? ptw_cache_default_dir() : NULL;
	int r = k->root ? ptw_symbols_new(k->pid, k->o.use_debug_files, cache_dir, pid_memread,
					  (void *)(intptr_t)k->pid, &k->syms)
			: ptw_symbols_new(k->proc->mem_pid, k->o.use_debug_files, cache_dir,
					  memread, k->proc, &k->syms);
	free(cache_dir);
	return r;
}

static void check_libc(struct ptw_kernel *k);
static void read_glibc(struct ptw_kernel *k);

/* A new image's libraries are mapped: its symbols, now that the process
 * lives (a short one may be gone by the next read of the ring). */
static void image_ready(void *ctx)
{
	struct ptw_kernel *k = ctx;
	struct ptw_kernel *root = k->root ? k->root : k;
	struct drained *d = root->converting ? &root->queue[root->cur] : NULL;
	if (d && d->r.kind == PTWK_MAIN && d->syms) {
		/* Its modules as the drain thread read them, all mapped. The
		 * ones before stay whole: events point into them. */
		if (k->syms && !k->syms_borrowed) {
			k->old_syms =
				xreallocarray(k->old_syms, k->nold_syms + 1, sizeof(*k->old_syms));
			k->old_syms[k->nold_syms++] = k->syms;
		}
		k->syms = d->syms;
		k->syms_borrowed = false;
		d->syms = NULL;
	} else if (!d && k->syms && !k->syms_borrowed) {
		/* (A MAIN record drained without its modules: the process was
		 * gone. Reading them again now would only lose those read at
		 * its exec.) */
		ptw_symbols_refresh(k->syms);
	}
	if (k->libc_checks > 0)
		check_libc(k);
	read_glibc(k);
	scan_frames(k);
}

static pid_t probe_pid(const struct ptw_kernel *k);
static int attach_multi_to(struct ptw_kernel *k, uint32_t pid, int fds[2]);

/* Does k's new image (exe) run the static program file the probes are on
 * (a launch's, or its -f descendants'), not one put in its place since?
 * (Gone already and no file there: it is taken to be.) */
static bool exec_probed(const struct ptw_kernel *k, const char *exe)
{
	const struct ptw_kernel *root = k->root ? k->root : k;
	char path[64];
	struct stat st;
	snprintf(path, sizeof(path), "/proc/%d/exe", k->pid);
	if (stat(path, &st) < 0 && (!exe[0] || stat(exe, &st) < 0))
		return true;
	return st.st_ino == root->static_ino && st.st_dev == root->static_dev;
}

/* exec: a new image. Its symbols are loaded when first needed (now its
 * libc may not even be mapped yet); the old ones stay for the events that
 * point into them. */
static const char *on_exec(void *ctx)
{
	struct ptw_kernel *k = ctx;
	const struct ptwk_probes *probes = k->root ? &k->root->probes : &k->probes;
	if (k->syms_borrowed) {
		k->syms = NULL; /* -f: its parent's, which still runs that image */
		k->syms_borrowed = false;
	}
	if (k->syms) {
		if (!k->syms_lent) /* its fork children still look up in it */
			ptw_symbols_retire(k->syms);
		k->old_syms = xreallocarray(k->old_syms, k->nold_syms + 1, sizeof(*k->old_syms));
		k->old_syms[k->nold_syms++] = k->syms;
		k->syms = NULL;
	}
	ptw_map_free(&k->sites);
	ptw_map_free(&k->sigrets);
	struct ptw_kernel *root = k->root ? k->root : k;
	struct drained *d = root->converting ? &root->queue[root->cur] : NULL;
	ssize_t n;
	free(k->glibc); /* the new image's is read once its libc is mapped */
	k->glibc = NULL;
	k->main_caller_lo = k->main_caller_hi = 0; /* (the old image's libc) */
	if (d && d->r.kind == PTWK_EXEC) {
		/* What drain() read while the new image ran (nothing if it was
		 * gone already). */
		if (!d->syms && !root->mods_on) /* (with lists: none read at an exec) */
			root->images_unread++;
		if (k->proc)
			ptw_mem_invalidate(k->proc); /* (read by pid: the new image) */
		k->syms = d->syms;
		d->syms = NULL;
		n = d->exe ? (ssize_t)strlen(d->exe) : 0;
		snprintf(k->exe, sizeof(k->exe), "%s", d->exe ? d->exe : "");
		/* (Gone already: its command line is unknown, not its parent's.) */
		ptw_argv_free(k->argv);
		k->argv = d->argv;
		d->argv = NULL;
	} else {
		ptw_mem_invalidate(k->proc);
		load_symbols(k);
		char path[64];
		snprintf(path, sizeof(path), "/proc/%d/exe", k->pid);
		n = readlink(path, k->exe, sizeof(k->exe) - 1);
		k->exe[n > 0 ? n : 0] = '\0';
		follow_exec(k);
	}
	bool launch = k->launched;
	if (k->launched)
		k->launched = false;
	if (launch && n > 0 && k->exe[0] != '/') {
		/* Gone before its exe was read: the path it was exec'd by is
		 * relative to its working directory then, ours (our fork, held
		 * until its exec); unresolved, ld.so's "" for the program would
		 * name no file and nothing in it would have a name. */
		char *real = realpath(k->exe, NULL);
		if (real && strlen(real) < sizeof(k->exe))
			n = snprintf(k->exe, sizeof(k->exe), "%s", real);
		free(real);
	}
	if (!launch && d && d->r.kind == PTWK_EXEC && (pid_t)d->r.a != k->pid &&
	    probe_pid(k) > 0 && !k->conv.blind) {
		/* The exec'ing thread took the process's pid; the probes' link
		 * holds the task that was the main thread, now gone, and the
		 * kernel filters by its memory: none. Links made now hold the
		 * new main task; what the image did meanwhile is not seen. */
		int fds[2] = { -1, -1 };
		if (k->multi && k->nstale + 2 <= PTW_ARRAY_SIZE(k->stale_fds) &&
		    attach_multi_to(k, (uint32_t)k->pid, fds) == 0) {
			for (int i = 0; i < 2; i++) {
				k->stale_fds[k->nstale++] = k->multi_fds[i];
				k->multi_fds[i] = fds[i];
			}
			uint64_t now = ptw_now_ns();
			note_as(k, PTW_W_KERNEL_NOT_SEEN,
				"thread %d, not the main thread, exec'd: the kernel's uprobes for one "
				"process follow its main thread, and were put in again for the new "
				"one %.1f ms after the exec: what the new image did before is seen "
				"only as clones and exits",
				(int)d->r.a, now > d->r.ns ? (double)(now - d->r.ns) / 1e6 : 0.0);
			k->conv.probes_in_ns = now; /* (its clones before: the window's) */
			/* ld.so's list and main() may have gone by meanwhile
			 * (then its libraries are all mapped): its modules from
			 * /proc now, while it runs; a list that comes after
			 * replaces them */
			if (root->mods_on && !k->syms) {
				int lr = load_symbols(k);
				ptw_dbg(PTW_DBG_SYM, "process %d: modules from /proc after the exec: %s",
					k->pid, lr < 0 ? strerror(-lr) : "read");
				if (lr < 0)
					k->syms = NULL;
			}
		} else {
			for (int i = 0; i < 2; i++)
				if (fds[i] >= 0)
					close(fds[i]);
			k->conv.blind = true;
			note_as(k, PTW_W_KERNEL_NOT_SEEN,
				"thread %d, not the main thread, exec'd: the kernel's uprobes for one "
				"process follow its old main thread, and no longer fire: the new "
				"image's threads are seen only as clones and exits (the ptrace path "
				"sees them)",
				(int)d->r.a);
		}
	}
	/* Its libc is mapped by its ld.so, a moment later: if it is not the
	 * file the probes are on, check_libc says so (the probes are on the
	 * file: the same libc in the new image is seen as in the old). */
	k->libc_checks = 100;
	k->mods_listed = false;
	k->exec_ns = ptw_now_ns();
	if (probes->in_exe && (launch || k->root) && !exec_probed(k, k->exe) &&
	    !ptw_elf_is_static(k->exe)) {
		/* (-f: one file's probes for every process, the static program's) */
		k->libc_checks = 0;
		note_as(k, PTW_W_KERNEL_NOT_SEEN,
			"%s is not the static program %s the probes are on: its threads are seen "
			"only as clones and exits (the ptrace path sees them)",
			n > 0 ? k->exe : "the new image", probes->module);
	}
	if (n > 0 && ptw_elf_is_static(k->exe)) {
		k->libc_checks = 0;
		if (!(probes->in_exe && exec_probed(k, k->exe)) && !k->static_noted)
			note_as(k, PTW_W_KERNEL_NOT_SEEN,
				"%s is a static program: the probes on %s do not see its threads "
				"(only their creation and exit): the kernel path probes a static "
				"program's own file when it launches or attaches to it, not at an "
				"exec",
				k->exe, probes->module);
	}
	return n > 0 ? k->exe : NULL;
}

/* ---- the ring buffer ---- */

static char **read_cmdline(pid_t pid);
static int attach_multi_to(struct ptw_kernel *k, uint32_t pid, int fds[2]);

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
		if (ptw_symbols_new_listed(pid, &m, 1, k->o.use_debug_files, cache_dir, pid_memread,
					   (void *)(intptr_t)pid, &d->syms) < 0)
			d->syms = NULL;
		else /* (and none read at main) */
			ptw_map_put(&k->drain_listed, (uint64_t)pid, (void *)1);
		free(cache_dir);
		listed = true;
	}
	if (!listed && !(d->r.kind == PTWK_EXEC && k->mods_on)) {
		char *cache_dir = k->o.use_cache ? ptw_cache_default_dir() : NULL;
		if (ptw_symbols_new(pid, k->o.use_debug_files, cache_dir, pid_memread,
				    (void *)(intptr_t)pid, &d->syms) < 0)
			d->syms = NULL; /* gone already: nothing of it to name */
		free(cache_dir);
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

static int on_record(void *ctx, void *data, size_t size)
{
	struct ptw_kernel *k = ctx;
	struct drained d = { .link_fds = { -1, -1 } };
	if (size < sizeof(d.r))
		return 0;
	memcpy(&d.r, data, sizeof(d.r)); /* the ring's alignment is 8: copy anyway */
	int lr;
	if (d.r.kind == PTWK_FORK && k->o.follow_forks && k->o.follow_per_child && k->multi &&
	    !(d.r.f & PTWK_F_UNWATCHED) && (lr = attach_multi_to(k, (uint32_t)d.r.a, d.link_fds)) < 0)
		ptw_dbg(PTW_DBG_TRACER, "no link for child %u: %s", (unsigned)d.r.a, strerror(-lr));
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
	pthread_mutex_lock(&k->qlock);
	if (k->ninq == k->capinq) {
		k->capinq = k->capinq ? k->capinq * 2 : 256;
		k->inq = xreallocarray(k->inq, k->capinq, sizeof(*k->inq));
	}
	k->inq[k->ninq++] = d;
	k->stats.records++;
	bool full = k->ninq >= INQ_MAX;
	pthread_mutex_unlock(&k->qlock);
	/* (libbpf has taken this record from the ring: it is kept; the next
	 * stay there until the converter takes inq) */
	return full ? -ENOBUFS : 0;
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
		pthread_mutex_unlock(&k->qlock);
		if (stop)
			break;
		int got = ring_buffer__consume(k->rb);
		pthread_mutex_lock(&k->qlock);
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

static int drainer_start(struct ptw_kernel *k)
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
	sigset_t all, old;
	sigfillset(&all);
	pthread_sigmask(SIG_SETMASK, &all, &old);
	int r = pthread_create(&k->drainer, NULL, drainer, k);
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	if (r)
		return -r;
	k->drainer_on = true;
	return 0;
}

static void drainer_stop(struct ptw_kernel *k)
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

/* Every record in the ring now into inq, then inq taken into queue. */
static int drain(struct ptw_kernel *k)
{
	int r = 0;
	if (!k->drainer_on) {
		r = ring_buffer__consume(k->rb); /* (stopped: this thread reads) */
		r = r == -ENOBUFS ? 0 : r;
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

static void drained_free(struct drained *d)
{
	if (d->syms)
		ptw_symbols_free(d->syms);
	free(d->exe);
	for (int i = 0; i < 2; i++)
		if (d->link_fds[i] >= 0)
			close(d->link_fds[i]);
	ptw_argv_free(d->argv);
	free(d->lock_record);
	free(d->module);
	free(d->args);
}

static void modules_record(struct ptw_kernel *k, const struct drained *d);
static void exec_args_record(struct ptw_kernel *k, const struct drained *d);
static void modules_find(struct ptw_kernel *k);
static int modules_attach(struct ptw_kernel *k);
static void modules_close(struct ptw_kernel *k);

/* Converts what drain() took. */
static void convert_queue(struct ptw_kernel *k)
{
	k->converting = true;
	for (k->cur = 0; k->cur < k->nqueue; k->cur++) {
		struct drained *d = &k->queue[k->cur];
		struct ptw_kernel *p = follow_process_of(k, d->r.tgid);
		if (p) {
			if (d->r.kind == PTWK_FORK && k->o.follow_forks) {
				follow_fork(k, p, &d->r);
				/* (follow_per_child: its links, closed at its free) */
				memcpy(k->followed[k->nfollowed - 1]->multi_fds, d->link_fds,
				       sizeof(d->link_fds));
				d->link_fds[0] = d->link_fds[1] = -1;
			}
			if (d->r.kind == PTWK_MODULE || d->r.kind == PTWK_MODULES_END)
				modules_record(p, d);
			else if (d->r.kind == PTWK_EXEC_ARGS)
				exec_args_record(p, d);
			else if (d->r.kind < PTWK_LOCK_FIRST)
				ptwk_conv_record(&p->conv, &d->r);
		}
		/* (each process's waits its own: locks.c reads its memory) */
		if (p && p->locks) /* (a join's return too) */
			ptwk_locks_record(p->locks, d->lock_record ? d->lock_record : (void *)&d->r,
					  d->lock_record ? d->lock_size : sizeof(d->r));
		drained_free(&k->queue[k->cur]);
	}
	k->converting = false;
	k->nqueue = 0;
	k->cur = 0;
}

/*
 * The probes are on one file: after an exec (a launch's, or the target's)
 * they fire only if the new image maps that same libc. Said once its
 * ld.so has mapped one (or given up after 100 reads: a static program).
 */
static void check_libc(struct ptw_kernel *k)
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
	     minor(st.st_dev) != libc->dev_minor))
		note_as(k, PTW_W_KERNEL_NOT_SEEN,
			"%s maps %s, not the %s the probes are on: its threads are not seen", k->exe,
			libc->path, probes->module);
	else if (!libc && n >= 0 && k->libc_checks == 0) /* (n < 0: gone, not static) */
		note_as(k, PTW_W_KERNEL_NOT_SEEN,
			"%s maps no libc.so (static, or not glibc): its threads are not seen",
		     k->exe);
	if (libc || n < 0)
		k->libc_checks = 0;
	free(maps);
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
		check_libc(k);
	k->last_consume_ns = ptw_now_ns();
	follow_check_gone(k);
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
	follow_consume(k);
	return (int)n;
}

/* Everything in the ring now, however many chunks of INQ_MAX it takes
 * (the end, the detach). */
static void consume_all(struct ptw_kernel *k)
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

static void close_links_start(struct ptw_kernel *k);

int ptw_kernel_run(struct ptw_kernel *k, int timeout_ms)
{
	uint64_t deadline = timeout_ms >= 0 ? ptw_now_ns() + (uint64_t)timeout_ms * 1000000 : 0;
	bool first = true; /* timeout 0: one pass that does not wait */
	while (!k->conv.ended || !follow_ended(k)) {
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
			consume_all(k);
			/* (its last thread's exit is in, another's is not: lost) */
			ptwk_conv_end_pending(&k->conv);
			if (!k->conv.ended) {
				/* Its end did not fit in the ring: say so, and end. */
				note_as(k, PTW_W_KERNEL_EVENTS_LOST,
					"the end of process %d was not recorded (lost)", k->pid);
				struct ptw_event ev =
					ptw_event_init(PTW_EV_PROCESS_EXIT, ptw_now_ns(), k->pid);
				ev.pid = k->pid;
				k->conv.ended = true;
				k->end_lost = true; /* how it ended is unknown */
				sink(k, &ev);
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
		close_links_start(k);
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
static void main_caller_derive(struct ptw_kernel *k)
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

/* ---- loading and attaching ---- */

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

/* Where threads start: start_thread's uprobe (by name, else derived),
 * else the clone's return in the new thread, which needs struct pthread's
 * tid to tell a pthread from a raw clone (and costs a detach 100-150 ms
 * longer: measured with ptw-kernel-demo). opts.start_at_clone: the clone's
 * return even with start_thread (measuring); its uprobe is then left out. */
static void start_where(struct ptw_kernel *k)
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

static int open_skeleton(struct ptw_kernel *k, bool multi)
{
	/* CO-RE against the BTF made at build time for this very kernel
	 * (minbtf.h), else the kernel's own (parsed whole by libbpf). */
	char btf_path[64];
	const char *why_not = "not tried";
	int btf_fd = k->o.no_min_btf ? -1 : ptwk_min_btf_open(btf_path, sizeof(btf_path), &why_not);
	LIBBPF_OPTS(bpf_object_open_opts, oo, .btf_custom_path = btf_fd >= 0 ? btf_path : NULL);
	k->stats.btf =
		btf_fd >= 0 ? "minimal (made at build time for this kernel)" : "the kernel's";
	ptw_dbg(PTW_DBG_TRACER, "CO-RE: %s BTF%s%s", k->stats.btf,
		btf_fd >= 0 ? "" : "; minimal: ", btf_fd >= 0 ? "" : why_not);
	struct ptw_kernel_bpf *s = ptw_kernel_bpf__open_opts(&oo);
	if (!s) {
		int e = -errno ? -errno : -ENOMEM;
		if (btf_fd >= 0)
			close(btf_fd);
		return e;
	}
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
	s->rodata->off_pd_tid = l->tid;
	s->rodata->have_pd_tid = l->have_tid;
	s->rodata->wake_bytes = k->o.wake_bytes;
	s->rodata->rdebug_from_probe = k->rdebug_from_probe;
	s->rodata->wake_on_fork = k->o.follow_forks && k->o.follow_per_child;
	s->rodata->locks_on = k->locks_config.on;
	s->rodata->join_always_blocks = k->locks_config.join_always_blocks;
	s->rodata->have_tid = k->locks_config.have_tid;
	s->rodata->off_tid = k->locks_config.off_tid;
	struct stat ns;
	if (stat("/proc/self/ns/pid", &ns) == 0 && ns.st_ino != PROC_PID_INIT_INO) {
		/* a container: every pid in its namespace, as ptwatch sees them */
		s->rodata->pidns_on = 1;
		s->rodata->pidns_dev = ns.st_dev;
		s->rodata->pidns_ino = ns.st_ino;
	}
	int r = bpf_map__set_max_entries(s->maps.rb, (uint32_t)k->o.ring_bytes);
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
					      s->progs.ptw_frame_helper };
	/* calls under way at an attach (underway.c) */
	if (r == 0 && (!k->o.ntrace || k->launched))
		r = bpf_program__set_autoload(s->progs.ptw_underway_regs, false);
	if (r == 0 && (!k->o.ntrace || k->launched))
		r = bpf_program__set_autoload(s->progs.ptw_underway_return, false);
	else if (r == 0 && multi)
		r = bpf_program__set_expected_attach_type(
			s->progs.ptw_underway_return,
			(enum bpf_attach_type)PTWK_BPF_TRACE_UPROBE_MULTI);
	for (size_t i = 0; i < PTW_ARRAY_SIZE(frame_progs) && r == 0; i++)
		if (!k->o.ntrace)
			r = bpf_program__set_autoload(frame_progs[i], false);
		else if (multi)
			r = bpf_program__set_expected_attach_type(
				frame_progs[i], (enum bpf_attach_type)PTWK_BPF_TRACE_UPROBE_MULTI);
	/* (machine-wide tracepoints: loaded only when they start threads) */
	if (r == 0 && !k->start_at_clone)
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
 * -f: which processes the uprobes are in. Without -f, the target's only:
 * a uprobe (per-pid uprobe_multi, or a perf uprobe with a pid) filters by
 * the process's memory (mm), so nothing else on the machine hits them.
 * With -f they must also fire in every process the target forks, from the
 * child's first instruction on, and a child's mm is not its parent's:
 * a link per child, attached from here once its fork record is read,
 * comes too late (the child runs meanwhile: a thread it makes at once is
 * missed). So with -f the probes are on libc's file for every process
 * (pid 0 / -1), and the BPF programs keep only the watched tgids, which
 * the fork tracepoint extends before the child first runs: race-free, to
 * any depth, and through an exec into a program that maps the same libc.
 * The price: every process on the machine that maps this libc hits the
 * probes too (a trap and a map lookup per pthread_create, thread start
 * and end, join, and exit(): measured in the report of the -f work).
 */
static pid_t probe_pid(const struct ptw_kernel *k)
{
	/* A uprobe_multi link for a pid filters by its leader's memory: once
	 * the leader has exited (pthread_exit from main, a zombie now) it
	 * has none, and nothing would fire. Then the file's too. */
	return (k->o.follow_forks && !k->o.follow_per_child) || k->zombie_leader ? -1 : k->pid;
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
static int attach_multi_to(struct ptw_kernel *k, uint32_t pid, int fds[2])
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
		struct bpf_program *prog =
			ret ? k->skel->progs.ptw_return : k->skel->progs.ptw_entry;
		struct ptwk_link_create_uprobe_multi a = {
			.prog_fd = (uint32_t)bpf_program__fd(prog),
			.attach_type = PTWK_BPF_TRACE_UPROBE_MULTI,
			.path = (uint64_t)(uintptr_t)k->probes.path,
			.offsets = (uint64_t)(uintptr_t)offsets,
			.cookies = (uint64_t)(uintptr_t)cookies,
			.cnt = n,
			.multi_flags = ret ? PTWK_BPF_F_UPROBE_MULTI_RETURN : 0,
			.pid = pid, /* 0: every process */
		};
		int fd = (int)syscall(__NR_bpf, BPF_LINK_CREATE, &a, sizeof(a));
		if (fd < 0)
			return -errno;
		fds[ret] = fd;
	}
	return 0;
}

static int attach_multi(struct ptw_kernel *k)
{
	int r = attach_multi_to(k, probe_pid(k) < 0 ? 0 : (uint32_t)k->pid, k->multi_fds);
	if (r == 0)
		k->stats.probes += (unsigned)k->probes.n;
	return r;
}

/* The fallback: a perf event per probe, for this pid. */
static int attach_each(struct ptw_kernel *k)
{
	for (size_t i = 0; i < k->probes.n; i++) {
		const struct ptwk_probe *p = &k->probes.p[i];
		LIBBPF_OPTS(bpf_uprobe_opts, opts, .retprobe = p->ret, .bpf_cookie = p->kind);
		struct bpf_program *prog =
			p->ret ? k->skel->progs.ptw_return : k->skel->progs.ptw_entry;
		struct bpf_link *l = bpf_program__attach_uprobe_opts(
			prog, probe_pid(k), k->probes.path, (size_t)p->offset, &opts);
		if (!l)
			return -errno;
		keep_link(k, l);
		k->stats.probes++;
	}
	return 0;
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
			note_as(k, PTW_W_HOOK_FAILED, "%s (and the raw sys_exit tracepoint: %s)",
				k->probes.missing[k->probes.missing_start - 1], strerror(e));
		return;
	}
	keep_link(k, l);
}

static int attach_tracepoints(struct ptw_kernel *k)
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
	if (k->start_at_clone)
		attach_clone_exits(k);
	return 0;
}

/*
 * Closing a uprobe link waits for grace periods (closer.h): 25-50 ms for
 * each uprobe_multi link here, about 110 ms for each ordinary uprobe
 * (perf event). Closed together, from several threads, they wait for the
 * same ones: the detach costs about one link's close, however many.
 */
static void close_links_start(struct ptw_kernel *k)
{
	/* (calls under way: their return sites' links, closed first) */
	ptwk_underway_close(k->underway);
	/* --trace's links with the others, all at once */
	int *fds = NULL;
	struct bpf_link **links = NULL;
	size_t nfds = 0, nlinks = 0;
	ptwk_frames_take_links(k->frames, &fds, &nfds, &links, &nlinks);
	fds = xreallocarray(fds, nfds + 2 + k->nstale, sizeof(*fds));
	fds[nfds++] = k->multi_fds[0];
	fds[nfds++] = k->multi_fds[1];
	k->multi_fds[0] = k->multi_fds[1] = -1;
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

static void close_links(struct ptw_kernel *k)
{
	close_links_start(k);
	ptwk_close_wait(k->closing);
	k->closing = NULL;
	ptwk_frames_close(k->frames);
}

static int load_and_attach(struct ptw_kernel *k, char *why, size_t why_size)
{
	uint64_t t0 = ptw_now_ns();
	int r = -ENOTSUP;
	k->multi = false;
	if (!k->o.no_multi && open_skeleton(k, true) == 0) {
		k->multi = true;
		r = 0;
	}
	if (!k->multi && (r = open_skeleton(k, false)) < 0) {
		why_set(why, why_size, "cannot load the BPF programs: %s", strerror(-r));
		return r;
	}
	uint32_t key = (uint32_t)k->pid;
	struct ptwk_watch w = { .follow_forks = k->o.follow_forks, .root = 1 };
	if (bpf_map__update_elem(k->skel->maps.watched, &key, sizeof(key), &w, sizeof(w), BPF_ANY) <
	    0) {
		r = -errno;
		why_set(why, why_size, "cannot watch %d: %s", k->pid, strerror(-r));
		return r;
	}
	/* Creations and exits first, then the probes that need them. */
	if ((r = attach_tracepoints(k)) < 0) {
		why_set(why, why_size, "cannot attach to the scheduler tracepoints: %s",
			strerror(-r));
		return r;
	}
	if (k->multi && (r = attach_multi(k)) < 0) {
		/* Older kernel, or CAP_BPF without what uprobe_multi needs:
		 * load again for ordinary uprobes. */
		ptw_dbg(PTW_DBG_TRACER, "uprobe_multi: %s; one uprobe per probe instead",
			strerror(-r));
		close_links(k);
		ptw_kernel_bpf__destroy(k->skel);
		k->skel = NULL;
		k->multi = false;
		k->stats.probes = 0;
		if ((r = open_skeleton(k, false)) < 0) {
			why_set(why, why_size, "cannot load the BPF programs: %s", strerror(-r));
			return r;
		}
		if (bpf_map__update_elem(k->skel->maps.watched, &key, sizeof(key), &w, sizeof(w),
					 BPF_ANY) < 0 ||
		    (r = attach_tracepoints(k)) < 0) {
			r = r < 0 ? r : -errno;
			why_set(why, why_size, "cannot attach the BPF programs: %s", strerror(-r));
			return r;
		}
	}
	if (!k->multi && (r = attach_each(k)) < 0) {
		why_set(why, why_size, "cannot attach uprobes to %s in %d: %s", k->probes.module,
			k->pid, strerror(-r));
		return r;
	}
	if (k->mods_on && (r = modules_attach(k)) < 0) {
		/* (then /proc, as before) */
		ptw_dbg(PTW_DBG_TRACER, "no probe on %s's _dl_debug_state: %s", k->mods_ld,
			strerror(-r));
		k->mods_on = false;
	}
	k->stats.mode = k->multi ? "uprobe_multi" : "uprobe";
	if (!k->multi && probe_pid(k) > 0) /* (inode-wide ones keep firing) */
		note(k, "ordinary per-process uprobes (no uprobe_multi): they stop firing for the "
			"other threads once the main thread has exited");
	k->rb = ring_buffer__new(bpf_map__fd(k->skel->maps.rb), on_record, k, NULL);
	if (!k->rb) {
		r = -errno;
		why_set(why, why_size, "cannot read the ring buffer: %s", strerror(-r));
		return r;
	}
	k->stats.probes_ns = ptw_now_ns() - t0;
	return 0;
}

/* ---- --trace ---- */

static void note_line(void *ctx, int code, const char *line)
{
	note_as(ctx, (enum ptw_warning_code)code, "%s", line);
}

static void read_counters(struct ptw_kernel *k);

/* What a kind of record was, for the loss's warning. */
static const char *lost_kind_name(unsigned kind)
{
	static const char *const names[PTWK_KIND_N] = {
		[PTWK_START] = "thread starts", [PTWK_THREAD_BEGIN] = "thread starts",
		[PTWK_DEATH] = "thread ends", [PTWK_EXIT_CALL] = "pthread_exit calls",
		[PTWK_CANCEL] = "pthread_cancel calls", [PTWK_DETACH] = "pthread_detach calls",
		[PTWK_JOIN] = "joins", [PTWK_JOIN_RET] = "join returns",
		[PTWK_CREATE] = "thread creations", [PTWK_FORK] = "forks",
		[PTWK_EXIT] = "thread exits", [PTWK_EXEC] = "execs", [PTWK_EXIT_FN] = "exit calls",
		[PTWK_MAIN] = "main() starts", [PTWK_FRAME_ENTRY] = "traced calls' entries",
		[PTWK_FRAME_RETURN] = "traced calls' returns", [PTWK_THROW] = "throws",
		[PTWK_CATCH] = "catches", [PTWK_LONGJMP] = "longjmps",
		[PTWK_DL_STATE] = "library loads", [PTWK_FATAL_SIGNAL] = "fatal signals",
		[PTWK_SIGNAL] = "signal deliveries", [PTWK_SIGRETURN] = "signal returns",
		[PTWK_CONTEXT_SWAP] = "context switches", [PTWK_CONTEXT_SET] = "context switches",
		[PTWK_MODULE] = "module list entries", [PTWK_EXEC_ARGS] = "command lines",
	};
	if (kind >= PTWK_LOCK_FIRST)
		return kind == PTWK_LOCK_RET ? "wait returns" : "wait entries";
	return kind < PTWK_KIND_N && names[kind] ? names[kind] : "other records";
}

/* The records the full ring refused, by what they were, once (at the
 * target's end as at a detach: a launch whose command ends by itself
 * lost them too). */
static void lost_note(struct ptw_kernel *k)
{
	if (k->root || k->lost_noted || !(k->detached || k->conv.ended))
		return;
	if (k->skel && !k->detached)
		read_counters(k);
	if (k->ns_tids_full) {
		k->lost_noted = true;
		note(k,
		     "%llu threads' tids in ptwatch's PID namespace were not kept: its map (%u "
		     "entries) was full; an exec by one of them is not recognised as theirs",
		     (unsigned long long)k->ns_tids_full, k->ns_tid_slots);
	}
	if (!k->stats.lost)
		return;
	k->lost_noted = true;
	/* (kinds of one name summed) */
	const char *names[PTWK_LOCK_KIND_END];
	uint64_t sums[PTWK_LOCK_KIND_END];
	size_t m = 0;
	for (unsigned kind = 0; kind < PTWK_LOCK_KIND_END; kind++) {
		if (!k->lost_kinds[kind])
			continue;
		const char *name = lost_kind_name(kind);
		size_t j = 0;
		while (j < m && strcmp(names[j], name))
			j++;
		if (j == m) {
			names[m] = name;
			sums[m++] = 0;
		}
		sums[j] += k->lost_kinds[kind];
	}
	struct ptw_buf what = { 0 };
	for (size_t j = 0; j < m; j++)
		ptw_buf_printf(&what, "%s%llu %s", j ? ", " : "", (unsigned long long)sums[j],
			       names[j]);
	note_as(k, PTW_W_KERNEL_EVENTS_LOST,
		"%llu records lost (%s): the ring buffer (%zu bytes) was full; those events are "
		"missing",
		(unsigned long long)k->stats.lost, what.p ? what.p : "of no known kind",
		k->o.ring_bytes);
	ptw_buf_free(&what);
}

/* What could not be seen, said once the session is over (the process
 * ended, or ptwatch let go): debuginfod's failure, the threads made while
 * the probes went in, and what --trace could not do (a library loaded
 * late may still match a pattern until then). Once. */
static void end_notes(struct ptw_kernel *k)
{
	lost_note(k);
	const char *e = ptw_symbols_debuginfod_error();
	if (e && !k->debuginfod_noted) {
		k->debuginfod_noted = true;
		note_as(k, PTW_W_DEBUGINFOD_FAILED, "%s", e);
	}
	if (k->conv.window_clones && !k->window_clones_noted && (k->detached || k->conv.ended)) {
		k->window_clones_noted = true;
		note_as(k, PTW_W_KERNEL_NOT_SEEN,
			"%llu threads were made and ended while the probes went in: clones without "
			"a start routine or argument",
			(unsigned long long)k->conv.window_clones);
	}
	if (!k->frames || k->frames_noted || !(k->detached || k->conv.ended))
		return;
	k->frames_noted = true;
	ptwk_frames_notes(k->frames, note_line, k);
	if (k->conv.frames_too_deep)
		note(k,
		     "--trace: %llu calls nested under 64 others with their returns pending had no "
		     "return probe (the kernel's limit) and are reported unmatched",
		     (unsigned long long)k->conv.frames_too_deep);
	if (k->conv.frames_misrouted)
		note(k,
		     "--trace: %llu returns of traced calls went to another call's return address: "
		     "the kernel keeps one list of pending returns per thread whatever the stack, "
		     "and context switches (swapcontext) with traced calls open mixed it up; the "
		     "program did not run as it does untraced (use --backend=ptrace)",
		     (unsigned long long)k->conv.frames_misrouted);
	if (k->conv.frames_sigaltstack)
		note(k,
		     "--trace: a signal handler ran on an alternate stack (sigaltstack) above %llu "
		     "traced calls it interrupted: the kernel dropped their pending returns, taking "
		     "them for calls a longjmp left; when they return it kills the program with "
		     "SIGILL or sends it to another call's return address (use --backend=ptrace)",
		     (unsigned long long)k->conv.frames_sigaltstack);
	if (k->conv.frames_ctx_dropped)
		note(k,
		     "--trace: a context ran traced calls on a stack above %llu traced calls open in "
		     "a context that switched to it (swapcontext): the kernel dropped their "
		     "pending returns, taking them for calls a longjmp left; if they return, it "
		     "kills the program with SIGILL or sends it to another call's return address "
		     "(use --backend=ptrace)",
		     (unsigned long long)k->conv.frames_ctx_dropped);
	if (!k->conv.frames_misrouted && !k->conv.frames_ctx_dropped && k->conv.frames_ctx_open)
		note(k,
		     "--trace: %llu context switches (swapcontext) left traced calls open: their "
		     "returns rely on the kernel's one list of pending returns per thread, which a "
		     "context whose stack lies above them, or that switches back with its own traced "
		     "calls open, mixes up (returns lost, or sent to another call's caller: see "
		     "BUGS)",
		     (unsigned long long)k->conv.frames_ctx_open);
}

/* --trace's programs, as root (the session's) attaches them. */
static struct ptwk_frames_progs trace_progs(const struct ptw_kernel *root)
{
	return (struct ptwk_frames_progs){ .entry = root->skel->progs.ptw_frame_entry,
					   .ret = root->skel->progs.ptw_frame_return,
					   .helper = root->skel->progs.ptw_frame_helper,
					   .multi = root->multi,
					   .wide = probe_pid(root) <= 0 };
}

/*
 * The traced functions of the modules not scanned yet get their probes
 * (kframes.c): at the attach; for a launch when main is about to run (its
 * libraries are mapped then, but it runs on meanwhile: calls made before
 * the probes are in are not seen).
 */
static void scan_frames(struct ptw_kernel *k)
{
	struct ptwk_frames *frames = frames_of(k);
	struct ptw_kernel *root = k->root ? k->root : k;
	if (!frames || !k->syms || !root->skel || root->detached)
		return;
	struct ptwk_frames_progs pr = trace_progs(root);
	char why[256] = "";
	unsigned before = ptwk_frames_probes(frames);
	int r = ptwk_frames_scan(frames, k->syms, k->pid, &pr, why, sizeof(why));
	if (r == -ENOENT && ptw_proc_exited(k->pid, k->pid)) {
		/* (an image exec'd, then gone before ptwatch read the exec) */
		if (k->frames_gone_noted)
			return;
		k->frames_gone_noted = true;
		note_as(root, PTW_W_KERNEL_NOT_SEEN,
			"--trace: process %d ended before the functions of its image (%s) could be "
			"probed: its calls are not seen",
			k->pid, k->exe[0] ? k->exe : "exec'd");
	} else if (r < 0)
		note(root, "--trace: %s", why);
	root->stats.probes += ptwk_frames_probes(frames) - before;
	k->conv.sigreturn_probed = ptwk_frames_sigreturn_probed(frames);
}

/*
 * A launch: the command's executable and the libraries ld.so will map for
 * it (ld.so --list) get their probes from their files before it is let go
 * (scan_frames at main's start would come after main has run on a while);
 * libc and ld.so from ptwatch's own (the same files) if that list could
 * not be had; the helpers' probes too. Libraries loaded later (dlopen)
 * are scanned when the reader sees ld.so's _dl_debug_state: their first
 * calls may be missed.
 */
static void launch_frames(struct ptw_kernel *k, const char *name)
{
	char path[PATH_MAX], why[512] = "";
	if (!k->frames || !ptw_command_path(name, path, sizeof(path)))
		return;
	struct ptwk_frames_progs pr = trace_progs(k);
	unsigned before = ptwk_frames_probes(k->frames);
	/* the executable, and the libraries ld.so will map for it */
	char **libs;
	size_t nlibs = ptwk_frames_launch_libraries(path, &libs);
	const char **files = xcalloc(nlibs + 1, sizeof(*files));
	files[0] = path;
	for (size_t i = 0; i < nlibs; i++)
		files[i + 1] = libs[i];
	int r = ptwk_frames_scan_files(k->frames, files, nlibs + 1, k->pid, k->o.use_debug_files,
				       &pr, why, sizeof(why));
	if (r < 0)
		note(k, "--trace: %s; its functions get their probes when main starts", why);
	for (size_t i = 0; i < nlibs; i++)
		free(libs[i]);
	free(libs);
	free(files);
	/* libc and ld.so: the files the command will map too, mapped now */
	if (ptwk_frames_scan_core(k->frames, k->syms, k->pid, &pr, why, sizeof(why)) < 0)
		note(k, "--trace: %s", why);
	k->stats.probes += ptwk_frames_probes(k->frames) - before;
	k->conv.sigreturn_probed = ptwk_frames_sigreturn_probed(k->frames);
}

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
 * libthread_db's list of threads, walked in memory while they run (a
 * list that changes under the walk is walked again; one that loops ends
 * the walk: ptw_tdb_iterate), then whatever
 * else /proc lists (raw clones, threads libthread_db cannot see). A thread
 * created from now on has its creation in the ring (the probes are in);
 * one in both is the same thread (convert.c keeps the first).
 */
static void list_threads(struct ptw_kernel *k)
{
	struct listing l = { 0 };
	uint64_t ns = ptw_now_ns();
	if (k->tdb) {
		ptw_mem_invalidate(k->proc);
		int r = ptw_tdb_iterate(k->tdb, false, on_thread, &l);
		if (r == -ELOOP)
			note_as(k, PTW_W_THREAD_DB_ITERATION, "%s", PTW_TDB_LOOP_WARNING);
		else if (r < 0)
			note_as(k, PTW_W_THREAD_DB_ITERATION,
				"libthread_db could not list the threads: %s", strerror(-r));
	}
	pid_t *tids = NULL;
	int n = ptw_proc_tids(k->pid, &tids);
	for (int i = 0; i < n; i++)
		listed_add(&l, tids[i], 0, 0);
	free(tids);
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

/* --trace -p: the calls under way at the attach (underway.c): the
 * threads read before the entry probes go in. */
static void underway_begin(struct ptw_kernel *k)
{
	if (!k->frames || !k->skel)
		return;
	struct ptwk_underway_env env = { .pid = k->pid,
					 .proc = k->proc,
					 .syms = k->syms,
					 .frames = k->frames,
					 .iter = k->skel->progs.ptw_underway_regs,
					 .ret = k->skel->progs.ptw_underway_return,
					 .sites = k->skel->maps.underway_sites,
					 .multi = k->multi,
					 .note = note_line,
					 .ctx = k };
	k->underway = ptwk_underway_begin(&env);
}

/* ---- the public entry points ---- */

static int open_fds(struct ptw_kernel *k)
{
	k->epfd = epoll_create1(EPOLL_CLOEXEC);
	if (k->epfd < 0)
		return -errno;
	int r = drainer_start(k);
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

static void static_probes(struct ptw_kernel *k, const char *exe);

/* static_exe: a launch of that static program (ptw_kernel_launch). */
static int start(const struct ptw_kernel_opts *o, pid_t pid, bool launched, const char *static_exe,
		 struct ptw_kernel **ret, char *why, size_t why_size)
{
	uint64_t t0 = ptw_now_ns();
	char path[64];
	quiet_libbpf();
	snprintf(path, sizeof(path), "/proc/%d", pid);
	if (pid <= 0 || access(path, F_OK) < 0) {
		why_set(why, why_size, "no such process %d", pid);
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
	k->pid = pid;
	k->launched = launched;
	k->multi_fds[0] = k->multi_fds[1] = k->mods_fd = -1;
	k->epfd = k->pidfd = -1;
	k->wake_fd = k->notify_fd = k->drain_epfd = -1;
	pthread_mutex_init(&k->qlock, NULL);
	pthread_cond_init(&k->qcond, NULL);
	pthread_cond_init(&k->qroom, NULL);
	k->proc = ptw_proc_open(pid);
	struct ptwk_conv_ops ops = { .sink = sink,
				     .locate = locate,
				     .call_site = call_site,
				     .exec = on_exec,
				     .main_returns_to = main_returns_to,
				     .image_ready = image_ready,
				     .frame_function = frame_function,
				     .modules_changed = modules_changed,
				     .is_sigreturn = is_sigreturn,
				     .ctx = k };
	ptwk_conv_init(&k->conv, pid, &ops);
	k->conv.launched = launched;

	/* (a launch's process is ptwatch's copy until it execs: nothing of
	 * its libraries but libc is looked up, no debug file fetched for them) */
	ptw_symbols_prefetch(!launched);
	r = load_symbols(k);
	ptw_symbols_prefetch(true);
	if (r < 0) {
		why_set(why, why_size, "cannot read the modules of %d: %s", pid, strerror(-r));
		goto fail;
	}
	td_err_e err;
	if (ptw_tdb_new(k->proc, k->syms, &k->tdb, &err) < 0) {
		k->tdb = NULL;
		note_as(k, PTW_W_NO_THREAD_DB,
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
		note_as(k, PTW_W_ZOMBIE_LEADER,
			"the main thread of %d has exited (pthread_exit) and is a zombie; its other "
			"threads are traced, with probes on libc's file for every process (a "
			"uprobe for one process needs its main thread's memory)",
			pid);
	}
	if (o->locks) {
		struct ptwk_locks_env env = locks_env(k);
		k->locks = ptwk_locks_new(&env, k->tdb, &k->probes, &k->locks_config);
	}
	start_where(k);
	for (size_t i = 0; i < k->probes.nmissing; i++)
		if ((!k->start_at_clone && !k->start_derived) || i + 1 != k->probes.missing_start)
			note_as(k, k->probes.missing_code[i], "%s", k->probes.missing[i]);
	if (!k->probes.main_addr) /* a stripped program: from its entry code */
		k->probes.main_addr = ptw_symbols_main_from_entry(
			k->syms, pid_memread, (void *)(intptr_t)pid, ptw_proc_auxv(pid, AT_ENTRY));
	/* (An attach reads /proc as it begins, and again for a library loaded
	 * since: it keeps the probe count, the load and the exit of before.
	 * With -f its descendants' execs need the list.) */
	if (!o->modules_from_proc && (launched || o->follow_forks))
		modules_find(k);
	k->conv.main_addr = k->probes.main_addr;
	for (size_t i = 0; i < k->probes.n; i++)
		/* (Only __libc_start_call_main calls main: __libc_start_main,
		 * the fallback, does not contain main's return address.) */
		if (k->probes.p[i].kind == PTWK_MAIN && !k->probes.p[i].ret &&
		    !strcmp(k->probes.p[i].function, "__libc_start_call_main") &&
		    ptw_symbols_lookup(k->syms, NULL, k->probes.p[i].function, &(uint64_t){ 0 },
				       &k->conv.main_caller_size) < 0)
			k->conv.main_caller_size = 0;
	main_caller_derive(k);
	k->start_ns = t0;
	if (!launched)
		follow_exec(k); /* its exe and command line, for the report */
	if ((r = load_and_attach(k, why, why_size)) < 0)
		goto fail;
	if (!launched)
		k->conv.probes_in_ns = ptw_now_ns();
	k->frames = ptwk_frames_new(o->trace, o->ntrace);
	if (!launched)
		underway_begin(k);
	if (!launched)
		scan_frames(k);
	if ((r = open_fds(k)) < 0) {
		why_set(why, why_size, "epoll: %s", strerror(-r));
		goto fail;
	}
	if (!launched) {
		k->stats.probes += ptwk_underway_take(k->underway);
		list_threads(k);
		read_glibc(k);
		ptwk_underway_emit(k->underway, &k->conv, k->start_ns);
	}
	if (!launched && k->o.follow_forks)
		follow_descendants(k);
	ptw_symbols_save_cache(k->syms);
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
 * but its threads' clones and exits: a note says so.
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
	note_as(k, PTW_W_KERNEL_NOT_SEEN,
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
		why_set(why, why_size, "fork: %s", strerror(-r));
		return r;
	}
	struct ptw_kernel *k;
	r = start(o, h.pid, true, is_static ? exe : NULL, &k, why, why_size);
	if (r == 0)
		launch_frames(k, argv[0]);
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

static void read_counters(struct ptw_kernel *k)
{
	if (!k->skel)
		return;
	int ncpu = libbpf_num_possible_cpus();
	if (ncpu <= 0)
		return;
	uint64_t *v = xcalloc((size_t)ncpu, sizeof(*v));
	uint64_t sum[PTWK_STAT_N] = { 0 };
	for (uint32_t key = 0; key < PTWK_STAT_N; key++) {
		if (bpf_map__lookup_elem(k->skel->maps.stats, &key, sizeof(key), v,
					 (size_t)ncpu * sizeof(*v), 0) < 0)
			continue;
		for (int c = 0; c < ncpu; c++)
			sum[key] += v[c];
	}
	for (uint32_t key = 0; key < PTWK_LOCK_KIND_END; key++) {
		k->lost_kinds[key] = 0;
		if (bpf_map__lookup_elem(k->skel->maps.lost_kinds, &key, sizeof(key), v,
					 (size_t)ncpu * sizeof(*v), 0) < 0)
			continue;
		for (int c = 0; c < ncpu; c++)
			k->lost_kinds[key] += v[c];
	}
	free(v);
	k->stats.lost = sum[PTWK_STAT_LOST];
	k->stats.wakeups = sum[PTWK_STAT_WAKEUPS];
	k->stats.read_failures = sum[PTWK_STAT_READ_FAIL];
	k->watch_full = sum[PTWK_STAT_WATCH_FULL];
	k->ns_tids_full = sum[PTWK_STAT_NS_TIDS_FULL];
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
	consume_all(k);
	read_counters(k);
	uint64_t t0 = ptw_now_ns();
	close_links(k);
	k->stats.detach_ns = ptw_now_ns() - t0;
	ptw_dbg(PTW_DBG_TRACER,
		"kernel path: attach %.1f ms (programs loaded and attached %.1f ms), probes "
		"removed in %.1f ms; %llu records, %llu wakeups, %llu lost",
		(double)k->stats.attach_ns / 1e6, (double)k->stats.probes_ns / 1e6,
		(double)k->stats.detach_ns / 1e6, (unsigned long long)k->stats.records,
		(unsigned long long)k->stats.wakeups, (unsigned long long)k->stats.lost);
	/* What was written before the links closed. */
	consume_all(k);
	drainer_stop(k);
	/* One DETACHED for the session, through a process that still runs. */
	struct ptw_kernel *live = k;
	for (size_t i = 0; i < k->nfollowed && live->conv.ended; i++)
		live = k->followed[i];
	ptwk_conv_detached(&live->conv, ptw_now_ns());
	end_notes(k);
	if (k->images_unread)
		note(k,
		     "%u exec'd images ended before their modules could be read (they lived less "
		     "than the reader's wakeup): their code addresses are not named",
		     k->images_unread);
	return 0;
}

/* l's counts added to t (l NULL: none). */
static void tally_locks(const struct ptwk_locks *l, struct locks_tally *t)
{
	uint64_t w, u;
	uint32_t dl;
	if (!l)
		return;
	ptwk_locks_counts(l, &w, &u, &dl);
	t->waits += w;
	t->unclassified += u;
	t->deadlocks += dl;
}

void ptw_kernel_stats(struct ptw_kernel *k, struct ptw_kernel_stats *ret)
{
	if (!k->detached)
		read_counters(k);
	*ret = k->stats;
	ret->probes_stepped = ptwk_frames_stepped(k->frames);
	struct locks_tally t = k->released; /* (-f: theirs, counted as they ended) */
	tally_locks(k->locks, &t);
	for (size_t i = 0; i < k->nfollowed; i++)
		tally_locks(k->followed[i]->locks, &t);
	ret->waits = t.waits;
	ret->waits_unclassified = t.unclassified;
	ret->deadlocks = t.deadlocks;
	if (!ret->mode)
		ret->mode = "none";
}

size_t ptw_kernel_notes(struct ptw_kernel *k, const char *const **ret)
{
	end_notes(k);
	k->note_texts = xreallocarray(k->note_texts, k->notes.n + 1, sizeof(*k->note_texts));
	for (size_t i = 0; i < k->notes.n; i++)
		k->note_texts[i] = k->notes.v[i].message;
	*ret = k->note_texts;
	return k->notes.n;
}

size_t ptw_kernel_warnings(struct ptw_kernel *k, const struct ptw_warning **ret)
{
	end_notes(k);
	*ret = k->notes.v;
	return k->notes.n;
}

/* nptl's version in the process, read once an image's libc is mapped. */
static void read_glibc(struct ptw_kernel *k)
{
	if (!k->glibc)
		k->glibc = ptw_nptl_version(k->proc, k->syms);
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
	return locate(k, addr);
}

void ptw_kernel_free(struct ptw_kernel *k)
{
	if (!k)
		return;
	if (k->skel && !k->detached) {
		close_links(k);
		k->detached = true;
	}
	drainer_stop(k);
	close_links(k);
	modules_close(k);
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
		drained_free(&k->queue[i]);
	free(k->queue);
	for (size_t i = 0; i < k->ninq; i++)
		drained_free(&k->inq[i]);
	free(k->inq);
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
	free(k->report_procs);
	ptw_argv_free(k->argv);
	ptwk_modlist_free(&k->modlist);
	ptw_map_free(&k->drain_listed);
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
	ptw_warning_list_free(&k->notes);
	free(k->note_texts);
	free(k->glibc);
	free(k);
}

/* ---- modules: ld.so's list, walked in the target ----
 *
 * Naming a launched (or exec'd, or dlopen-extended) image's code needs its
 * modules while it runs. /proc/PID/maps (and process_vm_readv, cmdline)
 * take the target's memory-map lock: a thread stack mapped meanwhile
 * waits, and a SCHED_FIFO program loses its order. So a uprobe on ld.so's
 * _dl_debug_state walks r_debug's link_map in the target's own context
 * (bpf/ptw_modules.bpf.h) at every consistent state (after the program's
 * libraries are loaded, before constructors and main; each dlopen and
 * dlclose), and the list is applied in ring order: the records before it
 * are named with the modules before it. An attach still reads /proc once.
 */

/* ld.so in the process now (an attach's, or a launch's before its exec:
 * ptwatch's own, the one a dynamic command maps): where to probe. */
static void modules_find(struct ptw_kernel *k)
{
	uint64_t state, rdebug, off;
	struct ptw_mapping *maps = NULL;
	int nmaps;
	char module[4096];
	if (ptw_symbols_lookup(k->syms, "ld-linux", "_dl_debug_state", &state, NULL) < 0 ||
	    ptw_symbols_lookup(k->syms, "ld-linux", "_r_debug", &rdebug, NULL) < 0) {
		ptw_dbg(PTW_DBG_TRACER,
			"no _dl_debug_state or _r_debug in ld.so: modules from /proc");
		return;
	}
	if ((nmaps = ptw_maps_read(k->pid, &maps)) < 0)
		return;
	if (ptwk_file_of(k->pid, maps, nmaps, state, k->mods_ld, sizeof(k->mods_ld), module,
			 sizeof(module), &off) == 0) {
		k->mods_off = off;
		k->rdebug_from_probe = (int64_t)(rdebug - state);
		k->mods_on = true;
	}
	free(maps);
}

static int modules_attach(struct ptw_kernel *k)
{
	struct bpf_program *prog = k->skel->progs.ptw_modules;
	if (k->multi) {
		uint64_t offsets[1] = { k->mods_off }, cookies[1] = { 0 };
		struct ptwk_link_create_uprobe_multi a = {
			.prog_fd = (uint32_t)bpf_program__fd(prog),
			.attach_type = PTWK_BPF_TRACE_UPROBE_MULTI,
			.path = (uint64_t)(uintptr_t)k->mods_ld,
			.offsets = (uint64_t)(uintptr_t)offsets,
			.cookies = (uint64_t)(uintptr_t)cookies,
			.cnt = 1,
			.pid = probe_pid(k) < 0 ? 0 : (uint32_t)k->pid,
		};
		k->mods_fd = (int)syscall(__NR_bpf, BPF_LINK_CREATE, &a, sizeof(a));
		return k->mods_fd < 0 ? -errno : 0;
	}
	LIBBPF_OPTS(bpf_uprobe_opts, opts);
	struct bpf_link *l = bpf_program__attach_uprobe_opts(prog, probe_pid(k), k->mods_ld,
							     (size_t)k->mods_off, &opts);
	if (!l)
		return -errno;
	k->mods_link = l;
	return 0;
}

/* ld.so's probe goes last, at the free, not in the detach: closing a
 * link waits for the kernel (25-90 ms each, more on a busy machine), and
 * it is inert once the target is no longer watched (its program looks
 * the tgid up first); a trap per dlopen and dlclose until then. */
static void modules_close(struct ptw_kernel *k)
{
	if (k->root)
		return;
	if (k->mods_fd >= 0)
		close(k->mods_fd);
	k->mods_fd = -1;
	bpf_link__destroy(k->mods_link);
	k->mods_link = NULL;
}

/* The new image's libc is the one probed? (check_libc from the list.) */
static void modules_check_libc(struct ptw_kernel *k, const struct ptw_module_spec *specs, size_t n)
{
	const struct ptwk_probes *probes = k->root ? &k->root->probes : &k->probes;
	struct stat a, b;
	const char *libc = NULL;
	for (size_t i = 0; i < n && !libc; i++)
		if (strstr(specs[i].path, "/libc.so") || strstr(specs[i].path, "/libc-"))
			libc = specs[i].path;
	if (k->libc_checks <= 0)
		return;
	k->libc_checks = 0;
	if (libc && stat(libc, &a) == 0 && stat(probes->path, &b) == 0 &&
	    (a.st_dev != b.st_dev || a.st_ino != b.st_ino))
		note_as(k, PTW_W_KERNEL_NOT_SEEN,
			"%s maps %s, not the %s the probes are on: its threads are not seen",
			k->exe, libc, probes->module);
	else if (!libc)
		note_as(k, PTW_W_KERNEL_NOT_SEEN,
			"%s maps no libc.so (static, or not glibc): its threads are not seen",
			k->exe);
}

/* A whole list: the process's symbols from it, in place when they are
 * this image's already (dlopen, dlclose; an attach's from /proc). */
static void modules_apply(struct ptw_kernel *k)
{
	const struct ptwk_modlist *l = &k->modlist;
	struct ptw_module_spec *specs = xcalloc(l->n + 1, sizeof(*specs));
	char **paths = xcalloc(l->n + 1, sizeof(*paths));
	size_t n = 0;
	for (size_t i = 0; i < l->n; i++) {
		const struct ptwk_module *m = &l->v[i];
		const char *path = m->path;
		if (m->is_exe && !path[0])
			path = k->exe; /* ld.so names the program "" */
		if (!path[0])
			continue;
		if (path[0] != '/') {
			/* dlopen("dir/lib.so"): relative to its working directory
			 * (a link that does not take the memory-map lock) */
			struct ptw_buf b = { 0 };
			ptw_buf_printf(&b, "/proc/%d/cwd/%s", k->pid, path);
			char *real = realpath(b.p, NULL);
			if (real) {
				free(b.p);
				b.p = real;
			}
			path = paths[i] = b.p;
		}
		specs[n++] = (struct ptw_module_spec){
			.path = path, .bias = m->bias, .dynamic = m->dynamic, .is_exe = m->is_exe
		};
	}
	int r;
	if (k->syms && !k->syms_borrowed) {
		r = ptw_symbols_set_listed(k->syms, specs, n);
	} else {
		char *cache_dir = k->o.use_cache ? ptw_cache_default_dir() : NULL;
		struct ptw_symbols *s = NULL;
		r = k->root ? ptw_symbols_new_listed(k->pid, specs, n, k->o.use_debug_files,
						     cache_dir, pid_memread,
						     (void *)(intptr_t)k->pid, &s)
			    : ptw_symbols_new_listed(k->pid, specs, n, k->o.use_debug_files,
						     cache_dir, memread, k->proc, &s);
		free(cache_dir);
		if (r == 0) {
			k->syms = s;
			k->syms_borrowed = false;
			r = (int)ptw_symbols_module_count(s);
		}
	}
	ptw_dbg(PTW_DBG_TRACER, "process %d: %zu modules listed by ld.so, %d taken", k->pid, n, r);
	if (r >= 0) {
		k->mods_listed = true;
		modules_check_libc(k, specs, n);
		scan_frames(k);
	}
	for (size_t i = 0; i < l->n; i++)
		free(paths[i]);
	free(paths);
	free(specs);
}

static void modules_record(struct ptw_kernel *k, const struct drained *d)
{
	int r = d->module ? ptwk_modlist_feed(&k->modlist, d->module, sizeof(*d->module))
			  : ptwk_modlist_feed(&k->modlist, &d->r, sizeof(d->r));
	if (r == PTWK_MODLIST_DONE)
		modules_apply(k);
	else if (r == PTWK_MODLIST_BAD)
		ptw_dbg(PTW_DBG_TRACER, "process %d: a walk of ld.so's list thrown away", k->pid);
}

/* An exec's command line as the kernel wrote it (bpf/ptw_modules.bpf.h);
 * /proc/PID/cmdline only if it was cut or not read (that read takes the
 * memory-map lock). */
static void exec_args_record(struct ptw_kernel *k, const struct drained *d)
{
	char **argv = d->args ? ptwk_args_parse(d->args) : NULL;
	if (!argv)
		argv = read_cmdline(k->pid);
	if (argv) {
		ptw_argv_free(k->argv);
		k->argv = argv;
	}
}

/* ---- -f: the processes the target forks ---- */

/* The process a record is about: the latest followed one with that pid,
 * else the root (NULL: none of ours). */
static struct ptw_kernel *follow_process_of(struct ptw_kernel *k, uint32_t tgid)
{
	struct ptw_kernel *p = k->nfollowed ? ptw_map_get(&k->by_pid, tgid) : NULL;
	if (p)
		return p;
	return tgid == (uint32_t)k->pid ? k : NULL;
}

/* /proc/PID/cmdline as an argv (NULL: gone, unreadable or empty). */
static char **read_cmdline(pid_t pid)
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
static void follow_exec(struct ptw_kernel *p)
{
	char path[64];
	snprintf(path, sizeof(path), "/proc/%d/exe", p->pid);
	ssize_t n = readlink(path, p->exe, sizeof(p->exe) - 1);
	p->exe[n > 0 ? n : 0] = '\0';
	char **argv = read_cmdline(p->pid);
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
		struct ptwk_locks_env env = locks_env(c);
		c->locks = ptwk_locks_follow(&env);
	}
	c->conv.main_caller_size = k->conv.main_caller_size;
	c->conv.main_caller_delta = k->conv.main_caller_delta;
	k->followed = xreallocarray(k->followed, k->nfollowed + 1, sizeof(*k->followed));
	k->followed[k->nfollowed++] = c;
	ptw_map_put(&k->by_pid, (uint64_t)c->pid, c);
	return c;
}

static void follow_fork(struct ptw_kernel *k, struct ptw_kernel *parent,
			const struct ptwk_record *r)
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
		note_as(k, PTW_W_PROCESS_NOT_FOLLOWED,
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
}

/* A followed process ended: its memory view and libthread_db go (its
 * symbols read memory by pid, or its parent's view). */
static void follow_release(struct ptw_kernel *c)
{
	if (c->locks_busy)
		return; /* (follow_consume releases it once it has ended) */
	/* (its locks read the memory that goes: their counts stay) */
	tally_locks(c->locks, &c->root->released);
	ptwk_locks_free(c->locks);
	c->locks = NULL;
	ptw_tdb_free(c->tdb);
	c->tdb = NULL;
	if (c->proc)
		ptw_proc_free(c->proc);
	c->proc = NULL;
}

/* Whether every followed process has ended. */
static bool follow_ended(struct ptw_kernel *k)
{
	for (size_t i = 0; i < k->nfollowed; i++)
		if (!k->followed[i]->conv.ended)
			return false;
	return true;
}

/* Before a read of the ring, once the root has ended: which followed
 * processes are gone (their end, if recorded, is in the ring by now: the
 * exit tracepoint runs before a task is a zombie). */
static void follow_check_gone(struct ptw_kernel *k)
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
static void follow_consume(struct ptw_kernel *k)
{
	for (size_t i = 0; i < k->nfollowed; i++) {
		struct ptw_kernel *c = k->followed[i];
		if (c->libc_checks > 0 && !c->conv.ended)
			check_libc(c);
		if (c->conv.ended)
			follow_release(c);
		if (c->end_lost && ptwk_conv_end_pending(&c->conv))
			follow_release(c); /* (its last thread's exit was in) */
		if (!c->end_lost || c->conv.ended) {
			c->end_lost = false;
			continue;
		}
		note_as(k, PTW_W_KERNEL_EVENTS_LOST,
			"the end of process %d was not recorded (lost)", c->pid);
		struct ptw_event ev = ptw_event_init(PTW_EV_PROCESS_EXIT, ptw_now_ns(), c->pid);
		ev.pid = c->pid;
		ev.process = c->id;
		c->conv.ended = true;
		c->conv.end_ns = ev.ns;
		sink(c, &ev);
	}
}

static void fill_process(const struct ptw_kernel *c, struct ptw_process *p)
{
	const struct ptw_kernel *root = c->root ? c->root : c;
	memset(p, 0, sizeof(*p));
	p->id = c->id;
	p->parent_id = c->parent_id;
	p->pid = c->pid;
	p->ppid = c->ppid;
	p->parent_tid = c->parent_tid;
	p->exe = c->exe[0] ? c->exe : NULL;
	p->argv = c->argv;
	p->start_ns = c->start_ns;
	p->end_ns = c->conv.ended ? c->conv.end_ns : 0;
	p->followed = !c->unfollowed_why;
	p->not_followed_why = c->unfollowed_why;
	p->detached = root->detached && !c->conv.ended;
	if (c->conv.ended && !c->end_lost && !c->unfollowed_why) {
		p->exit_kind = c->conv.exit_signal ? PTW_EXIT_SIGNAL : PTW_EXIT_CODE;
		p->exit_code = c->conv.exit_code;
		p->exit_signal = c->conv.exit_signal;
		p->core_dumped = c->conv.core_dumped;
	}
}

bool ptw_kernel_process(struct ptw_kernel *k, uint32_t id, struct ptw_process *ret)
{
	if (!k->o.follow_forks || id > k->nfollowed)
		return false;
	fill_process(id ? k->followed[id - 1] : k, ret);
	return true;
}

size_t ptw_kernel_processes(struct ptw_kernel *k, const struct ptw_process **ret)
{
	*ret = NULL;
	if (!k->o.follow_forks)
		return 0;
	free(k->report_procs);
	k->report_procs = xcalloc(k->nfollowed + 1, sizeof(*k->report_procs));
	for (size_t i = 0; i <= k->nfollowed; i++)
		fill_process(i ? k->followed[i - 1] : k, &k->report_procs[i]);
	*ret = k->report_procs;
	return k->nfollowed + 1;
}

/* -p -f: a process the target had forked (or one of theirs) running at the
 * attach: watched, then its threads listed as the target's were (its own
 * symbols and libthread_db). Its records before it is watched are lost:
 * it ran unwatched until now. */
static void follow_attached(struct ptw_kernel *k, struct ptw_kernel *parent, pid_t pid,
			    pid_t parent_tid)
{
	struct ptw_kernel *c = follow_new(k, parent, pid, parent_tid, ptw_now_ns());
	follow_exec(c);
	if (load_symbols(c) < 0) {
		note_as(k, PTW_W_KERNEL_NOT_SEEN,
			"process %d (forked before the attach) has gone or cannot be read", pid);
		return;
	}
	td_err_e err;
	if (ptw_tdb_new(c->proc, c->syms, &c->tdb, &err) < 0)
		c->tdb = NULL;
	c->probes.layout = k->probes.layout;
	if (ptw_symbols_lookup(c->syms, PTW_MOD_EXE, "main", &c->probes.main_addr, NULL) < 0)
		c->probes.main_addr = ptw_symbols_main_from_entry(
			c->syms, pid_memread, (void *)(intptr_t)pid, ptw_proc_auxv(pid, AT_ENTRY));
	c->conv.main_addr = c->probes.main_addr;
	uint32_t key = (uint32_t)pid;
	struct ptwk_watch w = { .follow_forks = 1, .root = 0 };
	if (bpf_map__update_elem(k->skel->maps.watched, &key, sizeof(key), &w, sizeof(w), BPF_ANY) <
	    0)
		note_as(k, PTW_W_KERNEL_NOT_SEEN,
			"process %d (forked before the attach) cannot be watched: %s", pid,
			strerror(errno));
	list_threads(c);
	c->libc_checks = 1; /* the probes are on the target's libc: does it map that one */
}

static void follow_descendants(struct ptw_kernel *k)
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
		struct ptw_kernel *parent = follow_process_of(k, (uint32_t)p);
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
