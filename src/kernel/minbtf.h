/* SPDX-License-Identifier: MIT */
/*
 * The kernel BTF the BPF programs' CO-RE relocations need, cut down at
 * build time (scripts/min-btf.py: bpftool gen min_core_btf) from the
 * build machine's kernel: libbpf reads a few hundred bytes instead of
 * parsing the kernel's whole BTF (megabytes, some 20 ms idle and far more
 * on a busy machine) at every start. Used only on the kernel it was made
 * from (the same build id in /sys/kernel/notes): any other kernel's
 * layout may differ, and then the kernel's own BTF is read as before.
 */
#ifndef PTW_KERNEL_MINBTF_H
#define PTW_KERNEL_MINBTF_H

#include <stdbool.h>
#include <stddef.h>

/* Whether the ELF notes (the layout of /sys/kernel/notes) hold a GNU
 * build-id note equal to id[0..idlen). Pure; idlen 0 never matches. */
bool ptwk_notes_have_build_id(const void *notes, size_t len, const unsigned char *id, size_t idlen);

/* The embedded BTF for libbpf's btf_custom_path if the running kernel is
 * the one it was made from: a memory file's path (/proc/self/fd/N) in
 * path and its descriptor returned (close it once the programs are
 * loaded). -1 otherwise, and why in why (static text). */
int ptwk_min_btf_open(char *path, size_t size, const char **why);

#endif
