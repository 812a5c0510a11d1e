/* SPDX-License-Identifier: MIT */
/* Wait status classification with synthetic statuses; a process's way
 * out as /proc tells it. */
#include <signal.h>
#include <string.h>
#include <sys/ptrace.h>
#include <sys/wait.h>
#include <unistd.h>

#include "check.h"
#include "ptw_attach.h"

static int stopped(int sig, int event)
{
	return (event << 16) | (sig << 8) | 0x7f;
}

int main(void)
{
	struct ptw_status_class c;

	c = ptw_classify_status(42 << 8);
	CHECK_EQ(c.kind, PTW_STOP_EXITED);
	CHECK_EQ(c.exit_code, 42);

	c = ptw_classify_status(SIGSEGV | 0x80);
	CHECK_EQ(c.kind, PTW_STOP_KILLED);
	CHECK_EQ(c.sig, SIGSEGV);
	CHECK(c.core_dumped);

	c = ptw_classify_status(SIGKILL);
	CHECK_EQ(c.kind, PTW_STOP_KILLED);
	CHECK(!c.core_dumped);

	c = ptw_classify_status(stopped(SIGUSR1, 0));
	CHECK_EQ(c.kind, PTW_STOP_SIGNAL);
	CHECK_EQ(c.sig, SIGUSR1);

	c = ptw_classify_status(stopped(SIGTRAP, 0));
	CHECK_EQ(c.kind, PTW_STOP_SIGNAL);
	CHECK_EQ(c.sig, SIGTRAP);

	c = ptw_classify_status(stopped(SIGTRAP | 0x80, 0));
	CHECK_EQ(c.kind, PTW_STOP_SYSCALL);

	static const struct {
		int event;
		enum ptw_stop_kind kind;
	} events[] = {
		{ PTRACE_EVENT_CLONE, PTW_STOP_CLONE }, { PTRACE_EVENT_FORK, PTW_STOP_FORK },
		{ PTRACE_EVENT_VFORK, PTW_STOP_VFORK }, { PTRACE_EVENT_VFORK_DONE, PTW_STOP_VFORK_DONE },
		{ PTRACE_EVENT_EXEC, PTW_STOP_EXEC },	{ PTRACE_EVENT_EXIT, PTW_STOP_EXIT },
	};
	for (size_t i = 0; i < sizeof(events) / sizeof(events[0]); i++) {
		c = ptw_classify_status(stopped(SIGTRAP, events[i].event));
		CHECK_EQ(c.kind, events[i].kind);
	}

	/* PTRACE_SEIZE: group-stops are PTRACE_EVENT_STOP with the stop signal. */
	c = ptw_classify_status(stopped(SIGSTOP, PTRACE_EVENT_STOP));
	CHECK_EQ(c.kind, PTW_STOP_GROUP);
	c = ptw_classify_status(stopped(SIGTSTP, PTRACE_EVENT_STOP));
	CHECK_EQ(c.kind, PTW_STOP_GROUP);
	c = ptw_classify_status(stopped(SIGTRAP, PTRACE_EVENT_STOP));
	CHECK_EQ(c.kind, PTW_STOP_NEW);

	/* Interrupted system calls, restarted as the kernel would. */
	struct user_regs_struct r;
	memset(&r, 0, sizeof(r));
	r.orig_rax = 202; /* futex */
	r.rax = (unsigned long long)-512; /* -ERESTARTSYS */
	r.rip = 0x7f0000001002;
	CHECK(ptw_syscall_restart(&r));
	CHECK_EQ(r.rax, 202);
	CHECK_EQ(r.rip, 0x7f0000001000);
	r.orig_rax = 35; /* nanosleep */
	r.rax = (unsigned long long)-516; /* -ERESTART_RESTARTBLOCK */
	r.rip = 0x7f0000001002;
	CHECK(ptw_syscall_restart(&r));
	CHECK_EQ(r.rax, 219); /* restart_syscall */
	CHECK_EQ(r.rip, 0x7f0000001000);
	r.orig_rax = 202;
	r.rax = (unsigned long long)-4; /* -EINTR: the program sees it */
	r.rip = 0x7f0000001002;
	CHECK(!ptw_syscall_restart(&r));
	CHECK_EQ(r.rip, 0x7f0000001002);
	r.orig_rax = (unsigned long long)-1; /* not in a syscall (int3 stop) */
	r.rax = (unsigned long long)-512;
	CHECK(!ptw_syscall_restart(&r));

	CHECK_STR(ptw_stop_kind_name(PTW_STOP_CLONE), "clone");
	CHECK_STR(ptw_stop_kind_name((enum ptw_stop_kind)999), "?");

	/* ptw_proc_exiting: a live process is not; an ended one not yet
	 * reaped (a zombie) and a reaped one are (a hook that cannot be put
	 * in such a process is not a warning: exec-orphan-forks-follow) */
	alarm(20);
	int go[2];
	CHECK(pipe(go) == 0);
	pid_t kid = fork();
	if (kid == 0) {
		char byte;
		close(go[1]);
		_exit(read(go[0], &byte, 1) == 0 ? 0 : 1); /* until the pipe closes */
	}
	close(go[0]);
	CHECK(!ptw_proc_exiting(kid, kid));
	close(go[1]);
	siginfo_t si;
	CHECK(waitid(P_PID, (id_t)kid, &si, WEXITED | WNOWAIT) == 0); /* a zombie now */
	CHECK(ptw_proc_exiting(kid, kid));
	CHECK(waitpid(kid, NULL, 0) == kid);
	CHECK(ptw_proc_exiting(kid, kid));
	CHECK_DONE();
}
