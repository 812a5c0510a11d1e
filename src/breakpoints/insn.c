/* SPDX-License-Identifier: MIT */
/*
 * Choosing how to step over the instruction an int3 displaced, and doing it
 * without a single step. Pure given capstone; see ptw_breakpoints.h.
 * capstone is opened when first needed (dlopen): linked in, its relocated
 * tables (1.3 MiB) cost every ptwatch 1.6 ms at exec, and only the ptrace
 * path and --trace decode instructions.
 *
 * Emulated: only instructions whose whole effect is a register or stack
 * write that is easy to get exactly right (no flags). Everything else that is
 * not control flow runs out of line, where the CPU does the work.
 */
#define _GNU_SOURCE
#include <capstone/capstone.h>
#include <dlfcn.h>
#include <errno.h>
#include <pthread.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>

#include "config.h"
#include "ptw_breakpoints.h"
#include "ptw_util.h"

static csh cs_handle;
static bool cs_ready;
/* The library's functions this file calls (the build's soname: the ABI of
 * the headers it was compiled with). */
static struct {
	cs_err (*open)(cs_arch arch, cs_mode mode, csh *handle);
	cs_err (*option)(csh handle, cs_opt_type type, size_t value);
	size_t (*disasm)(csh handle, const uint8_t *code, size_t size, uint64_t address,
			 size_t count, cs_insn **insn);
	bool (*disasm_iter)(csh handle, const uint8_t **code, size_t *size, uint64_t *address,
			    cs_insn *insn);
	cs_insn *(*malloc)(csh handle);
	void (*free)(cs_insn *insn, size_t count);
} cs;

static bool cs_load(void)
{
	void *lib = dlopen(PTW_CAPSTONE_SONAME, RTLD_NOW | RTLD_LOCAL);
	if (!lib)
		return false;
	/* (POSIX: a function pointer through a void * is the one dlsym gives) */
	*(void **)&cs.open = dlsym(lib, "cs_open");
	*(void **)&cs.option = dlsym(lib, "cs_option");
	*(void **)&cs.disasm = dlsym(lib, "cs_disasm");
	*(void **)&cs.disasm_iter = dlsym(lib, "cs_disasm_iter");
	*(void **)&cs.malloc = dlsym(lib, "cs_malloc");
	*(void **)&cs.free = dlsym(lib, "cs_free");
	return cs.open && cs.option && cs.disasm && cs.disasm_iter && cs.malloc && cs.free;
}

static void cs_init(void)
{
	if (!cs_load() || cs.open(CS_ARCH_X86, CS_MODE_64, &cs_handle) != CS_ERR_OK)
		return;
	cs.option(cs_handle, CS_OPT_DETAIL, CS_OPT_ON);
	cs_ready = true;
}

static int capstone(csh *ret)
{
	static pthread_once_t once = PTHREAD_ONCE_INIT;
	pthread_once(&once, cs_init);
	if (!cs_ready)
		return -ENOTSUP;
	*ret = cs_handle;
	return 0;
}

#define R(name) offsetof(struct user_regs_struct, name)
static const struct {
	int r64, r32;
	int slot;
} reg_table[] = {
	{ X86_REG_RAX, X86_REG_EAX, R(rax) },  { X86_REG_RBX, X86_REG_EBX, R(rbx) },
	{ X86_REG_RCX, X86_REG_ECX, R(rcx) },  { X86_REG_RDX, X86_REG_EDX, R(rdx) },
	{ X86_REG_RSI, X86_REG_ESI, R(rsi) },  { X86_REG_RDI, X86_REG_EDI, R(rdi) },
	{ X86_REG_RBP, X86_REG_EBP, R(rbp) },  { X86_REG_RSP, X86_REG_ESP, R(rsp) },
	{ X86_REG_R8, X86_REG_R8D, R(r8) },    { X86_REG_R9, X86_REG_R9D, R(r9) },
	{ X86_REG_R10, X86_REG_R10D, R(r10) }, { X86_REG_R11, X86_REG_R11D, R(r11) },
	{ X86_REG_R12, X86_REG_R12D, R(r12) }, { X86_REG_R13, X86_REG_R13D, R(r13) },
	{ X86_REG_R14, X86_REG_R14D, R(r14) }, { X86_REG_R15, X86_REG_R15D, R(r15) },
};
#undef R

