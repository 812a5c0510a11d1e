/* SPDX-License-Identifier: MIT */
/* Stepping over displaced instructions: plans, emulation, XOL relocation. */
#include <errno.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "ptw_breakpoints.h"

#define ADDR 0x401000ull
#define STACK 0x7ffd0000ull /* fake memory: [STACK, STACK + 4096) */

static uint8_t stack_mem[4096];

static int fake_read(void *ctx, uint64_t addr, void *buf, size_t len)
{
	(void)ctx;
	if (addr < STACK || addr + len > STACK + sizeof(stack_mem))
		return -EFAULT;
	memcpy(buf, stack_mem + (addr - STACK), len);
	return 0;
}

static int fake_write(void *ctx, uint64_t addr, const void *buf, size_t len)
{
	(void)ctx;
	if (addr < STACK || addr + len > STACK + sizeof(stack_mem))
		return -EFAULT;
	memcpy(stack_mem + (addr - STACK), buf, len);
	return 0;
}

static const struct ptw_insn_mem mem = { fake_read, fake_write, NULL };

static uint64_t peek(uint64_t addr)
{
	uint64_t v = 0;
	fake_read(NULL, addr, &v, 8);
	return v;
}

static void poke(uint64_t addr, uint64_t v)
{
	fake_write(NULL, addr, &v, 8);
}

static struct ptw_insn_plan plan_of(const uint8_t *code, size_t len)
{
	uint8_t buf[16] = { 0 };
	memcpy(buf, code, len);
	struct ptw_insn_plan p;
	memset(&p, 0, sizeof(p));
	int r = ptw_insn_plan(buf, sizeof(buf), ADDR, &p);
	if (r < 0)
		p.kind = PTW_INSN_UNSUPPORTED;
	return p;
}

static struct user_regs_struct regs0(void)
{
	struct user_regs_struct r;
	memset(&r, 0, sizeof(r));
	r.rip = ADDR;
	r.rsp = STACK + 2048;
	r.rbp = 0x1111;
	r.rdi = 0x2222;
	r.rax = 0xffffffff80000001ull;
	r.rbx = STACK + 512;
	return r;
}

#define PLAN(...)                                                                                  \
	({                                                                                         \
		static const uint8_t c_[] = { __VA_ARGS__ };                                       \
		plan_of(c_, sizeof(c_));                                                           \
	})

