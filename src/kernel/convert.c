/* SPDX-License-Identifier: MIT */
/* Records to events; see convert.h. Pure. */
#include "convert.h"

#include <signal.h>
#include <stdlib.h>
#include <string.h>

#include "ptw_symbols.h" /* struct ptw_location, ptw_location_is_clone_wrapper */

/* What is known of one thread of the process, by tid. */
struct ptwk_thread {
	uint64_t pthread; /* 0 unknown */
	uint64_t routine, arg;
	bool created; /* its creation was seen (else: found at the attach) */
	bool started, dead, in_join;
	bool main_seen; /* the main thread: main() was entered */
	bool raw;	/* made by a clone without pthread_create's record */
	uint64_t created_ns;
};

void ptwk_conv_init(struct ptwk_conv *c, pid_t pid, const struct ptwk_conv_ops *ops)
{
	memset(c, 0, sizeof(*c));
	c->pid = pid;
	c->ops = *ops;
}

void ptwk_conv_free(struct ptwk_conv *c)
{
	size_t it = 0;
	void *v;
	while (ptw_map_next(&c->threads, &it, NULL, &v))
		free(v);
	ptw_map_free(&c->threads);
	ptwk_frames_forget(c, 0);
}

static void emit(struct ptwk_conv *c, struct ptw_event *ev)
{
	ev->pid = c->pid;
	ev->process = c->process;
	c->events++;
	c->ops.sink(c->ops.ctx, ev);
}

static const struct ptw_location *locate(struct ptwk_conv *c, uint64_t addr)
{
	return addr && c->ops.locate ? c->ops.locate(c->ops.ctx, addr) : NULL;
}

static struct ptwk_thread *thread_of(const struct ptwk_conv *c, pid_t tid)
{
	return tid > 0 ? ptw_map_get(&c->threads, (uint64_t)tid) : NULL;
}

static struct ptwk_thread *thread_new(struct ptwk_conv *c, pid_t tid)
{
	struct ptwk_thread *th = xcalloc(1, sizeof(*th));
	free(ptw_map_put(&c->threads, (uint64_t)tid, th));
	return th;
}

static void thread_forget(struct ptwk_conv *c, pid_t tid)
{
	free(ptw_map_del(&c->threads, (uint64_t)tid));
}

bool ptwk_conv_knows(const struct ptwk_conv *c, pid_t tid)
{
	return thread_of(c, tid) != NULL;
}

static void name(struct ptwk_conv *c, pid_t tid, const char *text, uint64_t ns)
{
	if (!text || !*text)
		return;
	struct ptw_event ev = ptw_event_init(PTW_EV_THREAD_NAME, ns, tid);
	ev.name = text;
	emit(c, &ev);
}

void ptwk_conv_preexisting(struct ptwk_conv *c, pid_t tid, uint64_t pthread, uint64_t routine,
			   int detached, const char *text, uint64_t ns)
{
	struct ptwk_thread *th = thread_new(c, tid);
	th->pthread = pthread;
	th->routine = routine;
	th->started = true; /* whatever it runs, it began before us */
	struct ptw_event ev = ptw_event_init(PTW_EV_PREEXISTING, ns, tid);
	ev.other_tid = c->pid;
	ev.pthread = pthread;
	ev.routine = locate(c, routine);
	ev.detached = detached;
	emit(c, &ev);
	name(c, tid, text, ns);
}

void ptwk_conv_forked(struct ptwk_conv *c, uint64_t pthread, int detached, const char *text,
		      uint64_t began_ns)
{
	struct ptwk_thread *th = thread_new(c, c->pid);
	th->pthread = pthread;
	th->routine = c->main_addr;
	th->started = true;
	th->main_seen = true; /* main() runs on in the copy: no second MAIN_START */
	c->gap_calls_possible = true; /* (it runs before its own links: convert_frames.c) */
	struct ptw_event ev = ptw_event_init(PTW_EV_PREEXISTING, began_ns, c->pid);
	ev.other_tid = c->pid;
	ev.pthread = pthread;
	ev.routine = locate(c, c->main_addr);
	ev.detached = detached;
	ev.has_value = true;
	ev.value = began_ns;
	emit(c, &ev);
	name(c, c->pid, text, began_ns);
}

