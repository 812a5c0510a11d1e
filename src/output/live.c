/* SPDX-License-Identifier: MIT */
/*
 * The live table's screen (see ptw_live.h): ncurses on the terminal, keys
 * from an fd, and nothing that waits. The tracer loop calls ptw_live_tick()
 * when ptw_live_next() is due or ptw_live_wake_fd() is readable.
 *
 * Where it runs: in the tracer, which has a process group of its own
 * (ptw_guardian.h) and so is not the terminal's foreground group. It may
 * write to the terminal and change its modes all the same because SIGTTOU
 * is blocked there (the kernel lets such a process through), but it cannot
 * read it (SIGTTIN): the front, which is in the foreground group, reads the
 * keys and passes them through a pipe (input_fd). The terminal sends
 * SIGWINCH to its foreground group only: the front passes that on too, and
 * here it arrives through a signalfd (SIGWINCH is blocked in every ptwatch
 * process; a launched command gets its own mask back at exec).
 */
#define _GNU_SOURCE
#include <curses.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/signalfd.h>
#include <sys/stat.h>
#include <termios.h>
#include <unistd.h>

#include "ptw_live.h"
#include "ptw_util.h"

#define SECOND_NS 1000000000ull
#define FILTER_MAX 64

struct ptw_live {
	SCREEN *scr;
	FILE *out, *in;
	int tty_fd;
	int winch_fd;
	int epfd;
	char *title;
	uint64_t open_timeout_ns;
	bool trace; /* --trace: the function view, the CALL column */
	struct ptw_live_model *model;
	struct ptw_live_query q;
	char filter[FILTER_MAX + 1];
	bool editing; /* typing the filter */
	bool paused;
	/* paused: what was shown at the pause, and when (a key that redraws
	 * shows it again, sorted, filtered, scrolled: nothing new) */
	struct ptw_live_model *frozen;
	uint64_t paused_ns;
	bool force;   /* draw at the next tick, whatever the rate */
	size_t scroll;
	uint64_t last_draw;
	size_t last_rows; /* rows shown at the last draw (ages move) */
	bool has_color;
	int pipe_r;	     /* what ncurses wrote, for the terminal */
	struct ptw_buf pend; /* read from it, not yet taken by the terminal */
	bool waiting_out;    /* the terminal's fd is in epfd for EPOLLOUT */
	struct termios saved; /* the terminal's modes before the table */
	int stderr_fd, held_fd; /* hold_stderr: standard error, and what it held */
	/* report --live: the recording, the moment shown (its index), the
	 * time being typed (t) */
	const struct ptw_live_replay *replay;
	size_t at;
	bool typing_time;
	char timebuf[24];
};

/* report --live: the model as the recording was at moment i. */
static void replay_to(struct ptw_live *l, size_t i)
{
	if (!l->replay || !l->replay->ntimes)
		return;
	l->at = i < l->replay->ntimes ? i : l->replay->ntimes - 1;
	ptw_live_model_free(l->model);
	l->model = ptw_live_model_new();
	l->replay->at(l->replay->ctx, l->model, l->replay->times[l->at]);
	l->scroll = 0;
}

/* report --live: the first moment at or after t seconds from the start. */
static void replay_to_time(struct ptw_live *l, const char *text)
{
	char *end;
	double s = strtod(text, &end);
	if (end == text || s < 0 || !l->replay->ntimes)
		return;
	uint64_t t = l->replay->start_ns + (uint64_t)(s * 1e9);
	size_t i = 0;
	while (i + 1 < l->replay->ntimes && l->replay->times[i] < t)
		i++;
	replay_to(l, i);
}

/* A live thread's time on a CPU so far (/proc's schedstat). */
static bool cpu_of(void *ctx, pid_t pid, pid_t tid, uint64_t *on_cpu_ns)
{
	(void)ctx;
	uint64_t runnable;
	return pid > 0 && ptw_proc_thread_schedstat(-1, pid, tid, on_cpu_ns, &runnable) == 0;
}

/* A thread's comm from /proc (no stop: a read of the kernel's copy). */
static bool comm_of(void *ctx, pid_t tid, char *buf, size_t size)
{
	(void)ctx;
	char path[48];
	snprintf(path, sizeof(path), "/proc/%d/comm", (int)tid);
	FILE *f = fopen(path, "re");
	if (!f)
		return false;
	char raw[64];
	size_t n = fread(raw, 1, sizeof(raw) - 1, f);
	fclose(f);
	if (!n)
		return false;
	raw[n] = 0;
	if (raw[n - 1] == '\n') /* the file's; a newline in the name stays */
		raw[n - 1] = 0;
	struct ptw_buf b = { 0 };
	ptw_buf_put_escaped(&b, raw);
	snprintf(buf, size, "%s", b.p ? b.p : "");
	ptw_buf_free(&b);
	return true;
}

