/* SPDX-License-Identifier: MIT */
/* The libthread_db thread agent; see ptw_thread_db.h and docs/design.md. */
#define _GNU_SOURCE
#include "ptw_thread_db.h"

#include <errno.h>
#include <proc_service.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ptw_attach.h"
#include "ptw_symbols.h"
#include "ptw_util.h"
#include "tdb_internal.h"

struct ptw_tdb {
	struct ps_prochandle ph;
	td_thragent_t *ta;
	/* struct pthread's report_events byte (0: not looked up yet; -1:
	 * none), and whether writing it directly is confirmed (1), refuted
	 * (-1) or not tried yet (0) */
	int report_events_off;
	int report_events_direct;
};

#define TD_ERRORS(X)                                                                               \
	X(TD_OK, "no error")                                                                       \
	X(TD_ERR, "generic error")                                                                 \
	X(TD_NOTHR, "no thread to satisfy query")                                                  \
	X(TD_NOSV, "no sync handle to satisfy query")                                              \
	X(TD_NOLWP, "no LWP to satisfy query")                                                     \
	X(TD_BADPH, "invalid process handle")                                                      \
	X(TD_BADTH, "invalid thread handle")                                                       \
	X(TD_BADSH, "invalid synchronization handle")                                              \
	X(TD_BADTA, "invalid thread agent")                                                        \
	X(TD_BADKEY, "invalid key")                                                                \
	X(TD_NOMSG, "no event message")                                                            \
	X(TD_NOFPREGS, "FPU register set not available")                                           \
	X(TD_NOLIBTHREAD, "the target does not use glibc's nptl (or has not loaded it yet)")      \
	X(TD_NOEVENT, "requested event is not supported")                                          \
	X(TD_NOCAPAB, "capability not available")                                                  \
	X(TD_DBERR, "debugger service failed")                                                     \
	X(TD_NOAPLIC, "operation not applicable")                                                  \
	X(TD_NOTSD, "no thread-specific data")                                                     \
	X(TD_MALLOC, "out of memory")                                                              \
	X(TD_PARTIALREG, "only part of the register set was written")                             \
	X(TD_NOXREGS, "X register set not available")                                              \
	X(TD_TLSDEFER, "thread has not yet allocated TLS for the module")                          \
	X(TD_VERSION, "libthread_db does not match the target's nptl version")                    \
	X(TD_NOTLS, "no TLS segment in the module")

const char *ptw_tdb_strerror(td_err_e err)
{
#define X(code, text)                                                                              \
	case code:                                                                                 \
		return #code ": " text;
	switch (err) {
		TD_ERRORS(X)
	}
#undef X
	return "TD_?: unknown libthread_db error";
}

static int td_to_errno(td_err_e err)
{
	switch (err) {
	case TD_OK:
		return 0;
	case TD_NOLIBTHREAD:
	case TD_NOTHR:
	case TD_NOLWP:
	case TD_NOMSG:
		return -ENOENT;
	case TD_VERSION:
		return -EPROTO;
	case TD_MALLOC:
		return -ENOMEM;
	case TD_NOCAPAB:
	case TD_NOAPLIC:
	case TD_NOEVENT:
		return -ENOTSUP;
	default:
		return -EIO;
	}
}

int ptw_tdb_new(struct ptw_proc *proc, struct ptw_symbols *syms, struct ptw_tdb **ret,
		td_err_e *ret_err)
{
	static bool initialised;
	if (!initialised) {
		td_err_e e = td_init();
		if (e != TD_OK) {
			if (ret_err)
				*ret_err = e;
			return td_to_errno(e);
		}
		initialised = true;
	}
	struct ptw_tdb *t = xcalloc(1, sizeof(*t));
	t->ph.proc = proc;
	t->ph.syms = syms;
	td_err_e e = td_ta_new(&t->ph, &t->ta);
	if (e != TD_OK && e != TD_NOLIBTHREAD && ptw_symbols_forget_cache(syms) > 0) {
		/* The symbol cache may be what is wrong (a valid entry with wrong
		 * answers: libthread_db finds the symbols it needs, and they do
		 * not fit): once more without it. (No nptl at all is no reason.)
		 * Both backends open their agent here. */
		ptw_dbg(PTW_DBG_TDB, "td_ta_new failed (%s) with cached symbols: again without",
			ptw_tdb_strerror(e));
		e = td_ta_new(&t->ph, &t->ta);
	}
	if (ret_err)
		*ret_err = e;
	if (e != TD_OK) {
		ptw_dbg(PTW_DBG_TDB, "td_ta_new: %s", ptw_tdb_strerror(e));
		free(t);
		return td_to_errno(e);
	}
	*ret = t;
	return 0;
}

