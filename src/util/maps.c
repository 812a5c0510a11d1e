/* SPDX-License-Identifier: MIT */
/* /proc/PID/maps, parsed. */
#define _GNU_SOURCE
#include <errno.h>
#include <inttypes.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ptw_util.h"

/* "START-END PERMS OFFSET MAJ:MIN INODE   PATH": false if malformed. A
 * process with 10,000 threads has 20,000 lines: sscanf was the cost. */
static bool parse_line(const char *line, struct ptw_mapping *m)
{
	char *p;
	memset(m, 0, sizeof(*m));
	m->start = strtoull(line, &p, 16);
	if (*p++ != '-')
		return false;
	m->end = strtoull(p, &p, 16);
	if (*p++ != ' ')
		return false;
	size_t k = 0;
	while (*p && *p != ' ' && k < sizeof(m->perms) - 1)
		m->perms[k++] = *p++;
	m->perms[k] = '\0';
	if (*p++ != ' ')
		return false;
	m->offset = strtoull(p, &p, 16);
	m->dev_major = (unsigned)strtoul(p, &p, 16);
	if (*p++ != ':')
		return false;
	m->dev_minor = (unsigned)strtoul(p, &p, 16);
	char *q;
	m->inode = strtoull(p, &q, 10);
	if (q == p)
		return false;
	while (*q == ' ')
		q++;
	size_t len = strcspn(q, "\n");
	if (len >= sizeof(m->path))
		len = sizeof(m->path) - 1;
	memcpy(m->path, q, len);
	m->path[len] = '\0';
	return true;
}

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
		if (!parse_line(line, &m))
			continue;
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

const struct ptw_mapping *ptw_maps_named(const struct ptw_mapping *maps, int n, const char *path)
{
	for (int i = 0; i < n; i++)
		if (!strcmp(maps[i].path, path))
			return &maps[i];
	return NULL;
}
