/* SPDX-License-Identifier: MIT */
/*
 * Text output: the summary at the end (per routine, per thread,
 * distributions, deadlocks, warnings) and --snapshot's text.
 */
#define _GNU_SOURCE
#include "text_int.h"

/* ---- summary ---- */

static void dist_line(struct ptw_buf *out, const char *name, const struct ptw_distribution *d)
{
	ptw_buf_printf(out, "  %-14s", name);
	if (!d->count) {
		ptw_buf_puts(out, "-\n");
		return;
	}
	ptw_buf_printf(out, "n=%" PRIu64 "  min ", d->count);
	ptw_text_duration(out, d->min);
	ptw_buf_puts(out, "  p50 ");
	ptw_text_duration(out, d->p50);
	ptw_buf_puts(out, "  p90 ");
	ptw_text_duration(out, d->p90);
	ptw_buf_puts(out, "  p99 ");
	ptw_text_duration(out, d->p99);
	ptw_buf_puts(out, "  max ");
	ptw_text_duration(out, d->max);
	ptw_buf_putc(out, '\n');
}

/* A text table: cells are collected, then printed with measured widths. */
#define TABLE_COLS 11
struct table {
	char **cells; /* rows * TABLE_COLS */
	size_t rows, cap;
	bool cpu; /* the thread table: a CPU column (some span's is known) */
};

static void table_row(struct table *t, char *const cells[TABLE_COLS])
{
	if (t->rows == t->cap) {
		t->cap = t->cap ? t->cap * 2 : 16;
		t->cells = xreallocarray(t->cells, t->cap * TABLE_COLS, sizeof(char *));
	}
	for (int c = 0; c < TABLE_COLS; c++)
		t->cells[t->rows * TABLE_COLS + c] = cells[c] ? cells[c] : xstrdup("");
	t->rows++;
}

#define TABLE_MAX_PAD 120 /* columns are padded to at most this many bytes */

static void table_print(struct ptw_buf *out, struct table *t, unsigned right_aligned)
{
	size_t w[TABLE_COLS] = { 0 };
	for (size_t r = 0; r < t->rows; r++)
		for (int c = 0; c < TABLE_COLS; c++) {
			size_t len = strlen(t->cells[r * TABLE_COLS + c]);
			/* A longer cell is printed whole, but pads no other row:
			 * one name of 200 MB must not make every row as long. */
			if (len > w[c])
				w[c] = len < TABLE_MAX_PAD ? len : TABLE_MAX_PAD;
		}
	for (size_t r = 0; r < t->rows; r++) {
		ptw_buf_puts(out, " ");
		for (int c = 0; c < TABLE_COLS; c++) {
			char *cell = t->cells[r * TABLE_COLS + c];
			bool right = right_aligned & (1u << c);
			bool last = c == TABLE_COLS - 1;
			if (!w[c])
				; /* an empty column is not printed */
			else if (last && !right)
				ptw_buf_printf(out, " %s", cell);
			else if (right)
				ptw_buf_printf(out, " %*s", (int)w[c], cell);
			else
				ptw_buf_printf(out, " %-*s", (int)w[c], cell);
			free(cell);
		}
		/* no trailing blanks */
		while (out->len && out->p[out->len - 1] == ' ')
			out->len--;
		ptw_buf_putc(out, '\n');
	}
	free(t->cells);
	memset(t, 0, sizeof(*t));
}

/* A table not printed after all. */
static void table_free(struct table *t)
{
	for (size_t i = 0; i < t->rows * TABLE_COLS; i++)
		free(t->cells[i]);
	free(t->cells);
	memset(t, 0, sizeof(*t));
}

static char *duration_str(uint64_t ns)
{
	struct ptw_buf b = { 0 };
	ptw_text_duration(&b, ns);
	return b.p;
}

static void span_row(struct table *t, const struct ptw_span *sp)
{
	char *c[TABLE_COLS] = { 0 };
	struct ptw_buf b = { 0 };
	c[0] = xasprintf("%u", sp->id);
	c[1] = xasprintf("%d", sp->tid);
	c[2] = sp->creator_tid ? xasprintf("%d", sp->creator_tid) : xstrdup("-");
	c[3] = sp->name ? ptw_escape_str(sp->name) : xstrdup("-");
	/* A raw clone() not made through glibc's clone() or any thread of
	 * strategy "lwp" has no start routine to name, nor has a main thread
	 * whose main() was not found (a stripped static program; Go without
	 * cgo has none): "-", as the JSON's null. */
	if (sp->start_routine)
		ptw_text_location(&b, sp->start_routine,
				  sp->origin == PTW_ORIGIN_MAIN ? "main" : NULL);
	else
		ptw_buf_putc(&b, '-');
	c[4] = b.p;
	c[5] = xstrdup(ptw_status_name(sp->status));
	if (sp->status == PTW_STATUS_CANCELLED && sp->value.v == UINT64_MAX)
		c[6] = xstrdup("CANCELED");
	else
		c[6] = sp->value.set ? xasprintf("%#" PRIx64, sp->value.v) : xstrdup("-");
	c[7] = sp->origin != PTW_ORIGIN_MAIN && sp->create_ns.set && sp->start_ns.set &&
			       sp->start_ns.v >= sp->create_ns.v
		       ? duration_str(sp->start_ns.v - sp->create_ns.v)
		       : xstrdup("-");
	c[8] = !t->cpu ? NULL : sp->cpu.set ? duration_str(sp->cpu.on_cpu_ns) : xstrdup("-");
	struct ptw_buf n = { 0 };
	uint64_t lifetime;
	if (ptw_span_lifetime(sp, &lifetime))
		ptw_text_duration(&n, lifetime);
	else
		ptw_buf_putc(&n, '-');
	if (sp->joined && sp->join_return_ns.set) {
		ptw_buf_printf(&n, ", joined by %d after ", sp->joiner_tid);
		ptw_text_duration(&n, sp->join_return_ns.v - sp->join_call_ns);
	}
	if (sp->detached == 1)
		ptw_buf_puts(&n, ", detached");
	if (sp->reason && sp->status == PTW_STATUS_UNMATCHED) {
		ptw_buf_puts(&n, ", ");
		ptw_buf_put_escaped(&n, sp->reason);
	}
	if (sp->uncertain)
		ptw_buf_puts(&n, ", uncertain");
	text_slow_text(&n, sp, ", ", "");
	c[9] = n.p;
	table_row(t, c);
}

