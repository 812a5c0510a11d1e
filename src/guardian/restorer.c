/* SPDX-License-Identifier: MIT */
/*
 * The restorer: outlives the tracer and the front (a session of its own, a
 * name they do not share), keeps a copy of the session record, and when
 * the tracer ends without its end mark, undoes what it left in the target
 * and writes what it had seen. See ptw_guardian.h.
 */
#define _GNU_SOURCE
#include "guardian_int.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "config.h"
#include "ptw_attach.h"
#include "ptw_breakpoints.h"
#include "ptw_record.h"
#include "ptw_session.h"
#include "ptw_warnings.h"

#define PAGE 4096u
#define MAX_XOL 64
#define PACKET_MAX (64u * 1024)

struct restorer {
	struct ptw_memfds mem;
	struct ptw_record_reader *reader;
	struct ptw_session *session; /* the tracer's, replayed */
	const struct ptw_report *header; /* the latest, owned by the reader */
	bool ended;			 /* the tracer's end mark */
	bool broken;			 /* the record made no sense: stop keeping it */
};

static void on_event(void *ctx, const struct ptw_event *ev)
{
	struct restorer *r = ctx;
	ptw_session_replay(r->session, ev);
}

static void on_report(void *ctx, const struct ptw_report *rep)
{
	struct restorer *r = ctx;
	r->header = rep;
}

static void on_end(void *ctx)
{
	struct restorer *r = ctx;
	r->ended = true;
	/* The tracer wrote its outputs and will put everything back itself:
	 * nothing is left to say here, and a reader of the user's stdout or
	 * stderr (a pipe) must not wait for this process to end. */
	ptw_stdio_to_null();
}

static const struct ptw_record_handlers handlers = { on_event, on_report, on_end };

/* ---- the front gone, the tracer stuck ---- */

/*
 * The front is ptwatch's way of ending a session. If it is gone (SIGKILL:
 * `timeout -s KILL`) the tracer got SIGTERM (PR_SET_PDEATHSIG) and lets
 * go; if it does not end and gets nowhere for PTW_STUCK_GRACE_MS, no one
 * else is left to make it: say where it is stuck, continue it if it was
 * stopped, else kill it (then the bytes go back as for any tracer death).
 */
struct watch {
	int front;	    /* the socket to the front, -1 once it is gone */
	int tracer_fd;	    /* a pidfd of the tracer (the front sends it), or -1 */
	pid_t tracer;
	uint64_t gone_ns;   /* the front went then (0: it is there) */
	uint64_t progress_ns, continued_ns;
	struct ptw_progress progress;
	bool killed;
};

/* The front's packet: the tracer's pidfd; or its end. */
static void front_packet(struct watch *w)
{
	union {
		char b[CMSG_SPACE(sizeof(int))];
		struct cmsghdr align;
	} u;
	int pid = 0;
	struct iovec iov = { &pid, sizeof(pid) };
	struct msghdr mh = { .msg_iov = &iov, .msg_iovlen = 1, .msg_control = u.b,
			     .msg_controllen = sizeof(u.b) };
	ssize_t n = recvmsg(w->front, &mh, MSG_DONTWAIT | MSG_CMSG_CLOEXEC);
	if (n < 0 && (errno == EAGAIN || errno == EINTR))
		return;
	if (n <= 0) { /* the front is gone */
		w->front = -1;
		w->gone_ns = w->progress_ns = ptw_now_ns();
		if (w->tracer)
			ptw_stuck_progress(w->tracer, &w->progress);
		return;
	}
	struct cmsghdr *c = CMSG_FIRSTHDR(&mh);
	if (c && c->cmsg_level == SOL_SOCKET && c->cmsg_type == SCM_RIGHTS) {
		if (w->tracer_fd >= 0)
			close(w->tracer_fd);
		memcpy(&w->tracer_fd, CMSG_DATA(c), sizeof(int));
		w->tracer = pid;
	}
}

