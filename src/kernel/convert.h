/* SPDX-License-Identifier: MIT */
/*
 * Records of the BPF programs (bpf/ptw_kernel_records.h) to ptw_events:
 * pure (no BPF, no /proc, no clock), so that unit tests feed it synthetic
 * records. It pairs by tid and pthread_t, never by arrival alone: a
 * thread's creation (the clone, recorded in its parent before the child
 * can run) carries what pthread_create was given, and the new thread's
 * own records are matched to it by tid, its struct pthread checked.
 */
#ifndef PTW_KERNEL_CONVERT_H
#define PTW_KERNEL_CONVERT_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "ptw_events.h"
#include "ptw_kernel_records.h"
#include "ptw_util.h"

struct ptwk_conv_ops {
	void (*sink)(void *ctx, const struct ptw_event *ev);
	/* The location of a code address (NULL unknown); of a call whose
	 * return address is ret (the call instruction before it). */
	const struct ptw_location *(*locate)(void *ctx, uint64_t addr);
	const struct ptw_location *(*call_site)(void *ctx, uint64_t ret);
	/* The process exec'd (PTW_EV_EXEC was emitted): the new image's
	 * name for PTW_EV_IMAGE (NULL unknown), valid until the next call. */
	const char *(*exec)(void *ctx);
	/* Whether exit() called from ret is main() returning (its caller is
	 * libc's __libc_start_call_main), not an exit() call. */
	bool (*main_returns_to)(void *ctx, uint64_t ret);
	/* main() is about to run: the program's libraries are mapped. */
	void (*image_ready)(void *ctx);
	/* --trace: the function of an entry probe's cookie (NULL: unknown,
	 * then its entry address is located). */
	const struct ptw_location *(*frame_function)(void *ctx, uint64_t index);
	/* ld.so's list of modules changed (dlopen, dlclose): new ones to scan. */
	void (*modules_changed)(void *ctx);
	/* --trace: whether a return address is a sigreturn trampoline (a
	 * signal handler's; NULL: none is). */
	bool (*is_sigreturn)(void *ctx, uint64_t addr);
	/* --trace: a traced function jumped into code not traced that will
	 * return to addr: watch that return (a uprobe there, once); thread
	 * tid ended: forget the returns watched for it. NULL: nothing is
	 * watched (the jump ends the frame). */
	/* (1: its probe was in before, so the return cannot have come
	 * first; 0: it went in now; < 0: no probe can watch it) */
	int (*watch_return)(void *ctx, uint64_t addr);
	void (*unwatch_returns)(void *ctx, pid_t tid);
	void *ctx;
};

struct ptwk_conv {
	pid_t pid;
	bool launched; /* held before its exec: that exec is its start, not an event */
	struct ptwk_conv_ops ops;
	struct ptw_map threads; /* tid -> struct ptwk_thread */
	struct ptw_map frames;	/* tid -> its shadow stack (convert_frames.c) */
	uint64_t frames_too_deep; /* calls left without a return probe (the kernel's depth
				   * limit of pending uretprobe returns) */
	bool sigreturn_probed;	  /* --trace: glibc's sigreturn trampoline has its probe */
	uint64_t frames_ns;	  /* --trace: the time of the record being converted */
	uint64_t events;
	/* An attach: when the last probe was in (CLOCK_MONOTONIC, as the
	 * records), and the threads made before it, seen as clones: their
	 * pthread_create came before its probe (counted apart, not as raw
	 * clones). */
	uint64_t probes_in_ns;
	uint64_t window_clones;
	/* -f, a link per process: threads made before this process's own
	 * probes were in (their routine and argument from their struct
	 * pthread, PTWK_F_GAP), and how many of them also ended then (their
	 * value from it, not whether they returned or called pthread_exit) */
	uint64_t gap_created, gap_ended;
	/* -f --trace: calls its forking thread had under way at its fork that
	 * were no longer on its stack when its own probes came, or could not
	 * be told (ptwk_frames_forked): not reported */
	uint64_t gap_frames;
	/* -f --trace: a fork child's (until it execs), its calls that returned
	 * with no frame of theirs (entered before its own links: not
	 * reported, counted) */
	bool gap_calls_possible;
	uint64_t gap_returns;
	/* -f --locks: its threads asleep in futex when its own probes went in
	 * whose wait could not be read (they woke meanwhile: underway.c): one
	 * begun before the probes is not reported */
	uint64_t gap_waits;
	uint64_t tramp;	   /* --trace: the uretprobe trampoline's page, as entries read it */
	bool exec_gap;	   /* its image exec'd before its probes were in, and main() not seen */
	bool probes_blind; /* its image is not what the probes see (said apart) */
	/* The probes no longer fire in this process (a thread other than the
	 * main one exec'd: a per-process uprobe follows the old main thread's
	 * memory) until they are put in again. */
	bool blind;
	bool ended; /* PROCESS_EXIT emitted */
	/* The last thread's exit came while others' exit records had not:
	 * each thread's exit tracepoint runs after it left the group, so the
	 * last one's can reach the ring before another's. Its PROCESS_EXIT
	 * waits for theirs (ptwk_conv_end_pending: or until the process is
	 * gone and nothing more can come). */
	bool end_pending;
	uint64_t end_status, end_pending_ns; /* its status as a wait status */
	int exit_code, exit_signal;
	bool core_dumped;
	uint64_t end_ns;
	/* The last SIGTRAP delivered to one of its threads that kills (no
	 * handler): the user ip and whether an int3 (SI_KERNEL), for the
	 * warning if the process dies of it. */
	struct {
		bool seen, int3;
		pid_t tid;
		uint64_t ip;
	} trap;
	/* -f: the process's id in the session (ptw_event.process), and its
	 * main() (for a fork child's one thread; 0 unknown). */
	uint32_t process;
	uint64_t main_addr;
	/* The function that calls main() (the MAIN record's c, 0 unknown)
	 * and its size (set by the caller, 0 unknown): exit() called from
	 * inside it is main's return, told without a symbol lookup (a
	 * process that exec'd has new symbols, whose first lookup in libc
	 * reads its DWARF: long enough for short processes to be gone before
	 * their exec is read). Else ops.main_returns_to. */
	uint64_t main_caller, main_caller_size;
	/* Added to main_caller: the MAIN probe is on __libc_start_main and
	 * main's caller is another function (no symbol table: main_caller.h),
	 * this far from it in the same library (0: the probed one). */
	int64_t main_caller_delta;
};

