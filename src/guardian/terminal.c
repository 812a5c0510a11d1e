/* SPDX-License-Identifier: MIT */
/* The terminal of standard error, saved before the live table takes it and
 * put back by whoever outlives a tracer that died with the table on screen
 * (the restorer, else the front). */
#define _GNU_SOURCE
#include "guardian_int.h"

#include <stdbool.h>
#include <string.h>
#include <termios.h>
#include <unistd.h>

#include "ptw_util.h"
/* last: it defines macros named as our fields (lines, columns) */
#include <term.h>

/* The terminal's modes before the live table. */
static bool tty_saved;
static struct termios saved_tty;

void ptw_term_restore(void)
{
	if (tty_saved)
		tcsetattr(STDERR_FILENO, TCSANOW, &saved_tty);
	int err;
	if (setupterm(NULL, STDERR_FILENO, &err) != 0) /* OK */
		return;
	const char *caps[] = { "sgr0", "cnorm", "rmcup" };
	for (size_t i = 0; i < PTW_ARRAY_SIZE(caps); i++) {
		const char *s = tigetstr(caps[i]);
		if (s && s != (char *)-1)
			ptw_write_all(STDERR_FILENO, s, strlen(s));
	}
}


void ptw_term_save(void)
{
	tty_saved = tcgetattr(STDERR_FILENO, &saved_tty) == 0;
}