static void watch_tracer(struct watch *w, uint64_t now)
{
	if (!w->gone_ns || !w->tracer || w->killed)
		return;
	struct ptw_progress p;
	if (!ptw_stuck_progress(w->tracer, &p))
		return; /* gone: the end of its socket comes */
	if (!w->continued_ns && (p.cpu != w->progress.cpu || p.io != w->progress.io)) {
		w->progress = p;
		w->progress_ns = now;
		return;
	}
	uint64_t deadline = w->continued_ns ? w->continued_ns + PTW_STUCK_CONT_MS * 1000000ull
					    : w->progress_ns + PTW_STUCK_GRACE_MS * 1000000ull;
	if (now < deadline)
		return;
	char where[160];
	ptw_stuck_describe(w->tracer, where, sizeof(where));
	bool stopped = strncmp(where, "stopped (", 9) == 0 && !w->continued_ns;
	fprintf(stderr, "ptwatch: the front is gone and ptw-tracer %d has not ended for %.1f s: it "
			"is %s; %s\n",
		w->tracer, (double)(now - w->gone_ns) / 1e9, where,
		stopped ? "continuing it"
			: "killing it (the kernel lets go of the target, its bytes go back)");
	int sig = stopped ? SIGCONT : SIGKILL;
	if (w->tracer_fd >= 0) /* that process, even if its pid were reused */
		syscall(SYS_pidfd_send_signal, w->tracer_fd, sig, NULL, 0);
	else
		kill(w->tracer, sig);
	if (stopped)
		w->continued_ns = now;
	else
		w->killed = true;
}

/* Reads packets until the tracer's end of the socket is closed (it exited,
 * however it did); meanwhile, watches that the front is there. */
static void keep_record(struct restorer *r, int sock, struct watch *w)
{
	char *buf = xmalloc(PACKET_MAX);
	for (;;) {
		struct pollfd pf[2] = { { sock, POLLIN, 0 }, { w->front, POLLIN, 0 } };
		int timeout = w->gone_ns && !w->killed ? 1000 : -1;
		if (poll(pf, w->front >= 0 ? 2 : 1, timeout) < 0 && errno != EINTR)
			break;
		if (w->front >= 0 && pf[1].revents)
			front_packet(w);
		/* (after its end mark the tracer closes what is left on its own:
		 * a front that ended then was told to, ptw_guardian_exit_early) */
		if (!r->ended)
			watch_tracer(w, ptw_now_ns());
		if (!(pf[0].revents & (POLLIN | POLLHUP | POLLERR)))
			continue;
		union {
			char b[CMSG_SPACE(sizeof(int))];
			struct cmsghdr align;
		} u;
		struct iovec iov = { buf, PACKET_MAX };
		struct msghdr mh = { .msg_iov = &iov, .msg_iovlen = 1, .msg_control = u.b,
				     .msg_controllen = sizeof(u.b) };
		ssize_t n = recvmsg(sock, &mh, MSG_CMSG_CLOEXEC | MSG_DONTWAIT);
		if (n < 0 && (errno == EINTR || errno == EAGAIN))
			continue;
		if (n <= 0)
			break;
		struct cmsghdr *c = CMSG_FIRSTHDR(&mh);
		if (c && c->cmsg_level == SOL_SOCKET && c->cmsg_type == SCM_RIGHTS) {
			int fd;
			memcpy(&fd, CMSG_DATA(c), sizeof(int));
			ptw_memfds_put(&r->mem, fd);
			continue; /* its one byte is not record */
		}
		if (!r->broken && ptw_record_feed(r->reader, buf, (size_t)n, &handlers, r) < 0)
			r->broken = true;
	}
	free(buf);
}

/* ---- the out-of-line pages ---- */

static void on_stop(void *ctx, struct ptw_stop *st)
{
	(void)ctx;
	if (st->kind == PTW_STOP_SIGNAL)
		st->lwp->resume_sig = st->sig; /* theirs: delivered at detach */
}

static bool in_pages(uint64_t a, const uint64_t *pages, size_t n)
{
	for (size_t i = 0; i < n; i++)
		if (a >= pages[i] && a < pages[i] + PAGE)
			return true;
	return false;
}

/* Could a thread still come back into a page: its rip there, or a word of
 * its stack pointing there (a signal frame)? As the tracer's detach does. */
static bool pages_referenced(struct ptw_proc *p, const uint64_t *pages, size_t n)
{
	enum { SCAN = 64 * 1024 };
	uint64_t *buf = xmalloc(4096);
	bool found = false;
	size_t it = 0;
	void *v;
	while (!found && ptw_map_next(p->lwps, &it, NULL, &v)) {
		struct ptw_lwp *l = v;
		struct user_regs_struct *regs;
		if (l->state == PTW_LWP_GONE)
			continue;
		if (l->state != PTW_LWP_STOPPED || ptw_getregs(p, l, &regs) < 0) {
			found = true;
			break;
		}
		if (in_pages(regs->rip, pages, n)) {
			found = true;
			break;
		}
		for (size_t off = 0; off < SCAN && !found; off += 4096) {
			if (ptw_mem_read(p, (regs->rsp & ~4095ull) + off, buf, 4096) < 0)
				break;
			for (size_t k = 0; k < 4096 / 8 && !found; k++)
				found = in_pages(buf[k], pages, n);
		}
	}
	free(buf);
	return found;
}