static void on_create(struct ptwk_conv *c, const struct ptwk_record *r)
{
	pid_t child = (pid_t)r->a;
	struct ptwk_thread *old = thread_of(c, child);
	if (old && !old->created && !old->dead) {
		/* Listed at the attach while its clone was on its way into the
		 * ring: it is the same thread, already a preexisting span. */
		old->created = true;
		return;
	}
	struct ptwk_thread *th = thread_new(c, child);
	th->created = true;
	th->created_ns = r->ns;
	th->pthread = r->b;
	if (!(r->f & PTWK_F_PTHREAD)) {
		struct ptw_event ev = ptw_event_init(PTW_EV_LWP_CREATE, r->ns, (pid_t)r->tid);
		ev.other_tid = child;
		th->pthread = 0;
		/* A raw clone, or pthread_create entered before the probes were in
		 * (a thread created while ptwatch attached): start_thread tells. */
		th->raw = true;
		if ((r->f & PTWK_F_CLONE_READ) && ptw_location_is_clone_wrapper(locate(c, r->e))) {
			ev.routine = locate(c, r->c);
			ev.has_arg = true;
			ev.arg = r->d;
		}
		emit(c, &ev);
		return;
	}
	th->routine = r->c;
	th->arg = r->d;
	if ((r->f & PTWK_F_GAP) && !c->probes_blind)
		c->gap_created++;
	struct ptw_event ev = ptw_event_init(PTW_EV_THREAD_CREATE, r->ns, (pid_t)r->tid);
	ev.other_tid = child;
	ev.pthread = r->b;
	ev.routine = locate(c, r->c);
	ev.has_arg = true;
	ev.arg = r->d;
	if ((r->f & PTWK_F_SITE_KNOWN) && r->e && c->ops.call_site)
		ev.site = c->ops.call_site(c->ops.ctx, r->e);
	if (r->f & PTWK_F_JOINID_KNOWN)
		ev.detached = (r->f & PTWK_F_DETACHED) != 0;
	emit(c, &ev);
}

static void on_start(struct ptwk_conv *c, const struct ptwk_record *r)
{
	struct ptwk_thread *th = thread_of(c, (pid_t)r->tid);
	if (th && th->started && !th->created && !th->pthread && !th->routine && r->a &&
	    (r->f & PTWK_F_ROUTINE_KNOWN) && (pid_t)r->tid != c->pid) {
		/* Listed at the attach from /proc alone (its pthread_create was
		 * between putting it in libthread_db's list and its clone: no
		 * tid there yet), and entering start_thread since: it says what
		 * the list could not, its pthread_t and routine. */
		th->pthread = r->a;
		th->routine = r->c;
		th->arg = r->d;
		struct ptw_event ev = ptw_event_init(PTW_EV_THREAD_START, r->ns, (pid_t)r->tid);
		ev.pthread = r->a;
		ev.routine = locate(c, th->routine);
		ev.has_arg = (r->f & PTWK_F_ARG_KNOWN) != 0;
		ev.arg = th->arg;
		emit(c, &ev);
		return;
	}
	/* start_thread is entered once per thread, by the thread its
	 * argument describes: anything else is not a start we can pair. */
	if (!th || th->started || (th->pthread && r->a && th->pthread != r->a))
		return;
	bool has_arg = th->created;
	if (th->raw) {
		/* start_thread entered: a pthread after all, its creation not seen
		 * by the probes. Its routine and argument from its struct pthread
		 * (BPF read them there), or it stays a clone's span. */
		if (!r->a || !(r->f & PTWK_F_ROUTINE_KNOWN))
			return;
		th->raw = false;
		th->pthread = r->a;
		th->routine = r->c;
		th->arg = r->d;
		has_arg = (r->f & PTWK_F_ARG_KNOWN) != 0;
	}
	th->started = true;
	struct ptw_event ev = ptw_event_init(PTW_EV_THREAD_START, r->ns, (pid_t)r->tid);
	ev.routine = locate(c, th->routine);
	ev.has_arg = has_arg;
	ev.arg = th->arg;
	emit(c, &ev);
}

