/* SPDX-License-Identifier: MIT */
/*
 * ptw-kernel-demo: the kernel backend (ptw_kernel.h) on a running process,
 * alone: attach, print every event (or, with -q, only count them), and let
 * go when the process ends, after -t SECONDS, or at SIGINT/SIGTERM. Used by
 * the kill -9 test (tests/kernel/kill9.sh) and bench/kernel.py.
 *
 *   ptw-kernel-demo [-q] [-f [--file-wide]] [-t SECONDS] [--per-probe] [--flush-ms MS]
 *                   [--ring BYTES] [--wake BYTES] [--trace PATTERN]... [--locks] [--debug]
 *                   [--modules-from-proc] [--list-delay-ms MS] [--main-read-delay-ms MS]
 *                   PID | -- COMMAND [ARGS...]
 *
 * With -- COMMAND: launched held (ptw_kernel_launch), reaped at the end.
 * -f: follow forks; each line then says pid/process id, and the processes
 * are listed at the end.
 *
 * Exit: 0 done, 1 cannot attach, 77 the kernel path cannot run here.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <inttypes.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include "ptw_events.h"
#include "ptw_kernel.h"
#include "ptw_output.h"
#include "ptw_symbols.h"
#include "ptw_util.h"

static volatile sig_atomic_t stop;
static bool quiet, follow;
static uint64_t counts[PTW_EV_LAST + 1];
static uint64_t t0;

static void on_signal(int sig)
{
	(void)sig;
	stop = 1;
}

static const char *where(const struct ptw_location *l, char *buf, size_t size)
{
	if (!l)
		return "?";
	if (l->symbol)
		snprintf(buf, size, "%s", l->symbol);
	else
		snprintf(buf, size, "%#" PRIx64, l->addr);
	return buf;
}

static void sink(void *ctx, const struct ptw_event *ev)
{
	(void)ctx;
	if (ev->kind <= PTW_EV_LAST)
		counts[ev->kind]++;
	if (ev->kind == PTW_EV_WARNING) {
		fprintf(stderr, "ptw-kernel-demo: note: %s\n", ev->name);
		return;
	}
	if (ev->kind == PTW_EV_PROCESS) {
		const struct ptw_process *p = ev->proc;
		fprintf(stderr,
			"ptw-kernel-demo: process %u (parent %u) pid %d ppid %d by %d: %s exit %d "
			"code %d signal %d\n",
			p->id, p->parent_id, p->pid, p->ppid, p->parent_tid, p->exe ? p->exe : "?",
			p->exit_kind, p->exit_code, p->exit_signal);
		return;
	}
	if (quiet)
		return;
	char r[256], s[256];
	printf("%12.6f", (double)(ev->ns - t0) / 1e9);
	if (follow)
		printf(" %7d/%-3u", ev->pid, ev->process);
	printf(" %7d %-14s", ev->tid, ptw_event_kind_name(ev->kind));
	switch (ev->kind) {
	case PTW_EV_THREAD_CREATE:
		printf(" tid %d pthread %#" PRIx64 " %s(%#" PRIx64 ") from %s detached %d",
		       ev->other_tid, ev->pthread, where(ev->routine, r, sizeof(r)), ev->arg,
		       where(ev->site, s, sizeof(s)), ev->detached);
		break;
	case PTW_EV_PREEXISTING:
		printf(" pthread %#" PRIx64 " %s detached %d", ev->pthread,
		       where(ev->routine, r, sizeof(r)), ev->detached);
		break;
	case PTW_EV_THREAD_START:
		printf(" %s(%#" PRIx64 ")", where(ev->routine, r, sizeof(r)), ev->arg);
		break;
	case PTW_EV_THREAD_DEATH:
		printf(" value %s%#" PRIx64 " unwinding %d", ev->has_value ? "" : "?", ev->value,
		       ev->unwinding);
		break;
	case PTW_EV_EXIT_CALL:
	case PTW_EV_JOIN_RETURN:
		printf(" value %#" PRIx64, ev->value);
		break;
	case PTW_EV_CANCEL_REQUEST:
	case PTW_EV_DETACH_CALL:
	case PTW_EV_JOIN_CALL:
		printf(" pthread %#" PRIx64, ev->pthread);
		break;
	case PTW_EV_THREAD_NAME:
	case PTW_EV_IMAGE:
		printf(" %s", ev->name ? ev->name : "?");
		break;
	case PTW_EV_LWP_EXIT:
		printf(" how %d code %d sig %d", (int)ev->exit_how, ev->exit_code, ev->sig);
		break;
	case PTW_EV_PROCESS_EXIT:
		printf(" code %d sig %d", ev->exit_code, ev->sig);
		break;
	case PTW_EV_WAIT_BEGIN:
	case PTW_EV_DEADLOCK:
		printf(" %s %#" PRIx64 " (%s) owner %d site %s", ptw_wait_kind_name(ev->wait_kind),
		       ev->wait_object, where(ev->object, r, sizeof(r)), ev->wait_owner,
		       where(ev->site, s, sizeof(s)));
		if (ev->kind == PTW_EV_DEADLOCK)
			printf(" #%u member %" PRIu64 " of %" PRIu64 " proof %d", ev->span_id,
			       ev->arg, ev->value, (int)ev->proof);
		for (size_t i = 0; i < ev->nstack; i++)
			printf("%s%s", i ? " < " : " stack ", where(ev->stack[i], r, sizeof(r)));
		break;
	case PTW_EV_WAIT_END:
		printf(" value %" PRIu64, ev->value);
		break;
	default:
		break;
	}
	putchar('\n');
}

int main(int argc, char **argv)
{
	struct ptw_kernel_opts o = { .use_debug_files = true, .use_cache = true, .sink = sink };
	double seconds = -1;
	char *trace[16];
	o.trace = trace;
	int i;
	for (i = 1; i < argc && argv[i][0] == '-'; i++) {
		if (!strcmp(argv[i], "--")) {
			i++;
			break;
		}
		if (!strcmp(argv[i], "-q"))
			quiet = true;
		else if (!strcmp(argv[i], "-f"))
			follow = o.follow_forks = true;
		else if (!strcmp(argv[i], "--file-wide")) /* -f: probes for every process */
			o.follow_file_wide = true;
		else if (!strcmp(argv[i], "-t") && i + 1 < argc)
			seconds = atof(argv[++i]);
		else if (!strcmp(argv[i], "--debug"))
			ptw_debug_parse("tracer");
		else if (!strcmp(argv[i], "--locks"))
			o.locks = true;
		else if (!strcmp(argv[i], "--per-probe"))
			o.no_multi = true;
		else if (!strcmp(argv[i], "--start-at-clone")) /* not at start_thread */
			o.start_at_clone = true;
		else if (!strcmp(argv[i], "--no-debug-files"))
			o.use_debug_files = false;
		else if (!strcmp(argv[i], "--modules-from-proc")) /* as before ld.so's list */
			o.modules_from_proc = true;
		else if (!strcmp(argv[i], "--list-delay-ms") && i + 1 < argc)
			o.list_delay_ms = (unsigned)atoi(argv[++i]);
		else if (!strcmp(argv[i], "--main-read-delay-ms") && i + 1 < argc)
			o.main_read_delay_ms = (unsigned)atoi(argv[++i]);
		else if (!strcmp(argv[i], "--flush-ms") && i + 1 < argc)
			o.flush_ms = (unsigned)atoi(argv[++i]);
		else if (!strcmp(argv[i], "--ring") && i + 1 < argc)
			o.ring_bytes = (size_t)atol(argv[++i]);
		else if (!strcmp(argv[i], "--wake") && i + 1 < argc)
			o.wake_bytes = (size_t)atol(argv[++i]);
		else if (!strcmp(argv[i], "--trace") && i + 1 < argc)
			trace[o.ntrace < 16 ? o.ntrace++ : 15] = argv[++i];
		else
			break;
	}
	bool launch = i > 1 && !strcmp(argv[i - 1], "--");
	if (launch ? i >= argc : i != argc - 1) {
		fprintf(stderr, "usage: ptw-kernel-demo [-q] [-t SECONDS] [--per-probe] "
				"[--flush-ms MS] [--ring BYTES] [--wake BYTES] [--debug] PID | -- "
				"COMMAND [ARGS...]\n");
		return 2;
	}
	pid_t pid = launch ? 0 : atoi(argv[i]);
	char why[512];
	if (ptw_kernel_available(why, sizeof(why)) < 0) {
		printf("SKIP: %s\n", why);
		return 77;
	}
	struct sigaction sa = { .sa_handler = on_signal };
	sigaction(SIGINT, &sa, NULL);
	sigaction(SIGTERM, &sa, NULL);
	setvbuf(stdout, NULL, _IOFBF, 1 << 16);
	t0 = ptw_now_ns();
	struct ptw_kernel *k;
	int r = launch ? ptw_kernel_launch(&o, argv + i, -1, &k, &pid, why, sizeof(why))
		       : ptw_kernel_attach(&o, pid, &k, why, sizeof(why));
	if (r < 0) {
		fprintf(stderr, "ptw-kernel-demo: cannot %s %s: %s\n",
			launch ? "launch" : "attach to", argv[i], why);
		return r == -ENOSYS ? 77 : launch && r == -ENOENT ? 127 : 1;
	}
	fprintf(stderr, "ptw-kernel-demo: %s %d\n", launch ? "launched" : "attached to", pid);
	uint64_t deadline = seconds >= 0 ? t0 + (uint64_t)(seconds * 1e9) : 0;
	while (!stop) {
		int wait = 200;
		if (deadline) {
			uint64_t now = ptw_now_ns();
			if (now >= deadline)
				break;
			if ((deadline - now) / 1000000 < (uint64_t)wait)
				wait = (int)((deadline - now) / 1000000) + 1;
		}
		r = ptw_kernel_run(k, wait);
		if (r == 1 || (r < 0 && r != -EINTR))
			break;
	}
	ptw_kernel_detach(k);
	fflush(stdout);
	struct ptw_kernel_stats st;
	ptw_kernel_stats(k, &st);
	fprintf(stderr,
		"ptw-kernel-demo: mode %s, %u probes, %" PRIu64 " records, %" PRIu64
		" events, %" PRIu64 " lost, %" PRIu64 " wakeups, %" PRIu64 " preexisting, %" PRIu64
		" created; attach %.1f ms (programs %.1f ms), detach %.1f ms\n",
		st.mode, st.probes, st.records, st.events, st.lost, st.wakeups, st.preexisting,
		counts[PTW_EV_THREAD_CREATE], st.attach_ns / 1e6, st.probes_ns / 1e6,
		st.detach_ns / 1e6);
	if (o.locks) {
		struct rusage ru;
		getrusage(RUSAGE_SELF, &ru);
		fprintf(stderr,
			"ptw-kernel-demo: --locks: %" PRIu64 " waits, %" PRIu64
			" deadlocks; the loader's own CPU %.3f s user %.3f s system\n",
			counts[PTW_EV_WAIT_BEGIN], counts[PTW_EV_DEADLOCK],
			(double)ru.ru_utime.tv_sec + (double)ru.ru_utime.tv_usec / 1e6,
			(double)ru.ru_stime.tv_sec + (double)ru.ru_stime.tv_usec / 1e6);
	}
	ptw_kernel_finish(k); /* its notes and processes, to sink */
	int code, sig;
	bool core;
	if (ptw_kernel_target_exit(k, &code, &sig, &core))
		fprintf(stderr, "ptw-kernel-demo: process %d exited: code %d signal %d\n", pid,
			code, sig);
	ptw_kernel_free(k);
	int status;
	if (launch && waitpid(pid, &status, 0) == pid)
		return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
	return 0;
}
