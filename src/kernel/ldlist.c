/* SPDX-License-Identifier: MIT */
/*
 * ld.so's list of modules, walked in the target by a uprobe on
 * _dl_debug_state (bpf/ptw_modules.bpf.h), gathered by modules.c: a
 * process's modules without /proc (a launch's exec, dlopen, dlclose).
 */
#define _GNU_SOURCE
#include "kernel_int.h"

/* ---- modules: ld.so's list, walked in the target ----
 *
 * Naming a launched (or exec'd, or dlopen-extended) image's code needs its
 * modules while it runs. /proc/PID/maps (and process_vm_readv, cmdline)
 * take the target's memory-map lock: a thread stack mapped meanwhile
 * waits, and a SCHED_FIFO program loses its order. So a uprobe on ld.so's
 * _dl_debug_state walks r_debug's link_map in the target's own context
 * (bpf/ptw_modules.bpf.h) at every consistent state (after the program's
 * libraries are loaded, before constructors and main; each dlopen and
 * dlclose), and the list is applied in ring order: the records before it
 * are named with the modules before it. An attach still reads /proc once.
 */

/* ld.so in the process now (an attach's, or a launch's before its exec:
 * ptwatch's own, the one a dynamic command maps): where to probe. */
void ptwk_modules_find(struct ptw_kernel *k)
{
	uint64_t state, rdebug, off;
	struct ptw_mapping *maps = NULL;
	int nmaps;
	char module[4096];
	if (ptw_symbols_lookup(k->syms, "ld-linux", "_dl_debug_state", &state, NULL) < 0 ||
	    ptw_symbols_lookup(k->syms, "ld-linux", "_r_debug", &rdebug, NULL) < 0) {
		ptw_dbg(PTW_DBG_TRACER,
			"no _dl_debug_state or _r_debug in ld.so: modules from /proc");
		return;
	}
	if ((nmaps = ptw_maps_read(ptwk_live_pid(k), &maps)) < 0)
		return;
	if (ptwk_file_of(ptwk_live_pid(k), maps, nmaps, state, k->mods_ld, sizeof(k->mods_ld),
			 module, sizeof(module), &off) == 0) {
		k->mods_off = off;
		k->rdebug_from_probe = (int64_t)(rdebug - state);
		k->mods_on = true;
	}
	free(maps);
}

int ptwk_modules_attach(struct ptw_kernel *k)
{
	uint64_t offsets[1] = { k->mods_off };
	struct ptwk_uprobe_set s = {
		.prog = k->skel->progs.ptw_modules,
		.path = k->mods_ld,
		.offsets = offsets,
		.n = 1,
		.pid = ptwk_probe_pid(k) < 0 ? 0 : ptwk_probe_pid(k),
		.book = ptwk_probe_pid(k) < 0 ? NULL : k->book,
		.rank = PTWK_RANK_THREADS,
	};
	if (k->multi) {
		k->mods_fd = ptwk_link_multi(&s);
		return k->mods_fd < 0 ? k->mods_fd : 0;
	}
	if (!(k->mods_link = ptwk_link_one(&s, 0)))
		return -errno;
	return 0;
}

/* ld.so's probe goes last, at the free, not in the detach: closing a
 * link waits for the kernel (25-90 ms each, more on a busy machine), and
 * it is inert once the target is no longer watched (its program looks
 * the tgid up first); a trap per dlopen and dlclose until then. */
void ptwk_modules_close(struct ptw_kernel *k)
{
	if (k->root)
		return;
	if (k->mods_fd >= 0)
		close(k->mods_fd);
	k->mods_fd = -1;
	bpf_link__destroy(k->mods_link);
	k->mods_link = NULL;
}

