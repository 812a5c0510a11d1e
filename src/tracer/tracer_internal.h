/* SPDX-License-Identifier: MIT */
/* Shared by the files of the tracer (src/tracer); see docs/design.md. */
#ifndef PTW_TRACER_INTERNAL_H
#define PTW_TRACER_INTERNAL_H

#include <limits.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "ptw_attach.h"
#include "ptw_breakpoints.h"
#include "ptw_events.h"
#include "ptw_frames.h"
#include "ptw_glibc.h"
#include "ptw_observe.h"
#include "ptw_output.h"
#include "ptw_symbols.h"
#include "ptw_thread_db.h"
#include "ptw_tracer.h"
#include "ptw_warnings.h"

/*
 * What a breakpoint is for. A breakpoint carries a set of hook kinds (one
 * address may serve several); at a hit the dispatcher (tracer.c) steps the
 * thread over it, then calls each kind's handler, in the order of this
 * list. One list makes the enum (HK_x), the bit masks (HOOK_x), the
 * handlers' declarations (hook_x) and the dispatch table (tracer.c):
 * X(NAME, handler), each with the file of its handler in a comment.
 */
#define PTW_HOOK_KINDS(X)                                                                     \
	X(DL_DEBUG_STATE, dl_debug_state)   /* lifecycle.c: ld.so's r_brk, libraries (un)loaded */ \
	X(TD_CREATE, td_create)		    /* lifecycle.c: __nptl_create_event */                 \
	X(TD_DEATH, td_death)		    /* lifecycle.c: __nptl_death_event */                  \
	X(START, start)			    /* lifecycle.c: a thread start routine's entry */      \
	X(START_RETURN, start_return)	    /* lifecycle.c: in start_thread, after the routine */  \
	X(MAIN, main)			    /* lifecycle.c: main() entry */                        \
	X(MAIN_RETURN, main_return)	    /* lifecycle.c: where main() returns to */             \
	X(LIBC_START_MAIN, libc_start_main) /* lifecycle.c: finds main in a stripped program */    \
	X(PTHREAD_CREATE, pthread_create)   /* lifecycle.c: entry, the attr (detach state) */      \
	X(PTHREAD_EXIT, pthread_exit)	    /* lifecycle.c */                                      \
	X(PTHREAD_CANCEL, pthread_cancel)   /* lifecycle.c */                                      \
	X(PTHREAD_DETACH, pthread_detach)   /* lifecycle.c */                                      \
	X(JOIN, join)			    /* lifecycle.c: __pthread_clockjoin_ex entry */        \
	X(JOIN_RET, join_ret)		    /* lifecycle.c: its ret instructions */                \
	X(TRACE_LIBS, trace_libs)	    /* trace.c: at r_brk too, scan new libraries */    \
	X(FRAME_ENTRY, frame_entry)	    /* trace.c: a traced function's entry */           \
	X(FRAME_RETURN, frame_return)	    /* trace.c: where open frames return to */         \
	X(THROW, throw)			    /* trace.c: _Unwind_RaiseException */              \
	X(CATCH, catch)			    /* trace.c: __cxa_begin_catch */                   \
	X(LONGJMP, longjmp)		    /* trace.c: longjmp and its aliases */             \
	X(CONTEXT, context)		    /* trace.c: swapcontext, setcontext */             \
	X(SIGRETURN, sigreturn)		    /* trace.c: the sigreturn trampoline */            \
	X(LOCK_WAIT, lock_wait)		    /* locks.c: __lll_lock_wait, a contended mutex */  \
	X(LOCK_WAIT_PRIVATE, lock_wait_private) /* locks.c: __lll_lock_wait_private */         \
	X(FUTEX_WAIT, futex_wait)	    /* locks.c: __futex_abstimed_wait_common */        \
	X(WAIT_RETURN, wait_return)	    /* locks.c: where a slow path returns to */        \
	X(WAIT_JOIN, wait_join)		    /* locks.c: the join function's entry */           \
	X(WAIT_JOIN_RET, wait_join_ret)	    /* locks.c: its rets */

