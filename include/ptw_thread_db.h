/* SPDX-License-Identifier: MIT */
/*
 * glibc's libthread_db, driven over the attach layer's memory and register
 * API and the symbol table (the proc_service callbacks live here too).
 * See docs/design.md, "Facts about the mechanism", before changing it.
 */
#ifndef PTW_THREAD_DB_H
#define PTW_THREAD_DB_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>
#include <thread_db.h>

struct ptw_proc;
struct ptw_symbols;
struct ptw_tdb;

/* Text for a td_err_e ("TD_NOLIBTHREAD: no libpthread in the target"). */
const char *ptw_tdb_strerror(td_err_e err);

/*
 * Creates the thread agent (td_ta_new). Needs libc mapped and relocated.
 * Returns 0, or -ENOENT when the target has no usable nptl (static stripped,
 * musl, not yet loaded), -EPROTO on a version mismatch; *ret_err (may be
 * NULL) gets the td_err_e. A failure with answers from the symbol cache
 * is tried once more without them (a cache file is hostile input).
 */
int ptw_tdb_new(struct ptw_proc *proc, struct ptw_symbols *syms, struct ptw_tdb **ret,
		td_err_e *ret_err);
/* nptl's version string in process proc ("2.36"), read from
 * __nptl_version (glibc 2.34+) or nptl_version before: a malloc'd string,
 * or NULL when neither can be found or read. No agent needed. */
char *ptw_nptl_version(struct ptw_proc *proc, struct ptw_symbols *syms);
/* Deletes the agent; does not touch the target (see ptw_tdb_disable_events). */
void ptw_tdb_free(struct ptw_tdb *t);

/*
 * Sets the process-wide event mask (TD_DEATH, plus TD_CREATE when want_create)
 * and returns the breakpoint addresses td_ta_event_addr gives for them
 * (*ret_create_bp is 0 when !want_create).
 */
int ptw_tdb_enable_events(struct ptw_tdb *t, bool want_create, uint64_t *ret_create_bp,
			  uint64_t *ret_death_bp);
/* Clears the process-wide event mask and empties the message list (detach). */
int ptw_tdb_disable_events(struct ptw_tdb *t);

struct ptw_tdb_thread {
	uint64_t pthread;   /* th_unique == pthread_t == struct pthread * */
	pid_t lid;	    /* LWP, -1 or 0 when not running yet / gone */
	uint64_t startfunc; /* start routine; 0 for the main thread */
	bool exiting;	    /* ti_state TD_THR_ZOMBIE: pthread_exit or cancellation began */
	bool traceme;	    /* report_events set */
};

/* td_thr_get_info on the thread whose struct pthread is at pd. */
int ptw_tdb_thread_info(struct ptw_tdb *t, uint64_t pd, struct ptw_tdb_thread *ret);
/*
 * report_events on for the thread at pd: td_thr_event_enable(pd, 1),
 * confirmed by reading ti_traceme back (on stock Debian it returns
 * TD_NOCAPAB although it worked: docs/design.md, Facts, 3); once one direct
 * write of the field's byte was confirmed so, that one write.
 */
int ptw_tdb_thread_enable(struct ptw_tdb *t, uint64_t pd);
/*
 * The same for many threads at once (attach to 10,000): report_events is
 * located through libthread_db's own descriptor of it and written with a
 * few batched writes; samples are confirmed with td_thr_get_info. Falls
 * back to one td_thr_event_enable per thread. Returns 0 or -errno.
 */
int ptw_tdb_threads_enable(struct ptw_tdb *t, const uint64_t *pds, size_t n);
/* The reverse (detach): report_events off again. */
int ptw_tdb_threads_disable(struct ptw_tdb *t, const uint64_t *pds, size_t n);

/* Offset of a struct pthread field ("tid", "report_events", ...) from
 * libthread_db's own descriptor of it. Returns 0 or -ENOENT. */
int ptw_tdb_pthread_field(struct ptw_tdb *t, const char *field, uint32_t *ret_offset);

/* size bytes at one of libc's symbols for libthread_db ("_thread_db_..."):
 * a descriptor ({ bits, count, offset }) or a size. Returns 0 or -ENOENT. */
int ptw_tdb_read_symbol(struct ptw_tdb *t, const char *name, void *buf, size_t size);

/* td_ta_map_lwp2thr: tid must be ptrace-stopped (its fs_base is read). */
int ptw_tdb_map_lwp(struct ptw_tdb *t, pid_t tid, uint64_t *ret_pd);

/*
 * Pops at most max event messages (td_ta_event_getmsg). The list is pushed
 * to with CAS by running threads while this pops without atomics, and a
 * reused descriptor can make it cyclic: messages are advice, never truth
 * (docs/design.md, Facts, 7), and the loop is bounded.
 */
typedef void (*ptw_tdb_msg_cb)(void *ctx, td_event_e event, uint64_t pd);
int ptw_tdb_drain(struct ptw_tdb *t, int max, ptw_tdb_msg_cb cb, void *ctx);

/*
 * td_ta_thr_iter until a pass finds nothing new (all LWPs should be
 * stopped: with some still running, pass all_stopped = false and it
 * insists on two quiet passes). -ELOOP: the list in the target's memory
 * goes round without coming back to its head (hostile, or corrupted);
 * the threads met before the loop were given to cb.
 */
typedef void (*ptw_tdb_iter_cb)(void *ctx, const struct ptw_tdb_thread *th);
#define PTW_TDB_LOOP_WARNING                                                                 \
	"the list of threads in the process's memory goes round in a loop (corrupted or "   \
	"hostile): the threads it does not reach are listed from /proc, their start "       \
	"routines read from their own struct pthread (their TLS) where it names them"
int ptw_tdb_iterate(struct ptw_tdb *t, bool all_stopped, ptw_tdb_iter_cb cb, void *ctx);

#endif
