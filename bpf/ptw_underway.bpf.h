/* SPDX-License-Identifier: MIT OR GPL-2.0 */
/*
 * --trace on the kernel path, the calls under way at an attach
 * (src/kernel/underway.c). A task iterator reads every thread's user
 * registers as the kernel saved them (no stop: valid for a thread that is
 * not on a CPU), and a uprobe on each such frame's return site (the
 * instruction after its call) reports that frame's return for its thread
 * and stack pointer only, once. Included by ptw_kernel.bpf.c: the ring and
 * its helpers are its own.
 */
#include "ptw_underway.h"

struct seq_file;

struct bpf_iter_meta___uw {
	struct seq_file *seq;
} __attribute__((preserve_access_index));

struct task_struct___uw {
	pid_t pid;
	int on_cpu;
	unsigned long nvcsw, nivcsw;
	struct thread_struct thread;
} __attribute__((preserve_access_index));

struct bpf_iter__task___uw {
	struct bpf_iter_meta___uw *meta;
	struct task_struct___uw *task;
} __attribute__((preserve_access_index));

/* key: (tid, sp after the return); value: the function's index */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 65536);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__type(key, struct ptwk_uw_key);
	__type(value, __u64);
} underway_sites SEC(".maps");

SEC("iter/task")
int ptw_underway_regs(struct bpf_iter__task___uw *ctx)
{
	struct seq_file *seq = ctx->meta->seq;
	struct task_struct___uw *t = ctx->task;
	if (!t)
		return 0;
	struct ptwk_uw_task out = {};
	out.tid = task_tid((struct task_struct *)t);
	out.on_cpu = (__u32)BPF_CORE_READ(t, on_cpu);
	out.switches = BPF_CORE_READ(t, nvcsw) + BPF_CORE_READ(t, nivcsw);
	out.fsbase = BPF_CORE_READ(t, thread.fsbase);
	struct pt_regs r;
	long p = bpf_task_pt_regs((struct task_struct *)t);
	if (p && bpf_probe_read_kernel(&r, sizeof(r), (const void *)p) == 0) {
		out.regs_ok = 1;
		out.regs[0] = r.ax;
		out.regs[1] = r.dx;
		out.regs[2] = r.cx;
		out.regs[3] = r.bx;
		out.regs[4] = r.si;
		out.regs[5] = r.di;
		out.regs[6] = r.bp;
		out.regs[7] = r.sp;
		out.regs[8] = r.r8;
		out.regs[9] = r.r9;
		out.regs[10] = r.r10;
		out.regs[11] = r.r11;
		out.regs[12] = r.r12;
		out.regs[13] = r.r13;
		out.regs[14] = r.r14;
		out.regs[15] = r.r15;
		out.regs[16] = r.ip;
		out.orig_ax = r.orig_ax;
		out.flags = r.flags;
	}
	out.nrets = pending_returns((struct task_struct *)t, out.rets, PTWK_UW_RETS);
	bpf_seq_write(seq, &out, sizeof(out));
	return 0;
}

/* At a return site: the frame's return if this is its thread and stack
 * pointer (else another call returning there, or another thread). */
SEC("uprobe")
int ptw_underway_return(struct pt_regs *ctx)
{
	__u64 id = current_id();
	struct ptwk_uw_key key = { .tid = (__u32)id, .sp = ctx->sp };
	__u64 *index = bpf_map_lookup_elem(&underway_sites, &key);
	if (!index)
		return 0;
	struct ptwk_record r = {};
	begin(&r, PTWK_FRAME_RETURN, id);
	r.a = *index;
	r.b = ctx->sp;
	r.c = ctx->ip;
	r.d = ctx->ax;
	r.f = PTWK_F_READ;
	bpf_map_delete_elem(&underway_sites, &key);
	send(&r, false);
	return 0;
}
