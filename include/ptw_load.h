/* SPDX-License-Identifier: MIT */
/*
 * `ptwatch report`: a saved spans document (ptwatch.spans/4) or a
 * --json-lines stream (ptwatch.lines/1) read back into a report and a span
 * engine, so that the summary, the document and the Chrome trace are
 * rendered by the same code as in a live session.
 */
#ifndef PTW_LOAD_H
#define PTW_LOAD_H

#include <stdbool.h>
#include <stddef.h>

#include "ptw_output.h"

struct ptw_loaded {
	struct ptw_report report; /* report.spans: the engine */
	bool stream;		  /* it was a --json-lines stream */
	bool truncated;		  /* a stream without its last line (the run was cut) */
	void *priv;		  /* what the report points to */
};

/*
 * Reads text[0..len). streaming: a stream's spans are retired as they are
 * read (bounded memory, and the summary the live session printed).
 * filter (may be NULL): only the spans it lets through (--tid, --routine).
 * Returns 0 and *ret, or -EINVAL with a one-line reason in err (another
 * schema version, not ptwatch's, malformed).
 */
int ptw_load(const char *text, size_t len, bool streaming, const struct ptw_text_filter *filter,
	     struct ptw_loaded **ret, char *err, size_t errlen);
void ptw_loaded_free(struct ptw_loaded *l);

#endif