/* The CPU of each start routine's threads together (the pools), most
 * first, under the thread table (the grouped rows have it in a column). */
#define CPU_ROUTINES_SHOWN 5
static int by_cpu(const void *x, const void *y)
{
	const struct ptw_group *a = x, *b = y;
	return (a->cpu_ns < b->cpu_ns) - (a->cpu_ns > b->cpu_ns);
}

static void cpu_by_routine(struct ptw_buf *out, struct ptw_spans *spans)
{
	struct ptw_group *g;
	size_t ng = ptw_spans_groups(spans, &g), shown = 0;
	if (ng > 1)
		qsort(g, ng, sizeof(*g), by_cpu);
	size_t k = 0;
	for (; k < ng && shown < CPU_ROUTINES_SHOWN; k++) {
		if (!g[k].cpu_spans)
			continue;
		ptw_buf_puts(out, shown++ ? "; " : "  cpu per start routine: ");
		ptw_buf_put_escaped(out, g[k].routine);
		ptw_buf_printf(out, " %" PRIu64 " thread%s ", g[k].cpu_spans,
			       g[k].cpu_spans == 1 ? "" : "s");
		ptw_text_duration(out, g[k].cpu_ns);
	}
	bool more = false; /* (a routine whose threads' CPU is known, not shown) */
	for (; k < ng && !more; k++)
		more = g[k].cpu_spans > 0;
	if (shown && more)
		ptw_buf_puts(out, "; ...");
	if (shown)
		ptw_buf_putc(out, '\n');
	ptw_groups_free(g, ng);
}

static void grouped_rows(struct ptw_buf *out, struct ptw_spans *spans)
{
	struct ptw_group *g;
	size_t ng = ptw_spans_groups(spans, &g);
	/* The LWP EXITED column only when there are such spans (a column
	 * whose cells and header are empty is not printed). */
	bool lwp = false, cpu = false;
	for (size_t k = 0; k < ng; k++) {
		lwp |= g[k].by_status[PTW_STATUS_LWP_EXITED] != 0;
		cpu |= g[k].cpu_spans != 0;
	}
	struct table tab = { 0 };
	char *hdr[TABLE_COLS] = { xstrdup("THREADS"),
				  xstrdup("START ROUTINE"),
				  xstrdup("COMPLETED"),
				  xstrdup("EXITED"),
				  lwp ? xstrdup("LWP EXITED") : NULL,
				  xstrdup("CANCELLED"),
				  xstrdup("UNMATCHED"),
				  xstrdup("OPEN"),
				  xstrdup("SPAWN p50"),
				  xstrdup("LIFETIME p50"),
				  cpu ? xstrdup("CPU") : NULL };
	table_row(&tab, hdr);
	for (size_t k = 0; k < ng; k++) {
		struct ptw_distribution ds, dl;
		ptw_dacc_result(&g[k].spawn, &ds);
		ptw_dacc_result(&g[k].life, &dl);
		char *c[TABLE_COLS] = {
			xasprintf("%" PRIu64, g[k].count),
			ptw_escape_str(g[k].routine),
			xasprintf("%" PRIu64, g[k].by_status[PTW_STATUS_COMPLETED]),
			xasprintf("%" PRIu64, g[k].by_status[PTW_STATUS_EXITED]),
			lwp ? xasprintf("%" PRIu64, g[k].by_status[PTW_STATUS_LWP_EXITED]) : NULL,
			xasprintf("%" PRIu64, g[k].by_status[PTW_STATUS_CANCELLED]),
			xasprintf("%" PRIu64, g[k].by_status[PTW_STATUS_UNMATCHED]),
			xasprintf("%" PRIu64, g[k].by_status[PTW_STATUS_OPEN]),
			ds.count ? duration_str(ds.p50) : xstrdup("-"),
			dl.count ? duration_str(dl.p50) : xstrdup("-"),
			!cpu		  ? NULL
			: g[k].cpu_spans ? duration_str(g[k].cpu_ns)
					  : xstrdup("-"),
		};
		table_row(&tab, c);
	}
	table_print(out, &tab, 0xfd);
	ptw_groups_free(g, ng);
}

/* How the process ended or what it is now (checked: the backend's check_fate). */
static void span_row(struct table *t, const struct ptw_span *sp);

/* The thread table's header row (the summary's, and each process's); a
 * CPU column (time on a CPU) where some span's is known. */
