/* SPDX-License-Identifier: MIT */
/*
 * The kernel-assisted path (ptw_kernel.h) behind the session's backend
 * operations (ptw_backend.h): the loop that waits on the ring buffer, the
 * session signals, the live table's keys and the session's timers, and
 * what the report says. Built with or without BPF (the library's stub then
 * says why it cannot run).
 *
 * Session signals: what they mean is the model both backends share
 * (ptw_observe.h, "session signals"). Nothing of the command is traced,
 * so it has no delivery stops to go by: a copy that is not the terminal's
 * waits PTW_SIGNAL_MATCH_NS for the command to end of it or hold it
 * pending (blocked).
 */
#define _GNU_SOURCE
#include "ptw_backend.h"

#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "ptw_attach.h"
#include "ptw_kernel.h"
#include "ptw_observe.h"
#include "ptw_util.h"

/* How long a command that died of a session signal waits for ptwatch's
 * own copy (the front forwards it): the command, not stopped at its
 * delivery as under ptrace, can be gone first. */
#define LATE_COPY_MS 100

struct kernel_backend {
	struct ptw_backend b; /* first: the session holds &b */
	struct ptw_backend_opts o;
	struct ptw_kernel *k;
	pid_t pid;
	bool launched;
	char *const *argv;
	char **owned_argv; /* -p: read from /proc */
	uint64_t start_ns;
	int wake_fd;
	bool stop_requested;
	bool detached;
	/* the launched command, reaped: its wait status */
	bool reaped;
	int status;
	struct ptw_signal_model sigs; /* what session signals mean */
};

static struct kernel_backend *kb_of(struct ptw_backend *b)
{
	return (struct kernel_backend *)(void *)b;
}

static void emit(struct kernel_backend *kb, const struct ptw_event *ev)
{
	kb->o.sink(kb->o.sink_ctx, ev);
}

/* ---- session signals ---- */

static void decided(void *ctx, int sig, uint64_t ns, enum ptw_interrupt_action action,
		    enum ptw_interrupt_why why)
{
	struct kernel_backend *kb = ctx;
	struct ptw_event ev = ptw_event_init(PTW_EV_INTERRUPT, ns, kb->pid);
	ev.pid = kb->pid;
	ev.sig = sig;
	ev.action = action;
	ev.why = why;
	emit(kb, &ev);
}

static void on_signal(struct kernel_backend *kb, const struct ptw_session_signal *s)
{
	ptw_signal_got(&kb->sigs, s->sig, s->code, s->ns,
		       kb->launched && getpgid(kb->pid) == ptw_original_pgrp());
}

/* The command (not a process it forked) was delivered a signal that
 * kills by default (caught or not: the kernel's signal_deliver, or its
 * group exit as it was sent). */
static void on_delivery(struct kernel_backend *kb, const struct ptw_event *ev)
{
	if (kb->launched && ev->pid == kb->pid && ptw_is_session_signal(ev->sig))
		ptw_signal_delivered(&kb->sigs, ev->sig, ev->ns, ev->from_terminal);
}

/* The kernel path's events on their way to the session: a session
 * signal delivered to the command tells the signal model. */
static void kernel_sink(void *ctx, const struct ptw_event *ev)
{
	struct kernel_backend *kb = ctx;
	if (ev->kind == PTW_EV_FATAL_SIGNAL)
		on_delivery(kb, ev);
	emit(kb, ev);
}

/* Whether the command holds sig: pending there, or (ended) died of it. */
struct held_ctx {
	pid_t pid;
	bool ended;
	int ended_sig;
};
static bool held(void *ctx, int sig)
{
	const struct held_ctx *h = ctx;
	return h->ended ? h->ended_sig == sig : ptw_proc_sig_pending(h->pid, sig);
}

/* The copies waiting to be told apart, once PTW_SIGNAL_MATCH_NS passed or
 * the command ended (ended: of which signal, 0 none). */
static void settle_copy(struct kernel_backend *kb, uint64_t now, bool ended, int ended_sig)
{
	struct held_ctx h = { kb->pid, ended, ended_sig };
	ptw_signal_expire(&kb->sigs, ended ? UINT64_MAX : now, held, &h);
}

/* ---- the loop ---- */

/* The command ended of sig: ptwatch's copy of it, if one is on its way
 * (a ^C reaches the whole group), taken in before the end is told. */
