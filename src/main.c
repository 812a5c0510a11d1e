/* SPDX-License-Identifier: MIT */
/* ptwatch: options -> session -> loop -> report. */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <inttypes.h>
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
#include "ptw_locks.h"
#include "ptw_load.h"
#include "ptw_live.h"
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
	bool locks; /* --locks */
	int duration_ms;
	uint64_t open_timeout_ns; /* 0: disabled */
	int live;		  /* --live 1, --no-live 0, else -1: see want_live() */
	char **argv;
	/* issue 10: output formats, the log's filters (struct ptw_text_filter) */
	bool lines;	/* --json-lines */
	bool chrome;	/* --format=chrome */
	struct ptw_text_filter filter;
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
	/* --json-lines: the stream; lines wait in `pending` for the header */
	bool lines;
	struct ptw_lines out;
	bool header_done;
	uint64_t total; /* spans seen so far: new ones get a span_open line */
	size_t deadlocks_lined; /* --locks deadlocks written as lines */
	const struct ptw_text_filter *filter;
	uint64_t stops_logged; /* -v: stops said so far */
	struct ptw_live *live; /* --live: the table, and its rows */
	struct ptw_live_model *model;
};

static void usage(FILE *f)
{
	fprintf(f,
		"Usage: ptwatch [OPTIONS] -- COMMAND [ARGS...]\n"
		"       ptwatch [OPTIONS] -p PID\n"
		"       ptwatch report [--format=text|chrome] [-o FILE] [--tid=TID] [--routine=GLOB] FILE\n"
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
		"                       waits for; deadlocks) and detach at once; threads\n"
		"                       asleep are read without being stopped; the report\n"
		"                       goes to standard output\n"
		"  --json               write the spans document (JSON) to standard output;\n"
		"                       COMMAND's standard output then goes to standard error\n"
		"  -o, --output=FILE    write the spans document to FILE (implies --json)\n"
		"  --json-lines         stream JSON lines instead (one object per line as spans\n"
		"                       begin and end, then the metrics), to standard output or\n"
		"                       FILE (-o); memory stays bounded by the live threads\n"
		"  --format=FORMAT      json (the document, as --json), json-lines, or chrome\n"
		"                       (Chrome trace-event JSON for Perfetto UI, chrome://tracing)\n"
		"  -q, --quiet          no event lines on standard error (the summary stays,\n"
		"                       and a deadlock found with --locks is still said)\n"
		"  -v, --verbose        event lines for every event, with breakpoint and ptrace\n"
		"                       stop detail\n"
		"  -e, --events=LIST    only these event lines (comma list of the names the log\n"
		"                       prints: create,start,end,joined,...; see ptwatch(1))\n"
		"  --tid=TID[,TID...]   only event lines (live table rows) of these threads\n"
		"                       (and in report)\n"
		"  --routine=GLOB       only event lines (live table rows) of spans whose start\n"
		"                       routine matches the shell glob (and in report)\n"
		"  --live               a live table of the threads on the terminal instead of\n"
		"                       event lines (default with -p when standard error is a\n"
		"                       terminal; with a COMMAND, its terminal input and\n"
		"                       output go to /dev/null meanwhile); keys: q quit (let\n"
		"                       go), tab view, s sort, r reverse, / filter, space pause\n"
		"  --no-live            event lines, never the live table\n"
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
		"  --locks              wait spans: every contended wait on a mutex, rwlock,\n"
		"                       condition variable, semaphore or join (object, owner,\n"
		"                       call site, duration; the most contended objects in the\n"
		"                       summary), and deadlocks reported the moment they form.\n"
		"                       Only glibc's slow paths are hooked: two stops per\n"
		"                       contended wait, none for an uncontended lock\n"
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

/* The option codes output_option() knows (the same in parse_options). */
enum { OPT_JSON_ = 256, OPT_LINES_ = 300, OPT_FORMAT_, OPT_TID_, OPT_ROUTINE_ };

static void die_usage(const char *fmt, const char *arg)
{
	fprintf(stderr, "ptwatch: ");
	fprintf(stderr, fmt, arg);
	fprintf(stderr, "\nTry 'ptwatch --help'.\n");
	exit(2);
}

/* The options of issue 10 (formats and the log's filters), shared with
 * `ptwatch report`: true if c was one. */
static bool output_option(int c, const char *arg, struct options *o)
{
	switch (c) {
	case 'o':
		o->output = arg;
		return true;
	case 'q':
		o->quiet = true;
		return true;
	case 'v':
		o->filter.verbose = true;
		return true;
	case OPT_JSON_:
		o->json = true;
		return true;
	case OPT_LINES_:
		o->lines = true;
		return true;
	case OPT_FORMAT_:
		o->json = !strcmp(arg, "json");
		o->lines = !strcmp(arg, "json-lines");
		o->chrome = !strcmp(arg, "chrome");
		if (!o->json && !o->lines && !o->chrome && strcmp(arg, "text"))
			die_usage("unknown format '%s' (text, json, json-lines, chrome)", arg);
		return true;
	case 'e':
		if (ptw_text_filter_events(&o->filter, arg) < 0)
			die_usage("unknown event name in '%s' (see ptwatch(1), EVENT LOG)", arg);
		return true;
	case OPT_TID_:
		if (ptw_text_filter_tids(&o->filter, arg) < 0)
			die_usage("invalid --tid '%s' (thread ids, comma separated)", arg);
		return true;
	case OPT_ROUTINE_:
		o->filter.routine = arg;
		return true;
	}
	return false;
}

static void output_options_check(struct options *o)
{
	if (o->lines + o->chrome + o->json > 1)
		die_usage("%s", "give one output format (--json, --json-lines or --format)");
	/* -o FILE alone: the document, as before */
	if (o->output && !o->lines && !o->chrome)
		o->json = true;
}

static void parse_options(int argc, char **argv, struct options *o)
{
	enum {
		OPT_JSON = OPT_JSON_,
		OPT_SNAPSHOT,
		OPT_DURATION,
		OPT_OPEN_TIMEOUT,
		OPT_NO_DEBUG_FILES,
		OPT_NO_CACHE,
		OPT_CREATE_EVENTS,
		OPT_TRACE,
		OPT_LOCKS,
		OPT_DEBUG,
		OPT_LINES = OPT_LINES_,
		OPT_FORMAT = OPT_FORMAT_,
		OPT_TID = OPT_TID_,
		OPT_ROUTINE = OPT_ROUTINE_,
		OPT_LIVE,
		OPT_NO_LIVE,
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
		{ "locks", no_argument, NULL, OPT_LOCKS },
		{ "debug", required_argument, NULL, OPT_DEBUG },
		{ "json-lines", no_argument, NULL, OPT_LINES },
		{ "format", required_argument, NULL, OPT_FORMAT },
		{ "verbose", no_argument, NULL, 'v' },
		{ "events", required_argument, NULL, 'e' },
		{ "tid", required_argument, NULL, OPT_TID },
		{ "routine", required_argument, NULL, OPT_ROUTINE },
		{ "live", no_argument, NULL, OPT_LIVE },
		{ "no-live", no_argument, NULL, OPT_NO_LIVE },
		{ "help", no_argument, NULL, 'h' },
		{ "version", no_argument, NULL, 'V' },
		{ NULL, 0, NULL, 0 },
	};
	memset(o, 0, sizeof(*o));
	o->use_debug_files = true;
	o->use_cache = true;
	o->duration_ms = -1;
	o->open_timeout_ns = PTW_OPEN_TIMEOUT_DEFAULT_NS;
	o->live = -1;
	const char *env = getenv("PTWATCH_NO_DEBUG_FILES");
	if (env && *env && strcmp(env, "0"))
		o->use_debug_files = false;

	int c;
	/* '+': stop at the first non-option, the command. */
	while ((c = getopt_long(argc, argv, "+p:o:fqhVve:", longopts, NULL)) != -1) {
		if (output_option(c, optarg, o))
			continue;
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
		case OPT_SNAPSHOT:
			o->snapshot = true;
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
		case OPT_LOCKS:
			o->locks = true;
			break;
		case OPT_DEBUG:
			if (ptw_debug_parse(optarg) < 0)
				die_usage("unknown debug domain in '%s' (attach,tdb,bp,sym,spans,tracer,all)",
					  optarg);
			break;
		case OPT_LIVE:
		case OPT_NO_LIVE:
			o->live = c == OPT_LIVE;
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
	output_options_check(o);
	if (o->snapshot && !o->pid)
		die_usage("%s", "--snapshot needs -p PID");
	if (o->snapshot && o->ntrace)
		die_usage("%s", "--trace cannot be used with --snapshot (nothing runs)");
	if (o->snapshot && o->locks)
		die_usage("%s", "--locks cannot be used with --snapshot (it finds deadlocks already)");
	if (o->snapshot && o->follow_forks)
		die_usage("%s", "-f cannot be used with --snapshot (a snapshot shows PID alone)");
	if (o->pid && optind < argc)
		die_usage("%s", "give either -p PID or a command, not both");
	if (o->live == 1 && o->snapshot)
		die_usage("%s", "--live cannot be used with --snapshot");
	if (o->live == 1 && !isatty(STDERR_FILENO))
		die_usage("%s", "--live needs a terminal on standard error");
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

/* --json-lines: what the tracer learnt since (warnings), and with -v the
 * ptrace stops so far. */
static void report_progress(struct session *s)
{
	if (!s->tracer || (!s->lines && !s->filter->verbose))
		return;
	struct ptw_report rep = { 0 };
	ptw_tracer_report(s->tracer, &rep);
	if (s->lines && s->header_done)
		ptw_lines_warnings(&s->out, &rep);
	if (s->filter->verbose && !s->quiet && rep.stops_total != s->stops_logged) {
		uint64_t now = ptw_now_ns();
		uint64_t rel = now - s->start_ns;
		ptw_buf_printf(&s->log, "%4" PRIu64 ".%06" PRIu64 " %7d %-8s %" PRIu64 " ptrace stops (+%" PRIu64 "), %zu breakpoints:",
			       rel / 1000000000u, (rel / 1000u) % 1000000u, rep.pid, "stops",
			       rep.stops_total, rep.stops_total - s->stops_logged, rep.breakpoints);
		for (size_t i = 0; i < rep.nstop_kinds; i++)
			if (rep.stop_counts[i])
				ptw_buf_printf(&s->log, " %s %" PRIu64, rep.stop_names[i], rep.stop_counts[i]);
		ptw_buf_putc(&s->log, '\n');
		s->stops_logged = rep.stops_total;
	}
}

static void flush_log(void *ctx)
{
	struct session *s = ctx;
	flush_record(s);
	report_progress(s);
	/* EPIPE: SIGPIPE (blocked) ends the session */
	ptw_write_all(STDERR_FILENO, s->log.p, s->log.len);
	ptw_buf_reset(&s->log);
}

/* --json-lines: the restorer gets the record before a line says more
 * than it knows (if the tracer died now, it writes the rest). */
static void record_before_line(struct session *s)
{
	if (s->rec && s->record.len)
		ptw_guardian_record(&s->record);
}

static void on_retire(void *ctx, const struct ptw_span *sp)
{
	struct session *s = ctx;
	record_before_line(s);
	ptw_lines_span(&s->out, "span", sp, 0);
}

static void on_frame_closed(void *ctx, const struct ptw_frame *fr)
{
	struct session *s = ctx;
	record_before_line(s);
	ptw_lines_frame(&s->out, fr);
}

/* The stream's new lines for the event just consumed. */
static void lines_event(struct session *s, const struct ptw_event *ev)
{
	uint64_t total = ptw_spans_total(s->spans);
	if (total != s->total || ev->kind == PTW_EV_SPAN_OPEN)
		record_before_line(s);
	for (uint64_t id = s->total + 1; id <= total; id++) {
		const struct ptw_span *sp = ptw_spans_by_id(s->spans, (uint32_t)id);
		if (sp)
			ptw_lines_span(&s->out, "span_open", sp, ptw_spans_active(s->spans));
	}
	s->total = total;
	if (ev->kind == PTW_EV_SPAN_OPEN)
		ptw_lines_open(&s->out, ev);
	/* --locks: a wait as it ends; a deadlock once every member is in */
	const struct ptw_wait *w = ptw_spans_last_wait(s->spans);
	if (ev->kind == PTW_EV_WAIT_END && w && w->has_end)
		ptw_lines_wait(&s->out, w);
	const struct ptw_locks *locks = ptw_spans_locks(s->spans);
	for (size_t n = ptw_locks_deadlock_count(locks); s->deadlocks_lined < n;) {
		const struct ptw_live_deadlock *d = ptw_locks_deadlock(locks, s->deadlocks_lined);
		if (d->n < d->expected)
			break;
		ptw_lines_deadlock(&s->out, d);
		s->deadlocks_lined++;
	}
}

/* --locks: a row's state says what its thread waits for. */
static void live_wait(struct session *s, const struct ptw_event *ev)
{
	const struct ptw_wait *w = ptw_spans_last_wait(s->spans);
	if (w && (ev->kind == PTW_EV_WAIT_BEGIN || ev->kind == PTW_EV_WAIT_END ||
		  ev->kind == PTW_EV_DEADLOCK))
		ptw_live_model_wait(s->model, w, ev->kind != PTW_EV_WAIT_END,
				    ev->kind == PTW_EV_DEADLOCK);
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
	if (s->lines)
		lines_event(s, ev);
	bool wait_ev = ev->kind == PTW_EV_WAIT_BEGIN || ev->kind == PTW_EV_WAIT_END ||
		       ev->kind == PTW_EV_DEADLOCK;
	if (s->live) {
		if (ev->kind == PTW_EV_PROCESS_EXIT || ev->kind == PTW_EV_EXEC ||
		    ev->kind == PTW_EV_DETACHED)
			ptw_live_model_refresh(s->model, ev->ns); /* many spans ended */
		if (sp && ptw_text_filter_span(s->filter, sp)) /* --tid, --routine */
			ptw_live_model_note(s->model, sp, ev->ns);
		live_wait(s, ev);
		if (ev->kind == PTW_EV_DEADLOCK) { /* held, said after the table */
			ptw_text_wait_event(&s->log, s->start_ns, ev, ptw_spans_last_wait(s->spans));
			flush_log(s);
		}
	} else if (ev->kind == PTW_EV_DEADLOCK || (!s->quiet && wait_ev)) {
		/* A deadlock is said even with -q: it is what --locks is for. */
		ptw_text_wait_event(&s->log, s->start_ns, ev, ptw_spans_last_wait(s->spans));
		if (ev->kind == PTW_EV_DEADLOCK)
			flush_log(s);
	} else if (!s->quiet) {
		const struct ptw_frame *fr = ptw_spans_last_frame(s->spans);
		ptw_text_event_filtered(&s->log, s->start_ns, ev, sp, fr, s->filter);
		if (s->log.len > 65536)
			flush_log(s);
	}
	/* the span the log line used may go now (streaming) */
	ptw_spans_collect(s->spans);
}

/* --json-lines: the first line, once the target is known; the lines held
 * back until then follow. */
static void lines_start(struct session *s)
{
	if (!s->lines || s->header_done)
		return;
	struct ptw_report rep = { 0 };
	rep.tool_version = PTW_VERSION;
	rep.realtime_offset_ns = ptw_realtime_offset_ns();
	ptw_tracer_report(s->tracer, &rep);
	rep.open_timeout_ns = ptw_timeouts_limit(s->timeouts);
	struct ptw_buf *held = s->out.hold;
	s->out.hold = NULL;
	ptw_lines_header(&s->out, &rep);
	if (held && held->len && !s->out.broken &&
	    ptw_write_all(s->out.fd >= 0 ? s->out.fd : STDOUT_FILENO, held->p, held->len) < 0)
		s->out.broken = true;
	ptw_buf_free(held);
	free(held);
	s->header_done = true;
	ptw_lines_warnings(&s->out, &rep);
}

/* ---- open timeouts ---- */

static uint64_t next_timer(void *ctx)
{
	struct session *s = ctx;
	uint64_t next = ptw_timeouts_next(s->timeouts);
	uint64_t live = s->live ? ptw_live_next(s->live) : 0;
	return live && (!next || live < next) ? live : next;
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
	if (s->live && ptw_live_tick(s->live, now) == PTW_LIVE_QUIT)
		ptw_tracer_stop(s->tracer);
}

/* ---- the live table (ptw_live.h) ---- */

/*
 * Whether to show it. By default only with -p, standard error a terminal
 * of which ptwatch is the foreground job, and nothing else on it (-q,
 * --debug): a launched command shares the terminal (its output, its
 * keyboard), so it needs --live, which then gives the command /dev/null
 * for what was the terminal (ptw_live_command_fds).
 */
static bool want_live(const struct options *o)
{
	if (o->live >= 0)
		return o->live;
	const char *term = getenv("TERM");
	return o->pid && !o->snapshot && !o->quiet && !ptw_debug_mask && isatty(STDERR_FILENO) &&
	       tcgetpgrp(STDERR_FILENO) == getpgrp() && term && *term && strcmp(term, "dumb");
}

/* Takes the terminal; our own standard error is held meanwhile. */
static void live_start(const struct options *o, struct session *s, struct ptw_tracer *t,
		       int input_fd)
{
	char title[160];
	if (o->pid) {
		char comm[32] = "", path[48];
		snprintf(path, sizeof(path), "/proc/%d/comm", o->pid);
		FILE *f = fopen(path, "re");
		if (f && fgets(comm, sizeof(comm), f))
			comm[strcspn(comm, "\n")] = 0;
		if (f)
			fclose(f);
		snprintf(title, sizeof(title), "ptwatch -p %d (%s)", o->pid, comm);
	} else {
		snprintf(title, sizeof(title), "ptwatch -- %s", o->argv[0]);
	}
	struct ptw_live_opts lo = { .tty_fd = STDERR_FILENO, .input_fd = input_fd, .title = title,
				    .open_timeout_ns = o->open_timeout_ns, .hold_stderr = true };
	int r = ptw_live_start(&lo, &s->live);
	if (r < 0) {
		fprintf(stderr, "ptwatch: no live table (TERM=%s: %s); event lines instead\n",
			getenv("TERM") ? getenv("TERM") : "", strerror(-r));
		return;
	}
	atexit(ptw_live_emergency_end);
	ptw_buf_reset(&s->log); /* the table shows them (the attach's "found" lines) */
	s->model = ptw_live_get_model(s->live);
	ptw_tracer_set_wake_fd(t, ptw_live_wake_fd(s->live));
	for (size_t i = 0; i < ptw_spans_count(s->spans); i++)
		if (ptw_text_filter_span(s->filter, ptw_spans_get(s->spans, i)))
			ptw_live_model_note(s->model, ptw_spans_get(s->spans, i), ptw_now_ns());
}

static void live_end(struct session *s)
{
	ptw_live_end(s->live); /* standard error is the terminal again */
	s->live = NULL;
	s->model = NULL;
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
	lines_start(s);
	if (!o->snapshot)
		r = ptw_tracer_run(t, o->duration_ms, &reason, &sig);
	live_end(s);
	if (r < 0)
		fprintf(stderr, "ptwatch: tracing failed: %s\n", strerror(-r));
	if (reason != PTW_END_TARGET_EXITED)
		ptw_tracer_detach(t);
	flush_log(s);
	ptw_spans_finish(s->spans);
	if (s->lines) {
		lines_start(s); /* (a snapshot, or an end before the session began) */
		ptw_spans_retire_all(s->spans);
		/* a snapshot keeps its spans for its report (one moment: bounded) */
		for (size_t i = 0; o->snapshot && i < ptw_spans_count(s->spans); i++)
			ptw_lines_span(&s->out, "span", ptw_spans_get(s->spans, i), 0);
		const struct ptw_frames *f = ptw_spans_frames(s->spans);
		for (size_t i = 0; i < ptw_frames_count(f); i++)
			if (ptw_frames_get(f, i)->status == PTW_FRAME_OPEN)
				ptw_lines_frame(&s->out, ptw_frames_get(f, i));
	}

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
	rep.locks = o->locks;
	rep.spans = s->spans;

	struct ptw_output_opts oo = { .json = o->json || o->chrome, .json_fd = out_fd,
				      .snapshot = o->snapshot, .chrome = o->chrome };
	if (s->lines) {
		ptw_lines_end(&s->out, &rep);
		if (out_fd >= 0)
			close(out_fd);
	}
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
	if (reason == PTW_END_DETACHED) /* q: it runs on, as the user asked */
		return 0;
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

/* ---- ptwatch report FILE ---- */

static int report_main(int argc, char **argv)
{
	static const struct option longopts[] = {
		{ "output", required_argument, NULL, 'o' },
		{ "format", required_argument, NULL, OPT_FORMAT_ },
		{ "tid", required_argument, NULL, OPT_TID_ },
		{ "routine", required_argument, NULL, OPT_ROUTINE_ },
		{ "quiet", no_argument, NULL, 'q' },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	struct options o = { 0 };
	int c;
	while ((c = getopt_long(argc, argv, "o:qh", longopts, NULL)) != -1) {
		if (c == 'h') {
			usage(stdout);
			return 0;
		}
		if (c == '?' || !output_option(c, optarg, &o)) {
			fprintf(stderr, "Try 'ptwatch --help'.\n");
			return 2;
		}
	}
	if (o.lines)
		die_usage("%s", "report writes text, json or chrome");
	if (optind != argc - 1)
		die_usage("%s", "report needs one FILE (a spans document or a --json-lines stream)");
	const char *path = argv[optind];
	int fd = strcmp(path, "-") ? open(path, O_RDONLY | O_CLOEXEC) : STDIN_FILENO;
	struct ptw_buf text = { 0 };
	if (fd < 0) {
		fprintf(stderr, "ptwatch: cannot open %s: %s\n", path, strerror(errno));
		return 1;
	}
	for (;;) {
		char buf[65536];
		ssize_t n = read(fd, buf, sizeof(buf));
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0) {
			fprintf(stderr, "ptwatch: cannot read %s: %s\n", path, strerror(errno));
			return 1;
		}
		if (n == 0)
			break;
		ptw_buf_add(&text, buf, (size_t)n);
	}
	if (fd != STDIN_FILENO)
		close(fd);
	struct ptw_loaded *l;
	char err[256];
	bool convert = o.json || o.chrome;
	if (ptw_load(text.p ? text.p : "", text.len, !convert, &o.filter, &l, err, sizeof(err)) < 0) {
		fprintf(stderr, "ptwatch: %s: %s\n", path, err);
		ptw_buf_free(&text);
		return 1;
	}
	ptw_buf_free(&text);
	int out_fd = -1;
	if (o.output) {
		out_fd = open(o.output, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
		if (out_fd < 0) {
			fprintf(stderr, "ptwatch: cannot open %s: %s\n", o.output, strerror(errno));
			ptw_loaded_free(l);
			return 1;
		}
	}
	int r = 0;
	if (convert) {
		struct ptw_buf out = { 0 };
		if (o.chrome)
			ptw_report_chrome(&l->report, &out);
		else
			ptw_report_json(&l->report, &out);
		r = ptw_write_all(out_fd >= 0 ? out_fd : STDOUT_FILENO, out.p, out.len);
		if (r < 0)
			fprintf(stderr, "ptwatch: cannot write %s: %s\n", o.output ? o.output : "the output",
				strerror(-r));
		ptw_buf_free(&out);
	} else {
		/* the summary a live session printed at its end */
		struct ptw_buf out = { 0 };
		if (l->report.snapshot)
			ptw_text_snapshot(&out, &l->report);
		else
			ptw_text_summary(&out, &l->report);
		r = ptw_write_all(out_fd >= 0 ? out_fd : STDOUT_FILENO, out.p, out.len);
		ptw_buf_free(&out);
	}
	if (out_fd >= 0 && close(out_fd) < 0 && !r) {
		fprintf(stderr, "ptwatch: cannot write %s: %s\n", o.output, strerror(errno));
		r = -EIO;
	}
	ptw_loaded_free(l);
	free(o.filter.tids);
	return r < 0 ? 1 : 0;
}

int main(int argc, char **argv)
{
	if (argc > 1 && !strcmp(argv[1], "report"))
		return report_main(argc - 1, argv + 1);
	struct options o;
	/* The options point into it for the whole run (kept reachable: the
	 * process title is rewritten in argv's own memory). */
	static char **volatile args;
	args = copy_argv(argc, argv);
	parse_options(argc, args, &o);

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
		.out = { .json = o.json || o.chrome, .json_fd = out_fd, .snapshot = o.snapshot,
			 .chrome = o.chrome, .lines = o.lines },
		.key_tty = -1, .key_w = -1, .key_r = -1,
	};
	/* --live: the keys come from the terminal through the front (the
	 * tracer is not in the terminal's foreground group), and SIGWINCH. */
	bool live = want_live(&o) && ptw_guardian_keys_prepare(&go) == 0;
	bool split = ptw_bp_journal_prepare() == 0 && ptw_guardian_split(&go) == 0;
	if (split)
		ptw_set_mem_fd_hook(ptw_guardian_share_mem);
	int key_input = live ? ptw_guardian_keys_input(&go, split) : -1;
	install_crash_handlers();

	/* A snapshot has no events to tell as they happen: it is its report. */
	struct session s = { .spans = ptw_spans_new(), .quiet = o.quiet || o.snapshot,
			     .start_ns = ptw_now_ns() };
	if (ptw_guardian_keeps_record())
		s.rec = ptw_record_writer_new();
	s.filter = &o.filter;
	if (o.lines) {
		/* ended spans go out as lines and are freed: bounded memory */
		s.lines = true;
		s.out = (struct ptw_lines){ .fd = out_fd, .hold = xcalloc(1, sizeof(struct ptw_buf)) };
		if (!o.snapshot)
			ptw_spans_set_streaming(s.spans, on_retire, &s);
		ptw_frames_set_closed(ptw_spans_frames_mut(s.spans), on_frame_closed, &s);
	}
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
		.locks = o.locks,
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
			ptw_record_writer_free(s.rec);
			return 1;
		}
		if (live)
			live_start(&o, &s, t, key_input);
		r = session(&o, &s, t, out_fd);
		free(o.trace);
		return r;
	}
	/* The document owns stdout: the command's output must not land in it. */
	int child_stdout = (o.json || o.lines || o.chrome) && !o.output ? STDERR_FILENO : -1;
	int keep[3] = { -1, -1, -1 };
	if (live)
		ptw_live_command_fds(STDERR_FILENO, keep);
	r = ptw_tracer_launch(&to, o.argv, child_stdout, &t);
	ptw_live_restore_fds(keep);
	if (r < 0 && out_created)
		unlink(o.output); /* nothing ran: leave no empty document behind */
	if (r < 0) {
		ptw_spans_free(s.spans);
		ptw_timeouts_free(s.timeouts);
		ptw_buf_free(&s.log);
		ptw_record_writer_free(s.rec);
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

	if (live)
		live_start(&o, &s, t, key_input);
	r = session(&o, &s, t, out_fd);
	free(o.trace);
	return r;
}
