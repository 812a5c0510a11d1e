/* SPDX-License-Identifier: MIT */
/*
 * A process's memory for everyone above: process_vm_readv, a page cache
 * invalidated at every resume, views of a followed process (the same
 * memory, another pid), /proc/PID/mem where that fails.
 */
#define _GNU_SOURCE
#include "attach_int.h"

static void (*mem_fd_hook)(int fd);

void ptw_set_mem_fd_hook(void (*hook)(int fd))
{
	mem_fd_hook = hook;
}

void att_reopen_mem(struct ptw_proc *p)
{
	char path[64];
	snprintf(path, sizeof(path), "/proc/%d/mem", p->mem_pid);
	int fd = open(path, O_RDWR | O_CLOEXEC);
	if (fd < 0)
		return;
	if (p->mem_fd >= 0) {
		dup3(fd, p->mem_fd, O_CLOEXEC);
		close(fd);
	} else {
		p->mem_fd = fd;
	}
	if (mem_fd_hook)
		mem_fd_hook(p->mem_fd);
}

/* ---- memory ---- */

#define CACHE_PAGE  4096u
#define CACHE_PAGES 16

struct ptw_mem_cache {
	struct {
		uint64_t addr, gen;
		bool valid;
		uint8_t data[CACHE_PAGE];
	} page[CACHE_PAGES];
	unsigned next; /* round robin */
};

static int mem_read_direct(struct ptw_proc *p, uint64_t addr, void *buf, size_t len);

/* The page at addr (aligned) as seen since the last reaped stop, or NULL. */
static const uint8_t *cached_page(struct ptw_proc *p, uint64_t page)
{
	if (!p->cache)
		p->cache = xcalloc(1, sizeof(*p->cache));
	struct ptw_mem_cache *c = p->cache;
	uint64_t gen = ptw_proc_root(p)->counts.total;
	for (unsigned i = 0; i < CACHE_PAGES; i++)
		if (c->page[i].valid && c->page[i].addr == page && c->page[i].gen == gen)
			return c->page[i].data;
	unsigned k = c->next++ % CACHE_PAGES;
	if (mem_read_direct(p, page, c->page[k].data, CACHE_PAGE) < 0) {
		c->page[k].valid = false;
		return NULL;
	}
	c->page[k].addr = page;
	c->page[k].gen = gen;
	c->page[k].valid = true;
	return c->page[k].data;
}

/* Our own writes must show in the snapshot. */
static void cache_update(struct ptw_proc *p, uint64_t addr, const void *buf, size_t len)
{
	if (!p->cache)
		return;
	for (unsigned i = 0; i < CACHE_PAGES; i++) {
		uint64_t a = p->cache->page[i].addr;
		if (!p->cache->page[i].valid || addr >= a + CACHE_PAGE || addr + len <= a)
			continue;
		uint64_t from = addr > a ? addr : a;
		uint64_t to = addr + len < a + CACHE_PAGE ? addr + len : a + CACHE_PAGE;
		memcpy(p->cache->page[i].data + (from - a), (const uint8_t *)buf + (from - addr),
		       to - from);
	}
}

void ptw_mem_invalidate(struct ptw_proc *p)
{
	if (p->cache)
		for (unsigned i = 0; i < CACHE_PAGES; i++)
			p->cache->page[i].valid = false;
}

int ptw_mem_read(struct ptw_proc *p, uint64_t addr, void *buf, size_t len)
{
	uint8_t *out = buf;
	while (len) {
		uint64_t page = addr & ~(uint64_t)(CACHE_PAGE - 1);
		size_t n = CACHE_PAGE - (addr - page);
		if (n > len)
			n = len;
		const uint8_t *data = len <= 2 * CACHE_PAGE ? cached_page(p, page) : NULL;
		if (!data)
			return mem_read_direct(p, addr, out, len);
		memcpy(out, data + (addr - page), n);
		out += n;
		addr += n;
		len -= n;
	}
	return 0;
}

int ptw_mem_reader(void *ctx, uint64_t addr, void *buf, size_t len)
{
	return ptw_mem_read(ctx, addr, buf, len);
}

static int mem_read_direct(struct ptw_proc *p, uint64_t addr, void *buf, size_t len)
{
	struct iovec local = { buf, len }, remote = { (void *)(uintptr_t)addr, len };
	ssize_t n = process_vm_readv(p->mem_pid, &local, 1, &remote, 1, 0);
	if (n == (ssize_t)len)
		return 0;
	if (n < 0 && errno == ESRCH && att_repick_mem_pid(p))
		n = process_vm_readv(p->mem_pid, &local, 1, &remote, 1, 0);
	if (n == (ssize_t)len)
		return 0;
	if (p->mem_fd >= 0) {
		n = pread(p->mem_fd, buf, len, (off_t)addr);
		if (n == (ssize_t)len)
			return 0;
	}
	return n < 0 ? -errno : -EIO;
}

