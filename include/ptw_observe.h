/* SPDX-License-Identifier: MIT */
/*
 * What a thread's raw observations mean, the same for both backends and
 * the span engine: the shadow stack rules (which frames an entry, a return,
 * a catch or a jump leaves) and the wait-for graph (who waits for whom, and
 * its cycles). Pure: no ptrace, no BPF, no clock; unit-tested with
 * synthetic input (tests/unit/test_frames.c, test_locks.c).
 */
#ifndef PTW_OBSERVE_H
#define PTW_OBSERVE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

/* ---- the shadow stack rules (the tracer keeps its own stacks to know which
 * return breakpoints are still needed; the kernel path to pair returns) ---- */

/* One open frame: its entry stack pointer ([sp] = return address). */
struct ptw_shadow_frame {
	uint64_t sp;
	uint64_t ret;
	uint32_t id; /* the caller's: frame span id, or anything */
};

/* Two stack pointers further apart than this are on different stacks (a
 * signal handler on sigaltstack): neither says anything about the other. */
#define PTW_SHADOW_WINDOW (64ull << 20)

/* A context switch (setcontext) landing at sp, with the frames of the
 * context it runs at fsp: is it a jump within that context (like a
 * longjmp), not to another one? */
static inline bool ptw_shadow_same_stack(uint64_t fsp, uint64_t sp)
{
	return (fsp >= sp ? fsp - sp : sp - fsp) < PTW_SHADOW_WINDOW;
}

/*
 * The thread enters a function at stack pointer sp: how many frames at the
 * top of stack (st[0..n), innermost last) it has left. *ret_tail_call: the
 * last of those was left by a tail call (the new frame reuses its return
 * slot and address).
 */
size_t ptw_shadow_left_at_entry(const struct ptw_shadow_frame *st, size_t n, uint64_t sp,
				uint64_t ret, bool *ret_tail_call);

/*
 * The thread is at stack pointer sp outside every frame below it (after a
 * return to ret, or in a catch block: ret 0): how many frames at the top it
 * has left. *ret_returned: the outermost of those returned normally (its
 * slot is sp - 8 and its return address ret).
 */
size_t ptw_shadow_left_at(const struct ptw_shadow_frame *st, size_t n, uint64_t sp, uint64_t ret,
			  bool *ret_returned);

/* Is a frame entered at fsp left once the thread is at sp (above it)? */
static inline bool ptw_shadow_above(uint64_t fsp, uint64_t sp)
{
	return fsp < sp && sp - fsp < PTW_SHADOW_WINDOW;
}

/* The rules themselves, on any stack layout: sp_of(i) and ret_of(i) for
 * i = 0 (innermost) up; they set the caller's size_t left_ (the functions
 * above apply them to a struct ptw_shadow_frame array). */
#define PTW_SHADOW_LEFT_AT_ENTRY(n, sp_of, ret_of, sp, ret, tail)                                  \
	do {                                                                                       \
		size_t k_ = 0;                                                                     \
		/* A new call at sp: every frame whose slot is at or below sp is over              \
		 * (its slot is being reused, or was popped). */                                   \
		while (k_ < (n) && (ptw_shadow_above(sp_of(k_), (sp)) || sp_of(k_) == (sp)))       \
			k_++;                                                                      \
		/* same slot, same return address: a jmp */                                        \
		*(tail) = k_ && sp_of(k_ - 1) == (sp) && ret_of(k_ - 1) == (ret);                  \
		left_ = k_;                                                                        \
	} while (0)

#define PTW_SHADOW_LEFT_AT(n, sp_of, ret_of, sp, ret, returned)                                    \
	do {                                                                                       \
		size_t k_ = 0;                                                                     \
		while (k_ < (n) && ptw_shadow_above(sp_of(k_), (sp))) {                            \
			k_++;                                                                      \
			/* a return leaves one frame: none outside it (a signal handler's          \
			 * on sigaltstack may lie below the frames it interrupted) */              \
			if ((ret) && sp_of(k_ - 1) + 8 == (sp) && ret_of(k_ - 1) == (ret))         \
				break;                                                             \
		}                                                                                  \
		*(returned) = k_ && (ret) && sp_of(k_ - 1) + 8 == (sp) && ret_of(k_ - 1) == (ret); \
		left_ = k_;                                                                        \
	} while (0)

/* ---- the wait-for graph (both backends keep one) ---- */

/* Who thread tid waits for now (the owner of what it waits on, the thread
 * it joins), 0 for nobody known. */
typedef pid_t (*ptw_owner_fn)(void *ctx, pid_t tid);

/*
 * Follows "waits for" from thread `from`: when the links come back to it,
 * writes the cycle into ret (from first, then whom it waits for, ...) and
 * returns its length (>= 2); else 0. Every thread waits for at most one
 * other, so a walk of at most max steps decides. A link into a cycle that
 * does not contain `from` is no cycle of its: 0.
 */
size_t ptw_wait_cycle(pid_t from, ptw_owner_fn owner_of, void *ctx, pid_t *ret, size_t max);

#endif
