/* SPDX-License-Identifier: MIT */
/* What --trace selects; see ptw_trace_select.h. Pure. */
#define _GNU_SOURCE
#include "ptw_trace_select.h"

#include <fnmatch.h>
#include <stdlib.h>
#include <string.h>

#include "ptw_patterns.h"
#include "ptw_util.h"
#include "ptw_warnings.h"

const struct ptw_trace_helper ptw_trace_helpers[] = {
	{ "_Unwind_RaiseException", NULL, PTW_TRACE_THROW },
	{ "__cxa_begin_catch", NULL, PTW_TRACE_CATCH },
	{ "longjmp", NULL, PTW_TRACE_LONGJMP },
	{ "_longjmp", NULL, PTW_TRACE_LONGJMP },
	{ "siglongjmp", NULL, PTW_TRACE_LONGJMP },
	{ "__longjmp_chk", NULL, PTW_TRACE_LONGJMP },
	/* code entered without a call */
	{ "swapcontext", NULL, PTW_TRACE_CONTEXT_SWAP },
	{ "setcontext", NULL, PTW_TRACE_CONTEXT_SET },
	{ "__restore_rt", NULL, PTW_TRACE_SIGRETURN },
	/* ld.so's own (libc has one too, for a static dlopen) */
	{ "_dl_debug_state", "ld-linux", PTW_TRACE_MODULES_CHANGED },
};
const size_t ptw_trace_nhelpers = PTW_ARRAY_SIZE(ptw_trace_helpers);

struct pattern {
	struct ptw_pattern p;
	bool applies;	  /* to the module being walked */
	bool module_seen; /* some module matched its module glob */
	size_t matched;
	size_t nfailed;	       /* matched, but could not be traced */
	struct ptw_buf failed; /* the first few, and why */
};

struct ptw_trace_select {
	struct pattern *pats;
	size_t npats;
	char **refused; /* asked for by name but never traced */
	size_t nrefused;
	char **dynsym_only; /* modules whose dynamic symbols only could be searched */
	size_t ndynsym_only;
};

struct ptw_trace_select *ptw_trace_select_new(char *const *trace, size_t n)
{
	if (!n)
		return NULL;
	struct ptw_trace_select *s = xcalloc(1, sizeof(*s));
	s->pats = xcalloc(n, sizeof(*s->pats));
	for (size_t i = 0; i < n; i++)
		if (ptw_pattern_parse(trace[i], &s->pats[s->npats].p) == 0)
			s->npats++;
		else
			ptw_pattern_free(&s->pats[s->npats].p);
	return s;
}

static void free_strings(char **v, size_t n)
{
	for (size_t i = 0; i < n; i++)
		free(v[i]);
	free(v);
}

void ptw_trace_select_free(struct ptw_trace_select *s)
{
	if (!s)
		return;
	for (size_t i = 0; i < s->npats; i++) {
		ptw_pattern_free(&s->pats[i].p);
		ptw_buf_free(&s->pats[i].failed);
	}
	free(s->pats);
	free_strings(s->refused, s->nrefused);
	free_strings(s->dynsym_only, s->ndynsym_only);
	free(s);
}

size_t ptw_trace_select_patterns(const struct ptw_trace_select *s)
{
	return s ? s->npats : 0;
}

bool ptw_trace_select_applies(struct ptw_trace_select *s, const char *path)
{
	bool any = false;
	for (size_t i = 0; i < s->npats; i++) {
		struct pattern *p = &s->pats[i];
		p->applies = ptw_pattern_module_applies(&p->p, path);
		p->module_seen |= p->applies;
		any |= p->applies;
	}
	return any;
}

/* Adds str to the set v (of n), once. */
static void add_once(char ***v, size_t *n, const char *str)
{
	for (size_t i = 0; i < *n; i++)
		if (!strcmp((*v)[i], str))
			return;
	*v = xreallocarray(*v, *n + 1, sizeof(**v));
	(*v)[(*n)++] = xstrdup(str);
}

void ptw_trace_select_function(void *scan, uint64_t addr, const char *name)
{
	struct ptw_trace_scan *sc = scan;
	struct ptw_trace_select *s = sc->sel;
	struct ptw_pattern_name n;
	ptw_pattern_name_init(&n, name);
	bool hit = false, literal = false;
	for (size_t i = 0; i < s->npats; i++) {
		struct pattern *p = &s->pats[i];
		if (!p->applies || !ptw_pattern_matches(&p->p, &n))
			continue;
		p->matched++;
		hit = true;
		literal |= ptw_pattern_literal(&p->p);
	}
	if (hit && ptw_pattern_never_traced(name)) {
		/* Said when asked for by name; a glob that happens to match it
		 * (--trace '*') is only told in the debug log. */
		if (literal)
			add_once(&s->refused, &s->nrefused, ptw_pattern_name_shown(&n));
		ptw_dbg(PTW_DBG_TRACER, "--trace: %s refused", ptw_pattern_name_shown(&n));
	} else if (hit) {
		sc->want(sc->ctx, addr, ptw_pattern_name_shown(&n));
	}
	ptw_pattern_name_done(&n);
}

