/* SPDX-License-Identifier: MIT */
/*
 * --trace: frame spans. An entry breakpoint on every function a pattern
 * matches, in the executable and in every library, including those loaded
 * later (rescanned when ld.so reports a change, as start routines are);
 * at an entry, the return address is read from [sp] and an int3 put there,
 * shared by every open frame that returns there (refcount) and taken away
 * when none does. So a traced call costs two stops and no single step.
 *
 * Each thread keeps a shadow stack of (entry sp, return address) with the
 * rules of ptw_frames.h, only to know which return breakpoints are still
 * needed; the frame spans themselves are paired by the span engine from
 * the events emitted here (FRAME_ENTRY, FRAME_RETURN, THROW, CATCH,
 * LONGJMP), with the same rules.
 *
 * Code entered without a call has a return address no call precedes: the
 * sigreturn trampoline of a signal handler (FRAME_ENTRY with the signal,
 * which the kernel passes in rdi), or the start of a function (glibc's
 * __start_context, where a makecontext'd function returns); both are
 * return sites like others. A handler that is not traced is seen from its
 * signal-delivery stop (SIGNAL_DELIVER, when the process catches the
 * signal) to the trampoline (HOOK_SIGRETURN on glibc's __restore_rt, or
 * on one a traced handler returned to): what it calls carries the signal.
 * Contexts (swapcontext, setcontext) switch the
 * thread's shadow stack: one per context, parked by the stack pointer it
 * resumes at (ptw_frames.h).
 *
 * Nothing here runs, and no symbol is read, when --trace is not given.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <stddef.h>
#include <string.h>
#include <ucontext.h>

#include "ptw_frames.h"
#include "ptw_patterns.h"
#include "ptw_glibc.h"
#include "ptw_trace_select.h"
#include "tracer_internal.h"

struct trace {
	struct ptw_trace_select *sel;
	struct ptw_map scanned;	   /* hash(module path) ^ load address -> 1 */
	unsigned scanned_gen;	   /* img.modules_gen when last scanned */
	struct ptw_map entries;	   /* entry address -> 1: has our frame hook */
	struct retbps retbps;	   /* where open frames return */
	uint64_t swapcontext;	   /* its address (HOOK_CONTEXT: which one was hit) */
	struct ptw_map sigreturns; /* sigreturn trampolines met (return address -> 1) */
	bool sigreturn_hooked;	   /* one has HOOK_SIGRETURN: a handler's end is seen */
	/* per scan: the module being scanned and the host for insertions */
	struct ptw_tracer *t;
	struct ptw_lwp *host;
	const char *module_base;
	bool partial_said; /* trace_partial_stack: said once, for the first thread */
};

/* Its state for a thread: its shadow stack (each open frame has a return
 * breakpoint at its return address). */
struct frames_thread {
	struct feature_thread base;
	struct ptw_shadow shadow;
};

static struct trace *trace_of(struct ptw_tracer *t)
{
	return t->fstate[FEATURE_FRAMES];
}

static void frames_thread_free(struct feature_thread *ft)
{
	struct frames_thread *f = (struct frames_thread *)ft;
	ptw_shadow_clear(&f->shadow, NULL, NULL);
	free(f);
}

/* The thread's, made on first use. */
static struct frames_thread *frames_of(struct ptw_lwp *l)
{
	return (struct frames_thread *)tracer_feature_thread(l, FEATURE_FRAMES,
							     sizeof(struct frames_thread),
							     frames_thread_free);
}

/* The thread's if it has one (NULL: no frame of ours open). */
static struct frames_thread *frames_peek(struct ptw_lwp *l)
{
	return (struct frames_thread *)tracer_feature_peek(l, FEATURE_FRAMES);
}

int ptw_trace_check_pattern(const char *text)
{
	struct ptw_pattern p;
	int r = ptw_pattern_parse(text, &p);
	ptw_pattern_free(&p);
	return r;
}

static bool trace_wanted(const struct ptw_backend_opts *o)
{
	return o->ntrace > 0;
}

static void trace_attached(struct ptw_tracer *t)
{
	struct trace *tr = xcalloc(1, sizeof(*tr));
	tr->sel = ptw_trace_select_new(t->o.trace, t->o.ntrace);
	t->fstate[FEATURE_FRAMES] = tr;
}

