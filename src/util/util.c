/* SPDX-License-Identifier: MIT */
#define _GNU_SOURCE
#include "ptw_util.h"

#include <errno.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

static void __attribute__((noreturn)) out_of_memory(void)
{
	static const char msg[] = "ptwatch: out of memory\n";
	ssize_t r = write(STDERR_FILENO, msg, sizeof(msg) - 1);
	(void)r;
	_exit(99);
}

void *xmalloc(size_t size)
{
	void *p = malloc(size ? size : 1);
	if (!p)
		out_of_memory();
	return p;
}

void *xcalloc(size_t n, size_t size)
{
	void *p = calloc(n ? n : 1, size ? size : 1);
	if (!p)
		out_of_memory();
	return p;
}

void *xreallocarray(void *p, size_t n, size_t size)
{
	void *q = reallocarray(p, n ? n : 1, size ? size : 1);
	if (!q)
		out_of_memory();
	return q;
}

char *xstrdup(const char *s)
{
	char *p = strdup(s);
	if (!p)
		out_of_memory();
	return p;
}

char **ptw_argv_dup(char *const *argv)
{
	size_t n = 0;
	while (argv && argv[n])
		n++;
	char **out = xcalloc(n + 1, sizeof(*out));
	for (size_t i = 0; i < n; i++)
		out[i] = xstrdup(argv[i]);
	return out;
}

void ptw_argv_free(char **argv)
{
	for (char **a = argv; a && *a; a++)
		free(*a);
	free(argv);
}

char *xasprintf(const char *fmt, ...)
{
	va_list ap;
	char *s;
	va_start(ap, fmt);
	int r = vasprintf(&s, fmt, ap);
	va_end(ap);
	if (r < 0)
		out_of_memory();
	return s;
}

uint64_t ptw_now_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

void ptw_sleep_ms(unsigned ms)
{
	struct timespec ts = { .tv_sec = ms / 1000, .tv_nsec = (long)(ms % 1000) * 1000000L };
	while (nanosleep(&ts, &ts) < 0 && errno == EINTR)
		;
}

int64_t ptw_realtime_offset_ns(void)
{
	struct timespec rt, mono;
	clock_gettime(CLOCK_REALTIME, &rt);
	clock_gettime(CLOCK_MONOTONIC, &mono);
	return ((int64_t)rt.tv_sec - (int64_t)mono.tv_sec) * 1000000000 +
	       ((int64_t)rt.tv_nsec - (int64_t)mono.tv_nsec);
}

/* ---- buffer ---- */

void ptw_buf_grow(struct ptw_buf *b, size_t len)
{
	size_t cap = b->cap ? b->cap : 256;
	while (cap < b->len + len + 1)
		cap *= 2;
	b->p = xreallocarray(b->p, cap, 1);
	b->cap = cap;
}

void ptw_buf_puts(struct ptw_buf *b, const char *s)
{
	ptw_buf_add(b, s, strlen(s));
}

void ptw_buf_vprintf(struct ptw_buf *b, const char *fmt, va_list ap)
{
	char small[256];
	va_list ap2;
	va_copy(ap2, ap);
	int n = vsnprintf(small, sizeof(small), fmt, ap);
	if (n < 0) {
		va_end(ap2);
		return;
	}
	if ((size_t)n < sizeof(small)) {
		ptw_buf_add(b, small, (size_t)n);
	} else {
		char *big = xmalloc((size_t)n + 1);
		vsnprintf(big, (size_t)n + 1, fmt, ap2);
		ptw_buf_add(b, big, (size_t)n);
		free(big);
	}
	va_end(ap2);
}

void ptw_buf_printf(struct ptw_buf *b, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	ptw_buf_vprintf(b, fmt, ap);
	va_end(ap);
}

void ptw_buf_reset(struct ptw_buf *b)
{
	b->len = 0;
	if (b->p)
		b->p[0] = '\0';
}

void ptw_buf_free(struct ptw_buf *b)
{
	free(b->p);
	b->p = NULL;
	b->len = b->cap = 0;
}

/* ---- u64 map ---- */

#define MAP_EMPTY 0
#define MAP_DELETED UINT64_MAX

static size_t map_slot(uint64_t key, size_t cap)
{
	/* Fibonacci hashing spreads tids and aligned addresses alike. */
	return (size_t)((key * 0x9E3779B97F4A7C15ull) >> 17) & (cap - 1);
}

