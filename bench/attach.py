#!/usr/bin/python3
"""Attach to and list a process with many idle threads, in one run:
ptwatch -p (attach, list every thread with its start routine, detach),
ptwatch -p --snapshot (every thread's stack and wait; as root also
--backend=kernel's, which stops none), gdb -p -batch
-ex 'info threads', eu-stack -p. Median wall time of RUNS, ratio to
ptwatch, and ptwatch's own figure of how long the threads stayed stopped
(session.frozen_ns). ptwatch -p --trace idle too: every thread is in a
call of idle() at the attach, found by unwinding it while stopped (its
frozen time and stops against plain -p's). Usage: bench/attach.py
BUILD_DIR [N ...]
"""
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile

from walltime import wall

build = sys.argv[1] if len(sys.argv) > 1 else "build"
sizes = [int(x) for x in sys.argv[2:]] or [1000, 10000]
RUNS = int(os.environ.get("RUNS", "3"))
ptwatch = os.path.join(build, "ptwatch")
idle = os.path.join(build, "bench", "idle")
tmp = tempfile.mkdtemp(prefix="ptwattach.")


def timed(cmd):
    dt, rc = wall(cmd, limit=300)
    return dt if rc == 0 else None


def frozen(path):
    try:
        with open(path) as f:
            d = json.load(f)
        return d["session"]["frozen_ns"] / 1e6, len(d["spans"])
    except (OSError, ValueError, KeyError):
        return None, 0


def stops(path):
    """The session's ptrace stops by kind, and its frame spans."""
    try:
        with open(path) as f:
            d = json.load(f)
        return d["session"]["stops"], sum(1 for s in d["spans"] if s["kind"] == "frame")
    except (OSError, ValueError, KeyError):
        return None, 0


for n in sizes:
    target = subprocess.Popen([idle, str(n)], stdout=subprocess.PIPE, text=True)
    target.stdout.readline()  # "ready N": every thread exists
    pid = str(target.pid)
    attach_json = os.path.join(tmp, "attach.json")
    snap_json = os.path.join(tmp, "snapshot.json")
    trace_json = os.path.join(tmp, "trace.json")
    cases = [
        ("ptwatch -p (list, detach)", [ptwatch, "-q", "--backend=ptrace", "-p", pid, "--duration=0.001",
                                        "-o", attach_json]),
        ("ptwatch -p --trace idle", [ptwatch, "-q", "--backend=ptrace", "-p", pid, "--duration=0.001",
                                      "--trace", "idle", "-o", trace_json]),
        ("ptwatch -p --snapshot", [ptwatch, "--backend=ptrace", "-p", pid, "--snapshot", "-o",
                                    snap_json]),
    ]
    # (the kernel's reader: threads not asleep are read without a stop)
    if os.geteuid() == 0:
        cases.append(("ptwatch -p --snapshot, kernel", [ptwatch, "--backend=kernel", "-p", pid,
                                                        "--snapshot", "-o", snap_json]))
    others = len(cases)
    if shutil.which("gdb"):
        cases.append(("gdb -p -batch 'info threads'",
                      ["gdb", "-q", "-batch", "-nx", "-p", pid, "-ex", "info threads"]))
    if shutil.which("eu-stack"):
        cases.append(("eu-stack -p", ["eu-stack", "-p", pid]))
    times = {name: [] for name, _ in cases}
    frozen_ms = {attach_json: [], trace_json: []}
    for _ in range(RUNS):
        for name, cmd in cases:
            t = timed(cmd)
            if t is not None:
                times[name].append(t)
            if t is not None and cmd[-1] in frozen_ms:
                frozen_ms[cmd[-1]].append(frozen(cmd[-1])[0])
    target.kill()
    target.wait()
    base = statistics.median(times[cases[0][0]]) if times[cases[0][0]] else None
    print(f"\n{n} idle threads, median of {RUNS} runs")
    for name, _ in cases:
        if not times[name]:
            print(f"  {name:30} failed")
            continue
        t = statistics.median(times[name])
        ratio = f"{t / base:6.1f}x" if base else ""
        print(f"  {name:30} {t:7.3f} s {ratio}")
    snap = times.get("ptwatch -p --snapshot")
    for name, _ in cases[others:]:
        if snap and times[name]:
            print(f"  {name} / ptwatch -p --snapshot: "
                  f"{statistics.median(times[name]) / statistics.median(snap):.1f}x")
    for name, path in (("ptwatch -p", attach_json), ("ptwatch -p --trace idle", trace_json),
                       ("ptwatch --snapshot", snap_json)):
        ms, spans = frozen(path)
        if ms is not None:
            print(f"  {name}: threads stopped for {ms:.1f} ms (last run), {spans} spans")
    for name, path in (("ptwatch -p", attach_json), ("ptwatch -p --trace idle", trace_json)):
        st, nframes = stops(path)
        if st is not None:
            print(f"  {name}: stops {json.dumps(st)}, {nframes} frame spans (last run); "
                  f"threads stopped for {statistics.median(frozen_ms[path]):.1f} ms (median), "
                  f"{min(frozen_ms[path]):.1f} to {max(frozen_ms[path]):.1f}")
shutil.rmtree(tmp, ignore_errors=True)
