/* SPDX-License-Identifier: MIT OR GPL-2.0 */
/*
 * --trace on the kernel path (src/kernel/kframes.c attaches them): an
 * entry uprobe on every traced function (cookie: its index in user
 * space's table) and a uprobe on each instruction by which it can leave
 * (its rets, jumps out of it: ptw_insn_exits; cookie: PTWK_EXIT_COOKIE),
 * and uprobes on the helpers that leave frames without a return (longjmp
 * & co, _Unwind_RaiseException, __cxa_begin_catch; cookie: the record
 * kind), and on ld.so's _dl_debug_state (new libraries to scan: the
 * reader is woken at once); code entered without a call: swapcontext and
 * setcontext, glibc's sigreturn trampoline and the signal_deliver
 * tracepoint. A process that can neither throw nor switch stacks gets a
 * uretprobe on each traced function instead of the exits' probes (a
 * return then costs no single-step: kframes.c says when, and why).
 * Included by ptw_kernel.bpf.c: the maps and helpers are its own.
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

/* Indirect jumps out of traced functions (kframes.c fills it), by the
 * cookie's index. */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 65536);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__type(key, __u32);
	__type(value, struct ptwk_jump_site);
} frame_jumps SEC(".maps");

/* Whether a jcc of condition cc (its opcode's low nibble) is taken with
 * these flags: CF 0, PF 2, ZF 6, SF 7, OF 11. */
static __always_inline bool jcc_taken(__u64 fl, __u32 cc)
{
	bool cf = fl & 1, pf = fl & 4, zf = fl & 0x40, sf = fl & 0x80, of = fl & 0x800, t;
	switch (cc >> 1) {
	case 0: t = of; break;
	case 1: t = cf; break;
	case 2: t = zf; break;
	case 3: t = cf || zf; break;
	case 4: t = sf; break;
	case 5: t = pf; break;
	case 6: t = sf != of; break;
	default: t = zf || sf != of; break;
	}
	return (cc & 1) ? !t : t;
}

/* Register i of struct pt_regs (PTWK_REG_*; 0 past its end), read as
 * kernel memory (the verifier wants each direct read of ctx at a fixed
 * offset, and clang folds a switch of them into one at a computed one). */
static __always_inline __u64 reg_at(struct pt_regs *ctx, __u8 i)
{
	__u64 v = 0;
	if (i < sizeof(struct pt_regs) / 8)
		bpf_probe_read_kernel(&v, sizeof(v), (const char *)ctx + (__u32)i * 8);
	return v;
}

/* Where an indirect jump goes, 0 when it stays in its function (a jump
 * table) or cannot be read. */
static __always_inline __u64 jump_target(struct pt_regs *ctx, const struct ptwk_jump_site *j,
					 __u64 ip)
{
	__u64 t = (__u64)j->disp;
	if (j->base == PTWK_REG_IP_NEXT)
		t += ip;
	else if (j->base != PTWK_REG_NONE)
		t += reg_at(ctx, j->base);
	if (j->index != PTWK_REG_NONE)
		t += reg_at(ctx, j->index) * j->scale;
	if (j->mem && !read_user_u64(t, &t))
		return 0;
	return t >= ip - j->back && t < ip + j->ahead ? 0 : t;
}

/* One of a traced function's exits (PTWK_EXIT_COOKIE): a ret is its
 * return (sent as the return is about to land, from [sp]); a jump out of
 * it that is taken, a tail call. */
static __always_inline void frame_exit(struct pt_regs *ctx, __u64 id, __u64 cookie)
{
	__u64 ip = ctx->ip, sp = ctx->sp;
	__u32 kind = cookie >> 62, index = (__u32)cookie;
	struct ptwk_record r = {};
	if (kind == PTWK_EXIT_RET) {
		begin(&r, PTWK_FRAME_RETURN, id);
		r.a = index;
		r.b = sp + 8;
		if (read_user_u64(sp, &r.c))
			r.f |= PTWK_F_READ;
		r.d = ctx->ax;
		r.e = uprobe_area(); /* (a uretprobe'd caller's tail call: its trampoline) */
		send(&r, false);
		return;
	}
	if (kind == PTWK_EXIT_JCC && !jcc_taken(ctx->flags, (cookie >> 56) & 0xf))
		return;
	__u64 target = 0;
	if (kind == PTWK_EXIT_INDIRECT) {
		const struct ptwk_jump_site *j = bpf_map_lookup_elem(&frame_jumps, &index);
		if (!j || !(target = jump_target(ctx, j, ip)))
			return;
		index = j->index_fn;
	}
	begin(&r, PTWK_FRAME_TAIL, id);
	r.a = index;
	r.b = sp;
	r.c = target;
	/* where the jumped-to code will return: its uprobe (user space puts
	 * it there once it knows the place) reports that return for this
	 * thread and stack pointer (ptw_underway_return) */
	if (read_user_u64(sp, &r.d)) {
		struct ptwk_uw_key key = { .tid = (__u32)id, .sp = sp + 8 };
		__u64 v = index;
		bpf_map_update_elem(&underway_sites, &key, &v, BPF_ANY);
		r.f |= PTWK_F_READ;
	}
	send(&r, false);
}

/* A uretprobe's: the kernel has set ip back to the real return address
 * when this runs. */
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
	r.f = PTWK_F_READ;
	send(&r, false);
	return 0;
}

SEC("uprobe")
int ptw_frame_exit(struct pt_regs *ctx)
{
	__u64 id = current_id();
	__u32 tgid = id >> 32;
	if (bpf_map_lookup_elem(&watched, &tgid))
		frame_exit(ctx, id, bpf_get_attach_cookie(ctx));
	return 0;
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
	__u64 cookie = bpf_get_attach_cookie(ctx);
	r.a = (__u32)cookie;
	if (cookie & PTWK_ENTRY_URETPROBE)
		r.f |= PTWK_F_URETPROBE;
	if (cookie & PTWK_ENTRY_LOOPS)
		r.f |= PTWK_F_LOOPS;
	r.b = ctx->sp;
	/* The return address, before the kernel puts a uretprobe's
	 * trampoline there (that happens after every entry handler ran); it
	 * is the trampoline already when a traced function tail-called this
	 * one. */
	if (read_user_u64(ctx->sp, &r.c))
		r.f |= PTWK_F_READ;
	r.d = ctx->ip;
	r.e = uprobe_area();
	/* a signal handler's signal, if that is what it is (user space
	 * knows when [sp] is the sigreturn trampoline) */
	if (ctx->di >= 1 && ctx->di <= 64)
		r.f |= (__u32)ctx->di << PTWK_F_SIG_SHIFT;
	send(&r, false);
	/* its first instruction leaves it (a jump, a bare ret) */
	if (cookie & PTWK_ENTRY_EXITS)
		frame_exit(ctx, id, cookie & ~PTWK_ENTRY_EXITS);
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
