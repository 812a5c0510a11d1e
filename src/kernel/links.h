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

/* The probes on n offsets of the file at path, for prog. */
struct ptwk_uprobe_set {
	struct bpf_program *prog;
	const char *path; /* as the kernel opens it (ptwk_file_of) */
	const uint64_t *offsets;
	const uint64_t *cookies; /* bpf_get_attach_cookie's, NULL: 0 */
	size_t n;
	bool ret;  /* uretprobes */
	pid_t pid; /* the process they fire in, 0: every process that maps the file */
};

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

#endif
