/* SPDX-License-Identifier: MIT */
/*
 * -f on the kernel backend, compared with what the processes say they did:
 * launches a command with follow_forks (ptw_kernel_launch), feeds every
 * event into the span engine, and checks the process list and every
 * thread span against the fixtures' ground truth (tests/fixtures/truth.h:
 * one file, appended to by every process of the tree):
 *   - the processes: ids 0, 1, ... in order, each child's parent listed
 *     with its ppid, every span in the entry of its process (same pid),
 *     every process ended, each "child" record's pid listed with that exit;
 *   - every thread record (thread, worker_thread, child_thread) has its
 *     span in its process, created, with its routine, status and value; as
 *     many created spans as thread records (none missing, none invented);
 *   - each "main" record: its process's main span, completed with main's
 *     value;
 *   - per scenario: exec'd images (exe, argv), a SIGKILLed child's spans
 *     unmatched, the number of processes.
 *
 * Usage: test_kernel_follow SCENARIO PREFORK LIFECYCLE FORKTHREADS [PREFORKD [VFORKER]]
 *   workers      prefork workers: 3 forked workers with 3 threads each
 *   exec, vfork  prefork exec|vfork LIFECYCLE: the child becomes lifecycle
 *   many         prefork many 200: 200 children in a row, 2 threads each
 *   killed       prefork killed: a child SIGKILLed with 2 threads blocked
 *   forkthreads  fork (3 threads in the child), posix_spawn, vfork, system()
 *   sh           sh -c 'PREFORK workers; PREFORK exec LIFECYCLE; FORKTHREADS'
 *   make         make -j2 of a Makefile whose recipes run the fixtures
 *   attach       PREFORKD 2 running (a master, 2 workers with 2 threads each)
 *                attached to with -f: the workers and their threads found,
 *                a worker forked while attached followed
 *   vforker      VFORKER attached to with -f while its vfork child waits
 *                before its exec (the parent thread in D): the child found,
 *                followed through its exec of /bin/true; every thread of
 *                the parent, found at the attach, ends as it says
 * SCENARIO:late links each child 50 ms after its fork (follow_link_delay_ms):
 * every thread of a child is made (and may end) before, seen by the
 * tracepoints alone, and said; a process that exec'd and ended before
 * (sh:late) has its program named from its file.
 * Each followed process has links of its own, and no other process's text
 * may change: a bystander (cat, answering a line) started after the
 * launch and another after the run, each compared with its files while
 * the session's links are in. What a child did before its own links were
 * in comes from the tracepoints: a thread that also ended then is
 * unmatched (death_unclassified) with its routine and value, and a note
 * says how many.
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

#include <json-c/json.h>

#include "ptw_events.h"
#include "ptw_kernel.h"
#include "ptw_output.h"
#include "ptw_spans.h"
#include "ptw_symbols.h"
#include "ptw_util.h"

#include "kdriver.h"

/* The backend said some exec'd images ended before it could read their
 * modules (a process that lives less than the reader's wakeup, on a busy
 * machine): their code is unnamed (never misnamed); counted, not failed. */
static bool unread_images;
static int unnamed;
/* the threads that ended before their process's links were in, the
 * processes whose main() began before */
static int gap_ends, mains_unseen;

static const char *sym(const struct ptw_location *l)
{
	return l && l->symbol ? l->symbol : "(none)";
}

static void sink(void *ctx, const struct ptw_event *ev)
{
	if (kdrv_fact(ev))
		return;
	ptw_spans_consume(ctx, ev);
}

/* The latest span of thread tid in process pid (pid 0: any). */
static const struct ptw_span *span_of(struct ptw_spans *s, pid_t pid, pid_t tid)
{
	const struct ptw_span *found = NULL;
	for (size_t i = 0; i < ptw_spans_count(s); i++) {
		const struct ptw_span *sp = ptw_spans_get(s, i);
		if (sp->tid == tid && (!pid || sp->pid == pid))
			found = sp;
	}
	return found;
}

static const struct ptw_process *process_of(const struct ptw_process *p, size_t n, pid_t pid)
{
	const struct ptw_process *found = NULL;
	for (size_t i = 0; i < n; i++)
		if (p[i].pid == pid)
			found = &p[i];
	return found;
}

