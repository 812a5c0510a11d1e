/* SPDX-License-Identifier: MIT */
/*
 * Threads' registers without a stop (include/ptw_regs.h), for --snapshot:
 * the task iterator of the kernel path (bpf/ptw_underway.bpf.h) alone,
 * loaded from the same object, reads every thread of a process with the
 * user registers the kernel saved at its last entry (its own while it is
 * off a CPU); a running thread's come from one perf sample of its user
 * registers and stack (a task-clock event: it is sampled as it runs, and
 * its stack copied by the kernel at that moment). And one thread's stack
 * for -f --trace (ptwk_thread_stack): /proc while it sleeps, else the same
 * sample.
 */
#define _GNU_SOURCE
#include "kernel_int.h"

#include <asm/perf_regs.h>
#include <linux/perf_event.h>
#include <poll.h>
#include <sys/mman.h>

#include "ptw_regs.h"
#include "ptw_underway.h"

/* The stack copied with a sample: what the snapshot copies of a stopped
 * thread (a sample must fit in 64 KiB). */
#define SAMPLE_STACK (32 * 1024)
/* Its ring: a page of header, then a power of two of pages with room for
 * the one sample read (its stack and registers: some 33 KiB), which the
 * ring's read position lets the kernel overwrite after. */
#define SAMPLE_PAGES 16
_Static_assert(SAMPLE_PAGES * 4096 >= SAMPLE_STACK + 1024, "a sample fits in the ring");
/* Task clock between samples: a running thread is sampled this soon. */
#define SAMPLE_PERIOD_NS 10000

/* The registers asked of a sample, in the order perf gives them (by
 * number): rax rbx rcx rdx rsi rdi rbp rsp rip flags, r8..r15. */
#define REG(r) (1ull << PERF_REG_X86_##r)
#define SAMPLE_REGS                                                                            \
	(REG(AX) | REG(BX) | REG(CX) | REG(DX) | REG(SI) | REG(DI) | REG(BP) | REG(SP) |      \
	 REG(IP) | REG(FLAGS) | REG(R8) | REG(R9) | REG(R10) | REG(R11) | REG(R12) | REG(R13) | \
	 REG(R14) | REG(R15))

struct reader {
	struct ptw_regs_reader r;
	pid_t pid;
	struct ptw_kernel_bpf *skel;
};

static int read_tasks(struct ptw_regs_reader *rr, struct ptw_task_regs **ret)
{
	struct reader *rd = (struct reader *)rr;
	struct ptwk_uw_task *t;
	int n = ptwk_read_tasks(rd->skel->progs.ptw_underway_regs, rd->pid, &t);
	if (n < 0)
		return n;
	struct ptw_task_regs *v = xcalloc((size_t)n + 1, sizeof(*v));
	for (int i = 0; i < n; i++) {
		v[i] = (struct ptw_task_regs){ .tid = (pid_t)t[i].tid,
					       .on_cpu = t[i].on_cpu != 0,
					       .regs_ok = t[i].regs_ok != 0,
					       .switches = t[i].switches };
		struct user_regs_struct *r = &v[i].regs;
		r->fs_base = t[i].fsbase;
		v[i].nrets = t[i].nrets < PTW_TASK_RETS ? t[i].nrets : PTW_TASK_RETS;
		memcpy(v[i].rets, t[i].rets, v[i].nrets * sizeof(v[i].rets[0]));
		if (!t[i].regs_ok)
			continue;
		ptwk_regs_from_dwarf(t[i].regs, r);
		r->orig_rax = t[i].orig_ax;
		r->eflags = t[i].flags;
	}
	free(t);
	*ret = v;
	return n;
}

/* A thread being sampled: its event and ring. */
struct sampling {
	int fd;
	void *ring;
	size_t ring_len;
};

