/* SPDX-License-Identifier: MIT */
/* Shared between the tracer's dispatcher (tracer.c) and its hooks (hooks.c). */
#ifndef PTW_TRACER_INTERNAL_H
#define PTW_TRACER_INTERNAL_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "ptw_attach.h"
#include "ptw_breakpoints.h"
#include "ptw_events.h"
#include "ptw_output.h"
#include "ptw_symbols.h"
#include "ptw_thread_db.h"
#include "ptw_tracer.h"

/* What a breakpoint is for; one address may serve several. */
enum hook {
	HOOK_DL_DEBUG_STATE = 1u << 0,	/* ld.so's r_brk: libraries (un)loaded */
	HOOK_TD_CREATE = 1u << 1,	/* __nptl_create_event */
	HOOK_TD_DEATH = 1u << 2,	/* __nptl_death_event */
	HOOK_START = 1u << 3,		/* a thread start routine's entry */
	HOOK_START_RETURN = 1u << 4,	/* in start_thread, after the start routine returned */
	HOOK_MAIN = 1u << 5,		/* main() entry */
	HOOK_MAIN_RETURN = 1u << 6,	/* where main() returns to */
	HOOK_LIBC_START_MAIN = 1u << 7, /* finds main when the executable is stripped */
	HOOK_PTHREAD_CREATE = 1u << 8,	/* entry: the attr (detach state) */
	HOOK_PTHREAD_EXIT = 1u << 9,
	HOOK_PTHREAD_CANCEL = 1u << 10,
	HOOK_PTHREAD_DETACH = 1u << 11,
	HOOK_JOIN = 1u << 12,		/* __pthread_clockjoin_ex entry */
	HOOK_JOIN_RET = 1u << 13,	/* its ret instructions */
};

/* Per-LWP tracer state, hung on ptw_lwp.user. */
struct thread {
	bool announced;	    /* its creation was processed (or it is the main thread) */
	bool foreign;	    /* an LWP of a fork/vfork child, not of the target */
	bool vfork_child;   /* shares our memory until it execs: keep it traced */
	bool detach_asap;   /* fork child: detach at its first stop */
	bool is_main;
	uint64_t pd;	    /* struct pthread *, 0 unknown */
	uint64_t start_routine;
	bool awaiting_start;
	bool started, returned;
	bool exit_reported; /* LWP_EXIT emitted */
	/* As a creator: the child of its last clone, until TD_CREATE claims it. */
	pid_t child;
	uint64_t child_tls, child_ns;
	int attr_detached;  /* from the pthread_create entry hook, -1 unknown */
	bool in_join;
	bool used_xol;	    /* ran an out-of-line slot: a signal frame may point there */
};

/* One program image (reset at exec). */
struct image {
	struct ptw_symbols *syms;
	struct ptw_tdb *tdb;
	bool tdb_failed;
	bool dynamic;
	uint64_t r_debug;	 /* &_r_debug (dynamic) */
	uint64_t dl_debug_state; /* ld.so's r_brk, hooked for dlopen/dlclose */
	uint64_t main_addr;
	bool main_seen;
	bool fresh; /* started under our eyes (launch or exec): main() is still to come */
	uint64_t create_lo, create_hi; /* pthread_create, for the create site */
	bool have_result, have_joinid;
	uint64_t result_off, joinid_off; /* struct pthread members (libc DWARF) */
	bool attr_layout_known;		 /* pthread_attr flags at offset 8 */
	uint64_t start_return_sites[4];
	int nstart_return_sites;
	char *exe;
	char *glibc;
	int task_dirfd; /* /proc/PID/task, for comm */
};

struct ptw_tracer {
	struct ptw_tracer_opts o;
	bool launched; /* we started it (else: attached to it) */
	bool snapshot; /* attached only to look */
	bool exec_while_attaching;
	struct ptw_proc *proc;
	struct ptw_bptab *bps;
	struct image img;
	struct ptw_symbols **old_syms; /* retired images: their locations stay valid */
	size_t nold_syms;
	char *const *argv;
	char **owned_argv; /* attach: read from /proc/PID/cmdline */
	uint64_t start_ns;
	bool ended;
	int exit_code, exit_signal;
	bool core_dumped;
	bool target_gone;
	bool detached;
	bool detach_told; /* PTW_EV_DETACHED emitted */
	int left_traced;   /* threads we could not detach from */
	uint64_t frozen_ns;
	/* Session signals in launch mode, by number (see ptw_tracer_run). */
	struct session_signal {
		uint64_t copy_ns;     /* ptwatch got it; has the command? (waiting) */
		uint64_t delivery_ns; /* the command got it; ptwatch not yet */
		uint64_t press_ns;    /* the last time both did */
		bool press_delivered; /* and the command's delivery stop was seen */
	} ssig[32];
	int end_signal; /* a session signal that ends the session: detach */
	struct ptw_interrupt *interrupts;
	size_t ninterrupts;
	bool after_detach; /* target_gone: it ended once we had let go */
	int fatal_at_detach; /* a signal we delivered at detach will end it */
	struct ptw_warning *warnings;
	size_t nwarnings;
	struct ptw_map warned; /* hash(code:detail) -> 1: warn once */
};

