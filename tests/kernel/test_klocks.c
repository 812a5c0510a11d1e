/* SPDX-License-Identifier: MIT */
/*
 * The kernel backend's --locks conversion (src/kernel/lockconv.c) on
 * synthetic records, through the span engine: a contended mutex (owner
 * read at the entry, its return), an owner that is no live thread, a
 * rwlock writer's futex and its owner word, a futex wait of no kind inside
 * a join (no span, the join's wait ends at the join's return), a return
 * that is not the innermost wait's, a longjmp out of a wait, a thread's
 * exit; live deadlocks: confirmed only once every member sleeps on its
 * futex and the owners read again still form the cycle, not when an owner
 * changed or a member's wait ended before the confirmation, a thread
 * waiting for a mutex it holds, and the same cycle reported once.
 */
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "lockconv.h"
#include "ptw_locks.h"
#include "ptw_spans.h"
#include "ptw_symbols.h"

#define PID	 100
#define MUTEX_A	 0x5000ull
#define MUTEX_B	 0x5040ull
#define RWLOCK	 0x6000ull
#define PTHREAD1 0x7f0000001000ull
#define TID_OFF	 0x2d0ull
#define STACK(n) (0x7ffd00000000ull + 0x10000ull * (n))

static struct ptw_location loc_player = { .addr = 0x4000, .symbol = "player" };
static struct ptw_location loc_lock = { .addr = 0x9000, .symbol = "__lll_lock_wait" };
static struct ptw_location loc_obj = { .addr = MUTEX_A, .symbol = "mutex_a" };

static enum ptw_wait_kind next_kind; /* what the fake classify says */
static bool asleep[1000];	     /* by tid */
static int32_t memory[4];	     /* the owner words now: mutex a, mutex b, rwlock, join */
static uint64_t clock_ns = 1000;
static size_t ndeadlock_events;
static enum ptw_deadlock_proof last_proof = PTW_PROOF_STOPPED;

static void sink(void *ctx, const struct ptw_event *ev)
{
	if (ev->kind == PTW_EV_DEADLOCK) {
		ndeadlock_events++;
		last_proof = ev->proof;
	}
	ptw_spans_consume(ctx, ev);
}

static int unwind(void *ctx, const struct ptwk_lock_record *r, uint64_t *pcs, int max)
{
	(void)ctx;
	if (max < 3)
		return 0;
	pcs[0] = r->regs[16];
	pcs[1] = 0x9100; /* in libc */
	pcs[2] = 0x4010; /* in player */
	return 3;
}

static enum ptw_wait_kind classify(void *ctx, const uint64_t *pcs, int n, uint64_t futex,
				   uint32_t expected, uint64_t *ret_object)
{
	(void)ctx;
	(void)pcs;
	(void)n;
	(void)expected;
	*ret_object = next_kind == PTW_WAIT_RWLOCK_WRITE ? futex - 12 : futex;
	return next_kind;
}

static const struct ptw_location *locate(void *ctx, uint64_t pc)
{
	(void)ctx;
	return pc >= 0x9000 ? &loc_lock : &loc_player;
}

static const struct ptw_location *site(void *ctx, const uint64_t *pcs, int n)
{
	(void)ctx;
	(void)pcs;
	return n > 2 ? &loc_player : NULL;
}

static const struct ptw_location *object(void *ctx, uint64_t addr)
{
	(void)ctx;
	return addr == MUTEX_A ? &loc_obj : NULL;
}

static bool live(void *ctx, pid_t tid)
{
	(void)ctx;
	return tid >= 10 && tid < 100; /* the threads of this world */
}

static int read_i32(void *ctx, uint64_t addr, int32_t *ret)
{
	(void)ctx;
	if (addr == MUTEX_A + 8)
		*ret = memory[0];
	else if (addr == MUTEX_B + 8)
		*ret = memory[1];
	else if (addr == RWLOCK + 24)
		*ret = memory[2];
	else if (addr == PTHREAD1 + TID_OFF)
		*ret = memory[3];
	else
		return -14;
	return 0;
}

