/* SPDX-License-Identifier: MIT */
/* The warning codes: one list (ptw_warnings.h), and the schema's enum and
 * the man page's "Warnings" list name exactly the same codes.
 * argv[1]: spec/spans.schema.json, argv[2]: man/ptwatch.1. */
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "ptw_util.h"
#include "ptw_warnings.h"

static char *slurp(const char *path)
{
	FILE *f = fopen(path, "r");
	if (!f) {
		perror(path);
		exit(99);
	}
	struct ptw_buf b = { 0 };
	char chunk[4096];
	size_t n;
	while ((n = fread(chunk, 1, sizeof(chunk), f)) > 0)
		ptw_buf_add(&b, chunk, n);
	fclose(f);
	return b.p ? b.p : xstrdup("");
}

/* The part of text from the first start to the next end (NUL-cut copy). */
static char *between(const char *text, const char *start, const char *end)
{
	const char *a = strstr(text, start);
	if (!a)
		return xstrdup("");
	a += strlen(start);
	const char *b = strstr(a, end);
	size_t n = b ? (size_t)(b - a) : strlen(a);
	char *out = xmalloc(n + 1);
	memcpy(out, a, n);
	out[n] = '\0';
	return out;
}

static size_t count(const char *text, const char *what)
{
	size_t n = 0;
	for (const char *p = text; (p = strstr(p, what)); p += strlen(what))
		n++;
	return n;
}

/* The list both backends keep (issue 29: the kernel path dropped every
 * warning past its 16th): each one once, in order, repeats counted, none
 * dropped, a repeat by key (a followed process's, keyed without its
 * "process N: ") merged. */
static void test_list(void)
{
	struct ptw_warning_list l = { 0 };
	for (int i = 0; i < 1000; i++) {
		ptw_warning_list_add(&l, PTW_W_KERNEL_LIMIT, NULL, xasprintf("distinct %d", i));
		ptw_warning_list_add(&l, PTW_W_KERNEL_NOT_SEEN, NULL, xstrdup("the same"));
	}
	CHECK_EQ(l.n, 1001u);
	CHECK_STR(l.v[0].message, "distinct 0");
	CHECK_STR(l.v[0].code, "kernel_limit");
	CHECK_EQ(l.v[0].count, 1u);
	CHECK_STR(l.v[1].message, "the same");
	CHECK_EQ(l.v[1].count, 1000u);
	CHECK_STR(l.v[1000].message, "distinct 999");
	/* another code, the same message: another warning */
	ptw_warning_list_add(&l, PTW_W_KERNEL_LIMIT, NULL, xstrdup("the same"));
	CHECK_EQ(l.n, 1002u);
	/* keyed: the first process's message, counted */
	ptw_warning_list_add(&l, PTW_W_NO_LIBC_DEBUGINFO, "no debug file",
			     xstrdup("process 10: no debug file"));
	ptw_warning_list_add(&l, PTW_W_NO_LIBC_DEBUGINFO, "no debug file",
			     xstrdup("process 11: no debug file"));
	CHECK_EQ(l.n, 1003u);
	CHECK_STR(l.v[1002].message, "process 10: no debug file");
	CHECK_EQ(l.v[1002].count, 2u);
	ptw_warning_list_free(&l);
	CHECK_EQ(l.n, 0u);
}

int main(int argc, char **argv)
{
	test_list();
	if (argc < 3) {
		fprintf(stderr, "usage: test_warnings SCHEMA MANPAGE\n");
		return 99;
	}
	char *schema = slurp(argv[1]);
	char *man = slurp(argv[2]);
	/* warnings.items.properties.code.enum */
	char *warnings = between(schema, "\"warnings\": {", "\"$defs\"");
	char *enumlist = between(warnings, "\"enum\": [", "]");
	char *section = between(man, ".SS Warnings\n", ".SS ");

	CHECK_EQ(count(enumlist, "\""), 2 * PTW_WARNING_CODES);
	CHECK_EQ(count(section, ".TP\n.B "), PTW_WARNING_CODES);
	for (int w = 0; w < PTW_WARNING_CODES; w++) {
		const char *code = ptw_warning_code((enum ptw_warning_code)w);
		CHECK(code && ptw_warning_meaning((enum ptw_warning_code)w));
		char *quoted = xasprintf("\"%s\"", code);
		char *entry = xasprintf(".TP\n.B %s\n", code);
		if (!strstr(enumlist, quoted))
			fprintf(stderr, "not in the schema's enum: %s\n", code);
		if (!strstr(section, entry))
			fprintf(stderr, "not in the man page's Warnings: %s\n", code);
		CHECK(strstr(enumlist, quoted));
		CHECK(strstr(section, entry));
		for (int o = 0; o < w; o++)
			CHECK(strcmp(code, ptw_warning_code((enum ptw_warning_code)o)) != 0);
		free(quoted);
		free(entry);
	}
	CHECK(ptw_warning_code(PTW_WARNING_CODES) == NULL);
	free(section);
	free(enumlist);
	free(warnings);
	free(man);
	free(schema);
	return check_failures ? 1 : 0;
}
