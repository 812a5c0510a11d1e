/* SPDX-License-Identifier: MIT */
/*
 * ptw_kernel.h when ptwatch was built without what the BPF programs need
 * (libbpf-dev, clang, bpftool: see meson.build). Every entry point says so;
 * PTW_KERNEL_MISSING names what was missing at configure time.
 */
#include "ptw_kernel.h"

#include <errno.h>
#include <stdio.h>

#ifndef PTW_KERNEL_MISSING
#define PTW_KERNEL_MISSING "libbpf, clang or bpftool"
#endif

int ptw_kernel_available(char *why, size_t size)
{
	if (why && size)
		snprintf(why, size,
			 "ptwatch was built without the kernel backend (missing at build time: %s)",
			 PTW_KERNEL_MISSING);
	return -ENOSYS;
}

int ptw_kernel_regs_reader(pid_t pid, struct ptw_regs_reader **ret, char *why, size_t why_size)
{
	(void)pid, (void)ret;
	return ptw_kernel_available(why, why_size);
}

int ptw_kernel_attach(const struct ptw_kernel_opts *o, pid_t pid, struct ptw_kernel **ret,
		      char *why, size_t why_size)
{
	(void)o, (void)pid, (void)ret;
	return ptw_kernel_available(why, why_size);
}

int ptw_kernel_launch(const struct ptw_kernel_opts *o, char *const argv[], int child_stdout,
		      struct ptw_kernel **ret, pid_t *ret_pid, char *why, size_t why_size)
{
	(void)o, (void)argv, (void)child_stdout, (void)ret, (void)ret_pid;
	return ptw_kernel_available(why, why_size);
}

int ptw_kernel_fd(const struct ptw_kernel *k)
{
	(void)k;
	return -1;
}

unsigned ptw_kernel_flush_ms(const struct ptw_kernel *k)
{
	(void)k;
	return 0;
}

int ptw_kernel_consume(struct ptw_kernel *k)
{
	(void)k;
	return -ENOSYS;
}

int ptw_kernel_run(struct ptw_kernel *k, int timeout_ms)
{
	(void)k, (void)timeout_ms;
	return -ENOSYS;
}

bool ptw_kernel_probes_everywhere(const struct ptw_kernel *k)
{
	(void)k;
	return false;
}

bool ptw_kernel_target_exit(const struct ptw_kernel *k, int *ret_code, int *ret_signal,
			    bool *ret_core)
{
	(void)k, (void)ret_code, (void)ret_signal, (void)ret_core;
	return false;
}

int ptw_kernel_detach(struct ptw_kernel *k)
{
	(void)k;
	return -ENOSYS;
}

void ptw_kernel_stats(struct ptw_kernel *k, struct ptw_kernel_stats *ret)
{
	(void)k;
	*ret = (struct ptw_kernel_stats){ .mode = "none" };
}

void ptw_kernel_free(struct ptw_kernel *k)
{
	(void)k;
}

void ptw_kernel_describe(struct ptw_kernel *k, struct ptw_kernel_desc *ret)
{
	(void)k;
	*ret = (struct ptw_kernel_desc){ .exe = "", .strategy = "lwp" };
}

const struct ptw_location *ptw_kernel_locate(struct ptw_kernel *k, uint64_t addr)
{
	(void)k;
	(void)addr;
	return NULL;
}

void ptw_kernel_finish(struct ptw_kernel *k)
{
	(void)k;
}

void ptw_kernel_save_caches(struct ptw_kernel *k)
{
	(void)k;
}
