/* SPDX-License-Identifier: MIT */
/* The build-id cache: round trip, validation (truncated, edited, foreign,
 * garbage files read as empty and are rewritten), merging saves of two
 * processes, an unwritable directory, the default directory. */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include "check.h"
#include "ptw_cache.h"
#include "ptw_util.h"

static const uint8_t id[20] = { 0xde, 0xad, 0xbe, 0xef, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16 };
static const uint8_t other_id[20] = { 0xca, 0xfe };

static struct ptw_cache *open_cache(const char *dir, const uint8_t *bid, enum ptw_cache_state *st)
{
	struct ptw_cache *c = NULL;
	CHECK_EQ(ptw_cache_open(dir, bid, 20, 14480, "debug", &c, st), 0);
	return c;
}

static void put(struct ptw_cache *c, const char *key, bool found, uint64_t a, uint64_t b, const char *text)
{
	struct ptw_cache_value v = { .found = found, .a = a, .b = b, .text = text };
	ptw_cache_put(c, key, &v);
}

static bool has(struct ptw_cache *c, const char *key, bool found, uint64_t a, uint64_t b, const char *text)
{
	struct ptw_cache_value v;
	if (ptw_cache_get(c, key, &v) < 0 || v.found != found || v.a != a || v.b != b)
		return false;
	return text ? v.text && !strcmp(v.text, text) : !v.text;
}

static char *slurp(const char *path, size_t *len)
{
	int fd = open(path, O_RDONLY);
	char *buf = calloc(1, 65536);
	ssize_t n = fd >= 0 ? read(fd, buf, 65535) : -1;
	if (fd >= 0)
		close(fd);
	*len = n > 0 ? (size_t)n : 0;
	return buf;
}

static void spit(const char *path, const char *buf, size_t len)
{
	int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
	CHECK(fd >= 0);
	CHECK_EQ(write(fd, buf, len), len);
	close(fd);
}

/* Damages the file with edit(), then checks that it reads as empty and
 * that the next save puts a valid one back. */
static void check_rejected(const char *dir, const char *what, void (*edit)(char *buf, size_t *len))
{
	enum ptw_cache_state st;
	struct ptw_cache *c = open_cache(dir, id, &st);
	CHECK_EQ(st, PTW_CACHE_LOADED);
	size_t len;
	char *buf = slurp(ptw_cache_path(c), &len);
	edit(buf, &len);
	spit(ptw_cache_path(c), buf, len);
	free(buf);
	ptw_cache_free(c);

	c = open_cache(dir, id, &st);
	if (st != PTW_CACHE_INVALID || ptw_cache_count(c) != 0)
		fprintf(stderr, "a %s file was trusted\n", what);
	CHECK_EQ(st, PTW_CACHE_INVALID);
	CHECK_EQ(ptw_cache_count(c), 0);
	CHECK_EQ(ptw_cache_save(c), 0); /* rewritten, even with nothing to add */
	put(c, "sym:main", true, 0x1139, 0x2a, NULL);
	put(c, "loc:1139", true, 4, 12, "main");
	CHECK_EQ(ptw_cache_save(c), 0);
	ptw_cache_free(c);
	c = open_cache(dir, id, &st);
	CHECK_EQ(st, PTW_CACHE_LOADED);
	CHECK(has(c, "sym:main", true, 0x1139, 0x2a, NULL));
	ptw_cache_free(c);
}

static void truncate_it(char *buf, size_t *len)
{
	(void)buf;
	*len -= 3;
}

static void flip_body(char *buf, size_t *len)
{
	buf[*len - 4] ^= 0x01; /* inside the last record: the checksum catches it */
}

static void foreign(char *buf, size_t *len)
{
	(void)len;
	char *p = strstr(buf, "deadbeef");
	p[0] = 'f'; /* another module's file under this name */
}

static void newer_version(char *buf, size_t *len)
{
	(void)len;
	buf[strlen("ptwatch-cache ")] = '7';
}

static void garbage(char *buf, size_t *len)
{
	for (size_t i = 0; i < 300; i++)
		buf[i] = (char)(i * 37 + 11);
	*len = 300;
}

static void empty(char *buf, size_t *len)
{
	(void)buf;
	*len = 0;
}

