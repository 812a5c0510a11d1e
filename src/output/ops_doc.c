/* SPDX-License-Identifier: MIT */
/*
 * The outputs written once, at the end: the spans document
 * (PTW_OUTPUT_JSON) and the Chrome trace (PTW_OUTPUT_CHROME), to their fd
 * or standard output. See ptw_output.h.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "ptw_output.h"

struct doc_out {
	struct ptw_output base;
	struct ptw_output_conf conf;
};

static void doc_end(struct ptw_output *o, const struct ptw_report *r)
{
	struct doc_out *d = (struct doc_out *)o;
	int fd = d->conf.fd;
	/* The tracer may have died while writing its own: start over. */
	if (d->conf.resume && fd >= 0 && ftruncate(fd, 0) == 0)
		lseek(fd, 0, SEEK_SET);
	/* (written as it is made: a document of a million frames is not
	 * held whole in memory) */
	int to = fd >= 0 ? fd : STDOUT_FILENO;
	int ret = d->conf.format == PTW_OUTPUT_CHROME ? ptw_report_chrome_fd(r, to)
						       : ptw_report_json_fd(r, to);
	/* (a file system may say only now that the data did not fit) */
	if (fd >= 0 && close(fd) < 0 && ret == 0 && errno != EINTR)
		ret = -errno;
	d->conf.fd = -1;
	if (ret < 0 && o->host->lost)
		o->host->lost(o->host->ctx, d->conf.path ? d->conf.path : "standard output", -ret);
}

static void doc_free(struct ptw_output *o)
{
	free(o);
}

static const struct ptw_output_ops json_ops = {
	.format = PTW_OUTPUT_JSON,
	.end = doc_end,
	.free = doc_free,
};

static const struct ptw_output_ops chrome_ops = {
	.format = PTW_OUTPUT_CHROME,
	.end = doc_end,
	.free = doc_free,
};

struct ptw_output *ptw_output_doc_new(const struct ptw_output_conf *c, struct ptw_output_host *h)
{
	struct doc_out *d = xcalloc(1, sizeof(*d));
	d->base = (struct ptw_output){ .ops = c->format == PTW_OUTPUT_CHROME ? &chrome_ops : &json_ops,
				       .host = h, .wake_fd = -1 };
	d->conf = *c;
	return &d->base;
}
