/* SPDX-License-Identifier: MIT */
/*
 * int3 breakpoints: a table of breakpoint objects, the journal of every byte
 * ptwatch patched, and stepping over the displaced instruction without a
 * single step: emulated when the instruction allows it, otherwise executed
 * out of line (XOL) in a page of the target followed by a jump back.
 *
 * Safety rules (docs/design.md, "Safety invariants"): the journal entry is written
 * before the byte is poked; bytes are restored through /proc/PID/mem; a
 * breakpoint is never removed while the process runs; no trap flag, no debug
 * registers.
 */
#ifndef PTW_BREAKPOINTS_H
#define PTW_BREAKPOINTS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>
#include <sys/user.h>

struct ptw_proc;
struct ptw_lwp;

/* ---- instruction plans (pure; unit-tested) ---- */

enum ptw_insn_kind {
	PTW_INSN_UNSUPPORTED,
	PTW_INSN_NOP,	   /* endbr64, nop, ...: rip += len */
	PTW_INSN_PUSH_REG, /* push r64 */
	PTW_INSN_MOV_REG,  /* mov r64, r64 / mov r32, r32 (zero-extends) */
	PTW_INSN_MOV_IMM,  /* mov r64/r32, imm */
	PTW_INSN_LEA,	   /* lea r64, [mem] */
	PTW_INSN_CDQE,	   /* cltq */
	PTW_INSN_RET,	   /* ret [imm16] */
	PTW_INSN_JMP,	   /* jmp rel / reg / [mem] */
	PTW_INSN_JCC,	   /* jcc rel */
	PTW_INSN_CALL,	   /* call rel / reg / [mem] */
	PTW_INSN_XOL,	   /* anything else we can copy: run it out of line */
};

/* Where an operand's value comes from. */
struct ptw_insn_operand {
	enum { PTW_OPND_NONE, PTW_OPND_IMM, PTW_OPND_REG, PTW_OPND_MEM } type;
	int reg;      /* user_regs_struct slot (see ptw_insn_reg_slot), -1 none */
	int width;    /* operand width in bytes for REG (4 or 8) */
	int64_t imm;
	/* MEM: [seg: base + index * scale + disp]; base may be PTW_REG_RIP */
	int base, index, scale, seg;
	int64_t disp;
};

#define PTW_REG_RIP 100
#define PTW_REG_FS 101
#define PTW_REG_GS 102

struct ptw_insn_plan {
	enum ptw_insn_kind kind;
	uint8_t len;
	uint8_t bytes[16]; /* the original instruction */
	struct ptw_insn_operand dst, src;
	int cond;	   /* JCC: capstone instruction id */
	uint16_t ret_pop;  /* RET imm16 */
	uint8_t disp_offset, disp_size; /* XOL: rip-relative displacement to relocate */
	bool rip_relative;
	char text[48];	   /* "push rbp", for --debug and errors */
};

/*
 * Decodes the instruction at addr (code holds the original bytes, len >= 1)
 * and chooses how to step over it. Returns 0, or -ENOTSUP when it can be
 * neither emulated nor executed out of line (-EINVAL: undecodable).
 */
int ptw_insn_plan(const uint8_t *code, size_t len, uint64_t addr, struct ptw_insn_plan *ret);

/* Target memory for emulation (the stack). */
struct ptw_insn_mem {
	int (*read)(void *ctx, uint64_t addr, void *buf, size_t len);
	int (*write)(void *ctx, uint64_t addr, const void *buf, size_t len);
	void *ctx;
};

/*
 * Emulates plan at addr on regs (rip must equal addr). Returns 0, or -errno
 * if memory access failed (regs then untouched). Not for PTW_INSN_XOL.
 */
int ptw_insn_emulate(const struct ptw_insn_plan *plan, uint64_t addr, struct user_regs_struct *regs,
		     const struct ptw_insn_mem *mem);

/*
 * Builds the out-of-line copy of plan (originally at addr) for a slot at
 * slot_addr: the instruction, its rip-relative displacement adjusted, then
 * `jmp *0(%rip)` back to addr + len. Returns the byte count (<= 32) or
 * -ERANGE when the displacement does not reach from the slot.
 */
#define PTW_XOL_SLOT_SIZE 32
int ptw_insn_xol_code(const struct ptw_insn_plan *plan, uint64_t addr, uint64_t slot_addr,
		      uint8_t out[PTW_XOL_SLOT_SIZE]);

