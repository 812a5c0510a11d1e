/* SPDX-License-Identifier: MIT */
/*
 * Inside the attach layer: what its files share (each calls only those
 * before it: signals.c, memory.c, proc.c, launch.c).
 */
#ifndef PTW_ATTACH_INT_H
#define PTW_ATTACH_INT_H

#include "ptw_attach.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ptrace.h>
#include <sys/signalfd.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <sys/wait.h>
#include <unistd.h>

/* ---- memory.c ---- */

void att_reopen_mem(struct ptw_proc *p);
bool att_repick_mem_pid(struct ptw_proc *p);

/* ---- proc.c ---- */

struct ptw_proc *att_proc_new(pid_t pid);
struct ptw_lwp *att_lwp_add(struct ptw_proc *p, pid_t tid, pid_t tgid);
void att_record_status(struct ptw_proc *p, pid_t tid, int status, struct ptw_stop *st);

#endif