static void late_copy(struct kernel_backend *kb, int sig)
{
	struct ptw_session_signal s;
	bool have = false;
	while (ptw_signals_read(ptw_signals_fd(), &s)) {
		on_signal(kb, &s);
		have |= s.sig == sig;
	}
	/* A terminal's signal it was delivered (and handled, or died of):
	 * ptwatch's copy comes through the front, and on a busy machine the
	 * command can end first. Waited for a moment, so that the session
	 * says what the user did (ctrlc-handles@kernel: "interrupts" empty). */
	uint64_t until = ptw_now_ns() + (uint64_t)LATE_COPY_MS * 1000000u;
	while (ptw_signal_copy_owed(&kb->sigs)) {
		uint64_t now = ptw_now_ns();
		struct pollfd pfd = { .fd = ptw_signals_fd(), .events = POLLIN };
		if (now >= until || poll(&pfd, 1, (int)((until - now + 999999) / 1000000u)) <= 0)
			break;
		while (ptw_signals_read(ptw_signals_fd(), &s)) {
			ptw_signal_late(&kb->sigs, s.sig, s.code, s.ns);
			have |= s.sig == sig;
		}
	}
	if (have || !kb->launched || sig <= 0 || sig >= NSIG || !ptw_is_session_signal(sig) ||
	    kb->sigs.s[sig].copy_ns || kb->sigs.s[sig].press_ns)
		return;
	struct pollfd pfd = { .fd = ptw_signals_fd(), .events = POLLIN };
	if (poll(&pfd, 1, LATE_COPY_MS) > 0)
		while (ptw_signals_read(ptw_signals_fd(), &s))
			on_signal(kb, &s);
}

/* The process ended: of which signal (0: none, or not recorded). */
static int end_signal_of(struct kernel_backend *kb)
{
	int code = 0, sig = 0;
	bool core = false;
	return ptw_kernel_target_exit(kb->k, &code, &sig, &core) ? sig : 0;
}

static void reap(struct kernel_backend *kb)
{
	if (!kb->launched || kb->reaped)
		return;
	int st;
	pid_t r;
	do
		r = waitpid(kb->pid, &st, 0);
	while (r < 0 && errno == EINTR);
	if (r == kb->pid) {
		kb->reaped = true;
		kb->status = st;
	}
}

static int run(struct ptw_backend *b, int duration_ms, enum ptw_end_reason *ret_reason,
	       int *ret_signal)
{
	struct kernel_backend *kb = kb_of(b);
	uint64_t deadline = duration_ms >= 0 ? ptw_now_ns() + (uint64_t)duration_ms * 1000000u : 0;
	unsigned flush_ms = ptw_kernel_flush_ms(kb->k);
	*ret_signal = 0;
	for (;;) {
		/* what is waiting, and whether the process ended */
		int r = ptw_kernel_run(kb->k, 0);
		if (r < 0 && r != -EINTR) {
			*ret_reason = PTW_END_ERROR;
			return r;
		}
		uint64_t now = ptw_now_ns();
		bool gone = r == 1;
		int ended_sig = gone ? end_signal_of(kb) : 0;
		if (gone)
			late_copy(kb, ended_sig);
		settle_copy(kb, now, gone, ended_sig);
		if (kb->sigs.end_signal) {
			*ret_reason = PTW_END_INTERRUPTED;
			*ret_signal = kb->sigs.end_signal;
			return 0;
		}
		if (gone) {
			reap(kb);
			*ret_reason = PTW_END_TARGET_EXITED;
			return 0;
		}
		if (kb->stop_requested) {
			*ret_reason = PTW_END_DETACHED;
			return 0;
		}
		if (deadline && now >= deadline) {
			*ret_reason = PTW_END_DURATION;
			return 0;
		}
		uint64_t wake = now + (uint64_t)flush_ms * 1000000u;
		if (deadline && deadline < wake)
			wake = deadline;
		uint64_t copy = ptw_signal_deadline(&kb->sigs);
		if (copy && copy < wake)
			wake = copy;
		uint64_t timer = kb->o.next_timer ? kb->o.next_timer(kb->o.timer_ctx) : 0;
		if (timer && timer <= now) {
			kb->o.on_timer(kb->o.timer_ctx, now);
			continue;
		}
		if (timer && timer < wake)
			wake = timer;
		if (kb->o.before_block)
			kb->o.before_block(kb->o.before_block_ctx);
		struct pollfd pfd[3] = {
			{ .fd = ptw_kernel_fd(kb->k), .events = POLLIN },
			{ .fd = ptw_signals_fd(), .events = POLLIN },
			{ .fd = kb->wake_fd, .events = POLLIN },
		};
		int timeout = wake <= now ? 0 : (int)((wake - now + 999999) / 1000000u);
		int n = poll(pfd, kb->wake_fd >= 0 ? 3 : 2, timeout);
		if (n < 0 && errno != EINTR) {
			*ret_reason = PTW_END_ERROR;
			return -errno;
		}
		struct ptw_session_signal s;
		while (n > 0 && (pfd[1].revents & POLLIN) && ptw_signals_read(ptw_signals_fd(), &s))
			on_signal(kb, &s);
		if (n > 0 && kb->wake_fd >= 0 && (pfd[2].revents & POLLIN) && kb->o.on_timer)
			kb->o.on_timer(kb->o.timer_ctx, ptw_now_ns());
	}
}

