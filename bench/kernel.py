#!/usr/bin/python3
"""Cost per thread lifecycle with the kernel-assisted backend (issue 19).

bench/churn N (create + join of an empty thread, N times in a row) is
started held: forked, blocked on a pipe before its exec. The kernel
backend (tests/kernel/ptw-kernel-demo -q, src/kernel) attaches to the held
process (uprobe_multi links for its pid survive the exec: the same libc),
then it is released and timed from the release to its exit. Native runs
are held and released the same way. strace -f and ptwatch (ptrace, today's
backend: -q -o /dev/null) launch it themselves. All interleaved, RUNS
times; medians; extra cost per lifecycle = (tool - native) / N, with the
range over the runs, and strace's extra cost over each tool's (the goal:
>= 20x); and the CPU time added per lifecycle (target and tool together),
which the noise of a shared machine disturbs less than wall time. Also the loader's own CPU time per lifecycle, its records, wakeups
and lost count, attach and detach times.

    python3 bench/kernel.py build            # N=4000 RUNS=5
"""
import os
import re
import resource
import shutil
import statistics
import subprocess
import sys
import time

build = sys.argv[1] if len(sys.argv) > 1 else "build"
N = int(os.environ.get("N", "4000"))
RUNS = int(os.environ.get("RUNS", "5"))
churn = os.path.join(build, "bench", "churn")
demo = os.path.join(build, "tests", "kernel", "ptw-kernel-demo")
ptwatch = os.path.join(build, "ptwatch")


class Held:
    """The command forked and blocked before its exec (not with subprocess:
    Popen waits for the exec), released by release()."""

    def __init__(self, args):
        r, self.w = os.pipe()
        out_r, out_w = os.pipe()
        self.pid = os.fork()
        if self.pid == 0:
            try:
                os.close(self.w)
                os.close(out_r)
                os.dup2(out_w, 1)
                null = os.open(os.devnull, os.O_WRONLY)
                os.dup2(null, 2)
                os.read(r, 1)
                os.execv(args[0], args)
            finally:
                os._exit(127)
        os.close(r)
        os.close(out_w)
        self.out_r = out_r

    def release(self):
        os.write(self.w, b"g")
        os.close(self.w)

    def wait(self):
        out = b""
        while True:
            chunk = os.read(self.out_r, 65536)
            if not chunk:
                break
            out += chunk
        os.close(self.out_r)
        _, status = os.waitpid(self.pid, 0)
        return status == 0 and f"churn: {N}".encode() in out

    def kill(self):
        os.kill(self.pid, 9)


def done(p, out):
    return p.returncode == 0 and f"churn: {N}".encode() in out


def run_native():
    h = Held([churn, str(N)])
    t0 = time.monotonic()
    h.release()
    ok = h.wait()
    dt = time.monotonic() - t0
    return (dt, None) if ok else (None, None)


def run_kernel(extra):
    h = Held([churn, str(N)])
    d = subprocess.Popen([demo, "-q"] + extra + [str(h.pid)], stdout=subprocess.DEVNULL,
                         stderr=subprocess.PIPE)
    line = d.stderr.readline()
    if b"attached" not in line:
        h.kill()
        d.kill()
        sys.exit(f"kernel backend: {line.decode().strip()}")
    t0 = time.monotonic()
    h.release()
    ok = h.wait()
    dt = time.monotonic() - t0
    err = d.stderr.read().decode()
    _, _, ru = os.wait4(d.pid, 0)
    d.returncode = 0
    info = {"cpu": ru.ru_utime + ru.ru_stime}
    m = re.search(r"(\d+) records, (\d+) events, (\d+) lost, (\d+) wakeups, "
                  r"\d+ preexisting, (\d+) created; attach ([\d.]+) ms \(programs ([\d.]+) ms\), detach ([\d.]+) ms",
                  err)
    if m:
        info.update(records=int(m.group(1)), lost=int(m.group(3)), wakeups=int(m.group(4)),
                    created=int(m.group(5)), attach=float(m.group(6)),
                    detach=float(m.group(8)))
    ok = ok and info.get("created") == N and info.get("lost") == 0
    return (dt, info) if ok else (None, info)