static void test_emulated(void)
{
	struct user_regs_struct r;
	struct ptw_insn_plan p;

	p = PLAN(0x55); /* push %rbp */
	CHECK_EQ(p.kind, PTW_INSN_PUSH_REG);
	r = regs0();
	CHECK_EQ(ptw_insn_emulate(&p, ADDR, &r, &mem), 0);
	CHECK_EQ(r.rsp, STACK + 2040);
	CHECK_EQ(peek(r.rsp), 0x1111);
	CHECK_EQ(r.rip, ADDR + 1);

	p = PLAN(0x41, 0x57); /* push %r15 */
	CHECK_EQ(p.kind, PTW_INSN_PUSH_REG);
	CHECK_EQ(p.len, 2);

	p = PLAN(0xf3, 0x0f, 0x1e, 0xfa); /* endbr64 */
	CHECK_EQ(p.kind, PTW_INSN_NOP);
	r = regs0();
	CHECK_EQ(ptw_insn_emulate(&p, ADDR, &r, &mem), 0);
	CHECK_EQ(r.rip, ADDR + 4);

	p = PLAN(0x0f, 0x1f, 0x44, 0x00, 0x00); /* nopl 0(%rax,%rax) */
	CHECK_EQ(p.kind, PTW_INSN_NOP);
	CHECK_EQ(p.len, 5);

	p = PLAN(0x48, 0x89, 0xe5); /* mov %rsp,%rbp */
	CHECK_EQ(p.kind, PTW_INSN_MOV_REG);
	r = regs0();
	CHECK_EQ(ptw_insn_emulate(&p, ADDR, &r, &mem), 0);
	CHECK_EQ(r.rbp, STACK + 2048);
	CHECK_EQ(r.rip, ADDR + 3);

	p = PLAN(0x89, 0xf8); /* mov %edi,%eax: zero-extends */
	CHECK_EQ(p.kind, PTW_INSN_MOV_REG);
	r = regs0();
	r.rdi = 0xdeadbeef00000007ull;
	CHECK_EQ(ptw_insn_emulate(&p, ADDR, &r, &mem), 0);
	CHECK_EQ(r.rax, 7);

	p = PLAN(0xb8, 0x2a, 0, 0, 0); /* mov $42,%eax */
	CHECK_EQ(p.kind, PTW_INSN_MOV_IMM);
	r = regs0();
	CHECK_EQ(ptw_insn_emulate(&p, ADDR, &r, &mem), 0);
	CHECK_EQ(r.rax, 42);

	p = PLAN(0x48, 0x8d, 0x45, 0xf0); /* lea -0x10(%rbp),%rax */
	CHECK_EQ(p.kind, PTW_INSN_LEA);
	r = regs0();
	CHECK_EQ(ptw_insn_emulate(&p, ADDR, &r, &mem), 0);
	CHECK_EQ(r.rax, 0x1111 - 0x10);

	p = PLAN(0x48, 0x8d, 0x05, 0x10, 0, 0, 0); /* lea 0x10(%rip),%rax */
	CHECK_EQ(p.kind, PTW_INSN_LEA);
	r = regs0();
	CHECK_EQ(ptw_insn_emulate(&p, ADDR, &r, &mem), 0);
	CHECK_EQ(r.rax, ADDR + 7 + 0x10);

	p = PLAN(0x48, 0x98); /* cltq */
	CHECK_EQ(p.kind, PTW_INSN_CDQE);
	r = regs0();
	CHECK_EQ(ptw_insn_emulate(&p, ADDR, &r, &mem), 0);
	CHECK_EQ(r.rax, 0xffffffff80000001ull);
	r = regs0();
	r.rax = 0x1234567800000005ull;
	CHECK_EQ(ptw_insn_emulate(&p, ADDR, &r, &mem), 0);
	CHECK_EQ(r.rax, 5);

	p = PLAN(0xc3); /* ret: the event functions are a bare ret */
	CHECK_EQ(p.kind, PTW_INSN_RET);
	r = regs0();
	poke(r.rsp, 0x405060);
	CHECK_EQ(ptw_insn_emulate(&p, ADDR, &r, &mem), 0);
	CHECK_EQ(r.rip, 0x405060);
	CHECK_EQ(r.rsp, STACK + 2056);

	p = PLAN(0xc2, 0x10, 0x00); /* ret $16 */
	CHECK_EQ(p.kind, PTW_INSN_RET);
	r = regs0();
	poke(r.rsp, 0x405060);
	CHECK_EQ(ptw_insn_emulate(&p, ADDR, &r, &mem), 0);
	CHECK_EQ(r.rsp, STACK + 2048 + 8 + 16);

	p = PLAN(0xe9, 0x10, 0, 0, 0); /* jmp rel32 */
	CHECK_EQ(p.kind, PTW_INSN_JMP);
	r = regs0();
	CHECK_EQ(ptw_insn_emulate(&p, ADDR, &r, &mem), 0);
	CHECK_EQ(r.rip, ADDR + 5 + 0x10);

	p = PLAN(0xe8, 0x00, 0x01, 0, 0); /* call rel32 */
	CHECK_EQ(p.kind, PTW_INSN_CALL);
	r = regs0();
	CHECK_EQ(ptw_insn_emulate(&p, ADDR, &r, &mem), 0);
	CHECK_EQ(r.rip, ADDR + 5 + 0x100);
	CHECK_EQ(peek(r.rsp), ADDR + 5);
	CHECK_EQ(r.rsp, STACK + 2040);

	p = PLAN(0xff, 0x93, 0x38, 0x06, 0, 0); /* call *0x638(%rbx): start_thread */
	CHECK_EQ(p.kind, PTW_INSN_CALL);
	r = regs0();
	poke(r.rbx + 0x638, 0x401800);
	CHECK_EQ(ptw_insn_emulate(&p, ADDR, &r, &mem), 0);
	CHECK_EQ(r.rip, 0x401800);
	CHECK_EQ(peek(r.rsp), ADDR + 6);

	p = PLAN(0xff, 0xd0); /* call *%rax */
	CHECK_EQ(p.kind, PTW_INSN_CALL);

	p = PLAN(0x74, 0x05); /* je */
	CHECK_EQ(p.kind, PTW_INSN_JCC);
	r = regs0();
	r.eflags = 0x40; /* ZF */
	CHECK_EQ(ptw_insn_emulate(&p, ADDR, &r, &mem), 0);
	CHECK_EQ(r.rip, ADDR + 2 + 5);
	r = regs0();
	r.eflags = 0;
	CHECK_EQ(ptw_insn_emulate(&p, ADDR, &r, &mem), 0);
	CHECK_EQ(r.rip, ADDR + 2);

	p = PLAN(0x7c, 0x05); /* jl: SF != OF */
	r = regs0();
	r.eflags = 0x80;
	CHECK_EQ(ptw_insn_emulate(&p, ADDR, &r, &mem), 0);
	CHECK_EQ(r.rip, ADDR + 7);
	r.rip = ADDR;
	r.eflags = 0x880;
	CHECK_EQ(ptw_insn_emulate(&p, ADDR, &r, &mem), 0);
	CHECK_EQ(r.rip, ADDR + 2);

	/* A failing stack write leaves the registers untouched. */
	p = PLAN(0x55);
	r = regs0();
	r.rsp = 0x1000;
	struct user_regs_struct before = r;
	CHECK(ptw_insn_emulate(&p, ADDR, &r, &mem) < 0);
	CHECK(!memcmp(&r, &before, sizeof(r)));
}

