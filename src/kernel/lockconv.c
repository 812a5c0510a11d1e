/* SPDX-License-Identifier: MIT */
/* --locks records to events, live deadlocks; see lockconv.h. Pure. */
#include "lockconv.h"

#include <stdlib.h>
#include <string.h>

#include "ptw_locks.h"
#include "ptw_waits.h"

#define MAX_CYCLE 64

/* A slow path a thread is in (entered, not returned). */
struct lwait {
	uint32_t seq; /* which wait: candidates name their members' waits by it */
	bool span;    /* WAIT_BEGIN emitted (else a futex wait of no kind) */
	bool join;    /* ends at the join function's return */
	bool under_way; /* found at the attach (ptwk_lockconv_under_way) */
	enum ptw_wait_kind kind;
	uint64_t object, futex;
	uint64_t owner_addr; /* where the owner is read again, 0 none */
	pid_t owner;
	uint64_t sp; /* at the entry */
	uint64_t pcs[PTWK_DEADLOCK_FRAMES];
	int npcs;
};

struct lthread {
	struct lwait *w; /* innermost last */
	size_t n, cap;
};

struct ptwk_candidate {
	size_t n;
	pid_t tids[MAX_CYCLE];
	uint32_t seqs[MAX_CYCLE];
	uint64_t key;
	bool checked;
};

void ptwk_lockconv_init(struct ptwk_lockconv *c, pid_t pid, const struct ptwk_lockconv_ops *ops)
{
	memset(c, 0, sizeof(*c));
	c->pid = pid;
	c->ops = *ops;
}

static void thread_free(void *v)
{
	struct lthread *t = v;
	if (t)
		free(t->w);
	free(t);
}

static void forget_all(struct ptwk_lockconv *c)
{
	size_t it = 0;
	void *v;
	while (ptw_map_next(&c->threads, &it, NULL, &v))
		thread_free(v);
	ptw_map_free(&c->threads);
}

void ptwk_lockconv_free(struct ptwk_lockconv *c)
{
	forget_all(c);
	ptw_map_free(&c->reported);
	for (size_t i = 0; i < c->ncands; i++)
		free(c->cands[i]);
	free(c->cands);
	c->cands = NULL;
	c->ncands = 0;
}

static void emit(struct ptwk_lockconv *c, struct ptw_event *ev)
{
	ev->pid = c->pid;
	c->ops.sink(c->ops.ctx, ev);
}

static struct lthread *thread_of(struct ptwk_lockconv *c, pid_t tid, bool create)
{
	struct lthread *t = ptw_map_get(&c->threads, (uint64_t)tid);
	if (!t && create) {
		t = xcalloc(1, sizeof(*t));
		ptw_map_put(&c->threads, (uint64_t)tid, t);
	}
	return t;
}

/* The innermost wait that is a span (an unclassified futex wait inside a
 * join is not: the join is what the thread waits for). */
static struct lwait *innermost_span(struct ptwk_lockconv *c, pid_t tid)
{
	struct lthread *t = tid > 0 ? thread_of(c, tid, false) : NULL;
	for (size_t i = t ? t->n : 0; i > 0; i--)
		if (t->w[i - 1].span)
			return &t->w[i - 1];
	return NULL;
}

static pid_t waits_for(void *ctx, pid_t tid)
{
	struct lwait *w = innermost_span(ctx, tid);
	return w ? w->owner : 0;
}

static const struct ptw_location *frame_loc(struct ptwk_lockconv *c, const uint64_t *pcs, int i)
{
	if (!c->ops.locate)
		return NULL;
	/* a return address: the call before it */
	return c->ops.locate(c->ops.ctx, i ? pcs[i] - 1 : pcs[i]);
}

/* The wait's frames that have a location, innermost first, at most max:
 * a frame nothing names (its module unknown: the process was gone before
 * its libraries were read) is left out, as the tracer leaves no hole. */
static int frames(struct ptwk_lockconv *c, const struct lwait *w, const struct ptw_location **ret,
		  int max)
{
	int n = 0;
	for (int i = 0; i < w->npcs && n < max; i++) {
		const struct ptw_location *l = frame_loc(c, w->pcs, i);
		if (l)
			ret[n++] = l;
	}
	return n;
}

/* ---- deadlocks ---- */

