#!/bin/sh
# Cost per thread lifecycle: native, ptwatch, strace -f, ltrace -f, gdb.
# Usage: bench/run.sh [BUILD_DIR]   (environment: N threads per run, RUNS)
set -eu
build=${1:-build}
exec /usr/bin/python3 "$(dirname "$0")/run.py" "$build"