int ptw_insn_reg_slot(int cs_reg, int *ret_width)
{
	for (size_t i = 0; i < PTW_ARRAY_SIZE(reg_table); i++) {
		if (reg_table[i].r64 == cs_reg) {
			*ret_width = 8;
			return reg_table[i].slot;
		}
		if (reg_table[i].r32 == cs_reg) {
			*ret_width = 4;
			return reg_table[i].slot;
		}
	}
	return -1;
}

/* Converts a capstone operand; false if it names something we cannot model. */
static bool convert_operand(const cs_x86_op *op, struct ptw_insn_operand *out)
{
	memset(out, 0, sizeof(*out));
	out->reg = out->base = out->index = -1;
	switch (op->type) {
	case X86_OP_IMM:
		out->type = PTW_OPND_IMM;
		out->imm = op->imm;
		return true;
	case X86_OP_REG:
		out->type = PTW_OPND_REG;
		out->reg = ptw_insn_reg_slot(op->reg, &out->width);
		return out->reg >= 0;
	case X86_OP_MEM: {
		int w;
		out->type = PTW_OPND_MEM;
		out->scale = op->mem.scale;
		out->disp = op->mem.disp;
		if (op->mem.segment == X86_REG_FS)
			out->seg = PTW_REG_FS;
		else if (op->mem.segment == X86_REG_GS)
			out->seg = PTW_REG_GS;
		else if (op->mem.segment != X86_REG_INVALID)
			return false;
		if (op->mem.base == X86_REG_RIP)
			out->base = PTW_REG_RIP;
		else if (op->mem.base != X86_REG_INVALID &&
			 ((out->base = ptw_insn_reg_slot(op->mem.base, &w)) < 0 || w != 8))
			return false;
		if (op->mem.index != X86_REG_INVALID &&
		    ((out->index = ptw_insn_reg_slot(op->mem.index, &w)) < 0 || w != 8))
			return false;
		return true;
	}
	default:
		return false;
	}
}

static bool is_jcc(unsigned id)
{
	switch (id) {
	case X86_INS_JAE:
	case X86_INS_JA:
	case X86_INS_JBE:
	case X86_INS_JB:
	case X86_INS_JE:
	case X86_INS_JGE:
	case X86_INS_JG:
	case X86_INS_JLE:
	case X86_INS_JL:
	case X86_INS_JNE:
	case X86_INS_JNO:
	case X86_INS_JNP:
	case X86_INS_JNS:
	case X86_INS_JO:
	case X86_INS_JP:
	case X86_INS_JS:
		return true;
	default:
		return false;
	}
}

static bool in_group(const cs_detail *d, uint8_t group)
{
	for (uint8_t i = 0; i < d->groups_count; i++)
		if (d->groups[i] == group)
			return true;
	return false;
}