void ptwk_conv_init(struct ptwk_conv *c, pid_t pid, const struct ptwk_conv_ops *ops);
/* The process is gone: a pending end is emitted now (true), whatever
 * exit records are still missing (lost). */
bool ptwk_conv_end_pending(struct ptwk_conv *c);
void ptwk_conv_free(struct ptwk_conv *c);

/* A thread found running at the attach (pthread 0 and routine 0 when
 * unknown; detached -1 unknown; name NULL unknown). The main thread is
 * the one whose tid is the pid: its routine is main(). */
void ptwk_conv_preexisting(struct ptwk_conv *c, pid_t tid, uint64_t pthread, uint64_t routine,
			   int detached, const char *name, uint64_t ns);
/* -f: c is a process forked by a watched one; its one thread (tid = pid)
 * is a copy of the forking thread (pthread: its struct pthread, detached
 * -1 unknown, name its comm), begun at the fork (began_ns): a span as if
 * found at an attach, its routine main(). */
void ptwk_conv_forked(struct ptwk_conv *c, uint64_t pthread, int detached, const char *name,
		      uint64_t began_ns);
/* Whether a thread is known (preexisting or created since). */
bool ptwk_conv_knows(const struct ptwk_conv *c, pid_t tid);

/* One record, in ring-buffer order. */
void ptwk_conv_record(struct ptwk_conv *c, const struct ptwk_record *r);

/* convert_frames.c: a --trace record (PTWK_FRAME_ENTRY ... PTWK_LONGJMP)
 * to FRAME_ENTRY, FRAME_RETURN, THROW, CATCH, LONGJMP as the tracer emits
 * them (src/tracer/trace.c); a thread's shadow stack forgotten (tid 0:
 * every thread's). */
void ptwk_frames_record(struct ptwk_conv *c, const struct ptwk_record *r);
void ptwk_frames_forget(struct ptwk_conv *c, pid_t tid);
/* The same at the thread's end (exit or exec, at ns; tid 0: every
 * thread's), a frame that may have returned unseen ended first as a tail
 * call. */
void ptwk_frames_end(struct ptwk_conv *c, pid_t tid, uint64_t ns);
/* A call under way at the attach (underway.c): sp the slot of its return
 * address ret, entry its function's address, index its --trace index. */
struct ptwk_under_way {
	uint64_t sp, ret, entry, index;
};
/* Thread tid's calls under way at the attach (v: outermost first): frame
 * entries before_attach, below every frame its records pushed (ns: the
 * attach). */
void ptwk_frames_under_way(struct ptwk_conv *c, pid_t tid, const struct ptwk_under_way *v, size_t n,
			   uint64_t ns);

/* A -f child's one thread, read once its own probes were in (follow.c):
 * its stack pointer then and len bytes of its stack from there (len 0: it
 * could not be read); returned: whether its return with sp after it came
 * since its probes were in (a record not converted yet; NULL: none). */
struct ptwk_fork_stack {
	uint64_t sp;
	const uint8_t *bytes;
	size_t len;
	bool (*returned)(void *ctx, uint64_t sp);
	void *ctx;
};

/* The calls thread tid has open (its running context's), for --trace. */
size_t ptwk_frames_open(const struct ptwk_conv *c, pid_t tid);

/*
 * -f: a fork child's one thread has the calls its forking thread
 * parent_tid had under way at the fork (its stack is a copy; ns: the
 * fork), and its own probes report their returns (a uretprobe's return
 * instance is copied with it). But it ran before its probes were in: a
 * call is reported (a frame entry before_attach) when st shows it still
 * on the stack (its slot at or above the stack pointer, holding its return
 * address, or the trampoline that stands for it), or returned since its
 * probes were in; the others, and all of them when st is NULL or empty,
 * are counted (gap_frames).
 */
void ptwk_frames_forked(struct ptwk_conv *child, const struct ptwk_conv *parent, pid_t parent_tid,
			uint64_t ns, const struct ptwk_fork_stack *st);

/* Let go (PTW_EV_DETACHED), unless the process ended. */
void ptwk_conv_detached(struct ptwk_conv *c, uint64_t ns);

#endif
