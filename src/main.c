/* SPDX-License-Identifier: MIT */
/* ptwatch: options -> session -> loop -> report. */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

#include "config.h"
#include "ptw_attach.h"
#include "ptw_breakpoints.h"
#include "ptw_frames.h"
#include "ptw_guardian.h"
#include "ptw_output.h"
#include "ptw_record.h"
#include "ptw_spans.h"
#include "ptw_timeouts.h"
#include "ptw_tracer.h"
#include "ptw_util.h"

struct options {
	pid_t pid; /* -p: attach; 0: launch argv */
	bool snapshot;
	bool json;
	const char *output;
	bool quiet;
	bool use_debug_files;
	bool use_cache;
	bool create_events;
	bool follow_forks;
	char **trace; /* --trace patterns */
	size_t ntrace;
	int duration_ms;
	uint64_t open_timeout_ns; /* 0: disabled */
	char **argv;
};

struct session {
	struct ptw_spans *spans;
	struct ptw_timeouts *timeouts; /* spans open too long (--open-timeout) */
	struct ptw_buf log;
	bool quiet;
	pid_t first_pid;  /* -f: the first process an event named */
	bool pids_shown; /* a second one appeared: lines carry the pid */
	uint64_t start_ns;
	/* The record for the restorer (ptw_guardian.h), when there is one. */
	struct ptw_record_writer *rec;
	struct ptw_buf record;
	struct ptw_tracer *tracer; /* once launched or attached: the header */
	size_t header_sig;	   /* what the last header sent said, roughly */
};

static void usage(FILE *f)
{
	fprintf(f,
		"Usage: ptwatch [OPTIONS] -- COMMAND [ARGS...]\n"
		"       ptwatch [OPTIONS] -p PID\n"
		"Trace the POSIX threads of COMMAND, or of the running process PID: every\n"
		"thread's creation, start routine, end (return, pthread_exit, cancel), join\n"
		"and detach, as spans.\n"
		"\n"
		"Options:\n"
		"  -p, --pid=PID        attach to the running process PID; Ctrl-C (or --duration)\n"
		"                       detaches and leaves it running as before\n"
		"  -f, --follow-forks   trace every process COMMAND forks (fork, vfork, clone,\n"
		"                       posix_spawn), to any depth and across exec; with -p,\n"
		"                       PID's descendants that run are attached too. One\n"
		"                       document for the whole tree. Without -f a forked child\n"
		"                       gets its original bytes back and runs untraced\n"
		"  --snapshot           with -p: record every thread (state, stack, what it\n"
		"                       waits for; deadlocks) and detach at once; the report\n"
		"                       goes to standard output\n"
		"  --json               write the spans document (JSON) to standard output;\n"
		"                       COMMAND's standard output then goes to standard error\n"
		"  -o, --output=FILE    write the spans document to FILE (implies --json)\n"
		"  -q, --quiet          no event lines on standard error (the summary stays)\n"
		"  --duration=SECONDS   stop tracing after SECONDS and let COMMAND run on\n"
		"  --open-timeout=SECONDS\n"
		"                       report a span still open after SECONDS (default 5,\n"
		"                       fractions allowed, 0: never) with where its thread\n"
		"                       is; if it ends later, it is marked slow\n"
		"  --no-debug-files     ignore separate debug files such as libc6-dbg's,\n"
		"                       and do not ask debuginfod ($DEBUGINFOD_URLS)\n"
		"                       (also: PTWATCH_NO_DEBUG_FILES=1)\n"
		"  --no-cache           do not read or write the symbol cache\n"
		"                       ($XDG_CACHE_HOME/ptwatch, else ~/.cache/ptwatch)\n"
		"  --create-events      observe creation at libthread_db's TD_CREATE\n"
		"                       breakpoint too (one more stop per thread)\n"
		"  --trace=[MODULE:]PATTERN\n"
		"                       frame spans: every call of the functions whose name\n"
		"                       (demangled or not) matches the shell glob PATTERN, in\n"
		"                       the modules whose file name matches MODULE (default:\n"
		"                       all, dlopen'ed ones included); repeatable. Two stops\n"
		"                       per call (entry, return)\n"
		"  --debug=DOMAINS      debug log: attach,tdb,bp,sym,spans,tracer or all\n"
		"  -h, --help           show this help\n"
		"  -V, --version        show the version\n"
		"\n"
		"Ctrl-C reaches COMMAND as without ptwatch, which traces on until COMMAND\n"
		"has reacted; a second Ctrl-C within 2 s, or SIGTERM/SIGHUP sent to ptwatch\n"
		"alone, detaches and leaves COMMAND running (exit status 128+signal).\n"
		"ptwatch exits with COMMAND's exit status, or dies of its signal; with -p,\n"
		"it exits 0 once it has let go of PID.\n"
		"See ptwatch(1).\n");
}

