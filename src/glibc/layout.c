/* SPDX-License-Identifier: MIT */
/* struct pthread's undescribed members from their neighbours; see layout.h. Pure. */
#include "ptw_glibc.h"

#include <stdio.h>

const char *const ptw_glibc_tdb_desc_names[5] = { "report_events", "schedparam_sched_priority",
						  "schedpolicy", "start_routine", "eventbuf" };

/* A scalar member of that many bits, one of it. */
static bool scalar(const struct ptw_glibc_tdb_desc *d, uint32_t bits)
{
	return d->known && d->bits == bits && d->count == 1;
}

/* [off, off + 8) lies inside struct pthread (when its size is known). */
static bool inside(const struct ptw_glibc_tdb_descs *d, uint64_t off)
{
	return !d->sizeof_pthread || off + 8 <= d->sizeof_pthread;
}

static const char *derive_arg(const struct ptw_glibc_tdb_descs *d, uint64_t *ret)
{
	if (!scalar(&d->start_routine, 64))
		return "libthread_db describes no 64-bit start_routine";
	if (!d->eventbuf.known)
		return "libthread_db describes no eventbuf";
	/* One pointer between them: arg (the only member there in glibc). */
	if (d->eventbuf.offset != d->start_routine.offset + 16 || d->start_routine.offset % 8)
		return "eventbuf does not follow start_routine by 16 bytes";
	*ret = d->start_routine.offset + 8;
	return inside(d, *ret) ? NULL : "arg would lie past struct pthread's end";
}

static const char *derive_result(const struct ptw_glibc_tdb_descs *d, uint64_t *result,
				 uint64_t *joinid)
{
	if (!scalar(&d->sched_priority, 32) || !scalar(&d->schedpolicy, 32) ||
	    !scalar(&d->start_routine, 64))
		return "libthread_db does not describe schedparam, schedpolicy and start_routine";
	uint32_t sp = d->sched_priority.offset;
	/* schedparam (one int), schedpolicy, start_routine back to back: the
	 * neighbourhood is nptl's, and result is the pointer before it. */
	if (d->schedpolicy.offset != sp + 4 || d->start_routine.offset != sp + 8)
		return "schedparam, schedpolicy and start_routine are not back to back";
	if (sp % 8 || sp < 16)
		return "schedparam is not 8-aligned (padding could lie before it)";
	if (!scalar(&d->report_events, 8) || d->report_events.offset + 1 > sp - 16)
		return "report_events does not lie before joinid and result";
	*result = sp - 8;
	*joinid = sp - 16;
	return inside(d, *result) ? NULL : "result would lie past struct pthread's end";
}

int ptw_glibc_layout_derive(const struct ptw_glibc_tdb_descs *d, struct ptw_pthread_layout *l,
			    unsigned *derived, char *why, size_t why_size)
{
	int missing = 0;
	const char *first = NULL;
	*derived = 0;
	if (why_size)
		why[0] = '\0';
	if (!l->have_arg) {
		uint64_t off = 0;
		const char *no = derive_arg(d, &off);
		if (!no) {
			l->arg = off;
			l->have_arg = true;
			*derived |= 1;
		} else {
			missing++;
			first = first ? first : no;
		}
	}
	if (!l->have_result || !l->have_joinid) {
		uint64_t result = 0, joinid = 0;
		const char *no = derive_result(d, &result, &joinid);
		if (!no) {
			if (!l->have_result) {
				l->result = result;
				l->have_result = true;
				*derived |= 2;
			}
			if (!l->have_joinid) {
				l->joinid = joinid;
				l->have_joinid = true;
				*derived |= 4;
			}
		} else {
			missing += !l->have_result + !l->have_joinid;
			first = first ? first : no;
		}
	}
	if (first && why_size)
		snprintf(why, why_size, "%s", first);
	return missing;
}
