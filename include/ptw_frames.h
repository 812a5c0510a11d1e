/* SPDX-License-Identifier: MIT */
/*
 * Frame spans: calls of traced functions inside threads (--trace), paired
 * from entry and return events by thread, stack pointer and return address
 * (docs/design.md, "Behaviour"). Pure code (no ptrace, no clock, no I/O), fed by the span engine
 * (ptw_spans.h) and unit-tested with synthetic streams.
 *
 * The model: a call enters a function with its return address at [sp]; the
 * frame lives while the thread's stack pointer is at or below that slot.
 * A thread seen at a stack pointer above it (a return elsewhere, a later
 * entry, a catch) has left the frame: by its return when the return was
 * observed at that very slot and address, else without one (unmatched, with
 * the reason that fits: exception, longjmp, tail call, ...). Nothing is
 * discarded.
 *
 * Code entered without a call: a signal handler (PTW_EV_FRAME_ENTRY with
 * sig) leaves no frame (the kernel pushed its signal frame below the
 * interrupted one) and nests inside the frame it interrupted; it returns
 * through the sigreturn trampoline like any return. A handler that is not
 * traced is known from PTW_EV_SIGNAL_DELIVER (until PTW_EV_SIGRETURN, or the
 * thread seen above what it interrupted: a siglongjmp out): a traced
 * function it calls nests under the interrupted frame and carries the
 * signal, and leaves nothing (on a sigaltstack above that frame). A
 * thread that switches contexts (PTW_EV_CONTEXT_SWITCH) has one shadow
 * stack per context: the one it leaves is parked, keyed by the stack pointer it will resume at,
 * and taken up again when a switch lands there; a context never seen
 * before starts empty, its frames nesting under the frame that switched to
 * it. Frames of a context still parked when the thread or the process
 * ends, or of one left by setcontext (not saved), are unmatched with
 * reason "context_abandoned".
 */
#ifndef PTW_FRAMES_H
#define PTW_FRAMES_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "ptw_events.h"
#include "ptw_observe.h"

struct ptw_span;
struct ptw_location;

/* ---- frame spans ---- */

enum ptw_frame_status {
	PTW_FRAME_OPEN,
	PTW_FRAME_COMPLETED,
	PTW_FRAME_UNMATCHED,
};

/* (Held for every call in a document: 120 bytes, its members ordered so
 * that none pads; the rare mark of one seen open is apart.) */
struct ptw_frame {
	uint32_t id;	      /* 1, 2, ... in order of entry (their own numbering) */
	uint32_t thread_span; /* the thread span's id, 0 unknown */
	pid_t pid;	      /* its process (0 unknown) */
	uint32_t process;     /* -f: its process's id in the report */
	pid_t tid;
	unsigned depth;	      /* 1: no traced frame below it in its thread */
	uint32_t parent;      /* the enclosing frame's id, 0 none */
	enum ptw_frame_status status;
	int sig;	      /* where this signal's handling begins among traced frames: the
			       * handler the kernel entered, or (handler not traced) a traced
			       * function it called; 0 none */
	bool entry_unknown;   /* under way when ptwatch attached: no duration */
	bool has_return;
	bool has_left;	      /* unmatched: when the frame was found gone */
	bool has_value;
	const struct ptw_location *function;
	uint64_t entry_ns;    /* entry_unknown: the attach's time */
	uint64_t return_ns;
	uint64_t left_ns;
	const char *reason;   /* unmatched: static string */
	uint64_t value;	      /* rax at the return */
	uint64_t sp, ret;     /* at entry: stack pointer and return address */
	uint64_t child_ns;    /* time spent in completed direct children */
	struct ptw_open_mark *open; /* seen open past --open-timeout, else NULL */
};

struct ptw_frames;
struct ptw_timeouts;

struct ptw_frames *ptw_frames_new(void);
void ptw_frames_free(struct ptw_frames *f);
/* Open frames are watched there (PTW_SPAN_FRAME, by id) until they end. */
void ptw_frames_set_timeouts(struct ptw_frames *f, struct ptw_timeouts *to);
/* PTW_EV_SPAN_OPEN of a frame span: it is marked (open) and returned if it
 * is still open; else NULL. */
const struct ptw_frame *ptw_frames_mark_open(struct ptw_frames *f, const struct ptw_event *ev);

/*
 * Consumes one event (the frame kinds, and the thread and process ends that
 * close frames). thread: the live thread span of ev->tid before the event,
 * or NULL. Returns the frame concerned (for the event log), or NULL.
 */
const struct ptw_frame *ptw_frames_consume(struct ptw_frames *f, const struct ptw_event *ev,
					   const struct ptw_span *thread);

/* fn(ctx, frame) as each frame gets its final status (completed or
 * unmatched), for --json-lines. */
typedef void (*ptw_frame_closed_fn)(void *ctx, const struct ptw_frame *fr);
void ptw_frames_set_closed(struct ptw_frames *f, ptw_frame_closed_fn fn, void *ctx);

/*
 * Streaming (--json-lines; set by ptw_spans_set_streaming): a frame that
 * got its final status is counted into the totals and its function's
 * figures at the next ptw_frames_collect and freed; only open frames are
 * held (ptw_frames_count/get), so memory follows the calls under way.
 */
void ptw_frames_set_streaming(struct ptw_frames *f);
void ptw_frames_collect(struct ptw_frames *f);
/* Every frame, held or not: how many, completed, unmatched. */
void ptw_frames_totals(const struct ptw_frames *f, uint64_t *calls, uint64_t *completed,
		       uint64_t *unmatched);

/* `ptwatch report`: a frame read back from a document (copied; when
 * streaming, a closed one is only counted). */
void ptw_frames_add(struct ptw_frames *f, const struct ptw_frame *fr);

size_t ptw_frames_count(const struct ptw_frames *f);
const struct ptw_frame *ptw_frames_get(const struct ptw_frames *f, size_t i);

const char *ptw_frame_status_name(enum ptw_frame_status st);

/* Per-function statistics of the completed calls (and the others counted). */
struct ptw_function_stats {
	const struct ptw_location *function;
	uint64_t calls;	    /* every frame */
	uint64_t completed; /* with an observed return */
	uint64_t timed;	    /* those whose entry was seen too: the times below are theirs */
	uint64_t total_ns, self_ns; /* inclusive, minus completed children */
	uint64_t min_ns, p50_ns, p99_ns, max_ns;
};

/* Stats by function, most total time first; caller frees *ret. Returns n. */
size_t ptw_frames_stats(const struct ptw_frames *f, struct ptw_function_stats **ret);

#endif
