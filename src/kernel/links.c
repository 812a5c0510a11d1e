/* SPDX-License-Identifier: MIT */
/* How a uprobe is put in; see links.h. */
#define _GNU_SOURCE
#include "links.h"

#include <bpf/bpf.h>
#include <bpf/libbpf.h>
#include <errno.h>
#include <linux/bpf.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "closer.h"
#include "probes.h"
#include "ptw_util.h"

static void keep(const struct ptwk_uprobe_set *s, size_t from, size_t n, bool multi);

int ptwk_link_multi(const struct ptwk_uprobe_set *s)
{
	struct ptwk_link_create_uprobe_multi a = {
		.prog_fd = (uint32_t)bpf_program__fd(s->prog),
		.attach_type = PTWK_BPF_TRACE_UPROBE_MULTI,
		.path = (uint64_t)(uintptr_t)s->path,
		.offsets = (uint64_t)(uintptr_t)s->offsets,
		.cookies = (uint64_t)(uintptr_t)s->cookies,
		.cnt = (uint32_t)s->n,
		.multi_flags = s->ret ? PTWK_BPF_F_UPROBE_MULTI_RETURN : 0,
		.pid = s->pid > 0 ? (uint32_t)s->pid : 0,
	};
	int fd = (int)syscall(__NR_bpf, BPF_LINK_CREATE, &a, sizeof(a));
	if (fd < 0)
		return -errno;
	if (s->book)
		keep(s, 0, s->n, true);
	return fd;
}

struct bpf_link *ptwk_link_one(const struct ptwk_uprobe_set *s, size_t i)
{
	LIBBPF_OPTS(bpf_uprobe_opts, opts, .retprobe = s->ret,
		    .bpf_cookie = s->cookies ? s->cookies[i] : 0);
	struct bpf_link *l = bpf_program__attach_uprobe_opts(s->prog, s->pid > 0 ? s->pid : -1,
							     s->path, (size_t)s->offsets[i], &opts);
	if (l && s->book) {
		int e = errno;
		keep(s, i, 1, false);
		errno = e;
	}
	return l;
}

struct ptwk_primer {
	pthread_t th;
	int fds[2];
};

/* A program that does nothing, for a uprobe_multi link (-1: none). */
static int idle_program(void)
{
	/* r0 = 0; exit */
	const struct bpf_insn insns[] = {
		{ .code = BPF_ALU64 | BPF_MOV | BPF_K, .dst_reg = BPF_REG_0, .imm = 0 },
		{ .code = BPF_JMP | BPF_EXIT },
	};
	LIBBPF_OPTS(bpf_prog_load_opts, opts,
		    .expected_attach_type = (enum bpf_attach_type)PTWK_BPF_TRACE_UPROBE_MULTI);
	return bpf_prog_load(BPF_PROG_TYPE_KPROBE, "ptw_primer", "GPL", insns,
			     sizeof(insns) / sizeof(insns[0]), &opts);
}

/* A file nobody maps, one nop long (-1: none). */
static int idle_file(void)
{
	int mem = memfd_create("ptw-primer", MFD_CLOEXEC);
	if (mem >= 0 && write(mem, "\x90", 1) != 1) {
		close(mem);
		mem = -1;
	}
	return mem;
}

/* A uprobe on the idle file for this process only: a registration that
 * puts no byte in any process. Its link, or -errno. */
static int idle_link(int prog, int mem)
{
	char path[64];
	snprintf(path, sizeof(path), "/proc/self/fd/%d", mem);
	uint64_t offset = 0;
	struct ptwk_link_create_uprobe_multi a = {
		.prog_fd = (uint32_t)prog,
		.attach_type = PTWK_BPF_TRACE_UPROBE_MULTI,
		.path = (uint64_t)(uintptr_t)path,
		.offsets = (uint64_t)(uintptr_t)&offset,
		.cnt = 1,
		.pid = (uint32_t)getpid(),
	};
	int link = (int)syscall(__NR_bpf, BPF_LINK_CREATE, &a, sizeof(a));
	return link < 0 ? -errno : link;
}

