/* SPDX-License-Identifier: MIT */
/*
 * The attach layer: the only code that calls ptrace() and waitpid().
 *
 * It launches a command (fork + PTRACE_SEIZE + exec), keeps one control block
 * per traced LWP (created lazily, keyed by tid), turns wait statuses into
 * typed stops, resumes, stops and detaches, and gives everyone else access to
 * memory and registers. It knows nothing about breakpoints or threads'
 * meaning: the tracer decides what a stop means.
 *
 * Errors are negative errno values. -ESRCH from any per-LWP call means the
 * thread went away: that is normal, never fatal.
 */
#ifndef PTW_ATTACH_H
#define PTW_ATTACH_H

#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>
#include <sys/user.h>

#include "ptw_util.h"

struct ptw_location;

/* What a wait status says, before the tracer gives it meaning. */
enum ptw_stop_kind {
	PTW_STOP_NONE,
	PTW_STOP_SIGNAL,     /* signal-delivery-stop; sig = the signal */
	PTW_STOP_GROUP,	     /* group-stop (SIGSTOP, SIGTSTP, ...); resume with LISTEN */
	PTW_STOP_NEW,	     /* first stop of an auto-attached (or seized) tracee */
	PTW_STOP_INTERRUPT,  /* stop requested with PTRACE_INTERRUPT */
	PTW_STOP_CLONE,	     /* msg = new tid */
	PTW_STOP_FORK,	     /* msg = child pid */
	PTW_STOP_VFORK,	     /* msg = child pid */
	PTW_STOP_VFORK_DONE, /* vfork child released the parent */
	PTW_STOP_EXEC,	     /* msg = tid that called execve (now pid) */
	PTW_STOP_EXIT,	     /* PTRACE_EVENT_EXIT; msg = wait status it will exit with */
	PTW_STOP_SYSCALL,    /* syscall-enter/exit stop (only during injection) */
	PTW_STOP_EXITED,     /* WIFEXITED: exit_code */
	PTW_STOP_KILLED,     /* WIFSIGNALED: sig, core_dumped */
	/* Not stops: why ptw_wait() returned without one. */
	PTW_STOP_TIMEOUT,
	PTW_STOP_TRACER_SIGNAL, /* ptwatch itself got sig (SIGINT, SIGTERM, ...) */
};

/*
 * Pure classification of a wait status (unit-tested with synthetic statuses).
 * PTRACE_EVENT_STOP with SIGTRAP comes back as PTW_STOP_NEW; the caller knows
 * whether it asked for an interrupt. With TRACESYSGOOD, SIGTRAP|0x80 is a
 * syscall stop.
 */
struct ptw_status_class {
	enum ptw_stop_kind kind;
	int sig;
	int exit_code;
	bool core_dumped;
};
struct ptw_status_class ptw_classify_status(int status);

/*
 * A thread stopped while in a system call that the kernel will restart on
 * its way back to user mode (rax = -ERESTART*, orig_rax = the call) loses
 * that restart if we make it run something else first (an injected
 * syscall). This applies the kernel's restart to regs, as if no signal
 * was delivered: rip back onto the syscall instruction and rax = the call
 * (or restart_syscall). Returns true if it did. Pure.
 */
bool ptw_syscall_restart(struct user_regs_struct *regs);
const char *ptw_stop_kind_name(enum ptw_stop_kind kind);

enum ptw_lwp_state {
	PTW_LWP_RUNNING,
	PTW_LWP_STOPPED, /* in some ptrace-stop; last_stop says which */
	PTW_LWP_GONE,	 /* exited or vanished; kept until the tracer drops it */
};

/* Per-LWP control block. Owned by the attach layer; the tracer reads it and
 * hangs its own state on `user`. */