/* The new image's libc is the one probed? (ptwk_check_libc from the list.) */
static void modules_check_libc(struct ptw_kernel *k, const struct ptw_module_spec *specs, size_t n)
{
	const struct ptwk_probes *probes = k->root ? &k->root->probes : &k->probes;
	struct stat a, b;
	const char *libc = NULL;
	for (size_t i = 0; i < n && !libc; i++)
		if (strstr(specs[i].path, "/libc.so") || strstr(specs[i].path, "/libc-"))
			libc = specs[i].path;
	if (k->libc_checks <= 0)
		return;
	k->libc_checks = 0;
	if (libc && stat(libc, &a) == 0 && stat(probes->path, &b) == 0 &&
	    (a.st_dev != b.st_dev || a.st_ino != b.st_ino)) {
		ptwk_watch_probed(k, k->pid, false);
		ptwk_note_as(k, PTW_W_KERNEL_NOT_SEEN,
			     "%s maps %s, not the %s the probes are on: " PTWK_SEEN_BY_TRACEPOINTS,
			     k->exe, libc, probes->module);
	} else if (!libc) {
		ptwk_watch_probed(k, k->pid, false);
		ptwk_note_as(k, PTW_W_KERNEL_NOT_SEEN,
			     "%s maps no libc.so (static, or not glibc): " PTWK_SEEN_BY_TRACEPOINTS,
			     k->exe);
	}
}

/* A whole list: the process's symbols from it, in place when they are
 * this image's already (dlopen, dlclose; an attach's from /proc). */
static void modules_apply(struct ptw_kernel *k)
{
	const struct ptwk_modlist *l = &k->modlist;
	struct ptw_module_spec *specs = xcalloc(l->n + 1, sizeof(*specs));
	char **paths = xcalloc(l->n + 1, sizeof(*paths));
	size_t n = 0;
	for (size_t i = 0; i < l->n; i++) {
		const struct ptwk_module *m = &l->v[i];
		const char *path = m->path;
		if (m->is_exe && !path[0])
			path = k->exe; /* ld.so names the program "" */
		if (!path[0])
			continue;
		if (path[0] != '/') {
			/* dlopen("dir/lib.so"): relative to its working directory
			 * (a link that does not take the memory-map lock) */
			struct ptw_buf b = { 0 };
			ptw_buf_printf(&b, "/proc/%d/cwd/%s", k->pid, path);
			char *real = realpath(b.p, NULL);
			if (real) {
				free(b.p);
				b.p = real;
			}
			path = paths[i] = b.p;
		}
		specs[n++] = (struct ptw_module_spec){
			.path = path, .bias = m->bias, .dynamic = m->dynamic, .is_exe = m->is_exe
		};
	}
	int r;
	if (k->syms && !k->syms_borrowed) {
		r = ptw_symbols_set_listed(k->syms, specs, n);
	} else {
		char *cache_dir = k->o.use_cache ? ptw_cache_default_dir() : NULL;
		struct ptw_symbols *s = NULL;
		r = k->root ? ptw_symbols_new_listed(k->pid, specs, n, k->o.use_debug_files,
						     cache_dir, ptwk_pid_memread,
						     (void *)(intptr_t)k->pid, &s)
			    : ptw_symbols_new_listed(k->pid, specs, n, k->o.use_debug_files,
						     cache_dir, ptw_mem_reader, k->proc, &s);
		free(cache_dir);
		if (r == 0) {
			k->syms = s;
			k->syms_borrowed = false;
			r = (int)ptw_symbols_module_count(s);
		}
	}
	ptw_dbg(PTW_DBG_TRACER, "process %d: %zu modules listed by ld.so, %d taken", k->pid, n, r);
	if (r >= 0) {
		k->mods_listed = true;
		modules_check_libc(k, specs, n);
		ptwk_scan_frames(k);
	}
	for (size_t i = 0; i < l->n; i++)
		free(paths[i]);
	free(paths);
	free(specs);
}

void ptwk_modules_record(struct ptw_kernel *k, const struct drained *d)
{
	int r = d->module ? ptwk_modlist_feed(&k->modlist, d->module, sizeof(*d->module))
			  : ptwk_modlist_feed(&k->modlist, &d->r, sizeof(d->r));
	if (r == PTWK_MODLIST_DONE)
		modules_apply(k);
	else if (r == PTWK_MODLIST_BAD)
		ptw_dbg(PTW_DBG_TRACER, "process %d: a walk of ld.so's list thrown away", k->pid);
}

/* An exec's command line as the kernel wrote it (bpf/ptw_modules.bpf.h);
 * /proc/PID/cmdline only if it was cut or not read (that read takes the
 * memory-map lock). */
void ptwk_exec_args_record(struct ptw_kernel *k, const struct drained *d)
{
	char **argv = d->args ? ptwk_args_parse(d->args) : NULL;
	if (!argv)
		argv = ptwk_read_cmdline(k->pid);
	if (argv) {
		ptw_argv_free(k->argv);
		k->argv = argv;
	}
}
