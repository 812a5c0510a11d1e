/* SPDX-License-Identifier: MIT */
/* ptwatch: the options, then one of: launch or attach and trace
 * (src/session), a snapshot, or `ptwatch report` (src/session/report.c). */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "config.h"
#include "ptw_attach.h"
#include "ptw_backend.h"
#include "ptw_breakpoints.h"
#include "ptw_guardian.h"
#include "ptw_live.h"
#include "ptw_output.h"
#include "ptw_session.h"
#include "ptw_timeouts.h"
#include "ptw_tracer.h"
#include "ptw_util.h"

struct options {
	pid_t pid; /* -p: attach; 0: launch argv */
	bool snapshot;
	enum ptw_backend_kind backend; /* --backend (default $PTWATCH_BACKEND, else auto) */
	bool backend_given;	       /* by the option, not the environment */
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
	/* The document, stream or trace besides the text (TEXT: none); two
	 * given (--json and --json-lines) are an error unless --format comes
	 * after them. */
	enum ptw_output_format format;
	bool formats_clash;
	struct ptw_text_filter filter; /* the event lines' filters */
};

static void usage(FILE *f)
{
	fprintf(f,
		"Usage: ptwatch [OPTIONS] -- COMMAND [ARGS...]\n"
		"       ptwatch [OPTIONS] -p PID\n"
		"       ptwatch report [--format=text|chrome] [-o FILE] [--tid=TID] [--routine=GLOB]\n"
		"                      [--object=GLOB] FILE\n"
		"       ptwatch report --live FILE   browse it in the live table (n/N step, t time)\n"
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
		"                       prints: create,start,end,joined,wait,...; see ptwatch(1))\n"
		"  --tid=TID[,TID...]   only event lines (live table rows) of these threads\n"
		"                       (and in report)\n"
		"  --routine=GLOB       only event lines (live table rows) of spans whose start\n"
		"                       routine matches the shell glob (and in report)\n"
		"  --object=GLOB        --locks: only the waits on objects whose name or address\n"
		"                       (0x...) matches, their waiters and owners (and in report)\n"
		"  --live               a live table of the threads on the terminal instead of\n"
		"                       event lines (default with -p when standard error is a\n"
		"                       terminal; with a COMMAND, its terminal input and\n"
		"                       output go to /dev/null meanwhile); keys: q quit (let\n"
		"                       go), tab view, s sort, r reverse, / filter, space pause\n"
		"  --no-live            event lines, never the live table\n"
		"  --duration=SECONDS   stop tracing after SECONDS (at most a year) and let\n"
		"                       COMMAND run on\n"
		"  --open-timeout=SECONDS\n"
		"                       report a span still open after SECONDS (default 5,\n"
		"                       fractions allowed, at most a year, 0: never) with\n"
		"                       where its thread is; if it ends later, it is marked\n"
		"                       slow\n"
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
		"                       summary), and deadlocks reported the moment they form\n"
		"                       (with -p, the waits already under way too: a process\n"
		"                       hung before the attach).\n"
		"                       Only glibc's slow paths are hooked: two stops per\n"
		"                       contended wait, none for an uncontended lock\n"
		"  --backend=BACKEND    how to observe: ptrace (stops threads at breakpoints),\n"
		"                       kernel (uprobes and BPF: no thread ever stops; needs\n"
		"                       root, or CAP_BPF and CAP_PERFMON), or auto (default:\n"
		"                       kernel where it can run, else ptrace; also\n"
		"                       PTWATCH_BACKEND). The summary and the document say\n"
		"                       which ran, and why\n"
		"  --debug=DOMAINS      debug log: attach,tdb,bp,sym,spans,tracer or all\n"
		"  -h, --help           show this help\n"
		"  -V, --version        show the version\n"
		"\n"
		"Ctrl-C reaches COMMAND as without ptwatch, which traces on until COMMAND\n"
		"has reacted; a second Ctrl-C within 2 s, or SIGTERM/SIGHUP sent to ptwatch\n"
		"alone, detaches and leaves COMMAND running (exit status 128+signal).\n"
		"ptwatch exits with COMMAND's exit status, or dies of its signal; with -p,\n"
		"it exits 0 once it has let go of PID. An output it could not write (a full\n"
		"disk; not a closed pipe) is said in one line, and the exit status is 3.\n"
		"See ptwatch(1).\n");
}

/* The option codes output_option() knows (the same in parse_options). */
enum { OPT_JSON_ = 256, OPT_LINES_ = 300, OPT_FORMAT_, OPT_TID_, OPT_ROUTINE_, OPT_OBJECT_ };