static void die_usage(const char *fmt, const char *arg)
{
	fprintf(stderr, "ptwatch: ");
	fprintf(stderr, fmt, arg);
	fprintf(stderr, "\nTry 'ptwatch --help'.\n");
	exit(2);
}

static void parse_options(int argc, char **argv, struct options *o)
{
	enum {
		OPT_JSON = 256,
		OPT_SNAPSHOT,
		OPT_DURATION,
		OPT_OPEN_TIMEOUT,
		OPT_NO_DEBUG_FILES,
		OPT_NO_CACHE,
		OPT_CREATE_EVENTS,
		OPT_TRACE,
		OPT_DEBUG
	};
	static const struct option longopts[] = {
		{ "pid", required_argument, NULL, 'p' },
		{ "follow-forks", no_argument, NULL, 'f' },
		{ "json", no_argument, NULL, OPT_JSON },
		{ "snapshot", no_argument, NULL, OPT_SNAPSHOT },
		{ "output", required_argument, NULL, 'o' },
		{ "quiet", no_argument, NULL, 'q' },
		{ "duration", required_argument, NULL, OPT_DURATION },
		{ "open-timeout", required_argument, NULL, OPT_OPEN_TIMEOUT },
		{ "no-debug-files", no_argument, NULL, OPT_NO_DEBUG_FILES },
		{ "no-cache", no_argument, NULL, OPT_NO_CACHE },
		{ "create-events", no_argument, NULL, OPT_CREATE_EVENTS },
		{ "trace", required_argument, NULL, OPT_TRACE },
		{ "debug", required_argument, NULL, OPT_DEBUG },
		{ "help", no_argument, NULL, 'h' },
		{ "version", no_argument, NULL, 'V' },
		{ NULL, 0, NULL, 0 },
	};
	memset(o, 0, sizeof(*o));
	o->use_debug_files = true;
	o->use_cache = true;
	o->duration_ms = -1;
	o->open_timeout_ns = PTW_OPEN_TIMEOUT_DEFAULT_NS;
	const char *env = getenv("PTWATCH_NO_DEBUG_FILES");
	if (env && *env && strcmp(env, "0"))
		o->use_debug_files = false;

	int c;
	/* '+': stop at the first non-option, the command. */
	while ((c = getopt_long(argc, argv, "+p:o:fqhV", longopts, NULL)) != -1) {
		switch (c) {
		case 'p': {
			char *end;
			errno = 0;
			long v = strtol(optarg, &end, 10);
			if (errno || *end || end == optarg || v <= 0 || v > 0x3fffffff)
				die_usage("'%s' is not a process id", optarg);
			o->pid = (pid_t)v;
			break;
		}
		case 'f':
			o->follow_forks = true;
			break;
		case OPT_JSON:
			o->json = true;
			break;
		case OPT_SNAPSHOT:
			o->snapshot = true;
			break;
		case 'o':
			o->output = optarg;
			o->json = true;
			break;
		case 'q':
			o->quiet = true;
			break;
		case OPT_DURATION: {
			char *end;
			double s = strtod(optarg, &end);
			if (*end || end == optarg || !(s > 0) || s > 86400.0 * 365)
				die_usage("invalid duration '%s' (seconds, > 0)", optarg);
			o->duration_ms = (int)(s * 1000.0 + 0.5);
			if (o->duration_ms == 0)
				o->duration_ms = 1;
			break;
		}
		case OPT_OPEN_TIMEOUT: {
			char *end;
			errno = 0;
			double s = strtod(optarg, &end);
			if (errno || *end || end == optarg || !(s >= 0) || s > 86400.0 * 365)
				die_usage("invalid open timeout '%s' (seconds, >= 0; 0 disables)",
					  optarg);
			o->open_timeout_ns = (uint64_t)(s * 1e9 + 0.5);
			if (s > 0 && o->open_timeout_ns == 0)
				o->open_timeout_ns = 1;
			break;
		}
		case OPT_NO_DEBUG_FILES:
			o->use_debug_files = false;
			break;
		case OPT_NO_CACHE:
			o->use_cache = false;
			break;
		case OPT_CREATE_EVENTS:
			o->create_events = true;
			break;
		case OPT_TRACE:
			if (ptw_trace_check_pattern(optarg) < 0)
				die_usage("invalid --trace pattern '%s' ([MODULE:]PATTERN, PATTERN a "
					  "shell glob on function names)",
					  optarg);
			o->trace = xreallocarray(o->trace, o->ntrace + 1, sizeof(*o->trace));
			o->trace[o->ntrace++] = optarg;
			break;
		case OPT_DEBUG:
			if (ptw_debug_parse(optarg) < 0)
				die_usage("unknown debug domain in '%s' (attach,tdb,bp,sym,spans,tracer,all)",
					  optarg);
			break;
		case 'h':
			usage(stdout);
			exit(0);
		case 'V':
			printf("ptwatch %s\n", PTW_VERSION);
			exit(0);
		default:
			fprintf(stderr, "Try 'ptwatch --help'.\n");
			exit(2);
		}
	}
	if (o->snapshot && !o->pid)
		die_usage("%s", "--snapshot needs -p PID");
	if (o->snapshot && o->ntrace)
		die_usage("%s", "--trace cannot be used with --snapshot (nothing runs)");
	if (o->snapshot && o->follow_forks)
		die_usage("%s", "-f cannot be used with --snapshot (a snapshot shows PID alone)");
	if (o->pid && optind < argc)
		die_usage("%s", "give either -p PID or a command, not both");
	if (!o->pid && optind >= argc)
		die_usage("%s", "no command given (usage: ptwatch [OPTIONS] -- COMMAND [ARGS...])");
	o->argv = argv + optind;
}