struct ptw_lwp {
	pid_t tid;
	pid_t tgid;	    /* thread group: the target's pid, or a fork child's; 0 until
			       its parent's clone/fork event announced it */
	unsigned gen;	    /* bumped each time this tid is seen anew (tid reuse) */
	enum ptw_lwp_state state;
	enum ptw_stop_kind last_stop;
	bool group_stopped; /* resume with PTRACE_LISTEN, not CONT */
	bool interrupt_sent;
	bool exiting;	    /* resumed from its PTRACE_EVENT_EXIT stop: only death follows
			       (a zombie leader reports it when the last thread is gone) */
	bool unstoppable;   /* missed a stop-all deadline (uninterruptible sleep): later
			       stop-alls do not wait for it again; cleared when it stops */
	int resume_sig;	    /* signal to deliver at the next resume (0 = none) */
	/* Its stop was reaped out of band (while the tracer waited for another
	 * LWP) and waits in the deferred queue: nothing may resume it before
	 * that stop is handled (ptw_resume refuses), or the stop's meaning (a
	 * trap at a breakpoint, a signal) would be lost and its record, handled
	 * later, would act on whatever stop the LWP is in by then. */
	unsigned queued;
	struct user_regs_struct regs;
	bool regs_valid, regs_dirty;
	void *user;	    /* tracer's per-thread state */
};

/* Counters for `session.stops` and the benchmark: every stop we reaped. */
struct ptw_stop_counts {
	uint64_t total;
	uint64_t by_kind[PTW_STOP_TRACER_SIGNAL + 1];
};

/*
 * A traced thread group. The first one (launched or attached: the root)
 * also holds what every traced process shares: the LWP table, the wait
 * queue, the stop counters and the session signals. Processes followed
 * from it (ptw_proc_follow) have their own memory access (pid, mem_fd,
 * cache) and reach the rest through root. ptw_wait() is called on the
 * root only; every per-LWP call works on any of them.
 */
struct ptw_proc {
	pid_t pid;
	pid_t mem_pid;	      /* a live thread for /proc/TID/{mem,maps,...} and
				 process_vm_*: the leader may be a zombie */
	int mem_fd;	      /* /proc/MEM_PID/mem, O_RDWR: text pokes, fallback reads */
	struct ptw_proc *root; /* NULL for the root itself */
	struct ptw_map *lwps; /* tid -> struct ptw_lwp*, every process we trace (root's) */
	struct ptw_map lwps_own;
	struct ptw_map procs; /* root: pid -> followed struct ptw_proc* */
	int sigfd;	      /* signalfd: SIGCHLD and the signals that end a session */
	unsigned options;     /* PTRACE_O_* given to PTRACE_SEIZE */
	struct ptw_stop *deferred; /* statuses reaped out of band, returned first */
	size_t ndeferred, deferred_cap;
	struct ptw_stop_counts counts;
	struct ptw_mem_cache *cache; /* see ptw_mem_read() */
	/* Session signals read from sigfd, oldest first, that ptw_wait() has
	 * not reported yet (one per call, before anything else). A copy that
	 * finds the queue full is dropped: eight are more than any session
	 * needs to decide. */
	struct ptw_session_signal {
		int sig;
		int code;  /* si_code: SI_KERNEL from a terminal, SI_USER from kill() */
		pid_t pid; /* the sender for SI_USER, else 0 */
		uint64_t ns;
	} sigq[8];
	size_t nsigq;
	/* Called by ptw_wait() right before it would block (flush output). */
	void (*before_block)(void *ctx);
	void *before_block_ctx;
	/* Also wake ptw_wait() (PTW_STOP_TIMEOUT, woke set) when this fd is
	 * readable; -1: none. */
	int wake_fd;
	bool woke;
};

/* One reaped stop, or why ptw_wait() returned without one. */
struct ptw_stop {
	enum ptw_stop_kind kind;
	pid_t tid;
	struct ptw_lwp *lwp; /* NULL only for TIMEOUT / TRACER_SIGNAL */
	int sig;
	int sig_code;	     /* TRACER_SIGNAL: its si_code, and */
	pid_t sig_pid;	     /* its sender (SI_USER) */
	int exit_code;
	bool core_dumped;
	unsigned long msg;   /* PTRACE_GETEVENTMSG for event stops */
	uint64_t ns;	     /* CLOCK_MONOTONIC when reaped */
};

/* Signals that make ptw_wait() return PTW_STOP_TRACER_SIGNAL. */
#define PTW_SESSION_SIGNALS {SIGINT, SIGTERM, SIGHUP, SIGPIPE, SIGQUIT}
bool ptw_is_session_signal(int sig);

/*
 * The front forwards a session signal to the tracer (ptw_guardian.h) with
 * sigqueue() and this value: the si_code and sender the front saw, which
 * ptw_wait() then reports as if the tracer had got the signal itself (a
 * terminal's Ctrl-C stays SI_KERNEL).
 */
