/* SPDX-License-Identifier: MIT */
/*
 * --trace on the kernel backend, against the frames fixtures' truth (the
 * same trees tests/integration/cases/frames.py asks of the ptrace path):
 * starts FIXTURE MODE behind its attach handshake (kframes_fixture.c,
 * kframes_cxx.cpp), attaches with ptw_kernel_attach and the patterns,
 * lets it run, feeds every event into the span engine and compares the
 * frame spans exactly: function, depth, parent, status, unmatched reason,
 * return value; then the mode's own truth records.
 *
 * Usage: test_kernel_frames [--per-probe | --launch | --follow-late] FIXTURE MODE PATTERN...
 *   --launch: FIXTURE is the plain fixture (tests/fixtures/frames.c,
 *   frames_cxx.cpp), started by ptw_kernel_launch (held before its exec:
 *   the executable's functions get their probes from its file)
 *   --follow-late: as --launch, with -f, each child linked 50 ms late, and
 *   a control pipe ($PTW_CTL_FD): frames.c's forkgap
 *   MODE: recursion, longjmp, tail, lib, ends, deep (frames.c), cxx
 *   (frames_cxx.cpp), sigtrap (kframes_fixture.c's own)
 * Exit 0 pass, 1 fail, 77 skip (the kernel path cannot run here).
 */
#define _GNU_SOURCE
#include <fcntl.h>
#include <inttypes.h>
#include <json-c/json.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "ptw_frames.h"
#include "ptw_kernel.h"
#include "ptw_spans.h"
#include "ptw_symbols.h"
#include "ptw_util.h"

#include "kdriver.h"

static uint64_t entries;
static pid_t root_pid, forked_pid; /* --follow-late: the launched process, its child */

static void sink(void *ctx, const struct ptw_event *ev)
{
	if (kdrv_fact(ev))
		return;
	entries += ev->kind == PTW_EV_FRAME_ENTRY;
	if (ev->kind == PTW_EV_PREEXISTING && root_pid && ev->pid != root_pid && !forked_pid)
		forked_pid = ev->pid; /* (its fork read: its links are in) */
	ptw_spans_consume(ctx, ev);
}

/* One line from the fixture (attach.h's reply), without its newline. */
static bool reply_line(int fd, char *buf, size_t size)
{
	size_t n = 0;
	while (n + 1 < size && read(fd, &buf[n], 1) == 1)
		if (buf[n++] == '\n') {
			buf[n - 1] = '\0';
			return true;
		}
	buf[n] = '\0';
	return false;
}

/*
 * frames.c's attach mode with the kernel's probes let go while three calls
 * are under way (fr_serve -> fr_outer -> fr_block, their return slots holding the
 * kernel's trampoline): the first call returns while attached, the second
 * after the links are closed, through the trampoline, to the right place
 * ("out 12"), and the program goes on. frames.py's frames-attach asks the
 * same of the ptrace path.
 */
static void attach_mode(struct ptw_kernel *k, int ctl, int rep)
{
	char line[128];
	EXPECT(reply_line(rep, line, sizeof(line)) && !strncmp(line, "ready", 5), "%s", line);
	EXPECT(write(ctl, "a", 1) == 1 && reply_line(rep, line, sizeof(line)) &&
		       !strcmp(line, "in"),
	       "first call: %s", line);
	EXPECT(write(ctl, "x", 1) == 1 && reply_line(rep, line, sizeof(line)) &&
		       !strcmp(line, "out 6"),
	       "first return: %s", line);
	EXPECT(write(ctl, "a", 1) == 1 && reply_line(rep, line, sizeof(line)) &&
		       !strcmp(line, "in"),
	       "second call: %s", line);
	/* until the second call's entries are read (fr_serve, entered after
	 * the attach here, then fr_outer, fr_block twice) */
	for (int i = 0; i < 400 && entries < 5; i++)
		ptw_kernel_run(k, 10);
	EXPECT(entries == 5, "%" PRIu64 " entries", entries);
	ptw_kernel_detach(k);
	EXPECT(write(ctl, "x", 1) == 1 && reply_line(rep, line, sizeof(line)) &&
		       !strcmp(line, "out 12"),
	       "the return after the detach: %s", line);
	EXPECT(write(ctl, "q", 1) == 1, "q");
}