/* The address space went away (exec): every breakpoint is forgotten. */
static void trace_image_reset(struct ptw_tracer *t)
{
	struct trace *tr = trace_of(t);
	if (!tr)
		return;
	ptw_map_free(&tr->scanned);
	ptw_map_free(&tr->entries);
	ptw_map_free(&tr->sigreturns);
	tr->sigreturn_hooked = false;
	tracer_retbps_free(&tr->retbps);
	tr->scanned_gen = 0;
}

static void trace_free(struct ptw_tracer *t)
{
	struct trace *tr = trace_of(t);
	if (!tr)
		return;
	ptw_trace_select_free(tr->sel);
	trace_image_reset(t);
	free(tr);
	t->fstate[FEATURE_FRAMES] = NULL;
}

/* ---- finding the functions ---- */

/* A function the patterns select: its entry breakpoint. */
static void add_entry(void *ctx, uint64_t addr, const char *name)
{
	struct trace *tr = ctx;
	struct ptw_tracer *t = tr->t;
	if (ptw_map_get(&tr->entries, addr))
		return;
	int r = tracer_insert_bp(t, addr, HOOK_FRAME_ENTRY, tr->host);
	if (r == -EEXIST)
		return;
	if (r < 0) {
		/* One warning per pattern at the end, not one per function
		 * (--trace '*' may meet hundreds). */
		ptw_dbg(PTW_DBG_TRACER, "--trace: cannot break at %s (%s, %#llx): %s", name,
			tr->module_base, (unsigned long long)addr, strerror(-r));
		ptw_trace_select_failed(tr->sel, name,
					r == -ENOTSUP ? "its first instruction cannot be emulated "
							"or run out of line"
						      : strerror(-r));
		return;
	}
	ptw_map_put(&tr->entries, addr, (void *)1);
}

/* The sigreturn trampoline a signal handler returns to, found by its code
 * (ptw_glibc.h) so that a libc without symbols is no different. */
static bool is_sigreturn(struct ptw_tracer *t, uint64_t addr)
{
	uint8_t code[PTW_GLIBC_SIGRETURN_LEN];
	return addr && ptw_bp_read_original(t->bps, addr, code, sizeof(code)) == 0 &&
	       ptw_glibc_is_sigreturn(code, sizeof(code));
}

/* A sigreturn trampoline: known as one, and hooked (the end of every
 * handler that returns through it, traced or not). */
static void hook_sigreturn_at(struct ptw_tracer *t, struct ptw_lwp *l, uint64_t addr)
{
	struct trace *tr = trace_of(t);
	ptw_map_put(&tr->sigreturns, addr, (void *)1);
	struct ptw_bp *bp = ptw_bp_find(t->bps, addr);
	if ((bp && (bp->hooks & HOOK_SIGRETURN)) || tracer_insert_bp(t, addr, HOOK_SIGRETURN, l) == 0)
		tr->sigreturn_hooked = true;
}

/* The helpers that tell how frames are left without a return
 * (ptw_trace_helpers; ld.so's _dl_debug_state has its breakpoint for
 * every feature already: trace_image). */
static void hook_helpers(struct ptw_tracer *t, struct ptw_lwp *l)
{
	static const unsigned hooks[] = {
		[PTW_TRACE_THROW] = HOOK_THROW,
		[PTW_TRACE_CATCH] = HOOK_CATCH,
		[PTW_TRACE_LONGJMP] = HOOK_LONGJMP,
		[PTW_TRACE_CONTEXT_SWAP] = HOOK_CONTEXT,
		[PTW_TRACE_CONTEXT_SET] = HOOK_CONTEXT,
	};
	struct trace *tr = trace_of(t);
	tr->swapcontext = 0;
	for (size_t i = 0; i < ptw_trace_nhelpers; i++) {
		const struct ptw_trace_helper *h = &ptw_trace_helpers[i];
		uint64_t addr;
		if (h->kind == PTW_TRACE_MODULES_CHANGED ||
		    ptw_symbols_lookup(t->img.syms, h->module ? h->module : PTW_MOD_ANY, h->name,
				       &addr, NULL) != 0)
			continue;
		if (h->kind == PTW_TRACE_SIGRETURN) {
			/* glibc's trampoline, if its name is known (else learnt
			 * from the first traced handler): handlers that are not
			 * traced end there */
			if (is_sigreturn(t, addr))
				hook_sigreturn_at(t, l, addr);
			continue;
		}
		if (h->kind == PTW_TRACE_CONTEXT_SWAP)
			tr->swapcontext = addr; /* (HOOK_CONTEXT: which one was hit) */
		struct ptw_bp *bp = ptw_bp_find(t->bps, addr);
		if (!bp || !(bp->hooks & hooks[h->kind]))
			tracer_insert_bp(t, addr, hooks[h->kind], l);
	}
}

