#!/usr/bin/python3
"""--snapshot past uretprobes: tests/fixtures/parked.c's three workers call
parked() while a kernel-path session traces it (ptwatch -p --trace
parked: a uretprobe each, the return address on their stacks replaced by
the kernel's trampoline), then sleep in it. A snapshot then (the kernel's
reader: no thread stopped) must give each worker's whole stack, parked
then worker then start_thread: the task iterator reads the pending
returns and the unwind reads the original address in the trampoline's
place. Before, each stack ended at parked, the next frame the
trampoline (0x7fffffffdfff, "??").

    ksnapuretprobes.py PTWATCH PARKED      (exit 0 pass, 1 fail, 77 skip)
"""
import json
import os
import signal
import subprocess
import sys
import tempfile
import time

ptwatch, parked = (os.path.abspath(a) for a in sys.argv[1:3])


def wait_for(cond, timeout):
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if cond():
            return True
        time.sleep(0.01)
    return cond()


def asleep_in_read(pid, tid, fd):
    try:
        with open('/proc/%d/task/%d/syscall' % (pid, tid)) as f:
            words = f.read().split()
        with open('/proc/%d/task/%d/stat' % (pid, tid)) as f:
            state = f.read().rsplit(')', 1)[1].split()[0]
    except OSError:
        return False
    return words[:2] == ['0', hex(fd)] and state == 'S'


def main():
    if os.geteuid() != 0:
        print('SKIP: needs root (the kernel path)')
        return 77
    fails = []
    with tempfile.TemporaryDirectory(prefix='ptw-ksnapuret-') as tmp:
        fx = subprocess.Popen([parked], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                              env=dict(os.environ, PTWATCH_TRUTH=os.path.join(tmp, 't')))
        session = None
        try:
            words = fx.stdout.readline().decode().split()
            pid, fd = int(words[1]), int(words[2])
            tids = [int(fx.stdout.readline().decode().split()[1]) for _ in range(3)]
            session = subprocess.Popen([ptwatch, '--backend=kernel', '-p', str(pid), '--trace',
                                        'parked', '-o',
                                        os.path.join(tmp, 'trace.json')],
                                       stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
            # its probes in: the threads it found are in its event log
            seen = b''
            while b' found ' not in seen and session.poll() is None:
                seen += session.stderr.readline()
            if session.poll() is not None:
                print('FAIL: the --trace session ended: %s' % seen.decode(errors='replace'))
                return 1
            fx.stdin.write(b'x')
            fx.stdin.flush()
            if not wait_for(lambda: all(asleep_in_read(pid, t, fd) for t in tids), 10):
                print('FAIL: the workers did not sleep in parked within 10 s')
                return 1
            snap = subprocess.run([ptwatch, '-p', str(pid), '--snapshot', '--json'],
                                  stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=60)
            doc = json.loads(snap.stdout) if snap.returncode == 0 else None
            if doc is None:
                print('FAIL: --snapshot exit %d: %s' % (snap.returncode, snap.stderr[-800:]))
                return 1
            backend = doc['session']['backend']
            if backend != 'kernel':
                fails.append('the snapshot took the %s path' % backend)
            spans = {s['tid']: s for s in doc['spans'] if s.get('kind', 'thread') == 'thread'}
            for t in tids:
                names = [f.get('symbol') for f in (spans.get(t) or {}).get('stack') or []]
                i = names.index('parked') if 'parked' in names else -1
                if i < 0 or names[i + 1:i + 3] != ['worker', 'start_thread']:
                    fails.append('worker %d: stack %s' % (t, names))
        finally:
            if session and session.poll() is None:
                session.send_signal(signal.SIGINT)
                session.wait(timeout=30)
            fx.kill()
            fx.wait()
    for f in fails:
        print('FAIL: %s' % f)
    print('%d workers, %d failures' % (3, len(fails)))
    return 1 if fails else 0


if __name__ == '__main__':
    sys.exit(main())