/* The one table that has the terminal, for ptw_live_emergency_end. */
static struct ptw_live *active;

static void close_fd(int *fd)
{
	if (*fd >= 0)
		close(*fd);
	*fd = -1;
}

/* ---- descriptors ---- */

static bool same_tty(int fd, const struct stat *tty)
{
	struct stat st;
	return isatty(fd) && fstat(fd, &st) == 0 && st.st_rdev == tty->st_rdev;
}

void ptw_live_command_fds(int tty_fd, int keep[3])
{
	struct stat tty;
	int null = open("/dev/null", O_RDWR | O_CLOEXEC);
	bool ok = null >= 0 && fstat(tty_fd, &tty) == 0;
	for (int fd = 0; fd < 3; fd++) {
		keep[fd] = -1;
		if (ok && same_tty(fd, &tty)) {
			keep[fd] = fcntl(fd, F_DUPFD_CLOEXEC, 3);
			dup2(null, fd);
		}
	}
	if (null >= 0)
		close(null);
}

void ptw_live_restore_fds(int keep[3])
{
	for (int fd = 0; fd < 3; fd++)
		if (keep[fd] >= 0) {
			dup2(keep[fd], fd);
			close(keep[fd]);
			keep[fd] = -1;
		}
}

/* Standard error into a memory file while the table shows. */
static void hold_stderr(struct ptw_live *l)
{
	l->held_fd = memfd_create("ptwatch-stderr", MFD_CLOEXEC);
	l->stderr_fd = l->held_fd >= 0 ? fcntl(STDERR_FILENO, F_DUPFD_CLOEXEC, 3) : -1;
	if (l->stderr_fd >= 0)
		dup2(l->held_fd, STDERR_FILENO);
	else
		close_fd(&l->held_fd);
}

/* Standard error as it was, and what it held written there. */
static void release_stderr(struct ptw_live *l)
{
	if (l->stderr_fd < 0)
		return;
	dup2(l->stderr_fd, STDERR_FILENO);
	close_fd(&l->stderr_fd);
	char buf[4096];
	ssize_t n;
	off_t off = 0;
	while ((n = pread(l->held_fd, buf, sizeof(buf), off)) > 0) {
		ptw_write_all(STDERR_FILENO, buf, (size_t)n);
		off += n;
	}
	close_fd(&l->held_fd);
}

/* ---- the output: ncurses writes into a pipe, we pass it on ---- */

/* Moves what ncurses wrote on to the terminal, as much as it takes now
 * (wait_ms 0), or until it took everything or wait_ms passed. While some is
 * left, no new frame is drawn, and the wake fd also says when the terminal
 * takes more. */
static void pass_output(struct ptw_live *l, int wait_ms)
{
	uint64_t until = ptw_now_ns() + (uint64_t)wait_ms * 1000000u;
	for (;;) {
		char buf[65536];
		ssize_t n;
		while ((n = read(l->pipe_r, buf, sizeof(buf))) > 0)
			ptw_buf_add(&l->pend, buf, (size_t)n);
		size_t done = 0;
		while (done < l->pend.len) {
			n = write(l->tty_fd, l->pend.p + done, l->pend.len - done);
			if (n > 0)
				done += (size_t)n;
			else if (n < 0 && errno == EINTR)
				continue;
			else
				break; /* EAGAIN: the terminal takes no more now */
		}
		memmove(l->pend.p, l->pend.p + done, l->pend.len - done);
		l->pend.len -= done;
		uint64_t now = ptw_now_ns();
		if (!l->pend.len || now >= until)
			break;
		struct pollfd pf = { l->tty_fd, POLLOUT, 0 };
		poll(&pf, 1, (int)((until - now) / 1000000u) + 1);
	}
	bool want = l->pend.len > 0;
	if (want != l->waiting_out && l->epfd >= 0) {
		struct epoll_event ev = { .events = EPOLLOUT };
		ev.data.fd = l->tty_fd;
		epoll_ctl(l->epfd, want ? EPOLL_CTL_ADD : EPOLL_CTL_DEL, l->tty_fd, &ev);
		l->waiting_out = want;
	}
}

