/* SPDX-License-Identifier: MIT */
/*
 * `ptwatch report`: a saved spans document (ptwatch.spans/4) or a
 * --json-lines stream (ptwatch.lines/1) read back into a report and a span
 * engine, so that the summary, the document and the Chrome trace are
 * rendered by the same code as in a live session.
 *
 * The file is hostile input: it is read with json-c (strict RFC 8259,
 * UTF-8 checked, nesting bounded), a document whole and a stream line by
 * line, and nothing it claims makes the reader allocate or the outputs
 * print without bound. What a real session can reach is accepted; beyond
 * that the file is refused with one line that names the bound (the man
 * page, "ptwatch report FILE", lists them):
 */
#ifndef PTW_LOAD_H
#define PTW_LOAD_H

#include <stdbool.h>
#include <stddef.h>

#include "ptw_output.h"

/* A document read whole, or a stream converted to a document or a trace
 * (its spans are all held): at most this many bytes. A stream's summary
 * is read line by line, in bounded memory, whatever its size. */
#define PTW_LOAD_MAX_BYTES ((size_t)256 << 20)
/* One line of a stream (the metrics line of a big --locks session is the
 * longest a session writes: a few MiB). */
#define PTW_LOAD_MAX_LINE ((size_t)16 << 20)
/* Arrays and objects inside one another (the writer nests at most 6). */
#define PTW_LOAD_MAX_NESTING 16
/* A string (a name, a path, a symbol); a warning's message. */
#define PTW_LOAD_MAX_STRING ((size_t)64 << 10)
#define PTW_LOAD_MAX_MESSAGE ((size_t)1 << 20)
/* A pid or tid: Linux's PID_MAX_LIMIT. Also the most threads a stream
 * may have begun and not ended at once. */
#define PTW_LOAD_MAX_PID 4194304
/* A frame span's depth (--trace): a thread's stack cannot hold more
 * calls (16 MiB of stack at 16 bytes a call). */
#define PTW_LOAD_MAX_FRAME_DEPTH (1u << 20)
/* Frames in a snapshot's or a wait's stack; members of a deadlock; kinds
 * of ptrace stops; processes of a session (-f). */
#define PTW_LOAD_MAX_STACK 1024
#define PTW_LOAD_MAX_DEADLOCK 4096
#define PTW_LOAD_MAX_STOP_KINDS 64
#define PTW_LOAD_MAX_PROCESSES (1u << 20)

struct ptw_loaded {
	struct ptw_report report; /* report.spans: the engine */
	bool stream;		  /* it was a --json-lines stream */
	bool truncated;		  /* a stream without its last line (the run was cut) */
	void *priv;		  /* what the report points to */
};

/*
 * Reads text[0..len) (ptw_load) or the file fd up to its end (ptw_load_fd).
 * streaming: a stream's spans are retired as they are read (bounded memory,
 * and the summary the live session printed); false: every span is held
 * (to write a document or a trace), and a stream too is bounded by
 * PTW_LOAD_MAX_BYTES. filter (may be NULL): only the spans it lets through
 * (--tid, --routine), and the frames and waits of their threads.
 * Returns 0 and *ret, or -EINVAL with a one-line reason in err (another
 * schema version, not ptwatch's, malformed, beyond a bound, two sessions
 * in one file), or -errno when the file cannot be read.
 */
int ptw_load(const char *text, size_t len, bool streaming, const struct ptw_span_filter *filter,
	     struct ptw_loaded **ret, char *err, size_t errlen);
int ptw_load_fd(int fd, bool streaming, const struct ptw_span_filter *filter,
		struct ptw_loaded **ret, char *err, size_t errlen);
void ptw_loaded_free(struct ptw_loaded *l);

#endif