static void *prime(void *arg)
{
	struct ptwk_primer *p = arg;
	p->fds[0] = p->fds[1] = -1;
	int prog = idle_program();
	int mem = prog < 0 ? -1 : idle_file();
	int link = mem < 0 ? -1 : idle_link(prog, mem);
	if (mem >= 0)
		close(mem); /* (the uprobe holds its inode) */
	if (link < 0) {
		if (prog >= 0)
			close(prog);
		return NULL;
	}
	p->fds[0] = link;
	p->fds[1] = prog;
	return NULL;
}

struct ptwk_primer *ptwk_primer_start(void)
{
	struct ptwk_primer *p = malloc(sizeof(*p));
	if (!p)
		return NULL;
	if (ptw_thread_start(&p->th, 64 * 1024, prime, p) != 0) {
		free(p);
		return NULL;
	}
	return p;
}

void ptwk_primer_join(struct ptwk_primer *p, int fds[2])
{
	fds[0] = fds[1] = -1;
	if (!p)
		return;
	pthread_join(p->th, NULL);
	fds[0] = p->fds[0];
	fds[1] = p->fds[1];
	free(p);
}

/* The warmer (links.h). */
struct ptwk_warmer {
	pthread_t th;
	pthread_mutex_t lock;
	pthread_cond_t cond;
	bool stop;
	int prog, mem;
};

/* Links closed together (each close waits for grace periods: closer.h),
 * at most this many batches closing at once. */
#define WARM_BATCH   8
#define WARM_CLOSING 4

static void *warm(void *arg)
{
	struct ptwk_warmer *w = arg;
	int batch[WARM_BATCH];
	size_t n = 0, nclosing = 0;
	struct ptwk_closing *closing[WARM_CLOSING];
	struct timespec next;
	clock_gettime(CLOCK_MONOTONIC, &next);
	pthread_mutex_lock(&w->lock);
	while (!w->stop) {
		pthread_mutex_unlock(&w->lock);
		int fd = idle_link(w->prog, w->mem);
		if (fd >= 0)
			batch[n++] = fd;
		if (n == WARM_BATCH) {
			if (nclosing == WARM_CLOSING) { /* (the oldest is done by now) */
				ptwk_close_wait(closing[0]);
				memmove(closing, closing + 1,
					(WARM_CLOSING - 1) * sizeof(*closing));
				nclosing--;
			}
			int *fds = malloc(sizeof(batch));
			if (fds) {
				memcpy(fds, batch, sizeof(batch));
				closing[nclosing] = ptwk_close_start(fds, n, NULL, 0);
				nclosing += closing[nclosing] != NULL;
			} else {
				ptwk_close_together(batch, n, NULL, 0);
			}
			n = 0;
		}
		next.tv_nsec += PTWK_WARM_PERIOD_MS * 1000000L;
		if (next.tv_nsec >= 1000000000L) {
			next.tv_sec++;
			next.tv_nsec -= 1000000000L;
		}
		pthread_mutex_lock(&w->lock);
		while (!w->stop && pthread_cond_timedwait(&w->cond, &w->lock, &next) != ETIMEDOUT)
			;
	}
	pthread_mutex_unlock(&w->lock);
	ptwk_close_together(batch, n, NULL, 0);
	for (size_t i = 0; i < nclosing; i++)
		ptwk_close_wait(closing[i]);
	return NULL;
}