static void set_wake_fd(struct ptw_backend *b, int fd)
{
	kb_of(b)->wake_fd = fd;
}

static void stop(struct ptw_backend *b)
{
	kb_of(b)->stop_requested = true;
}

static int detach(struct ptw_backend *b)
{
	struct kernel_backend *kb = kb_of(b);
	kb->detached = true;
	return ptw_kernel_detach(kb->k);
}

static int where(struct ptw_backend *b, pid_t tid, struct ptw_where *ret)
{
	struct kernel_backend *kb = kb_of(b);
	int r = ptw_where_read(kb->pid, tid, ret);
	if (r == 0 && ret->pc)
		ret->at = ptw_kernel_locate(kb->k, ret->pc);
	return r;
}

/* How the command ended: its wait status when ptwatch launched it (and
 * reaped it), else what the kernel recorded of its last thread. */
static bool target_exit(struct ptw_backend *b, int *code, int *sig, bool *core)
{
	struct kernel_backend *kb = kb_of(b);
	if (kb->reaped) {
		*code = WIFEXITED(kb->status) ? WEXITSTATUS(kb->status) : 0;
		*sig = WIFSIGNALED(kb->status) ? WTERMSIG(kb->status) : 0;
		*core = WIFSIGNALED(kb->status) && WCOREDUMP(kb->status);
		return true;
	}
	return ptw_kernel_target_exit(kb->k, code, sig, core);
}

static void check_fate(struct ptw_backend *b, struct ptw_report *r)
{
	struct kernel_backend *kb = kb_of(b);
	int code, sig, st;
	bool core;
	if (target_exit(b, &code, &sig, &core)) {
		r->fate = PTW_FATE_ENDED;
		return;
	}
	if (kb->launched && waitpid(kb->pid, &st, WNOHANG) == kb->pid) {
		/* let go while it ran, ended since (it is our child) */
		kb->reaped = true;
		kb->status = st;
		r->fate = PTW_FATE_ENDED;
		r->after_detach = true;
		return;
	}
	struct ptw_census c = { 0 };
	ptw_proc_census(kb->pid, false, &c);
	if (!c.alive) {
		r->fate = ptw_proc_state(kb->pid, kb->pid) == 'Z' ? PTW_FATE_ZOMBIE : PTW_FATE_GONE;
		return;
	}
	r->fate = c.traced_by ? PTW_FATE_TRACED : c.stopped ? PTW_FATE_STOPPED : PTW_FATE_LIVES_ON;
	r->traced_by = c.traced_by;
}

static void report(struct ptw_backend *b, struct ptw_report *r)
{
	struct kernel_backend *kb = kb_of(b);
	struct ptw_kernel_desc d;
	ptw_kernel_describe(kb->k, &d);
	r->pid = kb->pid;
	r->exe = d.exe;
	r->argv = kb->argv;
	r->mode = kb->launched ? "launch" : "attach";
	r->glibc = d.glibc;
	int code, sig;
	bool core;
	if (target_exit(b, &code, &sig, &core)) {
		r->exit_kind = sig ? PTW_EXIT_SIGNAL : PTW_EXIT_CODE;
		r->exit_code = code;
		r->exit_signal = sig;
		r->core_dumped = core;
	} else {
		r->exit_kind = PTW_EXIT_NONE;
	}
	r->start_ns = kb->start_ns;
	r->frozen_ns = 0; /* never: that is the point */
	r->strategy = d.strategy;
	r->stops_total = 0;
	r->nstop_kinds = 0;
	r->breakpoints = 0;
	struct ptw_kernel_stats st;
	ptw_kernel_stats(kb->k, &st);
	r->probes = st.probes;
	r->probes_stepped = st.probes_stepped;
}

