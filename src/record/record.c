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
	put_u64(out, loc->addr);
	put_str(out, loc->symbol);
	put_u64(out, loc->symbol_offset);
	put_str(out, loc->module);
	put_u8(out, loc->has_offset);
	put_u64(out, loc->offset);
	put_str(out, loc->file);
	put_u32(out, (uint32_t)loc->line);
	end(out, at);
	return id;
}

void ptw_record_event(struct ptw_record_writer *w, struct ptw_buf *out, const struct ptw_event *ev)
{
	/* Locations first: each is a record of its own. */
	uint32_t routine = location_id(w, out, ev->routine);
	uint32_t site = location_id(w, out, ev->site);
	uint32_t object = location_id(w, out, ev->object);
	uint32_t *stack = NULL;
	if (ev->nstack) {
		stack = xcalloc(ev->nstack, sizeof(*stack));
		for (size_t i = 0; i < ev->nstack; i++)
			stack[i] = location_id(w, out, ev->stack[i]);
	}
	size_t at = begin(out, REC_EVENT);
	put_u32(out, (uint32_t)ev->kind);
	put_u64(out, ev->ns);
	put_u32(out, (uint32_t)ev->pid);
	put_u32(out, ev->process);
	put_u32(out, (uint32_t)ev->tid);
	put_u32(out, (uint32_t)ev->other_tid);
	put_u64(out, ev->pthread);
	put_u8(out, ev->has_value);
	put_u64(out, ev->value);
	put_u8(out, ev->has_arg);
	put_u64(out, ev->arg);
	put_u32(out, routine);
	put_u32(out, site);
	put_u32(out, (uint32_t)ev->detached);
	put_u32(out, (uint32_t)ev->unwinding);
	put_u32(out, (uint32_t)ev->exit_how);
	put_u32(out, (uint32_t)ev->exit_code);
	put_u32(out, (uint32_t)ev->sig);
	put_u8(out, ev->core_dumped);
	put_str(out, ev->name);
	put_str(out, ev->state);
	put_str(out, ev->wchan);
	put_u32(out, (uint32_t)ev->nstack);
	for (size_t i = 0; i < ev->nstack; i++)
		put_u32(out, stack[i]);
	put_u32(out, (uint32_t)ev->wait_kind);
	put_u64(out, ev->wait_object);
	put_u32(out, (uint32_t)ev->wait_owner);
	put_u32(out, (uint32_t)ev->span_kind);
	put_u32(out, ev->span_id);
	put_u64(out, ev->sp);
	put_u64(out, ev->ret_addr);
	put_u32(out, object);
	end(out, at);
	free(stack);
}

void ptw_record_report(struct ptw_record_writer *w, struct ptw_buf *out, const struct ptw_report *r)
{
	(void)w;
	size_t at = begin(out, REC_REPORT);
	put_u64(out, (uint64_t)r->realtime_offset_ns);
	put_u32(out, (uint32_t)r->pid);
	put_str(out, r->exe);
	uint32_t argc = 0;
	while (r->argv && r->argv[argc])
		argc++;
	put_u32(out, argc);
	for (uint32_t i = 0; i < argc; i++)
		put_str(out, r->argv[i]);
	put_str(out, r->mode);
	put_str(out, r->glibc);
	put_u32(out, (uint32_t)r->exit_kind);
	put_u32(out, (uint32_t)r->exit_code);
	put_u32(out, (uint32_t)r->exit_signal);
	put_u8(out, r->core_dumped);
	put_u64(out, r->start_ns);
	put_u64(out, r->frozen_ns);
	put_str(out, r->strategy);
	put_u8(out, r->snapshot);
	put_u64(out, r->tracer_user_ns);
	put_u64(out, r->tracer_sys_ns);
	put_u64(out, r->stops_total);
	put_u32(out, (uint32_t)r->nstop_kinds);
	for (size_t i = 0; i < r->nstop_kinds; i++) {
		put_str(out, r->stop_names[i]);
		put_u64(out, r->stop_counts[i]);
	}
	put_u64(out, r->breakpoints);
	put_u64(out, r->open_timeout_ns);
	put_u32(out, (uint32_t)r->nwarnings);
	for (size_t i = 0; i < r->nwarnings; i++) {
		put_str(out, r->warnings[i].code);
		put_str(out, r->warnings[i].message);
	}
	end(out, at);
}