/* ---- the event sink: spans, then the log line ---- */

/* The report's header goes to the restorer again when it changed (a new
 * warning, libthread_db found, the end seen). */
static void record_header(struct session *s)
{
	struct ptw_report rep = { 0 };
	rep.realtime_offset_ns = ptw_realtime_offset_ns();
	ptw_tracer_report(s->tracer, &rep);
	rep.open_timeout_ns = ptw_timeouts_limit(s->timeouts);
	size_t sig = 1 + rep.nwarnings * 16 + (rep.glibc != NULL) * 2 + (size_t)rep.exit_kind * 4 +
		     (rep.strategy && rep.strategy[0] == 'd');
	if (sig == s->header_sig)
		return;
	s->header_sig = sig;
	ptw_record_report(s->rec, &s->record, &rep);
}

static void flush_record(struct session *s)
{
	if (!s->rec)
		return;
	if (s->tracer)
		record_header(s);
	ptw_guardian_record(&s->record);
}

static void flush_log(void *ctx)
{
	struct session *s = ctx;
	flush_record(s);
	/* EPIPE: SIGPIPE (blocked) ends the session */
	ptw_write_all(STDERR_FILENO, s->log.p, s->log.len);
	ptw_buf_reset(&s->log);
}

static void sink(void *ctx, const struct ptw_event *ev)
{
	struct session *s = ctx;
	const struct ptw_span *sp = ptw_spans_consume(s->spans, ev);
	/* -f: once a second process is traced, every line names its process. */
	if (ev->pid && !s->first_pid)
		s->first_pid = ev->pid;
	else if (ev->pid && ev->pid != s->first_pid && !s->pids_shown) {
		s->pids_shown = true;
		ptw_text_show_pids(true);
	}
	if (s->rec) {
		ptw_record_event(s->rec, &s->record, ev);
		/* -f: a process began (image, fork), exec'd or ended: the
		 * restorer keeps what the document would say of it. */
		struct ptw_process proc;
		if ((ev->kind == PTW_EV_IMAGE || ev->kind == PTW_EV_EXEC ||
		     ev->kind == PTW_EV_PROCESS_EXIT ||
		     (ev->kind == PTW_EV_PREEXISTING && ev->tid == ev->pid)) &&
		    s->tracer && ptw_tracer_process(s->tracer, ev->process, &proc))
			ptw_record_process(&s->record, &proc);
		if (s->record.len > 65536)
			flush_record(s);
	}
	if (!s->quiet) {
		const struct ptw_frame *fr = ptw_spans_last_frame(s->spans);
		if (fr)
			ptw_text_frame_event(&s->log, s->start_ns, ev, fr);
		else
			ptw_text_event(&s->log, s->start_ns, ev, sp);
		if (s->log.len > 65536)
			flush_log(s);
	}
}

