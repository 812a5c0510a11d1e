/* SPDX-License-Identifier: MIT OR GPL-2.0 */
/*
 * The kernel half of ptwatch's kernel-assisted backend (src/kernel): no
 * thread of the target ever stops. Uprobes on a few glibc functions and
 * three scheduler tracepoints turn what a thread does into records
 * (ptw_kernel_records.h) in a ring buffer, for the processes in the
 * "watched" map only. User space turns them into ptw_events.
 *
 * Wakeups are batched: a record wakes the reader only when the ring holds
 * wake_bytes or more, or when a process ends; the reader also drains on a
 * timer. A record that does not fit is counted (PTWK_STAT_LOST), never
 * dropped silently.
 */
#include "ptw_kernel_types.h"

#include <bpf/bpf_core_read.h>
#include <bpf/bpf_helpers.h>

#include "ptw_kernel_records.h"

char LICENSE[] SEC("license") = "Dual MIT/GPL";

/* Set by user space before loading: struct pthread's layout (from libc's
 * DWARF or libthread_db; have_* say which are known) and the wakeup
 * threshold. */
const volatile __u64 off_result = 0, off_joinid = 0, off_start_routine = 0, off_arg = 0,
		     off_cancelhandling = 0;
const volatile __u32 have_result = 0, have_joinid = 0, have_start_routine = 0, have_arg = 0,
		     have_cancelhandling = 0;
/* glibc's EXITING_BITMASK in cancelhandling: set when the thread began to
 * unwind (pthread_exit, cancellation), and only later on the way out of a
 * start routine that returned. And CANCELED_BITMASK: set by pthread_cancel
 * (2.34 on, with CANCELING): an unwinding thread without it is leaving
 * through pthread_exit, whether or not its call was seen (it may have come
 * before the probes were in). Set by the loader (ptw_glibc.h). */
const volatile __u32 exiting_mask = 0, canceled_mask = 0;
const volatile __u64 wake_bytes = 256 * 1024;
/* -f with a link per child (measuring only): a fork wakes the reader. */
const volatile __u32 wake_on_fork = 0;
/* --trace: caught signals' deliveries are recorded (ptw_signal) */
const volatile __u32 trace_signals = 0;

struct {
	__uint(type, BPF_MAP_TYPE_RINGBUF);
	__uint(max_entries, 8 * 1024 * 1024); /* user space may change it */
} rb SEC(".maps");

/* The processes watched. Sized by user space (-f: as many processes as
 * the machine can have at once); allocated as they come (no_prealloc:
 * only the buckets are paid for up front). */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 4096); /* user space may change it */
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__type(key, __u32); /* tgid */
	__type(value, struct ptwk_watch);
} watched SEC(".maps");

/* pthread_create calls in progress, by the creating tid: what the clone
 * that follows does not say. */
struct pending_create {
	__u64 routine, arg, site;
	__u32 attr_detached; /* 0, 1; 2 unknown */
	__u32 site_known;
};

struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, 16384);
	__type(key, __u32);
	__type(value, struct pending_create);
} pending SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, PTWK_STAT_N);
	__type(key, __u32);
	__type(value, __u64);
} stats SEC(".maps");

/*
 * count, lost, send, raw_clone_fn and pd_pthread are global functions
 * (__noinline, not static): the verifier checks each once, on its own,
 * instead of at every call site in every state that reaches it. They
 * were nearly a third of what it walked at the start-up (6,353 instructions
 * processed over nine programs, 4,394 with these and exec_entry's loop),
 * for a call instruction each at run time.
 */
__noinline int count(__u32 which)
{
	__u64 *v = bpf_map_lookup_elem(&stats, &which);
	if (v)
		*v += 1;
	return 0;
}

/* Records the full ring refused, by kind: the loss is said with what it
 * was (so many thread creations, frame entries, ...). */
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, PTWK_LOCK_KIND_END);
	__type(key, __u32);
	__type(value, __u64);
} lost_kinds SEC(".maps");

__noinline int lost(__u32 kind)
{
	count(PTWK_STAT_LOST);
	__u64 *v = bpf_map_lookup_elem(&lost_kinds, &kind);
	if (v)
		*v += 1;
	return 0;
}

/* This record takes the ring past wake_bytes: wake the reader once, not at
 * every record while it is past (a reader slow to be scheduled would be
 * woken tens of thousands of times, each a cost to the thread that writes). */
static __always_inline bool crosses_wake(__u64 size)
{
	__u64 avail = bpf_ringbuf_query(&rb, BPF_RB_AVAIL_DATA);
	return avail < wake_bytes && avail + size + 8 >= wake_bytes; /* 8: its header */
}

