/* SPDX-License-Identifier: MIT */
/* The three-way split and the front; see ptw_guardian.h (the tracer's
 * side is src/record/to_guardian.c, the restorer restorer.c). */
#define _GNU_SOURCE
#include "ptw_guardian.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "ptw_attach.h"
#include "ptw_breakpoints.h"
#include "guardian_int.h"

/* ---- the front ---- */

struct front {
	pid_t tracer, restorer_pid;
	int sock, sigfd;
	int restorer;	/* its outcome comes here; -1 once read or gone */
	struct ptw_memfds mem; /* from the tracer, by process */
	int mirror_sig; /* the tracer will die of this on purpose */
	int key_tty, key_w; /* the live table's keys, -1: none (any more) */
	bool live;
	/* An output the restorer could not write: said with the command's
	 * status, and ptwatch's is PTW_EXIT_LOST_OUTPUT. */
	int lost_err;
	char lost[240];
	/* Session signals forwarded and not answered yet
	 * (ptw_guardian_signal_answered): since when (0: none), the last one
	 * and whether it came from the terminal, how many, and when the
	 * tracer last got anywhere (its progress then). */
	uint64_t unanswered_ns, again_ns, progress_ns;
	int unanswered_sig, unanswered_count;
	bool unanswered_kernel;
	struct ptw_progress progress;
	uint64_t continued_ns; /* it was stopped: SIGCONT sent then */
	bool forced;	       /* killed for it: the signal was ptwatch's */
	/* The tracer said its outputs are written (ptw_guardian_exit_early):
	 * end with this status (256 + sig: die of sig) without waiting for it */
	bool exit_early;
	int exit_value;
};

/* Exits with status, or PTW_EXIT_LOST_OUTPUT after one line if an output
 * was lost (how the command ended in it: ended, status as waitpid's). */
static void __attribute__((noreturn)) front_exit(struct front *f, int status, bool ended,
						 int wstatus)
{
	if (!f->lost_err)
		_exit(status);
	fprintf(stderr, "ptwatch: lost output %s: %s", f->lost, strerror(f->lost_err));
	if (ended && WIFSIGNALED(wstatus))
		fprintf(stderr, " (command killed by %s)\n", ptw_signame(WTERMSIG(wstatus)));
	else if (ended)
		fprintf(stderr, " (command exited with %d)\n", WEXITSTATUS(wstatus));
	else
		fputc('\n', stderr);
	_exit(PTW_EXIT_LOST_OUTPUT);
}

/* The live table's keys: from the terminal to the tracer, never blocking
 * (a key that does not fit in the pipe is dropped). done: the tracer
 * closed its end (the table is gone): leave the terminal's input alone. */
static void pass_keys(struct front *f, bool done)
{
	char buf[256];
	ssize_t n = done ? 0 : read(f->key_tty, buf, sizeof(buf));
	if (n > 0 && write(f->key_w, buf, (size_t)n) >= 0)
		return;
	if (n < 0 && (errno == EAGAIN || errno == EINTR))
		return;
	close(f->key_tty); /* EOF, EIO (in the background), or the tracer is done */
	close(f->key_w);
	f->key_tty = f->key_w = -1;
}

static void receive(struct front *f)
{
	for (;;) {
		struct ptw_guardian_msg m;
		struct ptw_packet p;
		ptw_packet_init(&p, &m, sizeof(m), -1);
		union {
			char buf[CMSG_SPACE(sizeof(int))];
			struct cmsghdr align;
		} u;
		p.mh.msg_control = u.buf;
		p.mh.msg_controllen = sizeof(u.buf);
		ssize_t n = recvmsg(f->sock, &p.mh, MSG_DONTWAIT | MSG_CMSG_CLOEXEC);
		if (n != (ssize_t)sizeof(m))
			return;
		if (m.type == MSG_MIRROR) {
			f->mirror_sig = m.value;
			continue;
		}
		if (m.type == MSG_EXIT) {
			/* The tracer's outputs are written; it closes what is
			 * left on its own: end as the command did. */
			f->exit_early = true;
			f->exit_value = m.value;
			continue;
		}
		if (m.type == MSG_ANSWERED) {
			f->unanswered_ns = f->again_ns = f->continued_ns = 0;
			f->unanswered_count = 0;
			continue;
		}
		struct cmsghdr *c = CMSG_FIRSTHDR(&p.mh);
		if (m.type == MSG_MEM_FD && c && c->cmsg_type == SCM_RIGHTS) {
			int fd;
			memcpy(&fd, CMSG_DATA(c), sizeof(int));
			ptw_memfds_put(&f->mem, fd);
		}
	}
}

