/* SPDX-License-Identifier: MIT */
/*
 * The build-id cache; see ptw_cache.h. The file is text, so that a person
 * can read it:
 *
 *   ptwatch-cache 2
 *   build-id 3e4f...
 *   size 14480
 *   variant debug
 *   records 2 length 57 checksum 0123456789abcdef
 *   sym:main<TAB>1<TAB>1139<TAB>2a<TAB>
 *   member:pthread.result<TAB>1<TAB>628<TAB>0<TAB>
 *
 * length is the byte count of the records that follow, checksum their
 * FNV-1a 64 hash: a truncated or edited file fails one or the other.
 */
#define _GNU_SOURCE
#include "ptw_cache.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "ptw_util.h"

#define MAX_FILE (16u << 20) /* larger is not ours */
#define MAX_LINE 4096

struct record {
	char *key;
	bool found;
	uint64_t a, b;
	char *text;
	bool loaded; /* read from the file, not learnt in this session */
	size_t next; /* index + 1 of the next record with the same hash, 0 = none */
};

struct ptw_cache {
	char *dir, *path;
	char hex[129];
	uint64_t size; /* of the module's file */
	char variant[64];
	struct record *recs;
	size_t n, cap;
	struct ptw_map index; /* ptw_str_hash(key) -> (void *)(index + 1) of the chain head */
	bool dirty;
	bool cleared; /* since the last save: the file's records are stale too */
};

char *ptw_cache_default_dir(void)
{
	const char *xdg = getenv("XDG_CACHE_HOME");
	if (xdg && xdg[0] == '/')
		return xasprintf("%s/ptwatch", xdg);
	const char *home = getenv("HOME");
	if (home && home[0] == '/')
		return xasprintf("%s/.cache/ptwatch", home);
	return NULL;
}

static bool clean(const char *s)
{
	return s && !strpbrk(s, "\t\n");
}

static struct record *find(const struct ptw_cache *c, const char *key)
{
	for (size_t i = (size_t)(uintptr_t)ptw_map_get(&c->index, ptw_str_hash(key)); i;
	     i = c->recs[i - 1].next)
		if (!strcmp(c->recs[i - 1].key, key))
			return &c->recs[i - 1];
	return NULL;
}

/* Adds or replaces; returns whether anything changed. */
static bool put(struct ptw_cache *c, const char *key, bool found, uint64_t a, uint64_t b,
		const char *text)
{
	if (text && !*text)
		text = NULL;
	struct record *r = find(c, key);
	if (r) {
		bool same = r->found == found && r->a == a && r->b == b &&
			    (r->text && text ? !strcmp(r->text, text) : r->text == text);
		if (same)
			return false;
		free(r->text);
	} else {
		if (c->n == c->cap) {
			c->cap = c->cap ? c->cap * 2 : 32;
			c->recs = xreallocarray(c->recs, c->cap, sizeof(*c->recs));
		}
		r = &c->recs[c->n++];
		uint64_t h = ptw_str_hash(key);
		r->key = xstrdup(key);
		r->next = (size_t)(uintptr_t)ptw_map_get(&c->index, h);
		ptw_map_put(&c->index, h, (void *)(uintptr_t)c->n);
	}
	r->found = found;
	r->a = a;
	r->b = b;
	r->text = text ? xstrdup(text) : NULL;
	r->loaded = false;
	return true;
}

static void clear(struct ptw_cache *c)
{
	for (size_t i = 0; i < c->n; i++) {
		free(c->recs[i].key);
		free(c->recs[i].text);
	}
	free(c->recs);
	c->recs = NULL;
	c->n = c->cap = 0;
	ptw_map_free(&c->index);
}

static uint64_t fnv1a(const char *p, size_t len)
{
	uint64_t h = 0xcbf29ce484222325ull;
	for (size_t i = 0; i < len; i++)
		h = (h ^ (unsigned char)p[i]) * 0x100000001b3ull;
	return h;
}

static int read_file(const char *path, char **ret, size_t *ret_len)
{
	int fd = ptw_open_regular(path);
	if (fd < 0)
		return fd;
	struct stat st;
	if (fstat(fd, &st) < 0 || st.st_size > (off_t)MAX_FILE) {
		close(fd);
		return -EINVAL;
	}
	size_t size = (size_t)st.st_size, len = 0;
	char *buf = xmalloc(size + 1);
	while (len < size) {
		ssize_t n = read(fd, buf + len, size - len);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			break;
		len += (size_t)n;
	}
	close(fd);
	buf[len] = '\0';
	*ret = buf;
	*ret_len = len;
	return 0;
}

