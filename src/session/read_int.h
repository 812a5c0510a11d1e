/* SPDX-License-Identifier: MIT */
/*
 * Inside the reader (ptw_load.h): what its files share. Each calls only
 * those before it: read_values.c, read_spans.c, read_stream.c, read.c.
 */
#ifndef PTW_SESSION_READ_INT_H
#define PTW_SESSION_READ_INT_H

#include "ptw_load.h"

#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <json-c/json.h>

#include "ptw_frames.h"
#include "ptw_locks.h"
#include "ptw_spans.h"
#include "ptw_symbols.h"
#include "ptw_warnings.h"

/* Everything the report and the spans point to. */
struct store {
	char **strings;
	size_t nstrings, capstrings;
	struct ptw_location **locs;
	size_t nlocs, caplocs;
	char **argv;
	struct ptw_warning *warnings;
	size_t nwarnings;
	struct ptw_interrupt *interrupts;
	size_t ninterrupts;
	char **stop_names;
	uint64_t *stop_counts;
	size_t nstops;
	struct ptw_process *procs;
	size_t nprocs;
	char ***proc_argv;
	/* a filtered report counts what it shows: [ns, +1 | -1] of each span */
	int64_t (*edges)[2];
	size_t nedges, capedges;
};

/* What one load needs on the way. */
struct ld {
	struct ptw_loaded *l;
	struct store *st;
	const struct ptw_span_filter *filter;
	bool filtered; /* --tid or --routine */
	bool streaming;
	char *err;
	size_t errlen;
	bool failed;
	size_t lineno; /* a stream's line being read (0: a document) */
	/* a document, or a stream's spans when they are all held: added once
	 * sorted by id (one sort, whatever the order of the file) */
	struct ptw_span **pending;
	size_t npending, cappending;
	/* a stream */
	struct ptw_map held; /* span id -> struct ptw_span* begun, not ended */
	size_t nheld;
	struct ptw_map seen;	      /* span id -> 1 once it ended (a later line is a repeat) */
	struct ptw_map waits_seen;    /* wait id -> 1: a document's twice is refused, a
				       * stream's repeat dropped (as a span's) */
	struct ptw_map kept;	      /* filtered: thread span id -> 1 shown, 2 not */
	struct ptw_map child_ns;      /* frame id -> time in its completed children so far */
	struct ptw_frame *frames;     /* a stream's frames, when they are all held */
	struct ptw_open_mark **marks; /* the frames' marks of being seen open */
	size_t nmarks;
	size_t nframes, capframes;
	uint64_t max_active; /* the most "active" a span_open line said */
	int read_errno;
	char ctx[48]; /* a document's: "span 5: " */
	bool header, metrics;
	bool warning_lines; /* warnings so far are the warning lines' */
};

/* ---- read_values.c ---- */

bool ld_bad(struct ld *ld, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
const char *ld_keep(struct store *st, const char *s);
void ld_free_argv(char **argv);
void ld_free_warnings(struct store *st);
void ld_add_warning(struct store *st, const char *code, const char *message, unsigned count);
json_object *ld_get(json_object *o, const char *k);
bool ld_is(json_object *v, json_type t);
size_t ld_arr_len(json_object *v);
const char *ld_str_max(struct ld *ld, json_object *o, const char *k, size_t max);
const char *ld_str(struct ld *ld, json_object *o, const char *k);
bool ld_str_is(struct ld *ld, json_object *o, const char *k, const char *want);
bool ld_boolean(json_object *o, const char *k);
bool ld_u64_of(struct ld *ld, json_object *v, const char *what, uint64_t max, uint64_t *ret);
uint64_t ld_u64m(struct ld *ld, json_object *o, const char *k, uint64_t max);
uint64_t ld_num(struct ld *ld, json_object *o, const char *k);
struct ptw_opt ld_opt(struct ld *ld, json_object *o, const char *k);
int64_t ld_i64m(struct ld *ld, json_object *o, const char *k, int64_t min, int64_t max);
pid_t ld_pid_of(struct ld *ld, json_object *o, const char *k);
bool ld_hex_of(json_object *v, uint64_t *ret);
struct ptw_opt ld_hexopt(json_object *o, const char *k);
int ld_signum(const char *name);
int ld_name_index(const char *s, const char *const *names, size_t n, int fallback);
struct ptw_location *ld_new_location(struct store *st);
const struct ptw_location *ld_location(struct ld *ld, json_object *v);
const struct ptw_location **ld_stack_of(struct ld *ld, json_object *arr, size_t *ret_n);

/* ---- read_spans.c ---- */

void ld_span_free(struct ptw_span *sp);
struct ptw_span *ld_span_of(struct ld *ld, json_object *v);
bool ld_add_span(struct ld *ld, struct ptw_span *sp);
void ld_add_pending(struct ld *ld);
int ld_by_frame_id(const void *x, const void *y);
void ld_frames_of(struct ld *ld, json_object *arr);
void ld_stream_frame(struct ld *ld, json_object *v);
void ld_wait_of(struct ld *ld, json_object *v);
void ld_deadlock_of(struct ld *ld, json_object *v, uint32_t id);
void ld_stated_waits(struct ld *ld, json_object *m);
void ld_header_of(struct ld *ld, json_object *doc);
void ld_warnings_of(struct ld *ld, json_object *arr);
void ld_processes_of(struct ld *ld, json_object *arr);
void ld_spans_processes(struct ld *ld);
void ld_counters_of(struct ld *ld, json_object *m);

/* ---- read_stream.c ---- */

void ld_stream_line(struct ld *ld, json_object *v);
void ld_stream_end(struct ld *ld);

#endif
