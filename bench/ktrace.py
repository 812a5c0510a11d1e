#!/usr/bin/python3
"""Cost per traced call, kernel backend vs ptrace backend vs native.

tests/kernel/kleaf (bench/kleaf.c) N [push|lea] calls leaf_push (first instruction push %rbx:
the kernel's uprobes emulate it) or leaf_lea (first instruction lea: the
kernel single-steps it out of line) N times from 2 threads, after a go
byte on stdin, and times the calls alone (CLOCK_MONOTONIC around them, no
start-up or attach). Each run:
  native           kleaf, go at once;
  kernel           kleaf started, tests/kernel/ptw-kernel-demo -q --trace
                   leaf_push attaches (entry uprobe + uretprobe, uprobe_multi),
                   then go; the frames counted from its event counts;
  kernel, read at the end  the same, the ring read only at the end (the
                   probes' cost without the reader competing for the CPUs);
  kernel (lea)     the same on leaf_lea;
  kernel (endbr)   the same on leaf_endbr: endbr64 and a move before the
                   push (as -fcf-protection builds begin); the probe goes
                   past them to the push;
  kernel (self)    the same on leaf_self: leaf_push's code, but it can call
                   itself, so its return is a uprobe at its ret (which the
                   kernel single-steps), not a uretprobe;
  ptrace           ptwatch -q -o FILE --trace leaf_push -- kleaf (launched:
                   the timed calls start after the go, all probes in).
Interleaved, RUNS times; medians; extra us per call = (tool - native) / N.
With 2 threads on this 2-CPU VM, calls run in parallel: extra/call is
wall time over all calls (as bench/trace.py counts); the 1-thread case
is the latency a call adds in its thread. The goal (issue 19): <= 3 us
per call for a function starting with push.

    python3 bench/ktrace.py build        # N=200000 RUNS=5; ptrace with N/50
"""
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile

