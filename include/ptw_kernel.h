/* SPDX-License-Identifier: MIT */
/*
 * The kernel-assisted backend (issue 19): the same typed thread events as
 * the tracer (ptw_events.h), observed by uprobes on glibc and scheduler
 * tracepoints running BPF programs (bpf/ptw_kernel.bpf.c) instead of
 * ptrace stops. No thread of the target is ever stopped, no byte of it is
 * written: the kernel owns the breakpoints and removes them when the
 * descriptors close, however ptwatch ends.
 *
 * It sits beside ptw_tracer.h's API: attach (-> new + attach), run with a
 * timeout, or wait on ptw_kernel_fd() with other descriptors and call
 * ptw_kernel_consume(); detach; free. Events go to the sink in the order
 * the kernel recorded them (creation before anything the new thread does).
 *
 * Errors are negative errno values; nothing here prints.
 */
#ifndef PTW_KERNEL_H
#define PTW_KERNEL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "ptw_events.h"

struct ptw_kernel;

struct ptw_kernel_opts {
	bool use_debug_files; /* libc's debug file: start_thread, struct pthread's layout */
	bool use_cache;	      /* the symbol cache (ptw_cache_default_dir()) */
	void (*sink)(void *ctx, const struct ptw_event *ev);
	void *sink_ctx;
	/* How long a record may wait in the ring buffer before it is read
	 * (ptw_kernel_run's drain period; 0: 50 ms). Wakeups are batched: the
	 * kernel wakes the reader only when wake_bytes are pending (0: a
	 * quarter of the ring) or the process ended. */
	unsigned flush_ms;
	size_t wake_bytes;
	size_t ring_bytes; /* a power of two, >= 4096 (0: 8 MiB; 64 MiB with locks) */
	/* Force ordinary per-probe uprobes (one perf event per probe) instead
	 * of one uprobe_multi link per program (tests; the fallback). */
	bool no_multi;
	/* --trace: [MODULE:]GLOB patterns, as ptw_backend_opts' (ptw_patterns.h):
	 * an entry uprobe and a uretprobe on every function they match in the
	 * executable and its libraries, PTW_EV_FRAME_ENTRY/RETURN and the
	 * THROW, CATCH, LONGJMP the tracer emits. Patterns that match nothing
	 * are said in ptw_kernel_notes. */
	char *const *trace;
	size_t ntrace;
	/* -f: also watch every process the target forks (fork, vfork, clone
	 * without CLONE_THREAD, posix_spawn), to any depth, through exec.
	 * Their events carry their pid and process id (ptw_event.process,
	 * ptw_kernel_process). Each followed process gets links of its own
	 * (uprobe_multi for its pid: int3s in no other process), made by the
	 * drain thread as soon as its fork is read; what it does before they
	 * are in (some 0.1-1 ms) comes from the tracepoints (its threads'
	 * creations, starts and ends, with routine and value read from their
	 * struct pthread) and is counted in a note. The run ends when the
	 * target and every followed process have ended. */
	bool follow_forks;
	/* -f with the probes on libc's file for every process instead (the
	 * BPF programs keep the watched tgids): nothing a child does is
	 * missed, but every process on the machine that maps the file gets
	 * the int3s and pays a trap per probed call. For measuring
	 * (bench/kfollow.py), not for use: it changes other processes. */
	bool follow_file_wide;
	/* -f: each child's links go in this much later (testing: what the
	 * tracepoints alone tell of a child's first moments) */
	unsigned follow_link_delay_ms;
	/* -p: /proc's threads are listed this much after libthread_db's walk
	 * (testing: threads made between the two) */
	unsigned list_delay_ms;
	/* --locks, --trace: called with process pid's id (ctx as sink_ctx)
	 * between the two reads of its threads for what is under way at an
	 * attach, or once a -f child's links are in (testing: threads that
	 * wake meanwhile) */
	void (*underway_between)(void *ctx, pid_t pid);
	/* An image's modules are read from /proc this much after its main()
	 * record is drained (testing: a process that exec'd again meanwhile) */
	unsigned main_read_delay_ms;
	/* --locks: wait spans (PTW_EV_WAIT_BEGIN, PTW_EV_WAIT_END) at glibc's
	 * slow paths and live deadlocks (PTW_EV_DEADLOCK, proof
	 * PTW_PROOF_REREAD: confirmed without stopping anyone). */
	bool locks;
	/* Start threads at their clone's return (the sys_exit_clone3 and
	 * sys_exit_clone tracepoints) even where start_thread can be probed
	 * (measuring; without libc's debug file that is the only way). */
	bool start_at_clone;
	/* Name a launched or exec'd image's code from /proc/PID/maps read
	 * while it runs, as before ld.so's list was walked in the target
	 * (measuring the difference; not for use: that read takes the
	 * target's memory-map lock). */
	bool modules_from_proc;
	/* Read the kernel's whole BTF for CO-RE even where the minimal one
	 * made at build time for this kernel could be used (tests). */
	bool no_min_btf;
};