static void test_out_of_line(void)
{
	struct ptw_insn_plan p;
	uint8_t slot[PTW_XOL_SLOT_SIZE];

	p = PLAN(0x48, 0x83, 0xec, 0x10); /* sub $16,%rsp: sets flags, runs out of line */
	CHECK_EQ(p.kind, PTW_INSN_XOL);
	CHECK(!p.rip_relative);
	int n = ptw_insn_xol_code(&p, ADDR, 0x7f0000000000ull, slot);
	CHECK_EQ(n, 4 + 14);
	CHECK(!memcmp(slot, "\x48\x83\xec\x10\xff\x25\0\0\0\0", 10));
	uint64_t back;
	memcpy(&back, slot + 10, 8);
	CHECK_EQ(back, ADDR + 4);

	p = PLAN(0x48, 0x85, 0xff); /* test %rdi,%rdi (pthread_detach) */
	CHECK_EQ(p.kind, PTW_INSN_XOL);

	p = PLAN(0x64, 0x48, 0x8b, 0x04, 0x25, 0x28, 0, 0, 0); /* mov %fs:0x28,%rax */
	CHECK_EQ(p.kind, PTW_INSN_XOL);

	/* mov 0x100(%rip),%rax from a slot 0x1000 below: displacement grows */
	p = PLAN(0x48, 0x8b, 0x05, 0x00, 0x01, 0, 0);
	CHECK_EQ(p.kind, PTW_INSN_XOL);
	CHECK(p.rip_relative);
	CHECK_EQ(p.disp_offset, 3);
	n = ptw_insn_xol_code(&p, ADDR, ADDR - 0x1000, slot);
	CHECK_EQ(n, 7 + 14);
	int32_t disp;
	memcpy(&disp, slot + 3, 4);
	CHECK_EQ((int64_t)(ADDR - 0x1000) + 7 + disp, (int64_t)ADDR + 7 + 0x100);
	/* ... and cannot reach from 4 GiB away */
	CHECK_EQ(ptw_insn_xol_code(&p, ADDR, ADDR + (5ull << 30), slot), -ERANGE);

	/* movdqa 0xe08(%rip),%xmm0 (66-prefixed: capstone 4 says its
	 * displacement is 2 bytes; it is 4, after the ModRM byte) */
	p = PLAN(0x66, 0x0f, 0x6f, 0x05, 0x08, 0x0e, 0, 0);
	CHECK_EQ(p.kind, PTW_INSN_XOL);
	CHECK(p.rip_relative);
	CHECK_EQ(p.disp_offset, 4);
	CHECK_EQ(p.disp_size, 4);
	CHECK_EQ(ptw_insn_xol_code(&p, ADDR, ADDR - 0x1000, slot), 8 + 14);
	memcpy(&disp, slot + 4, 4);
	CHECK_EQ((int64_t)(ADDR - 0x1000) + 8 + disp, (int64_t)ADDR + 8 + 0xe08);

	/* Control flow is never copied out of line. */
	p = PLAN(0xe2, 0x05); /* loop */
	CHECK_EQ(p.kind, PTW_INSN_UNSUPPORTED);
	p = PLAN(0xcd, 0x80); /* int $0x80 */
	CHECK_EQ(p.kind, PTW_INSN_UNSUPPORTED);
}