/* The terminal's modes for the table: keys one by one without echo, and
 * the terminal's signal keys (Ctrl-C, Ctrl-\) as they are, but without
 * flushing the output queue (NOFLSH): a frame cut in the middle of an
 * escape sequence would swallow what comes next, the normal screen's
 * sequence at the end included. Ctrl-S (IXON) would stop the output;
 * Ctrl-Z would stop the front and leave the table drawing over the shell:
 * both off while the table shows. */
static void table_modes(struct ptw_live *l)
{
	struct termios tio = l->saved;
	tio.c_lflag &= ~(tcflag_t)(ICANON | ECHO);
	tio.c_lflag |= NOFLSH;
	tio.c_iflag &= ~(tcflag_t)(IXON | IXOFF | ICRNL);
	tio.c_cc[VMIN] = 1;
	tio.c_cc[VTIME] = 0;
	tio.c_cc[VSUSP] = _POSIX_VDISABLE;
	tcsetattr(l->tty_fd, TCSANOW, &tio);
}

static void size_from_tty(struct ptw_live *l)
{
	struct winsize ws;
	if (ioctl(l->tty_fd, TIOCGWINSZ, &ws) == 0 && ws.ws_row && ws.ws_col &&
	    (ws.ws_row != LINES || ws.ws_col != COLS))
		resizeterm(ws.ws_row, ws.ws_col);
}

int ptw_live_start(const struct ptw_live_opts *o, struct ptw_live **ret)
{
	struct ptw_live *l = xcalloc(1, sizeof(*l));
	int p[2] = { -1, -1 };
	l->winch_fd = l->epfd = l->pipe_r = l->stderr_fd = l->held_fd = -1;
	int infd = o->input_fd;
	/* A description of our own, non-blocking (fd 2's is shared with the
	 * shell and the command) */
	const char *tty = ttyname(o->tty_fd);
	l->tty_fd = tty ? open(tty, O_WRONLY | O_NOCTTY | O_NONBLOCK | O_CLOEXEC) : -1;
	if (l->tty_fd < 0 || tcgetattr(l->tty_fd, &l->saved) < 0 || pipe2(p, O_CLOEXEC) < 0)
		goto fail;
	l->pipe_r = p[0];
	fcntl(p[0], F_SETFL, O_NONBLOCK);
	fcntl(p[1], F_SETPIPE_SZ, 1 << 20); /* a whole frame, whatever the size */
	l->out = fdopen(p[1], "w");
	if (!l->out)
		goto fail;
	p[1] = -1;
	l->in = fdopen(infd, "r");
	if (!l->in)
		goto fail;
	infd = -1;
	sigset_t winch;
	sigemptyset(&winch);
	sigaddset(&winch, SIGWINCH);
	sigprocmask(SIG_BLOCK, &winch, NULL);
	l->winch_fd = signalfd(-1, &winch, SFD_CLOEXEC | SFD_NONBLOCK);
	l->epfd = epoll_create1(EPOLL_CLOEXEC);
	if (l->winch_fd < 0 || l->epfd < 0)
		goto fail;
	struct epoll_event ev = { .events = EPOLLIN };
	ev.data.fd = fileno(l->in);
	epoll_ctl(l->epfd, EPOLL_CTL_ADD, fileno(l->in), &ev);
	ev.data.fd = l->winch_fd;
	epoll_ctl(l->epfd, EPOLL_CTL_ADD, l->winch_fd, &ev);

	/* ncurses writes into the pipe, so it cannot set the terminal's modes
	 * nor read its size: we do (table_modes, size_from_tty). */
	l->scr = newterm(NULL, l->out, l->in);
	if (!l->scr) {
		errno = ENOTTY;
		goto fail;
	}
	set_term(l->scr);
	table_modes(l);
	size_from_tty(l);
	nonl();
	keypad(stdscr, TRUE);
	nodelay(stdscr, TRUE);
	typeahead(-1);
	set_escdelay(10);
	curs_set(0);
	if (has_colors() && start_color() == OK) {
		use_default_colors();
		init_pair(1, COLOR_RED, -1);
		init_pair(2, COLOR_YELLOW, -1);
		l->has_color = true;
	}
	l->title = ptw_escape_str(o->title ? o->title : "ptwatch"); /* names the target's */
	l->open_timeout_ns = o->open_timeout_ns;
	l->replay = o->replay;
	l->trace = o->trace;
	l->model = ptw_live_model_new();
	l->q.view = PTW_LIVE_THREADS;
	l->q.sort = PTW_LIVE_SORT_TID;
	l->q.filter = l->filter;
	l->q.name_of = l->replay ? NULL : comm_of; /* (a recording's: its own) */
	l->q.cpu_of = l->replay ? NULL : cpu_of;
	if (l->replay)
		replay_to(l, l->replay->ntimes ? l->replay->ntimes - 1 : 0); /* the end first */
	l->force = true;
	if (o->hold_stderr)
		hold_stderr(l);
	active = l;
	*ret = l;
	return 0;
fail:;
	int e = errno ? errno : EIO;
	if (infd >= 0)
		close(infd);
	if (l->in)
		fclose(l->in);
	if (l->out)
		fclose(l->out);
	close_fd(&p[1]);
	close_fd(&l->pipe_r);
	close_fd(&l->tty_fd);
	close_fd(&l->winch_fd);
	close_fd(&l->epfd);
	free(l);
	return -e;
}