static int choose(const cs_insn *insn, struct ptw_insn_plan *p)
{
	const cs_x86 *x = &insn->detail->x86;
	const cs_x86_op *ops = x->operands;

	switch (insn->id) {
	case X86_INS_NOP:
	case X86_INS_ENDBR64:
	case X86_INS_ENDBR32:
		p->kind = PTW_INSN_NOP;
		return 0;
	case X86_INS_PUSH:
		if (x->op_count == 1 && convert_operand(&ops[0], &p->src) &&
		    p->src.type == PTW_OPND_REG && p->src.width == 8) {
			p->kind = PTW_INSN_PUSH_REG;
			return 0;
		}
		break;
	case X86_INS_MOV:
		if (x->op_count == 2 && convert_operand(&ops[0], &p->dst) &&
		    convert_operand(&ops[1], &p->src) && p->dst.type == PTW_OPND_REG) {
			if (p->src.type == PTW_OPND_REG && p->src.width == p->dst.width) {
				p->kind = PTW_INSN_MOV_REG;
				return 0;
			}
			if (p->src.type == PTW_OPND_IMM) {
				p->kind = PTW_INSN_MOV_IMM;
				return 0;
			}
		}
		break;
	case X86_INS_LEA:
		if (x->op_count == 2 && convert_operand(&ops[0], &p->dst) &&
		    convert_operand(&ops[1], &p->src) && p->dst.type == PTW_OPND_REG &&
		    p->src.type == PTW_OPND_MEM && !p->src.seg) {
			p->kind = PTW_INSN_LEA;
			return 0;
		}
		break;
	case X86_INS_CDQE:
		p->kind = PTW_INSN_CDQE;
		return 0;
	case X86_INS_RET:
		p->kind = PTW_INSN_RET;
		if (x->op_count == 1 && ops[0].type == X86_OP_IMM)
			p->ret_pop = (uint16_t)ops[0].imm;
		return 0;
	case X86_INS_JMP:
	case X86_INS_CALL:
		if (x->op_count == 1 && convert_operand(&ops[0], &p->src) &&
		    (p->src.type != PTW_OPND_REG || p->src.width == 8)) {
			p->kind = insn->id == X86_INS_JMP ? PTW_INSN_JMP : PTW_INSN_CALL;
			return 0;
		}
		return -ENOTSUP;
	default:
		if (is_jcc(insn->id) && x->op_count == 1 && ops[0].type == X86_OP_IMM) {
			p->kind = PTW_INSN_JCC;
			p->cond = (int)insn->id;
			p->src.type = PTW_OPND_IMM;
			p->src.imm = ops[0].imm;
			return 0;
		}
		break;
	}

	/* Out of line: anything that does not itself transfer control. */
	const cs_detail *d = insn->detail;
	if (in_group(d, CS_GRP_JUMP) || in_group(d, CS_GRP_CALL) || in_group(d, CS_GRP_RET) ||
	    in_group(d, CS_GRP_INT) || in_group(d, CS_GRP_IRET) || in_group(d, CS_GRP_BRANCH_RELATIVE))
		return -ENOTSUP;
	for (uint8_t i = 0; i < x->op_count; i++) {
		if (ops[i].type == X86_OP_MEM && ops[i].mem.base == X86_REG_RIP) {
			/* rip-relative is always a disp32 right after the ModRM
			 * byte (no SIB); capstone 4 says disp_size 2 when a 66
			 * prefix is there (movdqa): checked against the bytes */
			int32_t disp;
			size_t at = (size_t)x->encoding.modrm_offset + 1;
			if (!x->encoding.modrm_offset || at + 4 > insn->size)
				return -ENOTSUP;
			memcpy(&disp, insn->bytes + at, sizeof(disp));
			if (disp != ops[i].mem.disp)
				return -ENOTSUP;
			p->rip_relative = true;
			p->disp_offset = (uint8_t)at;
			p->disp_size = 4;
		}
	}
	p->kind = PTW_INSN_XOL;
	return 0;
}

/* Up to count instructions of code (at addr) into *ret (cs.free them):
 * how many, 0 if none decodes, -ENOTSUP without capstone. */
static int disasm(const uint8_t *code, size_t len, uint64_t addr, size_t count, cs_insn **ret)
{
	csh h;
	int r = capstone(&h);
	return r < 0 ? r : (int)cs.disasm(h, code, len, addr, count, ret);
}

int ptw_insn_plan(const uint8_t *code, size_t len, uint64_t addr, struct ptw_insn_plan *ret)
{
	cs_insn *insn;
	int n = disasm(code, len, addr, 1, &insn);
	if (n <= 0)
		return n < 0 ? n : -EINVAL;
	struct ptw_insn_plan p;
	memset(&p, 0, sizeof(p));
	p.len = (uint8_t)insn->size;
	memcpy(p.bytes, insn->bytes, insn->size);
	snprintf(p.text, sizeof(p.text), "%.12s%s%.34s", insn->mnemonic, insn->op_str[0] ? " " : "",
		 insn->op_str);
	int r = choose(insn, &p);
	cs.free(insn, n);
	if (r < 0)
		return r;
	*ret = p;
	return 0;
}

/* ---- emulation ---- */

static uint64_t get_reg(const struct user_regs_struct *regs, int slot)
{
	uint64_t v;
	memcpy(&v, (const char *)regs + slot, sizeof(v));
	return v;
}

static void set_reg(struct user_regs_struct *regs, int slot, uint64_t v)
{
	memcpy((char *)regs + slot, &v, sizeof(v));
}

static uint64_t effective_address(const struct ptw_insn_operand *m, const struct user_regs_struct *regs,
				  uint64_t next_rip)
{
	uint64_t ea = (uint64_t)m->disp;
	if (m->base == PTW_REG_RIP)
		ea += next_rip;
	else if (m->base >= 0)
		ea += get_reg(regs, m->base);
	if (m->index >= 0)
		ea += get_reg(regs, m->index) * (uint64_t)m->scale;
	if (m->seg == PTW_REG_FS)
		ea += regs->fs_base;
	else if (m->seg == PTW_REG_GS)
		ea += regs->gs_base;
	return ea;
}

