/* SPDX-License-Identifier: MIT */
/* Which spans a report shows (--tid, --routine); see ptw_spans.h. Pure. */
#define _GNU_SOURCE
#include <errno.h>
#include <fnmatch.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ptw_spans.h"
#include "ptw_symbols.h"
#include "ptw_util.h"

int ptw_span_filter_tids(struct ptw_span_filter *f, const char *list)
{
	char *copy = xstrdup(list), *save = NULL;
	int r = 0;
	for (char *w = strtok_r(copy, ",", &save); w; w = strtok_r(NULL, ",", &save)) {
		char *end;
		errno = 0;
		long v = strtol(w, &end, 10);
		if (errno || *end || end == w || v <= 0 || v > 0x3fffffff) {
			r = -EINVAL;
			break;
		}
		f->tids = xreallocarray(f->tids, f->ntids + 1, sizeof(*f->tids));
		f->tids[f->ntids++] = (pid_t)v;
	}
	if (!f->ntids)
		r = -EINVAL;
	free(copy);
	return r;
}

bool ptw_span_filter_tid(const struct ptw_span_filter *f, pid_t tid)
{
	if (!f || !f->ntids)
		return true;
	for (size_t i = 0; i < f->ntids; i++)
		if (f->tids[i] == tid)
			return true;
	return false;
}

bool ptw_span_filter_object(const struct ptw_span_filter *f, uint64_t object,
			    const struct ptw_location *loc)
{
	if (!f || !f->object)
		return true;
	if (loc && loc->symbol && fnmatch(f->object, loc->symbol, 0) == 0)
		return true;
	char addr[24];
	snprintf(addr, sizeof(addr), "%#" PRIx64, object);
	return fnmatch(f->object, addr, 0) == 0;
}

bool ptw_span_filter_passes(const struct ptw_span_filter *f, const struct ptw_span *sp)
{
	if (!f)
		return true;
	if (!ptw_span_filter_tid(f, sp->tid))
		return false;
	if (f->routine) {
		char *name = ptw_span_group_name(sp);
		bool ok = fnmatch(f->routine, name, 0) == 0;
		free(name);
		if (!ok)
			return false;
	}
	return true;
}
