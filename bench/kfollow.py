#!/usr/bin/python3
"""-f on the kernel-assisted backend: what it costs, and whom.

1. Per fork+exit: tests/fixtures/prefork many N (N children one after the
   other, each creating and joining 2 threads) natively, under strace -f,
   under ptwatch -f (the ptrace path) and under ptw-kernel-demo -q -f (the
   kernel path, launched: links of its own for each child) and -f
   --file-wide (the probes on libc's file for every process, as before),
   RUNS times each, interleaved. Reports the median wall time and the
   extra microseconds per child ((tool - native) / N).

2. Everyone else: with -f --file-wide the uprobes are on libc's file for
   every process, so a process nobody watches hits them too. bench/churn
   (an untraced process creating and joining M threads) is timed with no
   session, with a kernel session without -f, with -f and with -f
   --file-wide, each watching an idle process (bench/idle), interleaved.
   Reports the extra microseconds per thread of the bystander.

3. A child's first moments: how many of its thread creations are seen as
   such (pthread_create), with links of its own per child and with the
   file's probes.

    python3 bench/kfollow.py [BUILD_DIR]   (N=1000 M=20000 RUNS=5 PARTS=123)

Needs root (BPF).
"""
import os
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time

build = sys.argv[1] if len(sys.argv) > 1 else "build"
N = int(os.environ.get("N", "1000"))
M = int(os.environ.get("M", "20000"))
RUNS = int(os.environ.get("RUNS", "5"))
prefork = os.path.join(build, "tests", "fixtures", "fixture-prefork")
demo = os.path.join(build, "tests", "kernel", "ptw-kernel-demo")
ptwatch = os.path.join(build, "ptwatch")
churn = os.path.join(build, "bench", "churn")
idle = os.path.join(build, "bench", "idle")
tmp = tempfile.mkdtemp(prefix="ptwkfollow.")
env = dict(os.environ, PTWATCH_TRUTH="/dev/null")


def timed(cmd, stderr=subprocess.DEVNULL):
    """(wall seconds, CPU seconds of the command and its descendants)"""
    t0 = time.monotonic()
    p = subprocess.Popen(cmd, env=env, stdout=subprocess.DEVNULL, stderr=stderr)
    _, status, ru = os.wait4(p.pid, 0)
    dt = time.monotonic() - t0
    p.returncode = os.waitstatus_to_exitcode(status)
    if p.returncode != 0:
        print("%s failed (exit %d)" % (" ".join(cmd[:3]), p.returncode))
        sys.exit(1)
    return dt, ru.ru_utime + ru.ru_stime


# 1. per fork+exit: each tool with N children and with none (its fixed
# cost: start, attach, detach), so that per child = the difference / N.
def tools_for(n):
    args = [prefork, "many", str(n)]
    t = [("native", args)]
    if shutil.which("strace"):
        t.append(("strace -f", ["strace", "-f", "-qq", "-o", "/dev/null"] + args))
    t.append(("ptwatch -f", [ptwatch, "-f", "-q", "-o", os.path.join(tmp, "d.json"), "--"]
              + args))
    t.append(("kernel -f", [demo, "-q", "-f", "--"] + args))
    t.append(("kernel wide", [demo, "-q", "-f", "--file-wide", "--"] + args))
    return t


names = [name for name, _ in tools_for(0)]
PARTS = os.environ.get("PARTS", "123")  # which of the three to run
times = {(name, n): [] for name in names for n in (0, N)}
for run in range(RUNS if "1" in PARTS else 0):
    for n in (0, N):
        for name, cmd in tools_for(n):
            if name.startswith("kernel"):
                errf = os.path.join(tmp, "demo.err")
                with open(errf, "w") as e:
                    times[(name, n)].append(timed(cmd, stderr=e))
                text = open(errf).read()
                if (" %d created" % (2 * n)) not in text:
                    print("%s: not every thread seen:\n%s" % (name, text[-2000:]))
                    sys.exit(1)
            else:
                times[(name, n)].append(timed(cmd))


def med(key, i):
    return statistics.median(t[i] for t in times[key])


