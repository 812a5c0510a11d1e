/* SPDX-License-Identifier: MIT */
/*
 * Text output: the event log's lines, the words they use, its filters;
 * see ptw_output.h.
 */
#define _GNU_SOURCE
#include "text_int.h"

/* ---- words and event lines ---- */

void ptw_text_duration(struct ptw_buf *out, uint64_t ns)
{
	if (ns < 1000)
		ptw_buf_printf(out, "%" PRIu64 " ns", ns);
	else if (ns < 1000000)
		ptw_buf_printf(out, "%.1f us", (double)ns / 1e3);
	else if (ns < 1000000000)
		ptw_buf_printf(out, "%.2f ms", (double)ns / 1e6);
	else
		ptw_buf_printf(out, "%.2f s", (double)ns / 1e9);
}

static const char *basename_of(const char *path)
{
	const char *b = strrchr(path, '/');
	return b ? b + 1 : path;
}

/* "libfoo.so.1+0x1a2b", or "0x7f..." outside any module. Every string
 * the target controls (names, paths, symbols) goes out escaped
 * (ptw_buf_put_escaped): nothing in it can act on the user's terminal. */
static void module_offset(struct ptw_buf *out, const struct ptw_location *loc)
{
	if (loc->module && loc->has_offset) {
		ptw_buf_put_escaped(out, basename_of(loc->module));
		ptw_buf_printf(out, "+%#" PRIx64, loc->offset);
	} else
		ptw_buf_printf(out, "%#" PRIx64, loc->addr);
}

void ptw_text_location(struct ptw_buf *out, const struct ptw_location *loc, const char *known_name)
{
	if (!loc) {
		ptw_buf_put_escaped(out, known_name ? known_name : "?");
		return;
	}
	if (loc->symbol) {
		ptw_buf_put_escaped(out, loc->symbol);
		if (loc->symbol_offset)
			ptw_buf_printf(out, "+%#" PRIx64, loc->symbol_offset);
	} else if (known_name) {
		ptw_buf_put_escaped(out, known_name);
		ptw_buf_puts(out, " (");
		module_offset(out, loc);
		ptw_buf_putc(out, ')');
	} else {
		module_offset(out, loc);
	}
	if (loc->file) {
		ptw_buf_puts(out, " (");
		ptw_buf_put_escaped(out, basename_of(loc->file));
		ptw_buf_printf(out, ":%d)", loc->line);
	}
}

/* "   0.061788   12180 create  ", with the process first under -f once
 * there are several (st->show_pids): the event's own. */
static void line_start(struct ptw_buf *out, const struct ptw_text_style *st,
		       const struct ptw_event *ev, const char *what)
{
	uint64_t rel = ev->ns >= st->start_ns ? ev->ns - st->start_ns : 0;
	if (st->show_pids)
		ptw_buf_printf(out, "%4" PRIu64 ".%06" PRIu64 " %7d %7d %-8s", rel / 1000000000u,
			       (rel / 1000u) % 1000000u, ev->pid, ev->tid, what);
	else
		ptw_buf_printf(out, "%4" PRIu64 ".%06" PRIu64 " %7d %-8s", rel / 1000000000u,
			       (rel / 1000u) % 1000000u, ev->tid, what);
}

static void span_tag(struct ptw_buf *out, const struct ptw_span *sp)
{
	if (sp)
		ptw_buf_printf(out, " [%u]", sp->id);
}

/* "slow: open past 5.00 s" for a span seen open past the open timeout. */
void text_slow_text(struct ptw_buf *out, const struct ptw_span *sp, const char *pre,
		      const char *post)
{
	if (!sp->open_after_ns.set)
		return;
	ptw_buf_printf(out, "%sslow: open past ", pre);
	ptw_text_duration(out, sp->open_for_ns);
	ptw_buf_puts(out, post);
}

