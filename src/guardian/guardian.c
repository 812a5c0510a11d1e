/* SPDX-License-Identifier: MIT */
/* The front/tracer split and the guardian; see ptw_guardian.h. */
#define _GNU_SOURCE
#include "ptw_guardian.h"

#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include "ptw_attach.h"
#include "ptw_breakpoints.h"
#include "ptw_util.h"

/* Tracer side: the socket to the front (-1 when not split). */
static int front_sock = -1;

enum { MSG_MEM_FD = 1, MSG_MIRROR = 2 };

struct msg {
	int type;
	int value;
};

/* One message on the socket, with room for one passed descriptor. */
struct packet {
	struct msg m;
	struct iovec iov;
	union {
		char buf[CMSG_SPACE(sizeof(int))];
		struct cmsghdr align;
	} u;
	struct msghdr mh;
};

static void packet_init(struct packet *p, int type, int value)
{
	p->m = (struct msg){ type, value };
	p->iov = (struct iovec){ &p->m, sizeof(p->m) };
	p->mh = (struct msghdr){ .msg_iov = &p->iov, .msg_iovlen = 1, .msg_control = p->u.buf,
				 .msg_controllen = sizeof(p->u.buf) };
}

void ptw_guardian_share_mem(int fd)
{
	if (front_sock < 0 || fd < 0)
		return;
	struct packet p;
	packet_init(&p, MSG_MEM_FD, 0);
	struct cmsghdr *c = CMSG_FIRSTHDR(&p.mh);
	c->cmsg_level = SOL_SOCKET;
	c->cmsg_type = SCM_RIGHTS;
	c->cmsg_len = CMSG_LEN(sizeof(int));
	memcpy(CMSG_DATA(c), &fd, sizeof(int));
	while (sendmsg(front_sock, &p.mh, MSG_NOSIGNAL) < 0 && errno == EINTR)
		;
}

void ptw_guardian_mirror_signal(int sig)
{
	if (front_sock < 0)
		return;
	struct msg m = { MSG_MIRROR, sig };
	while (send(front_sock, &m, sizeof(m), MSG_NOSIGNAL) < 0 && errno == EINTR)
		;
}

/* ---- the front ---- */

struct front {
	pid_t tracer;
	int sock, sigfd;
	int mem_fd;	/* latest from the tracer */
	int mirror_sig; /* the tracer will die of this on purpose */
};

static void receive(struct front *f)
{
	for (;;) {
		struct packet p;
		packet_init(&p, 0, 0);
		ssize_t n = recvmsg(f->sock, &p.mh, MSG_DONTWAIT | MSG_CMSG_CLOEXEC);
		if (n != (ssize_t)sizeof(p.m))
			return;
		if (p.m.type == MSG_MIRROR) {
			f->mirror_sig = p.m.value;
			continue;
		}
		struct cmsghdr *c = CMSG_FIRSTHDR(&p.mh);
		if (p.m.type == MSG_MEM_FD && c && c->cmsg_type == SCM_RIGHTS) {
			int fd;
			memcpy(&fd, CMSG_DATA(c), sizeof(int));
			if (f->mem_fd >= 0)
				close(f->mem_fd);
			f->mem_fd = fd;
		}
	}
}

/*
 * A launched command was the tracer's child and is ours now (we are a
 * subreaper): wait for it and exit as it does, as ptwatch would have. A
 * session signal meanwhile (Ctrl-C, kill) leaves it running, as ptwatch's
 * detach would. Returns if target is not our child (attach mode).
 */
static void wait_command(struct front *f, pid_t target)
{
	for (;;) {
		int status;
		pid_t w = waitpid(target, &status, WNOHANG);
		if (w == target) {
			if (WIFSIGNALED(status))
				ptw_die_of_signal(WTERMSIG(status));
			_exit(WEXITSTATUS(status));
		}
		if (w < 0 && errno != EINTR)
			return;
		/* SIGCHLD and the session signals are blocked: they queue here. */
		struct pollfd p = { f->sigfd, POLLIN, 0 };
		if (poll(&p, 1, -1) < 0 && errno != EINTR)
			return;
		struct signalfd_siginfo si;
		while (read(f->sigfd, &si, sizeof(si)) == (ssize_t)sizeof(si))
			if (si.ssi_signo != SIGCHLD)
				_exit(128 + (int)si.ssi_signo);
	}
}

