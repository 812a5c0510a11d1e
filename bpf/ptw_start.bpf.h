/* SPDX-License-Identifier: MIT OR GPL-2.0 */
/*
 * A new thread's start without a probe on start_thread (a static function
 * of glibc, found only in libc's debug file): the thread's clone3 (or
 * clone) system call returning 0 in the thread itself, before its first
 * user instruction. Included by ptw_kernel.bpf.c.
 *
 * These tracepoints are machine-wide: the watched map is asked first.
 * The thread's fs base is its struct pthread if pthread_create made it:
 * the kernel wrote the new tid into pd->tid (CLONE_PARENT_SETTID) before
 * the thread could run, so pd->tid equal to the thread's tid tells a
 * pthread from a raw clone (which inherits its creator's fs base, or sets
 * its own). The creation (sched_process_fork, in the creator, before the
 * thread is first woken) is always ahead of it in the ring.
 */
#ifndef PTW_START_BPF_H
#define PTW_START_BPF_H

/* Set by user space: struct pthread's tid (libthread_db's descriptor). */
const volatile __u64 off_pd_tid = 0;
const volatile __u32 have_pd_tid = 0;

/* The syscalls/sys_exit_* tracepoints' record (its format file). */
struct ptwk_sys_exit {
	__u64 common;
	__s32 nr;
	__u32 pad;
	__s64 ret;
};

static __always_inline int thread_begin(struct ptwk_sys_exit *ctx)
{
	__u64 id = bpf_get_current_pid_tgid();
	__u32 tgid = id >> 32, tid = (__u32)id;
	if (!bpf_map_lookup_elem(&watched, &tgid))
		return 0;
	/* the creator's return (the new tid), or a new process's child */
	if (ctx->ret != 0 || tid == tgid || !have_pd_tid)
		return 0;
	__u64 pd = current_pd();
	__s32 pd_tid;
	if (!pd || bpf_probe_read_user(&pd_tid, sizeof(pd_tid), (const void *)(pd + off_pd_tid)) ||
	    pd_tid != (__s32)tid)
		return 0; /* not a pthread: its clone record says what is known */
	struct ptwk_record r = {};
	begin(&r, PTWK_THREAD_BEGIN, id);
	r.a = pd;
	if (have_start_routine && read_user_u64(pd + off_start_routine, &r.c))
		r.f |= PTWK_F_ROUTINE_KNOWN;
	if (have_arg && read_user_u64(pd + off_arg, &r.d))
		r.f |= PTWK_F_ARG_KNOWN;
	send(&r, false);
	return 0;
}

SEC("tracepoint/syscalls/sys_exit_clone3")
int ptw_clone3_exit(struct ptwk_sys_exit *ctx)
{
	return thread_begin(ctx);
}

SEC("tracepoint/syscalls/sys_exit_clone")
int ptw_clone_exit(struct ptwk_sys_exit *ctx)
{
	return thread_begin(ctx);
}

#endif
