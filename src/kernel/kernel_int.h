/* SPDX-License-Identifier: MIT */
/*
 * Inside src/kernel: the kernel-assisted backend's state (struct
 * ptw_kernel: one per watched process, the root's shared by -f's) and what
 * its files ask of each other. By job:
 *
 *   notes.c     what could not be done (warnings), what each process is (-f): events
 *   image.c     a process's symbols, memory, libc and glibc facts
 *   programs.c  the BPF programs opened, libc's probes and tracepoints linked
 *   regs.c      threads' registers without a stop (--snapshot; -f --trace: a
 *               child's stack): task iterator, perf
 *   report.c    what is told at the end
 *   threads.c   the threads already running at an attach
 *   trace.c     --trace's probes (kframes.c selects and places them)
 *   follow.c    -f
 *   ldlist.c    ld.so's module list, walked in the target
 *   callbacks.c the converter's callbacks (convert.h)
 *   ring.c      the ring, the drain thread, the conversion, the run loop
 *   kernel.c    start (attach, launch, load), end (detach, free)
 *
 * Each file calls only those above it in this list.
 *
 * Pure parts apart: convert.c (records to events), lockconv.c, modules.c.
 */
#ifndef PTW_KERNEL_INT_H
#define PTW_KERNEL_INT_H

#include "ptw_kernel.h"
#include "ptw_regs.h"

#include <bpf/bpf.h>
#include <bpf/libbpf.h>
#include <dirent.h>
#include <elf.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <sys/sysmacros.h>
#include <sys/wait.h>
#include <unistd.h>

#include "closer.h"
#include "convert.h"
#include "kframes.h"
#include "underway.h"
#include "locks.h"
#include "modules.h"
#include "minbtf.h"
#include "links.h"
#include "probes.h"
#include "ptw_glibc.h"
#include "ptw_attach.h"
#include "ptw_breakpoints.h"
#include "ptw_cache.h"
#include "ptw_output.h"
#include "ptw_symbols.h"
#include "ptw_thread_db.h"
#include "ptw_util.h"

#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wcast-align"
#pragma GCC diagnostic ignored "-Wmissing-prototypes"
#include "ptw_kernel.skel.h"
#pragma GCC diagnostic pop

#define DEFAULT_FLUSH_MS 50
#define DEFAULT_RING	 (8u << 20)
/* Records read ahead of the converter at most: the ring, not the heap,
 * holds a backlog (when the process makes records faster than they are
 * turned into spans), so memory does not grow with a session's length;
 * a ring that fills is counted, as ever. */
#define INQ_MAX 8192
/* --locks' records carry 1 KB of stack: room for as many */
#define DEFAULT_RING_LOCKS (64u << 20)

/* --locks' counts of one or more processes (ptwk_locks_counts). */
struct locks_tally {
	uint64_t waits, unclassified;
	uint32_t deadlocks;
};

