#!/usr/bin/python3
"""Cost per thread lifecycle under each tracer, measured in one run.

Runs bench/churn (create + join of an empty thread, N times, sequentially
and with 4 creators in parallel) natively, under ptwatch (each strategy),
strace -f, ltrace -f and gdb, RUNS times each, interleaved so that the noise
of this shared VM hits every tool alike. Reports the median wall time, the
extra cost per lifecycle ((tool - native) / N) and its ratio to ptwatch, and
ptwatch's ptrace stops per lifecycle from its JSON (session.stops).
"""
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

build = sys.argv[1] if len(sys.argv) > 1 else "build"
N = int(os.environ.get("N", "2000"))
RUNS = int(os.environ.get("RUNS", "5"))
churn = os.path.join(build, "bench", "churn")
ptwatch = os.path.join(build, "ptwatch")
tmp = tempfile.mkdtemp(prefix="ptwbench.")


def tools(args):
    t = [("native", args)]
    for name, opts in (("ptwatch", []), ("ptwatch --no-debug-files", ["--no-debug-files"]),
                       ("ptwatch --create-events", ["--create-events"])):
        out = os.path.join(tmp, name.replace(" ", "_") + ".json")
        t.append((name, [ptwatch, "-q", "-o", out] + opts + ["--"] + args))
    if shutil.which("strace"):
        t.append(("strace -f", ["strace", "-f", "-qq", "-o", "/dev/null"] + args))
    if shutil.which("ltrace"):
        t.append(("ltrace -f", ["ltrace", "-f", "-o", "/dev/null"] + args))
    if shutil.which("gdb"):
        t.append(("gdb -batch", ["gdb", "-q", "-batch", "-nx", "-ex", "set print thread-events off",
                                 "-ex", "run", "--args"] + args))
    return t


def run(cmd, n_threads):
    """Wall time, or None when the target did not do all its work."""
    t0 = time.monotonic()
    try:
        p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, timeout=600)
    except subprocess.TimeoutExpired:
        return None
    dt = time.monotonic() - t0
    done = p.returncode == 0 and f"churn: {n_threads}".encode() in p.stdout
    return dt if done else None


def stops(name):
    path = os.path.join(tmp, name.replace(" ", "_") + ".json")
    try:
        with open(path) as f:
            d = json.load(f)
    except (OSError, ValueError):
        return None
    created = d["metrics"]["threads_created"] or 1
    return d["session"]["stops"], created


def bench(label, args, n_threads):
    cases = tools(args)
    times = {name: [] for name, _ in cases}
    for _ in range(RUNS):
        for name, cmd in cases:
            dt = run(cmd, n_threads)
            if dt is not None:
                times[name].append(dt)
    native = statistics.median(times["native"])
    ptw = statistics.median(times["ptwatch"]) if times["ptwatch"] else None
    ptw_cost = (ptw - native) / n_threads if ptw else None
    print(f"\n{label}: {n_threads} thread lifecycles, median of {RUNS} runs")
    print(f"  {'tool':26} {'wall':>9} {'per thread':>12} {'vs ptwatch':>11}")
    for name, _ in cases:
        if not times[name]:
            print(f"  {name:26} {'failed':>9}  (the target did not complete)")
            continue
        t = statistics.median(times[name])
        if name == "native":
            print(f"  {name:26} {t:8.3f}s {t / n_threads * 1e6:9.1f} us  (whole lifecycle)")
            continue
        cost = (t - native) / n_threads
        ratio = f"{cost / ptw_cost:10.2f}x" if ptw_cost else ""
        print(f"  {name:26} {t:8.3f}s {cost * 1e6:9.1f} us {ratio}")
    for name, _ in cases:
        if name.startswith("ptwatch"):
            s = stops(name)
            if s:
                st, created = s
                kinds = ", ".join(f"{k} {v / created:.2f}" for k, v in st.items()
                                  if k != "total")
                print(f"  {name}: {st['total'] / created:.2f} stops per thread ({kinds})")


print(f"machine: {os.cpu_count()} CPUs; {os.uname().release}")
bench("sequential", [churn, str(N)], N)
bench("4 creators in parallel", [churn, str(N // 4), "4"], (N // 4) * 4)
shutil.rmtree(tmp, ignore_errors=True)
