/* SPDX-License-Identifier: MIT */
/*
 * One process tracer: made the same way for a launched command, an
 * attached process and a followed fork child (tracer_new), with the
 * features its options turn on; and freed (ptw_tracer_free). The feature
 * table is here and nowhere else: the rest of the tracer calls features
 * through t->features (core.c).
 */
#define _GNU_SOURCE
#include <stdlib.h>

#include "tracer_internal.h"

/* In the order of enum feature_id. */
static const struct tracer_feature *const feature_table[FEATURES] = {
	[FEATURE_LIFECYCLE] = &feature_lifecycle,
	[FEATURE_FRAMES] = &feature_frames,
	[FEATURE_LOCKS] = &feature_locks,
};

struct ptw_tracer *tracer_new(const struct ptw_backend_opts *o, struct ptw_tracer *root, pid_t pid,
			      uint64_t start_ns, bool with_features)
{
	struct ptw_tracer *t = xcalloc(1, sizeof(*t));
	t->o = *o;
	t->root = root;
	t->pid = pid;
	t->start_ns = start_ns;
	t->img.task_dirfd = -1;
	for (int id = 0; with_features && id < FEATURES; id++) {
		const struct tracer_feature *f = feature_table[id];
		if (f->wanted && !f->wanted(o))
			continue;
		t->features[t->nfeatures++] = f;
		if (f->attached)
			f->attached(t);
	}
	return t;
}

void ptw_tracer_free(struct ptw_tracer *t)
{
	if (!t)
		return;
	for (size_t i = 0; i < t->nfollowed; i++)
		ptw_tracer_free(t->followed[i]);
	free(t->followed);
	ptw_map_free(&t->by_pid);
	ptw_map_free(&t->foreign_said);
	free(t->fail_why);
	free(t->last_exe);
	image_release(t);
	tracer_features_free(t);
	for (size_t i = 0; i < t->nold_syms; i++)
		ptw_symbols_free(t->old_syms[i]);
	free(t->old_syms);
	ptw_argv_free(t->owned_argv);
	if (t->proc && !t->root) {
		/* The root's LWP table holds every process's threads (-f). */
		size_t it = 0;
		void *v;
		while (ptw_map_next(t->proc->lwps, &it, NULL, &v)) {
			tracer_thread_free(((struct ptw_lwp *)v)->user);
			((struct ptw_lwp *)v)->user = NULL;
		}
	}
	ptw_bptab_free(t->bps);
	ptw_proc_free(t->proc);
	free(t);
}