/* The terminal as it was: the normal screen (ncurses' endwin), then the
 * modes. The last bytes may wait for the terminal, not for long. */
static void give_back(struct ptw_live *l)
{
	if (!l->scr)
		return;
	set_term(l->scr);
	endwin();
	fflush(l->out);
	pass_output(l, 2000);
	tcsetattr(l->tty_fd, TCSANOW, &l->saved);
}

void ptw_live_end(struct ptw_live *l)
{
	if (!l)
		return;
	give_back(l);
	if (l->scr)
		delscreen(l->scr);
	l->scr = NULL;
	if (active == l)
		active = NULL;
	fclose(l->in);
	fclose(l->out);
	close_fd(&l->pipe_r);
	close_fd(&l->tty_fd);
	close_fd(&l->winch_fd);
	close_fd(&l->epfd);
	ptw_buf_free(&l->pend);
	release_stderr(l);
	ptw_live_model_free(l->model);
	ptw_live_model_free(l->frozen);
	free(l->title);
	free(l);
}

void ptw_live_emergency_end(void)
{
	if (active) {
		give_back(active);
		release_stderr(active);
	}
	active = NULL;
}

struct ptw_live_model *ptw_live_get_model(struct ptw_live *l)
{
	return l->model;
}

int ptw_live_wake_fd(const struct ptw_live *l)
{
	return l->epfd;
}

uint64_t ptw_live_next(const struct ptw_live *l)
{
	if (l->pend.len)
		return 0; /* the wake fd says when the terminal takes more */
	if (l->force) /* a key, a resize: soon, but not for every key of a burst */
		return l->last_draw ? l->last_draw + PTW_LIVE_KEY_FRAME_NS : 1;
	if (l->paused || l->replay) /* (a recording moves on a key only) */
		return 0;
	uint64_t next = 0;
	if (ptw_live_model_dirty(l->model))
		next = l->last_draw + PTW_LIVE_FRAME_NS;
	/* the AGE column moves; ended rows fade */
	if (l->last_rows && (!next || l->last_draw + SECOND_NS < next))
		next = l->last_draw + SECOND_NS;
	uint64_t fade = ptw_live_model_next_fade(l->model);
	if (fade && (!next || fade < next))
		next = fade < l->last_draw + PTW_LIVE_FRAME_NS ? l->last_draw + PTW_LIVE_FRAME_NS
							       : fade;
	return next;
}

/* ---- drawing ---- */

/* Text in a field of width w (cut, padded) at the cursor. */
static void field(const char *s, int w, bool right)
{
	if (w <= 0)
		return;
	int n = (int)strlen(s);
	if (n > w)
		n = w;
	if (right)
		printw("%*s", w - n, "");
	addnstr(s, n);
	if (!right)
		printw("%*s", w - n, "");
}

static void num_field(uint64_t v, int w)
{
	char b[24];
	snprintf(b, sizeof(b), "%llu", (unsigned long long)v);
	field(b, w, true);
}

static void dur_field(uint64_t ns, bool known, int w)
{
	char b[24] = "-";
	if (known)
		ptw_live_duration(b, sizeof(b), ns);
	field(b, w, true);
}

