/* SPDX-License-Identifier: MIT */
/* --trace on the kernel path; see kframes.h. */
#define _GNU_SOURCE
#include "kframes.h"

#include <bpf/bpf.h>
#include <bpf/libbpf.h>
#include <errno.h>
#include <fcntl.h>
#include <gelf.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <poll.h>
#include <signal.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "links.h"
#include "ptw_breakpoints.h"
#include "probes.h"
#include "xol.h"
#include "ptw_kernel_records.h"
#include "ptw_patterns.h"
#include "ptw_symbols.h"
#include "ptw_trace_select.h"
#include "ptw_util.h"
#include "ptw_warnings.h"

/* The probes of one file in one direction, before they are attached. */
struct group {
	char path[4096], module[4096];
	uint64_t *offsets, *cookies;
	const char **names; /* for messages */
	size_t n, cap;
};

struct ptwk_frames {
	struct ptw_trace_select *sel;
	const struct ptw_location **fns; /* cookie -> function */
	size_t nfns;
	struct ptw_map scanned; /* hash(module path) -> 1: its file has its probes, wherever
				 * (and however often) it is mapped again */
	struct ptw_map entries; /* entry address -> 1 */
	struct ptw_map traced;	/* entry address -> cookie + 1: its probes are in */
	uint64_t *fn_addrs;	/* cookie -> entry address */
	uint8_t *fn_past;	/* cookie -> how far past it its entry probe is */
	struct ptw_map helpers; /* hash(file) ^ offset -> 1: a helper probed */
	struct ptw_map returns; /* address -> 1 ok, 2 failed: a return site watched */
	int *fds; /* uprobe_multi links */
	size_t nfds;
	struct bpf_link **links; /* ordinary uprobes */
	size_t nlinks;
	unsigned probes;
	unsigned stepped; /* functions traced whose entry the kernel single-steps */
	uint32_t njumps;  /* indirect jumps in the frame_jumps map */
	/* Why the returns are seen by a probe on each exit, not a uretprobe:
	 * the process can throw or switch stacks (check_exits_needed); NULL:
	 * uretprobes. Once set, for every module scanned from then on. */
	char *exits_why;
	unsigned by_uretprobe; /* functions traced with a uretprobe */
	bool started;	/* probes are in and the program runs: a module
			 * scanned from now on came late */
	/* modules scanned late with functions the patterns match, and the
	 * first ones' names */
	unsigned late;
	struct ptw_buf late_names;
	struct ptw_symbols **file_syms; /* a launch's files, read before they are mapped */
	size_t nfile_syms;
	bool offline; /* the scan in progress is of a file's symbols */
	bool sigreturn; /* glibc's sigreturn trampoline has its probe */
	/* per scan */
	struct group group;
	struct ptw_symbols *syms;
	pid_t pid;
	struct ptw_mapping *maps;
	int nmaps;
	const char *module_path; /* the module scanned: its file, as listed */
};

struct ptwk_frames *ptwk_frames_new(char *const *trace, size_t ntrace)
{
	if (!ntrace)
		return NULL;
	struct ptwk_frames *f = xcalloc(1, sizeof(*f));
	f->sel = ptw_trace_select_new(trace, ntrace);
	return f;
}

static void group_add(struct group *g, uint64_t off, uint64_t cookie, const char *name)
{
	if (g->n == g->cap) {
		g->cap = g->cap ? g->cap * 2 : 64;
		g->offsets = xreallocarray(g->offsets, g->cap, sizeof(*g->offsets));
		g->cookies = xreallocarray(g->cookies, g->cap, sizeof(*g->cookies));
		g->names = xreallocarray(g->names, g->cap, sizeof(*g->names));
	}
	g->offsets[g->n] = off;
	g->cookies[g->n] = cookie;
	g->names[g->n++] = name;
}

static void group_free(struct group *g)
{
	free(g->offsets);
	free(g->cookies);
	free(g->names);
	memset(g, 0, sizeof(*g));
}

static void keep_fd(struct ptwk_frames *f, int fd)
{
	f->fds = xreallocarray(f->fds, f->nfds + 1, sizeof(*f->fds));
	f->fds[f->nfds++] = fd;
}

/* The set of g's probes from..from+n for prog: for the process scanned
 * (kept in the session's book, -f: for the others too), else, pr->wide,
 * for every process that maps the file. */
static struct ptwk_uprobe_set group_set(const struct ptwk_frames *f, struct bpf_program *prog,
					const struct group *g, size_t from, size_t n, bool ret,
					const struct ptwk_frames_progs *pr)
{
	return (struct ptwk_uprobe_set){ .prog = prog,
					 .path = g->path,
					 .offsets = g->offsets + from,
					 .cookies = g->cookies + from,
					 .n = n,
					 .ret = ret,
					 .pid = pr->wide ? 0 : f->pid,
					 .book = pr->wide ? NULL : pr->book,
					 .rank = ret || prog == pr->exit ? PTWK_RANK_RETURNS
									 : PTWK_RANK_CALLS };
}

static int link_multi(struct ptwk_frames *f, struct bpf_program *prog, const struct group *g,
		      size_t from, size_t n, bool ret, const struct ptwk_frames_progs *pr)
{
	struct ptwk_uprobe_set s = group_set(f, prog, g, from, n, ret, pr);
	int fd = ptwk_link_multi(&s);
	if (fd < 0)
		return fd;
	keep_fd(f, fd);
	f->probes += (unsigned)n;
	return 0;
}

static int link_one(struct ptwk_frames *f, struct bpf_program *prog, const struct group *g,
		    size_t i, bool ret, const struct ptwk_frames_progs *pr)
{
	struct ptwk_uprobe_set s = group_set(f, prog, g, i, 1, ret, pr);
	struct bpf_link *l = ptwk_link_one(&s, 0);
	if (!l)
		return -errno;
	f->links = xreallocarray(f->links, f->nlinks + 1, sizeof(*f->links));
	f->links[f->nlinks++] = l;
	f->probes++;
	return 0;
}

/* Function cookie has its probes (ptwk_frames_traced). */
static void traced_add(struct ptwk_frames *f, uint64_t cookie)
{
	if (cookie < f->nfns && f->fn_addrs[cookie])
		ptw_map_put(&f->traced, f->fn_addrs[cookie], (void *)(uintptr_t)(cookie + 1));
}

/* One function cannot be traced (said per pattern, the first few). */
static void failed_function(struct ptwk_frames *f, const char *name, int err)
{
	/* (ENOTSUPP, the kernel's own 524, which strerror cannot name:
	 * uprobes refuse some instructions, lock-prefixed ones among them) */
	ptw_trace_select_failed(
		f->sel, name,
		err == -524	  ? "the kernel cannot probe one of its instructions"
		: err == -EILSEQ  ? "its code could not be decoded whole, so where it "
				    "returns is not known"
		: err == -ENOTSUP ? "it leaves by a jump the kernel path cannot follow"
		: err == -ERANGE  ? "its extent is not known"
		: err == -ENOEXEC ? "it begins with a VEX- or EVEX-encoded instruction, which the "
				    "kernel's uprobes take for another: a probe there would change "
				    "what the program computes"
				  : strerror(-err));
}

