/* SPDX-License-Identifier: MIT */
/*
 * The record of a session, as bytes: the typed events (ptw_events.h) with
 * the locations they point to, and the report's header (ptw_output.h: all
 * but the spans). The tracer process writes it as it goes; the restorer
 * process (ptw_guardian.h) reads it into a span engine of its own, so that
 * whatever the tracer saw survives the tracer's death.
 *
 * Encoding: records of [u8 type][u32 payload length][payload], integers in
 * host order (both ends are the same binary on the same machine), strings
 * as [u32 length or UINT32_MAX for NULL][bytes]. A location is sent once,
 * before the first event that uses it, and named by a number afterwards.
 * Pure code: no I/O.
 */
#ifndef PTW_RECORD_H
#define PTW_RECORD_H

#include <stddef.h>

#include "ptw_events.h"
#include "ptw_output.h"
#include "ptw_util.h"

struct ptw_record_writer;

struct ptw_record_writer *ptw_record_writer_new(void);
void ptw_record_writer_free(struct ptw_record_writer *w);

/* Appends ev (and the locations it names, the first time) to out. */
void ptw_record_event(struct ptw_record_writer *w, struct ptw_buf *out, const struct ptw_event *ev);
/* Appends the report's header (target, session, warnings; not the spans). */
void ptw_record_report(struct ptw_record_writer *w, struct ptw_buf *out, const struct ptw_report *r);
/* Appends the end mark: the tracer finished and wrote its outputs itself. */
void ptw_record_end(struct ptw_buf *out);
/* -f: one process of the session, as it is now (sent again when it
 * changes: exec, exit); the reader keeps the latest per id. */
void ptw_record_process(struct ptw_buf *out, const struct ptw_process *p);

struct ptw_record_handlers {
	void (*event)(void *ctx, const struct ptw_event *ev);
	/* The latest header; valid until the next one or ptw_record_reader_free. */
	void (*report)(void *ctx, const struct ptw_report *r);
	void (*end)(void *ctx);
};

struct ptw_record_reader;

struct ptw_record_reader *ptw_record_reader_new(void);
/* Locations stay valid until here: free the span engine first. */
void ptw_record_reader_free(struct ptw_record_reader *r);
/* The processes recorded so far, by id (valid until the next call or
 * ptw_record_reader_free). Returns how many. */
size_t ptw_record_processes(struct ptw_record_reader *r, const struct ptw_process **ret);

/*
 * Feeds the next bytes of the record (any split); calls the handlers for
 * each complete record, in order. Returns 0, or -EPROTO once the bytes
 * make no sense (nothing more is decoded after that).
 */
int ptw_record_feed(struct ptw_record_reader *r, const void *data, size_t len,
		    const struct ptw_record_handlers *h, void *ctx);

#endif
