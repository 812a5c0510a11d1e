#!/usr/bin/python3
"""Start-up cost: `ptwatch -q -o /dev/null -- /bin/true` against
`strace -f -qq -o /dev/null -- /bin/true`, interleaved, median of RUNS.
ptwatch runs three ways: warm cache (the normal case after the first run),
cold cache (an empty cache directory every run) and --no-cache.
Usage: bench/startup.py [BUILD_DIR] [COMMAND...]   (environment: RUNS, default 15)
"""
import os
import shutil
import statistics
import sys
import tempfile

from walltime import wall

build = sys.argv[1] if len(sys.argv) > 1 else "build"
command = sys.argv[2:] or ["/bin/true"]
RUNS = int(os.environ.get("RUNS", "15"))
ptwatch = os.path.join(build, "ptwatch")
tmp = tempfile.mkdtemp(prefix="ptwstartup.")
warm_dir = os.path.join(tmp, "warm")
os.makedirs(warm_dir)


def timed(cmd, env=None):
    dt, rc = wall(cmd, env=env)
    return dt if rc == 0 else None


def env_with(cache):
    env = dict(os.environ)
    env["XDG_CACHE_HOME"] = cache
    return env


def cold_env():
    d = tempfile.mkdtemp(dir=tmp)
    return env_with(d)


pt = [ptwatch, "-q", "-o", "/dev/null", "--"] + command
cases = [
    ("strace -f -qq -o /dev/null", lambda: timed(["strace", "-f", "-qq", "-o", "/dev/null", "--"]
                                                 + command)),
    ("ptwatch (warm cache)", lambda: timed(pt, env_with(warm_dir))),
    ("ptwatch (cold cache)", lambda: timed(pt, cold_env())),
    ("ptwatch --no-cache", lambda: timed([ptwatch, "--no-cache"] + pt[1:], env_with(warm_dir))),
    ("ptwatch --no-debug-files", lambda: timed([ptwatch, "--no-debug-files"] + pt[1:],
                                               env_with(warm_dir))),
]
if not shutil.which("strace"):
    cases = cases[1:]
timed(pt, env_with(warm_dir))  # fills the warm cache
times = {name: [] for name, _ in cases}
for _ in range(RUNS):
    for name, run in cases:
        t = run()
        if t is not None:
            times[name].append(t)
shutil.rmtree(tmp, ignore_errors=True)

print(f"start-up of {' '.join(command)}: median of {RUNS} interleaved runs")
base = None
for name, _ in cases:
    ts = times[name]
    if not ts:
        print(f"  {name:28s} failed")
        continue
    med = statistics.median(ts)
    if base is None:
        base = med
    print(f"  {name:28s} {med * 1000:8.1f} ms  (min {min(ts) * 1000:6.1f})  x{med / base:5.1f}")