__noinline int send(struct ptwk_record *r, bool wake)
{
	if (!r)
		return -1;
	__u64 flags = BPF_RB_NO_WAKEUP;
	if (wake || crosses_wake(sizeof(*r)))
		flags = BPF_RB_FORCE_WAKEUP;
	if (bpf_ringbuf_output(&rb, r, sizeof(*r), flags) < 0) {
		lost(r->kind);
		return -1;
	}
	count(PTWK_STAT_SENT);
	if (flags == BPF_RB_FORCE_WAKEUP)
		count(PTWK_STAT_WAKEUPS);
	return 0;
}

static __always_inline bool read_user_u64(__u64 addr, __u64 *ret)
{
	if (bpf_probe_read_user(ret, sizeof(*ret), (const void *)addr) == 0)
		return true;
	count(PTWK_STAT_READ_FAIL);
	return false;
}

/*
 * Pids as ptwatch sees them. The kernel's own (task->pid,
 * bpf_get_current_pid_tgid) are the initial namespace's; ptwatch run in a
 * PID namespace of its own (every container) knows its namespace's, and
 * writes those in the watched map. Then (pidns_on, set by user space with
 * the namespace's nsfs device and inode) every pid is taken in that
 * namespace, and a task not seen there is no one's (0). Outside one, the
 * kernel's pids, unchanged.
 */
const volatile __u32 pidns_on = 0;
const volatile __u64 pidns_dev = 0, pidns_ino = 0;
/* The namespace's level (user space cannot tell it: NSpid counts from the
 * namespace that mounted its /proc), found at the first pid translated. */
__u32 pidns_level = 0;
#define PTWK_MAX_PID_NS_LEVEL 32

/* The current task's (tgid << 32 | tid), 0 if it is not in our namespace. */
static __always_inline __u64 current_id(void)
{
	if (!pidns_on)
		return bpf_get_current_pid_tgid();
	struct bpf_pidns_info ns = {};
	if (bpf_get_ns_current_pid_tgid(pidns_dev, pidns_ino, &ns, sizeof(ns)))
		return 0;
	return ((__u64)ns.tgid << 32) | ns.pid;
}

/* pid p's number at level i, if that level is our namespace's. */
static __always_inline bool pid_at(struct pid *p, __u32 i, __u32 *ret)
{
	struct upid up;
	if (bpf_probe_read_kernel(&up, sizeof(up),
				  (const void *)((unsigned long)p +
						 bpf_core_field_offset(struct pid, numbers) +
						 i * sizeof(struct upid))) ||
	    BPF_CORE_READ(up.ns, ns.inum) != pidns_ino)
		return false;
	*ret = (__u32)up.nr;
	return true;
}

/* The number of pid p in our namespace, 0 if it has none there. */
static __always_inline __u32 pid_in_ns(struct pid *p)
{
	if (!p)
		return 0;
	__u32 deepest = BPF_CORE_READ(p, level), nr = 0, level = pidns_level;
	if (level)
		return level <= deepest && pid_at(p, level, &nr) ? nr : 0;
	for (__u32 i = 1; i < PTWK_MAX_PID_NS_LEVEL && i <= deepest; i++)
		if (pid_at(p, i, &nr)) {
			pidns_level = i;
			return nr;
		}
	return 0;
}

/* Task t's tid as it sees it, in its own PID namespace: what glibc keeps
 * in its struct pthread (0: unknown). */
static __always_inline __s32 task_own_tid(struct task_struct *t)
{
	struct pid *p = BPF_CORE_READ(t, thread_pid);
	struct upid up;
	if (!p)
		return 0;
	__u32 level = BPF_CORE_READ(p, level);
	if (level >= PTWK_MAX_PID_NS_LEVEL ||
	    bpf_probe_read_kernel(&up, sizeof(up),
				  (const void *)((unsigned long)p +
						 bpf_core_field_offset(struct pid, numbers) +
						 level * sizeof(struct upid))))
		return 0;
	return up.nr;
}

/* Task t's tid and tgid as ptwatch sees them. */
static __always_inline __u32 task_tid(struct task_struct *t)
{
	return pidns_on ? pid_in_ns(BPF_CORE_READ(t, thread_pid)) : (__u32)BPF_CORE_READ(t, pid);
}

static __always_inline __u32 task_tgid(struct task_struct *t)
{
	return pidns_on ? pid_in_ns(BPF_CORE_READ(t, group_leader, thread_pid))
			: (__u32)BPF_CORE_READ(t, tgid);
}

/* In a namespace, the tid each thread of a watched process had in it,
 * by its tid in the initial one: what the exec tracepoint's old_pid (the
 * initial namespace's, of a thread gone with its exec) was. */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 65536); /* user space may change it (one per live thread) */
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__type(key, __u32);
	__type(value, __u32);
} ns_tids SEC(".maps");

/* -f: the threads pd_pthread made pthreads (their pthread_create unseen),
 * until their exit: each one's end is read at its exit tracepoint too, in
 * case it passed the probe at __call_tls_dtors before its process's links
 * were in (the converter keeps the first end it gets). */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 4096); /* user space sets it (one per live thread) */
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__type(key, __u32);
	__type(value, __u8);
} gap_tids SEC(".maps");