void ptw_trace_select_walked(struct ptw_trace_select *s, const char *path, int r)
{
	if (r == 0 && path && path[0] != '[')
		add_once(&s->dynsym_only, &s->ndynsym_only, ptw_pattern_base_name(path));
}

void ptw_trace_select_failed(struct ptw_trace_select *s, const char *name, const char *why)
{
	struct ptw_pattern_name n;
	ptw_pattern_name_init(&n, name);
	for (size_t i = 0; i < s->npats; i++) {
		struct pattern *p = &s->pats[i];
		if (!ptw_pattern_matches(&p->p, &n) || p->nfailed++ >= 3)
			continue;
		ptw_buf_puts(&p->failed, p->failed.len ? ", " : "");
		ptw_buf_printf(&p->failed, "%s (%s)", name, why);
	}
	ptw_pattern_name_done(&n);
}

/* Pattern i matched nothing in any of the selections: why, said once. */
static void no_match(struct ptw_trace_select *const *all, size_t n, size_t i, struct ptw_buf *b)
{
	const struct ptw_pattern *p = &all[0]->pats[i].p;
	bool module_seen = false;
	for (size_t k = 0; k < n; k++)
		module_seen |= all[k]->pats[i].module_seen;
	if (p->module && !module_seen) {
		ptw_buf_printf(b, "--trace '%s': no loaded module is called '%s'", p->text,
			       p->module);
		return;
	}
	struct ptw_buf m = { 0 };
	struct ptw_map named = { 0 };
	for (size_t k = 0; k < n; k++)
		for (size_t d = 0; d < all[k]->ndynsym_only; d++) {
			const char *mod = all[k]->dynsym_only[d];
			if ((p->module && fnmatch(p->module, mod, 0) != 0) ||
			    ptw_map_get(&named, ptw_str_hash(mod)))
				continue;
			ptw_map_put(&named, ptw_str_hash(mod), (void *)1);
			ptw_buf_puts(&m, m.len ? ", " : "");
			ptw_buf_puts(&m, mod);
		}
	ptw_map_free(&named);
	if (m.len)
		ptw_buf_printf(b,
			       "--trace '%s' matched no function; only the dynamic symbols of %s "
			       "could be searched (no symbol table, no debug file): their static "
			       "functions cannot be found",
			       p->text, m.p);
	else
		ptw_buf_printf(b, "--trace '%s' matched no function", p->text);
	ptw_buf_free(&m);
}

void ptw_trace_select_notes(struct ptw_trace_select *const *all, size_t n,
			    void (*fn)(void *ctx, size_t which, int code, const char *line),
			    void *ctx)
{
	if (!n || !all[0])
		return;
	struct ptw_buf b = { 0 };
	for (size_t k = 0; k < n; k++) {
		const struct ptw_trace_select *s = all[k];
		for (size_t i = 0; i < s->nrefused; i++) {
			ptw_buf_reset(&b);
			ptw_buf_printf(&b,
				       "--trace: %s is not traced (entered without a call, it has "
				       "no return address)",
				       s->refused[i]);
			fn(ctx, k, PTW_W_TRACE_REFUSED, b.p);
		}
		for (size_t i = 0; i < s->npats; i++) {
			const struct pattern *p = &s->pats[i];
			if (!p->nfailed)
				continue;
			ptw_buf_reset(&b);
			ptw_buf_printf(&b,
				       "--trace '%s': %zu of the %zu functions it matched are not "
				       "traced: %s%s",
				       p->p.text, p->nfailed, p->matched, p->failed.p,
				       p->nfailed > 3 ? ", ..." : "");
			fn(ctx, k, PTW_W_TRACE_UNHOOKABLE, b.p);
		}
	}
	for (size_t i = 0; i < all[0]->npats; i++) {
		bool matched = false;
		for (size_t k = 0; k < n; k++)
			matched |= all[k]->pats[i].matched > 0;
		if (matched)
			continue;
		ptw_buf_reset(&b);
		no_match(all, n, i, &b);
		fn(ctx, 0, PTW_W_TRACE_NO_MATCH, b.p);
	}
	ptw_buf_free(&b);
}