void ptw_tdb_free(struct ptw_tdb *t)
{
	if (!t)
		return;
	td_ta_delete(t->ta);
	free(t);
}

static int event_addr(struct ptw_tdb *t, td_event_e ev, uint64_t *ret)
{
	td_notify_t n;
	td_err_e e = td_ta_event_addr(t->ta, ev, &n);
	if (e != TD_OK || n.type != NOTIFY_BPT) {
		ptw_dbg(PTW_DBG_TDB, "td_ta_event_addr(%d): %s", ev, ptw_tdb_strerror(e));
		return e != TD_OK ? td_to_errno(e) : -ENOTSUP;
	}
	*ret = (uint64_t)(uintptr_t)n.u.bptaddr;
	return 0;
}

int ptw_tdb_enable_events(struct ptw_tdb *t, bool want_create, uint64_t *ret_create_bp,
			  uint64_t *ret_death_bp)
{
	td_thr_events_t events;
	td_event_emptyset(&events);
	td_event_addset(&events, TD_DEATH);
	if (want_create)
		td_event_addset(&events, TD_CREATE);
	td_err_e e = td_ta_set_event(t->ta, &events);
	if (e != TD_OK) {
		ptw_dbg(PTW_DBG_TDB, "td_ta_set_event: %s", ptw_tdb_strerror(e));
		return td_to_errno(e);
	}
	*ret_create_bp = 0;
	int r = event_addr(t, TD_DEATH, ret_death_bp);
	if (r == 0 && want_create)
		r = event_addr(t, TD_CREATE, ret_create_bp);
	return r;
}

int ptw_tdb_disable_events(struct ptw_tdb *t)
{
	td_thr_events_t events;
	td_event_fillset(&events);
	int r = td_to_errno(td_ta_clear_event(t->ta, &events));
	/* The messages nobody popped (the tracer pops only with TD_CREATE on):
	 * the list is left empty, as before the session. A thread pushing to
	 * it meanwhile retries its compare-and-exchange. */
	psaddr_t head;
	static const uint64_t none;
	if (ps_pglobal_lookup(&t->ph, NULL, "__nptl_last_event", &head) == PS_OK)
		ps_pdwrite(&t->ph, head, &none, sizeof(none));
	return r;
}

static void fill_thread(const td_thrinfo_t *ti, struct ptw_tdb_thread *ret)
{
	ret->pthread = (uint64_t)ti->ti_tid;
	ret->lid = ti->ti_lid;
	ret->startfunc = (uint64_t)(uintptr_t)ti->ti_startfunc;
	ret->exiting = ti->ti_state == TD_THR_ZOMBIE;
	ret->traceme = ti->ti_traceme != 0;
}

int ptw_tdb_thread_info(struct ptw_tdb *t, uint64_t pd, struct ptw_tdb_thread *ret)
{
	td_thrhandle_t th = { .th_ta_p = t->ta, .th_unique = (psaddr_t)(uintptr_t)pd };
	td_thrinfo_t ti;
	td_err_e e = td_thr_get_info(&th, &ti);
	if (e != TD_OK)
		return td_to_errno(e);
	fill_thread(&ti, ret);
	return 0;
}

/* libthread_db's descriptor of a struct field: { bits, count, offset }. */
static int field_offset(struct ptw_tdb *t, const char *descriptor, uint32_t *ret_offset,
			uint32_t *ret_bits)
{
	psaddr_t addr;
	uint32_t desc[3];
	if (ps_pglobal_lookup(&t->ph, NULL, descriptor, &addr) != PS_OK ||
	    ps_pdread(&t->ph, addr, desc, sizeof(desc)) != PS_OK)
		return -ENOENT;
	*ret_bits = desc[0];
	*ret_offset = desc[2];
	return 0;
}

/* report_events's offset in struct pthread when it is a byte, or -1. */
static int report_events_offset(struct ptw_tdb *t)
{
	uint32_t off, bits;
	if (!t->report_events_off)
		t->report_events_off =
			field_offset(t, "_thread_db_pthread_report_events", &off, &bits) == 0 &&
					bits == 8 && off > 0 && off < 65536
				? (int)off
				: -1;
	return t->report_events_off;
}