static void on_death(struct ptwk_conv *c, const struct ptwk_record *r)
{
	struct ptwk_thread *th = thread_of(c, (pid_t)r->tid);
	/* __call_tls_dtors also runs in exit(): only start_thread's call,
	 * in a thread that has a start routine, is a thread's end. */
	if (!th || th->dead || (pid_t)r->tid == c->pid || !th->pthread ||
	    (th->pthread && r->c && th->pthread != r->c))
		return;
	th->dead = true;
	if ((r->f & PTWK_F_GAP) && !c->probes_blind)
		c->gap_ended++;
	struct ptw_event ev = ptw_event_init(PTW_EV_THREAD_DEATH, r->ns, (pid_t)r->tid);
	if (r->f & PTWK_F_RESULT_KNOWN) {
		ev.has_value = true;
		ev.value = r->a;
	}
	if (r->f & PTWK_F_UNWIND_KNOWN) {
		ev.unwinding = r->b != 0;
		/* Whether a cancellation acted, from the bits the thread keeps
		 * (and may set itself): only for a thread that began before the
		 * probes were in, whose pthread_exit or pthread_cancel may have
		 * come unseen. One made since had its calls seen: the span engine
		 * goes by those (no call seen, not certain: as the tracer has it). */
		if (ev.unwinding && !(th->created && th->created_ns >= c->probes_in_ns))
			ev.cancelled = (r->f & PTWK_F_CANCELED) != 0;
	}
	emit(c, &ev);
}

static void process_end(struct ptwk_conv *c);

/* What the thread cost in CPU (PTWK_F_CPU): at its exit tracepoint, then
 * final at its last switch (PTWK_CPU, after its end: the span engine
 * takes it for the span that has just ended). */
static void thread_cpu(struct ptwk_conv *c, const struct ptwk_record *r)
{
	if (!(r->f & PTWK_F_CPU))
		return;
	struct ptw_event ev = ptw_event_init(PTW_EV_THREAD_CPU, r->ns, (pid_t)r->tid);
	ev.cpu = (struct ptw_cpu){ .set = true,
				   .on_cpu_ns = r->c,
				   .runnable_ns = r->d,
				   .voluntary = r->e >> 32,
				   .involuntary = r->e & 0xffffffffu };
	emit(c, &ev);
}

static void on_lwp_exit(struct ptwk_conv *c, const struct ptwk_record *r)
{
	pid_t tid = (pid_t)r->tid;
	char comm[PTWK_COMM_LEN + 1];
	memcpy(comm, r->comm, PTWK_COMM_LEN);
	comm[PTWK_COMM_LEN] = '\0';
	struct ptwk_thread *th = thread_of(c, tid);
	if (th)
		name(c, tid, comm, r->ns);
	if (th && th->raw && !th->started) {
		th->raw = false; /* (counted once) */
		if (th->created_ns < c->probes_in_ns)
			c->window_clones++;
	}
	if (th)
		thread_cpu(c, r);
	struct ptw_event ev = ptw_event_init(PTW_EV_LWP_EXIT, r->ns, tid);
	unsigned status = (unsigned)r->a;
	/* As the tracer tells it from orig_rax: its own exit, its own
	 * exit_group, or taken down (a signal, another thread's exit_group,
	 * exec). Without the registers, the process's group exit says. */
	if (!(r->f & PTWK_F_HOW_KNOWN))
		ev.exit_how = (r->f & PTWK_F_GROUP_EXIT) ? PTW_EXIT_KILLED : PTW_EXIT_SELF;
	else if (r->f & PTWK_F_EXIT_GROUP_CALL)
		ev.exit_how = PTW_EXIT_GROUP;
	else if (r->f & PTWK_F_EXIT_CALL)
		ev.exit_how = PTW_EXIT_SELF;
	else
		ev.exit_how = PTW_EXIT_KILLED;
	ev.exit_code = (int)((status >> 8) & 0xff);
	ev.sig = (int)(status & 0x7f);
	emit(c, &ev);
	thread_forget(c, tid);
	if (r->f & PTWK_F_GROUP_DEAD) {
		/* The last thread: the process is over. Its status is
		 * exit_group's (or the fatal signal) when the group went down
		 * together, else the last thread's own exit. */
		c->end_pending = true;
		c->end_status = (r->f & PTWK_F_GROUP_EXIT) ? (unsigned)r->b : status;
		c->end_pending_ns = r->ns;
	}
	/* (once every thread's exit is in: the others' may come after) */
	if (c->end_pending && !c->threads.count)
		process_end(c);
}

