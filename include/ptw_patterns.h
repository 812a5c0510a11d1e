/* SPDX-License-Identifier: MIT */
/*
 * --trace patterns, [MODULE:]GLOB, and how a function's name is matched
 * against them: shared by both backends (src/tracer/trace.c, src/kernel),
 * so that a pattern means the same on either. Pure: fnmatch and the
 * demangler, nothing of any process.
 */
#ifndef PTW_PATTERNS_H
#define PTW_PATTERNS_H

#include <stdbool.h>

struct ptw_pattern {
	char *text;   /* as given */
	char *module; /* glob on the module's file name, NULL: any */
	char *name;   /* glob on the function's name */
};

/* "MODULE:PATTERN" splits at the first ':' that is not part of a "::".
 * Returns 0 or -EINVAL (empty, or nothing after the module); *p is to be
 * freed with ptw_pattern_free either way. */
int ptw_pattern_parse(const char *text, struct ptw_pattern *p);
void ptw_pattern_free(struct ptw_pattern *p);

/* Whether the pattern's module glob takes the module at path (its file
 * name, or the whole path). */
bool ptw_pattern_module_applies(const struct ptw_pattern *p, const char *path);

/* Whether the pattern's name glob has no wildcard (a function asked for by
 * name: a refusal is said, not only logged). */
bool ptw_pattern_literal(const struct ptw_pattern *p);

/* One function's name as the patterns see it: the linkage name, and for a
 * mangled one its demangled form with and without the parameter list
 * ("ns::f(int)", "ns::f"), demangled once, on the first need. */
struct ptw_pattern_name {
	const char *linkage;
	char *demangled, *bare;
	bool tried;
};

/* A name to match (linkage is borrowed); ptw_pattern_name_done frees what
 * matching made. */
void ptw_pattern_name_init(struct ptw_pattern_name *n, const char *linkage);
void ptw_pattern_name_done(struct ptw_pattern_name *n);
bool ptw_pattern_matches(const struct ptw_pattern *p, struct ptw_pattern_name *n);
/* The name for people: demangled if it was (after a match), else linkage. */
const char *ptw_pattern_name_shown(const struct ptw_pattern_name *n);

/* Functions an entry probe must not go on: entered without a call (no
 * return address at [sp]: gcc's .cold parts among them), or trampolines
 * with a stack of their own. */
bool ptw_pattern_never_traced(const char *name);

/* The file name of a path ("?" for NULL). */
const char *ptw_pattern_base_name(const char *path);

#endif
