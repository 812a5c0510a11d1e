#!/bin/sh
# The benchmarks, each comparing ptwatch with gdb / strace / ltrace / eu-stack
# in the same run:
#   run.py     cost per thread lifecycle (thread churn)
#   attach.py  attaching to and listing 1,000 and 10,000 idle threads
#   startup.py start-up of ptwatch -- /bin/true (warm and cold cache)
# Usage: bench/run.sh [BUILD_DIR]   (environment: N threads per run, RUNS)
set -eu
build=${1:-build}
/usr/bin/python3 "$(dirname "$0")/run.py" "$build"
/usr/bin/python3 "$(dirname "$0")/attach.py" "$build"
/usr/bin/python3 "$(dirname "$0")/startup.py" "$build"
