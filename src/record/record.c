/* SPDX-License-Identifier: MIT */
/* The session record as bytes; see ptw_record.h. */
#define _GNU_SOURCE
#include "ptw_record.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "ptw_symbols.h"

enum { REC_LOCATION = 1, REC_EVENT = 2, REC_REPORT = 3, REC_END = 4, REC_PROCESS = 5 };

#define HEADER_LEN 5u
#define NO_STRING UINT32_MAX
#define NO_LOCATION 0u
/* A record this long is corrupt, not big (a report with every warning). */
#define MAX_RECORD (64u << 20)

/*
 * Each record's fields, in their order on the wire: X(TYPE, member). The
 * one list drives both the writer and the reader:
 *   INT    the member's own bytes (1, 4 or 8: bool, int/enum/pid_t, 64 bits)
 *   STR    a string (length with its NUL, then the bytes; or NO_STRING)
 *   LOC    a location id (its REC_LOCATION record is written first)
 *   STACK  ptw_event's stack: nstack, then a location id each
 *   ARGV   a NULL-terminated argv: a count, then the strings
 * A report ends with its stop kinds and its warnings (arrays of pairs).
 */
#define LOCATION_FIELDS(X)                                                                         \
	X(INT, addr) X(STR, symbol) X(INT, symbol_offset) X(STR, module) X(INT, has_offset)        \
	X(INT, offset) X(STR, file) X(INT, line)
#define EVENT_FIELDS(X)                                                                            \
	X(INT, kind)                                                                               \
	X(INT, ns) X(INT, pid) X(INT, process) X(INT, tid) X(INT, other_tid) X(INT, pthread) X(    \
		INT, has_value) X(INT, value) X(INT, has_arg) X(INT, arg) X(LOC, routine)          \
		X(LOC, site) X(INT, detached) X(INT, unwinding) X(INT, exit_how) X(INT, exit_code) \
			X(INT, sig) X(INT, core_dumped) X(STR, name) X(STR, state) X(STR, wchan)   \
				X(STACK, stack) X(INT, wait_kind) X(INT, wait_object)              \
					X(INT, wait_owner) X(INT, span_kind) X(INT, span_id)       \
						X(INT, sp) X(INT, ret_addr) X(LOC, object) X(INT, action) X(INT, why) \
							X(INT, before_attach) X(INT, proof) X(INT, cancelled) \
								X(INT, cpu.set) X(INT, cpu.on_cpu_ns)     \
									X(INT, cpu.runnable_ns)           \
										X(INT, cpu.voluntary)     \
											X(INT, cpu.involuntary)
#define REPORT_FIELDS(X)                                                                           \
	X(INT, realtime_offset_ns)                                                                 \
	X(INT, pid) X(STR, exe) X(ARGV, argv) X(STR, mode) X(STR, glibc) X(INT, exit_kind)         \
		X(INT, exit_code) X(INT, exit_signal) X(INT, core_dumped) X(INT, start_ns)         \
			X(INT, frozen_ns) X(STR, strategy) X(INT, snapshot) X(INT, tracer_user_ns) \
				X(INT, tracer_sys_ns) X(INT, stops_total) X(INT, breakpoints)      \
					X(INT, open_timeout_ns) X(STR, backend) X(STR, backend_why) \
						X(INT, probes)
#define PROCESS_FIELDS(X)                                                                          \
	X(INT, id)                                                                                 \
	X(INT, parent_id) X(INT, pid) X(INT, ppid) X(INT, parent_tid) X(STR, exe) X(ARGV, argv)    \
		X(INT, start_ns) X(INT, end_ns) X(INT, exit_kind) X(INT, exit_code)                \
			X(INT, exit_signal) X(INT, core_dumped) X(INT, followed)                   \
				X(STR, not_followed_why) X(INT, detached)

/* ---- writing ---- */

struct ptw_record_writer {
	struct ptw_map loc_ids; /* struct ptw_location * -> id (1, 2, ...) */
	uint32_t nlocs;
};

struct ptw_record_writer *ptw_record_writer_new(void)
{
	return xcalloc(1, sizeof(struct ptw_record_writer));
}

void ptw_record_writer_free(struct ptw_record_writer *w)
{
	if (!w)
		return;
	ptw_map_free(&w->loc_ids);
	free(w);
}

