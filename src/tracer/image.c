/* SPDX-License-Identifier: MIT */
/*
 * A process's program image: its modules and symbols (libdwfl, the cache),
 * where its dynamic linker reports library changes, where main() is, and
 * libthread_db's agent with glibc's version and struct pthread's layout.
 * Reset at exec (image_release, then image_init for the new program). What
 * every feature builds on; it calls none of them but through core.c.
 */
#define _GNU_SOURCE
#include <elf.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "ptw_cache.h"
#include "ptw_glibc.h"
#include "tracer_internal.h"

/* "libc.so" for a dynamic program; the executable itself when static. */
const char *image_libc_module(struct ptw_tracer *t)
{
	return t->img.dynamic ? "libc.so" : PTW_MOD_EXE;
}

const struct ptw_pthread_layout *image_tls_layout(struct ptw_tracer *t)
{
	struct image *img = &t->img;
	if (!img->tls_layout_read) {
		img->tls_layout_read = true;
		ptw_glibc_pthread_layout(img->syms, image_libc_module(t), img->tdb, NULL,
					 t->o.use_debug_files, &img->tls_layout);
	}
	return &img->tls_layout;
}

/* One warning when debuginfod failed (after which it is not asked again). */
void image_debuginfod_warning(struct ptw_tracer *t)
{
	const char *e = ptw_symbols_debuginfod_error();
	if (e)
		tracer_warn(t, PTW_W_DEBUGINFOD_FAILED, "%s", e);
}

int image_load(struct ptw_tracer *t)
{
	struct image *img = &t->img;
	pid_t pid = t->proc->pid;
	memset(img, 0, sizeof(*img));
	img->task_dirfd = -1;

	char path[64];
	snprintf(path, sizeof(path), "/proc/%d/task", pid);
	img->task_dirfd = open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);

	/* /proc/PID/{maps,exe,auxv} of a live thread: the leader may be a zombie. */
	pid_t mem_pid = t->proc->mem_pid;
	char *cache_dir = t->o.use_cache ? ptw_cache_default_dir() : NULL;
	int r = ptw_symbols_new(mem_pid, t->o.use_debug_files, cache_dir, ptw_mem_reader, t->proc,
				&img->syms);
	free(cache_dir);
	if (r < 0) {
		tracer_warn(t, PTW_W_NO_SYMBOLS, "cannot read the modules of %d: %s", pid,
			    strerror(-r));
		return r;
	}
	image_debuginfod_warning(t);
	if (ptw_symbols_exe(img->syms))
		img->exe = xstrdup(ptw_symbols_exe(img->syms));
	uint64_t base = ptw_proc_auxv(mem_pid, AT_BASE), addr;
	img->dynamic = base != 0;
	const char *interp = base ? ptw_symbols_module_of(img->syms, base) : NULL;
	if (interp) {
		const char *b = strrchr(interp, '/');
		char *prefix = xstrdup(b ? b + 1 : interp);
		if (ptw_symbols_lookup(img->syms, prefix, "_r_debug", &img->r_debug, NULL) == 0 &&
		    ptw_symbols_lookup(img->syms, prefix, "_dl_debug_state", &addr, NULL) == 0)
			img->dl_debug_state = addr;
		else
			tracer_warn(
				t, PTW_W_NO_DL_DEBUG_STATE,
				"cannot follow library loading in %s: threads are traced once main() runs",
				interp);
		free(prefix);
	}
	/* Not in a separate debug file: searching for one (debuginfod even)
	 * would hold up the start, and __libc_start_main tells main anyway. */
	if (ptw_symbols_lookup_loaded(img->syms, PTW_MOD_EXE, "main", &addr) == 0)
		img->main_addr = addr;
	else
		img->main_addr = ptw_symbols_main_from_entry(img->syms, ptw_mem_reader, t->proc,
							     ptw_proc_auxv(mem_pid, AT_ENTRY));
	ptw_dbg(PTW_DBG_TRACER, "main at %#llx", (unsigned long long)img->main_addr);
	return 0;
}

int image_init(struct ptw_tracer *t, struct ptw_lwp *l)
{
	image_load(t);
	t->img.fresh = true;
	/* The image begins now, not once --trace has scanned it. */
	struct ptw_event ev = ptw_event_init(PTW_EV_IMAGE, ptw_now_ns(), t->proc->pid);
	ev.name = t->img.exe;
	tracer_emit(t, &ev);
	tracer_image_ready(t, l);
	return 0;
}

void image_release(struct ptw_tracer *t)
{
	struct image *img = &t->img;
	if (img->syms) {
		/* Spans keep pointing at its locations: retire, do not free. */
		ptw_symbols_retire(img->syms);
		t->old_syms = xreallocarray(t->old_syms, t->nold_syms + 1, sizeof(*t->old_syms));
		t->old_syms[t->nold_syms++] = img->syms;
	}
	ptw_tdb_free(img->tdb);
	if (t->bps)
		ptw_bp_forget_all(t->bps);
	if (img->task_dirfd >= 0)
		close(img->task_dirfd);
	free(img->exe);
	free(img->glibc);
	ptw_map_free(&img->joiners);
	ptw_map_free(&img->call_lengths);
	if (img->join_retbps)
		tracer_retbps_free(img->join_retbps);
	free(img->join_retbps);
	memset(img, 0, sizeof(*img));
	img->task_dirfd = -1;
}

int image_tdb_open(struct ptw_tracer *t)
{
	struct image *img = &t->img;
	if (img->tdb || img->tdb_failed || !img->syms)
		return img->tdb ? 0 : -ENOENT;
	td_err_e err;
	int r = ptw_tdb_new(t->proc, img->syms, &img->tdb, &err);
	if (r < 0) {
		if (err == TD_NOLIBTHREAD || err == TD_VERSION) {
			img->tdb_failed = true;
			tracer_warn(
				t, PTW_W_NO_THREAD_DB,
				"libthread_db cannot be used for this process (%s): thread spans come from "
				"clone events and exits only (no pthread_t, start routine or join)",
				ptw_tdb_strerror(err));
		}
		return r;
	}
	t->img.glibc = ptw_nptl_version(t->proc, t->img.syms);

	/* struct pthread from libc's DWARF: the return value and the detach
	 * state are read at TD_CREATE / TD_DEATH instead of costing stops. */
	if (t->o.use_debug_files) {
		img->have_result = ptw_glibc_pthread_member(img->syms, image_libc_module(t), "result",
							    &img->result_off) == 0;
		img->have_joinid = ptw_glibc_pthread_member(img->syms, image_libc_module(t), "joinid",
							    &img->joinid_off) == 0;
	}
	img->attr_layout_known = img->glibc && !strncmp(img->glibc, "2.", 2);
	uint64_t size = 0;
	if (ptw_symbols_lookup(img->syms, image_libc_module(t), "pthread_create", &img->create_lo,
			       &size) == 0)
		img->create_hi = img->create_lo + (size ? size : 1);
	return 0;
}

