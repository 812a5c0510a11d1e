/* SPDX-License-Identifier: MIT */
/*
 * Every warning a report can carry: its code (the JSON "code", stable:
 * consumers switch on it) and what it means. One list: the enum, the
 * names and the meanings come from it; spec/spans.schema.json and the man
 * page (OUTPUT, "Warnings") list the same codes, checked by a unit test
 * (test_warnings). A new code is a schema change.
 */
#ifndef PTW_WARNINGS_H
#define PTW_WARNINGS_H

#include <stdint.h>

#define PTW_WARNINGS(X)                                                                            \
	X(DEBUGINFOD_FAILED, debuginfod_failed,                                                    \
	  "a debuginfod server failed (not \"not found\"); no server is asked again and code "     \
	  "without local debug information is shown as module+offset")                             \
	X(FOREIGN_BREAKPOINT, foreign_breakpoint,                                                  \
	  "another tool's breakpoint (a kernel uprobe: bpftrace, perf, a profiler; or a "          \
	  "debugger's int3) is where ptwatch hooks: its hook moved to the next instruction, or "   \
	  "(the message says) is not in")                                                          \
	X(FORK_CHILD_UNCLEAN, fork_child_unclean,                                                  \
	  "a fork child's copies of ptwatch's breakpoints could not all be removed")               \
	X(HOOK_FAILED, hook_failed,                                                                \
	  "a libc function could not get its breakpoint: what it "                                 \
	  "tells (exit, cancel, detach, creation) is not seen")                                    \
	X(KERNEL_EVENTS_LOST, kernel_events_lost,                                                  \
	  "kernel path: the ring buffer was full and records were lost (the message says how "     \
	  "many): events are missing")                                                             \
	X(KERNEL_LIMIT, kernel_limit,                                                              \
	  "kernel path: something the ptrace path reports cannot be observed this way (the "       \
	  "message says what)")                                                                    \
	X(KERNEL_NOT_SEEN, kernel_not_seen,                                                        \
	  "kernel path: an image its probes do not cover (a static program it cannot probe, "      \
	  "another libc, an exec after the attach): its threads are not seen")                     \
	X(LOCKS_NO_RETURN, locks_no_return,                                                        \
	  "--locks: waits returning to an address no call precedes are not reported, nor a wait "  \
	  "under way at the attach whose return slot could not be trusted")                        \
	X(LOCKS_PARTIAL, locks_partial,                                                            \
	  "--locks: a slow path of glibc was not found or not hooked; those waits are not seen")   \
	X(NO_DEATH_EVENTS, no_death_events,                                                        \
	  "libthread_db's death event could not be enabled for a thread: its end is seen only "    \
	  "when its LWP exits")                                                                    \
	X(NO_DL_DEBUG_STATE, no_dl_debug_state,                                                    \
	  "library loading cannot be followed: threads are traced once main() runs")               \
	X(NO_JOIN_HOOKS, no_join_hooks,                                                            \
	  "the join function could not be hooked: joins are not "                                  \
	  "reported")                                                                              \
	X(NO_LIBC_DEBUGINFO, no_libc_debuginfo,                                                    \
	  "libc's debug file is missing (libc6-dbg): start routine returns and thread "            \
	  "attributes cost extra stops")                                                           \
	X(NO_SYMBOLS, no_symbols, "the modules of a process could not be read")                    \
	X(NO_THREAD_DB, no_thread_db,                                                              \
	  "libthread_db cannot be used: thread spans come from clone events and exits only")       \
	X(NO_THREAD_EVENTS, no_thread_events, "libthread_db's events could not be enabled")        \
	X(PROCESS_NOT_FOLLOWED, process_not_followed,                                              \
	  "-f: a process could not be followed and was let go (the message says why)")             \
	X(RESTORE_FAILED, restore_failed, "some patched bytes could not be restored")              \
	X(SIGTRAP_DEATH, sigtrap_death,                                                            \
	  "a traced process died of SIGTRAP; the message says where and whether ptwatch had "      \
	  "patched that address (then the trap was ptwatch's own: a bug to report)")               \
	X(START_ROUTINE_UNHOOKABLE, start_routine_unhookable,                                      \
	  "a start routine could not get its breakpoint: that thread's start is not reported")     \
	X(STEP_OVER_FAILED, step_over_failed,                                                      \
	  "a thread could not be stepped over a breakpoint: the breakpoint was removed")           \
	X(STREAM_CUT, stream_cut,                                                                  \
	  "report: the stream ends before its metrics line; only what it recorded is shown")       \
	X(THREAD_DB_ITERATION, thread_db_iteration, "libthread_db could not list the threads")     \
	X(THREADS_NOT_STOPPED, threads_not_stopped,                                                \
	  "threads did not stop in time (uninterruptible sleep?); the message says what that "     \
	  "costs")                                                                                 \
	X(TRACE_NO_MATCH, trace_no_match, "--trace: a pattern matched no function or module")      \
	X(TRACE_NO_RETURN, trace_no_return,                                                        \
	  "--trace: calls returning to an address no call precedes are not reported")              \
	X(TRACE_PARTIAL_STACK, trace_partial_stack,                                                \
	  "--trace: some calls under way at the attach are not reported (a stack not unwound to "  \
	  "its start, a return site that cannot hold a breakpoint)")                               \
	X(TRACE_REFUSED, trace_refused,                                                            \
	  "--trace: a function entered without a call (no return address) is not traced")          \
	X(TRACE_UNHOOKABLE, trace_unhookable,                                                      \
	  "--trace: some matched functions could not get a breakpoint")                            \
	X(TRACER_DIED, tracer_died,                                                                \
	  "ptwatch's tracer ended before it finished; the restorer wrote what it had seen")        \
	X(XOL_PAGE_LEFT, xol_page_left,                                                            \
	  "out-of-line pages stay mapped in the process: a thread may still return into one")      \
	X(ZOMBIE_LEADER, zombie_leader,                                                            \
	  "the main thread has exited (pthread_exit) and is a zombie; the others are traced")