static void end_text(struct ptw_buf *out, const struct ptw_span *sp)
{
	switch (sp->status) {
	case PTW_STATUS_COMPLETED:
		ptw_buf_puts(out, " returned");
		break;
	case PTW_STATUS_EXITED:
		ptw_buf_puts(out, sp->method == PTW_METHOD_PTHREAD_EXIT ? " pthread_exit" : " exited");
		break;
	case PTW_STATUS_CANCELLED:
		ptw_buf_puts(out, " cancelled");
		break;
	case PTW_STATUS_LWP_EXITED:
		ptw_buf_printf(out, " lwp exit %" PRIu64, sp->exit_code.v);
		break;
	default:
		ptw_buf_printf(out, " %s", ptw_method_name(sp->method));
		if (sp->reason) {
			ptw_buf_puts(out, " (");
			ptw_buf_put_escaped(out, sp->reason);
			ptw_buf_putc(out, ')');
		}
		break;
	}
	if (sp->value.set && sp->status != PTW_STATUS_CANCELLED)
		ptw_buf_printf(out, " %#" PRIx64, sp->value.v);
	uint64_t lifetime;
	if (ptw_span_lifetime(sp, &lifetime)) {
		ptw_buf_puts(out, " after ");
		ptw_text_duration(out, lifetime);
	}
	text_slow_text(out, sp, " (", ")");
}

/* " open for 250.93 ms, now S read in pipe_read at read+0x4c (read.c:26)" */
static void open_for(struct ptw_buf *out, const struct ptw_event *ev, bool at_least)
{
	ptw_buf_printf(out, " open for %s", at_least ? "at least " : "");
	ptw_text_duration(out, ev->value);
	ptw_buf_puts(out, ", now ");
	ptw_buf_put_escaped(out, ev->state ? ev->state : "?");
	if (ev->wchan) {
		ptw_buf_puts(out, " in ");
		ptw_buf_put_escaped(out, ev->wchan);
	}
	if (ev->routine && ev->routine->symbol) {
		ptw_buf_puts(out, " at ");
		ptw_text_location(out, ev->routine, NULL);
	}
}

