/* SPDX-License-Identifier: MIT */
/* --trace on the kernel path: calls under way at an attach; see underway.h. */
#define _GNU_SOURCE
#include "underway.h"
#include "xol.h"

#include <bpf/bpf.h>
#include <bpf/libbpf.h>
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <sys/user.h>
#include <unistd.h>

#include "convert.h"
#include "kframes.h"
#include "links.h"
#include "probes.h"
#include "ptw_attach.h"
#include "ptw_symbols.h"
#include "ptw_underway.h"
#include "ptw_util.h"
#include "ptw_warnings.h"

/* Frames of a thread's stack looked at (the tracer's limit): beyond, the
 * outer ones are not reported (said). */
#define UNDERWAY_MAX_FRAMES 256
/* Threads read by the iterator at most (a bound on a hostile or huge
 * process; the rest are said). */
#define UNDERWAY_MAX_TASKS 65536
/* How often the sites' map is looked at for frames over (their probes
 * removed once none is left). */
#define UNDERWAY_POLL_NS 200000000ull
/* How many times the threads are read at most, for a --locks wait: one
 * that woke between two reads is read again. */
#define UNDERWAY_READS 4

struct found;

struct ptwk_underway {
	struct ptwk_underway_env env;
	struct ptw_map before; /* tid -> switches + 1 at the begin (0 there: on a CPU) */
	uint64_t begin_ns;
	uint64_t polled_ns; /* the sites' map last looked at */
	int *fds; /* uprobe_multi links of the return sites */
	size_t nfds;
	struct bpf_link **links; /* or ordinary uprobes */
	size_t nlinks;
	struct found *found; /* taken, to emit (ptwk_underway_emit) */
	size_t nfound;
	size_t woke; /* a -f child's threads in a wait that could not be read */
};

/* The return sites of one file. */
struct site_group {
	char path[4096];
	uint64_t *offsets;
	size_t n;
};

static void note(struct ptwk_underway *u, int code, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));
static void note(struct ptwk_underway *u, int code, const char *fmt, ...)
{
	struct ptw_buf b = { 0 };
	va_list ap;
	va_start(ap, fmt);
	ptw_buf_vprintf(&b, fmt, ap);
	va_end(ap);
	if (u->env.note)
		u->env.note(u->env.ctx, code, b.p);
	ptw_buf_free(&b);
}

int ptwk_read_tasks(struct bpf_program *iter, pid_t pid, struct ptwk_uw_task **ret)
{
	*ret = NULL;
	union bpf_iter_link_info info;
	memset(&info, 0, sizeof(info));
	info.task.pid = (uint32_t)pid;
	LIBBPF_OPTS(bpf_iter_attach_opts, o, .link_info = &info, .link_info_len = sizeof(info));
	struct bpf_link *l = bpf_program__attach_iter(iter, &o);
	if (!l)
		return -errno;
	int fd = bpf_iter_create(bpf_link__fd(l));
	if (fd < 0) {
		int r = -errno;
		bpf_link__destroy(l);
		return r;
	}
	struct ptwk_uw_task *v = NULL;
	size_t n = 0, cap = 0;
	int r = 0;
	for (;;) {
		if (n == cap) {
			if (cap >= UNDERWAY_MAX_TASKS) {
				r = -E2BIG;
				break;
			}
			cap = cap ? cap * 2 : 64;
			v = xreallocarray(v, cap, sizeof(*v));
		}
		/* the iterator writes whole records */
		ssize_t got = read(fd, v + n, (cap - n) * sizeof(*v));
		if (got < 0 && errno == EINTR)
			continue;
		if (got < 0) {
			r = -errno;
			break;
		}
		if (got == 0)
			break;
		n += (size_t)got / sizeof(*v);
	}
	close(fd);
	bpf_link__destroy(l);
	if (r < 0 && r != -E2BIG) {
		free(v);
		return r;
	}
	*ret = v;
	return (int)n;
}

/* What is looked for, for the notes: "--trace", "calls" (or --locks'
 * waits, or both). */
static const char *opts_of(const struct ptwk_underway *u)
{
	return !u->env.wait_of ? "--trace" : u->env.frames ? "--trace, --locks" : "--locks";
}

static const char *things_of(const struct ptwk_underway *u)
{
	return !u->env.wait_of ? "calls" : u->env.frames ? "calls and waits" : "waits";
}

/* The task iterator failed (n: -errno): nothing under way reported. */
static void note_no_registers(struct ptwk_underway *u, int n)
{
	note(u, PTW_W_KERNEL_LIMIT,
	     "%s: the %s under way at the attach are not reported: the threads' "
	     "registers cannot be read without a stop (task iterator: %s)",
	     opts_of(u), things_of(u), strerror(-n));
}

