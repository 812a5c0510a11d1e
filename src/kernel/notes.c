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
	if (k->root)
		k = k->root; /* -f: the caller reads the root's */
	struct ptw_buf b = { 0 };
	ptw_buf_vprintf(&b, fmt, ap);
	/* merged with the same one said before, counted, never dropped */
	ptw_warning_list_add(&k->notes, code, NULL, b.p ? b.p : xstrdup(""));
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