/* ---- open timeouts ---- */

static uint64_t next_timer(void *ctx)
{
	struct session *s = ctx;
	return ptw_timeouts_next(s->timeouts);
}

/* Every span that crossed the limit: one event each, saying where its
 * thread is now (read from /proc; the thread is not stopped). */
static void on_timer(void *ctx, uint64_t now)
{
	struct session *s = ctx;
	struct ptw_timeout due;
	while (ptw_timeouts_pop(s->timeouts, now, &due)) {
		struct ptw_where w;
		ptw_tracer_where(s->tracer, due.tid, &w);
		struct ptw_event ev = ptw_event_init(PTW_EV_SPAN_OPEN, now, due.tid);
		const struct ptw_span *th = ptw_spans_by_tid(s->spans, due.tid);
		ev.pid = th ? th->pid : 0; /* -f: its process */
		ev.span_kind = due.kind;
		ev.span_id = due.id;
		ev.has_value = true;
		ev.value = now - due.start_ns;
		ev.state = w.state;
		ev.wchan = w.wchan[0] ? w.wchan : NULL;
		ev.name = w.name[0] ? w.name : NULL;
		ev.routine = w.at;
		sink(s, &ev);
	}
}

/* ---- safety net: ptwatch itself crashes ---- */

static void crash_handler(int sig)
{
	/* Put the target's code back before the kernel detaches it with our
	 * int3s in place (only pwrite here). */
	ptw_bp_emergency_restore();
	signal(sig, SIG_DFL);
	raise(sig);
}

static void install_crash_handlers(void)
{
	static const int sigs[] = { SIGSEGV, SIGBUS, SIGILL, SIGFPE, SIGABRT };
	struct sigaction sa;
	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = crash_handler;
	sa.sa_flags = SA_RESETHAND;
	for (size_t i = 0; i < PTW_ARRAY_SIZE(sigs); i++)
		sigaction(sigs[i], &sa, NULL);
}

static void __attribute__((noreturn)) die_of_signal(int sig)
{
	/* The guardian is told, so that it dies of it too. */
	ptw_guardian_mirror_signal(sig);
	ptw_die_of_signal(sig);
}