static void draw_header(struct ptw_live *l, uint64_t now, size_t nrows)
{
	struct ptw_live_counts c;
	ptw_live_model_counts(l->frozen ? l->frozen : l->model, now, &c);
	int cols = COLS;
	attron(A_REVERSE);
	move(0, 0);
	char b[256];
	char late[40] = "";
	if (l->open_timeout_ns) {
		char d[24];
		ptw_live_duration(d, sizeof(d), l->open_timeout_ns);
		snprintf(late, sizeof(late), "  late after %s", d);
	}
	snprintf(b, sizeof(b), " %s   active %llu  created %llu  ended %llu  rate %.1f/s%s",
		 l->title, (unsigned long long)c.active, (unsigned long long)c.created,
		 (unsigned long long)c.ended, c.rate, late);
	field(b, cols, false);
	attroff(A_REVERSE);
	move(1, 0);
	static const char *const views[] = { "threads", "routines", "functions" };
	snprintf(b, sizeof(b), " view %s (tab)  sort %s%s (s, r)  filter %s%s%s (/)  %zu row%s%s",
		 views[l->q.view], ptw_live_sort_name(l->q.view, l->q.sort),
		 l->q.reverse ? " reversed" : "", l->filter[0] ? "'" : "",
		 l->filter[0] ? l->filter : "none", l->filter[0] ? "'" : "", nrows,
		 nrows == 1 ? "" : "s", l->paused ? "  PAUSED (p)" : "");
	field(b, cols, false);
}

/* Column widths of the thread view for cols columns; 0: not shown (a
 * narrow terminal loses CREATOR and SPAWN first, then NAME and STATE
 * shrink; with --trace's CALL column, CPU% below 140 columns). */
struct thread_cols {
	int pid, tid, name, routine, creator, state, cpu, age, spawn, call;
};

/* pid: the rows are of several processes (-f): a PID column first. call:
 * --trace, a CALL column takes half of the routine's. */
static struct thread_cols thread_cols(int cols, bool pid, bool call)
{
	struct thread_cols c = { pid ? 8 : 0, 8, 16, 0, 8, 18, 6, 9, 9, 0 };
	if (cols < 96)
		c.creator = c.spawn = c.cpu = 0;
	if (call && cols < 140)
		c.cpu = 0;
	int fixed = c.pid + c.tid + c.cpu + c.age + c.creator + c.spawn + 6 + (c.cpu ? 1 : 0) +
		    (pid ? 1 : 0);
	int rest = cols - fixed;
	if (rest < c.name + c.state + 24) { /* the routine keeps at least a third */
		c.name = rest / 4;
		c.state = rest / 3;
	}
	c.routine = rest - c.name - c.state;
	if (call && c.routine >= 8) {
		c.call = c.routine / 2;
		c.routine -= c.call + 1;
	}
	if (c.routine < 1)
		c.routine = 1;
	return c;
}

/* A cell and the space after it, unless the column is hidden. */
static void cell(const char *s, int w, bool right)
{
	if (w <= 0)
		return;
	field(s, w, right);
	addch(' ');
}

static void draw_threads(struct ptw_live *l, const struct ptw_live_row *rows, size_t n, int top,
			 int height)
{
	bool multi = false;
	for (size_t i = 1; i < n && !multi; i++)
		multi = rows[i].pid && rows[0].pid && rows[i].pid != rows[0].pid;
	struct thread_cols w = thread_cols(COLS, multi, l->trace);
	attron(A_BOLD);
	move(top - 1, 0);
	cell("PID", w.pid, true);
	cell("TID", w.tid, true);
	cell("NAME", w.name, false);
	cell("START ROUTINE", w.routine, false);
	cell("CALL", w.call, false);
	cell("CREATOR", w.creator, true);
	cell("STATE", w.state, false);
	cell("CPU%", w.cpu, true);
	cell("AGE", w.age, true);
	cell("SPAWN", w.spawn, true);
	attroff(A_BOLD);
	for (int i = 0; i < height && l->scroll + (size_t)i < n; i++) {
		const struct ptw_live_row *r = &rows[l->scroll + (size_t)i];
		attr_t a = A_NORMAL;
		if (r->ended)
			a = A_DIM;
		else if (r->late)
			a = A_BOLD | (l->has_color ? COLOR_PAIR(1) : A_STANDOUT);
		attron(a);
		move(top + i, 0);
		char b[24];
		snprintf(b, sizeof(b), "%d", (int)r->pid);
		cell(b, w.pid, true);
		snprintf(b, sizeof(b), "%d", (int)r->tid);
		cell(b, w.tid, true);
		cell(r->name, w.name, false);
		cell(r->routine, w.routine, false);
		cell(r->call ? r->call : "-", w.call, false);
		if (r->creator)
			snprintf(b, sizeof(b), "%d", (int)r->creator);
		else
			strcpy(b, "-");
		cell(b, w.creator, true);
		cell(r->state, w.state, false);
		strcpy(b, "-");
		if (r->has_cpu)
			snprintf(b, sizeof(b), "%.1f", r->cpu_pct);
		cell(b, w.cpu, true);
		ptw_live_duration(b, sizeof(b), r->age_ns);
		if (!r->age_known) /* running before ptwatch came: at least that */
			strcat(b, "+");
		cell(b, w.age, true);
		strcpy(b, "-");
		if (r->has_spawn)
			ptw_live_duration(b, sizeof(b), r->spawn_ns);
		cell(b, w.spawn, true);
		attroff(a);
	}
}