static int operand_value(const struct ptw_insn_operand *o, const struct user_regs_struct *regs,
			 uint64_t next_rip, const struct ptw_insn_mem *mem, uint64_t *ret)
{
	switch (o->type) {
	case PTW_OPND_IMM:
		*ret = (uint64_t)o->imm;
		return 0;
	case PTW_OPND_REG: {
		uint64_t v = get_reg(regs, o->reg);
		*ret = o->width == 4 ? (uint32_t)v : v;
		return 0;
	}
	case PTW_OPND_MEM:
		return mem->read(mem->ctx, effective_address(o, regs, next_rip), ret, 8);
	default:
		return -EINVAL;
	}
}

static bool condition_holds(int cond, uint64_t eflags)
{
	bool cf = eflags & 0x1, pf = eflags & 0x4, zf = eflags & 0x40, sf = eflags & 0x80,
	     of = eflags & 0x800;
	switch (cond) {
	case X86_INS_JAE:
		return !cf;
	case X86_INS_JA:
		return !cf && !zf;
	case X86_INS_JBE:
		return cf || zf;
	case X86_INS_JB:
		return cf;
	case X86_INS_JE:
		return zf;
	case X86_INS_JGE:
		return sf == of;
	case X86_INS_JG:
		return !zf && sf == of;
	case X86_INS_JLE:
		return zf || sf != of;
	case X86_INS_JL:
		return sf != of;
	case X86_INS_JNE:
		return !zf;
	case X86_INS_JNO:
		return !of;
	case X86_INS_JNP:
		return !pf;
	case X86_INS_JNS:
		return !sf;
	case X86_INS_JO:
		return of;
	case X86_INS_JP:
		return pf;
	case X86_INS_JS:
		return sf;
	default:
		return false;
	}
}

int ptw_insn_emulate(const struct ptw_insn_plan *plan, uint64_t addr, struct user_regs_struct *regs,
		     const struct ptw_insn_mem *mem)
{
	struct user_regs_struct r = *regs;
	uint64_t next = addr + plan->len, v;
	int e;

	switch (plan->kind) {
	case PTW_INSN_NOP:
		r.rip = next;
		break;
	case PTW_INSN_PUSH_REG:
		v = get_reg(&r, plan->src.reg);
		if ((e = mem->write(mem->ctx, r.rsp - 8, &v, 8)) < 0)
			return e;
		r.rsp -= 8;
		r.rip = next;
		break;
	case PTW_INSN_MOV_REG:
	case PTW_INSN_MOV_IMM:
		if ((e = operand_value(&plan->src, &r, next, mem, &v)) < 0)
			return e;
		set_reg(&r, plan->dst.reg, plan->dst.width == 4 ? (uint32_t)v : v);
		r.rip = next;
		break;
	case PTW_INSN_LEA:
		v = effective_address(&plan->src, &r, next);
		set_reg(&r, plan->dst.reg, plan->dst.width == 4 ? (uint32_t)v : v);
		r.rip = next;
		break;
	case PTW_INSN_CDQE:
		r.rax = (uint64_t)(int64_t)(int32_t)r.rax;
		r.rip = next;
		break;
	case PTW_INSN_RET:
		if ((e = mem->read(mem->ctx, r.rsp, &v, 8)) < 0)
			return e;
		r.rsp += 8 + plan->ret_pop;
		r.rip = v;
		break;
	case PTW_INSN_JMP:
		if ((e = operand_value(&plan->src, &r, next, mem, &v)) < 0)
			return e;
		r.rip = v;
		break;
	case PTW_INSN_CALL:
		if ((e = operand_value(&plan->src, &r, next, mem, &v)) < 0)
			return e;
		if ((e = mem->write(mem->ctx, r.rsp - 8, &next, 8)) < 0)
			return e;
		r.rsp -= 8;
		r.rip = v;
		break;
	case PTW_INSN_JCC:
		r.rip = condition_holds(plan->cond, r.eflags) ? (uint64_t)plan->src.imm : next;
		break;
	default:
		return -EINVAL;
	}
	*regs = r;
	return 0;
}

int ptw_insn_xol_code(const struct ptw_insn_plan *plan, uint64_t addr, uint64_t slot_addr,
		      uint8_t out[PTW_XOL_SLOT_SIZE])
{
	size_t n = plan->len;
	memcpy(out, plan->bytes, n);
	if (plan->rip_relative) {
		int32_t disp;
		memcpy(&disp, out + plan->disp_offset, 4);
		/* Same target from the slot: the next-rip moves by slot - addr. */
		int64_t moved = (int64_t)disp + (int64_t)(addr - slot_addr);
		if (moved < INT32_MIN || moved > INT32_MAX)
			return -ERANGE;
		disp = (int32_t)moved;
		memcpy(out + plan->disp_offset, &disp, 4);
	}
	/* jmp *0(%rip); .quad addr + len */
	static const uint8_t jmp_abs[] = { 0xff, 0x25, 0, 0, 0, 0 };
	memcpy(out + n, jmp_abs, sizeof(jmp_abs));
	uint64_t back = addr + plan->len;
	memcpy(out + n + sizeof(jmp_abs), &back, 8);
	n += sizeof(jmp_abs) + 8;
	memset(out + n, 0xcc, PTW_XOL_SLOT_SIZE - n);
	return (int)n;
}