int ptw_tdb_thread_enable(struct ptw_tdb *t, uint64_t pd)
{
	/* The byte libthread_db's own call writes (it writes
	 * __nptl_initial_report_events too): one write, confirmed by
	 * libthread_db the first time. */
	static const uint8_t one = 1;
	struct ptw_tdb_thread info;
	int off = report_events_offset(t);
	if (off > 0 && t->report_events_direct >= 0 &&
	    ptw_mem_write(t->ph.proc, pd + (uint64_t)off, &one, 1) == 0) {
		if (t->report_events_direct > 0)
			return 0;
		t->report_events_direct =
			ptw_tdb_thread_info(t, pd, &info) == 0 && info.traceme ? 1 : -1;
		if (t->report_events_direct > 0)
			return 0;
	}
	td_thrhandle_t th = { .th_ta_p = t->ta, .th_unique = (psaddr_t)(uintptr_t)pd };
	td_err_e e = td_thr_event_enable(&th, 1);
	if (e == TD_OK)
		return 0;
	/* TD_NOCAPAB on stock Debian: the write may still have happened. */
	if (ptw_tdb_thread_info(t, pd, &info) == 0 && info.traceme)
		return 0;
	ptw_dbg(PTW_DBG_TDB, "td_thr_event_enable(%#llx): %s", (unsigned long long)pd,
		ptw_tdb_strerror(e));
	return td_to_errno(e);
}

int ptw_tdb_pthread_field(struct ptw_tdb *t, const char *field, uint32_t *ret_offset)
{
	char name[96];
	uint32_t bits;
	snprintf(name, sizeof(name), "_thread_db_pthread_%s", field);
	return field_offset(t, name, ret_offset, &bits);
}

int ptw_tdb_read_symbol(struct ptw_tdb *t, const char *name, void *buf, size_t size)
{
	psaddr_t addr;
	if (ps_pglobal_lookup(&t->ph, NULL, name, &addr) != PS_OK ||
	    ps_pdread(&t->ph, addr, buf, size) != PS_OK)
		return -ENOENT;
	return 0;
}

static int threads_set(struct ptw_tdb *t, const uint64_t *pds, size_t n, uint8_t value)
{
	int off = report_events_offset(t);
	if (n > 2 && off > 0) {
		uint64_t *addrs = xcalloc(n, sizeof(*addrs));
		for (size_t i = 0; i < n; i++)
			addrs[i] = pds[i] + (uint64_t)off;
		int r = ptw_mem_write_scattered(t->ph.proc, addrs, n, &value, 1);
		free(addrs);
		/* Trust, but confirm with libthread_db itself. */
		struct ptw_tdb_thread a, b;
		if (r == 0 && ptw_tdb_thread_info(t, pds[0], &a) == 0 && a.traceme == value &&
		    ptw_tdb_thread_info(t, pds[n - 1], &b) == 0 && b.traceme == value)
			return 0;
	}
	int r = 0;
	for (size_t i = 0; i < n; i++) {
		td_thrhandle_t th = { .th_ta_p = t->ta, .th_unique = (psaddr_t)(uintptr_t)pds[i] };
		if (value ? ptw_tdb_thread_enable(t, pds[i]) < 0 : td_thr_event_enable(&th, 0) != TD_OK)
			r = -EIO;
	}
	return r;
}

int ptw_tdb_threads_enable(struct ptw_tdb *t, const uint64_t *pds, size_t n)
{
	return threads_set(t, pds, n, 1);
}

int ptw_tdb_threads_disable(struct ptw_tdb *t, const uint64_t *pds, size_t n)
{
	return threads_set(t, pds, n, 0);
}

int ptw_tdb_map_lwp(struct ptw_tdb *t, pid_t tid, uint64_t *ret_pd)
{
	td_thrhandle_t th;
	td_err_e e = td_ta_map_lwp2thr(t->ta, tid, &th);
	if (e != TD_OK)
		return td_to_errno(e);
	*ret_pd = (uint64_t)(uintptr_t)th.th_unique;
	return 0;
}

int ptw_tdb_drain(struct ptw_tdb *t, int max, ptw_tdb_msg_cb cb, void *ctx)
{
	int n = 0;
	for (; n < max; n++) {
		td_event_msg_t msg;
		td_err_e e = td_ta_event_getmsg(t->ta, &msg);
		if (e == TD_NOMSG)
			break;
		if (e != TD_OK)
			return td_to_errno(e);
		if (cb)
			cb(ctx, msg.event, msg.th_p ? (uint64_t)(uintptr_t)msg.th_p->th_unique : 0);
	}
	return n;
}

