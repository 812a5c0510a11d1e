/* SPDX-License-Identifier: MIT */
/*
 * Inside src/kernel: how a uprobe is put in, the one place that does it.
 * A uprobe_multi link (Linux 6.6: every offset of one file for one
 * program in one system call, detached as one) or, where the kernel has
 * none, an ordinary uprobe per offset through libbpf (a perf event each).
 */
#ifndef PTW_KERNEL_LINKS_H
#define PTW_KERNEL_LINKS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

struct bpf_program;
struct bpf_link;
struct ptwk_book;

/* The probes on n offsets of the file at path, for prog. */
struct ptwk_uprobe_set {
	struct bpf_program *prog;
	const char *path; /* as the kernel opens it (ptwk_file_of) */
	const uint64_t *offsets;
	const uint64_t *cookies; /* bpf_get_attach_cookie's, NULL: 0 */
	size_t n;
	bool ret;  /* uretprobes */
	pid_t pid; /* the process they fire in, 0: every process that maps the file */
	/* -f with a link per process: the session's book, which keeps the set
	 * once linked and links it for every other process it has links for
	 * (ptwk_book_link_pid); NULL: not kept */
	struct ptwk_book *book;
	/* the order the book links the sets for a new process in (it runs on
	 * meanwhile): what ends a call before what sees it begin, what sees
	 * calls before what sees the threads that make them */
	unsigned rank;
};
#define PTWK_RANK_RETURNS 0 /* returns, exits (the default) */
#define PTWK_RANK_CALLS 1   /* --trace's entries and helpers */
#define PTWK_RANK_THREADS 2 /* libc's entries (a thread's creation), ld.so's */
#define PTWK_RANK_LAST 2

/* One uprobe_multi link for the set: its fd, or -errno (-EINVAL, -ENOTSUP:
 * a kernel without them; the instruction at an offset refused: all are). */
int ptwk_link_multi(const struct ptwk_uprobe_set *s);

/* One ordinary uprobe, for the set's i-th offset: the link, or NULL with
 * errno set. */
struct bpf_link *ptwk_link_one(const struct ptwk_uprobe_set *s, size_t i);

/*
 * The first uprobe registered after a quiet spell waits for an RCU grace
 * period (the writer side of uprobes' mmap lock: 6-14 ms here), those
 * registered within the next grace period or so do not. A primer is a
 * link that probes nothing (a memfd nobody maps, for this process only)
 * registered from a thread of its own while this one loads the programs:
 * the session's own links, made just after, find the lock ready.
 */
struct ptwk_primer;
/* NULL if no thread could be made. */
struct ptwk_primer *ptwk_primer_start(void);
/* Waits for its registration; fds[0], fds[1]: its link and program
 * (-1 if it failed: a kernel without uprobe_multi), closed with the
 * session's links. Frees p; NULL gives -1s. */
void ptwk_primer_join(struct ptwk_primer *p, int fds[2]);

/*
 * -f with a link per process: every set of probes the session linked for
 * a traced process (whoever linked it), so that each followed process gets
 * a link for each, for it alone, once its fork is read: no probe is ever
 * linked for every process that maps a file. A set linked later (a
 * library's --trace functions) is linked at once for every process that
 * has links. Safe from two threads (the drain thread links a child while
 * the converter links a library's functions).
 */
struct ptwk_book *ptwk_book_new(void);
/* Links every set kept for pid, forked at since (nothing if it has its
 * links already; another process's before it with that pid, not forgotten
 * yet, go): 0, or -errno of the first that failed (those made are kept). */
int ptwk_book_link_pid(struct ptwk_book *b, pid_t pid, uint64_t since);
/* Counts pid as having links (the target: its links are its own). */
void ptwk_book_own(struct ptwk_book *b, pid_t pid);
/* pid, forked at since, ended: its links go (closed in the background, a
 * batch at a time). */
void ptwk_book_forget(struct ptwk_book *b, pid_t pid, uint64_t since);
/* Hands over every link the book holds (malloc'ed arrays, the caller closes
 * them) and waits for those it was closing. */
void ptwk_book_take(struct ptwk_book *b, int **fds, size_t *nfds, struct bpf_link ***links,
		    size_t *nlinks);
void ptwk_book_free(struct ptwk_book *b);

/*
 * -f with a link per process: each followed child's links are registered
 * once its fork is read, and the first registration after a quiet spell
 * waits for a grace period (12-16 ms here), in which the child runs
 * unprobed. A warmer keeps registrations prompt for the whole session: a
 * thread that registers an idle uprobe (the primer's kind: no byte in any
 * process) every PTWK_WARM_PERIOD_MS, shorter than a grace period, and
 * closes them in batches in the background.
 */
#define PTWK_WARM_PERIOD_MS 5
struct ptwk_warmer;
/* NULL if it cannot run (no thread, no uprobe_multi). */
struct ptwk_warmer *ptwk_warmer_start(void);
/* Tells it to stop (its last links close in its thread). */
void ptwk_warmer_quit(struct ptwk_warmer *w);
/* Stops it, waits for its links to close, frees w. */
void ptwk_warmer_stop(struct ptwk_warmer *w);

#endif
