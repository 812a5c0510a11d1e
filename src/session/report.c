/* SPDX-License-Identifier: MIT */
/* `ptwatch report`: a saved document or stream read back and written
 * again as the summary, the document or the Chrome trace; see
 * ptw_session.h. */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/signalfd.h>
#include <unistd.h>

#include "ptw_attach.h"
#include "ptw_live.h"
#include "ptw_locks.h"
#include "ptw_load.h"
#include "ptw_output.h"
#include "ptw_session.h"
#include "ptw_util.h"

/* The exit status of a report whose output was lost (a full disk, an I/O
 * error; a closed pipe is SIGPIPE's): ptwatch(1), EXIT STATUS. */
#define PTW_EXIT_OUTPUT_LOST 3

/* ---- report --live: the recording in the live table ---- */

struct replay {
	const struct ptw_spans *spans;
	struct ptw_span *copies; /* the spans as they were at the moment shown */
	uint64_t start_ns;
};

/* When span sp began for the table: its creation, its start, or (a thread
 * found at an attach) the recording's start. */
static uint64_t span_first(const struct ptw_span *sp, uint64_t start)
{
	return sp->create_ns.set ? sp->create_ns.v : sp->start_ns.set ? sp->start_ns.v : start;
}

/* Every span as it was at time t: not yet made, made but not started,
 * running (open), or ended as it did. */
static void replay_at(void *ctx, struct ptw_live_model *m, uint64_t t)
{
	struct replay *r = ctx;
	size_t k = 0;
	for (size_t i = 0; i < ptw_spans_count(r->spans); i++) {
		const struct ptw_span *sp = ptw_spans_get(r->spans, i);
		if (span_first(sp, r->start_ns) > t)
			continue;
		struct ptw_span *c = &r->copies[k++];
		*c = *sp;
		if (!(sp->end_ns.set && sp->end_ns.v <= t) || !sp->ended) {
			c->ended = false;
			c->status = PTW_STATUS_OPEN;
			c->method = PTW_METHOD_UNKNOWN;
			c->reason = NULL;
			c->end_ns.set = c->value.set = c->cpu.set = false;
			c->open_after_ns.set = c->open_after_ns.set && c->open_after_ns.v <= t;
		}
		if (c->start_ns.set && c->start_ns.v > t)
			c->start_ns.set = false;
		if (c->joined && c->join_call_ns > t)
			c->joined = false;
		if (c->joined && c->join_return_ns.set && c->join_return_ns.v > t)
			c->join_return_ns.set = false;
		ptw_live_model_note(m, c, t);
	}
	/* --locks: what each thread waited for then */
	const struct ptw_locks *lk = ptw_spans_locks(r->spans);
	for (size_t i = 0; i < ptw_locks_count(lk); i++) {
		const struct ptw_wait *w = ptw_locks_get(lk, i);
		if (w->start_ns > t || (w->has_end && w->end_ns <= t))
			continue;
		const struct ptw_live_deadlock *d =
			w->deadlock ? ptw_locks_deadlock(lk, w->deadlock - 1) : NULL;
		ptw_live_model_wait(m, w, true, d && d->id == w->deadlock && d->ns <= t);
	}
}

static int cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
	return (x > y) - (x < y);
}

/* The moments of the recording: every creation, start and end, every
 * wait's beginning and end and every deadlock's moment (--locks), sorted,
 * each once; *ret malloc'd. */
static size_t replay_times(const struct ptw_spans *spans, uint64_t start, uint64_t **ret)
{
	const struct ptw_locks *lk = ptw_spans_locks(spans);
	size_t n = ptw_spans_count(spans), nw = ptw_locks_count(lk),
	       nd = ptw_locks_deadlock_count(lk), k = 0;
	uint64_t *v = xcalloc(3 * n + 2 * nw + nd + 1, sizeof(*v));
	v[k++] = start;
	for (size_t i = 0; i < n; i++) {
		const struct ptw_span *sp = ptw_spans_get(spans, i);
		if (sp->create_ns.set)
			v[k++] = sp->create_ns.v;
		if (sp->start_ns.set)
			v[k++] = sp->start_ns.v;
		if (sp->end_ns.set)
			v[k++] = sp->end_ns.v;
	}
	for (size_t i = 0; i < nw; i++) {
		const struct ptw_wait *w = ptw_locks_get(lk, i);
		v[k++] = w->start_ns;
		if (w->has_end)
			v[k++] = w->end_ns;
	}
	for (size_t i = 0; i < nd; i++)
		v[k++] = ptw_locks_deadlock(lk, i)->ns;
	qsort(v, k, sizeof(*v), cmp_u64);
	size_t m = 0;
	for (size_t i = 0; i < k; i++)
		if (v[i] >= start && (!m || v[i] != v[m - 1]))
			v[m++] = v[i];
	*ret = v;
	return m;
}

