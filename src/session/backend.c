/* SPDX-License-Identifier: MIT */
/* Which backend observes the target (ptw_backend.h): asked for by name, or
 * auto's choice, with the reason the document gives. */
#define _GNU_SOURCE
#include "ptw_backend.h"
#include "ptw_tracer.h"

#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <string.h>

#include "ptw_kernel.h"
#include "ptw_regs.h"
#include "ptw_symbols.h"
#include "ptw_util.h"

static const char *const kind_names[] = { "auto", "ptrace", "kernel" };

const char *ptw_end_reason_name(enum ptw_end_reason r)
{
	switch (r) {
	case PTW_END_TARGET_EXITED:
		return "target_exited";
	case PTW_END_INTERRUPTED:
		return "interrupted";
	case PTW_END_DURATION:
		return "duration";
	case PTW_END_SNAPSHOT:
		return "snapshot";
	case PTW_END_DETACHED:
		return "detached";
	default:
		return "error";
	}
}

int ptw_backend_kind_parse(const char *s, enum ptw_backend_kind *ret)
{
	for (size_t i = 0; i < PTW_ARRAY_SIZE(kind_names); i++)
		if (!strcmp(s, kind_names[i])) {
			*ret = (enum ptw_backend_kind)i;
			return 0;
		}
	return -EINVAL;
}

/* A static program's own libc can be probed where its symbol table names
 * pthread_create (the kernel path finds its probe points in the file);
 * stripped, the ptrace path still finds main and its threads' clones. */
static bool static_probeable(const char *path)
{
	struct ptw_symbols *syms;
	uint64_t addr;
	if (ptw_symbols_new_file(path, false, NULL, &syms) < 0)
		return false;
	bool found = ptw_symbols_lookup(syms, PTW_MOD_EXE, "pthread_create", &addr, NULL) == 0;
	ptw_symbols_free(syms);
	return found;
}

/*
 * Whether auto may take the kernel path for this session; if not, why
 * (one line, into why). argv0: a launch's command (NULL for -p).
 */
static bool kernel_fits(const struct ptw_backend_opts *o, const char *argv0, char *why,
			size_t size)
{
	char reason[200];
	if (ptw_kernel_available(reason, sizeof(reason)) < 0) {
		snprintf(why, size, "auto: the kernel path cannot run here: %s", reason);
		return false;
	}
	if (o->create_events) {
		snprintf(why, size, "auto: --create-events is a ptrace cross-check");
		return false;
	}
	char path[PATH_MAX];
	if (argv0 && ptw_command_path(argv0, path, sizeof(path)) && ptw_elf_is_static(path) &&
	    !static_probeable(path)) {
		snprintf(why, size,
			 "auto: %.160s is a static program without the symbols the kernel path "
			 "probes (stripped)",
			 path);
		return false;
	}
	return true;
}

static int ptrace_launch(const struct ptw_backend_opts *o, char *const argv[], int child_stdout,
			 struct ptw_backend **ret)
{
	struct ptw_tracer *t;
	int r = ptw_tracer_launch(o, argv, child_stdout, &t);
	if (r == 0)
		*ret = ptw_tracer_backend(t);
	return r;
}

/* Why the kernel path, asked for by name. */
static void kernel_by_name(struct ptw_backend *b)
{
	snprintf(b->why, sizeof(b->why), "--backend=kernel");
}