/* ---- scanning helpers ---- */

int ptw_insn_call_length(const uint8_t before[8], uint64_t ret_addr)
{
	csh h;
	if (capstone(&h) < 0)
		return 0;
	/* Try the common encodings, shortest first: call *%reg (2), call
	 * *disp8(%reg) (3), call rel32 (5), call *disp32(%rip) (6), SIB (7). */
	for (int k = 2; k <= 7; k++) {
		cs_insn *insn;
		size_t n =
			cs.disasm(h, before + 8 - k, (size_t)k, ret_addr - (uint64_t)k, 1, &insn);
		if (!n)
			continue;
		bool ok = insn->id == X86_INS_CALL && insn->size == k;
		cs.free(insn, n);
		if (ok)
			return k;
	}
	return 0;
}

int ptw_insn_entry_step(const uint8_t *code, size_t len, uint64_t addr, uint64_t *ret_next,
			uint32_t *ret_sp_shift)
{
	cs_insn *insn;
	int n = disasm(code, len, addr, 2, &insn);
	if (n < 1)
		return -ENOTSUP;
	const cs_x86 *x = &insn->detail->x86;
	int r = 0;
	uint32_t shift = 0;
	switch (insn->id) {
	case X86_INS_ENDBR64:
	case X86_INS_NOP:
		break;
	case X86_INS_TEST:
	case X86_INS_CMP:
		/* registers or a constant, then a conditional jump on them: the
		 * pair a compiler never splits with a branch between them */
		r = -ENOTSUP;
		if (n == 2 && is_jcc(insn[1].id) && x->op_count == 2 &&
		    x->operands[0].type == X86_OP_REG && x->operands[1].type != X86_OP_MEM)
			r = 1;
		break;
	case X86_INS_PUSH:
		/* a 64-bit register (not a push of memory, or of rsp itself) */
		if (x->op_count != 1 || x->operands[0].type != X86_OP_REG || x->operands[0].size != 8)
			r = -ENOTSUP;
		shift = 8;
		break;
	case X86_INS_SUB:
		if (x->op_count != 2 || x->operands[0].type != X86_OP_REG ||
		    x->operands[0].reg != X86_REG_RSP || x->operands[1].type != X86_OP_IMM ||
		    x->operands[1].imm < 0 || x->operands[1].imm > 65536)
			r = -ENOTSUP;
		else
			shift = (uint32_t)x->operands[1].imm;
		break;
	default:
		r = -ENOTSUP;
	}
	if (r >= 0) {
		*ret_next = addr + insn->size;
		*ret_sp_shift = shift;
	}
	cs.free(insn, n);
	return r;
}

int ptw_insn_tail_jump(const uint8_t *code, size_t len, uint64_t addr, uint64_t *ret_target)
{
	cs_insn *insn;
	int n = disasm(code, len, addr, 6, &insn);
	if (n < 0)
		return n;
	int r = -ENOENT;
	for (int i = 0; i < n; i++) {
		const cs_x86 *x = &insn[i].detail->x86;
		if (insn[i].id == X86_INS_JMP && x->op_count == 1 && x->operands[0].type == X86_OP_IMM) {
			*ret_target = (uint64_t)x->operands[0].imm;
			r = 0;
			break;
		}
		if (insn[i].id == X86_INS_RET || insn[i].id == X86_INS_CALL)
			break;
	}
	if (n)
		cs.free(insn, n);
	return r;
}

/* What a scan of code (at addr, len bytes) keeps. */
struct pick {
	unsigned id;	 /* X86_INS_RET, X86_INS_CALL, X86_INS_JMP */
	bool target;	 /* keep the direct target (else the instruction's address) */
	bool leaving;	 /* ... only a target outside [lo, hi) */
	uint64_t lo, hi;
	bool rip_lea; /* X86_INS_LEA of a rip-relative address: keep that address */
	/* a direct call of callee: keep where it returns; the sweep stops
	 * at a byte it cannot decode (nothing after it is trusted) */
	bool return_site;
	uint64_t callee;
};

