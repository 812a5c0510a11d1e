/* SPDX-License-Identifier: MIT */
/*
 * Unwinding a thread's stack with libdwfl: live (ptrace), from a copy of
 * its stack and registers (the kernel path), or from sp and pc alone.
 */
#define _GNU_SOURCE
#include "symbols_int.h"

/* ---- unwinding ---- */

static pid_t unwind_next_thread(Dwfl *dwfl, void *arg, void **thread_argp)
{
	(void)dwfl, (void)arg, (void)thread_argp;
	return 0;
}

static bool unwind_get_thread(Dwfl *dwfl, pid_t tid, void *arg, void **thread_argp)
{
	(void)dwfl;
	struct ptw_symbols *s = arg;
	*thread_argp = s;
	return tid == s->unwind_tid;
}

/*
 * What the registers we do not have hold for libdw: a non-canonical
 * address, that no mapping can hold. libdw takes a register it cannot
 * compute for the end of the stack (a return address it cannot read is
 * "undefined"), so leaving them unset would cut stacks short and call
 * them whole. Set to this instead, every use shows: as an address read
 * (a frame's CFA from its frame pointer) or as a pc.
 */
#define UNKNOWN_REG  0x5057000000000000ull
#define UNKNOWN_SPAN (1ull << 40)

static bool unknown_value(const struct ptw_symbols *s, uint64_t v)
{
	return s->unwind_sp_pc_only && v - (UNKNOWN_REG - UNKNOWN_SPAN) < 2 * UNKNOWN_SPAN;
}

/* A word of the thread being unwound: from its stack copy when it has one
 * and addr lies in it, else from the process. */
static int unwind_read_word(struct ptw_symbols *s, uint64_t addr, uint64_t *ret)
{
	if (unknown_value(s, addr)) {
		s->unwind_used_unknown = true;
		return -EFAULT;
	}
	const struct ptw_stack_copy *c = s->unwind_stack;
	int r = 0;
	if (c && addr >= c->addr && addr - c->addr <= c->len && c->len - (addr - c->addr) >= 8) {
		memcpy(ret, c->bytes + (addr - c->addr), sizeof(*ret));
	} else {
		s->unwind_read_live = true;
		r = s->unwind_read ? s->unwind_read(s->unwind_read_ctx, addr, ret, sizeof(*ret))
				   : s->read(s->read_ctx, addr, ret, sizeof(*ret));
	}
	if (r == 0)
		*ret = ptw_unwind_rets_fix(s->unwind_rets, addr, *ret);
	return r;
}

uint64_t ptw_unwind_rets_fix(const struct ptw_unwind_rets *r, uint64_t addr, uint64_t v)
{
	if (!r || v < r->tramp_lo || v >= r->tramp_hi)
		return v;
	for (size_t i = 0; i < r->n; i++)
		if (r->slots[i][0] == addr)
			return r->slots[i][1];
	return v;
}

static bool unwind_memory_read(Dwfl *dwfl, Dwarf_Addr addr, Dwarf_Word *result, void *arg)
{
	(void)dwfl;
	uint64_t v;
	if (unwind_read_word(arg, addr, &v) < 0)
		return false;
	*result = v;
	return true;
}

static bool unwind_set_initial_registers(Dwfl_Thread *thread, void *arg)
{
	struct ptw_symbols *s = arg;
	const struct user_regs_struct *r = s->unwind_regs;
	if (s->unwind_sp_pc_only) { /* the rest unknown, and seen if used */
		Dwarf_Word regs[17];
		for (int i = 0; i < 17; i++)
			regs[i] = UNKNOWN_REG;
		regs[7] = r->rsp;
		regs[16] = r->rip;
		return dwfl_thread_state_registers(thread, 0, 17, regs);
	}
	/* DWARF register numbers 0..16 on x86-64. */
	Dwarf_Word regs[17] = {
		r->rax, r->rdx, r->rcx, r->rbx, r->rsi, r->rdi, r->rbp, r->rsp, r->r8,
		r->r9,	r->r10, r->r11, r->r12, r->r13, r->r14, r->r15, r->rip,
	};
	return dwfl_thread_state_registers(thread, 0, 17, regs);
}

static const Dwfl_Thread_Callbacks unwind_callbacks = {
	.next_thread = unwind_next_thread,
	.get_thread = unwind_get_thread,
	.memory_read = unwind_memory_read,
	.set_initial_registers = unwind_set_initial_registers,
};

struct frames_ctx {
	struct ptw_symbols *s;
	uint64_t *pcs;
	uint64_t *sps; /* NULL: not asked for */
	int max, n;
};