struct ptw_kernel {
	struct ptw_kernel_opts o;
	pid_t pid;
	struct ptw_proc *proc; /* memory only: never traced */
	struct ptw_symbols *syms;
	struct ptw_symbols **old_syms; /* images before an exec: events point into them */
	size_t nold_syms;
	struct ptw_tdb *tdb;
	struct ptwk_probes probes;
	struct ptw_kernel_bpf *skel;
	bool multi;
	int multi_fds[2];
	/* links that match nothing since a thread other than the main one
	 * exec'd (their task is gone): closed with the others */
	int stale_fds[4];
	size_t nstale;
	struct ptwk_warmer *warmer;   /* links.h: -f, a link per child (the root's) */
	struct ptwk_book *book;	      /* links.h: -f, a link per child: every set linked */
	struct ptwk_primer *primer;   /* links.h: under way until the programs are in */
	struct ptwk_ring_maker *ring_maker; /* programs.c: the ring, made beside the start */
	int primer_fds[2];	      /* (then its link and program: closed with the others) */
	struct ptwk_closing *closing; /* the links closing in the background */
	struct bpf_link **links;      /* tracepoints, and per-probe uprobes */
	size_t nlinks;
	struct ring_buffer *rb;
	int epfd, pidfd;
	struct ptwk_conv conv;
	struct ptwk_frames *frames;	/* --trace (kframes.c), NULL without */
	bool frames_noted;		/* its notes are in (end_notes) */
	struct ptwk_underway *underway; /* -p: calls (--trace) and waits (--locks) under way at the
					   attach; -p -f, a descendant's waits (underway.c) */
	bool debuginfod_noted;		/* its failure said */
	bool frames_gone_noted;		/* --trace: gone before its image's scan, said */
	bool images_noted;
	bool window_clones_noted;
	bool gap_noted;	    /* conv.gap_created said */
	unsigned links_failed; /* -f: processes whose own links could not all be made */
	bool zombie_leader; /* attached with its main thread exited */
	pid_t anchor;	    /* then: the live thread its uprobes are tied to (0: none; another
			     * once it ends, ring.c: anchor_ended) */
	/* Threads start at their clone's return (bpf/ptw_start.bpf.h), not
	 * at start_thread (no debug file, or opts.start_at_clone). */
	bool start_at_clone;
	bool start_derived; /* start_thread found without its name (main_caller.h) */
	/* main's caller found without its name in this process (main_caller.h;
	 * an attach has no MAIN record to place it from), else 0, 0 */
	uint64_t main_caller_lo, main_caller_hi;
	struct ptwk_locks *locks; /* --locks, NULL when off */
	struct ptwk_locks_config locks_config;
	struct locks_tally released; /* -f: the waits of the followed ones released */
	bool locks_busy;	     /* -f: its deadlocks being checked (follow_release waits) */
	struct ptw_map sites;	/* return address -> its call's location (text does not change) */
	struct ptw_map sigrets; /* --trace: return address -> 1 sigreturn trampoline, 2 not */
	uint64_t last_consume_ns;
	bool launched;	   /* ptw_kernel_launch: held before its exec */
	bool static_noted; /* a launched static program's probes could not be placed: said */
	dev_t static_dev;  /* the static program file probed (probes.in_exe) */
	ino_t static_ino;
	int libc_checks; /* after an exec: reads of its maps left to find its libc */
	bool end_lost;
	bool detached;
	const char *unfollowed_why; /* -f: a fork child the BPF side could not watch */
	char exe[4096];
	char *glibc;				 /* nptl's version, once read */
	uint64_t lost_kinds[PTWK_LOCK_KIND_END]; /* records the full ring refused, by kind */
	bool lost_noted;
	uint32_t watch_slots, ns_tid_slots; /* the watched and ns_tids maps' sizes */
	uint64_t watch_full, ns_tids_full;  /* and the entries they refused, full */
	uint64_t gap_tids_full;		    /* (gap_tids: ends read at their probe only) */
	struct ptw_kernel_stats stats;
	/* -f (follow forks, "---- -f" below): every process the target forks
	 * is a struct ptw_kernel of its own (root set) that shares the root's
	 * programs, links and ring: its own memory view, symbols, converter
	 * and record for the report. The root lists them all. */
	struct ptw_kernel *root; /* NULL: this is the root */
	uint32_t id, parent_id;	 /* ptw_process.id: 0 the root, then in order of fork */
	pid_t ppid, parent_tid;
	bool syms_borrowed; /* syms is its parent's (a fork child before its exec) */
	bool syms_lent;	    /* a child borrows syms: keep it whole at an exec */
	char **argv;
	uint64_t start_ns;
	struct ptw_kernel **followed; /* root: followed[i] has id i + 1 */
	size_t nfollowed;
	struct ptw_map by_pid; /* root: pid -> its latest followed process */
	/* Records read from the ring by the drain thread (root only, see
	 * drainer()) into inq, taken into queue and converted here. cur: the
	 * one being converted (its image, for on_exec and image_ready). */
	struct drained *inq, *queue;
	size_t ninq, capinq, nqueue, capqueue, cur;
	/* the records one read of the ring took, moved into inq at its end
	 * (one lock per read, not per record: with -f the probes are on
	 * libc's file, ptwatch's own calls of its functions included), and
	 * inq's length as that read began */
	struct drained *batch;
	size_t nbatch, capbatch, inq_seen;
	bool converting;
	/* the records not converted yet, as the converter and the reads of
	 * what is under way see them (ring.c's, ptwk_ring_pending) */
	const struct ptwk_pending *pending;
	pthread_t drainer;
	bool drainer_on, drainer_stop;
	pthread_mutex_t qlock; /* inq, drain_req, drain_done, drainer_stop, stats.records */
	pthread_cond_t qcond;  /* drain_done moved */
	pthread_cond_t qroom;  /* inq taken (or a drain asked for): room to read into */
	uint64_t drain_req, drain_done;
	bool queue_full; /* queue was taken at INQ_MAX: the ring holds more */
	int wake_fd;	 /* eventfd: drain now, or stop */
	int notify_fd;	 /* eventfd: the kernel woke the drainer, records are queued */
	int drain_epfd;
	unsigned images_unread; /* exec'd images gone before drain_capture read them */
	unsigned images_from_file; /* -f: of those, programs named from their file (gap_exec) */
	/* ld.so's module lists, walked in the target ("---- modules"):
	 * root: the probe; each process: its list being gathered. */
	bool mods_on;
	int mods_fd;		    /* its uprobe_multi link, else: */
	struct bpf_link *mods_link; /* its ordinary uprobe */
	char mods_ld[4096];
	uint64_t mods_off;
	int64_t rdebug_from_probe;
	struct ptwk_modlist modlist;
	bool mods_listed;	     /* its symbols come from a list (this image) */
	uint64_t exec_ns;	     /* its exec converted (check_libc's wait for a list) */
	struct ptw_map drain_listed; /* drain thread only: tgid -> a whole list since its exec */
	/* drain thread only, -f with a link per child: tgid -> when its links
	 * went in (until its first exec), and the tgids that exec'd before:
	 * ld.so's list and main() may have gone by unseen, so the modules are
	 * read at the next record of theirs (its syms, gap_syms) */
	struct ptw_map drain_links_in, drain_gap_exec;
	/* drain thread only once started: a launched static program (ET_EXEC)
	 * whose exec is to come, its modules known without /proc */
	bool static_exec;
};

