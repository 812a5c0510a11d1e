#!/usr/bin/python3
"""Two builds of ptwatch side by side, on the same workloads, interleaved.

For a change that must not cost anything (a refactoring): is the new build
within noise of the old one? Each workload runs RUNS times per build,
alternating A and B so that the noise of this shared VM hits both alike;
the table gives the medians, B/A, and ptrace stops per thread lifecycle
from the JSON (which must be equal: a stop is never noise).

  churn      ptwatch -q -o F -- churn N        (create + join, one at a time)
  churn4     ptwatch -q -o F -- churn N/4 4    (4 creators at once)
  locks      ptwatch -q --locks -o F -- churn N
  trace      ptwatch -q --trace empty -o F -- churn N
  startup    ptwatch -q -o F -- /bin/true
  attach     ptwatch -q -o F -p IDLE --duration=0.001 (attach, detach; idle: THREADS threads)
  snapshot   ptwatch -p IDLE --snapshot -o F

Usage: bench/ab.py OLD_BUILD NEW_BUILD   (environment: N=2000 THREADS=1000 RUNS=5)
"""
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

if len(sys.argv) != 3:
    sys.exit(__doc__)
builds = {"A": sys.argv[1], "B": sys.argv[2]}
N = int(os.environ.get("N", "2000"))
THREADS = int(os.environ.get("THREADS", "1000"))
RUNS = int(os.environ.get("RUNS", "5"))
tmp = tempfile.mkdtemp(prefix="ptwab.")


def exe(b, name):
    return os.path.join(builds[b], name)


def start_idle(b):
    p = subprocess.Popen([exe(b, "bench/idle"), str(THREADS)], stdout=subprocess.PIPE, text=True)
    line = p.stdout.readline()
    if not line.startswith("ready"):
        p.kill()
        sys.exit("bench/idle did not start")
    return p


def workloads(b, idle_pid):
    out = os.path.join(tmp, b + ".json")
    churn = exe(b, "bench/churn")
    pt = exe(b, "ptwatch")
    return {
        "churn": [pt, "-q", "-o", out, "--", churn, str(N)],
        "churn4": [pt, "-q", "-o", out, "--", churn, str(N // 4), "4"],
        "locks": [pt, "-q", "--locks", "-o", out, "--", churn, str(N)],
        "trace": [pt, "-q", "--trace", "empty", "-o", out, "--", churn, str(N)],
        "startup": [pt, "-q", "-o", out, "--", "/bin/true"],
        "attach": [pt, "-q", "--no-live", "-o", out, "-p", str(idle_pid), "--duration=0.001"],
        "snapshot": [pt, "-p", str(idle_pid), "--snapshot", "-o", out],
    }, out


def stops_per_thread(path):
    try:
        d = json.load(open(path))
    except (OSError, ValueError):
        return None
    created = sum(1 for s in d["spans"] if s.get("kind", "thread") == "thread" and
                  s.get("origin") == "created")
    total = d["session"]["stops"]["total"]
    return total / created if created else float(total)


def main():
    idle = {b: start_idle(b) for b in builds}
    times = {}
    stops = {}
    try:
        for _ in range(RUNS):
            for b in ("A", "B"):
                cmds, out = workloads(b, idle[b].pid)
                for name, cmd in cmds.items():
                    t0 = time.monotonic()
                    r = subprocess.run(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
                    dt = time.monotonic() - t0
                    if r.returncode != 0:
                        print(f"{b} {name}: exit {r.returncode}", file=sys.stderr)
                        continue
                    times.setdefault((name, b), []).append(dt)
                    stops.setdefault((name, b), stops_per_thread(out))
    finally:
        for p in idle.values():
            p.kill()
    print(f"N={N} THREADS={THREADS} RUNS={RUNS}; A={builds['A']} B={builds['B']}")
    print(f"{'workload':10} {'A (s)':>9} {'B (s)':>9} {'B/A':>6} {'stops/thread A':>15} {'B':>8}")
    for name in workloads("A", 0)[0]:
        a, b = times.get((name, "A")), times.get((name, "B"))
        if not a or not b:
            continue
        ma, mb = statistics.median(a), statistics.median(b)
        sa, sb = stops.get((name, "A")), stops.get((name, "B"))
        fmt = lambda s: "-" if s is None else f"{s:.2f}"
        print(f"{name:10} {ma:9.3f} {mb:9.3f} {mb / ma:6.2f} {fmt(sa):>15} {fmt(sb):>8}")


main()