static inline uint64_t ptw_forwarded_signal_value(int code, pid_t sender)
{
	return ((uint64_t)(uint32_t)sender << 32) | (uint32_t)code;
}
/* The process group ptwatch was started in (a launched command's). */
pid_t ptw_original_pgrp(void);

/*
 * Blocks SIGCHLD and the session signals in ptwatch and opens the signalfd.
 * Saves the original mask and dispositions so that a launched child gets
 * exactly the ones ptwatch was started with. Call once, before anything else.
 */
int ptw_signals_init(void);
/* The signal mask ptwatch was started with. */
const sigset_t *ptw_signals_original_mask(void);
/* The signalfd of ptw_signals_init, for a loop that waits on it with
 * other descriptors (the kernel-assisted path); and one session signal
 * read from it (false: none waits; SIGCHLD is skipped). */
int ptw_signals_fd(void);
struct ptw_session_signal;
bool ptw_signals_read(int fd, struct ptw_session_signal *ret);

/*
 * A command forked and held before its exec (no ptrace): the launch of
 * either backend. ptw_held_spawn forks; the child waits on a pipe. With
 * need_go, a child whose pipe closes without the byte (ptwatch died, or
 * ptw_held_go(h, false)) exits 127 without running the command; else it
 * runs it. When let go, it execs argv (looked up in PATH) with child_stdout
 * (-1: keep) as stdout and the process group and signal mask ptwatch was
 * started with. ptw_held_exec_result then blocks until it exec'd (0) or
 * failed to (-errno: it has exited 127 or 126).
 */
struct ptw_held {
	pid_t pid;
	int go_fd;  /* write one byte to let it exec */
	int err_fd; /* a failed exec's errno, or end of file at its exec */
};
int ptw_held_spawn(char *const argv[], int child_stdout, bool need_go, struct ptw_held *ret);
/* Lets it go (run: the byte) and closes the pipe; idempotent. 0, or -EIO
 * when the byte could not be written (the child is gone). */
int ptw_held_go(struct ptw_held *h, bool run);
int ptw_held_exec_result(struct ptw_held *h);

struct ptw_launch {
	char *const *argv;   /* argv[0] is looked up in PATH like execvp */
	int child_stdout;    /* fd to dup onto the child's stdout, or -1 to keep it */
	unsigned extra_options; /* PTRACE_O_* beyond the defaults */
};

/*
 * Forks, seizes the child before it runs anything, lets it exec.
 * On success *ret_proc holds the process with its single LWP stopped in the
 * PTRACE_EVENT_EXEC stop (returned in *ret_exec_stop).
 * On exec failure returns -errno of the child's execvp (ENOENT, EACCES, ...),
 * after reaping the child; *ret_proc is untouched.
 */
int ptw_launch(const struct ptw_launch *l, struct ptw_proc **ret_proc, struct ptw_stop *ret_exec_stop);

/*
 * Seizes every thread of pid (PTRACE_SEIZE, which stops nothing), reading
 * /proc/PID/task again until a pass finds no new thread. A zombie leader
 * with live workers is fine: the workers are seized. All or nothing: a live
 * thread left unseized would die at the first int3 it reached. Returns 0,
 * -ESRCH (no such process / nothing alive to seize), -EPERM (not allowed),
 * -EBUSY (a thread is traced by another process) or -errno.
 */
/*
 * Whether pid can be attached to; if not, a one-line reason in why:
 * "no such process", "ptwatch itself", "a kernel thread", "a zombie",
 * "in another PID namespace", "already traced by PID n (comm)". Returns 0
 * or -errno. A zombie leader with live threads is accepted.
 */
int ptw_check_target(pid_t pid, char *why, size_t len);
/* Why PTRACE_SEIZE said EPERM: other user, Yama scope, capabilities. */
void ptw_explain_eperm(pid_t pid, char *why, size_t len);
/* Whether pid is in ptwatch's PID namespace (true when it cannot be told:
 * gone, or no /proc/PID/ns). A process in another sees its threads by
 * other ids than ptwatch does (glibc's struct pthread, libthread_db, a
 * mutex's owner). */
bool ptw_same_pid_ns(pid_t pid);

