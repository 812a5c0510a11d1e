#!/bin/sh
# -f cost: a process that forks N short-lived children (2 threads each),
# natively, under strace -f and under ptwatch -f (every child's threads
# spanned). Usage: bench/follow.sh BUILD_DIR [N]   (N=1000 by default)
set -e
build=${1:-build}
n=${2:-${N:-1000}}
fix=$build/tests/fixtures/fixture-prefork
export PTWATCH_TRUTH=/dev/null
t() { s=$(date +%s.%N); "$@" >/dev/null 2>&1; e=$(date +%s.%N); echo "$e - $s" | bc; }
native=$(t "$fix" many "$n")
strace=$(t strace -f -qq -o /dev/null "$fix" many "$n")
ptw=$(t "$build/ptwatch" -q -f -o /tmp/ptw-follow.$$.json -- "$fix" many "$n")
spans=$(python3 -c "import json,sys; d=json.load(open(sys.argv[1])); print(sum(1 for s in d['spans'] if s.get('origin')=='created'))" /tmp/ptw-follow.$$.json)
rm -f /tmp/ptw-follow.$$.json
echo "children $n (2 threads each)"
echo "native      ${native} s"
echo "strace -f   ${strace} s"
echo "ptwatch -f  ${ptw} s  ($spans thread spans created; ratio to strace: $(echo "scale=2; $ptw / $strace" | bc)x)"