static void find_cycle(struct ptwk_lockconv *c, pid_t from)
{
	pid_t cyc[MAX_CYCLE];
	size_t n;
	if (waits_for(c, from) == from) {
		/* a normal mutex locked again by its owner */
		cyc[0] = from;
		n = 1;
	} else {
		n = ptw_wait_cycle(from, waits_for, c, cyc, MAX_CYCLE);
	}
	if (n < 1)
		return;
	struct ptwk_candidate *k = xcalloc(1, sizeof(*k));
	k->n = n;
	for (size_t i = 0; i < n; i++) {
		struct lwait *w = innermost_span(c, cyc[i]);
		if (!w || !w->owner_addr) {
			free(k);
			return;
		}
		k->tids[i] = cyc[i];
		k->seqs[i] = w->seq;
	}
	uint64_t seqs[MAX_CYCLE];
	for (size_t i = 0; i < n; i++)
		seqs[i] = k->seqs[i];
	k->key = ptw_wait_cycle_key(k->tids, seqs, n);
	for (size_t i = 0; i < c->ncands; i++)
		if (c->cands[i]->key == k->key) {
			free(k);
			return;
		}
	if (ptw_map_get(&c->reported, k->key)) {
		free(k);
		return;
	}
	c->cands = xreallocarray(c->cands, c->ncands + 1, sizeof(*c->cands));
	c->cands[c->ncands++] = k;
}

size_t ptwk_lockconv_pending(const struct ptwk_lockconv *c)
{
	return c->ncands;
}

static void drop_candidate(struct ptwk_lockconv *c, size_t i)
{
	free(c->cands[i]);
	c->cands[i] = c->cands[--c->ncands];
}

/* Every member still in the wait the cycle was found with. */
static bool still_waiting(struct ptwk_lockconv *c, const struct ptwk_candidate *k)
{
	for (size_t i = 0; i < k->n; i++) {
		struct lwait *w = innermost_span(c, k->tids[i]);
		if (!w || w->seq != k->seqs[i])
			return false;
	}
	return true;
}

static bool all_asleep(struct ptwk_lockconv *c, const struct ptwk_candidate *k)
{
	for (size_t i = 0; i < k->n; i++)
		if (!c->ops.asleep_on(c->ops.ctx, k->tids[i], innermost_span(c, k->tids[i])->futex))
			return false;
	return true;
}

void ptwk_lockconv_check(struct ptwk_lockconv *c)
{
	for (size_t i = 0; i < c->ncands;) {
		struct ptwk_candidate *k = c->cands[i];
		if (k->checked) {
			i++;
			continue;
		}
		if (!still_waiting(c, k) || !c->ops.read_i32 || !c->ops.asleep_on) {
			drop_candidate(c, i);
			continue;
		}
		bool owners = true;
		for (size_t m = 0; m < k->n && owners; m++) {
			int32_t v = 0;
			owners = c->ops.read_i32(c->ops.ctx,
						 innermost_span(c, k->tids[m])->owner_addr,
						 &v) == 0 &&
				 v == k->tids[(m + 1) % k->n];
		}
		if (!owners) {
			drop_candidate(c, i); /* the cycle is gone */
			continue;
		}
		/* Asleep before and after the owners were read: a member
		 * still on its way into the futex call is tried again at the
		 * next batch. */
		if (all_asleep(c, k) && all_asleep(c, k))
			k->checked = true;
		i++;
	}
}

void ptwk_lockconv_confirm(struct ptwk_lockconv *c, uint64_t ns)
{
	for (size_t i = 0; i < c->ncands;) {
		struct ptwk_candidate *k = c->cands[i];
		if (!k->checked) {
			i++;
			continue;
		}
		if (!still_waiting(c, k)) {
			drop_candidate(c, i);
			continue;
		}
		ptw_map_put(&c->reported, k->key, (void *)1);
		uint32_t id = ++c->ndeadlocks;
		for (size_t m = 0; m < k->n; m++) {
			struct lwait *w = innermost_span(c, k->tids[m]);
			const struct ptw_location *stack[PTWK_DEADLOCK_FRAMES];
			int nstack = frames(c, w, stack, PTWK_DEADLOCK_FRAMES);
			struct ptw_event ev = ptw_event_init(PTW_EV_DEADLOCK, ns, k->tids[m]);
			ev.span_id = id;
			ev.has_value = true;
			ev.value = k->n;
			ev.has_arg = true;
			ev.arg = m;
			ev.wait_kind = w->kind;
			ev.wait_object = w->object;
			ev.wait_owner = k->tids[(m + 1) % k->n];
			ev.object = c->ops.object ? c->ops.object(c->ops.ctx, w->object) : NULL;
			ev.stack = stack;
			ev.nstack = (size_t)nstack;
			ev.state = "S futex";
			ev.proof = PTW_PROOF_REREAD;
			emit(c, &ev);
		}
		drop_candidate(c, i);
	}
}

