#!/usr/bin/python3
"""--locks on the kernel-assisted backend against native and the ptrace path.

bench/contend (THREADS workers, ITERS lock/unlock of one mutex each, held
CS spins, OUT spins between; it counts its own contended calls, trylock
failures, and times its workers alone) run natively, under `ptwatch -q
--locks -o DOC` (ptrace) and under the kernel backend
(tests/kernel/ptw-kernel-demo -q --locks -- ..., the library launching it
held), RUNS times each, interleaved. Reports per tool the median of the
workers' time, the contended calls the program counted (the goal: within
2x of native under the kernel path), the wait spans the tool saw, and the
time added per wait seen ((tool - native) / waits).

    python3 bench/klocks.py [BUILD_DIR]    (THREADS=4 ITERS=20000 CS=200 OUT=2000 RUNS=5)
"""
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile

build = sys.argv[1] if len(sys.argv) > 1 else "build"
THREADS = os.environ.get("THREADS", "4")
ITERS = os.environ.get("ITERS", "20000")
CS = os.environ.get("CS", "200")
OUT = os.environ.get("OUT", "2000")
RUNS = int(os.environ.get("RUNS", "5"))
prog = os.path.join(build, "bench", "contend")
ptwatch = os.path.join(build, "ptwatch")
demo = os.path.join(build, "tests", "kernel", "ptw-kernel-demo")
tmp = tempfile.mkdtemp(prefix="ptwklocks.")
doc = os.path.join(tmp, "spans.json")
args = [prog, THREADS, ITERS, CS, OUT]
tools = [("native", args),
         ("ptrace --locks", [ptwatch, "-q", "--locks", "-o", doc, "--"] + args),
         ("kernel --locks", [demo, "-q", "--locks", "--"] + args)]


def run(name, cmd):
    if os.path.exists(doc):
        os.unlink(doc)
    p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=600)
    m = re.search(rb"contended (\d+), elapsed ([0-9.]+) s", p.stdout)
    if p.returncode != 0 or not m:
        return None
    info = {"contended": int(m.group(1)), "elapsed": float(m.group(2)), "waits": None}
    if name.startswith("ptrace"):
        d = json.load(open(doc))
        info["waits"] = len([s for s in d["spans"] if s["kind"] == "wait"])
    elif name.startswith("kernel"):
        w = re.search(rb"--locks: (\d+) waits", p.stderr)
        lost = re.search(rb"(\d+) lost", p.stderr)
        info["waits"] = int(w.group(1)) if w else None
        info["lost"] = int(lost.group(1)) if lost else None
    return info


res = {name: [] for name, _ in tools}
for r in range(RUNS):
    for name, cmd in tools:
        i = run(name, cmd)
        print("run %d %-16s %s" % (r + 1, name, i), file=sys.stderr)
        if i:
            res[name].append(i)

print("bench/contend %s: %s threads x %s locks, CS %s, OUT %s; %d runs, medians" %
      (build, THREADS, ITERS, CS, OUT, RUNS))
print("%-16s %10s %11s %11s %9s %16s" % ("tool", "workers", "contended", "x native", "waits",
                                          "us added/wait"))
native = res["native"]
n_el = statistics.median(x["elapsed"] for x in native) if native else 0
n_ct = statistics.median(x["contended"] for x in native) if native else 0
for name, _ in tools:
    v = res[name]
    if not v:
        print("%-16s failed" % name)
        continue
    el = statistics.median(x["elapsed"] for x in v)
    ct = statistics.median(x["contended"] for x in v)
    waits = [x["waits"] for x in v if x["waits"] is not None]
    wm = statistics.median(waits) if waits else None
    added = "%.1f" % ((el - n_el) / wm * 1e6) if wm else "-"
    print("%-16s %9.3fs %11d %11.2f %9s %16s" % (name, el, ct, ct / n_ct if n_ct else 0,
                                                 wm if wm is not None else "-", added))
    print("    contended per run: %s" % [x["contended"] for x in v])
