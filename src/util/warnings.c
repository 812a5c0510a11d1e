/* SPDX-License-Identifier: MIT */
/* The warning codes and their meanings, from the one list (ptw_warnings.h). */
#include <stddef.h>

#include "ptw_warnings.h"

static const struct {
	const char *code, *meaning;
} warnings[PTW_WARNING_CODES] = {
#define PTW_WARNING_ROW(id, code, meaning) [PTW_W_##id] = { #code, meaning },
	PTW_WARNINGS(PTW_WARNING_ROW)
#undef PTW_WARNING_ROW
};

const char *ptw_warning_code(enum ptw_warning_code w)
{
	return (unsigned)w < PTW_WARNING_CODES ? warnings[w].code : NULL;
}

const char *ptw_warning_meaning(enum ptw_warning_code w)
{
	return (unsigned)w < PTW_WARNING_CODES ? warnings[w].meaning : NULL;
}
