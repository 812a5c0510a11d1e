/* SPDX-License-Identifier: MIT */
/*
 * The kernel backend's --locks on the locks fixture, compared with the
 * truth the fixture reports (as tests/integration/cases/locks.py does for
 * the ptrace path): starts tests/kernel/kfixture_locks.c MODE, attaches
 * (ptw_kernel_attach, opts.locks) once it says "ready", lets it run, feeds
 * every event into the span engine and checks the wait spans:
 *   contend N  exactly N waits on lock_m, in order, each (waiter, owner)
 *              the round's; lock_m named, call site player, completed;
 *   join       one join wait, by main, for the thread, on its pthread_t;
 *   rwlock     a reader's and a writer's wait, each on rw_lock, owner the
 *              writer (main), sites rw_reader / rw_writer;
 *   cond, sem  one wait on cond_v / sem_s by the waiter, no owner;
 *   nocontend  no wait at all;
 *   deadlock   an AB/BA deadlock: one live deadlock, its two threads, their
 *              mutexes and waits, confirmed without a stop (proof
 *              owners_reread) while both still sleep on their mutexes, the
 *              process never traced; then killed: the waits unmatched.
 *   forkheld   (--follow-late) a child forked while its parent's thread
 *              holds lock_m locks it at once and sleeps forever: -f, its
 *              links made 50 ms after its fork (follow_link_delay_ms), so
 *              it sleeps before they are in. Its wait is found under way
 *              once they are (its start unknown): lock_m, no owner (the
 *              holder is not the child's), site forkheld_child (its slow
 *              path returns to the trampoline of its parent's uretprobe,
 *              whose int3 its fork copied: unwound with the original
 *              return address); unmatched once it is killed. So is its
 *              worker's (forkheld_worker), a thread it made at once,
 *              before its links too: its wait kept until the converter
 *              reads its creation, after its fork's.
 *   formed     FIXTURE is tests/fixtures/deadlock.c: nine threads already
 *              blocked (a deadlock among them) when the backend attaches.
 *              Each wait under way is a wait span whose start was before
 *              the attach (its kind, object, owner and call site those of
 *              the fixture's "blocked" record; none for the thread in
 *              read()), the AB/BA deadlock is found and confirmed without
 *              a stop; once the fixture wakes its cond waiters ('w') their
 *              waits are completed (no duration); the process answers
 *              and its other threads still sleep where they did.
 * No BPF link or program of ours is left afterwards.
 *
 * Usage: test_kernel_locks [--per-probe | --no-debug-files | --launch | --late |
 *        --woken] FIXTURE MODE [ARG]
 *   --no-debug-files  without libc's debug file: the slow paths found from
 *                     the code of the exported functions (ptw_libc_waits.h)
 *   --launch          FIXTURE is tests/fixtures/locks.c itself, started by
 *                     ptw_kernel_launch (held before its exec)
 *   --follow-late     as --launch, with -f, each child's links made 50 ms
 *                     after its fork
 *   --late            as --launch, and nothing read before the process
 *                     ended: waits classified and named from the files
 *                     (its memory is gone), as in a run that ends before
 *                     the drain reads its records
 *   --woken           formed, or forkheld with --follow-late: the blocked
 *                     threads woken by a signal between the backend's two
 *                     reads of them (wake_between), found all the same
 * Exit 0 pass, 1 fail, 77 skip.
 */
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <json-c/json.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "ptw_events.h"
#include "ptw_kernel.h"
#include "ptw_locks.h"
#include "ptw_spans.h"
#include "ptw_symbols.h"
#include "ptw_util.h"

#include "kdriver.h"

static size_t ndeadlock_events;

static void sink(void *ctx, const struct ptw_event *ev)
{
	if (kdrv_fact(ev))
		return;
	if (ev->kind == PTW_EV_DEADLOCK)
		ndeadlock_events++;
	ptw_spans_consume(ctx, ev);
}

/* ---- the truth ---- */

static struct json_object *truth[256];
static size_t ntruth;

/* (Again: what the file holds now.) */
static void read_truth(const char *path)
{
	while (ntruth)
		json_object_put(truth[--ntruth]);
	FILE *f = fopen(path, "re");
	char line[4096];
	while (f && fgets(line, sizeof(line), f) && ntruth < PTW_ARRAY_SIZE(truth)) {
		struct json_object *v = json_tokener_parse(line);
		if (v)
			truth[ntruth++] = v;
	}
	if (f)
		fclose(f);
}