static void __attribute__((noreturn)) tracer_ended(struct front *f, int status)
{
	receive(f); /* a mirror notice or a last fd may still be queued */
	int restored = 0, failed = 0;
	if (f->mem_fd >= 0)
		failed = ptw_bp_journal_restore(f->mem_fd, &restored);
	if (WIFEXITED(status)) {
		if (restored)
			fprintf(stderr, "ptwatch: restored %d bytes the tracer left patched\n", restored);
		_exit(WEXITSTATUS(status));
	}
	int sig = WTERMSIG(status);
	if (sig == f->mirror_sig)
		ptw_die_of_signal(sig);
	/* Say what became of the target, not what we hope. (The kernel lets
	 * it go before we can restore: a thread stopped on an int3 then, or
	 * one reaching an int3 before we are done, dies of SIGTRAP.) */
	pid_t target = ptw_bp_journal_pid();
	bool alive = target && ptw_proc_alive(target);
	fprintf(stderr, "ptwatch: the tracer process died (%s); restored %d patched bytes%s; %s\n",
		ptw_signame(sig), restored, failed ? " (some could not be)" : "",
		!target ? "nothing was patched"
		: alive ? "the target was still running, untraced"
			: "the target did not survive");
	if (target)
		wait_command(f, target);
	_exit(128 + sig);
}

static void __attribute__((noreturn)) guard(struct front *f)
{
	for (;;) {
		struct pollfd p[2] = { { f->sock, POLLIN, 0 }, { f->sigfd, POLLIN, 0 } };
		if (poll(p, 2, -1) < 0 && errno != EINTR)
			break;
		if (p[0].revents & POLLIN)
			receive(f);
		if (p[1].revents & POLLIN) {
			struct signalfd_siginfo si;
			while (read(f->sigfd, &si, sizeof(si)) == (ssize_t)sizeof(si))
				if (si.ssi_signo != SIGCHLD)
					kill(f->tracer, (int)si.ssi_signo); /* ends its session */
		}
		int status;
		pid_t w = waitpid(f->tracer, &status, WNOHANG);
		if (w == f->tracer)
			tracer_ended(f, status);
		if (w < 0 && errno == ECHILD)
			break;
	}
	_exit(1);
}

int ptw_guardian_split(void)
{
	int sv[2];
	if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv) < 0)
		return -errno;
	pid_t parent = getpid();
	pid_t pid = fork();
	if (pid < 0) {
		int e = errno;
		close(sv[0]);
		close(sv[1]);
		return -e;
	}
	if (pid == 0) {
		close(sv[0]);
		front_sock = sv[1];
		/* Front gone (even SIGKILL): detach cleanly, as on Ctrl-C. */
		prctl(PR_SET_PDEATHSIG, SIGTERM);
		if (getppid() != parent)
			raise(SIGTERM);
		prctl(PR_SET_NAME, "ptw-tracer");
		return 0;
	}
	close(sv[1]);
	/* A command launched by the tracer comes to us if the tracer dies. */
	prctl(PR_SET_CHILD_SUBREAPER, 1);
	struct front f = { .tracer = pid, .sock = sv[0], .mem_fd = -1 };
	sigset_t set;
	sigemptyset(&set);
	int sigs[] = PTW_SESSION_SIGNALS;
	for (size_t i = 0; i < PTW_ARRAY_SIZE(sigs); i++)
		sigaddset(&set, sigs[i]);
	sigaddset(&set, SIGCHLD);
	f.sigfd = signalfd(-1, &set, SFD_CLOEXEC | SFD_NONBLOCK);
	guard(&f);
}