build = sys.argv[1] if len(sys.argv) > 1 else "build"
N = int(os.environ.get("N", "200000"))
NP = int(os.environ.get("NP", str(max(N // 50, 2))))  # ptrace is ~100x slower
RUNS = int(os.environ.get("RUNS", "5"))
kleaf = os.path.join(build, "tests", "kernel", "kleaf")
demo = os.path.join(build, "tests", "kernel", "ptw-kernel-demo")
ptwatch = os.path.join(build, "ptwatch")
tmp = tempfile.mkdtemp(prefix="ptwktrace.")


CPU = {}  # case name -> CPU ns of each run (the target's user + system time)
current = None  # the case being run


def calls_ns(out, n):
    m = re.search(rb"(\d+) calls in (\d+) ns, cpu (\d+) ns", out)
    if not m or int(m.group(1)) != n:
        return None
    CPU.setdefault(current, []).append(int(m.group(3)))
    return int(m.group(2))


def native(which, n=N, threads=2):
    p = subprocess.run([kleaf, str(n), which, str(threads)], input=b"g", stdout=subprocess.PIPE,
                       timeout=600)
    return calls_ns(p.stdout, n), None


def kernel(which, extra=(), threads=2):
    fn = "leaf_" + which
    k = subprocess.Popen([kleaf, str(N), which, str(threads)], stdin=subprocess.PIPE, stdout=subprocess.PIPE)
    pid = int(k.stdout.readline().split()[1])
    d = subprocess.Popen([demo, "-q", "--trace", fn] + list(extra) + [str(pid)], stdout=subprocess.DEVNULL,
                         stderr=subprocess.PIPE)
    line = d.stderr.readline()
    if b"attached" not in line:
        k.kill()
        d.kill()
        sys.exit("kernel backend: " + line.decode().strip())
    k.stdin.write(b"g")
    k.stdin.close()
    out = k.stdout.read()
    k.wait()
    err = d.stderr.read().decode()
    d.wait()
    m = re.search(r"(\d+) records, (\d+) events, (\d+) lost", err)
    info = {"records": int(m.group(1)), "lost": int(m.group(3))} if m else {}
    ns = calls_ns(out, N)
    # an entry and a return record per call, and a few for the threads
    ok = ns and info.get("lost") == 0 and info.get("records", 0) >= 2 * N
    return (ns if ok else None), info


def ptrace():
    doc = os.path.join(tmp, "spans.json")
    p = subprocess.run([ptwatch, "--backend=ptrace", "-q", "-o", doc, "--trace", "leaf_push", "--",
                        kleaf, str(NP),
                        "push"], input=b"g", stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                       timeout=900)
    ns = calls_ns(p.stdout, NP)
    try:
        with open(doc) as f:
            frames = [s for s in json.load(f)["spans"] if s["kind"] == "frame"]
    except (OSError, ValueError, KeyError):
        frames = []
    return (ns if ns and len(frames) == NP else None), {"frames": len(frames)}


cases = [("native (push)", lambda: native("push")),
         ("native (lea)", lambda: native("lea")),
         ("native (endbr)", lambda: native("endbr")),
         ("native (push), N for ptrace", lambda: native("push", NP)),
         ("native (push), 1 thread", lambda: native("push", N, 1)),
         ("kernel leaf_push, 1 thread", lambda: kernel("push", (), 1)),
         ("kernel --trace leaf_push", lambda: kernel("push")),
         # the probes' cost alone: the loader reads nothing until the end
         ("kernel, records read at the end", lambda: kernel(
             "push", ["--flush-ms", "600000", "--wake", str(1 << 30), "--ring", str(64 << 20)])),
         ("kernel --trace leaf_lea", lambda: kernel("lea")),
         ("kernel --trace leaf_endbr", lambda: kernel("endbr")),
         ("kernel --trace leaf_self", lambda: kernel("self")),
         ("ptrace --trace leaf_push", ptrace)]
times = {name: [] for name, _ in cases}
for r in range(RUNS):
    for name, fn in cases:
        current = name
        ns, info = fn()
        if ns:
            times[name].append(ns)
        print("run %d %-30s %s %s" % (r + 1, name, "%.3f ms" % (ns / 1e6) if ns else "failed",
                                      info or ""), file=sys.stderr)
med = {k: statistics.median(v) for k, v in times.items() if v}
print(f"calls of a leaf function from 2 threads, the calls alone timed, median of {RUNS} runs, "
      f"interleaved; load average {os.getloadavg()[0]:.1f}")
print(f"  {'case':32} {'calls':>8} {'time':>11} {'per call':>10} {'extra/call':>11} "
      f"{'(min..max)':>16} {'CPU extra/call':>15}")
base = {"kernel --trace leaf_push": ("native (push)", N),
        "kernel, records read at the end": ("native (push)", N),
        "kernel leaf_push, 1 thread": ("native (push), 1 thread", N), "kernel --trace leaf_lea":
        ("native (lea)", N), "kernel --trace leaf_self": ("native (push)", N),
        "kernel --trace leaf_endbr": ("native (endbr)", N),
        "ptrace --trace leaf_push": ("native (push), N for ptrace", NP)}
for name, _ in cases:
    if name not in med:
        print(f"  {name:32} failed")
        continue
    n = NP if "ptrace" in name else N
    extra, spread, cpu = "", "", ""
    if name in base and base[name][0] in med:
        nat = med[base[name][0]]
        extra = f"{(med[name] - nat) / n / 1e3:.2f} us"
        spread = f"({(min(times[name]) - nat) / n / 1e3:.2f}..{(max(times[name]) - nat) / n / 1e3:.2f})"
        if CPU.get(name) and CPU.get(base[name][0]):
            c = statistics.median(CPU[name]) - statistics.median(CPU[base[name][0]])
            cpu = f"{c / n / 1e3:.2f} us"
    print(f"  {name:32} {n:8d} {med[name] / 1e6:9.1f}ms {med[name] / n:8.0f}ns {extra:>11} "
          f"{spread:>16} {cpu:>15}")
print("  CPU extra/call: the target's user + system time (the kernel's uprobe and BPF work is "
      "charged to it),\n  minus native's; the ptrace case's tracer time is not in it")