/* Function cookie is traced; counted if the kernel single-steps it at
 * each call (its entry probe's instruction, stepped, or every return: a
 * ret is single-stepped). */
static void traced_one(struct ptwk_frames *f, uint64_t cookie, bool exits, bool stepped)
{
	traced_add(f, (uint32_t)cookie);
	f->stepped += exits || stepped;
	f->by_uretprobe += !exits;
}

/* A function's code is at most this long (a bound on what is read). */
#define FUNCTION_MAX (4u << 20)

/* One part of a traced function (its body, or its .cold part), read from
 * the file and swept: its exits (ptw_insn_exits). */
struct part {
	uint64_t lo, hi; /* addresses in the scan's symbols */
	uint64_t off;	 /* lo's file offset */
	struct ptw_insn_exit *ex;
	size_t n;
};

/* p's code from its file (malloc'ed), or NULL with *err set. */
static uint8_t *read_part(int fd, const struct part *p, int *err)
{
	if (p->hi <= p->lo || p->hi - p->lo > FUNCTION_MAX) {
		*err = -EFBIG;
		return NULL;
	}
	size_t len = (size_t)(p->hi - p->lo);
	uint8_t *code = xmalloc(len);
	if (pread(fd, code, len, (off_t)p->off) != (ssize_t)len) {
		free(code);
		*err = -EIO;
		return NULL;
	}
	return code;
}

static int sweep(int fd, struct part *p)
{
	int r;
	uint8_t *code = read_part(fd, p, &r);
	if (code)
		r = ptw_insn_exits(code, (size_t)(p->hi - p->lo), p->lo, &p->ex, &p->n);
	free(code);
	return r;
}

/* The .cold part gcc split off the function named name (name.cold, in the
 * same file), which target lies in: found, *cold filled. */
static bool cold_part(struct ptwk_frames *f, const char *name, uint64_t target, struct part *body,
		      struct part *cold)
{
	const struct ptw_location *at = ptw_symbols_locate(f->syms, target);
	const char *raw = at->linkage_name ? at->linkage_name : at->symbol;
	size_t n = strlen(name);
	if (!raw || strncmp(raw, name, n) || strncmp(raw + n, ".cold", 5) ||
	    ptw_symbols_function_range(f->syms, target, &cold->lo, &cold->hi) < 0 ||
	    cold->lo >= body->lo + (1ull << 32) || cold->lo + (1ull << 32) <= body->lo)
		return false;
	/* (the same segment: gcc puts it in .text.unlikely) */
	cold->off = body->off + (cold->lo - body->lo);
	return true;
}

/* The extent of the function at addr: its symbol's size or its CFI, else
 * up to the next symbol (a symbol without a size and no CFI: crt's
 * frame_dummy, _init; the sweep must still decode it whole). */
static int extent(struct ptwk_frames *f, uint64_t addr, struct part *p)
{
	int r = ptw_symbols_function_range(f->syms, addr, &p->lo, &p->hi);
	if (r == 0 && p->lo != addr)
		r = -ENOENT;
	if (r < 0 && ptw_symbols_next_symbol(f->syms, addr, &p->hi) == 0) {
		p->lo = addr;
		r = 0;
	}
	return r < 0 ? -ERANGE : 0;
}

static bool within(const struct part *p, uint64_t a)
{
	return p->hi > p->lo && a >= p->lo && a < p->hi;
}

/* The exits of one part into ex (cookies: PTWK_EXIT_COOKIE), those that
 * go to the other part of the same function or to a traced function's
 * entry (whose entry probe sees the tail call, as the tracer does)
 * left out. *at_entry: the cookie of an exit at the function's entry
 * (its first instruction leaves it), told by the entry's probe, which the
 * kernel may run after or before the exit's. */
static int part_exits(struct ptwk_frames *f, const struct part *p, const struct part *other,
		      uint64_t entry, uint64_t fn, int jumps, struct group *ex, const char *name,
		      uint64_t *at_entry)
{
	for (size_t k = 0; k < p->n; k++) {
		const struct ptw_insn_exit *e = &p->ex[k];
		uint64_t cookie;
		if (e->kind != PTW_EXIT_RET && e->kind != PTW_EXIT_JUMP_INDIRECT &&
		    (within(other, e->target) || ptw_map_get(&f->entries, e->target)))
			continue;
		if (e->kind == PTW_EXIT_RET) {
			cookie = PTWK_EXIT_COOKIE(PTWK_EXIT_RET, 0, fn);
		} else if (e->kind == PTW_EXIT_JUMP) {
			cookie = PTWK_EXIT_COOKIE(PTWK_EXIT_JUMP, 0, fn);
		} else if (e->kind == PTW_EXIT_JCC) {
			cookie = PTWK_EXIT_COOKIE(PTWK_EXIT_JCC, e->cond, fn);
		} else if (ptw_symbols_frame_set_up(f->syms, e->addr)) {
			continue; /* its stack not at the slot: a jump table, no tail call */
		} else if (e->addr == entry) {
			return -ENOTSUP; /* (the entry's program sends no indirect jump) */
		} else {
			/* its target read at the jump: not one inside this part */
			const struct ptw_insn_operand *o = &e->op;
			struct ptwk_jump_site js = {
				.disp = o->type == PTW_OPND_MEM ? o->disp : 0,
				.index_fn = (uint32_t)fn,
				.back = (uint32_t)(e->addr - p->lo),
				.ahead = (uint32_t)(p->hi - e->addr),
				.mem = o->type == PTW_OPND_MEM,
				.base = PTWK_REG_NONE,
				.index = PTWK_REG_NONE,
				.scale = (uint8_t)o->scale,
			};
			if (o->type == PTW_OPND_REG) {
				js.base = (uint8_t)(o->reg / 8);
			} else if (o->base == PTW_REG_RIP) {
				js.base = PTWK_REG_IP_NEXT;
				js.disp += e->len;
			} else if (o->base >= 0) {
				js.base = (uint8_t)(o->base / 8);
			}
			if (o->type == PTW_OPND_MEM && o->index >= 0)
				js.index = (uint8_t)(o->index / 8);
			uint32_t key = f->njumps;
			int u = jumps < 0 ? -EBADF : bpf_map_update_elem(jumps, &key, &js, BPF_ANY);
			if (u < 0)
				return u;
			f->njumps++;
			cookie = PTWK_EXIT_COOKIE(PTWK_EXIT_INDIRECT, 0, key);
		}
		if (e->addr == entry) {
			*at_entry = cookie;
			continue;
		}
		group_add(ex, p->off + (e->addr - p->lo), cookie, name);
	}
	return 0;
}

