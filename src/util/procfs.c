/* SPDX-License-Identifier: MIT */
/* What /proc says about a process and its threads. */
#define _GNU_SOURCE
#include <dirent.h>
#include <elf.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "ptw_events.h"
#include "ptw_util.h"

/* A stat file from the state field on ("S 1 2 ..."): the command name
 * before it may hold blanks and parentheses. NULL if unreadable. */
static const char *stat_fields(const char *path, char *buf, size_t size)
{
	if (ptw_read_small_file(path, buf, size) < 0)
		return NULL;
	const char *p = strrchr(buf, ')');
	return p && p[1] == ' ' && p[2] ? p + 2 : NULL;
}

char ptw_proc_state(pid_t pid, pid_t tid)
{
	/* Not /proc/TID/stat: that one sums over every thread of the process
	 * (O(threads) per read). */
	char path[64], buf[2048];
	snprintf(path, sizeof(path), "/proc/%d/task/%d/stat", pid, tid);
	const char *f = stat_fields(path, buf, sizeof(buf));
	return f ? f[0] : 0;
}

bool ptw_proc_exited(pid_t pid, pid_t tid)
{
	char s = ptw_proc_state(pid, tid);
	return !s || s == 'Z' || s == 'X';
}

/* Field `field` (numbered as in proc(5)) of the stat file at path. */
static bool stat_field(const char *path, int field, unsigned long long *ret)
{
	char buf[2048];
	const char *f = stat_fields(path, buf, sizeof(buf)); /* field 3 */
	for (int i = 3; f && i < field; i++) {
		f = strchr(f, ' ');
		if (f)
			f++;
	}
	if (!f || field < 3)
		return false;
	*ret = strtoull(f, NULL, 10);
	return true;
}

bool ptw_proc_exiting(pid_t pid, pid_t tid)
{
	char path[64];
	snprintf(path, sizeof(path), "/proc/%d/task/%d/stat", pid, tid);
	unsigned long long flags;
	return ptw_proc_exited(pid, tid) ||
	       (stat_field(path, 9, &flags) && (flags & PTW_PF_EXITING));
}

bool ptw_proc_stat_field(pid_t pid, int field, unsigned long long *ret)
{
	char path[64];
	snprintf(path, sizeof(path), "/proc/%d/stat", pid);
	return stat_field(path, field, ret);
}

long ptw_proc_status_field(pid_t tid, const char *name)
{
	char path[64], buf[4096], key[64];
	snprintf(path, sizeof(path), "/proc/%d/status", tid);
	if (ptw_read_small_file(path, buf, sizeof(buf)) < 0)
		return -1;
	snprintf(key, sizeof(key), "\n%s:", name);
	const char *p = strstr(buf, key);
	return p ? strtol(p + strlen(key), NULL, 10) : -1;
}

/* The hex mask after "\nname:" in a status file; 0 if absent. */
static unsigned long long status_mask(const char *buf, const char *name)
{
	char key[32];
	snprintf(key, sizeof(key), "\n%s:", name);
	const char *p = strstr(buf, key);
	return p ? strtoull(p + strlen(key), NULL, 16) : 0;
}

bool ptw_proc_sig_pending(pid_t pid, int sig)
{
	if (sig <= 0 || sig > 64)
		return false;
	unsigned long long bit = 1ull << (sig - 1);
	pid_t *tids;
	int n = ptw_proc_tids(pid, &tids);
	bool pending = false;
	for (int i = 0; i < n && !pending; i++) {
		char path[64], buf[4096];
		snprintf(path, sizeof(path), "/proc/%d/task/%d/status", pid, tids[i]);
		if (ptw_read_small_file(path, buf, sizeof(buf)) < 0)
			continue;
		pending = ((status_mask(buf, "SigPnd") | status_mask(buf, "ShdPnd")) & bit) != 0;
	}
	free(tids);
	return pending;
}

bool ptw_proc_sig_default(pid_t pid, int sig)
{
	char path[64], buf[4096];
	snprintf(path, sizeof(path), "/proc/%d/status", pid);
	if (sig <= 0 || sig > 64 || ptw_read_small_file(path, buf, sizeof(buf)) < 0)
		return false;
	unsigned long long bit = 1ull << (sig - 1);
	return !((status_mask(buf, "SigCgt") | status_mask(buf, "SigIgn")) & bit);
}