void ptw_record_process(struct ptw_buf *out, const struct ptw_process *p)
{
	size_t at = begin(out, REC_PROCESS);
	put_u32(out, p->id);
	put_u32(out, p->parent_id);
	put_u32(out, (uint32_t)p->pid);
	put_u32(out, (uint32_t)p->ppid);
	put_u32(out, (uint32_t)p->parent_tid);
	put_str(out, p->exe);
	uint32_t argc = 0;
	while (p->argv && p->argv[argc])
		argc++;
	put_u32(out, argc);
	for (uint32_t i = 0; i < argc; i++)
		put_str(out, p->argv[i]);
	put_u64(out, p->start_ns);
	put_u64(out, p->end_ns);
	put_u32(out, (uint32_t)p->exit_kind);
	put_u32(out, (uint32_t)p->exit_code);
	put_u32(out, (uint32_t)p->exit_signal);
	put_u8(out, p->core_dumped);
	put_u8(out, p->followed);
	put_str(out, p->not_followed_why);
	put_u8(out, p->detached);
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

static uint8_t get_u8(struct cursor *c)
{
	uint8_t v;
	take(c, &v, 1);
	return v;
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

static bool decode_location(struct ptw_record_reader *r, char *payload, size_t len)
{
	struct location *l = xcalloc(1, sizeof(*l));
	l->bytes = xmalloc(len ? len : 1);
	memcpy(l->bytes, payload, len);
	struct cursor c = { l->bytes, len, false };
	uint32_t id = get_u32(&c);
	l->loc.addr = get_u64(&c);
	l->loc.symbol = get_str(&c);
	l->loc.symbol_offset = get_u64(&c);
	l->loc.module = get_str(&c);
	l->loc.has_offset = get_u8(&c);
	l->loc.offset = get_u64(&c);
	l->loc.file = get_str(&c);
	l->loc.line = (int)get_u32(&c);
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
	struct cursor c = { payload, len, false };
	struct ptw_event ev = ptw_event_init(0, 0, 0);
	uint32_t kind = get_u32(&c);
	ev.kind = (enum ptw_event_kind)kind;
	ev.ns = get_u64(&c);
	ev.pid = (pid_t)get_u32(&c);
	ev.process = get_u32(&c);
	ev.tid = (pid_t)get_u32(&c);
	ev.other_tid = (pid_t)get_u32(&c);
	ev.pthread = get_u64(&c);
	ev.has_value = get_u8(&c);
	ev.value = get_u64(&c);
	ev.has_arg = get_u8(&c);
	ev.arg = get_u64(&c);
	ev.routine = get_location(r, &c);
	ev.site = get_location(r, &c);
	ev.detached = (int)get_u32(&c);
	ev.unwinding = (int)get_u32(&c);
	ev.exit_how = (enum ptw_exit_how)get_u32(&c);
	ev.exit_code = (int)get_u32(&c);
	ev.sig = (int)get_u32(&c);
	ev.core_dumped = get_u8(&c);
	ev.name = get_str(&c);
	ev.state = get_str(&c);
	ev.wchan = get_str(&c);
	uint32_t nstack = get_u32(&c);
	if (c.bad || nstack > c.left / sizeof(uint32_t) || kind > PTW_EV_LAST)
		return false;
	const struct ptw_location **stack = nstack ? xcalloc(nstack, sizeof(*stack)) : NULL;
	for (uint32_t i = 0; i < nstack; i++)
		stack[i] = get_location(r, &c);
	ev.stack = stack;
	ev.nstack = nstack;
	ev.wait_kind = (enum ptw_wait_kind)get_u32(&c);
	ev.wait_object = get_u64(&c);
	ev.wait_owner = (pid_t)get_u32(&c);
	ev.span_kind = (enum ptw_span_kind)get_u32(&c);
	ev.span_id = get_u32(&c);
	ev.sp = get_u64(&c);
	ev.ret_addr = get_u64(&c);
	ev.object = get_location(r, &c);
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
	struct cursor c = { rep.bytes, len, false };
	struct ptw_report *p = &rep.r;
	p->realtime_offset_ns = (int64_t)get_u64(&c);
	p->pid = (pid_t)get_u32(&c);
	p->exe = get_str(&c);
	uint32_t argc = get_u32(&c);
	if (c.bad || argc > c.left / sizeof(uint32_t))
		goto bad;
	rep.argv = xcalloc(argc + 1, sizeof(*rep.argv));
	for (uint32_t i = 0; i < argc; i++)
		rep.argv[i] = (char *)get_str(&c);
	p->argv = rep.argv;
	p->mode = get_str(&c);
	p->glibc = get_str(&c);
	uint32_t exit_kind = get_u32(&c);
	if (exit_kind > PTW_EXIT_SIGNAL)
		goto bad;
	p->exit_kind = exit_kind;
	p->exit_code = (int)get_u32(&c);
	p->exit_signal = (int)get_u32(&c);
	p->core_dumped = get_u8(&c);
	p->start_ns = get_u64(&c);
	p->frozen_ns = get_u64(&c);
	p->strategy = get_str(&c);
	p->snapshot = get_u8(&c);
	p->tracer_user_ns = get_u64(&c);
	p->tracer_sys_ns = get_u64(&c);
	p->stops_total = get_u64(&c);
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
	p->breakpoints = get_u64(&c);
	p->open_timeout_ns = get_u64(&c);
	uint32_t nwarn = get_u32(&c);
	if (c.bad || nwarn > c.left / sizeof(uint32_t))
		goto bad;
	rep.warnings = xcalloc(nwarn + 1, sizeof(*rep.warnings));
	for (uint32_t i = 0; i < nwarn; i++) {
		rep.warnings[i].code = (char *)get_str(&c);
		rep.warnings[i].message = (char *)get_str(&c);
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
	struct cursor c = { np.bytes, len, false };
	struct ptw_process *p = &np.p;
	p->id = get_u32(&c);
	p->parent_id = get_u32(&c);
	p->pid = (pid_t)get_u32(&c);
	p->ppid = (pid_t)get_u32(&c);
	p->parent_tid = (pid_t)get_u32(&c);
	p->exe = get_str(&c);
	uint32_t argc = get_u32(&c);
	if (c.bad || argc > c.left / sizeof(uint32_t)) {
		free(np.bytes);
		return false;
	}
	np.argv = xcalloc(argc + 1, sizeof(*np.argv));
	for (uint32_t i = 0; i < argc; i++)
		np.argv[i] = (char *)get_str(&c);
	p->argv = np.argv;
	p->start_ns = get_u64(&c);
	p->end_ns = get_u64(&c);
	p->exit_kind = (int)get_u32(&c);
	p->exit_code = (int)get_u32(&c);
	p->exit_signal = (int)get_u32(&c);
	p->core_dumped = get_u8(&c);
	p->followed = get_u8(&c);
	p->not_followed_why = get_str(&c);
	p->detached = get_u8(&c);
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
