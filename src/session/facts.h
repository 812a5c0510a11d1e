/* SPDX-License-Identifier: MIT */
/*
 * What a session knows besides its spans, as the backend told it in
 * events (ptw_events.h): its warnings (PTW_EV_WARNING: merged and
 * counted, one policy for both backends), its processes (-f,
 * PTW_EV_PROCESS: the latest of each) and its interrupts
 * (PTW_EV_INTERRUPT). The session fills the report's parts from here.
 */
#ifndef PTW_SESSION_FACTS_H
#define PTW_SESSION_FACTS_H

#include <stdbool.h>

#include "ptw_events.h"
#include "ptw_output.h"
#include "ptw_warnings.h"

struct session_facts {
	struct ptw_warning_list warnings;
	struct ptw_process *procs; /* by id (ids are dense: 0 the target, 1, 2, ...) */
	size_t nprocs;
	struct ptw_interrupt *interrupts;
	size_t ninterrupts;
};

/* Keeps ev if it is one of the session's facts (warning, process,
 * interrupt). Returns true for a fact that is the session's alone (not
 * the engine's or the outputs': warnings and processes). */
bool facts_take(struct session_facts *f, const struct ptw_event *ev);
/* The report's warnings, interrupts and (-f) processes: valid until the
 * next facts_take or facts_free. */
void facts_fill(const struct session_facts *f, struct ptw_report *r);
void facts_free(struct session_facts *f);

#endif
