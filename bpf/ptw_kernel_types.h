/* SPDX-License-Identifier: MIT */
/*
 * The few kernel types the BPF programs read, written by hand instead of a
 * vmlinux.h generated from one kernel: only the members used, each struct
 * marked preserve_access_index so that libbpf relocates every access (CO-RE)
 * against the running kernel's BTF (/sys/kernel/btf/vmlinux). Member names
 * must be the kernel's; order, padding and the members left out do not
 * matter. Plus the BPF UAPI constants used, so that nothing here needs the
 * build machine's kernel headers.
 */
#ifndef PTW_KERNEL_TYPES_H
#define PTW_KERNEL_TYPES_H

typedef unsigned char __u8;
typedef unsigned short __u16;
typedef unsigned int __u32;
typedef unsigned long long __u64;
typedef signed char __s8;
typedef short __s16;
typedef int __s32;
typedef long long __s64;
typedef __u16 __be16;
typedef __u32 __be32;
typedef __u32 __wsum;
typedef int pid_t;
typedef _Bool bool;
#define true 1
#define false 0

/* include/uapi/linux/bpf.h */
enum {
	BPF_MAP_TYPE_HASH = 1,
	BPF_MAP_TYPE_ARRAY = 2,
	BPF_MAP_TYPE_PERCPU_ARRAY = 6,
	BPF_MAP_TYPE_LRU_HASH = 9,
	BPF_MAP_TYPE_RINGBUF = 27,
};
enum {
	BPF_F_NO_PREALLOC = 1,
};
enum {
	BPF_ANY = 0,
	BPF_NOEXIST = 1,
};
enum {
	BPF_RB_NO_WAKEUP = 1,
	BPF_RB_FORCE_WAKEUP = 2,
};
enum {
	BPF_RB_AVAIL_DATA = 0,
};

/* The registers of the probed user thread, as the kernel saved them
 * (arch/x86/include/asm/ptrace.h): the program's context, a fixed ABI. */
struct pt_regs {
	unsigned long r15, r14, r13, r12, bp, bx, r11, r10, r9, r8, ax, cx, dx, si, di, orig_ax, ip,
		cs, flags, sp, ss;
};

struct bpf_raw_tracepoint_args {
	__u64 args[0];
};

typedef struct {
	int counter;
} atomic_t;

struct thread_struct {
	unsigned long fsbase; /* x86-64: the thread's TLS, glibc's struct pthread */
} __attribute__((preserve_access_index));

struct signal_struct {
	atomic_t live;			     /* threads not yet in do_exit */
	unsigned int flags;		     /* SIGNAL_GROUP_EXIT, ... */
	int group_exit_code;		     /* exit_group's status, or the fatal signal */
	struct task_struct *group_exec_task; /* 5.16+: exec is killing the others */
} __attribute__((preserve_access_index));

/* exec's auxiliary vector, as kept for /proc/PID/auxv (AT_VECTOR_SIZE
 * longs: type, value pairs up to AT_NULL; its size relocated) */
/* uprobes (linux/uprobes.h; kernel/events/uprobes.c in older kernels): a
 * uretprobe's pending return (the stack slot whose return address the
 * kernel replaced with its trampoline, and the original address), and the
 * page whose first slot is that trampoline. Read only where
 * bpf_core_field_exists says they are there. */
struct return_instance {
	unsigned long stack; /* the sp at the entry: the return address's slot */
	unsigned long orig_ret_vaddr;
	struct return_instance *next;
} __attribute__((preserve_access_index));

struct uprobe_task {
	struct return_instance *return_instances;
} __attribute__((preserve_access_index));

struct xol_area {
	unsigned long vaddr;
} __attribute__((preserve_access_index));

struct uprobes_state {
	struct xol_area *xol_area;
} __attribute__((preserve_access_index));

struct mm_struct {
	unsigned long saved_auxv[56];
	struct uprobes_state uprobes_state;
} __attribute__((preserve_access_index));

/* A task's pid in each namespace it is seen in (include/linux/pid.h):
 * numbers[i] is its number at level i, level its deepest. */
struct ns_common {
	unsigned int inum;
} __attribute__((preserve_access_index));

struct pid_namespace {
	struct ns_common ns;
} __attribute__((preserve_access_index));

struct upid {
	int nr;
	struct pid_namespace *ns;
};

struct pid {
	unsigned int level;
	struct upid numbers[1];
} __attribute__((preserve_access_index));

/* bpf_get_ns_current_pid_tgid's answer */
struct bpf_pidns_info {
	__u32 pid;
	__u32 tgid;
};

/* What a task cost in CPU (its end: PTWK_EXIT's PTWK_F_CPU) */
struct sched_entity {
	unsigned long long sum_exec_runtime;
} __attribute__((preserve_access_index));

struct sched_info {
	unsigned long long run_delay; /* CONFIG_SCHED_INFO */
} __attribute__((preserve_access_index));

struct task_struct {
	struct mm_struct *mm; /* -f: shared with the parent: vfork, clone(CLONE_VM) */
	struct sched_entity se;
	struct sched_info sched_info;
	unsigned long nvcsw, nivcsw;
	pid_t pid;
	pid_t tgid;
	struct pid *thread_pid;
	struct task_struct *group_leader;
	int exit_code;
	struct signal_struct *signal;
	struct thread_struct thread;
	struct uprobe_task *utask;
} __attribute__((preserve_access_index));

/* signal_deliver's action: the handler the signal met */
struct sigaction {
	void *sa_handler; /* SIG_DFL is 0 */
} __attribute__((preserve_access_index));

struct k_sigaction {
	struct sigaction sa;
} __attribute__((preserve_access_index));

struct linux_binprm {
	const char *filename; /* the path given to execve */
} __attribute__((preserve_access_index));

/* include/linux/sched/signal.h */
#define SIGNAL_GROUP_EXIT 0x00000004

#endif