/* Module i of syms as scanned (its file where it is mapped), 0 if unknown;
 * *ret_path its file. */
static uint64_t module_key(struct ptw_symbols *syms, size_t i, const char **ret_path)
{
	uint64_t start;
	bool is_exe;
	if (ptw_symbols_module_info(syms, i, ret_path, &start, &is_exe) < 0)
		return 0;
	return (ptw_str_hash(*ret_path ? *ret_path : "?") ^ (start * 31)) | 1;
}

/* Scans the modules not scanned yet for functions the patterns match. */
static void scan(struct ptw_tracer *t, struct ptw_lwp *l)
{
	struct trace *tr = trace_of(t);
	struct ptw_symbols *syms = t->img.syms;
	if (!tr || !syms)
		return;
	tr->scanned_gen = t->img.modules_gen;
	tr->t = t;
	tr->host = l;
	struct ptw_trace_scan sc = { tr->sel, add_entry, tr };
	size_t n = ptw_symbols_module_count(syms);
	for (size_t i = 0; i < n; i++) {
		const char *path;
		uint64_t key = module_key(syms, i, &path);
		if (!key || ptw_map_get(&tr->scanned, key))
			continue;
		ptw_map_put(&tr->scanned, key, (void *)1);
		if (!ptw_trace_select_applies(tr->sel, path))
			continue;
		tr->module_base = ptw_pattern_base_name(path);
		uint64_t t0 = ptw_now_ns();
		int r = ptw_symbols_module_functions(syms, i, ptw_trace_select_function, &sc);
		ptw_dbg(PTW_DBG_TRACER, "--trace: scanned %s (%s) in %.1f ms", tr->module_base,
			r == 1 ? "symbol table" : r == 0 ? ".dynsym only" : "no symbols",
			(double)(ptw_now_ns() - t0) / 1e6);
		ptw_trace_select_walked(tr->sel, path, r);
	}
	hook_helpers(t, l);
}

static void ignore_function(void *ctx, uint64_t addr, const char *name)
{
	(void)ctx, (void)addr, (void)name;
}

static void trace_prepare(struct ptw_tracer *t)
{
	if (!trace_of(t) || !t->img.syms)
		return;
	/* Reading the symbol tables (and debug files) is most of a scan:
	 * libdwfl keeps them, so the scan that follows with the threads
	 * stopped only matches names. */
	uint64_t t0 = ptw_now_ns();
	size_t n = ptw_symbols_module_count(t->img.syms);
	for (size_t i = 0; i < n; i++)
		ptw_symbols_module_functions(t->img.syms, i, ignore_function, NULL);
	ptw_dbg(PTW_DBG_TRACER, "--trace: symbol tables read in %.1f ms",
		(double)(ptw_now_ns() - t0) / 1e6);
}

static void trace_image(struct ptw_tracer *t, struct ptw_lwp *l)
{
	if (!trace_of(t) || !t->img.syms)
		return;
	trace_image_reset(t);
	/* Libraries come and go: rescan when ld.so says they did. */
	if (t->img.dl_debug_state)
		tracer_insert_bp(t, t->img.dl_debug_state, HOOK_TRACE_LIBS, l);
	scan(t, l);
}