static void span_table_header(struct table *tab, const struct ptw_spans *spans)
{
	for (size_t i = 0; i < ptw_spans_count(spans) && !tab->cpu; i++)
		tab->cpu = ptw_spans_get(spans, i)->cpu.set;
	char *hdr[TABLE_COLS] = { xstrdup("SPAN"),	    xstrdup("TID"),
				  xstrdup("CREATOR"),	    xstrdup("NAME"),
				  xstrdup("START ROUTINE"), xstrdup("STATUS"),
				  xstrdup("VALUE"),	    xstrdup("SPAWN"),
				  tab->cpu ? xstrdup("CPU") : NULL,
				  xstrdup("LIFETIME") };
	table_row(tab, hdr);
}

/* --object: is sp one of the threads it involves (every span without)? */
static bool involves(const struct ptw_map *involved, const struct ptw_span *sp)
{
	return !involved || ptw_map_get(involved, (uint64_t)sp->tid);
}

/* -f: the spans grouped by process, each under a line that says what the
 * process was and how it ended (the table per process only while the
 * whole fits TABLE_MAX_ROWS; else one line per process, at most 50). */
static void processes_summary(struct ptw_buf *out, const struct ptw_report *r,
			      const struct ptw_map *involved)
{
	size_t n = ptw_spans_count(r->spans);
	bool tables = n <= TABLE_MAX_ROWS;
	size_t shown = 0;
	for (size_t i = 0; i < r->nprocesses; i++) {
		const struct ptw_process *p = &r->processes[i];
		size_t threads = 0, created = 0;
		for (size_t k = 0; k < n; k++) {
			const struct ptw_span *sp = ptw_spans_get(r->spans, k);
			if (sp->process == p->id) {
				threads++;
				created += sp->origin == PTW_ORIGIN_CREATED;
			}
		}
		if (!tables && shown == 50) {
			ptw_buf_printf(
				out, "  ... and %zu more processes (the JSON document lists all)\n",
				r->nprocesses - i);
			break;
		}
		shown++;
		const char *exe = p->exe ? strrchr(p->exe, '/') : NULL;
		exe = exe ? exe + 1 : p->exe ? p->exe : "?";
		ptw_buf_printf(out, "  process %d ", p->pid);
		ptw_buf_put_escaped(out, exe);
		if (p->id)
			ptw_buf_printf(out, ", forked by %d (thread %d)", p->ppid, p->parent_tid);
		ptw_buf_printf(out, ": %zu thread%s (%zu created)", threads,
			       threads == 1 ? "" : "s", created);
		if (!p->followed) {
			ptw_buf_puts(out, ", not followed: ");
			ptw_buf_put_escaped(out, p->not_followed_why ? p->not_followed_why : "?");
		}
		if (p->exit_kind == PTW_EXIT_CODE)
			ptw_buf_printf(out, ", exited with code %d", p->exit_code);
		else if (p->exit_kind == PTW_EXIT_SIGNAL)
			ptw_buf_printf(out, ", killed by %s%s", ptw_signame(p->exit_signal),
				       p->core_dumped ? " (core dumped)" : "");
		else if (p->detached)
			ptw_buf_puts(out, ", let go");
		ptw_buf_putc(out, '\n');
		if (!tables || !threads)
			continue;
		struct table tab = { 0 };
		span_table_header(&tab, r->spans);
		size_t rows = 0;
		for (size_t k = 0; k < n; k++) {
			const struct ptw_span *sp = ptw_spans_get(r->spans, k);
			if (sp->process == p->id && involves(involved, sp)) {
				span_row(&tab, sp);
				rows++;
			}
		}
		if (rows)
			table_print(out, &tab, 0x7 | 0x80 | 0x100);
		else
			table_free(&tab);
	}
}

/* "detached", or "detached (interrupted)": why, when the reason says more. */
static void detached_text(struct ptw_buf *out, const struct ptw_report *r)
{
	if (r->end_reason && strcmp(r->end_reason, "detached")) {
		ptw_buf_puts(out, "detached (");
		ptw_buf_put_escaped(out, r->end_reason); /* a report's: from a file */
		ptw_buf_putc(out, ')');
	} else {
		ptw_buf_puts(out, "detached");
	}
}

static void fate_line(struct ptw_buf *out, const struct ptw_report *r)
{
	if (r->end_reason && !strcmp(r->end_reason, "tracer_died")) {
		ptw_buf_printf(out, "the record ends where ptwatch's tracer died (process %d)\n",
			       r->pid);
		return;
	}
	if (r->end_reason && !strcmp(r->end_reason, "cut")) { /* `ptwatch report` of a cut stream */
		ptw_buf_printf(out, "the stream was cut: how process %d ended is not in it\n",
			       r->pid);
		return;
	}
	if (r->fate == PTW_FATE_ENDED) {
		if (r->after_detach) {
			detached_text(out, r);
			ptw_buf_puts(out, ", then ");
		}
		if (r->exit_kind == PTW_EXIT_SIGNAL)
			ptw_buf_printf(out, "process %s by %s%s\n",
				       r->after_detach ? "was killed" : "killed",
				       ptw_signame(r->exit_signal),
				       r->core_dumped ? " (core dumped)" : "");
		else
			ptw_buf_printf(out, "process exited with code %d\n", r->exit_code);
		return;
	}
	detached_text(out, r);
	ptw_buf_printf(out, ", process %d ", r->pid);
	switch (r->fate) {
	case PTW_FATE_LIVES_ON:
		ptw_buf_puts(out, "lives on\n");
		break;
	case PTW_FATE_STOPPED:
		ptw_buf_puts(out, "lives on, stopped\n");
		break;
	case PTW_FATE_TRACED:
		if (r->traced_by == getpid())
			ptw_buf_puts(out, "lives on; threads that did not stop are let go as "
					  "ptwatch exits\n");
		else
			ptw_buf_printf(out, "lives on, traced by %d\n", r->traced_by);
		break;
	case PTW_FATE_ZOMBIE:
		ptw_buf_puts(out, "has ended since (a zombie, not yet reaped by its parent)\n");
		break;
	default:
		ptw_buf_puts(out, "has ended since\n");
		break;
	}
}