static void test_scanning(void)
{
	/* call rel32 ending at the return address */
	uint8_t before[8] = { 0x90, 0x90, 0x90, 0xe8, 0x10, 0x20, 0x30, 0x00 };
	CHECK_EQ(ptw_insn_call_length(before, 0x402000), 5);
	uint8_t reg_call[8] = { 0x90, 0x90, 0x90, 0x90, 0x90, 0x90, 0xff, 0xd0 };
	CHECK_EQ(ptw_insn_call_length(reg_call, 0x402000), 2);
	uint8_t no_call[8] = { 0x90, 0x90, 0x90, 0x90, 0x90, 0x90, 0x90, 0x90 };
	CHECK_EQ(ptw_insn_call_length(no_call, 0x402000), 0);

	/* pthread_join on glibc 2.36: three movs then a tail jump */
	static const uint8_t join[] = { 0x41, 0xb8, 0x01, 0, 0, 0, 0x31, 0xc9, 0x31,
					0xd2, 0xeb, 0x24 };
	uint64_t target = 0;
	CHECK_EQ(ptw_insn_tail_jump(join, sizeof(join), 0x8ab80, &target), 0);
	CHECK_EQ(target, 0x8ab80 + 12 + 0x24);
	static const uint8_t noj[] = { 0x55, 0xc3 };
	CHECK_EQ(ptw_insn_tail_jump(noj, sizeof(noj), 0x1000, &target), -ENOENT);

	static const uint8_t fn[] = { 0x55, 0x48, 0x89, 0xe5, 0x5d, 0xc3, 0x31, 0xc0, 0xf3, 0xc3 };
	uint64_t rets[4];
	CHECK_EQ(ptw_insn_find_rets(fn, sizeof(fn), 0x1000, rets, 4), 2);
	CHECK_EQ(rets[0], 0x1005);
	CHECK_EQ(rets[1], 0x1008);

	/* pthread_spin_lock on glibc 2.36: lock decl (%rdi); jne 1f; xor;
	 * ret; nopl; 1: pause; cmpl $0,(%rdi); jg <start>; jmp 1b */
	static const uint8_t spin[] = { 0xf0, 0xff, 0x0f, 0x75, 0x0b, 0x31, 0xc0, 0xc3, 0x0f,
					0x1f, 0x84, 0,	  0,	0,    0,    0,	  0xf3, 0x90,
					0x83, 0x3f, 0x00, 0x7f, 0xe9, 0xeb, 0xf7 };
	CHECK(ptw_insn_jumps_to(spin, sizeof(spin), 0x8ff70, 0x8ff70)); /* the jg */
	CHECK(ptw_insn_jumps_to(spin, sizeof(spin), 0x8ff70, 0x8ff80)); /* jne, jmp */
	CHECK(!ptw_insn_jumps_to(spin, sizeof(spin), 0x8ff70, 0x8ff73));
	CHECK(!ptw_insn_jumps_to(fn, sizeof(fn), 0x1000, 0x1000));
	CHECK(ptw_insn_jumps_within(spin, sizeof(spin), 0x8ff70, 0x8ff71, 0x8ff81)); /* jne */
	CHECK(!ptw_insn_jumps_within(spin, sizeof(spin), 0x8ff70, 0x8ff71, 0x8ff80));
}