void hook_trace_libs(struct ptw_tracer *t, struct ptw_lwp *l, struct ptw_bp *bp,
		     const struct user_regs_struct *regs, uint64_t ns)
{
	(void)bp, (void)regs, (void)ns;
	if (trace_of(t) && trace_of(t)->scanned_gen != t->img.modules_gen) {
		/* A dlclose'd library may come back at the same address: it
		 * is scanned again; the modules still where they were are not
		 * (each scan counts its matches for the warnings) */
		struct ptw_map now = { 0 };
		size_t nm = t->img.syms ? ptw_symbols_module_count(t->img.syms) : 0;
		for (size_t i = 0; i < nm; i++) {
			const char *path;
			uint64_t key = module_key(t->img.syms, i, &path);
			if (key && ptw_map_get(&trace_of(t)->scanned, key))
				ptw_map_put(&now, key, (void *)1);
		}
		ptw_map_free(&trace_of(t)->scanned);
		trace_of(t)->scanned = now;
		/* Entry breakpoints of unloaded libraries were forgotten. */
		size_t it = 0;
		uint64_t addr;
		uint64_t *gone = NULL;
		size_t ngone = 0;
		while (ptw_map_next(&trace_of(t)->entries, &it, &addr, NULL))
			if (!ptw_bp_find(t->bps, addr)) {
				gone = xreallocarray(gone, ngone + 1, sizeof(*gone));
				gone[ngone++] = addr;
			}
		for (size_t i = 0; i < ngone; i++)
			ptw_map_del(&trace_of(t)->entries, gone[i]);
		/* Return sites in them too: another library may come there. */
		it = 0;
		ngone = 0;
		while (ptw_map_next(&trace_of(t)->retbps.refs, &it, &addr, NULL))
			if (!ptw_bp_find(t->bps, addr)) {
				gone = xreallocarray(gone, ngone + 1, sizeof(*gone));
				gone[ngone++] = addr;
			}
		for (size_t i = 0; i < ngone; i++)
			ptw_map_del(&trace_of(t)->retbps.refs, gone[i]);
		free(gone);
		ptw_map_free(&trace_of(t)->retbps.checked);
		scan(t, l);
	}
}

/* ---- return breakpoints ---- */

/* A frame of the thread's shadow stack is over: its return breakpoint is
 * not needed for it any more (ctx: the tracer). */
static void left(void *ctx, const struct ptw_shadow_frame *f, enum ptw_shadow_how how)
{
	(void)how;
	struct ptw_tracer *t = ctx;
	tracer_retbp_put(t, &trace_of(t)->retbps, f->ret, HOOK_FRAME_RETURN);
}

static void trace_thread_gone(struct ptw_tracer *t, struct thread *th)
{
	struct frames_thread *f = (struct frames_thread *)th->fdata[FEATURE_FRAMES];
	if (!f)
		return;
	ptw_shadow_clear(&f->shadow, left, t);
	frames_thread_free(&f->base);
	th->fdata[FEATURE_FRAMES] = NULL;
}

/* ---- the hooks ---- */

/*
 * A function entered with a return address no call precedes: is that
 * address still where it returns to? The sigreturn trampoline (a signal
 * handler; hooked from then on for every handler's end) or the start of a
 * named function (glibc's __start_context, a makecontext'd function's
 * return). Anything else (entered by a jump, [sp] not a return address)
 * is not.
 */
static bool return_site_without_call(struct ptw_tracer *t, struct ptw_lwp *l, uint64_t ret)
{
	if (is_sigreturn(t, ret)) {
		hook_sigreturn_at(t, l, ret);
		return true;
	}
	const struct ptw_location *loc = tracer_locate(t, ret);
	return loc && loc->symbol && loc->symbol_offset == 0;
}

void hook_frame_entry(struct ptw_tracer *t, struct ptw_lwp *l, struct ptw_bp *bp,
		      const struct user_regs_struct *regs, uint64_t ns)
{
	(void)bp;
	struct frames_thread *th = frames_of(l);
	uint64_t sp = regs->rsp, ret;
	int sig = 0;
	if (!trace_of(t) || tracer_read_u64(t, sp, &ret) < 0)
		return;
	/* The function jumped back to its own start, its call's slot and
	 * return address as they were (pthread_spin_lock's retry after a
	 * spin): the same call. A call of its own would be deeper. */
	const struct ptw_shadow_frame *top = ptw_shadow_top(&th->shadow);
	if (top && top->sp == sp && top->ret == ret && top->tag == regs->rip)
		return;
	int r = tracer_retbp_get(t, &trace_of(t)->retbps, l, ret, HOOK_FRAME_RETURN);
	if (r == -EINVAL && return_site_without_call(t, l, ret)) {
		tracer_retbp_allow(&trace_of(t)->retbps, ret);
		r = tracer_retbp_get(t, &trace_of(t)->retbps, l, ret, HOOK_FRAME_RETURN);
	}
	/* a signal handler: the kernel enters it with its signal in rdi (one
	 * map lookup, no memory read, for an ordinary call) */
	if (r == 0 && ptw_map_get(&trace_of(t)->sigreturns, ret))
		sig = regs->rdi >= 1 && regs->rdi <= 64 ? (int)regs->rdi : 0;
	if (r < 0) {
		const struct ptw_location *loc = tracer_locate(t, regs->rip);
		tracer_warn(t, PTW_W_TRACE_NO_RETURN,
			    "--trace: calls of %s returning to %#llx are not reported: %s",
			    loc && loc->symbol ? loc->symbol : "?", (unsigned long long)ret,
			    r == -EINVAL ? "no call precedes that address (entered by a jump?)"
				  : strerror(-r));
		return;
	}
	/* (tagged with its function's entry: a jump back to it is told) */
	ptw_shadow_enter(&th->shadow, sp, ret, regs->rip, sig != 0, true, left, t);
	struct ptw_event ev = ptw_event_init(PTW_EV_FRAME_ENTRY, ns, l->tid);
	ev.routine = tracer_locate(t, regs->rip);
	ev.sp = sp;
	ev.ret_addr = ret;
	ev.sig = sig;
	tracer_emit(t, &ev);
}