bool ptw_proc_sig_caught(pid_t pid, int sig)
{
	char path[64], buf[4096];
	snprintf(path, sizeof(path), "/proc/%d/status", pid);
	if (sig <= 0 || sig > 64 || ptw_read_small_file(path, buf, sizeof(buf)) < 0)
		return false;
	return (status_mask(buf, "SigCgt") >> (sig - 1)) & 1;
}

/* The state letter after "\nState:\t" in a status file; 0 if absent. */
static char status_state(const char *buf)
{
	const char *p = strstr(buf, "\nState:");
	if (!p)
		return 0;
	p += strlen("\nState:");
	while (*p == ' ' || *p == '\t')
		p++;
	return *p;
}

/* Adds one thread's status to the census; false if it is gone or a zombie. */
static bool count_thread(int task_fd, pid_t tid, unsigned long long spare, struct ptw_census *c)
{
	char path[64], buf[4096];
	snprintf(path, sizeof(path), "%d/status", tid);
	if (ptw_read_small_file_at(task_fd, path, buf, sizeof(buf)) < 0)
		return false;
	c->threads++;
	char state = status_state(buf);
	if (state == 'Z' || state == 'X')
		return false;
	c->alive++;
	if (state == 'T')
		c->stopped++;
	const char *tp = strstr(buf, "\nTracerPid:");
	long tracer = tp ? strtol(tp + strlen("\nTracerPid:"), NULL, 10) : 0;
	if (tracer > 0 && !c->traced_by)
		c->traced_by = (pid_t)tracer;
	unsigned long long m = (status_mask(buf, "SigPnd") | status_mask(buf, "ShdPnd")) &
			       ~status_mask(buf, "SigBlk") & ~status_mask(buf, "SigCgt") &
			       ~status_mask(buf, "SigIgn") & ~spare;
	if (m && !c->fatal_signal)
		c->fatal_signal = __builtin_ctzll(m) + 1;
	return true;
}

void ptw_proc_census(pid_t pid, bool every_thread, struct ptw_census *c)
{
	/* Signals whose default action does not end the process. */
	static const int harmless[] = { SIGCHLD, SIGCONT, SIGSTOP, SIGTSTP,
					SIGTTIN, SIGTTOU, SIGURG,  SIGWINCH };
	unsigned long long spare = 0;
	for (size_t i = 0; i < PTW_ARRAY_SIZE(harmless); i++)
		spare |= 1ull << (harmless[i] - 1);
	memset(c, 0, sizeof(*c));
	char path[64];
	snprintf(path, sizeof(path), "/proc/%d/task", pid);
	int task_fd = open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (task_fd < 0)
		return;
	if (!every_thread && count_thread(task_fd, pid, spare, c)) {
		close(task_fd);
		return;
	}
	memset(c, 0, sizeof(*c));
	pid_t *tids;
	int n = ptw_proc_tids(pid, &tids);
	for (int i = 0; i < n; i++)
		count_thread(task_fd, tids[i], spare, c);
	free(tids);
	close(task_fd);
}

int ptw_proc_tids(pid_t pid, pid_t **ret)
{
	char path[64];
	snprintf(path, sizeof(path), "/proc/%d/task", pid);
	*ret = NULL;
	DIR *d = opendir(path);
	if (!d)
		return -errno;
	pid_t *tids = NULL;
	int n = 0, cap = 0;
	struct dirent *de;
	while ((de = readdir(d))) {
		pid_t tid = (pid_t)strtol(de->d_name, NULL, 10);
		if (tid <= 0)
			continue;
		if (n == cap) {
			cap = cap ? cap * 2 : 64;
			tids = xreallocarray(tids, (size_t)cap, sizeof(*tids));
		}
		tids[n++] = tid;
	}
	closedir(d);
	*ret = tids;
	return n;
}

bool ptw_proc_alive(pid_t pid)
{
	pid_t *tids;
	int n = ptw_proc_tids(pid, &tids);
	bool alive = false;
	for (int i = 0; i < n && !alive; i++)
		alive = !ptw_proc_exited(pid, tids[i]);
	free(tids);
	return alive;
}

size_t ptw_proc_children(pid_t pid, pid_t **kids, pid_t **tids, size_t n)
{
	pid_t *task;
	int ntask = ptw_proc_tids(pid, &task);
	for (int i = 0; i < ntask; i++) {
		char path[96];
		snprintf(path, sizeof(path), "/proc/%d/task/%d/children", pid, task[i]);
		FILE *f = fopen(path, "re");
		if (!f)
			continue;
		int c;
		while (fscanf(f, "%d", &c) == 1) {
			*kids = xreallocarray(*kids, n + 1, sizeof(**kids));
			(*kids)[n] = c;
			if (tids) {
				*tids = xreallocarray(*tids, n + 1, sizeof(**tids));
				(*tids)[n] = task[i];
			}
			n++;
		}
		fclose(f);
	}
	if (ntask > 0)
		free(task);
	return n;
}

