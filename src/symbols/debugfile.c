/* SPDX-License-Identifier: MIT */
/*
 * Where a module's debug file comes from: the standard places here, the
 * client cache of debuginfod, debuginfod's servers. The find_debuginfo of
 * libdwfl's callbacks; see debugfile.h.
 */
#define _GNU_SOURCE
#include "debugfile.h"

#include <elfutils/libdw.h>
#include <gelf.h>
#include <errno.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "ptw_symbols.h"
#include "ptw_util.h"

static bool path_exists(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static bool path_exists(const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	char *path;
	int n = vasprintf(&path, fmt, ap);
	va_end(ap);
	if (n < 0)
		return false;
	bool r = access(path, F_OK) == 0;
	free(path);
	return r;
}

/* ---- debuginfod ---- */

/*
 * With DEBUGINFOD_URLS set, dwfl_standard_find_debuginfo asks debuginfod for
 * the debug file of a module that has none on this machine (libdwfl dlopens
 * libdebuginfod; the client caches what it fetched in
 * $DEBUGINFOD_CACHE_PATH, else ~/.cache/debuginfod_client). What ptwatch
 * adds, for the whole process (one image after another: exec):
 *
 * - A bound. libdebuginfod waits 90 s for a silent server by default
 *   (DEBUGINFOD_TIMEOUT), three times (DEBUGINFOD_RETRY_LIMIT=2: measured,
 *   15.6 s with a timeout of 5), and the query can come while a target
 *   thread is stopped. Unless the user chose, ptwatch's own queries use
 *   PTW_DEBUGINFOD_TIMEOUT and no retry (set around each query only: the
 *   target's environment stays as it was). DEBUGINFOD_MAXTIME is left
 *   alone: a transfer that makes progress ends once and is then cached for
 *   good, while a cap would make a large file never arrive on a slow link.
 * - Once. A build-id whose fetch failed is not asked for again, and after a
 *   failure other than "not found" (no answer, connection refused, time
 *   out) the servers are not asked again in this process at all: one
 *   timeout per session at most, and one warning (ptw_symbols_debuginfod_error).
 *   Files already in the client cache are still used then.
 * - Early. A module that has no debug file here is fetched for when it is
 *   reported (image load, before the threads of an attached process are
 *   stopped; the exec or library-load stop of a launched one), not at the
 *   first lookup, which comes when a thread stops at its creation.
 *
 * ptwatch is single-threaded: changing its environment around a call is safe.
 */
#define PTW_DEBUGINFOD_TIMEOUT "5"

static struct {
	struct ptw_map asked;  /* ptw_str_hash(build-id hex) -> 1 fetched, 2 failed */
	struct ptw_map looked; /* the same -> 1: prefetch_debuginfo has been there */
	bool down;	       /* a failure other than "not found": ask no more */
	char *error;	       /* the first such failure, for the report */
	bool no_prefetch;      /* ptw_symbols_prefetch(false) */
} dfd;

void ptw_symbols_prefetch(bool on)
{
	dfd.no_prefetch = !on;
}

bool ptw_debugfile_servers(void)
{
	const char *u = getenv("DEBUGINFOD_URLS");
	return u && *u;
}

static void build_id_hex(Dwfl_Module *mod, char hex[129])
{
	const unsigned char *id;
	GElf_Addr vaddr;
	int len = dwfl_module_build_id(mod, &id, &vaddr);
	hex[0] = '\0';
	for (int i = 0; i < len && i < 64; i++)
		snprintf(hex + 2 * i, 3, "%02x", id[i]);
}

/* libdebuginfod's client cache directory (as debuginfod_find_* picks it),
 * malloc'd, or NULL. */
static char *client_cache_dir(void)
{
	const char *dc = getenv("DEBUGINFOD_CACHE_PATH"), *xdg = getenv("XDG_CACHE_HOME"),
		   *home = getenv("HOME");
	if (dc && *dc)
		return xstrdup(dc);
	if (home && *home) {
		char *old = xasprintf("%s/.debuginfod_client_cache", home);
		if (access(old, F_OK) == 0)
			return old;
		free(old);
	}
	if (xdg && *xdg)
		return xasprintf("%s/debuginfod_client", xdg);
	if (home && *home)
		return xasprintf("%s/.cache/debuginfod_client", home);
	return NULL;
}

/* The debug file of build-id hex in the client cache, if it holds one (an
 * empty file there is libdebuginfod's record of a miss): malloc'd path. */
char *ptw_debugfile_fetched(const char *hex)
{
	char *dir = client_cache_dir();
	if (!dir || !*hex) {
		free(dir);
		return NULL;
	}
	char *path = xasprintf("%s/%s/debuginfo", dir, hex);
	free(dir);
	struct stat st;
	if (stat(path, &st) == 0 && S_ISREG(st.st_mode) && st.st_size > 0)
		return path;
	free(path);
	return NULL;
}

bool ptw_debugfile_installed(const char *hex)
{
	return strlen(hex) > 2 &&
	       path_exists("/usr/lib/debug/.build-id/%.2s/%s.debug", hex, hex + 2);
}

/* An environment variable set for the length of one call. */
struct env_save {
	const char *name;
	char *old; /* NULL: was unset */
	bool changed;
};

static void env_set(struct env_save *e, const char *name, const char *value)
{
	const char *old = getenv(name);
	e->name = name;
	e->old = old ? xstrdup(old) : NULL;
	e->changed = setenv(name, value, 1) == 0;
}

static void env_restore(struct env_save *e)
{
	if (e->changed) {
		if (e->old)
			setenv(e->name, e->old, 1);
		else
			unsetenv(e->name);
	}
	free(e->old);
	e->old = NULL;
	e->changed = false;
}

const char *ptw_symbols_debuginfod_error(void)
{
	return dfd.error;
}

int ptw_debugfile_none(Dwfl_Module *mod, void **userdata, const char *modname, Dwarf_Addr base,
		       const char *file_name, const char *debuglink_file, GElf_Word debuglink_crc,
		       char **debuginfo_file_name)
{
	(void)mod, (void)userdata, (void)modname, (void)base, (void)file_name;
	(void)debuglink_file, (void)debuglink_crc, (void)debuginfo_file_name;
	return -1;
}

/* ---- without servers ---- */

/*
 * Without servers (DEBUGINFOD_URLS unset or empty) the standard search
 * still ends, when it found nothing here, by dlopen'ing libdebuginfod
 * (elfutils 0.188 asks for the library, not the variable), which maps
 * libcurl, GnuTLS, Kerberos and libcrypto into ptwatch: 8 MiB more resident
 * and 14 ms, measured, to ask no server. A module without a debug file here
 * is common (the vdso, a library without its -dbgsym package), so the
 * search is only made when a file it could take is there; whether that file
 * is the module's (build-id, CRC) it alone decides.
 *
 * The places are a superset of libdwfl's with its default path
 * (":.debug:/usr/lib/debug"; ptwatch sets no other): by build-id under
 * /usr/lib/debug/.build-id; by name (the debuglink, FILE.debug, FILE) beside
 * the file, in its .debug and .dwz, in /usr/lib/debug and its .dwz, and
 * under /usr/lib/debug along each tail of the file's directory; for the
 * file's name as given and resolved (a symlink). A debuglink with a '/' (an
 * alternate file's) is also tried as a path.
 */
static bool is_candidate(const char *path, const struct stat *self)
{
	struct stat st;
	return stat(path, &st) == 0 && S_ISREG(st.st_mode) &&
	       !(self && st.st_dev == self->st_dev && st.st_ino == self->st_ino);
}

static bool candidate_named(const char *dir, const char *name, const struct stat *self)
{
	const char *slash = strrchr(name, '/');
	const char *base = slash ? slash + 1 : name;
	char *paths[6] = {
		name[0] == '/' ? xstrdup(name) : xasprintf("%s/%s", dir, name),
		xasprintf("%s/.debug/%s", dir, name),
		xasprintf("%s/.dwz/%s", dir, base),
		xasprintf("/usr/lib/debug/%s", base),
		xasprintf("/usr/lib/debug/.dwz/%s", base),
		NULL,
	};
	bool found = false;
	for (size_t i = 0; paths[i]; i++) {
		found = found || is_candidate(paths[i], self);
		free(paths[i]);
	}
	/* /usr/lib/debug/usr/lib/x86_64-linux-gnu/NAME, .../lib/..., ... */
	for (const char *tail = dir; !found && tail && *tail; tail = strchr(tail + 1, '/')) {
		char *p = xasprintf("/usr/lib/debug/%s/%s", tail + (*tail == '/'), name);
		found = is_candidate(p, self);
		free(p);
	}
	return found;
}

static bool candidate_beside(const char *file, const char *debuglink)
{
	struct stat self_st;
	const struct stat *self = stat(file, &self_st) == 0 ? &self_st : NULL;
	const char *slash = strrchr(file, '/');
	char *dir = slash ? strndup(file, (size_t)(slash - file)) : strdup(".");
	char *dotdebug = xasprintf("%s.debug", slash ? slash + 1 : file);
	const char *names[] = { debuglink, dotdebug, slash ? slash + 1 : file };
	bool found = false;
	for (size_t i = 0; dir && !found && i < sizeof(names) / sizeof(*names); i++)
		found = names[i] && *names[i] && candidate_named(dir, names[i], self);
	free(dotdebug);
	free(dir);
	return found;
}

bool ptw_debugfile_here(const char *hex, const char *file_name, const char *debuglink)
{
	if (ptw_debugfile_installed(hex))
		return true;
	if (!file_name || file_name[0] == '[')
		return false; /* [vdso], [vsyscall]: a build-id or nothing */
	if (candidate_beside(file_name, debuglink))
		return true;
	char *canon = realpath(file_name, NULL);
	bool found = canon && strcmp(canon, file_name) && candidate_beside(canon, debuglink);
	free(canon);
	return found;
}

/*
 * The standard search (build-id path, debuglink, then debuginfod), within
 * the bounds above, timed: the debug log says which module's debug file was
 * opened, whether debuginfod gave it (fetched now or from its cache) and
 * what it cost.
 */
int ptw_debugfile_find(Dwfl_Module *mod, void **userdata, const char *modname, Dwarf_Addr base,
		       const char *file_name, const char *debuglink_file, GElf_Word debuglink_crc,
		       char **debuginfo_file_name)
{
	uint64_t t0 = ptw_now_ns();
	time_t wall0 = time(NULL);
	char hex[129];
	build_id_hex(mod, hex);
	uint64_t key = *hex ? ptw_str_hash(hex) : 0;
	bool urls = ptw_debugfile_servers();
	if (!urls && !ptw_debugfile_here(hex, file_name, debuglink_file)) {
		ptw_dbg(PTW_DBG_SYM, "debug file of %s: none (none here; no debuginfod servers)",
			modname ? modname : "?");
		return -1;
	}
	bool ask = urls && key && !dfd.down && !ptw_map_get(&dfd.asked, key);
	struct env_save no_urls = { 0 }, timeout = { 0 }, retries = { 0 };
	if (urls && !ask)
		env_set(&no_urls, "DEBUGINFOD_URLS", "");
	if (ask && !getenv("DEBUGINFOD_TIMEOUT"))
		env_set(&timeout, "DEBUGINFOD_TIMEOUT", PTW_DEBUGINFOD_TIMEOUT);
	if (ask && !getenv("DEBUGINFOD_RETRY_LIMIT"))
		env_set(&retries, "DEBUGINFOD_RETRY_LIMIT", "0");
	int fd = dwfl_standard_find_debuginfo(mod, userdata, modname, base, file_name,
					      debuglink_file, debuglink_crc, debuginfo_file_name);
	env_restore(&no_urls);
	env_restore(&timeout);
	env_restore(&retries);

	char *cached = NULL;
	if (fd < 0 && urls && !ask && (cached = ptw_debugfile_fetched(hex))) {
		/* Not asked (see above), but fetched by an earlier session. */
		fd = ptw_open_regular(cached);
		if (fd >= 0 && !*debuginfo_file_name) {
			*debuginfo_file_name = cached;
			cached = NULL;
		}
	}
	free(cached);

	/* Where the file came from: libdwfl does not say for debuginfod's. */
	if (fd >= 0 && !*debuginfo_file_name) {
		char link[64], buf[PATH_MAX];
		snprintf(link, sizeof(link), "/proc/self/fd/%d", fd);
		ssize_t n = readlink(link, buf, sizeof(buf) - 1);
		if (n > 0) {
			buf[n] = '\0';
			*debuginfo_file_name = xstrdup(buf);
		}
	}
	const char *note = "", *name = fd >= 0 ? *debuginfo_file_name : NULL;
	char *dir = urls && name ? client_cache_dir() : NULL;
	size_t dlen = dir ? strlen(dir) : 0;
	if (dir && !strncmp(name, dir, dlen) && name[dlen] == '/') {
		struct stat st;
		note = fstat(fd, &st) == 0 && st.st_ctime >= wall0 ? "debuginfod: fetched, "
								   : "debuginfod: from its cache, ";
	}
	free(dir);
	if (ask)
		ptw_map_put(&dfd.asked, key, (void *)(uintptr_t)(fd >= 0 ? 1 : 2));
	double ms = (double)(ptw_now_ns() - t0) / 1e6;
	if (ask && fd < -1 && fd != -ENOENT && !dfd.down) {
		/* No answer, or not a usable one: the next query would fare no
		 * better, and each can cost the timeout. */
		dfd.down = true;
		const char *u = getenv("DEBUGINFOD_URLS");
		const char *t = getenv("DEBUGINFOD_TIMEOUT");
		char *why = fd == -ETIME ? xasprintf("no answer within DEBUGINFOD_TIMEOUT=%s s",
						     t ? t : PTW_DEBUGINFOD_TIMEOUT)
					 : xstrdup(strerror(-fd));
		dfd.error = xasprintf("debuginfod (DEBUGINFOD_URLS=%s) failed for %s after %.1f s: "
				      "%s; it is not asked again in this session, and code without "
				      "a local debug file is shown as module+offset",
				      u ? u : "", modname ? modname : "?", ms / 1e3, why);
		free(why);
	}
	char *why = NULL;
	const char *skip = !key ? "no build-id" : dfd.down ? "it failed before" : "done before";
	if (ask && fd < 0)
		why = xasprintf("debuginfod: %s, ", fd < -1 ? strerror(-fd) : "not available");
	else if (urls && fd < 0)
		why = xasprintf("debuginfod not asked: %s, ", skip);
	ptw_dbg(PTW_DBG_SYM, "debug file of %s: %s (%s%.1f ms)", modname ? modname : "?",
		fd < 0 ? "none"
		: name ? name
		       : "found",
		why ? why : note, ms);
	free(why);
	return fd;
}

/* Does the file carry DWARF of its own (not stripped)? */
static bool has_own_dwarf(Elf *elf)
{
	size_t shstrndx;
	if (elf_getshdrstrndx(elf, &shstrndx) < 0)
		return false;
	for (Elf_Scn *scn = NULL; (scn = elf_nextscn(elf, scn));) {
		GElf_Shdr sh;
		const char *name;
		if (gelf_getshdr(scn, &sh) && sh.sh_type != SHT_NOBITS &&
		    (name = elf_strptr(elf, shstrndx, sh.sh_name)) &&
		    (!strcmp(name, ".debug_info") || !strcmp(name, ".zdebug_info")))
			return true;
	}
	return false;
}

/*
 * Fetches mod's debug file from debuginfod now, if it will need one: no
 * DWARF in the file, none under /usr/lib/debug/.build-id, none in the
 * client cache (then libdwfl finds it there at once, when asked). Once per
 * build-id and process (refreshes report the same modules again). libdwfl
 * keeps the answer with the module.
 */
void ptw_debugfile_prefetch(Dwfl_Module *mod, const char *path)
{
	Dwarf_Addr bias;
	char hex[129];
	/* Not [vdso]: a query at every start for what servers rarely have (asked
	 * at a lookup, if one needs it). */
	if (dfd.down || dfd.no_prefetch || (path && path[0] == '['))
		return;
	Elf *elf = dwfl_module_getelf(mod, &bias); /* reads the build-id */
	build_id_hex(mod, hex);
	if (!elf || !*hex || ptw_map_put(&dfd.looked, ptw_str_hash(hex), (void *)1) ||
	    ptw_map_get(&dfd.asked, ptw_str_hash(hex)) || has_own_dwarf(elf) ||
	    ptw_debugfile_installed(hex))
		return;
	char *cached = ptw_debugfile_fetched(hex);
	bool have = cached != NULL;
	free(cached);
	if (have)
		return;
	ptw_dbg(PTW_DBG_SYM, "fetching the debug file of %s (build-id %s) now, not at a lookup",
		path ? path : "?", hex);
	dwfl_module_getdwarf(mod, &bias);
}