static int open_sampling(pid_t tid, struct sampling *s)
{
	struct perf_event_attr a = {
		.size = sizeof(a),
		.type = PERF_TYPE_SOFTWARE,
		.config = PERF_COUNT_SW_TASK_CLOCK,
		.sample_period = SAMPLE_PERIOD_NS,
		.sample_type = PERF_SAMPLE_TID | PERF_SAMPLE_REGS_USER | PERF_SAMPLE_STACK_USER,
		.sample_regs_user = SAMPLE_REGS,
		.sample_stack_user = SAMPLE_STACK,
		.wakeup_events = 1,
		.exclude_hv = 1,
	};
	s->fd = (int)syscall(SYS_perf_event_open, &a, tid, -1, -1, PERF_FLAG_FD_CLOEXEC);
	if (s->fd < 0)
		return -errno;
	long page = sysconf(_SC_PAGESIZE);
	s->ring_len = (size_t)page * (1 + SAMPLE_PAGES);
	s->ring = mmap(NULL, s->ring_len, PROT_READ | PROT_WRITE, MAP_SHARED, s->fd, 0);
	if (s->ring == MAP_FAILED) {
		int r = -errno;
		close(s->fd);
		s->fd = -1;
		return r;
	}
	return 0;
}

static void close_sampling(struct sampling *s)
{
	if (s->fd < 0)
		return;
	munmap(s->ring, s->ring_len);
	close(s->fd);
	s->fd = -1;
}

/* Bytes [at, at + len) of the ring's data, which wraps. */
static void ring_copy(const struct perf_event_mmap_page *m, uint64_t at, void *out, size_t len)
{
	const uint8_t *data = (const uint8_t *)m + m->data_offset;
	uint64_t size = m->data_size;
	for (size_t done = 0; done < len;) {
		uint64_t off = (at + done) % size;
		size_t n = len - done < size - off ? len - done : (size_t)(size - off);
		memcpy((uint8_t *)out + done, data + off, n);
		done += n;
	}
}

/* The first sample in s's ring, into out: 1 taken, 0 none yet, -errno. */
static int take_sample(struct sampling *s, struct ptw_thread_sample *out)
{
	struct perf_event_mmap_page *m = s->ring;
	uint64_t head = __atomic_load_n(&m->data_head, __ATOMIC_ACQUIRE), tail = m->data_tail;
	while (tail < head) {
		struct perf_event_header h;
		ring_copy(m, tail, &h, sizeof(h));
		if (h.size < sizeof(h) || tail + h.size > head)
			return -EIO;
		if (h.type != PERF_RECORD_SAMPLE) {
			tail += h.size;
			continue;
		}
		uint8_t *rec = xmalloc(h.size);
		ring_copy(m, tail, rec, h.size);
		tail += h.size;
		__atomic_store_n(&m->data_tail, tail, __ATOMIC_RELEASE);
		/* pid, tid; abi, regs; size, stack, dyn_size */
		size_t at = sizeof(h) + 8, nregs = (size_t)__builtin_popcountll(SAMPLE_REGS);
		uint64_t abi, regs[32], size, dyn = 0;
		int r = 0;
		if (at + 8 > h.size) {
			r = -EIO;
			goto done;
		}
		memcpy(&abi, rec + at, 8);
		at += 8;
		if (abi == PERF_SAMPLE_REGS_ABI_NONE) { /* a kernel thread: none */
			r = -ESRCH;
			goto done;
		}
		if (at + nregs * 8 + 8 > h.size) {
			r = -EIO;
			goto done;
		}
		memcpy(regs, rec + at, nregs * 8);
		at += nregs * 8;
		memcpy(&size, rec + at, 8);
		at += 8;
		if (size && at + size + 8 <= h.size)
			memcpy(&dyn, rec + at + size, 8);
		if (dyn > size)
			dyn = size;
		struct user_regs_struct *u = &out->regs;
		unsigned long long fs_base = u->fs_base; /* (the caller's: not sampled) */
		memset(u, 0, sizeof(*u));
		u->fs_base = fs_base;
		/* in bit order: AX BX CX DX SI DI BP SP IP FLAGS R8..R15 */
		u->rax = regs[0], u->rbx = regs[1], u->rcx = regs[2], u->rdx = regs[3];
		u->rsi = regs[4], u->rdi = regs[5], u->rbp = regs[6], u->rsp = regs[7];
		u->rip = regs[8], u->eflags = regs[9];
		u->r8 = regs[10], u->r9 = regs[11], u->r10 = regs[12], u->r11 = regs[13];
		u->r12 = regs[14], u->r13 = regs[15], u->r14 = regs[16], u->r15 = regs[17];
		u->orig_rax = (unsigned long long)-1;
		out->len = (size_t)dyn;
		out->stack = xmalloc(out->len ? out->len : 1);
		memcpy(out->stack, rec + at, out->len);
		r = 1;
	done:
		free(rec);
		return r;
	}
	__atomic_store_n(&m->data_tail, tail, __ATOMIC_RELEASE);
	return 0;
}