/* frames.c's deep mode: "deep TID" once its thread is six calls deep in
 * fr_deep (perhaps in the ready line's read already); then until that
 * thread is asleep in read() (/proc's syscall: number 0), so that the
 * attach finds it off a CPU. */
static void deep_before(const char *ready, int rep, pid_t pid)
{
	char line[128];
	const char *d = strstr(ready, "deep ");
	if (!d) {
		EXPECT(reply_line(rep, line, sizeof(line)) && !strncmp(line, "deep ", 5), "%s",
		       line);
		d = line;
	}
	pid_t tid = (pid_t)atoi(d + 5);
	char path[64], buf[64] = { 0 };
	snprintf(path, sizeof(path), "/proc/%d/task/%d/syscall", pid, tid);
	for (int i = 0; i < 2000; i++) {
		int fd = open(path, O_RDONLY | O_CLOEXEC);
		ssize_t n = fd >= 0 ? read(fd, buf, sizeof(buf) - 1) : -1;
		if (fd >= 0)
			close(fd);
		if (n > 1 && buf[0] == '0' && buf[1] == ' ')
			return;
		usleep(5000);
	}
	EXPECT(false, "thread %d never asleep in read(): %s", tid, buf);
}

/* The recursion returns once let go on ("out 21"); then the program ends. */
static void deep_mode(int ctl, int rep)
{
	char line[128];
	EXPECT(write(ctl, "x", 1) == 1 && reply_line(rep, line, sizeof(line)) &&
		       !strcmp(line, "out 21"),
	       "the recursion's return: %s", line);
	EXPECT(write(ctl, "q", 1) == 1, "q");
}

static const char *sym(const struct ptw_location *l)
{
	return l && l->symbol ? l->symbol : "?";
}

static const struct ptw_frame *frame_by_id(const struct ptw_frames *f, uint32_t id)
{
	for (size_t i = 0; i < ptw_frames_count(f); i++)
		if (ptw_frames_get(f, i)->id == id)
			return ptw_frames_get(f, i);
	return NULL;
}

/* The frames as frames.py's expect_frames sees them, in entry order:
 * "symbol depth parent status reason value;..." (value only when
 * completed). */
static char *tree(const struct ptw_frames *f, pid_t tid)
{
	struct ptw_buf b = { 0 };
	for (uint32_t id = 1;; id++) {
		const struct ptw_frame *fr = frame_by_id(f, id);
		if (!fr)
			break;
		if (tid && fr->tid != tid)
			continue;
		const struct ptw_frame *p = fr->parent ? frame_by_id(f, fr->parent) : NULL;
		ptw_buf_printf(&b, "%s%s %u %s %s %s", b.len ? ";" : "", sym(fr->function),
			       fr->depth, p ? sym(p->function) : "-",
			       ptw_frame_status_name(fr->status), fr->reason ? fr->reason : "-");
		if (fr->status == PTW_FRAME_COMPLETED)
			ptw_buf_printf(&b, " =%#" PRIx64, fr->value);
	}
	return b.p ? b.p : xstrdup("");
}

/* The truth file's records, parsed (caller puts each). */
static size_t read_truth(const char *path, struct json_object ***ret)
{
	FILE *f = fopen(path, "re");
	struct json_object **v = NULL;
	size_t n = 0;
	char line[4096];
	while (f && fgets(line, sizeof(line), f)) {
		struct json_object *o = json_tokener_parse(line);
		if (!o)
			continue;
		v = xreallocarray(v, n + 1, sizeof(*v));
		v[n++] = o;
	}
	if (f)
		fclose(f);
	*ret = v;
	return n;
}

static const struct json_object *truth_kind(struct json_object **t, size_t n, const char *kind,
					    size_t which)
{
	for (size_t i = 0; i < n; i++)
		if (!strcmp(kdrv_jstr(t[i], "kind"), kind) && which-- == 0)
			return t[i];
	return NULL;
}

static void check_tree(const struct ptw_frames *f, const char *want)
{
	char *got = tree(f, 0);
	printf("frames: %s\n", got);
	EXPECT(!strcmp(got, want), "\n  got  %s\n  want %s", got, want);
	free(got);
}