enum hook_kind {
#define PTW_HOOK_ENUM(name, fn) HK_##name,
	PTW_HOOK_KINDS(PTW_HOOK_ENUM)
#undef PTW_HOOK_ENUM
	HOOK_KINDS
};
/* A breakpoint's hooks are a bit set (ptw_bp.hooks): every kind needs a bit. */
_Static_assert(HOOK_KINDS <= sizeof(((struct ptw_bp *)0)->hooks) * CHAR_BIT,
	       "more hook kinds than bits in ptw_bp.hooks");

#define HOOK(k) (1u << (k))
enum {
#define PTW_HOOK_MASK(name, fn) HOOK_##name = HOOK(HK_##name),
	PTW_HOOK_KINDS(PTW_HOOK_MASK)
#undef PTW_HOOK_MASK
};

struct ptw_tracer;

/* A hook's handler: LWP l hit bp; regs are its registers at the int3
 * (rip = bp->addr), before the step over. The thread has already been
 * stepped over (its registers are written): the handler only observes,
 * emits events and may insert breakpoints. */
typedef void hook_fn(struct ptw_tracer *t, struct ptw_lwp *l, struct ptw_bp *bp,
		     const struct user_regs_struct *regs, uint64_t ns);

struct hook_desc {
	const char *name; /* for --debug */
	hook_fn *on_hit;
};

/* Every kind's handler, defined in the file the list names. */
#define PTW_HOOK_DECL(name, fn) hook_fn hook_##fn;
PTW_HOOK_KINDS(PTW_HOOK_DECL)
#undef PTW_HOOK_DECL

/*
 * The tracer's features: what each observes, with its own hooks and its
 * own state, per process and per thread. Every process tracer (launch,
 * attach, fork-follow: tracer_new() in process.c, the only place that
 * names them) gets the features its options turn on, in this order; the
 * core calls them at the moments of struct tracer_feature.
 */
enum feature_id {
	FEATURE_LIFECYCLE, /* lifecycle.c: thread spans (always on) */
	FEATURE_FRAMES,	   /* trace.c: --trace frame spans */
	FEATURE_LOCKS,	   /* locks.c: --locks wait spans, live deadlocks */
	FEATURES
};

/* A feature's state for one thread begins with this: whoever frees the
 * thread (core.c) calls its free, which only frees memory. */
struct feature_thread {
	void (*free)(struct feature_thread *ft);
};

struct ptw_backend_opts;
struct thread;
struct tracer_feature {
	const char *name;
	/* On for these options? (NULL: always.) */
	bool (*wanted)(const struct ptw_backend_opts *o);
	/* Each callback may be NULL. */
	/* The process tracer was made: its state, into t->fstate[id]. */
	void (*attached)(struct ptw_tracer *t);
	/* Symbols are loaded and the threads still run (attach, fork-follow):
	 * read now what the breakpoints will need. */
	void (*prepare)(struct ptw_tracer *t);
	/* An image is loaded (launch, exec, attach, fork-follow): its
	 * breakpoints; l is a stopped thread that can host an injection. */
	void (*image_ready)(struct ptw_tracer *t, struct ptw_lwp *l);
	/* libc and libthread_db are ready (the lifecycle feature finds out
	 * when): breakpoints in libc. */
	void (*libc_ready)(struct ptw_tracer *t, struct ptw_lwp *l);
	/* Attach: thread l, stopped by the attach (no stop of its own), was
	 * running before and its span is made: what it is in the middle of. */
	void (*under_way)(struct ptw_tracer *t, struct ptw_lwp *l);
	/* Hook kinds this feature adds to a breakpoint another feature puts
	 * with these hooks (the joins: --locks waits there too); 0: none. */
	unsigned (*hooks_beside)(struct ptw_tracer *t, unsigned hooks);
	/* Its address space went away (exec): every breakpoint is forgotten. */
	void (*image_reset)(struct ptw_tracer *t);
	/* The thread is forgotten: what it holds (return breakpoints) is let
	 * go and its fdata[id] freed. */
	void (*thread_gone)(struct ptw_tracer *t, struct thread *th);
	/* A signal is about to be delivered to l (a signal-delivery stop of
	 * the target, not one of our traps). */
	void (*signal_delivery)(struct ptw_tracer *t, struct ptw_lwp *l, int sig, uint64_t ns);
	/* The session is over: warnings about what it could not do. */
	void (*finish)(struct ptw_tracer *t);
	/* Frees t->fstate[id]. */
	void (*free)(struct ptw_tracer *t);
};
extern const struct tracer_feature feature_lifecycle, feature_frames, feature_locks;

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
	bool start_at_release; /* its start is told as it is let run (lifecycle_released) */
	bool has_start_arg;    /* ... with this argument, read at its clone */
	uint64_t start_arg;
	bool started, returned;
	bool exit_reported; /* LWP_EXIT emitted */
	/* no exit stop due: turned off at its death event (on_td_death), it
	 * leaves by its own exit syscall */
	bool exit_stop_off;
	/* its death is told at its exit stop (made while traced: no TD_DEATH,
	 * no report_events written), with whether it called pthread_exit */
	bool death_at_exit, exit_called;
	/* As a creator: the child of its last clone, until TD_CREATE claims it. */
	pid_t child;
	uint64_t child_tls, child_ns;
	int attr_detached;  /* from the pthread_create entry hook, -1 unknown */
	bool in_join;
	/* The join under way (lifecycle.c, "joins"): the joined thread's pd;
	 * its return is due once that thread is gone (join_due: its death was
	 * seen, still joined by this one); join_ret, join_sp: where a join that
	 * is not plain returns to, and the stack pointer there. */
	uint64_t join_pd, join_ret, join_sp;
	pid_t join_tid; /* a plain join's thread (its pd may be another's once it is gone) */
	bool join_due;
	bool died;	    /* its death event was seen */
	bool used_xol;	    /* ran an out-of-line slot: a signal frame may point there */
	bool follow_setup;  /* -f: first thread of a forked process, set it up at its first stop */
	/* A process sharing the memory of process vm_parent (vfork, or
	 * clone(CLONE_VM) whose parent runs on): stepped over our int3s while
	 * it does, let go (its bytes restored) before that memory stops being
	 * ours to restore (tracer_release_vm_children). 0: none. */
	pid_t vm_parent;
	/* Each feature's own state for this thread (NULL: none yet). */
	struct feature_thread *fdata[FEATURES];
};

