/* SPDX-License-Identifier: MIT */
/*
 * The proc_service callbacks libthread_db calls back into, implemented over
 * the attach layer (memory, registers) and the symbol table.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <proc_service.h>
#include <string.h>
#include <sys/procfs.h>

#include "ptw_attach.h"
#include "ptw_symbols.h"
#include "tdb_internal.h"

/* Smaller reads are fields and list heads, read a few times a pass. */
#define WALK_NODE_MIN 256

ps_err_e ps_pdread(struct ps_prochandle *ph, psaddr_t addr, void *buf, size_t len)
{
	uint64_t a = (uint64_t)(uintptr_t)addr;
	if (ph->walking && len >= WALK_NODE_MIN && a && a != UINT64_MAX) {
		uintptr_t n = (uintptr_t)ptw_map_get(&ph->walk_reads, a) + 1;
		if (n > 2) {
			ph->walk_looped = true;
			return PS_ERR;
		}
		ptw_map_put(&ph->walk_reads, a, (void *)n);
	}
	return ptw_mem_read(ph->proc, (uint64_t)(uintptr_t)addr, buf, len) == 0 ? PS_OK : PS_ERR;
}

ps_err_e ps_pdwrite(struct ps_prochandle *ph, psaddr_t addr, const void *buf, size_t len)
{
	return ptw_mem_write(ph->proc, (uint64_t)(uintptr_t)addr, buf, len) == 0 ? PS_OK : PS_ERR;
}

ps_err_e ps_ptread(struct ps_prochandle *ph, psaddr_t addr, void *buf, size_t len)
{
	return ps_pdread(ph, addr, buf, len);
}

ps_err_e ps_ptwrite(struct ps_prochandle *ph, psaddr_t addr, const void *buf, size_t len)
{
	return ps_pdwrite(ph, addr, buf, len);
}

/* Registers only exist for LWPs in a ptrace-stop. */
static struct ptw_lwp *stopped_lwp(struct ps_prochandle *ph, lwpid_t lwp)
{
	struct ptw_lwp *l = ptw_lwp_get(ph->proc, lwp);
	return l && l->state == PTW_LWP_STOPPED ? l : NULL;
}

ps_err_e ps_lgetregs(struct ps_prochandle *ph, lwpid_t lwp, prgregset_t regs)
{
	struct ptw_lwp *l = stopped_lwp(ph, lwp);
	struct user_regs_struct *r;
	if (!l || ptw_getregs(ph->proc, l, &r) < 0)
		return PS_ERR;
	/* elf_gregset_t is struct user_regs_struct laid out as an array. */
	_Static_assert(sizeof(prgregset_t) == sizeof(struct user_regs_struct), "gregset layout");
	memcpy(regs, r, sizeof(*r));
	return PS_OK;
}

ps_err_e ps_lsetregs(struct ps_prochandle *ph, lwpid_t lwp, const prgregset_t regs)
{
	struct ptw_lwp *l = stopped_lwp(ph, lwp);
	struct user_regs_struct *r;
	if (!l || ptw_getregs(ph->proc, l, &r) < 0)
		return PS_ERR;
	memcpy(r, regs, sizeof(*r));
	ptw_regs_dirty(l);
	return PS_OK;
}

ps_err_e ps_lgetfpregs(struct ps_prochandle *ph, lwpid_t lwp, prfpregset_t *fpregs)
{
	struct ptw_lwp *l = stopped_lwp(ph, lwp);
	_Static_assert(sizeof(prfpregset_t) == sizeof(struct user_fpregs_struct), "fpregset layout");
	if (!l || ptw_getfpregs(ph->proc, l, (struct user_fpregs_struct *)fpregs) < 0)
		return PS_ERR;
	return PS_OK;
}

ps_err_e ps_lsetfpregs(struct ps_prochandle *ph, lwpid_t lwp, const prfpregset_t *fpregs)
{
	struct ptw_lwp *l = stopped_lwp(ph, lwp);
	if (!l || ptw_setfpregs(ph->proc, l, (const struct user_fpregs_struct *)fpregs) < 0)
		return PS_ERR;
	return PS_OK;
}

pid_t ps_getpid(struct ps_prochandle *ph)
{
	return ph->proc->pid;
}

/* x86-64: libthread_db asks for FS (idx 25 in the gregset), i.e. fs_base,
 * which is the thread's struct pthread. */
ps_err_e ps_get_thread_area(struct ps_prochandle *ph, lwpid_t lwp, int idx, void **base)
{
	struct ptw_lwp *l = stopped_lwp(ph, lwp);
	struct user_regs_struct *r;
	if (!l || ptw_getregs(ph->proc, l, &r) < 0)
		return PS_ERR;
	if (idx == 25 /* FS */)
		*base = (void *)(uintptr_t)r->fs_base;
	else if (idx == 26 /* GS */)
		*base = (void *)(uintptr_t)r->gs_base;
	else
		return PS_BADADDR;
	return PS_OK;
}

/*
 * libthread_db always names "libpthread.so.0" (or NULL), which glibc >= 2.34
 * programs do not even map: ignore the name and search every module. The
 * symbol table caches hits and misses; without the negative cache the one
 * symbol only libc's debug file has is looked up again for every thread.
 */
ps_err_e ps_pglobal_lookup(struct ps_prochandle *ph, const char *object, const char *name,
			   psaddr_t *addr)
{
	(void)object;
	uint64_t a;
	if (ptw_symbols_lookup(ph->syms, PTW_MOD_ANY, name, &a, NULL) < 0)
		return PS_NOSYM;
	*addr = (psaddr_t)(uintptr_t)a;
	return PS_OK;
}

/* libthread_db never needs these on Linux; ptwatch controls stops itself. */
ps_err_e ps_pstop(struct ps_prochandle *ph)
{
	(void)ph;
	return PS_OK;
}

ps_err_e ps_pcontinue(struct ps_prochandle *ph)
{
	(void)ph;
	return PS_OK;
}

ps_err_e ps_lstop(struct ps_prochandle *ph, lwpid_t lwp)
{
	(void)ph, (void)lwp;
	return PS_OK;
}

ps_err_e ps_lcontinue(struct ps_prochandle *ph, lwpid_t lwp)
{
	(void)ph, (void)lwp;
	return PS_OK;
}
