/* SPDX-License-Identifier: MIT */
/* Which instructions the kernel emulates at a uprobe; see xol.h. */
#include "xol.h"

#include <fcntl.h>
#include <unistd.h>

/* Past the legacy prefixes (lock, operand and address size, rep,
 * segments); *lock: a lock prefix among them. */
static size_t past_prefixes(const uint8_t *code, size_t n, bool *lock)
{
	size_t i = 0;
	*lock = false;
	for (; i < n; i++) {
		uint8_t b = code[i];
		if (b == 0xf0)
			*lock = true;
		else if (b != 0x66 && b != 0x67 && b != 0xf2 && b != 0xf3 && b != 0x2e &&
			 b != 0x36 && b != 0x3e && b != 0x26 && b != 0x64 && b != 0x65)
			break;
	}
	return i;
}

bool ptwk_xol_locked(const uint8_t *code, size_t n)
{
	bool lock;
	return past_prefixes(code, n, &lock) < n && lock;
}

bool ptwk_xol_misread(const uint8_t *code, size_t n)
{
	bool lock;
	size_t i = past_prefixes(code, n, &lock);
	/* VEX (c4, c5) and EVEX (62): in 64-bit mode always these */
	return i < n && (code[i] == 0xc4 || code[i] == 0xc5 || code[i] == 0x62);
}

bool ptwk_xol_misread_at(const char *path, uint64_t off)
{
	uint8_t code[16];
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	ssize_t n = fd < 0 ? -1 : pread(fd, code, sizeof(code), (off_t)off);
	if (fd >= 0)
		close(fd);
	return n > 0 && ptwk_xol_misread(code, (size_t)n);
}

bool ptwk_xol_emulated(const uint8_t *code, size_t n)
{
	size_t i = 0;
	bool opsize = false;
	/* legacy prefixes the emulation accepts: operand size (66: nop) */
	while (i < n && code[i] == 0x66) {
		opsize = true;
		i++;
	}
	if (i >= n)
		return false;
	uint8_t b = code[i];
	if (!opsize && (b & 0xf0) == 0x40) { /* REX: push %r8..%r15 (41 5x) */
		if (b != 0x41 || i + 1 >= n)
			return false;
		b = code[++i];
		return b >= 0x50 && b <= 0x57;
	}
	if (!opsize && b >= 0x50 && b <= 0x57) /* push %rax..%rdi */
		return true;
	if (b == 0x90) /* nop, xchg %ax,%ax */
		return true;
	if (!opsize && (b == 0xe8 || b == 0xe9 || b == 0xeb || (b >= 0x70 && b <= 0x7f)))
		return true; /* call rel32, jmp rel32/rel8, jcc rel8 */
	if (b == 0x0f && i + 1 < n) {
		uint8_t b2 = code[i + 1];
		if (!opsize && b2 >= 0x80 && b2 <= 0x8f)
			return true; /* jcc rel32 */
		/* nop r/m (0f 1f /0): the multi-byte nops */
		if (b2 == 0x1f && i + 2 < n && ((code[i + 2] >> 3) & 7) == 0)
			return true;
	}
	return false;
}