static void map_grow(struct ptw_map *m)
{
	size_t ncap = m->cap ? m->cap * 2 : 64;
	if (m->count * 4 < m->cap)
		ncap = m->cap; /* mostly tombstones: rehash in place size */
	uint64_t *okeys = m->keys;
	void **ovals = m->vals;
	size_t ocap = m->cap;
	m->keys = xcalloc(ncap, sizeof(*m->keys));
	m->vals = xcalloc(ncap, sizeof(*m->vals));
	m->cap = ncap;
	m->count = m->used = 0;
	for (size_t i = 0; i < ocap; i++)
		if (okeys[i] != MAP_EMPTY && okeys[i] != MAP_DELETED)
			ptw_map_put(m, okeys[i], ovals[i]);
	free(okeys);
	free(ovals);
}

void *ptw_map_get(const struct ptw_map *m, uint64_t key)
{
	if (!m->cap)
		return NULL;
	for (size_t i = map_slot(key, m->cap);; i = (i + 1) & (m->cap - 1)) {
		if (m->keys[i] == key)
			return m->vals[i];
		if (m->keys[i] == MAP_EMPTY)
			return NULL;
	}
}

void *ptw_map_put(struct ptw_map *m, uint64_t key, void *val)
{
	if ((m->used + 1) * 4 >= m->cap * 3)
		map_grow(m);
	size_t del = SIZE_MAX;
	for (size_t i = map_slot(key, m->cap);; i = (i + 1) & (m->cap - 1)) {
		if (m->keys[i] == key) {
			void *old = m->vals[i];
			m->vals[i] = val;
			return old;
		}
		if (m->keys[i] == MAP_DELETED && del == SIZE_MAX)
			del = i;
		if (m->keys[i] == MAP_EMPTY) {
			if (del != SIZE_MAX)
				i = del;
			else
				m->used++;
			m->keys[i] = key;
			m->vals[i] = val;
			m->count++;
			return NULL;
		}
	}
}

void *ptw_map_del(struct ptw_map *m, uint64_t key)
{
	if (!m->cap)
		return NULL;
	for (size_t i = map_slot(key, m->cap);; i = (i + 1) & (m->cap - 1)) {
		if (m->keys[i] == key) {
			void *old = m->vals[i];
			m->keys[i] = MAP_DELETED;
			m->vals[i] = NULL;
			m->count--;
			return old;
		}
		if (m->keys[i] == MAP_EMPTY)
			return NULL;
	}
}

bool ptw_map_next(const struct ptw_map *m, size_t *it, uint64_t *ret_key, void **ret_val)
{
	for (; *it < m->cap; (*it)++) {
		uint64_t k = m->keys[*it];
		if (k != MAP_EMPTY && k != MAP_DELETED) {
			if (ret_key)
				*ret_key = k;
			if (ret_val)
				*ret_val = m->vals[*it];
			(*it)++;
			return true;
		}
	}
	return false;
}

void ptw_map_free(struct ptw_map *m)
{
	free(m->keys);
	free(m->vals);
	memset(m, 0, sizeof(*m));
}

uint64_t ptw_str_hash(const char *s)
{
	uint64_t h = 0xcbf29ce484222325ull; /* FNV-1a */
	for (; *s; s++)
		h = (h ^ (unsigned char)*s) * 0x100000001b3ull;
	if (h == MAP_EMPTY || h == MAP_DELETED)
		h = 1;
	return h;
}

/* ---- debug log ---- */

unsigned ptw_debug_mask;

static const struct {
	const char *name;
	unsigned bit;
} debug_domains[] = {
	{ "attach", PTW_DBG_ATTACH }, { "tdb", PTW_DBG_TDB },	  { "bp", PTW_DBG_BP },
	{ "sym", PTW_DBG_SYM },	      { "spans", PTW_DBG_SPANS }, { "tracer", PTW_DBG_TRACER },
};