int ptw_backend_launch(enum ptw_backend_kind want, const struct ptw_backend_opts *o,
		       char *const argv[], int child_stdout, struct ptw_backend **ret, char *why,
		       size_t why_size)
{
	char reason[256] = "";
	if (want == PTW_BACKEND_KERNEL) {
		int r = ptw_kernel_backend_launch(o, argv, child_stdout, ret, why, why_size);
		if (r == 0)
			kernel_by_name(*ret);
		return r;
	}
	if (want == PTW_BACKEND_AUTO && kernel_fits(o, argv[0], reason, sizeof(reason))) {
		char kwhy[200] = "";
		if (ptw_kernel_backend_launch(o, argv, child_stdout, ret, kwhy, sizeof(kwhy)) == 0) {
			snprintf((*ret)->why, sizeof((*ret)->why),
				 "auto: ptwatch may load BPF programs and this kernel has uprobes");
			return 0;
		}
		/* Nothing ran (the command is held until the probes are in). */
		snprintf(reason, sizeof(reason), "auto: the kernel path failed: %s", kwhy);
	}
	if (want == PTW_BACKEND_PTRACE)
		snprintf(reason, sizeof(reason), "--backend=ptrace");
	int r = ptrace_launch(o, argv, child_stdout, ret);
	if (r == 0)
		snprintf((*ret)->why, sizeof((*ret)->why), "%s", reason);
	if (why_size)
		why[0] = '\0';
	return r;
}

/*
 * --snapshot: every thread's registers from the kernel where it gives
 * them (by name, or auto where the kernel path can run): no thread is
 * stopped; else a thread asleep is read as it sleeps and the others are
 * stopped with ptrace.
 */
static int snapshot_attach(enum ptw_backend_kind want, const struct ptw_backend_opts *o,
			   pid_t pid, struct ptw_backend **ret, char *why, size_t why_size)
{
	char reason[256] = "--backend=ptrace";
	struct ptw_regs_reader *reader = NULL;
	if (want != PTW_BACKEND_PTRACE) {
		char kwhy[200] = "";
		int r = ptw_kernel_regs_reader(pid, &reader, kwhy, sizeof(kwhy));
		if (r < 0 && want == PTW_BACKEND_KERNEL) {
			snprintf(why, why_size, "%s", kwhy);
			return r;
		}
		if (r < 0)
			snprintf(reason, sizeof(reason),
				 "auto: the kernel cannot read the threads without a stop: %s",
				 kwhy);
	}
	const char *what = reader ? reader->what : NULL; /* (static) */
	struct ptw_tracer *t;
	int r = ptw_tracer_snapshot(o, pid, reader, &t);
	if (r < 0)
		return r;
	*ret = ptw_tracer_backend(t);
	if (what) {
		(*ret)->name = "kernel";
		snprintf((*ret)->why, sizeof((*ret)->why), "%s: %s",
			 want == PTW_BACKEND_KERNEL ? "--backend=kernel" : "auto", what);
	} else {
		snprintf((*ret)->why, sizeof((*ret)->why), "%s", reason);
	}
	return 0;
}

int ptw_backend_attach(enum ptw_backend_kind want, const struct ptw_backend_opts *o, pid_t pid,
		       bool snapshot, struct ptw_backend **ret, char *why, size_t why_size)
{
	char reason[256] = "";
	if (snapshot)
		return snapshot_attach(want, o, pid, ret, why, why_size);
	if (want == PTW_BACKEND_KERNEL) {
		int r = ptw_kernel_backend_attach(o, pid, ret, why, why_size);
		if (r == 0)
			kernel_by_name(*ret);
		return r;
	}
	if (want == PTW_BACKEND_AUTO && kernel_fits(o, NULL, reason, sizeof(reason))) {
		char kwhy[200] = "";
		int r = ptw_kernel_backend_attach(o, pid, ret, kwhy, sizeof(kwhy));
		if (r == 0) {
			snprintf((*ret)->why, sizeof((*ret)->why),
				 "auto: ptwatch may load BPF programs and this kernel has uprobes");
			return 0;
		}
		if (r == -ESRCH) { /* no such process: ptrace would say the same */
			snprintf(why, why_size, "%s", kwhy);
			return r;
		}
		snprintf(reason, sizeof(reason), "auto: the kernel path failed: %s", kwhy);
	} else if (want == PTW_BACKEND_PTRACE)
		snprintf(reason, sizeof(reason), "--backend=ptrace");
	struct ptw_tracer *t;
	int r = ptw_tracer_attach(o, pid, &t);
	if (r < 0)
		return r;
	*ret = ptw_tracer_backend(t);
	snprintf((*ret)->why, sizeof((*ret)->why), "%s", reason);
	return 0;
}
