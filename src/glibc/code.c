/* SPDX-License-Identifier: MIT */
/* glibc's code: libc's caller of main() and start_thread without their
 * names, and the sigreturn trampoline; see ptw_glibc.h. */
#include "ptw_glibc.h"

#include <errno.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "ptw_breakpoints.h"
#include "ptw_symbols.h"

#define MAX_CODE  4096 /* bytes of one function read, at most */
#define MAX_CALLS 64

/* The direct call targets (leas: the rip-relative addresses) of the
 * function at addr (its CFI range). */
static int insns_of(struct ptw_symbols *syms, const struct ptw_glibc_code *code, uint64_t addr,
		    bool leas, uint64_t *out, uint64_t *ret_hi)
{
	uint64_t lo, hi;
	if (ptw_symbols_function_range(syms, addr, &lo, &hi) < 0 || lo != addr || hi <= lo)
		return -ENOENT;
	size_t len = hi - lo > MAX_CODE ? MAX_CODE : (size_t)(hi - lo);
	uint8_t *bytes = malloc(len);
	if (!bytes)
		return -ENOMEM;
	off_t at = (off_t)(code->offset + (lo - code->addr));
	int n = lo >= code->addr - code->offset && pread(code->fd, bytes, len, at) == (ssize_t)len
			? (leas ? ptw_insn_find_rip_leas(bytes, len, lo, out, MAX_CALLS)
				: ptw_insn_find_calls(bytes, len, lo, false, out, MAX_CALLS))
			: -EIO;
	free(bytes);
	*ret_hi = hi;
	return n;
}

static int calls_of(struct ptw_symbols *syms, const struct ptw_glibc_code *code, uint64_t addr,
		    uint64_t *out, uint64_t *ret_hi)
{
	return insns_of(syms, code, addr, false, out, ret_hi);
}

static bool calls_fn(struct ptw_symbols *syms, const struct ptw_glibc_code *code, uint64_t fn,
		     uint64_t callee)
{
	uint64_t targets[MAX_CALLS], hi;
	int n = calls_of(syms, code, fn, targets, &hi);
	for (int i = 0; i < n; i++)
		if (targets[i] == callee)
			return true;
	return false;
}

int ptw_glibc_main_caller(struct ptw_symbols *syms, const struct ptw_glibc_code *code,
			  uint64_t start_main, uint64_t exit_fn, uint64_t *ret_lo, uint64_t *ret_hi)
{
	uint64_t callees[MAX_CALLS], hi;
	int n = calls_of(syms, code, start_main, callees, &hi);
	int found = 0;
	for (int i = 0; i < n; i++) {
		bool seen = false;
		for (int j = 0; j < i; j++)
			seen |= callees[j] == callees[i];
		uint64_t calls[MAX_CALLS], fhi;
		int m = seen ? 0 : calls_of(syms, code, callees[i], calls, &fhi);
		for (int k = 0; k < m; k++)
			if (calls[k] == exit_fn) {
				if (found++ == 0) {
					*ret_lo = callees[i];
					*ret_hi = fhi;
				}
				break;
			}
	}
	return found == 1 ? 0 : -ENOENT;
}

int ptw_glibc_start_thread(struct ptw_symbols *syms, const struct ptw_glibc_code *code,
			   uint64_t create, uint64_t tls_dtors, uint64_t *ret_addr)
{
	/* pthread_create and what it calls (create_thread, not inlined) */
	uint64_t fns[1 + MAX_CALLS], hi;
	fns[0] = create;
	int nf = calls_of(syms, code, create, fns + 1, &hi);
	int found = 0;
	uint64_t tried[4 * MAX_CALLS];
	int ntried = 0;
	for (int f = 0; f < 1 + (nf > 0 ? nf : 0); f++) {
		uint64_t leas[MAX_CALLS];
		int nl = insns_of(syms, code, fns[f], true, leas, &hi);
		for (int i = 0; i < nl; i++) {
			bool seen = false;
			for (int j = 0; j < ntried; j++)
				seen |= tried[j] == leas[i];
			if (seen || ntried == (int)(sizeof(tried) / sizeof(tried[0])))
				continue;
			tried[ntried++] = leas[i];
			/* (calls_of wants an FDE beginning there: data is no candidate) */
			if (calls_fn(syms, code, leas[i], tls_dtors) && found++ == 0)
				*ret_addr = leas[i];
		}
	}
	return found == 1 ? 0 : -ENOENT;
}

bool ptw_glibc_is_sigreturn(const uint8_t *code, size_t n)
{
	/* x86-64 `mov $15 (rt_sigreturn), %rax; syscall` (glibc's __restore_rt,
	 * musl's too); the first byte may be an int3 (a uprobe's there) */
	static const uint8_t insns[PTW_GLIBC_SIGRETURN_LEN] = { 0x48, 0xc7, 0xc0, 0x0f, 0x00,
								0x00, 0x00, 0x0f, 0x05 };
	return n >= sizeof(insns) && (code[0] == insns[0] || code[0] == 0xcc) &&
	       !memcmp(code + 1, insns + 1, sizeof(insns) - 1);
}