static void put_u8(struct ptw_buf *b, uint8_t v)
{
	ptw_buf_add(b, &v, 1);
}

static void put_u32(struct ptw_buf *b, uint32_t v)
{
	ptw_buf_add(b, &v, sizeof(v));
}

static void put_u64(struct ptw_buf *b, uint64_t v)
{
	ptw_buf_add(b, &v, sizeof(v));
}

/* With its NUL, so that the reader can point into the bytes. */
static void put_str(struct ptw_buf *b, const char *s)
{
	if (!s) {
		put_u32(b, NO_STRING);
		return;
	}
	size_t n = strlen(s) + 1;
	put_u32(b, (uint32_t)n);
	ptw_buf_add(b, s, n);
}

/* An integer member as it is in memory (1, 4 or 8 bytes). */
static void put_int(struct ptw_buf *b, const void *member, size_t size)
{
	ptw_buf_add(b, member, size);
}

static void put_argv(struct ptw_buf *b, char *const *argv)
{
	uint32_t argc = 0;
	while (argv && argv[argc])
		argc++;
	put_u32(b, argc);
	for (uint32_t i = 0; i < argc; i++)
		put_str(b, argv[i]);
}

/* The writer's half of each field type (obj: the struct written; ids: the
 * location ids found before the record began). */
