#!/usr/bin/python3
"""Cost per traced call: ptwatch --trace vs ltrace -x vs gdb dprintf.

Runs bench/leaf (N calls of leaf(), N/2 in each of 2 threads) natively,
under `ptwatch --trace leaf` (its JSON document to a file, no event lines;
and with its event lines), `ltrace -x leaf` and gdb with
`dprintf leaf,...`, RUNS times each, interleaved so that the noise of this
shared VM hits every tool alike. Reports the median wall time, calls per
second, the extra microseconds per traced call ((tool - native) / N) and
the ratio to ptwatch. Every tool reports each call; ptwatch and ltrace
also its return.

    python3 bench/trace.py [BUILD_DIR]      (N=20000 RUNS=3 by default)
"""
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

build = sys.argv[1] if len(sys.argv) > 1 else "build"
N = int(os.environ.get("N", "20000"))
RUNS = int(os.environ.get("RUNS", "3"))
leaf = os.path.join(build, "bench", "leaf")
ptwatch = os.path.join(build, "ptwatch")
tmp = tempfile.mkdtemp(prefix="ptwtrace.")
args = [leaf, str(N)]

tools = [
    ("native", args),
    ("ptwatch --trace", [ptwatch, "-q", "-o", os.path.join(tmp, "spans.json"), "--trace",
                         "leaf", "--"] + args),
    ("ptwatch --trace (event lines)", [ptwatch, "--trace", "leaf", "--"] + args),
]
if shutil.which("ltrace"):
    tools.append(("ltrace -f -x leaf", ["ltrace", "-f", "-x", "leaf", "-o", "/dev/null"] + args))
if shutil.which("gdb"):
    tools.append(("gdb dprintf", ["gdb", "-q", "-batch", "-nx",
                                  "-ex", "set print thread-events off",
                                  "-ex", 'dprintf leaf,"leaf %d\\n",x',
                                  "-ex", "run", "--args"] + args))


def run(cmd):
    t0 = time.monotonic()
    p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, timeout=900)
    dt = time.monotonic() - t0
    if ("%d calls" % N).encode() not in p.stdout:
        return None
    return dt


times = {name: [] for name, _ in tools}
for r in range(RUNS):
    for name, cmd in tools:
        dt = run(cmd)
        if dt is not None:
            times[name].append(dt)
        print("run %d %-32s %s" % (r + 1, name, "%.3f s" % dt if dt else "failed"),
              file=sys.stderr)

med = {k: statistics.median(v) for k, v in times.items() if v}
native = med.get("native", 0.0)
ours = (med.get("ptwatch --trace", 0.0) - native) / N * 1e6
print("%d calls of leaf() in 2 threads, median of %d runs" % (N, RUNS))
print("%-32s %10s %12s %16s %10s" % ("tool", "wall", "calls/s", "extra us/call", "x ptwatch"))
for name, _ in tools:
    if name not in med:
        print("%-32s %10s" % (name, "failed"))
        continue
    extra = (med[name] - native) / N * 1e6
    ratio = "%.1f" % (extra / ours) if ours > 0 and name != "native" else "-"
    print("%-32s %9.3fs %12.0f %16.1f %10s" % (name, med[name], N / med[name],
                                               extra if name != "native" else 0.0, ratio))
shutil.rmtree(tmp, ignore_errors=True)