/* The n-th truth record of this kind (NULL none). */
static const struct json_object *truth_of(const char *kind, size_t n)
{
	for (size_t i = 0; i < ntruth; i++)
		if (!strcmp(kdrv_jstr(truth[i], "kind"), kind) && n-- == 0)
			return truth[i];
	return NULL;
}

/* ---- the waits ---- */

static const char *sym(const struct ptw_location *l)
{
	return l && l->symbol ? l->symbol : "(none)";
}

static size_t waits_of(const struct ptw_spans *s, enum ptw_wait_kind kind, uint64_t object,
		       pid_t tid, const struct ptw_wait **ret, size_t max)
{
	const struct ptw_locks *l = ptw_spans_locks(s);
	size_t n = 0;
	for (size_t i = 0; i < ptw_locks_count(l); i++) {
		const struct ptw_wait *w = ptw_locks_get(l, i);
		if (w->kind == kind && (!object || w->object == object) &&
		    (!tid || w->tid == tid)) {
			if (n < max)
				ret[n] = w;
			n++;
		}
	}
	return n;
}

static void print_waits(const struct ptw_spans *s)
{
	const struct ptw_locks *l = ptw_spans_locks(s);
	for (size_t i = 0; i < ptw_locks_count(l); i++) {
		const struct ptw_wait *w = ptw_locks_get(l, i);
		printf("wait %u: tid %d %s %#" PRIx64 " (%s) owner %d site %s status %s\n", w->id,
		       w->tid, ptw_wait_kind_name(w->kind), w->object, sym(w->object_loc), w->owner,
		       sym(w->site), ptw_wait_status_name(w->status));
	}
}

static void check_one(const struct ptw_wait *w, pid_t tid, pid_t owner, uint64_t object,
		      const char *symbol, const char *site, enum ptw_wait_status status)
{
	EXPECT(w->tid == tid, "wait %u: tid %d != %d", w->id, w->tid, tid);
	EXPECT(w->owner == owner, "wait %u: owner %d != %d", w->id, w->owner, owner);
	EXPECT(w->object == object, "wait %u: object %#" PRIx64 " != %#" PRIx64, w->id, w->object,
	       object);
	if (symbol)
		EXPECT(!strcmp(sym(w->object_loc), symbol), "wait %u: object symbol %s != %s",
		       w->id, sym(w->object_loc), symbol);
	EXPECT(!strcmp(sym(w->site), site), "wait %u: site %s != %s", w->id, sym(w->site), site);
	EXPECT(w->status == status, "wait %u: status %s != %s", w->id,
	       ptw_wait_status_name(w->status), ptw_wait_status_name(status));
	if (status == PTW_WAIT_COMPLETED)
		EXPECT(w->has_end && w->end_ns >= w->start_ns, "wait %u: end", w->id);
}

/* forkheld: thread tid's wait on lock_m, begun before its process's links
 * and found under way, open, no owner, at site. */
static void check_before_links(const struct ptw_wait *w, pid_t tid, uint64_t mutex,
			       const char *site)
{
	check_one(w, tid, 0, mutex, "lock_m", site, PTW_WAIT_OPEN);
	EXPECT(w->start_unknown,
	       "wait %u: begun before the child's links, its start is not unknown", w->id);
}

static void check_contend(const struct ptw_spans *s, int rounds)
{
	const struct json_object *rec = truth_of("contend", 0);
	uint64_t mutex = kdrv_jhex(rec, "mutex");
	const struct ptw_wait *w[256];
	size_t n = waits_of(s, PTW_WAIT_MUTEX, mutex, 0, w, 256);
	EXPECT(n == (size_t)rounds, "%zu waits on lock_m for %d rounds", n, rounds);
	/* in the order they began (ids are in order of start) */
	for (int r = 0; r < rounds && (size_t)r < n; r++) {
		const struct json_object *rd = NULL;
		for (size_t k = 0; (rd = truth_of("round", k)); k++)
			if (kdrv_jint(rd, "round") == r)
				break;
		if (!rd) {
			EXPECT(rd, "round %d in the truth", r);
			continue;
		}
		check_one(w[r], (pid_t)kdrv_jint(rd, "waiter"), (pid_t)kdrv_jint(rd, "owner"),
			  mutex, "lock_m", "player", PTW_WAIT_COMPLETED);
	}
	EXPECT(ptw_locks_deadlock_count(ptw_spans_locks(s)) == 0, "a deadlock");
}