/* What a function's entry probe may go past: nothing it reads changes. */
static void test_passable(void)
{
	static const struct {
		uint8_t code[12];
		size_t n;
		int len; /* 0: not passable */
	} cases[] = {
		{ { 0xf3, 0x0f, 0x1e, 0xfa }, 4, 4 }, /* endbr64 */
		{ { 0x89, 0xf8 }, 2, 2 },	      /* mov %edi,%eax */
		{ { 0x48, 0x89, 0xfb }, 3, 3 },	      /* mov %rdi,%rbx */
		{ { 0x31, 0xc0 }, 2, 2 },	      /* xor %eax,%eax */
		{ { 0x48, 0x85, 0xff }, 3, 3 },	      /* test %rdi,%rdi */
		{ { 0x8d, 0x47, 0x01 }, 3, 3 },	      /* lea 1(%rdi),%eax */
		{ { 0xb8, 0x27, 0, 0, 0 }, 5, 5 },    /* mov $0x27,%eax */
		/* cmpb $0,0x10(%rip): a read that cannot fault */
		{ { 0x80, 0x3d, 0x10, 0, 0, 0, 0 }, 7, 7 },
		/* mov %fs:0x10,%rax: the TCB */
		{ { 0x64, 0x48, 0x8b, 0x04, 0x25, 0x10, 0, 0, 0 }, 9, 9 },
		{ { 0xc5, 0xf9, 0x76, 0xc0 }, 4, 4 },	 /* vpcmpeqd */
		{ { 0x48, 0x83, 0xec, 0x18 }, 4, 0 },	 /* sub $0x18,%rsp */
		{ { 0x48, 0x89, 0xc7 }, 3, 0 },		 /* mov %rax,%rdi */
		{ { 0x31, 0xff }, 2, 0 },		 /* xor %edi,%edi */
		{ { 0x8b, 0x07 }, 2, 0 },		 /* mov (%rdi),%eax: can fault */
		{ { 0x89, 0x05, 0x10, 0, 0, 0 }, 6, 0 }, /* mov %eax,0x10(%rip): a write */
		{ { 0xc5, 0xfa, 0x6f, 0x07 }, 4, 0 },	 /* vmovdqu (%rdi),%xmm0 */
		{ { 0xf0, 0xff, 0x0f }, 3, 0 },		 /* lock decl (%rdi) */
		{ { 0xf3, 0x48, 0xab }, 3, 0 },		 /* rep stos */
		{ { 0x0f, 0x05 }, 2, 0 },		 /* syscall */
		{ { 0x55 }, 1, 0 },			 /* push %rbp */
		{ { 0x74, 0x02 }, 2, 0 },		 /* je */
		{ { 0xf7, 0xf1 }, 2, 0 },		 /* div %ecx: can trap */
		{ { 0x8e, 0xe0 }, 2, 0 },		 /* mov %eax,%fs */
		/* mov %fs:0x2000,%rax: past struct pthread's first page */
		{ { 0x64, 0x48, 0x8b, 0x04, 0x25, 0x00, 0x20, 0, 0 }, 9, 0 },
	};
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++)
		CHECK_EQ(ptw_insn_passable(cases[i].code, cases[i].n, 0x1000), cases[i].len);
}

/* A hook moved past a function's first instruction (beside another tool's
 * int3 there): what that instruction did to the stack pointer is undone. */
