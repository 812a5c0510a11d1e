/* SPDX-License-Identifier: MIT */
/* Demangling through libiberty; see ptw_demangle.h. */
#include "ptw_demangle.h"

#include <stdlib.h>
#include <string.h>

#include <libiberty/demangle.h>

char *ptw_demangle(const char *name)
{
	/* Only what looks mangled: _Z (C++, Rust legacy), _R (Rust v0). A C
	 * name must not go through the other styles' guesses. */
	if (!name || name[0] != '_' || (name[1] != 'Z' && name[1] != 'R'))
		return NULL;
	/* What cplus_demangle(name, DMGL_AUTO) does for these two prefixes:
	 * Rust first (legacy Rust names are valid C++ ones: it drops their
	 * ::h<hash>), then the C++ ABI. Called directly: cplus_demangle's
	 * object also pulls in the D demangler, whose xmalloc/xrealloc come
	 * from libiberty's xmalloc.o and clash with ptw_util's xmalloc. */
	const int opts = DMGL_PARAMS | DMGL_ANSI;
	char *d = rust_demangle(name, opts);
	if (!d)
		d = cplus_demangle_v3(name, opts);
	if (d && !strcmp(d, name)) {
		free(d);
		return NULL;
	}
	return d;
}
