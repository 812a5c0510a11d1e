/* SPDX-License-Identifier: MIT */
/*
 * ld.so's module list as the BPF walk sends it (src/kernel/modules.c) on
 * synthetic records: a whole walk (the program first whatever its name,
 * the vdso left out, a relative name kept), and walks thrown away whole:
 * a record lost or out of order, an end that counts otherwise or did not
 * reach the list's end, a name unread or cut, a record too short, a walk
 * that never ended before the next, an end of no walk, more entries than
 * the walk may send. Then the symbols layer's check of a list
 * (ptw_symbols_new_listed): this very program at its real bias taken, a
 * wrong bias, a misplaced dynamic section, a FIFO (not opened to block), a
 * device, a missing file left out. And an exec's command line from its
 * record (ptwk_args_parse).
 */
#define _GNU_SOURCE
#include <elf.h>
#include <errno.h>
#include <fcntl.h>
#include <link.h>
#include <stdlib.h>
#include <string.h>
#include <sys/auxv.h>
#include <sys/stat.h>
#include <unistd.h>

#include "check.h"
#include "modules.h"
#include "ptw_kernel_records.h"
#include "ptw_symbols.h"
#include "ptw_util.h"

#define PID 100

static struct ptwk_module_record rec(uint64_t walk, uint64_t index, const char *path, uint64_t bias,
				     uint64_t dyn)
{
	struct ptwk_module_record m;
	memset(&m, 0, sizeof(m));
	m.r.kind = PTWK_MODULE;
	m.r.tid = m.r.tgid = PID;
	m.r.ns = walk;
	m.r.a = bias;
	m.r.b = dyn;
	m.r.c = index;
	m.r.d = 0x7f0000000000ull + index * 0x400;
	m.r.e = walk;
	if (path) {
		strncpy(m.path, path, sizeof(m.path) - 1);
		m.r.f = PTWK_F_READ;
	}
	return m;
}

static struct ptwk_record end(uint64_t walk, uint64_t sent, bool whole)
{
	struct ptwk_record r;
	memset(&r, 0, sizeof(r));
	r.kind = PTWK_MODULES_END;
	r.tid = r.tgid = PID;
	r.ns = r.e = walk;
	r.a = sent;
	r.b = 0x7f00000ff000ull;
	r.f = whole ? PTWK_F_MODULES_WHOLE : 0;
	return r;
}

static int feed_m(struct ptwk_modlist *l, struct ptwk_module_record m)
{
	return ptwk_modlist_feed(l, &m, sizeof(m));
}

static int feed_e(struct ptwk_modlist *l, struct ptwk_record r)
{
	return ptwk_modlist_feed(l, &r, sizeof(r));
}

/* exe, vdso, libc, ld.so: the list of a launched program. */
static int walk4(struct ptwk_modlist *l, uint64_t walk)
{
	CHECK_EQ(feed_m(l, rec(walk, 0, "", 0x555500000000ull, 0x555500003de0ull)),
		 PTWK_MODLIST_MORE);
	CHECK_EQ(feed_m(l, rec(walk, 1, "linux-vdso.so.1", 0x7ffd0000000ull, 0x7ffd00003a0ull)),
		 PTWK_MODLIST_MORE);
	CHECK_EQ(feed_m(l, rec(walk, 2, "/lib/x86_64-linux-gnu/libc.so.6", 0x7f0000000000ull,
			       0x7f00001f0bc0ull)),
		 PTWK_MODLIST_MORE);
	CHECK_EQ(feed_m(l, rec(walk, 3, "/lib64/ld-linux-x86-64.so.2", 0x7f0000200000ull,
			       0x7f0000236e68ull)),
		 PTWK_MODLIST_MORE);
	return feed_e(l, end(walk, 4, true));
}