/*
 * A launched command was the tracer's child and is ours now (we are a
 * subreaper): wait for it and exit as it does, as ptwatch would have. A
 * session signal sent to us meanwhile (kill) leaves it running, as
 * ptwatch's detach would; a terminal's (Ctrl-C) is the command's too. Returns if target is not our child (attach mode).
 */
static void wait_command(struct front *f, pid_t target)
{
	for (;;) {
		int status;
		pid_t w = waitpid(target, &status, WNOHANG);
		if (w == target) {
			if (WIFSIGNALED(status) && !f->lost_err)
				ptw_die_of_signal(WTERMSIG(status));
			front_exit(f, WEXITSTATUS(status), true, status);
		}
		if (w < 0 && errno != EINTR)
			return;
		if (f->restorer_pid > 0 && waitpid(f->restorer_pid, NULL, WNOHANG) == f->restorer_pid)
			f->restorer_pid = 0;
		/* SIGCHLD and the session signals are blocked: they queue here. */
		struct pollfd p = { f->sigfd, POLLIN, 0 };
		if (poll(&p, 1, -1) < 0 && errno != EINTR)
			return;
		struct signalfd_siginfo si;
		while (read(f->sigfd, &si, sizeof(si)) == (ssize_t)sizeof(si))
			/* A terminal's signal reached the command too (our group,
			 * its group): it reacts, and we exit as it does. */
			if (si.ssi_signo != SIGCHLD && si.ssi_code != SI_KERNEL)
				front_exit(f, 128 + (int)si.ssi_signo, false, 0);
	}
}

/* The restorer's outcome, once it has written the record (bounded: a
 * stopped restorer must not hold the front forever). */
static bool restorer_outcome(struct front *f, struct ptw_restorer_outcome *ret)
{
	if (f->restorer < 0)
		return false;
	struct pollfd p = { f->restorer, POLLIN, 0 };
	bool got = poll(&p, 1, 30000) > 0 &&
		   recv(f->restorer, ret, sizeof(*ret), 0) == (ssize_t)sizeof(*ret);
	close(f->restorer);
	f->restorer = -1;
	return got;
}

static void __attribute__((noreturn)) tracer_ended(struct front *f, int status)
{
	receive(f); /* a mirror notice or a last fd may still be queued */
	int restored = 0, failed = 0;
	failed = ptw_memfds_restore(&f->mem, &restored);
	if (WIFEXITED(status)) {
		if (restored)
			fprintf(stderr, "ptwatch: restored %d bytes the tracer left patched\n", restored);
		_exit(WEXITSTATUS(status));
	}
	int sig = WTERMSIG(status);
	if (sig == f->mirror_sig)
		ptw_die_of_signal(sig);
	/* The restorer writes the record and says what it found; then say
	 * what became of the target, not what we hope. (The kernel lets it go
	 * before anyone can restore: a thread stopped on an int3 then, or one
	 * reaching an int3 before we are done, dies of SIGTRAP.) */
	struct ptw_restorer_outcome out = { 0 };
	if (restorer_outcome(f, &out)) {
		restored += out.restored;
		failed = out.failed;
		f->lost_err = out.lost_err;
		snprintf(f->lost, sizeof(f->lost), "%s", out.lost);
	}
	if (f->live && !out.terminal) /* the tracer died with the table on screen */
		ptw_term_restore();
	pid_t target = ptw_bp_journal_pid();
	bool alive = target && ptw_proc_alive(target);
	fprintf(stderr, "ptwatch: the tracer process died (%s); restored %d patched bytes%s; %s",
		ptw_signame(sig), restored, failed ? " (some could not be)" : "",
		!target ? "nothing was patched"
		: alive ? "the target was still running, untraced"
			: "the target did not survive");
	if (out.xol_left)
		fprintf(stderr, "; %d out-of-line pages stay mapped in it", out.xol_left);
	fputc('\n', stderr);
	/* Killed because it did not answer a signal sent to ptwatch alone:
	 * the command runs on, as ptwatch's detach would have left it (a
	 * terminal's signal reached the command too: it reacts). */
	if (target && f->forced && !f->unanswered_kernel)
		front_exit(f, 128 + f->unanswered_sig, false, 0);
	if (target)
		wait_command(f, target);
	front_exit(f, 128 + sig, false, 0);
}

