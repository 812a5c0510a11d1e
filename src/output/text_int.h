/* SPDX-License-Identifier: MIT */
/*
 * Inside the text output: what text.c (the event log, its words, its
 * filters) gives summary.c (the summary, --snapshot's text).
 */
#ifndef PTW_OUTPUT_TEXT_INT_H
#define PTW_OUTPUT_TEXT_INT_H

#include "ptw_output.h"

#include <errno.h>
#include <fnmatch.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "ptw_output.h"
#include "ptw_frames.h"
#include "ptw_locks.h"
#include "ptw_symbols.h"

/* Above this many spans the summary groups them by start routine. */
#define TABLE_MAX_ROWS PTW_SPANS_KEEP

/* ---- text.c ---- */

void text_slow_text(struct ptw_buf *out, const struct ptw_span *sp, const char *pre,
		    const char *post);

#endif
