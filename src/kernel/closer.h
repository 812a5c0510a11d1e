/* SPDX-License-Identifier: MIT */
/*
 * Closing uprobe links together. Each uprobe link's close waits for grace
 * periods: an RCU one as its first probe is taken out of the processes
 * (the writer side of uprobes' mmap lock), an RCU tasks-trace one and an
 * SRCU one before its programs may go: 25-50 ms here for a uprobe_multi
 * link, about 110 ms for an ordinary (perf event) one. Closed one after
 * the other, N links cost N times that (--trace where a module's
 * functions had to be linked one by one: 277 links, 11 s); closed from
 * several threads at once, they wait for the same grace periods.
 */
#ifndef PTW_KERNEL_CLOSER_H
#define PTW_KERNEL_CLOSER_H

#include <stddef.h>

struct bpf_link;

/* Closes every fds[i] >= 0 and destroys every links[i] != NULL (setting
 * them to -1 and NULL), from as many as PTWK_CLOSER_THREADS threads, and
 * returns when all are closed. Either array may be NULL. */
#define PTWK_CLOSER_THREADS 128
void ptwk_close_together(int *fds, size_t nfds, struct bpf_link **links, size_t nlinks);

/* The same in a thread of its own, the caller going on meanwhile (a
 * target that has ended: its report is written while the kernel waits).
 * Takes fds and links (malloc'ed, or NULL) over. Returns what
 * ptwk_close_wait needs, or NULL if they are closed already (no thread
 * could be made). */
struct ptwk_closing;
struct ptwk_closing *ptwk_close_start(int *fds, size_t nfds, struct bpf_link **links,
				      size_t nlinks);
/* Returns once they are all closed; frees c. NULL: nothing to wait for. */
void ptwk_close_wait(struct ptwk_closing *c);

#endif