/* Off a CPU in the futex system call (its registers read). */
static bool asleep_in_futex(const struct ptwk_uw_task *t)
{
	return !t->on_cpu && t->regs_ok && (long)t->orig_ax == SYS_futex;
}

/* Thread t as it is now, for stayed(): its context switches, and whether
 * it sleeps in futex. */
static void mark(struct ptwk_underway *u, const struct ptwk_uw_task *t)
{
	ptw_map_put(
		&u->before, t->tid,
		(void *)(uintptr_t)(t->on_cpu ? 0 : (t->switches + 1) << 1 | asleep_in_futex(t)));
}

struct ptwk_underway *ptwk_underway_begin(const struct ptwk_underway_env *env)
{
	if (!env->iter || !env->ret || !env->sites || (!env->frames && !env->wait_of))
		return NULL;
	struct ptwk_underway *u = xcalloc(1, sizeof(*u));
	u->env = *env;
	struct ptwk_uw_task *t;
	int n = ptwk_read_tasks(u->env.iter, u->env.pid, &t);
	if (n < 0) {
		note_no_registers(u, n);
		free(u);
		return NULL;
	}
	u->begin_ns = ptw_now_ns();
	for (int i = 0; i < n; i++)
		mark(u, &t[i]);
	free(t);
	return u;
}

/* Thread t did not run since the begin (nor runs now). */
static bool stayed(const struct ptwk_underway *u, const struct ptwk_uw_task *t)
{
	uintptr_t b = (uintptr_t)ptw_map_get(&u->before, t->tid);
	return b && !t->on_cpu && (b >> 1) - 1 == t->switches;
}

/* Thread t, asleep in futex at the begin and now, woke meanwhile: a wait
 * it is in may have begun before the attach and goes unreported. */
static bool slept_again(const struct ptwk_underway *u, const struct ptwk_uw_task *t)
{
	uintptr_t b = (uintptr_t)ptw_map_get(&u->before, t->tid);
	return (b & 1) && asleep_in_futex(t) && !stayed(u, t);
}

static void keep_fd(struct ptwk_underway *u, int fd)
{
	u->fds = xreallocarray(u->fds, u->nfds + 1, sizeof(*u->fds));
	u->fds[u->nfds++] = fd;
}

/* One file's return sites: a uprobe_multi link for the process, else
 * one uprobe each. Returns the probes attached, or -errno. */
static int attach_sites(struct ptwk_underway *u, const struct site_group *g)
{
	/* (entry uprobes at the return sites: no uretprobe of their own) */
	struct ptwk_uprobe_set s = { .prog = u->env.ret,
				     .path = g->path,
				     .offsets = g->offsets,
				     .n = g->n,
				     .pid = u->env.live_pid };
	if (u->env.multi) {
		int fd = ptwk_link_multi(&s);
		if (fd < 0)
			return fd;
		keep_fd(u, fd);
		return (int)g->n;
	}
	for (size_t i = 0; i < g->n; i++) {
		struct bpf_link *l = ptwk_link_one(&s, i);
		if (!l)
			return -errno;
		u->links = xreallocarray(u->links, u->nlinks + 1, sizeof(*u->links));
		u->links[u->nlinks++] = l;
	}
	return (int)g->n;
}

/* What one thread's unwind found. */
struct found {
	pid_t tid;
	struct ptwk_under_way *v; /* innermost first while found */
	uint64_t *site_off;	  /* v[i]'s return site in its file */
	char (*site_path)[4096];
	size_t n;
	bool partial; /* not all of its stack could be looked at */
	bool missed;  /* a traced call on it could not be watched */
	/* --locks: the wait it sleeps in (NULL none), its return site, and
	 * since when it sleeps in it at least */
	struct ptwk_lock_under_way *wait;
	uint64_t wait_since_ns;
	uint64_t wait_off;
	char *wait_path;
};

void ptwk_regs_from_dwarf(const __u64 g[17], struct user_regs_struct *r)
{
	r->rax = g[0], r->rdx = g[1], r->rcx = g[2], r->rbx = g[3];
	r->rsi = g[4], r->rdi = g[5], r->rbp = g[6], r->rsp = g[7];
	r->r8 = g[8], r->r9 = g[9], r->r10 = g[10], r->r11 = g[11];
	r->r12 = g[12], r->r13 = g[13], r->r14 = g[14], r->r15 = g[15];
	r->rip = g[16];
}

