/* SPDX-License-Identifier: MIT */
/* `ptwatch report`: a saved document or stream read back and written
 * again as the summary, the document or the Chrome trace; see
 * ptw_session.h. */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "ptw_load.h"
#include "ptw_output.h"
#include "ptw_session.h"
#include "ptw_util.h"

/* The exit status of a report whose output was lost (a full disk, an I/O
 * error; a closed pipe is SIGPIPE's): ptwatch(1), EXIT STATUS. */
#define PTW_EXIT_OUTPUT_LOST 3

int ptw_report_cmd(const struct ptw_report_cmd *c)
{
	const char *path = c->path;
	int fd = strcmp(path, "-") ? open(path, O_RDONLY | O_CLOEXEC) : STDIN_FILENO;
	if (fd < 0) {
		fprintf(stderr, "ptwatch: cannot open %s: %s\n", path, strerror(errno));
		return 1;
	}
	struct ptw_loaded *l;
	char err[640];
	bool convert = c->format != PTW_OUTPUT_TEXT;
	int r = ptw_load_fd(fd, !convert, c->filter ? &c->filter->spans : NULL, &l, err, sizeof(err));
	if (fd != STDIN_FILENO)
		close(fd);
	if (r < 0) {
		fprintf(stderr, "ptwatch: %s: %s\n", path, err);
		return 1;
	}
	int out_fd = -1;
	if (c->output) {
		out_fd = open(c->output, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
		if (out_fd < 0) {
			fprintf(stderr, "ptwatch: cannot open %s: %s\n", c->output, strerror(errno));
			ptw_loaded_free(l);
			return 1;
		}
	}
	struct ptw_buf out = { 0 };
	const char *what;
	int to = out_fd >= 0 ? out_fd : STDOUT_FILENO;
	r = 0;
	/* (a trace or document written as it is made: not held whole) */
	if (c->format == PTW_OUTPUT_CHROME) {
		r = ptw_report_chrome_fd(&l->report, to);
		what = "the trace";
	} else if (convert) {
		r = ptw_report_json_fd(&l->report, to);
		what = "the document";
	} else if (l->report.snapshot) {
		ptw_text_snapshot(&out, &l->report); /* what --snapshot printed */
		what = "the report";
	} else {
		l->report.filter = c->filter ? &c->filter->spans : NULL; /* --object */
		ptw_text_summary(&out, &l->report); /* the summary a live session printed */
		what = "the summary";
	}
	ptw_loaded_free(l);
	if (r == 0)
		r = ptw_write_all(to, out.p, out.len);
	ptw_buf_free(&out);
	if (!r && out_fd >= 0 && close(out_fd) < 0)
		r = -errno;
	else if (out_fd >= 0 && r < 0)
		close(out_fd);
	if (r < 0) {
		/* lost: said in one line, and a status of its own */
		fprintf(stderr, "ptwatch: %s of %s was lost: cannot write %s: %s\n", what, path,
			c->output ? c->output : "standard output", strerror(-r));
		return PTW_EXIT_OUTPUT_LOST;
	}
	return 0;
}
