/* SPDX-License-Identifier: MIT */
/*
 * What the kernel path could not do, kept for the report's warnings in
 * the root's list (-f: the followed processes' too). Every file of the
 * backend says its notes through here.
 */
#define _GNU_SOURCE
#include "kernel_int.h"

/* What the backend could not do, as the report's warnings (the code
 * says what kind of thing; ptwk_note() is the generic one). */
static void note_va(struct ptw_kernel *k, enum ptw_warning_code code, const char *fmt, va_list ap)
{
	struct ptw_buf b = { 0 };
	ptw_buf_vprintf(&b, fmt, ap);
	char *msg = b.p ? b.p : xstrdup("");
	/* As the tracer says them (core.c's tracer_warn): the same message
	 * once per session, counted, whichever process (-f) it is about, in
	 * the root's list; a followed process's names it (the first one's). */
	struct ptw_kernel *root = k->root ? k->root : k;
	char *named = k->root ? xasprintf("process %d: %s", k->pid, msg) : NULL;
	ptw_warning_list_add(&root->notes, code, msg, named ? named : msg);
	if (named)
		free(msg);
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
