/* SPDX-License-Identifier: MIT */
/*
 * What a thread's raw observations mean, the same for both backends and
 * the span engine: its shadow stack (which frames an entry, a return, a
 * catch, a jump, a context switch or a signal leaves) and the wait-for
 * graph (who waits for whom, and its cycles). Pure: no ptrace, no BPF, no
 * clock; unit-tested with synthetic input (tests/unit/test_shadow.c,
 * test_frames.c, test_locks.c).
 */
#ifndef PTW_OBSERVE_H
#define PTW_OBSERVE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "ptw_events.h"

/* ---- the shadow stack: a thread's open traced calls ----
 *
 * One per thread, kept by the tracer (which return breakpoints are still
 * needed), the kernel path's converter (which returns pair, which the
 * kernel dropped) and the span engine (frame spans), from the same raw
 * observations: an entry at sp with its return address, a return at sp, a
 * catch, a longjmp's landing, a context switch, a signal's delivery and
 * sigreturn, calls under way at an attach. Every frame it leaves goes to
 * the owner's ptw_shadow_left_fn, innermost first. Pure.
 */

/* One open frame: its entry stack pointer ([sp] = return address). */
struct ptw_shadow_frame {
	uint64_t sp;
	uint64_t ret;
	uintptr_t tag; /* the owner's: how its return is seen, its frame span */
};

/* Frames of one context, innermost last. */
struct ptw_shadow_context {
	uint64_t resume_sp; /* parked: where the thread is when it comes back */
	struct ptw_shadow_frame *st;
	size_t n, cap;
	uint64_t base; /* the owner's, parked and resumed with the frames */
};

/* A caught signal being handled (its delivery until its sigreturn). */
struct ptw_shadow_signal {
	uint64_t sp; /* what it interrupted */
	size_t n;    /* the frames open then */
	int sig;
};

struct ptw_shadow {
	struct ptw_shadow_context run;	   /* the context the thread runs */
	struct ptw_shadow_context *parked; /* those it left (swapcontext) */
	size_t nparked;
	struct ptw_shadow_signal *sigs; /* innermost last */
	size_t nsigs, sigs_cap;
};

/* How a frame was left. */
enum ptw_shadow_how {
	PTW_SHADOW_LEFT,      /* without a return (a longjmp, an exception, a jump) */
	PTW_SHADOW_RETURNED,  /* it returned (the outermost one a return leaves) */
	PTW_SHADOW_TAIL_CALL, /* a tail call reuses its slot (at an entry) */
	PTW_SHADOW_ABANDONED, /* in a context left for good (setcontext away from it;
			       * parked, never resumed, at the end) */
};
typedef void (*ptw_shadow_left_fn)(void *ctx, const struct ptw_shadow_frame *f,
				   enum ptw_shadow_how how);

/* Two stack pointers further apart than this are on different stacks (a
 * signal handler on sigaltstack): neither says anything about the other. */
#define PTW_SHADOW_WINDOW (64ull << 20)

/* Is sp on the same stack as a frame entered at fsp? */
static inline bool ptw_shadow_same_stack(uint64_t fsp, uint64_t sp)
{
	return (fsp >= sp ? fsp - sp : sp - fsp) < PTW_SHADOW_WINDOW;
}

/* Is a frame entered at fsp left once the thread is at sp (above it)? */
static inline bool ptw_shadow_above(uint64_t fsp, uint64_t sp)
{
	return fsp < sp && sp - fsp < PTW_SHADOW_WINDOW;
}

/* The innermost open frame, or NULL. */
static inline struct ptw_shadow_frame *ptw_shadow_top(struct ptw_shadow *s)
{
	return s->run.n ? &s->run.st[s->run.n - 1] : NULL;
}

/* The innermost signal being handled with no traced call of its handler
 * open yet (the next entry is its handler's first), or NULL. */
const struct ptw_shadow_signal *ptw_shadow_handling(const struct ptw_shadow *s);

/*
 * A traced function is entered at sp, returning to ret: the frames whose
 * return slot is at or below sp are left (a tail call reusing the
 * innermost one's slot and address: PTW_SHADOW_TAIL_CALL). Not by a
 * signal handler (handler: entered with the sigreturn trampoline as its
 * return address) nor by the first traced call of one being handled
 * (marks: the owner sees every delivery and sigreturn): those run below,
 * or beside on a sigaltstack, what they interrupted. Then pushed with tag.
 */
void ptw_shadow_enter(struct ptw_shadow *s, uint64_t sp, uint64_t ret, uintptr_t tag, bool handler,
		      bool marks, ptw_shadow_left_fn left, void *ctx);

/*
 * The thread is at sp having returned to ip: how many frames that leaves
 * (0: the return site reached another way, nothing ends). The outermost
 * of them returned if its slot was sp - 8 and its address ip.
 */
size_t ptw_shadow_return(struct ptw_shadow *s, uint64_t sp, uint64_t ip, ptw_shadow_left_fn left,
			 void *ctx);

/*
 * The frame whose return slot is sp is left by a jump out of its function
 * into code not traced (the kernel path sees that jump, not the return
 * that follows): it ends PTW_SHADOW_TAIL_CALL, those below it left.
 * Returns how many end (0: no frame has that slot, nothing ends).
 */
size_t ptw_shadow_tail(struct ptw_shadow *s, uint64_t sp, ptw_shadow_left_fn left, void *ctx);

/* The thread lands at sp without a return (a catch block, a longjmp): the
 * frames below are left, and the signals whose interrupted code it lands
 * above are over. */