static int report_live(const struct ptw_report_cmd *c, struct ptw_loaded *l)
{
	int tty = isatty(STDOUT_FILENO) ? STDOUT_FILENO : isatty(STDERR_FILENO) ? STDERR_FILENO : -1;
	const char *name = tty >= 0 ? ttyname(tty) : NULL;
	int in = name ? open(name, O_RDONLY | O_NOCTTY | O_CLOEXEC) : -1;
	if (in < 0) {
		fprintf(stderr, "ptwatch: report --live needs a terminal\n");
		return 2;
	}
	struct replay r = { .spans = l->report.spans, .start_ns = l->report.start_ns };
	r.copies = xcalloc(ptw_spans_count(r.spans) + 1, sizeof(*r.copies));
	struct ptw_live_replay rp = { .start_ns = r.start_ns, .at = replay_at, .ctx = &r };
	uint64_t *times;
	rp.ntimes = replay_times(r.spans, r.start_ns, &times);
	rp.times = times;
	char *title = xasprintf("ptwatch report %s", c->path);
	struct ptw_live_opts o = { .tty_fd = tty, .input_fd = in, .title = title,
				   .open_timeout_ns = l->report.open_timeout_ns, .replay = &rp };
	struct ptw_live *lv;
	int e = ptw_live_start(&o, &lv);
	if (e < 0) {
		fprintf(stderr, "ptwatch: no live table (TERM=%s: %s)\n",
			getenv("TERM") ? getenv("TERM") : "", strerror(-e));
		/* (in: the table's, closed by it) */
	} else {
		atexit(ptw_live_emergency_end);
		/* Ctrl-C and the like: the terminal back first, then die of it */
		static const int session_sigs[] = PTW_SESSION_SIGNALS;
		sigset_t sigs, old;
		sigemptyset(&sigs);
		for (size_t i = 0; i < PTW_ARRAY_SIZE(session_sigs); i++)
			sigaddset(&sigs, session_sigs[i]);
		sigprocmask(SIG_BLOCK, &sigs, &old);
		int sfd = signalfd(-1, &sigs, SFD_CLOEXEC | SFD_NONBLOCK);
		int sig = 0;
		while (!sig) {
			uint64_t now = ptw_now_ns();
			if (ptw_live_tick(lv, now) == PTW_LIVE_QUIT)
				break;
			uint64_t next = ptw_live_next(lv);
			struct pollfd p[2] = { { .fd = ptw_live_wake_fd(lv), .events = POLLIN },
					       { .fd = sfd, .events = POLLIN } };
			int ms = !next ? -1 : next <= now ? 0 : (int)((next - now) / 1000000u) + 1;
			if (poll(p, sfd >= 0 ? 2 : 1, ms) < 0 && errno != EINTR)
				break;
			struct signalfd_siginfo si;
			if (sfd >= 0 && (p[1].revents & POLLIN) &&
			    read(sfd, &si, sizeof(si)) == (ssize_t)sizeof(si))
				sig = (int)si.ssi_signo;
		}
		ptw_live_end(lv);
		if (sfd >= 0)
			close(sfd);
		if (sig)
			ptw_die_of_signal(sig);
		sigprocmask(SIG_SETMASK, &old, NULL);
	}
	free(title);
	free(times);
	free(r.copies);
	return e < 0 ? 1 : 0;
}

int ptw_report_cmd(const struct ptw_report_cmd *c)
{
	const char *path = c->path;
	int fd = strcmp(path, "-") ? open(path, O_RDONLY | O_CLOEXEC) : STDIN_FILENO;
	if (fd < 0) {
		fprintf(stderr, "ptwatch: cannot open %s: %s\n", path, strerror(errno));
		return 1;
	}
	struct ptw_loaded *l;
	char err[640];
	bool convert = c->format != PTW_OUTPUT_TEXT;
	int r = ptw_load_fd(fd, !convert && !c->live, c->filter ? &c->filter->spans : NULL, &l, err,
			    sizeof(err));
	if (fd != STDIN_FILENO)
		close(fd);
	if (r < 0) {
		fprintf(stderr, "ptwatch: %s: %s\n", path, err);
		return 1;
	}
	if (c->live) {
		r = report_live(c, l);
		ptw_loaded_free(l);
		return r;
	}
	int out_fd = -1;
	if (c->output) {
		out_fd = open(c->output, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
		if (out_fd < 0) {
			fprintf(stderr, "ptwatch: cannot open %s: %s\n", c->output, strerror(errno));
			ptw_loaded_free(l);
			return 1;
		}
	}
	struct ptw_buf out = { 0 };
	const char *what;
	int to = out_fd >= 0 ? out_fd : STDOUT_FILENO;
	r = 0;
	/* (a trace or document written as it is made: not held whole) */
	if (c->format == PTW_OUTPUT_CHROME) {
		r = ptw_report_chrome_fd(&l->report, to);
		what = "the trace";
	} else if (convert) {
		r = ptw_report_json_fd(&l->report, to);
		what = "the document";
	} else if (l->report.snapshot) {
		ptw_text_snapshot(&out, &l->report); /* what --snapshot printed */
		what = "the report";
	} else {
		l->report.filter = c->filter ? &c->filter->spans : NULL; /* --object */
		ptw_text_summary(&out, &l->report); /* the summary a live session printed */
		what = "the summary";
	}
	ptw_loaded_free(l);
	if (r == 0)
		r = ptw_write_all(to, out.p, out.len);
	ptw_buf_free(&out);
	if (!r && out_fd >= 0 && close(out_fd) < 0)
		r = -errno;
	else if (out_fd >= 0 && r < 0)
		close(out_fd);
	if (r < 0) {
		/* lost: said in one line, and a status of its own */
		fprintf(stderr, "ptwatch: %s of %s was lost: cannot write %s: %s\n", what, path,
			c->output ? c->output : "standard output", strerror(-r));
		return PTW_EXIT_OUTPUT_LOST;
	}
	return 0;
}