static void die_usage(const char *fmt, const char *arg)
{
	fprintf(stderr, "ptwatch: ");
	fprintf(stderr, fmt, arg);
	fprintf(stderr, "\nTry 'ptwatch --help'.\n");
	exit(2);
}

/* The first word of a comma list that ok() refuses, for the message (a
 * list that is all commas: ""); NULL if every word is fine. Static copy. */
static const char *bad_word(const char *list, int (*ok)(const char *word))
{
	static char word[64];
	const char *p = list;
	do {
		size_t n = strcspn(p, ",");
		snprintf(word, sizeof(word), "%.*s", (int)(n < sizeof(word) ? n : sizeof(word) - 1), p);
		if (n >= sizeof(word) || ok(word) < 0)
			return word;
		p += n;
	} while (*p++);
	return NULL;
}

static int event_word_ok(const char *w)
{
	struct ptw_text_filter f = { 0 };
	return ptw_text_filter_events(&f, w);
}

static int tid_word_ok(const char *w)
{
	struct ptw_span_filter f = { 0 };
	int r = ptw_span_filter_tids(&f, w);
	free(f.tids);
	return r;
}

static int debug_word_ok(const char *w)
{
	unsigned keep = ptw_debug_mask;
	int r = ptw_debug_parse(w);
	ptw_debug_mask = keep;
	return r;
}

/* -e LIST, --tid LIST, --debug LIST: "<what> 'LIST': 'WORD' <why>",
 * the word that is wrong named; exits 2. */
static void __attribute__((noreturn)) die_list(const char *what, const char *list,
					       int (*ok)(const char *), const char *why)
{
	const char *bad = bad_word(list, ok);
	char *arg = ptw_escape_str(list);
	if (!bad || !*bad) {
		fprintf(stderr, "ptwatch: %s '%s': an empty name\n", what, arg);
	} else {
		char *b = ptw_escape_str(bad);
		fprintf(stderr, "ptwatch: %s '%s': '%s' %s\n", what, arg, b, why);
		free(b);
	}
	free(arg);
	fprintf(stderr, "Try 'ptwatch --help'.\n");
	exit(2);
}

/* SECONDS of --duration and --open-timeout: a decimal number, > 0 (or
 * >= 0: zero_ok), at most a year; else exits 2 saying which. */
#define SECONDS_MAX (86400.0 * 365)
static double seconds_arg(const char *what, const char *arg, bool zero_ok)
{
	char *end;
	errno = 0;
	double s = strtod(arg, &end);
	char *a = ptw_escape_str(arg);
	if (*end || end == arg || s != s || s < 0 || (!zero_ok && !(s > 0)) ||
	    (errno && errno != ERANGE)) {
		fprintf(stderr, "ptwatch: invalid %s '%s' (seconds, %s)\n", what, a,
			zero_ok ? ">= 0; 0 disables" : "> 0");
		fprintf(stderr, "Try 'ptwatch --help'.\n");
		exit(2);
	}
	if (s > SECONDS_MAX) {
		fprintf(stderr, "ptwatch: invalid %s '%s': more than a year (at most %.0f seconds)\n",
			what, a, SECONDS_MAX);
		fprintf(stderr, "Try 'ptwatch --help'.\n");
		exit(2);
	}
	free(a);
	return s;
}

/* The options of the outputs (formats and the event lines' filters),
 * shared with `ptwatch report`: true if c was one. */
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
	case OPT_LINES_: {
		enum ptw_output_format f = c == OPT_JSON_ ? PTW_OUTPUT_JSON : PTW_OUTPUT_LINES;
		if (o->format != PTW_OUTPUT_TEXT && o->format != f)
			o->formats_clash = true;
		else
			o->format = f;
		return true;
	}
	case OPT_FORMAT_:
		if (!strcmp(arg, "json"))
			o->format = PTW_OUTPUT_JSON;
		else if (!strcmp(arg, "json-lines"))
			o->format = PTW_OUTPUT_LINES;
		else if (!strcmp(arg, "chrome"))
			o->format = PTW_OUTPUT_CHROME;
		else if (!strcmp(arg, "text"))
			o->format = PTW_OUTPUT_TEXT;
		else
			die_usage("unknown format '%s' (text, json, json-lines, chrome)", arg);
		o->formats_clash = false;
		return true;
	case 'e':
		if (ptw_text_filter_events(&o->filter, arg) < 0)
			die_list("unknown event name in", arg, event_word_ok,
				 "is none of exec, main, found, forked, create, clone, start, end, "
				 "cancel, detach, joined, signal, interrupt, open, execve, exit, "
				 "call, ret, wait, waited, DEADLOCK, event, stops (see ptwatch(1))");
		return true;
	case OPT_TID_:
		if (ptw_span_filter_tids(&o->filter.spans, arg) < 0)
			die_list("invalid --tid", arg, tid_word_ok,
				 "is not a thread id (thread ids, comma separated)");
		return true;
	case OPT_ROUTINE_:
		o->filter.spans.routine = arg;
		return true;
	case OPT_OBJECT_:
		o->filter.spans.object = arg;
		return true;
	}
	return false;
}

