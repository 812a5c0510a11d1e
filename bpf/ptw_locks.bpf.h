/* SPDX-License-Identifier: MIT OR GPL-2.0 */
/*
 * --locks in the kernel (#included at the end of ptw_kernel.bpf.c, whose
 * maps and helpers it uses): uprobes on glibc's slow paths
 * (include/ptw_libc_waits.h) record what the tracer reads at its
 * breakpoints there: the futex and the words after it (a mutex's
 * __owner, a rwlock's __cur_writer), a join's thread's tid, the
 * registers, and a copy of the stack from sp so that user space can
 * unwind it (call site, classifying a futex wait by its callers) after the
 * thread has run on. A fast path never gets here: an uncontended lock
 * costs nothing.
 */
#ifndef PTW_LOCKS_BPF_H
#define PTW_LOCKS_BPF_H

/* Set by user space before loading (src/kernel/locks.c). */
const volatile __u32 locks_on = 0;
const volatile __u32 join_always_blocks = 0; /* the join probe is pthread_join's */
const volatile __u64 off_tid = 0;	     /* struct pthread: tid */
const volatile __u32 have_tid = 0;

#define PTWK_LOCK_CHUNK 512

/* The current thread's pending uretprobe returns into r, and the
 * trampoline's address (the unwind reads the original return addresses
 * where it is). */
static __always_inline void lock_returns(struct ptwk_lock_record *r)
{
	r->nrets = 0;
	r->tramp = 0;
	if (!bpf_core_field_exists(((struct xol_area *)0)->vaddr))
		return;
	struct task_struct *t = (struct task_struct *)bpf_get_current_task();
	r->tramp = BPF_CORE_READ(t, mm, uprobes_state.xol_area, vaddr);
	if (r->tramp)
		r->nrets = pending_returns(t, r->rets, PTWK_LOCK_RETS);
}

static __always_inline void lock_submit(struct ptwk_lock_record *r)
{
	__u64 flags = BPF_RB_NO_WAKEUP;
	/* reserved: the ring's data counts it already */
	__u64 avail = bpf_ringbuf_query(&rb, BPF_RB_AVAIL_DATA);
	if (avail >= wake_bytes && avail < wake_bytes + sizeof(*r) + 8)
		flags = BPF_RB_FORCE_WAKEUP;
	bpf_ringbuf_submit(r, flags);
	count(PTWK_STAT_SENT);
	if (flags == BPF_RB_FORCE_WAKEUP)
		count(PTWK_STAT_WAKEUPS);
}

/* One entry record: a, the registers, the words at `words_at`, the stack.
 * A global function: verified once, not at each of its call sites. */
__noinline int lock_record(struct pt_regs *ctx, __u32 kind, __u64 id, __u64 a, __u64 words_at)
{
	if (!ctx)
		return 0;
	struct ptwk_lock_record *r = bpf_ringbuf_reserve(&rb, sizeof(*r), 0);
	if (!r) {
		lost(kind);
		return 0;
	}
	__builtin_memset(&r->h, 0, sizeof(r->h));
	begin(&r->h, kind, id);
	r->h.a = a;
	r->h.b = (__u32)ctx->si; /* __futex_abstimed_wait_common: the expected value */
	r->h.c = words_at;	 /* a join: where the joined thread's tid is */
	__u64 regs[17] = { ctx->ax,  ctx->dx,  ctx->cx,	 ctx->bx,  ctx->si,  ctx->di,
			   ctx->bp,  ctx->sp,  ctx->r8,	 ctx->r9,  ctx->r10, ctx->r11,
			   ctx->r12, ctx->r13, ctx->r14, ctx->r15, ctx->ip };
	__builtin_memcpy(r->regs, regs, sizeof(regs));
	r->lflags = 0;
	if (bpf_probe_read_user(r->words, sizeof(r->words), (const void *)words_at) == 0) {
		r->lflags |= PTWK_LF_WORDS;
	} else {
		__builtin_memset(r->words, 0, sizeof(r->words));
		count(PTWK_STAT_READ_FAIL);
	}
	/* As much of the stack as can be read, in chunks: the top of a
	 * stack may be less than a whole copy away. */
	r->stack_len = 0;
	__u64 sp = ctx->sp;
#pragma unroll
	for (int i = 0; i < PTWK_LOCK_STACK / PTWK_LOCK_CHUNK; i++) {
		if (bpf_probe_read_user(&r->stack[i * PTWK_LOCK_CHUNK], PTWK_LOCK_CHUNK,
					(const void *)(sp + i * PTWK_LOCK_CHUNK)))
			break;
		r->stack_len += PTWK_LOCK_CHUNK;
	}
	lock_returns(r);
	lock_submit(r);
	return 0;
}

/* An entry probe of a slow path (the cookie is its kind). */
static __always_inline int ptw_lock_entry(struct pt_regs *ctx, __u32 kind, __u64 id)
{
	if (!locks_on)
		return 0;
	/* (futex, ...): the words after it hold the owner */
	return lock_record(ctx, kind, id, ctx->di, ctx->di);
}

/* The join function's entry (the lifecycle's probe): a wait when it
 * blocks (__pthread_clockjoin_ex's 5th argument; not pthread_tryjoin_np)
 * on a thread whose tid is not 0 (it has not ended). */
static __always_inline void ptw_lock_join(struct pt_regs *ctx, __u64 id)
{
	if (!locks_on || !have_tid || !ctx->di || (!join_always_blocks && !(ctx->r8 & 0xff)))
		return;
	__s32 tid = 0;
	if (bpf_probe_read_user(&tid, sizeof(tid), (const void *)(ctx->di + off_tid)) || tid <= 0)
		return;
	lock_record(ctx, PTWK_LOCK_JOIN, id, ctx->di, ctx->di + off_tid);
}

#endif