static void finish(struct ptw_backend *b)
{
	ptw_kernel_finish(kb_of(b)->k);
}

/* The links filter by processes that have ended (nothing else has these
 * probes: not probes on a file for every process, until they close; not
 * a target that lives on, which another session may attach to at once;
 * with -f every followed process has ended too when the run does). */
static bool leaves_early(struct ptw_backend *b)
{
	struct kernel_backend *kb = kb_of(b);
	int code, sig;
	bool core;
	if (ptw_kernel_probes_everywhere(kb->k) || !target_exit(b, &code, &sig, &core))
		return false;
	ptw_kernel_save_caches(kb->k); /* (a session started next reads them) */
	return true;
}

static void backend_free(struct ptw_backend *b)
{
	if (!b)
		return;
	struct kernel_backend *kb = kb_of(b);
	ptw_kernel_free(kb->k);
	ptw_argv_free(kb->owned_argv);
	free(kb);
}

static const struct ptw_backend_ops kernel_ops = {
	.run = run,
	.set_wake_fd = set_wake_fd,
	.stop = stop,
	.detach = detach,
	.where = where,
	.check_fate = check_fate,
	.finish = finish,
	.report = report,
	.target_exit = target_exit,
	.leaves_early = leaves_early,
	.free = backend_free,
};

/* What the kernel path does not do: said before anything starts. */
static int unsupported(const struct ptw_backend_opts *o, char *why, size_t size)
{
	if (!o->create_events)
		return 0;
	snprintf(why, size, "--create-events cross-checks ptrace's creation events with "
			    "libthread_db's breakpoint: ptrace only");
	return -EOPNOTSUPP;
}

static struct kernel_backend *backend_new(const struct ptw_backend_opts *o,
					  struct ptw_kernel_opts *ko)
{
	struct kernel_backend *kb = xcalloc(1, sizeof(*kb));
	kb->b.ops = &kernel_ops;
	kb->b.name = "kernel";
	kb->o = *o;
	kb->wake_fd = -1;
	kb->start_ns = ptw_now_ns();
	kb->sigs.decided = decided;
	kb->sigs.ctx = kb;
	*ko = (struct ptw_kernel_opts){ .use_debug_files = o->use_debug_files,
					.use_cache = o->use_cache,
					.sink = kernel_sink,
					.sink_ctx = kb,
					.trace = o->trace,
					.ntrace = o->ntrace,
					.locks = o->locks,
					.follow_forks = o->follow_forks };
	return kb;
}

/* Launches argv (pid 0) or attaches to pid. */
static int start(const struct ptw_backend_opts *o, char *const argv[], int child_stdout, pid_t pid,
		 struct ptw_backend **ret, char *why, size_t why_size)
{
	int r = unsupported(o, why, why_size);
	if (r < 0)
		return r;
	struct ptw_kernel_opts ko;
	struct kernel_backend *kb = backend_new(o, &ko);
	if (pid) {
		kb->pid = pid;
		kb->owned_argv = ptw_proc_cmdline(pid);
		kb->argv = kb->owned_argv;
		r = ptw_kernel_attach(&ko, pid, &kb->k, why, why_size);
	} else {
		kb->launched = true;
		kb->sigs.launched = true;
		kb->argv = argv;
		r = ptw_kernel_launch(&ko, argv, child_stdout, &kb->k, &kb->pid, why, why_size);
	}
	if (r < 0) {
		backend_free(&kb->b);
		return r;
	}
	*ret = &kb->b;
	return 0;
}

int ptw_kernel_backend_launch(const struct ptw_backend_opts *o, char *const argv[],
			      int child_stdout, struct ptw_backend **ret, char *why,
			      size_t why_size)
{
	return start(o, argv, child_stdout, 0, ret, why, why_size);
}

int ptw_kernel_backend_attach(const struct ptw_backend_opts *o, pid_t pid, struct ptw_backend **ret,
			      char *why, size_t why_size)
{
	return start(o, NULL, -1, pid, ret, why, why_size);
}