/* To the tracer, with how it came (a terminal's key, a kill, its sender):
 * the tracer decides whether the command got it too (ptw_attach.h). */
static void forward(struct front *f, const struct signalfd_siginfo *si)
{
	pid_t sender = si->ssi_code == SI_USER || si->ssi_code == SI_TKILL ? (pid_t)si->ssi_pid : 0;
	union sigval v;
	v.sival_ptr = (void *)(uintptr_t)ptw_forwarded_signal_value(si->ssi_code, sender);
	if (sigqueue(f->tracer, (int)si->ssi_signo, v) < 0)
		kill(f->tracer, (int)si->ssi_signo);
	/* the grace period: until the tracer answers (or ends) */
	uint64_t now = ptw_now_ns();
	if (!f->unanswered_ns) {
		f->unanswered_ns = f->progress_ns = now;
		ptw_stuck_progress(f->tracer, &f->progress);
	} else if (!f->again_ns) {
		f->again_ns = now; /* insisting: sooner */
	}
	f->unanswered_sig = (int)si->ssi_signo;
	f->unanswered_kernel = si->ssi_code == SI_KERNEL;
	f->unanswered_count++;
}

/* When the grace period of an unanswered signal ends (0: none runs). */
static uint64_t stuck_deadline(const struct front *f)
{
	if (!f->unanswered_ns)
		return 0;
	if (f->continued_ns)
		return f->continued_ns + PTW_STUCK_CONT_MS * 1000000ull;
	uint64_t d = f->progress_ns + PTW_STUCK_GRACE_MS * 1000000ull;
	if (f->again_ns && f->again_ns + PTW_STUCK_AGAIN_MS * 1000000ull < d)
		d = f->again_ns + PTW_STUCK_AGAIN_MS * 1000000ull;
	return d;
}

/*
 * A session signal the tracer has not answered: if it gets nowhere (its
 * CPU time, reads and writes do not move) for the grace period, or for
 * a second after the user insisted, say where it is stuck and make it let
 * go: continue it if it was stopped (it then answers and detaches
 * cleanly), else kill it (the kernel lets go of every tracee; the
 * restorer puts the bytes back and writes the record; the front says
 * what became of the target once the tracer is reaped).
 */
static void check_stuck(struct front *f, uint64_t now)
{
	uint64_t deadline = stuck_deadline(f);
	if (!deadline)
		return;
	struct ptw_progress p;
	if (!f->continued_ns && !f->again_ns && ptw_stuck_progress(f->tracer, &p) &&
	    (p.cpu != f->progress.cpu || p.io != f->progress.io)) {
		f->progress = p; /* it works: not stuck */
		f->progress_ns = now;
		return;
	}
	if (now < deadline)
		return;
	char where[160];
	ptw_stuck_describe(f->tracer, where, sizeof(where));
	double waited = (double)(now - f->unanswered_ns) / 1e9;
	if (!f->continued_ns && strncmp(where, "stopped (", 9) == 0) {
		fprintf(stderr, "ptwatch: ptw-tracer %d has not answered %s for %.1f s: it is %s; "
				"continuing it\n",
			f->tracer, ptw_signame(f->unanswered_sig), waited, where);
		f->continued_ns = now;
		kill(f->tracer, SIGCONT);
		return;
	}
	fprintf(stderr, "ptwatch: ptw-tracer %d has not answered %s for %.1f s: it is %s; killing "
			"it (the kernel lets go of the target, the restorer puts its bytes back)\n",
		f->tracer, ptw_signame(f->unanswered_sig), waited, where);
	f->forced = true;
	f->unanswered_ns = 0;
	kill(f->tracer, SIGKILL);
}