static struct ptw_lwp *host_of(struct ptw_proc *p)
{
	struct ptw_lwp *main_lwp = ptw_lwp_get(p, p->pid);
	if (main_lwp && !main_lwp->group_stopped && ptw_lwp_injectable(main_lwp))
		return main_lwp;
	size_t it = 0;
	void *v;
	while (ptw_map_next(p->lwps, &it, NULL, &v)) {
		struct ptw_lwp *l = v;
		if (l->tgid == p->pid && !l->group_stopped && ptw_lwp_injectable(l))
			return l;
	}
	return NULL;
}

/*
 * The tracer mapped pages for out-of-line execution and died before it
 * unmapped them. The bytes are back, so no thread enters a page any more;
 * trace the target for a moment to run munmap in it, as the tracer's detach
 * would have. Returns how many pages stay mapped; *why says why.
 */
static int unmap_pages(pid_t pid, const char **why)
{
	uint64_t pages[MAX_XOL], insn = 0;
	size_t n = ptw_bp_journal_xol(pid, pages, MAX_XOL, &insn);
	if (!n)
		return 0;
	*why = "the target could not be traced";
	/* The kernel lets go of the tracees only after the tracer's files are
	 * closed, which is how we learnt of its end: seize again until it has. */
	struct ptw_proc *p = NULL;
	struct ptw_seize_info info;
	int r = -EBUSY;
	uint64_t deadline = ptw_now_ns() + 2000000000ull;
	while (ptw_now_ns() < deadline) {
		r = ptw_seize(pid, &p, &info);
		if (r != -EBUSY && r != -EPERM)
			break;
		struct pollfd none;
		poll(&none, 0, 2);
	}
	if (r < 0)
		return (int)n;
	int left = (int)n;
	if (ptw_stop_all(p, 1000, on_stop, NULL) != 0) {
		*why = "a thread did not stop";
	} else if (pages_referenced(p, pages, n)) {
		*why = "a thread may still return into one (a signal frame)";
	} else {
		struct ptw_lwp *host = host_of(p);
		*why = "no thread could run munmap";
		for (size_t i = 0; host && i < n; i++) {
			uint64_t args[6] = { pages[i], PAGE, 0, 0, 0, 0 };
			int64_t ret = -1;
			if (ptw_inject_syscall(p, host, insn, SYS_munmap, args, &ret) == 0 && ret == 0) {
				ptw_bp_journal_xol_unmapped(pid, pages[i]);
				left--;
			}
		}
	}
	size_t it = 0;
	void *v;
	while (ptw_map_next(p->lwps, &it, NULL, &v)) {
		struct ptw_lwp *l = v;
		if (l->state == PTW_LWP_STOPPED)
			ptw_detach_lwp(p, l);
	}
	ptw_proc_free(p);
	return left;
}

/* ---- the record, written ---- */

/* The session's end, as the tracer would have written it, with what the
 * record holds. --json-lines: the tracer wrote the lines of every span it
 * retired; the same record retires the same spans here (the engine is
 * deterministic), so what is still held is what the stream lacks. */
