/* SPDX-License-Identifier: MIT */
/*
 * The kernel path's probes for a static program about to be launched
 * (ptwk_find_probes_file, probes.h), found in its file alone, no process
 * and no BPF: the probe points (a thread's end at start_thread's call of
 * __nptl_deallocate_tsd, __call_tls_dtors not being linked in; no warning
 * for what the program does not link), each one's offset where the file's
 * program headers put it, struct pthread's layout from the libthread_db descriptors in the
 * program's own symbol table; a copy whose descriptor was bent gets no
 * arg offset (never ptwatch's libc's); the stripped copy is refused with
 * the reason. Usage: test_kstatic FIXTURE-STATIC FIXTURE-STATIC-STRIPPED
 */
#define _GNU_SOURCE
#include <elf.h>
#include <errno.h>
#include <fcntl.h>
#include <gnu/libc-version.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "check.h"
#include "probes.h"
#include "ptw_symbols.h"

/* The file offset of vaddr by the program headers, read here apart from
 * the symbols layer; UINT64_MAX if no PT_LOAD holds it. */
static uint64_t offset_of(const char *path, uint64_t vaddr)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	Elf64_Ehdr eh;
	uint64_t off = UINT64_MAX;
	if (fd < 0 || pread(fd, &eh, sizeof(eh), 0) != (ssize_t)sizeof(eh)) {
		if (fd >= 0)
			close(fd);
		return off;
	}
	for (unsigned i = 0; i < eh.e_phnum; i++) {
		Elf64_Phdr ph;
		if (pread(fd, &ph, sizeof(ph), (off_t)(eh.e_phoff + i * sizeof(ph))) ==
			    (ssize_t)sizeof(ph) &&
		    ph.p_type == PT_LOAD && vaddr >= ph.p_vaddr && vaddr - ph.p_vaddr < ph.p_filesz)
			off = vaddr - ph.p_vaddr + ph.p_offset;
	}
	close(fd);
	return off;
}

static const struct ptwk_probe *probe_of(const struct ptwk_probes *p, enum ptwk_kind kind)
{
	for (size_t i = 0; i < p->n; i++)
		if (p->p[i].kind == kind)
			return &p->p[i];
	return NULL;
}

static void test_static(const char *exe)
{
	struct ptw_symbols *s;
	struct ptwk_probes p;
	char why[256] = "";
	CHECK_EQ(ptw_symbols_new_file(exe, false, NULL, &s), 0);
	int r = ptwk_find_probes_file(s, exe, false, &p, why, sizeof(why));
	CHECK_EQ(r, 0);
	if (r < 0) {
		fprintf(stderr, "why: %s\n", why);
		ptw_symbols_free(s);
		return;
	}
	CHECK(p.in_exe);
	CHECK_STR(p.path, exe);
	static const struct {
		enum ptwk_kind kind;
		const char *function;
	} want[] = {
		{ PTWK_CREATE_CALL, "pthread_create" },
		{ PTWK_START, "start_thread" },
		{ PTWK_DEATH, "__nptl_deallocate_tsd" },
		{ PTWK_EXIT_CALL, "__pthread_exit" },
		{ PTWK_JOIN, "__pthread_clockjoin_ex" },
		{ PTWK_MAIN, "__libc_start_call_main" },
		{ PTWK_EXIT_FN, "exit" },
	};
	for (size_t i = 0; i < sizeof(want) / sizeof(want[0]); i++) {
		const struct ptwk_probe *q = probe_of(&p, want[i].kind);
		CHECK(q != NULL);
		if (!q)
			continue;
		CHECK_STR(q->function, want[i].function);
		CHECK(!q->ret);
		CHECK_EQ(q->offset, offset_of(exe, q->addr));
	}
	/* the thread's end: start_thread's call of __nptl_deallocate_tsd (a
	 * call rel32, which the kernel emulates), not its first instruction */
	const struct ptwk_probe *death = probe_of(&p, PTWK_DEATH),
				*start = probe_of(&p, PTWK_START);
	uint64_t tsd = 0;
	uint8_t call[5] = { 0 };
	int fd = open(exe, O_RDONLY | O_CLOEXEC);
	CHECK_EQ(ptw_symbols_lookup(s, PTW_MOD_EXE, "__nptl_deallocate_tsd", &tsd, NULL), 0);
	CHECK(death && start && death->addr > start->addr && death->addr < start->addr + 4096);
	if (death && fd >= 0)
		CHECK_EQ(pread(fd, call, sizeof(call), (off_t)death->offset), sizeof(call));
	if (fd >= 0)
		close(fd);
	int32_t rel;
	memcpy(&rel, call + 1, sizeof(rel));
	CHECK_EQ(call[0], 0xe8);
	CHECK_EQ(death ? death->addr + 5 + (uint64_t)(int64_t)rel : 0, tsd);
	const struct ptwk_probe *ret = probe_of(&p, PTWK_JOIN_RET);
	CHECK(ret && ret->ret);
	/* static.c neither detaches nor links pthread_detach: no warning */
	CHECK(!probe_of(&p, PTWK_DETACH));
	CHECK_EQ(p.nmissing, 0);
	for (size_t i = 0; i < p.nmissing; i++)
		fprintf(stderr, "missing: %s\n", p.missing[i]);
	CHECK(p.main_addr != 0);

	/* struct pthread's layout, from the program's own descriptors */
	const struct ptw_pthread_layout *l = &p.layout;
	CHECK(l->have_result && l->have_joinid && l->have_arg && l->have_start_routine &&
	      l->have_cancelhandling && l->have_tid);
	CHECK_EQ(l->arg, l->start_routine + 8);
	CHECK_EQ(l->result, l->joinid + 8);
	if (!strcmp(gnu_get_libc_version(), "2.36")) { /* layout.h: libc6-dbg's DWARF */
		CHECK_EQ(l->joinid, 1568);
		CHECK_EQ(l->result, 1576);
		CHECK_EQ(l->start_routine, 1592);
		CHECK_EQ(l->arg, 1600);
	}
	ptw_symbols_free(s);
}

