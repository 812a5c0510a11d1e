"""Helpers shared by the case families (tests/integration/cases/*.py):
reading the fixtures' pipes, comparing a process's text with its files,
attach-mode waits and checks (traced, untraced, progress, exit,
preexisting and open spans, stacks), finding and killing ptwatch's own
processes, and "the same with and without"."""

import ctypes
import errno
import json
import os
import select
import shutil
import signal
import subprocess
import time

from ptw_test import (
    foreign_int3,
    backend, child_pids, comm, end_group, Failed, FrameworkError, kill_group, proc_status, ptwatch_path,
    read_outputs,
    task_states, thread_spans, tracer_pids, wait_for
)


def read_line(fd, timeout, what):
    """One line from pipe fd within timeout seconds."""
    deadline = time.monotonic() + timeout
    data = b''
    while not data.endswith(b'\n'):
        left = deadline - time.monotonic()
        if left <= 0:
            raise Failed('no %s line within %d s (got %r)' % (what, timeout, data))
        r, _, _ = select.select([fd], [], [], left)
        if r:
            chunk = os.read(fd, 256)
            if not chunk:
                raise Failed('%s pipe closed before a line came (got %r)' % (what, data))
            data += chunk
    return data.decode()


# ---------------------------------------------------------------------------
# processes the case lets go of: their exit status (as a subreaper), their
# text against their files

PR_SET_CHILD_SUBREAPER = 36


def end_with(proc, pid):
    """The end of a case that killed its target: ptwatch's group ended, and
    the target (pid, if known) killed should it still live."""
    end_group(proc)
    if pid:
        try:
            os.kill(pid, signal.SIGKILL)
        except OSError:
            pass


def become_subreaper():
    """So that the fixture, orphaned when ptwatch exits, becomes our child
    and its exit status can be read."""
    libc = ctypes.CDLL(None, use_errno=True)
    return libc.prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) == 0