static bool asleep_on(void *ctx, pid_t tid, uint64_t futex)
{
	(void)ctx;
	(void)futex;
	return tid >= 0 && tid < 1000 && asleep[tid];
}

static void entry(struct ptwk_lockconv *c, uint32_t kind, pid_t tid, uint64_t a, uint64_t sp,
		  const uint32_t *words, uint64_t words_at)
{
	struct ptwk_lock_record *r = calloc(1, sizeof(*r));
	r->h.kind = kind;
	r->h.tid = (uint32_t)tid;
	r->h.tgid = PID;
	r->h.ns = clock_ns += 1000;
	r->h.a = a;
	r->h.c = words_at;
	r->regs[7] = sp;
	r->regs[16] = 0x9000;
	if (words) {
		memcpy(r->words, words, sizeof(r->words));
		r->lflags = PTWK_LF_WORDS;
	}
	ptwk_lockconv_record(c, &r->h, sizeof(*r));
	free(r);
}

static void ret(struct ptwk_lockconv *c, uint32_t kind, pid_t tid, uint64_t sp_after, uint64_t rax)
{
	struct ptwk_record r = { .kind = kind, .tid = (uint32_t)tid, .tgid = PID };
	r.ns = clock_ns += 1000;
	r.a = rax;
	r.b = sp_after;
	ptwk_lockconv_record(c, &r, sizeof(r));
}

static void lwp_exit(struct ptwk_lockconv *c, pid_t tid)
{
	struct ptwk_record r = { .kind = PTWK_EXIT, .tid = (uint32_t)tid, .tgid = PID };
	r.ns = clock_ns += 1000;
	ptwk_lockconv_record(c, &r, sizeof(r));
}

static const struct ptw_wait *wait_n(struct ptw_spans *s, size_t i)
{
	return ptw_locks_get(ptw_spans_locks(s), i);
}

static struct ptwk_lockconv *conv_new(struct ptw_spans *s)
{
	static struct ptwk_lockconv c;
	struct ptwk_lockconv_ops ops = { .sink = sink,
					 .unwind = unwind,
					 .classify = classify,
					 .locate = locate,
					 .site = site,
					 .object = object,
					 .live = live,
					 .read_i32 = read_i32,
					 .asleep_on = asleep_on,
					 .ctx = s };
	ptwk_lockconv_init(&c, PID, &ops);
	return &c;
}

