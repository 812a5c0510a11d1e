#!/bin/sh
# kill -9 of the kernel backend's loader while the target makes threads
# non-stop: the target must finish correctly (every thread made, every
# value right), its libc text must equal the file, and no BPF program or
# link of ours may be left. Four rounds.
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
fail=0
for round in 1 2 3 4; do
	"$storm" 40000 2 >"$out/storm.out" 2>&1 &
	spid=$!
	# Until it runs its own image, libc mapped (not the shell's fork).
	i=0
	while ! grep -q 'libc\.so' "/proc/$spid/maps" 2>/dev/null && [ $i -lt 200 ]; do
		sleep 0.01; i=$((i + 1))
	done
	"$demo" -q "$spid" >"$out/demo.out" 2>"$out/demo.err" &
	dpid=$!
	# Until it is attached and the programs run, then mid-storm.
	i=0
	while ! grep -q attached "$out/demo.err" 2>/dev/null && [ $i -lt 200 ]; do
		sleep 0.05; i=$((i + 1))
	done
	sleep 0.3
	text=$(libc_text_ok "$spid" 2>&1)
	ids=$(held "$dpid")
	kill -9 "$dpid" 2>/dev/null || echo "round $round: the loader was gone before the kill"
	wait "$dpid" 2>/dev/null
	sleep 0.2
	text_after=$(libc_text_ok "$spid" 2>&1)
	wait "$spid"
	status=$?
	# shellcheck disable=SC2086
	left=$(ours $ids)
	echo "round $round: storm status $status ($(cat "$out/storm.out")), libc text while attached: $text, after the kill: $text_after, of the $(echo $ids | wc -w) BPF programs the loader held, left: $left"
	if ! grep -q attached "$out/demo.err" || [ "$status" -ne 0 ] || ! grep -q '^kstorm: 80000$' "$out/storm.out" || [ -z "$ids" ] || [ "$left" -ne 0 ] ||
	   [ "$text_after" != same ]; then
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