struct ptwk_warmer *ptwk_warmer_start(void)
{
	struct ptwk_warmer *w = calloc(1, sizeof(*w));
	if (!w)
		return NULL;
	w->prog = idle_program();
	w->mem = w->prog < 0 ? -1 : idle_file();
	pthread_condattr_t ca;
	pthread_condattr_init(&ca);
	pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
	pthread_cond_init(&w->cond, &ca);
	pthread_condattr_destroy(&ca);
	pthread_mutex_init(&w->lock, NULL);
	if (w->mem < 0 || ptw_thread_start(&w->th, 64 * 1024, warm, w) != 0) {
		if (w->prog >= 0)
			close(w->prog);
		if (w->mem >= 0)
			close(w->mem);
		pthread_cond_destroy(&w->cond);
		pthread_mutex_destroy(&w->lock);
		free(w);
		return NULL;
	}
	return w;
}

void ptwk_warmer_quit(struct ptwk_warmer *w)
{
	if (!w)
		return;
	pthread_mutex_lock(&w->lock);
	w->stop = true;
	pthread_cond_signal(&w->cond);
	pthread_mutex_unlock(&w->lock);
}

void ptwk_warmer_stop(struct ptwk_warmer *w)
{
	if (!w)
		return;
	ptwk_warmer_quit(w);
	pthread_join(w->th, NULL);
	close(w->prog);
	close(w->mem);
	pthread_cond_destroy(&w->cond);
	pthread_mutex_destroy(&w->lock);
	free(w);
}

/* The book (links.h). */
struct kept_set {
	struct bpf_program *prog;
	char *path;
	uint64_t *offsets, *cookies;
	size_t n;
	bool ret;
	bool multi; /* linked as one uprobe_multi link (else one uprobe: n == 1) */
	unsigned rank; /* ptwk_uprobe_set's */
};

struct pid_links {
	pid_t pid;
	uint64_t since; /* its fork (a pid comes back: ptwk_book_link_pid) */
	bool own;	/* the target's: its links are not the book's */
	int *fds;
	size_t nfds;
	struct bpf_link **links;
	size_t nlinks;
};

/* Links of ended processes are closed this many at a time, in the
 * background (each close waits for the kernel's grace periods: closer.h). */
#define BOOK_CLOSE_BATCH 64
/* and the batches closing at once, at most (the oldest is waited for: by
 * then long done) */
#define BOOK_CLOSING_MAX 8

struct ptwk_book {
	pthread_mutex_t lock;
	struct kept_set *sets;
	size_t nsets;
	struct pid_links *pids;
	size_t npids;
	/* ended processes' links, not yet closing */
	int *dead_fds;
	size_t ndead_fds;
	struct bpf_link **dead_links;
	size_t ndead_links;
	struct ptwk_closing **closing;
	size_t nclosing;
};

struct ptwk_book *ptwk_book_new(void)
{
	struct ptwk_book *b = xcalloc(1, sizeof(*b));
	pthread_mutex_init(&b->lock, NULL);
	return b;
}

static struct pid_links *pid_find(struct ptwk_book *b, pid_t pid)
{
	for (size_t i = 0; i < b->npids; i++)
		if (b->pids[i].pid == pid)
			return &b->pids[i];
	return NULL;
}

static struct pid_links *pid_add(struct ptwk_book *b, pid_t pid)
{
	struct pid_links *p = pid_find(b, pid);
	if (p)
		return p;
	b->pids = xreallocarray(b->pids, b->npids + 1, sizeof(*b->pids));
	p = &b->pids[b->npids++];
	*p = (struct pid_links){ .pid = pid };
	return p;
}

/* Links set k for p (the book's lock held). */
static int link_kept(const struct kept_set *k, struct pid_links *p)
{
	struct ptwk_uprobe_set s = { .prog = k->prog,
				     .path = k->path,
				     .offsets = k->offsets,
				     .cookies = k->cookies,
				     .n = k->n,
				     .ret = k->ret,
				     .pid = p->pid };
	if (k->multi) {
		int fd = ptwk_link_multi(&s);
		if (fd < 0)
			return fd;
		p->fds = xreallocarray(p->fds, p->nfds + 1, sizeof(*p->fds));
		p->fds[p->nfds++] = fd;
	} else {
		struct bpf_link *l = ptwk_link_one(&s, 0);
		if (!l)
			return -errno;
		p->links = xreallocarray(p->links, p->nlinks + 1, sizeof(*p->links));
		p->links[p->nlinks++] = l;
	}
	return 0;
}

