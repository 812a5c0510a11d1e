/* SPDX-License-Identifier: MIT */
/*
 * The kernel backend attached to a running process, compared with what the
 * process says it did: starts tests/kernel/kfixture.c (the lifecycle
 * scenario behind an attach handshake, one thread already running), waits
 * for "ready", attaches (ptw_kernel_attach), lets it go on, feeds every
 * event into the span engine and checks the spans against the fixture's
 * ground truth: the threads, their pthread_t, start routines and create
 * sites, how each ended and with what value, detach state, joins,
 * cancellation, names, the exit code. Then that nothing is left behind:
 * no BPF link of ours, the target's libc text equal to the file.
 *
 * Usage: test_kernel_attach [--per-probe | --launch | --kernel-btf] [--no-debug-files]
 *                            [--start-at-clone] FIXTURE
 *   --per-probe  ordinary uprobes (the fallback) instead of uprobe_multi
 *   --kernel-btf CO-RE against the kernel's whole BTF (no_min_btf), not
 *                the minimal one made at build time (used otherwise where
 *                it was made for this kernel: checked)
 *   --launch     FIXTURE is tests/fixtures/lifecycle.c itself, started by
 *                ptw_kernel_launch (held before its exec, no attach)
 *   --no-debug-files  without libc's debug file (start_thread and struct
 *                pthread's undescribed members found without it)
 *   --start-at-clone  threads start at their clone's return (the
 *                raw sys_exit tracepoint of clone3), not at start_thread
 * Exit 0 pass, 1 fail, 77 skip.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "minbtf.h"
#include "ptw_events.h"
#include <json-c/json.h>
#include "ptw_kernel.h"
#include "ptw_spans.h"
#include "ptw_symbols.h"
#include "ptw_util.h"

#include "kdriver.h"

static void ji64(const struct json_object *v, int64_t *ret)
{
	if (v && json_object_is_type(v, json_type_int))
		*ret = json_object_get_int64(v);
}

static void jhex(const struct json_object *v, uint64_t *ret)
{
	if (v && json_object_is_type(v, json_type_string))
		*ret = strtoull(json_object_get_string((struct json_object *)v), NULL, 16);
}

static const char *jstr(const struct json_object *v)
{
	return v && json_object_is_type(v, json_type_string)
		       ? json_object_get_string((struct json_object *)v)
		       : "";
}

static uint64_t nevents[PTW_EV_LAST + 1];

/* How each thread's LWP left, by tid (PTW_EV_LWP_EXIT). */
static struct ptw_map exit_how;

static void sink(void *ctx, const struct ptw_event *ev)
{
	if (kdrv_fact(ev))
		return;
	if (ev->kind <= PTW_EV_LAST)
		nevents[ev->kind]++;
	if (ev->kind == PTW_EV_LWP_EXIT)
		ptw_map_put(&exit_how, (uint64_t)ev->tid, (void *)(uintptr_t)(ev->exit_how + 1));
	ptw_spans_consume(ctx, ev);
}

static const struct ptw_span *span_of(struct ptw_spans *s, pid_t tid)
{
	for (size_t i = 0; i < ptw_spans_count(s); i++)
		if (ptw_spans_get(s, i)->tid == tid)
			return ptw_spans_get(s, i);
	return NULL;
}

static const char *sym(const struct ptw_location *l)
{
	return l && l->symbol ? l->symbol : "(none)";
}

