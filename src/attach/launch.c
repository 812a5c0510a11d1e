/* SPDX-License-Identifier: MIT */
/*
 * Launching a command: fork, held on a pipe until the caller lets it
 * exec (PTRACE_SEIZE first on the ptrace path), its exec's failure told.
 */
#define _GNU_SOURCE
#include "attach_int.h"

/* ---- launch ---- */

/* The child of ptw_held_spawn until its exec: waits for the byte that lets
 * it go (end of file instead: its parent died; with need_go it then exits
 * without running the command, which must not run unseen), then execs
 * with the terminal's process group and signal mask ptwatch was started
 * with; a failed exec's errno goes back on err_fd. */
static void __attribute__((noreturn))
held_child(char *const argv[], int child_stdout, bool need_go, int go_fd, int err_fd)
{
	char c;
	ssize_t n;
	do
		n = read(go_fd, &c, 1);
	while (n < 0 && errno == EINTR);
	if (n != 1 && need_go)
		_exit(127);
	if (child_stdout >= 0 && dup2(child_stdout, STDOUT_FILENO) < 0)
		_exit(126);
	/* The command's process group is the one ptwatch was started in (the
	 * terminal's Ctrl-C reaches it as without ptwatch). */
	if (ptw_original_pgrp() > 0 && getpgrp() != ptw_original_pgrp())
		setpgid(0, ptw_original_pgrp());
	sigprocmask(SIG_SETMASK, ptw_signals_original_mask(), NULL);
	execvp(argv[0], argv);
	int e = errno;
	ssize_t r = write(err_fd, &e, sizeof(e));
	(void)r;
	_exit(e == ENOENT ? 127 : 126);
}

int ptw_held_spawn(char *const argv[], int child_stdout, bool need_go, struct ptw_held *ret)
{
	int go[2], err[2];
	if (pipe2(go, O_CLOEXEC) < 0)
		return -errno;
	if (pipe2(err, O_CLOEXEC) < 0) {
		int e = errno;
		close(go[0]);
		close(go[1]);
		return -e;
	}
	pid_t pid = fork();
	if (pid < 0) {
		int e = errno;
		close(go[0]);
		close(go[1]);
		close(err[0]);
		close(err[1]);
		return -e;
	}
	if (pid == 0) {
		close(go[1]);
		close(err[0]);
		held_child(argv, child_stdout, need_go, go[0], err[1]);
	}
	close(go[0]);
	close(err[1]);
	*ret = (struct ptw_held){ .pid = pid, .go_fd = go[1], .err_fd = err[0] };
	return 0;
}

int ptw_held_go(struct ptw_held *h, bool run)
{
	if (h->go_fd < 0)
		return 0;
	int r = 0;
	if (run && write(h->go_fd, "g", 1) != 1)
		r = -EIO; /* it is gone already */
	close(h->go_fd);
	h->go_fd = -1;
	return r;
}

int ptw_held_exec_result(struct ptw_held *h)
{
	int e = 0;
	ssize_t n;
	do
		n = read(h->err_fd, &e, sizeof(e));
	while (n < 0 && errno == EINTR);
	close(h->err_fd);
	h->err_fd = -1;
	if (n == 0)
		return 0; /* the descriptor closed at its exec */
	return -(n == (ssize_t)sizeof(e) && e ? e : EIO);
}

int ptw_launch(const struct ptw_launch *l, struct ptw_proc **ret_proc,
	       struct ptw_stop *ret_exec_stop)
{
	/* (It runs the command even if ptwatch died before seizing it.) */
	struct ptw_held h;
	int r = ptw_held_spawn(l->argv, l->child_stdout, false, &h);
	if (r < 0)
		return r;
	pid_t pid = h.pid;

	unsigned options = PTRACE_O_TRACECLONE | PTRACE_O_TRACEFORK | PTRACE_O_TRACEVFORK |
			   PTRACE_O_TRACEEXEC | PTRACE_O_TRACEEXIT | PTRACE_O_TRACESYSGOOD |
			   l->extra_options;
	if (ptrace(PTRACE_SEIZE, pid, 0, (long)options) < 0) {
		r = -errno;
		kill(pid, SIGKILL);
	}
	ptw_held_go(&h, true);

	struct ptw_proc *p = att_proc_new(pid);
	p->options = options;
	att_lwp_add(p, pid, pid);

	struct ptw_stop st;
	for (;;) {
		int status;
		pid_t t = waitpid(pid, &status, __WALL);
		if (t < 0) {
			if (errno == EINTR)
				continue;
			r = -errno;
			break;
		}
		att_record_status(p, t, status, &st);
		if (st.kind == PTW_STOP_EXEC) {
			if (r == 0) {
				*ret_exec_stop = st;
				*ret_proc = p;
				close(h.err_fd);
				return 0;
			}
			break;
		}
		if (st.kind == PTW_STOP_EXITED || st.kind == PTW_STOP_KILLED) {
			int e = 0;
			if (read(h.err_fd, &e, sizeof(e)) == (ssize_t)sizeof(e) && e)
				r = -e;
			else if (r == 0)
				r = -ECHILD;
			break;
		}
		/* A signal before exec (from the terminal, say) belongs to the child. */
		st.lwp->resume_sig = st.kind == PTW_STOP_SIGNAL ? st.sig : 0;
		ptw_resume(p, st.lwp);
	}
	close(h.err_fd);
	ptw_proc_free(p);
	return r;
}