/* One program image (reset at exec). */
struct image {
	struct ptw_symbols *syms;
	struct ptw_tdb *tdb;
	bool tdb_failed;
	bool dynamic;
	uint64_t r_debug;	 /* &_r_debug (dynamic) */
	unsigned modules_gen;	 /* bumped each time the module list is re-read */
	uint64_t dl_debug_state; /* ld.so's r_brk, hooked for dlopen/dlclose */
	bool r_brk_hooked;	 /* ... and its breakpoint is in (else: modules read at main) */
	uint64_t main_addr;
	bool main_seen;
	bool fresh; /* started under our eyes (launch or exec): main() is still to come */
	uint64_t create_lo, create_hi; /* pthread_create, for the create site */
	bool have_result, have_joinid;
	uint64_t result_off, joinid_off; /* struct pthread members (libc DWARF) */
	bool attr_layout_known;		 /* pthread_attr flags at offset 8 */
	uint64_t start_return_sites[4];
	int nstart_return_sites;
	/* struct pthread's layout, read at the first thread whose facts come
	 * from its TLS (attach_facts_from_tls) */
	bool tls_layout_read;
	struct ptw_pthread_layout tls_layout;
	char *exe;
	char *glibc;
	int task_dirfd; /* /proc/PID/task, for comm */
	/* Joins (lifecycle.c): every ret of the join function hooked (else
	 * the entry alone); it is __pthread_clockjoin_ex (abstime, block);
	 * the plain joins under way (joined pd -> joiner tid); where the
	 * others return to. */
	bool join_rets, join_clockjoin;
	bool exit_hooked; /* pthread_exit's breakpoint is in (a thread's end at its exit stop needs it) */
	uint64_t join_lo, join_hi; /* the join function's extent */
	struct ptw_map joiners;
	struct retbps *join_retbps;
	/* return address -> the length of the call before it, as read when
	 * the module list was at generation g: (g + 1) << 8 | length */
	struct ptw_map call_lengths;
};

/*
 * One traced process. The first (launched or attached) is the root: the
 * handle the public API gives out, holding what the session shares
 * (signals, interrupts, warnings, the wait loop). With -f, every process
 * it forks gets a tracer of its own (its own ptw_proc view, breakpoint
 * table and journal, image and thread agent, features), listed in
 * the root's followed; the features see one process at a time.
 */
