/* SPDX-License-Identifier: MIT */
/*
 * The converter's callbacks (convert.h's struct ptwk_conv_ops) for a
 * watched process: naming code and call sites, telling main's return and
 * a signal handler's trampoline, and what an exec, an image read or ld.so's
 * list changing asks of the backend (symbols, probes, --trace's scan).
 */
#define _GNU_SOURCE
#include "kernel_int.h"

/* glibc calls main from __libc_start_call_main (2.34+), before that from
 * __libc_start_main, and hands its value to exit() there. */
static bool main_returns_to(void *ctx, uint64_t ret)
{
	const struct ptw_kernel *k = ctx;
	if (ret - k->main_caller_lo < k->main_caller_hi - k->main_caller_lo)
		return true; /* no symbol table: its range, found (main_caller.h) */
	const struct ptw_location *l = ptwk_locate(ctx, ret);
	return l && l->symbol &&
	       (!strcmp(l->symbol, "__libc_start_call_main") ||
		!strcmp(l->symbol, "__libc_start_main"));
}

static const struct ptw_location *frame_function(void *ctx, uint64_t index)
{
	return ptwk_frames_function(ptwk_frames_of(ctx), index); /* (a -f child: the root's) */
}

/* The sigreturn trampoline a signal handler returns to, known by its code
 * (ptw_glibc.h; its first byte may be the int3 of ptwatch's own uprobe
 * there). Read once per return address. */
static bool is_sigreturn(void *ctx, uint64_t addr)
{
	struct ptw_kernel *k = ctx;
	uintptr_t known = (uintptr_t)ptw_map_get(&k->sigrets, addr);
	if (known || !addr || !k->proc)
		return known == 1;
	uint8_t got[PTW_GLIBC_SIGRETURN_LEN];
	bool yes = ptw_mem_read(k->proc, addr, got, sizeof(got)) == 0 &&
		   ptw_glibc_is_sigreturn(got, sizeof(got));
	ptw_map_put(&k->sigrets, addr, (void *)(uintptr_t)(yes ? 1 : 2));
	return yes;
}

/* dlopen, dlclose: the new libraries' traced functions get their probes
 * now; the process ran on meanwhile (kframes.h). */
static void modules_changed(void *ctx)
{
	struct ptw_kernel *k = ctx;
	if (!ptwk_frames_of(k) || !k->syms)
		return;
	if (!(k->root ? k->root : k)->mods_on) /* (else ld.so's list, walked in it, says) */
		ptw_symbols_refresh(k->syms);
	ptwk_scan_frames(k);
}

/* A new image's libraries are mapped: its symbols, now that the process
 * lives (a short one may be gone by the next read of the ring). */
static void image_ready(void *ctx)
{
	struct ptw_kernel *k = ctx;
	struct ptw_kernel *root = k->root ? k->root : k;
	struct drained *d = root->converting ? &root->queue[root->cur] : NULL;
	if (d && (d->r.kind == PTWK_MAIN || d->gap_syms) && d->syms) {
		/* Its modules as the drain thread read them, all mapped. The
		 * ones before stay whole: events point into them. */
		if (k->syms && !k->syms_borrowed) {
			k->old_syms =
				xreallocarray(k->old_syms, k->nold_syms + 1, sizeof(*k->old_syms));
			k->old_syms[k->nold_syms++] = k->syms;
		}
		k->syms = d->syms;
		k->syms_borrowed = false;
		d->syms = NULL;
	} else if (!d && k->syms && !k->syms_borrowed) {
		/* (A MAIN record drained without its modules: the process was
		 * gone. Reading them again now would only lose those read at
		 * its exec.) */
		ptw_symbols_refresh(k->syms);
	}
	if (k->libc_checks > 0)
		ptwk_check_libc(k);
	ptwk_read_glibc(k);
	ptwk_scan_frames(k);
}

/* Does k's new image (exe) run the static program file the probes are on
 * (a launch's, or its -f descendants'), not one put in its place since?
 * (Gone already and no file there: it is taken to be.) */