/*
 * A thread's memory for its unwind, but for the return addresses the
 * kernel replaced with a uretprobe's trampoline (in the [uprobes]
 * mapping): the original ones, as the task iterator read them (rets).
 * A fork child's (-f) are there in its first moments: its fork copied
 * the int3 of its parent's probes, which fire in it without a record of
 * its own but push a uretprobe's return. Another tool's uretprobes too.
 */
struct thread_mem {
	struct ptw_proc *proc;
	struct ptw_unwind_rets rets; /* tramp_lo 0: no trampoline mapped */
};

static bool in_tramp(const struct thread_mem *m, uint64_t v)
{
	return m->rets.tramp_lo && v >= m->rets.tramp_lo && v < m->rets.tramp_hi;
}

/* The word at addr (a trampoline's address: the original return address
 * in its place, when the iterator has it). 0, or -errno. */
static int read_word(const struct thread_mem *m, uint64_t addr, uint64_t *ret)
{
	int r = ptw_mem_read(m->proc, addr, ret, sizeof(*ret));
	if (r == 0)
		*ret = ptw_unwind_rets_fix(&m->rets, addr, *ret);
	return r;
}

/* The slot at sp holds ret (the unwind is the target's memory read through
 * its CFI: believed only there), and the return site's file and offset. */
static bool slot_holds(struct ptwk_underway *u, const struct thread_mem *tm, uint64_t sp,
		       uint64_t ret, const struct ptw_mapping *maps, int nmaps, char *path,
		       size_t path_size, uint64_t *ret_off)
{
	uint64_t at;
	char module[4096];
	/* (and not an instruction no probe may go on: xol.h) */
	return read_word(tm, sp, &at) >= 0 && at == ret &&
	       ptwk_file_of(u->env.live_pid, maps, nmaps, ret, path, path_size, module,
			    sizeof(module), ret_off) == 0 &&
	       !ptwk_xol_misread_at(path, *ret_off);
}

/* --locks: the wait a thread asleep in futex is in (regs: its system
 * call's arguments), its return site watched as a frame's. */
static void wait_of_thread(struct ptwk_underway *u, const struct thread_mem *tm,
			   const struct user_regs_struct *regs, const uint64_t *pcs,
			   const uint64_t *sps, int n, const struct ptw_mapping *maps, int nmaps,
			   struct found *f)
{
	struct ptw_wait_under_way w;
	u->env.wait_of(u->env.ctx, regs, pcs, n, &w);
	if (w.kind == PTW_WAIT_NONE)
		return;
	int i = w.frame;
	uint64_t sp = sps[i + 1] - 8, raw = 0;
	char path[4096];
	/*
	 * The slow path returns to a uretprobe's trampoline: a fork child's
	 * wait begun once its own links were in (its entry record has it:
	 * not one under way) or before (found here). Its original return
	 * address unknown (rets short), the unwind stopped there: its frame
	 * alone, and no return-site probe (the uretprobe's return record,
	 * once the child's links are in, ends it).
	 */
	bool hooked = sps[i + 1] && ptw_mem_read(tm->proc, sp, &raw, sizeof(raw)) == 0 &&
		      in_tramp(tm, raw);
	if (hooked && u->env.entry_seen && u->env.entry_seen(u->env.ctx, f->tid, sp)) {
		ptw_dbg(PTW_DBG_TRACER, "--locks: %d: its wait's entry was seen", f->tid);
		return;
	}
	bool blind = hooked && i + 1 < n && in_tramp(tm, pcs[i + 1]);
	if (!blind && (!sps[i + 1] || !slot_holds(u, tm, sp, pcs[i + 1], maps, nmaps, path,
						  sizeof(path), &f->wait_off))) {
		uint64_t at = 0;
		int r = ptw_mem_read(tm->proc, sp, &at, sizeof(at));
		ptw_dbg(PTW_DBG_TRACER,
			"--locks: %d: a wait under way is not reported (its slot %#llx: %s %#llx, "
			"the return address %#llx)",
			f->tid, (unsigned long long)sp, r < 0 ? strerror(-r) : "holds",
			(unsigned long long)at, (unsigned long long)(i + 1 < n ? pcs[i + 1] : 0));
		f->missed = true;
		return;
	}
	struct ptwk_lock_under_way *lw = xcalloc(1, sizeof(*lw));
	lw->kind = w.kind;
	lw->object = w.object;
	lw->futex = regs->rdi;
	lw->sp = sp;
	lw->join = w.join;
	for (int k = i; k < (blind ? i + 1 : n) && lw->npcs < PTWK_DEADLOCK_FRAMES; k++)
		lw->pcs[lw->npcs++] = pcs[k];
	f->wait = lw;
	f->wait_path = blind ? NULL : xstrdup(path); /* (NULL: no site to probe) */
}