/* frames.py's check_recursion_frames: each thread's fr_rec calls are its
 * frames, all completed, depths 1..max_depth as many times, fr_rec(n)
 * returning n + ... + 1. */
static void check_recursion(const struct ptw_frames *f, struct json_object **t, size_t nt)
{
	size_t ncalls = 0, total = 0;
	for (const struct json_object *c; (c = truth_kind(t, nt, "calls", ncalls)); ncalls++) {
		pid_t tid = (pid_t)kdrv_jint(c, "tid");
		int64_t calls = kdrv_jint(c, "calls"), depth = kdrv_jint(c, "max_depth");
		int64_t mine = 0, per_depth[64] = { 0 };
		for (size_t i = 0; i < ptw_frames_count(f); i++) {
			const struct ptw_frame *fr = ptw_frames_get(f, i);
			if (fr->tid != tid)
				continue;
			mine++;
			EXPECT(fr->status == PTW_FRAME_COMPLETED &&
				       !strcmp(sym(fr->function), "fr_rec"),
			       "tid %d frame %u %s status %d", tid, fr->id, sym(fr->function),
			       (int)fr->status);
			if (fr->depth < 64)
				per_depth[fr->depth]++;
			uint64_t n = (uint64_t)(depth - fr->depth + 1);
			EXPECT(fr->has_value && fr->value == n * (n + 1) / 2,
			       "tid %d frame %u depth %u value %#" PRIx64, tid, fr->id, fr->depth,
			       fr->value);
		}
		total += (size_t)mine;
		EXPECT(mine == calls, "tid %d: %" PRId64 " frames, %" PRId64 " calls", tid, mine,
		       calls);
		for (int64_t d = 1; d <= depth && d < 64; d++)
			EXPECT(per_depth[d] == calls / depth,
			       "tid %d: %" PRId64 " frames at depth %" PRId64, tid, per_depth[d],
			       d);
	}
	EXPECT(ncalls == 4, "%zu threads recursed", ncalls);
	EXPECT(total == ptw_frames_count(f), "%zu frames of other threads",
	       ptw_frames_count(f) - total);
}

/*
 * frames.c's forkgap mode, launched with -f and each child's links made
 * 50 ms late: the child's calls of fr_leaf before them are not seen; its
 * copy of fr_forker (in which it was forked) is its frame, entered before
 * it, left by its exit; fr_gap_block, entered before its links and let go
 * once they are in (its fork read: 'x' on the control pipe), returns
 * unseen but counted, said; its last fr_leaf is seen. Before: no frame of
 * fr_forker in the child, and nothing said of fr_gap_block.
 */
static void forkgap_mode(struct ptw_kernel *k, int ctl)
{
	for (int i = 0; i < 1000 && !forked_pid; i++)
		ptw_kernel_run(k, 10);
	EXPECT(forked_pid, "the child's fork never read");
	EXPECT(write(ctl, "x", 1) == 1, "x");
}

static void check_forkgap(const struct ptw_frames *f, struct json_object **t, size_t nt,
			  const char *const *notes, size_t nn)
{
	const struct json_object *rec = truth_kind(t, nt, "forkgap", 0);
	EXPECT(rec && kdrv_jint(rec, "child") == forked_pid && kdrv_jint(rec, "status") == 0,
	       "the child %d: its record %s, status %" PRId64, (int)forked_pid,
	       rec ? "read" : "missing", rec ? kdrv_jint(rec, "status") : -1);
	char *parent = tree(f, root_pid), *child = tree(f, forked_pid);
	printf("parent: %s\nchild: %s\n", parent, child);
	EXPECT(!strcmp(parent, "fr_forker 1 - completed - =0x7"), "parent: %s", parent);
	EXPECT(!strcmp(child, "fr_forker 1 - unmatched process_exit;"
			      "fr_leaf 2 fr_forker completed - =0x8"),
	       "child: %s", child);
	for (size_t i = 0; i < ptw_frames_count(f); i++) {
		const struct ptw_frame *fr = ptw_frames_get(f, i);
		EXPECT(fr->entry_unknown == (fr->tid == forked_pid && fr->depth == 1),
		       "frame %u (%s): entry_unknown %d", fr->id, sym(fr->function),
		       fr->entry_unknown);
	}
	bool said = false;
	for (size_t i = 0; i < nn; i++)
		said |= strstr(notes[i], "1 --trace calls that 1 followed processes made before "
					 "their own probes were in returned") != NULL;
	EXPECT(said, "the unseen fr_gap_block not said (%zu notes)", nn);
	free(parent);
	free(child);
}

