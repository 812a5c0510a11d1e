/* SPDX-License-Identifier: MIT */
/* Does clang link libFuzzer here? (tests/fuzz/meson.build) */
#include <stddef.h>
#include <stdint.h>
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	return (int)(size && data[0] == 0);
}
