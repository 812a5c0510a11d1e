/* SPDX-License-Identifier: MIT OR GPL-2.0 */
/*
 * The modules of a watched process, from its dynamic linker's own list,
 * read in the process's context: a uprobe on ld.so's _dl_debug_state
 * (called once the list is consistent after the program's libraries are
 * loaded, before any constructor or main runs, and at every dlopen and
 * dlclose) walks r_debug's link_map with bpf_probe_read_user and sends
 * each entry's l_addr and l_name. No lock of the target's memory map is
 * taken (reading /proc/PID/maps from another task takes it: a thread
 * stack being mapped meanwhile waits, and a SCHED_FIFO program's order
 * changes). The memory is the target's: every read may fail, the list
 * may loop; the walk is bounded and user space checks everything
 * (src/kernel/modules.c, ptw_symbols_new_listed). Included by
 * ptw_kernel.bpf.c.
 */

/* _r_debug's address minus _dl_debug_state's in ld.so (set by user
 * space from ld.so's symbols): the probe's ip gives the rest. */
const volatile __s64 rdebug_from_probe = 0;

/* glibc's struct r_debug and struct link_map (link.h): their public,
 * stable heads. Since glibc 2.35 _r_debug is a struct r_debug_extended:
 * r_next links the r_debug of each other link-map namespace (dlmopen),
 * valid when r_version is 2 (before: 1, one namespace, and r_next is
 * whatever follows in ld.so's data: not read). */
struct ptw_r_debug {
	__s32 r_version;
	__u64 r_map;
	__u64 r_brk;
	__s32 r_state; /* RT_CONSISTENT 0, RT_ADD 1, RT_DELETE 2 */
	__u64 r_ldbase;
	__u64 r_next;
};

/* At most so many namespaces (glibc's DL_NNS is 16). */
#define PTW_MAX_NAMESPACES 16

struct ptw_link_map {
	__u64 l_addr, l_name, l_ld, l_next, l_prev;
};

/* One entry of the walk (a bpf_loop step: verified once, not per entry):
 * namespace 0's list, then each other namespace's. */
struct ptw_walk {
	__u64 id, walk, lm;
	__u64 next_ns; /* the next namespace's r_debug, else 0 */
	__u32 sent;
	bool whole, changing;
};

/* The namespace at w->next_ns: its list next (lm), unless it is being
 * changed (its consistent list comes with a later call). (No count of
 * namespaces kept: the loops' bounds bound a chain that loops, and a
 * counter compared at each step makes the verifier walk every value of
 * it: 0.5 s to load.) */
static __always_inline bool ptw_walk_namespace(struct ptw_walk *w)
{
	struct ptw_r_debug rd;
	if (bpf_probe_read_user(&rd, sizeof(rd), (const void *)w->next_ns)) {
		count(PTWK_STAT_READ_FAIL);
		return false;
	}
	if (rd.r_state != 0) {
		w->changing = true;
		return false;
	}
	w->lm = rd.r_map;
	w->next_ns = rd.r_next;
	return true;
}

/* Whether every other namespace is consistent (a pass over r_next first:
 * a list half made is not sent). */
static long ptw_ns_step(__u32 i, void *arg)
{
	struct ptw_walk *w = arg;
	(void)i;
	if (!w->next_ns)
		return 1;
	if (!ptw_walk_namespace(w))
		return 1;
	return 0;
}