static void __attribute__((noreturn)) guard(struct front *f)
{
	for (;;) {
		struct pollfd p[4] = { { f->sock, POLLIN, 0 }, { f->sigfd, POLLIN, 0 },
				       { f->key_tty, POLLIN, 0 }, { f->key_w, 0, 0 } };
		/* while a signal waits for an answer: a look at the tracer a second */
		int timeout = -1;
		uint64_t deadline = stuck_deadline(f), now = ptw_now_ns();
		if (deadline) {
			uint64_t next = now + 1000000000ull < deadline ? now + 1000000000ull : deadline;
			timeout = next > now ? (int)((next - now + 999999) / 1000000) : 0;
		}
		if (poll(p, f->key_tty >= 0 ? 4 : 2, timeout) < 0 && errno != EINTR)
			break;
		if (p[0].revents & POLLIN)
			receive(f);
		if (f->exit_early) {
			if (f->exit_value >= 256)
				ptw_die_of_signal(f->exit_value - 256);
			_exit(f->exit_value);
		}
		if (p[1].revents & POLLIN) {
			struct signalfd_siginfo si;
			while (read(f->sigfd, &si, sizeof(si)) == (ssize_t)sizeof(si))
				if (si.ssi_signo == SIGWINCH)
					kill(f->tracer, SIGWINCH);
				else if (si.ssi_signo != SIGCHLD)
					forward(f, &si);
		}
		if (f->key_tty >= 0 && (p[2].revents || p[3].revents))
			pass_keys(f, p[3].revents != 0);
		check_stuck(f, ptw_now_ns());
		int status;
		pid_t w = waitpid(f->tracer, &status, WNOHANG);
		if (w == f->tracer)
			tracer_ended(f, status);
		if (w < 0 && errno == ECHILD)
			break;
		if (f->restorer_pid > 0 && waitpid(f->restorer_pid, NULL, WNOHANG) == f->restorer_pid)
			f->restorer_pid = 0; /* done (the tracer finished) */
	}
	_exit(1);
}

int ptw_guardian_keys_prepare(struct ptw_guardian_opts *o)
{
	int keys[2];
	const char *tty = ttyname(STDERR_FILENO);
	int fd = tty ? open(tty, O_RDONLY | O_NOCTTY | O_CLOEXEC | O_NONBLOCK) : -1;
	if (fd < 0 || pipe2(keys, O_CLOEXEC) < 0) {
		int e = fd < 0 && !tty ? ENOTTY : errno;
		if (fd >= 0)
			close(fd);
		return -e;
	}
	o->key_tty = fd;
	o->key_r = keys[0];
	o->key_w = keys[1];
	sigset_t set;
	sigemptyset(&set);
	sigaddset(&set, SIGWINCH); /* read through signalfds */
	sigaddset(&set, SIGTTIN);  /* reading the terminal in the background: EIO, no stop */
	sigprocmask(SIG_BLOCK, &set, NULL);
	return 0;
}

int ptw_guardian_keys_input(struct ptw_guardian_opts *o, bool split)
{
	int fd = split ? o->key_r : o->key_tty;
	close(split ? o->key_tty : o->key_r);
	close(o->key_w);
	o->key_tty = o->key_w = o->key_r = -1;
	return fd;
}

/* argv[1..] after a new name, for ps. */
static void retitle(char **argv, const char *name)
{
	size_t argc = 0;
	while (argv[argc])
		argc++;
	const char **title = xcalloc(argc + 1, sizeof(*title));
	title[0] = name;
	for (size_t i = 1; i < argc; i++)
		title[i] = xstrdup(argv[i]);
	ptw_set_process_title(argv, title);
	for (size_t i = 1; i < argc; i++)
		free((char *)title[i]);
	free(title);
}