/* include/uapi/linux/kcmp.h */
#define KCMP_VM 1

int ptw_proc_same_vm(pid_t a, pid_t b)
{
	long r = syscall(SYS_kcmp, a, b, KCMP_VM, 0, 0);
	if (r < 0)
		return -errno;
	return r == 0;
}

/* argv of pid from /proc/PID/cmdline (NULL-terminated, malloc'd). */
char **ptw_proc_cmdline(pid_t pid)
{
	char path[64];
	snprintf(path, sizeof(path), "/proc/%d/cmdline", pid);
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return NULL;
	struct ptw_buf b = { 0 };
	char chunk[4096];
	ssize_t n;
	/* Bounded: the target writes it (an argv of 1 MiB is kept whole). */
	while (b.len < (1u << 20) && (n = read(fd, chunk, sizeof(chunk))) > 0)
		ptw_buf_add(&b, chunk, (size_t)n);
	close(fd);
	/* (A last string without its '\0', rewritten by the target, counts.) */
	size_t count = 0;
	for (size_t i = 0; i < b.len; i++)
		count += b.p[i] == '\0' || i + 1 == b.len;
	char **argv = xcalloc(count + 1, sizeof(*argv));
	size_t k = 0;
	for (size_t i = 0; i < b.len && k < count; i += strlen(b.p + i) + 1)
		argv[k++] = xstrdup(b.p + i);
	ptw_buf_free(&b);
	return argv;
}

/* Whether the ELF file at path has no program interpreter: a static
 * program, which maps no libc.so for the probes. */
bool ptw_elf_is_static(const char *path)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return false;
	Elf64_Ehdr eh;
	bool interp = true;
	if (pread(fd, &eh, sizeof(eh), 0) == (ssize_t)sizeof(eh) &&
	    !memcmp(eh.e_ident, ELFMAG, SELFMAG) && eh.e_ident[EI_CLASS] == ELFCLASS64 &&
	    eh.e_phentsize == sizeof(Elf64_Phdr) && eh.e_phnum < 256) {
		interp = false;
		for (unsigned i = 0; i < eh.e_phnum && !interp; i++) {
			Elf64_Phdr ph;
			if (pread(fd, &ph, sizeof(ph), (off_t)(eh.e_phoff + i * sizeof(ph))) !=
			    (ssize_t)sizeof(ph))
				interp = true; /* unreadable: do not claim it is static */
			else if (ph.p_type == PT_INTERP)
				interp = true;
		}
	}
	close(fd);
	return !interp;
}

bool ptw_proc_status_name(const char *status, char *name, size_t size)
{
	if (!size || strncmp(status, "Name:\t", 6) != 0)
		return false;
	size_t n = 0;
	for (const char *p = status + 6; *p && *p != '\n'; p++) {
		char c = *p;
		if (c == '\\' && (p[1] == '\\' || p[1] == 'n'))
			c = *++p == 'n' ? '\n' : '\\';
		if (n + 1 < size)
			name[n++] = c;
	}
	name[n] = '\0';
	return true;
}

/* /proc/PID/task/TID/FILE, through task_dirfd (/proc/PID/task) if open. */
static int read_task_file(int task_dirfd, pid_t pid, pid_t tid, const char *file, char *buf,
			  size_t size)
{
	char path[96];
	if (task_dirfd >= 0)
		snprintf(path, sizeof(path), "%d/%s", (int)tid, file);
	else
		snprintf(path, sizeof(path), "/proc/%d/task/%d/%s", (int)pid, (int)tid, file);
	return ptw_read_small_file_at(task_dirfd >= 0 ? task_dirfd : AT_FDCWD, path, buf, size);
}

int ptw_proc_thread_schedstat(int task_dirfd, pid_t pid, pid_t tid, uint64_t *on_cpu_ns,
			      uint64_t *runnable_ns)
{
	char buf[128];
	int r = read_task_file(task_dirfd, pid, tid, "schedstat", buf, sizeof(buf));
	if (r < 0)
		return r;
	/* "RUN_NS WAIT_NS TIMESLICES" */
	unsigned long long on, wait;
	if (sscanf(buf, "%llu %llu", &on, &wait) != 2)
		return -EINVAL;
	*on_cpu_ns = on;
	*runnable_ns = wait;
	return 0;
}