/* Up to max addresses of the instructions pk picks; an undecodable byte
 * (padding) is skipped, unless pk->return_site. */
static int find_insns(const uint8_t *code, size_t len, uint64_t addr, const struct pick *pk,
		      uint64_t *out, int max)
{
	csh h;
	if (capstone(&h) < 0)
		return 0;
	int k = 0;
	const uint8_t *p = code;
	size_t left = len;
	uint64_t a = addr;
	cs_insn *insn = cs.malloc(h);
	while (left && k < max) {
		if (!cs.disasm_iter(h, &p, &left, &a, insn)) {
			if (pk->return_site)
				break;
			p++;
			left--;
			a++;
			continue;
		}
		if (insn->id != pk->id)
			continue;
		if (pk->return_site) {
			const cs_x86 *c = &insn->detail->x86;
			if (c->op_count == 1 && c->operands[0].type == X86_OP_IMM &&
			    (uint64_t)c->operands[0].imm == pk->callee)
				out[k++] = insn->address + insn->size;
			continue;
		}
		if (!pk->target) {
			out[k++] = insn->address;
			continue;
		}
		const cs_x86 *x = &insn->detail->x86;
		if (pk->rip_lea) {
			if (x->op_count == 2 && x->operands[1].type == X86_OP_MEM &&
			    x->operands[1].mem.base == X86_REG_RIP &&
			    x->operands[1].mem.index == X86_REG_INVALID)
				out[k++] = insn->address + insn->size +
					   (uint64_t)x->operands[1].mem.disp;
			continue;
		}
		if (x->op_count != 1 || x->operands[0].type != X86_OP_IMM)
			continue;
		uint64_t target = (uint64_t)x->operands[0].imm;
		if (!pk->leaving || target < pk->lo || target >= pk->hi)
			out[k++] = target;
	}
	cs.free(insn, 1);
	return k;
}

int ptw_insn_find_return_sites(const uint8_t *code, size_t len, uint64_t addr, uint64_t callee,
			       uint64_t *out, int max)
{
	const struct pick pk = { .id = X86_INS_CALL, .return_site = true, .callee = callee };
	return find_insns(code, len, addr, &pk, out, max);
}

int ptw_insn_find_rets(const uint8_t *code, size_t len, uint64_t addr, uint64_t *out, int max)
{
	const struct pick pk = { .id = X86_INS_RET };
	return find_insns(code, len, addr, &pk, out, max);
}

int ptw_insn_find_rip_leas(const uint8_t *code, size_t len, uint64_t addr, uint64_t *out, int max)
{
	const struct pick pk = { .id = X86_INS_LEA, .target = true, .rip_lea = true };
	return find_insns(code, len, addr, &pk, out, max);
}

/* Whether reg is a part of rsp or of rdi. */
static bool stack_or_first_argument(x86_reg reg)
{
	switch (reg) {
	case X86_REG_RSP:
	case X86_REG_ESP:
	case X86_REG_SP:
	case X86_REG_SPL:
	case X86_REG_RDI:
	case X86_REG_EDI:
	case X86_REG_DI:
	case X86_REG_DIL:
		return true;
	default:
		return false;
	}
}

static bool segment(x86_reg reg)
{
	return reg == X86_REG_CS || reg == X86_REG_DS || reg == X86_REG_ES || reg == X86_REG_FS ||
	       reg == X86_REG_GS || reg == X86_REG_SS;
}

/* Whether a memory operand is one a read of cannot fault: rip-relative
 * (the module's own data) or a fixed offset in the thread's TCB (fs). */
static bool cannot_fault(const x86_op_mem *m)
{
	if (m->segment == X86_REG_FS) /* (struct pthread's first page) */
		return m->base == X86_REG_INVALID && m->index == X86_REG_INVALID && m->disp >= 0 &&
		       m->disp < 0x1000;
	return m->segment == X86_REG_INVALID && m->base == X86_REG_RIP &&
	       m->index == X86_REG_INVALID;
}

/* The instructions passed over: moves and arithmetic between registers
 * (their only side effect the flags), and nothing that can branch, trap,
 * block or touch memory by itself. */
