/* SPDX-License-Identifier: MIT */
/* Shared between the agent and the proc_service callbacks. */
#ifndef PTW_TDB_INTERNAL_H
#define PTW_TDB_INTERNAL_H

struct ptw_proc;
struct ptw_symbols;

/* libthread_db hands this back to every proc_service callback. */
struct ps_prochandle {
	struct ptw_proc *proc;
	struct ptw_symbols *syms;
};

#endif