/* tracer.c */
void emit(struct ptw_tracer *t, struct ptw_event *ev);
struct thread *thread_of(struct ptw_lwp *l);
void warn(struct ptw_tracer *t, const char *code, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));
/* A stopped thread of the target to run an injected system call (mmap,
 * munmap): one that can now (the main thread preferred), else one that
 * make_injectable() may prepare; NULL if none. */
struct ptw_lwp *injection_host(struct ptw_tracer *t);
/* Inserts a breakpoint; makes host injectable first if an XOL page is needed. */
int insert_bp(struct ptw_tracer *t, uint64_t addr, unsigned hooks, struct ptw_lwp *host);
/* The thread's name (/proc/PID/task/TID/comm), malloc'd, or NULL. */
char *read_comm_str(struct ptw_tracer *t, pid_t tid);
/* Emits it as PTW_EV_THREAD_NAME. */
void read_comm(struct ptw_tracer *t, pid_t tid, uint64_t ns);
/* Lets go of a live target as ptw_tracer_detach() does, without saying so
 * (PTW_EV_DETACHED): a snapshot tells what it copied first. */
int tracer_let_go(struct ptw_tracer *t);

/* attach.c, shared with snapshot.c */
/* Stops that arrive while we attach (nothing patched yet). */
void attach_on_stop(void *ctx, struct ptw_stop *st);
/* The tracer of a process just seized (ptw_seize): its command line read,
 * a zombie main thread warned about. */
struct ptw_tracer *attached_tracer_new(const struct ptw_tracer_opts *o, struct ptw_proc *proc,
				      const struct ptw_seize_info *info, uint64_t start_ns,
				      bool snapshot);
/* Stops every seized thread within a deadline (a warning counts those that
 * did not, saying what that costs: consequence) and takes every LWP held
 * as the target's. Returns how many did not stop. */
int attach_stop_all(struct ptw_tracer *t, const char *consequence);
/* libthread_db's list (td_ta_thr_iter): pd and start routine onto our LWPs. */
void attach_list_threads(struct ptw_tracer *t, int stuck);
/* The target's live threads, main first (malloc'd; *ret_n of them). */
struct ptw_lwp **attach_threads(struct ptw_tracer *t, size_t *ret_n);
/* PTW_EV_PREEXISTING for a thread found running (and its name; NULL: read it). */
void attach_emit_preexisting(struct ptw_tracer *t, struct ptw_lwp *l, const char *name,
			     uint64_t ns);
/* The same in two steps, for a thread that runs again in between: what we
 * know of it, and the word to read at joinid_at (pd->joinid: detached?)
 * into joinid while it is stopped; then the events. */
struct preexisting {
	pid_t tid;
	uint64_t pd, routine;
	bool have_joinid; /* set it false if the read fails */
	uint64_t joinid_at, joinid;
};
void attach_preexisting_facts(struct ptw_tracer *t, struct ptw_lwp *l, struct preexisting *ret);
void attach_emit_facts(struct ptw_tracer *t, const struct preexisting *f, const char *name,
		       uint64_t ns);

/* hooks.c */
/* Symbols of the current image, where its dynamic linker reports
 * library changes, main(): no stopped thread needed. */
int image_load(struct ptw_tracer *t);
/* Warns (once) when debuginfod failed: see ptw_symbols_debuginfod_error. */
void debuginfod_warning(struct ptw_tracer *t);
/* Breakpoints for the above (main() only when launched). */
void image_hooks(struct ptw_tracer *t, struct ptw_lwp *l);
/* Both, for a launched or exec'd image, then PTW_EV_IMAGE. */
int image_init(struct ptw_tracer *t, struct ptw_lwp *l);
void image_release(struct ptw_tracer *t);
/* libthread_db agent, glibc version, struct pthread layout. */
int tdb_open(struct ptw_tracer *t);
/* Event mask and breakpoints, events enabled on every stopped thread;
 * host is a stopped LWP that can run an injected mmap. */
int tracing_setup(struct ptw_tracer *t, struct ptw_lwp *host);
/* Both, once libc is ready. */
int threads_setup(struct ptw_tracer *t, struct ptw_lwp *l);
/* The flags and TLS of the clone the LWP is stopped in (its clone event). */
void clone_args(struct ptw_tracer *t, struct ptw_lwp *l, uint64_t *ret_flags, uint64_t *ret_tls);
void on_clone(struct ptw_tracer *t, struct ptw_lwp *parent, pid_t child, uint64_t flags,
	      uint64_t tls, uint64_t ns);
void on_breakpoint(struct ptw_tracer *t, struct ptw_lwp *l, struct ptw_bp *bp, uint64_t ns);

#endif