/*
 * A record taken from the ring, and for an exec (and main() about to run)
 * what was read of the image at once, by the drain thread: converting
 * (naming code: symbol tables, DWARF) can take long, tens of ms for a new
 * image, and a short process is gone by then, its /proc with it. The
 * tracer reads them at the exec stop; the kernel path as soon as the
 * record arrives (both wake the reader).
 */
struct drained {
	struct ptwk_record r;
	void *lock_record; /* --locks: the whole record (a struct ptwk_lock_record) */
	size_t lock_size;
	struct ptw_symbols *syms;	   /* its modules (at an exec: the exe and ld.so so far) */
	char *exe;			   /* EXEC: /proc/PID/exe */
	uint64_t links_in_ns; /* FORK (-f, a link per child): when its own links were in */
	bool gap_syms;	      /* syms: an image exec'd before its links, read late */
	char **argv;			   /* EXEC: its command line */
	struct ptwk_module_record *module; /* MODULE: the whole record */
	struct ptwk_args_record *args;	   /* EXEC_ARGS: the whole record */
};

/* The initial PID namespace's inode (include/linux/proc_ns.h): any
 * other is a namespace of its own. */
#define PROC_PID_INIT_INO 0xEFFFFFFCu

/* ---- notes.c ---- */

void ptwk_note_as(struct ptw_kernel *k, enum ptw_warning_code code, const char *fmt, ...);
void ptwk_note(struct ptw_kernel *k, const char *fmt, ...);
void ptwk_why_set(char *why, size_t size, const char *fmt, ...);
void ptwk_note_line(void *ctx, int code, const char *line);
/* -f: what the document says of k's process now, to the session. */
void ptwk_say_process(struct ptw_kernel *k);

/* ---- image.c ---- */