static bool plain(unsigned id, bool *writes_dst)
{
	*writes_dst = true;
	switch (id) {
	case X86_INS_TEST:
	case X86_INS_CMP:
	case X86_INS_ENDBR64:
		*writes_dst = false;
		return true;
	case X86_INS_MOV:
	case X86_INS_MOVABS:
	case X86_INS_MOVZX:
	case X86_INS_MOVSX:
	case X86_INS_MOVSXD:
	case X86_INS_LEA:
	case X86_INS_XOR:
	case X86_INS_AND:
	case X86_INS_OR:
	case X86_INS_ADD:
	case X86_INS_SUB:
	case X86_INS_SHL:
	case X86_INS_SHR:
	case X86_INS_SAR:
	case X86_INS_NOT:
	case X86_INS_NEG:
	case X86_INS_CMOVA:
	case X86_INS_CMOVAE:
	case X86_INS_CMOVB:
	case X86_INS_CMOVBE:
	case X86_INS_CMOVE:
	case X86_INS_CMOVG:
	case X86_INS_CMOVGE:
	case X86_INS_CMOVL:
	case X86_INS_CMOVLE:
	case X86_INS_CMOVNE:
	case X86_INS_CMOVNS:
	case X86_INS_CMOVS:
	case X86_INS_PXOR:
	case X86_INS_XORPS:
	case X86_INS_MOVAPS:
	case X86_INS_MOVDQA:
	case X86_INS_MOVD:
	case X86_INS_MOVQ:
	case X86_INS_VPBROADCASTB:
	case X86_INS_VPBROADCASTW:
	case X86_INS_VPBROADCASTD:
	case X86_INS_VPBROADCASTQ:
	case X86_INS_VMOVD:
	case X86_INS_VMOVQ:
	case X86_INS_VMOVDQA:
	case X86_INS_VMOVDQU:
	case X86_INS_VMOVAPS:
	case X86_INS_VMOVUPS:
	case X86_INS_VPCMPEQB:
	case X86_INS_VPCMPEQW:
	case X86_INS_VPCMPEQD:
	case X86_INS_VPCMPEQQ:
	case X86_INS_VPXOR:
	case X86_INS_VPXORD:
	case X86_INS_VPXORQ:
	case X86_INS_VXORPS:
		return true;
	case X86_INS_VZEROUPPER:
		*writes_dst = false;
		return true;
	default:
		return false;
	}
}

int ptw_insn_passable(const uint8_t *code, size_t len, uint64_t addr)
{
	cs_insn *insn;
	int n = disasm(code, len, addr, 1, &insn);
	if (n < 1)
		return n;
	const cs_x86 *x = &insn->detail->x86;
	bool writes_dst,
		ok = plain(insn->id, &writes_dst) && (insn->id == X86_INS_ENDBR64 || !x->prefix[0]);
	for (uint8_t i = 0; ok && i < x->op_count; i++) {
		const cs_x86_op *o = &x->operands[i];
		if (o->type == X86_OP_MEM)
			/* (Intel order: the destination first) */
			ok = insn->id == X86_INS_LEA
				     ? i == 1
				     : (i > 0 || !writes_dst) && cannot_fault(&o->mem);
		else if (o->type == X86_OP_REG && i == 0 && writes_dst)
			ok = !stack_or_first_argument(o->reg) && !segment(o->reg);
	}
	int r = ok ? insn->size : 0;
	cs.free(insn, n);
	return r;
}

bool ptw_insn_jumps_to(const uint8_t *code, size_t len, uint64_t addr, uint64_t target)
{
	return ptw_insn_jumps_within(code, len, addr, target, target + 1);
}

bool ptw_insn_jumps_within(const uint8_t *code, size_t len, uint64_t addr, uint64_t lo, uint64_t hi)
{
	csh h;
	if (capstone(&h) < 0)
		return false;
	const uint8_t *p = code;
	size_t left = len;
	uint64_t a = addr;
	bool found = false;
	cs_insn *insn = cs.malloc(h);
	while (left && !found) {
		if (!cs.disasm_iter(h, &p, &left, &a, insn)) {
			p++, left--, a++; /* (padding) */
			continue;
		}
		const cs_x86 *x = &insn->detail->x86;
		found = in_group(insn->detail, CS_GRP_JUMP) && x->op_count == 1 &&
			x->operands[0].type == X86_OP_IMM && (uint64_t)x->operands[0].imm >= lo &&
			(uint64_t)x->operands[0].imm < hi;
	}
	cs.free(insn, 1);
	return found;
}

int ptw_insn_find_calls(const uint8_t *code, size_t len, uint64_t addr, bool tail_jumps, uint64_t *out,
			int max)
{
	/* a jump out of the function is a tail call */
	const struct pick pk = { .id = tail_jumps ? X86_INS_JMP : X86_INS_CALL, .target = true,
				 .leaving = tail_jumps, .lo = addr, .hi = addr + len };
	return find_insns(code, len, addr, &pk, out, max);
}