void ptw_text_event(struct ptw_buf *out, const struct ptw_text_style *st, const struct ptw_event *ev,
		    const struct ptw_span *sp)
{
	switch (ev->kind) {
	case PTW_EV_IMAGE:
		line_start(out, st, ev, "exec");
		ptw_buf_putc(out, ' ');
		ptw_buf_put_escaped(out, ev->name ? ev->name : "?");
		span_tag(out, sp);
		break;
	case PTW_EV_MAIN_START:
		line_start(out, st, ev, "main");
		ptw_buf_putc(out, ' ');
		ptw_text_location(out, ev->routine, "main");
		break;
	case PTW_EV_PREEXISTING:
		/* -f: a fork child's first thread (it says when it began) */
		line_start(out, st, ev, ev->has_value ? "forked" : "found");
		span_tag(out, sp);
		ptw_buf_putc(out, ' ');
		ptw_text_location(out, ev->routine, ev->tid == ev->other_tid ? "main" : NULL);
		break;
	case PTW_EV_THREAD_CREATE:
	case PTW_EV_LWP_CREATE:
		line_start(out, st, ev, ev->kind == PTW_EV_LWP_CREATE ? "clone" : "create");
		span_tag(out, sp);
		ptw_buf_printf(out, " tid %d", ev->other_tid);
		if (ev->kind == PTW_EV_THREAD_CREATE || ev->routine) {
			ptw_buf_putc(out, ' ');
			ptw_text_location(out, ev->routine, NULL);
			if (ev->detached == 1)
				ptw_buf_puts(out, " detached");
		}
		break;
	case PTW_EV_THREAD_START:
		if (!sp || !sp->start_ns.set || sp->start_ns.v != ev->ns)
			return;
		line_start(out, st, ev, "start");
		span_tag(out, sp);
		ptw_buf_putc(out, ' ');
		ptw_text_location(out, sp->start_routine, NULL);
		if (sp->create_ns.set && sp->start_ns.v >= sp->create_ns.v) {
			ptw_buf_puts(out, ", spawned in ");
			ptw_text_duration(out, sp->start_ns.v - sp->create_ns.v);
		}
		break;
	case PTW_EV_THREAD_RETURN:
	case PTW_EV_THREAD_DEATH:
	case PTW_EV_LWP_EXIT:
		if (!sp || !sp->ended || !sp->end_ns.set || sp->end_ns.v != ev->ns)
			return;
		line_start(out, st, ev, "end");
		span_tag(out, sp);
		end_text(out, sp);
		break;
	case PTW_EV_CANCEL_REQUEST:
		line_start(out, st, ev, "cancel");
		span_tag(out, sp);
		if (sp)
			ptw_buf_printf(out, " tid %d", sp->tid);
		break;
	case PTW_EV_DETACH_CALL:
		line_start(out, st, ev, "detach");
		span_tag(out, sp);
		if (sp)
			ptw_buf_printf(out, " tid %d", sp->tid);
		break;
	case PTW_EV_JOIN_RETURN:
		if (!sp || !sp->joined || !sp->join_return_ns.set || sp->join_return_ns.v != ev->ns)
			return;
		line_start(out, st, ev, "joined");
		span_tag(out, sp);
		ptw_buf_printf(out, " tid %d after waiting ", sp->tid);
		ptw_text_duration(out, sp->join_return_ns.v - sp->join_call_ns);
		break;
	case PTW_EV_FATAL_SIGNAL:
		line_start(out, st, ev, "signal");
		ptw_buf_printf(out, " %s", ptw_signame(ev->sig));
		break;
	case PTW_EV_INTERRUPT:
		line_start(out, st, ev, "interrupt");
		ptw_buf_printf(out, " %s", ptw_signame(ev->sig));
		switch (ev->why) {
		case PTW_INTR_TERMINAL:
		case PTW_INTR_GROUP:
			ptw_buf_printf(out, " %sreached the command too: tracing until it reacts "
					    "(the same again within %d s: detach)",
				       ev->why == PTW_INTR_TERMINAL ? "from the terminal " : "",
				       PTW_INTERRUPT_AGAIN_MS / 1000);
			break;
		case PTW_INTR_AGAIN:
			ptw_buf_puts(out, " again: detaching");
			break;
		case PTW_INTR_PTWATCH_ALONE:
			ptw_buf_puts(out, " to ptwatch alone: detaching");
			break;
		default:
			ptw_buf_puts(out, ": detaching");
			break;
		}
		break;
	case PTW_EV_SPAN_OPEN: {
		line_start(out, st, ev, "open");
		bool thread = sp && ev->span_kind == PTW_SPAN_THREAD;
		/* Another engine's span (a frame): named by kind and id. */
		if (!thread)
			ptw_buf_printf(out, " %s span %u",
				       ev->span_kind == PTW_SPAN_FRAME ? "frame" : "?", ev->span_id);
		else
			span_tag(out, sp);
		if (thread && sp->name) {
			ptw_buf_putc(out, ' ');
			ptw_buf_put_escaped(out, sp->name);
		}
		if (thread && (sp->start_routine || sp->origin == PTW_ORIGIN_MAIN)) {
			ptw_buf_putc(out, ' ');
			ptw_text_location(out, sp->start_routine,
					  sp->origin == PTW_ORIGIN_MAIN ? "main" : NULL);
		}
		/* Found running at the attach: it began before ptwatch saw it. */
		open_for(out, ev, thread && !sp->create_ns.set && !sp->start_ns.set);
		break;
	}
	case PTW_EV_EXEC:
		line_start(out, st, ev, "execve");
		if (ev->other_tid != ev->tid)
			ptw_buf_printf(out, " (by tid %d)", ev->other_tid);
		break;
	case PTW_EV_PROCESS_EXIT:
		line_start(out, st, ev, "exit");
		if (ev->sig)
			ptw_buf_printf(out, " killed by %s%s", ptw_signame(ev->sig),
				       ev->core_dumped ? " (core dumped)" : "");
		else
			ptw_buf_printf(out, " code %d", ev->exit_code);
		break;
	default:
		return;
	}
	ptw_buf_putc(out, '\n');
}