/* A thread record: its span, created in its process, as the record says. */
static void check_thread(struct ptw_spans *s, pid_t pid, pid_t tid, const char *routine,
			 const char *end, uint64_t value, pid_t creator, bool *used)
{
	const struct ptw_span *sp = span_of(s, pid, tid);
	if (!sp) {
		EXPECT(false, "thread %d of %d (%s): no span", tid, pid, routine);
		return;
	}
	used[sp->id] = true;
	EXPECT(sp->origin == PTW_ORIGIN_CREATED, "%d %s origin %d", tid, routine, (int)sp->origin);
	if (unread_images && !sp->start_routine)
		unnamed++;
	else
		EXPECT(!strcmp(sym(sp->start_routine), routine), "%d routine %s != %s", tid,
		       sym(sp->start_routine), routine);
	if (creator > 0)
		EXPECT(sp->creator_tid == creator, "%d creator %d != %d", tid, sp->creator_tid,
		       creator);
	enum ptw_status want = !strcmp(end, "return")	      ? PTW_STATUS_COMPLETED
			       : !strcmp(end, "pthread_exit") ? PTW_STATUS_EXITED
			       : !strcmp(end, "cancel")	      ? PTW_STATUS_CANCELLED
							      : PTW_STATUS_UNMATCHED;
	bool gap_end = want != PTW_STATUS_UNMATCHED && sp->status == PTW_STATUS_UNMATCHED &&
		       sp->reason && !strcmp(sp->reason, "death_unclassified");
	gap_ends += gap_end;
	EXPECT(sp->status == want || gap_end, "%d %s status %d != %d", tid, routine,
	       (int)sp->status, (int)want);
	if (want != PTW_STATUS_UNMATCHED)
		EXPECT(sp->value.set && sp->value.v == value,
		       "%d %s value %s%#" PRIx64 " != %#" PRIx64, tid, routine,
		       sp->value.set ? "" : "?", sp->value.v, value);
	EXPECT(sp->create_ns.set && sp->start_ns.set, "%d %s create/start times", tid, routine);
}

/* A process outside the traced tree: cat, once it has echoed a line (its
 * libraries mapped and relocated, main running). Its stdin's write end in
 * *in; 0 if it could not be started. */
static pid_t bystander(int *in)
{
	int to[2], from[2];
	if (pipe2(to, O_CLOEXEC) < 0 || pipe2(from, O_CLOEXEC) < 0)
		return 0;
	pid_t b = fork();
	if (b == 0) {
		dup2(to[0], 0);
		dup2(from[1], 1);
		execl("/bin/cat", "cat", (char *)NULL);
		_exit(127);
	}
	close(to[0]);
	close(from[1]);
	char got[2];
	if (b < 0 || write(to[1], "x\n", 2) != 2 || read(from[0], got, 2) != 2) {
		close(to[1]);
		close(from[0]);
		return 0;
	}
	close(from[0]);
	*in = to[1];
	return b;
}

/* How many bytes of pid's executable file mappings differ from their
 * files (an int3 a probe put there), -1 if they cannot be read. */
static long text_changes(pid_t pid)
{
	char path[64], line[4600];
	snprintf(path, sizeof(path), "/proc/%d/maps", (int)pid);
	FILE *maps = fopen(path, "re");
	snprintf(path, sizeof(path), "/proc/%d/mem", (int)pid);
	int mem = open(path, O_RDONLY | O_CLOEXEC);
	long changed = maps && mem >= 0 ? 0 : -1;
	while (changed >= 0 && fgets(line, sizeof(line), maps)) {
		unsigned long start, end, off;
		char perms[8], file[4097] = "";
		if (sscanf(line, "%lx-%lx %7s %lx %*s %*s %4096s", &start, &end, perms, &off,
			   file) < 5 ||
		    perms[2] != 'x' || file[0] != '/')
			continue;
		int fd = open(file, O_RDONLY | O_CLOEXEC);
		size_t n = end - start;
		unsigned char *want = xmalloc(n), *got = xmalloc(n);
		ssize_t w = fd < 0 ? -1 : pread(fd, want, n, (off_t)off);
		ssize_t g = pread(mem, got, n, (off_t)start);
		if (w < 0 || g < w)
			changed = -1;
		for (ssize_t i = 0; changed >= 0 && i < w; i++)
			changed += want[i] != got[i];
		free(want);
		free(got);
		if (fd >= 0)
			close(fd);
	}
	if (maps)
		fclose(maps);
	if (mem >= 0)
		close(mem);
	return changed;
}

