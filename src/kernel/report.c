/* SPDX-License-Identifier: MIT */
/*
 * What the kernel path tells the session at the end: records lost, the
 * notes of --trace and --locks, its counters, every process of -f.
 */
#define _GNU_SOURCE
#include "kernel_int.h"

/* What a kind of record was, for the loss's warning. */
static const char *lost_kind_name(unsigned kind)
{
	static const char *const names[PTWK_KIND_N] = {
		[PTWK_START] = "thread starts",
		[PTWK_THREAD_BEGIN] = "thread starts",
		[PTWK_DEATH] = "thread ends",
		[PTWK_EXIT_CALL] = "pthread_exit calls",
		[PTWK_CANCEL] = "pthread_cancel calls",
		[PTWK_DETACH] = "pthread_detach calls",
		[PTWK_JOIN] = "joins",
		[PTWK_JOIN_RET] = "join returns",
		[PTWK_CREATE] = "thread creations",
		[PTWK_FORK] = "forks",
		[PTWK_EXIT] = "thread exits",
		[PTWK_EXEC] = "execs",
		[PTWK_EXIT_FN] = "exit calls",
		[PTWK_MAIN] = "main() starts",
		[PTWK_FRAME_ENTRY] = "traced calls' entries",
		[PTWK_FRAME_RETURN] = "traced calls' returns",
		[PTWK_FRAME_TAIL] = "traced calls' tail jumps",
		[PTWK_THROW] = "throws",
		[PTWK_CATCH] = "catches",
		[PTWK_LONGJMP] = "longjmps",
		[PTWK_DL_STATE] = "library loads",
		[PTWK_FATAL_SIGNAL] = "fatal signals",
		[PTWK_SIGNAL] = "signal deliveries",
		[PTWK_SIGRETURN] = "signal returns",
		[PTWK_CONTEXT_SWAP] = "context switches",
		[PTWK_CONTEXT_SET] = "context switches",
		[PTWK_MODULE] = "module list entries",
		[PTWK_EXEC_ARGS] = "command lines",
		[PTWK_CPU] = "threads' last CPU accounting",
	};
	if (kind >= PTWK_LOCK_FIRST)
		return kind == PTWK_LOCK_RET ? "wait returns" : "wait entries";
	return kind < PTWK_KIND_N && names[kind] ? names[kind] : "other records";
}

/* The records the full ring refused, by what they were, once (at the
 * target's end as at a detach: a launch whose command ends by itself
 * lost them too). */
static void lost_note(struct ptw_kernel *k)
{
	if (k->root || k->lost_noted || !(k->detached || k->conv.ended))
		return;
	if (k->skel && !k->detached)
		ptwk_read_counters(k);
	if (k->ns_tids_full) {
		k->lost_noted = true;
		ptwk_note(
			k,
			"%llu threads' tids in ptwatch's PID namespace were not kept: its map (%u "
			"entries) was full; an exec by one of them is not recognised as theirs",
			(unsigned long long)k->ns_tids_full, k->ns_tid_slots);
	}
	if (k->gap_tids_full) {
		k->lost_noted = true;
		ptwk_note(k,
			  "-f: %llu threads made before their process's links were not kept in its "
			  "map (full): their ends are seen only at their probe, if they came after",
			  (unsigned long long)k->gap_tids_full);
	}
	if (!k->stats.lost)
		return;
	k->lost_noted = true;
	/* (kinds of one name summed) */
	const char *names[PTWK_LOCK_KIND_END];
	uint64_t sums[PTWK_LOCK_KIND_END];
	size_t m = 0;
	for (unsigned kind = 0; kind < PTWK_LOCK_KIND_END; kind++) {
		if (!k->lost_kinds[kind])
			continue;
		const char *name = lost_kind_name(kind);
		size_t j = 0;
		while (j < m && strcmp(names[j], name))
			j++;
		if (j == m) {
			names[m] = name;
			sums[m++] = 0;
		}
		sums[j] += k->lost_kinds[kind];
	}
	struct ptw_buf what = { 0 };
	for (size_t j = 0; j < m; j++)
		ptw_buf_printf(&what, "%s%llu %s", j ? ", " : "", (unsigned long long)sums[j],
			       names[j]);
	ptwk_note_as(
		k, PTW_W_KERNEL_EVENTS_LOST,
		"%llu records lost (%s): the ring buffer (%zu bytes) was full; those events are "
		"missing",
		(unsigned long long)k->stats.lost, what.p ? what.p : "of no known kind",
		k->o.ring_bytes);
	ptw_buf_free(&what);
}

/* -f with a link per process: the threads its followed processes made
 * before their own probes were in, for the whole tree, once. */