void ptw_text_frame_event(struct ptw_buf *out, const struct ptw_text_style *st, const struct ptw_event *ev,
			  const struct ptw_frame *fr)
{
	if (ev->kind == PTW_EV_SPAN_OPEN) {
		line_start(out, st, ev, "open");
		ptw_buf_printf(out, " {%u} ", fr->id);
		ptw_text_location(out, fr->function, NULL);
		open_for(out, ev, false);
	} else if (ev->kind == PTW_EV_FRAME_ENTRY) {
		line_start(out, st, ev, "call");
		ptw_buf_printf(out, " {%u} %*s", fr->id, (int)(fr->depth - 1) * 2, "");
		ptw_text_location(out, fr->function, NULL);
		if (fr->sig)
			ptw_buf_printf(out, " (signal %s)", ptw_signame(fr->sig));
		if (fr->entry_unknown)
			ptw_buf_puts(out, " (under way when ptwatch came)");
	} else if (ev->kind == PTW_EV_FRAME_RETURN && fr->has_return) {
		line_start(out, st, ev, "ret");
		ptw_buf_printf(out, " {%u} %*s", fr->id, (int)(fr->depth - 1) * 2, "");
		const struct ptw_location *loc = fr->function;
		ptw_buf_put_escaped(out, loc && loc->symbol ? loc->symbol : "?");
		if (fr->has_value)
			ptw_buf_printf(out, " = %#" PRIx64, fr->value);
		if (fr->entry_unknown) {
			ptw_buf_puts(out, " (entered before ptwatch came)");
		} else {
			ptw_buf_puts(out, " after ");
			ptw_text_duration(out, fr->return_ns - fr->entry_ns);
		}
	} else {
		return;
	}
	ptw_buf_putc(out, '\n');
}

/* "mutex queue_lock (0x4040a0)", "cond 0x7ffd..." */
static void object_text(struct ptw_buf *out, enum ptw_wait_kind kind, uint64_t object,
			const struct ptw_location *loc)
{
	ptw_buf_printf(out, "%s ", ptw_wait_object_kind(kind));
	if (loc && loc->symbol) {
		ptw_buf_put_escaped(out, loc->symbol);
		if (loc->symbol_offset)
			ptw_buf_printf(out, "+%#" PRIx64, loc->symbol_offset);
		ptw_buf_printf(out, " (%#" PRIx64 ")", object);
	} else {
		ptw_buf_printf(out, "%#" PRIx64, object);
	}
}

static const char *wait_verb(enum ptw_wait_kind kind)
{
	switch (kind) {
	case PTW_WAIT_RWLOCK_READ:
		return "to read ";
	case PTW_WAIT_RWLOCK_WRITE:
		return "to write ";
	case PTW_WAIT_JOIN:
		return "joins ";
	default:
		return "";
	}
}

