/* SPDX-License-Identifier: MIT */
/*
 * What the BPF programs (bpf/ptw_kernel.bpf.c) send to user space
 * (src/kernel): one fixed-size record per observation through the ring
 * buffer, and the numbers user space gives them before they are loaded.
 * Shared by both sides: plain fixed-width types only.
 */
#ifndef PTW_KERNEL_RECORDS_H
#define PTW_KERNEL_RECORDS_H

#ifndef __bpf__
#include <linux/types.h>
#endif

/* Which probe fired. For the uprobes this is also the attach cookie. */
enum ptwk_kind {
	PTWK_NONE,
	/* uprobes at a function's entry, in libc */
	PTWK_CREATE_CALL, /* pthread_create entry: kept in BPF, never sent */
	PTWK_START,	  /* start_thread entry: a = its struct pthread (rdi) */
	PTWK_DEATH,	  /* __call_tls_dtors, where start_thread goes after the start
			   * routine returned or unwound: a = pd->result, b = 1 unwinding */
	PTWK_EXIT_CALL,	  /* pthread_exit: a = its value */
	PTWK_CANCEL,	  /* pthread_cancel: a = the pthread_t */
	PTWK_DETACH,	  /* pthread_detach: a = the pthread_t */
	PTWK_JOIN,	  /* __pthread_clockjoin_ex: a = the pthread_t */
	/* uretprobes */
	PTWK_JOIN_RET, /* __pthread_clockjoin_ex returned: a = its value (errno) */
	/* tracepoints */
	PTWK_CREATE, /* sched_process_fork, a thread: tid made a = child tid; b = its
		      * pthread (fs base); c = start routine, d = argument, e = call
		      * site (the return address of pthread_create), f: PTWK_F_* */
	PTWK_FORK,   /* sched_process_fork, a process: a = the child's pid; b = its
		      * thread's pthread (fs base: the forking thread's), f:
		      * PTWK_F_JOINID_KNOWN, PTWK_F_DETACHED, PTWK_F_SHARED_VM; comm */
	PTWK_EXIT,   /* sched_process_exit: a = exit_code (wait status), b = group
		      * exit code, f: PTWK_F_*; comm */
	PTWK_EXEC,   /* sched_process_exec: a = the former tid, b = auxv's AT_ENTRY */
	/* one more uprobe at an entry */
	PTWK_EXIT_FN, /* exit() in the main thread: a = its status, b = the return
		       * address (in __libc_start_call_main: main returned a) */
	PTWK_MAIN,    /* __libc_start_call_main (else __libc_start_main) in the main
		       * thread: a = main, b = its pthread (fs base), c = that
		       * function's address in the process */
	/* --trace (bpf/ptw_frames.bpf.h): a traced function's entry and
	 * return (the attach cookie is the function's index, not a kind),
	 * and the helpers that leave frames without a return (cookie: kind) */
	PTWK_FRAME_ENTRY,  /* a = function index, b = sp, c = [sp] (the return address,
			    * PTWK_F_READ), d = ip, e = the process's uprobe area (a page
			    * with the uretprobe trampoline; 0 none yet) */
	PTWK_FRAME_RETURN, /* a function's ret (a uprobe on the instruction, or its
			    * uretprobe): a = function index, b = sp after the return,
			    * c = where it returns to (PTWK_F_READ: read), d = rax, e (at
			    * a ret) the uprobe area, as FRAME_ENTRY's. Also
			    * a return site's uprobe (calls under way at an attach:
			    * underway.h) */
	PTWK_THROW,	   /* _Unwind_RaiseException entry */
	PTWK_CATCH,	   /* __cxa_begin_catch entry: b = sp */
	PTWK_LONGJMP,	   /* longjmp & co: b = sp, c = the pointer guard (fs:0x30), d = the
			    * jmp_buf's mangled sp (PTWK_F_READ: both read) */
	PTWK_DL_STATE,	   /* _dl_debug_state: ld.so's modules changed (dlopen, dlclose) */
	PTWK_FATAL_SIGNAL, /* signal_deliver: the thread took a = a signal that kills by
			    * default, caught or not (or signal_generate: one that kills
			    * it uncaught); c = si_code (PTWK_F_CODE: known; SI_KERNEL:
			    * a terminal's); for SIGTRAP, b = the user ip (PTWK_F_READ:
			    * b and c read) */
	/* --trace, code entered without a call (issue 20) */
	PTWK_SIGNAL,	   /* signal_deliver tracepoint, a caught signal: a = the signal,
			    * b = the interrupted sp (PTWK_F_READ: read) */
	PTWK_SIGRETURN,	   /* glibc's __restore_rt entry: b = sp */
	PTWK_CONTEXT_SWAP, /* swapcontext entry: b = sp, c = ucp, d = ucp's saved RSP
			    * (PTWK_F_READ: read) */
	PTWK_CONTEXT_SET,  /* setcontext entry: the same, ucp its first argument */
	/* the raw sys_exit tracepoint of clone3 (or clone) in a new
	 * thread, its first moment in user space (bpf/ptw_start.bpf.h): the
	 * START of a pthread when start_thread cannot be probed (no debug
	 * file). As PTWK_START: a = its struct pthread (fs base, whose tid is
	 * the thread's), c = pd->start_routine (PTWK_F_ROUTINE_KNOWN), d =
	 * pd->arg (PTWK_F_ARG_KNOWN) */
	PTWK_THREAD_BEGIN,
	/* ld.so's list of modules, walked in the target at _dl_debug_state
	 * once consistent (bpf/ptw_modules.bpf.h, src/kernel/modules.c) */
	PTWK_MODULE,	  /* a struct ptwk_module_record: one link_map entry */
	PTWK_MODULES_END, /* the walk's end: a = entries sent, b = r_debug's address, e = the
			   * walk, f: PTWK_F_MODULES_WHOLE */
	PTWK_EXEC_ARGS,	  /* after PTWK_EXEC: a struct ptwk_args_record, its command line */
	/* sched_switch away from a dead task, its last moment on a CPU: what
	 * it cost, final (the scheduler has just accounted its last run),
	 * after its PTWK_EXIT: c, d, e as PTWK_EXIT's with PTWK_F_CPU */
	PTWK_CPU,
	/* --trace: a traced function left by a jump out of it (a tail call
	 * into code not traced): a = function index, b = sp (its return
	 * slot), c = where it jumps to (0: a direct jump's, not sent), d =
	 * [sp], where that code will return (PTWK_F_READ: read, and that
	 * return is watched: underway_sites) */
	PTWK_FRAME_TAIL,
	PTWK_KIND_N,
};

