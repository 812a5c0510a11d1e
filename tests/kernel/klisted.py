#!/usr/bin/python3
"""The threads an attach lists from /proc, not from libthread_db's walk:
tests/fixtures/churner.c (two creators, each making and joining a
short_worker, which works 1 ms, over and over, on the same few recycled
stacks) is attached
by ptw-kernel-demo with /proc's listing 30 ms after the walk
(--list-delay-ms), so that the short_workers alive then were made after
it, each on a stack whose struct pthread the walk read for an older
thread. Every thread the attach finds (PTW_EV_PREEXISTING) but the main
one must have its pthread_t and start routine, read as its memory is now
(the CI once had one without: the walk's cached page said another tid).
ATTACHES attaches, each after the last one let go.

    klisted.py PTW_KERNEL_DEMO CHURNER      (exit 0 pass, 1 fail, 77 skip)
"""
import os
import re
import subprocess
import sys
import tempfile

demo, churner = (os.path.abspath(a) for a in sys.argv[1:3])
ATTACHES = 4
ROUTINES = ('short_worker', 'creator_worker')
LINE = re.compile(r'^\s*[\d.]+\s+(\d+)\s+preexisting\s+pthread (\S+) (\S+) detached')


def start_churner(tmp):
    ctl_r, ctl_w = os.pipe()
    rep_r, rep_w = os.pipe()
    env = dict(os.environ, PTWATCH_TRUTH=os.path.join(tmp, 'truth.jsonl'),
               PTW_CTL_FD=str(ctl_r), PTW_REPLY_FD=str(rep_w))
    proc = subprocess.Popen([churner, '1000'], env=env, pass_fds=(ctl_r, rep_w),
                            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, cwd=tmp)
    os.close(ctl_r)
    os.close(rep_w)
    replies = os.fdopen(rep_r)
    ready = replies.readline().split()
    if not ready or ready[0] != 'ready':
        proc.kill()
        raise SystemExit('FAIL: the churner did not say ready: %r' % ready)
    return proc, ctl_w, replies


def main():
    failed = 0
    with tempfile.TemporaryDirectory() as tmp:
        proc, ctl, replies = start_churner(tmp)
        try:
            for n in range(ATTACHES):
                run = subprocess.run([demo, '--list-delay-ms', '30', '-t', '0.2', str(proc.pid)],
                                     stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=60)
                out = run.stdout.decode(errors='replace')
                if run.returncode == 77:
                    print('SKIP:', out.strip())
                    return 77
                if run.returncode != 0:
                    print('FAIL: attach %d: ptw-kernel-demo exit %d\n%s'
                          % (n, run.returncode, run.stderr.decode(errors='replace')[-2000:]))
                    return 1
                found = [LINE.match(l) for l in out.splitlines()]
                found = [(int(m.group(1)), m.group(2), m.group(3)) for m in found if m]
                threads = [f for f in found if f[0] != proc.pid]
                print('attach %d: %d threads found besides main' % (n, len(threads)))
                if len(threads) < 2:
                    print('FAIL: attach %d: the two creators at least, got %r' % (n, found))
                    failed += 1
                for tid, pthread, routine in threads:
                    if int(pthread, 16) == 0 or routine not in ROUTINES:
                        print('FAIL: attach %d: thread %d found with pthread %s, routine %s'
                              % (n, tid, pthread, routine))
                        failed += 1
        finally:
            os.write(ctl, b'q')
            os.close(ctl)
            code = proc.wait(timeout=60)
            replies.close()
    if code != 0:
        print('FAIL: the churner exited %d' % code)
        failed += 1
    return 1 if failed else 0


if __name__ == '__main__':
    sys.exit(main())
