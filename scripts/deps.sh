#!/bin/sh
# Installs the Debian packages ptwatch needs that are missing, and nothing
# else. Usage: scripts/deps.sh [bench]   ("bench" adds the tools bench/ compares)
# debuginfod (the server), xz-utils, tmux, strace and bpftrace are for the
# tests (tmux: the live table in a real terminal; strace: another tracer
# holding a process that -f must leave alone; bpftrace: another tool's
# uprobes where ptwatch hooks); the debuginfod case serves a fixture's debug
# file, minidebuginfo builds .gnu_debugdata. libjson-c-dev: ptwatch report's
# reader. libbpf-dev, clang and bpftool build the kernel-assisted backend
# (src/kernel, bpf/); without them ptwatch builds all the same and that
# backend says it is unavailable. clang and its libFuzzer runtime
# (libclang-rt-14-dev) build the fuzz target of ptwatch report's reader.
set -eu

pkgs="meson ninja-build pkg-config gcc g++ libc6-dev libelf-dev libdw-dev libcapstone-dev
      libiberty-dev libncurses-dev libjson-c-dev libc6-dbg binutils xz-utils python3
      python3-jsonschema debuginfod tmux strace bpftrace libbpf-dev clang bpftool
      libclang-rt-14-dev"
if [ "${1:-}" = bench ]; then
	pkgs="$pkgs ltrace gdb elfutils valgrind hyperfine"
fi

missing=""
for p in $pkgs; do
	if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
		missing="$missing $p"
	fi
done
[ -z "$missing" ] && exit 0

echo "ptwatch: installing$missing" >&2
if [ "$(id -u)" -eq 0 ]; then
	sudo=""
elif command -v sudo >/dev/null 2>&1; then
	sudo="sudo"
else
	echo "ptwatch: missing packages:$missing (run as root or install them)" >&2
	exit 1
fi
export DEBIAN_FRONTEND=noninteractive
$sudo apt-get update -qq
# shellcheck disable=SC2086
$sudo apt-get install -y -qq --no-install-recommends $missing >/dev/null