void ptw_text_wait_event(struct ptw_buf *out, const struct ptw_text_style *st, const struct ptw_event *ev,
			 const struct ptw_wait *w)
{
	switch (ev->kind) {
	case PTW_EV_WAIT_BEGIN:
		if (!w)
			return;
		line_start(out, st, ev, "wait");
		ptw_buf_printf(out, " <%u> %s", w->id, wait_verb(w->kind));
		object_text(out, w->kind, w->object, w->object_loc);
		if (w->owner)
			ptw_buf_printf(out, w->kind == PTW_WAIT_JOIN ? " (thread %d)" : " held by %d",
				       w->owner);
		if (w->site) {
			ptw_buf_puts(out, " at ");
			ptw_text_location(out, w->site, NULL);
		}
		if (w->start_unknown)
			ptw_buf_puts(out, " (under way when ptwatch came)");
		break;
	case PTW_EV_WAIT_END:
		if (!w || !w->has_end)
			return;
		line_start(out, st, ev, "waited");
		ptw_buf_printf(out, " <%u> %s", w->id, wait_verb(w->kind));
		object_text(out, w->kind, w->object, w->object_loc);
		if (w->start_unknown) {
			/* begun before ptwatch came (its attach, or a -f child's own
			 * probes on the kernel path): at least since then */
			ptw_buf_puts(out, " for more than ");
			ptw_text_duration(out, w->end_ns - w->start_ns);
			ptw_buf_puts(out, " (begun before ptwatch came)");
		} else {
			ptw_buf_puts(out, " for ");
			ptw_text_duration(out, w->end_ns - w->start_ns);
		}
		break;
	case PTW_EV_DEADLOCK:
		if (ev->has_arg && ev->arg == 0) {
			line_start(out, st, ev, "DEADLOCK");
			if (ev->value == 1)
				ptw_buf_printf(out, " #%u: a thread waits for a lock it holds (the "
						    "process runs on",
					       ev->span_id);
			else
				ptw_buf_printf(out, " #%u: %" PRIu64 " threads wait for each other "
						    "(the process runs on",
					       ev->span_id, ev->value);
			/* (the tracer's way is the one the summary always had) */
			if (ev->proof != PTW_PROOF_STOPPED)
				ptw_buf_printf(out, "; confirmed %s",
					       ptw_deadlock_proof_text(ev->proof));
			ptw_buf_puts(out, ")\n");
		}
		ptw_buf_printf(out, "  thread %d %s", ev->tid,
			       ev->wait_kind == PTW_WAIT_JOIN ? "joins " : "waits for ");
		if (ev->wait_kind != PTW_WAIT_JOIN)
			ptw_buf_puts(out, wait_verb(ev->wait_kind));
		object_text(out, ev->wait_kind, ev->wait_object, ev->object);
		ptw_buf_printf(out, ev->wait_kind == PTW_WAIT_JOIN ? " (thread %d)" : " held by thread %d",
			       ev->wait_owner);
		for (size_t i = 0; i < ev->nstack; i++) {
			ptw_buf_printf(out, "\n    %s ", i ? "  " : "at");
			ptw_text_location(out, ev->stack[i], NULL);
		}
		break;
	default:
		return;
	}
	ptw_buf_putc(out, '\n');
}

/* ---- filters ---- */

const char *const ptw_text_event_names[] = {
	"exec",	  "main", "found", "create", "clone", "start",	 "end",	    "cancel",
	"detach", "joined", "signal", "interrupt", "open", "execve", "exit", "call",
	"ret",	  "event", "stops", "forked", "wait", "waited", "DEADLOCK", NULL,
};

int ptw_text_filter_events(struct ptw_text_filter *f, const char *list)
{
	char *copy = xstrdup(list), *save = NULL;
	int r = 0;
	for (char *w = strtok_r(copy, ",", &save); w; w = strtok_r(NULL, ",", &save)) {
		size_t i;
		for (i = 0; ptw_text_event_names[i] && strcasecmp(ptw_text_event_names[i], w); i++)
			;
		if (!ptw_text_event_names[i]) {
			r = -EINVAL;
			break;
		}
		f->events |= 1u << i;
	}
	if (!f->events)
		r = -EINVAL;
	free(copy);
	return r;
}

/* Is log word name (len bytes) wanted (-e; none given: every one)? */
static bool named_wanted(const struct ptw_text_filter *f, const char *name, size_t len)
{
	if (!f->events)
		return true;
	for (size_t k = 0; ptw_text_event_names[k]; k++)
		if (strlen(ptw_text_event_names[k]) == len &&
		    !memcmp(ptw_text_event_names[k], name, len))
			return f->events & (1u << k);
	return false;
}

/* The third column of a log line. */
static bool word_wanted(const struct ptw_text_filter *f, const char *line, size_t len)
{
	if (!f->events)
		return true;
	size_t i = 0;
	for (int field = 0; field < 2; field++) {
		while (i < len && line[i] == ' ')
			i++;
		while (i < len && line[i] != ' ')
			i++;
	}
	while (i < len && line[i] == ' ')
		i++;
	size_t w = i;
	while (i < len && line[i] != ' ' && line[i] != '\n')
		i++;
	return named_wanted(f, line + w, i - w);
}

/* --tid and --routine: an event of thread tid or other (its span's, a
 * wait's owner), of a span whose routine passes. */
static bool thread_wanted(const struct ptw_span_filter *sf, pid_t tid, pid_t other,
			  const struct ptw_span *sp)
{
	if (!ptw_span_filter_tid(sf, tid) && !(other > 0 && ptw_span_filter_tid(sf, other)))
		return false;
	return !sf->routine ||
	       (sp && ptw_span_filter_passes(&(struct ptw_span_filter){ .routine = sf->routine }, sp));
}

