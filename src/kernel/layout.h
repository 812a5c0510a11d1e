/* SPDX-License-Identifier: MIT */
/*
 * struct pthread's layout without libc's debug file: the members that
 * libthread_db has no descriptor for (arg, result, joinid) derived from
 * the neighbours it does describe, and refused when those neighbours are
 * not where glibc's nptl/descr.h puts them. Pure (the descriptors are read
 * by the caller), unit-tested in tests/kernel/test_kconvert.c.
 *
 * glibc 2.36's order (nptl/descr.h):
 *
 *   ... bool report_events; ... struct pthread *joinid; void *result;
 *   struct sched_param schedparam; int schedpolicy;
 *   void *(*start_routine)(void *); void *arg; td_eventbuf_t eventbuf; ...
 *
 * libc.so.6 exports descriptors (_thread_db_pthread_*, each { bits,
 * count, offset }) for report_events, schedparam_sched_priority,
 * schedpolicy, start_routine and eventbuf. So:
 *   arg    = start_routine + 8, when eventbuf begins 16 bytes after
 *            start_routine (one pointer between them);
 *   result = schedparam - 8 and joinid = schedparam - 16, when schedparam
 *            (a 4-byte int), schedpolicy and start_routine follow each
 *            other with no gap (the order above), schedparam is 8-aligned
 *            (no padding hides between result and it) and report_events
 *            lies before joinid.
 * Checked against libc6-dbg's DWARF for Debian 12's glibc 2.36
 * (ptype/o struct pthread): joinid 1568, result 1576, schedparam 1584,
 * schedpolicy 1588, start_routine 1592, arg 1600, eventbuf 1608.
 */
#ifndef PTW_KERNEL_LAYOUT_H
#define PTW_KERNEL_LAYOUT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "probes.h"

/* One libthread_db descriptor of a struct pthread member. */
struct ptwk_tdb_desc {
	bool known;
	uint32_t bits, count, offset;
};

struct ptwk_tdb_descs {
	struct ptwk_tdb_desc report_events, sched_priority, schedpolicy, start_routine, eventbuf;
	uint32_t sizeof_pthread; /* 0 unknown */
};

/* The descriptor names (without "_thread_db_pthread_"), in the order of
 * struct ptwk_tdb_descs' members. */
extern const char *const ptwk_tdb_desc_names[5];

/*
 * Fills what l does not have yet of arg, result and joinid from d, and
 * sets *derived for each one it filled (bit 0 arg, bit 1 result, bit 2
 * joinid). Returns the number of members it could not derive (0: all
 * there), with the first reason in why.
 */
int ptwk_layout_derive(const struct ptwk_tdb_descs *d, struct ptwk_layout *l, unsigned *derived,
		       char *why, size_t why_size);

#endif