static int frame_cb(Dwfl_Frame *state, void *arg)
{
	struct frames_ctx *c = arg;
	Dwarf_Addr pc;
	if (!dwfl_frame_pc(state, &pc, NULL))
		return DWARF_CB_ABORT;
	if (unknown_value(c->s, pc)) {
		c->s->unwind_used_unknown = true;
		return DWARF_CB_ABORT;
	}
	if (c->sps) {
		/* DWARF register 7: rsp (for an unwound frame, its CFA) */
		Dwarf_Word sp;
		c->sps[c->n] = dwfl_frame_reg(state, 7, &sp) == 0 ? sp : 0;
	}
	c->pcs[c->n++] = pc;
	return c->n < c->max ? DWARF_CB_OK : DWARF_CB_ABORT;
}

/* Does any FDE (.eh_frame or .debug_frame) cover pc? */
static bool has_cfi(struct ptw_symbols *s, uint64_t pc)
{
	Dwfl_Module *mod = sym_module_at(s, pc);
	if (!mod)
		return false;
	/* The answer for a pc without .eh_frame CFI (the clone site, in every
	 * thread creation) costs opening the debug file: keep it. */
	struct module_index *mi = sym_index_of(s, mod);
	struct ptw_cache *c = mi ? sym_module_cache(s, mi) : NULL;
	char key[32];
	struct ptw_cache_value v;
	if (c) {
		snprintf(key, sizeof(key), "%" PRIx64, pc - mi->bias);
		if (sym_cache_get(s, c, "cfi", key, &v) == 0)
			return v.found;
	}
	bool found = false;
	/* .eh_frame first: .debug_frame (a debug file) only if that has none. */
	for (int i = 0; i < 2 && !found; i++) {
		Dwarf_Addr bias;
		Dwarf_CFI *cfi =
			i ? dwfl_module_dwarf_cfi(mod, &bias) : dwfl_module_eh_cfi(mod, &bias);
		Dwarf_Frame *frame;
		if (cfi && dwarf_cfi_addrframe(cfi, pc - bias, &frame) == 0) {
			free(frame);
			found = true;
		}
	}
	sym_cache_put(c, "cfi", key, found, 0, 0, NULL);
	return found;
}

bool ptw_symbols_frame_set_up(struct ptw_symbols *s, uint64_t pc)
{
	Dwfl_Module *mod = sym_module_at(s, pc);
	Dwarf_Addr bias;
	Dwarf_CFI *cfi = mod ? dwfl_module_eh_cfi(mod, &bias) : NULL;
	Dwarf_Frame *frame;
	if (!cfi || dwarf_cfi_addrframe(cfi, pc - bias, &frame) != 0)
		return false;
	Dwarf_Op *ops;
	size_t nops;
	bool set_up = false;
	if (dwarf_frame_cfa(frame, &ops, &nops) == 0 && nops == 1) {
		/* register + offset: libdw's DW_OP_bregx (number, number2), or
		 * DW_OP_breg0..31 (atom, number); rsp is DWARF register 7 */
		bool bregx = ops[0].atom == DW_OP_bregx;
		bool breg = ops[0].atom >= DW_OP_breg0 && ops[0].atom <= DW_OP_breg31;
		uint64_t reg = bregx ? ops[0].number : (uint64_t)(ops[0].atom - DW_OP_breg0);
		uint64_t off = bregx ? ops[0].number2 : ops[0].number;
		set_up = (bregx || breg) && !(reg == 7 && off == 8);
	}
	free(frame);
	return set_up;
}

static int unwind_from(struct ptw_symbols *s, pid_t tid, const struct user_regs_struct *regs,
		       uint64_t *pcs, uint64_t *sps, int max)
{
	s->unwind_tid = tid;
	s->unwind_regs = regs;
	struct frames_ctx c = { s, pcs, sps, max, 0 };
	/* 0: the outermost frame has no return address */
	int r = dwfl_getthread_frames(s->dwfl, tid, frame_cb, &c);
	s->unwind_complete = r == 0 || c.n >= max;
	if (!s->unwind_complete)
		ptw_dbg(PTW_DBG_SYM, "unwind %d from %#llx: %s after %d frames", tid,
			(unsigned long long)regs->rip, dwfl_errmsg(-1), c.n);
	return c.n;
}