/* The session signals and what ptwatch did about them. */
static void interrupts_line(struct ptw_buf *out, const struct ptw_report *r)
{
	if (!r->ninterrupts)
		return;
	ptw_buf_puts(out, "  interrupts:");
	for (size_t i = 0; i < r->ninterrupts; i++) {
		const struct ptw_interrupt *in = &r->interrupts[i];
		uint64_t rel = in->ns >= r->start_ns ? in->ns - r->start_ns : 0;
		ptw_buf_printf(out, "%s %s at %.3f s (%s%s)", i ? "," : "", ptw_signame(in->sig),
			       (double)rel / 1e9,
			       in->reached_target ? "reached the process too, " : "",
			       in->action == PTW_INTR_TRACED_ON ? "traced on" : "detached");
	}
	ptw_buf_putc(out, '\n');
}

/* --trace: at most this many frames listed per thread (the JSON has all). */
#define FRAMES_PER_THREAD 20

static int by_thread_then_id(const void *x, const void *y)
{
	const struct ptw_frame *a = *(const struct ptw_frame *const *)x;
	const struct ptw_frame *b = *(const struct ptw_frame *const *)y;
	if (a->thread_span != b->thread_span)
		return a->thread_span < b->thread_span ? -1 : 1;
	if (a->tid != b->tid)
		return a->tid < b->tid ? -1 : 1;
	return a->id < b->id ? -1 : a->id > b->id;
}

static void frame_line(struct ptw_buf *out, const struct ptw_frame *fr)
{
	ptw_buf_printf(out, "    %*s{%u} ", (int)(fr->depth - 1) * 2, "", fr->id);
	ptw_text_location(out, fr->function, NULL);
	if (fr->sig)
		ptw_buf_printf(out, " (signal %s)", ptw_signame(fr->sig));
	if (fr->entry_unknown)
		ptw_buf_puts(out, "  (entered before ptwatch came)");
	if (fr->status == PTW_FRAME_COMPLETED) {
		if (!fr->entry_unknown) {
			ptw_buf_puts(out, "  ");
			ptw_text_duration(out, fr->return_ns - fr->entry_ns);
		}
	} else if (fr->status == PTW_FRAME_UNMATCHED) {
		ptw_buf_puts(out, "  unmatched (");
		ptw_buf_put_escaped(out, fr->reason ? fr->reason : "?");
		ptw_buf_putc(out, ')');
		if (fr->has_left && fr->left_ns >= fr->entry_ns && !fr->entry_unknown) {
			ptw_buf_puts(out, " after ");
			ptw_text_duration(out, fr->left_ns - fr->entry_ns);
		}
	} else {
		ptw_buf_puts(out, "  open");
	}
	if (fr->open) {
		ptw_buf_puts(out, " (slow: open past ");
		ptw_text_duration(out, fr->open->for_ns);
		ptw_buf_putc(out, ')');
	}
	ptw_buf_putc(out, '\n');
}

/* Each thread's frames below it, nested by depth; then per function. */
static void frames_summary(struct ptw_buf *out, const struct ptw_report *r)
{
	const struct ptw_frames *f = ptw_spans_frames(r->spans);
	size_t n = ptw_frames_count(f);
	uint64_t calls, completed, unmatched;
	ptw_frames_totals(f, &calls, &completed, &unmatched);
	if (!calls)
		return;
	const struct ptw_frame **all = xcalloc(n + 1, sizeof(*all));
	for (size_t i = 0; i < n; i++)
		all[i] = ptw_frames_get(f, i);
	ptw_buf_printf(out,
		       "  frames: %" PRIu64 " calls, %" PRIu64 " completed, %" PRIu64
		       " unmatched, %" PRIu64 " open\n",
		       calls, completed, unmatched, calls - completed - unmatched);
	/* --json-lines: the calls that ended are in the stream, not here */
	if (calls > n && !n)
		ptw_buf_puts(out, "  (each call: in the stream)\n");
	qsort(all, n, sizeof(*all), by_thread_then_id);
	for (size_t i = 0; i < n;) {
		size_t k = i;
		while (k < n && all[k]->thread_span == all[i]->thread_span &&
		       all[k]->tid == all[i]->tid)
			k++;
		const struct ptw_span *sp =
			all[i]->thread_span ? ptw_spans_by_id(r->spans, all[i]->thread_span) : NULL;
		ptw_buf_printf(out, "  thread %d", all[i]->tid);
		if (sp) {
			ptw_buf_printf(out, " [%u] ", sp->id);
			ptw_text_location(out, sp->start_routine,
					  sp->origin == PTW_ORIGIN_MAIN ? "main" : NULL);
		}
		ptw_buf_printf(out, ": %zu calls\n", k - i);
		for (size_t m = i; m < k && m < i + FRAMES_PER_THREAD; m++)
			frame_line(out, all[m]);
		if (k - i > FRAMES_PER_THREAD)
			ptw_buf_printf(out, "    ... %zu more (all in --json)\n",
				       k - i - FRAMES_PER_THREAD);
		i = k;
	}
	free(all);

	struct ptw_function_stats *st;
	size_t nst = ptw_frames_stats(f, &st);
	struct table tab = { 0 };
	char *hdr[TABLE_COLS] = { xstrdup("FUNCTION"), xstrdup("CALLS"), xstrdup("RETURNED"),
				  xstrdup("TOTAL"),    xstrdup("SELF"),	 xstrdup("MIN"),
				  xstrdup("P50"),      xstrdup("P99"),	 xstrdup("MAX") };
	table_row(&tab, hdr);
	for (size_t i = 0; i < nst; i++) {
		struct ptw_buf b = { 0 };
		ptw_text_location(&b, st[i].function, NULL);
		bool any = st[i].timed > 0;
		char *c[TABLE_COLS] = {
			b.p,
			xasprintf("%" PRIu64, st[i].calls),
			xasprintf("%" PRIu64, st[i].completed),
			any ? duration_str(st[i].total_ns) : xstrdup("-"),
			any ? duration_str(st[i].self_ns) : xstrdup("-"),
			any ? duration_str(st[i].min_ns) : xstrdup("-"),
			any ? duration_str(st[i].p50_ns) : xstrdup("-"),
			any ? duration_str(st[i].p99_ns) : xstrdup("-"),
			any ? duration_str(st[i].max_ns) : xstrdup("-"),
		};
		table_row(&tab, c);
	}
	table_print(out, &tab, 0x1fe);
	free(st);
}

