/* SPDX-License-Identifier: MIT */
/*
 * The seam between the tracer (Linux, ptrace, glibc specific) and the span
 * engine (plain data, deterministic): typed thread events (docs/design.md, "The seam" and "Behaviour").
 * Everything the span engine knows arrives as one of these, in the order the
 * tracer observed them; unit tests feed synthetic streams.
 */
#ifndef PTW_EVENTS_H
#define PTW_EVENTS_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

struct ptw_location;

enum ptw_event_kind {
	PTW_EV_IMAGE,	       /* a program image begins: tid = pid, name = exe (launch or exec) */
	PTW_EV_PREEXISTING,    /* attach: thread tid was already running (pthread may be 0);
				* value: when it began if known (-f: a fork child's, the fork) */
	PTW_EV_MAIN_START,     /* tid entered main(): routine */
	PTW_EV_THREAD_CREATE,  /* tid created other_tid: pthread, routine, arg, site, detached */
	PTW_EV_LWP_CREATE,     /* tid made other_tid with a raw clone (no pthread) */
	PTW_EV_THREAD_START,   /* tid entered its start routine: routine, arg */
	PTW_EV_THREAD_RETURN,  /* tid's start routine (or main) returned: value */
	PTW_EV_EXIT_CALL,      /* tid called pthread_exit: value */
	PTW_EV_CANCEL_REQUEST, /* tid called pthread_cancel(pthread) */
	PTW_EV_DETACH_CALL,    /* tid called pthread_detach(pthread) */
	PTW_EV_JOIN_CALL,      /* tid entered a join of pthread */
	PTW_EV_JOIN_RETURN,    /* tid's join returned: value = return code */
	PTW_EV_THREAD_DEATH,   /* TD_DEATH in tid: unwinding, value (result) if known */
	PTW_EV_THREAD_NAME,    /* tid is called name */
	PTW_EV_LWP_EXIT,       /* tid is leaving the kernel: exit_how, exit_code */
	PTW_EV_FATAL_SIGNAL,   /* sig, which kills by default, was delivered to tid */
	PTW_EV_EXEC,	       /* tid (now pid) exec'd; other_tid = its former tid */
	PTW_EV_PROCESS_EXIT,   /* the process ended: exit_code or sig (+core_dumped) */
	PTW_EV_DETACHED,       /* ptwatch let go of the process */
	PTW_EV_INTERRUPT,      /* ptwatch got session signal sig: interrupt (what it did) */
	PTW_EV_THREAD_STATE,   /* snapshot of tid: state, stack, what it waits for */
	PTW_EV_TRACER_DIED,    /* ptwatch's tracer process died: nothing more will be seen */
	/* --trace (ptw_frames.h) */
	PTW_EV_FRAME_ENTRY,    /* tid entered routine (a traced function): sp, ret_addr = [sp] */
	PTW_EV_FRAME_RETURN,   /* tid returned to ret_addr, sp after the ret; value = rax */
	PTW_EV_FRAME_TAIL,     /* tid left the frame whose return slot is sp by a jump into code
				* not traced (the kernel path: a tail call; its return unseen) */
	PTW_EV_THROW,	       /* tid raised a C++ exception (_Unwind_RaiseException) */
	PTW_EV_CATCH,	       /* tid caught one in the frame whose stack pointer is sp */
	PTW_EV_LONGJMP,	       /* tid called longjmp (or siglongjmp, ...); sp: where it lands (0 unknown) */
	PTW_EV_CONTEXT_SWITCH, /* tid switches to another context (swapcontext, setcontext): sp =
				* the stack pointer it lands at; arg (has_arg) = the one the context
				* it leaves resumes at (swapcontext), none: that context is not saved */
	PTW_EV_SIGNAL_DELIVER, /* the kernel is about to run tid's handler of sig (one is
				* installed); sp: tid's stack pointer then (what it interrupts) */
	PTW_EV_SIGRETURN,      /* tid returned from a signal handler (reached the sigreturn
				* trampoline): sp there */
	PTW_EV_SPAN_OPEN,      /* span (span_kind, span_id) of tid has been open value ns,
				* past the open timeout: where tid is now (state, wchan,
				* routine = its PC), name; sent once per span */
	/* --locks (ptw_locks.h) */
	PTW_EV_WAIT_BEGIN,     /* tid entered a contended wait (glibc's slow path): wait_kind,
				* wait_object, wait_owner (0 unknown), object (its symbol),
				* site (the call outside libc), stack (a few frames), sp */
	PTW_EV_WAIT_END,       /* tid left its innermost wait; has_value: the slow path's result */
	PTW_EV_DEADLOCK,       /* tid is member arg of the value threads of live deadlock
				* span_id (confirmed as proof says): its wait (wait_*),
				* stack, state */
	PTW_EV_THREAD_CPU,     /* tid's CPU so far (cpu): at its end, or the session's for a
				* thread that lives on */
	/* The session's facts besides threads: kept by the session (the
	 * document's warnings and processes), not spans' events */
	PTW_EV_WARNING,	       /* what the backend could not do: warning (enum
				* ptw_warning_code), name = the message; process (-f):
				* whose (named by pid) */
	PTW_EV_PROCESS,	       /* -f: process proc of the session as it is now (began, exec'd,
				* ended, let go; all of them once more at the end) */
};

