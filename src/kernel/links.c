/* SPDX-License-Identifier: MIT */
/* How a uprobe is put in; see links.h. */
#define _GNU_SOURCE
#include "links.h"

#include <bpf/bpf.h>
#include <bpf/libbpf.h>
#include <errno.h>
#include <linux/bpf.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/mman.h>
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

struct ptwk_primer {
	pthread_t th;
	int fds[2];
};

static void *prime(void *arg)
{
	struct ptwk_primer *p = arg;
	p->fds[0] = p->fds[1] = -1;
	/* r0 = 0; exit */
	const struct bpf_insn insns[] = {
		{ .code = BPF_ALU64 | BPF_MOV | BPF_K, .dst_reg = BPF_REG_0, .imm = 0 },
		{ .code = BPF_JMP | BPF_EXIT },
	};
	LIBBPF_OPTS(bpf_prog_load_opts, opts,
		    .expected_attach_type = (enum bpf_attach_type)PTWK_BPF_TRACE_UPROBE_MULTI);
	int prog = bpf_prog_load(BPF_PROG_TYPE_KPROBE, "ptw_primer", "GPL", insns,
				 sizeof(insns) / sizeof(insns[0]), &opts);
	int mem = prog < 0 ? -1 : memfd_create("ptw-primer", MFD_CLOEXEC);
	if (mem < 0 || write(mem, "\x90", 1) != 1) {
		if (prog >= 0)
			close(prog);
		if (mem >= 0)
			close(mem);
		return NULL;
	}
	char path[64];
	snprintf(path, sizeof(path), "/proc/self/fd/%d", mem);
	uint64_t offset = 0;
	struct ptwk_link_create_uprobe_multi a = {
		.prog_fd = (uint32_t)prog,
		.attach_type = PTWK_BPF_TRACE_UPROBE_MULTI,
		.path = (uint64_t)(uintptr_t)path,
		.offsets = (uint64_t)(uintptr_t)&offset,
		.cnt = 1,
		.pid = (uint32_t)getpid(),
	};
	int link = (int)syscall(__NR_bpf, BPF_LINK_CREATE, &a, sizeof(a));
	close(mem); /* (the uprobe holds its inode) */
	if (link < 0) {
		close(prog);
		return NULL;
	}
	p->fds[0] = link;
	p->fds[1] = prog;
	return NULL;
}

struct ptwk_primer *ptwk_primer_start(void)
{
	struct ptwk_primer *p = malloc(sizeof(*p));
	if (!p)
		return NULL;
	/* (the caller's signals are the caller's) */
	sigset_t all, old;
	sigfillset(&all);
	pthread_sigmask(SIG_SETMASK, &all, &old);
	pthread_attr_t attr;
	pthread_attr_init(&attr);
	pthread_attr_setstacksize(&attr, 64 * 1024);
	int r = pthread_create(&p->th, &attr, prime, p);
	pthread_attr_destroy(&attr);
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	if (r != 0) {
		free(p);
		return NULL;
	}
	return p;
}

void ptwk_primer_join(struct ptwk_primer *p, int fds[2])
{
	fds[0] = fds[1] = -1;
	if (!p)
		return;
	pthread_join(p->th, NULL);
	fds[0] = p->fds[0];
	fds[1] = p->fds[1];
	free(p);
}
