/* SPDX-License-Identifier: MIT */
/* --trace patterns; see ptw_patterns.h. Pure. */
#define _GNU_SOURCE
#include "ptw_patterns.h"

#include <errno.h>
#include <fnmatch.h>
#include <stdlib.h>
#include <string.h>

#include "ptw_demangle.h"
#include "ptw_util.h"

static const char *const never_traced[] = {
	"_start",
	"__restore_rt",
	"_dl_start",
	"_dl_start_user",
	"_dl_runtime_resolve*",
	"_dl_runtime_profile*",
	"__tls_get_addr_slow",
	/* gcc's cold parts of functions, entered by jumps from their bodies
	 * (whose probes follow them there) */
	"*.cold",
	"*.cold.*",
	NULL,
};

static char *dup_n(const char *s, size_t n)
{
	char *d = xmalloc(n + 1);
	memcpy(d, s, n);
	d[n] = '\0';
	return d;
}

const char *ptw_pattern_base_name(const char *path)
{
	const char *b = path ? strrchr(path, '/') : NULL;
	return b ? b + 1 : path ? path : "?";
}

int ptw_pattern_parse(const char *text, struct ptw_pattern *p)
{
	memset(p, 0, sizeof(*p));
	if (!text || !*text)
		return -EINVAL;
	p->text = xstrdup(text);
	const char *c = text;
	while ((c = strchr(c, ':'))) {
		if (c[1] == ':') {
			c += 2;
			continue;
		}
		if (c == text || (c > text && c[-1] == ':')) {
			c++;
			continue;
		}
		break;
	}
	if (c) {
		p->module = dup_n(text, (size_t)(c - text));
		p->name = xstrdup(c + 1);
	} else {
		p->name = xstrdup(text);
	}
	return *p->name ? 0 : -EINVAL;
}

void ptw_pattern_free(struct ptw_pattern *p)
{
	free(p->text);
	free(p->module);
	free(p->name);
	memset(p, 0, sizeof(*p));
}

bool ptw_pattern_module_applies(const struct ptw_pattern *p, const char *path)
{
	return !p->module || fnmatch(p->module, ptw_pattern_base_name(path), 0) == 0 ||
	       (path && fnmatch(p->module, path, 0) == 0);
}

bool ptw_pattern_literal(const struct ptw_pattern *p)
{
	return !strpbrk(p->name, "*?[");
}

/* "ns::f(int)" -> "ns::f" (NULL when there is no parameter list). */
static char *without_params(const char *demangled)
{
	const char *p = strchr(demangled, '(');
	if (!p || p == demangled || !strncmp(demangled, "operator", 8))
		return NULL;
	return dup_n(demangled, (size_t)(p - demangled));
}

void ptw_pattern_name_init(struct ptw_pattern_name *n, const char *linkage)
{
	memset(n, 0, sizeof(*n));
	n->linkage = linkage;
}

void ptw_pattern_name_done(struct ptw_pattern_name *n)
{
	free(n->demangled);
	free(n->bare);
	n->demangled = n->bare = NULL;
}

bool ptw_pattern_matches(const struct ptw_pattern *p, struct ptw_pattern_name *n)
{
	const char *name = n->linkage;
	if (fnmatch(p->name, name, 0) == 0)
		return true;
	if (name[0] != '_' || name[1] != 'Z')
		return false;
	if (!n->tried) {
		n->tried = true;
		n->demangled = ptw_demangle(name);
		n->bare = n->demangled ? without_params(n->demangled) : NULL;
	}
	return (n->demangled && fnmatch(p->name, n->demangled, 0) == 0) ||
	       (n->bare && fnmatch(p->name, n->bare, 0) == 0);
}

const char *ptw_pattern_name_shown(const struct ptw_pattern_name *n)
{
	return n->demangled ? n->demangled : n->linkage;
}

bool ptw_pattern_never_traced(const char *name)
{
	for (const char *const *d = never_traced; *d; d++)
		if (fnmatch(*d, name, 0) == 0)
			return true;
	return false;
}