/* The calls of traced functions on thread t's stack (t did not run since
 * the begin: its saved registers are its registers), unless !calls (the
 * wait it sleeps in alone). */
static void unwind_thread(struct ptwk_underway *u, const struct ptwk_uw_task *t,
			  const struct ptw_mapping *maps, int nmaps,
			  const struct ptw_mapping *tramp, bool calls, struct found *f)
{
	struct user_regs_struct regs = { 0 };
	ptwk_regs_from_dwarf(t->regs, &regs);
	bool in_futex = u->env.wait_of && (long)t->orig_ax == SYS_futex;
	struct ptwk_frames *frames = calls ? u->env.frames : NULL;
	/* --locks alone: a wait's slow path is among the innermost frames */
	int max = frames ? UNDERWAY_MAX_FRAMES : in_futex ? PTW_WAIT_UNDER_WAY_FRAMES : 0;
	if (!max)
		return;
	uint64_t *pcs = xcalloc(2 * (size_t)max, sizeof(*pcs));
	uint64_t *sps = pcs + max;
	bool whole;
	/* (in its own memory: a fork child shares its parent's symbols) */
	struct thread_mem tm = { u->env.proc,
				 { tramp ? tramp->start : 0, tramp ? tramp->end : 0,
				   (const uint64_t(*)[2])t->rets,
				   t->nrets < PTWK_UW_RETS ? t->nrets : PTWK_UW_RETS } };
	int n = ptw_symbols_unwind_sps_in(u->env.syms, ptw_mem_reader, u->env.proc, &tm.rets,
					  (pid_t)t->tid, &regs, pcs, sps, max, &whole);
	f->partial = frames && (n <= 0 || !whole || n == max);
	if (in_futex)
		wait_of_thread(u, &tm, &regs, pcs, sps, n, maps, nmaps, f);
	for (int i = 0; i < n - 1 && frames; i++) {
		/* a return address: the call is the instruction before it */
		uint64_t pc = i ? pcs[i] - 1 : pcs[i], lo, hi, ret = pcs[i + 1], index, off, probe;
		if (ptw_symbols_function_range(u->env.syms, pc, &lo, &hi) < 0 ||
		    !ptwk_frames_traced(frames, lo, &index, &probe))
			continue;
		/* Up to its entry probe, the call has not begun: the probe
		 * reports it when the thread goes on. */
		if (!i && pcs[0] >= lo && pcs[0] <= probe)
			continue;
		uint64_t sp = sps[i + 1] - 8;
		char path[4096];
		if (!sps[i + 1] ||
		    !slot_holds(u, &tm, sp, ret, maps, nmaps, path, sizeof(path), &off)) {
			ptw_dbg(PTW_DBG_TRACER,
				"--trace: %u: a call under way at %#llx is not reported", t->tid,
				(unsigned long long)lo);
			f->missed = true;
			continue;
		}
		f->v = xreallocarray(f->v, f->n + 1, sizeof(*f->v));
		f->site_off = xreallocarray(f->site_off, f->n + 1, sizeof(*f->site_off));
		f->site_path = xreallocarray(f->site_path, f->n + 1, sizeof(*f->site_path));
		f->v[f->n] = (struct ptwk_under_way){ sp, ret, lo, index };
		f->site_off[f->n] = off;
		snprintf(f->site_path[f->n], sizeof(f->site_path[f->n]), "%s", path);
		f->n++;
	}
	free(pcs);
}

static void found_free(struct found *f)
{
	free(f->v);
	free(f->site_off);
	free(f->site_path);
	free(f->wait);
	free(f->wait_path);
	memset(f, 0, sizeof(*f));
}

static bool found_any(const struct found *f)
{
	return f->n || f->wait;
}

/* Return site off of file path into the groups (once). */
static void group_add(struct site_group **g, size_t *ng, const char *path, uint64_t off)
{
	size_t j = 0;
	while (j < *ng && strcmp((*g)[j].path, path))
		j++;
	if (j == *ng) {
		*g = xreallocarray(*g, *ng + 1, sizeof(**g));
		memset(&(*g)[*ng], 0, sizeof(**g));
		snprintf((*g)[*ng].path, sizeof((*g)[*ng].path), "%s", path);
		(*ng)++;
	}
	struct site_group *s = &(*g)[j];
	for (size_t m = 0; m < s->n; m++)
		if (s->offsets[m] == off)
			return;
	s->offsets = xreallocarray(s->offsets, s->n + 1, sizeof(uint64_t));
	s->offsets[s->n++] = off;
}