/* If the bytes just before ret_addr (before[0..7] = ret_addr-8 .. ret_addr-1)
 * end with a call instruction, its length (2..7); else 0. */
int ptw_insn_call_length(const uint8_t before[8], uint64_t ret_addr);

/*
 * A function's first instruction (code: its bytes at addr, as in its file),
 * when what it does is undone by adding *ret_sp_shift to the stack
 * pointer (endbr64, a nop, push of a register, sub of a constant from rsp):
 * 0, and the next instruction's address in *ret_next; 1 for a test or cmp
 * of registers followed by a conditional jump (only the flags change, and
 * no branch lands between the two). A hook moved there sees the call's
 * registers as at the entry (rsp + shift, the arguments untouched).
 * -ENOTSUP for any other instruction.
 */
int ptw_insn_entry_step(const uint8_t *code, size_t len, uint64_t addr, uint64_t *ret_next,
			uint32_t *ret_sp_shift);

/* First `jmp rel` among the first few instructions of code (a tail call such
 * as pthread_join -> __pthread_clockjoin_ex): 0 and *ret_target, or -ENOENT. */
int ptw_insn_tail_jump(const uint8_t *code, size_t len, uint64_t addr, uint64_t *ret_target);

/* Addresses of the `ret` instructions found by a linear sweep of a function
 * (code = its bytes at addr). Returns how many were stored (at most max). */
int ptw_insn_find_rets(const uint8_t *code, size_t len, uint64_t addr, uint64_t *out, int max);
/* The targets of the direct calls (call rel32) in code, in order, at most max;
 * with tail_jumps, those of the jumps out of code (tail calls) instead. */
int ptw_insn_find_calls(const uint8_t *code, size_t len, uint64_t addr, bool tail_jumps, uint64_t *out,
			int max);

/* Whether a direct jump (jmp, jcc) in code (a function's bytes at addr)
 * goes to target: a loop back to its start, if target is that; _within:
 * to an address in [lo, hi). */
bool ptw_insn_jumps_to(const uint8_t *code, size_t len, uint64_t addr, uint64_t target);
bool ptw_insn_jumps_within(const uint8_t *code, size_t len, uint64_t addr, uint64_t lo,
			   uint64_t hi);

/*
 * The length of the instruction at code (at addr) when a probe past it
 * sees what one before it would of a call just made: it writes neither
 * rsp nor rdi (the first argument, a handler's signal) nor memory,
 * reads memory only where a read cannot fault (rip-relative, a fixed
 * offset from fs), cannot branch, trap or block, and has no lock or rep
 * prefix (a move or arithmetic between registers, a compare, endbr64).
 * 0 for any other; -ENOTSUP without capstone.
 */
int ptw_insn_passable(const uint8_t *code, size_t len, uint64_t addr);

/* The addresses just after the direct calls of callee in code (a
 * function's bytes at addr): where those calls return. A linear sweep
 * from the function's start that stops at the first byte it cannot
 * decode (nothing after it is trusted). Returns how many (at most max). */
int ptw_insn_find_return_sites(const uint8_t *code, size_t len, uint64_t addr, uint64_t callee,
			       uint64_t *out, int max);

/* The addresses that `lea disp(%rip), reg` instructions in code compute
 * (a function's address handed on, as pthread_create hands start_thread
 * to clone), in order, at most max. */
int ptw_insn_find_rip_leas(const uint8_t *code, size_t len, uint64_t addr, uint64_t *out, int max);

/* How a function's code leaves it (ptw_insn_exits). */
enum ptw_insn_exit_kind {
	PTW_EXIT_RET,		/* ret [imm16] */
	PTW_EXIT_JUMP,		/* jmp rel to target, outside the function */
	PTW_EXIT_JCC,		/* jcc rel to target, outside: cond (the opcode's low nibble) */
	PTW_EXIT_JUMP_INDIRECT, /* jmp reg / [mem]: op (its target may be inside: a jump table) */
};

struct ptw_insn_exit {
	uint64_t addr;
	uint8_t len;
	enum ptw_insn_exit_kind kind;
	int cond;
	uint64_t target;
	struct ptw_insn_operand op;
};

/*
 * The instructions by which a function (code: its bytes at addr, len of
 * them, its whole extent) can leave it, from a sweep that must decode
 * every byte, in order, with every direct branch inside landing on an
 * instruction it decoded: a probe off an instruction boundary would
 * corrupt the program. *ret (malloc'ed) and *ret_n. Returns 0, -EILSEQ
 * (a byte it cannot decode, the last instruction cut at the end, a branch
 * into an instruction), -ENOTSUP (an exit it cannot model: a
 * segment-relative jump, a loop or jrcxz out of the function).
 */