struct ptw_seize_info {
	int threads;	   /* seized */
	int passes;	   /* /proc/PID/task readings */
	bool zombie_leader;
	bool skipped;	   /* ptw_seize_some left some alone */
};
/*
 * PTRACE_SEIZEs every thread of pid, reading /proc/PID/task again until a
 * pass finds none new. All or nothing: a live thread that cannot be seized
 * fails it (-EBUSY when another tracer has it). A zombie main thread is
 * skipped (ret_info says so). The threads keep running.
 */
int ptw_seize(pid_t pid, struct ptw_proc **ret_proc, struct ptw_seize_info *ret_info);
/*
 * ptw_seize into p (ptw_proc_open), but the threads for which skip() says
 * true are left alone: not seized, not in the LWP table (--snapshot reads
 * the threads asleep in the kernel without stopping them). Not all or
 * nothing for those: nothing is patched then. Succeeds with no thread
 * seized if every live one was skipped (ret_info->threads 0, ->skipped).
 * On failure, what was seized stays in p for its owner to let go.
 */
typedef bool (*ptw_seize_skip_fn)(void *ctx, pid_t tid);
int ptw_seize_some(struct ptw_proc *p, ptw_seize_skip_fn skip, void *ctx,
		   struct ptw_seize_info *ret_info);
/* A view of pid that traces nothing yet (memory, maps) for ptw_seize_some;
 * ptw_proc_free. */
struct ptw_proc *ptw_proc_open(pid_t pid);
/* The same for a process followed from root (ptw_proc_follow): its threads
 * join root's table. On failure the threads seized are let go again. */
int ptw_seize_follow(struct ptw_proc *root, pid_t pid, struct ptw_proc **ret_proc,
		     struct ptw_seize_info *ret_info);

/*
 * Waits for the next stop of any traced LWP, up to timeout_ms (-1 = forever).
 * Updates the LWP table: creates control blocks for new tids, marks stopped /
 * gone. Returns 0 and fills *ret, or -ECHILD when nothing is traced any more.
 */
int ptw_wait(struct ptw_proc *p, int timeout_ms, struct ptw_stop *ret);

/* The next session signal (PTW_STOP_TRACER_SIGNAL) queued or arriving
 * within timeout_ms, tracees aside: 1, 0 if none came, or -errno. */
int ptw_wait_session_signal(struct ptw_proc *p, int timeout_ms, struct ptw_stop *ret);
/*
 * Waits for the next stop of one LWP only (other LWPs' statuses stay queued
 * in the kernel). Blocks; use only when that stop is due promptly.
 */
int ptw_wait_tid(struct ptw_proc *p, struct ptw_lwp *l, struct ptw_stop *ret);
/* Same for tracee tid, known or not, within timeout_ms: -ETIMEDOUT if
 * none came. */
int ptw_wait_tid_within(struct ptw_proc *p, pid_t tid, int timeout_ms, struct ptw_stop *ret);

/* Resumes a stopped LWP: writes back dirty registers, then PTRACE_CONT with
 * lwp->resume_sig (cleared), or PTRACE_LISTEN in group-stop. -EBUSY, and
 * nothing done, while its stop waits in the deferred queue (lwp->queued):
 * whoever handles that stop resumes it. */
int ptw_resume(struct ptw_proc *p, struct ptw_lwp *l);
/* Takes l's stop out of the deferred queue, to be handled now by the
 * caller (who is about to act on l: detach it, say): 1 and *ret, or 0 if
 * none waits. */
int ptw_take_queued(struct ptw_proc *p, struct ptw_lwp *l, struct ptw_stop *ret);
/* Like ptw_resume but stops at the next syscall entry/exit (injection only). */
int ptw_resume_syscall(struct ptw_proc *p, struct ptw_lwp *l);

struct ptw_lwp *ptw_lwp_get(struct ptw_proc *p, pid_t tid);
/* Forgets an LWP that is gone (after the tracer dropped its state), and
 * any stop of its still in the deferred queue. */
void ptw_lwp_forget(struct ptw_proc *p, struct ptw_lwp *l);
/* Number of LWPs of the target thread group that are not gone. */
size_t ptw_lwp_count_alive(struct ptw_proc *p);

