/* SPDX-License-Identifier: MIT */
/* `ptwatch report FILE`: a saved document or stream read back and written
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

int ptw_report_cmd(const struct ptw_report_cmd *c)
{
	const char *path = c->path;
	int fd = strcmp(path, "-") ? open(path, O_RDONLY | O_CLOEXEC) : STDIN_FILENO;
	struct ptw_buf text = { 0 };
	if (fd < 0) {
		fprintf(stderr, "ptwatch: cannot open %s: %s\n", path, strerror(errno));
		return 1;
	}
	for (;;) {
		char buf[65536];
		ssize_t n = read(fd, buf, sizeof(buf));
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0) {
			fprintf(stderr, "ptwatch: cannot read %s: %s\n", path, strerror(errno));
			return 1;
		}
		if (n == 0)
			break;
		ptw_buf_add(&text, buf, (size_t)n);
	}
	if (fd != STDIN_FILENO)
		close(fd);
	struct ptw_loaded *l;
	char err[256];
	bool convert = c->format != PTW_OUTPUT_TEXT;
	if (ptw_load(text.p ? text.p : "", text.len, !convert, c->filter, &l, err, sizeof(err)) < 0) {
		fprintf(stderr, "ptwatch: %s: %s\n", path, err);
		ptw_buf_free(&text);
		return 1;
	}
	ptw_buf_free(&text);
	int out_fd = -1;
	if (c->output) {
		out_fd = open(c->output, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
		if (out_fd < 0) {
			fprintf(stderr, "ptwatch: cannot open %s: %s\n", c->output, strerror(errno));
			ptw_loaded_free(l);
			return 1;
		}
	}
	int r = 0;
	if (convert) {
		struct ptw_buf out = { 0 };
		if (c->format == PTW_OUTPUT_CHROME)
			ptw_report_chrome(&l->report, &out);
		else
			ptw_report_json(&l->report, &out);
		r = ptw_write_all(out_fd >= 0 ? out_fd : STDOUT_FILENO, out.p, out.len);
		if (r < 0)
			fprintf(stderr, "ptwatch: cannot write %s: %s\n", c->output ? c->output : "the output",
				strerror(-r));
		ptw_buf_free(&out);
	} else {
		/* the summary a live session printed at its end */
		struct ptw_buf out = { 0 };
		if (l->report.snapshot)
			ptw_text_snapshot(&out, &l->report);
		else
			ptw_text_summary(&out, &l->report);
		r = ptw_write_all(out_fd >= 0 ? out_fd : STDOUT_FILENO, out.p, out.len);
		ptw_buf_free(&out);
	}
	if (out_fd >= 0 && close(out_fd) < 0 && !r) {
		fprintf(stderr, "ptwatch: cannot write %s: %s\n", c->output, strerror(errno));
		r = -EIO;
	}
	ptw_loaded_free(l);
	return r < 0 ? 1 : 0;
}