static bool ends_with(const char *s, const char *tail)
{
	size_t a = s ? strlen(s) : 0, b = strlen(tail);
	return a >= b && !strcmp(s + a - b, tail);
}

int main(int argc, char **argv)
{
	if (argc < 5 || argc > 7) {
		fprintf(stderr, "usage: test_kernel_follow SCENARIO PREFORK LIFECYCLE FORKTHREADS "
				"[PREFORKD]\n");
		return 99;
	}
	/* Absolute: make runs its recipes in another directory. */
	char *scenario = argv[1];
	char *late_at = strstr(scenario, ":late");
	bool late = late_at != NULL;
	if (late)
		*late_at = '\0';
	const char *prefork = realpath(argv[2], NULL), *lifecycle = realpath(argv[3], NULL),
		   *forkthreads = realpath(argv[4], NULL);
	if (!prefork || !lifecycle || !forkthreads)
		return 99;
	char why[512];
	kdrv_require_kernel();
	alarm(110);
	char truth[] = "/tmp/ptw-kftruth-XXXXXX";
	kdrv_truth_file(truth);
	setenv("PTWATCH_TRUTH", truth, 1);
	char script[8192], dir[] = "/tmp/ptw-kfmake-XXXXXX";
	const char *cmd[8] = { 0 };
	int want_status = 0;
	size_t want_procs = 0; /* 0: not checked */
	if (!strcmp(scenario, "workers")) {
		cmd[0] = prefork, cmd[1] = "workers";
		want_procs = 4;
	} else if (!strcmp(scenario, "exec") || !strcmp(scenario, "vfork")) {
		cmd[0] = prefork, cmd[1] = scenario, cmd[2] = lifecycle;
		want_procs = 2;
	} else if (!strcmp(scenario, "many")) {
		cmd[0] = prefork, cmd[1] = "many", cmd[2] = "200";
		want_procs = 201;
	} else if (!strcmp(scenario, "killed")) {
		cmd[0] = prefork, cmd[1] = "killed";
		want_procs = 2;
	} else if (!strcmp(scenario, "forkthreads")) {
		cmd[0] = forkthreads;
		/* fork, posix_spawn, vfork, system()'s shell */
		want_procs = 5;
	} else if (!strcmp(scenario, "sh")) {
		snprintf(script, sizeof(script), "%s workers; %s exec %s; %s; /bin/true", prefork,
			 prefork, lifecycle, forkthreads);
		cmd[0] = "/bin/sh", cmd[1] = "-c", cmd[2] = script;
	} else if (!strcmp(scenario, "make")) {
		if (access("/usr/bin/make", X_OK) < 0) {
			printf("SKIP: make is not installed\n");
			return 77;
		}
		if (!mkdtemp(dir))
			return 99;
		char path[4200];
		snprintf(path, sizeof(path), "%s/Makefile", dir);
		FILE *f = fopen(path, "we");
		if (!f)
			return 99;
		fprintf(f,
			"all: a b c\n"
			"a:\n\t%s workers\n"
			"b:\n\t%s exec %s\n"
			"c:\n\t%s && echo done >/dev/null\n"
			".PHONY: all a b c\n",
			prefork, prefork, lifecycle, forkthreads);
		fclose(f);
		cmd[0] = "/usr/bin/make", cmd[1] = "-s", cmd[2] = "-j2", cmd[3] = "-C",
		cmd[4] = dir;
	} else if (!strcmp(scenario, "attach") && argc >= 6) {
		want_procs = 4;
	} else if (!strcmp(scenario, "vforker") && argc == 7) {
		want_procs = 2;
	} else {
		fprintf(stderr, "unknown scenario %s\n", scenario);
		return 99;
	}

	struct ptw_spans *spans = ptw_spans_new();
	struct ptw_kernel_opts o = { .use_debug_files = true,
				     .use_cache = getenv("PTW_KF_CACHE") != NULL,
				     .sink = sink,
				     .sink_ctx = spans,
				     .follow_forks = true,
				     .follow_link_delay_ms = late ? 50 : 0 };
	pid_t bystanders[2] = { 0, 0 };
	int bystander_in[2] = { -1, -1 };
	struct ptw_kernel *k;
	pid_t pid, workers[3] = { 0 };
	int r;
	if (cmd[0]) {
		r = ptw_kernel_launch(&o, (char *const *)cmd, -1, &k, &pid, why, sizeof(why));
		if (r < 0) {
			printf("FAIL: cannot launch %s: %s\n", cmd[0], why);
			return 1;
		}
		bystanders[0] = bystander(&bystander_in[0]); /* (the root's links are in) */
	} else {
		/* attach: preforkd 2, then 'f' (one more worker) and 'q'. */
		int ctl, rep;
		pid = kdrv_spawn_fixture(!strcmp(scenario, "vforker")
						 ? (char *const[]){ argv[6], NULL }
						 : (char *const[]){ argv[5], (char *)"2", NULL },
					 truth, &ctl, &rep);
		FILE *replies = fdopen(rep, "r");
		char line[256];
		int master = 0;
		int vfork_tid = 0;
		if (!strcmp(scenario, "vforker")) {
			/* "ready PID TID": its vfork child waits for a byte. */
			if (!replies || !fgets(line, sizeof(line), replies) ||
			    sscanf(line, "ready %d %d", &master, &vfork_tid) != 2 || master != pid)
				return 99;
			k = kdrv_attach(&o, pid);
			if (write(ctl, "x", 1) != 1)
				return 99;
			while (fgets(line, sizeof(line), replies) && strncmp(line, "done", 4))
				;
			fclose(replies);
			close(ctl);
			goto run;
		}
		if (!replies || !fgets(line, sizeof(line), replies) ||
		    sscanf(line, "ready %d %d %d", &master, &workers[0], &workers[1]) != 3 ||
		    master != pid) {
			fprintf(stderr, "preforkd did not say ready\n");
			return 99;
		}
		k = kdrv_attach(&o, pid);
		if (write(ctl, "f", 1) != 1 || !fgets(line, sizeof(line), replies) ||
		    sscanf(line, "forked %d", &workers[2]) != 1)
			return 99;
		if (write(ctl, "q", 1) != 1)
			return 99;
		while (fgets(line, sizeof(line), replies) && strncmp(line, "done", 4))
			;
		fclose(replies);
		close(ctl);
	}
run:
	r = ptw_kernel_run(k, 100000);
	EXPECT(r == 1, "the run ended with %d, not every process's end", r);
	/* Every child's links are still in (closed with the session's). */
	bystanders[1] = bystander(&bystander_in[1]);
	for (int b = 0; b < 2; b++) {
		if (!bystanders[b]) {
			EXPECT(!cmd[0] && b == 0, "bystander %d started", b);
			continue;
		}
		long changed = text_changes(bystanders[b]);
		EXPECT(changed == 0, "bystander %d (%s the run): %ld bytes of its text changed",
		       (int)bystanders[b], b ? "after" : "during", changed);
		close(bystander_in[b]);
		kill(bystanders[b], SIGKILL);
		waitpid(bystanders[b], NULL, 0);
	}
	struct ptw_kernel_stats st;
	int status = kdrv_end_as_front(k, spans, pid, &st);
	printf("mode %s, %u probes, %" PRIu64 " records, %" PRIu64 " events, %" PRIu64
	       " lost; attach %.1f ms, detach %.1f ms\n",
	       st.mode, st.probes, st.records, st.events, st.lost, st.attach_ns / 1e6,
	       st.detach_ns / 1e6);
	const char *const *notes;
	size_t nn = kdrv_notes(k, &notes);
	bool gap_said = false, named_from_files = false;
	unsigned mains_said = 0;
	for (size_t i = 0; i < nn; i++) {
		named_from_files |= strstr(notes[i], "named from the files") != NULL;
		unread_images |=
			strstr(notes[i], "ended before their modules could be read") != NULL;
		gap_said |= strstr(notes[i], "before their process's own probes were in") != NULL;
		if (strstr(notes[i], "exec'd before their own probes were in"))
			mains_said = (unsigned)atoi(notes[i]);
	}
	EXPECT(WIFEXITED(status) && WEXITSTATUS(status) == want_status, "command status %#x",
	       status);
	EXPECT(st.lost == 0, "%" PRIu64 " lost", st.lost);

	/* The processes. */
	const struct ptw_process *procs;
	size_t np = kdrv_processes(&procs);
	if (want_procs)
		EXPECT(np == want_procs, "%zu processes, not %zu", np, want_procs);
	EXPECT(np >= 1 && procs[0].pid == pid && procs[0].id == 0, "the root first");
	for (size_t i = 0; i < np; i++) {
		const struct ptw_process *p = &procs[i];
		printf("process %u (parent %u) pid %d ppid %d by %d: %s %s; exit %d code %d "
		       "signal %d\n",
		       p->id, p->parent_id, p->pid, p->ppid, p->parent_tid, p->exe ? p->exe : "?",
		       p->argv && p->argv[0] ? p->argv[0] : "?", p->exit_kind, p->exit_code,
		       p->exit_signal);
		EXPECT(p->id == i, "process %zu has id %u", i, p->id);
		EXPECT(p->exit_kind != PTW_EXIT_NONE && p->end_ns >= p->start_ns,
		       "process %d ended", p->pid);
		EXPECT(p->followed && !p->detached, "process %d followed to its end", p->pid);
		if (i) {
			EXPECT(p->parent_id < i && procs[p->parent_id].pid == p->ppid,
			       "process %d: its parent %u is listed with pid %d", p->pid,
			       p->parent_id, p->ppid);
			EXPECT(p->parent_tid > 0, "process %d: the forking thread", p->pid);
		}
	}
	size_t nspans = ptw_spans_count(spans);
	size_t created = 0, mains = 0, maxid = 0;
	for (size_t i = 0; i < nspans; i++) {
		const struct ptw_span *sp = ptw_spans_get(spans, i);
		EXPECT(sp->process < np && procs[sp->process].pid == sp->pid,
		       "span %u (tid %d): its process %u has pid %d", sp->id, sp->tid, sp->process,
		       sp->pid);
		/* (:own: a thread that ended before its process's links were in
		 * is unmatched, death_unclassified, and uncertain) */
		EXPECT(!sp->uncertain || (sp->reason && !strcmp(sp->reason, "death_unclassified")),
		       "span %u uncertain", sp->id);
		created += sp->origin == PTW_ORIGIN_CREATED;
		mains += sp->origin == PTW_ORIGIN_MAIN;
		if (sp->id > maxid)
			maxid = sp->id;
	}
	bool *used = xcalloc(maxid + 1, sizeof(*used));

	/* The ground truth. */
	char *text = kdrv_slurp(truth);
	unlink(truth);
	if (!text)
		return 99;
	size_t nthreads = 0, nchild = 0, nmain = 0;
	pid_t killed = 0;
	for (char *save = NULL, *l = strtok_r(text, "\n", &save); l;
	     l = strtok_r(NULL, "\n", &save)) {
		struct json_object *v = json_tokener_parse(l);
		if (!v)
			return 99;
		const char *kind = kdrv_jstr(v, "kind");
		if (!strcmp(kind, "worker_thread")) {
			nthreads++;
			char end[] = "return";
			check_thread(spans, (pid_t)kdrv_jint(v, "pid"), (pid_t)kdrv_jint(v, "tid"),
				     "pool_worker", !strcmp(scenario, "killed") ? "killed" : end,
				     (uint64_t)kdrv_jint(v, "value"), 0, used);
		} else if (!strcmp(kind, "child_thread")) {
			nthreads++;
			check_thread(spans, (pid_t)kdrv_jint(v, "pid"), (pid_t)kdrv_jint(v, "tid"),
				     "child_worker", "return", 3, (pid_t)kdrv_jint(v, "creator"),
				     used);
		} else if (!strcmp(kind, "thread")) {
			nthreads++;
			check_thread(spans, 0, (pid_t)kdrv_jint(v, "tid"), kdrv_jstr(v, "routine"),
				     kdrv_jstr(v, "end"), kdrv_jhex(v, "value"),
				     (pid_t)kdrv_jint(v, "creator"), used);
		} else if (!strcmp(kind, "child") && kdrv_jint(v, "pid") > 0) {
			nchild++;
			pid_t cpid = (pid_t)kdrv_jint(v, "pid");
			const struct ptw_process *p = process_of(procs, np, cpid);
			EXPECT(p, "child %d listed", cpid);
			if (!p)
				goto next;
			if (kdrv_jtrue(v, "exited"))
				EXPECT(p->exit_kind == PTW_EXIT_CODE &&
					       p->exit_code == kdrv_jint(v, "code"),
				       "child %d exit %d code %d != %" PRId64, cpid, p->exit_kind,
				       p->exit_code, kdrv_jint(v, "code"));
			else
				EXPECT(p->exit_kind == PTW_EXIT_SIGNAL &&
					       p->exit_signal == kdrv_jint(v, "signal"),
				       "child %d exit %d signal %d != %" PRId64, cpid, p->exit_kind,
				       p->exit_signal, kdrv_jint(v, "signal"));
			if (!kdrv_jtrue(v, "exited"))
				killed = cpid;
			if (!strcmp(scenario, "exec") || !strcmp(scenario, "vfork")) {
				EXPECT(ends_with(p->exe, "/fixture-lifecycle"), "child exe %s",
				       p->exe ? p->exe : "?");
				EXPECT(p->argv && p->argv[0] && !strcmp(p->argv[0], lifecycle),
				       "child argv[0] %s",
				       p->argv && p->argv[0] ? p->argv[0] : "?");
			}
		} else if (!strcmp(kind, "vforker")) {
			/* Threads found at the attach: their routines and ends. */
			const struct json_object *ct = kdrv_jget(v, "cond_tids");
			struct {
				pid_t tid;
				const char *routine;
				uint64_t value;
			} found[3] = {
				{ (pid_t)kdrv_jint(v, "vfork_tid"), "vfork_worker", 0xf0 },
				{ (pid_t)json_object_get_int(json_object_array_get_idx(ct, 0)),
				  "cond_worker", 0xc0d },
				{ (pid_t)json_object_get_int(json_object_array_get_idx(ct, 1)),
				  "cond_worker", 0xc0d }
			};
			for (int t = 0; t < 3; t++) {
				const struct ptw_span *sp = span_of(spans, pid, found[t].tid);
				EXPECT(sp && sp->origin == PTW_ORIGIN_PREEXISTING &&
					       !strcmp(sym(sp->start_routine), found[t].routine) &&
					       sp->status == PTW_STATUS_COMPLETED &&
					       sp->value.set && sp->value.v == found[t].value,
				       "%s %d: found at the attach, ended with %#" PRIx64,
				       found[t].routine, found[t].tid, found[t].value);
				if (sp)
					used[sp->id] = true;
			}
			const struct ptw_process *vc = np == 2 ? &procs[1] : NULL;
			EXPECT(vc && vc->ppid == pid && vc->parent_tid == found[0].tid &&
				       vc->exit_kind == PTW_EXIT_CODE && vc->exit_code == 0,
			       "the vfork child: listed, forked by vfork_worker, exited 0");
			EXPECT(vc && (!vc->exe || ends_with(vc->exe, "/true")),
			       "the vfork child's exe %s", vc && vc->exe ? vc->exe : "?");
		} else if (!strcmp(kind, "main")) {
			nmain++;
			pid_t mpid = (pid_t)kdrv_jint(v, "pid");
			const struct ptw_span *sp = span_of(spans, mpid, mpid);
			if (sp && sp->origin == PTW_ORIGIN_MAIN && !sp->start_ns.set) {
				/* exec'd before its links were in, and in main()
				 * by then (said, counted) */
				mains_unseen++;
				goto next;
			}
			EXPECT(sp && sp->origin == PTW_ORIGIN_MAIN &&
				       (!strcmp(sym(sp->start_routine), "main") ||
					(unread_images && !sp->start_routine)) &&
				       sp->pthread == kdrv_jhex(v, "pthread"),
			       "main span of %d", mpid);
			if (sp && !strcmp(kdrv_jstr(v, "end"), "return"))
				EXPECT(sp->status == PTW_STATUS_COMPLETED && sp->value.set &&
					       sp->value.v == kdrv_jhex(v, "value"),
				       "main of %d: status %d value %s%#" PRIx64, mpid,
				       (int)sp->status, sp->value.set ? "" : "?", sp->value.v);
		}
	next:
		json_object_put(v);
	}
	free(text);
	for (int w = 0; w < 3 && workers[w]; w++) {
		/* The two found at the attach, or made while attached: each
		 * worker_thread, returned NULL; and its main span. */
		size_t nthr = 0, nmains = 0;
		for (size_t i = 0; i < nspans; i++) {
			const struct ptw_span *sp = ptw_spans_get(spans, i);
			if (sp->pid != workers[w])
				continue;
			if (sp->origin == PTW_ORIGIN_MAIN) {
				nmains++;
				continue;
			}
			nthr++;
			EXPECT(sp->origin == (w < 2 ? PTW_ORIGIN_PREEXISTING : PTW_ORIGIN_CREATED),
			       "worker %d thread %d origin %d", workers[w], sp->tid,
			       (int)sp->origin);
			EXPECT(!strcmp(sym(sp->start_routine), "worker_thread"),
			       "worker %d thread %d routine %s", workers[w], sp->tid,
			       sym(sp->start_routine));
			EXPECT(sp->status == PTW_STATUS_COMPLETED && sp->value.set && !sp->value.v,
			       "worker %d thread %d status %d", workers[w], sp->tid,
			       (int)sp->status);
			used[sp->id] = true;
		}
		EXPECT(nthr == 2 && nmains == 1, "worker %d: %zu threads, %zu main spans",
		       workers[w], nthr, nmains);
		const struct ptw_process *p = process_of(procs, np, workers[w]);
		EXPECT(p && p->ppid == pid && p->exit_kind == PTW_EXIT_CODE &&
			       p->exit_code == 20 + w,
		       "worker %d: listed, its ppid, exit %d", workers[w], 20 + w);
	}
	printf("%d threads ended before their process's own links were in, %d main() began "
	       "before\n",
	       gap_ends, mains_unseen);
	EXPECT((unsigned)mains_unseen <= mains_said, "%d main spans without a start, %u said",
	       mains_unseen, mains_said);
	if (late && !strcmp(scenario, "workers"))
		EXPECT(gap_ends == 9, "%d of the 9 worker threads ended before their links",
		       gap_ends);
	/* (sh: the exec'd prefork ends, with its workers, before their links:
	 * its program named from its file, where its exec put it) */
	if (late && !strcmp(scenario, "sh")) {
		EXPECT(!unread_images, "the programs of processes gone before their links were "
				       "read: unnamed");
		EXPECT(named_from_files, "no note says which programs were named from their "
					 "files alone");
	}
	if (late && !strcmp(scenario, "exec"))
		EXPECT(mains_unseen == 1 && mains_said == 1,
		       "the exec'd child was in main() before its links: %d, %u said", mains_unseen,
		       mains_said);
	EXPECT(!gap_ends || gap_said, "%d threads ended unseen by the probes, and no note says so",
	       gap_ends);
	printf("%zu spans (%zu created, %zu main), %zu thread records, %zu child records, %zu "
	       "main records\n",
	       nspans, created, mains, nthreads, nchild, nmain);
	/* (attach: the forked worker's 2 threads write no record) */
	nthreads += workers[2] ? 2 : 0;
	EXPECT(created == nthreads, "%zu created spans for %zu thread records", created, nthreads);
	EXPECT(nmain > 0 || workers[0] || !strcmp(scenario, "vforker"), "no main record");
	for (size_t i = 0; i < nspans; i++) {
		const struct ptw_span *sp = ptw_spans_get(spans, i);
		if (sp->origin == PTW_ORIGIN_CREATED)
			EXPECT(used[sp->id], "created span %u (%d/%d) has no truth record", sp->id,
			       sp->pid, sp->tid);
		if (killed && sp->pid == killed)
			EXPECT(sp->status == PTW_STATUS_UNMATCHED,
			       "span %u of the killed child: %d", sp->id, (int)sp->status);
	}
	if (!strcmp(scenario, "killed")) {
		size_t n = 0;
		for (size_t i = 0; i < nspans; i++)
			n += ptw_spans_get(spans, i)->pid == killed;
		EXPECT(killed && n == 3, "%zu spans in the killed child, not 3", n);
	}
	if (!strcmp(scenario, "many"))
		EXPECT(created == 400, "%zu created spans, not 400", created);

	if (!strcmp(scenario, "make")) {
		char rm[4200];
		snprintf(rm, sizeof(rm), "rm -rf '%s'", dir);
		if (system(rm) != 0)
			printf("cannot remove %s\n", dir);
	}
	free(used);
	ptw_kernel_free(k);
	ptw_spans_free(spans);
	if (unnamed)
		printf("%d routines unnamed: their image ended before it was read\n", unnamed);
	int rc = kdrv_result();
	free((char *)prefork);
	free((char *)lifecycle);
	free((char *)forkthreads);
	return rc;
}
