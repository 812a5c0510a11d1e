/* SPDX-License-Identifier: MIT */
/*
 * --trace on the kernel path: the functions the patterns match (the
 * tracer's matching, ptw_patterns.h), found with the symbols layer in the
 * executable and its libraries as file offsets, and an entry uprobe on
 * each (bpf/ptw_frames.bpf.h) and what sees its return: a uretprobe, or,
 * in a process that can throw exceptions or switch stacks (where the
 * uretprobe's trampoline would end or misroute it), a uprobe on each of
 * its exits (its rets and its jumps out of it, from a sweep of its code
 * that must decode it whole: ptw_insn_exits). Attached for one process:
 * one uprobe_multi link per module file and kind, the cookie the
 * function's index here; ordinary uprobes as the fallback. Plus uprobes
 * on the helpers that leave frames without a return (longjmp & co,
 * _Unwind_RaiseException, __cxa_begin_catch), as the tracer hooks them,
 * and on ld.so's _dl_debug_state: libraries loaded later are scanned when
 * the reader sees it fire (the program runs on meanwhile: their first
 * calls may be missed). A file's probes stay for the session: the kernel
 * puts them in every later mapping of it (a library dlopen'ed again).
 */
#ifndef PTW_KERNEL_KFRAMES_H
#define PTW_KERNEL_KFRAMES_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

struct ptw_symbols;
struct ptw_location;
struct ptwk_book;
struct bpf_program;
struct ptwk_frames;

struct ptwk_frames_progs {
	struct bpf_program *entry, *ret, *exit, *helper; /* ret: the uretprobe */
	struct bpf_program *site; /* a return site's (ptw_underway_return) */
	int jumps; /* the frame_jumps map: indirect jumps' targets, by cookie index */
	bool multi; /* uprobe_multi links (else a perf event per probe) */
	/* the probes for every process that maps a file, the programs keeping
	 * the watched ones (-f without uprobe_multi; a zombie leader's memory
	 * is gone), else for pid's alone (-f: kept in the book for the other
	 * followed processes) */
	bool wide;
	struct ptwk_book *book; /* -f, a link per process: the session's (links.h) */
};

/* NULL when there is no pattern (nothing to do). Invalid patterns are
 * left out (the caller checked them). */
struct ptwk_frames *ptwk_frames_new(char *const *trace, size_t ntrace);

/*
 * Scans the modules of syms not scanned yet (after an attach; again after
 * a dlopen) and attaches the probes for pid. Returns the number of probes
 * attached now, or -errno when none could be (*why says why).
 */
int ptwk_frames_scan(struct ptwk_frames *f, struct ptw_symbols *syms, pid_t pid,
		     const struct ptwk_frames_progs *progs, char *why, size_t why_size);

/* The same for libc and ld.so only (a launch: the command, ptwatch's fork
 * until it execs, maps ptwatch's; the probes are on the files). */
int ptwk_frames_scan_core(struct ptwk_frames *f, struct ptw_symbols *syms, pid_t pid,
			  const struct ptwk_frames_progs *progs, char *why, size_t why_size);

/*
 * A launch: the files at paths (the executable as exec will find it, the
 * libraries ld.so will map for it) are read before it runs, and their
 * traced functions get their probes for pid now (they are in when it
 * execs). If any of them can throw or switch stacks, no function gets a
 * uretprobe (kframes.c).
 * Returns the number of probes attached, or -errno when none could be
 * and a file could not be read (*why says which).
 */
int ptwk_frames_scan_files(struct ptwk_frames *f, const char *const *paths, size_t n, pid_t pid,
			   bool use_debug_files, const struct ptwk_frames_progs *progs, char *why,
			   size_t why_size);

/*
 * The libraries ld.so will map for the executable at path, as ldd finds
 * them: ld.so --list, run only when path's program interpreter is
 * ptwatch's own (another one is anyone's code), with ptwatch's
 * environment (the command's). Returns how many (*ret: paths, free each
 * and the array); 0 when there are none or they cannot be known.
 */
size_t ptwk_frames_launch_libraries(const char *path, char ***ret);
/* Returns are to be seen by probes on the functions' exits from now on,
 * not uretprobes (why: for the notes), as for a process that can throw or
 * switch stacks: nothing says what the process will run. */
void ptwk_frames_exits_needed(struct ptwk_frames *f, const char *why);

/*
 * A traced function jumped out of itself into code not traced, which
 * will return to addr (an address in syms' process): a uprobe there (once
 * per address) reports that return for the thread and stack pointer the
 * jump's BPF program put in underway_sites. Returns 1 if that probe was
 * in before (the return cannot have come first), 0 if it went in now, or
 * -errno.
 */
int ptwk_frames_watch_return(struct ptwk_frames *f, struct ptw_symbols *syms, pid_t pid,
			     uint64_t addr, const struct ptwk_frames_progs *progs);
/* The traced function of a cookie (NULL: not ours). */
const struct ptw_location *ptwk_frames_function(const struct ptwk_frames *f, uint64_t index);

/* Whether glibc's sigreturn trampoline (__restore_rt) has its probe: the
 * end of every signal handler is seen. */
bool ptwk_frames_sigreturn_probed(const struct ptwk_frames *f);

/* Whether the function at entry (an address in the attached process) has
 * its entry and return probes; *ret_index: its index (the cookie);
 * *ret_probe: where its entry probe is (entry, or past instructions that
 * change nothing it reads: a thread before it has not begun the call). */
bool ptwk_frames_traced(const struct ptwk_frames *f, uint64_t entry, uint64_t *ret_index,
			uint64_t *ret_probe);
/* Probes attached (entries, returns and helpers). */
unsigned ptwk_frames_probes(const struct ptwk_frames *f);
/* Of the functions traced, those the kernel single-steps at each call: at
 * their first instruction (xol.h), or at their ret (exits' probes): some
 * 10 times the cost of a call. */
unsigned ptwk_frames_stepped(const struct ptwk_frames *f);

/* The patterns that matched nothing, the functions that could not be
 * probed, what this path cannot do here: one line each, with its warning
 * code (the tracer's where the tracer says the same; enum
 * ptw_warning_code), fn(ctx, code, line). */
void ptwk_frames_notes(const struct ptwk_frames *f,
		       void (*fn)(void *ctx, int code, const char *line), void *ctx);

/* Closes the links (the kernel removes the probes). */
void ptwk_frames_close(struct ptwk_frames *f);
struct bpf_link;
/* Hands the links over to the caller (to close with others: closer.h):
 * *fds and *links (malloc'ed, NULL where none) and their counts; f keeps
 * none. f may be NULL. */
void ptwk_frames_take_links(struct ptwk_frames *f, int **fds, size_t *nfds,
			    struct bpf_link ***links, size_t *nlinks);
void ptwk_frames_free(struct ptwk_frames *f);

#endif
