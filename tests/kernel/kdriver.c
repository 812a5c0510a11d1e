/* SPDX-License-Identifier: MIT */
/* What the kernel backend's driver tests do alike (kdriver.h). */
#define _GNU_SOURCE
#include "kdriver.h"

#include <fcntl.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "ptw_util.h"

int kdrv_passed, kdrv_failed;

int kdrv_result(void)
{
	printf("%d passed, %d failed\n", kdrv_passed, kdrv_failed);
	return kdrv_failed ? 1 : 0;
}

void kdrv_require_kernel(void)
{
	char why[512];
	if (ptw_kernel_available(why, sizeof(why)) < 0) {
		printf("SKIP: the kernel backend cannot run here: %s\n", why);
		exit(77);
	}
}

void kdrv_truth_file(char *tmpl)
{
	int tfd = mkstemp(tmpl);
	if (tfd < 0)
		exit(99);
	close(tfd);
}

pid_t kdrv_spawn_fixture(char *const argv[], const char *truth, int *ctl, int *rep)
{
	int c[2], r[2];
	if (pipe2(c, O_CLOEXEC) || pipe2(r, O_CLOEXEC))
		exit(99);
	pid_t child = fork();
	if (child == 0) {
		/* The ends the fixture uses, without close-on-exec. */
		char cs[16], rs[16];
		snprintf(cs, sizeof(cs), "%d", dup(c[0]));
		snprintf(rs, sizeof(rs), "%d", dup(r[1]));
		setenv("PTW_CTL_FD", cs, 1);
		setenv("PTW_REPLY_FD", rs, 1);
		setenv("PTWATCH_TRUTH", truth, 1);
		execv(argv[0], argv);
		_exit(127);
	}
	close(c[0]);
	close(r[1]);
	*ctl = c[1];
	*rep = r[0];
	return child;
}

void kdrv_wait_ready(int rep, pid_t child, char *line, size_t size)
{
	ssize_t n = read(rep, line, size - 1);
	line[n > 0 ? n : 0] = '\0';
	pid_t pid = 0;
	if (n <= 0 || sscanf(line, "ready %d", &pid) != 1 || pid != child) {
		fprintf(stderr, "fixture did not say ready: %s\n", line);
		exit(99);
	}
}

struct ptw_kernel *kdrv_attach(const struct ptw_kernel_opts *o, pid_t pid)
{
	char why[512];
	struct ptw_kernel *k;
	if (ptw_kernel_attach(o, pid, &k, why, sizeof(why)) < 0) {
		printf("FAIL: cannot attach to %d: %s\n", pid, why);
		kill(pid, SIGKILL);
		exit(1);
	}
	return k;
}

static int end(struct ptw_kernel *k, struct ptw_spans *spans, pid_t child,
	       struct ptw_kernel_stats *st, bool as_front)
{
	int status = 0, r = 0;
	waitpid(child, &status, 0);
	for (int i = 0; as_front && i < 100 && (r = ptw_kernel_run(k, 100)) == 0; i++)
		;
	if (!as_front || r != 1 || ptw_kernel_probes_everywhere(k))
		ptw_kernel_detach(k); /* (as_front: something still runs, it lets go) */
	else
		printf("every watched process ended: no detach (as ptwatch's front)\n");
	ptw_spans_finish(spans);
	ptw_kernel_stats(k, st);
	return status;
}

int kdrv_end(struct ptw_kernel *k, struct ptw_spans *spans, pid_t child,
	     struct ptw_kernel_stats *st)
{
	return end(k, spans, child, st, false);
}

int kdrv_end_as_front(struct ptw_kernel *k, struct ptw_spans *spans, pid_t child,
		      struct ptw_kernel_stats *st)
{
	return end(k, spans, child, st, true);
}

static char **facts_notes;
static size_t facts_nnotes;
static struct ptw_process *facts_procs;
static size_t facts_nprocs;

bool kdrv_fact(const struct ptw_event *ev)
{
	if (ev->kind == PTW_EV_WARNING) {
		facts_notes = xreallocarray(facts_notes, facts_nnotes + 1, sizeof(*facts_notes));
		facts_notes[facts_nnotes++] = xstrdup(ev->name ? ev->name : "");
		return true;
	}
	if (ev->kind != PTW_EV_PROCESS)
		return false;
	const struct ptw_process *in = ev->proc;
	if (in->id >= facts_nprocs) {
		facts_procs = xreallocarray(facts_procs, in->id + 1, sizeof(*facts_procs));
		memset(facts_procs + facts_nprocs, 0, (in->id + 1 - facts_nprocs) * sizeof(*facts_procs));
		facts_nprocs = in->id + 1;
	}
	/* (the latest copy of each: an earlier one's strings go) */
	struct ptw_process *p = &facts_procs[in->id];
	free((char *)p->exe);
	ptw_argv_free((char **)p->argv);
	free((char *)p->not_followed_why);
	*p = *in;
	p->exe = in->exe ? xstrdup(in->exe) : NULL;
	p->argv = in->argv ? ptw_argv_dup(in->argv) : NULL;
	p->not_followed_why = in->not_followed_why ? xstrdup(in->not_followed_why) : NULL;
	return true;
}

size_t kdrv_notes(struct ptw_kernel *k, const char *const **notes)
{
	ptw_kernel_finish(k);
	for (size_t i = 0; i < facts_nnotes; i++)
		printf("note: %s\n", facts_notes[i]);
	*notes = (const char *const *)facts_notes;
	return facts_nnotes;
}

size_t kdrv_processes(const struct ptw_process **procs)
{
	*procs = facts_procs;
	return facts_nprocs;
}

char *kdrv_slurp(const char *path)
{
	FILE *f = fopen(path, "re");
	if (!f)
		return NULL;
	struct ptw_buf b = { 0 };
	char buf[4096];
	size_t n;
	while ((n = fread(buf, 1, sizeof(buf), f)) > 0)
		ptw_buf_add(&b, buf, n);
	fclose(f);
	return b.p ? b.p : xstrdup("");
}

const struct json_object *kdrv_jget(const struct json_object *o, const char *key)
{
	struct json_object *r;
	return o && json_object_object_get_ex(o, key, &r) ? r : NULL;
}

int64_t kdrv_jint(const struct json_object *o, const char *key)
{
	const struct json_object *v = kdrv_jget(o, key);
	return v && json_object_is_type(v, json_type_int) ? json_object_get_int64(v) : -1;
}

uint64_t kdrv_jhex(const struct json_object *o, const char *key)
{
	const struct json_object *v = kdrv_jget(o, key);
	return v && json_object_is_type(v, json_type_string)
		       ? strtoull(json_object_get_string((struct json_object *)v), NULL, 16)
		       : 0;
}

const char *kdrv_jstr(const struct json_object *o, const char *key)
{
	const struct json_object *v = kdrv_jget(o, key);
	return v && json_object_is_type(v, json_type_string)
		       ? json_object_get_string((struct json_object *)v)
		       : "";
}

bool kdrv_jtrue(const struct json_object *o, const char *key)
{
	const struct json_object *v = kdrv_jget(o, key);
	return v && json_object_is_type(v, json_type_boolean) &&
	       json_object_get_boolean((struct json_object *)v);
}