void hook_frame_return(struct ptw_tracer *t, struct ptw_lwp *l, struct ptw_bp *bp,
		       const struct user_regs_struct *regs, uint64_t ns)
{
	(void)bp;
	struct frames_thread *th = frames_peek(l);
	if (!th || !trace_of(t) || !ptw_shadow_return(&th->shadow, regs->rsp, regs->rip, left, t))
		return; /* the return site reached by another way: nothing ends */
	struct ptw_event ev = ptw_event_init(PTW_EV_FRAME_RETURN, ns, l->tid);
	ev.sp = regs->rsp;
	ev.ret_addr = regs->rip;
	ev.has_value = true;
	ev.value = regs->rax;
	tracer_emit(t, &ev);
}

void hook_throw(struct ptw_tracer *t, struct ptw_lwp *l, struct ptw_bp *bp,
		const struct user_regs_struct *regs, uint64_t ns)
{
	(void)bp, (void)regs;
	struct frames_thread *th = frames_peek(l);
	if (!th || !th->shadow.run.n)
		return; /* no frame of ours to skip */
	struct ptw_event ev = ptw_event_init(PTW_EV_THROW, ns, l->tid);
	tracer_emit(t, &ev);
}

void hook_catch(struct ptw_tracer *t, struct ptw_lwp *l, struct ptw_bp *bp,
		const struct user_regs_struct *regs, uint64_t ns)
{
	(void)bp;
	struct frames_thread *th = frames_peek(l);
	if (!th || !th->shadow.run.n)
		return;
	/* __cxa_begin_catch is called by the catching frame: its stack
	 * pointer is the one above our return address. */
	uint64_t sp = regs->rsp + 8;
	ptw_shadow_land(&th->shadow, sp, left, t);
	struct ptw_event ev = ptw_event_init(PTW_EV_CATCH, ns, l->tid);
	ev.sp = sp;
	tracer_emit(t, &ev);
}

/*
 * Where a longjmp lands: glibc's x86-64 jmp_buf holds rbx, rbp, r12-r15,
 * rsp, pc, the last three mangled (PTR_MANGLE: xor with the thread's
 * pointer guard, at fs:0x30, then rotate left by 17). 0 when it cannot be
 * read or makes no sense (then the next event tells).
 */
static uint64_t longjmp_target_sp(struct ptw_tracer *t, const struct user_regs_struct *regs)
{
	uint64_t guard, mangled;
	if (!regs->fs_base || tracer_read_u64(t, regs->fs_base + 0x30, &guard) < 0 ||
	    tracer_read_u64(t, regs->rdi + 6 * 8, &mangled) < 0)
		return 0;
	uint64_t sp = ((mangled >> 17) | (mangled << 47)) ^ guard;
	return sp > regs->rsp && sp - regs->rsp < PTW_SHADOW_WINDOW ? sp : 0;
}

void hook_longjmp(struct ptw_tracer *t, struct ptw_lwp *l, struct ptw_bp *bp,
		  const struct user_regs_struct *regs, uint64_t ns)
{
	(void)bp;
	struct frames_thread *th = frames_peek(l);
	if (!th || !th->shadow.run.n)
		return;
	struct ptw_event ev = ptw_event_init(PTW_EV_LONGJMP, ns, l->tid);
	ev.sp = longjmp_target_sp(t, regs);
	/* Every frame below the landing point is left now; a later hit at
	 * one's return site (the code after its call, reached again by the
	 * jump) is no return. */
	if (ev.sp)
		ptw_shadow_land(&th->shadow, ev.sp, left, t);
	tracer_emit(t, &ev);
}