int main(int argc, char **argv)
{
	int a = 1;
	bool per_probe = argc > 1 && !strcmp(argv[1], "--per-probe");
	bool follow_late = argc > 1 && !strcmp(argv[1], "--follow-late");
	bool launch = (argc > 1 && !strcmp(argv[1], "--launch")) || follow_late;
	a += per_probe || launch;
	if (argc < a + 3) {
		fprintf(stderr,
			"usage: test_kernel_frames [--per-probe] FIXTURE MODE PATTERN...\n");
		return 99;
	}
	const char *fixture = argv[a], *mode = argv[a + 1];
	char why[512];
	kdrv_require_kernel();
	alarm(50);
	char truth[] = "/tmp/ptw-kftruth-XXXXXX";
	kdrv_truth_file(truth);
	struct ptw_spans *spans = ptw_spans_new();
	struct ptw_kernel_opts o = { .use_debug_files = true,
				     .sink = sink,
				     .sink_ctx = spans,
				     .no_multi = per_probe,
				     .trace = argv + a + 2,
				     .ntrace = (size_t)(argc - a - 2),
				     .follow_forks = follow_late,
				     .follow_link_delay_ms = follow_late ? 50 : 0 };
	struct ptw_kernel *k;
	int r, ctl = -1, rep = -1;
	pid_t child, pid;
	if (launch) {
		setenv("PTWATCH_TRUTH", truth, 1);
		int pipefd[2];
		if (follow_late) { /* (the fixture's control pipe: attach.h) */
			if (pipe(pipefd) < 0)
				return 99;
			char fd[16];
			snprintf(fd, sizeof(fd), "%d", pipefd[0]);
			setenv("PTW_CTL_FD", fd, 1);
			ctl = pipefd[1];
		}
		char *const cmd[] = { (char *)fixture, (char *)mode, NULL };
		r = ptw_kernel_launch(
			&o, !strcmp(mode, "cxx") ? (char *const[]){ (char *)fixture, NULL } : cmd,
			-1, &k, &child, why, sizeof(why));
		if (r < 0) {
			printf("FAIL: cannot launch %s: %s\n", fixture, why);
			return 1;
		}
		pid = child;
		root_pid = child;
		if (follow_late) {
			close(pipefd[0]);
			forkgap_mode(k, ctl);
		}
		goto run;
	}
	child = kdrv_spawn_fixture((char *const[]){ (char *)fixture, (char *)mode, NULL }, truth,
				   &ctl, &rep);
	char line[128] = { 0 };
	kdrv_wait_ready(rep, child, line, sizeof(line));
	pid = child;
	if (!strcmp(mode, "deep")) {
		deep_before(line, rep, pid);
		k = kdrv_attach(&o, pid);
		deep_mode(ctl, rep);
		goto over;
	}
	k = kdrv_attach(&o, pid);
	if (write(ctl, "g", 1) != 1)
		return 99;
	if (!strcmp(mode, "attach")) {
		attach_mode(k, ctl, rep);
		goto over;
	}
run:
	r = ptw_kernel_run(k, 40000);
	EXPECT(r == 1, "the run ended with %d, not the process's end", r);
over:;
	struct ptw_kernel_stats st;
	int status = kdrv_end(k, spans, child, &st);
	printf("mode %s, %u probes, %" PRIu64 " records, %" PRIu64 " events, %" PRIu64 " lost\n",
	       st.mode, st.probes, st.records, st.events, st.lost);
	const char *const *notes;
	size_t nn = kdrv_notes(k, &notes);
	EXPECT(st.lost == 0, "%" PRIu64 " lost", st.lost);
	EXPECT(!strcmp(st.mode, per_probe ? "uprobe" : "uprobe_multi"), "mode %s", st.mode);
	int want_code = !strcmp(mode, "ends") ? 3 : 0;
	EXPECT(WIFEXITED(status) && WEXITSTATUS(status) == want_code, "fixture status %#x", status);

	struct json_object **t;
	size_t nt = read_truth(truth, &t);
	unlink(truth);
	const struct ptw_frames *f = ptw_spans_frames(spans);
	if (!strcmp(mode, "forkgap")) {
		check_forkgap(f, t, nt, notes, nn);
	} else if (!strcmp(mode, "recursion")) {
		check_recursion(f, t, nt);
	} else if (!strcmp(mode, "longjmp")) {
		check_tree(
			f,
			"fr_top 1 - completed - =0x2a;fr_mid 2 fr_top unmatched longjmp;"
			"fr_inner 3 fr_mid unmatched longjmp;fr_leaf 2 fr_top completed - =0x2a");
	} else if (!strcmp(mode, "tail")) {
		check_tree(f, "fr_tail_a 1 - unmatched tail_call;fr_tail_b 1 - completed - =0x2a");
	} else if (!strcmp(mode, "lib")) {
		/* The ptrace path: fr_lib_fn, then fr_mod_fn in each of the two
		 * dlopen rounds, all completed. Here a dlopen'ed library's
		 * functions get their probes when the reader has seen ld.so's
		 * change (woken at once), while the program runs on: the calls
		 * right after the dlopen may come before (then the library may
		 * be gone again, and fr_mod_* matched nothing). What is seen
		 * must be right. */
		char *got = tree(f, 0);
		printf("frames: %s\n", got);
		const char *lib = "fr_lib_fn 1 - completed - =0x65";
		EXPECT(!strncmp(got, lib, strlen(lib)), "got %s", got);
		size_t mods = 0;
		for (size_t i = 0; i < ptw_frames_count(f); i++) {
			const struct ptw_frame *fr = ptw_frames_get(f, i);
			if (strcmp(sym(fr->function), "fr_mod_fn"))
				continue;
			mods++;
			EXPECT(fr->status == PTW_FRAME_COMPLETED && fr->depth == 1 &&
				       (fr->value == 1000 || fr->value == 1001) &&
				       fr->function->module &&
				       strstr(fr->function->module, "libptwframemod.so"),
			       "fr_mod_fn frame %u", fr->id);
		}
		free(got);
		printf("dlopen'ed fr_mod_fn calls seen: %zu of 2\n", mods);
		EXPECT(ptw_frames_count(f) == 1 + mods, "%zu frames", ptw_frames_count(f));
		bool nothing = false, nomod = false, lib_said = false, mod_said = false;
		for (size_t i = 0; i < nn; i++) {
			nothing |=
				strstr(notes[i], "'zz_matches_nothing_*' matched no function") != 0;
			nomod |=
				strstr(notes[i], "no loaded module is called 'libnothere.so'") != 0;
			lib_said |= strstr(notes[i], "fr_lib_") != 0;
			mod_said |= strstr(notes[i], "fr_mod_") != 0;
		}
		EXPECT(nothing && nomod && !lib_said && (!mods || !mod_said),
		       "notes: nothing matched %d, no module %d, fr_lib_ %d, fr_mod_ %d", nothing,
		       nomod, lib_said, mod_said);
	} else if (!strcmp(mode, "ends")) {
		/* one frame per truth "end" record, in its thread, unmatched with
		 * its reason */
		size_t ne = 0;
		for (const struct json_object *e; (e = truth_kind(t, nt, "end", ne)); ne++) {
			char want[128];
			snprintf(want, sizeof(want), "%s 1 - unmatched %s", kdrv_jstr(e, "fn"),
				 kdrv_jstr(e, "reason"));
			char *got = tree(f, (pid_t)kdrv_jint(e, "tid"));
			printf("tid %" PRId64 ": %s\n", kdrv_jint(e, "tid"), got);
			EXPECT(!strcmp(got, want), "tid %" PRId64 ": got %s, want %s",
			       kdrv_jint(e, "tid"), got, want);
			free(got);
		}
		EXPECT(ne == 3 && ptw_frames_count(f) == 3, "%zu ends, %zu frames", ne,
		       ptw_frames_count(f));
	} else if (!strcmp(mode, "cxx")) {
		/* The ptrace path's tree: catcher{a{b{c}}} after, the exception's
		 * frames unmatched "exception". Here too: a process that can
		 * throw has its returns seen by probes on the functions' exits,
		 * no uretprobe trampoline in its unwinder's way; the program's
		 * result unchanged, nothing said. */
		const struct json_object *res = truth_kind(t, nt, "cxx_frames", 0);
		EXPECT(res && kdrv_jint(res, "result") == 43, "result %" PRId64,
		       res ? kdrv_jint(res, "result") : -1);
		check_tree(f, "frx::catcher(int) 1 - completed - =0x2b;"
			      "frx::a(int) 2 frx::catcher(int) unmatched exception;"
			      "frx::b(int) 3 frx::a(int) unmatched exception;"
			      "frx::c(int) 4 frx::b(int) unmatched exception;"
			      "frx::after(int) 2 frx::catcher(int) completed - =0x2b");
		EXPECT(nn == 0, "%zu notes, the first: %s", nn, nn ? notes[0] : "");
	} else if (!strcmp(mode, "deep")) {
		/* frames.py's frames-under-way: six calls under way at the
		 * attach, each completed after it with its value */
		check_tree(f,
			   "fr_deep 1 - completed - =0x15;fr_deep 2 fr_deep completed - =0xf;"
			   "fr_deep 3 fr_deep completed - =0xa;fr_deep 4 fr_deep completed - =0x6;"
			   "fr_deep 5 fr_deep completed - =0x3;fr_deep 6 fr_deep completed - =0x1");
		size_t before = 0;
		for (size_t i = 0; i < ptw_frames_count(f); i++)
			before += ptw_frames_get(f, i)->entry_unknown;
		EXPECT(before == 6, "%zu frames entered before the attach", before);
		/* (per probe: the note that ordinary uprobes stop at main's end) */
		EXPECT(nn == (per_probe ? 1u : 0u), "%zu notes, the last: %s", nn,
		       nn ? notes[nn - 1] : "");
	} else if (!strcmp(mode, "attach")) {
		/* fr_serve is entered after the attach here (the fixture waits
		 * for 'g' first): the ptrace path's tree when it launched the
		 * same program (frames.py's frames-kill9, there tracer_died) */
		check_tree(
			f,
			"fr_serve 1 - unmatched detach;fr_outer 2 fr_serve completed - =0x6;"
			"fr_block 3 fr_outer completed - =0x5;fr_outer 2 fr_serve unmatched detach;"
			"fr_block 3 fr_outer unmatched detach");
		const struct json_object *d = truth_kind(t, nt, "attach_done", 0);
		EXPECT(d && kdrv_jint(d, "sum") == 12, "the program's sum after the detach");
	} else if (!strcmp(mode, "sigtrap")) {
		const struct json_object *s = truth_kind(t, nt, "sigtrap", 0);
		EXPECT(s && kdrv_jtrue(s, "trap_blocked") && kdrv_jtrue(s, "all_blocked"),
		       "the mask changed: SIGTRAP blocked %d, all blocked %d",
		       s && kdrv_jtrue(s, "trap_blocked"), s && kdrv_jtrue(s, "all_blocked"));
		EXPECT(s && kdrv_jtrue(s, "handler_kept"), "the SIGTRAP handler changed");
		int64_t calls = s ? kdrv_jint(s, "calls") : -1, done = 0;
		for (size_t i = 0; i < ptw_frames_count(f); i++) {
			const struct ptw_frame *fr = ptw_frames_get(f, i);
			done += fr->status == PTW_FRAME_COMPLETED &&
				fr->tid == (pid_t)kdrv_jint(s, "tid") &&
				!strcmp(sym(fr->function), "fr_masked") &&
				fr->value == (uint64_t)(done * 3 + 1);
		}
		EXPECT(done == calls && (size_t)calls == ptw_frames_count(f),
		       "%" PRId64 " completed calls in order of %" PRId64 ", %zu frames", done,
		       calls, ptw_frames_count(f));
	} else {
		printf("unknown mode %s\n", mode);
		kdrv_failed++;
	}
	for (size_t i = 0; i < nt; i++)
		json_object_put(t[i]);
	free(t);
	ptw_kernel_free(k);
	ptw_spans_free(spans);
	return kdrv_result();
}
