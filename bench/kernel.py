#!/usr/bin/python3
"""The cost of watching, per backend (issue 19), in one run.

Three workloads, each timed by the target's own clock (its "work NS ns":
from before its first thread to after its last join, so that a tool's
start-up, attach and detach are not counted):
  lifecycle  bench/churn N: create + join of an empty thread, N times
             (N=8000); cost per thread lifecycle added
  call       bench/calls push C: C calls (C=20000, 2 threads) of call_push,
             whose first instruction is push (the kernel emulates it, no
             single step); cost per traced call. CALL_FN=lea: call_lea,
             single-stepped by the kernel
  wait       bench/contend 4 ITERS: 4 workers on one mutex (trylock first:
             the program counts its contended calls); cost per contended
             wait = (tool - native) / the contended calls under the tool;
             and the contended-call count under --locks against native
under these tools, interleaved RUNS times (RUNS=5), medians:
  native
  ptwatch --backend=ptrace    (--trace call_push / --locks for call / wait)
  ptwatch --backend=kernel    (the same options)
  kernel library              tests/kernel/ptw-kernel-demo -q -- CMD
                              (lifecycle: the backend without the CLI)
  strace -f                   (lifecycle, wait: it sees the futex calls;
                              not call: it cannot see a function call)
  bpftrace                    where installed: the same uprobes (lifecycle:
                              pthread_create, start_thread, pthread_join
                              entry and return; call: call_push entry and
                              return; wait: __lll_lock_wait entry and
                              return), counting in maps: nothing sent to
                              user space per event, a lower bound. Its
                              uprobes are inode-wide (a breakpoint in every
                              process that maps the file, the pid filtered
                              in BPF, even with -p): the target runs with
                              a private copy of libc (LD_LIBRARY_PATH) that
                              nothing else maps, so that no other process
                              on the machine (a test suite's ptrace
                              session: "cannot break at ...: File
                              exists") meets them
And two timed whole, from the command's start to its end (bench/walltime.py),
start-up and the closing of links included, under native, both backends and
strace -f:
  startup    /bin/true (the issue's goal: within 3x strace -f)
  pigz       pigz -p 2 -c on PIGZ_MB (100) MB of generated text, to
             /dev/null (the goal: within 1% of native)
  storm      bench/churn STORM (4000): per thread lifecycle, the fixed
             costs included (the goal: at most 20 us on the kernel path)
What is not there yet (ptwatch without --backend, a backend that refuses
--trace or --locks) is skipped with ptwatch's own message.

    python3 bench/kernel.py [BUILD_DIR]    (N=8000 CALLS=20000 ITERS=20000 RUNS=5)
    WORKLOADS=lifecycle,call,wait,startup,pigz,storm   (a subset; default: all)
"""
import os
import re
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile

from walltime import wall

build = sys.argv[1] if len(sys.argv) > 1 else "build"
N = int(os.environ.get("N", "8000"))
CALLS = int(os.environ.get("CALLS", "20000"))
CALL_FN = os.environ.get("CALL_FN", "push")
ITERS = int(os.environ.get("ITERS", "20000"))
RUNS = int(os.environ.get("RUNS", "5"))
WORKLOADS = os.environ.get("WORKLOADS", "lifecycle,call,wait,startup,pigz,storm").split(",")
STORM = int(os.environ.get("STORM", "4000"))
PIGZ_MB = int(os.environ.get("PIGZ_MB", "100"))
ptwatch = os.path.join(build, "ptwatch")
demo = os.path.join(build, "tests", "kernel", "ptw-kernel-demo")
churn = os.path.abspath(os.path.join(build, "bench", "churn"))
calls = os.path.abspath(os.path.join(build, "bench", "calls"))
contend = os.path.abspath(os.path.join(build, "bench", "contend"))
bpftrace = shutil.which("bpftrace")
WORK = re.compile(rb"work (\d+) ns")


def libc_of(exe):
    out = subprocess.run(["ldd", exe], stdout=subprocess.PIPE).stdout.decode()
    m = re.search(r"libc\.so\.6 => (\S+)", out)
    return os.path.realpath(m.group(1)) if m else None