int ptw_insn_exits(const uint8_t *code, size_t len, uint64_t addr, struct ptw_insn_exit **ret,
		   size_t *ret_n);

/* Offset of a 64-bit register in struct user_regs_struct for a capstone
 * x86_reg (and its 32-bit alias, *ret_width = 4), or -1. */
int ptw_insn_reg_slot(int cs_reg, int *ret_width);

/* ---- the breakpoint table ---- */

struct ptw_bp {
	uint64_t addr;
	uint8_t orig;		 /* the byte the int3 replaced */
	bool disabled;		 /* original byte back; kept to recognise late traps */
	bool idle;		 /* disabled because no hook needs it: insert re-arms it */
	uint32_t journal_index;
	struct ptw_insn_plan plan;
	uint64_t xol_slot;	 /* PTW_INSN_XOL: where the copy runs */
	bool xol_tried;		 /* an emulated push or ret looked for a slot */
	unsigned hooks;		 /* the tracer's hook bits */
	/* A hook moved here from a function's entry another tool's int3
	 * holds (ptw_bp_insert returned 1): that entry, and what the first
	 * instruction took off the stack pointer (0: not moved). */
	uint64_t entry;
	uint32_t entry_sp;
	bool beside; /* ... because another tool's int3 is there */
};

struct ptw_bptab;

/* Table for proc; opens capstone. Returns 0 or -errno. */
int ptw_bptab_new(struct ptw_proc *proc, struct ptw_bptab **ret);
void ptw_bptab_free(struct ptw_bptab *t);

/*
 * Inserts (or adds hooks to) a breakpoint at addr. host is a stopped LWP
 * that may run an injected mmap if an out-of-line page is needed (NULL: none
 * available; then -EAGAIN if one was needed). Returns 0 and the breakpoint,
 * -ENOTSUP when the instruction cannot be stepped over safely, -EEXIST when
 * the program's own int3 is there (its file has it), -EFAULT when addr is
 * not in an executable mapping, or -errno. Another tool's int3 at addr (a
 * kernel uprobe: bpftrace, perf; another debugger's; the file does not have
 * it): 1 and a breakpoint moved to the next instruction (bp->entry = addr)
 * when the first can be undone, else -EBUSY. A breakpoint made idle by
 * ptw_bp_remove_hooks is armed again (its journal entry reused).
 */
int ptw_bp_insert(struct ptw_bptab *t, uint64_t addr, unsigned hooks, struct ptw_lwp *host,
		  struct ptw_bp **ret);
/*
 * As ptw_bp_insert, but a function entry's hooks go to its second
 * instruction when the first moves the stack pointer (a push, a sub) or
 * is a test before its conditional jump (no branch inside the function
 * goes there): 1 and that breakpoint
 * (bp->entry = addr). Where the kernel keeps a uprobe at an entry (another
 * tool's, or one whose last user has gone but the kernel still holds), an
 * int3 of ptwatch's there is taken by the kernel in a process that has
 * uprobes, never reported to ptrace; past the entry it is ptwatch's.
 */
int ptw_bp_insert_past_entry(struct ptw_bptab *t, uint64_t addr, unsigned hooks,
			     struct ptw_lwp *host, struct ptw_bp **ret);
struct ptw_bp *ptw_bp_find(struct ptw_bptab *t, uint64_t addr);

/*
 * Steps LWP l (stopped at bp, rip already rewound to bp->addr) over the
 * displaced instruction: emulates it or sends it to the XOL slot. Only
 * registers and stack change; the int3 stays in place.
 */
int ptw_bp_step_over(struct ptw_bptab *t, struct ptw_bp *bp, struct ptw_lwp *l);

/*
 * Puts the original byte back while the process runs, keeping the entry so
 * that a trap already taken on it (its SIGTRAP not yet reaped) is still
 * recognised as ours: the thread is then only rewound.
 */
int ptw_bp_disable(struct ptw_bptab *t, struct ptw_bp *bp);

/*
 * Takes hooks off bp; when none is left, puts the original byte back (as
 * ptw_bp_disable: late traps stay recognised) until an insert wants it
 * again. Returns 0 or -errno.
 */