/* The condition of a jcc from its opcode (0x7X, or 0x0f 0x8X): X. */
static int jcc_condition(const cs_x86 *x)
{
	if (x->opcode[0] >= 0x70 && x->opcode[0] <= 0x7f)
		return x->opcode[0] & 0xf;
	if (x->opcode[0] == 0x0f && x->opcode[1] >= 0x80 && x->opcode[1] <= 0x8f)
		return x->opcode[1] & 0xf;
	return -1;
}

int ptw_insn_exits(const uint8_t *code, size_t len, uint64_t addr, struct ptw_insn_exit **ret,
		   size_t *ret_n)
{
	csh h;
	*ret = NULL;
	*ret_n = 0;
	if (capstone(&h) < 0)
		return -ENOTSUP;
	/* which bytes begin an instruction, and the internal branch targets */
	uint8_t *starts = xcalloc(len + 1, 1);
	uint64_t *inside = NULL;
	size_t ninside = 0, n = 0, cap = 0;
	struct ptw_insn_exit *v = NULL;
	const uint8_t *p = code;
	size_t left = len;
	uint64_t a = addr;
	int r = 0;
	cs_insn *insn = cs.malloc(h);
	while (left && r == 0) {
		uint64_t at = a;
		if (!cs.disasm_iter(h, &p, &left, &a, insn)) {
			r = -EILSEQ; /* data, or bytes cut at the end */
			break;
		}
		starts[at - addr] = 1;
		const cs_x86 *x = &insn->detail->x86;
		struct ptw_insn_exit e = { .addr = at, .len = insn->size, .cond = -1 };
		bool direct = x->op_count == 1 && x->operands[0].type == X86_OP_IMM;
		uint64_t target = direct ? (uint64_t)x->operands[0].imm : 0;
		bool out = direct && (target < addr || target >= addr + len);
		if (insn->id == X86_INS_RET) {
			e.kind = PTW_EXIT_RET;
		} else if (insn->id == X86_INS_JMP || is_jcc(insn->id)) {
			if (direct && !out) {
				inside = xreallocarray(inside, ninside + 1, sizeof(*inside));
				inside[ninside++] = target;
				continue;
			}
			if (insn->id != X86_INS_JMP && (!direct || (e.cond = jcc_condition(x)) < 0)) {
				r = -ENOTSUP;
				break;
			}
			e.kind = insn->id == X86_INS_JMP ? PTW_EXIT_JUMP : PTW_EXIT_JCC;
			e.target = target;
			if (!direct) {
				e.kind = PTW_EXIT_JUMP_INDIRECT;
				if (x->op_count != 1 || !convert_operand(&x->operands[0], &e.op) ||
				    e.op.seg) {
					r = -ENOTSUP;
					break;
				}
			}
		} else if (insn->id == X86_INS_JRCXZ || insn->id == X86_INS_JECXZ ||
			   insn->id == X86_INS_LOOP || insn->id == X86_INS_LOOPE ||
			   insn->id == X86_INS_LOOPNE) {
			if (out) { /* never a tail call: not modelled */
				r = -ENOTSUP;
				break;
			}
			inside = xreallocarray(inside, ninside + 1, sizeof(*inside));
			inside[ninside++] = target;
			continue;
		} else {
			continue; /* (a call comes back) */
		}
		if (n == cap) {
			cap = cap ? cap * 2 : 8;
			v = xreallocarray(v, cap, sizeof(*v));
		}
		v[n++] = e;
	}
	/* A branch into the middle of an instruction: the sweep is not the
	 * code the CPU runs (or the bounds are wrong). Unless what starts
	 * there ends where that instruction ends: a jump over a prefix
	 * (glibc's "je 1f; lock; 1: cmpxchg" for a single thread), after
	 * which both decode the same. */
	for (size_t i = 0; r == 0 && i < ninside; i++) {
		size_t t = (size_t)(inside[i] - addr), next = t + 1;
		if (starts[t])
			continue;
		while (next < len && !starts[next])
			next++;
		const uint8_t *q = code + t;
		size_t qleft = next - t;
		uint64_t qa = inside[i];
		if (!cs.disasm_iter(h, &q, &qleft, &qa, insn) || qleft)
			r = -EILSEQ;
	}
	cs.free(insn, 1);
	free(inside);
	free(starts);
	if (r < 0) {
		free(v);
		return r;
	}
	*ret = v;
	*ret_n = n;
	return 0;
}
