#!/bin/sh
# No silent loss: with a ring buffer of one page that is read only once a
# second, a storm of threads overflows it; the records that did not fit
# must be counted and said (the demo's "N lost" and its note, with their
# kinds), and the target must not notice. Usage: lost.sh PTW_KERNEL_DEMO KSTORM
set -u
demo=$1 storm=$2
out=$(mktemp -d /tmp/ptw-klost.XXXXXX)
trap 'rm -rf "$out"' EXIT
"$demo" 0 >"$out/avail" 2>&1
if [ $? -eq 77 ]; then
	echo "SKIP: $(cat "$out/avail")"
	exit 77
fi
"$storm" 20000 1 >"$out/storm.out" 2>&1 &
spid=$!
i=0
while ! grep -q 'libc\.so' "/proc/$spid/maps" 2>/dev/null && [ $i -lt 200 ]; do
	sleep 0.01; i=$((i + 1))
done
# 4096 bytes, no wakeup before 1 MiB is pending (never), read every second.
timeout -s KILL 40 "$demo" -q --ring 4096 --wake 1048576 --flush-ms 1000 "$spid" >/dev/null 2>"$out/demo.err"
wait "$spid"
status=$?
cat "$out/demo.err"
lost=$(sed -n 's/.* \([0-9][0-9]*\) lost,.*/\1/p' "$out/demo.err")
if [ "$status" -eq 0 ] && grep -q '^kstorm: 20000$' "$out/storm.out" && [ "${lost:-0}" -gt 0 ] &&
   grep -q "note: $lost records lost (.*thread .*): the ring buffer (4096 bytes) was full" "$out/demo.err"; then
	echo "1 passed, 0 failed"
	exit 0
fi
echo "0 passed, 1 failed (storm status $status, lost ${lost:-?})"
exit 1