struct ptw_tracer {
	struct ptw_backend_opts o;
	struct ptw_tracer *root;     /* NULL for the root */
	pid_t pid;		     /* the process (also before it has a proc: vfork) */
	pid_t ppid, parent_tid;	     /* followed: who forked it */
	uint32_t serial, pserial;    /* its ptw_process.id (root: 0), and its parent's */
	bool vfork_pending;	     /* a vfork child before its exec: its parent steps it */
	struct ptw_tracer *vfork_parent;
	struct ptw_tracer *xol_parent; /* fork: whose out-of-line pages it inherited */
	uint64_t end_ns;
	char *fail_why;		     /* could not be followed: why (it was let go) */
	char *last_exe;		     /* its image's, kept once the image is released */
	size_t bps_retired;	     /* breakpoints of its table, once freed */
	struct ptw_map foreign_said; /* addresses another tool's int3 holds: warned */
	/* root only */
	struct ptw_tracer **followed; /* in order of fork */
	size_t nfollowed;
	struct ptw_map by_pid;	     /* pid -> live followed tracer */
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
	bool finished; /* the features' finish ran (ptw_tracer_finish) */
	int exit_code, exit_signal;
	bool core_dumped;
	bool target_gone;
	/* a thread was killed without its exit stop (exec, exit_group,
	 * SIGKILL): forks it made may never be reported (follow_orphans) */
	bool going_down;
	size_t ngoing_down; /* root: how many processes are going_down */
	bool letting_go;       /* tracer_let_go under way */
	bool detached;
	bool detach_told; /* PTW_EV_DETACHED emitted */
	int left_traced;   /* threads we could not detach from */
	bool exiting_at_detach; /* a thread was held at its exit event, */
	bool all_exiting_at_detach; /* ... every live one */
	uint64_t frozen_ns;
	struct ptw_signal_model sigs; /* root: what session signals mean (signals.c) */
	bool stop_requested; /* ptw_tracer_stop(): detach */
	bool after_detach; /* target_gone: it ended once we had let go */
	int fatal_at_detach; /* a signal we delivered at detach will end it */
	/* The last SIGTRAP delivered to one of its threads (not a trap of
	 * ours: those are handled): where, whether an int3 (SI_KERNEL) and
	 * whether ptwatch had patched that address; for the warning if the
	 * process dies of it. */
	struct {
		bool seen, int3, patched;
		pid_t tid;
		uint64_t addr;
	} trap;
	/* Its features (tracer_new), in the order of enum feature_id, and
	 * their state by id (NULL: off). */
	const struct tracer_feature *features[FEATURES];
	size_t nfeatures;
	void *fstate[FEATURES];
};

/* core.c: used by every file above; calls none of them (features only
 * through t->features) */
/* The features' moments (struct tracer_feature), each in table order. */
void tracer_features_prepare(struct ptw_tracer *t);
void tracer_image_ready(struct ptw_tracer *t, struct ptw_lwp *l);
void tracer_features_under_way(struct ptw_tracer *t, struct ptw_lwp *l);
void tracer_libc_ready(struct ptw_tracer *t, struct ptw_lwp *l);
void tracer_signal_delivery(struct ptw_tracer *t, struct ptw_lwp *l, int sig, uint64_t ns);
unsigned tracer_hooks_beside(struct ptw_tracer *t, unsigned hooks);
void tracer_image_reset(struct ptw_tracer *t);
void tracer_features_finish(struct ptw_tracer *t);
/* Frees their state, and their state for t's threads (none of it is let
 * go of: t's breakpoints are gone or going); t has no features any more. */
void tracer_features_free(struct ptw_tracer *t);
/* The LWP is forgotten: its features let go of it, its state is freed. */
void tracer_forget_lwp(struct ptw_tracer *t, struct ptw_lwp *l);
/* ev to the session (its process set); -f: an event that begins, changes
 * or ends a process is followed by what the document says of it now
 * (tracer_say_process). */