/* Function i of g: its exits into ex, and the cookie of its entry
 * probe (its index; an exit at its entry in the high bits). */
static int function_exits(struct ptwk_frames *f, int fd, const struct group *g, size_t i,
			  unsigned past, int jumps, struct group *ex, uint64_t *ret_cookie)
{
	uint64_t fn = g->cookies[i];
	const struct ptw_location *loc = f->fns[fn];
	const char *name = loc->linkage_name ? loc->linkage_name : loc->symbol;
	struct part body = { .off = g->offsets[i] }, cold = { 0 };
	int r = extent(f, loc->addr, &body);
	if (r == 0)
		r = sweep(fd, &body);
	/* gcc's .cold part, where a jump out of the body may go */
	for (size_t k = 0; r == 0 && name && k < body.n && !cold.hi; k++)
		if ((body.ex[k].kind == PTW_EXIT_JUMP || body.ex[k].kind == PTW_EXIT_JCC) &&
		    cold_part(f, name, body.ex[k].target, &body, &cold) && (r = sweep(fd, &cold)) < 0)
			cold.hi = cold.lo = 0;
	uint64_t at_entry = 0;
	if (r == 0)
		r = part_exits(f, &body, &cold, loc->addr + past, fn, jumps, ex, g->names[i],
			       &at_entry);
	if (r == 0)
		r = part_exits(f, &cold, &body, loc->addr + past, fn, jumps, ex, g->names[i],
			       &at_entry);
	free(body.ex);
	free(cold.ex);
	*ret_cookie = fn | (at_entry ? at_entry | PTWK_ENTRY_EXITS : 0);
	return r;
}

/* Closes the links made since (fd0, l0). */
static void unlink_since(struct ptwk_frames *f, size_t fd0, size_t l0, unsigned probes0)
{
	for (size_t k = fd0; k < f->nfds; k++)
		close(f->fds[k]);
	for (size_t k = l0; k < f->nlinks; k++)
		bpf_link__destroy(f->links[k]);
	f->nfds = fd0;
	f->nlinks = l0;
	f->probes = probes0;
}

/* The probes of entries [from, from + n) of g with prog, one link. */
static int link_range(struct ptwk_frames *f, struct bpf_program *prog, const struct group *g,
		      size_t from, size_t n, bool ret, const struct ptwk_frames_progs *pr)
{
	if (pr->multi)
		return n ? link_multi(f, prog, g, from, n, ret, pr) : 0;
	for (size_t k = from; k < from + n; k++) {
		int r = link_one(f, prog, g, k, ret, pr);
		if (r < 0)
			return r;
	}
	return 0;
}

/* At most this many instructions are passed over to an entry probe's place. */
#define PASS_MAX 4

/*
 * Where g's i-th function's entry probe goes and how the function comes
 * back to itself, from one read of its code. The probe goes past bytes at
 * its start when the kernel would single-step the first instruction:
 *  - a lock-prefixed one (uprobes refuse them, ENOTSUPP) that falls
 *    through to the next with the call's registers as at the entry (a
 *    locked read-modify-write of memory changes no register but the flags,
 *    and never branches). Its returns are seen by probes on its exits (a
 *    second uretprobe instance at each pass would chain): *exits.
 *  - up to PASS_MAX ones that change nothing the entry probe reads
 *    (ptw_insn_passable: endbr64, moves between registers, compares, ...),
 *    up to one the kernel emulates (a push, a call, a jump: about 1 us a
 *    hit against some 16 us for a step). The stack is as at the entry,
 *    so the uretprobe goes there too. Not if a jump lands among them.
 * *calls: a call of its own start (a recursion: its returns are probed at
 * its exits); *loops: a jump back to its start, or to where its entry
 * probe is (a pass there again is the same call, convert_frames.c).
 */
struct entry_place {
	unsigned past;
	bool exits, calls, loops;
	bool unprobeable; /* its first instruction misread by the kernel, and
			   * nothing to pass over it to */
	bool stepped;	  /* the kernel single-steps the probe's instruction
			   * (unread: not counted) */
};

/* The length of code's first instruction if it is lock-prefixed, else 0. */
static unsigned locked_first(const uint8_t *code, size_t n)
{
	struct ptw_insn_plan p;
	return ptwk_xol_locked(code, n) && ptw_insn_plan(code, n, 0, &p) == 0 ? p.len : 0;
}

/* How far plain instructions at code's start lead to one the kernel
 * emulates (else, unless emulated, to one it runs as it is): 0 if not
 * within PASS_MAX, or if a jump lands among them. */
static unsigned passed_to(const uint8_t *code, size_t len, uint64_t lo, bool emulated)
{
	size_t at = 0;
	for (int k = 0; k < PASS_MAX && at < len; k++) {
		int n = ptw_insn_passable(code + at, len - at, lo + at);
		if (n <= 0)
			return 0;
		at += (size_t)n;
		if (at < len && (emulated ? ptwk_xol_emulated(code + at, len - at)
					  : !ptwk_xol_misread(code + at, len - at)))
			return ptw_insn_jumps_within(code, len, lo, lo + 1, lo + at) ? 0
										     : (unsigned)at;
	}
	return 0;
}

/* How far on each side of a function jumps into the instructions its
 * probe passes are looked for: hand-written code shares labels between
 * neighbours (glibc's __mempcpy_avx_unaligned_erms jumps to a label two
 * instructions into __memmove_avx_unaligned_erms: a probe past that label
 * would take every mempcpy for a memmove). A compiler's code jumps into
 * another function only at its start. */
#define NEAR 4096

static bool jumped_into_from_near(int fd, const struct part *p, unsigned past)
{
	uint64_t back = p->off < NEAR ? p->off : NEAR;
	uint8_t *buf = xmalloc(NEAR);
	ssize_t n = back ? pread(fd, buf, (size_t)back, (off_t)(p->off - back)) : 0;
	bool found = n > 0 && ptw_insn_jumps_within(buf, (size_t)n, p->lo - back, p->lo + 1,
						    p->lo + past + 1);
	n = found ? 0 : pread(fd, buf, NEAR, (off_t)(p->off + (p->hi - p->lo)));
	found |= n > 0 && ptw_insn_jumps_within(buf, (size_t)n, p->hi, p->lo + 1, p->lo + past + 1);
	free(buf);
	return found;
}