static void test_waits(void)
{
	struct ptw_spans *s = ptw_spans_new();
	struct ptwk_lockconv *c = conv_new(s);
	const uint32_t owner12[PTWK_LOCK_WORDS] = { 2, 0, 12 }; /* __lock, __count, __owner */

	/* 11 waits for mutex a, held by 12; a return elsewhere is not its */
	entry(c, PTWK_LOCK_WAIT, 11, MUTEX_A, STACK(1), owner12, MUTEX_A);
	ret(c, PTWK_LOCK_RET, 11, STACK(1) + 16, 0);
	CHECK_EQ(ptw_locks_count(ptw_spans_locks(s)), 1);
	const struct ptw_wait *w = wait_n(s, 0);
	CHECK_EQ(w->tid, 11);
	CHECK_EQ(w->kind, PTW_WAIT_MUTEX);
	CHECK_EQ(w->object, MUTEX_A);
	CHECK_EQ(w->owner, 12);
	CHECK_STR(w->object_loc ? w->object_loc->symbol : NULL, "mutex_a");
	CHECK_STR(w->site ? w->site->symbol : NULL, "player");
	CHECK_EQ(w->nstack, 3);
	CHECK_EQ(w->status, PTW_WAIT_OPEN);
	ret(c, PTWK_LOCK_RET, 11, STACK(1) + 8, 0);
	CHECK_EQ(w->status, PTW_WAIT_COMPLETED);
	CHECK(w->has_end && w->end_ns > w->start_ns);

	/* an owner word that is no live thread: unknown */
	const uint32_t stranger[PTWK_LOCK_WORDS] = { 2, 0, 4242 };
	entry(c, PTWK_LOCK_WAIT, 11, MUTEX_B, STACK(1), stranger, MUTEX_B);
	CHECK_EQ(wait_n(s, 1)->owner, 0);
	CHECK(wait_n(s, 1)->object_loc == NULL);
	ret(c, PTWK_LOCK_RET, 11, STACK(1) + 8, 0);
	/* unreadable words: unknown too */
	entry(c, PTWK_LOCK_WAIT, 11, MUTEX_B, STACK(1), NULL, MUTEX_B);
	CHECK_EQ(wait_n(s, 2)->owner, 0);
	ret(c, PTWK_LOCK_RET, 11, STACK(1) + 8, 0);

	/* a writer sleeps on __writers_futex (rwlock + 12): the rwlock, and
	 * __cur_writer (rwlock + 24) is words[3] */
	next_kind = PTW_WAIT_RWLOCK_WRITE;
	const uint32_t writer[PTWK_LOCK_WORDS] = { 0, 0, 0, 13 };
	entry(c, PTWK_FUTEX_WAIT, 12, RWLOCK + 12, STACK(2), writer, RWLOCK + 12);
	w = wait_n(s, 3);
	CHECK_EQ(w->kind, PTW_WAIT_RWLOCK_WRITE);
	CHECK_EQ(w->object, RWLOCK);
	CHECK_EQ(w->owner, 13);
	ret(c, PTWK_LOCK_RET, 12, STACK(2) + 8, 0);
	CHECK_EQ(w->status, PTW_WAIT_COMPLETED);

	/* a join of a thread (tid 14) that runs: a futex wait inside it is
	 * no span of its own; the join's return ends the join's wait */
	const uint32_t tid14[PTWK_LOCK_WORDS] = { 14 };
	entry(c, PTWK_LOCK_JOIN, 10, PTHREAD1, STACK(0), tid14, PTHREAD1 + TID_OFF);
	next_kind = PTW_WAIT_JOIN;
	entry(c, PTWK_FUTEX_WAIT, 10, PTHREAD1 + TID_OFF, STACK(0) - 0x100, NULL, 0);
	CHECK_EQ(ptw_locks_count(ptw_spans_locks(s)), 5);
	w = wait_n(s, 4);
	CHECK_EQ(w->kind, PTW_WAIT_JOIN);
	CHECK_EQ(w->object, PTHREAD1);
	CHECK_EQ(w->owner, 14);
	ret(c, PTWK_JOIN_RET, 10, STACK(0) + 8, 0); /* not yet: the futex wait is innermost */
	CHECK_EQ(w->status, PTW_WAIT_OPEN);
	ret(c, PTWK_LOCK_RET, 10, STACK(0) - 0x100 + 8, 0);
	CHECK_EQ(w->status, PTW_WAIT_OPEN);
	ret(c, PTWK_JOIN_RET, 10, STACK(0) + 8, 0);
	CHECK_EQ(w->status, PTW_WAIT_COMPLETED);
	CHECK_EQ(c->unclassified, 0);

	/* a join of a thread whose exit was recorded just before (tid 150,
	 * no longer live here): its tid word, still set at the entry (the
	 * kernel clears it after the exit tracepoint), names it */
	const uint32_t tid150[PTWK_LOCK_WORDS] = { 150 };
	entry(c, PTWK_LOCK_JOIN, 10, PTHREAD1, STACK(0), tid150, PTHREAD1 + TID_OFF);
	CHECK_EQ(ptw_locks_count(ptw_spans_locks(s)), 6);
	CHECK_EQ(wait_n(s, 5)->owner, 150);
	ret(c, PTWK_JOIN_RET, 10, STACK(0) + 8, 0);

	/* a futex wait of no kind: no span, its return nothing */
	next_kind = PTW_WAIT_NONE;
	entry(c, PTWK_FUTEX_WAIT, 11, 0x8000, STACK(1), NULL, 0);
	ret(c, PTWK_LOCK_RET, 11, STACK(1) + 8, 0);
	CHECK_EQ(ptw_locks_count(ptw_spans_locks(s)), 6);
	CHECK_EQ(c->unclassified, 1);

	/* a wait left by a longjmp: the next entry at or above its sp */
	entry(c, PTWK_LOCK_WAIT, 11, MUTEX_A, STACK(1) - 0x200, owner12, MUTEX_A);
	entry(c, PTWK_LOCK_WAIT, 11, MUTEX_A, STACK(1), owner12, MUTEX_A);
	CHECK_EQ(wait_n(s, 6)->status, PTW_WAIT_UNMATCHED);
	CHECK_STR(wait_n(s, 6)->reason, "longjmp");
	ret(c, PTWK_LOCK_RET, 11, STACK(1) + 8, 0);
	CHECK_EQ(wait_n(s, 7)->status, PTW_WAIT_COMPLETED);

	/* a thread that exits forgets its waits: a later return is nobody's */
	entry(c, PTWK_LOCK_WAIT, 15, MUTEX_A, STACK(5), owner12, MUTEX_A);
	lwp_exit(c, 15);
	ret(c, PTWK_LOCK_RET, 15, STACK(5) + 8, 0);
	CHECK_EQ(wait_n(s, 8)->status, PTW_WAIT_OPEN); /* the engine ends it at the LWP's end */
	CHECK_EQ(c->waits, 9);
	ptwk_lockconv_free(c);
	ptw_spans_free(s);
}

