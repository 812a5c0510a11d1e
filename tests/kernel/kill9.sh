#!/bin/sh
# kill -9 of the kernel backend's loader while the target makes threads
# non-stop: the target must finish correctly (every thread made, every
# value right: kstorm aborts otherwise), its libc text must equal the file
# again, and no BPF program or link of ours may be left. Four rounds, each
# step waiting for what it needs by observation.
# Usage: kill9.sh PTW_KERNEL_DEMO KSTORM   (exit 0 pass, 1 fail, 77 skip)
set -u
demo=$1 storm=$2
out=$(mktemp -d /tmp/ptw-kkill.XXXXXX)
trap 'rm -rf "$out"' EXIT
"$demo" 0 >"$out/avail" 2>&1
if [ $? -eq 77 ]; then
	echo "SKIP: $(cat "$out/avail")"
	exit 77
fi
command -v bpftool >/dev/null 2>&1 || PATH=$PATH:/usr/sbin:/sbin
held() {
	# The BPF programs process $1 holds, by id (its descriptors' fdinfo):
	# other sessions load ptw_* programs too (tests run in parallel).
	cat /proc/"$1"/fdinfo/* 2>/dev/null | sed -n 's/^prog_id:[[:space:]]*//p' | sort -u
}
ours() {
	# How many of the programs with these ids are still loaded (the
	# kernel frees them after an RCU grace period: up to 5 s).
	n=0 i=0
	while [ $i -lt 50 ]; do
		n=0
		for id in "$@"; do
			bpftool prog show id "$id" >/dev/null 2>&1 && n=$((n + 1))
		done
		[ $n -eq 0 ] && break
		sleep 0.1; i=$((i + 1))
	done
	echo $n
}
libc_text_ok() {
	# Every executable mapping of libc read through /proc/PID/mem, against the file.
	python3 - "$1" <<'PY'
import sys
pid = sys.argv[1]
ok = True
for line in open('/proc/%s/maps' % pid):
    f = line.split()
    if len(f) < 6 or 'x' not in f[1] or 'libc.so' not in f[5]:
        continue
    lo, hi = (int(x, 16) for x in f[0].split('-'))
    off = int(f[2], 16)
    with open('/proc/%s/mem' % pid, 'rb') as m, open(f[5], 'rb') as fl:
        m.seek(lo)
        fl.seek(off)
        if m.read(hi - lo) != fl.read(hi - lo):
            ok = False
print('same' if ok else 'DIFFERENT')
sys.exit(0 if ok else 1)
PY
}
# Waits until "$@" succeeds, polling (at most $1 seconds): never a sleep
# standing in for what the test needs.
until_true() {
	limit=$1
	shift
	i=0
	while ! "$@"; do
		[ $i -ge $((limit * 20)) ] && return 1
		sleep 0.05
		i=$((i + 1))
	done
}
maps_libc() { grep -q 'libc\.so' "/proc/$1/maps" 2>/dev/null; }
said_attached() { grep -q attached "$out/demo.err" 2>/dev/null; }
text_is() { [ "$(libc_text_ok "$1" 2>&1)" = "$2" ]; }
fail=0
for round in 1 2 3 4; do
	# The storm goes on until its standard input ends: the test says when
	# it is over, whatever the machine's speed (a storm that ended before
	# the loader attached made the round meaningless, and a read of its
	# maps fail).
	rm -f "$out/go"
	mkfifo "$out/go"
	"$storm" 2000 2 until <"$out/go" >"$out/storm.out" 2>&1 &
	spid=$!
	exec 3>"$out/go"
	problem=
	# Its own image runs (libc mapped, not the shell's fork), the loader
	# attached, its uprobes in libc's text (what /proc/PID/mem shows of a
	# probed page differs from the file): mid-storm, probed.
	until_true 20 maps_libc "$spid" || problem="kstorm never mapped libc"
	"$demo" -q "$spid" >"$out/demo.out" 2>"$out/demo.err" &
	dpid=$!
	[ -z "$problem" ] && { until_true 30 said_attached || problem="the loader never attached"; }
	[ -z "$problem" ] && { until_true 20 text_is "$spid" DIFFERENT ||
		problem="libc's text never showed the probes"; }
	ids=$(held "$dpid")
	kill -9 "$dpid" 2>/dev/null || problem="${problem:-the loader was gone before the kill}"
	wait "$dpid" 2>/dev/null
	# The probes go with the loader's descriptors: the text is the file's
	# again (soon; polled).
	until_true 20 text_is "$spid" same
	text_after=$(libc_text_ok "$spid" 2>&1)
	exec 3>&-
	wait "$spid"
	status=$?
	# shellcheck disable=SC2086
	left=$(ours $ids)
	echo "round $round: storm status $status ($(cat "$out/storm.out")), libc text after the kill: $text_after, of the $(echo $ids | wc -w) BPF programs the loader held, left: $left${problem:+; $problem}"
	if [ -n "$problem" ] || [ "$status" -ne 0 ] || ! grep -q '^kstorm: [1-9][0-9]*$' "$out/storm.out" ||
	   [ -z "$ids" ] || [ "$left" -ne 0 ] || [ "$text_after" != same ]; then
		fail=$((fail + 1))
		cat "$out/demo.err"
	fi
done
if [ $fail -eq 0 ]; then
	echo "4 passed, 0 failed"
	exit 0
fi
echo "$((4 - fail)) passed, $fail failed"
exit 1
