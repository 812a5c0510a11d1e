/* SPDX-License-Identifier: MIT */
/* The report, rendered and written out (by the tracer, or by the restorer
 * when the tracer died). */
#define _GNU_SOURCE
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "ptw_output.h"


int ptw_report_write(const struct ptw_report *r, const struct ptw_output_opts *o)
{
	int ret = 0;
	struct ptw_buf out = { 0 };
	if (o->json) {
		if (o->chrome)
			ptw_report_chrome(r, &out);
		else
			ptw_report_json(r, &out);
		ret = ptw_write_all(o->json_fd >= 0 ? o->json_fd : STDOUT_FILENO, out.p, out.len);
		if (ret < 0)
			fprintf(stderr, "ptwatch: cannot write the spans document: %s\n",
				strerror(-ret));
		if (o->json_fd >= 0)
			close(o->json_fd);
		ptw_buf_reset(&out);
	}
	/* A snapshot's report is what the user asked for: standard output
	 * (as eu-stack's and gdb's), unless the document has it. Trace mode
	 * keeps its summary with its event lines, on standard error. */
	int text_fd = STDERR_FILENO;
	if (o->snapshot && !((o->json || o->lines) && o->json_fd < 0))
		text_fd = STDOUT_FILENO;
	if (o->snapshot)
		ptw_text_snapshot(&out, r);
	else
		ptw_text_summary(&out, r);
	ptw_write_all(text_fd, out.p, out.len);
	ptw_buf_free(&out);
	return ret;
}
