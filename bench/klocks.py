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

    python3 bench/klocks.py [BUILD_DIR]    (THREADS=4 ITERS=20000 CS=200 OUT=2000 RUNS=5 PINGPONG=20000)
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
PINGPONG = os.environ.get("PINGPONG", "20000")


def tools(args):
    return [("native", args),
            ("ptrace --locks", [ptwatch, "-q", "--locks", "-o", doc, "--"] + args),
            ("kernel --locks", [demo, "-q", "--locks", "--"] + args)]


def run(name, cmd):
    if os.path.exists(doc):
        os.unlink(doc)
    p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=600)
    m = re.search(rb"contended (-?\d+), (?:elapsed ([0-9.]+) s|work (\d+) ns)", p.stdout)
    if p.returncode != 0 or not m:
        return None
    el = float(m.group(2)) if m.group(2) else int(m.group(3)) / 1e9
    info = {"contended": int(m.group(1)), "elapsed": el, "waits": None}
    if name.startswith("ptrace"):
        d = json.load(open(doc))
        info["waits"] = len([s for s in d["spans"] if s["kind"] == "wait"])
    elif name.startswith("kernel"):
        w = re.search(rb"--locks: (\d+) waits", p.stderr)
        lost = re.search(rb"(\d+) lost", p.stderr)
        cpu = re.search(rb"own CPU ([0-9.]+) s user ([0-9.]+) s system", p.stderr)
        info["waits"] = int(w.group(1)) if w else None
        info["lost"] = int(lost.group(1)) if lost else None
        info["loader_cpu"] = float(cpu.group(1)) + float(cpu.group(2)) if cpu else None
    return info


def scenario(title, args):
    ts = tools(args)
    res = {name: [] for name, _ in ts}
    for r in range(RUNS):
        for name, cmd in ts:
            i = run(name, cmd)
            print("run %d %-16s %s" % (r + 1, name, i), file=sys.stderr)
            if i:
                res[name].append(i)
    print("\n%s: %s; %d runs, medians" % (title, " ".join(args), RUNS))
    print("%-16s %10s %11s %9s %9s %14s %14s" % ("tool", "workers", "contended", "x native",
                                                "waits", "us added/wait", "loader us/wait"))
    native = res["native"]
    n_el = statistics.median(x["elapsed"] for x in native) if native else 0
    n_ct = statistics.median(x["contended"] for x in native) if native else 0
    for name, _ in ts:
        v = res[name]
        if not v:
            print("%-16s failed" % name)
            continue
        el = statistics.median(x["elapsed"] for x in v)
        ct = statistics.median(x["contended"] for x in v)
        waits = [x["waits"] for x in v if x["waits"] is not None]
        wm = statistics.median(waits) if waits else None
        added = "%.1f" % ((el - n_el) / wm * 1e6) if wm else "-"
        cpus = [x["loader_cpu"] / x["waits"] * 1e6 for x in v
                if x.get("loader_cpu") is not None and x["waits"]]
        loader = "%.1f" % statistics.median(cpus) if cpus else "-"
        ratio = "%.2f" % (ct / n_ct) if n_ct > 0 else "-"
        print("%-16s %9.3fs %11d %9s %9s %14s %14s" % (name, el, ct, ratio,
                                                     wm if wm is not None else "-", added, loader))
        if ct >= 0:
            print("    contended per run: %s" % sorted(x["contended"] for x in v))
        lost = [x["lost"] for x in v if x.get("lost")]
        if lost:
            print("    records lost (counted) in %d runs: %s" % (len(lost), lost))


scenario("contention (bench/contend: the program counts its contended calls)",
         [prog, THREADS, ITERS, CS, OUT])
scenario("a futex wait per hand-off (bench/pingpong)",
         [os.path.join(build, "bench", "pingpong"), PINGPONG])
