#!/usr/bin/python3
"""Cost of ptwatch --locks on a mutex with a known contention rate.

Runs bench/contend (THREADS threads, ITERS lock/unlock each of one mutex,
held CS spins, OUT spins between) natively, under plain `ptwatch`, under
`ptwatch --locks` (both with their JSON document to a file, no event lines),
`valgrind --tool=drd` and `perf lock record` (kernel lock events; it does
not see pthread mutexes themselves), RUNS times each, interleaved. Two
scenarios: no contention (one worker thread) and contention (THREADS
workers). Reports the median wall time, the ratio to native, ptwatch's
stops, the wait spans it saw against the contended lock calls the program
counted itself (trylock failures), and the extra time per contended wait.

    python3 bench/locks.py [BUILD_DIR]    (THREADS=4 ITERS=20000 CS=200 OUT=2000 RUNS=3)
"""
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

build = sys.argv[1] if len(sys.argv) > 1 else "build"
THREADS = int(os.environ.get("THREADS", "4"))
ITERS = int(os.environ.get("ITERS", "20000"))
CS = os.environ.get("CS", "200")
OUT = os.environ.get("OUT", "2000")
RUNS = int(os.environ.get("RUNS", "3"))
prog = os.path.join(build, "bench", "contend")
ptwatch = os.path.join(build, "ptwatch")
tmp = tempfile.mkdtemp(prefix="ptwlocks.")
doc = os.path.join(tmp, "spans.json")


def tools(args):
    t = [("native", args, None),
         ("ptwatch", [ptwatch, "-q", "-o", doc, "--"] + args, doc),
         ("ptwatch --locks", [ptwatch, "-q", "--locks", "-o", doc, "--"] + args, doc)]
    if shutil.which("valgrind"):
        t.append(("valgrind --tool=drd", ["valgrind", "-q", "--tool=drd"] + args, None))
    if shutil.which("perf"):
        t.append(("perf lock record", ["perf", "lock", "record", "-q", "-o",
                                       os.path.join(tmp, "perf.data"), "--"] + args, None))
    return t


def run(cmd, docpath):
    if docpath and os.path.exists(docpath):
        os.unlink(docpath)
    t0 = time.monotonic()
    p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, timeout=1800)
    dt = time.monotonic() - t0
    m = re.search(rb"contended (\d+)", p.stdout)
    if p.returncode != 0 or not m:
        return None
    info = {"contended": int(m.group(1))}
    if docpath:
        d = json.load(open(docpath))
        info["stops"] = d["session"]["stops"]["total"]
        info["waits"] = len([s for s in d["spans"] if s["kind"] == "wait" and s["wait"] == "mutex"])
    return dt, info


def scenario(title, nthreads):
    args = [prog, str(nthreads), str(ITERS), CS, OUT]
    ts = tools(args)
    times = {name: [] for name, _, _ in ts}
    infos = {name: [] for name, _, _ in ts}
    for r in range(RUNS):
        for name, cmd, d in ts:
            res = run(cmd, d)
            if res:
                times[name].append(res[0])
                infos[name].append(res[1])
            print("run %d %-22s %s" % (r + 1, name, "%.3f s %s" % res if res else "failed"),
                  file=sys.stderr)
    med = {k: statistics.median(v) for k, v in times.items() if v}
    native = med.get("native", 0.0)
    print("\n%s: %s" % (title, " ".join(args[1:])))
    print("%-22s %9s %9s %9s %11s %11s %15s" % ("tool", "wall", "x native", "stops", "contended",
                                                "waits seen", "us/extra wait"))
    plain = med.get("ptwatch")
    for name, _, _ in ts:
        if name not in med:
            print("%-22s %9s" % (name, "failed"))
            continue
        inf = infos[name][len(infos[name]) // 2]
        extra = "-"
        if name == "ptwatch --locks" and plain and inf.get("waits"):
            extra = "%.1f" % ((med[name] - plain) / inf["waits"] * 1e6)
        print("%-22s %8.3fs %9.1f %9s %11d %11s %15s" % (
            name, med[name], med[name] / native if native else 0, inf.get("stops", "-"),
            inf["contended"], inf.get("waits", "-"), extra))


scenario("no contention (one worker)", 1)
scenario("contention (%d workers)" % THREADS, THREADS)
shutil.rmtree(tmp, ignore_errors=True)