int ptw_debug_parse(const char *spec)
{
	char *copy = xstrdup(spec), *save = NULL;
	int r = 0;
	for (char *tok = strtok_r(copy, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
		if (!strcmp(tok, "all")) {
			ptw_debug_mask = ~0u;
			continue;
		}
		size_t i;
		for (i = 0; i < PTW_ARRAY_SIZE(debug_domains); i++)
			if (!strcmp(tok, debug_domains[i].name))
				break;
		if (i == PTW_ARRAY_SIZE(debug_domains)) {
			r = -EINVAL;
			break;
		}
		ptw_debug_mask |= debug_domains[i].bit;
	}
	free(copy);
	return r;
}

void ptw_debug_print(unsigned domain, const char *fmt, ...)
{
	const char *name = "?";
	for (size_t i = 0; i < PTW_ARRAY_SIZE(debug_domains); i++)
		if (debug_domains[i].bit == domain)
			name = debug_domains[i].name;
	struct ptw_buf b = { 0 };
	ptw_buf_printf(&b, "ptwatch[%s] %.6f: ", name, (double)ptw_now_ns() / 1e9);
	va_list ap;
	va_start(ap, fmt);
	ptw_buf_vprintf(&b, fmt, ap);
	va_end(ap);
	ptw_buf_putc(&b, '\n');
	ssize_t r = write(STDERR_FILENO, b.p, b.len);
	(void)r;
	ptw_buf_free(&b);
}

void ptw_die_of_signal(int sig)
{
	struct rlimit rl = { 0, 0 };
	setrlimit(RLIMIT_CORE, &rl);
	signal(sig, SIG_DFL);
	sigset_t set;
	sigemptyset(&set);
	sigaddset(&set, sig);
	sigprocmask(SIG_UNBLOCK, &set, NULL);
	raise(sig);
	_exit(128 + sig);
}

const char *ptw_signame(int sig)
{
	static __thread char buf[16];
	const char *abbrev = sigabbrev_np(sig);
	if (abbrev) {
		snprintf(buf, sizeof(buf), "SIG%s", abbrev);
		return buf;
	}
	if (sig >= SIGRTMIN && sig <= SIGRTMAX) {
		snprintf(buf, sizeof(buf), "SIGRT%d", sig - SIGRTMIN);
		return buf;
	}
	if (sig >= 32 && sig <= 64) {
		/* glibc-internal real-time signals 32 and 33 sit below SIGRTMIN */
		snprintf(buf, sizeof(buf), "SIG%d", sig);
		return buf;
	}
	snprintf(buf, sizeof(buf), "SIG%d", sig);
	return buf;
}

void ptw_chomp(char *s)
{
	size_t n = strlen(s);
	if (n && s[n - 1] == '\n')
		s[n - 1] = '\0';
}

int ptw_open_regular(const char *path)
{
	/* O_NONBLOCK: an open of a FIFO would wait for a writer; O_NOFOLLOW:
	 * no link to somewhere else. Then only a regular file is kept. */
	int fd = open(path, O_RDONLY | O_NONBLOCK | O_NOFOLLOW | O_NOCTTY | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	struct stat st;
	if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode)) {
		close(fd);
		return -EINVAL;
	}
	fcntl(fd, F_SETFL, 0);
	return fd;
}

int ptw_read_small_file(const char *path, char *buf, size_t size)
{
	return ptw_read_small_file_at(AT_FDCWD, path, buf, size);
}