static void test_whole(void)
{
	struct ptwk_modlist l = { 0 };
	CHECK_EQ(walk4(&l, 1000), PTWK_MODLIST_DONE);
	CHECK_EQ(l.n, 3); /* the vdso names no file */
	CHECK(l.v[0].is_exe);
	CHECK_STR(l.v[0].path, "");
	CHECK_EQ(l.v[0].bias, 0x555500000000ull);
	CHECK_EQ(l.v[0].dynamic, 0x555500003de0ull);
	CHECK(!l.v[1].is_exe);
	CHECK_STR(l.v[1].path, "/lib/x86_64-linux-gnu/libc.so.6");
	CHECK_EQ(l.v[1].bias, 0x7f0000000000ull);
	CHECK_STR(l.v[2].path, "/lib64/ld-linux-x86-64.so.2");
	CHECK_EQ(l.lists, 1);
	CHECK_EQ(l.bad_lists, 0);
	/* a dlopen: the next walk replaces it; a relative name kept */
	CHECK_EQ(feed_m(&l, rec(2000, 0, "", 0x555500000000ull, 0x555500003de0ull)),
		 PTWK_MODLIST_MORE);
	CHECK_EQ(feed_m(&l, rec(2000, 1, "lib/libdl-mod.so", 0x7f1000000000ull, 0)),
		 PTWK_MODLIST_MORE);
	CHECK_EQ(feed_e(&l, end(2000, 2, true)), PTWK_MODLIST_DONE);
	CHECK_EQ(l.n, 2);
	CHECK_STR(l.v[1].path, "lib/libdl-mod.so");
	/* ld.so run as a program: the program's entry has its name */
	CHECK_EQ(feed_m(&l, rec(3000, 0, "./prog", 0x555500000000ull, 0)), PTWK_MODLIST_MORE);
	CHECK_EQ(feed_e(&l, end(3000, 1, true)), PTWK_MODLIST_DONE);
	CHECK(l.n == 1 && l.v[0].is_exe);
	CHECK_STR(l.v[0].path, "./prog");
	CHECK_EQ(l.lists, 3);
	ptwk_modlist_free(&l);
}

static void test_thrown(void)
{
	struct ptwk_modlist l = { 0 };
	/* a record lost: index 1 never came */
	CHECK_EQ(feed_m(&l, rec(10, 0, "", 0, 0)), PTWK_MODLIST_MORE);
	CHECK_EQ(feed_m(&l, rec(10, 2, "/lib/a.so", 0x7f0000000000ull, 0)), PTWK_MODLIST_BAD);
	CHECK_EQ(feed_e(&l, end(10, 3, true)), PTWK_MODLIST_BAD);
	CHECK_EQ(l.bad_lists, 1);
	CHECK_EQ(l.n, 0);
	/* then a whole one is taken */
	CHECK_EQ(walk4(&l, 11), PTWK_MODLIST_DONE);
	CHECK_EQ(l.n, 3);

	/* an end that counts more than came (records lost at its end) */
	CHECK_EQ(feed_m(&l, rec(20, 0, "", 0, 0)), PTWK_MODLIST_MORE);
	CHECK_EQ(feed_e(&l, end(20, 2, true)), PTWK_MODLIST_BAD);
	CHECK_EQ(l.n, 0); /* a list thrown away is not the last one either */
	/* an end that did not reach the list's end (a read failed, a loop) */
	CHECK_EQ(feed_m(&l, rec(21, 0, "", 0, 0)), PTWK_MODLIST_MORE);
	CHECK_EQ(feed_e(&l, end(21, 1, false)), PTWK_MODLIST_BAD);
	/* a name unread */
	CHECK_EQ(feed_m(&l, rec(22, 0, "", 0, 0)), PTWK_MODLIST_MORE);
	CHECK_EQ(feed_m(&l, rec(22, 1, NULL, 0x7f0000000000ull, 0)), PTWK_MODLIST_BAD);
	CHECK_EQ(feed_e(&l, end(22, 2, true)), PTWK_MODLIST_BAD);
	/* a name that fills the field without its NUL (hostile, or cut) */
	struct ptwk_module_record m = rec(23, 0, "", 0, 0);
	CHECK_EQ(feed_m(&l, m), PTWK_MODLIST_MORE);
	m = rec(23, 1, "/x", 0x7f0000000000ull, 0);
	memset(m.path, 'a', sizeof(m.path));
	m.path[0] = '/';
	CHECK_EQ(feed_m(&l, m), PTWK_MODLIST_BAD);
	CHECK_EQ(feed_e(&l, end(23, 2, true)), PTWK_MODLIST_BAD);
	/* a record too short to be one */
	m = rec(24, 0, "", 0, 0);
	CHECK_EQ(ptwk_modlist_feed(&l, &m, sizeof(m) - 1), PTWK_MODLIST_BAD);
	CHECK_EQ(ptwk_modlist_feed(&l, &m, 4), PTWK_MODLIST_BAD);
	CHECK_EQ(ptwk_modlist_feed(&l, NULL, 0), PTWK_MODLIST_BAD);
	/* a walk that never ended, then another: the first thrown away */
	uint64_t before = l.bad_lists;
	CHECK_EQ(feed_m(&l, rec(25, 0, "", 0, 0)), PTWK_MODLIST_MORE);
	CHECK_EQ(feed_m(&l, rec(25, 1, "/lib/a.so", 0x7f0000000000ull, 0)), PTWK_MODLIST_MORE);
	CHECK_EQ(walk4(&l, 26), PTWK_MODLIST_DONE);
	CHECK_EQ(l.bad_lists, before + 1);
	CHECK_EQ(l.n, 3);
	/* an end of no walk (r_debug unreadable), of another walk */
	CHECK_EQ(feed_e(&l, end(27, 0, false)), PTWK_MODLIST_BAD);
	CHECK_EQ(feed_m(&l, rec(28, 0, "", 0, 0)), PTWK_MODLIST_MORE);
	CHECK_EQ(feed_e(&l, end(29, 1, true)), PTWK_MODLIST_BAD);
	/* a walk of 0 records is no list */
	CHECK_EQ(feed_e(&l, end(30, 0, true)), PTWK_MODLIST_BAD);
	/* not a module record at all */
	struct ptwk_record other = end(31, 0, true);
	other.kind = PTWK_START;
	CHECK_EQ(feed_e(&l, other), PTWK_MODLIST_BAD);
	/* more entries than a walk sends (a looping list, forged records) */
	for (uint64_t i = 0; i < PTWK_MAX_MODULES; i++)
		CHECK_EQ(feed_m(&l, rec(32, i, i ? "/lib/a.so" : "", 0x7f0000000000ull, 0)),
			 PTWK_MODLIST_MORE);
	CHECK_EQ(feed_m(&l, rec(32, PTWK_MAX_MODULES, "/lib/a.so", 0, 0)), PTWK_MODLIST_BAD);
	CHECK_EQ(feed_e(&l, end(32, PTWK_MAX_MODULES + 1, true)), PTWK_MODLIST_BAD);
	/* walk id 0 is no walk */
	CHECK_EQ(feed_m(&l, rec(0, 0, "", 0, 0)), PTWK_MODLIST_BAD);
	ptwk_modlist_free(&l);
}