static struct entry_place entry_place(struct ptwk_frames *f, int fd, const struct group *g,
				      size_t i)
{
	struct entry_place e = { 0 };
	const struct ptw_location *loc = f->fns[g->cookies[i]];
	struct part p = { .off = g->offsets[i] };
	int err;
	uint8_t *code = fd >= 0 && extent(f, loc->addr, &p) == 0 ? read_part(fd, &p, &err) : NULL;
	size_t len = code ? (size_t)(p.hi - p.lo) : 0;
	/* its first instruction, from its code, else read alone (its extent
	 * not known) */
	uint8_t head[16];
	ssize_t nh = code     ? (ssize_t)len
		     : fd < 0 ? -1
			      : pread(fd, head, sizeof(head), (off_t)g->offsets[i]);
	const uint8_t *first = code ? code : head;
	bool misread = nh > 0 && ptwk_xol_misread(first, (size_t)nh);
	if (nh > 0 && (e.past = locked_first(first, (size_t)nh))) {
		e.exits = true;
	} else if (misread) {
		if (code && !(e.past = passed_to(code, len, p.lo, true)))
			e.past = passed_to(code, len, p.lo, false);
	} else if (code && !ptwk_xol_emulated(code, len)) {
		e.past = passed_to(code, len, p.lo, true);
	}
	/* (a lock instruction's probe stays where the kernel refuses it) */
	if (e.past &&
	    (!code || (size_t)e.past >= len || ptwk_xol_misread(code + e.past, len - e.past) ||
	     jumped_into_from_near(fd, &p, e.past)))
		e.past = 0, e.exits = false;
	e.unprobeable = misread && !e.past;
	e.stepped = nh > (ssize_t)e.past && !ptwk_xol_emulated(first + e.past, (size_t)nh - e.past);
	uint64_t targets[256];
	int n = code ? ptw_insn_find_calls(code, len, p.lo, false, targets, 256) : 0;
	for (int k = 0; k < n && !e.calls; k++)
		e.calls = targets[k] == p.lo;
	e.loops = code && (ptw_insn_jumps_to(code, len, p.lo, p.lo) ||
			   (e.past && ptw_insn_jumps_to(code, len, p.lo, p.lo + e.past)));
	free(code);
	return e;
}

/*
 * A group's functions: with exits' probes (f->exits_why, or a function
 * that calls itself), each swept for its exits (one it cannot sweep whole
 * is not traced); else a uretprobe each. Then the entry probes, the exits'
 * and the uretprobes, one link each; if the kernel refuses a link (one
 * instruction it cannot probe refuses them all), each function on its
 * own, so that only that one is lost.
 */
static int attach_group(struct ptwk_frames *f, const struct group *g,
			const struct ptwk_frames_progs *pr)
{
	if (!g->n)
		return 0;
	struct group in = { 0 }, ex = { 0 }, ur = { 0 };
	/* function k of in: exits [from[k], from[k + 1]) of ex, its
	 * uretprobe uret[k] of ur (SIZE_MAX: none), whether its entry probe
	 * is single-stepped */
	size_t *from = xcalloc(g->n + 1, sizeof(*from)), *uret = xcalloc(g->n, sizeof(*uret));
	bool *stepped = xcalloc(g->n, sizeof(*stepped));
	int fd = open(g->path, O_RDONLY | O_CLOEXEC);
	memcpy(in.path, g->path, sizeof(in.path));
	memcpy(ex.path, g->path, sizeof(ex.path));
	memcpy(ur.path, g->path, sizeof(ur.path));
	ptw_dbg(PTW_DBG_TRACER, "--trace: %s: returns by %s%s)", g->module,
		f->exits_why ? "probes on the exits (" : "uretprobes (probes on the exits of "
							  "functions that call themselves",
		f->exits_why ? f->exits_why : "");
	for (size_t i = 0; i < g->n; i++) {
		size_t e0 = ex.n;
		struct entry_place at = entry_place(f, fd, g, i);
		bool exits = f->exits_why || at.exits || at.calls;
		uint64_t cookie = g->cookies[i] | (exits ? 0 : PTWK_ENTRY_URETPROBE);
		int r = at.unprobeable ? -ENOEXEC
			: !exits       ? 0
			: fd < 0       ? -errno
				 : function_exits(f, fd, g, i, at.past, pr->jumps, &ex, &cookie);
		if (r < 0) {
			ex.n = e0;
			failed_function(f, g->names[i], r);
			continue;
		}
		from[in.n] = e0;
		uret[in.n] = exits ? SIZE_MAX : ur.n;
		stepped[in.n] = at.stepped;
		if (!exits)
			group_add(&ur, g->offsets[i] + at.past, g->cookies[i], g->names[i]);
		group_add(&in, g->offsets[i] + at.past, cookie | (at.loops ? PTWK_ENTRY_LOOPS : 0),
			  g->names[i]);
		f->fn_past[g->cookies[i]] = (uint8_t)at.past;
	}
	from[in.n] = ex.n;
	if (fd >= 0)
		close(fd);
	int total = 0, r = -ENOTSUP;
	size_t fd0 = f->nfds, l0 = f->nlinks;
	unsigned p0 = f->probes;
	if (pr->multi && in.n) {
		/* The returns first: the process runs on while they go in (a
		 * followed child links the book's sets in this order too), and
		 * a return seen without its entry is dropped, where an entry
		 * without its return would leave the frame open, or close it
		 * at an outer return as if longjmp'd over. */
		r = link_range(f, pr->exit, &ex, 0, ex.n, false, pr);
		if (r == 0)
			r = link_range(f, pr->ret, &ur, 0, ur.n, true, pr);
		if (r == 0)
			r = link_range(f, pr->entry, &in, 0, in.n, false, pr);
		if (r == 0) {
			for (size_t k = 0; k < in.n; k++)
				traced_one(f, in.cookies[k], uret[k] == SIZE_MAX, stepped[k]);
			total = (int)(in.n + ex.n + ur.n);
		} else {
			unlink_since(f, fd0, l0, p0);
			ptw_dbg(PTW_DBG_TRACER, "--trace: uprobe_multi on %s: %s; one by one",
				g->module, strerror(-r));
		}
	}
	for (size_t i = 0; r < 0 && i < in.n; i++) {
		fd0 = f->nfds, l0 = f->nlinks, p0 = f->probes;
		/* all or none: an entry without its return probes would leave
		 * every call of it open */
		bool exits = uret[i] == SIZE_MAX;
		int k = link_range(f, pr->entry, &in, i, 1, false, pr);
		if (k == 0)
			k = exits ? link_range(f, pr->exit, &ex, from[i], from[i + 1] - from[i], false,
					       pr)
				  : link_range(f, pr->ret, &ur, uret[i], 1, true, pr);
		if (k == 0) {
			traced_one(f, in.cookies[i], exits, stepped[i]);
			total += (int)(1 + (exits ? from[i + 1] - from[i] : 1));
		} else {
			unlink_since(f, fd0, l0, p0);
			failed_function(f, in.names[i], k);
		}
	}
	free(stepped);
	free(from);
	free(uret);
	group_free(&in);
	group_free(&ex);
	group_free(&ur);
	return total;
}