void ptwk_sink(void *ctx, const struct ptw_event *ev);
const struct ptw_location *ptwk_locate(void *ctx, uint64_t addr);
struct ptwk_locks_env ptwk_locks_env_of(struct ptw_kernel *k);
struct ptwk_frames *ptwk_frames_of(const struct ptw_kernel *k);
int ptwk_pid_memread(void *ctx, uint64_t addr, void *buf, size_t len);
int ptwk_load_symbols(struct ptw_kernel *k);
void ptwk_check_libc(struct ptw_kernel *k);
void ptwk_main_caller_derive(struct ptw_kernel *k);
void ptwk_start_where(struct ptw_kernel *k);
void ptwk_join_where(struct ptw_kernel *k);
void ptwk_read_glibc(struct ptw_kernel *k);
const struct ptw_location *ptwk_call_site(void *ctx, uint64_t ret);

/* ---- programs.c ---- */

/* The skeleton opened for the running kernel (CO-RE against the BTF made
 * at build time for it, minbtf.h, else its own) and the PID namespace
 * ptwatch is in: *btf_fd to close once it is loaded (-1: none), *btf
 * which BTF. NULL, errno set, on failure. */
struct ptw_kernel_bpf *ptwk_skeleton_open(bool no_min_btf, int *btf_fd, const char **btf);
int ptwk_open_skeleton(struct ptw_kernel *k, bool multi);
/* The ring buffer (bytes) made by a thread of its own while the start
 * goes on: its pages are zeroed as it is made (some 1.3 ms for 8 MiB, 10
 * ms for --locks' 64 MiB here). ptwk_open_skeleton takes it; a maker not
 * taken is freed by ptwk_ring_drop. NULL: none (the skeleton makes it).
 * Not its reader: mapping the ring (8 ms for 64 MiB) holds ptwatch's own
 * mmap lock, and the loading thread's page faults waited for it (start-up
 * with --locks 41 -> 51 ms, tried). */
struct ptwk_ring_maker *ptwk_ring_start(uint32_t bytes);
void ptwk_ring_drop(struct ptwk_ring_maker *m);
pid_t ptwk_probe_pid(const struct ptw_kernel *k);
/* A thread whose /proc files and perf events see the process's memory:
 * its pid, or a zombie leader's anchor (kernel.c: zombie_anchor). */
pid_t ptwk_live_pid(const struct ptw_kernel *k);
/* The oldest live thread of process pid but its leader and except, 0 none
 * (a zombie leader's anchor). */
pid_t ptwk_oldest_thread(pid_t pid, pid_t except);
/* A zombie leader's anchor ended: probes tied to the oldest live thread
 * left (programs.c). Returns it, 0 if none. */
pid_t ptwk_reanchor(struct ptw_kernel *k);
/* -f with a link per followed process (none on a file for every process) */
bool ptwk_links_per_child(const struct ptw_kernel *k);
/*
 * -f, a link per child: pid gets its own links (the book's every set, for
 * it alone), then its watch entry says so (BPF stops reading its threads'
 * ends and starts from the tracepoints). What it did before is known from
 * the tracepoints alone, and counted. Run by the drain thread as soon as
 * a fork is read, before the converter sees it (and for a descendant
 * found at an attach, follow.c). Returns when the links were in.
 */
uint64_t ptwk_own_links(struct ptw_kernel *k, pid_t pid, uint64_t since);
/* pid's threads are seen by its probes: its links are in (probed), or
 * never will be (its image is not what the probes see: blind, for good,
 * and its fork children too). Until then, or for good, the tracepoints
 * say their creations, starts and ends (ptwk_watch). */
void ptwk_watch_probed(struct ptw_kernel *k, pid_t pid, bool probed);
/* What a note says of such a process's threads */
#define PTWK_SEEN_BY_TRACEPOINTS                                                                   \
	"its threads are seen by the scheduler's tracepoints alone: as pthreads with their "       \
	"routines and values where their struct pthread has the probed libc's layout (not "        \
	"their joins, nor whether they returned or called pthread_exit), else as clones and "      \
	"exits (the ptrace path sees them)"
