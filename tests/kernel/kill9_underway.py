#!/usr/bin/python3
"""kill -9 of ptwatch --backend=kernel -p --trace while the calls under way
at its attach have their return sites probed (src/kernel/underway.c):
fixture-frames deep (a thread six calls deep in fr_deep, asleep at the
bottom), 3 rounds. Each round ptwatch must hold ptw_underway_return (the
return sites are in) and the executable's text must differ from its file
(the kernel's int3s) when it is SIGKILLed; afterwards the text equals the
file again (the descriptors closed: the kernel took its probes away), the
recursion returns its right sum ("out 21") untraced, and the fixture
exits 0; no program ptwatch held is left.

    kill9_underway.py PTWATCH FIXTURE_FRAMES      (exit 0 pass, 1 fail, 77 skip)
"""
import os
import select
import shutil
import signal
import subprocess
import sys
import time

ptwatch, fixture = sys.argv[1], sys.argv[2]
BPFTOOL = shutil.which("bpftool") or "/usr/sbin/bpftool"


def text(pid):
    """The executable's r-xp mapping as the process sees it, and the same
    bytes of the file."""
    real = os.path.realpath(fixture)
    with open("/proc/%d/maps" % pid) as f:
        for line in f:
            w = line.split()
            if len(w) >= 6 and w[1] == "r-xp" and w[5] == real:
                start, end = (int(x, 16) for x in w[0].split("-"))
                off = int(w[2], 16)
                break
    with open("/proc/%d/mem" % pid, "rb") as m:
        m.seek(start)
        mem = m.read(end - start)
    with open(real, "rb") as f:
        f.seek(off)
        disk = f.read(end - start)
    return mem, disk[:len(mem)]


def family(front):
    """front and every process below it (ptwatch's front, tracer, restorer)."""
    kids = {}
    for d in os.listdir("/proc"):
        try:
            with open("/proc/%s/stat" % d) as f:
                ppid = int(f.read().rsplit(")", 1)[1].split()[1])
            kids.setdefault(ppid, []).append(int(d))
        except (OSError, ValueError, IndexError):
            pass
    out, todo = [], [front]
    while todo:
        p = todo.pop()
        out.append(p)
        todo += kids.get(p, [])
    return out


def held(pids):
    """The names of the BPF programs processes pids hold, by id."""
    ids = set()
    for pid in pids:
        d = "/proc/%d/fdinfo" % pid
        for fd in os.listdir(d):
            try:
                with open(os.path.join(d, fd)) as f:
                    ids |= {int(l.split()[1]) for l in f if l.startswith("prog_id:")}
            except OSError:
                pass
    names = {}
    for i in ids:
        out = subprocess.run([BPFTOOL, "prog", "show", "id", str(i)], capture_output=True,
                             text=True).stdout
        names[i] = out.split("name ")[1].split()[0] if "name " in out else "?"
    return names


def left(ids):
    return sum(subprocess.run([BPFTOOL, "prog", "show", "id", str(i)],
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL).returncode == 0
               for i in ids)


def line(fd, deadline):
    buf = b""
    while not buf.endswith(b"\n"):
        r, _, _ = select.select([fd], [], [], max(0, deadline - time.monotonic()))
        if not r:
            raise TimeoutError("no line: %r" % buf)
        c = os.read(fd, 1)
        if not c:
            raise EOFError("closed: %r" % buf)
        buf += c
    return buf.decode().strip()


def asleep_in_read(pid, tid):
    try:
        with open("/proc/%d/task/%d/syscall" % (pid, tid)) as f:
            return f.read().split()[0] == "0"
    except (OSError, IndexError):
        return False