bool ptwk_conv_end_pending(struct ptwk_conv *c)
{
	if (!c->end_pending || c->ended)
		return false;
	process_end(c);
	return true;
}

static void process_end(struct ptwk_conv *c)
{
	unsigned st = (unsigned)c->end_status;
	struct ptw_event pe = ptw_event_init(PTW_EV_PROCESS_EXIT, c->end_pending_ns, c->pid);
	if (st & 0x7f) {
		pe.sig = (int)(st & 0x7f);
		pe.core_dumped = (st & 0x80) != 0;
	} else {
		pe.exit_code = (int)((st >> 8) & 0xff);
	}
	c->ended = true;
	c->end_pending = false;
	c->exit_code = pe.exit_code;
	c->exit_signal = pe.sig;
	c->core_dumped = pe.core_dumped;
	c->end_ns = pe.ns;
	emit(c, &pe);
}

static void on_image_exec(struct ptwk_conv *c, const struct ptwk_record *r)
{
	if (c->launched) {
		/* A launch: the command's exec is where it begins (the fork
		 * before it was ptwatch's, held). */
		c->launched = false;
	} else {
		struct ptw_event ev = ptw_event_init(PTW_EV_EXEC, r->ns, c->pid);
		ev.other_tid = (pid_t)r->a;
		emit(c, &ev);
	}
	/* Every other thread is gone (exec killed them; their exits came
	 * before), and the new image starts with one thread: its span. */
	size_t it = 0;
	void *v;
	while (ptw_map_next(&c->threads, &it, NULL, &v))
		free(v);
	ptw_map_free(&c->threads);
	c->main_addr = 0; /* the new image's are in its MAIN record */
	c->main_caller = 0;
	c->exec_gap = r->ns < c->probes_in_ns; /* (until its MAIN comes after all) */
	struct ptwk_thread *th = thread_new(c, c->pid);
	th->started = true;
	struct ptw_event img = ptw_event_init(PTW_EV_IMAGE, r->ns, c->pid);
	img.name = c->ops.exec ? c->ops.exec(c->ops.ctx) : NULL;
	emit(c, &img);
}

/* pthread_exit, pthread_cancel, pthread_detach, a join: the first
 * argument is the event's. */
static void on_call(struct ptwk_conv *c, const struct ptwk_record *r, enum ptw_event_kind kind)
{
	struct ptw_event ev = ptw_event_init(kind, r->ns, (pid_t)r->tid);
	if (kind == PTW_EV_EXIT_CALL) {
		ev.has_value = true;
		ev.value = r->a;
	} else {
		ev.pthread = r->a;
	}
	if (kind == PTW_EV_JOIN_CALL) {
		struct ptwk_thread *th = thread_of(c, (pid_t)r->tid);
		if (th)
			th->in_join = true;
	}
	emit(c, &ev);
}

static void on_join_return(struct ptwk_conv *c, const struct ptwk_record *r)
{
	struct ptwk_thread *th = thread_of(c, (pid_t)r->tid);
	if (!th || !th->in_join)
		return;
	th->in_join = false;
	struct ptw_event ev = ptw_event_init(PTW_EV_JOIN_RETURN, r->ns, (pid_t)r->tid);
	ev.has_value = true;
	ev.value = (uint32_t)r->a; /* an errno value, 0 = joined */
	emit(c, &ev);
}

/* libc is about to call main(). */
static void on_main(struct ptwk_conv *c, const struct ptwk_record *r)
{
	struct ptwk_thread *th = thread_of(c, (pid_t)r->tid);
	if ((pid_t)r->tid != c->pid || !th || th->main_seen)
		return;
	th->main_seen = true;
	c->exec_gap = false;
	th->pthread = r->b;
	c->main_addr = r->a;
	c->main_caller = r->c;
	if (c->ops.image_ready)
		c->ops.image_ready(c->ops.ctx);
	struct ptw_event ev = ptw_event_init(PTW_EV_MAIN_START, r->ns, c->pid);
	ev.routine = locate(c, r->a);
	ev.pthread = r->b;
	emit(c, &ev);
}