static int sample(struct ptw_regs_reader *rr, struct ptw_thread_sample *v, size_t n,
		  int timeout_ms)
{
	(void)rr;
	struct sampling *s = xcalloc(n + 1, sizeof(*s));
	struct pollfd *pfd = xcalloc(n + 1, sizeof(*pfd));
	size_t open = 0, failed = 0;
	for (size_t i = 0; i < n; i++) {
		v[i].stack = NULL;
		v[i].len = 0;
		v[i].err = open_sampling(v[i].tid, &s[i]);
		if (v[i].err == 0) {
			v[i].err = -EAGAIN;
			open++;
		} else {
			failed++;
		}
	}
	uint64_t until = ptw_now_ns() + (uint64_t)timeout_ms * 1000000u;
	while (open) {
		size_t np = 0;
		for (size_t i = 0; i < n; i++)
			if (s[i].fd >= 0)
				pfd[np++] = (struct pollfd){ .fd = s[i].fd, .events = POLLIN };
		uint64_t now = ptw_now_ns();
		if (now >= until)
			break;
		int got = poll(pfd, np, (int)((until - now + 999999) / 1000000));
		if (got < 0 && errno != EINTR)
			break;
		for (size_t i = 0, k = 0; i < n; i++) {
			if (s[i].fd < 0)
				continue;
			short ev = got > 0 ? pfd[k].revents : 0;
			k++;
			int r = take_sample(&s[i], &v[i]);
			if (r == 0 && (ev & (POLLHUP | POLLERR)))
				r = -ESRCH; /* it exited: no sample will come */
			if (r == 0)
				continue;
			v[i].err = r < 0 ? r : 0;
			close_sampling(&s[i]);
			open--;
		}
	}
	for (size_t i = 0; i < n; i++)
		close_sampling(&s[i]);
	free(s);
	free(pfd);
	return n && failed == n ? v[0].err : 0;
}

/* Thread tid's context switches so far (a thread asleep has as many until
 * it wakes), or -errno. */
static long long switches_of(pid_t pid, pid_t tid)
{
	struct ptw_cpu cpu;
	int r = ptw_proc_thread_cpu(-1, pid, tid, &cpu, NULL, 0);
	return r < 0 ? r : (long long)(cpu.voluntary + cpu.involuntary);
}

/* The stack pointer of thread tid while it sleeps (/proc's syscall file:
 * the kernel reads it once the thread is off a CPU), -EAGAIN while it
 * runs, or -errno. */
static int sleeping_sp(pid_t pid, pid_t tid, uint64_t *sp)
{
	char path[64], buf[512];
	snprintf(path, sizeof(path), "/proc/%d/task/%d/syscall", (int)pid, (int)tid);
	int n = ptw_read_small_file(path, buf, sizeof(buf));
	if (n < 0)
		return (int)n;
	if (!strncmp(buf, "running", 7))
		return -EAGAIN;
	/* "NR ARG1..ARG6 SP PC", or "-1 SP PC" outside a system call */
	unsigned long long v[9];
	int got = sscanf(buf, "%lld %llx %llx %llx %llx %llx %llx %llx %llx", (long long *)&v[0],
			 &v[1], &v[2], &v[3], &v[4], &v[5], &v[6], &v[7], &v[8]);
	if (got == 9)
		*sp = v[7];
	else if (got == 3 && (long long)v[0] == -1)
		*sp = v[1];
	else
		return -EIO;
	return 0;
}