/* (keep: the sets go in the book, for the followed processes) */
int ptwk_attach_multi_to(struct ptw_kernel *k, uint32_t pid, int fds[2], bool keep);
int ptwk_attach_multi(struct ptw_kernel *k);
int ptwk_attach_each(struct ptw_kernel *k);
int ptwk_attach_tracepoints(struct ptw_kernel *k);
void ptwk_close_links_start(struct ptw_kernel *k);
void ptwk_close_links(struct ptw_kernel *k);

/* ---- ldlist.c ---- */

void ptwk_modules_find(struct ptw_kernel *k);
int ptwk_modules_attach(struct ptw_kernel *k);
void ptwk_modules_close(struct ptw_kernel *k);
void ptwk_modules_record(struct ptw_kernel *k, const struct drained *d);
void ptwk_exec_args_record(struct ptw_kernel *k, const struct drained *d);

/* ---- trace.c ---- */

void ptwk_scan_frames(struct ptw_kernel *k);
void ptwk_launch_frames(struct ptw_kernel *k, const char *name);
int ptwk_watch_return(struct ptw_kernel *k, uint64_t addr);
void ptwk_unwatch_returns(struct ptw_kernel *k, pid_t tid);

/* ---- regs.c ---- */

struct ptw_thread_sample;
/* Thread tid of process pid as it is now, without a stop: its stack
 * pointer and up to want bytes of its stack from there (at most 32 KiB),
 * at one moment: while it sleeps (/proc, and it stays asleep while its
 * stack is read), else one perf sample as it runs (its registers too),
 * waited for at most timeout_ms. 0, or -errno (-EAGAIN: it did not run in
 * time); out->stack is malloc'd. */
int ptwk_thread_stack(pid_t pid, pid_t tid, size_t want, int timeout_ms,
		      struct ptw_thread_sample *out);

/* ---- threads.c ---- */

void ptwk_list_threads(struct ptw_kernel *k);
void ptwk_calls_under_way(struct ptw_kernel *k);

/* ---- follow.c ---- */

struct ptw_kernel *ptwk_follow_process_of(struct ptw_kernel *k, uint32_t tgid);
char **ptwk_read_cmdline(pid_t pid);
void ptwk_follow_exec(struct ptw_kernel *p);
/* The records not converted yet, as the converter sees them while it
 * converts a fork (ring.c's, handed down): read_ring takes every record
 * the ring holds now among them; returned says whether one is thread
 * tid's traced call returning with sp after it, made at or after since;
 * entered, whether one is a --locks slow path's entry of tid at sp. */
struct ptwk_pending {
	void (*read_ring)(struct ptw_kernel *root);
	bool (*returned)(struct ptw_kernel *root, pid_t tid, uint64_t sp, uint64_t since);
	bool (*entered)(struct ptw_kernel *root, pid_t tid, uint64_t sp);
};
void ptwk_follow_fork(struct ptw_kernel *k, struct ptw_kernel *parent, const struct ptwk_record *r,
		      uint64_t links_in_ns, const struct ptwk_pending *pending);
void ptwk_follow_linked(struct ptw_kernel *k, struct ptw_kernel *c, uint64_t links_in_ns);
bool ptwk_follow_ended(struct ptw_kernel *k);
void ptwk_follow_check_gone(struct ptw_kernel *k);
void ptwk_follow_consume(struct ptw_kernel *k);
void ptwk_follow_descendants(struct ptw_kernel *k);

/* ---- ring.c ---- */

int ptwk_on_record(void *ctx, void *data, size_t size);
void ptwk_gap_images_free(struct ptw_kernel *k);
int ptwk_drainer_start(struct ptw_kernel *k);
void ptwk_drainer_stop(struct ptw_kernel *k);
void ptwk_drained_free(struct drained *d);
void ptwk_consume_all(struct ptw_kernel *k);
const struct ptwk_pending *ptwk_ring_pending(void);

/* ---- callbacks.c ---- */

struct ptwk_conv_ops ptwk_conv_ops_of(struct ptw_kernel *k);

/* ---- report.c ---- */

void ptwk_end_notes(struct ptw_kernel *k);
void ptwk_read_counters(struct ptw_kernel *k);
void ptwk_tally_locks(const struct ptwk_locks *l, struct locks_tally *t);

#endif