void tracer_emit(struct ptw_tracer *t, struct ptw_event *ev);
/* -f: what the document says of t's process now, to the session. */
void tracer_say_process(struct ptw_tracer *t);
/* The LWP's tracer state, made on first use. */
struct thread *tracer_thread_of(struct ptw_lwp *l);
/* Frees it (NULL accepted), and each feature's state in it. */
void tracer_thread_free(struct thread *th);
/* Feature id's state for the thread: made on first use (size bytes,
 * zeroed, its free set to free_fn), or NULL if it has none (peek). */
struct feature_thread *tracer_feature_thread(struct ptw_lwp *l, enum feature_id id, size_t size,
					    void (*free_fn)(struct feature_thread *ft));
struct feature_thread *tracer_feature_peek(struct ptw_lwp *l, enum feature_id id);
/* It begins again, as the new image's main thread (exec): its features
 * let go of what it held, every field as new. */
void tracer_thread_renew(struct ptw_tracer *t, struct thread *th);
/* A warning for the report, to the session (which says it once per
 * session for the same code and message, whichever process it is about). */
void tracer_warn(struct ptw_tracer *t, enum ptw_warning_code w, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));
/* A SIGTRAP that is not a trap of ours is about to be delivered to l
 * (its signal-delivery stop): noted, for tracer_sigtrap_death. */
void tracer_note_sigtrap(struct ptw_tracer *t, struct ptw_lwp *l);
/* t's process died of SIGTRAP: a warning that says whether the trap was
 * ptwatch's own (an address it had patched: a bug to report) or not. */
void tracer_sigtrap_death(struct ptw_tracer *t);
/* A thread of the target (not of a fork/vfork child). */
bool tracer_is_target_lwp(struct ptw_tracer *t, struct ptw_lwp *l);
/* The tids of the LWPs (t->proc's table) that keep takes, in *ret
 * (malloc'd, for the caller to act on while the table changes); how many. */
size_t tracer_tids_where(struct ptw_tracer *t, bool (*keep)(struct ptw_tracer *, struct ptw_lwp *),
			 pid_t **ret);
/* Location of addr in the current image (NULL for 0 or no symbols). */
const struct ptw_location *tracer_locate(struct ptw_tracer *t, uint64_t addr);
int tracer_read_u64(struct ptw_tracer *t, uint64_t addr, uint64_t *ret);
/* An attach's unwind (ptw_symbols_unwind_sps: pcs, sps): frame i's return
 * slot, believed only where it holds the return address pcs[i + 1] (the
 * unwind is the target's memory read through its CFI). 0 if not. */
uint64_t tracer_return_slot(struct ptw_tracer *t, const uint64_t *pcs, const uint64_t *sps, int i);
/* Reads the process's code as the file has it, without the tracer's int3
 * bytes (a ptw_memread_fn; ctx: the tracer). */
int tracer_read_code(void *ctx, uint64_t addr, void *buf, size_t len);
/* Lets an LWP stopped in a system call finish it and stop again, so that
 * it can run an injected one. 0, -EAGAIN (group-stopped), -ESRCH. */
int tracer_make_injectable(struct ptw_tracer *t, struct ptw_lwp *l);
/* Whether cl, just made (its parent's clone, fork or vfork event), is held
 * at its first stop already; that stop is then the event's to handle: it
 * is taken out of the deferred queue if it was reaped out of band (its
 * record, handled later, would resume cl in whatever stop it is in by
 * then). */
bool tracer_take_first_stop(struct ptw_tracer *t, struct ptw_lwp *cl);
/* A stopped thread of the target to run an injected system call (mmap,
 * munmap): one that can now (the main thread preferred), else one that
 * tracer_make_injectable() may prepare; NULL if none. */
struct ptw_lwp *tracer_injection_host(struct ptw_tracer *t);
/* Inserts a breakpoint; makes host injectable first if an XOL page is needed. */
int tracer_insert_bp(struct ptw_tracer *t, uint64_t addr, unsigned hooks, struct ptw_lwp *host);
/* The same for a function's entry (libc's thread functions): past its
 * first instruction where that can be undone (ptw_bp_insert_past_entry). */
int tracer_insert_entry_bp(struct ptw_tracer *t, uint64_t addr, unsigned hooks,
			   struct ptw_lwp *host);