/* Record flags (f). */
#define PTWK_F_PTHREAD 0x1	 /* CREATE: made by pthread_create (c, d, e are valid) */
#define PTWK_F_DETACHED 0x2	 /* CREATE: detached from the start (pd->joinid == pd) */
#define PTWK_F_JOINID_KNOWN 0x4	 /* CREATE: the flag above means something */
#define PTWK_F_GROUP_EXIT 0x8	 /* EXIT: the whole process is going down (exit_group,
				  * a fatal signal, exec) */
#define PTWK_F_GROUP_DEAD 0x10	 /* EXIT: the last thread of the process */
#define PTWK_F_RESULT_KNOWN 0x20 /* DEATH: a is pd->result */
#define PTWK_F_UNWIND_KNOWN 0x40 /* DEATH: b means something */
#define PTWK_F_SITE_KNOWN 0x80	 /* CREATE: e is valid */
#define PTWK_F_EXIT_CALL 0x100	 /* EXIT: in its own exit system call */
#define PTWK_F_EXIT_GROUP_CALL 0x200 /* EXIT: in its own exit_group system call */
#define PTWK_F_HOW_KNOWN 0x400	 /* EXIT: the two flags above were read */
#define PTWK_F_READ 0x800	 /* FRAME_ENTRY, LONGJMP: the user memory was read */
#define PTWK_F_SHARED_VM 0x1000	 /* FORK: the child runs in its parent's memory (vfork,
				  * posix_spawn, clone(CLONE_VM)) until it execs */
#define PTWK_F_ROUTINE_KNOWN 0x2000 /* START: c = pd->start_routine */
#define PTWK_F_ARG_KNOWN 0x4000	    /* START: d = pd->arg */
#define PTWK_F_CANCELED 0x8000	    /* DEATH (with PTWK_F_UNWIND_KNOWN): a cancellation acted
				     * on it (else its unwinding was pthread_exit's) */
/* CREATE: a pthread_create whose call no probe saw (routine, arg from the
 * struct pthread: c, d); DEATH: from the exit tracepoint, the process's
 * probes not in, or not seeing it (ptwk_watch) */
#define PTWK_F_GAP  0x200000
#define PTWK_F_CODE 0x10000	    /* FATAL_SIGNAL: c = the signal's si_code */
/* FRAME_ENTRY: bits 24-31 are its first argument (rdi) when it is 1..64,
 * else 0: a signal handler's signal, when [sp] is the sigreturn trampoline */
#define PTWK_F_SIG_SHIFT 24

/* Where ucontext_t keeps the stack pointer (uc_mcontext.gregs[REG_RSP],
 * glibc x86-64; checked against <ucontext.h> in convert_frames.c). */
#define PTWK_UC_RSP 160

#define PTWK_F_MODULES_WHOLE 0x10000 /* MODULES_END: the list read whole, to its end */
#define PTWK_F_CLONE_READ 0x20000    /* CREATE, not PTWK_F_PTHREAD: a clone() syscall's
				      * child stack top read: c = the function glibc's
				      * clone() will call, d = its argument, e = the
				      * creator's ip (in that wrapper or not) */
#define PTWK_F_CPU 0x80000 /* EXIT: c = time on a CPU, d = runnable (0: no scheduler
			    * statistics), e = voluntary << 32 | involuntary switches */
