/* SPDX-License-Identifier: MIT */
/* Pure classification of wait statuses; see ptw_attach.h. */
#include "ptw_attach.h"

#include <sys/ptrace.h>
#include <sys/wait.h>

struct ptw_status_class ptw_classify_status(int status)
{
	struct ptw_status_class c = { .kind = PTW_STOP_NONE };

	if (WIFEXITED(status)) {
		c.kind = PTW_STOP_EXITED;
		c.exit_code = WEXITSTATUS(status);
		return c;
	}
	if (WIFSIGNALED(status)) {
		c.kind = PTW_STOP_KILLED;
		c.sig = WTERMSIG(status);
		c.core_dumped = WCOREDUMP(status);
		return c;
	}
	if (!WIFSTOPPED(status))
		return c;

	int sig = WSTOPSIG(status);
	unsigned event = (unsigned)status >> 16;
	c.sig = sig;
	switch (event) {
	case 0:
		if (sig == (SIGTRAP | 0x80)) {
			c.kind = PTW_STOP_SYSCALL;
			c.sig = SIGTRAP;
		} else {
			c.kind = PTW_STOP_SIGNAL;
		}
		break;
	case PTRACE_EVENT_CLONE:
		c.kind = PTW_STOP_CLONE;
		break;
	case PTRACE_EVENT_FORK:
		c.kind = PTW_STOP_FORK;
		break;
	case PTRACE_EVENT_VFORK:
		c.kind = PTW_STOP_VFORK;
		break;
	case PTRACE_EVENT_VFORK_DONE:
		c.kind = PTW_STOP_VFORK_DONE;
		break;
	case PTRACE_EVENT_EXEC:
		c.kind = PTW_STOP_EXEC;
		break;
	case PTRACE_EVENT_EXIT:
		c.kind = PTW_STOP_EXIT;
		break;
	case PTRACE_EVENT_STOP:
		/* With PTRACE_SEIZE, group-stops are reported as PTRACE_EVENT_STOP
		 * with the stopping signal; every other PTRACE_EVENT_STOP (a new
		 * tracee's first stop, PTRACE_INTERRUPT) carries SIGTRAP. */
		if (sig == SIGSTOP || sig == SIGTSTP || sig == SIGTTIN || sig == SIGTTOU)
			c.kind = PTW_STOP_GROUP;
		else
			c.kind = PTW_STOP_NEW;
		break;
	default:
		c.kind = PTW_STOP_SIGNAL;
		break;
	}
	return c;
}

/* Kernel-internal errnos (include/linux/errno.h); never seen by programs. */
#define ERESTARTSYS 512
#define ERESTARTNOINTR 513
#define ERESTARTNOHAND 514
#define ERESTART_RESTARTBLOCK 516
#define NR_RESTART_SYSCALL 219

bool ptw_syscall_restart(struct user_regs_struct *regs)
{
	if ((long long)regs->orig_rax < 0)
		return false;
	switch ((long long)regs->rax) {
	case -ERESTARTSYS:
	case -ERESTARTNOINTR:
	case -ERESTARTNOHAND:
		regs->rax = regs->orig_rax;
		break;
	case -ERESTART_RESTARTBLOCK:
		regs->rax = NR_RESTART_SYSCALL;
		break;
	default:
		return false;
	}
	regs->rip -= 2; /* syscall is 0f 05 */
	return true;
}

const char *ptw_stop_kind_name(enum ptw_stop_kind kind)
{
	static const char *const names[] = {
		[PTW_STOP_NONE] = "none",
		[PTW_STOP_SIGNAL] = "signal",
		[PTW_STOP_GROUP] = "group_stop",
		[PTW_STOP_NEW] = "new",
		[PTW_STOP_INTERRUPT] = "interrupt",
		[PTW_STOP_CLONE] = "clone",
		[PTW_STOP_FORK] = "fork",
		[PTW_STOP_VFORK] = "vfork",
		[PTW_STOP_VFORK_DONE] = "vfork_done",
		[PTW_STOP_EXEC] = "exec",
		[PTW_STOP_EXIT] = "exit",
		[PTW_STOP_SYSCALL] = "syscall",
		[PTW_STOP_EXITED] = "exited",
		[PTW_STOP_KILLED] = "killed",
		[PTW_STOP_TIMEOUT] = "timeout",
		[PTW_STOP_TRACER_SIGNAL] = "tracer_signal",
	};
	if ((unsigned)kind < PTW_ARRAY_SIZE(names) && names[kind])
		return names[kind];
	return "?";
}