/* Task t's innermost pending uretprobe returns into rets, max at most (a
 * constant): the stack slot whose return address the kernel replaced with
 * its trampoline, and the original address. Returns how many (0 where the
 * kernel's types have none). For the lock records and the task iterator:
 * user space unwinds past the trampoline with them. */
static __always_inline __u32 pending_returns(struct task_struct *t, __u64 rets[][2], __u32 max)
{
	__u32 n = 0;
	if (!bpf_core_field_exists(t->utask) ||
	    !bpf_core_field_exists(((struct return_instance *)0)->orig_ret_vaddr))
		return 0;
	struct return_instance *ri = BPF_CORE_READ(t, utask, return_instances);
	for (__u32 i = 0; i < max && ri; i++) {
		rets[i][0] = BPF_CORE_READ(ri, stack);
		rets[i][1] = BPF_CORE_READ(ri, orig_ret_vaddr);
		n = i + 1;
		ri = BPF_CORE_READ(ri, next);
	}
	return n;
}

static __always_inline void begin(struct ptwk_record *r, __u32 kind, __u64 id)
{
	r->kind = kind;
	r->tid = (__u32)id;
	r->tgid = id >> 32;
	r->ns = bpf_ktime_get_ns();
}

/* The current thread's struct pthread: its fs base. */
static __always_inline __u64 current_pd(void)
{
	struct task_struct *t = (struct task_struct *)bpf_get_current_task();
	return BPF_CORE_READ(t, thread.fsbase);
}

#include "ptw_locks.bpf.h"

/* Every entry probe (the cookie says which). */
SEC("uprobe")
int ptw_entry(struct pt_regs *ctx)
{
	__u64 id = current_id();
	__u32 tgid = id >> 32, tid = (__u32)id;
	if (!bpf_map_lookup_elem(&watched, &tgid))
		return 0;
	__u32 kind = (__u32)bpf_get_attach_cookie(ctx);
	if (kind >= PTWK_LOCK_FIRST)
		return ptw_lock_entry(ctx, kind, id);
	if (kind == PTWK_CREATE_CALL) {
		/* pthread_create(thread, attr, start, arg): the call site is
		 * the return address on top of the stack; the attribute's
		 * flags (an int after sched_param and schedpolicy) hold the
		 * detach state (glibc 2.x). */
		struct pending_create p = { .routine = ctx->dx,
					    .arg = ctx->cx,
					    .attr_detached = 0 };
		p.site_known = read_user_u64(ctx->sp, &p.site);
		if (ctx->si) {
			__s32 flags;
			if (bpf_probe_read_user(&flags, sizeof(flags), (const void *)(ctx->si + 8)))
				p.attr_detached = 2;
			else
				p.attr_detached = flags & 1;
		}
		bpf_map_update_elem(&pending, &tid, &p, BPF_ANY);
		return 0;
	}
	if ((kind == PTWK_EXIT_FN || kind == PTWK_MAIN) && tid != tgid)
		return 0; /* only the main thread's exit() can be main's return */
	struct ptwk_record r = {};
	begin(&r, kind, id);
	if (kind == PTWK_EXIT_FN) {
		r.a = ctx->di;
		read_user_u64(ctx->sp, &r.b);
	} else if (kind == PTWK_MAIN) {
		r.a = ctx->di; /* main */
		r.b = current_pd();
		r.c = ctx->ip; /* where libc calls main from: main returns into it */
	} else if (kind == PTWK_DEATH) {
		__u64 pd = current_pd(), v;
		if (have_result && read_user_u64(pd + off_result, &r.a))
			r.f |= PTWK_F_RESULT_KNOWN;
		__u32 ch;
		if (have_cancelhandling &&
		    bpf_probe_read_user(&ch, sizeof(ch), (const void *)(pd + off_cancelhandling)) ==
			    0) {
			r.f |= PTWK_F_UNWIND_KNOWN;
			r.b = (ch & exiting_mask) != 0;
			if (ch & canceled_mask)
				r.f |= PTWK_F_CANCELED;
		}
		r.c = pd;
		(void)v;
	} else {
		r.a = ctx->di; /* start_thread's pd, pthread_exit's value, the pthread_t */
		/* start_thread: what it will run, for a thread whose
		 * pthread_create came before the probes (an attach) */
		if (kind == PTWK_START && have_start_routine &&
		    read_user_u64(r.a + off_start_routine, &r.c))
			r.f |= PTWK_F_ROUTINE_KNOWN;
		if (kind == PTWK_START && have_arg && read_user_u64(r.a + off_arg, &r.d))
			r.f |= PTWK_F_ARG_KNOWN;
	}
	/* main() is about to run: every library it needs is mapped, and user
	 * space had better name them now, while the process lives. */
	send(&r, kind == PTWK_MAIN);
	if (kind == PTWK_JOIN)
		ptw_lock_join(ctx, id); /* --locks: after the join's own record */
	return 0;
}