/*
 * swapcontext(oucp, ucp) or setcontext(ucp): the thread goes to the stack
 * pointer saved in ucp (uc_mcontext's RSP, kept unmangled); swapcontext
 * saves in oucp the one it resumes at (its entry rsp + 8, above the return
 * address). The shadow stacks follow as the engine's do (ptw_frames.h).
 */
void hook_context(struct ptw_tracer *t, struct ptw_lwp *l, struct ptw_bp *bp,
		  const struct user_regs_struct *regs, uint64_t ns)
{
	struct trace *tr = trace_of(t);
	if (!tr)
		return;
	bool swap = tr->swapcontext && bp->addr == tr->swapcontext;
	uint64_t ucp = swap ? regs->rsi : regs->rdi, to;
	if (tracer_read_u64(t, ucp + offsetof(ucontext_t, uc_mcontext.gregs[REG_RSP]), &to) < 0 ||
	    !to)
		return; /* it will fail (EFAULT) or crash: the next events tell */
	uint64_t resume = swap ? regs->rsp + 8 : 0;
	struct frames_thread *th = frames_of(l);
	ptw_shadow_switch(&th->shadow, to, resume, left, t);
	struct ptw_event ev = ptw_event_init(PTW_EV_CONTEXT_SWITCH, ns, l->tid);
	ev.sp = to;
	ev.has_arg = swap;
	ev.arg = resume;
	tracer_emit(t, &ev);
}

/*
 * A signal-delivery stop: if the process has a handler for sig, the kernel
 * runs it when the thread resumes, on top of what it interrupted (rsp now).
 * Said only when a trampoline is hooked: the handler's end must be seen.
 */
static void trace_signal_delivery(struct ptw_tracer *t, struct ptw_lwp *l, int sig, uint64_t ns)
{
	struct trace *tr = trace_of(t);
	struct user_regs_struct *regs;
	if (!tr || !tr->sigreturn_hooked || sig < 1 || sig > 64 || !ptw_proc_sig_caught(t->proc->pid, sig) ||
	    ptw_getregs(t->proc, l, &regs) < 0)
		return;
	ptw_shadow_signal(&frames_of(l)->shadow, regs->rsp, sig);
	struct ptw_event ev = ptw_event_init(PTW_EV_SIGNAL_DELIVER, ns, l->tid);
	ev.sig = sig;
	ev.sp = regs->rsp;
	tracer_emit(t, &ev);
}

void hook_sigreturn(struct ptw_tracer *t, struct ptw_lwp *l, struct ptw_bp *bp,
		    const struct user_regs_struct *regs, uint64_t ns)
{
	(void)bp;
	if (!trace_of(t))
		return;
	struct frames_thread *th = frames_peek(l);
	if (th)
		ptw_shadow_sigreturn(&th->shadow);
	struct ptw_event ev = ptw_event_init(PTW_EV_SIGRETURN, ns, l->tid);
	ev.sp = regs->rsp;
	tracer_emit(t, &ev);
}

/* ---- calls under way at an attach ---- */

/* Frames of a thread's stack looked at for calls under way: beyond, the
 * outer ones are not reported (said). */
#define UNDER_WAY_MAX_FRAMES 256

/*
 * Thread l, stopped by the attach, was running before: every traced
 * function on its stack is a call under way. Each becomes a frame span
 * whose entry was not seen (emitted outermost first, at the session's
 * start), its return watched as for the calls seen: a return breakpoint
 * at its return address, its (entry sp, return address) on the shadow
 * stack. The unwind gives frame i's function (pcs[i]: the pc, then
 * return addresses) and where its caller's stack pointer is (sps[i + 1]:
 * the slot of its return address is 8 below).
 */
