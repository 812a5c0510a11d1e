/* SPDX-License-Identifier: MIT */
/*
 * The minimal BTF made at build time (src/kernel/minbtf.h).
 *   test_kminbtf notes   the build-id match on synthetic ELF notes (pure)
 *   test_kminbtf load    where the kernel path can run and the embedded
 *                        BTF was made for this kernel: the programs loaded
 *                        with it and with the kernel's whole BTF get the
 *                        very same instructions after CO-RE (77 otherwise)
 */
#include <linux/bpf.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <bpf/libbpf.h>

#include "check.h"
#include "minbtf.h"
#include "ptw_kernel.h"
#include "ptw_kernel.skel.h"

static size_t note(unsigned char *p, uint32_t type, const char *name, uint32_t namesz,
		   const unsigned char *desc, uint32_t descsz)
{
	uint32_t h[3] = { namesz, descsz, type };
	size_t off = 0;
	memcpy(p, h, sizeof(h));
	off += sizeof(h);
	memset(p + off, 0, ((namesz + 3) & ~3u) + ((descsz + 3) & ~3u));
	memcpy(p + off, name, namesz);
	off += (namesz + 3) & ~3u;
	memcpy(p + off, desc, descsz);
	return off + ((descsz + 3) & ~3u);
}

static void test_notes(void)
{
	static const unsigned char id[20] = { 0x4a, 0x5a, 0x9b, 0x0a, 0xff, 0xb6, 0x6c,
					      0x43, 0x7a, 0xbc, 0xd4, 0x55, 0xd2, 0x73,
					      0x8a, 0xf8, 0x79, 0x98, 0x5f, 0xa9 };
	unsigned char other[20], notes[256];
	memcpy(other, id, sizeof(id));
	other[19] ^= 1;
	/* the kernel's: a "Linux" note, then the build id */
	size_t n = note(notes, 0x101, "Linux", 6, (const unsigned char *)"\1\0\0\0", 4);
	size_t at_gnu = n;
	n += note(notes + n, 3, "GNU", 4, id, sizeof(id));
	CHECK(ptwk_notes_have_build_id(notes, n, id, sizeof(id)));
	CHECK(!ptwk_notes_have_build_id(notes, n, other, sizeof(other)));
	CHECK(!ptwk_notes_have_build_id(notes, n, id, 19)); /* a prefix is not the id */
	CHECK(!ptwk_notes_have_build_id(notes, n, id, 0));
	/* cut short: the note does not fit */
	CHECK(!ptwk_notes_have_build_id(notes, n - 4, id, sizeof(id)));
	CHECK(!ptwk_notes_have_build_id(notes, at_gnu + 8, id, sizeof(id)));
	CHECK(!ptwk_notes_have_build_id(notes, 0, id, sizeof(id)));
	/* "GNU" but another type: not a build id */
	n = note(notes, 1, "GNU", 4, id, sizeof(id));
	CHECK(!ptwk_notes_have_build_id(notes, n, id, sizeof(id)));
	/* a size that would run past the end (hostile sizes) */
	n = note(notes, 3, "GNU", 4, id, sizeof(id));
	uint32_t huge = 0xfffffff0u;
	memcpy(notes + 4, &huge, sizeof(huge));
	CHECK(!ptwk_notes_have_build_id(notes, n, id, sizeof(id)));
	memcpy(notes, &huge, sizeof(huge));
	CHECK(!ptwk_notes_have_build_id(notes, n, id, sizeof(id)));
}

static int test_load(void)
{
	char why[256], path[64];
	const char *why_not;
	if (ptw_kernel_available(why, sizeof(why)) < 0) {
		printf("SKIP: %s\n", why);
		return 77;
	}
	int fd = ptwk_min_btf_open(path, sizeof(path), &why_not);
	if (fd < 0) {
		printf("SKIP: no minimal BTF for this kernel: %s\n", why_not);
		return 77;
	}
	LIBBPF_OPTS(bpf_object_open_opts, oo, .btf_custom_path = path);
	struct ptw_kernel_bpf *min = ptw_kernel_bpf__open_opts(&oo), *full = ptw_kernel_bpf__open();
	CHECK(min && full);
	if (!min || !full)
		return 1;
	CHECK_EQ(ptw_kernel_bpf__load(min), 0);
	CHECK_EQ(ptw_kernel_bpf__load(full), 0);
	close(fd);
	struct bpf_program *pm;
	size_t nprogs = 0;
	bpf_object__for_each_program(pm, min->obj)
	{
		struct bpf_program *pf =
			bpf_object__find_program_by_name(full->obj, bpf_program__name(pm));
		CHECK(pf);
		if (!pf)
			continue;
		nprogs++;
		size_t n = bpf_program__insn_cnt(pm);
		CHECK_EQ(n, bpf_program__insn_cnt(pf));
		const struct bpf_insn *a = bpf_program__insns(pm), *b = bpf_program__insns(pf);
		size_t differ = 0;
		for (size_t i = 0; i < n && n == bpf_program__insn_cnt(pf); i++) {
			/* (a map's reference is its descriptor: not the same maps) */
			if (a[i].code == (BPF_LD | BPF_IMM | BPF_DW) && a[i].src_reg)
				continue;
			differ += memcmp(&a[i], &b[i], sizeof(a[i])) != 0;
		}
		if (differ)
			fprintf(stderr, "%s: %zu instructions differ\n", bpf_program__name(pm),
				differ);
		CHECK_EQ(differ, 0);
	}
	CHECK(nprogs >= 5);
	ptw_kernel_bpf__destroy(min);
	ptw_kernel_bpf__destroy(full);
	return check_failures ? 1 : 0;
}

int main(int argc, char **argv)
{
	if (argc > 1 && !strcmp(argv[1], "load"))
		return test_load();
	test_notes();
	CHECK_DONE();
}