int main(void)
{
	char tmpl[] = "/tmp/ptw_test_cache.XXXXXX";
	char *base = mkdtemp(tmpl);
	CHECK(base != NULL);
	if (!base)
		CHECK_DONE();
	/* A directory that does not exist yet, two levels deep. */
	char *dir = xasprintf("%s/home/.cache/ptwatch", base);

	enum ptw_cache_state st;
	struct ptw_cache *c = open_cache(dir, id, &st);
	CHECK_EQ(st, PTW_CACHE_MISSING);
	CHECK_EQ(ptw_cache_count(c), 0);
	CHECK(ptw_cache_get(c, "sym:main", &(struct ptw_cache_value){ 0 }) == -ENOENT);
	put(c, "sym:main", true, 0x1139, 0x2a, NULL);
	put(c, "sym:nothere", false, 0, 0, NULL);
	put(c, "loc:1139", true, 4, 12, "main");
	put(c, "line:1139", true, 12, 0, "/src/a b/main.c"); /* spaces are fine */
	put(c, "bad\tkey", true, 1, 2, NULL);		      /* ignored */
	put(c, "badtext", true, 1, 2, "a\nb");		      /* ignored */
	put(c, "sym:main", true, 0x1139, 0x2a, NULL);	      /* the same again */
	CHECK_EQ(ptw_cache_count(c), 4);
	CHECK_EQ(ptw_cache_save(c), 0);
	CHECK(strstr(ptw_cache_path(c), "deadbeef01020304") != NULL);
	ptw_cache_free(c);

	c = open_cache(dir, id, &st);
	CHECK_EQ(st, PTW_CACHE_LOADED);
	CHECK_EQ(ptw_cache_count(c), 4);
	CHECK(has(c, "sym:main", true, 0x1139, 0x2a, NULL));
	CHECK(has(c, "sym:nothere", false, 0, 0, NULL));
	CHECK(has(c, "loc:1139", true, 4, 12, "main"));
	CHECK(has(c, "line:1139", true, 12, 0, "/src/a b/main.c"));
	/* Which answers came from the file (they may be wrong; what is put
	 * in this session was learnt from the modules). */
	struct ptw_cache_value v;
	CHECK(ptw_cache_get(c, "sym:main", &v) == 0 && v.loaded);
	put(c, "sym:new", true, 1, 2, NULL);
	CHECK(ptw_cache_get(c, "sym:new", &v) == 0 && !v.loaded);
	put(c, "loc:1139", true, 5, 12, "main"); /* changed: learnt now */
	CHECK(ptw_cache_get(c, "loc:1139", &v) == 0 && !v.loaded);
	put(c, "loc:1139", true, 4, 12, "main");
	ptw_cache_free(c);
	c = open_cache(dir, id, &st);
	/* Nothing changed: no write (the file keeps its inode). */
	struct stat s1, s2;
	CHECK_EQ(stat(ptw_cache_path(c), &s1), 0);
	put(c, "sym:main", true, 0x1139, 0x2a, NULL);
	CHECK_EQ(ptw_cache_save(c), 0);
	CHECK_EQ(stat(ptw_cache_path(c), &s2), 0);
	CHECK_EQ(s1.st_ino, s2.st_ino);
	ptw_cache_free(c);

	/* Another build-id or variant: another file. */
	c = open_cache(dir, other_id, &st);
	CHECK_EQ(st, PTW_CACHE_MISSING);
	ptw_cache_free(c);
	CHECK_EQ(ptw_cache_open(dir, id, 20, 14480, "nodebug", &c, &st), 0);
	CHECK_EQ(st, PTW_CACHE_MISSING);
	ptw_cache_free(c);
	/* The same build-id, another file size (a stripped copy): foreign. */
	CHECK_EQ(ptw_cache_open(dir, id, 20, 9000, "debug", &c, &st), 0);
	CHECK_EQ(st, PTW_CACHE_INVALID);
	CHECK_EQ(ptw_cache_count(c), 0);
	ptw_cache_free(c);

	check_rejected(dir, "truncated", truncate_it);
	check_rejected(dir, "edited", flip_body);
	check_rejected(dir, "foreign", foreign);
	check_rejected(dir, "newer version", newer_version);
	check_rejected(dir, "garbage", garbage);
	check_rejected(dir, "empty", empty);

	/* Two processes with the same module: both saves' records survive. */
	struct ptw_cache *c1 = open_cache(dir, id, &st), *c2 = open_cache(dir, id, &st);
	put(c1, "sym:one", true, 1, 0, NULL);
	put(c2, "sym:two", true, 2, 0, NULL);
	CHECK_EQ(ptw_cache_save(c1), 0);
	CHECK_EQ(ptw_cache_save(c2), 0);
	ptw_cache_free(c1);
	ptw_cache_free(c2);
	c = open_cache(dir, id, &st);
	CHECK_EQ(st, PTW_CACHE_LOADED);
	CHECK(has(c, "sym:one", true, 1, 0, NULL));
	CHECK(has(c, "sym:two", true, 2, 0, NULL));
	CHECK(has(c, "sym:main", true, 0x1139, 0x2a, NULL));
	/* Clearing drops every record, and the save says so: the stale
	 * records on disk are not merged back in. */
	ptw_cache_clear(c);
	CHECK_EQ(ptw_cache_count(c), 0);
	put(c, "sym:fresh", true, 3, 0, NULL);
	CHECK_EQ(ptw_cache_save(c), 0);
	CHECK_EQ(ptw_cache_count(c), 1);
	ptw_cache_free(c);
	c = open_cache(dir, id, &st);
	CHECK_EQ(st, PTW_CACHE_LOADED);
	CHECK_EQ(ptw_cache_count(c), 1);
	CHECK(has(c, "sym:fresh", true, 3, 0, NULL));
	CHECK(ptw_cache_get(c, "sym:one", &(struct ptw_cache_value){ 0 }) == -ENOENT);
	/* After that save, saves merge again. */
	struct ptw_cache *c3 = open_cache(dir, id, &st);
	put(c3, "sym:three", true, 4, 0, NULL);
	CHECK_EQ(ptw_cache_save(c3), 0);
	ptw_cache_free(c3);
	put(c, "sym:four", true, 5, 0, NULL);
	CHECK_EQ(ptw_cache_save(c), 0);
	CHECK(has(c, "sym:three", true, 4, 0, NULL));
	ptw_cache_free(c);

	/* No temp files left behind (the caches never saved made no file). */
	char *cmd = xasprintf("test $(ls -A %s | wc -l) -eq 1", dir);
	CHECK_EQ(system(cmd), 0);
	free(cmd);

	/* An unwritable directory (a path under a regular file): an error
	 * from save, nothing else. */
	char *file = xasprintf("%s/file", base);
	spit(file, "x", 1);
	char *bad = xasprintf("%s/ptwatch", file);
	c = open_cache(bad, id, &st);
	CHECK_EQ(st, PTW_CACHE_MISSING);
	put(c, "sym:main", true, 1, 2, NULL);
	CHECK(ptw_cache_save(c) == -ENOTDIR);
	CHECK(has(c, "sym:main", true, 1, 2, NULL));
	ptw_cache_free(c);

	CHECK(ptw_cache_open(dir, id, 0, 1, NULL, &c, NULL) == -EINVAL);
	CHECK(ptw_cache_open(dir, id, 20, 1, "a/b", &c, NULL) == -EINVAL);

	/* The default directory. */
	setenv("XDG_CACHE_HOME", "/x/cache", 1);
	setenv("HOME", "/home/u", 1);
	char *d = ptw_cache_default_dir();
	CHECK_STR(d, "/x/cache/ptwatch");
	free(d);
	setenv("XDG_CACHE_HOME", "relative", 1);
	d = ptw_cache_default_dir();
	CHECK_STR(d, "/home/u/.cache/ptwatch");
	free(d);
	unsetenv("XDG_CACHE_HOME");
	unsetenv("HOME");
	CHECK(ptw_cache_default_dir() == NULL);

	cmd = xasprintf("rm -rf %s", base);
	CHECK_EQ(system(cmd), 0);
	free(cmd);
	free(file);
	free(bad);
	free(dir);
	CHECK_DONE();
}