enum ptw_warning_code {
#define PTW_WARNING_ENUM(id, code, meaning) PTW_W_##id,
	PTW_WARNINGS(PTW_WARNING_ENUM)
#undef PTW_WARNING_ENUM
	PTW_WARNING_CODES
};

/* One warning of a report: its code, what happened to what, and how many
 * times it was said (0 or 1: once). */
struct ptw_warning {
	char *code;
	char *message;
	unsigned count;
};

/*
 * A session's warnings as both backends keep them: one entry per code and
 * message, in the order they were first said, the same one said again
 * counted (1,000 followed processes without libc6-dbg make one warning,
 * said 1,000 times), none ever dropped. Zero-initialised is empty.
 */
struct ptw_warning_list {
	struct ptw_warning *v;
	size_t n;
	void *index; /* (private: hash of code and key -> entry) */
	char **keys; /* (private: each entry's key) */
};
/* Adds code's message (taken: freed here if it repeats one). A warning
 * repeats one with the same code and key (NULL: the message itself; a
 * followed process's warning is keyed without the "process N: " it
 * begins with, so that the same fact of many processes is one). */
void ptw_warning_list_add(struct ptw_warning_list *l, enum ptw_warning_code code, const char *key,
			  char *message);
void ptw_warning_list_free(struct ptw_warning_list *l);

/* What a process's death by SIGTRAP was, as its backend could tell
 * (the warning sigtrap_death, the same words on both). */
enum ptw_trap_verdict {
	PTW_TRAP_RAISED,       /* not a breakpoint trap: raised or sent by the program */
	PTW_TRAP_PROGRAM_INT3, /* an int3 the program's own code holds */
	PTW_TRAP_RUNTIME_INT3, /* kernel path: an int3 in code no file holds */
	PTW_TRAP_PATCHED,      /* ptrace path: at a breakpoint of ptwatch's */
	PTW_TRAP_PROBE_GONE,   /* kernel path: a uprobe's int3 where no uprobe applies */
};
/* Its message (malloc'd): where is symbol+symbol_offset, or addr when
 * symbol is NULL. */
char *ptw_sigtrap_death_text(enum ptw_trap_verdict v, int pid, int tid, const char *symbol,
			     uint64_t symbol_offset, uint64_t addr);

/* "no_symbols", ...; NULL for a value out of range. */
const char *ptw_warning_code(enum ptw_warning_code w);
/* What it means, one line. */
const char *ptw_warning_meaning(enum ptw_warning_code w);

#endif