static int unwind(struct ptw_symbols *s, pid_t tid, const struct user_regs_struct *regs,
		  uint64_t *pcs, uint64_t *sps, int max)
{
	if (max <= 0)
		return -EINVAL;
	if (!s->attached) {
		if (!dwfl_attach_state(s->dwfl, NULL, s->pid, &unwind_callbacks, s)) {
			ptw_dbg(PTW_DBG_SYM, "dwfl_attach_state: %s", dwfl_errmsg(-1));
			return -ENOTSUP;
		}
		s->attached = true;
	}
	/*
	 * No CFI for the innermost pc: glibc ends clone3's FDE right before its
	 * syscall (the child's unwind info would be wrong). Do not let
	 * libdwfl guess from rbp (it then invents frames that skip the
	 * caller, depending on what rbp holds): treat it as the frameless
	 * leaf it is, as debuggers do, return address at [rsp].
	 */
	uint64_t ret;
	if (max > 1 && !has_cfi(s, regs->rip) && unwind_read_word(s, regs->rsp, &ret) == 0 &&
	    sym_module_at(s, ret)) {
		struct user_regs_struct caller = *regs;
		caller.rip = ret;
		caller.rsp = regs->rsp + 8;
		pcs[0] = regs->rip;
		if (sps)
			sps[0] = regs->rsp;
		int m = unwind_from(s, tid, &caller, pcs + 1, sps ? sps + 1 : NULL, max - 1);
		if (m > 0)
			return m + 1;
	}
	int n = unwind_from(s, tid, regs, pcs, sps, max);
	if (n == 0) {
		s->unwind_complete = false;
		pcs[0] = regs->rip;
		if (sps)
			sps[0] = regs->rsp;
		n = 1;
	}
	return n;
}

int ptw_symbols_unwind(struct ptw_symbols *s, pid_t tid, const struct user_regs_struct *regs,
		       uint64_t *pcs, int max)
{
	return unwind(s, tid, regs, pcs, NULL, max);
}

int ptw_symbols_unwind_sps(struct ptw_symbols *s, pid_t tid, const struct user_regs_struct *regs,
			   uint64_t *pcs, uint64_t *sps, int max, bool *whole)
{
	int n = unwind(s, tid, regs, pcs, sps, max);
	*whole = n > 0 && s->unwind_complete;
	return n;
}

int ptw_symbols_unwind_copy(struct ptw_symbols *s, pid_t tid, const struct user_regs_struct *regs,
			    const struct ptw_stack_copy *stack, uint64_t *pcs, int max)
{
	s->unwind_stack = stack;
	int n = unwind(s, tid, regs, pcs, NULL, max);
	s->unwind_stack = NULL;
	return n;
}

int ptw_symbols_unwind_sps_in(struct ptw_symbols *s, ptw_memread_fn read, void *ctx,
			      const struct ptw_unwind_rets *rets, pid_t tid,
			      const struct user_regs_struct *regs, uint64_t *pcs, uint64_t *sps,
			      int max, bool *whole)
{
	s->unwind_read = read;
	s->unwind_read_ctx = ctx;
	s->unwind_rets = rets;
	int n = ptw_symbols_unwind_sps(s, tid, regs, pcs, sps, max, whole);
	s->unwind_read = NULL;
	s->unwind_read_ctx = NULL;
	s->unwind_rets = NULL;
	return n;
}

int ptw_symbols_unwind_copy_in(struct ptw_symbols *s, ptw_memread_fn read, void *ctx,
			       const struct ptw_unwind_rets *rets, pid_t tid,
			       const struct user_regs_struct *regs,
			       const struct ptw_stack_copy *stack, uint64_t *pcs, int max)
{
	s->unwind_read = read;
	s->unwind_read_ctx = ctx;
	s->unwind_rets = rets;
	int n = ptw_symbols_unwind_copy(s, tid, regs, stack, pcs, max);
	s->unwind_read = NULL;
	s->unwind_read_ctx = NULL;
	s->unwind_rets = NULL;
	return n;
}

int ptw_symbols_unwind_sp_pc(struct ptw_symbols *s, pid_t tid, uint64_t sp, uint64_t pc,
			     const struct ptw_stack_copy *stack, const struct ptw_unwind_rets *rets,
			     uint64_t *pcs, int max, bool *whole, bool *read_live)
{
	struct user_regs_struct regs = { .rsp = sp, .rip = pc };
	s->unwind_stack = stack;
	s->unwind_rets = rets;
	s->unwind_sp_pc_only = true;
	s->unwind_used_unknown = false;
	s->unwind_read_live = false;
	int n = unwind(s, tid, &regs, pcs, NULL, max);
	s->unwind_sp_pc_only = false;
	s->unwind_stack = NULL;
	s->unwind_rets = NULL;
	*whole = n > 0 && s->unwind_complete && !s->unwind_used_unknown;
	*read_live = s->unwind_read_live;
	return n;
}