/* --object: the threads that waited on, or held, a matching object (of
 * the waits the engine holds); NULL without --object. */
static struct ptw_map *object_threads(const struct ptw_report *r)
{
	if (!r->filter || !r->filter->object)
		return NULL;
	struct ptw_map *m = xcalloc(1, sizeof(*m));
	const struct ptw_locks *l = ptw_spans_locks(r->spans);
	for (size_t i = 0; i < ptw_locks_count(l); i++) {
		const struct ptw_wait *w = ptw_locks_get(l, i);
		if (!ptw_span_filter_object(r->filter, w->object, w->object_loc))
			continue;
		ptw_map_put(m, (uint64_t)w->tid, (void *)1);
		if (w->owner > 0)
			ptw_map_put(m, (uint64_t)w->owner, (void *)1);
	}
	return m;
}

/* --object: does the object at addr pass (by its address, or by the name
 * a wait on it gave it)? */
static bool object_passes(const struct ptw_report *r, uint64_t addr)
{
	if (ptw_span_filter_object(r->filter, addr, NULL))
		return true;
	const struct ptw_locks *l = ptw_spans_locks(r->spans);
	for (size_t i = 0; i < ptw_locks_count(l); i++) {
		const struct ptw_wait *w = ptw_locks_get(l, i);
		if (w->object == addr && w->object_loc)
			return ptw_span_filter_object(r->filter, addr, w->object_loc);
	}
	return false;
}

static void object_threads_free(struct ptw_map *m)
{
	if (m)
		ptw_map_free(m);
	free(m);
}

/* --object: a wait on one of its objects? */
static bool on_object(const struct ptw_wait *w, void *ctx)
{
	const struct ptw_report *r = ctx;
	return ptw_span_filter_object(r->filter, w->object, w->object_loc);
}

/* --locks: the waits, the most contended objects, time waited per thread,
 * the deadlocks found while tracing. */