/*
 * Breakpoints at return addresses (--trace frames, --locks waits): armed
 * while some call under way returns there (counted), idle otherwise. Only
 * an address that a call instruction precedes, in the original bytes, is
 * taken: anything else read from [sp] is no return address (a function
 * entered by a jump), and an int3 there could split an instruction.
 */
struct retbps {
	struct ptw_map refs;	/* return address -> calls under way returning there */
	struct ptw_map checked; /* return address -> 1 (a call precedes it) or 2 (not) */
};
/* One more call returns to ret: 0, -EINVAL (no call precedes it), or the
 * insertion's error. */
int tracer_retbp_get(struct ptw_tracer *t, struct retbps *rb, struct ptw_lwp *l, uint64_t ret,
	      unsigned hook);
/* ret is a return site although no call precedes it (a sigreturn
 * trampoline, a function's start): tracer_retbp_get takes it. */
void tracer_retbp_allow(struct retbps *rb, uint64_t ret);
/* One fewer: at none, hook leaves the breakpoint (unknown ret: ignored). */
void tracer_retbp_put(struct ptw_tracer *t, struct retbps *rb, uint64_t ret, unsigned hook);
void tracer_retbps_free(struct retbps *rb);
/* The thread's name (/proc/PID/task/TID/comm), malloc'd, or NULL. */
char *tracer_comm_str(struct ptw_tracer *t, pid_t tid);
/* Emits it as PTW_EV_THREAD_NAME. */
void tracer_read_comm(struct ptw_tracer *t, pid_t tid, uint64_t ns);
/* Thread tid at its end (stopped there: no stop of its own): its name and
 * its CPU so far, as PTW_EV_THREAD_NAME and PTW_EV_THREAD_CPU, from two
 * /proc files (schedstat, status). */
void tracer_read_end(struct ptw_tracer *t, pid_t tid, uint64_t ns);
/* The session's root tracer (t itself, or the one that followed it). */
struct ptw_tracer *tracer_root(struct ptw_tracer *t);
/* The LWP exited or was killed (st): its end and, for the leader, the
 * process's, emitted; then forgotten. */
void tracer_lwp_gone(struct ptw_tracer *t, struct ptw_lwp *l, struct ptw_stop *st);
/* Whether sig's default action ends the process. */
bool tracer_sig_kills(int sig);
/* The breakpoint a SIGTRAP stop is for, with rip rewound to it, or NULL
 * (raise(SIGTRAP) and the program's own int3 are the program's). */
struct ptw_bp *tracer_our_trap(struct ptw_tracer *t, struct ptw_lwp *l, const struct ptw_stop *st);

/* process.c: the one constructor of a process tracer (the root: root
 * NULL), with the features its options turn on (with_features false: none,
 * for a snapshot, which only looks). The caller sets the rest (proc,
 * argv, how it came to be traced). ptw_tracer_free() is its destructor. */
struct ptw_tracer *tracer_new(const struct ptw_backend_opts *o, struct ptw_tracer *root, pid_t pid,
			      uint64_t start_ns, bool with_features);

/* attach.c, shared with snapshot.c, follow.c and tracer.c */
/* The part of an attach after the seize: symbols and agent, stop, list,
 * breakpoints, spans, resume (t->proc seized). 0 or -errno (-EAGAIN: it
 * exec'd meanwhile; nothing of ours left then but what tracer_let_go or
 * follow_failed undo). */
int attach_process(struct ptw_tracer *t, const struct ptw_seize_info *info, uint64_t start);
/* main()'s return site from the main thread's stack; start_thread's
 * return site for start routines (without libc's debug file). */
void attach_learn_main_return(struct ptw_tracer *t, struct ptw_lwp *main_lwp);
void attach_learn_start_return(struct ptw_tracer *t, struct ptw_lwp *host);
/* The tracer of a process to attach to (proc seized, or to be seized
 * by ptw_seize_some): its command line read. */
struct ptw_tracer *attach_tracer_new(const struct ptw_backend_opts *o, struct ptw_proc *proc,
				      uint64_t start_ns, bool snapshot);
/* What the seize found: a zombie main thread is warned about. */
void attach_seized(struct ptw_tracer *t, const struct ptw_seize_info *info);
/* Stops every seized thread within a deadline (a warning counts those that
 * did not, saying what that costs: consequence) and takes every LWP held
 * as the target's. Returns how many did not stop. */