static void check_kinds(const struct ptw_spans *s, const char *mode, pid_t main_tid)
{
	const struct ptw_wait *w[16];
	if (!strcmp(mode, "join")) {
		const struct json_object *rec = truth_of("joined", 0);
		size_t n = waits_of(s, PTW_WAIT_JOIN, 0, 0, w, 16);
		EXPECT(n == 1, "%zu join waits", n);
		if (n == 1)
			check_one(w[0], (pid_t)kdrv_jint(rec, "joiner"),
				  (pid_t)kdrv_jint(rec, "tid"), kdrv_jhex(rec, "pthread"), NULL,
				  "join_mode", PTW_WAIT_COMPLETED);
	} else if (!strcmp(mode, "rwlock")) {
		size_t k = 0;
		for (const struct json_object *rec; (rec = truth_of("rw", k)); k++) {
			bool rd = !strcmp(kdrv_jstr(rec, "wait"), "rwlock_read");
			size_t n = waits_of(s, rd ? PTW_WAIT_RWLOCK_READ : PTW_WAIT_RWLOCK_WRITE, 0,
					    (pid_t)kdrv_jint(rec, "waiter"), w, 16);
			EXPECT(n == 1, "%zu %s waits", n, kdrv_jstr(rec, "wait"));
			if (n == 1)
				check_one(w[0], (pid_t)kdrv_jint(rec, "waiter"),
					  (pid_t)kdrv_jint(rec, "owner"), kdrv_jhex(rec, "rwlock"),
					  "rw_lock", rd ? "rw_reader" : "rw_writer",
					  PTW_WAIT_COMPLETED);
		}
		EXPECT(k == 2, "%zu rw records", k);
	} else {
		bool cond = !strcmp(mode, "cond");
		const struct json_object *rec = truth_of(mode, 0);
		uint64_t object = kdrv_jhex(rec, cond ? "cond" : "sem");
		size_t n = waits_of(s, cond ? PTW_WAIT_COND : PTW_WAIT_SEM, object, 0, w, 16);
		EXPECT(n == 1, "%zu waits on the %s", n, mode);
		if (n == 1)
			check_one(w[0], (pid_t)kdrv_jint(rec, "waiter"), 0, object,
				  cond ? "cond_v" : "sem_s", cond ? "cond_waiter" : "sem_waiter",
				  PTW_WAIT_COMPLETED);
	}
	(void)main_tid;
}

/* /proc/PID/task/TID/syscall: asleep in futex on addr. */
static bool blocked_on(pid_t pid, pid_t tid, uint64_t addr)
{
	char path[64], buf[256];
	snprintf(path, sizeof(path), "/proc/%d/task/%d/syscall", pid, tid);
	if (ptw_read_small_file(path, buf, sizeof(buf)) < 0)
		return false;
	unsigned long long a = 0;
	return sscanf(buf, "202 %llx", &a) == 1 && a == addr;
}

/* /proc/PID/task/TID/syscall: asleep in system call nr. */
static bool in_syscall(pid_t pid, pid_t tid, int nr)
{
	char path[64], buf[256];
	snprintf(path, sizeof(path), "/proc/%d/task/%d/syscall", pid, tid);
	int n = -1;
	return ptw_read_small_file(path, buf, sizeof(buf)) >= 0 && sscanf(buf, "%d ", &n) == 1 &&
	       n == nr;
}

/* Thread tid's context switches so far (-1: unread). */
static long switches_of(pid_t pid, pid_t tid)
{
	char path[64], buf[4096];
	snprintf(path, sizeof(path), "/proc/%d/task/%d/status", pid, tid);
	if (ptw_read_small_file(path, buf, sizeof(buf)) < 0)
		return -1;
	const char *v = strstr(buf, "voluntary_ctxt_switches:");
	const char *nv = strstr(buf, "nonvoluntary_ctxt_switches:");
	return v && nv ? atol(v + 24) + atol(nv + 27) : -1;
}