/* A set s linked (its offsets from..from+n, one multi link or one
 * uprobe): kept, named, and linked for every other process with links. */
static void keep(const struct ptwk_uprobe_set *s, size_t from, size_t n, bool multi)
{
	struct ptwk_book *b = s->book;
	pthread_mutex_lock(&b->lock);
	struct kept_set k = { .prog = s->prog,
			      .path = xstrdup(s->path),
			      .offsets = xcalloc(n, sizeof(uint64_t)),
			      .cookies = xcalloc(n, sizeof(uint64_t)),
			      .n = n,
			      .ret = s->ret,
			      .multi = multi,
			      .rank = s->rank };
	for (size_t i = 0; i < n; i++) {
		k.offsets[i] = s->offsets[from + i];
		k.cookies[i] = s->cookies ? s->cookies[from + i] : 0;
	}
	b->sets = xreallocarray(b->sets, b->nsets + 1, sizeof(*b->sets));
	b->sets[b->nsets++] = k;
	for (size_t i = 0; i < b->npids; i++) {
		if (b->pids[i].pid == s->pid)
			continue;
		int r = link_kept(&k, &b->pids[i]);
		if (r < 0)
			ptw_dbg(PTW_DBG_TRACER, "no link for %d on %s: %s", (int)b->pids[i].pid,
				k.path, strerror(-r));
	}
	pthread_mutex_unlock(&b->lock);
}

/* The dead links, closing in the background (the lock held). */
static void close_dead(struct ptwk_book *b)
{
	if (!b->ndead_fds && !b->ndead_links)
		return;
	struct ptwk_closing *c =
		ptwk_close_start(b->dead_fds, b->ndead_fds, b->dead_links, b->ndead_links);
	b->dead_fds = NULL;
	b->dead_links = NULL;
	b->ndead_fds = b->ndead_links = 0;
	if (c) {
		b->closing = xreallocarray(b->closing, b->nclosing + 1, sizeof(*b->closing));
		b->closing[b->nclosing++] = c;
	}
}

/* p's links to the dead, closed in batches (the lock held). */
static void retire(struct ptwk_book *b, struct pid_links *p)
{
	b->dead_fds = xreallocarray(b->dead_fds, b->ndead_fds + p->nfds + 1, sizeof(int));
	memcpy(b->dead_fds + b->ndead_fds, p->fds, p->nfds * sizeof(int));
	b->ndead_fds += p->nfds;
	b->dead_links = xreallocarray(b->dead_links, b->ndead_links + p->nlinks + 1,
				      sizeof(*b->dead_links));
	memcpy(b->dead_links + b->ndead_links, p->links, p->nlinks * sizeof(*b->dead_links));
	b->ndead_links += p->nlinks;
	free(p->fds);
	free(p->links);
	*p = b->pids[--b->npids];
	if (b->ndead_fds + b->ndead_links >= BOOK_CLOSE_BATCH)
		close_dead(b);
}

int ptwk_book_link_pid(struct ptwk_book *b, pid_t pid, uint64_t since)
{
	pthread_mutex_lock(&b->lock);
	int r = 0;
	struct pid_links *old = pid_find(b, pid);
	if (old && !old->own && old->since != since) /* (its pid came back before
						      * the old one's end was read) */
		retire(b, old), old = NULL;
	if (!old) {
		struct pid_links *p = pid_add(b, pid);
		p->since = since;
		for (unsigned rank = 0; rank <= PTWK_RANK_LAST; rank++)
			for (size_t i = 0; i < b->nsets; i++) {
				if (b->sets[i].rank != rank)
					continue;
				int e = link_kept(&b->sets[i], p);
				if (e < 0)
					ptw_dbg(PTW_DBG_TRACER, "%d: %s (%zu probes): %s", (int)pid,
						b->sets[i].path, b->sets[i].n, strerror(-e));
				if (e < 0 && r == 0)
					r = e;
			}
	}
	pthread_mutex_unlock(&b->lock);
	return r;
}