/* The file (path, module: its name as mapped) and offset of addr in the
 * scan's symbols. */
static int file_of(struct ptwk_frames *f, uint64_t addr, char *path, char *mod, uint64_t *off)
{
	size_t size = sizeof(f->group.path);
	int r = f->offline
			? -ENOENT
			: ptwk_file_of(f->pid, f->maps, f->nmaps, addr, path, size, mod, size, off);
	/* A library ld.so listed, no longer mapped (dlclose'd before its list
	 * was read): its file, probed for its next mapping (a dlopen again). */
	if (r == -ENOENT && !f->offline && f->module_path && f->module_path[0] == '/' &&
	    access(f->module_path, R_OK) == 0) {
		snprintf(path, size, "%s", f->module_path);
		snprintf(mod, size, "%s", path);
		return ptw_symbols_file_offset(f->syms, addr, off);
	}
	if (!f->offline)
		return r;
	/* the file itself, not mapped yet */
	snprintf(path, size, "%s", ptw_symbols_exe(f->syms));
	snprintf(mod, size, "%s", path);
	return ptw_symbols_file_offset(f->syms, addr, off);
}

/* A function the patterns select: into the group of its file. */
static void on_function(void *ctx, uint64_t addr, const char *name)
{
	struct ptwk_frames *f = ctx;
	if (ptw_map_get(&f->entries, addr))
		return;
	char path[sizeof(f->group.path)], mod[sizeof(f->group.module)];
	uint64_t off;
	int r = file_of(f, addr, path, mod, &off);
	if (r < 0) {
		failed_function(f, name, r);
		return;
	}
	ptw_map_put(&f->entries, addr, (void *)1);
	if (!f->group.path[0]) {
		snprintf(f->group.path, sizeof(f->group.path), "%s", path);
		snprintf(f->group.module, sizeof(f->group.module), "%s", mod);
	} else if (strcmp(path, f->group.path)) {
		failed_function(f, name, -EXDEV); /* a module in two files: not seen here */
		return;
	}
	f->fns = xreallocarray(f->fns, f->nfns + 1, sizeof(*f->fns));
	f->fns[f->nfns] = ptw_symbols_locate(f->syms, addr);
	f->fn_addrs = xreallocarray(f->fn_addrs, f->nfns + 1, sizeof(*f->fn_addrs));
	f->fn_addrs[f->nfns] = f->offline ? 0 : addr; /* (a file's: not the process's) */
	f->fn_past = xreallocarray(f->fn_past, f->nfns + 1, sizeof(*f->fn_past));
	f->fn_past[f->nfns] = 0;
	/* the group's names live until it is attached: the location's do */
	group_add(&f->group, off, f->nfns, f->fns[f->nfns]->symbol ? f->fns[f->nfns]->symbol : "?");
	f->nfns++;
}

/* The helpers that tell how frames are left without a return, where
 * they are (ptw_trace_helpers). */
static int attach_helpers(struct ptwk_frames *f, const struct ptwk_frames_progs *pr)
{
	static const enum ptwk_kind kinds[] = {
		[PTW_TRACE_THROW] = PTWK_THROW,
		[PTW_TRACE_CATCH] = PTWK_CATCH,
		[PTW_TRACE_LONGJMP] = PTWK_LONGJMP,
		[PTW_TRACE_CONTEXT_SWAP] = PTWK_CONTEXT_SWAP,
		[PTW_TRACE_CONTEXT_SET] = PTWK_CONTEXT_SET,
		[PTW_TRACE_SIGRETURN] = PTWK_SIGRETURN,
		[PTW_TRACE_MODULES_CHANGED] = PTWK_DL_STATE,
	};
	int n = 0;
	for (size_t i = 0; i < ptw_trace_nhelpers; i++) {
		const struct ptw_trace_helper *h = &ptw_trace_helpers[i];
		uint64_t addr, off;
		struct group g = { 0 };
		if (ptw_symbols_lookup(f->syms, h->module ? h->module : PTW_MOD_ANY, h->name, &addr,
				       NULL) < 0 ||
		    file_of(f, addr, g.path, g.module, &off) < 0)
			continue;
		/* the same file at another address (a launch's exec, a dlopen
		 * again) has its probe already */
		uint64_t key = (ptw_str_hash(g.path) ^ (off * 31)) | 1;
		if (ptw_map_get(&f->helpers, key))
			continue;
		ptw_map_put(&f->helpers, key, (void *)1);
		group_add(&g, off, kinds[h->kind], h->name);
		int r = pr->multi ? link_multi(f, pr->helper, &g, 0, 1, false, pr)
				  : link_one(f, pr->helper, &g, 0, false, pr);
		if (r < 0)
			ptw_dbg(PTW_DBG_TRACER, "--trace: no probe on %s: %s", h->name,
				strerror(-r));
		else
			n++;
		f->sigreturn |= r == 0 && h->kind == PTW_TRACE_SIGRETURN;
		group_free(&g);
	}
	return n;
}

/*
 * How a traced function's return is seen. A uretprobe costs little (the
 * kernel emulates nothing and steps nothing: about 1 us here), but it puts
 * the kernel's trampoline in the return slot, and
 *  - an unwinder stepping through that frame finds no unwind information
 *    for the trampoline: a C++ exception (or a Rust panic) thrown through
 *    a traced call terminates the program (checked: std::terminate);
 *  - the kernel keeps one list of pending returns per thread, whatever the
 *    stack, and drops those whose slot lies below a new traced call's sp:
 *    code that switches stacks under open traced calls (contexts, a
 *    signal handler on an alternate stack) then gets a return sent to
 *    another call's address, or SIGILL (checked on 6.18);
 *  - it keeps at most 64 pending per thread.
 * A probe on each of the function's exits (its rets, its jumps out of it:
 * ptw_insn_exits) changes no slot, so it has none of these, but the kernel
 * single-steps a ret (some 9 us here). A process that can throw or switch
 * stacks gets exits' probes (why: f->exits_why); any other, uretprobes.
 */

/* What can throw among the loaded modules of syms (NULL: nothing). */
static char *thrower_in(struct ptw_symbols *syms)
{
	static const char *const throwers[] = { "__cxa_throw", "__rust_start_panic" };
	for (size_t i = 0; i < PTW_ARRAY_SIZE(throwers); i++) {
		uint64_t addr;
		if (ptw_symbols_lookup_loaded(syms, PTW_MOD_ANY, throwers[i], &addr) < 0)
			continue;
		const char *m = ptw_symbols_module_of(syms, addr);
		struct ptw_buf b = { 0 };
		ptw_buf_printf(&b, "%s in %s", throwers[i], ptw_pattern_base_name(m));
		return b.p;
	}
	return NULL;
}