/* This program's own load bias and dynamic section, as ld.so lists it. */
static void own(struct ptw_module_spec *m, char *path, size_t size)
{
	ssize_t n = readlink("/proc/self/exe", path, size - 1);
	path[n > 0 ? n : 0] = '\0';
	const ElfW(Phdr) *ph = (const ElfW(Phdr) *)getauxval(AT_PHDR);
	size_t phnum = getauxval(AT_PHNUM);
	uint64_t bias = 0, dyn = 0;
	for (size_t i = 0; i < phnum; i++)
		if (ph[i].p_type == PT_PHDR)
			bias = (uint64_t)(uintptr_t)ph - ph[i].p_vaddr;
	for (size_t i = 0; i < phnum; i++)
		if (ph[i].p_type == PT_DYNAMIC)
			dyn = bias + ph[i].p_vaddr;
	*m = (struct ptw_module_spec){ .path = path, .bias = bias, .dynamic = dyn, .is_exe = true };
}

static int own_read(void *ctx, uint64_t addr, void *buf, size_t len)
{
	(void)ctx;
	memcpy(buf, (const void *)(uintptr_t)addr, len);
	return 0;
}

static size_t listed(const struct ptw_module_spec *m, size_t n)
{
	struct ptw_symbols *s = NULL;
	if (ptw_symbols_new_listed(getpid(), m, n, false, NULL, own_read, NULL, &s) < 0)
		return (size_t)-1;
	size_t r = ptw_symbols_module_count(s);
	ptw_symbols_free(s);
	return r;
}