int ptw_proc_thread_cpu(int task_dirfd, pid_t pid, pid_t tid, struct ptw_cpu *ret, char *name,
			size_t name_size)
{
	char buf[2048];
	uint64_t on, wait;
	int r = ptw_proc_thread_schedstat(task_dirfd, pid, tid, &on, &wait);
	if (r < 0 || (r = read_task_file(task_dirfd, pid, tid, "status", buf, sizeof(buf))) < 0)
		return r;
	if (name && !ptw_proc_status_name(buf, name, name_size))
		return -EINVAL;
	const char *v = strstr(buf, "\nvoluntary_ctxt_switches:");
	const char *iv = strstr(buf, "\nnonvoluntary_ctxt_switches:");
	if (!v || !iv)
		return -EINVAL;
	*ret = (struct ptw_cpu){ .set = true,
				 .on_cpu_ns = on,
				 .runnable_ns = wait,
				 .voluntary = strtoull(strchr(v, ':') + 1, NULL, 10),
				 .involuntary = strtoull(strchr(iv, ':') + 1, NULL, 10) };
	return 0;
}

/* What execvp will run for name: with a '/', name itself; else the first
 * executable regular file of that name in PATH (its default when unset). */
bool ptw_command_path(const char *name, char *ret, size_t size)
{
	if (strchr(name, '/')) {
		snprintf(ret, size, "%s", name);
		return true;
	}
	const char *path = getenv("PATH");
	if (!path)
		path = "/bin:/usr/bin";
	for (const char *p = path;; p++) {
		const char *end = strchrnul(p, ':');
		struct stat st;
		snprintf(ret, size, "%.*s%s%s", (int)(end - p), p, end == p ? "" : "/", name);
		if (stat(ret, &st) == 0 && S_ISREG(st.st_mode) && access(ret, X_OK) == 0)
			return true;
		if (!*end)
			return false;
		p = end;
	}
}

const char *ptw_syscall_name(long nr)
{
	switch (nr) {
	case SYS_futex:
		return "futex";
	case SYS_read:
		return "read";
	case SYS_write:
		return "write";
	case SYS_readv:
		return "readv";
	case SYS_pread64:
		return "pread64";
	case SYS_poll:
		return "poll";
	case SYS_ppoll:
		return "ppoll";
	case SYS_select:
		return "select";
	case SYS_pselect6:
		return "pselect6";
	case SYS_epoll_wait:
		return "epoll_wait";
	case SYS_epoll_pwait:
		return "epoll_pwait";
	case SYS_nanosleep:
		return "nanosleep";
	case SYS_clock_nanosleep:
		return "clock_nanosleep";
	case SYS_restart_syscall:
		/* a sleep interrupted by a stop (ours, a debugger's, SIGSTOP)
		 * goes on in this call */
		return "restart_syscall";
	case SYS_pause:
		return "pause";
	case SYS_rt_sigsuspend:
		return "rt_sigsuspend";
	case SYS_rt_sigtimedwait:
		return "rt_sigtimedwait";
	case SYS_wait4:
		return "wait4";
	case SYS_waitid:
		return "waitid";
	case SYS_accept:
		return "accept";
	case SYS_accept4:
		return "accept4";
	case SYS_connect:
		return "connect";
	case SYS_recvfrom:
		return "recvfrom";
	case SYS_recvmsg:
		return "recvmsg";
	case SYS_sendto:
		return "sendto";
	case SYS_sendmsg:
		return "sendmsg";
	case SYS_flock:
		return "flock";
	case SYS_fcntl:
		return "fcntl";
	case SYS_fsync:
		return "fsync";
	case SYS_fdatasync:
		return "fdatasync";
	case SYS_ioctl:
		return "ioctl";
	case SYS_openat:
		return "openat";
	case SYS_msgrcv:
		return "msgrcv";
	case SYS_semop:
		return "semop";
	case SYS_semtimedop:
		return "semtimedop";
	case SYS_io_getevents:
		return "io_getevents";
	case SYS_io_uring_enter:
		return "io_uring_enter";
	case SYS_vfork:
		return "vfork";
	case SYS_clone:
		return "clone";
	case SYS_clone3:
		return "clone3";
	case SYS_execve:
		return "execve";
	case SYS_exit_group:
		return "exit_group";
	case SYS_msync:
		return "msync";
	case SYS_sync:
		return "sync";
	case SYS_close:
		return "close";
	case SYS_mmap:
		return "mmap";
	case SYS_munmap:
		return "munmap";
	default:
		return NULL;
	}
}