/* The return sites of every frame found, a link per file (the same site
 * once: a recursion returns to one address at every depth, the sp tells
 * them apart in BPF). Returns the probes attached, or -errno. */
static int attach_all(struct ptwk_underway *u, const struct found *fs, size_t nfs)
{
	struct site_group *g = NULL;
	size_t ng = 0;
	int total = 0, r = 0;
	for (size_t k = 0; k < nfs; k++) {
		for (size_t i = 0; i < fs[k].n; i++)
			group_add(&g, &ng, fs[k].site_path[i], fs[k].site_off[i]);
		if (fs[k].wait && fs[k].wait_path)
			group_add(&g, &ng, fs[k].wait_path, fs[k].wait_off);
	}
	for (size_t j = 0; j < ng; j++) {
		int k = r < 0 ? 0 : attach_sites(u, &g[j]);
		if (k < 0)
			r = k;
		else
			total += k;
		free(g[j].offsets);
	}
	free(g);
	return r < 0 ? r : total;
}

/* A wait's return site into the sites' map, with what else returns at
 * that site and stack pointer (a traced slow path's frame). */
static bool watch_wait(struct ptwk_underway *u, const struct found *f)
{
	struct ptwk_uw_key key = { .tid = (uint32_t)f->tid, .sp = f->wait->sp + 8 };
	uint64_t v = 0;
	if (bpf_map__lookup_elem(u->env.sites, &key, sizeof(key), &v, sizeof(v), 0) < 0)
		v = 0;
	v |= f->wait->join ? PTWK_UW_JOIN : PTWK_UW_WAIT;
	return bpf_map__update_elem(u->env.sites, &key, sizeof(key), &v, sizeof(v), BPF_ANY) == 0;
}

/* --locks: the records the ring holds now among those not converted yet
 * (a wait the probes saw begin, in a thread just read: its entry's). */
static void records_read(struct ptwk_underway *u)
{
	if (u->env.wait_of && u->env.records_read)
		u->env.records_read(u->env.ctx);
}

/*
 * --locks: threads asleep in futex that were not all along (tids, marked
 * as they were then): read again, UNDERWAY_READS times at most, until
 * each has stayed asleep between two reads (its wait found as any other's,
 * into fs; one begun once the probes were in is its entry's, the same
 * wait: lockconv.c; or one whose wait could not be trusted, kept to say
 * so if it stays asleep to the end: ptwk_underway_take). Those that never
 * did are left at the front of tids: returns how many (one gone meanwhile
 * is in no wait). The memory map is read again after the threads each
 * time: a uretprobe's trampoline page is mapped when one first fires in
 * the process, maybe since.
 */
static size_t read_again(struct ptwk_underway *u, pid_t *tids, size_t ntids, uint64_t marked_ns,
			 struct found *fs, size_t *nfs)
{
	for (int round = 1; ntids && round < UNDERWAY_READS; round++) {
		struct ptwk_uw_task *t;
		int n = ptwk_read_tasks(u->env.iter, u->env.pid, &t);
		uint64_t read_ns = ptw_now_ns();
		if (n < 0)
			break;
		records_read(u);
		struct ptw_mapping *maps = NULL;
		int nmaps = ptw_maps_read(u->env.live_pid, &maps);
		if (nmaps <= 0) { /* (gone, or on its way out: in no wait) */
			free(t);
			ntids = 0;
			break;
		}
		const struct ptw_mapping *tramp = ptw_maps_named(maps, nmaps, "[uprobes]");
		struct ptw_map now = { 0 };
		for (int i = 0; i < n; i++)
			ptw_map_put(&now, t[i].tid, &t[i]);
		size_t keep = 0;
		ptw_mem_invalidate(u->env.proc);
		for (size_t j = 0; j < ntids; j++) {
			const struct ptwk_uw_task *x = ptw_map_get(&now, (uint64_t)tids[j]);
			if (!x)
				continue;
			if (!stayed(u, x) || !x->regs_ok) {
				mark(u, x);
				tids[keep++] = tids[j];
				continue;
			}
			struct found *f = &fs[*nfs];
			f->tid = tids[j];
			unwind_thread(u, x, maps, nmaps, tramp, false, f);
			f->wait_since_ns = marked_ns; /* (asleep since the read before) */
			ptw_dbg(PTW_DBG_TRACER, "--locks: under way: thread %d read again (%d): %s",
				f->tid, round, f->wait ? "a wait" : "none");
			if (f->wait || f->missed)
				(*nfs)++;
			else
				found_free(f);
		}
		ptw_map_free(&now);
		free(maps);
		free(t);
		ntids = keep;
		marked_ns = read_ns;
	}
	return ntids;
}

