/* SPDX-License-Identifier: MIT */
/* A thread's shadow stack of open traced calls; see ptw_observe.h. Pure. */
#include <stdlib.h>
#include <string.h>

#include "ptw_observe.h"
#include "ptw_util.h"

/* Frame i of the running context counted from the innermost (0). */
#define SP(s, i)  ((s)->run.st[(s)->run.n - 1 - (i)].sp)
#define RET(s, i) ((s)->run.st[(s)->run.n - 1 - (i)].ret)

/* Pops the k innermost frames; the last popped (the outermost of them) is
 * left as last_how, the others PTW_SHADOW_LEFT. */
static void pop(struct ptw_shadow *s, size_t k, enum ptw_shadow_how last_how,
		ptw_shadow_left_fn left, void *ctx)
{
	for (size_t i = 0; i < k && s->run.n; i++) {
		struct ptw_shadow_frame f = s->run.st[--s->run.n];
		if (left)
			left(ctx, &f, i == k - 1 ? last_how : PTW_SHADOW_LEFT);
	}
}

/* Every frame of context c is abandoned, innermost first; c's memory freed. */
static void abandon(struct ptw_shadow_context *c, ptw_shadow_left_fn left, void *ctx)
{
	while (c->n) {
		struct ptw_shadow_frame f = c->st[--c->n];
		if (left)
			left(ctx, &f, PTW_SHADOW_ABANDONED);
	}
	free(c->st);
	c->st = NULL;
	c->cap = 0;
}

static void push(struct ptw_shadow_context *c, struct ptw_shadow_frame f)
{
	if (c->n == c->cap) {
		c->cap = c->cap ? c->cap * 2 : 16;
		c->st = xreallocarray(c->st, c->cap, sizeof(*c->st));
	}
	c->st[c->n++] = f;
}

const struct ptw_shadow_signal *ptw_shadow_handling(const struct ptw_shadow *s)
{
	return s->nsigs && s->sigs[s->nsigs - 1].n == s->run.n ? &s->sigs[s->nsigs - 1] : NULL;
}

void ptw_shadow_enter(struct ptw_shadow *s, uint64_t sp, uint64_t ret, uintptr_t tag, bool handler,
		      bool marks, ptw_shadow_left_fn left, void *ctx)
{
	if (!handler && !(marks && ptw_shadow_handling(s))) {
		/* A new call at sp: every frame whose slot is at or below sp is
		 * over (its slot is being reused, or was popped). */
		size_t k = 0;
		while (k < s->run.n && (ptw_shadow_above(SP(s, k), sp) || SP(s, k) == sp))
			k++;
		/* the same slot and return address: a jmp to us (a tail call) */
		bool tail = k && SP(s, k - 1) == sp && RET(s, k - 1) == ret;
		pop(s, k, tail ? PTW_SHADOW_TAIL_CALL : PTW_SHADOW_LEFT, left, ctx);
	}
	push(&s->run, (struct ptw_shadow_frame){ sp, ret, tag });
}

size_t ptw_shadow_return(struct ptw_shadow *s, uint64_t sp, uint64_t ip, ptw_shadow_left_fn left,
			 void *ctx)
{
	size_t k = 0;
	bool returned = false;
	while (k < s->run.n && ptw_shadow_above(SP(s, k), sp)) {
		k++;
		/* a return leaves one frame: none outside it (a signal handler's
		 * on sigaltstack may lie below the frames it interrupted) */
		if (SP(s, k - 1) + 8 == sp && RET(s, k - 1) == ip) {
			returned = true;
			break;
		}
	}
	pop(s, k, returned ? PTW_SHADOW_RETURNED : PTW_SHADOW_LEFT, left, ctx);
	return k;
}

size_t ptw_shadow_tail(struct ptw_shadow *s, uint64_t sp, ptw_shadow_left_fn left, void *ctx)
{
	size_t k = 0;
	while (k < s->run.n && ptw_shadow_above(SP(s, k), sp))
		k++;
	if (k == s->run.n || SP(s, k) != sp)
		return 0;
	pop(s, k + 1, PTW_SHADOW_TAIL_CALL, left, ctx);
	return k + 1;
}