def ptwatch_help():
    return subprocess.run([ptwatch, "--help"], stdout=subprocess.PIPE,
                          stderr=subprocess.STDOUT).stdout.decode()


def refusal(argv):
    """None if ptwatch runs argv (a tiny run), else its message."""
    p = subprocess.run(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=120)
    if p.returncode == 0:
        return None
    lines = [l for l in p.stderr.decode("utf-8", "replace").splitlines() if l.strip()]
    return "exit %d: %s" % (p.returncode, lines[-1] if lines else "(nothing said)")


def private_libc():
    """A directory with a copy of churn's libc (for bpftrace's probes)."""
    d = tempfile.mkdtemp(prefix="ptw-bench-libc.")
    shutil.copy2(libc_of(churn), os.path.join(d, "libc.so.6"))
    return d


LIBC_DIR = private_libc() if bpftrace else None


def workloads():
    """{name: (cmd, units, check regex, ptwatch options, bpftrace program)}."""
    libc = os.path.join(LIBC_DIR, "libc.so.6") if LIBC_DIR else None
    fn = "call_" + CALL_FN
    w = {
        "lifecycle": ([churn, str(N)], N, rb"churn: %d," % N, [],
                      "".join("%s:%s:%s /pid == cpid/ { @%s%d = count(); } "
                              % (kind, libc, f, kind[1], i)
                              for i, (kind, f) in enumerate([
                                  ("uprobe", "pthread_create"), ("uretprobe", "pthread_create"),
                                  ("uprobe", "start_thread"), ("uprobe", "pthread_join"),
                                  ("uretprobe", "pthread_join")]))),
        "call": ([calls, CALL_FN, str(CALLS)], CALLS, rb"calls: %d," % CALLS, ["--trace", fn],
                 "uprobe:%s:%s { @c = count(); } uretprobe:%s:%s { @r = count(); }"
                 % (calls, fn, calls, fn)),
        "wait": ([contend, "4", str(ITERS)], None, rb"counter %d," % (4 * ITERS), ["--locks"],
                 "uprobe:%s:__lll_lock_wait /pid == cpid/ { @w = count(); } "
                 "uretprobe:%s:__lll_lock_wait /pid == cpid/ { @r = count(); }" % (libc, libc)),
    }
    return {k: v for k, v in w.items() if k in WORKLOADS}


def tools(name, cmd, opts, bt, has_backend):
    """[(tool, argv)] for one workload, and [(tool, why skipped)]."""
    t, skipped = [("native", cmd)], []
    for backend in ("ptrace", "kernel"):
        label = "ptwatch --backend=%s" % backend
        if not has_backend:
            if backend == "ptrace":
                t.append(("ptwatch (ptrace; no --backend yet)",
                          [ptwatch, "-q", "-o", os.devnull] + opts + ["--"] + cmd))
            else:
                skipped.append((label, "ptwatch has no --backend option yet"))
            continue
        argv = [ptwatch, "--backend=" + backend, "-q", "-o", os.devnull] + opts + ["--"]
        tiny = {"lifecycle": [churn, "10"], "call": [calls, CALL_FN, "10"],
                "wait": [contend, "2", "100"]}[name]
        why = refusal(argv + tiny)
        if why:
            skipped.append((label + " " + " ".join(opts), why))
        else:
            t.append((label, argv + cmd))
    if name == "lifecycle":
        t.append(("kernel library (ptw-kernel-demo)", [demo, "-q", "--"] + cmd))
    if name != "call" and shutil.which("strace"):
        t.append(("strace -f", ["strace", "-f", "-qq", "-o", os.devnull] + cmd))
    elif name == "call":
        skipped.append(("strace -f", "it does not see function calls"))
    if bpftrace:
        # the child alone runs with the private libc (see above)
        child = ["/usr/bin/env", "LD_LIBRARY_PATH=" + LIBC_DIR] + cmd
        t.append(("bpftrace (uprobes, counts in maps)",
                  [bpftrace, "-q", "-c", " ".join(child), "-e", bt]))
    else:
        skipped.append(("bpftrace", "not installed (apt-get install bpftrace)"))
    return t, skipped