size_t ptw_mem_read_many(struct ptw_proc *p, struct ptw_mem_piece *pieces, size_t n)
{
	enum { BATCH = 1024 }; /* IOV_MAX */
	struct iovec local[BATCH], remote[BATCH];
	size_t done = 0, i = 0;
	while (i < n) {
		size_t k = 0, want = 0;
		for (; k < BATCH && i + k < n; k++) {
			struct ptw_mem_piece *pc = &pieces[i + k];
			local[k] = (struct iovec){ pc->buf, pc->len };
			remote[k] = (struct iovec){ (void *)(uintptr_t)pc->addr, pc->len };
			want += pc->len;
		}
		ssize_t got = process_vm_readv(p->mem_pid, local, k, remote, k, 0);
		if (got == (ssize_t)want) {
			for (size_t j = 0; j < k; j++)
				pieces[i + j].ok = true;
			done += k;
			i += k;
			continue;
		}
		/* A partial transfer stops at the piece that failed (or was cut
		 * short): those before it are whole; that one is read alone. */
		size_t whole = 0, sum = 0;
		while (got > 0 && whole < k && sum + pieces[i + whole].len <= (size_t)got)
			sum += pieces[i + whole++].len;
		for (size_t j = 0; j < whole; j++)
			pieces[i + j].ok = true;
		done += whole;
		i += whole;
		if (i < n) {
			pieces[i].ok = mem_read_direct(p, pieces[i].addr, pieces[i].buf,
						       pieces[i].len) == 0;
			done += pieces[i].ok;
			i++;
		}
	}
	return done;
}

int ptw_mem_poke_pid(pid_t pid, int mem_fd, uint64_t addr, const void *buf, size_t len)
{
	int fd = mem_fd, r = 0;
	if (fd < 0) {
		char path[64];
		snprintf(path, sizeof(path), "/proc/%d/mem", pid);
		fd = open(path, O_RDWR | O_CLOEXEC);
		if (fd < 0)
			return -errno;
	}
	ssize_t n = pwrite(fd, buf, len, (off_t)addr);
	if (n != (ssize_t)len)
		r = n < 0 ? -errno : -EIO;
	if (fd != mem_fd)
		close(fd);
	return r;
}

int ptw_mem_write(struct ptw_proc *p, uint64_t addr, const void *buf, size_t len)
{
	cache_update(p, addr, buf, len);
	struct iovec local = { (void *)buf, len }, remote = { (void *)(uintptr_t)addr, len };
	ssize_t n = process_vm_writev(p->mem_pid, &local, 1, &remote, 1, 0);
	if (n == (ssize_t)len)
		return 0;
	/* Read-only mappings (text): /proc/PID/mem writes with FOLL_FORCE. */
	return ptw_mem_poke_pid(p->mem_pid, p->mem_fd, addr, buf, len);
}

int ptw_mem_write_scattered(struct ptw_proc *p, const uint64_t *addrs, size_t n, const void *buf,
			    size_t len)
{
	enum { BATCH = 1024 }; /* IOV_MAX */
	struct iovec remote[BATCH];
	for (size_t i = 0; i < n; i += BATCH) {
		size_t k = n - i < BATCH ? n - i : BATCH;
		struct iovec *local = xcalloc(k, sizeof(*local));
		for (size_t j = 0; j < k; j++) {
			local[j] = (struct iovec){ (void *)buf, len };
			remote[j] = (struct iovec){ (void *)(uintptr_t)addrs[i + j], len };
			cache_update(p, addrs[i + j], buf, len);
		}
		ssize_t w = process_vm_writev(p->mem_pid, local, k, remote, k, 0);
		free(local);
		if (w != (ssize_t)(k * len)) {
			/* Partial: finish one by one (a thread may be gone). */
			for (size_t j = 0; j < k; j++)
				ptw_mem_write(p, addrs[i + j], buf, len);
		}
	}
	return 0;
}

int ptw_mem_poke(struct ptw_proc *p, uint64_t addr, const void *buf, size_t len)
{
	cache_update(p, addr, buf, len);
	return ptw_mem_poke_pid(p->mem_pid, p->mem_fd, addr, buf, len);
}

/* The thread memory goes through died (or is a zombie leader): use another
 * live one of the same process. Returns false if none is left. */
bool att_repick_mem_pid(struct ptw_proc *p)
{
	size_t it = 0;
	void *v;
	while (ptw_map_next(p->lwps, &it, NULL, &v)) {
		struct ptw_lwp *l = v;
		if (l->tgid == p->pid && l->state != PTW_LWP_GONE && !l->exiting &&
		    l->tid != p->mem_pid) {
			p->mem_pid = l->tid;
			att_reopen_mem(p);
			return true;
		}
	}
	/* none of ours (ptw_seize_some left them alone): a live one of its */
	pid_t *tids;
	int n = ptw_proc_tids(p->pid, &tids);
	bool found = false;
	for (int i = 0; i < n && !found; i++) {
		if (tids[i] != p->mem_pid && !ptw_proc_exited(p->pid, tids[i])) {
			p->mem_pid = tids[i];
			att_reopen_mem(p);
			found = true;
		}
	}
	if (n >= 0)
		free(tids);
	return found;
}