/* Every return probe. */
SEC("uretprobe")
int ptw_return(struct pt_regs *ctx)
{
	__u64 id = current_id();
	__u32 tgid = id >> 32;
	if (!bpf_map_lookup_elem(&watched, &tgid))
		return 0;
	struct ptwk_record r = {};
	begin(&r, (__u32)bpf_get_attach_cookie(ctx), id);
	r.a = ctx->ax;
	r.b = ctx->sp; /* --locks: where a slow path returned */
	send(&r, false);
	return 0;
}

#include "ptw_underway.bpf.h"
#include "ptw_frames.bpf.h"
#include "ptw_start.bpf.h"
#include "ptw_modules.bpf.h"

/*
 * A thread made by a clone() system call, not pthread_create: what glibc's
 * clone() wrapper left at the top of the child's stack (the syscall's
 * rsi) for the child to pop and call, its function and argument (c, d),
 * with the creator's ip (e) by which user space checks that the wrapper
 * made the call (a clone made any other way leaves nothing there); flag
 * PTWK_F_CLONE_READ. As the ptrace path reads them at its clone stop.
 */
__noinline int raw_clone_fn(struct ptwk_record *r)
{
	if (!r)
		return 0;
	long regs = bpf_task_pt_regs(bpf_get_current_task_btf());
	struct pt_regs pr;
	__u64 top[2];
	if (!regs || bpf_probe_read_kernel(&pr, sizeof(pr), (const void *)regs) ||
	    pr.orig_ax != 56 /* __NR_clone */ || !pr.si ||
	    bpf_probe_read_user(top, sizeof(top), (const void *)pr.si) || !top[0])
		return 0;
	r->c = top[0];
	r->d = top[1];
	r->e = pr.ip;
	r->f |= PTWK_F_CLONE_READ;
	return 0;
}

/*
 * A thread whose pthread_create call no probe saw, in a process whose
 * probes are not in (a followed child's first moments) or cannot see it
 * (ptwk_watch.unlinked, blind). glibc's pthread_create made it with clone3
 * (or clone) whose tls is the new struct pthread and whose parent_tid is
 * that struct's tid (where the kernel writes the new tid): a clone that
 * says both, at the offset of the layout the offsets are for, was made
 * by that pthread_create, which had stored the start routine and argument
 * in the struct before (flags PTWK_F_PTHREAD and PTWK_F_GAP: no call
 * site, no attribute). Anything else stays a clone.
 */
__noinline int pd_pthread(struct ptwk_record *r, __u64 pd)
{
	if (!r)
		return 0;
	long regs = bpf_task_pt_regs(bpf_get_current_task_btf());
	struct pt_regs pr;
	__u64 tls, parent_tid;
	if (!regs || !have_pd_tid || bpf_probe_read_kernel(&pr, sizeof(pr), (const void *)regs))
		return 0;
	if (pr.orig_ax == 435) { /* clone3(struct clone_args *, size) */
		__u64 args[8];
		if (pr.si < sizeof(args) ||
		    bpf_probe_read_user(args, sizeof(args), (const void *)pr.di))
			return 0;
		parent_tid = args[3];
		tls = args[7];
	} else if (pr.orig_ax == 56) { /* clone(flags, stack, parent_tid, child_tid, tls) */
		parent_tid = pr.dx;
		tls = pr.r8;
	} else {
		return 0;
	}
	__u64 routine;
	if (tls != pd || parent_tid != pd + off_pd_tid ||
	    !read_user_u64(pd + off_start_routine, &routine) || !routine)
		return 0;
	r->f |= PTWK_F_PTHREAD | PTWK_F_GAP;
	r->c = routine;
	__u32 tid = (__u32)r->a;
	__u8 one = 1;
	if (bpf_map_update_elem(&gap_tids, &tid, &one, BPF_ANY) < 0)
		count(PTWK_STAT_GAP_TIDS_FULL);
	if (!have_arg || !read_user_u64(pd + off_arg, &r->d))
		r->d = 0;
	return 0;
}

/* A task was made: a thread of a watched process (its creation), or a
 * process it forked. Runs in the parent before the child can run, so the
 * creation is in the ring before anything the new thread does. */
