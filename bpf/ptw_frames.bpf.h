/* SPDX-License-Identifier: MIT OR GPL-2.0 */
/*
 * --trace on the kernel path (src/kernel/kframes.c attaches them): an
 * entry uprobe and a uretprobe on every traced function (cookie: its
 * index in user space's table), and uprobes on the helpers that leave
 * frames without a return (longjmp & co, _Unwind_RaiseException,
 * __cxa_begin_catch; cookie: the record kind), and on ld.so's
 * _dl_debug_state (new libraries to scan: the reader is woken at once). Included by
 * ptw_kernel.bpf.c: the maps and helpers are its own.
 */

/* Where the kernel keeps its uretprobe trampoline: the process's uprobe
 * area ([uprobes]; kernel/events/uprobes.c). CO-RE flavours of the
 * kernel's types (the ___kf suffix is dropped when relocating). */
struct xol_area___kf {
	unsigned long vaddr;
} __attribute__((preserve_access_index));

struct uprobes_state___kf {
	struct xol_area___kf *xol_area;
} __attribute__((preserve_access_index));

struct mm_struct___kf {
	struct uprobes_state___kf uprobes_state;
} __attribute__((preserve_access_index));

struct task_struct___kf {
	struct mm_struct___kf *mm;
} __attribute__((preserve_access_index));

static __always_inline __u64 uprobe_area(void)
{
	struct task_struct___kf *t = (struct task_struct___kf *)bpf_get_current_task();
	return BPF_CORE_READ(t, mm, uprobes_state.xol_area, vaddr);
}

SEC("uprobe")
int ptw_frame_entry(struct pt_regs *ctx)
{
	__u64 id = bpf_get_current_pid_tgid();
	__u32 tgid = id >> 32;
	if (!bpf_map_lookup_elem(&watched, &tgid))
		return 0;
	struct ptwk_record r = {};
	begin(&r, PTWK_FRAME_ENTRY, id);
	r.a = bpf_get_attach_cookie(ctx);
	r.b = ctx->sp;
	/* The return address, before the kernel puts its trampoline there
	 * (that happens after every entry handler ran); it is the trampoline
	 * already when a traced function tail-called this one. */
	if (read_user_u64(ctx->sp, &r.c))
		r.f |= PTWK_F_READ;
	r.d = ctx->ip;
	r.e = uprobe_area();
	send(&r, false);
	return 0;
}

/* The kernel has set ip back to the real return address when this runs. */
SEC("uretprobe")
int ptw_frame_return(struct pt_regs *ctx)
{
	__u64 id = bpf_get_current_pid_tgid();
	__u32 tgid = id >> 32;
	if (!bpf_map_lookup_elem(&watched, &tgid))
		return 0;
	struct ptwk_record r = {};
	begin(&r, PTWK_FRAME_RETURN, id);
	r.a = bpf_get_attach_cookie(ctx);
	r.b = ctx->sp;
	r.c = ctx->ip;
	r.d = ctx->ax;
	send(&r, false);
	return 0;
}

SEC("uprobe")
int ptw_frame_helper(struct pt_regs *ctx)
{
	__u64 id = bpf_get_current_pid_tgid();
	__u32 tgid = id >> 32;
	if (!bpf_map_lookup_elem(&watched, &tgid))
		return 0;
	struct ptwk_record r = {};
	__u32 kind = (__u32)bpf_get_attach_cookie(ctx);
	begin(&r, kind, id);
	r.b = ctx->sp;
	if (kind == PTWK_LONGJMP) {
		/* glibc x86-64: the jmp_buf's sp is its 7th word, mangled with
		 * the thread's pointer guard at fs:0x30 (user space unmangles). */
		__u64 fs = current_pd();
		if (fs && read_user_u64(fs + 0x30, &r.c) && read_user_u64(ctx->di + 6 * 8, &r.d))
			r.f |= PTWK_F_READ;
	}
	send(&r, kind == PTWK_DL_STATE);
	return 0;
}
