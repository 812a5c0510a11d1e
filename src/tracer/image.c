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
#include "tracer_internal.h"

static int memread(void *ctx, uint64_t addr, void *buf, size_t len)
{
	return ptw_mem_read(ctx, addr, buf, len);
}

static uint64_t auxv_value(pid_t pid, uint64_t type)
{
	char path[64];
	snprintf(path, sizeof(path), "/proc/%d/auxv", pid);
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return 0;
	uint64_t pair[2], v = 0;
	while (read(fd, pair, sizeof(pair)) == (ssize_t)sizeof(pair) && pair[0] != AT_NULL)
		if (pair[0] == type) {
			v = pair[1];
			break;
		}
	close(fd);
	return v;
}

/*
 * main() of a program without a symbol for it (stripped), from the code at
 * its entry point: glibc's _start (sysdeps/x86_64/start.S) begins with
 * `xor %ebp,%ebp` (after an endbr64 on CET builds) and hands main to
 * __libc_start_main in rdi just before calling it, as one of
 *     48 8d 3d disp32    lea main(%rip),%rdi          (PIE, relaxed by ld)
 *     48 8b 3d disp32    mov main@GOTPCREL(%rip),%rdi (PIE, not relaxed)
 *     48 c7 c7 imm32     mov $main,%rdi               (not PIE)
 * followed by a call. This works the same at a launch and at an attach,
 * where __libc_start_main's argument is long gone. 0 when the entry is not
 * that code (another libc, Go without cgo) or the address is not in the
 * executable (a GOT slot that ld.so has not relocated yet).
 */
static uint64_t main_from_entry(struct ptw_tracer *t, uint64_t entry)
{
	uint8_t c[64];
	size_t i = 0;
	if (!entry || ptw_mem_read(t->proc, entry, c, sizeof(c)) < 0)
		return 0;
	if (c[0] == 0xf3 && c[1] == 0x0f && c[2] == 0x1e && c[3] == 0xfa)
		i = 4;
	if (c[i] != 0x31 || c[i + 1] != 0xed)
		return 0;
	for (i += 2; i + 7 + 2 <= sizeof(c); i++) {
		if (c[i] != 0x48)
			continue;
		int32_t v;
		memcpy(&v, c + i + 3, sizeof(v));
		uint64_t next = entry + i + 7, main_addr;
		if (c[i + 1] == 0x8d && c[i + 2] == 0x3d)
			main_addr = next + (uint64_t)(int64_t)v;
		else if (c[i + 1] == 0x8b && c[i + 2] == 0x3d)
			main_addr = tracer_read_u64(t, next + (uint64_t)(int64_t)v, &main_addr) == 0
					    ? main_addr
					    : 0;
		else if (c[i + 1] == 0xc7 && c[i + 2] == 0xc7)
			main_addr = (uint64_t)(int64_t)v;
		else
			continue;
		const uint8_t *n = c + i + 7;
		bool call = (n[0] == 0xff && n[1] == 0x15) || n[0] == 0xe8 ||
			    (n[0] == 0x67 && n[1] == 0xe8);
		const char *in = main_addr ? ptw_symbols_module_of(t->img.syms, main_addr) : NULL;
		const char *exe = ptw_symbols_exe(t->img.syms);
		if (!call || !in || !exe || strcmp(in, exe))
			return 0;
		return main_addr;
	}
	return 0;
}

/* "libc.so" for a dynamic program; the executable itself when static. */
const char *image_libc_module(struct ptw_tracer *t)
{
	return t->img.dynamic ? "libc.so" : PTW_MOD_EXE;
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
	int r = ptw_symbols_new(mem_pid, t->o.use_debug_files, cache_dir, memread, t->proc,
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
	uint64_t base = auxv_value(mem_pid, AT_BASE), addr;
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
		img->main_addr = main_from_entry(t, auxv_value(mem_pid, AT_ENTRY));
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
	if (r < 0 && err != TD_NOLIBTHREAD && ptw_symbols_forget_cache(img->syms) > 0) {
		/* The symbol cache may be what is wrong (a valid entry with wrong
		 * answers: libthread_db finds the symbols it needs, and they do
		 * not fit): once more without it. (No nptl at all is no reason.) */
		ptw_dbg(PTW_DBG_TRACER, "libthread_db failed (%s) with cached symbols: again without",
			ptw_tdb_strerror(err));
		r = ptw_tdb_new(t->proc, img->syms, &img->tdb, &err);
	}
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
	static const char *const hints[] = { "nptl/pthread_create.c", "pthread_create.c", NULL };
	if (t->o.use_debug_files) {
		img->have_result =
			ptw_symbols_member_offset(img->syms, image_libc_module(t), hints, "pthread",
						  "result", &img->result_off) == 0;
		img->have_joinid =
			ptw_symbols_member_offset(img->syms, image_libc_module(t), hints, "pthread",
						  "joinid", &img->joinid_off) == 0;
	}
	img->attr_layout_known = img->glibc && !strncmp(img->glibc, "2.", 2);
	uint64_t size = 0;
	if (ptw_symbols_lookup(img->syms, image_libc_module(t), "pthread_create", &img->create_lo,
			       &size) == 0)
		img->create_hi = img->create_lo + (size ? size : 1);
	return 0;
}