/* One header line "NAME VALUE\n" at *p; the value copied into out. */
static bool header(char **p, const char *end, const char *name, char *out, size_t size)
{
	char *nl = memchr(*p, '\n', (size_t)(end - *p));
	size_t nlen = strlen(name);
	if (!nl || (size_t)(nl - *p) <= nlen + 1 || strncmp(*p, name, nlen) || (*p)[nlen] != ' ')
		return false;
	size_t vlen = (size_t)(nl - (*p + nlen + 1));
	if (vlen >= size)
		return false;
	memcpy(out, *p + nlen + 1, vlen);
	out[vlen] = '\0';
	*p = nl + 1;
	return true;
}

/* Parses a whole file into c; false (c left empty) unless every check passes. */
static bool parse(struct ptw_cache *c, char *buf, size_t len)
{
	char *p = buf, *end = buf + len;
	char version[16], hex[sizeof(c->hex)], size[32], variant[sizeof(c->variant)], counts[128];
	if (!header(&p, end, "ptwatch-cache", version, sizeof(version)) ||
	    !header(&p, end, "build-id", hex, sizeof(hex)) ||
	    !header(&p, end, "size", size, sizeof(size)) ||
	    !header(&p, end, "variant", variant, sizeof(variant)) ||
	    !header(&p, end, "records", counts, sizeof(counts)))
		return false;
	char want_size[32];
	snprintf(want_size, sizeof(want_size), "%" PRIu64, c->size);
	char *vend;
	unsigned long v = strtoul(version, &vend, 10);
	if (*vend || v != PTW_CACHE_VERSION || strcmp(hex, c->hex) || strcmp(size, want_size) ||
	    strcmp(variant, c->variant[0] ? c->variant : "-"))
		return false;
	unsigned long long nrec, blen;
	uint64_t sum;
	int used = 0;
	if (sscanf(counts, "%llu length %llu checksum %16" SCNx64 "%n", &nrec, &blen, &sum, &used) != 3 ||
	    counts[used] || blen != (unsigned long long)(end - p) || fnv1a(p, (size_t)blen) != sum)
		return false;
	unsigned long long got = 0;
	while (p < end) {
		char *nl = memchr(p, '\n', (size_t)(end - p));
		if (!nl || nl - p >= MAX_LINE)
			goto bad;
		*nl = '\0';
		char *f[5];
		int nf = 0;
		for (char *s = p; nf < 5; nf++) {
			f[nf] = s;
			char *tab = strchr(s, '\t');
			if (!tab) {
				nf++;
				break;
			}
			*tab = '\0';
			s = tab + 1;
		}
		if (nf != 5 || !f[0][0] || (strcmp(f[1], "0") && strcmp(f[1], "1")))
			goto bad;
		char *e1, *e2;
		errno = 0;
		uint64_t a = strtoull(f[2], &e1, 16), b = strtoull(f[3], &e2, 16);
		if (errno || *e1 || *e2 || !f[2][0] || !f[3][0])
			goto bad;
		put(c, f[0], f[1][0] == '1', a, b, f[4]);
		struct record *r = find(c, f[0]);
		if (r)
			r->loaded = true;
		got++;
		p = nl + 1;
	}
	if (got != nrec)
		goto bad;
	return true;
bad:
	clear(c);
	return false;
}

/* Reads c->path into c; the state it found. */
static enum ptw_cache_state load(struct ptw_cache *c)
{
	char *buf = NULL;
	size_t len = 0;
	int r = read_file(c->path, &buf, &len);
	if (r == -ENOENT || r == -ENOTDIR)
		return PTW_CACHE_MISSING;
	if (r < 0)
		return PTW_CACHE_INVALID;
	bool ok = parse(c, buf, len);
	free(buf);
	return ok ? PTW_CACHE_LOADED : PTW_CACHE_INVALID;
}

int ptw_cache_open(const char *dir, const uint8_t *build_id, size_t len, uint64_t size,
		   const char *variant, struct ptw_cache **ret, enum ptw_cache_state *ret_state)
{
	if (!dir || !*dir || !build_id || len == 0 || len > 64 ||
	    (variant && (strlen(variant) >= sizeof(((struct ptw_cache *)0)->variant) ||
			 strpbrk(variant, "/ \t\n"))))
		return -EINVAL;
	struct ptw_cache *c = xcalloc(1, sizeof(*c));
	for (size_t i = 0; i < len; i++)
		snprintf(c->hex + 2 * i, 3, "%02x", build_id[i]);
	if (variant)
		snprintf(c->variant, sizeof(c->variant), "%s", variant);
	c->size = size;
	c->dir = xstrdup(dir);
	c->path = c->variant[0] ? xasprintf("%s/%s-%s", dir, c->hex, c->variant)
				: xasprintf("%s/%s", dir, c->hex);
	enum ptw_cache_state state = load(c);
	c->dirty = state == PTW_CACHE_INVALID; /* replace it at the next save */
	*ret = c;
	if (ret_state)
		*ret_state = state;
	return 0;
}