static void test_deadlocks(void)
{
	struct ptw_spans *s = ptw_spans_new();
	struct ptwk_lockconv *c = conv_new(s);
	const uint32_t held_by_21[PTWK_LOCK_WORDS] = { 2, 0, 21 };
	const uint32_t held_by_22[PTWK_LOCK_WORDS] = { 2, 0, 22 };
	ndeadlock_events = 0;

	/* 21 waits for b (held by 22), 22 for a (held by 21): a candidate */
	entry(c, PTWK_LOCK_WAIT, 21, MUTEX_B, STACK(1), held_by_22, MUTEX_B);
	CHECK_EQ(ptwk_lockconv_pending(c), 0);
	entry(c, PTWK_LOCK_WAIT, 22, MUTEX_A, STACK(2), held_by_21, MUTEX_A);
	CHECK_EQ(ptwk_lockconv_pending(c), 1);
	/* 22 not yet asleep: not checked; it stays for the next batch */
	memory[0] = 21;
	memory[1] = 22;
	asleep[21] = true;
	ptwk_lockconv_check(c);
	ptwk_lockconv_confirm(c, clock_ns);
	CHECK_EQ(ndeadlock_events, 0);
	CHECK_EQ(ptwk_lockconv_pending(c), 1);
	/* both asleep, owners as recorded: confirmed */
	asleep[22] = true;
	ptwk_lockconv_check(c);
	ptwk_lockconv_confirm(c, clock_ns);
	CHECK_EQ(ndeadlock_events, 2);
	CHECK_EQ(last_proof, PTW_PROOF_REREAD);
	CHECK_EQ(ptwk_lockconv_pending(c), 0);
	CHECK_EQ(ptw_locks_deadlock_count(ptw_spans_locks(s)), 1);
	const struct ptw_live_deadlock *d = ptw_locks_deadlock(ptw_spans_locks(s), 0);
	CHECK_EQ(d->n, 2);
	CHECK_EQ(d->proof, PTW_PROOF_REREAD);
	CHECK_STR(ptw_deadlock_proof_name(d->proof), "owners_reread");
	CHECK((d->tids[0] == 22 && d->tids[1] == 21 && d->objects[0] == MUTEX_A &&
	       d->objects[1] == MUTEX_B));
	CHECK_EQ(wait_n(s, 0)->deadlock, 1);
	CHECK_EQ(wait_n(s, 1)->deadlock, 1);

	/* a third thread joining 21's cycle members finds no cycle of its own */
	entry(c, PTWK_LOCK_WAIT, 23, MUTEX_A, STACK(3), held_by_21, MUTEX_A);
	CHECK_EQ(ptwk_lockconv_pending(c), 0);

	/* an owner that changed by the check: no deadlock */
	const uint32_t held_by_31[PTWK_LOCK_WORDS] = { 2, 0, 31 };
	const uint32_t held_by_32[PTWK_LOCK_WORDS] = { 2, 0, 32 };
	lwp_exit(c, 21);
	lwp_exit(c, 22);
	lwp_exit(c, 23);
	entry(c, PTWK_LOCK_WAIT, 31, MUTEX_B, STACK(1), held_by_32, MUTEX_B);
	entry(c, PTWK_LOCK_WAIT, 32, MUTEX_A, STACK(2), held_by_31, MUTEX_A);
	CHECK_EQ(ptwk_lockconv_pending(c), 1);
	asleep[31] = asleep[32] = true;
	memory[0] = 0; /* a was let go meanwhile */
	memory[1] = 32;
	ptwk_lockconv_check(c);
	CHECK_EQ(ptwk_lockconv_pending(c), 0);
	ptwk_lockconv_confirm(c, clock_ns);
	CHECK_EQ(ndeadlock_events, 2);

	/* checked, then a member's wait ends in the next batch: no deadlock */
	ret(c, PTWK_LOCK_RET, 31, STACK(1) + 8, 0);
	ret(c, PTWK_LOCK_RET, 32, STACK(2) + 8, 0);
	entry(c, PTWK_LOCK_WAIT, 31, MUTEX_B, STACK(1), held_by_32, MUTEX_B);
	entry(c, PTWK_LOCK_WAIT, 32, MUTEX_A, STACK(2), held_by_31, MUTEX_A);
	memory[0] = 31;
	memory[1] = 32;
	ptwk_lockconv_check(c);
	CHECK_EQ(ptwk_lockconv_pending(c), 1);
	ret(c, PTWK_LOCK_RET, 32, STACK(2) + 8, 0);
	ptwk_lockconv_confirm(c, clock_ns);
	CHECK_EQ(ptwk_lockconv_pending(c), 0);
	CHECK_EQ(ndeadlock_events, 2);
	CHECK_EQ(ptw_locks_deadlock_count(ptw_spans_locks(s)), 1);

	/* a normal mutex locked again by its holder: a deadlock of one */
	const uint32_t held_by_41[PTWK_LOCK_WORDS] = { 2, 0, 41 };
	entry(c, PTWK_LOCK_WAIT, 41, MUTEX_A, STACK(4), held_by_41, MUTEX_A);
	memory[0] = 41;
	asleep[41] = true;
	ptwk_lockconv_check(c);
	ptwk_lockconv_confirm(c, clock_ns);
	CHECK_EQ(ndeadlock_events, 3);
	CHECK_EQ(ptw_locks_deadlock_count(ptw_spans_locks(s)), 2);
	d = ptw_locks_deadlock(ptw_spans_locks(s), 1);
	CHECK(d && d->n == 1 && d->tids[0] == 41 && d->id == 2);
	/* reported once: another wait of the same thread forms the same
	 * cycle again only as a new wait */
	ptwk_lockconv_check(c);
	ptwk_lockconv_confirm(c, clock_ns);
	CHECK_EQ(ndeadlock_events, 3);
	ptwk_lockconv_free(c);
	ptw_spans_free(s);
}

