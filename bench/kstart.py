#!/usr/bin/python3
"""The kernel path's fixed costs (issue 19): start-up, attach and detach,
for one or more builds side by side (an A/B of a change), interleaved.

  start-up  wall time of `ptwatch --backend=kernel -q -o /dev/null --
            /bin/true` (and with --locks, of --backend=ptrace, of `strace -f
            -o /dev/null /bin/true` and of /bin/true alone)
  attach    ptwatch's own figures (--debug=tracer) attaching to bench/idle
  detach    with -p and --duration: "attach A ms (programs loaded and
            attached P ms), probes removed in D ms"; and the same with
            --trace TRACE (default 'libc.so*:pthread_*': some of those
            functions refuse a uprobe_multi link, so each function gets
            links of its own, some 280)

    python3 bench/kstart.py [BUILD_DIR...]     (RUNS=15; default: build)

Medians, with the range, of RUNS interleaved runs.
"""
import os
import re
import shutil
import statistics
import subprocess
import sys
import time

from walltime import wall

builds = sys.argv[1:] or ["build"]
RUNS = int(os.environ.get("RUNS", "15"))
TRACE = os.environ.get("TRACE", "libc.so*:pthread_*")
STRACE = shutil.which("strace")  # (the yardstick: the goal is 3x it)
TIMES = re.compile(r"attach ([\d.]+) ms \(programs loaded and attached ([\d.]+) ms\), "
                   r"probes removed in ([\d.]+) ms")


def settled(limit=5.0):
    """Waits (not timed) until no ptwatch tracer of a run before is left:
    the kernel path lets the user go before it has closed its links, and a
    run that starts while they close waits for the same grace periods (a
    build measured second got about 64 ms where first got 32)."""
    end = time.monotonic() + limit
    while time.monotonic() < end and subprocess.run(
            ["pgrep", "-x", "ptw-tracer"], stdout=subprocess.DEVNULL).returncode == 0:
        time.sleep(0.01)


def timed(argv):
    settled()
    dt, rc = wall(argv)
    return dt * 1e3 if rc == 0 else None


def attach_detach(ptwatch, pid, opts=()):
    p = subprocess.run([ptwatch, "--backend=kernel", "-q", "-o", os.devnull, "--debug=tracer",
                        "-p", str(pid), "--duration", "0.1"] + list(opts),
                       stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, timeout=60)
    m = TIMES.search(p.stderr.decode("utf-8", "replace"))
    return tuple(float(x) for x in m.groups()) if m else None


def show(name, xs):
    xs = [x for x in xs if x is not None]
    if not xs:
        print("  %-44s failed" % name)
        return
    print("  %-44s %8.1f ms  (%.1f..%.1f, n=%d)" % (name, statistics.median(xs), min(xs),
                                                     max(xs), len(xs)))


def main():
    idle_exe = os.path.abspath(os.path.join(builds[0], "bench", "idle"))
    idle = subprocess.Popen([idle_exe, "4"], stdout=subprocess.PIPE)
    idle.stdout.readline()  # "ready N"
    starts = {}
    att = {b: [] for b in builds}
    att_trace = {b: [] for b in builds}
    try:
        for _ in range(RUNS):
            starts.setdefault("/bin/true", []).append(timed(["/bin/true"]))
            if STRACE:
                starts.setdefault("strace -f", []).append(
                    timed([STRACE, "-f", "-o", os.devnull, "/bin/true"]))
            for b in builds:
                pt = os.path.join(b, "ptwatch")
                for backend in ("kernel", "ptrace"):
                    if backend == "ptrace" and b != builds[0]:
                        continue
                    starts.setdefault("%s --backend=%s" % (b, backend), []).append(
                        timed([pt, "--backend=" + backend, "-q", "-o", os.devnull, "--",
                               "/bin/true"]))
                # (--locks: its 64 MiB ring and its slow paths found)
                starts.setdefault("%s --backend=kernel --locks" % b, []).append(
                    timed([pt, "--backend=kernel", "--locks", "-q", "-o", os.devnull, "--",
                           "/bin/true"]))
                att[b].append(attach_detach(pt, idle.pid))
                if TRACE:
                    att_trace[b].append(attach_detach(pt, idle.pid, ["--trace", TRACE]))
    finally:
        idle.kill()
        idle.wait()
    print("bench/kstart.py: %s; RUNS=%d, interleaved; load average %.1f"
          % (os.uname().release, RUNS, os.getloadavg()[0]))
    print("start-up: wall time of ptwatch -q -o /dev/null -- /bin/true")
    for name, xs in starts.items():
        show(name, xs)
    print("attach to bench/idle 4 (-p, --duration 0.1), ptwatch's --debug=tracer figures")
    for b in builds:
        runs = [a for a in att[b] if a]
        show("%s attach" % b, [a[0] for a in runs])
        show("%s   programs loaded and attached" % b, [a[1] for a in runs])
        show("%s probes removed (detach)" % b, [a[2] for a in runs])
    if TRACE:
        print("the same with --trace '%s'" % TRACE)
        for b in builds:
            runs = [a for a in att_trace[b] if a]
            show("%s attach" % b, [a[0] for a in runs])
            show("%s probes removed (detach)" % b, [a[2] for a in runs])


main()