size_t ptwk_underway_woke(const struct ptwk_underway *u)
{
	return u ? u->woke : 0;
}

unsigned ptwk_underway_take(struct ptwk_underway *u)
{
	if (!u)
		return 0;
	if (u->env.between)
		u->env.between(u->env.between_ctx, u->env.pid);
	uint64_t t0 = ptw_now_ns();
	struct ptwk_uw_task *t;
	int n = ptwk_read_tasks(u->env.iter, u->env.pid, &t);
	uint64_t read_ns = ptw_now_ns();
	if (n < 0) {
		note_no_registers(u, n);
		return 0;
	}
	records_read(u);
	ptw_dbg(PTW_DBG_TRACER, "%s: under way: %d threads read in %.2f ms", opts_of(u), n,
		(double)(ptw_now_ns() - t0) / 1e6);
	struct ptw_mapping *maps = NULL;
	int nmaps = ptw_maps_read(u->env.live_pid, &maps);
	/* (a process gone meanwhile, a -f child's that ended at once, is in
	 * no wait; nor one on its way out, its memory gone already) */
	if (nmaps <= 0 && !ptw_proc_exiting(u->env.pid, u->env.live_pid))
		note(u, PTW_W_KERNEL_LIMIT,
		     "%s: the %s under way at the attach are not reported: cannot read "
		     "/proc/%d/maps (%s)",
		     opts_of(u), things_of(u), u->env.live_pid,
		     strerror(nmaps < 0 ? -nmaps : ENOENT));
	/* (a uretprobe's trampoline: the page whose first slot it is) */
	const struct ptw_mapping *tramp = ptw_maps_named(maps, nmaps > 0 ? nmaps : 0, "[uprobes]");
	struct found *fs = xcalloc((size_t)n + 1, sizeof(*fs));
	size_t nfs = 0, ran = 0, partial = 0, missed = 0, again = 0;
	pid_t first_ran = 0, first_partial = 0, first_missed = 0, first_again = 0;
	ptw_mem_invalidate(u->env.proc);
	pid_t *retry = NULL; /* --locks: asleep in futex now, not all along */
	size_t nretry = 0;
	for (int i = 0; i < n && nmaps > 0; i++) {
		ptw_dbg(PTW_DBG_TRACER,
			"--trace: under way: thread %u: switches %llu (at the begin: %llu), %s",
			t[i].tid, (unsigned long long)t[i].switches,
			(unsigned long long)(uintptr_t)ptw_map_get(&u->before, t[i].tid) - 1,
			t[i].on_cpu ? "on a CPU" : "off");
		if ((pid_t)t[i].tid == u->env.pid && u->env.live_pid != u->env.pid)
			continue; /* (a zombie leader: no call of its is under way) */
		if (!stayed(u, &t[i]) || !t[i].regs_ok) {
			first_ran = ran++ ? first_ran : (pid_t)t[i].tid;
			if (u->env.wait_of && asleep_in_futex(&t[i])) {
				/* its wait read again from now (read_again) */
				mark(u, &t[i]);
				retry = xreallocarray(retry, nretry + 1, sizeof(*retry));
				retry[nretry++] = (pid_t)t[i].tid;
			} else if (u->env.wait_of && u->env.links_in &&
				   ((uintptr_t)ptw_map_get(&u->before, t[i].tid) & 1)) {
				first_again = again++ ? first_again : (pid_t)t[i].tid;
			}
			continue;
		}
		struct found *f = &fs[nfs];
		f->tid = (pid_t)t[i].tid;
		unwind_thread(u, &t[i], maps, nmaps, tramp, true, f);
		f->wait_since_ns = u->begin_ns;
		/* (one with something it could not read is kept to say so, if
		 * it did not run meanwhile: read below) */
		if (found_any(f) || f->partial || f->missed)
			nfs++;
		else
			found_free(f);
	}
	nretry = read_again(u, retry, nretry, read_ns, fs, &nfs);
	for (size_t i = 0; i < nretry; i++)
		first_again = again++ ? first_again : retry[i];
	free(retry);
	free(maps);
	/* The sites, then whether those threads stayed off a CPU all along:
	 * a thread that ran meanwhile may have returned unseen. */
	size_t unkept = 0;
	pid_t first_unkept = 0;
	for (size_t k = 0; k < nfs; k++)
		for (size_t i = 0; i < fs[k].n; i++) {
			struct ptwk_uw_key key = { .tid = (uint32_t)fs[k].tid,
						   .sp = fs[k].v[i].sp + 8 };
			if (bpf_map__update_elem(u->env.sites, &key, sizeof(key), &fs[k].v[i].index,
						 sizeof(uint64_t), BPF_ANY) == 0)
				continue;
			/* (the map full: this frame and the outer ones are not
			 * reported, as a stack read short) */
			first_unkept = unkept ? first_unkept : fs[k].tid;
			unkept += fs[k].n - i;
			fs[k].n = i;
		}
	for (size_t k = 0; k < nfs; k++)
		if (fs[k].wait && fs[k].wait_path && !watch_wait(u, &fs[k])) {
			first_unkept = unkept ? first_unkept : fs[k].tid;
			unkept++;
			free(fs[k].wait);
			free(fs[k].wait_path);
			fs[k].wait = NULL;
			fs[k].wait_path = NULL;
		}
	if (unkept)
		note(u, PTW_W_TRACE_PARTIAL_STACK,
		     "%s: %zu %s under way at the attach (the first in thread %d) are not "
		     "reported: the map of their return sites (%u entries) was full",
		     opts_of(u), unkept, things_of(u), first_unkept,
		     bpf_map__max_entries(u->env.sites));
	int probes = nfs ? attach_all(u, fs, nfs) : 0;
	if (probes < 0) {
		/* (a process gone meanwhile, its waits and calls with it: ESRCH) */
		if (probes != -ESRCH && !ptw_proc_exiting(u->env.pid, u->env.live_pid))
			note(u, PTW_W_KERNEL_LIMIT,
			     "%s: the %s under way at the attach are not reported: their return "
			     "sites cannot be probed (%s)",
			     opts_of(u), things_of(u), strerror(-probes));
		ptwk_underway_close(u);
		for (size_t k = 0; k < nfs; k++)
			found_free(&fs[k]);
		nfs = 0;
		probes = 0;
	}
	struct ptwk_uw_task *after;
	int nafter = nfs ? ptwk_read_tasks(u->env.iter, u->env.pid, &after) : 0;
	for (size_t k = 0; k < nfs; k++) {
		bool still = false, again_now = false;
		for (int i = 0; i < nafter && !still; i++)
			if ((pid_t)after[i].tid == fs[k].tid) {
				still = stayed(u, &after[i]);
				again_now = slept_again(u, &after[i]);
			}
		if (!still) {
			for (size_t i = 0; i < fs[k].n; i++) {
				struct ptwk_uw_key key = { .tid = (uint32_t)fs[k].tid,
							   .sp = fs[k].v[i].sp + 8 };
				bpf_map__delete_elem(u->env.sites, &key, sizeof(key), 0);
			}
			if (fs[k].wait) {
				struct ptwk_uw_key key = { .tid = (uint32_t)fs[k].tid,
							   .sp = fs[k].wait->sp + 8 };
				bpf_map__delete_elem(u->env.sites, &key, sizeof(key), 0);
			}
			/* (at an attach, a wait that ended meanwhile ended as the
			 * attach began; in a -f child, once its probes were in:
			 * begun before, or seen. One not trusted was read as the
			 * thread ran: its stack changing under the read.) */
			if ((fs[k].wait || fs[k].missed) && (again_now || u->env.links_in))
				first_again = again++ ? first_again : fs[k].tid;
			first_ran = ran++ ? first_ran : fs[k].tid;
			found_free(&fs[k]);
			continue;
		}
		if (fs[k].partial)
			first_partial = partial++ ? first_partial : fs[k].tid;
		if (fs[k].missed)
			first_missed = missed++ ? first_missed : fs[k].tid;
		if (!found_any(&fs[k])) { /* (none, or none kept: the sites' map full) */
			found_free(&fs[k]);
			continue;
		}
		/* outermost first */
		for (size_t i = 0, j = fs[k].n ? fs[k].n - 1 : 0; i < j; i++, j--) {
			struct ptwk_under_way x = fs[k].v[i];
			fs[k].v[i] = fs[k].v[j];
			fs[k].v[j] = x;
		}
		/* kept at the front (slots before k are kept or freed) */
		struct found keep = fs[k];
		memset(&fs[k], 0, sizeof(fs[k]));
		fs[u->nfound++] = keep;
	}
	if (nafter > 0)
		free(after);
	for (size_t k = u->nfound; k < nfs; k++)
		found_free(&fs[k]);
	u->found = fs;
	free(t);
	if (ran && u->env.frames)
		note(u, PTW_W_KERNEL_LIMIT,
		     "--trace: %zu thread%s ran while ptwatch attached (the first: %d): the "
		     "kernel path reads a thread's registers without stopping it, only while it "
		     "is off a CPU, so the calls under way in %s at the attach are not reported",
		     ran, ran == 1 ? "" : "s", first_ran, ran == 1 ? "it" : "them");
	/* (a thread that ran is in no wait begun before: one it was in ended
	 * before the attach, or began once the probes saw it; but one asleep
	 * in futex now, read again from now, woke again and again) */
	if (again && u->env.links_in)
		u->woke = again; /* (a -f child's: counted with the others', ptwk_underway_woke) */
	else if (again)
		note(u, PTW_W_KERNEL_LIMIT,
		     "--locks: %zu thread%s asleep in futex at the attach woke between each two "
		     "of the %d times ptwatch read %s (the first: %d): the kernel path reads a "
		     "thread's registers without stopping it, only while it stays off a CPU, so "
		     "a wait begun before the attach that %s may be in is not reported",
		     again, again == 1 ? "" : "s", UNDERWAY_READS, again == 1 ? "it" : "them",
		     first_again, again == 1 ? "it" : "they");
	/* (a process on its way out, its memory gone while it was read: its
	 * calls and waits end with it) */
	bool exiting = (missed || partial) && ptw_proc_exiting(u->env.pid, u->env.live_pid);
	if (missed && !exiting)
		note(u, u->env.frames ? PTW_W_TRACE_PARTIAL_STACK : PTW_W_LOCKS_NO_RETURN,
		     "%s: a %s under way at the attach in thread %d (the first such) is not "
		     "reported: its stack slot or its return site could not be trusted",
		     opts_of(u),
		     !u->env.wait_of ? "call"
		     : u->env.frames ? "call or wait"
				     : "wait",
		     first_missed);
	else if (partial && !exiting)
		note(u, PTW_W_TRACE_PARTIAL_STACK,
		     "--trace: the stack of thread %d (the first such) could not be read to its "
		     "start at the attach: calls under way in its outer frames are not reported",
		     first_partial);
	if (!probes)
		ptwk_underway_close(u);
	ptw_dbg(PTW_DBG_TRACER,
		"--trace, --locks: under way: %zu threads with calls or waits, %d return-site "
		"probes, %zu threads ran; %.1f ms since the begin, %.1f ms here",
		u->nfound, probes, ran, (double)(ptw_now_ns() - u->begin_ns) / 1e6,
		(double)(ptw_now_ns() - t0) / 1e6);
	return (unsigned)probes;
}