static void draw_groups(struct ptw_live *l, const struct ptw_live_group *g, size_t n, int top,
			int height)
{
	int cols = COLS;
	int wl = 6, we = 7, wt = 7, wla = 5, wc = 6, wm = 10, wx = 10, wsp = 10;
	int wr = cols - (wl + we + wt + wla + wc + wm + wx + wsp + 8);
	if (wr < 10)
		wr = 10;
	attron(A_BOLD);
	move(top - 1, 0);
	field("START ROUTINE", wr, false);
	addch(' ');
	field("LIVE", wl, true);
	addch(' ');
	field("ENDED", we, true);
	addch(' ');
	field("TOTAL", wt, true);
	addch(' ');
	field("LATE", wla, true);
	addch(' ');
	field("CPU%", wc, true);
	addch(' ');
	field("LIFE AVG", wm, true);
	addch(' ');
	field("LIFE MAX", wx, true);
	addch(' ');
	field("SPAWN AVG", wsp, true);
	attroff(A_BOLD);
	for (int i = 0; i < height && l->scroll + (size_t)i < n; i++) {
		const struct ptw_live_group *r = &g[l->scroll + (size_t)i];
		attr_t a = r->late ? A_BOLD | (l->has_color ? COLOR_PAIR(1) : A_STANDOUT)
		       : !r->live  ? A_DIM
				   : A_NORMAL;
		attron(a);
		move(top + i, 0);
		field(r->routine, wr, false);
		addch(' ');
		num_field(r->live, wl);
		addch(' ');
		num_field(r->ended, we);
		addch(' ');
		num_field(r->total, wt);
		addch(' ');
		num_field(r->late, wla);
		addch(' ');
		char pct[16] = "-";
		if (r->live && r->has_cpu)
			snprintf(pct, sizeof(pct), "%.1f", r->cpu_pct);
		field(pct, wc, true);
		addch(' ');
		dur_field(r->lifetime_mean_ns, r->lifetime_max_ns > 0, wm);
		addch(' ');
		dur_field(r->lifetime_max_ns, r->lifetime_max_ns > 0, wx);
		addch(' ');
		dur_field(r->spawn_mean_ns, r->spawn_mean_ns > 0, wsp);
		attroff(a);
	}
}

/* --trace: one row per traced function. */
static void draw_functions(struct ptw_live *l, const struct ptw_live_function *f, size_t n, int top,
			   int height)
{
	int wc = 8, wi = 9, wr = 9, wd = 9;
	int wf = COLS - (wc + wi + wr + 3 * wd + 6);
	if (wf < 10)
		wf = 10;
	attron(A_BOLD);
	move(top - 1, 0);
	cell("FUNCTION", wf, false);
	cell("CALLS", wc, true);
	cell("IN FLIGHT", wi, true);
	cell("RETURNED", wr, true);
	cell("P50", wd, true);
	cell("P99", wd, true);
	field("SLOWEST", wd, true);
	attroff(A_BOLD);
	for (int i = 0; i < height && l->scroll + (size_t)i < n; i++) {
		const struct ptw_live_function *r = &f[l->scroll + (size_t)i];
		attr_t a = r->in_flight ? A_NORMAL : A_DIM;
		attron(a);
		move(top + i, 0);
		cell(r->function, wf, false);
		num_field(r->calls, wc);
		addch(' ');
		num_field(r->in_flight, wi);
		addch(' ');
		num_field(r->returned, wr);
		addch(' ');
		dur_field(r->p50_ns, r->has_times, wd);
		addch(' ');
		dur_field(r->p99_ns, r->has_times, wd);
		addch(' ');
		dur_field(r->slowest_ns, r->has_times, wd);
		attroff(a);
	}
}