/* Thread tid asleep (S) in system call nr. */
static bool asleep_in(pid_t pid, pid_t tid, int nr)
{
	char path[64], buf[512];
	snprintf(path, sizeof(path), "/proc/%d/task/%d/stat", pid, tid);
	const char *p = ptw_read_small_file(path, buf, sizeof(buf)) >= 0 ? strrchr(buf, ')') : NULL;
	return p && p[1] == ' ' && p[2] == 'S' && in_syscall(pid, tid, nr);
}

/* Thread tid of pid woken by a SIGUSR1 (the fixture's handler does
 * nothing, SA_RESTART), and asleep again in futex: whether it was. */
static bool wake(pid_t pid, pid_t tid)
{
	long before = switches_of(pid, tid);
	if (before < 0 || syscall(SYS_tgkill, pid, tid, SIGUSR1) < 0)
		return false;
	for (int k = 0; k < 20000; k++) {
		if (switches_of(pid, tid) > before && asleep_in(pid, tid, SYS_futex))
			return true;
		usleep(100);
	}
	return false;
}

/* The tids of process pid (at most max). */
static size_t tasks_of(pid_t pid, pid_t *tids, size_t max)
{
	char path[64];
	snprintf(path, sizeof(path), "/proc/%d/task", (int)pid);
	DIR *d = opendir(path);
	size_t n = 0;
	for (struct dirent *e; d && (e = readdir(d)) && n < max;)
		if (atoi(e->d_name) > 0)
			tids[n++] = atoi(e->d_name);
	if (d)
		closedir(d);
	return n;
}

/*
 * --woken: between the backend's two reads of the threads for the waits
 * under way (opts.underway_between), its first call's: at an attach
 * (formed), every thread blocked in futex on a mutex, a condition, a
 * join, a rwlock or a stdio lock, as the truth says; in a -f child
 * (forkheld), its two threads once both sleep on lock_m. Each wakes and
 * sleeps again in the same wait, which began before all the same.
 */
static const char *woken_truth;
static size_t woken_count, woken_meant;
static bool woken_called;

static void wake_between(void *ctx, pid_t pid)
{
	(void)ctx;
	if (woken_called)
		return;
	woken_called = true;
	if (!ntruth) /* (else the test holds records of it: not freed under it) */
		read_truth(woken_truth);
	const struct json_object *b;
	for (size_t i = 0; (b = truth_of("blocked", i)); i++) {
		const char *waits = kdrv_jstr(b, "waits");
		if (!strcmp(waits, "read") || !strcmp(waits, "sem"))
			continue; /* (a sem_wait a signal ends: EINTR) */
		woken_meant++;
		woken_count += wake(pid, (pid_t)kdrv_jint(b, "tid"));
	}
	if (woken_meant)
		return;
	pid_t tids[2] = { 0, 0 };
	for (int k = 0; k < 20000; k++) {
		if (tasks_of(pid, tids, 2) == 2 && asleep_in(pid, tids[0], SYS_futex) &&
		    asleep_in(pid, tids[1], SYS_futex))
			break;
		usleep(100);
	}
	woken_meant = 2;
	for (int i = 0; i < 2; i++)
		woken_count += wake(pid, tids[i]);
}

static int tracer_pid(pid_t pid)
{
	char path[64], buf[4096];
	snprintf(path, sizeof(path), "/proc/%d/status", pid);
	if (ptw_read_small_file(path, buf, sizeof(buf)) < 0)
		return -1;
	const char *t = strstr(buf, "TracerPid:");
	return t ? atoi(t + 10) : -1;
}