static void write_record(struct restorer *r, const struct ptw_restorer_outcome *out,
			 const char *xol_why)
{
	uint64_t now = ptw_now_ns();
	ptw_session_begin(r->session, r->header);
	struct ptw_event ev = ptw_event_init(PTW_EV_TRACER_DIED, now, r->header->pid);
	ev.pid = r->header->pid;
	ptw_session_replay(r->session, &ev);

	struct ptw_report rep = *r->header;
	rep.tool_version = PTW_VERSION;
	rep.end_ns = now;
	rep.end_reason = "tracer_died";
	struct ptw_warning *w = xcalloc(rep.nwarnings + 2, sizeof(*w));
	memcpy(w, rep.warnings, rep.nwarnings * sizeof(*w));
	size_t nw = rep.nwarnings;
	w[nw].code = xstrdup(ptw_warning_code(PTW_W_TRACER_DIED));
	w[nw++].message = xasprintf(
		"ptwatch's tracer process ended before it finished; this record holds what it saw "
		"until then (spans still open while traced are unmatched, reason tracer_died); %d "
		"patched bytes "
		"restored%s, process %d %s",
		out->restored, out->failed ? " (some could not be)" : "", rep.pid,
		out->alive ? "still runs, untraced" : "is gone");
	if (out->xol_left) {
		w[nw].code = xstrdup(ptw_warning_code(PTW_W_XOL_PAGE_LEFT));
		w[nw++].message = xasprintf("%d out-of-line pages (r-x, 4 KiB each) stay mapped in "
					    "%d: %s", out->xol_left, rep.pid, xol_why);
	}
	rep.warnings = w;
	rep.nwarnings = nw;
	/* -f: the processes as last recorded (each with what was known then). */
	const struct ptw_process *procs;
	size_t nprocs = ptw_record_processes(r->reader, &procs);
	if (nprocs) {
		rep.processes = procs;
		rep.nprocesses = nprocs;
	}
	ptw_session_end(r->session, &rep);
	for (size_t i = r->header->nwarnings; i < nw; i++) {
		free(w[i].code);
		free(w[i].message);
	}
	free(w);
}

void ptw_restorer_run(const struct ptw_guardian_opts *o, int from_tracer, int to_front)
{
	/* Only SIGKILL ends it early: it is the last line of defence. */
	static const int sigs[] = { SIGINT, SIGTERM, SIGHUP, SIGPIPE, SIGQUIT, SIGTSTP, SIGTTOU,
				    SIGTTIN };
	for (size_t i = 0; i < PTW_ARRAY_SIZE(sigs); i++)
		signal(sigs[i], SIG_IGN);
	setsid();
	int null = open("/dev/null", O_RDONLY | O_CLOEXEC);
	if (null >= 0) {
		dup2(null, STDIN_FILENO);
		close(null);
	}
	/* The tracer's session again, its outputs resumed: they write only
	 * the end, if it comes to it (--json-lines: spans retired as the
	 * tracer's are, so that memory stays bounded here too). */
	struct ptw_session_opts so = o->session;
	so.resume = true;
	so.record = false;
	so.filter = NULL;
	struct restorer r = { .reader = ptw_record_reader_new(), .session = ptw_session_new(&so) };
	struct watch w = { .front = to_front, .tracer_fd = -1 };
	keep_record(&r, from_tracer, &w);
	close(from_tracer);
	if (r.ended)
		_exit(0);

	/* The tracer died. Bytes first: every millisecond counts. */
	struct ptw_restorer_outcome out = { 0 };
	out.failed = ptw_memfds_restore(&r.mem, &out.restored);
	pid_t pids[JOURNAL_PIDS_MAX];
	size_t npids = ptw_bp_journal_pids(pids, JOURNAL_PIDS_MAX);
	/* (the kernel path patches nothing: the journal has no process) */
	pid_t pid = npids ? pids[0] : r.header ? r.header->pid : 0;
	out.alive = pid && ptw_proc_alive(pid);
	const char *xol_why = "";
	for (size_t i = 0; i < npids; i++)
		if (ptw_proc_alive(pids[i]))
			out.xol_left += unmap_pages(pids[i], &xol_why);
	if (o->key_r >= 0) { /* the summary must not land on the table's screen */
		ptw_term_restore();
		out.terminal = 1;
	}
	if (r.header && !r.broken)
		write_record(&r, &out, xol_why);
	const char *lost;
	if (ptw_session_lost(r.session, &lost, &out.lost_err)) { /* the front says it */
		char *what = ptw_escape_str(lost);
		snprintf(out.lost, sizeof(out.lost), "%s", what);
		free(what);
	}
	if (w.front < 0) { /* no front to say it: the restorer does */
		fprintf(stderr, "ptwatch: the tracer process ended before it finished; restored %d "
				"patched bytes%s; %s\n",
			out.restored, out.failed ? " (some could not be)" : "",
			!pid	    ? "nothing was patched"
			: out.alive ? "the target was still running, untraced"
				    : "the target did not survive");
		_exit(0);
	}
	while (send(to_front, &out, sizeof(out), MSG_NOSIGNAL) < 0 && errno == EINTR)
		;
	_exit(0);
}