int ptwk_thread_stack(pid_t pid, pid_t tid, size_t want, int timeout_ms,
		      struct ptw_thread_sample *out)
{
	memset(out, 0, sizeof(*out));
	out->tid = tid;
	want = want < SAMPLE_STACK ? want : SAMPLE_STACK;
	/* asleep: its stack pointer and its stack, read while it stays so */
	long long before = switches_of(pid, tid);
	if (before < 0)
		return (int)before;
	uint64_t sp;
	int r = sleeping_sp(pid, tid, &sp);
	if (r == 0) {
		out->regs.rsp = sp;
		out->stack = xmalloc(want);
		struct iovec local = { out->stack, want }, remote = { (void *)(uintptr_t)sp, want };
		ssize_t got = process_vm_readv(pid, &local, 1, &remote, 1, 0);
		out->len = got > 0 ? (size_t)got : 0;
		if (out->len && switches_of(pid, tid) == before)
			return 0;
		free(out->stack);
		out->stack = NULL;
		out->len = 0;
	} else if (r != -EAGAIN) {
		return r;
	}
	/* running (or it ran meanwhile): one sample as it runs */
	r = sample(NULL, out, 1, timeout_ms);
	return r < 0 ? r : out->err;
}

static void reader_free(struct ptw_regs_reader *rr)
{
	struct reader *rd = (struct reader *)rr;
	if (rd)
		ptw_kernel_bpf__destroy(rd->skel);
	free(rd);
}

int ptw_kernel_regs_reader(pid_t pid, struct ptw_regs_reader **ret, char *why, size_t why_size)
{
	int r = ptw_kernel_available(why, why_size);
	if (r < 0)
		return r;
	int btf_fd;
	const char *btf;
	struct ptw_kernel_bpf *s = ptwk_skeleton_open(false, &btf_fd, &btf);
	if (!s) {
		r = -errno;
		ptwk_why_set(why, why_size, "cannot open the BPF programs: %s", strerror(-r));
		return r;
	}
	/* the iterator alone, and maps as small as they go */
	struct bpf_program *p;
	bpf_object__for_each_program(p, s->obj)
		if (r == 0 && p != s->progs.ptw_underway_regs)
			r = bpf_program__set_autoload(p, false);
	struct bpf_map *m;
	bpf_object__for_each_map(m, s->obj)
		if (r == 0 && bpf_map__type(m) != BPF_MAP_TYPE_ARRAY &&
		    bpf_map__type(m) != BPF_MAP_TYPE_PERCPU_ARRAY)
			r = bpf_map__set_max_entries(
				m, bpf_map__type(m) == BPF_MAP_TYPE_RINGBUF
					   ? (uint32_t)sysconf(_SC_PAGESIZE)
					   : 1);
	if (r == 0)
		r = ptw_kernel_bpf__load(s);
	if (btf_fd >= 0)
		close(btf_fd);
	if (r < 0) {
		ptwk_why_set(why, why_size, "cannot load the task iterator: %s", strerror(-r));
		ptw_kernel_bpf__destroy(s);
		return r;
	}
	struct reader *rd = xcalloc(1, sizeof(*rd));
	rd->pid = pid;
	rd->skel = s;
	rd->r = (struct ptw_regs_reader){
		.tasks = read_tasks,
		.sample = sample,
		.free = reader_free,
		.what = "registers from a BPF task iterator (threads off a CPU) and perf samples "
			"(running threads): no thread stopped",
	};
	*ret = &rd->r;
	return 0;
}
