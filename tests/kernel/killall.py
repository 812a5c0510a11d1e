#!/usr/bin/python3
"""kill -9 of EVERY ptwatch process at once during a thread storm (issue 19):
a container stop, a cgroup kill, the OOM killer taking the restorer too.

Each round starts tests/kernel/kstorm (creators making and joining threads
non-stop, every value checked), runs ptwatch on it (-p PID, or launching
it), waits until its event lines flow, then SIGKILLs the front and every
process under it but the target, in one tight loop. Then: the target must
finish correctly ("kstorm: TOTAL", exit 0), its text (every file-backed
executable mapping, libc's included) must equal its files, and no BPF
program or link ptwatch held (their ids read from its descriptors'
fdinfo before the kill) may be left.

    killall.py [--rounds N] [--size N] [--backend kernel|ptrace] [--report]
               PTWATCH KSTORM PTW_KERNEL_DEMO

--backend kernel (the default): a failure of any round fails the test;
skips (77) where the kernel path cannot run, or ptwatch has no --backend.
--report: print each round's outcome and exit 0 whatever happened (the
ptrace path's figures for the notes: int3 bytes left behind are expected
there). Exit 0 pass, 1 fail, 77 skip.
"""

import argparse
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), '..', 'integration'))
from helpers import become_subreaper, text_diffs, wait_pid  # noqa: E402
from ptw_test import comm, wait_for  # noqa: E402


def children_map():
    """{ppid: [pid, ...]} of every process."""
    kids = {}
    for name in os.listdir('/proc'):
        if not name.isdigit():
            continue
        try:
            with open('/proc/%s/stat' % name) as f:
                ppid = int(f.read().rsplit(')', 1)[1].split()[1])
        except (OSError, IndexError, ValueError):
            continue
        kids.setdefault(ppid, []).append(int(name))
    return kids


def descendants(pid, kids=None, skip=()):
    kids = children_map() if kids is None else kids
    out = []
    for k in kids.get(pid, []):
        if k in skip:
            continue
        out.append(k)
        out += descendants(k, kids, skip)
    return out


def bpf_ids(pids):
    """(prog ids, link ids) of the BPF descriptors the processes hold."""
    progs, links = set(), set()
    for pid in pids:
        try:
            fds = os.listdir('/proc/%d/fdinfo' % pid)
        except OSError:
            continue
        for fd in fds:
            try:
                with open('/proc/%d/fdinfo/%s' % (pid, fd)) as f:
                    info = f.read()
            except OSError:
                continue
            for line in info.splitlines():
                key, _, value = line.partition(':')
                if key == 'prog_id':
                    progs.add(int(value))
                elif key == 'link_id':
                    links.add(int(value))
    return progs, links


def bpftool(*args):
    tool = shutil.which('bpftool') or '/usr/sbin/bpftool'
    p = subprocess.run([tool, '-j'] + list(args), stdout=subprocess.PIPE,
                       stderr=subprocess.DEVNULL, timeout=30)
    return json.loads(p.stdout or b'[]')


def bpf_left(progs, links):
    """Which of these prog and link ids still exist."""
    # (an entry without an id: one that went away while bpftool listed)
    live_p = {p['id'] for p in bpftool('prog', 'show') if 'id' in p}
    live_l = {l['id'] for l in bpftool('link', 'show') if 'id' in l}
    return sorted(progs & live_p), sorted(links & live_l)


def one_round(args, mode, n, tmp):
    """One kill of everything; returns (ok, words). The storm holds at its
    end (kstorm ... hold) until its standard input closes: its memory is
    compared with its files while it is alive, however fast it was."""
    total = args.size * 2
    storm_out = os.path.join(tmp, 'storm.%s.%d' % (mode, n))
    err_path = os.path.join(tmp, 'ptwatch.%s.%d' % (mode, n))
    opts = [args.ptwatch] + (['--backend=' + args.backend] if args.backend != 'default' else [])
    opts += ['-o', os.devnull]
    storm_cmd = [args.storm, str(args.size), '2', 'hold']
    # a process that maps libc and that no ptwatch ever sees
    control = subprocess.Popen(['sleep', '600'], stdin=subprocess.DEVNULL)
    try:
        return storm_round(args, mode, storm_out, err_path, opts, storm_cmd, total, control)
    finally:
        control.kill()
        control.wait()