/* main() returned into libc, which calls exit() with its value. */
static void on_exit_fn(struct ptwk_conv *c, const struct ptwk_record *r)
{
	if ((pid_t)r->tid != c->pid)
		return;
	if (c->main_caller && c->main_caller_size) {
		if (r->b - (c->main_caller + (uint64_t)c->main_caller_delta) >= c->main_caller_size)
			return;
	} else if (!c->ops.main_returns_to || !c->ops.main_returns_to(c->ops.ctx, r->b)) {
		return;
	}
	struct ptw_event ev = ptw_event_init(PTW_EV_THREAD_RETURN, r->ns, c->pid);
	ev.has_value = true;
	ev.value = (uint32_t)r->a; /* main returns int */
	emit(c, &ev);
}

void ptwk_conv_record(struct ptwk_conv *c, const struct ptwk_record *r)
{
	if (r->kind == PTWK_CPU) { /* (the last thread's comes after the process's end) */
		thread_cpu(c, r);
		return;
	}
	if (c->ended)
		return;
	switch ((enum ptwk_kind)r->kind) {
	case PTWK_CREATE:
		on_create(c, r);
		break;
	case PTWK_START:
	case PTWK_THREAD_BEGIN: /* the clone's return in the thread: the same */
		on_start(c, r);
		break;
	case PTWK_DEATH:
		on_death(c, r);
		break;
	case PTWK_EXIT_CALL:
		on_call(c, r, PTW_EV_EXIT_CALL);
		break;
	case PTWK_CANCEL:
		on_call(c, r, PTW_EV_CANCEL_REQUEST);
		break;
	case PTWK_DETACH:
		on_call(c, r, PTW_EV_DETACH_CALL);
		break;
	case PTWK_JOIN:
		on_call(c, r, PTW_EV_JOIN_CALL);
		break;
	case PTWK_JOIN_RET:
		on_join_return(c, r);
		break;
	case PTWK_EXIT:
		ptwk_frames_end(c, (pid_t)r->tid, r->ns);
		on_lwp_exit(c, r);
		break;
	case PTWK_EXEC:
		ptwk_frames_end(c, 0, r->ns);
		c->gap_calls_possible = false; /* (its new image's probes: said apart) */
		on_image_exec(c, r);
		break;
	case PTWK_EXIT_FN:
		on_exit_fn(c, r);
		break;
	case PTWK_MAIN:
		on_main(c, r);
		break;
	case PTWK_FRAME_ENTRY:
	case PTWK_FRAME_RETURN:
	case PTWK_FRAME_TAIL:
	case PTWK_THROW:
	case PTWK_CATCH:
	case PTWK_LONGJMP:
	case PTWK_DL_STATE:
	case PTWK_SIGNAL:
	case PTWK_SIGRETURN:
	case PTWK_CONTEXT_SWAP:
	case PTWK_CONTEXT_SET:
		ptwk_frames_record(c, r);
		break;
	case PTWK_FATAL_SIGNAL:
		if (r->a == SIGTRAP && (r->f & PTWK_F_READ)) {
			c->trap.seen = true;
			c->trap.tid = (pid_t)r->tid;
			c->trap.ip = r->b;
			c->trap.int3 = (int)r->c == SI_KERNEL;
		}
		if (thread_of(c, (pid_t)r->tid)) {
			struct ptw_event ev =
				ptw_event_init(PTW_EV_FATAL_SIGNAL, r->ns, (pid_t)r->tid);
			ev.sig = (int)r->a;
			ev.from_terminal = (r->f & PTWK_F_CODE) && (int)r->c == SI_KERNEL;
			emit(c, &ev);
		}
		break;
	case PTWK_MODULE: /* kernel.c: the process's modules (modules.c) */
	case PTWK_MODULES_END:
	case PTWK_EXEC_ARGS:
	case PTWK_CPU: /* (above) */
	case PTWK_FORK: /* -f: kernel.c makes the child a process of its own */
	case PTWK_CREATE_CALL:
	case PTWK_NONE:
	case PTWK_KIND_N:
		break;
	}
}

void ptwk_conv_detached(struct ptwk_conv *c, uint64_t ns)
{
	if (ptwk_conv_end_pending(c) || c->ended)
		return;
	struct ptw_event ev = ptw_event_init(PTW_EV_DETACHED, ns, c->pid);
	emit(c, &ev);
}