int attach_stop_all(struct ptw_tracer *t, const char *consequence);
/* libthread_db's list (td_ta_thr_iter): pd and start routine onto our
 * LWPs; the threads not seized (ptw_seize_some) into unseized, if given
 * (tid -> malloc'd struct ptw_tdb_thread). all_stopped: no thread of the
 * process can run meanwhile (else the list is walked until it is stable). */
void attach_list_threads(struct ptw_tracer *t, bool all_stopped, struct ptw_map *unseized);
/* The target's live threads, main first (malloc'd; *ret_n of them). */
struct ptw_lwp **attach_threads(struct ptw_tracer *t, size_t *ret_n);
/* The same in two steps, for a thread that runs again in between: what we
 * know of it, and the word to read at joinid_at (pd->joinid: detached?)
 * into joinid while it is stopped; then the events. */
struct preexisting {
	pid_t tid;
	uint64_t pd, routine;
	bool have_joinid; /* set it false if the read fails */
	uint64_t joinid_at, joinid;
	uint64_t began_ns; /* when the thread began, 0 unknown (a fork child's: the fork) */
};
void attach_preexisting_facts(struct ptw_tracer *t, struct ptw_lwp *l, struct preexisting *ret);
/* A stopped thread that libthread_db did not give: its pthread_t and
 * routine from its TLS (its struct pthread), when it names the thread. */
void attach_facts_from_tls(struct ptw_tracer *t, pid_t tid, uint64_t fs_base, struct thread *th);
/* The same for a thread we did not seize. */
void attach_facts(struct ptw_tracer *t, pid_t tid, uint64_t pd, uint64_t start_routine,
		  struct preexisting *ret);
void attach_emit_facts(struct ptw_tracer *t, const struct preexisting *f, const char *name,
		       uint64_t ns);

/* follow.c: -f, for the dispatcher (tracer.c) */
/* A followed process (pid, forked by thread parent_tid of ppid at ns),
 * listed in the root, without a proc yet; argv is the caller's to set. */
struct ptw_tracer *follow_add(struct ptw_tracer *t, pid_t pid, pid_t ppid, pid_t parent_tid,
				uint64_t ns);
/* It cannot be followed: a process_not_followed warning says why, and
 * whatever it had of ours (proc, breakpoints, features) is released: the
 * caller has let go of it, or does so as without -f. */
void follow_failed(struct ptw_tracer *c, const char *why);
/* A fork, vfork or clone of another process (st): its inherited int3s
 * removed; with -f a tracer of its own, else let go. */
void follow_fork_stop(struct ptw_tracer *t, struct ptw_stop *st);
/* A fork child whose fork event was lost (its parent thread killed
 * before reporting it: see follow.c), held at its first stop or owed one:
 * set up as that event would have (t's process is going down or exec'd). */
void follow_orphans(struct ptw_tracer *t);
/* l's first stop came unannounced: if it is such a child (its parent
 * process going down or gone), set it up now (true). */
bool follow_orphan_stop(struct ptw_tracer *root, struct ptw_lwp *l);
/* A thread of t was killed (down: true; follow_orphans), or t exec'd or
 * ended and its orphans are set up (false). */
void follow_going_down(struct ptw_tracer *t, bool down);
/* A forked process's first thread stopped for the first time: traced as
 * if attached. */
void follow_setup(struct ptw_tracer *c, struct ptw_lwp *l, uint64_t ns);
/* l of a vfork child exec'd: a followed process of its own (true), or
 * not followed (false: the caller lets it go). */
bool follow_vfork_exec(struct ptw_tracer *t, struct ptw_lwp *l);
/* The followed process t exec'd: false if it was let go (set-uid). */
bool follow_exec(struct ptw_tracer *t, struct ptw_lwp *l);
/* The tracer of the process l belongs to (the root gets every stop). */
struct ptw_tracer *follow_owner(struct ptw_tracer *root, struct ptw_lwp *l);
/* A followed process ended (its leader was reaped): what it left goes. */
void follow_done(struct ptw_tracer *c, const struct ptw_stop *st);
/* -p PID -f: attach to every descendant of the root that runs now. */
void follow_attach_descendants(struct ptw_tracer *root);