/* ---- waits ---- */

/* The owner read at the entry: which word after the futex holds it. */
static void owner_at_entry(struct ptwk_lockconv *c, struct lwait *w,
			   const struct ptwk_lock_record *r)
{
	/* (a join's futex is the joined thread's tid) */
	uint64_t at = ptw_wait_owner_at(w->kind, w->object, w->futex);
	if (!at)
		return; /* a condition variable, a semaphore: nobody holds them */
	w->owner_addr = at;
	uint64_t off = at - w->futex;
	if (!(r->lflags & PTWK_LF_WORDS) || at < w->futex || off % 4 || off / 4 >= PTWK_LOCK_WORDS)
		return;
	pid_t v = (pid_t)r->words[off / 4];
	/* A join's word is the joined thread's tid, which the kernel clears
	 * only after the thread's exit tracepoint: still set at the entry, it
	 * names the thread even when its exit was recorded just before. */
	if (v > 0 && (w->join || (c->ops.live && c->ops.live(c->ops.ctx, v))))
		w->owner = v;
}

/* A new wait of thread t entered at sp (zeroed but for its seq and sp). */
static struct lwait *push_wait(struct ptwk_lockconv *c, struct lthread *t, uint64_t sp)
{
	/* Waits entered at or below this stack pointer were left (a longjmp
	 * out of a signal handler that waited): the span engine ends them too. */
	while (t->n && t->w[t->n - 1].sp <= sp)
		t->n--;
	if (t->n == t->cap) {
		t->cap = t->cap ? 2 * t->cap : 4;
		t->w = xreallocarray(t->w, t->cap, sizeof(*t->w));
	}
	struct lwait *w = &t->w[t->n++];
	memset(w, 0, sizeof(*w));
	w->seq = ++c->seq;
	w->sp = sp;
	return w;
}

/* Wait w of tid is a span: its WAIT_BEGIN (before_attach: found under way),
 * and a deadlock through it? */
static void begin(struct ptwk_lockconv *c, pid_t tid, const struct lwait *w, uint64_t ns)
{
	const struct ptw_location *stack[PTWK_SITE_FRAMES];
	int n = frames(c, w, stack, PTWK_SITE_FRAMES);
	struct ptw_event ev = ptw_event_init(PTW_EV_WAIT_BEGIN, ns, tid);
	ev.wait_kind = w->kind;
	ev.wait_object = w->object;
	ev.wait_owner = w->owner;
	ev.object = c->ops.object ? c->ops.object(c->ops.ctx, w->object) : NULL;
	ev.site = c->ops.site ? c->ops.site(c->ops.ctx, w->pcs, w->npcs) : NULL;
	ev.stack = stack;
	ev.nstack = (size_t)n;
	ev.sp = w->sp;
	ev.before_attach = w->under_way;
	c->waits++;
	emit(c, &ev);
	if (w->owner)
		find_cycle(c, tid);
}