static bool exec_probed(const struct ptw_kernel *k, const char *exe)
{
	const struct ptw_kernel *root = k->root ? k->root : k;
	char path[64];
	struct stat st;
	snprintf(path, sizeof(path), "/proc/%d/exe", k->pid);
	if (stat(path, &st) < 0 && (!exe[0] || stat(exe, &st) < 0))
		return true;
	return st.st_ino == root->static_ino && st.st_dev == root->static_dev;
}

/* exec: a new image. Its symbols are loaded when first needed (now its
 * libc may not even be mapped yet); the old ones stay for the events that
 * point into them. */
static const char *on_exec(void *ctx)
{
	struct ptw_kernel *k = ctx;
	const struct ptwk_probes *probes = k->root ? &k->root->probes : &k->probes;
	if (k->syms_borrowed) {
		k->syms = NULL; /* -f: its parent's, which still runs that image */
		k->syms_borrowed = false;
	}
	if (k->syms) {
		if (!k->syms_lent) /* its fork children still look up in it */
			ptw_symbols_retire(k->syms);
		k->old_syms = xreallocarray(k->old_syms, k->nold_syms + 1, sizeof(*k->old_syms));
		k->old_syms[k->nold_syms++] = k->syms;
		k->syms = NULL;
	}
	ptw_map_free(&k->sites);
	ptw_map_free(&k->sigrets);
	struct ptw_kernel *root = k->root ? k->root : k;
	struct drained *d = root->converting ? &root->queue[root->cur] : NULL;
	ssize_t n;
	free(k->glibc); /* the new image's is read once its libc is mapped */
	k->glibc = NULL;
	k->main_caller_lo = k->main_caller_hi = 0; /* (the old image's libc) */
	if (d && d->r.kind == PTWK_EXEC) {
		/* What drain() read while the new image ran (nothing if it was
		 * gone already). */
		if (!d->syms && !root->mods_on) /* (with lists: none read at an exec) */
			__atomic_fetch_add(&root->images_unread, 1, __ATOMIC_RELAXED);
		if (k->proc)
			ptw_mem_invalidate(k->proc); /* (read by pid: the new image) */
		k->syms = d->syms;
		d->syms = NULL;
		n = d->exe ? (ssize_t)strlen(d->exe) : 0;
		snprintf(k->exe, sizeof(k->exe), "%s", d->exe ? d->exe : "");
		/* (Gone already: its command line is unknown, not its parent's.) */
		ptw_argv_free(k->argv);
		k->argv = d->argv;
		d->argv = NULL;
	} else {
		ptw_mem_invalidate(k->proc);
		ptwk_load_symbols(k);
		char path[64];
		snprintf(path, sizeof(path), "/proc/%d/exe", k->pid);
		n = readlink(path, k->exe, sizeof(k->exe) - 1);
		k->exe[n > 0 ? n : 0] = '\0';
		ptwk_follow_exec(k);
	}
	bool launch = k->launched;
	if (k->launched)
		k->launched = false;
	if (launch && n > 0 && k->exe[0] != '/') {
		/* Gone before its exe was read: the path it was exec'd by is
		 * relative to its working directory then, ours (our fork, held
		 * until its exec); unresolved, ld.so's "" for the program would
		 * name no file and nothing in it would have a name. */
		char *real = realpath(k->exe, NULL);
		if (real && strlen(real) < sizeof(k->exe))
			n = snprintf(k->exe, sizeof(k->exe), "%s", real);
		free(real);
	}
	if (!launch && d && d->r.kind == PTWK_EXEC && (pid_t)d->r.a != k->pid &&
	    ptwk_probe_pid(k) > 0 && !k->conv.blind) {
		/* The exec'ing thread took the process's pid; the probes' link
		 * holds the task that was the main thread, now gone, and the
		 * kernel filters by its memory: none. Links made now hold the
		 * new main task; what the image did meanwhile is not seen. */
		int fds[2] = { -1, -1 };
		if (k->multi && k->nstale + 2 <= PTW_ARRAY_SIZE(k->stale_fds) &&
		    ptwk_attach_multi_to(k, (uint32_t)k->pid, fds, false) == 0) {
			for (int i = 0; i < 2; i++) {
				k->stale_fds[k->nstale++] = k->multi_fds[i];
				k->multi_fds[i] = fds[i];
			}
			uint64_t now = ptw_now_ns();
			ptwk_note_as(
				k, PTW_W_KERNEL_NOT_SEEN,
				"thread %d, not the main thread, exec'd: the kernel's uprobes for one "
				"process follow its main thread, and were put in again for the new "
				"one %.1f ms after the exec: what the new image did before is seen "
				"only as clones and exits",
				(int)d->r.a, now > d->r.ns ? (double)(now - d->r.ns) / 1e6 : 0.0);
			k->conv.probes_in_ns = now; /* (its clones before: the window's) */
			/* ld.so's list and main() may have gone by meanwhile
			 * (then its libraries are all mapped): its modules from
			 * /proc now, while it runs; a list that comes after
			 * replaces them */
			if (root->mods_on && !k->syms) {
				int lr = ptwk_load_symbols(k);
				ptw_dbg(PTW_DBG_SYM,
					"process %d: modules from /proc after the exec: %s", k->pid,
					lr < 0 ? strerror(-lr) : "read");
				if (lr < 0)
					k->syms = NULL;
			}
		} else {
			for (int i = 0; i < 2; i++)
				if (fds[i] >= 0)
					close(fds[i]);
			k->conv.blind = true;
			ptwk_watch_probed(k, k->pid, false);
			ptwk_note_as(
				k, PTW_W_KERNEL_NOT_SEEN,
				"thread %d, not the main thread, exec'd: the kernel's uprobes for "
				"one process follow its old main thread, and no longer fire: "
				"in the new image " PTWK_SEEN_BY_TRACEPOINTS,
				(int)d->r.a);
		}
	}
	/* Its libc is mapped by its ld.so, a moment later: if it is not the
	 * file the probes are on, ptwk_check_libc says so (the probes are on the
	 * file: the same libc in the new image is seen as in the old). */
	k->libc_checks = 100;
	k->mods_listed = false;
	k->exec_ns = ptw_now_ns();
	if (probes->in_exe && (launch || k->root) && !exec_probed(k, k->exe) &&
	    !ptw_elf_is_static(k->exe)) {
		/* (-f: the static program's probes, none in the new image) */
		k->libc_checks = 0;
		ptwk_watch_probed(k, k->pid, false);
		ptwk_note_as(
			k, PTW_W_KERNEL_NOT_SEEN,
			"%s is not the static program %s the probes are on: " PTWK_SEEN_BY_TRACEPOINTS,
			n > 0 ? k->exe : "the new image", probes->module);
	}
	if (n > 0 && ptw_elf_is_static(k->exe)) {
		k->libc_checks = 0;
		if (!(probes->in_exe && exec_probed(k, k->exe)) && !k->static_noted) {
			ptwk_watch_probed(k, k->pid, false);
			ptwk_note_as(k, PTW_W_KERNEL_NOT_SEEN,
				     "%s is a static program, and the probes are on %s (the kernel "
				     "path probes a static program's own file when it launches or "
				     "attaches to it, not at an exec): " PTWK_SEEN_BY_TRACEPOINTS,
				     k->exe, probes->module);
		}
	}
	return n > 0 ? k->exe : NULL;
}

static int watch_return(void *ctx, uint64_t addr)
{
	return ptwk_watch_return(ctx, addr);
}

static void unwatch_returns(void *ctx, pid_t tid)
{
	ptwk_unwatch_returns(ctx, tid);
}

struct ptwk_conv_ops ptwk_conv_ops_of(struct ptw_kernel *k)
{
	return (struct ptwk_conv_ops){ .sink = ptwk_sink,
				       .locate = ptwk_locate,
				       .call_site = ptwk_call_site,
				       .exec = on_exec,
				       .main_returns_to = main_returns_to,
				       .image_ready = image_ready,
				       .frame_function = frame_function,
				       .modules_changed = modules_changed,
				       .is_sigreturn = is_sigreturn,
				       .watch_return = watch_return,
				       .unwatch_returns = unwatch_returns,
				       .ctx = k };
}
