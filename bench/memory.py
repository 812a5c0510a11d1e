#!/usr/bin/python3
"""Bounded memory under --json-lines: ptwatch's peak RSS, all three of its
processes (the front `ptwatch`, `ptw-tracer`, `pt-restorer`: VmHWM from
/proc, sampled every 20 ms until each exits), while a program creates and
joins SMALL and then BIG short threads (2 creators, a few alive at once),
with the stream to a file. The figures should be the same: ended spans are
written out and freed.

    python3 bench/memory.py [BUILD_DIR]     (SMALL=10000 BIG=1000000)

BIG=1000000 takes several minutes (about 150-300 us per thread under
ptwatch here). Also reports the stream's size and ptwatch's CPU time.
"""
import os
import subprocess
import sys
import tempfile
import time

build = sys.argv[1] if len(sys.argv) > 1 else "build"
SMALL = int(os.environ.get("SMALL", "10000"))
BIG = int(os.environ.get("BIG", "1000000"))
ptwatch = os.path.join(build, "ptwatch")
many = os.path.join(build, "tests", "fixtures", "fixture-many")
tmp = tempfile.mkdtemp(prefix="ptwmem.")
NAMES = ("ptwatch", "ptw-tracer", "pt-restorer")


def descendants(pid):
    out = []
    try:
        with open("/proc/%d/task/%d/children" % (pid, pid)) as f:
            kids = [int(x) for x in f.read().split()]
    except OSError:
        return out
    for k in kids:
        out.append(k)
        out.extend(descendants(k))
    return out


def comm(pid):
    try:
        with open("/proc/%d/comm" % pid) as f:
            return f.read().strip()
    except OSError:
        return None


def run(n):
    stream = os.path.join(tmp, "stream.jsonl")
    argv = [ptwatch, "-q", "--json-lines", "-o", stream, "--", many, str(n), "2", "36000"]
    t0 = time.monotonic()
    proc = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                            env=dict(os.environ, PTWATCH_TRUTH=os.path.join(tmp, "truth")))
    peak = {}
    while proc.poll() is None:
        for p in [proc.pid] + descendants(proc.pid):
            name = comm(p)
            if name not in NAMES:
                continue
            try:
                with open("/proc/%d/status" % p) as f:
                    for line in f:
                        if line.startswith("VmHWM:"):
                            peak[name] = max(peak.get(name, 0), int(line.split()[1]))
            except OSError:
                pass
        time.sleep(0.02)
    err = proc.stderr.read().decode("utf-8", "replace")
    secs = time.monotonic() - t0
    if proc.returncode != 0 or "ptwatch: %d threads" % (n + 3) not in err:
        sys.exit("%s: exit %s\n%s" % (" ".join(argv), proc.returncode, err[-2000:]))
    size = os.path.getsize(stream)
    os.unlink(stream)
    return peak, secs, size, err


print("ptwatch -q --json-lines -o FILE -- many N 2: peak RSS (VmHWM, KiB)")
rows = []
for n in (SMALL, BIG):
    peak, secs, size, err = run(n)
    total = sum(peak.get(k, 0) for k in NAMES)
    rows.append((n, total))
    print("%9d threads: total %6d KiB  (%s)  %.0f s, %.1f us per thread, stream %.1f MiB"
          % (n, total, ", ".join("%s %d" % (k, peak.get(k, 0)) for k in NAMES), secs,
             secs * 1e6 / n, size / 1048576.0))
    sys.stdout.flush()
ratio = rows[1][1] / float(rows[0][1])
print("%d vs %d threads: %.3fx (%s)" % (BIG, SMALL, ratio,
                                        "within 10%" if ratio <= 1.10 else "NOT within 10%"))
sys.exit(0 if ratio <= 1.10 else 1)