def report1():
    print("1. %d children one after the other, 2 threads each; medians of %d runs" % (N, RUNS))
    print("%-12s %9s %9s %15s %15s" % ("tool", "wall", "fixed", "us/child wall", "us/child CPU"))
    nat_w = med(("native", N), 0) - med(("native", 0), 0)
    nat_c = med(("native", N), 1) - med(("native", 0), 1)
    for name in names:
        w = med((name, N), 0) - med((name, 0), 0)
        c = med((name, N), 1) - med((name, 0), 1)
        extra = "" if name == "native" else "+"
        print("%-12s %8.3fs %8.3fs %15s %15s" % (
            name, med((name, N), 0), med((name, 0), 0),
            "%s%.0f" % (extra, ((w - nat_w) if extra else w) / N * 1e6),
            "%s%.0f" % (extra, ((c - nat_c) if extra else c) / N * 1e6)))


if "1" in PARTS:
    report1()


# 3. a child's first moments: the same runs with links of its own per child
# (the default) and with the file's probes (--file-wide): how many of the
# children's pthread_create calls were seen as such (a creation before a
# child's links are in is one too when its clone says so: bpf pd_pthread).
def report3():
    import re
    print("3. links of its own per child against the file's probes: creations seen as such")
    for mode in (["workers"], ["many", str(N)]):
        want = 9 if mode[0] == "workers" else 2 * int(mode[1])
        seen = {}
        for how, extra in (("inode-wide", ["--file-wide"]), ("per child", [])):
            runs = []
            for run in range(RUNS):
                errf = os.path.join(tmp, "demo3.err")
                with open(errf, "w") as e:
                    timed([demo, "-q", "-f"] + extra + ["--", prefork] + mode, stderr=e)
                m = re.search(r" (\d+) created", open(errf).read())
                runs.append(int(m.group(1)) if m else -1)
            seen[how] = statistics.median(runs)
        print("   prefork %-10s %5d pthread_create: inode-wide %5d seen, per child %5d seen"
              " (%.0f%%)" % (" ".join(mode), want, seen["inode-wide"], seen["per child"],
                              100.0 * seen["per child"] / want))


# 2. a bystander
def session(opts):
    """A kernel session watching bench/idle; returns (demo, idle) processes."""
    target = subprocess.Popen([idle, "1"], stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
    target.stdout.readline()  # its "ready"
    cmd = [demo, "-q"] + opts + [str(target.pid)]
    d = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    # attached once it says so on stderr (with -f, after its process lines)
    for _ in range(16):
        line = d.stderr.readline().decode()
        if "attached" in line or not line:
            break
    if "attached" not in line:
        print("demo: " + line)
        end(d, target)  # (not left running with its session)
        sys.exit(1)
    return d, target


def end(d, target):
    d.send_signal(signal.SIGINT)
    d.wait(20)
    target.kill()
    target.wait()


cases = {"none": None, "kernel, no -f": [], "kernel -f": ["-f"],
         "kernel wide": ["-f", "--file-wide"]}
by = {c: [] for c in cases}
for run in range(RUNS if "2" in PARTS else 0):
    for c, opts in cases.items():
        s = session(opts) if opts is not None else None
        by[c].append(timed([churn, str(M)]))
        if s:
            end(*s)
if "2" not in PARTS:
    if "3" in PARTS:
        report3()
    shutil.rmtree(tmp)
    sys.exit(0)
base_w = statistics.median(t[0] for t in by["none"])
base_c = statistics.median(t[1] for t in by["none"])
print("2. an untraced process creating and joining %d threads; medians of %d runs" % (M, RUNS))
print("%-14s %9s %9s %17s %17s" % ("session", "wall", "CPU", "extra us/thread", "extra CPU us/th"))
for c in cases:
    w = statistics.median(t[0] for t in by[c])
    cp = statistics.median(t[1] for t in by[c])
    print("%-14s %8.3fs %8.3fs %17s %17s" % (
        c, w, cp, "%+.2f" % ((w - base_w) / M * 1e6) if c != "none" else "",
        "%+.2f" % ((cp - base_c) / M * 1e6) if c != "none" else ""))
if "3" in PARTS:
    report3()
shutil.rmtree(tmp)