def round_(n, ours):
    ctl_r, ctl_w = os.pipe()
    rep_r, rep_w = os.pipe()
    env = dict(os.environ, PTW_CTL_FD=str(ctl_r), PTW_REPLY_FD=str(rep_w),
               PTWATCH_TRUTH="/dev/null")
    t = subprocess.Popen([fixture, "deep"], env=env, pass_fds=(ctl_r, rep_w),
                         stdout=subprocess.DEVNULL)
    os.close(ctl_r)
    os.close(rep_w)
    deadline = time.monotonic() + 20
    pid = int(line(rep_r, deadline).split()[1])
    tid = int(line(rep_r, deadline).split()[1])
    while not asleep_in_read(pid, tid) and time.monotonic() < deadline:
        time.sleep(0.005)
    p = subprocess.Popen([ptwatch, "--backend=kernel", "-p", str(pid), "--trace", "fr_*",
                          "--json", "-o", "/dev/null"],
                         stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    err = b""
    while b" found " not in err and p.poll() is None and time.monotonic() < deadline:
        r, _, _ = select.select([p.stderr], [], [], 0.1)
        if r:
            err += os.read(p.stderr.fileno(), 4096)
    if p.poll() is not None:
        t.kill()
        t.wait()
        return None, err.decode()
    procs = family(p.pid)
    names = held(procs)
    ours |= set(names)
    mem, disk = text(pid)
    for q in procs:  # every ptwatch process at once
        os.kill(q, signal.SIGKILL)
    p.wait()
    # the others are gone when their descriptors are: the text tells (the
    # kernel's grace periods, seconds on a loaded machine: a deadline of
    # its own, not what is left of the round's)
    killed = time.monotonic()
    while text(pid)[0] != disk and time.monotonic() < killed + 20:
        time.sleep(0.01)
    after, _ = text(pid)
    print("round %d: text equal to the file %.2f s after the kill" % (n, time.monotonic() - killed))
    os.write(ctl_w, b"x")
    out = line(rep_r, time.monotonic() + 20)
    os.write(ctl_w, b"q")
    t.wait(20)
    # The kernel sometimes keeps a killed session's uprobe registered, its
    # int3 in the process, and handles its traps itself (the release runs
    # in the killed ptwatch's exit, SIGKILL pending: docs/design.md;
    # killall.py allows it too). The target must run on unharmed: the
    # right sum and exit 0 below. Said, not failed: once under a CPU hog.
    diffs = [i for i in range(min(len(after), len(disk))) if after[i] != disk[i]]
    kept = after != disk and len(after) == len(disk) and all(after[i] == 0xcc for i in diffs)
    if kept:
        print("round %d: the kernel kept %d uprobes of the killed session there (int3 at "
              "offsets %s), handled by it" % (n, len(diffs), [hex(i) for i in diffs[:8]]))
    ok = ("ptw_underway_return" in names.values() and mem != disk and (after == disk or kept) and
          out == "out 21" and t.returncode == 0)
    print("round %d: return sites probed %s, text patched while attached %s, equal to the file "
          "after the kill %s, %s, exit %s (ptwatch: %d processes)" % (n, "ptw_underway_return" in names.values(),
                                              mem != disk, after == disk, out, t.returncode,
                                              len(procs)))
    return ok, ""


def kernel_runs():
    """Whether the kernel path can run here, asked once up front (its
    one-line reason when not): a skip decided before the test, never an
    early exit taken for one."""
    p = subprocess.run([ptwatch, "--backend=kernel", "-q", "--", "/bin/true"],
                       stdin=subprocess.DEVNULL, capture_output=True, timeout=60)
    return p.returncode == 0, p.stderr.decode("utf-8", "replace").strip()


def main():
    runs, why = kernel_runs()
    if not runs:
        print("SKIP: ptwatch --backend=kernel cannot run here: %s" % why[-300:])
        return 77
    ours = set()
    failed = 0
    for n in range(1, 4):
        ok, why = round_(n, ours)
        if ok is None:
            print("FAIL: ptwatch ended before it attached: %s" % why[-500:])
            return 1
        failed += not ok
    for _ in range(50):
        if left(ours) == 0:
            break
        time.sleep(0.1)
    n = left(ours)
    print("of the %d programs ptwatch held, left: %d" % (len(ours), n))
    return 1 if failed or n else 0


sys.exit(main())