#define PTWK_F_LOOPS 0x400000	  /* FRAME_ENTRY: PTWK_ENTRY_LOOPS */
#define PTWK_F_URETPROBE 0x100000 /* FRAME_ENTRY: its return is a uretprobe's (else
				   * a probe on each of its exits) */
#define PTWK_F_UNWATCHED 0x40000 /* FORK (-f): the child could not be watched (the
				  * watched map full, PTWK_STAT_WATCH_FULL) */

/*
 * --trace: the cookie of a uprobe on one of a traced function's exits
 * (ptw_insn_exits): the kind in bits 62-63, a jcc's condition in bits
 * 56-59, the function's index in bits 0-31, or for an indirect jump the
 * key of its struct ptwk_jump_site in the frame_jumps map.
 */
#define PTWK_EXIT_RET 0ull
#define PTWK_EXIT_JUMP 1ull
#define PTWK_EXIT_JCC 2ull
#define PTWK_EXIT_INDIRECT 3ull
#define PTWK_EXIT_COOKIE(kind, cond, index) \
	((__u64)(kind) << 62 | (__u64)((cond) & 0xf) << 56 | (__u64)(__u32)(index))

/* An entry probe's cookie: the function's index, and when its first
 * instruction is one of its exits, that exit's cookie with this bit (the
 * entry's program does both: two probes at one address run in no set
 * order). */
#define PTWK_ENTRY_EXITS (1ull << 61)
/* An entry probe's cookie: the function's return is watched by a
 * uretprobe (PTWK_F_URETPROBE in its record). */
#define PTWK_ENTRY_URETPROBE (1ull << 60)
/* An entry probe's cookie: the function jumps back to where its entry
 * probe is (PTWK_F_LOOPS in its record): a pass there again with the
 * same slot and return address is the same call. */
#define PTWK_ENTRY_LOOPS (1ull << 59)

/* A register of struct pt_regs by its index (struct user_regs_struct's
 * order, the same on x86-64: r15 0, ..., ax 10, ..., ip 16, ..., sp 19);
 * PTWK_REG_NONE none, PTWK_REG_IP_NEXT the address after the jump (a
 * rip-relative operand). */
#define PTWK_REG_NONE 0xff
#define PTWK_REG_IP_NEXT 0xfe

/* An indirect jump out of a traced function, maybe (its target is read
 * at the jump: inside the function, a jump table, nothing is sent). The
 * target is base + index * scale + disp, read from there when mem. */
struct ptwk_jump_site {
	__s64 disp;
	__u32 index_fn; /* the function's index */
	__u32 back;	/* the function is [ip - back, ip + ahead) */
	__u32 ahead;
	__u8 base, index, scale, mem;
};

#define PTWK_COMM_LEN 16

struct ptwk_record {
	__u32 kind; /* enum ptwk_kind */
	__u32 tid;  /* the thread it happened in */
	__u32 tgid;
	__u32 f;
	__u64 ns; /* bpf_ktime_get_ns: CLOCK_MONOTONIC */
	__u64 a, b, c, d, e;
	char comm[PTWK_COMM_LEN];
};

/* PTWK_EXEC is sent as this longer record (readers of a struct ptwk_record
 * see its head): the path the program was exec'd by, for a process that
 * ends before user space can read /proc/PID/exe. */
#define PTWK_PATH_LEN 256
struct ptwk_exec_record {
	struct ptwk_record r;
	char path[PTWK_PATH_LEN]; /* as given to execve (may be relative), cut to fit */
};

/* PTWK_MODULE: one entry of ld.so's link_map list, in order (the
 * program first). r.a = l_addr (the load bias), b = l_ld (its dynamic
 * section), c = its index in the walk, d = the entry's address, e = the
 * walk (the time it began: every record of one walk has it); f:
 * PTWK_F_READ when path was read whole (NUL-terminated in PTWK_PATH_LEN). */
#define PTWK_MAX_MODULES 512
struct ptwk_module_record {
	struct ptwk_record r;
	char path[PTWK_PATH_LEN]; /* l_name: "" for the program, as ld.so opened it */
};

/* PTWK_EXEC_ARGS: the new image's command line as the kernel put it on
 * its stack (what /proc/PID/cmdline reads, which takes the process's
 * memory-map lock): r.a = bytes in args, r.b = its whole length; f:
 * PTWK_F_READ when they were read. */