/*
 * Whether the kernel path can run here. 0 if it can; else -errno and a
 * one-line reason in why: built without libbpf/clang/bpftool (-ENOSYS),
 * no BTF for CO-RE or no uprobes in this kernel (-ENOTSUP), not allowed
 * to load a BPF program (-EPERM: needs CAP_BPF and CAP_PERFMON, and
 * CAP_SYS_ADMIN for ordinary uprobes). Loads and unloads a trivial
 * program; cheap (about a millisecond).
 */
int ptw_kernel_available(char *why, size_t size);

struct ptw_regs_reader;
/*
 * Threads' registers without a stop, for --snapshot (ptw_regs.h): a task
 * iterator (BPF) for every thread of pid, off a CPU ones with the
 * registers the kernel saved, and perf samples (user registers and
 * stack) of running ones. Returns 0 or -errno with a one-line reason in
 * why (as ptw_kernel_available; -ENOSYS: not built).
 */
int ptw_kernel_regs_reader(pid_t pid, struct ptw_regs_reader **ret, char *why, size_t why_size);

/*
 * Attaches to the running process pid without stopping it: finds the
 * probe points in its libc (ptw_symbols.h), loads the programs, watches
 * pid, attaches the probes for pid only, then lists the threads already
 * running (libthread_db over process_vm_readv, no stop) and emits
 * PTW_EV_PREEXISTING for each (the main thread's span is "main"). On
 * failure *why (may be NULL) gets a one-line reason. Returns 0, -ESRCH,
 * -EPERM, -ENOENT (a probe point cannot be found: no glibc, or no
 * symbols for it), -ENOSYS (built without BPF) or -errno.
 */
int ptw_kernel_attach(const struct ptw_kernel_opts *o, pid_t pid, struct ptw_kernel **ret,
		      char *why, size_t why_size);

/*
 * Starts argv (looked up in PATH) held: forked, and blocked on a pipe
 * before its exec (never stopped) until the probes are in, then let go.
 * Events as a launch under the tracer: PTW_EV_IMAGE at the exec, then
 * PTW_EV_MAIN_START, ... The probes are on the loader's own libc (the
 * command is its fork until it execs): a command that maps another libc
 * (static, another glibc) is not seen (ptw_kernel_notes says so).
 * child_stdout: an fd for its stdout, or -1. *ret_pid: its pid; it is the
 * caller's child (reap it). Returns 0, -errno of a failed exec (-ENOENT,
 * -EACCES: nothing ran), or what ptw_kernel_attach returns.
 */
int ptw_kernel_launch(const struct ptw_kernel_opts *o, char *const argv[], int child_stdout,
		      struct ptw_kernel **ret, pid_t *ret_pid, char *why, size_t why_size);

/*
 * A descriptor that becomes readable when records wait (a batch is full)
 * or the process ended; for a loop that waits on other descriptors too.
 * Wakeups are batched: call ptw_kernel_consume() at least every flush_ms
 * (ptw_kernel_flush_ms) even if it did not become readable.
 */
int ptw_kernel_fd(const struct ptw_kernel *k);
unsigned ptw_kernel_flush_ms(const struct ptw_kernel *k);

/* Reads every record waiting and emits its events, never blocking.
 * Returns the number of records read, or -errno. */
int ptw_kernel_consume(struct ptw_kernel *k);