def run(argv, check):
    """(work ns, stdout, CPU s) or (None, why, None). CPU: user + system
    time of every process the run reaped (target and tool; the kernel's
    uprobe and BPF work is charged to the target), less disturbed by a
    busy machine than the work's wall time."""
    r0 = resource.getrusage(resource.RUSAGE_CHILDREN)
    try:
        p = subprocess.run(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=900)
    except subprocess.TimeoutExpired:
        return None, "timed out", None
    r1 = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = r1.ru_utime + r1.ru_stime - r0.ru_utime - r0.ru_stime
    m = WORK.search(p.stdout)
    if not m or not re.search(check, p.stdout):
        return None, "exit %d: %s" % (p.returncode, (p.stdout + p.stderr)[-300:]), None
    return int(m.group(1)), p.stdout, cpu


def pigz_input():
    """PIGZ_MB MB of text made of a fixed word list in a seeded order:
    the same bytes on every machine, compressible as prose is."""
    import random
    rng = random.Random(31)
    words = [("%x" % rng.getrandbits(rng.choice((8, 16, 24, 32)))).encode() for _ in range(4096)]
    path = os.path.join(tempfile.mkdtemp(prefix="ptw-bench-pigz."), "input")
    with open(path, "wb") as f:
        left = PIGZ_MB << 20
        while left > 0:
            chunk = b" ".join(rng.choices(words, k=20000)) + b"\n"
            f.write(chunk[:left])
            left -= len(chunk)
    return path


def whole(name, has_backend):
    """A workload timed whole: wall time of each tool's run, interleaved."""
    if name == "pigz":
        if not shutil.which("pigz"):
            print("\npigz: skipped: not installed (apt-get install pigz)")
            return
        data = pigz_input()
        cmd = ["pigz", "-p", "2", "-c", data]
    elif name == "storm":
        data, cmd = None, [churn, str(STORM)]
    else:
        data, cmd = None, ["/bin/true"]
    ts = [("native", cmd)]
    for backend in ("ptrace", "kernel") if has_backend else ():
        argv = [ptwatch, "--backend=" + backend, "-q", "-o", os.devnull, "--"]
        why = refusal(argv + ["/bin/true"])
        if not why:
            ts.append(("ptwatch --backend=%s" % backend, argv + cmd))
    if shutil.which("strace"):
        ts.append(("strace -f", ["strace", "-f", "-qq", "-o", os.devnull] + cmd))
    times = {t: [] for t, _ in ts}
    try:
        for _ in range(RUNS):
            for t, argv in ts:
                dt, rc = wall(argv, limit=600)
                if rc == 0:
                    times[t].append(dt)
    finally:
        if data:
            shutil.rmtree(os.path.dirname(data), ignore_errors=True)
    print("\n%s: %s; the whole command's wall time, median of %d"
          % (name, " ".join(cmd[:4] + ["(%d MB)" % PIGZ_MB] if data else cmd), RUNS))
    native = statistics.median(times["native"]) if times["native"] else None
    strace = statistics.median(times["strace -f"]) if times.get("strace -f") else None
    for t, _ in ts:
        if not times[t]:
            print("  %-38s failed" % t)
            continue
        w = statistics.median(times[t])
        rel = "  %+.1f%% of native" % ((w / native - 1) * 100) if native and t != "native" else ""
        vs = "  %.1fx strace -f" % (w / strace) if strace and t.startswith("ptwatch") else ""
        if name == "storm" and native and t != "native":
            rel = "  %+.1f us per thread" % ((w - native) / STORM * 1e6)
        print("  %-38s %9.1f ms  (%.1f..%.1f)%s%s" % (t, w * 1e3, min(times[t]) * 1e3,
                                                     max(times[t]) * 1e3, rel, vs))