/* Registers of a stopped LWP, cached until it is resumed. */
int ptw_getregs(struct ptw_proc *p, struct ptw_lwp *l, struct user_regs_struct **ret_regs);
/* Marks the cached registers modified; written at resume. */
void ptw_regs_dirty(struct ptw_lwp *l);
/* Writes modified registers now (before resume). */
int ptw_regs_flush(struct ptw_proc *p, struct ptw_lwp *l);
/* Floating-point registers (PTRACE_GETFPREGS / SETFPREGS), uncached. */
int ptw_getfpregs(struct ptw_proc *p, struct ptw_lwp *l, struct user_fpregs_struct *ret);
int ptw_setfpregs(struct ptw_proc *p, struct ptw_lwp *l, const struct user_fpregs_struct *fp);
int ptw_getsiginfo(struct ptw_proc *p, struct ptw_lwp *l, siginfo_t *ret);
/* True if signal sig with si_code code is queued for this thread
 * (PTRACE_PEEKSIGINFO; the LWP must be stopped). */
bool ptw_signal_queued(struct ptw_proc *p, struct ptw_lwp *l, int sig, int code);
int ptw_set_options(struct ptw_proc *p, struct ptw_lwp *l, unsigned options);
int ptw_interrupt(struct ptw_proc *p, struct ptw_lwp *l);
/* PTRACE_DETACH, delivering lwp->resume_sig. The LWP is marked gone. A
 * stop of its still queued goes: its signal, if it was a signal-delivery
 * stop of the program's (not an int3 trap) and none is set, is delivered
 * with the detach. */
int ptw_detach_lwp(struct ptw_proc *p, struct ptw_lwp *l);

/*
 * After the detach: what is still ours to reap, never blocking. A launched
 * command is our child: ptw_reap_launched() reaps it if it has ended
 * (*ret_status as from waitpid). Threads that were dying as we let go are
 * ours to reap too (a traced thread's death waits for its tracer), and the
 * main thread cannot be reaped before them: ptw_reap_dying() reaps every
 * such one and says whether pid itself was among them (only a child of
 * ours can be); a thread of pid still traced that stops (its exit event)
 * is detached, with the signal of a signal-delivery stop.
 */
bool ptw_reap_launched(pid_t pid, int *ret_status);
bool ptw_reap_dying(pid_t pid, int *ret_status);

/*
 * Memory of the target. Reads work on any readable mapping; writes to
 * read-only mappings (text) go through /proc/PID/mem. Return 0 or -errno
 * (a short access is -EIO).
 *
 * Reads are served from a snapshot of the pages read since the last stop
 * was reaped: libthread_db reads struct pthread a field at a time and the
 * unwinder a word at a time, and one process_vm_readv per page instead of
 * per field is most of ptwatch's own cost per thread. Within the handling
 * of one stop the snapshot is as good as any read (other threads may run
 * either way); our own writes update it.
 */
int ptw_mem_read(struct ptw_proc *p, uint64_t addr, void *buf, size_t len);
/* ptw_mem_read as a reader callback (ptw_memread_fn): ctx is the process. */
int ptw_mem_reader(void *ctx, uint64_t addr, void *buf, size_t len);
/* One piece of a scattered read: len bytes at addr into buf; ok once read. */
struct ptw_mem_piece {
	uint64_t addr;
	void *buf;
	size_t len;
	bool ok;
};
/* Reads every piece, uncached, batched (one process_vm_readv per IOV_MAX
 * pieces while they read whole); a piece that cannot be read is left with
 * ok false. Returns how many were read. */
size_t ptw_mem_read_many(struct ptw_proc *p, struct ptw_mem_piece *pieces, size_t n);
int ptw_mem_write(struct ptw_proc *p, uint64_t addr, const void *buf, size_t len);
/* Writes the same len bytes at each of n addresses, batched (one
 * process_vm_writev per IOV_MAX addresses). Returns 0 or -errno. */
int ptw_mem_write_scattered(struct ptw_proc *p, const uint64_t *addrs, size_t n, const void *buf,
			    size_t len);
/* Called with every /proc/TID/mem fd the attach layer opens for a target
 * (so that the guardian can hold one too). */
