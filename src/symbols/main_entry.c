/* SPDX-License-Identifier: MIT */
/* main() of a stripped program from its entry code; see ptw_symbols.h. Used by
 * both backends (src/tracer/image.c, src/kernel). */
#define _GNU_SOURCE
#include <elf.h>
#include <fcntl.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "ptw_symbols.h"

uint64_t ptw_proc_auxv(pid_t pid, uint64_t type)
{
	char path[64];
	snprintf(path, sizeof(path), "/proc/%d/auxv", pid);
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return 0;
	uint64_t pair[2], v = 0;
	while (read(fd, pair, sizeof(pair)) == (ssize_t)sizeof(pair) && pair[0] != AT_NULL)
		if (pair[0] == type) {
			v = pair[1];
			break;
		}
	close(fd);
	return v;
}

/*
 * main() of a program without a symbol for it (stripped), from the code at
 * its entry point: glibc's _start (sysdeps/x86_64/start.S) begins with
 * `xor %ebp,%ebp` (after an endbr64 on CET builds) and hands main to
 * __libc_start_main in rdi just before calling it, as one of
 *     48 8d 3d disp32    lea main(%rip),%rdi          (PIE, relaxed by ld)
 *     48 8b 3d disp32    mov main@GOTPCREL(%rip),%rdi (PIE, not relaxed)
 *     48 c7 c7 imm32     mov $main,%rdi               (not PIE)
 * followed by a call. This works the same at a launch and at an attach,
 * where __libc_start_main's argument is long gone. 0 when the entry is not
 * that code (another libc, Go without cgo) or the address is not in the
 * executable (a GOT slot that ld.so has not relocated yet).
 */
uint64_t ptw_symbols_main_from_entry(struct ptw_symbols *s, ptw_memread_fn readmem, void *ctx,
				     uint64_t entry)
{
	uint8_t c[64];
	size_t i = 0;
	if (!entry || readmem(ctx, entry, c, sizeof(c)) < 0)
		return 0;
	if (c[0] == 0xf3 && c[1] == 0x0f && c[2] == 0x1e && c[3] == 0xfa)
		i = 4;
	if (c[i] != 0x31 || c[i + 1] != 0xed)
		return 0;
	for (i += 2; i + 7 + 2 <= sizeof(c); i++) {
		if (c[i] != 0x48)
			continue;
		int32_t v;
		memcpy(&v, c + i + 3, sizeof(v));
		uint64_t next = entry + i + 7, main_addr;
		if (c[i + 1] == 0x8d && c[i + 2] == 0x3d)
			main_addr = next + (uint64_t)(int64_t)v;
		else if (c[i + 1] == 0x8b && c[i + 2] == 0x3d)
			main_addr = readmem(ctx, next + (uint64_t)(int64_t)v, &main_addr,
					    sizeof(main_addr)) == 0
					    ? main_addr
					    : 0;
		else if (c[i + 1] == 0xc7 && c[i + 2] == 0xc7)
			main_addr = (uint64_t)(int64_t)v;
		else
			continue;
		const uint8_t *n = c + i + 7;
		bool call = (n[0] == 0xff && n[1] == 0x15) || n[0] == 0xe8 ||
			    (n[0] == 0x67 && n[1] == 0xe8);
		const char *in = main_addr ? ptw_symbols_module_of(s, main_addr) : NULL;
		const char *exe = ptw_symbols_exe(s);
		if (!call || !in || !exe || strcmp(in, exe))
			return 0;
		return main_addr;
	}
	return 0;
}