def storm_round(args, mode, storm_out, err_path, opts, storm_cmd, total, control):
    hold_r, hold_w = os.pipe()
    with open(storm_out, 'wb') as out, open(err_path, 'wb') as err:
        if mode == 'attach':
            storm = subprocess.Popen(storm_cmd, stdout=out, stderr=subprocess.STDOUT,
                                     stdin=hold_r)
            target = storm.pid
            if not wait_for(lambda: 'libc.so' in open('/proc/%d/maps' % target).read(), 10):
                storm.kill()
                storm.wait()
                os.close(hold_r)
                os.close(hold_w)
                return False, ['kstorm never mapped libc']
            front = subprocess.Popen(opts + ['-p', str(target)], stdout=subprocess.DEVNULL,
                                     stderr=err, stdin=subprocess.DEVNULL,
                                     start_new_session=True)
        else:
            front = subprocess.Popen(opts + ['--'] + storm_cmd, stdout=out, stderr=err,
                                     stdin=hold_r, start_new_session=True)

            def find():
                for p in descendants(front.pid):
                    if comm(p) == 'kstorm':
                        return p
                return None
            target = wait_for(find, 20)
            if not target:
                front.kill()
                os.close(hold_r)
                os.close(hold_w)
                return False, ['kstorm never started under ptwatch']
    os.close(hold_r)
    words = []

    def said():
        with open(storm_out, 'rb') as f:
            return f.read().decode('utf-8', 'replace').strip()

    def events_flow():
        with open(err_path, 'rb') as f:
            return b' create ' in f.read() or front.poll() is not None
    if not wait_for(events_flow, 30) or front.poll() is not None:
        with open(err_path, 'rb') as f:
            text = f.read().decode('utf-8', 'replace')
        os.kill(target, signal.SIGKILL)
        os.close(hold_w)
        wait_pid(target, 10)
        return False, ['no event line within 30 s, ptwatch exit %s: %s'
                       % (front.poll(), text[-500:])]
    time.sleep(args.delay)  # into the storm: the kill must land mid-storm
    kids = children_map()
    skip = {target} | set(descendants(target, kids))
    ours = [front.pid] + descendants(front.pid, kids, skip)
    names = sorted('%s:%d' % (comm(p), p) for p in ours)
    progs, links = bpf_ids(ours)
    mid = not said() and os.path.exists('/proc/%d' % target)
    for p in ours:  # all at once: nobody acts on another's death first
        try:
            os.kill(p, signal.SIGKILL)
        except ProcessLookupError:
            pass
    t0 = time.monotonic()
    front.wait()
    for p in ours[1:]:
        wait_pid(p, 5)  # adopted (we are a subreaper) or reaped elsewhere
    words.append('killed %s%s' % (' '.join(names), '' if mid else ' (NOT mid-storm)'))
    words.append('bpf held: %d programs, %d links' % (len(progs), len(links)))
    ok = mid
    if args.backend == 'kernel' and not (progs and links):
        ok = False
        words.append('FAIL: ptwatch held no BPF program or link at the kill')
    left = wait_for(lambda: (lambda l: l if l == ([], []) else None)(bpf_left(progs, links)), 10,
                    0.05) or bpf_left(progs, links)
    words.append('bpf left: %d programs, %d links (%.2f s)'
                 % (len(left[0]), len(left[1]), time.monotonic() - t0))
    ok = ok and left == ([], [])
    # The kernel restores the probed bytes as the links go (checked once
    # they are gone); the ptrace path's restorer died too: what it left
    # stays (and kills the target). Another session's inode-wide uprobes
    # (bpftrace's, say) put int3 bytes in every process that maps libc:
    # the control process, which no ptwatch ever saw, must be clean first.
    if not wait_for(lambda: text_diffs(control.pid) == [], 30, 0.1):
        words.append('another session\'s uprobes in every libc for 30 s (control process: %s)'
                     % text_diffs(control.pid))
    # (a link's id goes before its uprobes do: the kernel unregisters them
    # in the link's deferred release, after an RCU tasks-trace grace
    # period, which a storm of thread creations on a busy 2-core machine
    # has been seen to hold up for more than 10 s, the target running on
    # unharmed: its probes' traps still handled). Ours must be gone within
    # 20 s (or kept by the kernel for good: below); a session that starts
    # meanwhile (another suite run) puts its own in every libc, the
    # control process's too: then it is waited out, as above, and the 20 s
    # run again.
    t1 = time.monotonic()
    others_until = time.monotonic() + 120
    while True:
        wait_for(lambda: text_diffs(target) == [], 20)
        diffs = text_diffs(target)
        if diffs == [] or not text_diffs(control.pid) or time.monotonic() > others_until:
            break
        words.append('another session\'s uprobes in every libc meanwhile: waited out')
        wait_for(lambda: text_diffs(control.pid) == [], 30, 0.1)
    # The kernel sometimes leaves a uprobe registered, its int3 in a
    # process, after the session was killed (2 of 30 attach rounds in three
    # full runs here): the release of a link runs in the killed ptwatch's
    # own exit, with SIGKILL pending, and most likely the breakpoint's
    # removal, which takes the target's mmap lock killably, gives up where a
    # storm of thread stacks mapped and unmapped keeps that lock busy. The
    # kernel then handles those traps itself for good (the uprobe stays,
    # with no user): the target runs on unharmed, which is checked below;
    # its text is not its file's, and that is said.
    kernel_left = (args.backend == 'kernel' and isinstance(diffs, list) and diffs != []
                   and all(d[3] == '0xcc' for d in diffs))
    words.append('text: %s' % ('same as the files (%.2f s after the links)'
                               % (time.monotonic() - t1) if diffs == [] else
                               'the kernel kept %d uprobes of the killed session there '
                               '(int3 at %s), handled by it' % (len(diffs), diffs)
                               if kernel_left else diffs))
    ok = ok and (diffs == [] or kernel_left)
    wait_for(lambda: said() or not os.path.exists('/proc/%d' % target), 300, 0.05)
    os.close(hold_w)
    status = wait_pid(target, 30)
    if status is None:
        os.kill(target, signal.SIGKILL)
        wait_pid(target, 10)
        words.append('target still running 300 s after the kill')
        return False, words
    if isinstance(status, str):
        words.append('target status: %s' % status)
        return False, words
    if os.WIFSIGNALED(status):
        words.append('target died of signal %d (%s)' % (os.WTERMSIG(status),
                                                         signal.Signals(os.WTERMSIG(status)).name))
        return False, words
    words.append('target exit %d, said %r' % (os.WEXITSTATUS(status), said()))
    ok = ok and os.WEXITSTATUS(status) == 0 and said() == 'kstorm: %d' % total
    return ok, words


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument('--rounds', type=int, default=10)
    ap.add_argument('--size', type=int, default=100000,
                    help='threads per creator (2 creators)')
    ap.add_argument('--delay', type=float, default=0.3)
    ap.add_argument('--backend', default='kernel', choices=('kernel', 'ptrace', 'default'))
    ap.add_argument('--modes', default='attach,launch')
    ap.add_argument('--report', action='store_true')
    ap.add_argument('ptwatch')
    ap.add_argument('storm')
    ap.add_argument('demo')
    args = ap.parse_args()
    signal.alarm(1200)
    if args.backend == 'kernel':
        p = subprocess.run([args.demo, '0'], stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
        if p.returncode == 77:
            print('SKIP: %s' % p.stdout.decode().strip())
            return 77
    if args.backend != 'default':
        h = subprocess.run([args.ptwatch, '--help'], stdout=subprocess.PIPE,
                           stderr=subprocess.STDOUT)
        if b'--backend' not in h.stdout:
            print('SKIP: ptwatch has no --backend option yet')
            return 77
    if not become_subreaper():
        print('ERROR: cannot become a subreaper: the launched targets would be lost')
        return 99
    tmp = tempfile.mkdtemp(prefix='ptw-killall.')
    results = {}
    for mode in args.modes.split(','):
        good = 0
        for n in range(1, args.rounds + 1):
            ok, words = one_round(args, mode, n, tmp)
            good += ok
            print('%s --backend=%s round %d: %s: %s'
                  % (mode, args.backend, n, 'ok' if ok else 'FAILED', '; '.join(words)))
            sys.stdout.flush()
        results[mode] = good
    shutil.rmtree(tmp, ignore_errors=True)
    summary = ', '.join('%s %d of %d unharmed' % (m, g, args.rounds) for m, g in results.items())
    print('--backend=%s: %s' % (args.backend, summary))
    if args.report:
        return 0
    return 0 if all(g == args.rounds for g in results.values()) else 1


sys.exit(main())