/* Trace until the end, let go, report; the exit status. */
static int session(const struct options *o, struct session *s, struct ptw_tracer *t, int out_fd)
{
	enum ptw_end_reason reason = PTW_END_SNAPSHOT;
	int sig = 0, r = 0;
	s->tracer = t;
	if (s->rec && o->follow_forks) {
		/* The processes that began before the tracer was ours to ask
		 * (the target, descendants found at -p -f). */
		struct ptw_report rep = { 0 };
		ptw_tracer_report(t, &rep);
		for (size_t i = 0; i < rep.nprocesses; i++)
			ptw_record_process(&s->record, &rep.processes[i]);
	}
	flush_record(s); /* the restorer learns what is traced */
	if (!o->snapshot)
		r = ptw_tracer_run(t, o->duration_ms, &reason, &sig);
	if (r < 0)
		fprintf(stderr, "ptwatch: tracing failed: %s\n", strerror(-r));
	if (reason != PTW_END_TARGET_EXITED)
		ptw_tracer_detach(t);
	flush_log(s);
	ptw_spans_finish(s->spans);

	struct ptw_report rep = { 0 };
	rep.tool_version = PTW_VERSION;
	rep.realtime_offset_ns = ptw_realtime_offset_ns();
	ptw_tracer_check_fate(t, &rep);
	ptw_tracer_report(t, &rep);
	rep.end_ns = ptw_now_ns();
	struct rusage ru;
	if (getrusage(RUSAGE_SELF, &ru) == 0) {
		rep.tracer_user_ns = (uint64_t)ru.ru_utime.tv_sec * 1000000000u +
				     (uint64_t)ru.ru_utime.tv_usec * 1000u;
		rep.tracer_sys_ns = (uint64_t)ru.ru_stime.tv_sec * 1000000000u +
				    (uint64_t)ru.ru_stime.tv_usec * 1000u;
	}
	rep.end_reason = ptw_end_reason_name(reason);
	rep.open_timeout_ns = ptw_timeouts_limit(s->timeouts);
	rep.spans = s->spans;

	struct ptw_output_opts oo = { .json = o->json, .json_fd = out_fd, .snapshot = o->snapshot };
	ptw_report_write(&rep, &oo);

	int code = 0, tsig = 0;
	bool core = false;
	bool ended = ptw_tracer_target_exit(t, &code, &tsig, &core);
	ptw_tracer_free(t);
	ptw_spans_free(s->spans);
	ptw_timeouts_free(s->timeouts);
	ptw_buf_free(&s->log);
	ptw_record_writer_free(s->rec);
	ptw_buf_free(&s->record);
	if (o->pid) /* an observer: it let go, or saw the end */
		return reason == PTW_END_ERROR ? 1 : 0;
	if (ended && tsig)
		die_of_signal(tsig);
	if (ended)
		return code;
	if (reason == PTW_END_INTERRUPTED)
		return 128 + sig;
	return reason == PTW_END_ERROR ? 1 : 0;
}

/* argv's strings are about to be written over (process names). */
static char **copy_argv(int argc, char **argv)
{
	char **copy = xcalloc((size_t)argc + 1, sizeof(*copy));
	for (int i = 0; i < argc; i++)
		copy[i] = xstrdup(argv[i]);
	return copy;
}

