/* SPDX-License-Identifier: MIT */
/*
 * --trace on the kernel path: the functions selected in a process's
 * modules get their probes (kframes.c), at the start, at an exec and as
 * libraries come.
 */
#define _GNU_SOURCE
#include "kernel_int.h"
#include "ptw_underway.h"

/* --trace's programs, as root (the session's) attaches them. */
static struct ptwk_frames_progs trace_progs(const struct ptw_kernel *root)
{
	return (struct ptwk_frames_progs){ .entry = root->skel->progs.ptw_frame_entry,
					   .ret = root->skel->progs.ptw_frame_return,
					   .exit = root->skel->progs.ptw_frame_exit,
					   .jumps = bpf_map__fd(root->skel->maps.frame_jumps),
					   .helper = root->skel->progs.ptw_frame_helper,
					   .site = root->skel->progs.ptw_underway_return,
					   .multi = root->multi,
					   .wide = ptwk_probe_pid(root) <= 0,
					   .book = root->book };
}

/*
 * The traced functions of the modules not scanned yet get their probes
 * (kframes.c): at the attach; for a launch when main is about to run (its
 * libraries are mapped then, but it runs on meanwhile: calls made before
 * the probes are in are not seen).
 */
void ptwk_scan_frames(struct ptw_kernel *k)
{
	struct ptwk_frames *frames = ptwk_frames_of(k);
	struct ptw_kernel *root = k->root ? k->root : k;
	if (!frames || !k->syms || !root->skel || root->detached)
		return;
	struct ptwk_frames_progs pr = trace_progs(root);
	char why[256] = "";
	unsigned before = ptwk_frames_probes(frames);
	int r = ptwk_frames_scan(frames, k->syms, ptwk_live_pid(k), &pr, why, sizeof(why));
	if (r == -ENOENT && ptw_proc_exited(k->pid, k->pid)) {
		/* (an image exec'd, then gone before ptwatch read the exec) */
		if (k->frames_gone_noted)
			return;
		k->frames_gone_noted = true;
		ptwk_note_as(
			root, PTW_W_KERNEL_NOT_SEEN,
			"--trace: process %d ended before the functions of its image (%s) could be "
			"probed: its calls are not seen",
			k->pid, k->exe[0] ? k->exe : "exec'd");
	} else if (r < 0)
		ptwk_note(root, "--trace: %s", why);
	root->stats.probes += ptwk_frames_probes(frames) - before;
	k->conv.sigreturn_probed = ptwk_frames_sigreturn_probed(frames);
}

/*
 * A launch: the command's executable and the libraries ld.so will map for
 * it (ld.so --list) get their probes from their files before it is let go
 * (ptwk_scan_frames at main's start would come after main has run on a while);
 * libc and ld.so from ptwatch's own (the same files) if that list could
 * not be had; the helpers' probes too. Libraries loaded later (dlopen)
 * are scanned when the reader sees ld.so's _dl_debug_state: their first
 * calls may be missed.
 */
void ptwk_launch_frames(struct ptw_kernel *k, const char *name)
{
	char path[PATH_MAX], why[512] = "";
	if (!k->frames || !ptw_command_path(name, path, sizeof(path)))
		return;
	struct ptwk_frames_progs pr = trace_progs(k);
	unsigned before = ptwk_frames_probes(k->frames);
	/* the executable, and the libraries ld.so will map for it */
	char **libs;
	size_t nlibs = ptwk_frames_launch_libraries(path, &libs);
	const char **files = xcalloc(nlibs + 1, sizeof(*files));
	files[0] = path;
	for (size_t i = 0; i < nlibs; i++)
		files[i + 1] = libs[i];
	int r = ptwk_frames_scan_files(k->frames, files, nlibs + 1, k->pid, k->o.use_debug_files,
				       &pr, why, sizeof(why));
	if (r < 0) {
		ptwk_note(k, "--trace: %s; its functions get their probes when main starts", why);
		/* what it will run is not known (a script, say): nothing
		 * says it cannot throw or switch stacks */
		ptwk_frames_exits_needed(k->frames, "the command's files could not be read before "
						    "it ran");
	}
	for (size_t i = 0; i < nlibs; i++)
		free(libs[i]);
	free(libs);
	free(files);
	/* libc and ld.so: the files the command will map too, mapped now */
	if (ptwk_frames_scan_core(k->frames, k->syms, ptwk_live_pid(k), &pr, why, sizeof(why)) < 0)
		ptwk_note(k, "--trace: %s", why);
	k->stats.probes += ptwk_frames_probes(k->frames) - before;
	k->conv.sigreturn_probed = ptwk_frames_sigreturn_probed(k->frames);
}

/* A traced function of k's jumped into code not traced that returns to
 * addr: watch that return (kframes.h). */
int ptwk_watch_return(struct ptw_kernel *k, uint64_t addr)
{
	struct ptwk_frames *frames = ptwk_frames_of(k);
	struct ptw_kernel *root = k->root ? k->root : k;
	if (!frames || !k->syms || !root->skel || root->detached)
		return -ENOENT;
	struct ptwk_frames_progs pr = trace_progs(root);
	unsigned before = ptwk_frames_probes(frames);
	int r = ptwk_frames_watch_return(frames, k->syms, ptwk_live_pid(k), addr, &pr);
	root->stats.probes += ptwk_frames_probes(frames) - before;
	return r;
}

/* Thread tid ended: the returns watched for it are forgotten, its tid
 * may come again. */
void ptwk_unwatch_returns(struct ptw_kernel *k, pid_t tid)
{
	struct ptw_kernel *root = k->root ? k->root : k;
	if (!root->skel)
		return;
	int fd = bpf_map__fd(root->skel->maps.underway_sites);
	struct ptwk_uw_key key, next;
	/* (a walk: this thread's keys are few, the map small) */
	void *prev = NULL;
	while (bpf_map_get_next_key(fd, prev, &next) == 0) {
		key = next;
		prev = &key;
		if (next.tid == (__u32)tid && bpf_map_delete_elem(fd, &next) == 0)
			prev = NULL; /* (deleted: start again) */
	}
}