#define OBJECTS_SHOWN 10
static void waits_summary(struct ptw_buf *out, const struct ptw_report *r)
{
	const struct ptw_locks *l = ptw_spans_locks(r->spans);
	size_t nd = ptw_locks_deadlock_count(l);
	struct ptw_wait_totals tt;
	ptw_locks_totals(l, &tt);
	if (!tt.count && !r->locks)
		return;
	ptw_buf_printf(out, "  waits: %" PRIu64 " contended", tt.count);
	if (tt.before_attach)
		ptw_buf_printf(out, " (%" PRIu64 " under way when ptwatch came)", tt.before_attach);
	ptw_buf_printf(out, ", %" PRIu64 " completed, ", tt.completed);
	ptw_text_duration(out, tt.total_ns);
	ptw_buf_puts(out, " waited in all");
	if (tt.completed > tt.timed) /* (begun before the attach: no duration) */
		ptw_buf_printf(out, " by %" PRIu64, tt.timed);
	ptw_buf_printf(out, "; %zu deadlock%s\n", nd, nd == 1 ? "" : "s");
	const struct ptw_span_filter *of = r->filter && r->filter->object ? r->filter : NULL;
	if (of) {
		ptw_buf_puts(out, "  (--object ");
		ptw_buf_put_escaped(out, of->object);
		ptw_buf_puts(out, ": its objects, their waiters and owners)\n");
	}
	struct ptw_object_stats *st;
	size_t nst = ptw_locks_object_stats(l, &st);
	if (of) { /* the matching ones, in the same order */
		size_t k = 0;
		for (size_t i = 0; i < nst; i++)
			if (ptw_span_filter_object(of, st[i].object, st[i].object_loc)) {
				struct ptw_object_stats x = st[k];
				st[k++] = st[i];
				st[i] = x;
			}
		for (size_t i = k; i < nst; i++) {
			free(st[i].tids);
			free(st[i].sites);
		}
		nst = k;
	}
	if (nst) {
		struct table tab = { 0 };
		char *hdr[TABLE_COLS] = { xstrdup("OBJECT"),	xstrdup("KIND"), xstrdup("WAITS"),
					  xstrdup("TOTAL"),	xstrdup("MAX"),	 xstrdup("THREADS"),
					  xstrdup("CALL SITES") };
		table_row(&tab, hdr);
		for (size_t i = 0; i < nst && i < OBJECTS_SHOWN; i++) {
			struct ptw_buf o = { 0 }, th = { 0 }, si = { 0 };
			if (st[i].object_loc && st[i].object_loc->symbol)
				ptw_buf_put_escaped(&o, st[i].object_loc->symbol);
			else
				ptw_buf_printf(&o, "%#" PRIx64, st[i].object);
			for (size_t k = 0; k < st[i].ntids; k++)
				ptw_buf_printf(&th, "%s%d", k ? "," : "", st[i].tids[k]);
			for (size_t k = 0; k < st[i].nsites && k < 3; k++) {
				ptw_buf_puts(&si, k ? ", " : "");
				ptw_text_location(&si, st[i].sites[k], NULL);
			}
			if (st[i].nsites > 3)
				ptw_buf_printf(&si, ", ... (%zu)", st[i].nsites);
			char *c[TABLE_COLS] = {
				o.p,
				xstrdup(ptw_wait_object_kind(st[i].kind)),
				xasprintf("%" PRIu64, st[i].waits),
				st[i].timed ? duration_str(st[i].total_ns) : xstrdup("-"),
				st[i].timed ? duration_str(st[i].max_ns) : xstrdup("-"),
				th.p ? th.p : xstrdup("-"),
				si.p ? si.p : xstrdup("-"),
			};
			table_row(&tab, c);
		}
		table_print(out, &tab, 0x1c);
		if (nst > OBJECTS_SHOWN)
			ptw_buf_printf(out, "    ... %zu more objects (all in --json)\n",
				       nst - OBJECTS_SHOWN);
	}
	ptw_object_stats_free(st, nst);
	struct ptw_thread_waits *tw;
	size_t ntw = ptw_locks_thread_stats_of(l, of ? on_object : NULL, (void *)r, &tw);
	for (size_t i = 0; i < ntw; i++) {
		ptw_buf_printf(out, "  thread %d", tw[i].tid);
		if (tw[i].thread_span)
			ptw_buf_printf(out, " [%u]", tw[i].thread_span);
		ptw_buf_printf(out, " waited %" PRIu64 " time%s", tw[i].waits,
			       tw[i].waits == 1 ? "" : "s");
		if (tw[i].timed) {
			ptw_buf_puts(out, ", ");
			ptw_text_duration(out, tw[i].total_ns);
			ptw_buf_puts(out, " in all, at most ");
			ptw_text_duration(out, tw[i].max_ns);
		}
		if (tw[i].completed > tw[i].timed)
			ptw_buf_printf(out, " (%" PRIu64 " begun before ptwatch came)",
				       tw[i].completed - tw[i].timed);
		if (tw[i].waits > tw[i].completed)
			ptw_buf_printf(out, " (%" PRIu64 " not finished)",
				       tw[i].waits - tw[i].completed);
		ptw_buf_putc(out, '\n');
	}
	free(tw);
	for (size_t i = 0; i < nd; i++) {
		const struct ptw_live_deadlock *d = ptw_locks_deadlock(l, i);
		bool shown = !of;
		for (size_t k = 0; k < d->n && !shown; k++)
			shown = object_passes(r, d->objects[k]);
		if (!shown)
			continue;
		ptw_buf_printf(out, "  DEADLOCK #%u: threads", d->id);
		for (size_t k = 0; k < d->n; k++)
			ptw_buf_printf(out, " %d", d->tids[k]);
		ptw_buf_puts(out, " wait for each other (");
		for (size_t k = 0; k < d->n; k++)
			ptw_buf_printf(out, "%s%#" PRIx64, k ? ", " : "", d->objects[k]);
		ptw_buf_puts(out, ")");
		if (d->proof != PTW_PROOF_STOPPED)
			ptw_buf_printf(out, ", confirmed %s", ptw_deadlock_proof_text(d->proof));
		ptw_buf_putc(out, '\n');
	}
}