static void check_thread(struct ptw_spans *s, const struct json_object *t, pid_t main_tid)
{
	int64_t tid = 0, creator = 0;
	uint64_t pthread = 0, value = 0;
	ji64(kdrv_jget(t, "tid"), &tid);
	ji64(kdrv_jget(t, "creator"), &creator);
	jhex(kdrv_jget(t, "pthread"), &pthread);
	jhex(kdrv_jget(t, "value"), &value);
	const char *routine = jstr(kdrv_jget(t, "routine"));
	const char *end = jstr(kdrv_jget(t, "end"));
	const char *name = jstr(kdrv_jget(t, "name"));
	const struct json_object *det = kdrv_jget(t, "detached");
	bool detached = det && json_object_is_type(det, json_type_boolean) &&
			json_object_get_boolean(det);
	const struct ptw_span *sp = span_of(s, (pid_t)tid);
	printf("thread %-18s tid %" PRId64 " end %-12s value %#" PRIx64 ": ", routine, tid, end,
	       value);
	if (!sp) {
		printf("no span\n");
		kdrv_failed++;
		return;
	}
	printf("span %u status %d value %s%#" PRIx64 " detached %d joined %d by %d name %s\n",
	       sp->id, (int)sp->status, sp->value.set ? "" : "?", sp->value.v, sp->detached,
	       sp->joined, sp->joiner_tid, sp->name ? sp->name : "-");
	bool pre = !strcmp(routine, "pre_worker");
	EXPECT(sp->origin == (pre ? PTW_ORIGIN_PREEXISTING : PTW_ORIGIN_CREATED), "%s origin %d",
	       routine, (int)sp->origin);
	EXPECT(sp->pthread == pthread, "%s pthread %#" PRIx64 " != %#" PRIx64, routine, sp->pthread,
	       pthread);
	EXPECT(!strcmp(sym(sp->start_routine), routine), "%s routine %s", routine,
	       sym(sp->start_routine));
	EXPECT(!sp->uncertain, "%s uncertain", routine);
	if (!pre) {
		EXPECT(sp->creator_tid == (pid_t)creator, "%s creator %d != %" PRId64, routine,
		       sp->creator_tid, creator);
		const char *create_fn = jstr(kdrv_jget(t, "create_fn"));
		EXPECT(!strcmp(sym(sp->create_site), create_fn), "%s create site %s != %s", routine,
		       sym(sp->create_site), create_fn);
		EXPECT(sp->create_ns.set && sp->start_ns.set && sp->create_ns.v <= sp->start_ns.v,
		       "%s create %d start %d", routine, sp->create_ns.set, sp->start_ns.set);
		EXPECT(sp->arg.set, "%s argument unknown", routine);
	}
	EXPECT(sp->end_ns.set && (!sp->start_ns.set || sp->start_ns.v <= sp->end_ns.v),
	       "%s end time", routine);
	uintptr_t how = (uintptr_t)ptw_map_get(&exit_how, (uint64_t)tid);
	EXPECT(how == PTW_EXIT_SELF + 1, "%s left the kernel with how %d", routine, (int)how - 1);
	enum ptw_status want = !strcmp(end, "return")	      ? PTW_STATUS_COMPLETED
			       : !strcmp(end, "pthread_exit") ? PTW_STATUS_EXITED
							      : PTW_STATUS_CANCELLED;
	EXPECT(sp->status == want, "%s status %d != %d", routine, (int)sp->status, (int)want);
	EXPECT(sp->value.set && sp->value.v == value, "%s value %#" PRIx64 " != %#" PRIx64, routine,
	       sp->value.v, value);
	EXPECT(sp->detached == (detached ? 1 : 0) ||
		       (!detached && !strcmp(routine, "unjoined_worker") && sp->detached == -1),
	       "%s detached %d", routine, sp->detached);
	if (want == PTW_STATUS_CANCELLED)
		EXPECT(sp->cancel_by == main_tid, "cancelled by %d", sp->cancel_by);
	if (name && *name)
		EXPECT(sp->name && !strcmp(sp->name, name), "%s name %s != %s", routine,
		       sp->name ? sp->name : "-", name);
}

/* The BPF programs this process holds, by id (its descriptors' fdinfo):
 * other sessions (tests run in parallel) load ptw_* programs too, so ours
 * are told by id, not by name. */
static size_t our_program_ids(unsigned *ids, size_t max)
{
	size_t n = 0;
	for (int fd = 0; fd < 1024 && n < max; fd++) {
		char path[64], line[128];
		snprintf(path, sizeof(path), "/proc/self/fdinfo/%d", fd);
		FILE *f = fopen(path, "re");
		if (!f)
			continue;
		unsigned id;
		while (fgets(line, sizeof(line), f))
			if (sscanf(line, "prog_id: %u", &id) == 1 && n < max)
				ids[n++] = id;
		fclose(f);
	}
	return n;
}

/* How many of these programs still exist (-1: bpftool cannot say). */
static int programs_left(const unsigned *ids, size_t n)
{
	int left = 0;
	for (size_t i = 0; i < n; i++) {
		char cmd[160];
		snprintf(cmd, sizeof(cmd),
			 "PATH=$PATH:/usr/sbin:/sbin bpftool prog show id %u >/dev/null 2>&1",
			 ids[i]);
		int st = system(cmd);
		/* 0: it exists; 255: no such program; 127: no bpftool */
		if (st == -1 || !WIFEXITED(st) || WEXITSTATUS(st) == 127)
			return -1;
		left += WEXITSTATUS(st) == 0;
	}
	return left;
}