int ptw_guardian_split(const struct ptw_guardian_opts *o)
{
	int ft[2], rt[2], rf[2];
	if (o->key_r >= 0)
		ptw_term_save();
	if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, ft) < 0)
		return -errno;
	/* Without a restorer the split still stands (the front restores). */
	bool with_restorer = socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, rt) == 0;
	if (with_restorer && socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, rf) < 0) {
		close(rt[0]);
		close(rt[1]);
		with_restorer = false;
	}
	pid_t restorer = with_restorer ? fork() : -1;
	if (restorer == 0) {
		close(ft[0]);
		close(ft[1]);
		int keys[] = { o->key_tty, o->key_w, o->key_r };
		for (size_t i = 0; i < PTW_ARRAY_SIZE(keys); i++)
			if (keys[i] >= 0)
				close(keys[i]);
		close(rt[1]);
		close(rf[0]);
		const char *title[] = { "pt-restorer", NULL };
		ptw_set_process_title(o->argv, title);
		ptw_restorer_run(o, rt[0], rf[1]);
	}
	if (with_restorer) {
		close(rt[0]);
		close(rf[1]);
		if (restorer < 0) {
			close(rt[1]);
			close(rf[0]);
			with_restorer = false;
		}
	}

	pid_t parent = getpid();
	pid_t pid = fork();
	if (pid < 0) {
		int e = errno;
		close(ft[0]);
		close(ft[1]);
		if (with_restorer) {
			close(rt[1]); /* the restorer sees the end of an empty record */
			close(rf[0]);
		}
		return -e;
	}
	if (pid == 0) {
		close(ft[0]);
		if (with_restorer)
			close(rf[0]);
		ptw_guardian_tracer_init(ft[1], with_restorer ? rt[1] : -1);
		/* Front gone (even SIGKILL): detach cleanly, as on Ctrl-C. */
		prctl(PR_SET_PDEATHSIG, SIGTERM);
		if (getppid() != parent)
			raise(SIGTERM);
		/* A process group of its own and a name that is not "ptwatch": a
		 * kill of ptwatch's group (kill -9 -- -PGID, timeout -s KILL, a
		 * job's kill) or by name (pkill, pidof) reaches the front only,
		 * and the tracer lets go cleanly. The terminal's signals come
		 * through the front. It writes to the terminal from a
		 * background group: with SIGTTOU blocked, even under `stty
		 * tostop` (the command's mask is its own again at exec). */
		setpgid(0, 0);
		sigset_t ttou;
		sigemptyset(&ttou);
		sigaddset(&ttou, SIGTTOU);
		sigprocmask(SIG_BLOCK, &ttou, NULL);
		retitle(o->argv, "ptw-tracer");
		return 0;
	}
	close(ft[1]);
	if (with_restorer) {
		close(rt[1]);
		/* The restorer makes a stuck tracer let go if we are gone. */
		int pidfd = (int)syscall(SYS_pidfd_open, pid, 0);
		struct ptw_packet pk;
		int tracer_pid = pid;
		ptw_packet_init(&pk, &tracer_pid, sizeof(tracer_pid), pidfd);
		if (pidfd >= 0) {
			while (sendmsg(rf[0], &pk.mh, MSG_NOSIGNAL) < 0 && errno == EINTR)
				;
			close(pidfd);
		}
	}
	/* A command launched by the tracer comes to us if the tracer dies. */
	prctl(PR_SET_CHILD_SUBREAPER, 1);
	struct front f = { .tracer = pid, .sock = ft[0],
			   .restorer = with_restorer ? rf[0] : -1,
			   .restorer_pid = with_restorer ? restorer : 0,
			   .key_tty = o->key_tty, .key_w = o->key_w, .live = o->key_r >= 0 };
	if (o->key_r >= 0)
		close(o->key_r);
	if (f.key_w >= 0)
		fcntl(f.key_w, F_SETFL, O_NONBLOCK);
	if (f.key_tty < 0 && f.key_w >= 0) {
		close(f.key_w);
		f.key_w = -1;
	}
	sigset_t set;
	sigemptyset(&set);
	if (f.live)
		sigaddset(&set, SIGWINCH);
	int sigs[] = PTW_SESSION_SIGNALS;
	for (size_t i = 0; i < PTW_ARRAY_SIZE(sigs); i++)
		sigaddset(&set, sigs[i]);
	sigaddset(&set, SIGCHLD);
	f.sigfd = signalfd(-1, &set, SFD_CLOEXEC | SFD_NONBLOCK);
	guard(&f);
}