/* libc and ld.so, which every dynamic program maps: a launch's are
 * ptwatch's own (the command is its fork until it execs). */
static bool core_module(const char *path)
{
	const char *b = ptw_pattern_base_name(path);
	return !strncmp(b, "libc.so", 7) || !strncmp(b, "ld-linux", 8);
}

static void refusals_in_file(const char *path, char **thrower, char **switcher);

/* What needs a stack switch among the modules of syms (NULL: nothing). */
static char *switcher_in(struct ptw_symbols *syms)
{
	char *why = NULL;
	size_t n = ptw_symbols_module_count(syms);
	for (size_t i = 0; i < n && !why; i++) {
		const char *path;
		uint64_t start;
		bool is_exe;
		if (ptw_symbols_module_info(syms, i, &path, &start, &is_exe) == 0)
			refusals_in_file(path, NULL, &why);
	}
	return why;
}

void ptwk_frames_exits_needed(struct ptwk_frames *f, const char *why)
{
	if (f && !f->exits_why)
		f->exits_why = xstrdup(why);
}

/* Whether the process's modules (syms) can throw or switch stacks: from
 * then on, exits' probes (f->exits_why says why). */
static void check_exits_needed(struct ptwk_frames *f, struct ptw_symbols *syms)
{
	if (!f->exits_why && !(f->exits_why = thrower_in(syms)))
		f->exits_why = switcher_in(syms);
}

/* Whether the file at path was scanned already, and now is: one key per
 * file however it is named (a launch scans its files by their real path
 * before the exec; ld.so's list names them as it opened them,
 * /lib/x86_64-linux-gnu/libc.so.6 for /usr/lib/x86_64-linux-gnu/libc.so.6:
 * scanned twice, every traced function had two probes and every call was
 * seen twice). */
static bool scanned_before(struct ptwk_frames *f, const char *path)
{
	char real[PATH_MAX];
	if (!path || path[0] != '/' || !realpath(path, real))
		snprintf(real, sizeof(real), "%s", path ? path : "?");
	uint64_t key = ptw_str_hash(real) | 1;
	if (ptw_map_get(&f->scanned, key))
		return true;
	ptw_map_put(&f->scanned, key, (void *)1);
	return false;
}

static int scan(struct ptwk_frames *f, struct ptw_symbols *syms, pid_t pid,
		const struct ptwk_frames_progs *pr, bool core_only, char *why, size_t why_size)
{
	f->nmaps = ptw_maps_read(pid, &f->maps);
	if (f->nmaps < 0) {
		snprintf(why, why_size, "cannot read /proc/%d/maps: %s", pid, strerror(-f->nmaps));
		return f->nmaps;
	}
	f->syms = syms;
	f->pid = pid;
	struct ptw_trace_scan sc = { f->sel, on_function, f };
	int total = 0;
	size_t n = ptw_symbols_module_count(syms);
	for (size_t i = 0; i < n; i++) {
		const char *path;
		uint64_t start;
		bool is_exe;
		if (ptw_symbols_module_info(syms, i, &path, &start, &is_exe) < 0 ||
		    (core_only && !core_module(path)))
			continue;
		if (scanned_before(f, path) || !ptw_trace_select_applies(f->sel, path))
			continue;
		group_free(&f->group);
		f->module_path = path;
		int r = ptw_symbols_module_functions(syms, i, ptw_trace_select_function, &sc);
		f->module_path = NULL;
		ptw_trace_select_walked(f->sel, path, r);
		if (!core_only && f->started && f->group.n && f->late++ < 3)
			ptw_buf_printf(&f->late_names, "%s%s", f->late > 1 ? ", " : "",
				       ptw_pattern_base_name(path));
		total += attach_group(f, &f->group, pr);
		group_free(&f->group);
	}
	total += attach_helpers(f, pr);
	free(f->maps);
	f->maps = NULL;
	return total;
}

/* Why no uretprobe may go in a process that maps the file at path. In
 * *thrower (when not NULL), what thrower_in() looks for, in a file not
 * loaded yet: a thrower in its symbol tables (defined or needed), or a C++
 * or unwinding runtime among the libraries it needs. In *switcher, a stack
 * switch it needs from libc ("swapcontext needed by prog"; libc itself
 * defines them and does not switch under its callers). NULL: none. */
static void refusals_in_file(const char *path, char **thrower, char **switcher)
{
	static const char *const throwers[] = { "__cxa_throw", "__rust_start_panic",
						"_Unwind_RaiseException" };
	static const char *const runtimes[] = { "libstdc++", "libgcc_s" };
	static const char *const switchers[] = { "swapcontext", "setcontext", "sigaltstack" };
	struct ptw_buf t = { 0 }, w = { 0 };
	int fd = path && path[0] == '/' ? open(path, O_RDONLY | O_CLOEXEC) : -1;
	elf_version(EV_CURRENT);
	Elf *elf = fd >= 0 ? elf_begin(fd, ELF_C_READ, NULL) : NULL;
	bool core = elf && core_module(path);
	for (Elf_Scn *scn = NULL; elf && (scn = elf_nextscn(elf, scn));) {
		GElf_Shdr sh;
		Elf_Data *d;
		if (!gelf_getshdr(scn, &sh) || !(d = elf_getdata(scn, NULL)) || !sh.sh_entsize)
			continue;
		size_t n = sh.sh_size / sh.sh_entsize;
		for (size_t i = 0; i < n; i++) {
			const char *name = NULL;
			GElf_Sym sym = { .st_shndx = SHN_ABS };
			GElf_Dyn dyn;
			if ((sh.sh_type == SHT_SYMTAB || sh.sh_type == SHT_DYNSYM) &&
			    gelf_getsym(d, (int)i, &sym))
				name = elf_strptr(elf, sh.sh_link, sym.st_name);
			for (size_t k = 0; name && !t.len && k < PTW_ARRAY_SIZE(throwers); k++)
				if (!strcmp(name, throwers[k]))
					ptw_buf_printf(&t, "%s in %s", name, ptw_pattern_base_name(path));
			if (sh.sh_type == SHT_DYNSYM && sym.st_shndx == SHN_UNDEF && !core)
				for (size_t k = 0; name && !w.len && k < PTW_ARRAY_SIZE(switchers); k++)
					if (!strcmp(name, switchers[k]))
						ptw_buf_printf(&w, "%s needed by %s", name,
							       ptw_pattern_base_name(path));
			if (sh.sh_type == SHT_DYNAMIC && gelf_getdyn(d, (int)i, &dyn) &&
			    dyn.d_tag == DT_NEEDED)
				name = elf_strptr(elf, sh.sh_link, dyn.d_un.d_val);
			for (size_t k = 0; sh.sh_type == SHT_DYNAMIC && name && !t.len &&
					   k < PTW_ARRAY_SIZE(runtimes);
			     k++)
				if (strstr(name, runtimes[k]))
					ptw_buf_printf(&t, "%s needs %s", ptw_pattern_base_name(path),
						       name);
		}
	}
	if (elf)
		elf_end(elf);
	if (fd >= 0)
		close(fd);
	if (thrower)
		*thrower = t.p;
	else
		ptw_buf_free(&t);
	*switcher = w.p;
}

