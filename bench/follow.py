#!/usr/bin/python3
"""Cost of following forks: ptwatch -f vs strace -f on a process that forks
N short-lived children, one after the other, each creating and joining 2
threads (tests/fixtures/prefork.c, mode "many").

Runs it natively, under `strace -f -qq -o /dev/null` and under
`ptwatch -f -q -o FILE` (every child's threads spanned: checked in the
document), RUNS times each, interleaved so that the noise of this shared
VM hits every tool alike. Reports the median wall time, the extra
milliseconds per child ((tool - native) / N), the ratio to strace, and
from ptwatch's document its stops per child and its own CPU time.

    python3 bench/follow.py [BUILD_DIR]      (N=1000 RUNS=5 by default)
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
N = int(os.environ.get("N", "1000"))
RUNS = int(os.environ.get("RUNS", "5"))
fixture = os.path.join(build, "tests", "fixtures", "fixture-prefork")
ptwatch = os.path.join(build, "ptwatch")
tmp = tempfile.mkdtemp(prefix="ptwfollow.")
doc_path = os.path.join(tmp, "spans.json")
args = [fixture, "many", str(N)]
env = dict(os.environ, PTWATCH_TRUTH="/dev/null")

tools = [("native", args)]
if shutil.which("strace"):
    tools.append(("strace -f", ["strace", "-f", "-qq", "-o", "/dev/null"] + args))
tools.append(("ptwatch -f", [ptwatch, "-f", "-q", "-o", doc_path, "--"] + args))

times = {name: [] for name, _ in tools}
docs = []
for run in range(RUNS):
    for name, cmd in tools:
        t0 = time.monotonic()
        r = subprocess.run(cmd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        dt = time.monotonic() - t0
        if r.returncode != 0:
            print("%s failed (exit %d)" % (name, r.returncode))
            sys.exit(1)
        times[name].append(dt)
        if name == "ptwatch -f":
            with open(doc_path) as f:
                d = json.load(f)
            created = sum(1 for s in d["spans"] if s.get("origin") == "created")
            if created != 2 * N or len(d.get("processes", [])) != N + 1:
                print("ptwatch -f: %d created spans, %d processes (want %d, %d)"
                      % (created, len(d.get("processes", [])), 2 * N, N + 1))
                sys.exit(1)
            docs.append(d)

native = statistics.median(times["native"])
base = statistics.median(times["strace -f"]) if "strace -f" in times else None
print("%d children, 2 threads each; median of %d runs" % (N, RUNS))
print("%-12s %9s %16s %10s" % ("tool", "wall", "extra ms/child", "vs strace"))
for name, _ in tools:
    m = statistics.median(times[name])
    extra = (m - native) / N * 1000 if name != "native" else 0
    ratio = "%.2fx" % (m / base) if base and name != "native" else ""
    print("%-12s %8.2fs %16s %10s" % (name, m, "%.2f" % extra if name != "native" else "",
                                      ratio))
d = docs[len(docs) // 2]
stops = d["session"]["stops"]["total"]
cpu = d["session"]["tracer_cpu_ns"]
print("ptwatch -f: %.1f stops per child (%.1f per thread created), tracer CPU %.2f s user "
      "%.2f s sys" % (stops / N, stops / (2 * N), cpu["user"] / 1e9, cpu["sys"] / 1e9))
shutil.rmtree(tmp)