static long ptw_walk_step(__u32 i, void *arg)
{
	struct ptw_walk *w = arg;
	(void)i;
	if (!w->lm && w->next_ns) {
		if (!ptw_walk_namespace(w))
			return 1;
		return 0; /* (its first entry: the next step) */
	}
	if (!w->lm) {
		w->whole = true;
		return 1;
	}
	if (w->sent >= PTWK_MAX_MODULES)
		return 1; /* a list this long loops, or is forged */
	struct ptw_link_map l;
	if (bpf_probe_read_user(&l, sizeof(l), (const void *)w->lm)) {
		count(PTWK_STAT_READ_FAIL);
		return 1;
	}
	struct ptwk_module_record *m = bpf_ringbuf_reserve(&rb, sizeof(*m), 0);
	if (!m) {
		lost(PTWK_MODULE);
		return 1;
	}
	__builtin_memset(&m->r, 0, sizeof(m->r));
	begin(&m->r, PTWK_MODULE, w->id);
	m->r.ns = w->walk;
	m->r.a = l.l_addr;
	m->r.b = l.l_ld;
	m->r.c = w->sent;
	m->r.d = w->lm;
	m->r.e = w->walk;
	long n = bpf_probe_read_user_str(m->path, sizeof(m->path), (const void *)l.l_name);
	if (n > 0 && n < PTWK_PATH_LEN)
		m->r.f |= PTWK_F_READ;
	else
		m->path[0] = '\0';
	bpf_ringbuf_submit(m, BPF_RB_NO_WAKEUP);
	count(PTWK_STAT_SENT);
	w->sent++;
	w->lm = l.l_next;
	return 0;
}

SEC("uprobe")
int ptw_modules(struct pt_regs *ctx)
{
	__u64 id = current_id();
	__u32 tgid = id >> 32;
	if (!bpf_map_lookup_elem(&watched, &tgid))
		return 0;
	struct ptwk_record end = {};
	begin(&end, PTWK_MODULES_END, id);
	end.e = end.ns;
	end.b = ctx->ip + rdebug_from_probe;
	struct ptw_r_debug rd;
	if (bpf_probe_read_user(&rd, sizeof(rd), (const void *)end.b)) {
		count(PTWK_STAT_READ_FAIL);
		send(&end, false);
		return 0;
	}
	if (rd.r_state != 0)
		return 0; /* being changed: the consistent list comes next */
	__u64 next_ns = rd.r_version >= 2 ? rd.r_next : 0;
	struct ptw_walk w = { .next_ns = next_ns };
	bpf_loop(PTW_MAX_NAMESPACES + 1, ptw_ns_step, &w, 0);
	if (w.changing)
		return 0; /* the consistent list comes next */
	w = (struct ptw_walk){ .id = id, .walk = end.e, .lm = rd.r_map, .next_ns = next_ns };
	bpf_loop(PTWK_MAX_MODULES + PTW_MAX_NAMESPACES + 1, ptw_walk_step, &w, 0);
	end.a = w.sent;
	if (w.whole)
		end.f |= PTWK_F_MODULES_WHOLE;
	/* The reader is woken (rare: a start, a dlopen): --trace probes the
	 * new libraries once it has the list. Not needed to name code: the
	 * files stay on disk. */
	send(&end, true);
	return 0;
}

/* An exec's command line, read in the exec'ing task (its new stack,
 * written by the kernel a moment ago): sent after its PTWK_EXEC. */
struct mm_struct___args {
	unsigned long arg_start, arg_end;
} __attribute__((preserve_access_index));

struct task_struct___args {
	struct mm_struct___args *mm;
} __attribute__((preserve_access_index));

static __always_inline void exec_args(__u64 id)
{
	struct ptwk_args_record *x = bpf_ringbuf_reserve(&rb, sizeof(*x), 0);
	if (!x) {
		lost(PTWK_EXEC_ARGS);
		return;
	}
	__builtin_memset(&x->r, 0, sizeof(x->r));
	begin(&x->r, PTWK_EXEC_ARGS, id);
	struct task_struct___args *t = (struct task_struct___args *)bpf_get_current_task();
	__u64 start = BPF_CORE_READ(t, mm, arg_start), end = BPF_CORE_READ(t, mm, arg_end);
	__u64 len = end > start ? end - start : 0;
	x->r.b = len;
	if (len > PTWK_ARGS_LEN)
		len = PTWK_ARGS_LEN;
	if (len && bpf_probe_read_user(x->args, len, (const void *)start) == 0) {
		x->r.a = len;
		x->r.f |= PTWK_F_READ;
	} else if (len) {
		count(PTWK_STAT_READ_FAIL);
	}
	bpf_ringbuf_submit(x, BPF_RB_NO_WAKEUP);
	count(PTWK_STAT_SENT);
}