def run_cmd(cmd):
    t0 = time.monotonic()
    p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, timeout=600)
    dt = time.monotonic() - t0
    return (dt, None) if done(p, p.stdout) else (None, None)


def main():
    cases = [("native", run_native),
             ("kernel backend (uprobe_multi)", lambda: run_kernel([])),
             ("kernel backend (per-probe uprobes)", lambda: run_kernel(["--per-probe"])),
             # The probes' cost alone: the loader reads nothing until the end.
             ("kernel, records read at the end", lambda: run_kernel(
                 ["--flush-ms", "600000", "--wake", str(1 << 30), "--ring", str(32 << 20)])),
             ("ptwatch (ptrace)", lambda: run_cmd([ptwatch, "-q", "-o", "/dev/null", "--",
                                                   churn, str(N)]))]
    if shutil.which("strace"):
        cases.append(("strace -f", lambda: run_cmd(["strace", "-f", "-qq", "-o", "/dev/null",
                                                     churn, str(N)])))
    times = {name: [] for name, _ in cases}
    cpus = {name: [] for name, _ in cases}
    infos = {name: [] for name, _ in cases}
    failed = {name: 0 for name, _ in cases}
    for _ in range(RUNS):
        for name, fn in cases:
            r0 = resource.getrusage(resource.RUSAGE_CHILDREN)
            dt, info = fn()
            r1 = resource.getrusage(resource.RUSAGE_CHILDREN)
            if dt is None:
                failed[name] += 1
            else:
                times[name].append(dt)
                cpus[name].append(r1.ru_utime + r1.ru_stime - r0.ru_utime - r0.ru_stime)
            if info:
                infos[name].append(info)
    native = statistics.median(times["native"])
    per = {name: (statistics.median(t) - native) / N * 1e6 for name, t in times.items() if t}
    strace = per.get("strace -f")
    print(f"{N} thread lifecycles (create + join) in a row, median of {RUNS} runs, interleaved; "
          f"load average {os.getloadavg()[0]:.1f}")
    ncpu = statistics.median(cpus["native"])
    print(f"  {'tool':36} {'wall':>8} {'extra/thread':>13} {'(min..max)':>16} {'strace/it':>10} "
          f"{'CPU/thread':>11} {'failed':>6}")
    for name, _ in cases:
        if not times[name]:
            print(f"  {name:36} {'-':>8} {'-':>13} {'':>16} {'':>10} {failed[name]:>6}")
            continue
        wall = statistics.median(times[name])
        lo = (min(times[name]) - native) / N * 1e6
        hi = (max(times[name]) - native) / N * 1e6
        if name == "native":
            cost, spread, ratio = f"{native / N * 1e6:.1f} us*", "", ""
        else:
            cost, spread = f"{per[name]:.1f} us", f"({lo:.1f}..{hi:.1f})"
            ratio = f"{strace / per[name]:.1f}x" if strace and per[name] > 0 else ""
        cpu = (statistics.median(cpus[name]) - (0 if name == "native" else ncpu)) / N * 1e6
        print(f"  {name:36} {wall:7.3f}s {cost:>13} {spread:>16} {ratio:>10} {cpu:8.1f} us "
              f"{failed[name]:>6}")
    print("  * native: the whole lifecycle. CPU/thread: user + system time of every process "
          "the run reaped\n    (target and tool; the kernel's uprobe and BPF work is charged "
          "to the target), minus native's")
    for name in infos:
        if not infos[name] or "records" not in infos[name][0]:
            continue
        cpu = statistics.median(i["cpu"] for i in infos[name]) / N * 1e6
        att = statistics.median(i["attach"] for i in infos[name])
        det = statistics.median(i["detach"] for i in infos[name])
        rec = statistics.median(i["records"] for i in infos[name]) / N
        wak = statistics.median(i["wakeups"] for i in infos[name])
        lost = max(i["lost"] for i in infos[name])
        print(f"  {name}: loader CPU {cpu:.1f} us/thread, {rec:.1f} records/thread, "
              f"{wak:.0f} wakeups, {lost} lost; attach {att:.1f} ms, detach {det:.1f} ms")


main()