static void draw(struct ptw_live *l, uint64_t now)
{
	const struct ptw_live_row *rows;
	const struct ptw_live_group *groups;
	/* paused: the table as it was at the pause, at that time */
	struct ptw_live_query q = l->q;
	struct ptw_live_model *model = l->model;
	uint64_t shown_ns = now;
	if (l->replay && l->replay->ntimes)
		shown_ns = l->replay->times[l->at];
	if (l->frozen) {
		model = l->frozen;
		shown_ns = l->paused_ns;
		q.name_of = NULL;
		q.cpu_of = NULL;
	}
	size_t n = ptw_live_model_build(model, shown_ns, &q, &rows, &groups);
	const struct ptw_live_function *fns = NULL;
	if (q.view == PTW_LIVE_FUNCTIONS)
		n = ptw_live_model_functions(model, &q, &fns);
	erase();
	int top = 3, height = LINES - top - 1;
	if (height < 0)
		height = 0;
	if (l->scroll && l->scroll + (size_t)height > n)
		l->scroll = n > (size_t)height ? n - (size_t)height : 0;
	draw_header(l, shown_ns, n);
	if (l->q.view == PTW_LIVE_THREADS)
		draw_threads(l, rows, n, top, height);
	else if (l->q.view == PTW_LIVE_ROUTINES)
		draw_groups(l, groups, n, top, height);
	else
		draw_functions(l, fns, n, top, height);
	move(LINES - 1, 0);
	if (l->typing_time) {
		char b[64];
		snprintf(b, sizeof(b), "go to (seconds): %s", l->timebuf);
		field(b, COLS - 1, false);
		curs_set(1);
		move(LINES - 1, 17 + (int)strlen(l->timebuf));
	} else if (l->editing) {
		char b[FILTER_MAX + 32];
		snprintf(b, sizeof(b), "filter: %s", l->filter);
		field(b, COLS - 1, false);
		curs_set(1);
		move(LINES - 1, 8 + (int)strlen(l->filter));
	} else if (l->replay) {
		char b[200];
		uint64_t t0 = l->replay->start_ns, at = shown_ns >= t0 ? shown_ns - t0 : 0,
			 last = l->replay->ntimes ? l->replay->times[l->replay->ntimes - 1] : t0;
		snprintf(b, sizeof(b),
			 " at %.6f s of %.6f s (moment %zu of %zu)  n/N step  b/e begin/end  t time"
			 "  q quit  tab view  s sort  / filter",
			 (double)at / 1e9, (double)(last >= t0 ? last - t0 : 0) / 1e9, l->at + 1,
			 l->replay->ntimes);
		attron(A_DIM);
		field(b, COLS - 1, false);
		attroff(A_DIM);
	} else {
		char b[160];
		size_t below = n > l->scroll + (size_t)height ? n - l->scroll - (size_t)height : 0;
		snprintf(b, sizeof(b),
			 " q quit  tab/v view  s sort  r reverse  / filter  space/p pause  arrows "
			 "scroll%s%.0zu%s",
			 below ? "   (" : "", below, below ? " more below)" : "");
		attron(A_DIM);
		field(b, COLS - 1, false);
		attroff(A_DIM);
		curs_set(0);
	}
	refresh();
	fflush(l->out);
	pass_output(l, 0);
	l->last_draw = now;
	l->last_rows = n;
	l->force = false;
}

/* ---- keys ---- */

static void resize(struct ptw_live *l)
{
	struct signalfd_siginfo si;
	while (read(l->winch_fd, &si, sizeof(si)) == (ssize_t)sizeof(si))
		;
	size_from_tty(l);
	clearok(curscr, TRUE);
	l->force = true;
}