static void on_entry(struct ptwk_lockconv *c, const struct ptwk_lock_record *r)
{
	pid_t tid = (pid_t)r->h.tid;
	struct lthread *t = thread_of(c, tid, true);
	uint64_t sp = r->regs[7];
	/* The wait found under way at the attach, entered once the probes
	 * were in: it is that one (its start stays unknown). */
	if (t->n && t->w[t->n - 1].under_way && t->w[t->n - 1].sp == sp)
		return;
	struct lwait *w = push_wait(c, t, sp);
	w->futex = r->h.a;
	w->object = r->h.a;
	w->npcs = c->ops.unwind ? c->ops.unwind(c->ops.ctx, r, w->pcs, PTWK_DEADLOCK_FRAMES) : 0;
	if (w->npcs < 1) {
		w->pcs[0] = r->regs[16];
		w->npcs = 1;
	}
	switch (r->h.kind) {
	case PTWK_LOCK_WAIT: /* __lll_lock_wait (int *futex, int private): the mutex's __lock */
		w->kind = PTW_WAIT_MUTEX;
		break;
	case PTWK_LOCK_WAIT_PRIVATE:
		w->kind = PTW_WAIT_LOCK;
		break;
	case PTWK_LOCK_JOIN:
		/* a = the pthread_t; the words were read at its tid (h.c) */
		w->kind = PTW_WAIT_JOIN;
		w->join = true;
		w->futex = r->h.c;
		break;
	case PTWK_FUTEX_WAIT:
		w->kind = c->ops.classify ? c->ops.classify(c->ops.ctx, w->pcs, w->npcs, r->h.a,
							    (uint32_t)r->h.b, &w->object)
					  : PTW_WAIT_NONE;
		if (w->kind == PTW_WAIT_NONE || w->kind == PTW_WAIT_JOIN) {
			/* a join (seen at the join function) or a wait that
			 * is none of the kinds (aio, getaddrinfo_a): no span,
			 * but its return is awaited */
			c->unclassified += w->kind == PTW_WAIT_NONE;
			return;
		}
		break;
	default:
		t->n--;
		return;
	}
	w->span = true;
	owner_at_entry(c, w, r);
	begin(c, tid, w, r->h.ns);
}

void ptwk_lockconv_under_way(struct ptwk_lockconv *c, pid_t tid,
			     const struct ptwk_lock_under_way *u, uint64_t ns)
{
	struct lwait *w = push_wait(c, thread_of(c, tid, true), u->sp);
	w->span = true;
	w->under_way = true;
	w->join = u->join;
	w->kind = u->kind;
	w->object = u->object;
	w->futex = u->futex;
	w->npcs = u->npcs < 1 ? 0 : u->npcs > PTWK_DEADLOCK_FRAMES ? PTWK_DEADLOCK_FRAMES : u->npcs;
	memcpy(w->pcs, u->pcs, (size_t)w->npcs * sizeof(w->pcs[0]));
	/* the owner now (the tracer's too: read while the thread sleeps in it) */
	w->owner_addr = ptw_wait_owner_at(w->kind, w->object, w->futex);
	int32_t v = 0;
	if (w->owner_addr && c->ops.read_i32 &&
	    c->ops.read_i32(c->ops.ctx, w->owner_addr, &v) == 0 && v > 0 &&
	    (c->ops.live && c->ops.live(c->ops.ctx, v)))
		w->owner = v;
	begin(c, tid, w, ns);
}

/* A slow path returned (join: the join function): sp is the stack
 * pointer after the return, 8 above the entry's. */
static void on_return(struct ptwk_lockconv *c, const struct ptwk_record *r, bool join)
{
	pid_t tid = (pid_t)r->tid;
	struct lthread *t = thread_of(c, tid, false);
	if (!t || !t->n)
		return; /* a fast path through the join, or a wait begun before the attach */
	struct lwait *w = &t->w[t->n - 1];
	if (w->join != join || w->sp + 8 != r->b)
		return;
	bool span = w->span;
	t->n--;
	if (!span)
		return;
	struct ptw_event ev = ptw_event_init(PTW_EV_WAIT_END, r->ns, tid);
	ev.has_value = true;
	ev.value = (uint32_t)r->a;
	ev.sp = r->b;
	emit(c, &ev);
}

void ptwk_lockconv_record(struct ptwk_lockconv *c, const struct ptwk_record *h, size_t size)
{
	switch (h->kind) {
	case PTWK_LOCK_WAIT:
	case PTWK_LOCK_WAIT_PRIVATE:
	case PTWK_FUTEX_WAIT:
	case PTWK_LOCK_JOIN: {
		const struct ptwk_lock_record *r = (const struct ptwk_lock_record *)h;
		if (size >= sizeof(*r) && r->stack_len <= PTWK_LOCK_STACK)
			on_entry(c, r);
		break;
	}
	case PTWK_LOCK_RET:
		on_return(c, h, false);
		break;
	case PTWK_JOIN_RET:
		on_return(c, h, true);
		break;
	case PTWK_EXIT:
		thread_free(ptw_map_del(&c->threads, (uint64_t)h->tid));
		break;
	case PTWK_EXEC:
		forget_all(c);
		break;
	default:
		break;
	}
}