SEC("raw_tp/sched_process_fork")
int ptw_fork(struct bpf_raw_tracepoint_args *ctx)
{
	struct task_struct *parent = (struct task_struct *)ctx->args[0];
	struct task_struct *child = (struct task_struct *)ctx->args[1];
	__u32 ptgid = task_tgid(parent);
	struct ptwk_watch *w = bpf_map_lookup_elem(&watched, &ptgid);
	if (!w)
		return 0;
	__u32 ptid = task_tid(parent);
	__u32 ctgid = task_tgid(child);
	struct ptwk_record r = {};
	begin(&r, PTWK_CREATE, ((__u64)ptgid << 32) | ptid);
	r.a = task_tid(child);
	if (pidns_on) {
		__u32 global = (__u32)BPF_CORE_READ(child, pid), nr = (__u32)r.a;
		if (bpf_map_update_elem(&ns_tids, &global, &nr, BPF_ANY) < 0)
			count(PTWK_STAT_NS_TIDS_FULL);
	}
	__u64 pd = BPF_CORE_READ(child, thread.fsbase);
	if (ctgid != ptgid) {
		r.kind = PTWK_FORK;
		if (w->follow_forks) {
			/* -f: watched before it can run (this runs in the
			 * parent, before the child is first woken), so that
			 * nothing it does, a thread it makes at once, is missed. */
			struct ptwk_watch cw = *w;
			cw.root = 0;
			cw.since = r.ns;
			cw.unlinked = wake_on_fork; /* (a link per child: not in yet) */
			/* (blind: its parent's image, as its parent) */
			if (bpf_map_update_elem(&watched, &ctgid, &cw, BPF_ANY) < 0) {
				/* (full: said, the child let go) */
				count(PTWK_STAT_WATCH_FULL);
				r.f |= PTWK_F_UNWATCHED;
			}
			/* Its one thread is a copy of the forking one: the same
			 * struct pthread, at the same address. */
			r.b = pd;
			__u64 joinid;
			if (have_joinid && pd && read_user_u64(pd + off_joinid, &joinid)) {
				r.f |= PTWK_F_JOINID_KNOWN;
				if (joinid == pd)
					r.f |= PTWK_F_DETACHED;
			}
			if (BPF_CORE_READ(child, mm) == BPF_CORE_READ(parent, mm))
				r.f |= PTWK_F_SHARED_VM;
			bpf_get_current_comm(r.comm, sizeof(r.comm));
		}
		send(&r, wake_on_fork != 0);
		return 0;
	}
	r.b = pd;
	struct pending_create *p = bpf_map_lookup_elem(&pending, &ptid);
	if (p) {
		__u64 routine = p->routine;
		/* The clone of that pthread_create call (and not a raw clone
		 * made after a failed one) if the new struct pthread says so. */
		if (!have_start_routine || !pd ||
		    (read_user_u64(pd + off_start_routine, &routine) && routine == p->routine)) {
			r.f |= PTWK_F_PTHREAD;
			r.c = p->routine;
			r.d = p->arg;
			r.e = p->site;
			if (p->site_known)
				r.f |= PTWK_F_SITE_KNOWN;
			if (p->attr_detached < 2) {
				r.f |= PTWK_F_JOINID_KNOWN;
				if (p->attr_detached)
					r.f |= PTWK_F_DETACHED;
			}
		}
		bpf_map_delete_elem(&pending, &ptid);
	} else if ((w->unlinked || w->blind || (!w->root && wake_on_fork)) && have_start_routine &&
		   pd) {
		/* (a followed child's: its pthread_create may also have begun
		 * before its links were in, and its clone come after) */
		pd_pthread(&r, pd);
	}
	if (!(r.f & PTWK_F_PTHREAD))
		raw_clone_fn(&r);
	if ((r.f & PTWK_F_PTHREAD) && have_joinid && pd) {
		__u64 joinid;
		if (read_user_u64(pd + off_joinid, &joinid)) {
			r.f |= PTWK_F_JOINID_KNOWN;
			r.f &= ~PTWK_F_DETACHED;
			if (joinid == pd)
				r.f |= PTWK_F_DETACHED;
		}
	}
	send(&r, false);
	return 0;
}

/* What task t cost in CPU, as /proc's schedstat and status say it (the
 * tracer reads those at a thread's last stop): c, d, e (PTWK_F_CPU). */
static __always_inline void task_cpu_into(struct task_struct *t, struct ptwk_record *r)
{
	r->c = BPF_CORE_READ(t, se.sum_exec_runtime);
	if (bpf_core_field_exists(t->sched_info))
		r->d = BPF_CORE_READ(t, sched_info.run_delay);
	__u64 v = BPF_CORE_READ(t, nvcsw), iv = BPF_CORE_READ(t, nivcsw);
	r->e = (v > 0xffffffffu ? 0xffffffffu : v) << 32 | (iv > 0xffffffffu ? 0xffffffffu : iv);
	r->f |= PTWK_F_CPU;
}

/*
 * Every context switch on the machine: a dead task (TASK_DEAD, 0x80) of a
 * watched process leaving its CPU for the last time, once the scheduler
 * has accounted its last run (at its exit tracepoint the running slice is
 * not counted yet: up to a tick, 4 ms at HZ=250). Anything else returns
 * at once.
 */