void ptwk_book_own(struct ptwk_book *b, pid_t pid)
{
	pthread_mutex_lock(&b->lock);
	pid_add(b, pid)->own = true;
	pthread_mutex_unlock(&b->lock);
}

void ptwk_book_forget(struct ptwk_book *b, pid_t pid, uint64_t since)
{
	struct ptwk_closing *oldest = NULL;
	pthread_mutex_lock(&b->lock);
	struct pid_links *p = pid_find(b, pid);
	if (p && !p->own && p->since == since)
		retire(b, p);
	if (b->nclosing > BOOK_CLOSING_MAX) { /* (a long session: its threads joined) */
		oldest = b->closing[0];
		memmove(b->closing, b->closing + 1, --b->nclosing * sizeof(*b->closing));
	}
	pthread_mutex_unlock(&b->lock);
	ptwk_close_wait(oldest); /* (the lock free: the drain thread links on meanwhile) */
}

void ptwk_book_take(struct ptwk_book *b, int **fds, size_t *nfds, struct bpf_link ***links,
		    size_t *nlinks)
{
	if (!b)
		return;
	pthread_mutex_lock(&b->lock);
	for (size_t i = 0; i < b->npids; i++) {
		struct pid_links *p = &b->pids[i];
		*fds = xreallocarray(*fds, *nfds + p->nfds + 1, sizeof(int));
		memcpy(*fds + *nfds, p->fds, p->nfds * sizeof(int));
		*nfds += p->nfds;
		*links = xreallocarray(*links, *nlinks + p->nlinks + 1, sizeof(**links));
		memcpy(*links + *nlinks, p->links, p->nlinks * sizeof(**links));
		*nlinks += p->nlinks;
		free(p->fds);
		free(p->links);
		p->fds = NULL;
		p->links = NULL;
		p->nfds = p->nlinks = 0;
	}
	*fds = xreallocarray(*fds, *nfds + b->ndead_fds + 1, sizeof(int));
	memcpy(*fds + *nfds, b->dead_fds, b->ndead_fds * sizeof(int));
	*nfds += b->ndead_fds;
	*links = xreallocarray(*links, *nlinks + b->ndead_links + 1, sizeof(**links));
	memcpy(*links + *nlinks, b->dead_links, b->ndead_links * sizeof(**links));
	*nlinks += b->ndead_links;
	b->ndead_fds = b->ndead_links = 0;
	struct ptwk_closing **closing = b->closing;
	size_t nclosing = b->nclosing;
	b->closing = NULL;
	b->nclosing = 0;
	pthread_mutex_unlock(&b->lock);
	for (size_t i = 0; i < nclosing; i++)
		ptwk_close_wait(closing[i]);
	free(closing);
}

void ptwk_book_free(struct ptwk_book *b)
{
	if (!b)
		return;
	int *fds = NULL;
	struct bpf_link **links = NULL;
	size_t nfds = 0, nlinks = 0;
	ptwk_book_take(b, &fds, &nfds, &links, &nlinks);
	ptwk_close_together(fds, nfds, links, nlinks);
	free(fds);
	free(links);
	for (size_t i = 0; i < b->nsets; i++) {
		free(b->sets[i].path);
		free(b->sets[i].offsets);
		free(b->sets[i].cookies);
	}
	free(b->sets);
	free(b->pids);
	free(b->dead_fds);
	free(b->dead_links);
	pthread_mutex_destroy(&b->lock);
	free(b);
}
