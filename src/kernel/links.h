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

#endif