void ptw_text_summary(struct ptw_buf *out, const struct ptw_report *r)
{
	struct ptw_metrics m;
	ptw_spans_metrics(r->spans, &m);
	ptw_buf_printf(out,
		       "\nptwatch: %" PRIu64 " threads (%" PRIu64 " created), at most %" PRIu64
		       " at once, nesting depth %" PRIu64 "; ",
		       m.threads_seen, m.threads_created, m.max_active, m.max_depth);
	fate_line(out, r);
	interrupts_line(out, r);

	size_t n = ptw_spans_count(r->spans);
	struct ptw_map *involved = object_threads(r); /* --object */
	/* (streaming keeps every span of a session this short: PTW_SPANS_KEEP) */
	if (r->nprocesses > 1) {
		processes_summary(out, r, involved);
	} else if (involved || (ptw_spans_total(r->spans) <= TABLE_MAX_ROWS && n <= TABLE_MAX_ROWS)) {
		/* (--object: its threads only, however many the session had) */
		struct table tab = { 0 };
		span_table_header(&tab, r->spans);
		size_t rows = 0, more = 0;
		for (size_t i = 0; i < n; i++) {
			const struct ptw_span *sp = ptw_spans_get(r->spans, i);
			if (!involves(involved, sp))
				continue;
			if (rows < TABLE_MAX_ROWS) {
				span_row(&tab, sp);
				rows++;
			} else {
				more++;
			}
		}
		table_print(out, &tab, 0x7 | 0x80 | 0x100);
		if (more)
			ptw_buf_printf(out, "  ... %zu more threads (all in --json)\n", more);
		if (!involved)
			cpu_by_routine(out, r->spans);
	} else {
		grouped_rows(out, r->spans);
	}
	object_threads_free(involved);
	dist_line(out, "spawn latency", &m.spawn_latency);
	dist_line(out, "lifetime", &m.lifetime);
	dist_line(out, "join wait", &m.join_wait);
	ptw_buf_printf(out, "  unjoined %" PRIu64 ", unmatched %" PRIu64 ", open %" PRIu64,
		       m.unjoined, m.unmatched_spans, m.open_spans);
	if (m.open_timeouts) {
		ptw_buf_printf(out, ", %" PRIu64 " seen open past ", m.open_timeouts);
		ptw_text_duration(out, r->open_timeout_ns);
	}
	ptw_buf_putc(out, '\n');
	frames_summary(out, r);
	waits_summary(out, r);
	if (r->end_reason && !strcmp(r->end_reason, "cut")) { /* they are in its last line */
		ptw_buf_puts(out,
			     "  ptrace stops, breakpoints, strategy: not in the stream (cut)\n");
		goto warnings;
	}
	if (r->backend && !strcmp(r->backend, "kernel")) {
		/* Nothing stopped: what observed instead, and why it could. */
		ptw_buf_printf(out, "  kernel path: %zu uprobes", r->probes);
		if (r->probes_stepped)
			ptw_buf_printf(
				out,
				" (%zu traced function%s single-stepped by the kernel at each "
				"call: some 10 times the cost)",
				r->probes_stepped, r->probes_stepped == 1 ? "" : "s");
		ptw_buf_puts(out, ", no ptrace stop, strategy ");
		ptw_buf_put_escaped(out, r->strategy ? r->strategy : "?");
		if (r->backend_why) {
			ptw_buf_puts(out, " (");
			ptw_buf_put_escaped(out, r->backend_why);
			ptw_buf_putc(out, ')');
		}
		ptw_buf_putc(out, '\n');
		goto warnings;
	}
	ptw_buf_printf(out, "  ptrace stops %" PRIu64, r->stops_total);
	if (m.threads_created)
		ptw_buf_printf(out, " (%.1f per thread created)",
			       (double)r->stops_total / (double)m.threads_created);
	ptw_buf_printf(out, ", %zu breakpoints, strategy ", r->breakpoints);
	ptw_buf_put_escaped(out, r->strategy ? r->strategy : "?");
	ptw_buf_putc(out, '\n');
	if (m.threads_created && r->stops_total) {
		/* What each kind cost (session.stops' names: signal counts the
		 * breakpoints; exited is the end's notice, not a stop). */
		ptw_buf_puts(out, "  stops per thread created:");
		double created = (double)m.threads_created;
		bool first = true, rare = false;
		for (int pass = 0; pass < 2; pass++) /* per thread, then the few */
			for (size_t k = 0; k < r->nstop_kinds; k++) {
				double per = (double)r->stop_counts[k] / created;
				if (!r->stop_counts[k] || !r->stop_names[k] || (per >= 0.05) == pass)
					continue;
				ptw_buf_puts(out, first ? " " : pass && !rare ? "; in all: " : ", ");
				if (pass)
					ptw_buf_printf(out, "%s %" PRIu64, r->stop_names[k],
						       r->stop_counts[k]);
				else
					ptw_buf_printf(out, "%s %.1f", r->stop_names[k], per);
				first = false;
				rare |= pass;
			}
		ptw_buf_putc(out, '\n');
	}
warnings:
	for (size_t i = 0; i < r->nwarnings; i++) {
		ptw_buf_puts(out, "  warning: ");
		ptw_buf_put_escaped(out, r->warnings[i].message);
		if (r->warnings[i].count > 1)
			ptw_buf_printf(out, " (said %u times)", r->warnings[i].count);
		ptw_buf_putc(out, '\n');
	}
}

/* ---- snapshot ---- */

static void thread_label(struct ptw_buf *out, const struct ptw_span *sp)
{
	ptw_buf_printf(out, "thread %d", sp->tid);
	if (sp->name) {
		ptw_buf_puts(out, " (");
		ptw_buf_put_escaped(out, sp->name);
		ptw_buf_putc(out, ')');
	}
}

static void wait_text(struct ptw_buf *out, const struct ptw_span *sp)
{
	if (sp->wait_kind == PTW_WAIT_NONE)
		return;
	const char *verb = sp->wait_kind == PTW_WAIT_RWLOCK_READ    ? "to read"
			   : sp->wait_kind == PTW_WAIT_RWLOCK_WRITE ? "to write"
								    : "for";
	if (sp->wait_kind == PTW_WAIT_JOIN)
		ptw_buf_printf(out, "joins pthread %#" PRIx64, sp->wait_object);
	else
		ptw_buf_printf(out, "waits %s %s %#" PRIx64, verb,
			       ptw_wait_object_kind(sp->wait_kind), sp->wait_object);
	if (sp->wait_owner)
		ptw_buf_printf(
			out, sp->wait_kind == PTW_WAIT_JOIN ? " (thread %d)" : " held by thread %d",
			sp->wait_owner);
}

static bool same_stack(const struct ptw_span *a, const struct ptw_span *b)
{
	if (a->nstack != b->nstack)
		return false;
	for (size_t i = 0; i < a->nstack; i++)
		if (a->stack[i]->addr != b->stack[i]->addr)
			return false;
	return true;
}