#define PUT_INT(m) put_int(out, &obj->m, sizeof(obj->m));
#define PUT_STR(m) put_str(out, obj->m);
#define PUT_LOC(m) put_u32(out, ids[k++]);
#define PUT_STACK(m)                                                                               \
	put_u32(out, (uint32_t)obj->n##m);                                                         \
	for (size_t i = 0; i < obj->n##m; i++)                                                     \
		put_u32(out, ids[k++]);
#define PUT_ARGV(m) put_argv(out, obj->m);
#define PUT(type, m) PUT_##type(m)
/* Before the record: its locations' ids (records of their own, first). */
#define IDS_INT(m)
#define IDS_STR(m)
#define IDS_ARGV(m)
#define IDS_LOC(m) ids[k++] = location_id(w, out, obj->m);
#define IDS_STACK(m)                                                                               \
	for (size_t i = 0; i < obj->n##m; i++)                                                     \
		ids[k++] = location_id(w, out, obj->m[i]);
#define IDS(type, m) IDS_##type(m)

/* Starts a record; returns where its length goes. */
static size_t begin(struct ptw_buf *b, uint8_t type)
{
	put_u8(b, type);
	size_t at = b->len;
	put_u32(b, 0);
	return at;
}

static void end(struct ptw_buf *b, size_t at)
{
	uint32_t n = (uint32_t)(b->len - at - sizeof(uint32_t));
	memcpy(b->p + at, &n, sizeof(n));
}

static uint32_t location_id(struct ptw_record_writer *w, struct ptw_buf *out,
			    const struct ptw_location *loc)
{
	if (!loc)
		return NO_LOCATION;
	void *v = ptw_map_get(&w->loc_ids, (uint64_t)(uintptr_t)loc);
	if (v)
		return (uint32_t)(uintptr_t)v;
	uint32_t id = ++w->nlocs;
	ptw_map_put(&w->loc_ids, (uint64_t)(uintptr_t)loc, (void *)(uintptr_t)id);
	size_t at = begin(out, REC_LOCATION);
	put_u32(out, id);
	const struct ptw_location *obj = loc;
	LOCATION_FIELDS(PUT)
	end(out, at);
	return id;
}

void ptw_record_event(struct ptw_record_writer *w, struct ptw_buf *out, const struct ptw_event *ev)
{
	const struct ptw_event *obj = ev;
	/* Locations first: each is a record of its own. */
	/* 3 locations and the stack's */
	uint32_t few[8], *ids = few;
	if (ev->nstack + 3 > PTW_ARRAY_SIZE(few))
		ids = xcalloc(ev->nstack + 3, sizeof(*ids));
	size_t k = 0;
	EVENT_FIELDS(IDS)
	size_t at = begin(out, REC_EVENT);
	k = 0;
	EVENT_FIELDS(PUT)
	end(out, at);
	if (ids != few)
		free(ids);
}

void ptw_record_report(struct ptw_record_writer *w, struct ptw_buf *out, const struct ptw_report *r)
{
	(void)w;
	const struct ptw_report *obj = r;
	size_t at = begin(out, REC_REPORT);
	REPORT_FIELDS(PUT)
	put_u32(out, (uint32_t)r->nstop_kinds);
	for (size_t i = 0; i < r->nstop_kinds; i++) {
		put_str(out, r->stop_names[i]);
		put_u64(out, r->stop_counts[i]);
	}
	put_u32(out, (uint32_t)r->nwarnings);
	for (size_t i = 0; i < r->nwarnings; i++) {
		put_str(out, r->warnings[i].code);
		put_str(out, r->warnings[i].message);
		put_u32(out, r->warnings[i].count);
	}
	end(out, at);
}

void ptw_record_process(struct ptw_buf *out, const struct ptw_process *p)
{
	const struct ptw_process *obj = p;
	size_t at = begin(out, REC_PROCESS);
	PROCESS_FIELDS(PUT)
	end(out, at);
}

void ptw_record_end(struct ptw_buf *out)
{
	end(out, begin(out, REC_END));
}

/* ---- reading ---- */

/* One decoded location and the bytes its strings point into. */
struct location {
	struct ptw_location loc;
	char *bytes;
};

struct report {
	struct ptw_report r;
	char *bytes;
	char **argv;
	const char **stop_names;
	uint64_t *stop_counts;
	struct ptw_warning *warnings;
};

/* One process (REC_PROCESS), the latest record of its id. */
struct process {
	struct ptw_process p;
	char *bytes;
	char **argv;
};

struct ptw_record_reader {
	struct ptw_buf pending; /* bytes of an incomplete record */
	struct location **locs; /* by id - 1 */
	uint32_t nlocs;
	struct report report;
	struct process *procs; /* in order of first record */
	struct ptw_process *plist; /* what ptw_record_processes() hands out */
	size_t nprocs;
	bool broken;
};

struct ptw_record_reader *ptw_record_reader_new(void)
{
	return xcalloc(1, sizeof(struct ptw_record_reader));
}

static void report_release(struct report *rep)
{
	free(rep->bytes);
	free(rep->argv);
	free(rep->stop_names);
	free(rep->stop_counts);
	free(rep->warnings);
	memset(rep, 0, sizeof(*rep));
}

void ptw_record_reader_free(struct ptw_record_reader *r)
{
	if (!r)
		return;
	for (uint32_t i = 0; i < r->nlocs; i++) {
		free(r->locs[i]->bytes);
		free(r->locs[i]);
	}
	free(r->locs);
	report_release(&r->report);
	for (size_t i = 0; i < r->nprocs; i++) {
		free(r->procs[i].bytes);
		free(r->procs[i].argv);
	}
	free(r->procs);
	free(r->plist);
	ptw_buf_free(&r->pending);
	free(r);
}

/* A cursor over one payload; any overrun sets bad and yields zeros. */
struct cursor {
	char *p;
	size_t left;
	bool bad;
};

static void take(struct cursor *c, void *dst, size_t n)
{
	if (c->bad || c->left < n) {
		c->bad = true;
		memset(dst, 0, n);
		return;
	}
	memcpy(dst, c->p, n);
	c->p += n;
	c->left -= n;
}

static uint32_t get_u32(struct cursor *c)
{
	uint32_t v;
	take(c, &v, sizeof(v));
	return v;
}

static uint64_t get_u64(struct cursor *c)
{
	uint64_t v;
	take(c, &v, sizeof(v));
	return v;
}

/* Points into the payload (its NUL is part of it). */
static const char *get_str(struct cursor *c)
{
	uint32_t n = get_u32(c);
	if (c->bad || n == NO_STRING)
		return NULL;
	if (n == 0 || c->left < n || c->p[n - 1] != '\0') {
		c->bad = true;
		return NULL;
	}
	const char *s = c->p;
	c->p += n;
	c->left -= n;
	return s;
}

static const struct ptw_location *get_location(struct ptw_record_reader *r, struct cursor *c)
{
	uint32_t id = get_u32(c);
	if (id == NO_LOCATION)
		return NULL;
	if (id > r->nlocs) {
		c->bad = true;
		return NULL;
	}
	return &r->locs[id - 1]->loc;
}

/* An integer member's bytes; a one-byte member is a bool: 0 or 1, whatever
 * the byte (a corrupt record must not make a bool hold 2). */
static void get_int(struct cursor *c, void *member, size_t size)
{
	take(c, member, size);
	if (size == 1)
		*(uint8_t *)member = *(uint8_t *)member != 0;
}

/* A NULL-terminated argv (malloc'd; its strings point into the payload). */
static char **get_argv(struct cursor *c)
{
	uint32_t argc = get_u32(c);
	if (c->bad || argc > c->left / sizeof(uint32_t)) {
		c->bad = true;
		return NULL;
	}
	char **argv = xcalloc(argc + 1, sizeof(*argv));
	for (uint32_t i = 0; i < argc; i++)
		argv[i] = (char *)get_str(c);
	return argv;
}

/* ptw_event's stack (malloc'd): nstack location ids. */
static const struct ptw_location **get_stack(struct ptw_record_reader *r, struct cursor *c,
					     size_t *ret_n)
{
	uint32_t n = get_u32(c);
	*ret_n = 0;
	if (c->bad || n > c->left / sizeof(uint32_t)) {
		c->bad = true;
		return NULL;
	}
	const struct ptw_location **stack = n ? xcalloc(n, sizeof(*stack)) : NULL;
	for (uint32_t i = 0; i < n; i++)
		stack[i] = get_location(r, c);
	*ret_n = n;
	return stack;
}

/* The reader's half of each field type (obj: the struct read into; own:
 * what holds its allocations; cur: the cursor). */
#define GET_INT(m) get_int(cur, &obj->m, sizeof(obj->m));
#define GET_STR(m) obj->m = (char *)get_str(cur);
#define GET_LOC(m) obj->m = get_location(r, cur);
#define GET_STACK(m) obj->m = own->m = get_stack(r, cur, &obj->n##m);
#define GET_ARGV(m) obj->m = own->m = get_argv(cur);
#define GET(type, m) GET_##type(m)

static bool decode_location(struct ptw_record_reader *r, char *payload, size_t len)
{
	struct location *l = xcalloc(1, sizeof(*l));
	l->bytes = xmalloc(len ? len : 1);
	memcpy(l->bytes, payload, len);
	struct cursor c = { l->bytes, len, false };
	uint32_t id = get_u32(&c);
	struct ptw_location *obj = &l->loc;
	struct cursor *cur = &c;
	LOCATION_FIELDS(GET)
	if (c.bad || id != r->nlocs + 1) {
		free(l->bytes);
		free(l);
		return false;
	}
	r->locs = xreallocarray(r->locs, r->nlocs + 1, sizeof(*r->locs));
	r->locs[r->nlocs++] = l;
	return true;
}

static bool decode_event(struct ptw_record_reader *r, char *payload, size_t len,
			 const struct ptw_record_handlers *h, void *ctx)
{
	struct cursor c = { payload, len, false }, *cur = &c;
	struct ptw_event ev = ptw_event_init(0, 0, 0), *obj = &ev;
	struct {
		const struct ptw_location **stack;
	} owned = { NULL }, *own = &owned;
	EVENT_FIELDS(GET)
	const struct ptw_location **stack = owned.stack;
	if ((unsigned)ev.kind > PTW_EV_LAST)
		c.bad = true;
	bool ok = !c.bad;
	if (ok && h->event)
		h->event(ctx, &ev);
	free(stack);
	return ok;
}

static bool decode_report(struct ptw_record_reader *r, char *payload, size_t len,
			  const struct ptw_record_handlers *h, void *ctx)
{
	struct report rep = { 0 };
	rep.bytes = xmalloc(len ? len : 1);
	memcpy(rep.bytes, payload, len);
	struct cursor c = { rep.bytes, len, false }, *cur = &c;
	struct ptw_report *p = &rep.r, *obj = p;
	struct report *own = &rep;
	REPORT_FIELDS(GET)
	if (c.bad || (unsigned)p->exit_kind > PTW_EXIT_SIGNAL)
		goto bad;
	uint32_t nkinds = get_u32(&c);
	if (c.bad || nkinds > c.left / sizeof(uint32_t))
		goto bad;
	rep.stop_names = xcalloc(nkinds + 1, sizeof(*rep.stop_names));
	rep.stop_counts = xcalloc(nkinds + 1, sizeof(*rep.stop_counts));
	for (uint32_t i = 0; i < nkinds; i++) {
		rep.stop_names[i] = get_str(&c);
		rep.stop_counts[i] = get_u64(&c);
		if (!rep.stop_names[i])
			c.bad = true;
	}
	p->stop_names = rep.stop_names;
	p->stop_counts = rep.stop_counts;
	p->nstop_kinds = nkinds;
	uint32_t nwarn = get_u32(&c);
	if (c.bad || nwarn > c.left / sizeof(uint32_t))
		goto bad;
	rep.warnings = xcalloc(nwarn + 1, sizeof(*rep.warnings));
	for (uint32_t i = 0; i < nwarn; i++) {
		rep.warnings[i].code = (char *)get_str(&c);
		rep.warnings[i].message = (char *)get_str(&c);
		rep.warnings[i].count = get_u32(&c);
		if (!rep.warnings[i].code || !rep.warnings[i].message)
			c.bad = true;
	}
	p->warnings = rep.warnings;
	p->nwarnings = nwarn;
	if (c.bad || !p->mode)
		goto bad;
	report_release(&r->report);
	r->report = rep;
	if (h->report)
		h->report(ctx, &r->report.r);
	return true;
bad:
	report_release(&rep);
	return false;
}

static bool decode_process(struct ptw_record_reader *r, char *payload, size_t len)
{
	struct process np = { 0 };
	np.bytes = xmalloc(len ? len : 1);
	memcpy(np.bytes, payload, len);
	struct cursor c = { np.bytes, len, false }, *cur = &c;
	struct ptw_process *p = &np.p, *obj = p;
	struct process *own = &np;
	PROCESS_FIELDS(GET)
	if (c.bad || p->pid <= 0 || p->exit_kind < 0 || p->exit_kind > PTW_EXIT_SIGNAL) {
		free(np.bytes);
		free(np.argv);
		return false;
	}
	size_t i = 0;
	while (i < r->nprocs && r->procs[i].p.id != p->id)
		i++;
	if (i == r->nprocs) {
		r->procs = xreallocarray(r->procs, r->nprocs + 1, sizeof(*r->procs));
		r->nprocs++;
	} else {
		free(r->procs[i].bytes);
		free(r->procs[i].argv);
	}
	r->procs[i] = np;
	return true;
}

static int cmp_process(const void *a, const void *b)
{
	const struct ptw_process *x = a, *y = b;
	return x->id < y->id ? -1 : x->id > y->id;
}

size_t ptw_record_processes(struct ptw_record_reader *r, const struct ptw_process **ret)
{
	free(r->plist);
	r->plist = xcalloc(r->nprocs + 1, sizeof(*r->plist));
	for (size_t i = 0; i < r->nprocs; i++)
		r->plist[i] = r->procs[i].p;
	qsort(r->plist, r->nprocs, sizeof(*r->plist), cmp_process);
	*ret = r->plist;
	return r->nprocs;
}

int ptw_record_feed(struct ptw_record_reader *r, const void *data, size_t len,
		    const struct ptw_record_handlers *h, void *ctx)
{
	if (r->broken)
		return -EPROTO;
	ptw_buf_add(&r->pending, data, len);
	size_t at = 0;
	while (r->pending.len - at >= HEADER_LEN) {
		uint8_t type = (uint8_t)r->pending.p[at];
		uint32_t n;
		memcpy(&n, r->pending.p + at + 1, sizeof(n));
		if (n > MAX_RECORD) {
			r->broken = true;
			break;
		}
		if (r->pending.len - at - HEADER_LEN < n)
			break; /* the rest is still to come */
		char *payload = r->pending.p + at + HEADER_LEN;
		bool ok;
		switch (type) {
		case REC_LOCATION:
			ok = decode_location(r, payload, n);
			break;
		case REC_EVENT:
			ok = decode_event(r, payload, n, h, ctx);
			break;
		case REC_REPORT:
			ok = decode_report(r, payload, n, h, ctx);
			break;
		case REC_PROCESS:
			ok = decode_process(r, payload, n);
			break;
		case REC_END:
			ok = n == 0;
			if (ok && h->end)
				h->end(ctx);
			break;
		default:
			ok = false;
		}
		if (!ok) {
			r->broken = true;
			break;
		}
		at += HEADER_LEN + n;
	}
	if (r->broken) {
		ptw_buf_free(&r->pending);
		return -EPROTO;
	}
	/* Keep only the incomplete tail. */
	if (at)
		memmove(r->pending.p, r->pending.p + at, r->pending.len - at);
	r->pending.len -= at;
	return 0;
}