int main(int argc, char **argv)
{
	struct options o;
	parse_options(argc, copy_argv(argc, argv), &o);

	int out_fd = -1;
	bool out_created = false;
	if (o.output) {
		out_created = access(o.output, F_OK) != 0;
		out_fd = open(o.output, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
		if (out_fd < 0) {
			fprintf(stderr, "ptwatch: cannot open %s: %s\n", o.output, strerror(errno));
			return 1;
		}
	}
	int r = ptw_signals_init();
	if (r < 0) {
		fprintf(stderr, "ptwatch: cannot set up signal handling: %s\n", strerror(-r));
		return 1;
	}
	/* Three processes from here: this one guards, its children trace and
	 * restore (see ptw_guardian.h). If that cannot be had, one process
	 * still works. */
	struct ptw_guardian_opts go = {
		.argv = argv,
		.out = { .json = o.json, .json_fd = out_fd, .snapshot = o.snapshot },
	};
	if (ptw_bp_journal_prepare() == 0 && ptw_guardian_split(&go) == 0)
		ptw_set_mem_fd_hook(ptw_guardian_share_mem);
	install_crash_handlers();

	/* A snapshot has no events to tell as they happen: it is its report. */
	struct session s = { .spans = ptw_spans_new(), .quiet = o.quiet || o.snapshot,
			     .start_ns = ptw_now_ns() };
	if (ptw_guardian_keeps_record())
		s.rec = ptw_record_writer_new();
	if (!o.snapshot) {
		s.timeouts = ptw_timeouts_new(o.open_timeout_ns);
		ptw_spans_set_timeouts(s.spans, s.timeouts);
	}
	struct ptw_tracer_opts to = {
		.use_debug_files = o.use_debug_files,
		.use_cache = o.use_cache,
		.create_events = o.create_events,
		.follow_forks = o.follow_forks,
		.trace = o.trace,
		.ntrace = o.ntrace,
		.sink = sink,
		.sink_ctx = &s,
		.before_block = flush_log,
		.before_block_ctx = &s,
		.next_timer = next_timer,
		.on_timer = on_timer,
		.timer_ctx = &s,
	};
	struct ptw_tracer *t;
	if (o.pid) {
		char why[256] = "";
		r = ptw_check_target(o.pid, why, sizeof(why));
		if (r == 0)
			r = o.snapshot ? ptw_tracer_snapshot(&to, o.pid, &t)
				       : ptw_tracer_attach(&to, o.pid, &t);
		if (r == -EPERM)
			ptw_explain_eperm(o.pid, why, sizeof(why));
		else if (r == -EAGAIN)
			snprintf(why, sizeof(why), "it called execve while ptwatch attached; try again");
		else if (r == -EBUSY && !why[0])
			snprintf(why, sizeof(why), "one of its threads is traced by another process");
		else if (r == -ESRCH && !why[0])
			snprintf(why, sizeof(why), "no such process");
		else if (r < 0 && !why[0])
			snprintf(why, sizeof(why), "%s", strerror(-r));
		if (r < 0) {
			if (out_created)
				unlink(o.output);
			fprintf(stderr, "ptwatch: cannot attach to %d: %s\n", o.pid, why);
			ptw_spans_free(s.spans);
			ptw_timeouts_free(s.timeouts);
			return 1;
		}
		r = session(&o, &s, t, out_fd);
		free(o.trace);
		return r;
	}
	/* The document owns stdout: the command's output must not land in it. */
	int child_stdout = o.json && !o.output ? STDERR_FILENO : -1;
	r = ptw_tracer_launch(&to, o.argv, child_stdout, &t);
	if (r < 0 && out_created)
		unlink(o.output); /* nothing ran: leave no empty document behind */
	if (r < 0) {
		ptw_spans_free(s.spans);
		ptw_timeouts_free(s.timeouts);
		ptw_buf_free(&s.log);
		if (r == -ENOENT) {
			fprintf(stderr, "ptwatch: cannot run '%s': command not found\n", o.argv[0]);
			return 127;
		}
		if (r == -EPERM)
			fprintf(stderr, "ptwatch: cannot trace '%s': %s (is ptrace restricted? see "
					"/proc/sys/kernel/yama/ptrace_scope)\n",
				o.argv[0], strerror(-r));
		else
			fprintf(stderr, "ptwatch: cannot run '%s': %s\n", o.argv[0], strerror(-r));
		return r == -EACCES || r == -ENOEXEC || r == -EISDIR || r == -ENOTDIR ? 126 : 127;
	}

	r = session(&o, &s, t, out_fd);
	free(o.trace);
	return r;
}