void ptw_text_wait_event_filtered(struct ptw_buf *out, const struct ptw_text_style *st,
				  const struct ptw_event *ev, const struct ptw_span *sp,
				  const struct ptw_wait *w, const struct ptw_text_filter *f)
{
	/* A deadlock is always said (as with -q): what --locks is for. */
	if (f && ev->kind != PTW_EV_DEADLOCK) {
		const struct ptw_span_filter *sf = &f->spans;
		/* the waiter's, or the owner's (--tid of either shows it) */
		if (!thread_wanted(sf, ev->tid, w ? w->owner : 0, sp))
			return;
		const char *word = ev->kind == PTW_EV_WAIT_BEGIN ? "wait" : "waited";
		if (!named_wanted(f, word, strlen(word)))
			return;
		if (w && !ptw_span_filter_object(sf, w->object, w->object_loc))
			return;
	}
	ptw_text_wait_event(out, st, ev, w);
}

static void raw_event(struct ptw_buf *out, const struct ptw_text_style *st, const struct ptw_event *ev,
		      const struct ptw_span *sp)
{
	line_start(out, st, ev, "event");
	ptw_buf_printf(out, " %s", ptw_event_kind_name(ev->kind));
	span_tag(out, sp);
	if (ev->other_tid)
		ptw_buf_printf(out, " other_tid=%d", ev->other_tid);
	if (ev->pthread)
		ptw_buf_printf(out, " pthread=%#" PRIx64, ev->pthread);
	if (ev->has_value)
		ptw_buf_printf(out, " value=%#" PRIx64, ev->value);
	if (ev->has_arg)
		ptw_buf_printf(out, " arg=%#" PRIx64, ev->arg);
	if (ev->routine) {
		ptw_buf_printf(out, " at=%#" PRIx64 " ", ev->routine->addr);
		ptw_text_location(out, ev->routine, NULL);
	}
	if (ev->detached >= 0)
		ptw_buf_printf(out, " detached=%d", ev->detached);
	if (ev->unwinding >= 0)
		ptw_buf_printf(out, " unwinding=%d", ev->unwinding);
	if (ev->cancelled >= 0)
		ptw_buf_printf(out, " cancelled=%d", ev->cancelled);
	if (ev->kind == PTW_EV_LWP_EXIT)
		ptw_buf_printf(out, " how=%s code=%d",
			       ev->exit_how == PTW_EXIT_SELF	? "self"
			       : ev->exit_how == PTW_EXIT_GROUP ? "exit_group"
								: "killed",
			       ev->exit_code);
	if (ev->sig)
		ptw_buf_printf(out, " sig=%s", ptw_signame(ev->sig));
	if (ev->sp || ev->ret_addr)
		ptw_buf_printf(out, " sp=%#" PRIx64 " ret=%#" PRIx64, ev->sp, ev->ret_addr);
	if (ev->name) {
		ptw_buf_puts(out, " name=");
		ptw_buf_put_escaped(out, ev->name);
	}
	ptw_buf_putc(out, '\n');
}

void ptw_text_event_filtered(struct ptw_buf *out, const struct ptw_text_style *st, const struct ptw_event *ev,
			     const struct ptw_span *sp, const struct ptw_frame *fr,
			     const struct ptw_text_filter *f)
{
	if (!f) {
		if (fr)
			ptw_text_frame_event(out, st, ev, fr);
		else
			ptw_text_event(out, st, ev, sp);
		return;
	}
	if (!thread_wanted(&f->spans, ev->tid, sp ? sp->tid : 0, sp))
		return;
	size_t at = out->len;
	if (fr)
		ptw_text_frame_event(out, st, ev, fr);
	else
		ptw_text_event(out, st, ev, sp);
	if (!word_wanted(f, out->p ? out->p + at : "", out->len - at))
		out->len = at;
	if (f->verbose) {
		size_t raw = out->len;
		raw_event(out, st, ev, sp);
		if (!word_wanted(f, out->p + raw, out->len - raw))
			out->len = raw;
	}
}