static void output_options_check(struct options *o)
{
	if (o->formats_clash)
		die_usage("%s", "give one output format (--json, --json-lines or --format)");
	/* -o FILE alone: the document, as before */
	if (o->output && o->format == PTW_OUTPUT_TEXT)
		o->format = PTW_OUTPUT_JSON;
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
		OPT_OBJECT = OPT_OBJECT_,
		OPT_LIVE,
		OPT_NO_LIVE,
		OPT_BACKEND,
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
		{ "object", required_argument, NULL, OPT_OBJECT },
		{ "live", no_argument, NULL, OPT_LIVE },
		{ "no-live", no_argument, NULL, OPT_NO_LIVE },
		{ "backend", required_argument, NULL, OPT_BACKEND },
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
	env = getenv("PTWATCH_BACKEND");
	if (env && *env && ptw_backend_kind_parse(env, &o->backend) < 0)
		die_usage("PTWATCH_BACKEND='%s' is none of auto, ptrace, kernel", env);

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
			double s = seconds_arg("duration", optarg, false);
			o->duration_ms = (int)(s * 1000.0 + 0.5);
			if (o->duration_ms == 0)
				o->duration_ms = 1;
			break;
		}
		case OPT_OPEN_TIMEOUT: {
			double s = seconds_arg("open timeout", optarg, true);
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
				die_list("unknown debug domain in", optarg, debug_word_ok,
					 "is none of attach, tdb, bp, sym, spans, tracer, all");
			break;
		case OPT_LIVE:
		case OPT_NO_LIVE:
			o->live = c == OPT_LIVE;
			break;
		case OPT_BACKEND:
			if (ptw_backend_kind_parse(optarg, &o->backend) < 0)
				die_usage("--backend=%s is none of auto, ptrace, kernel", optarg);
			o->backend_given = true;
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

/* The live table takes the terminal once the target is known; our own
 * standard error is held meanwhile. */
static void live_add(const struct options *o, struct ptw_session *s, int input_fd)
{
	char title[160];
	if (o->pid) {
		char comm[32] = "", path[48];
		snprintf(path, sizeof(path), "/proc/%d/comm", o->pid);
		int n = ptw_read_small_file(path, comm, sizeof(comm));
		if (n > 0 && comm[n - 1] == '\n') /* the file's: the name may hold one */
			comm[n - 1] = 0;
		else if (n <= 0)
			comm[0] = 0;
		/* (the live table escapes its title) */
		snprintf(title, sizeof(title), "ptwatch -p %d (%s)", o->pid, comm);
	} else {
		snprintf(title, sizeof(title), "ptwatch -- %s", o->argv[0]);
	}
	struct ptw_live_opts lo = { .tty_fd = STDERR_FILENO, .input_fd = input_fd, .title = title,
				    .open_timeout_ns = o->open_timeout_ns, .hold_stderr = true,
				    .trace = o->ntrace > 0 };
	ptw_session_add_live(s, &lo);
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

/* argv's strings are about to be written over (process names). */
static char **copy_argv(int argc, char **argv)
{
	char **copy = xcalloc((size_t)argc + 1, sizeof(*copy));
	for (int i = 0; i < argc; i++)
		copy[i] = xstrdup(argv[i]);
	return copy;
}

/* ---- ptwatch report FILE: its options ---- */

static int report_main(int argc, char **argv)
{
	static const struct option longopts[] = {
		{ "output", required_argument, NULL, 'o' },
		{ "format", required_argument, NULL, OPT_FORMAT_ },
		{ "tid", required_argument, NULL, OPT_TID_ },
		{ "routine", required_argument, NULL, OPT_ROUTINE_ },
		{ "object", required_argument, NULL, OPT_OBJECT_ },
		{ "live", no_argument, NULL, 'L' },
		{ "quiet", no_argument, NULL, 'q' },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	struct options o = { 0 };
	bool live = false;
	int c;
	while ((c = getopt_long(argc, argv, "o:qh", longopts, NULL)) != -1) {
		if (c == 'h') {
			usage(stdout);
			return 0;
		}
		if (c == 'L') {
			live = true;
			continue;
		}
		if (c == '?' || !output_option(c, optarg, &o)) {
			fprintf(stderr, "Try 'ptwatch --help'.\n");
			return 2;
		}
	}
	if (o.format == PTW_OUTPUT_LINES)
		die_usage("%s", "report writes text, json or chrome");
	if (optind != argc - 1)
		die_usage("%s", "report needs one FILE (a spans document or a --json-lines stream)");
	if (live && (o.format != PTW_OUTPUT_TEXT || o.output))
		die_usage("%s", "report --live shows the recording on the terminal: no -o or --format");
	struct ptw_report_cmd rc = { .path = argv[optind], .format = o.format, .output = o.output,
				     .filter = &o.filter, .live = live };
	int r = ptw_report_cmd(&rc);
	free(o.filter.spans.tids);
	return r;
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
	if (o.pid > 0) {
		/* A thread id is a way to name its process: say so, and take
		 * the process (its main thread stays main). */
		long tgid = ptw_proc_status_field(o.pid, "Tgid");
		if (tgid > 0 && tgid != o.pid) {
			fprintf(stderr, "ptwatch: %d is a thread of process %ld: attaching to %ld\n",
				o.pid, tgid, tgid);
			o.pid = (pid_t)tgid;
		}
	}

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
	struct ptw_session_opts so = {
		.format = o.format,
		.fd = out_fd,
		.path = o.output,
		.quiet = o.quiet,
		.snapshot = o.snapshot,
		.locks = o.locks,
		.follow_forks = o.follow_forks,
		.attach = o.pid != 0,
		.filter = &o.filter,
		.open_timeout_ns = o.open_timeout_ns,
	};
	struct ptw_guardian_opts go = {
		.argv = argv,
		.session = so,
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

	so.record = ptw_guardian_keeps_record();
	struct ptw_session *s = ptw_session_new(&so);
	struct ptw_backend_opts to = {
		.use_debug_files = o.use_debug_files,
		.use_cache = o.use_cache,
		.create_events = o.create_events,
		.follow_forks = o.follow_forks,
		.trace = o.trace,
		.ntrace = o.ntrace,
		.locks = o.locks,
	};
	ptw_session_tracer_opts(s, &to);
	struct ptw_backend *b;
	char why[256] = "";
	if (o.pid) {
		r = ptw_check_target(o.pid, why, sizeof(why));
		if (r == 0)
			r = ptw_backend_attach(o.backend, &to, o.pid, o.snapshot, &b, why,
					       sizeof(why));
		if (r < 0 && o.backend == PTW_BACKEND_KERNEL) {
			if (out_created)
				unlink(o.output);
			char *w = ptw_escape_str(why);
			fprintf(stderr, "ptwatch: --backend=kernel cannot attach to %d: %s\n", o.pid,
				w);
			free(w);
			ptw_session_free(s);
			return 1;
		}
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
			/* (why may name another process: its comm is anyone's) */
			char *w = ptw_escape_str(why);
			fprintf(stderr, "ptwatch: cannot attach to %d: %s\n", o.pid, w);
			free(w);
			ptw_session_free(s);
			return 1;
		}
		if (live)
			live_add(&o, s, key_input);
		r = ptw_session_run(s, b, o.duration_ms);
		free(o.trace);
		return r;
	}
	/* The document owns stdout: the command's output must not land in it. */
	int child_stdout = o.format != PTW_OUTPUT_TEXT && !o.output ? STDERR_FILENO : -1;
	int keep[3] = { -1, -1, -1 };
	if (live)
		ptw_live_command_fds(STDERR_FILENO, keep);
	r = ptw_backend_launch(o.backend, &to, o.argv, child_stdout, &b, why, sizeof(why));
	ptw_live_restore_fds(keep);
	if (r < 0 && out_created)
		unlink(o.output); /* nothing ran: leave no empty document behind */
	if (r < 0 && o.backend == PTW_BACKEND_KERNEL && why[0]) { /* (not the exec's) */
		ptw_session_free(s);
		char *w = ptw_escape_str(why);
		fprintf(stderr, "ptwatch: --backend=kernel cannot run '%s': %s\n", o.argv[0], w);
		free(w);
		return 1;
	}
	if (r < 0) {
		ptw_session_free(s);
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
		live_add(&o, s, key_input);
	r = ptw_session_run(s, b, o.duration_ms);
	free(o.trace);
	return r;
}