def main():
    help_ = ptwatch_help()
    has_backend = "--backend" in help_
    print("bench/kernel.py: %s; RUNS=%d, interleaved; load average %.1f"
          % (os.uname().release, RUNS, os.getloadavg()[0]))
    for name in WORKLOADS:
        if name in ("startup", "pigz", "storm"):
            whole(name, has_backend)
    for name, (cmd, units, check, opts, bt) in workloads().items():
        ts, skipped = tools(name, cmd, opts, bt, has_backend)
        works = {t: [] for t, _ in ts}
        cpus = {t: [] for t, _ in ts}
        contended = {t: [] for t, _ in ts}
        failed = {t: [] for t, _ in ts}
        for _ in range(RUNS):
            for t, argv in ts:
                ns, out, cpu = run(argv, check)
                if ns is None:
                    failed[t].append(out)
                    continue
                works[t].append(ns)
                cpus[t].append(cpu)
                m = re.search(rb"contended (\d+)", out)
                if m:
                    contended[t].append(int(m.group(1)))
        if not works["native"]:
            print("\n%s: native failed: %s" % (name, failed["native"][:1]))
            continue
        native = statistics.median(works["native"])
        unit = {"lifecycle": "thread lifecycle", "call": "traced call (call_%s)" % CALL_FN,
                "wait": "contended wait"}[name]
        print("\n%s: %s; per %s; the target's own work time, median of %d" % (name, " ".join(
            os.path.basename(c) if i == 0 else c for i, c in enumerate(cmd)), unit, RUNS))
        ncpu = statistics.median(cpus["native"])
        head = "  %-38s %10s %16s %20s %13s" % ("tool", "work", "added per unit", "(min..max)",
                                                "CPU per unit")
        if name == "wait":
            head += " %18s" % "contended calls"
        print(head + "  failed")
        for t, _ in ts:
            if not works[t]:
                print("  %-38s %10s  failed %d: %s" % (t, "-", len(failed[t]),
                                                       failed[t][0][:200] if failed[t] else ""))
                continue
            w = statistics.median(works[t])
            n = units
            if name == "wait":
                n = statistics.median(contended[t]) if contended[t] else None
            if t == "native":
                per = "%.2f us/unit*" % (w / n / 1e3) if n else "-"
                spread = ""
            elif n:
                per = "%.2f us" % ((w - native) / n / 1e3)
                spread = "(%.2f..%.2f)" % ((min(works[t]) - native) / n / 1e3,
                                           (max(works[t]) - native) / n / 1e3)
            else:
                per, spread = "-", ""
            c = statistics.median(cpus[t]) - (0 if t == "native" else ncpu)
            cpu = "%.2f us" % (c / n * 1e6) if n else "-"
            line = "  %-38s %9.3fs %16s %20s %13s" % (t, w / 1e9, per, spread, cpu)
            if name == "wait":
                c = statistics.median(contended[t]) if contended[t] else None
                nc = statistics.median(contended["native"]) if contended["native"] else None
                line += " %10s%8s" % (int(c) if c is not None else "-",
                                       " (%.2fx)" % (c / nc) if c and nc else "")
            print(line + "  %d" % len(failed[t]))
        for t, why in skipped:
            print("  %-38s skipped: %s" % (t, why))
        print("  * native: the whole unit (a lifecycle, a call, the run per contended call);"
              " CPU per unit: target and tool\n    (their start and end"
              " included), less native's")
        strace = [t for t in ts if t[0] == "strace -f" and works["strace -f"]]
        kern = [t for t, _ in ts if t.startswith("ptwatch --backend=kernel") and works[t]]
        if name == "lifecycle" and strace and kern:
            s = statistics.median(works["strace -f"]) - native
            k = statistics.median(works[kern[0]]) - native
            print("  strace -f / --backend=kernel, added per lifecycle: %.1fx" % (s / k)
                  if k > 0 else "  --backend=kernel added nothing measurable")


try:
    main()
finally:
    if LIBC_DIR:
        shutil.rmtree(LIBC_DIR, ignore_errors=True)