struct iter_state {
	struct ptw_map seen; /* th_unique -> (void *)1 */
	struct ptw_map pass; /* the same, in this pass: a handle met twice is a cycle */
	bool cycle;	     /* this pass was stopped at one */
	size_t new_in_pass;
	ptw_tdb_iter_cb cb;
	void *ctx;
	pid_t pid;
};

static int iter_one(const td_thrhandle_t *th, void *arg)
{
	struct iter_state *st = arg;
	uint64_t pd = (uint64_t)(uintptr_t)th->th_unique;
	if (pd && ptw_map_get(&st->pass, pd)) {
		/* The list changed under us (threads that run: a descriptor
		 * reused) and loops: stop this pass (td_ta_thr_iter would walk
		 * it for ever) and take another. */
		st->cycle = true;
		return 1;
	}
	if (pd)
		ptw_map_put(&st->pass, pd, (void *)1);
	if (!pd || ptw_map_get(&st->seen, pd))
		return 0;
	td_thrinfo_t ti;
	if (td_thr_get_info(th, &ti) != TD_OK)
		return 0;
	/* Not started yet, or exited and not joined: no LWP to follow. */
	if (ti.ti_tid == 0 || ti.ti_lid == -1 || ti.ti_lid == 0)
		return 0;
	/* Never take a non-main handle that claims the main LWP (docs/design.md, Facts, 8). */
	if (ti.ti_lid == st->pid && ti.ti_startfunc != NULL)
		return 0;
	ptw_map_put(&st->seen, pd, (void *)1);
	st->new_in_pass++;
	struct ptw_tdb_thread out;
	fill_thread(&ti, &out);
	st->cb(st->ctx, &out);
	return 0;
}

int ptw_tdb_iterate(struct ptw_tdb *t, bool all_stopped, ptw_tdb_iter_cb cb, void *ctx)
{
	struct iter_state st = { .cb = cb, .ctx = ctx, .pid = ps_getpid(&t->ph) };
	int r = 0;
	/* With every LWP stopped the list cannot change: the first pass is the
	 * whole truth. Otherwise repeat until passes find nothing new. */
	int quiet_needed = all_stopped ? 0 : 2, looped = 0;
	for (int quiet = 0, passes = 0; (passes == 0 || quiet < quiet_needed) && passes < 64;
	     passes++) {
		st.new_in_pass = 0;
		st.cycle = false;
		ptw_map_free(&st.pass);
		ptw_map_free(&t->ph.walk_reads);
		t->ph.walking = true;
		t->ph.walk_looped = false;
		td_err_e e = td_ta_thr_iter(t->ta, iter_one, &st, TD_THR_ANY_STATE,
					    TD_THR_LOWEST_PRIORITY, TD_SIGNO_MASK,
					    TD_THR_ANY_USER_FLAGS);
		t->ph.walking = false;
		if (t->ph.walk_looped && (all_stopped || ++looped == 3)) {
			/* Not a list changing under a running walk: one that
			 * loops. What was met before the loop stays listed. */
			r = -ELOOP;
			break;
		}
		if (e != TD_OK && !st.cycle && !t->ph.walk_looped) {
			r = td_to_errno(e);
			break;
		}
		quiet = st.new_in_pass || st.cycle || t->ph.walk_looped ? 0 : quiet + 1;
	}
	ptw_map_free(&t->ph.walk_reads);
	ptw_map_free(&st.seen);
	ptw_map_free(&st.pass);
	return r;
}

char *ptw_nptl_version(struct ptw_proc *proc, struct ptw_symbols *syms)
{
	uint64_t addr;
	char v[32] = { 0 };
	if (!syms ||
	    (ptw_symbols_lookup(syms, PTW_MOD_ANY, "__nptl_version", &addr, NULL) < 0 &&
	     ptw_symbols_lookup(syms, PTW_MOD_ANY, "nptl_version", &addr, NULL) < 0) ||
	    /* (the file's bytes first: reading the process takes its
	     * memory-map lock, which a thread being made waits for) */
	    (ptw_symbols_read_file(syms, addr, v, 8) < 0 && ptw_mem_read(proc, addr, v, 8) < 0))
		return NULL;
	v[strnlen(v, sizeof(v) - 1)] = '\0';
	return v[0] ? xstrdup(v) : NULL;
}