static void check_deadlock(const struct ptw_spans *s, pid_t pid, enum ptw_wait_status status)
{
	const struct json_object *rec = truth_of("deadlock", 0);
	pid_t ab = (pid_t)kdrv_jint(rec, "ab"), ba = (pid_t)kdrv_jint(rec, "ba");
	uint64_t ma = kdrv_jhex(rec, "mutex_a"), mb = kdrv_jhex(rec, "mutex_b");
	const struct ptw_locks *l = ptw_spans_locks(s);
	EXPECT(ptw_locks_deadlock_count(l) == 1, "%zu deadlocks", ptw_locks_deadlock_count(l));
	EXPECT(ndeadlock_events == 2, "%zu DEADLOCK events", ndeadlock_events);
	const struct ptw_live_deadlock *d = ptw_locks_deadlock(l, 0);
	if (!d)
		return;
	printf("deadlock #%u: %zu threads, confirmed %s\n", d->id, d->n,
	       ptw_deadlock_proof_text(d->proof));
	EXPECT(d->n == 2 && d->expected == 2, "%zu members", d->n);
	EXPECT(d->proof == PTW_PROOF_REREAD, "proof %s", ptw_deadlock_proof_name(d->proof));
	bool tids = d->n == 2 && ((d->tids[0] == ab && d->tids[1] == ba) ||
				  (d->tids[0] == ba && d->tids[1] == ab));
	EXPECT(tids, "members %d %d, truth %d %d", d->tids[0], d->n > 1 ? d->tids[1] : 0, ab, ba);
	for (size_t i = 0; i < d->n; i++) {
		EXPECT(d->objects[i] == (d->tids[i] == ab ? mb : ma), "member %d object %#" PRIx64,
		       d->tids[i], d->objects[i]);
		const struct ptw_wait *w = NULL;
		for (size_t k = 0; k < ptw_locks_count(l); k++)
			if (ptw_locks_get(l, k)->id == d->waits[i])
				w = ptw_locks_get(l, k);
		EXPECT(w, "member %d: its wait span", d->tids[i]);
		if (!w)
			continue;
		bool is_ab = w->tid == ab;
		check_one(w, is_ab ? ab : ba, is_ab ? ba : ab, is_ab ? mb : ma,
			  is_ab ? "mutex_b" : "mutex_a", is_ab ? "ab_worker" : "ba_worker", status);
		EXPECT(w->deadlock == d->id, "wait %u: deadlock %u", w->id, w->deadlock);
	}
	(void)pid;
}

/* formed: the fixture's "blocked" records, each thread's one wait under way
 * (cond_done: the cond waiters woke), and the deadlock among them. */
static void check_formed(const struct ptw_spans *s, bool cond_done)
{
	const struct json_object *b;
	uint64_t ma = kdrv_jhex(truth_of("deadlock", 0), "mutex_a");
	pid_t ab = 0, ba = 0;
	for (size_t i = 0; (b = truth_of("blocked", i)); i++) {
		const char *role = kdrv_jstr(b, "role"), *waits = kdrv_jstr(b, "waits");
		pid_t tid = (pid_t)kdrv_jint(b, "tid");
		enum ptw_wait_kind kind = !strcmp(waits, "mutex")      ? PTW_WAIT_MUTEX
					  : !strcmp(waits, "join")     ? PTW_WAIT_JOIN
					  : !strcmp(waits, "cond")     ? PTW_WAIT_COND
					  : !strcmp(waits, "lock")     ? PTW_WAIT_LOCK
					  : !strcmp(waits, "sem")      ? PTW_WAIT_SEM
					  : !strcmp(role, "rd_waiter") ? PTW_WAIT_RWLOCK_READ
					  : !strcmp(role, "wr_waiter") ? PTW_WAIT_RWLOCK_WRITE
								       : PTW_WAIT_NONE;
		if (!strcmp(role, "ab") || !strcmp(role, "ba"))
			*(kdrv_jhex(b, "object") == ma ? &ba : &ab) = tid;
		const struct ptw_wait *w[4];
		size_t n = kind == PTW_WAIT_NONE ? 0 : waits_of(s, kind, 0, tid, w, 4);
		if (kind == PTW_WAIT_NONE) { /* rw_holder, in read(): in no wait */
			size_t any = 0;
			for (size_t k = 0; k < ptw_locks_count(ptw_spans_locks(s)); k++)
				any += ptw_locks_get(ptw_spans_locks(s), k)->tid == tid;
			EXPECT(!any, "%s %d: %zu waits, in read()", role, tid, any);
			continue;
		}
		EXPECT(n == 1, "%s %d: %zu %s waits", role, tid, n, ptw_wait_kind_name(kind));
		if (n != 1)
			continue;
		bool done = cond_done && kind == PTW_WAIT_COND;
		check_one(w[0], tid, (pid_t)kdrv_jint(b, "owner"), kdrv_jhex(b, "object"), NULL,
			  kdrv_jstr(b, "routine"), done ? PTW_WAIT_COMPLETED : PTW_WAIT_OPEN);
		EXPECT(w[0]->start_unknown, "wait %u (%s): its start is not before the attach",
		       w[0]->id, role);
	}
	const struct ptw_locks *l = ptw_spans_locks(s);
	EXPECT(ptw_locks_deadlock_count(l) == 1 && ndeadlock_events == 2,
	       "%zu deadlocks, %zu DEADLOCK events", ptw_locks_deadlock_count(l), ndeadlock_events);
	const struct ptw_live_deadlock *d = ptw_locks_deadlock(l, 0);
	if (!d)
		return;
	EXPECT(d->n == 2 && d->proof == PTW_PROOF_REREAD, "%zu members, proof %s", d->n,
	       ptw_deadlock_proof_name(d->proof));
	EXPECT(d->n == 2 && ((d->tids[0] == ab && d->tids[1] == ba) ||
			     (d->tids[0] == ba && d->tids[1] == ab)),
	       "members %d %d, truth %d %d", d->tids[0], d->n > 1 ? d->tids[1] : 0, ab, ba);
	for (size_t i = 0; i < d->n; i++)
		EXPECT(d->waits[i] != 0, "member %d: no wait span", d->tids[i]);
}