/* One file's traced functions, from the file (it is not mapped yet). */
static int scan_file(struct ptwk_frames *f, const char *real, bool use_debug_files,
		     const struct ptwk_frames_progs *pr, char *why, size_t why_size)
{
	if (scanned_before(f, real))
		return 0;
	bool any = ptw_trace_select_applies(f->sel, real);
	/* the C++ runtime's helpers (a throw, a catch) are needed before the
	 * program runs, whatever the patterns: a short one throws before
	 * ptwatch has read that main started */
	const char *base = ptw_pattern_base_name(real);
	bool runtime = !strncmp(base, "libstdc++", 9) || !strncmp(base, "libgcc_s", 8);
	struct ptw_symbols *syms;
	int r = any || runtime ? ptw_symbols_new_file(real, any && use_debug_files, NULL, &syms) : 0;
	if (r < 0) {
		snprintf(why, why_size, "cannot read the symbols of %s: %s", real, strerror(-r));
		return r;
	}
	int total = 0;
	if (any || runtime) {
		f->file_syms =
			xreallocarray(f->file_syms, f->nfile_syms + 1, sizeof(*f->file_syms));
		f->file_syms[f->nfile_syms++] = syms;
		f->syms = syms;
		f->offline = true;
		group_free(&f->group);
		if (any) {
			r = ptw_symbols_module_functions(
				syms, 0, ptw_trace_select_function,
				&(struct ptw_trace_scan){ f->sel, on_function, f });
			ptw_trace_select_walked(f->sel, real, r);
			total = attach_group(f, &f->group, pr);
			group_free(&f->group);
		}
		/* the helpers it defines (libstdc++'s, libgcc_s's): before it runs */
		total += attach_helpers(f, pr);
		f->offline = false;
		f->syms = NULL;
	}
	return total;
}

int ptwk_frames_scan_files(struct ptwk_frames *f, const char *const *paths, size_t n, pid_t pid,
			   bool use_debug_files, const struct ptwk_frames_progs *pr, char *why,
			   size_t why_size)
{
	char(*real)[PATH_MAX] = xcalloc(n + 1, sizeof(*real));
	int total = 0, r = 0;
	for (size_t i = 0; i < n; i++)
		if (!realpath(paths[i], real[i]))
			real[i][0] = '\0';
	/* Every file first: if any can throw or switch stacks, no uretprobe. */
	for (size_t i = 0; i < n && !f->exits_why; i++)
		if (real[i][0]) {
			char *switcher = NULL;
			refusals_in_file(real[i], &f->exits_why, &switcher);
			if (!f->exits_why)
				f->exits_why = switcher;
			else
				free(switcher);
		}
	f->pid = pid;
	f->started = true; /* the process scans that follow are after the exec */
	for (size_t i = 0; i < n; i++) {
		if (!real[i][0]) {
			snprintf(why, why_size, "%s: %s", paths[i], strerror(ENOENT));
			r = -ENOENT;
			continue;
		}
		int k = scan_file(f, real[i], use_debug_files, pr, why, why_size);
		if (k < 0)
			r = k;
		else
			total += k;
	}
	free(real);
	return r < 0 && !total ? r : total;
}

/* The program interpreter (PT_INTERP) of the ELF file at path, resolved
 * (false: none, or unreadable). */
static bool interpreter_of(const char *path, char *ret, size_t size)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return false;
	elf_version(EV_CURRENT);
	Elf *elf = elf_begin(fd, ELF_C_READ, NULL);
	size_t n;
	bool found = false;
	char interp[PATH_MAX];
	for (size_t i = 0; elf && elf_getphdrnum(elf, &n) == 0 && i < n && !found; i++) {
		GElf_Phdr ph;
		if (!gelf_getphdr(elf, (int)i, &ph) || ph.p_type != PT_INTERP || !ph.p_filesz ||
		    ph.p_filesz >= sizeof(interp))
			continue;
		ssize_t got = pread(fd, interp, ph.p_filesz, (off_t)ph.p_offset);
		if (got != (ssize_t)ph.p_filesz)
			break;
		interp[ph.p_filesz] = '\0';
		found = realpath(interp, ret) && strlen(ret) < size;
	}
	if (elf)
		elf_end(elf);
	close(fd);
	return found;
}

size_t ptwk_frames_launch_libraries(const char *path, char ***ret)
{
	char interp[PATH_MAX], ours[PATH_MAX];
	*ret = NULL;
	if (!interpreter_of(path, interp, sizeof(interp)) ||
	    !interpreter_of("/proc/self/exe", ours, sizeof(ours)) || strcmp(interp, ours))
		return 0;
	int out[2];
	if (pipe2(out, O_CLOEXEC) < 0)
		return 0;
	pid_t pid = fork();
	if (pid == 0) {
		int null = open("/dev/null", O_RDWR | O_CLOEXEC);
		dup2(out[1], 1);
		if (null >= 0)
			dup2(null, 2);
		execl(interp, interp, "--list", path, (char *)NULL);
		_exit(127);
	}
	close(out[1]);
	struct ptw_buf b = { 0 };
	/* A few milliseconds; bounded anyway (a hostile file, a hung mount). */
	uint64_t deadline = ptw_now_ns() + 5000000000ull;
	char buf[4096];
	while (pid > 0 && b.len < (1u << 20)) {
		struct pollfd pfd = { .fd = out[0], .events = POLLIN };
		uint64_t now = ptw_now_ns();
		if (now >= deadline || poll(&pfd, 1, (int)((deadline - now) / 1000000) + 1) <= 0)
			break;
		ssize_t got = read(out[0], buf, sizeof(buf));
		if (got <= 0)
			break;
		ptw_buf_add(&b, buf, (size_t)got);
	}
	close(out[0]);
	if (pid > 0) {
		kill(pid, SIGKILL);
		waitpid(pid, NULL, 0);
	}
	/* "\tlibfoo.so.1 => /path/libfoo.so.1 (0x...)", "\t/lib64/ld-linux... (0x...)";
	 * not "linux-vdso.so.1 (0x...)" nor "=> not found" */
	size_t n = 0;
	char **v = NULL;
	for (char *save = NULL, *l = b.p ? strtok_r(b.p, "\n", &save) : NULL; l;
	     l = strtok_r(NULL, "\n", &save)) {
		char *arrow = strstr(l, "=> "), *p = arrow ? arrow + 3 : l + strspn(l, " \t");
		char *end = strstr(p, " (0x");
		if (*p != '/' || !end)
			continue;
		*end = '\0';
		v = xreallocarray(v, n + 1, sizeof(*v));
		v[n++] = xstrdup(p);
	}
	ptw_buf_free(&b);
	*ret = v;
	return n;
}

