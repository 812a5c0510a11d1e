/* SPDX-License-Identifier: MIT */
/* /proc/PID/maps, parsed. */
#define _GNU_SOURCE
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ptw_util.h"

int ptw_maps_read(pid_t pid, struct ptw_mapping **ret)
{
	char path[64];
	snprintf(path, sizeof(path), "/proc/%d/maps", pid);
	FILE *f = fopen(path, "re");
	if (!f)
		return -errno;
	struct ptw_mapping *maps = NULL;
	int n = 0, cap = 0;
	char *line = NULL;
	size_t linecap = 0;
	while (getline(&line, &linecap, f) > 0) {
		struct ptw_mapping m;
		memset(&m, 0, sizeof(m));
		int pathpos = 0;
		if (sscanf(line, "%" SCNx64 "-%" SCNx64 " %4s %" SCNx64 " %x:%x %" SCNu64 " %n", &m.start,
			   &m.end, m.perms, &m.offset, &m.dev_major, &m.dev_minor, &m.inode,
			   &pathpos) < 7)
			continue;
		if (pathpos > 0) {
			const char *p = line + pathpos;
			size_t len = strcspn(p, "\n");
			if (len >= sizeof(m.path))
				len = sizeof(m.path) - 1;
			memcpy(m.path, p, len);
			m.path[len] = '\0';
		}
		if (n == cap) {
			cap = cap ? cap * 2 : 64;
			maps = xreallocarray(maps, (size_t)cap, sizeof(*maps));
		}
		maps[n++] = m;
	}
	free(line);
	fclose(f);
	*ret = maps;
	return n;
}

const struct ptw_mapping *ptw_maps_find(const struct ptw_mapping *maps, int n, uint64_t addr)
{
	int lo = 0, hi = n - 1;
	while (lo <= hi) {
		int mid = (lo + hi) / 2;
		if (addr < maps[mid].start)
			hi = mid - 1;
		else if (addr >= maps[mid].end)
			lo = mid + 1;
		else
			return &maps[mid];
	}
	return NULL;
}