void ptw_shadow_land(struct ptw_shadow *s, uint64_t sp, ptw_shadow_left_fn left, void *ctx);

/* What ptw_shadow_switch did. */
enum ptw_shadow_switched {
	PTW_SHADOW_JUMPED = 1,	/* setcontext within the running context: a landing */
	PTW_SHADOW_PARKED = 2,	/* the running context's frames kept for a return */
	PTW_SHADOW_DROPPED = 4, /* ... or left (setcontext: nothing comes back) */
	PTW_SHADOW_RESUMED = 8, /* a parked context runs again */
};

/*
 * setcontext (resume 0) or swapcontext (resume: where the context left
 * will be when resumed) to a context whose stack pointer is to. Returns
 * PTW_SHADOW_* flags; a new context starts empty (base 0).
 */
unsigned ptw_shadow_switch(struct ptw_shadow *s, uint64_t to, uint64_t resume,
			   ptw_shadow_left_fn left, void *ctx);

/* A caught signal sig is delivered, interrupting the thread at sp; its
 * handler's sigreturn. */
void ptw_shadow_signal(struct ptw_shadow *s, uint64_t sp, int sig);
void ptw_shadow_sigreturn(struct ptw_shadow *s);

/* Calls under way at an attach, outermost first, go below the frames
 * already open. */
void ptw_shadow_under_way(struct ptw_shadow *s, const struct ptw_shadow_frame *v, size_t n);

/* The thread is gone: every frame is left (parked ones ABANDONED), and
 * the memory freed; s is empty and usable again. */
void ptw_shadow_clear(struct ptw_shadow *s, ptw_shadow_left_fn left, void *ctx);

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

/* A cycle's identity, whichever member it was found from: its threads and,
 * for each, what tells one wait from a later one (its object, its wait's
 * sequence number). Never 0. */
uint64_t ptw_wait_cycle_key(const pid_t *tids, const uint64_t *waits, size_t n);

/* ---- session signals: what a signal ptwatch got means ----
 *
 * In launch mode the command stays in ptwatch's process group and terminal
 * (docs/design.md, "Safety invariants"), so the terminal's Ctrl-C reaches
 * both, as it does under strace. The command must meet it as it would
 * without ptwatch, and be traced until it has reacted: died of it, exited,
 * or gone on (then so does the trace). Only a signal that did not reach the
 * command, or the same one reaching both again within
 * PTW_INTERRUPT_AGAIN_MS (a second Ctrl-C), makes ptwatch let go; with -p
 * every one does.
 *
 * Whether a signal reached the command too:
 * - a copy with si_code SI_KERNEL comes from the terminal (a key, its
 *   hangup), which signals its whole foreground process group: the command
 *   got it if it is still in ptwatch's (it may have made a group of its own);
 * - any other copy (kill(2)): if the command was delivered the same signal
 *   within PTW_SIGNAL_MATCH_NS of it, in either order (the ptrace path sees
 *   delivery stops), or holds it (pending, blocked; or died of it) once
 *   PTW_SIGNAL_MATCH_NS passed; else it was for ptwatch alone.
 * One model for both backends; what each decides goes to its
 * ptw_interrupt_fn (a PTW_EV_INTERRUPT event). Pure: the caller says the
 * time and what it saw.
 */
#define PTW_SIGNAL_MATCH_NS (500ull * 1000000u)

typedef void (*ptw_interrupt_fn)(void *ctx, int sig, uint64_t ns, enum ptw_interrupt_action action,
				 enum ptw_interrupt_why why);

struct ptw_signal_model {
	bool launched; /* else -p: every session signal lets go */
	ptw_interrupt_fn decided;
	void *ctx;
	int end_signal; /* the first that lets go (0: none yet) */
	struct {
		uint64_t copy_ns;     /* ptwatch got it; has the command? (waiting) */
		uint64_t delivery_ns; /* the command got it; ptwatch not yet */
		bool copy_owed;	      /* ... from the terminal: ptwatch's copy comes */
		uint64_t press_ns;    /* the last time both did */
		bool press_delivered; /* and the command's delivery was seen */
	} s[65];
};

/* ptwatch got sig (si_code code) at ns; in_group: the command is still in
 * ptwatch's original process group. */
void ptw_signal_got(struct ptw_signal_model *m, int sig, int code, uint64_t ns, bool in_group);
/* The command is being delivered a session signal (the ptrace path's
 * delivery stop); from_terminal: its si_code is SI_KERNEL. */
void ptw_signal_delivered(struct ptw_signal_model *m, int sig, uint64_t ns, bool from_terminal);
/* The copies that waited PTW_SIGNAL_MATCH_NS by now (UINT64_MAX: all of
 * them, the command ended): held(ctx, sig) says whether the command holds
 * it (pending) or died of it. */
void ptw_signal_expire(struct ptw_signal_model *m, uint64_t now, bool (*held)(void *ctx, int sig),
		       void *ctx);
/* When the next copy stops waiting; 0: none waits. */
uint64_t ptw_signal_deadline(const struct ptw_signal_model *m);
/* The command ended: whether a terminal's signal it was delivered still
 * owes ptwatch's copy (wait for it a moment, then ptw_signal_late). */
bool ptw_signal_copy_owed(const struct ptw_signal_model *m);
/* ptwatch's copy of a signal the command was delivered and reacted to
 * came after all: traced until then. */
void ptw_signal_late(struct ptw_signal_model *m, int sig, int code, uint64_t ns);

#endif