/*
 * Waits and emits until the process ended (returns 1), timeout_ms passed
 * (0; -1: no limit), or a signal interrupted the wait (-EINTR). Records
 * are drained at least every flush_ms.
 */
int ptw_kernel_run(struct ptw_kernel *k, int timeout_ms);

/* Whether the session's probes are on a file for every process that maps
 * it (-f without uprobe_multi, an attach to a zombie leader): until they
 * are closed, other processes have their int3s. Else each is for a traced
 * process alone, and one that ended has none in anything that runs. */
bool ptw_kernel_probes_everywhere(const struct ptw_kernel *k);

/* The process ended (PTW_EV_PROCESS_EXIT was emitted): how, like wait(2).
 * False also when its end did not fit in the ring buffer (the event was
 * emitted then, when the process was seen gone, without a status). */
bool ptw_kernel_target_exit(const struct ptw_kernel *k, int *ret_code, int *ret_signal,
			    bool *ret_core);

/*
 * Lets go: drains what is pending, closes the links (the kernel removes
 * the probes; the target was never touched), emits PTW_EV_DETACHED
 * unless the process had ended. Idempotent. Returns 0 or -errno.
 */
int ptw_kernel_detach(struct ptw_kernel *k);

struct ptw_kernel_stats {
	const char *mode;	/* "uprobe_multi" or "uprobe" (one perf event per probe) */
	const char *btf;	/* the BTF CO-RE used: "minimal (...)" or "the kernel's" */
	unsigned probes;	/* uprobes attached (entry and return) */
	unsigned probes_stepped; /* --trace: functions whose first instruction the kernel
				  * single-steps out of line at each call (src/kernel/xol.h) */
	uint64_t records;	/* records read */
	uint64_t events;	/* events emitted */
	uint64_t lost;		/* records the full ring buffer refused (events lost) */
	uint64_t wakeups;	/* reader wakeups the kernel made */
	uint64_t read_failures; /* reads of the target's memory that failed in BPF */
	uint64_t preexisting;	/* threads found running at the attach */
	uint64_t attach_ns;	/* ptw_kernel_attach, from the call to its return */
	uint64_t probes_ns;	/* of which loading and attaching the programs */
	uint64_t detach_ns;	/* closing the links (0 until detached) */
	/* --locks: wait spans begun, futex waits of none of the kinds
	 * reported (no span, as on the ptrace path), live deadlocks */
	uint64_t waits, waits_unclassified, deadlocks;
};
void ptw_kernel_stats(struct ptw_kernel *k, struct ptw_kernel_stats *ret);

/*
 * The session is over (the process ended, or ptwatch let go): says, as
 * events to the sink, what could not be seen (PTW_EV_WARNING: records
 * lost, what --trace and --locks could not do) and, -f, every process as
 * it is now (PTW_EV_PROCESS). Its notes during the session are
 * PTW_EV_WARNING events too, as they happen.
 */
void ptw_kernel_finish(struct ptw_kernel *k);
/* Writes the symbol caches now (ptw_kernel_free does too): what the next
 * session reads is on disk before ptwatch's front ends. */
void ptw_kernel_save_caches(struct ptw_kernel *k);

/* What the report says of the process (strings owned by k, valid until
 * ptw_kernel_free): its executable ("" unknown), nptl's version (NULL:
 * unknown), how thread starts and results are read ("debuginfo": libc's
 * DWARF gives struct pthread's layout; "breakpoints": libthread_db's
 * descriptors do; "lwp": no libthread_db, clones and exits only). */
struct ptw_kernel_desc {
	const char *exe;
	const char *glibc;
	const char *strategy;
};
void ptw_kernel_describe(struct ptw_kernel *k, struct ptw_kernel_desc *ret);

/* The location of a code address in the process now (NULL unknown;
 * valid until ptw_kernel_free). */
const struct ptw_location *ptw_kernel_locate(struct ptw_kernel *k, uint64_t addr);

/* Detaches if needed, then frees. The locations events pointed at
 * (routine, site) are freed too: consume them before. NULL is fine. */
void ptw_kernel_free(struct ptw_kernel *k);

#endif