/* What a thread cost in CPU, as the kernel accounts it (its schedstat and
 * context switches): PTW_EV_THREAD_CPU, a thread span's cpu. */
struct ptw_cpu {
	bool set;
	uint64_t on_cpu_ns;   /* running on a CPU, user and system */
	uint64_t runnable_ns; /* runnable, waiting for a CPU */
	uint64_t voluntary;   /* context switches: it slept (blocked, yielded) */
	uint64_t involuntary; /* it was preempted */
};

/* Where a span was when ptwatch saw it open past --open-timeout
 * (PTW_EV_SPAN_OPEN): kept whatever its status becomes. */
struct ptw_open_mark {
	bool set;
	uint64_t after_ns, for_ns; /* when seen, and open for how long then */
	char *state, *wchan;	   /* its thread's kernel state then */
	const struct ptw_location *at; /* its thread's pc, NULL unknown */
};

/* Which engine a span belongs to (PTW_EV_SPAN_OPEN, ptw_timeouts.h). */
enum ptw_span_kind {
	PTW_SPAN_THREAD, /* ptw_spans.h: one per thread lifetime */
	PTW_SPAN_FRAME,	 /* a function call inside a thread */
};
#define PTW_EV_LAST PTW_EV_PROCESS

/* What a blocked thread waits for (snapshot). */
enum ptw_wait_kind {
	PTW_WAIT_NONE,
	PTW_WAIT_MUTEX,
	PTW_WAIT_JOIN,
	PTW_WAIT_RWLOCK,
	PTW_WAIT_COND,
	PTW_WAIT_OTHER,
	/* --locks: finer kinds of wait spans */
	PTW_WAIT_RWLOCK_READ,
	PTW_WAIT_RWLOCK_WRITE,
	PTW_WAIT_SEM,
	PTW_WAIT_BARRIER,
	PTW_WAIT_LOCK, /* a lock inside glibc (stdio, malloc arenas): no owner recorded */
};

/* How a live deadlock (PTW_EV_DEADLOCK) was confirmed once its cycle was
 * found: the cycle held at that moment either way. */
enum ptw_deadlock_proof {
	PTW_PROOF_STOPPED, /* ptrace: the members stopped, the owners read again */
	PTW_PROOF_REREAD,  /* kernel backend, no stop: every member still in its wait
			    * (its slow path not left, asleep in futex on its object)
			    * while the owners, read again, still formed the cycle */
};

/* What ptwatch did about a session signal (SIGINT, SIGTERM, ...). */
enum ptw_interrupt_action {
	PTW_INTR_TRACED_ON, /* it reached the command too: traced on until it reacts */
	PTW_INTR_DETACHED,  /* ptwatch lets go of the process */
};

/* Why, for PTW_EV_INTERRUPT and the report. */
enum ptw_interrupt_why {
	PTW_INTR_ATTACHED,	/* -p: a session signal detaches */
	PTW_INTR_TERMINAL,	/* the terminal's key (Ctrl-C, Ctrl-\) or hangup, to both */
	PTW_INTR_GROUP,		/* sent to the process group: the command got it too */
	PTW_INTR_AGAIN,		/* the same signal again within PTW_INTERRUPT_AGAIN_MS */
	PTW_INTR_PTWATCH_ALONE, /* the command did not get it */
};

/* A second terminal Ctrl-C (or the same signal to the group) within this
 * many milliseconds of the previous one detaches. */
#define PTW_INTERRUPT_AGAIN_MS 2000