SEC("raw_tp/sched_switch")
int ptw_switch(struct bpf_raw_tracepoint_args *ctx)
{
	/* (bool preempt, struct task_struct *prev, struct task_struct *next,
	 * unsigned int prev_state: 5.18 and later; before, this program does
	 * not attach and the exit tracepoint's figure stays). The state from
	 * the arguments: no read of the task for any other switch. */
	if (!(ctx->args[3] & 0x80))
		return 0;
	struct task_struct *t = (struct task_struct *)ctx->args[1];
	__u32 tgid = task_tgid(t);
	if (!bpf_map_lookup_elem(&watched, &tgid))
		return 0;
	struct ptwk_record r = {};
	begin(&r, PTWK_CPU, ((__u64)tgid << 32) | task_tid(t));
	task_cpu_into(t, &r);
	send(&r, false);
	return 0;
}

/*
 * A thread of a process whose probes are not in yet (-f: a child's first
 * moments), or never will be (its image maps another libc than the one
 * probed), leaving by its own exit call, start_thread's: what its struct
 * pthread says of its end, as the probe at __call_tls_dtors would (DEATH,
 * PTWK_F_GAP). Only if it is a struct pthread of the layout the offsets
 * are for: its tid where that layout keeps it (the kernel clears it only
 * after this tracepoint). Whether the thread returned or called
 * pthread_exit is not kept there (EXITING is set for both by now): only a
 * cancellation (the canceled bit and PTHREAD_CANCELED) says how.
 */
static __always_inline void gap_death(__u32 tgid, __u32 tid)
{
	__u64 pd = current_pd();
	__s32 pd_tid;
	if (!pd || !have_pd_tid || !have_result ||
	    bpf_probe_read_user(&pd_tid, sizeof(pd_tid), (const void *)(pd + off_pd_tid)) ||
	    pd_tid != task_own_tid((struct task_struct *)bpf_get_current_task()))
		return;
	struct ptwk_record d = {};
	begin(&d, PTWK_DEATH, ((__u64)tgid << 32) | tid);
	d.f |= PTWK_F_GAP;
	d.c = pd;
	if (!read_user_u64(pd + off_result, &d.a))
		return;
	d.f |= PTWK_F_RESULT_KNOWN;
	__u32 ch;
	if (have_cancelhandling && d.a == (__u64)-1 &&
	    bpf_probe_read_user(&ch, sizeof(ch), (const void *)(pd + off_cancelhandling)) == 0 &&
	    (ch & canceled_mask)) {
		d.f |= PTWK_F_UNWIND_KNOWN | PTWK_F_CANCELED;
		d.b = 1;
	}
	send(&d, false);
}

SEC("raw_tp/sched_process_exit")
int ptw_exit(struct bpf_raw_tracepoint_args *ctx)
{
	struct task_struct *t = (struct task_struct *)ctx->args[0];
	__u32 tgid = task_tgid(t);
	if (!bpf_map_lookup_elem(&watched, &tgid))
		return 0;
	__u32 tid = task_tid(t);
	if (pidns_on) {
		__u32 global = (__u32)BPF_CORE_READ(t, pid);
		bpf_map_delete_elem(&ns_tids, &global);
	}
	struct ptwk_record r = {};
	begin(&r, PTWK_EXIT, ((__u64)tgid << 32) | tid);
	r.a = (__u32)BPF_CORE_READ(t, exit_code);
	struct signal_struct *sig = BPF_CORE_READ(t, signal);
	__u32 flags = BPF_CORE_READ(sig, flags);
	struct task_struct *exec_task = NULL;
	if (bpf_core_field_exists(sig->group_exec_task))
		exec_task = BPF_CORE_READ(sig, group_exec_task);
	if ((flags & SIGNAL_GROUP_EXIT) || exec_task) {
		r.f |= PTWK_F_GROUP_EXIT;
		r.b = (__u32)BPF_CORE_READ(sig, group_exit_code);
	}
	/* live was decremented before this tracepoint: 0 for the last one. */
	bool last = BPF_CORE_READ(sig, live.counter) == 0;
	/* Only the target's end wakes the reader at once: a followed child's
	 * is read with the next batch (a wakeup per fork+exit cost more than
	 * the rest of following it). */
	struct ptwk_watch *w = bpf_map_lookup_elem(&watched, &tgid);
	bool wake = last && w && w->root;
	/* (the process stays watched: the others' exit tracepoints may run
	 * after this one, which is not the last to leave the kernel, only
	 * the one that found none left in the group; user space lets it go
	 * once it has converted its end) */
	if (last)
		r.f |= PTWK_F_GROUP_DEAD;
	/* Which system call brought it here (the user registers' orig_ax):
	 * its own exit, its own exit_group, or neither (a signal, another
	 * thread's exit_group or exec took it down). */
	long regs = bpf_task_pt_regs(bpf_get_current_task_btf());
	__u64 nr = 0;
	bool exit_call = false;
	if (regs &&
	    bpf_probe_read_kernel(
		    &nr, sizeof(nr),
		    (const void *)(regs + __builtin_offsetof(struct pt_regs, orig_ax))) == 0) {
		exit_call = nr == 60; /* __NR_exit */
		/* (the flags computed, not branched on: the verifier has fewer
		 * states to tell apart) */
		r.f |= PTWK_F_HOW_KNOWN | (exit_call ? PTWK_F_EXIT_CALL : 0) |
		       (nr == 231 ? PTWK_F_EXIT_GROUP_CALL : 0); /* __NR_exit_group */
	}
	if (w && w->anchor && tid == w->anchor)
		w->blind = 1; /* (its probes' task: they stop firing for the others) */
	bool gap_made = bpf_map_delete_elem(&gap_tids, &tid) == 0;
	if (w && (w->unlinked || w->blind || gap_made) && tid != tgid && exit_call)
		gap_death(tgid, tid);
	/* What it cost in CPU so far (as accounted at the scheduler's last
	 * look at it: its final figure comes with PTWK_CPU) */
	task_cpu_into(t, &r);
	bpf_get_current_comm(r.comm, sizeof(r.comm));
	bpf_map_delete_elem(&pending, &tid);
	send(&r, wake);
	return 0;
}

