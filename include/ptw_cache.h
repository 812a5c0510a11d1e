/* SPDX-License-Identifier: MIT */
/*
 * On-disk cache of facts learned from one module's symbols and debug
 * information, keyed by the module's build-id: a file DIR/HEX (HEX the
 * build-id, plus a variant suffix) holding KEY -> value records. What the
 * keys mean is the caller's business (ptw_symbols: "sym:NAME", ...).
 *
 * Pure file I/O: no libdw, no ptrace. A file is trusted only if its
 * version, build-id, variant, length and checksum all match; anything else
 * (missing, truncated, corrupt, foreign) reads as an empty cache that the
 * next save rewrites. Saves are atomic (temp file + rename) and merge what
 * another process saved meanwhile, so that several ptwatch processes can
 * share a directory.
 */
#ifndef PTW_CACHE_H
#define PTW_CACHE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* 2: source lines from the CU that holds the address (version 1 files can
 * hold wrong ones: every Go frame of a cgo program at gcc_mmap.c:37). */
#define PTW_CACHE_VERSION 2

struct ptw_cache;

/* One record. text is optional (NULL: none); it and the key may not hold
 * tabs or newlines (such puts are ignored). */
struct ptw_cache_value {
	bool found;
	uint64_t a, b;
	const char *text;
	bool loaded; /* (ptw_cache_get) read from the file, not put in this session */
};

/* What ptw_cache_open found on disk. */
enum ptw_cache_state {
	PTW_CACHE_LOADED,  /* a valid file */
	PTW_CACHE_MISSING, /* no file (or no directory) */
	PTW_CACHE_INVALID, /* a file that failed validation: ignored, rewritten on save */
};

/* $XDG_CACHE_HOME/ptwatch, else $HOME/.cache/ptwatch (malloc'd), or NULL
 * when neither variable is set to an absolute path. */
char *ptw_cache_default_dir(void);

/*
 * The cache of the module with this build-id (len bytes, 1..64) and file
 * size in dir. The size tells apart files that share a build-id (a binary
 * and its stripped copy: not the same symbols); a file saved for another
 * size is foreign. variant (may be NULL or "") separates caches of the same
 * module that must not mix (e.g. with and without separate debug files).
 * Never fails for a bad file: *ret is then empty. Returns 0 or -EINVAL
 * (bad argument).
 */
int ptw_cache_open(const char *dir, const uint8_t *build_id, size_t len, uint64_t size,
		   const char *variant, struct ptw_cache **ret, enum ptw_cache_state *ret_state);
void ptw_cache_free(struct ptw_cache *c);

/* Returns 0 and fills *ret (text owned by the cache, valid until it is
 * freed or cleared), or -ENOENT. */
int ptw_cache_get(const struct ptw_cache *c, const char *key, struct ptw_cache_value *ret);
/* Adds or replaces a record (copies key and text). */
void ptw_cache_put(struct ptw_cache *c, const char *key, const struct ptw_cache_value *v);
/* Forgets every record (they were stale); the next save replaces the file
 * without merging its records back in. */
void ptw_cache_clear(struct ptw_cache *c);
size_t ptw_cache_count(const struct ptw_cache *c);

/*
 * Writes the cache if anything changed since it was opened or saved:
 * records another process saved meanwhile are merged in (ours win), then a
 * temp file in dir is renamed over DIR/HEX. Creates dir (0700) if needed.
 * Returns 0 (also when nothing changed) or -errno; the cache stays usable.
 */
int ptw_cache_save(struct ptw_cache *c);

/* The file's path (for messages). */
const char *ptw_cache_path(const struct ptw_cache *c);

#endif