def wait_pid(pid, timeout):
    """(status) of our child pid within timeout, or None."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            got, status = os.waitpid(pid, os.WNOHANG)
        except ChildProcessError:
            return 'not-a-child'
        if got == pid:
            return status
        time.sleep(0.02)  # polling in the harness
    return None


def text_diffs(pid, limit=20, tid=None, raw=False):
    """Compares every file-backed executable mapping of pid with its file:
    a breakpoint left behind shows up as a differing byte (0xcc). Returns
    a list of (module, address, file byte, memory byte), or a string that
    says why the memory cannot be read (check_text_restored and
    check_text_patched fail then). tid: read through that thread (a
    zombie leader has no maps). An int3 that this test's own copy of the
    file has too is another session's kernel uprobe on the file, left out,
    unless raw (a bystander: nothing of any session may be in it)."""
    diffs = []
    base = '/proc/%d' % pid if tid is None else '/proc/%d/task/%d' % (pid, tid)
    try:
        with open(base + '/maps') as f:
            maps = f.read().splitlines()
        mem = open(base + '/mem', 'rb', buffering=0)
    except OSError as e:
        return 'cannot open %s/maps or mem: %s' % (base, e.strerror)
    with mem:
        for line in maps:
            parts = line.split(None, 5)
            if len(parts) < 6 or 'x' not in parts[1] or not parts[5].startswith('/'):
                continue
            path = parts[5].strip()
            start, end = (int(x, 16) for x in parts[0].split('-'))
            offset = int(parts[2], 16)
            try:
                with open(path, 'rb') as f:
                    f.seek(offset)
                    want = f.read(end - start)
                mem.seek(start)
                got = mem.read(len(want))
            except OSError as e:
                if e.errno in (errno.EPERM, errno.EACCES, errno.EIO):
                    return 'cannot read %s of %s/mem: %s' % (parts[0], base, e.strerror)
                raise
            if got == want:
                continue
            for i in range(min(len(got), len(want))):
                if got[i] != want[i] and (raw or not (got[i] == 0xcc and
                                                      foreign_int3(path, offset + i))):
                    diffs.append((os.path.basename(path), hex(start + i), hex(want[i]),
                                  hex(got[i])))
                    if len(diffs) >= limit:
                        return diffs
    return diffs


def check_bystander(chk, what):
    """A process started now, outside what is traced (cat, once it
    answers: its libraries mapped, main running), has its every executable
    mapping as its files: no probe of any session in it."""
    cat = subprocess.Popen(['cat'], stdin=subprocess.PIPE, stdout=subprocess.PIPE)
    try:
        cat.stdin.write(b'x\n')
        cat.stdin.flush()
        chk.eq('%s: cat answers' % what, cat.stdout.readline(), b'x\n')
        chk.eq('%s: a process outside: its text as its files have it' % what,
               text_diffs(cat.pid, raw=True), [])
    finally:
        cat.kill()
        cat.wait()


def check_text_restored(chk, pid, what, tid=None):
    """Every byte of pid's text is its files' again (no int3 left). Memory
    that cannot be read fails the check, with the reason."""
    diffs = text_diffs(pid, tid=tid)
    if isinstance(diffs, str):
        return chk.fail('%s: the text of %d cannot be compared with its files: %s'
                        % (what, pid, diffs))
    return chk.eq('%s: text bytes of %d that differ from the files' % (what, pid), diffs, [])


def check_text_patched(chk, pid, what, at_least=1, tid=None, timeout=0):
    """ptwatch's breakpoints are in pid's text (at least `at_least` bytes
    differ from the files), within timeout seconds. Memory that cannot be
    read fails the check, with the reason."""
    def patched():
        d = text_diffs(pid, tid=tid)
        return d if isinstance(d, str) or len(d) >= at_least else None
    diffs = wait_for(patched, timeout) or text_diffs(pid, tid=tid)
    if isinstance(diffs, str):
        return chk.fail('%s: the text of %d cannot be compared with its files: %s'
                        % (what, pid, diffs))
    return chk.true('%s: breakpoints in the text of %d: at least %d bytes differ from the '
                    'files (%s)' % (what, pid, at_least, diffs), len(diffs) >= at_least)
    return diffs


# ---------------------------------------------------------------------------
# 16. attach mode (ptwatch -p PID): fixtures the test starts itself
# (tests/fixtures/attach.h); ptwatch attaches, lets go, and the fixture
# must go on as if nothing happened.

def wait_traced(target, timeout=20):
    """Waits until every thread of the target (a Target or a pid) has a
    tracer (ptwatch holds it); returns {tid: TracerPid}."""
    pid = target if isinstance(target, int) else target.pid

    def all_traced():
        tids = set(task_states(pid))
        traced = tracer_pids(pid)
        return traced if tids and set(traced) >= tids else None
    traced = wait_for(all_traced, timeout)
    if not traced:
        raise Failed('%s: not every thread traced within %d s: tracers %s, threads %s'
                     % (target, timeout, tracer_pids(pid), task_states(pid)))
    return traced


def wait_watched(target, timeout=20):
    """Waits until ptwatch watches every thread of the target: on the
    ptrace path every thread has a tracer (wait_traced); the kernel path
    stops and traces nothing, and its "found" lines (start_attached) said
    it attached. Returns {tid: TracerPid}, {} on the kernel path."""
    if backend() == 'kernel':
        return {}
    return wait_traced(target, timeout)


def start_attached(session, target, opts=()):
    """ptwatch OPTS -p PID with its event lines (no -q), started; returns
    (run, proc) once it has attached: its "found" lines (one per thread it
    found) are out. A signal sent while it still attaches may be lost (see
    attach-early-signal), and most cases test something else."""
    run, proc = session.start_attach(target.pid, opts=opts)

    def attached():
        read_outputs(run)
        return ' found ' in run.stderr_text() or proc.poll() is not None
    if not wait_for(attached, 20) or proc.poll() is not None:
        kill_group(proc)
        proc.wait()
        read_outputs(run)
        raise Failed('ptwatch -p %d: no "found" event line within 20 s (exit %s)\nstderr:\n%s'
                     % (target.pid, proc.returncode, run.stderr_text()[-2000:]))
    return run, proc


def wait_for_text(run, proc, needle, timeout=20):
    """Whether needle shows on ptwatch's standard error within timeout
    (False at once if ptwatch ended without it)."""
    def seen():
        read_outputs(run)
        return needle in run.stderr_text() or proc.poll() is not None
    return wait_for(seen, timeout) and needle in run.stderr_text()


def settled_states(pid, expected, timeout=2):
    """The thread states of pid once they are `expected` ({tid: letter}), or
    as they are after timeout seconds: a thread let go of is running (R)
    for a moment before it sleeps again where it slept."""
    return wait_for(lambda: (lambda st: st if st == expected else None)(task_states(pid)),
                    timeout) or task_states(pid)


def wait_untraced(pid, timeout):
    """Seconds until no thread of pid has a tracer, None after timeout."""
    t0 = time.monotonic()
    if wait_for(lambda: not tracer_pids(pid), timeout, step=0.005):
        return time.monotonic() - t0
    return None


def wait_progress(chk, target, what, more=50, timeout=15):
    """The fixture's counter grows by `more` (it works, untraced)."""
    start = target.count()
    deadline = time.monotonic() + timeout
    now = start
    while time.monotonic() < deadline:
        now = target.count()
        if now >= start + more:
            return True
        time.sleep(0.02)  # polling the fixture's counter
    return chk.fail('%s: the counter of %s went from %d to %d in %d s (expected +%d)'
                    % (what, target, start, now, timeout, more))