/* As the tracer reports a delivery: a signal that kills by default. Not
 * SIGKILL, which the kernel gives every thread of a process going down;
 * not glibc's SIGCANCEL and SIGSETXID, its own, with handlers. */
static __always_inline bool kills_by_default(int sig)
{
	switch (sig) {
	case 9:	 /* SIGKILL */
	case 17: /* SIGCHLD */
	case 18: /* SIGCONT */
	case 19: /* SIGSTOP */
	case 20: /* SIGTSTP */
	case 21: /* SIGTTIN */
	case 22: /* SIGTTOU */
	case 23: /* SIGURG */
	case 28: /* SIGWINCH */
	case 32:
	case 33:
		return false;
	}
	return true;
}

/*
 * A signal is about to be delivered to a thread of a watched process
 * (signal_deliver fires in get_signal() for every action). A caught one,
 * with --trace: its handler's frames (frame_signal). One that kills by
 * default, caught or not (as the tracer reports it from its
 * signal-delivery stop: the event line "signal SIGINT"): if the process
 * dies of it, this thread is the one it killed (a crash's faulting
 * thread), the others went down with it. Not SIGKILL: the kernel gives it
 * to every thread of a process going down. An ignored signal is dropped
 * when sent, unless a tracer asked for it: none comes here.
 */
SEC("raw_tp/signal_deliver")
int ptw_signal(struct bpf_raw_tracepoint_args *ctx)
{
	__u64 id = current_id();
	__u32 tgid = id >> 32;
	if (!bpf_map_lookup_elem(&watched, &tgid))
		return 0;
	int sig = (int)ctx->args[0];
	struct k_sigaction *ka = (struct k_sigaction *)ctx->args[2];
	__u64 handler = ka ? (__u64)BPF_CORE_READ(ka, sa.sa_handler) : 1;
	if (handler > 1 && trace_signals) /* (1: SIG_IGN) */
		frame_signal(id, sig);
	if (handler == 1 || !kills_by_default(sig))
		return 0;
	struct ptwk_record r = {};
	begin(&r, PTWK_FATAL_SIGNAL, id);
	r.a = (__u32)sig;
	/* what kind (kernel_siginfo: si_signo, si_errno, si_code): a
	 * terminal's (SI_KERNEL) owes ptwatch its copy; for SIGTRAP, an int3's
	 * (the warning that says whether the trap was a probe's) */
	int code;
	if (ctx->args[1] &&
	    bpf_probe_read_kernel(&code, sizeof(code), (const void *)(ctx->args[1] + 8)) == 0) {
		r.c = (__u64)(__s64)code;
		r.f |= PTWK_F_CODE;
	}
	if (sig == 5 && (r.f & PTWK_F_CODE)) { /* SIGTRAP: where */
		long regs = bpf_task_pt_regs(bpf_get_current_task_btf());
		if (regs &&
		    bpf_probe_read_kernel(
			    &r.b, sizeof(r.b),
			    (const void *)(regs + __builtin_offsetof(struct pt_regs, ip))) == 0)
			r.f |= PTWK_F_READ;
	}
	send(&r, false);
	return 0;
}

/*
 * A signal sent to a thread of a watched process that never reaches
 * signal_deliver, where the tracer still sees it delivered (a traced
 * process is spared both shortcuts):
 * - one that kills by default without a core dump (SIGINT, SIGTERM, ...),
 *   not caught, is turned into a group exit as it is sent; the process's
 *   group_exit_code is that signal then, and the thread it was sent to
 *   the one it killed;
 * - one the process ignores (SIG_IGN) is dropped as it is sent.
 */