/* signals.c: session signals, for the wait loop (tracer.c) */
/* The command is being delivered sig (its signal-delivery stop). */
void signals_note_delivery(struct ptw_tracer *t, struct ptw_lwp *l, int sig, uint64_t ns);
/* ptwatch got a session signal (st: PTW_STOP_TRACER_SIGNAL). */
void signals_on_signal(struct ptw_tracer *t, const struct ptw_stop *st);
/* The copies that waited long enough for the command's delivery stop. */
void signals_expire(struct ptw_tracer *t, uint64_t now);
/* The command ended: wait a moment (bounded) for the copies still owed. */
void signals_settle(struct ptw_tracer *t);
/* When the next copy stops waiting; 0: none waits. */
uint64_t signals_deadline(const struct ptw_tracer *t);

/* detach.c */
/* t's memory is about to stop being ours (t exec'd, or its last thread
 * ended): every process still sharing it (vm_parent) is stopped, a trap
 * of ours undone, the original bytes written back through it, and let go,
 * so that it never meets an int3 untraced. */
void tracer_release_vm_children(struct ptw_tracer *t);
/* Lets go of a live target as ptw_tracer_detach() does, without saying so
 * (PTW_EV_DETACHED): a snapshot tells what it copied first. */
int tracer_let_go(struct ptw_tracer *t);

/* image.c: the program image, for every file above */
/* Symbols of the current image, where its dynamic linker reports
 * library changes, main(): no stopped thread needed. */
int image_load(struct ptw_tracer *t);
/* Symbols, then every feature's image_ready (breakpoints), for a launched
 * or exec'd image, then PTW_EV_IMAGE. */
int image_init(struct ptw_tracer *t, struct ptw_lwp *l);
void image_release(struct ptw_tracer *t);
/* libthread_db agent, glibc version, struct pthread layout. */
int image_tdb_open(struct ptw_tracer *t);
/* Warns (once) when debuginfod failed: see ptw_symbols_debuginfod_error. */
void image_debuginfod_warning(struct ptw_tracer *t);
/* "libc.so" for a dynamic program; the executable itself when static. */
const char *image_libc_module(struct ptw_tracer *t);
/* struct pthread's layout (ptw_glibc_pthread_layout), read once per image. */
const struct ptw_pthread_layout *image_tls_layout(struct ptw_tracer *t);

/* lifecycle.c: the thread lifecycle feature, for attach and the dispatcher */
/* libthread_db's event mask and breakpoints, events enabled on every
 * stopped thread, the libc hooks, then the other features' libc_ready;
 * host is a stopped LWP that can run an injected mmap. */
int lifecycle_setup(struct ptw_tracer *t, struct ptw_lwp *host);
/* The flags and TLS of the clone the LWP is stopped in (its clone event). */
void lifecycle_clone_args(struct ptw_tracer *t, struct ptw_lwp *l, uint64_t *ret_flags,
			  uint64_t *ret_tls);
/* Whether the process child, just forked by parent (its fork event),
 * shares parent's memory: clone(CLONE_VM | SIGCHLD) without CLONE_VFORK is
 * reported as a fork, but its "copy" of our int3s is ours, as a vfork
 * child's. */
bool lifecycle_shares_memory(struct ptw_tracer *t, struct ptw_lwp *parent, pid_t child);
/* A new thread (the clone event of parent). */
void lifecycle_on_clone(struct ptw_tracer *t, struct ptw_lwp *parent, pid_t child, uint64_t flags,
			uint64_t tls, uint64_t ns);
/* A new thread the tracer held at its first stop is let run now: its
 * start, when that is how it is told (no breakpoint at its routine). */
void lifecycle_released(struct ptw_tracer *t, struct ptw_lwp *cl);
/* Thread l stopped (any stop): a plain join it was in has returned if the
 * joined thread has died. */
void lifecycle_stopped(struct ptw_tracer *t, struct ptw_lwp *l, const struct ptw_stop *st);
/* Thread l's exit stop (its CPU read): its death, if that is where it is
 * told and it has passed start_thread's end (own_exit: it leaves by its
 * own exit or exit_group, not killed). Returns whether it was told. */
bool lifecycle_exit_stop(struct ptw_tracer *t, struct ptw_lwp *l, bool own_exit, uint64_t ns);

#endif