static int by_group_size(const void *x, const void *y)
{
	const size_t *a = x, *b = y;
	return a[1] < b[1] ? 1 : a[1] > b[1] ? -1 : (a[0] > b[0]) - (a[0] < b[0]);
}

void ptw_text_snapshot(struct ptw_buf *out, const struct ptw_report *r)
{
	size_t n = ptw_spans_count(r->spans);
	ptw_buf_printf(out, "\nptwatch: snapshot of %d (", r->pid);
	ptw_buf_put_escaped(out, r->exe ? r->exe : "?");
	ptw_buf_printf(out, "): %zu threads, ", n);
	if (r->frozen_ns) {
		ptw_buf_puts(out, "stopped for ");
		ptw_text_duration(out, r->frozen_ns);
	} else if (r->backend && !strcmp(r->backend, "kernel")) {
		/* (the kernel's registers of each, as it slept or ran) */
		ptw_buf_puts(out, "none stopped (each read by the kernel as it slept or ran)");
	} else {
		ptw_buf_puts(out, "none stopped (each was read while it slept)");
	}
	ptw_buf_putc(out, '\n');

	struct ptw_deadlock *dl;
	size_t ndl = ptw_spans_deadlocks(r->spans, &dl);
	for (size_t i = 0; i < ndl; i++) {
		ptw_buf_printf(out, "\nDEADLOCK: %zu threads wait for each other:\n", dl[i].n);
		for (size_t k = 0; k < dl[i].n; k++) {
			ptw_buf_puts(out, "  ");
			thread_label(out, dl[i].spans[k]);
			ptw_buf_putc(out, ' ');
			wait_text(out, dl[i].spans[k]);
			ptw_buf_putc(out, '\n');
		}
	}
	ptw_deadlocks_free(dl, ndl);

	/* Groups of identical stacks, biggest first: [first span index, size]. */
	size_t(*groups)[2] = xcalloc(n + 1, sizeof(*groups));
	size_t *group_of = xcalloc(n + 1, sizeof(*group_of));
	size_t ng = 0;
	for (size_t i = 0; i < n; i++) {
		const struct ptw_span *sp = ptw_spans_get(r->spans, i);
		size_t g;
		for (g = 0; g < ng; g++)
			if (same_stack(ptw_spans_get(r->spans, groups[g][0]), sp))
				break;
		if (g == ng) {
			groups[ng][0] = i;
			groups[ng][1] = 0;
			ng++;
		}
		groups[g][1]++;
		group_of[i] = groups[g][0];
	}
	qsort(groups, ng, sizeof(*groups), by_group_size);
	for (size_t g = 0; g < ng; g++) {
		const struct ptw_span *first = ptw_spans_get(r->spans, groups[g][0]);
		ptw_buf_printf(out, "\n%zu thread%s", groups[g][1], groups[g][1] == 1 ? "" : "s");
		/* "in worker_loop <- pthread_cond_wait <- futex wait" */
		if (first->nstack) {
			size_t shown = 0;
			for (size_t k = first->nstack; k-- > 0 && shown < 4;) {
				const struct ptw_location *loc = first->stack[k];
				/* the frames every thread has say nothing */
				if (!loc->symbol || strstr(loc->symbol, "clone") ||
				    !strcmp(loc->symbol, "start_thread") ||
				    !strcmp(loc->symbol, "_start") ||
				    strstr(loc->symbol, "libc_start"))
					continue;
				ptw_buf_puts(out, shown++ ? " <- " : " in ");
				ptw_buf_put_escaped(out, loc->symbol);
			}
			if (first->state) {
				ptw_buf_puts(out, " (");
				ptw_buf_put_escaped(out, first->state);
				ptw_buf_putc(out, ')');
			}
		} else if (first->state) {
			ptw_buf_puts(out, " (");
			ptw_buf_put_escaped(out, first->state);
			ptw_buf_puts(out, ", no stack)");
		}
		ptw_buf_puts(out, ":\n    tids");
		size_t listed = 0;
		for (size_t i = 0; i < n; i++) {
			const struct ptw_span *sp = ptw_spans_get(r->spans, i);
			if (group_of[i] != groups[g][0])
				continue;
			if (listed++ < 16)
				ptw_buf_printf(out, " %d", sp->tid);
		}
		if (listed > 16)
			ptw_buf_printf(out, " ... (%zu more)", listed - 16);
		ptw_buf_putc(out, '\n');
		for (size_t i = 0; i < n; i++) {
			const struct ptw_span *sp = ptw_spans_get(r->spans, i);
			if (group_of[i] != groups[g][0] || sp->wait_kind == PTW_WAIT_NONE)
				continue;
			ptw_buf_puts(out, "    ");
			thread_label(out, sp);
			ptw_buf_putc(out, ' ');
			wait_text(out, sp);
			ptw_buf_putc(out, '\n');
		}
		for (size_t k = 0; k < first->nstack; k++) {
			ptw_buf_printf(out, "    %s ", k ? "  " : "at");
			ptw_text_location(out, first->stack[k], NULL);
			ptw_buf_putc(out, '\n');
		}
	}
	free(groups);
	free(group_of);
	for (size_t i = 0; i < r->nwarnings; i++) {
		ptw_buf_puts(out, "  warning: ");
		ptw_buf_put_escaped(out, r->warnings[i].message);
		if (r->warnings[i].count > 1)
			ptw_buf_printf(out, " (said %u times)", r->warnings[i].count);
		ptw_buf_putc(out, '\n');
	}
}