def check_target_exit(chk, target, what, code=0, timeout=20):
    status = target.wait_exit(timeout)
    if status is None:
        chk.fail('%s: %s did not exit within %d s after it was released'
                 % (what, target, timeout))
        target.kill()
        return False
    if status < 0:
        return chk.fail('%s: %s died of signal %d (SIGTRAP = %d)\nstderr:\n%s'
                        % (what, target, -status, signal.SIGTRAP, target.stderr_text()))
    return chk.eq('%s: exit status of %s' % (what, target), status, code)


def check_preexisting(chk, span, what, routine, pthread=None):
    """A thread that ran before the attach: origin preexisting, no creation
    or start time, its start routine from libthread_db, its pthread_t."""
    chk.eq('%s: origin' % what, span['origin'], 'preexisting', span)
    chk.eq('%s: create_ns' % what, span['create_ns'], None, span)
    chk.eq('%s: start_ns' % what, span['start_ns'], None, span)
    sr = span['start_routine'] or {}
    chk.eq('%s: start_routine.symbol' % what, sr.get('symbol'), routine, span)
    if pthread is not None:
        chk.eq('%s: pthread' % what, span['pthread'], pthread, span)
    else:
        chk.true('%s: pthread known' % what, span['pthread'] is not None, span)
    chk.true('%s: detached is true or false (got %r)' % (what, span['detached']),
             span['detached'] in (True, False), span)


def check_open(chk, span, what):
    chk.eq('%s: status (still running at the detach)' % what, span['status'], 'open', span)
    chk.eq('%s: end' % what, span['end'], None, span)
    chk.eq('%s: end_ns' % what, span['end_ns'], None, span)


def check_main_span(chk, doc, pid, what, status='open'):
    mains = [s for s in thread_spans(doc) if s['origin'] == 'main']
    if not chk.eq('%s: main spans' % what, [s['tid'] for s in mains], [pid]):
        return None
    span = mains[0]
    sr = span['start_routine'] or {}
    chk.eq('%s: main span start_routine.symbol' % what, sr.get('symbol'), 'main', span)
    chk.eq('%s: main span create_ns' % what, span['create_ns'], None, span)
    if status == 'open':
        check_open(chk, span, '%s: main span' % what)
    return span


def check_stack(chk, span, what, routine, source):
    """A snapshot span's stack: non-empty, and one frame is routine in
    source (symbol and file basename)."""
    stack = span.get('stack')
    if not chk.true('%s: non-empty stack' % what, isinstance(stack, list) and stack, span):
        return
    frames = [f for f in stack if f['symbol'] == routine]
    if chk.true('%s: a stack frame in %s' % (what, routine), frames, span):
        f = frames[0].get('file')
        chk.true('%s: frame %s file is %s (got %r)' % (what, routine, source, f),
                 isinstance(f, str) and os.path.basename(f) == source, span)


def ptwatch_processes(front):
    """{'front', 'tracer', 'restorer'}: pid of each of the ptwatch whose
    front is `front` (the restorer is the front's child too, in a session
    of its own)."""
    found = {'front': front}
    for kid in child_pids(front):
        name = {'ptw-tracer': 'tracer', 'pt-restorer': 'restorer'}.get(comm(kid))
        if name:
            found[name] = kid
    return found


