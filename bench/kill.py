#!/usr/bin/env python3
"""How often does the target survive each way of ending ptwatch?

    bench/kill.py BUILD_DIR [ROUNDS]

For each way (SIGKILL of the front; `pkill -9 ptw`, which matches the front,
the tracer and the restorer; SIGKILL of ptwatch's process group; SIGTERM;
SIGKILL of the tracer by pid; of the front and the tracer by pid, as a cgroup
kill does) and each fixture (churner: two
threads create and join threads non-stop, so some thread is nearly always
in one of ptwatch's stops; exercise: idle threads), ROUNDS times: start the
fixture, attach ptwatch -p, let it trace 0.3 s, end it that way, then check
that the target is alive, untraced, its text equal to the files, and that it
still finishes its work and exits 0. Prints survivors per way. Not a test:
the kernel's release of a tracee caught in an int3 stop (ptw_guardian.h)
makes deaths possible by design; this measures their rate."""
import os
import signal
import subprocess
import sys
import time

BUILD = sys.argv[1] if len(sys.argv) > 1 else 'build'
ROUNDS = int(sys.argv[2]) if len(sys.argv) > 2 else 10
PTWATCH = os.path.join(BUILD, 'ptwatch')
WAYS = ('front-kill9', 'pkill9-ptw', 'pgid-kill9', 'SIGTERM', 'tracer-kill9', 'both-kill9')
FIXTURES = ('churner', 'exercise')


def children(pid):
    try:
        with open('/proc/%d/task/%d/children' % (pid, pid)) as f:
            return [int(x) for x in f.read().split()]
    except OSError:
        return []


def comm(pid):
    try:
        with open('/proc/%d/comm' % pid) as f:
            return f.read().strip()
    except OSError:
        return None


def traced(pid):
    try:
        tids = os.listdir('/proc/%d/task' % pid)
    except OSError:
        return None
    for tid in tids:
        try:
            with open('/proc/%d/task/%s/status' % (pid, tid)) as f:
                if 'TracerPid:\t0\n' not in f.read():
                    return True
        except OSError:
            pass
    return False


def text_diffs(pid):
    n = 0
    with open('/proc/%d/maps' % pid) as f, open('/proc/%d/mem' % pid, 'rb', 0) as mem:
        for line in f:
            p = line.split()
            if len(p) < 6 or 'x' not in p[1] or not p[5].startswith('/'):
                continue
            a, b = (int(x, 16) for x in p[0].split('-'))
            with open(p[5], 'rb') as src:
                src.seek(int(p[2], 16))
                want = src.read(b - a)
            mem.seek(a)
            got = mem.read(len(want))
            n += sum(1 for x, y in zip(want, got) if x != y)
    return n


def until(cond, timeout):
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        v = cond()
        if v:
            return v
        time.sleep(0.005)
    return None


def one(fixture, way):
    ctl_r, ctl_w = os.pipe()
    rep_r, rep_w = os.pipe()
    env = dict(os.environ, PTW_CTL_FD=str(ctl_r), PTW_REPLY_FD=str(rep_w),
               PTWATCH_TRUTH='/dev/null')
    target = subprocess.Popen([os.path.join(BUILD, 'tests/fixtures/fixture-' + fixture)],
                              env=env, pass_fds=(ctl_r, rep_w), stdout=subprocess.DEVNULL)
    os.close(ctl_r)
    os.close(rep_w)
    os.read(rep_r, 100)
    pid = target.pid
    tw = subprocess.Popen([PTWATCH, '-q', '-o', '/dev/null', '-p', str(pid)],
                          stderr=subprocess.DEVNULL, start_new_session=True)
    until(lambda: traced(pid), 20)
    time.sleep(0.3)  # tracing in full swing (a benchmark, not a test)
    kids = {comm(k): k for k in children(tw.pid)}
    tracer = kids.get('ptw-tracer')
    if way == 'front-kill9':
        os.kill(tw.pid, signal.SIGKILL)
    elif way == 'tracer-kill9':
        os.kill(tracer, signal.SIGKILL)
    elif way == 'pkill9-ptw':
        subprocess.run(['pkill', '-9', '-s', str(tw.pid), 'ptw'])  # what `pkill -9 ptw` would
    elif way == 'both-kill9':
        os.kill(tw.pid, signal.SIGKILL)
        os.kill(tracer, signal.SIGKILL)
    elif way == 'pgid-kill9':
        os.killpg(tw.pid, signal.SIGKILL)
    else:
        os.kill(tw.pid, getattr(signal, way))
    tw.wait()
    until(lambda: traced(pid) is False or target.poll() is not None, 5)
    # the restorer's work (bytes, pages) is done within milliseconds
    until(lambda: not any(comm(k) == 'pt-restorer' for k in children(tw.pid)), 2)
    time.sleep(0.2)
    outcome = 'survived'
    if target.poll() is not None:
        outcome = 'died of %s' % (signal.Signals(-target.returncode).name
                                  if target.returncode < 0 else target.returncode)
    else:
        try:
            left = text_diffs(pid)
        except OSError:  # it died just now
            left = None
        if left is None:
            target.wait()
            outcome = 'died of %s' % (signal.Signals(-target.returncode).name
                                      if target.returncode < 0 else target.returncode)
        elif left:
            outcome = 'bytes left patched'
    if outcome == 'survived':
        os.write(ctl_w, b'q')
        try:
            rc = target.wait(timeout=20)
        except subprocess.TimeoutExpired:
            target.kill()
            rc = 'hung'
        if rc != 0:
            outcome = 'ended with %s' % rc
    if target.poll() is None:
        target.kill()
        target.wait()
    os.close(ctl_w)
    os.close(rep_r)
    return outcome


def main():
    print('%-10s %-14s %s' % ('fixture', 'way', 'survived / rounds (other outcomes)'))
    for fixture in FIXTURES:
        for way in WAYS:
            outcomes = [one(fixture, way) for _ in range(ROUNDS)]
            ok = outcomes.count('survived')
            other = sorted(set(o for o in outcomes if o != 'survived'))
            print('%-10s %-14s %d / %d %s' % (fixture, way, ok, ROUNDS,
                                               ', '.join('%s x%d' % (o, outcomes.count(o))
                                                         for o in other)), flush=True)


if __name__ == '__main__':
    main()
