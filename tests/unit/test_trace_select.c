/* SPDX-License-Identifier: MIT */
/*
 * What --trace selects (ptw_trace_select.h), the same for both backends:
 * functions taken by the patterns that apply to a module, refusals,
 * failures said per pattern, and the notes at the end across processes.
 */
#include <stdlib.h>

#include "check.h"
#include "ptw_trace_select.h"
#include "ptw_warnings.h"

static char wanted[16][64];
static size_t nwanted;

static void want(void *ctx, uint64_t addr, const char *name)
{
	(void)ctx, (void)addr;
	if (nwanted < 16)
		snprintf(wanted[nwanted++], sizeof(wanted[0]), "%s", name);
}

/* A module's functions, as ptw_symbols_module_functions would give them. */
static void walk(struct ptw_trace_select *s, const char *path, const char *const *names, int r)
{
	struct ptw_trace_scan sc = { s, want, NULL };
	if (!ptw_trace_select_applies(s, path))
		return;
	for (size_t i = 0; names[i]; i++)
		ptw_trace_select_function(&sc, 0x1000 + i, names[i]);
	ptw_trace_select_walked(s, path, r);
}

static char notes[16][400];
static int codes[16];
static size_t which[16], nnotes;

static void note(void *ctx, size_t w, int code, const char *line)
{
	(void)ctx;
	if (nnotes < 16) {
		snprintf(notes[nnotes], sizeof(notes[0]), "%s", line);
		codes[nnotes] = code;
		which[nnotes++] = w;
	}
}

static void test_select(void)
{
	char *pats[] = { (char[]){ "work*" }, (char[]){ "libfoo.so*:helper" }, (char[]){ "_start" },
			 (char[]){ "nothing_at_all" } };
	struct ptw_trace_select *s = ptw_trace_select_new(pats, 4);
	CHECK_EQ(ptw_trace_select_patterns(s), 4);
	static const char *const prog[] = {
		"main", "worker", "work_loop", "_start", "helper", NULL
	};
	static const char *const foo[] = { "helper", "other", NULL };
	nwanted = 0;
	walk(s, "/usr/bin/prog", prog, 1);
	/* "helper" is libfoo's only; _start is refused */
	CHECK_EQ(nwanted, 2);
	CHECK_STR(wanted[0], "worker");
	CHECK_STR(wanted[1], "work_loop");
	walk(s, "/usr/lib/libfoo.so.1", foo, 0);
	CHECK_EQ(nwanted, 3);
	CHECK_STR(wanted[2], "helper");
	/* a module no pattern applies to is not walked at all */
	struct ptw_trace_select *none =
		ptw_trace_select_new((char *[]){ (char[]){ "libbar.so:x" } }, 1);
	CHECK(!ptw_trace_select_applies(none, "/usr/bin/prog"));
	ptw_trace_select_free(none);

	ptw_trace_select_failed(s, "work_loop", "why not");
	nnotes = 0;
	ptw_trace_select_notes(&s, 1, note, NULL);
	CHECK_EQ(nnotes, 3);
	CHECK_EQ(codes[0], PTW_W_TRACE_REFUSED);
	CHECK(strstr(notes[0], "_start is not traced") != NULL);
	CHECK_EQ(codes[1], PTW_W_TRACE_UNHOOKABLE);
	CHECK_STR(notes[1], "--trace 'work*': 1 of the 2 functions it matched are not traced: "
			    "work_loop (why not)");
	CHECK_EQ(codes[2], PTW_W_TRACE_NO_MATCH);
	CHECK_STR(notes[2], "--trace 'nothing_at_all' matched no function; only the dynamic "
			    "symbols of libfoo.so.1 could be searched (no symbol table, no debug "
			    "file): their static functions cannot be found");
	ptw_trace_select_free(s);
}

/* -f: a pattern that matched in a child is no "no match"; a module glob no
 * process met is said as such; refusals are per process; a glob that
 * happens to match a refused function says nothing. */
static void test_processes(void)
{
	char *pats[] = { (char[]){ "child_*" }, (char[]){ "libnope.so:f" }, (char[]){ "*start" } };
	struct ptw_trace_select *root = ptw_trace_select_new(pats, 3);
	struct ptw_trace_select *child = ptw_trace_select_new(pats, 3);
	static const char *const shell[] = { "main", "_start", NULL };
	static const char *const prog[] = { "child_work", "_start", NULL };
	nwanted = 0;
	walk(root, "/bin/sh", shell, 1);
	walk(child, "/usr/bin/prog", prog, 1);
	CHECK_EQ(nwanted, 1);
	CHECK_STR(wanted[0], "child_work");
	struct ptw_trace_select *all[] = { root, child };
	nnotes = 0;
	ptw_trace_select_notes(all, 2, note, NULL);
	CHECK_EQ(nnotes, 1);
	CHECK_EQ(which[0], 0);
	CHECK_STR(notes[0], "--trace 'libnope.so:f': no loaded module is called 'libnope.so'");
	ptw_trace_select_free(root);
	ptw_trace_select_free(child);
	CHECK(ptw_trace_select_new(pats, 0) == NULL);
}

/* One helper list: every kind is there once at least. */
static void test_helpers(void)
{
	unsigned seen = 0;
	for (size_t i = 0; i < ptw_trace_nhelpers; i++)
		seen |= 1u << ptw_trace_helpers[i].kind;
	CHECK_EQ(seen, (1u << (PTW_TRACE_MODULES_CHANGED + 1)) - 1);
}

int main(void)
{
	test_select();
	test_processes();
	test_helpers();
	CHECK_DONE();
}