int ptw_bp_remove_hooks(struct ptw_bptab *t, struct ptw_bp *bp, unsigned hooks);

/*
 * After a library was unloaded: forgets (without writing) every breakpoint
 * whose mapping is not the one it was put into. Returns how many.
 */
int ptw_bp_revalidate(struct ptw_bptab *t);

/* Whether any qword of buf[0..len) points into an out-of-line page. */
bool ptw_bp_refers_to_xol(const struct ptw_bptab *t, const void *buf, size_t len);

/* Reads target memory as it would be without our int3 bytes. */
int ptw_bp_read_original(struct ptw_bptab *t, uint64_t addr, void *buf, size_t len);

/*
 * A thread stopped inside an out-of-line slot is about to run the displaced
 * instruction (rip at the slot) or to jump back (rip after it): the same
 * point in the original code is bp->addr or bp->addr + len. Returns true
 * and *ret_rip if rip is in a slot.
 */
bool ptw_bp_xol_origin(const struct ptw_bptab *t, uint64_t rip, uint64_t *ret_rip);
/* Unmaps the out-of-line pages (detach; no thread may be in one: move them
 * out with ptw_bp_xol_origin first). host runs the munmaps. Returns the
 * number of pages left mapped. */
int ptw_bp_unmap_xol(struct ptw_bptab *t, struct ptw_lwp *host);

/* A fork child got a copy of parent's out-of-line pages (same addresses,
 * same slots): child's table takes them as its own (journaled, used for
 * its slots, unmapped at its detach) instead of mapping new ones, which
 * would cost an injected system call in every child. */
void ptw_bp_adopt_xol(struct ptw_bptab *child, const struct ptw_bptab *parent);
/* Writes back every journaled byte whose mapping is unchanged (detach).
 * Returns the number of bytes that could not be restored. */
int ptw_bp_restore_all(struct ptw_bptab *t);
/* Same for the copy of our address space in fork child pid (or for a
 * process that shares it): every journaled byte, active or put back since,
 * that is still our int3 there in the same file range (the parent may have
 * put a byte back, or patched one, after the fork copied its memory and
 * before the fork event was seen). Returns the number not restored. */
int ptw_bp_restore_in(struct ptw_bptab *t, pid_t pid);
/* The address space is gone (exec): forget everything without writing. */
void ptw_bp_forget_all(struct ptw_bptab *t);

/* Breakpoints inserted over the session (exec included). */
size_t ptw_bp_count(const struct ptw_bptab *t);
/* Pages mapped for out-of-line execution, for the report. */
size_t ptw_bp_xol_pages(const struct ptw_bptab *t);

/*
 * Last-resort restore from a fatal-signal handler in ptwatch: only pwrite on
 * an already open fd. Safe to call at any time.
 */
void ptw_bp_emergency_restore(void);

/*
 * The journals in a shared mapping, created before ptwatch splits in two so
 * that the guardian (the other process) sees every entry: one slot per
 * traced process (fork children followed with -f have their own), taken by
 * ptw_bptab_new (-ENOSPC when every slot is held) and given back by
 * ptw_bptab_free. Returns 0 or -errno; without it each table keeps a
 * private journal.
 */
int ptw_bp_journal_prepare(void);
/* Guardian: the processes that have journaled bytes (up to max). */
size_t ptw_bp_journal_pids(pid_t *pids, size_t max);
/* Guardian: writes back every active entry of pid through mem_fd (the
 * tracer is gone). Returns the number that could not be restored. */
int ptw_bp_journal_restore(pid_t pid, int mem_fd, int *ret_restored);
/* Guardian: a process that parent forked before the tracer had set it up
 * (or without -f) holds a copy of parent's int3s: puts back, through
 * /proc/CHILD/mem, each journaled byte of parent that is still an int3 in
 * child's same mapping. Returns 0 or -errno (cannot open its memory). */
int ptw_bp_journal_restore_copy(pid_t parent, pid_t child, int *ret_restored);
/* Guardian: the first process the journals are about (0 if none yet). */
pid_t ptw_bp_journal_pid(void);
/* Guardian: the out-of-line pages still mapped in pid (up to max in pages)
 * and the address of a `syscall` instruction there. Returns how many. */
size_t ptw_bp_journal_xol(pid_t pid, uint64_t *pages, size_t max, uint64_t *ret_syscall_insn);
/* Guardian: it unmapped that page. */
void ptw_bp_journal_xol_unmapped(pid_t pid, uint64_t page);

#endif