#define PTWK_ARGS_LEN 1024
struct ptwk_args_record {
	struct ptwk_record r;
	char args[PTWK_ARGS_LEN]; /* NUL-separated */
};

/*
 * --locks (bpf/ptw_locks.bpf.h, src/kernel/locks.c): glibc's slow paths
 * (ptw_libc_waits.h), kinds of their own above the lifecycle's. An entry
 * is a struct ptwk_lock_record (the registers and a copy of the stack, for
 * unwinding in user space); a return a struct ptwk_record.
 */
enum ptwk_lock_kind {
	PTWK_LOCK_FIRST = 64,
	PTWK_LOCK_WAIT = PTWK_LOCK_FIRST, /* __lll_lock_wait entry: a = the futex (the mutex) */
	PTWK_LOCK_WAIT_PRIVATE,		  /* __lll_lock_wait_private entry: a = the futex */
	PTWK_FUTEX_WAIT,		  /* __futex_abstimed_wait_common entry: a = the futex,
					   * b = the value it expects */
	PTWK_LOCK_JOIN,			  /* the join function's entry, a join that blocks on a
					   * thread that has not ended: a = its pthread_t */
	PTWK_LOCK_RET,			  /* one of the first three returned: a = rax, b = sp */
	PTWK_LOCK_KIND_END,
};
/* A probe cookie: the join found as pthread_join (no libc symbol table):
 * it always blocks; __pthread_clockjoin_ex says so in its 5th argument. */
#define PTWK_LOCK_JOIN_ALWAYS 0x100

#define PTWK_LOCK_STACK 1024 /* bytes of stack copied from sp, at most */
#define PTWK_LOCK_WORDS 8    /* 32-bit words read at the futex (the owner fields) */
#define PTWK_LF_WORDS	0x1  /* words[] were read */

#define PTWK_LOCK_RETS 4 /* pending uretprobe returns recorded, innermost first */

struct ptwk_lock_record {
	struct ptwk_record h;
	/* DWARF's x86-64 order: rax rdx rcx rbx rsi rdi rbp rsp r8-r15 rip */
	__u64 regs[17];
	__u32 words[PTWK_LOCK_WORDS]; /* at the futex; a join: the thread's tid */
	__u32 lflags;		      /* PTWK_LF_* */
	__u32 stack_len;	      /* bytes of stack[] copied from regs[7] */
	/* the thread's pending uretprobe returns (a traced caller's, ours or
	 * another tool's; a fork child's, copied from its parent): the stack
	 * slot whose return address the kernel replaced with its trampoline
	 * (tramp, the return address the unwind then reads there), and the
	 * original address; nrets 0: none or unknown */
	__u32 nrets;
	__u32 pad;
	__u64 tramp;
	__u64 rets[PTWK_LOCK_RETS][2];
	__u8 stack[PTWK_LOCK_STACK];
};

/* Counters (the "stats" array map, one slot each). */
enum ptwk_stat {
	PTWK_STAT_LOST,		 /* a record did not fit in the ring buffer */
	PTWK_STAT_SENT,		 /* records submitted */
	PTWK_STAT_WAKEUPS,	 /* submissions that woke the reader */
	PTWK_STAT_READ_FAIL,	 /* a read of the target's memory failed */
	PTWK_STAT_WATCH_FULL,	 /* -f: a fork child not watched, the watched map full */
	PTWK_STAT_NS_TIDS_FULL,	 /* a thread's namespace tid not kept, ns_tids full */
	PTWK_STAT_GAP_TIDS_FULL, /* -f: a thread made before its links not kept, gap_tids full */
	PTWK_STAT_N,
};

/* Per watched process (the "watched" hash map, key: tgid). */
struct ptwk_watch {
	__u32 follow_forks; /* also watch the processes it forks */
	__u32 root;	    /* the target itself (not a followed child): its end wakes the reader */
	__u64 since;	    /* -f: its fork (the records' clock), 0 for one watched from the start:
			     * an end converted later lets go of this pid only if it is not newer */
	/* Its threads' creations, starts and ends come from the tracepoints
	 * (PTWK_F_GAP, THREAD_BEGIN) while either is set: unlinked, -f, a
	 * child whose own links are not in yet (user space clears it once
	 * they are); blind, a process whose image the probes cannot see (set
	 * by user space, kept for good and by its fork children). */
	__u32 unlinked;
	__u32 blind;
	/* A process whose main thread has exited (a zombie): the thread its
	 * uprobes are tied to (perf events for that task, which filter by its
	 * memory); its end makes the process blind (the probes stop firing). */
	__u32 anchor;
};

#endif