static enum ptw_live_action key(struct ptw_live *l, int c)
{
	size_t len = strlen(l->filter);
	l->force = true;
	if (l->editing) {
		if (c == '\n' || c == '\r' || c == KEY_ENTER) {
			l->editing = false;
		} else if (c == 27) { /* Esc: no filter */
			l->filter[0] = 0;
			l->editing = false;
		} else if (c == KEY_BACKSPACE || c == 127 || c == 8) {
			if (len)
				l->filter[len - 1] = 0;
		} else if (c >= 32 && c < 127 && len < FILTER_MAX) {
			l->filter[len] = (char)c;
			l->filter[len + 1] = 0;
		}
		l->scroll = 0;
		return PTW_LIVE_NONE;
	}
	if (l->typing_time) { /* report --live: t, a time in seconds */
		size_t tl = strlen(l->timebuf);
		if (c == '\n' || c == '\r' || c == KEY_ENTER) {
			l->typing_time = false;
			replay_to_time(l, l->timebuf);
		} else if (c == 27) {
			l->typing_time = false;
		} else if (c == KEY_BACKSPACE || c == 127 || c == 8) {
			if (tl)
				l->timebuf[tl - 1] = 0;
		} else if (((c >= '0' && c <= '9') || c == '.') && tl + 1 < sizeof(l->timebuf)) {
			l->timebuf[tl] = (char)c;
			l->timebuf[tl + 1] = 0;
		}
		return PTW_LIVE_NONE;
	}
	if (l->replay) { /* report --live: moving through the recording */
		switch (c) {
		case 'n':
		case KEY_RIGHT:
			replay_to(l, l->at + 1);
			return PTW_LIVE_NONE;
		case 'N':
		case KEY_LEFT:
			replay_to(l, l->at ? l->at - 1 : 0);
			return PTW_LIVE_NONE;
		case 'b':
			replay_to(l, 0);
			return PTW_LIVE_NONE;
		case 'e':
		case KEY_END:
			replay_to(l, l->replay->ntimes ? l->replay->ntimes - 1 : 0);
			return PTW_LIVE_NONE;
		case 't':
			l->typing_time = true;
			l->timebuf[0] = 0;
			return PTW_LIVE_NONE;
		case ' ':
		case 'p':
			return PTW_LIVE_NONE; /* (a recording stands still) */
		}
	}
	switch (c) {
	case 'q':
	case 'Q':
		return PTW_LIVE_QUIT;
	case '\t':
	case 'v':
		/* threads, routines, (--trace) functions, threads... */
		l->q.view = l->q.view == PTW_LIVE_THREADS		 ? PTW_LIVE_ROUTINES
			    : l->q.view == PTW_LIVE_ROUTINES && l->trace ? PTW_LIVE_FUNCTIONS
									 : PTW_LIVE_THREADS;
		l->scroll = 0;
		break;
	case 's':
	case 'S': {
		/* (the function view has no CPU column: its sort is skipped there) */
		int step = c == 's' ? 1 : PTW_LIVE_SORT_COUNT - 1;
		do
			l->q.sort = (enum ptw_live_sort)((l->q.sort + step) % PTW_LIVE_SORT_COUNT);
		while (l->q.view == PTW_LIVE_FUNCTIONS && l->q.sort == PTW_LIVE_SORT_CPU);
		break;
	}
	case 'r':
		l->q.reverse = !l->q.reverse;
		break;
	case '/':
		l->editing = true;
		break;
	case 27:
		l->filter[0] = 0;
		break;
	case ' ':
	case 'p':
		l->paused = !l->paused;
		ptw_live_model_free(l->frozen);
		l->frozen = l->paused ? ptw_live_model_freeze(l->model) : NULL;
		l->paused_ns = ptw_now_ns();
		break;
	case KEY_DOWN:
	case 'j':
		l->scroll++;
		break;
	case KEY_UP:
	case 'k':
		if (l->scroll)
			l->scroll--;
		break;
	case KEY_NPAGE:
		l->scroll += (size_t)(LINES > 5 ? LINES - 5 : 1);
		break;
	case KEY_PPAGE: {
		size_t page = (size_t)(LINES > 5 ? LINES - 5 : 1);
		l->scroll = l->scroll > page ? l->scroll - page : 0;
		break;
	}
	case KEY_HOME:
	case 'g':
		l->scroll = 0;
		break;
	case KEY_RESIZE: /* ncurses saw the new size and took it */
		clearok(curscr, TRUE);
		break;
	case 12: /* ^L */
		clearok(curscr, TRUE);
		break;
	default:
		l->force = false;
		break;
	}
	return PTW_LIVE_NONE;
}

enum ptw_live_action ptw_live_tick(struct ptw_live *l, uint64_t now)
{
	set_term(l->scr);
	struct epoll_event evs[2];
	int n = epoll_wait(l->epfd, evs, 2, 0);
	for (int i = 0; i < n; i++) {
		if (evs[i].data.fd == l->tty_fd)
			pass_output(l, 0);
		else if (evs[i].data.fd == l->winch_fd)
			resize(l);
		else if (evs[i].events & (EPOLLHUP | EPOLLERR)) /* no more keys */
			epoll_ctl(l->epfd, EPOLL_CTL_DEL, evs[i].data.fd, NULL);
	}
	int c;
	for (int i = 0; i < 64 && (c = wgetch(stdscr)) != ERR; i++)
		if (key(l, c) == PTW_LIVE_QUIT)
			return PTW_LIVE_QUIT;
	if (l->pend.len) /* the terminal has not taken the last frame yet */
		return PTW_LIVE_NONE;
	if (l->force) {
		if (!l->last_draw || now >= l->last_draw + PTW_LIVE_KEY_FRAME_NS)
			draw(l, now);
		return PTW_LIVE_NONE;
	}
	uint64_t next = ptw_live_next(l);
	if (!l->paused && next && now >= next)
		draw(l, now);
	return PTW_LIVE_NONE;
}
