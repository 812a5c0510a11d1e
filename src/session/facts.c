/* SPDX-License-Identifier: MIT */
/* What a session knows besides its spans; see facts.h. */
#define _GNU_SOURCE
#include "facts.h"

#include <stdlib.h>
#include <string.h>

#include "ptw_util.h"

static void warning(struct session_facts *f, const struct ptw_event *ev)
{
	const char *msg = ev->name ? ev->name : "";
	/* The same fact once per session, counted, whichever process (-f)
	 * it is about (1,000 workers without libc6-dbg make one warning); a
	 * followed process's names it (the first one's). */
	char *text = ev->process ? xasprintf("process %d: %s", (int)ev->pid, msg) : xstrdup(msg);
	ptw_warning_list_add(&f->warnings, (enum ptw_warning_code)ev->warning, msg, text);
}

static void process_release(struct ptw_process *p)
{
	free((char *)p->exe);
	ptw_argv_free((char **)p->argv);
	free((char *)p->not_followed_why);
}

static void process(struct session_facts *f, const struct ptw_process *in)
{
	if (in->id >= f->nprocs) {
		f->procs = xreallocarray(f->procs, in->id + 1, sizeof(*f->procs));
		memset(f->procs + f->nprocs, 0, (in->id + 1 - f->nprocs) * sizeof(*f->procs));
		f->nprocs = in->id + 1;
	}
	struct ptw_process *p = &f->procs[in->id];
	process_release(p);
	*p = *in;
	p->exe = in->exe ? xstrdup(in->exe) : NULL;
	p->argv = in->argv ? ptw_argv_dup(in->argv) : NULL;
	p->not_followed_why = in->not_followed_why ? xstrdup(in->not_followed_why) : NULL;
}

static void interrupt(struct session_facts *f, const struct ptw_event *ev)
{
	f->interrupts = xreallocarray(f->interrupts, f->ninterrupts + 1, sizeof(*f->interrupts));
	f->interrupts[f->ninterrupts++] = (struct ptw_interrupt){
		.sig = ev->sig,
		.ns = ev->ns,
		/* (the others: -p's, or ptwatch's alone) */
		.reached_target = ev->why == PTW_INTR_TERMINAL || ev->why == PTW_INTR_GROUP ||
				  ev->why == PTW_INTR_AGAIN,
		.action = ev->action,
		.why = ev->why,
	};
}

bool facts_take(struct session_facts *f, const struct ptw_event *ev)
{
	switch (ev->kind) {
	case PTW_EV_WARNING:
		warning(f, ev);
		return true;
	case PTW_EV_PROCESS:
		if (ev->proc)
			process(f, ev->proc);
		return true;
	case PTW_EV_INTERRUPT:
		interrupt(f, ev);
		return false;
	default:
		return false;
	}
}

void facts_fill(const struct session_facts *f, struct ptw_report *r)
{
	r->warnings = f->warnings.v;
	r->nwarnings = f->warnings.n;
	r->interrupts = f->interrupts;
	r->ninterrupts = f->ninterrupts;
	r->processes = f->nprocs ? f->procs : NULL;
	r->nprocesses = f->nprocs;
}

void facts_free(struct session_facts *f)
{
	ptw_warning_list_free(&f->warnings);
	for (size_t i = 0; i < f->nprocs; i++)
		process_release(&f->procs[i]);
	free(f->procs);
	free(f->interrupts);
	memset(f, 0, sizeof(*f));
}
