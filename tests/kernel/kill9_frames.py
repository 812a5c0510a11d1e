#!/usr/bin/python3
"""kill -9 of the loader while --trace's probes fire: bench/kleaf calls
leaf_push (entry uprobe + uretprobe, tests/kernel/ptw-kernel-demo --trace)
from 2 threads, millions of times; the loader is SIGKILLed mid-run, 3
times. Each time the target must finish with the right sum and exit 0,
leaf_push's text, patched by the kernel while attached, must equal the
file again once the calls are over (the descriptors closed: the kernel
took its int3 away), and no ptw_frame_* BPF program may be left.

    kill9_frames.py PTW_KERNEL_DEMO KLEAF      (exit 0 pass, 1 fail, 77 skip)
"""
import os
import select
import signal
import shutil
import subprocess
import sys
import time

demo, kleaf = sys.argv[1], sys.argv[2]
N = 2000000


def leaf_offset():
    out = subprocess.run(["nm", kleaf], stdout=subprocess.PIPE, check=True).stdout.decode()
    return next(int(l.split()[0], 16) for l in out.splitlines() if l.endswith(" leaf_push"))


def text_at(pid, off):
    """leaf_push's first bytes in the process (the executable's first
    mapping is at file offset 0)."""
    with open("/proc/%d/maps" % pid) as f:
        start = next(int(l.split("-")[0], 16) for l in f if os.path.basename(kleaf) in l)
    with open("/proc/%d/mem" % pid, "rb") as m:
        m.seek(start + off)
        return m.read(4)


def held_programs(pid):
    """The ids of the BPF programs process pid holds (its descriptors'
    fdinfo): other sessions load ptw_* programs too (tests run in parallel)."""
    ids = set()
    d = "/proc/%d/fdinfo" % pid
    for fd in os.listdir(d):
        try:
            with open(os.path.join(d, fd)) as f:
                for line in f:
                    if line.startswith("prog_id:"):
                        ids.add(int(line.split()[1]))
        except OSError:
            pass
    return ids


def cpu_ticks(pid):
    """utime + stime of process pid, in clock ticks."""
    with open("/proc/%d/stat" % pid) as f:
        w = f.read().rsplit(")", 1)[1].split()
    return int(w[11]) + int(w[12])


def programs_left(ids):
    tool = shutil.which("bpftool") or "/usr/sbin/bpftool"
    return sum(subprocess.run([tool, "prog", "show", "id", str(i)], stdout=subprocess.DEVNULL,
                              stderr=subprocess.DEVNULL).returncode == 0 for i in ids)


def main():
    probe = subprocess.run([demo, "-q", "-t", "0", str(os.getpid())], stdout=subprocess.PIPE,
                           stderr=subprocess.PIPE)
    if probe.returncode == 77:
        print("SKIP:", probe.stdout.decode().strip())
        return 77
    off = leaf_offset()
    with open(kleaf, "rb") as f:
        f.seek(off)
        file_bytes = f.read(4)
    want = subprocess.run([kleaf, str(N)], input=b"g", stdout=subprocess.PIPE).stdout
    want = want.split(b"sum ")[1]
    failed = 0
    ours = set()
    for rnd in range(3):
        k = subprocess.Popen([kleaf, str(N), "push", "2", "hold"], stdin=subprocess.PIPE,
                             stdout=subprocess.PIPE)
        pid = int(k.stdout.readline().split()[1])
        d = subprocess.Popen([demo, "-q", "--trace", "leaf_push", str(pid)],
                             stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        if b"attached" not in d.stderr.readline():
            print("FAIL: no attach")
            k.kill()
            return 1
        during = text_at(pid, off)
        ours |= held_programs(d.pid)
        k.stdin.write(b"g")
        k.stdin.flush()
        # mid-run, by observation: the calls under way (its threads have
        # run 50 ms of them), and not over (no "sum" printed yet)
        t0, deadline = cpu_ticks(pid), time.monotonic() + 20
        while cpu_ticks(pid) < t0 + 5 and time.monotonic() < deadline:
            time.sleep(0.005)
        mid = not select.select([k.stdout], [], [], 0)[0]
        os.kill(d.pid, signal.SIGKILL)
        d.wait()
        out = k.stdout.readline()  # the calls are over; it holds until stdin ends
        after = text_at(pid, off)
        k.stdin.close()
        k.wait()
        ok = (k.returncode == 0 and b"sum " in out and out.split(b"sum ")[1] == want and
              during != file_bytes and after == file_bytes and mid)
        print("round %d: status %d, %s, killed mid-run %s, leaf_push while attached %s, after "
              "the kill %s, file %s" % (rnd + 1, k.returncode, out.decode().strip(), mid,
                                        during.hex(), after.hex(), file_bytes.hex()))
        failed += not ok
    for _ in range(50):
        if programs_left(ours) == 0:
            break
        time.sleep(0.1)
    left = programs_left(ours)
    print("of the %d programs the loaders held, left: %d" % (len(ours), left))
    return 1 if failed or left else 0


sys.exit(main())
