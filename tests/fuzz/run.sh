#!/bin/sh
# SPDX-License-Identifier: MIT
# A seeded run of the fuzz target over the saved documents and streams:
#   run.sh FUZZER CORPUS WORKDIR [RUNS [SEED]]
# New inputs go to WORKDIR/new (never into CORPUS), crashes to WORKDIR/.
set -eu
fuzzer=$1 corpus=$2 work=$3 runs=${4:-4000} seed=${5:-1}
rm -rf "$work"
mkdir -p "$work/new"
# (leaks are errors; a hang of 10 s or 2 GiB of memory is a finding too)
ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1:abort_on_error=1} \
UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1} \
# (libFuzzer exits 77 on a finding by default: meson would call it a skip)
exec "$fuzzer" -seed="$seed" -runs="$runs" -timeout=10 -rss_limit_mb=2048 \
	-error_exitcode=1 -timeout_exitcode=1 \
	-print_final_stats=1 -artifact_prefix="$work/" "$work/new" "$corpus"