/* A copy whose eventbuf descriptor says 24 bytes after start_routine (not
 * 16): arg cannot be derived, and is not taken from anywhere else. */
static void test_bent(const char *exe)
{
	char copy[] = "/tmp/ptw-kstatic-XXXXXX";
	int fd = mkstemp(copy);
	CHECK(fd >= 0);
	if (fd < 0)
		return;
	int in = open(exe, O_RDONLY | O_CLOEXEC);
	char buf[65536];
	ssize_t n;
	while (in >= 0 && (n = read(in, buf, sizeof(buf))) > 0)
		CHECK_EQ(write(fd, buf, (size_t)n), n);
	if (in >= 0)
		close(in);
	struct ptw_symbols *s;
	uint64_t sr, eb, sr_off, eb_off;
	uint32_t v[3];
	CHECK_EQ(ptw_symbols_new_file(exe, false, NULL, &s), 0);
	CHECK_EQ(ptw_symbols_lookup(s, PTW_MOD_EXE, "_thread_db_pthread_start_routine", &sr, NULL),
		 0);
	CHECK_EQ(ptw_symbols_lookup(s, PTW_MOD_EXE, "_thread_db_pthread_eventbuf", &eb, NULL), 0);
	CHECK_EQ(ptw_symbols_file_offset(s, sr, &sr_off), 0);
	CHECK_EQ(ptw_symbols_file_offset(s, eb, &eb_off), 0);
	ptw_symbols_free(s);
	CHECK_EQ(pread(fd, v, sizeof(v), (off_t)sr_off), sizeof(v));
	v[2] += 24;
	CHECK_EQ(pwrite(fd, &v[2], sizeof(v[2]), (off_t)eb_off + 8), sizeof(v[2]));
	close(fd);

	struct ptwk_probes p;
	char why[256] = "";
	CHECK_EQ(ptw_symbols_new_file(copy, false, NULL, &s), 0);
	CHECK_EQ(ptwk_find_probes_file(s, copy, false, &p, why, sizeof(why)), 0);
	CHECK(!p.layout.have_arg);
	CHECK(p.layout.have_result); /* (its neighbours are not the bent one) */
	CHECK(strstr(p.layout.underived, "eventbuf") != NULL);
	fprintf(stderr, "bent: %s\n", p.layout.underived);
	ptw_symbols_free(s);
	unlink(copy);
}

static void test_stripped(const char *exe)
{
	struct ptw_symbols *s;
	struct ptwk_probes p;
	char why[256] = "";
	CHECK_EQ(ptw_symbols_new_file(exe, false, NULL, &s), 0);
	CHECK_EQ(ptwk_find_probes_file(s, exe, false, &p, why, sizeof(why)), -ENOENT);
	CHECK(!p.in_exe);
	CHECK(strstr(why, "pthread_create") && strstr(why, "stripped"));
	fprintf(stderr, "stripped: %s\n", why);
	ptw_symbols_free(s);
}

int main(int argc, char **argv)
{
	if (argc != 3) {
		fprintf(stderr, "usage: test_kstatic FIXTURE-STATIC FIXTURE-STATIC-STRIPPED\n");
		return 2;
	}
	test_static(argv[1]);
	test_bent(argv[1]);
	test_stripped(argv[2]);
	CHECK_DONE();
}