int ptwk_frames_scan(struct ptwk_frames *f, struct ptw_symbols *syms, pid_t pid,
		     const struct ptwk_frames_progs *pr, char *why, size_t why_size)
{
	check_exits_needed(f, syms);
	int r = scan(f, syms, pid, pr, false, why, why_size);
	/* after an attach's first scan, or any of a launch's (its files were
	 * scanned before it ran) */
	f->started = true;
	return r;
}

int ptwk_frames_scan_core(struct ptwk_frames *f, struct ptw_symbols *syms, pid_t pid,
			  const struct ptwk_frames_progs *pr, char *why, size_t why_size)
{
	return scan(f, syms, pid, pr, true, why, why_size);
}

int ptwk_frames_watch_return(struct ptwk_frames *f, struct ptw_symbols *syms, pid_t pid,
			     uint64_t addr, const struct ptwk_frames_progs *pr)
{
	uintptr_t known = f && addr ? (uintptr_t)ptw_map_get(&f->returns, addr) : 2;
	if (known)
		return known == 1 ? 1 : -ENOENT;
	struct group g = { 0 };
	const char *path = ptw_symbols_module_of(syms, addr);
	uint64_t off;
	int r = path && path[0] == '/' && ptw_symbols_file_offset(syms, addr, &off) == 0 ? 0
											     : -ENOENT;
	if (r == 0 && ptwk_xol_misread_at(path, off))
		r = -ENOEXEC; /* (xol.h) */
	if (r == 0) {
		snprintf(g.path, sizeof(g.path), "%s", path);
		group_add(&g, off, 0, "return site");
		f->pid = pid;
		r = link_range(f, pr->site, &g, 0, 1, false, pr);
		group_free(&g);
	}
	ptw_dbg(PTW_DBG_TRACER, "--trace: a return site watched at %#llx: %s",
		(unsigned long long)addr, r < 0 ? strerror(-r) : "ok");
	ptw_map_put(&f->returns, addr, (void *)(uintptr_t)(r == 0 ? 1 : 2));
	return r;
}

const struct ptw_location *ptwk_frames_function(const struct ptwk_frames *f, uint64_t index)
{
	return f && index < f->nfns ? f->fns[index] : NULL;
}

bool ptwk_frames_traced(const struct ptwk_frames *f, uint64_t entry, uint64_t *ret_index,
			uint64_t *ret_probe)
{
	uintptr_t v = f ? (uintptr_t)ptw_map_get(&f->traced, entry) : 0;
	if (v) {
		*ret_index = v - 1;
		*ret_probe = entry + f->fn_past[v - 1];
	}
	return v != 0;
}

bool ptwk_frames_sigreturn_probed(const struct ptwk_frames *f)
{
	return f && f->sigreturn;
}

unsigned ptwk_frames_probes(const struct ptwk_frames *f)
{
	return f ? f->probes : 0;
}

unsigned ptwk_frames_stepped(const struct ptwk_frames *f)
{
	return f ? f->stepped : 0;
}

/* ptw_trace_select_notes' notes, to the caller's fn. */
struct notes {
	void (*fn)(void *ctx, int code, const char *line);
	void *ctx;
};

static void note(void *ctx, size_t which, int code, const char *line)
{
	(void)which; /* (one process) */
	struct notes *n = ctx;
	n->fn(n->ctx, code, line);
}

void ptwk_frames_notes(const struct ptwk_frames *f,
		       void (*fn)(void *ctx, int code, const char *line), void *ctx)
{
	if (!f)
		return;
	if (f->by_uretprobe && f->exits_why) {
		struct ptw_buf b = { 0 };
		ptw_buf_printf(&b,
			       "--trace: %u traced functions probed before the process could "
			       "throw or switch stacks (%s, loaded later) have their returns "
			       "watched by uretprobes: an exception thrown through one of their "
			       "calls, or a stack switched under it, can end the program "
			       "(--backend=ptrace has no such limit)",
			       f->by_uretprobe, f->exits_why);
		fn(ctx, PTW_W_KERNEL_LIMIT, b.p);
		ptw_buf_free(&b);
	}
	if (f->late) {
		struct ptw_buf b = { 0 };
		ptw_buf_printf(&b,
			       "--trace: %u librar%s with traced functions loaded after the probes "
			       "went in (dlopen: %s%s) got %s once ptwatch had read that ld.so "
			       "mapped %s, while the program ran on: %s first calls may not have "
			       "been seen",
			       f->late, f->late == 1 ? "y" : "ies", f->late_names.p,
			       f->late > 3 ? ", ..." : "", f->late == 1 ? "its probes" : "theirs",
			       f->late == 1 ? "it" : "them", f->late == 1 ? "its" : "their");
		fn(ctx, PTW_W_KERNEL_LIMIT, b.p);
		ptw_buf_free(&b);
	}
	struct ptw_trace_select *sel = f->sel;
	ptw_trace_select_notes(&sel, 1, note, &(struct notes){ fn, ctx });
}

void ptwk_frames_close(struct ptwk_frames *f)
{
	if (!f)
		return;
	for (size_t i = 0; i < f->nfds; i++)
		close(f->fds[i]);
	free(f->fds);
	f->fds = NULL;
	f->nfds = 0;
	for (size_t i = 0; i < f->nlinks; i++)
		bpf_link__destroy(f->links[i]);
	free(f->links);
	f->links = NULL;
	f->nlinks = 0;
}

void ptwk_frames_free(struct ptwk_frames *f)
{
	if (!f)
		return;
	ptwk_frames_close(f);
	ptw_trace_select_free(f->sel);
	free(f->fns);
	free(f->exits_why);
	ptw_map_free(&f->scanned);
	ptw_map_free(&f->entries);
	ptw_map_free(&f->traced);
	free(f->fn_addrs);
	free(f->fn_past);
	ptw_map_free(&f->helpers);
	ptw_map_free(&f->returns);
	group_free(&f->group);
	ptw_buf_free(&f->late_names);
	for (size_t i = 0; i < f->nfile_syms; i++)
		ptw_symbols_free(f->file_syms[i]);
	free(f->file_syms);
	free(f);
}

void ptwk_frames_take_links(struct ptwk_frames *f, int **fds, size_t *nfds,
			    struct bpf_link ***links, size_t *nlinks)
{
	*fds = f ? f->fds : NULL;
	*nfds = f ? f->nfds : 0;
	*links = f ? f->links : NULL;
	*nlinks = f ? f->nlinks : 0;
	if (!f)
		return;
	f->fds = NULL;
	f->nfds = 0;
	f->links = NULL;
	f->nlinks = 0;
}
