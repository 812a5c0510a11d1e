#!/bin/sh
# Runs a test in a private mount namespace where tracefs and debugfs are
# not mounted (containers and minimal hosts never mount them: ptwatch must
# not need them), and with --pid in a new PID namespace too, /proc mounted
# for it (what every container is: the kernel's pids are not the ones
# ptwatch sees). Nothing outside changes: the unmounts are the private
# namespace's. A namespace that cannot be made, or a mount that stays, is
# a framework error (99), never a skip.
# Usage: isolated.sh [--pid] -- COMMAND [ARGS...]
set -u
pid=
if [ "${1:-}" = --pid ]; then
	pid=1
	shift
fi
[ "${1:-}" = -- ] && shift
[ $# -gt 0 ] || { echo "usage: isolated.sh [--pid] -- COMMAND [ARGS...]" >&2; exit 99; }
command -v unshare >/dev/null 2>&1 || { echo "isolated.sh: unshare (util-linux) is missing" >&2; exit 99; }

# In the new namespaces: unmount, check, then run the test as a child of
# this shell, which (PID 1 with --pid) reaps whatever is orphaned meanwhile.
inner='
for m in /sys/kernel/debug/tracing /sys/kernel/tracing /sys/kernel/debug; do
	if grep -q " $m " /proc/self/mounts; then
		umount -l "$m" || { echo "isolated.sh: cannot unmount $m" >&2; exit 99; }
	fi
done
if grep -qE " (tracefs|debugfs) " /proc/self/mounts; then
	echo "isolated.sh: tracefs or debugfs still mounted here:" >&2
	grep -E " (tracefs|debugfs) " /proc/self/mounts >&2
	exit 99
fi
if [ -n "$ISOLATED_PID" ] && [ "$$" != 1 ]; then
	echo "isolated.sh: not in a PID namespace of its own (pid $$)" >&2
	exit 99
fi
echo "isolated: no tracefs, no debugfs${ISOLATED_PID:+; PID namespace (ptwatch sees pids from 1)}"
"$@" &
child=$!
wait $child
status=$?
exit $status
'
if [ -n "$pid" ]; then
	ISOLATED_PID=1 exec unshare --mount --propagation private --pid --fork --kill-child --mount-proc \
		sh -c "$inner" isolated "$@"
fi
ISOLATED_PID= exec unshare --mount --propagation private sh -c "$inner" isolated "$@"
