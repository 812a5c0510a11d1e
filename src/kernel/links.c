/* SPDX-License-Identifier: MIT */
/* How a uprobe is put in; see links.h. */
#include "links.h"

#include <bpf/bpf.h>
#include <bpf/libbpf.h>
#include <errno.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "probes.h"

int ptwk_link_multi(const struct ptwk_uprobe_set *s)
{
	struct ptwk_link_create_uprobe_multi a = {
		.prog_fd = (uint32_t)bpf_program__fd(s->prog),
		.attach_type = PTWK_BPF_TRACE_UPROBE_MULTI,
		.path = (uint64_t)(uintptr_t)s->path,
		.offsets = (uint64_t)(uintptr_t)s->offsets,
		.cookies = (uint64_t)(uintptr_t)s->cookies,
		.cnt = (uint32_t)s->n,
		.multi_flags = s->ret ? PTWK_BPF_F_UPROBE_MULTI_RETURN : 0,
		.pid = s->pid > 0 ? (uint32_t)s->pid : 0,
	};
	int fd = (int)syscall(__NR_bpf, BPF_LINK_CREATE, &a, sizeof(a));
	return fd < 0 ? -errno : fd;
}

struct bpf_link *ptwk_link_one(const struct ptwk_uprobe_set *s, size_t i)
{
	LIBBPF_OPTS(bpf_uprobe_opts, opts, .retprobe = s->ret,
		    .bpf_cookie = s->cookies ? s->cookies[i] : 0);
	return bpf_program__attach_uprobe_opts(s->prog, s->pid > 0 ? s->pid : -1, s->path,
					       (size_t)s->offsets[i], &opts);
}