int main(int argc, char **argv)
{
	bool per_probe = false, launch = false, no_debug = false, at_clone = false,
	     kernel_btf = false;
	int a;
	for (a = 1; a < argc - 1; a++)
		if (!strcmp(argv[a], "--per-probe"))
			per_probe = true;
		else if (!strcmp(argv[a], "--launch"))
			launch = true;
		else if (!strcmp(argv[a], "--no-debug-files"))
			no_debug = true;
		else if (!strcmp(argv[a], "--start-at-clone"))
			at_clone = true;
		else if (!strcmp(argv[a], "--kernel-btf"))
			kernel_btf = true;
		else
			break;
	if (argc < 2 || a != argc - 1 || (per_probe && launch)) {
		fprintf(stderr,
			"usage: test_kernel_attach [--per-probe | --launch | --kernel-btf] "
			"[--no-debug-files] "
			"[--start-at-clone] FIXTURE\n");
		return 99;
	}
	const char *fixture = argv[argc - 1];
	char why[512];
	kdrv_require_kernel();
	alarm(50);
	char truth[] = "/tmp/ptw-ktruth-XXXXXX";
	kdrv_truth_file(truth);
	struct ptw_spans *spans = ptw_spans_new();
	struct ptw_kernel_opts o = { .use_debug_files = !no_debug,
				     .use_cache = false,
				     .sink = sink,
				     .sink_ctx = spans,
				     .no_multi = per_probe,
				     .start_at_clone = at_clone,
				     .no_min_btf = kernel_btf };
	struct ptw_kernel *k;
	int r, ctl = -1, rep;
	pid_t pid, child;
	if (launch) {
		setenv("PTWATCH_TRUTH", truth, 1);
		char *const cmd[] = { (char *)fixture, NULL };
		r = ptw_kernel_launch(&o, cmd, -1, &k, &child, why, sizeof(why));
		if (r < 0) {
			printf("FAIL: cannot launch %s: %s\n", fixture, why);
			return 1;
		}
		pid = child;
		goto run;
	}
	child = kdrv_spawn_fixture((char *const[]){ (char *)fixture, NULL }, truth, &ctl, &rep);
	char line[128] = { 0 };
	kdrv_wait_ready(rep, child, line, sizeof(line));
	pid = child;
	k = kdrv_attach(&o, pid);
	if (write(ctl, "g", 1) != 1)
		return 99;
run:
	r = ptw_kernel_run(k, 40000);
	EXPECT(r == 1, "the run ended with %d, not the process's end", r);
	struct ptw_kernel_stats st;
	int status = kdrv_end(k, spans, child, &st);
	printf("mode %s, %u probes, %" PRIu64 " records, %" PRIu64 " events, %" PRIu64
	       " lost, %" PRIu64
	       " preexisting; attach %.1f ms (programs %.1f ms), detach %.1f ms\n",
	       st.mode, st.probes, st.records, st.events, st.lost, st.preexisting,
	       st.attach_ns / 1e6, st.probes_ns / 1e6, st.detach_ns / 1e6);
	const char *const *notes;
	kdrv_notes(k, &notes);
	EXPECT(WIFEXITED(status) && WEXITSTATUS(status) == 3, "fixture status %#x", status);
	int code = -1, sig = -1;
	bool core;
	EXPECT(ptw_kernel_target_exit(k, &code, &sig, &core) && code == 3 && sig == 0,
	       "exit code %d signal %d", code, sig);
	EXPECT(st.lost == 0, "%" PRIu64 " lost", st.lost);
	EXPECT(!strcmp(st.mode, per_probe ? "uprobe" : "uprobe_multi"), "mode %s", st.mode);
	char btf_path[64];
	const char *why_not;
	int btf_fd = ptwk_min_btf_open(btf_path, sizeof(btf_path), &why_not);
	if (btf_fd >= 0)
		close(btf_fd);
	printf("CO-RE: %s BTF%s%s\n", st.btf, btf_fd < 0 ? "; minimal: " : "",
	       btf_fd < 0 ? why_not : "");
	EXPECT(!strncmp(st.btf, btf_fd >= 0 && !kernel_btf ? "minimal" : "the kernel's", 7),
	       "CO-RE used %s BTF", st.btf);

	/* The ground truth. */
	char *text = kdrv_slurp(truth);
	unlink(truth);
	if (!text)
		return 99;
	size_t nthreads = 0, njoins = 0;
	pid_t main_tid = pid;
	for (char *save = NULL, *l = strtok_r(text, "\n", &save); l;
	     l = strtok_r(NULL, "\n", &save)) {
		struct json_object *v = json_tokener_parse(l);
		if (!v)
			return 99;
		const char *kind = jstr(kdrv_jget(v, "kind"));
		if (kind && !strcmp(kind, "thread")) {
			nthreads++;
			check_thread(spans, v, main_tid);
		} else if (kind && !strcmp(kind, "join")) {
			int64_t joiner = 0, tid = 0;
			ji64(kdrv_jget(v, "joiner"), &joiner);
			ji64(kdrv_jget(v, "tid"), &tid);
			const struct ptw_span *sp = span_of(spans, (pid_t)tid);
			njoins++;
			EXPECT(sp && sp->joined && sp->joiner_tid == (pid_t)joiner &&
				       sp->join_return_ns.set &&
				       sp->join_return_ns.v >= sp->join_call_ns,
			       "join of %" PRId64 " by %" PRId64, tid, joiner);
		} else if (kind && !strcmp(kind, "main")) {
			const struct ptw_span *sp = span_of(spans, pid);
			uint64_t pthread = 0;
			jhex(kdrv_jget(v, "pthread"), &pthread);
			uint64_t value = 0;
			jhex(kdrv_jget(v, "value"), &value);
			EXPECT(sp && sp->origin == PTW_ORIGIN_MAIN && sp->pthread == pthread &&
				       !strcmp(sym(sp->start_routine), "main") &&
				       (!launch || sp->start_ns.set),
			       "main span");
			EXPECT(sp && sp->status == PTW_STATUS_COMPLETED && sp->value.set &&
				       sp->value.v == value,
			       "main's return");
			uintptr_t how = (uintptr_t)ptw_map_get(&exit_how, (uint64_t)pid);
			EXPECT(how == PTW_EXIT_GROUP + 1, "main left with how %d", (int)how - 1);
			if (sp)
				printf("main: span %u status %d method %d reason %s value %s%#" PRIx64
				       "\n",
				       sp->id, (int)sp->status, (int)sp->method,
				       sp->reason ? sp->reason : "-", sp->value.set ? "" : "?",
				       sp->value.v);
		}
		json_object_put(v);
	}
	free(text);
	/* kfixture.c adds a thread running at the attach to lifecycle.c's. */
	EXPECT(nthreads == (launch ? 10 : 11), "%zu thread records", nthreads);
	EXPECT(njoins == (launch ? 7 : 8), "%zu join records", njoins);
	EXPECT(ptw_spans_count(spans) == nthreads + 1, "%zu spans for %zu threads + main",
	       ptw_spans_count(spans), nthreads);
	EXPECT(nevents[PTW_EV_THREAD_CREATE] == nthreads - !launch, "%" PRIu64 " creations",
	       nevents[PTW_EV_THREAD_CREATE]);
	EXPECT(nevents[PTW_EV_PREEXISTING] == (launch ? 0 : 2), "%" PRIu64 " preexisting",
	       nevents[PTW_EV_PREEXISTING]);
	if (launch)
		EXPECT(nevents[PTW_EV_IMAGE] == 1 && nevents[PTW_EV_MAIN_START] == 1 &&
			       nevents[PTW_EV_EXEC] == 0,
		       "image %" PRIu64 " main %" PRIu64 " exec %" PRIu64, nevents[PTW_EV_IMAGE],
		       nevents[PTW_EV_MAIN_START], nevents[PTW_EV_EXEC]);
	/* About 70 ms with uprobe_multi, 110 ms per probe without (the
	 * kernel's RCU waits): generous bounds for a loaded machine. The
	 * clone tracepoints (--start-at-clone) add 100-150 ms at a load of 4,
	 * 200-500 ms at a load of 20. */
	EXPECT(st.detach_ns < (per_probe ? 3000 : at_clone ? 1500 : 500) * 1000000ull,
	       "detach took %.1f ms", st.detach_ns / 1e6);

	unsigned ids[64];
	size_t nids = our_program_ids(ids, 64);
	EXPECT(nids > 0, "no BPF program held before the free");
	ptw_kernel_free(k);
	ptw_spans_free(spans);
	ptw_map_free(&exit_how);
	/* The kernel frees programs after an RCU grace period. */
	int left = programs_left(ids, nids);
	for (int i = 0; i < 50 && left > 0; i++) {
		usleep(100 * 1000);
		left = programs_left(ids, nids);
	}
	EXPECT(left == 0, "%d of the %zu BPF programs we held still loaded", left, nids);
	return kdrv_result();
}