void ptw_shadow_land(struct ptw_shadow *s, uint64_t sp, ptw_shadow_left_fn left, void *ctx)
{
	size_t k = 0;
	while (k < s->run.n && ptw_shadow_above(SP(s, k), sp))
		k++;
	pop(s, k, PTW_SHADOW_LEFT, left, ctx);
	/* out of the handlers whose interrupted code it lands above (a
	 * siglongjmp, an exception thrown out of a handler) */
	while (s->nsigs && s->sigs[s->nsigs - 1].sp <= sp &&
	       sp - s->sigs[s->nsigs - 1].sp < PTW_SHADOW_WINDOW)
		s->nsigs--;
}

unsigned ptw_shadow_switch(struct ptw_shadow *s, uint64_t to, uint64_t resume,
			   ptw_shadow_left_fn left, void *ctx)
{
	size_t back = SIZE_MAX; /* the parked context it comes back to */
	for (size_t i = 0; i < s->nparked && back == SIZE_MAX; i++)
		if (s->parked[i].resume_sp == to)
			back = i;
	bool within = false;
	for (size_t i = 0; !resume && back == SIZE_MAX && i < s->run.n && !within; i++)
		within = ptw_shadow_same_stack(s->run.st[i].sp, to);
	if (within) {
		/* setcontext back to a getcontext of the running context: frames
		 * below the landing point are left as by a longjmp */
		ptw_shadow_land(s, to, left, ctx);
		return PTW_SHADOW_JUMPED;
	}
	unsigned done;
	if (resume) {
		/* parked even empty: coming back to it must not look like a new
		 * context started from the one that switched back */
		s->parked = xreallocarray(s->parked, s->nparked + 1, sizeof(*s->parked));
		s->run.resume_sp = resume;
		s->parked[s->nparked++] = s->run;
		done = PTW_SHADOW_PARKED;
	} else {
		/* not saved: nothing comes back to its frames */
		abandon(&s->run, left, ctx);
		done = PTW_SHADOW_DROPPED;
	}
	memset(&s->run, 0, sizeof(s->run));
	if (back != SIZE_MAX) {
		s->run = s->parked[back];
		s->run.resume_sp = 0;
		s->parked[back] = s->parked[--s->nparked];
		done |= PTW_SHADOW_RESUMED;
	}
	return done;
}

void ptw_shadow_signal(struct ptw_shadow *s, uint64_t sp, int sig)
{
	if (s->nsigs == s->sigs_cap) {
		s->sigs_cap = s->sigs_cap ? s->sigs_cap * 2 : 4;
		s->sigs = xreallocarray(s->sigs, s->sigs_cap, sizeof(*s->sigs));
	}
	s->sigs[s->nsigs++] = (struct ptw_shadow_signal){ sp, s->run.n, sig };
}

void ptw_shadow_sigreturn(struct ptw_shadow *s)
{
	if (s->nsigs)
		s->nsigs--;
}

void ptw_shadow_under_way(struct ptw_shadow *s, const struct ptw_shadow_frame *v, size_t n)
{
	if (!n)
		return;
	struct ptw_shadow_context *c = &s->run;
	if (c->n + n > c->cap) {
		c->cap = c->n + n + 16;
		c->st = xreallocarray(c->st, c->cap, sizeof(*c->st));
	}
	memmove(c->st + n, c->st, c->n * sizeof(*c->st));
	memcpy(c->st, v, n * sizeof(*v));
	c->n += n;
	/* the frames open when a signal came are more by as many */
	for (size_t i = 0; i < s->nsigs; i++)
		s->sigs[i].n += n;
}

void ptw_shadow_clear(struct ptw_shadow *s, ptw_shadow_left_fn left, void *ctx)
{
	pop(s, s->run.n, PTW_SHADOW_LEFT, left, ctx);
	free(s->run.st);
	for (size_t c = 0; c < s->nparked; c++)
		abandon(&s->parked[c], left, ctx);
	free(s->parked);
	free(s->sigs);
	memset(s, 0, sizeof(*s));
}