/* One process of the session (-f: the target and every one it forked). */
struct ptw_process {
	uint32_t id;	     /* 0 the target, then 1, 2, ... in order of fork (spans' process) */
	uint32_t parent_id;  /* the process that forked it (0 for the target: none) */
	pid_t pid;
	pid_t ppid, parent_tid; /* who forked it (0 for the target) */
	const char *exe;
	char *const *argv;
	uint64_t start_ns, end_ns; /* fork (or the session's start); end 0: not ended */
	int exit_kind;		   /* PTW_EXIT_NONE / CODE / SIGNAL (ptw_output.h) */
	int exit_code, exit_signal;
	bool core_dumped;
	bool followed;		       /* false: let go at once, not_followed_why */
	const char *not_followed_why;
	bool detached;		       /* ptwatch let go of it while it ran */
};

enum ptw_exit_how {
	PTW_EXIT_SELF,	   /* the thread's own exit syscall */
	PTW_EXIT_GROUP,	   /* it called exit_group: the whole process is ending */
	PTW_EXIT_KILLED,   /* taken down by another thread's exit_group, exec or a signal */
};

struct ptw_event {
	enum ptw_event_kind kind;
	uint64_t ns; /* CLOCK_MONOTONIC */
	pid_t pid;   /* the process of tid (set by the tracer; 0 in synthetic streams: the only one) */
	uint32_t process; /* -f: which process of the session: 0 the target, n the n-th one
			   * followed (a pid can come back, this cannot; ptw_process.id) */
	pid_t tid;
	pid_t other_tid;
	uint64_t pthread;
	bool has_value;
	uint64_t value;
	bool has_arg;
	uint64_t arg;
	const struct ptw_location *routine; /* NULL when unknown */
	const struct ptw_location *site;    /* create site, NULL when unknown */
	int detached;			    /* -1 unknown, 0 joinable, 1 detached */
	int unwinding;			    /* DEATH: -1 unknown, 0 returned, 1 unwound */
	int cancelled; /* DEATH, unwound: -1 unknown, 0 by pthread_exit (seen or not), 1 a
			* cancellation acted */
	enum ptw_exit_how exit_how;
	int exit_code;
	int sig;
	bool from_terminal; /* FATAL_SIGNAL: its si_code is SI_KERNEL (a terminal's ^C, ^\,
			     * hangup: ptwatch gets its own copy through the front) */
	bool core_dumped;
	const char *name; /* copied by the consumer */
	/* INTERRUPT */
	enum ptw_interrupt_action action;
	enum ptw_interrupt_why why;
	/* THREAD_STATE, SPAN_OPEN (all copied by the consumer) */
	const char *state;			  /* "S futex" */
	const char *wchan;
	const struct ptw_location *const *stack; /* innermost first */
	size_t nstack;
	enum ptw_wait_kind wait_kind;
	uint64_t wait_object;
	pid_t wait_owner; /* 0 unknown */
	/* SPAN_OPEN */
	enum ptw_span_kind span_kind;
	uint32_t span_id;
	/* FRAME_ENTRY, FRAME_RETURN, CATCH, LONGJMP, CONTEXT_SWITCH; FRAME_ENTRY's
	 * sig: the function was entered by the kernel as the handler of that
	 * signal (its return address is the sigreturn trampoline), 0 a call */
	uint64_t sp;
	uint64_t ret_addr;
	/* FRAME_ENTRY, WAIT_BEGIN: a call (a wait) already under way when
	 * ptwatch attached (found on the thread's stack): its entry was not
	 * seen, ns is the attach's */
	bool before_attach;
	/* WAIT_BEGIN, DEADLOCK: the waited-for object's symbol, NULL none */
	const struct ptw_location *object;
	/* DEADLOCK: how it was confirmed (0: with the threads stopped) */
	enum ptw_deadlock_proof proof;
	/* WARNING: its code (enum ptw_warning_code) */
	int warning;
	/* PROCESS (copied by the consumer) */
	const struct ptw_process *proc;
	/* THREAD_CPU */
	struct ptw_cpu cpu;
};

/* An event with every optional field set to "unknown". */
static inline struct ptw_event ptw_event_init(enum ptw_event_kind kind, uint64_t ns, pid_t tid)
{
	struct ptw_event e = { 0 };
	e.kind = kind;
	e.ns = ns;
	e.tid = tid;
	e.detached = -1;
	e.unwinding = -1;
	e.cancelled = -1;
	return e;
}

const char *ptw_event_kind_name(enum ptw_event_kind kind);
const char *ptw_wait_kind_name(enum ptw_wait_kind kind);

#endif