static void trace_under_way(struct ptw_tracer *t, struct ptw_lwp *l)
{
	struct trace *tr = trace_of(t);
	struct ptw_symbols *syms = t->img.syms;
	struct user_regs_struct *regs;
	if (!tr || !syms || !tr->entries.count || l->state != PTW_LWP_STOPPED ||
	    ptw_getregs(t->proc, l, &regs) < 0)
		return;
	uint64_t *pcs = xcalloc(2 * UNDER_WAY_MAX_FRAMES, sizeof(*pcs));
	uint64_t *sps = pcs + UNDER_WAY_MAX_FRAMES;
	bool whole, missed = false;
	int n = ptw_symbols_unwind_sps(syms, l->tid, regs, pcs, sps, UNDER_WAY_MAX_FRAMES, &whole);
	/* (at the session's start; a fork child's: at its fork) */
	uint64_t ns = t->root && t->start_ns ? t->start_ns : (t->root ? t->root : t)->start_ns;
	for (int i = n - 2; i >= 0; i--) {
		/* a return address: the call is the instruction before it */
		uint64_t pc = i ? pcs[i] - 1 : pcs[i], lo, hi, ret = pcs[i + 1];
		if (ptw_symbols_function_range(syms, pc, &lo, &hi) < 0 ||
		    !ptw_map_get(&tr->entries, lo))
			continue;
		/* At its first instruction, the call has not begun: its entry
		 * breakpoint is there and reports it. */
		if (!i && pcs[0] == lo)
			continue;
		uint64_t sp = tracer_return_slot(t, pcs, sps, i);
		if (!sp || tracer_retbp_get(t, &tr->retbps, l, ret, HOOK_FRAME_RETURN) < 0) {
			ptw_dbg(PTW_DBG_TRACER,
				"--trace: %d: a call under way at %#llx is not reported", l->tid,
				(unsigned long long)lo);
			missed = true;
			continue;
		}
		struct frames_thread *th = frames_of(l);
		ptw_shadow_enter(&th->shadow, sp, ret, 0, false, true, left, t);
		struct ptw_event ev = ptw_event_init(PTW_EV_FRAME_ENTRY, ns, l->tid);
		ev.routine = tracer_locate(t, lo);
		ev.sp = sp;
		ev.ret_addr = ret;
		ev.before_attach = true;
		tracer_emit(t, &ev);
	}
	if ((missed || !whole || n == UNDER_WAY_MAX_FRAMES) && !tr->partial_said) {
		tr->partial_said = true; /* (once: the first thread names the problem) */
		tracer_warn(
			t, PTW_W_TRACE_PARTIAL_STACK,
			missed ? "--trace: a call under way at the attach in thread %d (the first "
				 "such) is not reported: its stack slot or its return site could "
				 "not be trusted"
			       : "--trace: the stack of thread %d (the first such) could not be "
				 "read to its start at the attach: calls under way in its outer "
				 "frames are not reported",
			l->tid);
	}
	free(pcs);
}

/* ---- the end ---- */

/* A note of the selections (ptw_trace_select_notes), said by the tracer
 * of the process it is about (ctx: the tracers, in the selections' order). */
static void note(void *ctx, size_t which, int code, const char *line)
{
	tracer_warn(((struct ptw_tracer **)ctx)[which], code, "%s", line);
}

/* The session is over (called for the root): a pattern is warned about
 * when it matched nothing in any process of the session (-f: the root, a
 * shell say, may have none of what its children have). */
static void trace_finish(struct ptw_tracer *t)
{
	struct trace *tr = trace_of(t);
	if (!tr || t->root)
		return;
	/* Every process that traced, the root first (all have the same patterns). */
	size_t n = 0;
	struct ptw_trace_select **all = xcalloc(t->nfollowed + 1, sizeof(*all));
	struct ptw_tracer **who = xcalloc(t->nfollowed + 1, sizeof(*who));
	for (size_t k = 0; k <= t->nfollowed; k++) {
		struct ptw_tracer *c = k ? t->followed[k - 1] : t;
		if (trace_of(c) && trace_of(c)->sel &&
		    ptw_trace_select_patterns(trace_of(c)->sel) == ptw_trace_select_patterns(tr->sel)) {
			who[n] = c;
			all[n++] = trace_of(c)->sel;
		}
	}
	ptw_trace_select_notes(all, n, note, who);
	free(all);
	free(who);
}

const struct tracer_feature feature_frames = {
	.name = "frames",
	.wanted = trace_wanted,
	.attached = trace_attached,
	.prepare = trace_prepare,
	.image_ready = trace_image,
	.under_way = trace_under_way,
	.image_reset = trace_image_reset,
	.thread_gone = trace_thread_gone,
	.signal_delivery = trace_signal_delivery,
	.finish = trace_finish,
	.free = trace_free,
};
