/* SPDX-License-Identifier: MIT */
/* Shared between the agent and the proc_service callbacks. */
#ifndef PTW_TDB_INTERNAL_H
#define PTW_TDB_INTERNAL_H

#include <stdbool.h>

#include "ptw_util.h"

struct ptw_proc;
struct ptw_symbols;

/* libthread_db hands this back to every proc_service callback. */
struct ps_prochandle {
	struct ptw_proc *proc;
	struct ptw_symbols *syms;
	/* While a pass of td_ta_thr_iter runs: how many times each
	 * descriptor-sized read was made in it (address -> count). The walk
	 * reads each thread's descriptor once, and ptwatch once more for its
	 * details; a third read of the same one is a list that goes round in
	 * the target's memory, whose nodes libthread_db may not even report
	 * (filtered by priority): that read fails, and the walk with it. */
	bool walking;
	bool walk_looped;
	struct ptw_map walk_reads;
};

#endif