void ptw_set_mem_fd_hook(void (*hook)(int fd));
/* Forgets the read snapshot (memory changed behind the cache's back). */
void ptw_mem_invalidate(struct ptw_proc *p);
/* Writes through /proc/PID/mem (text pokes). */
int ptw_mem_poke(struct ptw_proc *p, uint64_t addr, const void *buf, size_t len);
/* Writes through /proc/PID/mem of any traced process (fork children too). */
int ptw_mem_poke_pid(pid_t pid, int mem_fd, uint64_t addr, const void *buf, size_t len);

/*
 * Stops every running LWP of the target (PTRACE_INTERRUPT) and waits until
 * (root: every LWP of the table; a followed process: its own LWPs)
 * each is stopped or gone, or until deadline_ms passed. Stops that arrive
 * meanwhile and carry meaning (signals, clones, breakpoint traps) are handed
 * to on_stop, which must leave the LWP stopped. Returns the number of LWPs
 * that did not stop in time (0 on full success) or -errno.
 */
typedef void (*ptw_stop_cb)(void *ctx, struct ptw_stop *st);
int ptw_stop_all(struct ptw_proc *p, int deadline_ms, ptw_stop_cb on_stop, void *ctx);

/*
 * Stops a few LWPs for a short look (PTRACE_INTERRUPT for the running
 * ones), waiting at most deadline_ms. ret_held[i] (n of them) is set for
 * each LWP now held in the interrupt stop asked for: resume it with
 * ptw_resume() when done. An LWP that stops for another reason (a
 * breakpoint trap, a signal, its exit) is not held: that stop is deferred
 * (ptw_wait() returns it first) and the LWP stays stopped until the
 * tracer's loop deals with it. Returns how many of the n are stopped and
 * fit to be looked at (held, or stopped already before the call).
 */
int ptw_stop_lwps(struct ptw_proc *p, struct ptw_lwp *const *lwps, size_t n, int deadline_ms,
		  bool *ret_held);

/*
 * Executes one system call in the target on behalf of a stopped LWP, then
 * restores its registers exactly. The LWP must be in a signal-delivery-stop,
 * a group-stop or a PTRACE_EVENT_STOP (not inside another system call).
 * syscall_insn is the address of a `syscall` instruction in the target.
 * Statuses of other LWPs reaped meanwhile are deferred. Returns 0 and the
 * syscall's return value in *ret_value, or -errno (-ESRCH: the LWP died).
 */
int ptw_inject_syscall(struct ptw_proc *p, struct ptw_lwp *l, uint64_t syscall_insn, long nr,
		       const uint64_t args[6], int64_t *ret_value);
/*
 * Whether l can host ptw_inject_syscall() now: stopped, not inside another
 * system call's event stop (clone, fork, exec, exit: the kernel would write
 * that call's return value over ours), not holding a signal to deliver,
 * and with no stop of its waiting in the deferred queue.
 */
bool ptw_lwp_injectable(const struct ptw_lwp *l);

/*
 * A process that a traced one forked (its LWPs are in root's table, tgid =
 * pid): its own memory access, sharing root's table and wait queue. The
 * caller decides to follow it; nothing is done to the process. Returns 0
 * and *ret (freed with ptw_proc_free, before root), or -errno.
 */
int ptw_proc_follow(struct ptw_proc *root, pid_t pid, struct ptw_proc **ret);
/* The root of p (p itself for the root). */
static inline struct ptw_proc *ptw_proc_root(struct ptw_proc *p)
{
	return p->root ? p->root : p;
}

/* Releases everything; does not touch the target. A followed process
 * leaves root's table to root (its LWPs are forgotten by the caller). */
void ptw_proc_free(struct ptw_proc *p);

/* Where a thread is, read from /proc without stopping it. */
struct ptw_where {
	char state[48];	 /* "S futex", "R", "t": state letter and system call */
	char wchan[64];	 /* kernel function it sleeps in, "" unknown */
	char name[32];	 /* its comm, "" unknown */
	uint64_t pc;	 /* user PC while blocked in a system call, 0 unknown */
	const struct ptw_location *at; /* pc's symbol, NULL unknown; valid for the session */
};

/* Where thread tid of process pid is now, from /proc alone: its kernel
 * state, wchan, system call and the PC it made it from (ret->at is left
 * NULL: the caller's symbols name pc). Returns 0, or -ESRCH when the
 * thread is gone (*ret then says "?"). */
int ptw_where_read(pid_t pid, pid_t tid, struct ptw_where *ret);

#endif