def bpf_prog_ids(pids):
    """The ids of the BPF programs processes pids hold (their descriptors'
    fdinfo): the kernel path's, as other sessions load ptw_* ones too."""
    ids = set()
    for pid in pids:
        d = '/proc/%d/fdinfo' % pid
        try:
            fds = os.listdir(d)
        except OSError:
            continue
        for fd in fds:
            try:
                with open(os.path.join(d, fd)) as f:
                    ids |= {int(l.split()[1]) for l in f if l.startswith('prog_id:')}
            except (OSError, ValueError, IndexError):
                pass
    return ids


def bpf_progs_loaded(ids):
    """Which of these BPF program ids the kernel still has (bpftool)."""
    tool = shutil.which('bpftool') or '/usr/sbin/bpftool'
    return {i for i in ids
            if subprocess.run([tool, 'prog', 'show', 'id', str(i)], stdout=subprocess.DEVNULL,
                              stderr=subprocess.DEVNULL).returncode == 0}


def check_bpf_freed(chk, ids, what, timeout=20):
    """Every program of ids is freed (the kernel does it once the last
    descriptor closes, after its grace periods: polled)."""
    if not chk.true('%s: ptwatch held BPF programs' % what, bool(ids)):
        return False
    left = wait_for(lambda: not bpf_progs_loaded(ids), timeout)
    return chk.eq('%s: BPF programs of ptwatch still loaded' % what,
                  sorted(bpf_progs_loaded(ids)) if not left else [], [])


def kill_tracer(chk, front, tracers=None):
    """SIGKILLs the tracer of the ptwatch whose front is `front` (or the
    given tracer pids) and waits until its restorer has ended: the
    restorer puts the bytes back after the tracer is gone, so TracerPid 0
    alone does not say they are back."""
    # (the restorer names itself once it first runs: on a loaded machine
    # the tracer may be far along by then)
    ours = wait_for(lambda: (lambda o: o if o.get('restorer') else None)(
        ptwatch_processes(front)), 10) or ptwatch_processes(front)
    restorer = ours.get('restorer')
    chk.true('a restorer process', restorer is not None, ours)
    for tid in tracers if tracers is not None else [ours.get('tracer')]:
        if tid:
            os.kill(tid, signal.SIGKILL)
    if restorer:
        chk.true('the restorer %d ends within 10 s of the kill' % restorer,
                 wait_for(lambda: proc_status(restorer).get('State', 'Z')[:1] in 'ZX', 10))


# Truth fields that name a thread, a process or an address: they differ
# from run to run, what the fixture computed does not.
IDENTITY_FIELDS = {'tid', 'pid', 'pthread', 'creator', 'joiner', 'routine_addr', 'waiter', 'owner',
                   'a', 'b', 'ab', 'ba', 'main', 'mutex', 'mutex_a', 'mutex_b', 'rwlock', 'cond',
                   'sem', 'addr', 'tids'}


def truth_computed(truth):
    """The truth records without their identities (IDENTITY_FIELDS), as a
    sorted list: what the fixture computed and saw, comparable between runs."""
    return sorted(json.dumps({k: v for k, v in r.items() if k not in IDENTITY_FIELDS},
                             sort_keys=True) for r in truth)


def check_same_as_untraced(chk, session, cmd, traced, env=None):
    """The target's output, exit status and what it computed (its truth
    records but their tids and addresses) do not depend on --trace (or
    --locks): compared with a run without it. A fixture that prints nothing
    and records nothing would compare nothing: that is an error."""
    plain = session.run(cmd, opts=['-q'], env=env)
    chk.eq('exit status with and without --trace', traced.returncode, plain.returncode)
    chk.eq('output with and without --trace', traced.stdout_text(), plain.stdout_text())
    if not traced.truth and not plain.truth and not traced.stdout_text().strip():
        raise FrameworkError('%s: no output and no truth records to compare' % ' '.join(cmd))
    chk.eq('what the fixture computed (its truth records without tids and addresses) with and '
           'without --trace', truth_computed(traced.truth), truth_computed(plain.truth))


def run_ptwatch(argv, timeout=60, env=None, stdin=subprocess.DEVNULL):
    e = dict(os.environ)
    e.pop('PTWATCH_NO_DEBUG_FILES', None)
    e.update(env or {})
    return subprocess.run([ptwatch_path()] + argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                          timeout=timeout, env=e, stdin=stdin)
