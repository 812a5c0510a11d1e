/* SPDX-License-Identifier: MIT OR GPL-2.0 */
/*
 * --trace on the kernel path (src/kernel/kframes.c attaches them): an
 * entry uprobe and a uretprobe on every traced function (cookie: its
 * index in user space's table), and uprobes on the helpers that leave
 * frames without a return (longjmp & co, _Unwind_RaiseException,
 * __cxa_begin_catch; cookie: the record kind), and on ld.so's
 * _dl_debug_state (new libraries to scan: the reader is woken at once);
 * code entered without a call: swapcontext and setcontext, glibc's
 * sigreturn trampoline and the signal_deliver tracepoint. Included by
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
	__u64 id = current_id();
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
	/* a signal handler's signal, if that is what it is (user space
	 * knows when [sp] is the sigreturn trampoline) */
	if (ctx->di >= 1 && ctx->di <= 64)
		r.f |= (__u32)ctx->di << PTWK_F_SIG_SHIFT;
	send(&r, false);
	return 0;
}

/* The kernel has set ip back to the real return address when this runs. */
SEC("uretprobe")
int ptw_frame_return(struct pt_regs *ctx)
{
	__u64 id = current_id();
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
	__u64 id = current_id();
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
	if (kind == PTWK_CONTEXT_SWAP || kind == PTWK_CONTEXT_SET) {
		/* where the context switched to runs: ucp's saved stack pointer
		 * (kept unmangled by glibc) */
		__u64 si = ctx->si, di = ctx->di; /* (the verifier wants each read at a
						   * fixed offset of ctx) */
		barrier_var(si);
		barrier_var(di);
		r.c = kind == PTWK_CONTEXT_SWAP ? si : di;
		if (read_user_u64(r.c + PTWK_UC_RSP, &r.d))
			r.f |= PTWK_F_READ;
	}
	send(&r, kind == PTWK_DL_STATE);
	return 0;
}

/*
 * A caught signal is about to be delivered to a thread of a watched
 * process (its handler runs next, on top of what it interrupted): from
 * ptw_signal, with --trace. The user registers are those of the
 * interrupted code.
 */
static __always_inline void frame_signal(__u64 id, int sig)
{
	struct ptwk_record r = {};
	begin(&r, PTWK_SIGNAL, id);
	r.a = (__u32)sig;
	long regs = bpf_task_pt_regs(bpf_get_current_task_btf());
	if (regs && bpf_probe_read_kernel(
			    &r.b, sizeof(r.b),
			    (const void *)(regs + __builtin_offsetof(struct pt_regs, sp))) == 0)
		r.f |= PTWK_F_READ;
	send(&r, false);
}