void ptw_cache_free(struct ptw_cache *c)
{
	if (!c)
		return;
	clear(c);
	free(c->dir);
	free(c->path);
	free(c);
}

int ptw_cache_get(const struct ptw_cache *c, const char *key, struct ptw_cache_value *ret)
{
	const struct record *r = find(c, key);
	if (!r)
		return -ENOENT;
	ret->found = r->found;
	ret->a = r->a;
	ret->b = r->b;
	ret->text = r->text;
	ret->loaded = r->loaded;
	return 0;
}

void ptw_cache_put(struct ptw_cache *c, const char *key, const struct ptw_cache_value *v)
{
	if (!*key || !clean(key) || (v->text && !clean(v->text)) || strlen(key) > MAX_LINE / 2 ||
	    (v->text && strlen(v->text) > MAX_LINE / 2))
		return;
	if (put(c, key, v->found, v->a, v->b, v->text))
		c->dirty = true;
}

void ptw_cache_clear(struct ptw_cache *c)
{
	if (c->n)
		c->dirty = c->cleared = true;
	clear(c);
}

size_t ptw_cache_count(const struct ptw_cache *c)
{
	return c->n;
}

const char *ptw_cache_path(const struct ptw_cache *c)
{
	return c->path;
}


static int make_dir(const char *dir)
{
	if (mkdir(dir, 0700) == 0 || errno == EEXIST)
		return 0;
	if (errno != ENOENT)
		return -errno;
	/* $HOME/.cache itself may be missing: one level up, then again. */
	char *parent = xstrdup(dir);
	char *slash = strrchr(parent, '/');
	int r = -ENOENT;
	if (slash && slash != parent) {
		*slash = '\0';
		r = make_dir(parent);
	}
	free(parent);
	if (r == 0 && mkdir(dir, 0700) < 0 && errno != EEXIST)
		r = -errno;
	return r;
}

int ptw_cache_save(struct ptw_cache *c)
{
	if (!c->dirty)
		return 0;
	/* Another process may have saved records we do not have: keep them
	 * (a file that fails validation contributes nothing). Not after a
	 * clear: the records on disk are the stale ones (merged back, they
	 * would undo it: answers learned before debuginfod delivered a debug
	 * file, kept after). */
	struct ptw_cache *disk = xcalloc(1, sizeof(*disk));
	memcpy(disk->hex, c->hex, sizeof(c->hex));
	disk->size = c->size;
	memcpy(disk->variant, c->variant, sizeof(c->variant));
	disk->path = c->path;
	if (!c->cleared && load(disk) == PTW_CACHE_LOADED)
		for (size_t i = 0; i < disk->n; i++) {
			const struct record *r = &disk->recs[i];
			if (!find(c, r->key))
				put(c, r->key, r->found, r->a, r->b, r->text);
		}
	disk->path = NULL;
	ptw_cache_free(disk);

	struct ptw_buf body = { 0 }, file = { 0 };
	for (size_t i = 0; i < c->n; i++) {
		const struct record *r = &c->recs[i];
		ptw_buf_printf(&body, "%s\t%d\t%" PRIx64 "\t%" PRIx64 "\t%s\n", r->key, r->found, r->a,
			       r->b, r->text ? r->text : "");
	}
	ptw_buf_printf(&file,
		       "ptwatch-cache %d\nbuild-id %s\nsize %" PRIu64 "\nvariant %s\nrecords %zu length "
		       "%zu checksum %016" PRIx64 "\n",
		       PTW_CACHE_VERSION, c->hex, c->size, c->variant[0] ? c->variant : "-", c->n, body.len,
		       fnv1a(body.p ? body.p : "", body.len));
	if (body.len)
		ptw_buf_add(&file, body.p, body.len);
	ptw_buf_free(&body);

	int r = make_dir(c->dir);
	char *tmp = xasprintf("%s.tmp.XXXXXX", c->path);
	int fd = r < 0 ? -1 : mkostemp(tmp, O_CLOEXEC);
	if (r == 0 && fd < 0)
		r = -errno;
	if (fd >= 0) {
		r = fchmod(fd, 0644) < 0 ? -errno : 0;
		if (r == 0)
			r = ptw_write_all(fd, file.p, file.len);
		if (close(fd) < 0 && r == 0)
			r = -errno;
		if (r == 0 && rename(tmp, c->path) < 0)
			r = -errno;
		if (r < 0)
			unlink(tmp);
	}
	free(tmp);
	ptw_buf_free(&file);
	if (r == 0)
		c->dirty = c->cleared = false;
	return r;
}
