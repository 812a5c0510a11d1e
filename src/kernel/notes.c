/* SPDX-License-Identifier: MIT */
/*
 * What the kernel path tells the session besides thread events, as
 * events: what it could not do (the report's warnings; every file of the
 * backend says its notes through here) and, -f, what each process is.
 */
#define _GNU_SOURCE
#include "kernel_int.h"

/* ev, of process k, to the session. */
static void say(struct ptw_kernel *k, struct ptw_event *ev)
{
	ev->pid = k->pid;
	ev->process = k->conv.process;
	k->o.sink(k->o.sink_ctx, ev);
}

/* What the backend could not do, as the report's warnings (the code
 * says what kind of thing; ptwk_note() is the generic one): the session
 * merges and counts them, and names a followed process's. */
static void note_va(struct ptw_kernel *k, enum ptw_warning_code code, const char *fmt, va_list ap)
{
	struct ptw_buf b = { 0 };
	ptw_buf_vprintf(&b, fmt, ap);
	struct ptw_event ev = ptw_event_init(PTW_EV_WARNING, ptw_now_ns(), k->pid);
	ev.warning = code;
	ev.name = b.p ? b.p : "";
	say(k, &ev);
	ptw_buf_free(&b);
}

void ptwk_note_as(struct ptw_kernel *k, enum ptw_warning_code code, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	note_va(k, code, fmt, ap);
	va_end(ap);
}
void ptwk_note(struct ptw_kernel *k, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	note_va(k, PTW_W_KERNEL_LIMIT, fmt, ap);
	va_end(ap);
}
void ptwk_why_set(char *why, size_t size, const char *fmt, ...)
{
	if (!why || !size)
		return;
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(why, size, fmt, ap);
	va_end(ap);
}


void ptwk_note_line(void *ctx, int code, const char *line)
{
	ptwk_note_as(ctx, (enum ptw_warning_code)code, "%s", line);
}

/* What the document says of process c (-f), now. */
static void fill_process(const struct ptw_kernel *c, struct ptw_process *p)
{
	const struct ptw_kernel *root = c->root ? c->root : c;
	memset(p, 0, sizeof(*p));
	p->id = c->id;
	p->parent_id = c->parent_id;
	p->pid = c->pid;
	p->ppid = c->ppid;
	p->parent_tid = c->parent_tid;
	p->exe = c->exe[0] ? c->exe : NULL;
	p->argv = c->argv;
	p->start_ns = c->start_ns;
	p->end_ns = c->conv.ended ? c->conv.end_ns : 0;
	p->followed = !c->unfollowed_why;
	p->not_followed_why = c->unfollowed_why;
	p->detached = root->detached && !c->conv.ended;
	if (c->conv.ended && !c->end_lost && !c->unfollowed_why) {
		p->exit_kind = c->conv.exit_signal ? PTW_EXIT_SIGNAL : PTW_EXIT_CODE;
		p->exit_code = c->conv.exit_code;
		p->exit_signal = c->conv.exit_signal;
		p->core_dumped = c->conv.core_dumped;
	}
}

void ptwk_say_process(struct ptw_kernel *k)
{
	if (!k->o.follow_forks)
		return;
	struct ptw_process p;
	fill_process(k, &p);
	struct ptw_event ev = ptw_event_init(PTW_EV_PROCESS, ptw_now_ns(), k->pid);
	ev.proc = &p;
	say(k, &ev);
}