SEC("raw_tp/signal_generate")
int ptw_signal_sent(struct bpf_raw_tracepoint_args *ctx)
{
	struct task_struct *t = (struct task_struct *)ctx->args[2];
	int sig = (int)ctx->args[0];
	__u64 result = ctx->args[4]; /* 0 TRACE_SIGNAL_DELIVERED, 1 TRACE_SIGNAL_IGNORED */
	if (!t || result > 1 || !kills_by_default(sig))
		return 0;
	__u32 tgid = task_tgid(t);
	if (!bpf_map_lookup_elem(&watched, &tgid))
		return 0;
	struct signal_struct *ss = BPF_CORE_READ(t, signal);
	if (result == 0 && (!(BPF_CORE_READ(ss, flags) & 0x4 /* SIGNAL_GROUP_EXIT */) ||
			    BPF_CORE_READ(ss, group_exit_code) != sig))
		return 0;
	struct ptwk_record r = {};
	begin(&r, PTWK_FATAL_SIGNAL, ((__u64)tgid << 32) | task_tid(t));
	r.a = (__u32)sig;
	/* its si_code: the special infos first (SEND_SIG_NOINFO: a kill(),
	 * SEND_SIG_PRIV: the kernel's own, a terminal's ^C) */
	__u64 info = ctx->args[1];
	int code = info == 0 ? 0 /* SI_USER */ : 0x80 /* SI_KERNEL */;
	if (info <= 1 ||
	    bpf_probe_read_kernel(&code, sizeof(code), (const void *)(info + 8)) == 0) {
		r.c = (__u64)(__s64)code;
		r.f |= PTWK_F_CODE;
	}
	send(&r, false);
	return 0;
}

/* The new image's entry point (auxv's AT_ENTRY, as the exec left it): a
 * program's load bias, from its file, for a process gone before its
 * memory map could be read. 0: not found. */
struct ptw_auxv_scan {
	unsigned long *auxv;
	__u64 entry;
};

static long ptw_auxv_step(__u32 i, void *arg)
{
	struct ptw_auxv_scan *s = arg;
	unsigned long kv[2];
	if (bpf_probe_read_kernel(kv, sizeof(kv), s->auxv + 2 * i) < 0 || kv[0] == 0)
		return 1; /* (AT_NULL) */
	if (kv[0] != 9)	  /* AT_ENTRY */
		return 0;
	s->entry = kv[1];
	return 1;
}

/* (a bpf_loop: its step verified once, not 32 times over) */
static __always_inline __u64 exec_entry(struct task_struct *t)
{
	struct mm_struct *mm = BPF_CORE_READ(t, mm);
	if (!mm)
		return 0;
	struct ptw_auxv_scan s = {
		(unsigned long *)__builtin_preserve_access_index(&mm->saved_auxv), 0
	};
	__u32 pairs = bpf_core_field_size(mm->saved_auxv) / (2 * sizeof(unsigned long));
	bpf_loop(pairs < 32 ? pairs : 32, ptw_auxv_step, &s, 0);
	return s.entry;
}

SEC("raw_tp/sched_process_exec")
int ptw_exec(struct bpf_raw_tracepoint_args *ctx)
{
	struct task_struct *t = (struct task_struct *)ctx->args[0];
	__u32 tgid = task_tgid(t);
	if (!bpf_map_lookup_elem(&watched, &tgid))
		return 0;
	struct ptwk_exec_record x = {};
	__u32 tid = task_tid(t);
	begin(&x.r, PTWK_EXEC, ((__u64)tgid << 32) | tid);
	x.r.a = (__u32)ctx->args[1]; /* old_pid (the initial namespace's) */
	if (pidns_on) {
		/* its tid in ours: the main thread's (now the exec'ing one's),
		 * or the one it had when it was made (0: unknown) */
		__u32 old = (__u32)x.r.a, *nr = bpf_map_lookup_elem(&ns_tids, &old);
		x.r.a = old == (__u32)BPF_CORE_READ(t, pid) ? tid : nr ? *nr : 0;
	}
	bpf_get_current_comm(x.r.comm, sizeof(x.r.comm));
	struct linux_binprm *bprm = (struct linux_binprm *)ctx->args[2];
	const char *filename = BPF_CORE_READ(bprm, filename);
	if (filename)
		bpf_probe_read_kernel_str(x.path, sizeof(x.path), filename);
	x.r.b = exec_entry(t);
	if (bpf_ringbuf_output(&rb, &x, sizeof(x), BPF_RB_FORCE_WAKEUP) < 0) {
		lost(PTWK_EXEC);
		return 0;
	}
	count(PTWK_STAT_SENT);
	count(PTWK_STAT_WAKEUPS);
	exec_args(((__u64)tgid << 32) | tid); /* ptw_modules.bpf.h */
	return 0;
}