void ptwk_underway_emit(struct ptwk_underway *u, struct ptwk_conv *conv, uint64_t ns)
{
	if (!u)
		return;
	for (size_t k = 0; k < u->nfound; k++) {
		ptwk_frames_under_way(conv, u->found[k].tid, u->found[k].v, u->found[k].n, ns);
		if (u->found[k].wait && u->env.wait_emit)
			/* (asleep in it since then at least) */
			u->env.wait_emit(u->env.ctx, u->found[k].tid, u->found[k].wait,
					 u->found[k].wait_since_ns);
		found_free(&u->found[k]);
	}
	free(u->found);
	u->found = NULL;
	u->nfound = 0;
}

void ptwk_underway_poll(struct ptwk_underway *u)
{
	if (!u || (!u->nfds && !u->nlinks))
		return;
	/* (a syscall per site and a /proc look per thread: not at every batch) */
	uint64_t now = ptw_now_ns();
	if (now - u->polled_ns < UNDERWAY_POLL_NS)
		return;
	u->polled_ns = now;
	/* What is left: frames not returned; a thread gone takes its own. */
	struct ptwk_uw_key key, next;
	bool left = false, first = true;
	while (bpf_map__get_next_key(u->env.sites, first ? NULL : &key, &next, sizeof(next)) == 0) {
		first = false;
		key = next;
		if (ptw_proc_exited(u->env.pid, (pid_t)next.tid))
			bpf_map__delete_elem(u->env.sites, &next, sizeof(next), 0);
		else
			left = true;
	}
	if (!left)
		ptwk_underway_close(u);
}

void ptwk_underway_close(struct ptwk_underway *u)
{
	if (!u)
		return;
	for (size_t i = 0; i < u->nfds; i++)
		close(u->fds[i]);
	free(u->fds);
	u->fds = NULL;
	u->nfds = 0;
	for (size_t i = 0; i < u->nlinks; i++)
		bpf_link__destroy(u->links[i]);
	free(u->links);
	u->links = NULL;
	u->nlinks = 0;
}

void ptwk_underway_free(struct ptwk_underway *u)
{
	if (!u)
		return;
	ptwk_underway_close(u);
	for (size_t k = 0; k < u->nfound; k++)
		found_free(&u->found[k]);
	free(u->found);
	ptw_map_free(&u->before);
	free(u);
}