/* BPF objects (programs, links, maps) this process holds descriptors of:
 * none once freed (the kernel then removes the probes). Other sessions may
 * have programs of theirs loaded. */
static int count_our_programs(void)
{
	DIR *d = opendir("/proc/self/fd");
	if (!d)
		return -1;
	int n = 0;
	for (struct dirent *e; (e = readdir(d));) {
		char path[300], target[256];
		snprintf(path, sizeof(path), "/proc/self/fd/%s", e->d_name);
		ssize_t len = readlink(path, target, sizeof(target) - 1);
		target[len > 0 ? len : 0] = '\0';
		n += !strncmp(target, "anon_inode:bpf", 14);
	}
	closedir(d);
	return n;
}

static bool read_line(int fd, const char *want, char *line, size_t size)
{
	ssize_t n = read(fd, line, size - 1);
	line[n > 0 ? n : 0] = '\0';
	return n > 0 && !strncmp(line, want, strlen(want));
}

int main(int argc, char **argv)
{
	bool per_probe = false, no_debug = false, launch = false, late = false, follow_late = false;
	bool woken = false;
	int a = 1;
	for (; a < argc && !strncmp(argv[a], "--", 2); a++) {
		per_probe |= !strcmp(argv[a], "--per-probe");
		woken |= !strcmp(argv[a], "--woken");
		no_debug |= !strcmp(argv[a], "--no-debug-files");
		follow_late |= !strcmp(argv[a], "--follow-late");
		launch |= !strcmp(argv[a], "--launch") || !strcmp(argv[a], "--late") || follow_late;
		late |= !strcmp(argv[a], "--late");
	}
	if (argc < a + 2) {
		fprintf(stderr,
			"usage: test_kernel_locks [--per-probe | --no-debug-files | --launch "
			"| --follow-late | --late | --woken] FIXTURE MODE [ARG]\n");
		return 99;
	}
	const char *fixture = argv[a], *mode = argv[a + 1];
	int rounds = argc > a + 2 ? atoi(argv[a + 2]) : 0;
	bool deadlock = !strcmp(mode, "deadlock");
	bool formed = !strcmp(mode, "formed");
	bool forkheld = !strcmp(mode, "forkheld");
	char why[512];
	kdrv_require_kernel();
	alarm(50);
	char tpath[] = "/tmp/ptw-klocks-XXXXXX";
	kdrv_truth_file(tpath);
	woken_truth = tpath;
	struct ptw_spans *spans = ptw_spans_new();
	struct ptw_kernel_opts o = { .use_debug_files = !no_debug,
				     .use_cache = false,
				     .sink = sink,
				     .sink_ctx = spans,
				     .no_multi = per_probe,
				     .locks = true,
				     .follow_forks = follow_late,
				     .follow_link_delay_ms = follow_late ? 50 : 0,
				     .underway_between = woken ? wake_between : NULL };
	int ctl = -1, rep = -1;
	char line[128] = "";
	pid_t pid = 0, child;
	struct ptw_kernel *k;
	int r, status = 0;
	if (launch) {
		setenv("PTWATCH_TRUTH", tpath, 1);
		r = ptw_kernel_launch(&o, argv + a, -1, &k, &child, why, sizeof(why));
		if (r < 0) {
			printf("FAIL: cannot launch %s: %s\n", fixture, why);
			return 1;
		}
		pid = child;
		/* Its records read only once it has ended (its memory gone,
		 * a zombie until kdrv_end reaps it): as a short run's are
		 * when the drain lags behind. */
		siginfo_t si;
		if (late && waitid(P_PID, (id_t)child, &si, WEXITED | WNOWAIT) < 0)
			return 99;
		goto launched;
	}
	child = kdrv_spawn_fixture(formed ? (char *const[]){ (char *)fixture, NULL } : argv + a,
				   tpath, &ctl, &rep);
	kdrv_wait_ready(rep, child, line, sizeof(line));
	pid = child;
	k = kdrv_attach(&o, pid);
	if (formed) {
		read_truth(tpath);
		/* (woken and asleep again in the same waits: found all the
		 * same, nothing said) */
		EXPECT(!woken || (woken_meant > 0 && woken_count == woken_meant),
		       "%zu of the %zu threads woken between the reads", woken_count, woken_meant);
		ptw_kernel_run(k, 300);
		bool pong = write(ctl, "p", 1) == 1 && read_line(rep, "pong", line, sizeof(line));
		ptw_kernel_run(k, 300);
		EXPECT(pong, "the process did not answer: %s", line);
		EXPECT(tracer_pid(pid) == 0, "the process is traced");
		/* each still in the call it blocked in (futex, or read) */
		const struct json_object *b;
		for (size_t i = 0; (b = truth_of("blocked", i)); i++)
			EXPECT(in_syscall(pid, (pid_t)kdrv_jint(b, "tid"),
					  strcmp(kdrv_jstr(b, "waits"), "read") ? 202 : 0),
			       "%s %d no longer sleeps where it did", kdrv_jstr(b, "role"),
			       (int)kdrv_jint(b, "tid"));
		print_waits(spans);
		check_formed(spans, false);
		/* the cond waiters woken: their waits under way end */
		bool cond_woken =
			write(ctl, "w", 1) == 1 && read_line(rep, "woken", line, sizeof(line));
		EXPECT(cond_woken, "the cond waiters did not wake: %s", line);
		ptw_kernel_run(k, 300);
		check_formed(spans, true);
		kill(pid, SIGKILL);
	} else if (write(ctl, "g", 1) != 1) {
		return 99;
	}
launched:
	if (deadlock) {
		/* attached: its own handshake, the deadlock forms after 'd' */
		if (!launch &&
		    (!read_line(rep, "ready", line, sizeof(line)) || write(ctl, "d", 1) != 1 ||
		     !read_line(rep, "deadlocked", line, sizeof(line)))) {
			fprintf(stderr, "fixture did not deadlock: %s\n", line);
			kill(pid, SIGKILL);
			return 99;
		}
		/* said while the process runs on, within a few batches */
		for (int i = 0; i < 100 && !ndeadlock_events; i++)
			ptw_kernel_run(k, 50);
		/* launched: it writes its record once both sleep */
		for (int i = 0; i < 100 && (read_truth(tpath), !truth_of("deadlock", 0)); i++)
			ptw_kernel_run(k, 50);
		const struct json_object *rec = truth_of("deadlock", 0);
		EXPECT(ndeadlock_events > 0, "no deadlock said within 5 s");
		EXPECT(tracer_pid(pid) == 0, "the process is traced (TracerPid %d)",
		       tracer_pid(pid));
		EXPECT(blocked_on(pid, (pid_t)kdrv_jint(rec, "ab"), kdrv_jhex(rec, "mutex_b")) &&
			       blocked_on(pid, (pid_t)kdrv_jint(rec, "ba"),
					  kdrv_jhex(rec, "mutex_a")),
		       "both threads still sleep on their mutexes");
		check_deadlock(spans, pid, PTW_WAIT_OPEN);
		kill(pid, SIGKILL);
	}
	pid_t held_child = 0;
	if (forkheld) {
		/* its record once the child sleeps on lock_m, then its wait */
		for (int i = 0; i < 200 && (read_truth(tpath), !truth_of("forkheld", 0)); i++)
			ptw_kernel_run(k, 50);
		const struct json_object *rec = truth_of("forkheld", 0);
		held_child = rec ? (pid_t)kdrv_jint(rec, "child") : 0;
		pid_t worker = rec ? (pid_t)kdrv_jint(rec, "worker") : 0;
		const struct ptw_wait *w[4], *ww[4];
		size_t n = 0, nw = 0;
		for (int i = 0; i < 200 && held_child &&
				!((n = waits_of(spans, PTW_WAIT_MUTEX, 0, held_child, w, 4)) &&
				  (nw = waits_of(spans, PTW_WAIT_MUTEX, 0, worker, ww, 4)));
		     i++)
			ptw_kernel_run(k, 50);
		EXPECT(rec, "no forkheld record within 10 s");
		EXPECT(!woken || woken_count == woken_meant,
		       "%zu of the child's %zu threads woken between the reads", woken_count,
		       woken_meant);
		EXPECT(n == 1, "the child's waits on lock_m: %zu", n);
		/* (its worker, made before the child's links: known once its
		 * creation record is converted, after its fork's, which reads
		 * the waits; its wait was dropped, unsaid) */
		EXPECT(nw == 1, "the child's worker's waits on lock_m: %zu", nw);
		/* (the child's slow path returns to a uretprobe's trampoline,
		 * the int3 of its parent's probe copied by its fork: unwound
		 * past it with the original return address the task iterator
		 * read) */
		if (n == 1)
			check_before_links(w[0], held_child, kdrv_jhex(rec, "mutex"),
					   "forkheld_child");
		if (nw == 1)
			check_before_links(ww[0], worker, kdrv_jhex(rec, "mutex"),
					   "forkheld_worker");
		if (held_child)
			kill(held_child, SIGKILL);
	}
	r = ptw_kernel_run(k, 40000);
	EXPECT(r == 1, "the run ended with %d, not the process's end", r);
	struct ptw_kernel_stats st;
	status = kdrv_end(k, spans, child, &st);
	printf("mode %s, %u probes, %" PRIu64 " records, %" PRIu64 " events, %" PRIu64 " lost\n",
	       st.mode, st.probes, st.records, st.events, st.lost);
	const char *const *notes;
	size_t nnotes = kdrv_notes(k, &notes);
	for (size_t i = 0; i < nnotes && woken; i++)
		EXPECT(!strstr(notes[i], "asleep in futex"), "said: %s", notes[i]);
	EXPECT(st.lost == 0, "%" PRIu64 " lost", st.lost);
	EXPECT(!strcmp(st.mode, per_probe ? "uprobe" : "uprobe_multi"), "mode %s", st.mode);
	if (!deadlock && !formed) {
		EXPECT(WIFEXITED(status) && WEXITSTATUS(status) == 0, "fixture status %#x", status);
		read_truth(tpath);
	}
	unlink(tpath);
	print_waits(spans);
	if (deadlock)
		check_deadlock(spans, pid, PTW_WAIT_UNMATCHED);
	else if (!strcmp(mode, "contend"))
		check_contend(spans, rounds);
	else if (!strcmp(mode, "nocontend"))
		EXPECT(ptw_locks_count(ptw_spans_locks(spans)) == 0, "%zu waits",
		       ptw_locks_count(ptw_spans_locks(spans)));
	else if (forkheld) {
		const struct ptw_wait *w[4];
		size_t n = held_child ? waits_of(spans, PTW_WAIT_MUTEX, 0, 0, w, 4) : 0;
		size_t ended = 0;
		for (size_t i = 0; i < n && i < 4; i++)
			ended += w[i]->status == PTW_WAIT_UNMATCHED;
		EXPECT(n == 2 && ended == 2, "the killed child's waits: %zu, %zu unmatched", n,
		       ended);
	} else if (!formed)
		check_kinds(spans, mode, pid);
	int held = count_our_programs();
	ptw_kernel_free(k);
	ptw_spans_free(spans);
	for (size_t i = 0; i < ntruth; i++)
		json_object_put(truth[i]);
	int left = count_our_programs();
	printf("BPF descriptors held: %d before the free, %d after\n", held, left);
	EXPECT(held > 0 && left == 0, "%d BPF descriptors still held (%d before)", left, held);
	return kdrv_result();
}