static void gap_note(struct ptw_kernel *k)
{
	if (k->gap_noted || !(k->detached || k->conv.ended))
		return;
	uint64_t made = k->conv.gap_created, ended = k->conv.gap_ended, calls = 0, returns = 0;
	uint64_t waits = 0;
	unsigned procs = made != 0, execs = k->conv.exec_gap, callers = 0, returners = 0;
	unsigned waiters = 0;
	for (size_t i = 0; i < k->nfollowed; i++) {
		made += k->followed[i]->conv.gap_created;
		ended += k->followed[i]->conv.gap_ended;
		procs += k->followed[i]->conv.gap_created != 0;
		execs += k->followed[i]->conv.exec_gap;
		calls += k->followed[i]->conv.gap_frames;
		callers += k->followed[i]->conv.gap_frames != 0;
		returns += k->followed[i]->conv.gap_returns;
		returners += k->followed[i]->conv.gap_returns != 0;
		waits += k->followed[i]->conv.gap_waits;
		waiters += k->followed[i]->conv.gap_waits != 0;
	}
	if (made)
		ptwk_note_as(
			k, PTW_W_KERNEL_NOT_SEEN,
			"%llu threads of %u processes were made before their process's own "
			"probes were in (-f links each process once its fork is read): their "
			"pthread_create calls were not seen (no call site, no attributes); %llu of "
			"them also ended then: their values are known, not whether they returned "
			"or called pthread_exit (unmatched, death_unclassified), nor their joins",
			(unsigned long long)made, procs, (unsigned long long)ended);
	if (calls)
		ptwk_note_as(
			k, PTW_W_KERNEL_NOT_SEEN,
			"%llu --trace calls under way at the fork of %u followed processes (in "
			"the thread that forked each) are not reported in them: each had left "
			"them, or could not be read, by the time its own probes were in (its "
			"calls made before then are not seen either)",
			(unsigned long long)calls, callers);
	if (returns)
		ptwk_note_as(k, PTW_W_KERNEL_NOT_SEEN,
			     "%llu --trace calls that %u followed processes made before their own "
			     "probes were in returned once they were: their entries were not seen, "
			     "so they are not reported (calls made and ended before are not seen "
			     "at all)",
			     (unsigned long long)returns, returners);
	if (waits)
		ptwk_note_as(k, PTW_W_KERNEL_NOT_SEEN,
			     "--locks: %llu threads of %u followed processes were asleep in futex "
			     "when their process's own probes went in, and woke before ptwatch "
			     "could read in which wait (it reads a thread only while it stays off "
			     "a CPU): a wait begun before the probes that they were in then is not "
			     "reported",
			     (unsigned long long)waits, waiters);
	unsigned failed = __atomic_load_n(&k->links_failed, __ATOMIC_RELAXED);
	if (failed)
		ptwk_note_as(k, PTW_W_KERNEL_NOT_SEEN,
			     "%u followed processes could not get all their own probes (their links "
			     "refused twice: --debug=tracer says why): " PTWK_SEEN_BY_TRACEPOINTS,
			     failed);
	if (execs)
		ptwk_note_as(k, PTW_W_KERNEL_NOT_SEEN,
			     "%u followed processes exec'd before their own probes were in, and "
			     "were in main() by then: their main threads' spans have no start",
			     execs);
	k->gap_noted = made || execs || failed || calls || returns || waits;
}

/* Exec'd images whose modules came too late (ring.c, callbacks.c). */
static void images_note(struct ptw_kernel *k)
{
	unsigned unread = __atomic_load_n(&k->images_unread, __ATOMIC_RELAXED);
	unsigned from_file = __atomic_load_n(&k->images_from_file, __ATOMIC_RELAXED);
	if (k->images_noted || !(k->detached || k->conv.ended))
		return;
	k->images_noted = true;
	if (unread)
		ptwk_note(k,
			  "%u exec'd images ended before their modules could be read (they lived "
			  "less than the reader's wakeup): their code addresses are not named",
			  unread);
	if (from_file)
		ptwk_note_as(
			k, PTW_W_KERNEL_NOT_SEEN,
			"%u followed processes that exec'd early were gone before their memory "
			"maps could be read: their programs' code is named from the files (where "
			"their exec put them), their libraries' is not",
			from_file);
}

/* What could not be seen, said once the session is over (the process
 * ended, or ptwatch let go): debuginfod's failure, the threads made while
 * the probes went in, and what --trace could not do (a library loaded
 * late may still match a pattern until then). Once. */