static void test_entry_step(void)
{
	uint64_t next = 0;
	uint32_t shift = 99;
	/* glibc 2.36's __pthread_clockjoin_ex: push %r15 */
	static const uint8_t push_r15[] = { 0x41, 0x57, 0x41, 0x56 };
	CHECK_EQ(ptw_insn_entry_step(push_r15, sizeof(push_r15), 0x1000, &next, &shift), 0);
	CHECK_EQ(next, 0x1002);
	CHECK_EQ(shift, 8);
	static const uint8_t push_rbp[] = { 0x55, 0x48, 0x89, 0xe5 };
	CHECK_EQ(ptw_insn_entry_step(push_rbp, sizeof(push_rbp), 0x1000, &next, &shift), 0);
	CHECK_EQ(next, 0x1001);
	CHECK_EQ(shift, 8);
	static const uint8_t endbr[] = { 0xf3, 0x0f, 0x1e, 0xfa, 0x55 };
	CHECK_EQ(ptw_insn_entry_step(endbr, sizeof(endbr), 0x1000, &next, &shift), 0);
	CHECK_EQ(next, 0x1004);
	CHECK_EQ(shift, 0);
	static const uint8_t sub_rsp[] = { 0x48, 0x83, 0xec, 0x28, 0xc3 }; /* sub $0x28,%rsp */
	CHECK_EQ(ptw_insn_entry_step(sub_rsp, sizeof(sub_rsp), 0x1000, &next, &shift), 0);
	CHECK_EQ(shift, 0x28);
	/* pthread_detach: test %rdi,%rdi; je: only the flags, then the jump on them */
	static const uint8_t test_je[] = { 0x48, 0x85, 0xff, 0x74, 0x3b };
	CHECK_EQ(ptw_insn_entry_step(test_je, sizeof(test_je), 0x1000, &next, &shift), 1);
	CHECK_EQ(next, 0x1003);
	CHECK_EQ(shift, 0);
	/* ... but not without its jump, nor of memory */
	static const uint8_t test_ret[] = { 0x48, 0x85, 0xff, 0xc3 };
	CHECK_EQ(ptw_insn_entry_step(test_ret, sizeof(test_ret), 0x1000, &next, &shift), -ENOTSUP);
	static const uint8_t cmp_mem[] = { 0x83, 0x3f, 0x00, 0x74, 0x02 }; /* cmpl $0,(%rdi); je */
	CHECK_EQ(ptw_insn_entry_step(cmp_mem, sizeof(cmp_mem), 0x1000, &next, &shift), -ENOTSUP);
	/* what cannot be undone: _dl_debug_state's lone ret, a mov to rbp, a
	 * push of memory, a call */
	static const uint8_t ret[] = { 0xc3, 0x66, 0x90 };
	CHECK_EQ(ptw_insn_entry_step(ret, sizeof(ret), 0x1000, &next, &shift), -ENOTSUP);
	static const uint8_t mov_rbp[] = { 0x48, 0x89, 0xe5, 0xc3 };
	CHECK_EQ(ptw_insn_entry_step(mov_rbp, sizeof(mov_rbp), 0x1000, &next, &shift), -ENOTSUP);
	static const uint8_t push_mem[] = { 0xff, 0x37, 0xc3 }; /* push (%rdi) */
	CHECK_EQ(ptw_insn_entry_step(push_mem, sizeof(push_mem), 0x1000, &next, &shift), -ENOTSUP);
	static const uint8_t call[] = { 0xe8, 0x00, 0x00, 0x00, 0x00 };
	CHECK_EQ(ptw_insn_entry_step(call, sizeof(call), 0x1000, &next, &shift), -ENOTSUP);
}

/* Where the calls of a function return (ld.so's callers of
 * _dl_debug_state): a sweep from the function's start that stops where it
 * cannot decode. */
static void test_return_sites(void)
{
	/* 0x1000: push rbp; call 0x2000; nop; call 0x3000; call 0x2000; ret */
	static const uint8_t fn[] = { 0x55, 0xe8, 0xfa, 0x0f, 0x00, 0x00, 0x90, 0xe8, 0xf4,
				      0x1f, 0x00, 0x00, 0xe8, 0xef, 0x0f, 0x00, 0x00, 0xc3 };
	uint64_t out[4];
	CHECK_EQ(ptw_insn_find_return_sites(fn, sizeof(fn), 0x1000, 0x2000, out, 4), 2);
	CHECK_EQ(out[0], 0x1006);
	CHECK_EQ(out[1], 0x1011);
	CHECK_EQ(ptw_insn_find_return_sites(fn, sizeof(fn), 0x1000, 0x2000, out, 1), 1);
	/* nothing after a byte that does not decode */
	static const uint8_t bad[] = { 0x06, 0xe8, 0xfa, 0x0f, 0x00, 0x00 }; /* (push es: not in 64-bit) */
	CHECK_EQ(ptw_insn_find_return_sites(bad, sizeof(bad), 0x1000, 0x2000, out, 4), 0);
}

/* How a function can leave: its rets, its jumps out (a jcc with its
 * condition, an indirect jump with its operand), not its jumps inside; a
 * sweep that cannot decode every byte, or finds a branch into an
 * instruction, refuses the function. */
