/* SPDX-License-Identifier: MIT OR GPL-2.0 */
/*
 * A new thread's start without a probe on start_thread (a static function
 * of glibc, found only in libc's debug file): the thread's clone3 (or
 * clone) system call returning 0 in the thread itself, before its first
 * user instruction. Included by ptw_kernel.bpf.c.
 *
 * The tracepoint is machine-wide: the watched map is asked first.
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
/* Every thread's start is its clone's return (else only those of a
 * process whose probes are not in, or cannot see it: ptwk_watch). */
const volatile __u32 start_at_clone = 0;

/* x86-64's clone and clone3 (glibc 2.34+ makes threads with clone3, older
 * ones and clone3's ENOSYS fallback with clone). */
#define PTWK_NR_CLONE 56
#define PTWK_NR_CLONE3 435

/*
 * The raw sys_exit tracepoint (regs, ret): a raw tracepoint needs no
 * tracefs (containers and minimal hosts never mount it; the syscalls/
 * sys_exit_clone3 tracepoint, attached through tracefs, failed there with
 * "No such file or directory"). It fires at every system call's return
 * of every task, so the cheapest test first: a return value of 0, then
 * the watched map, then which call it was.
 */
SEC("raw_tp/sys_exit")
int ptw_clone_exit(struct bpf_raw_tracepoint_args *ctx)
{
	if (ctx->args[1] != 0)
		return 0; /* the creator's return (the new tid), or any other call */
	__u64 id = current_id();
	__u32 tgid = id >> 32, tid = (__u32)id;
	struct ptwk_watch *w;
	if (tid == tgid || !have_pd_tid || !(w = bpf_map_lookup_elem(&watched, &tgid)))
		return 0; /* (a new process's child, or a process nobody watches) */
	if (!start_at_clone && !w->unlinked && !w->blind)
		return 0; /* (start_thread's probe says it) */
	long nr;
	if (bpf_probe_read_kernel(&nr, sizeof(nr),
				  (const void *)(ctx->args[0] +
						 __builtin_offsetof(struct pt_regs, orig_ax))) ||
	    (nr != PTWK_NR_CLONE3 && nr != PTWK_NR_CLONE))
		return 0;
	__u64 pd = current_pd();
	__s32 pd_tid;
	if (!pd || bpf_probe_read_user(&pd_tid, sizeof(pd_tid), (const void *)(pd + off_pd_tid)) ||
	    pd_tid != task_own_tid((struct task_struct *)bpf_get_current_task()))
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

#endif