int ptw_read_small_file_at(int dir_fd, const char *path, char *buf, size_t size)
{
	int fd = openat(dir_fd, path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	ssize_t n = read(fd, buf, size - 1);
	int err = errno;
	close(fd);
	if (n < 0)
		return -err;
	buf[n] = '\0';
	return (int)n;
}

void ptw_set_process_title(char **argv, const char *const *title)
{
	if (title[0])
		prctl(PR_SET_NAME, title[0]);
	if (!argv || !argv[0])
		return;
	/* The argument strings lie end to end: that is the room we have
	 * (what /proc/PID/cmdline shows). */
	char *start = argv[0], *end = argv[0] + strlen(argv[0]) + 1;
	for (int i = 1; argv[i] && argv[i] == end; i++)
		end = argv[i] + strlen(argv[i]) + 1;
	char *p = start;
	for (const char *const *t = title; *t; t++) {
		size_t n = strlen(*t) + 1;
		if (n > (size_t)(end - p)) {
			if (t == title) { /* the name at least, cut */
				memcpy(p, *t, (size_t)(end - p - 1));
				p = end - 1;
			}
			break;
		}
		memcpy(p, *t, n);
		p += n;
	}
	memset(p, 0, (size_t)(end - p));
}

void ptw_stdio_to_null(void)
{
	fflush(NULL);
	int null = open("/dev/null", O_RDWR | O_CLOEXEC);
	if (null < 0)
		return;
	for (int fd = 0; fd <= 2; fd++)
		if (fd != null)
			dup2(null, fd);
	if (null > 2)
		close(null);
}

int ptw_write_all(int fd, const void *buf, size_t len)
{
	const char *p = buf;
	while (len) {
		ssize_t n = write(fd, p, len);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			return n < 0 ? -errno : -EIO;
		p += n;
		len -= (size_t)n;
	}
	return 0;
}

size_t ptw_utf8_sequence(const unsigned char *p, size_t avail)
{
	if (!avail)
		return 0;
	unsigned c = p[0];
	size_t n;
	uint32_t cp;
	if (c < 0x80)
		return 1;
	if (c >= 0xc2 && c <= 0xdf) {
		n = 2;
		cp = c & 0x1f;
	} else if (c >= 0xe0 && c <= 0xef) {
		n = 3;
		cp = c & 0x0f;
	} else if (c >= 0xf0 && c <= 0xf4) {
		n = 4;
		cp = c & 0x07;
	} else {
		return 0;
	}
	if (avail < n)
		return 0;
	for (size_t i = 1; i < n; i++) {
		if ((p[i] & 0xc0) != 0x80)
			return 0; /* before reading on: safe at a NUL */
		cp = (cp << 6) | (p[i] & 0x3f);
	}
	/* overlong, surrogates, past U+10FFFF */
	if ((n == 3 && (cp < 0x800 || (cp >= 0xd800 && cp <= 0xdfff))) ||
	    (n == 4 && (cp < 0x10000 || cp > 0x10ffff)))
		return 0;
	return n;
}

/* ---- escaping for text output ---- */

/* The characters that reorder what a terminal shows after them (bidi
 * embeddings, overrides and isolates, the marks): U+200E, U+200F,
 * U+202A..U+202E, U+2066..U+2069, at a valid 3-byte sequence p. */
static bool bidi_control(const unsigned char *p)
{
	unsigned cp = ((p[0] & 0x0fu) << 12) | ((p[1] & 0x3fu) << 6) | (p[2] & 0x3fu);
	return cp == 0x200e || cp == 0x200f || (cp >= 0x202a && cp <= 0x202e) ||
	       (cp >= 0x2066 && cp <= 0x2069);
}

/* The length of what passes as it is at p (< n bytes), 0 if p[0] must be
 * escaped. */
static size_t plain_run(const unsigned char *p, size_t n)
{
	size_t i = 0;
	while (i < n) {
		unsigned c = p[i];
		if (c >= 0x20 && c < 0x7f && c != '\\') {
			i++;
			continue;
		}
		if (c < 0x80)
			break;
		size_t k = ptw_utf8_sequence(p + i, n - i);
		/* C1 controls (U+0080..U+009F, C2 80..C2 9F): CSI is one */
		if (!k || (c == 0xc2 && p[i + 1] < 0xa0) || (k == 3 && bidi_control(p + i)))
			break;
		i += k;
	}
	return i;
}

void ptw_buf_put_escaped_n(struct ptw_buf *b, const char *str, size_t n)
{
	const unsigned char *s = (const unsigned char *)str;
	while (n) {
		size_t k = plain_run(s, n);
		if (k) {
			ptw_buf_add(b, s, k);
			s += k;
			n -= k;
			continue;
		}
		unsigned c = *s;
		size_t len = ptw_utf8_sequence(s, n);
		if (len < 2)
			len = 1; /* a byte of its own; else all of a C1 or bidi control */
		for (size_t i = 0; i < len; i++) {
			c = s[i];
			if (c == '\\')
				ptw_buf_puts(b, "\\\\");
			else if (c == '\n')
				ptw_buf_puts(b, "\\n");
			else if (c == '\t')
				ptw_buf_puts(b, "\\t");
			else if (c == '\r')
				ptw_buf_puts(b, "\\r");
			else
				ptw_buf_printf(b, "\\x%02x", c);
		}
		s += len;
		n -= len;
	}
}

void ptw_buf_put_escaped(struct ptw_buf *b, const char *s)
{
	ptw_buf_put_escaped_n(b, s, strlen(s));
}

char *ptw_escape_str(const char *s)
{
	if (!s)
		return NULL;
	struct ptw_buf b = { 0 };
	ptw_buf_put_escaped(&b, s);
	return b.p ? b.p : xstrdup("");
}

bool ptw_needs_escape(const char *s)
{
	size_t n = strlen(s);
	return plain_run((const unsigned char *)s, n) != n;
}

int ptw_thread_start(pthread_t *th, size_t stack, void *(*fn)(void *), void *arg)
{
	sigset_t all, old;
	sigfillset(&all);
	pthread_sigmask(SIG_SETMASK, &all, &old);
	pthread_attr_t attr;
	pthread_attr_init(&attr);
	if (stack)
		pthread_attr_setstacksize(&attr, stack);
	int r = pthread_create(th, &attr, fn, arg);
	pthread_attr_destroy(&attr);
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	return r;
}