static void test_exits(void)
{
	static const uint8_t fn[] = {
		0x85, 0xff,			    /* 0x1000 test %edi,%edi */
		0x74, 0x06,			    /* 0x1002 je 0x100a (inside) */
		0x0f, 0x85, 0xf6, 0x0f, 0x00, 0x00, /* 0x1004 jne 0x2000 */
		0xff, 0xe0,			    /* 0x100a jmp *%rax */
		0xff, 0x25, 0x00, 0x01, 0x00, 0x00, /* 0x100c jmp *0x100(%rip) */
		0xc2, 0x08, 0x00,		    /* 0x1012 ret $8 */
		0xe9, 0xe6, 0x2f, 0x00, 0x00,	    /* 0x1015 jmp 0x4000 */
		0xc3,				    /* 0x101a ret */
	};
	struct ptw_insn_exit *ex;
	size_t n;
	CHECK_EQ(ptw_insn_exits(fn, sizeof(fn), 0x1000, &ex, &n), 0);
	CHECK_EQ(n, 6);
	if (n == 6) {
		CHECK_EQ(ex[0].addr, 0x1004);
		CHECK_EQ(ex[0].kind, PTW_EXIT_JCC);
		CHECK_EQ(ex[0].cond, 5);
		CHECK_EQ(ex[0].target, 0x2000);
		CHECK_EQ(ex[1].addr, 0x100a);
		CHECK_EQ(ex[1].kind, PTW_EXIT_JUMP_INDIRECT);
		CHECK_EQ(ex[1].op.type, PTW_OPND_REG);
		CHECK_EQ(ex[1].op.reg, (int)offsetof(struct user_regs_struct, rax));
		CHECK_EQ(ex[2].kind, PTW_EXIT_JUMP_INDIRECT);
		CHECK_EQ(ex[2].op.type, PTW_OPND_MEM);
		CHECK_EQ(ex[2].op.base, PTW_REG_RIP);
		CHECK_EQ(ex[2].op.disp, 0x100);
		CHECK_EQ(ex[2].len, 6);
		CHECK_EQ(ex[3].addr, 0x1012);
		CHECK_EQ(ex[3].kind, PTW_EXIT_RET);
		CHECK_EQ(ex[4].kind, PTW_EXIT_JUMP);
		CHECK_EQ(ex[4].target, 0x4000);
		CHECK_EQ(ex[5].addr, 0x101a);
		CHECK_EQ(ex[5].kind, PTW_EXIT_RET);
	}
	free(ex);
	/* the last instruction cut */
	CHECK_EQ(ptw_insn_exits(fn, sizeof(fn) - 3, 0x1000, &ex, &n), -EILSEQ);
	CHECK(ex == NULL);
	/* a branch into the middle of an instruction (je 0x1009) */
	uint8_t bad[sizeof(fn)];
	memcpy(bad, fn, sizeof(fn));
	bad[3] = 0x05;
	CHECK_EQ(ptw_insn_exits(bad, sizeof(bad), 0x1000, &ex, &n), -EILSEQ);
	/* a byte that does not decode (push %es) */
	bad[3] = 0x06;
	bad[0] = 0x06;
	CHECK_EQ(ptw_insn_exits(bad, sizeof(bad), 0x1000, &ex, &n), -EILSEQ);
	/* a jump over a lock prefix, to the instruction it prefixes (glibc's
	 * atomics for one thread): the same instructions after it */
	static const uint8_t lockskip[] = {
		0x74, 0x01,		  /* 0x1000 je 0x1003 */
		0xf0, 0x0f, 0xb1, 0x0f,	  /* 0x1002 lock cmpxchg %ecx,(%rdi) */
		0xc3,			  /* 0x1006 ret */
	};
	CHECK_EQ(ptw_insn_exits(lockskip, sizeof(lockskip), 0x1000, &ex, &n), 0);
	CHECK_EQ(n, 1);
	free(ex);
	/* a loop out of the function: not modelled */
	static const uint8_t loop[] = { 0xe2, 0x10, 0xc3 }; /* loop 0x1012; ret */
	CHECK_EQ(ptw_insn_exits(loop, sizeof(loop), 0x1000, &ex, &n), -ENOTSUP);
}

int main(void)
{
	test_exits();
	test_return_sites();
	test_entry_step();
	test_emulated();
	test_out_of_line();
	test_scanning();
	test_passable();
	CHECK_DONE();
}