static void test_symbols(void)
{
	char path[4096], fifo[64];
	struct ptw_module_spec m;
	own(&m, path, sizeof(path));
	CHECK(m.bias != 0 && m.dynamic != 0); /* (built PIE) */
	CHECK_EQ(listed(&m, 1), 1);
	struct ptw_symbols *s = NULL;
	CHECK_EQ(ptw_symbols_new_listed(getpid(), &m, 1, false, NULL, own_read, NULL, &s), 0);
	if (s) {
		const struct ptw_location *l =
			ptw_symbols_locate(s, (uint64_t)(uintptr_t)test_symbols);
		CHECK_STR(l->symbol, "test_symbols");
		CHECK_STR(ptw_symbols_exe(s), path);
		/* the file's bytes, not the process's (the same here) */
		uint8_t file[16];
		CHECK_EQ(ptw_symbols_read_file(s, (uint64_t)(uintptr_t)test_symbols, file, 16), 0);
		CHECK(!memcmp(file, (const void *)(uintptr_t)test_symbols, 16));
		CHECK_EQ(ptw_symbols_read_file(s, 0x1000, file, 16), -ENOENT);
		/* a dlopen: the list replaced in place */
		struct ptw_module_spec none = { .path = "/nonexistent/lib.so",
						.bias = 0x7f0000000000ull };
		struct ptw_module_spec two[2] = { m, none };
		CHECK_EQ(ptw_symbols_set_listed(s, two, 2), 1);
		ptw_symbols_free(s);
	}
	/* a bias that is not this file's: its dynamic section is elsewhere */
	struct ptw_module_spec bad = m;
	bad.bias += 0x10000;
	CHECK_EQ(listed(&bad, 1), 0);
	/* ... unless the entry does not say where (l_ld 0): then taken */
	bad.dynamic = 0;
	CHECK_EQ(listed(&bad, 1), 1);
	/* a bias not page-aligned, one past user space */
	bad = m;
	bad.bias += 8;
	bad.dynamic += 8;
	CHECK_EQ(listed(&bad, 1), 0);
	bad = m;
	bad.bias = 0xffff800000000000ull;
	bad.dynamic = 0;
	CHECK_EQ(listed(&bad, 1), 0);
	/* a FIFO: not opened to block, not read */
	snprintf(fifo, sizeof(fifo), "/tmp/ptw-kmodules-%d", (int)getpid());
	CHECK_EQ(mkfifo(fifo, 0600), 0);
	struct ptw_module_spec hostile[] = {
		{ .path = fifo, .bias = 0x7f0000000000ull },
		{ .path = "/dev/zero", .bias = 0x7f0000100000ull },
		{ .path = "/nonexistent/lib.so", .bias = 0x7f0000200000ull },
		{ .path = "/proc/self/status", .bias = 0x7f0000300000ull },
		m,
	};
	CHECK_EQ(listed(hostile, PTW_ARRAY_SIZE(hostile)), 1);
	unlink(fifo);
	/* nothing at all: an empty list, no failure */
	CHECK_EQ(listed(NULL, 0), 0);
}

static struct ptwk_args_record args(const char *bytes, size_t len, uint64_t whole, bool read)
{
	struct ptwk_args_record x;
	memset(&x, 0, sizeof(x));
	x.r.kind = PTWK_EXEC_ARGS;
	memcpy(x.args, bytes, len);
	x.r.a = read ? len : 0;
	x.r.b = whole;
	x.r.f = read ? PTWK_F_READ : 0;
	return x;
}

static void test_args(void)
{
	struct ptwk_args_record x = args("sh\0-c\0\0echo hi\0", 15, 15, true);
	char **argv = ptwk_args_parse(&x);
	CHECK(argv != NULL);
	if (argv) {
		CHECK_STR(argv[0], "sh");
		CHECK_STR(argv[1], "-c");
		CHECK_STR(argv[2], "");
		CHECK_STR(argv[3], "echo hi");
		CHECK(argv[4] == NULL);
		ptw_argv_free(argv);
	}
	/* a program that rewrote its arguments: no NUL at the end */
	x = args("abc\0de", 6, 6, true);
	argv = ptwk_args_parse(&x);
	CHECK(argv && argv[0] && argv[1] && !argv[2]);
	if (argv) {
		CHECK_STR(argv[1], "de");
		ptw_argv_free(argv);
	}
	/* cut (longer than a record), unread, empty, a length past the record */
	x = args("abc\0", 4, 5000, true);
	CHECK(ptwk_args_parse(&x) == NULL);
	x = args("abc\0", 4, 4, false);
	CHECK(ptwk_args_parse(&x) == NULL);
	x = args("", 0, 0, true);
	CHECK(ptwk_args_parse(&x) == NULL);
	x = args("abc\0", 4, 4, true);
	x.r.a = x.r.b = PTWK_ARGS_LEN + 1;
	CHECK(ptwk_args_parse(&x) == NULL);
	/* exactly full, without a NUL: every byte used, none read past */
	memset(x.args, 'x', sizeof(x.args));
	x.r.a = x.r.b = PTWK_ARGS_LEN;
	argv = ptwk_args_parse(&x);
	CHECK(argv && argv[0] && strlen(argv[0]) == PTWK_ARGS_LEN && !argv[1]);
	ptw_argv_free(argv);
}

int main(void)
{
	test_args();
	test_whole();
	test_thrown();
	test_symbols();
	CHECK_DONE();
}