/* Waits under way at an attach (ptwk_lockconv_under_way): a span whose
 * start is unknown, its owner read now, its return as any slow path's; a
 * deadlock they form is checked as one that formed while watched; an entry
 * record of the same wait (it began once the probes were in) is that wait. */
static void test_under_way(void)
{
	struct ptw_spans *s = ptw_spans_new();
	struct ptwk_lockconv *c = conv_new(s);
	ndeadlock_events = 0;
	memset(asleep, 0, sizeof(asleep));
	memory[0] = 52; /* a held by 52 */
	memory[1] = 51; /* b held by 51 */
	memory[3] = 60; /* the joined thread */
	struct ptwk_lock_under_way u = { .kind = PTW_WAIT_MUTEX,
					 .object = MUTEX_A,
					 .futex = MUTEX_A,
					 .sp = STACK(1),
					 .pcs = { 0x9000, 0x9100, 0x4010 },
					 .npcs = 3 };
	ptwk_lockconv_under_way(c, 51, &u, 500);
	const struct ptw_wait *w = wait_n(s, 0);
	CHECK(w && w->start_unknown && w->start_ns == 500 && w->tid == 51 && w->owner == 52 &&
	      w->object == MUTEX_A && w->object_loc == &loc_obj && w->site == &loc_player &&
	      w->status == PTW_WAIT_OPEN);
	/* its entry record, the probes in before it was found: the same wait */
	const uint32_t held_by_52[PTWK_LOCK_WORDS] = { 2, 0, 52 };
	entry(c, PTWK_LOCK_WAIT, 51, MUTEX_A, STACK(1), held_by_52, MUTEX_A);
	CHECK_EQ(ptw_locks_count(ptw_spans_locks(s)), 1);
	CHECK_EQ(wait_n(s, 0)->status, PTW_WAIT_OPEN);
	/* 52 waits for b, held by 51: a candidate, confirmed as any */
	u.object = u.futex = MUTEX_B;
	u.sp = STACK(2);
	ptwk_lockconv_under_way(c, 52, &u, 500);
	CHECK_EQ(ptwk_lockconv_pending(c), 1);
	asleep[51] = asleep[52] = true;
	ptwk_lockconv_check(c);
	ptwk_lockconv_confirm(c, clock_ns);
	CHECK_EQ(ndeadlock_events, 2);
	CHECK_EQ(wait_n(s, 0)->deadlock, 1);
	CHECK_EQ(wait_n(s, 1)->deadlock, 1);
	/* a join under way ends at the join function's return */
	struct ptwk_lock_under_way j = { .kind = PTW_WAIT_JOIN,
					 .object = PTHREAD1,
					 .futex = PTHREAD1 + TID_OFF,
					 .sp = STACK(3),
					 .join = true,
					 .pcs = { 0x9000, 0x4010 },
					 .npcs = 2 };
	ptwk_lockconv_under_way(c, 53, &j, 500);
	w = wait_n(s, 2);
	CHECK(w && w->kind == PTW_WAIT_JOIN && w->owner == 60 && w->start_unknown);
	ret(c, PTWK_LOCK_RET, 53, STACK(3) + 8, 0); /* not a slow path's: not it */
	CHECK_EQ(wait_n(s, 2)->status, PTW_WAIT_OPEN);
	ret(c, PTWK_JOIN_RET, 53, STACK(3) + 8, 0);
	w = wait_n(s, 2);
	CHECK(w->status == PTW_WAIT_COMPLETED && w->has_end && w->end_ns == clock_ns);
	/* its figures: completed, no duration */
	struct ptw_wait_totals tt;
	ptw_locks_totals(ptw_spans_locks(s), &tt);
	CHECK(tt.count == 3 && tt.completed == 1 && tt.timed == 0 && tt.before_attach == 3 &&
	      tt.total_ns == 0);
	/* the mutex wait returns */
	ret(c, PTWK_LOCK_RET, 51, STACK(1) + 8, 0);
	CHECK_EQ(wait_n(s, 0)->status, PTW_WAIT_COMPLETED);
	ptwk_lockconv_free(c);
	ptw_spans_free(s);
}

int main(void)
{
	test_waits();
	test_deadlocks();
	test_under_way();
	CHECK_DONE();
}