void ptwk_end_notes(struct ptw_kernel *k)
{
	lost_note(k);
	const char *e = ptw_symbols_debuginfod_error();
	if (e && !k->debuginfod_noted) {
		k->debuginfod_noted = true;
		ptwk_note_as(k, PTW_W_DEBUGINFOD_FAILED, "%s", e);
	}
	if (k->conv.window_clones && !k->window_clones_noted && (k->detached || k->conv.ended)) {
		k->window_clones_noted = true;
		ptwk_note_as(
			k, PTW_W_KERNEL_NOT_SEEN,
			"%llu threads were made and ended while the probes went in: clones without "
			"a start routine or argument",
			(unsigned long long)k->conv.window_clones);
	}
	gap_note(k);
	images_note(k);
	if (!k->frames || k->frames_noted || !(k->detached || k->conv.ended))
		return;
	k->frames_noted = true;
	ptwk_frames_notes(k->frames, ptwk_note_line, k);
	if (k->conv.frames_too_deep)
		ptwk_note(
			k,
			"--trace: %llu calls nested under 64 others with their uretprobe returns "
			"pending had no return probe (the kernel's limit) and are reported unmatched",
			(unsigned long long)k->conv.frames_too_deep);
}

/* The per-CPU counters of map m (n keys), summed over the CPUs into sums:
 * one batch lookup (two system calls for all), else key by key. */
static void read_percpu(const struct bpf_map *m, uint32_t n, int ncpu, uint64_t *sums)
{
	uint64_t *v = xcalloc((size_t)n * (size_t)ncpu, sizeof(*v));
	uint32_t *keys = xcalloc(n, sizeof(*keys)), out, count = n;
	LIBBPF_OPTS(bpf_map_batch_opts, o);
	memset(sums, 0, n * sizeof(*sums));
	int r = bpf_map_lookup_batch(bpf_map__fd(m), NULL, &out, keys, v, &count, &o);
	if (r == 0 || (errno == ENOENT && count == n)) {
		for (uint32_t i = 0; i < count; i++)
			for (int c = 0; c < ncpu && keys[i] < n; c++)
				sums[keys[i]] += v[(size_t)i * (size_t)ncpu + (size_t)c];
	} else {
		for (uint32_t key = 0; key < n; key++)
			if (bpf_map__lookup_elem(m, &key, sizeof(key), v, (size_t)ncpu * sizeof(*v),
						 0) == 0)
				for (int c = 0; c < ncpu; c++)
					sums[key] += v[c];
	}
	free(keys);
	free(v);
}

void ptwk_read_counters(struct ptw_kernel *k)
{
	if (!k->skel)
		return;
	int ncpu = libbpf_num_possible_cpus();
	if (ncpu <= 0)
		return;
	uint64_t sum[PTWK_STAT_N];
	read_percpu(k->skel->maps.stats, PTWK_STAT_N, ncpu, sum);
	read_percpu(k->skel->maps.lost_kinds, PTWK_LOCK_KIND_END, ncpu, k->lost_kinds);
	k->stats.lost = sum[PTWK_STAT_LOST];
	k->stats.wakeups = sum[PTWK_STAT_WAKEUPS];
	k->stats.read_failures = sum[PTWK_STAT_READ_FAIL];
	k->watch_full = sum[PTWK_STAT_WATCH_FULL];
	k->ns_tids_full = sum[PTWK_STAT_NS_TIDS_FULL];
	k->gap_tids_full = sum[PTWK_STAT_GAP_TIDS_FULL];
}

/* l's counts added to t (l NULL: none). */
void ptwk_tally_locks(const struct ptwk_locks *l, struct locks_tally *t)
{
	uint64_t w, u;
	uint32_t dl;
	if (!l)
		return;
	ptwk_locks_counts(l, &w, &u, &dl);
	t->waits += w;
	t->unclassified += u;
	t->deadlocks += dl;
}

void ptw_kernel_stats(struct ptw_kernel *k, struct ptw_kernel_stats *ret)
{
	if (!k->detached)
		ptwk_read_counters(k);
	*ret = k->stats;
	ret->probes_stepped = ptwk_frames_stepped(k->frames);
	struct locks_tally t = k->released; /* (-f: theirs, counted as they ended) */
	ptwk_tally_locks(k->locks, &t);
	for (size_t i = 0; i < k->nfollowed; i++)
		ptwk_tally_locks(k->followed[i]->locks, &t);
	ret->waits = t.waits;
	ret->waits_unclassified = t.unclassified;
	ret->deadlocks = t.deadlocks;
	if (!ret->mode)
		ret->mode = "none";
}

void ptw_kernel_finish(struct ptw_kernel *k)
{
	ptwk_end_notes(k);
	ptwk_say_process(k);
	for (size_t i = 0; i < k->nfollowed; i++)
		ptwk_say_process(k->followed[i]);
}

void ptw_kernel_save_caches(struct ptw_kernel *k)
{
	if (k->syms && !k->syms_borrowed)
		ptw_symbols_save_cache(k->syms);
	for (size_t i = 0; i < k->nold_syms; i++)
		ptw_symbols_save_cache(k->old_syms[i]);
	for (size_t i = 0; i < k->nfollowed; i++)
		ptw_kernel_save_caches(k->followed[i]);
}
