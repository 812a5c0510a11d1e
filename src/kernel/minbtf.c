/* SPDX-License-Identifier: MIT */
/* The build-time minimal BTF; see minbtf.h. */
#define _GNU_SOURCE
#include "minbtf.h"

#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

/* scripts/min-btf.py's output (empty where it could not be made). */
extern const unsigned char ptwk_min_btf[], ptwk_min_btf_build_id[];
extern const size_t ptwk_min_btf_len, ptwk_min_btf_build_id_len;

#define NT_GNU_BUILD_ID_TYPE 3

static uint32_t u32_at(const unsigned char *p)
{
	uint32_t v;
	memcpy(&v, p, sizeof(v));
	return v;
}

bool ptwk_notes_have_build_id(const void *notes, size_t len, const unsigned char *id, size_t idlen)
{
	const unsigned char *p = notes;
	size_t off = 0;
	if (!idlen)
		return false;
	/* Each note: namesz, descsz, type (32 bits each), then the name and
	 * the descriptor, each padded to 4 bytes. */
	while (len - off >= 12) {
		uint64_t namesz = u32_at(p + off), descsz = u32_at(p + off + 4);
		uint32_t type = u32_at(p + off + 8);
		uint64_t name_at = off + 12, desc_at = name_at + ((namesz + 3) & ~3ull);
		uint64_t end = desc_at + ((descsz + 3) & ~3ull);
		if (end > len)
			return false;
		if (type == NT_GNU_BUILD_ID_TYPE && namesz == 4 && !memcmp(p + name_at, "GNU", 4))
			return descsz == idlen && !memcmp(p + desc_at, id, idlen);
		off = (size_t)end;
	}
	return false;
}

int ptwk_min_btf_open(char *path, size_t size, const char **why)
{
	if (!ptwk_min_btf_len || !ptwk_min_btf_build_id_len) {
		*why = "none made at build time";
		return -1;
	}
	unsigned char notes[4096];
	int fd = open("/sys/kernel/notes", O_RDONLY | O_CLOEXEC);
	if (fd < 0) {
		*why = "cannot read /sys/kernel/notes";
		return -1;
	}
	ssize_t n = read(fd, notes, sizeof(notes));
	close(fd);
	if (n <= 0 || !ptwk_notes_have_build_id(notes, (size_t)n, ptwk_min_btf_build_id,
						ptwk_min_btf_build_id_len)) {
		*why = "made for another kernel (build id)";
		return -1;
	}
	fd = memfd_create("ptwatch-min-btf", MFD_CLOEXEC);
	if (fd < 0) {
		*why = "memfd_create failed";
		return -1;
	}
	size_t done = 0;
	while (done < ptwk_min_btf_len) {
		ssize_t w = write(fd, ptwk_min_btf + done, ptwk_min_btf_len - done);
		if (w < 0 && errno == EINTR)
			continue;
		if (w <= 0) {
			close(fd);
			*why = "cannot write the memory file";
			return -1;
		}
		done += (size_t)w;
	}
	snprintf(path, size, "/proc/self/fd/%d", fd);
	return fd;
}
