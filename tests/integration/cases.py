#!/usr/bin/python3
"""ptwatch's integration test cases: cases.py CASE [VARIANT].

Each case runs ptwatch on a fixture (tests/fixtures), validates the JSON
document against the schema and compares it with the fixture's own truth.
Exit codes: 0 pass, 1 failure, 77 skip, 99 framework error.
"""

import ctypes
import errno
import json
import os
import select
import signal
import stat
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from ptw_test import (  # noqa: E402
    CANCELED, Failed, FrameworkError, Model, check_exit, find_span, fixture, kill_group,
    load_doc, load_truth, main, one_truth, report_warnings, span_index, thread_spans, truth_of)


# ---------------------------------------------------------------------------
# 1. lifecycle (default, --no-debug-files, --create-events) and 14. stripped

def check_lifecycle(chk, run, stripped=False):
    check_exit(chk, run, code=3)
    report_warnings(run)
    m = Model(chk, run, 'lifecycle.c', stripped=stripped)
    m.match()
    m.check_all(expect_main_pthread=True)
    m.check_no_extra_spans()
    m.check_metrics()
    chk.eq('metrics.unjoined (unjoined_worker only)', run.doc['metrics']['unjoined'], 1)
    chk.eq('metrics.max_depth', run.doc['metrics']['max_depth'], 2)

    routines = {t['routine']: t for t in m.threads}
    expected = {'ret_worker', 'exit_worker', 'cancel_worker', 'dattr_worker', 'dlater_worker',
                'long_worker', 'named_worker', 'grandchild_worker', 'byname_worker',
                'unjoined_worker'}
    if set(routines) != expected:
        raise FrameworkError('lifecycle truth has routines %s' % sorted(routines))
    if routines['cancel_worker']['value'] != CANCELED:
        raise FrameworkError('cancel_worker truth value %s' % routines['cancel_worker']['value'])
    names = {t['routine']: t['name'] for t in m.threads}
    if names['named_worker'] != 'lc-self' or names['byname_worker'] != 'lc-bymain':
        raise FrameworkError('fixture names: %s' % names)

    # The long join: main was blocked in pthread_join before the thread
    # started its 30 ms of work.
    t = routines['long_worker']
    span = m.span_of.get(t['tid'])
    if span is not None and span['join'] and span['join']['return_ns'] is not None:
        j = span['join']
        chk.true('long_worker: join.call_ns < end_ns <= join.return_ns (%s, %s, %s)'
                 % (j['call_ns'], span['end_ns'], j['return_ns']),
                 span['end_ns'] is not None and j['call_ns'] < span['end_ns'] <= j['return_ns'],
                 span)
        chk.true('long_worker: join.wait_ns >= 30 ms of work (%s)' % j['wait_ns'],
                 j['wait_ns'] is not None and j['wait_ns'] >= 30000000, span)
        jw = run.doc['metrics']['join_wait_ns']
        chk.true('metrics.join_wait_ns.max >= long_worker wait (%s)' % jw.get('max'),
                 jw.get('max') is not None and jw['max'] >= j['wait_ns'])
        chk.eq('metrics.join_wait_ns.count (joined threads)', jw['count'], len(m.joins))


def case_lifecycle(session, chk, variant='default'):
    exe = fixture('lifecycle')
    if variant == 'default':
        # without -q: the event lines go to stderr, the document to the file
        run = session.run([exe], opts=())
        check_lifecycle(chk, run)
        chk.true('event lines on stderr without -q', 'create' in run.stderr_text())
    elif variant == 'no-debug-files':
        for how, opts, env in (('--no-debug-files', ['-q', '--no-debug-files'], None),
                               ('PTWATCH_NO_DEBUG_FILES=1', ['-q'],
                                {'PTWATCH_NO_DEBUG_FILES': '1'})):
            chk.prefix = '[%s] ' % how
            run = session.run([exe], opts=opts, env=env)
            strategy = run.doc['session'].get('strategy')
            print('%s: strategy %s' % (how, strategy))
            # session.strategy is not in the schema; when present it must
            # show that libc's debug file was left alone.
            chk.true('%s: session.strategy is not "debuginfo"' % how, strategy != 'debuginfo')
            check_lifecycle(chk, run)
    elif variant == 'create-events':
        run = session.run([exe], opts=['-q', '--create-events'])
        check_lifecycle(chk, run)
    elif variant == 'stripped':
        run = session.run([fixture('stripped')], opts=['-q'])
        check_lifecycle(chk, run, stripped=True)
        for s in thread_spans(run.doc):
            sr = s['start_routine'] or {}
            if s['origin'] == 'created':
                chk.eq('stripped: %s start_routine.file' % s['tid'], sr.get('file'), None, s)
    else:
        raise FrameworkError('unknown lifecycle variant %s' % variant)


# ---------------------------------------------------------------------------
# 2. nested

def case_nested(session, chk):
    run = session.run([fixture('nested')])
    check_exit(chk, run, code=0)
    m = Model(chk, run, 'nested.c')
    m.match()
    m.check_all()
    m.check_no_extra_spans()
    m.check_metrics()
    chk.eq('metrics.max_depth', run.doc['metrics']['max_depth'], 3)
    depths = {t['routine']: m.depth_of[t['tid']] for t in m.threads}
    if depths != {'level_a': 1, 'level_b': 2, 'level_c': 3}:
        raise FrameworkError('nested truth depths %s' % depths)


# ---------------------------------------------------------------------------
# 3. mainexit

def case_mainexit(session, chk):
    run = session.run([fixture('mainexit')])
    check_exit(chk, run, code=0)
    m = Model(chk, run, 'mainexit.c')
    m.match()
    m.check_all()
    m.check_no_extra_spans()
    m.check_metrics()
    main_rec = one_truth(run, 'main')
    main_span = m.span_of.get(main_rec['tid'])
    if main_span is None:
        return
    for t in m.threads:
        span = m.span_of.get(t['tid'])
        if span and span['end_ns'] is not None and main_span['end_ns'] is not None:
            chk.true('%s ended after main (main end_ns %s, thread end_ns %s)'
                     % (t['routine'], main_span['end_ns'], span['end_ns']),
                     main_span['end_ns'] < span['end_ns'], span)


# ---------------------------------------------------------------------------
# 4. crash

def case_crash(session, chk):
    run = session.run([fixture('crash')])
    check_exit(chk, run, signame='SIGSEGV')
    chk.eq('target.exit', run.doc['target']['exit'], {'signal': 'SIGSEGV', 'core_dumped': False})
    leftovers = [f for f in os.listdir(run.tmpdir) if f.startswith('core')]
    chk.eq('core files left (RLIMIT_CORE 0)', leftovers, [])
    m = Model(chk, run, 'crash.c')
    m.match()
    for t in m.threads:
        m.check_thread(t, expect_end=False)
    for rec in m.mains + m.threads:
        span = m.span_of.get(rec['tid'])
        if span is None:
            continue
        what = '%s %s' % (rec.get('routine', 'main'), rec['tid'])
        end = span['end'] or {}
        chk.eq('%s: status' % what, span['status'], 'unmatched', span)
        chk.eq('%s: end.reason' % what, end.get('reason'), 'crash', span)
        if rec['end'] == 'crash':
            chk.eq('%s (the crashing thread): end.method' % what, end.get('method'), 'killed', span)
            chk.eq('%s (the crashing thread): end.signal' % what, end.get('signal'), 'SIGSEGV',
                   span)
        else:
            chk.eq('%s: end.method' % what, end.get('method'), 'process_exit', span)
        chk.true('%s: end_ns known' % what, span['end_ns'] is not None, span)
    m.check_no_extra_spans()
    m.check_metrics(unjoined=False, unmatched=3)


# ---------------------------------------------------------------------------
# 5. forkthreads

def case_forkthreads(session, chk):
    run = session.run([fixture('forkthreads')])
    check_exit(chk, run, code=0)
    children = {c['how']: c for c in truth_of(run, 'child')}
    if set(children) != {'fork', 'posix_spawn', 'vfork', 'system'}:
        raise FrameworkError('forkthreads truth: children %s' % sorted(children))
    fork = children['fork']
    chk.true('fork child exited 7 (status %s)' % json.dumps(fork),
             fork['exited'] and fork['code'] == 7)
    chk.eq('fork child threads recorded', len(truth_of(run, 'child_thread')), 3)
    for how in ('posix_spawn', 'vfork', 'system'):
        c = children[how]
        chk.true('%s of /bin/true exited 0 (status %s)' % (how, json.dumps(c)),
                 c['exited'] and c['code'] == 0)
    m = Model(chk, run, 'forkthreads.c')
    m.match()
    m.check_all()
    m.check_no_extra_spans()
    m.check_metrics()
    foreign = {c['tid'] for c in truth_of(run, 'child_thread')} | {fork['pid']}
    for s in thread_spans(run.doc):
        chk.true('span %s has the tid of the fork child or its threads' % s['id'],
                 s['tid'] not in foreign, s)


# ---------------------------------------------------------------------------
# 6. execthread

def case_execthread(session, chk):
    run = session.run([fixture('execthread')])
    check_exit(chk, run, code=0)
    image1 = [r for r in run.truth if r.get('image') == 1]
    # the only join happens in image 2
    image2 = [r for r in run.truth if r.get('image') == 2 or r.get('kind') == 'join']
    main1 = [r for r in image1 if r['kind'] == 'main']
    main2 = [r for r in image2 if r['kind'] == 'main']
    if len(main1) != 1 or len(main2) != 1:
        raise FrameworkError('execthread truth: main records %s' % run.truth)
    pid = main1[0]['pid']
    mains = sorted((s for s in thread_spans(run.doc) if s['tid'] == pid and s['origin'] == 'main'),
                   key=lambda s: s['id'])
    if not chk.eq('main spans with tid %s (one per image)' % pid, len(mains), 2):
        for s in thread_spans(run.doc):
            print('  span: %s' % json.dumps(s))
        return
    old_main, new_main = mains
    chk.true('the new image main span comes after the old one ends (%s <= %s)'
             % (old_main['end_ns'], new_main['start_ns']),
             old_main['end_ns'] is not None and new_main['start_ns'] is not None
             and old_main['end_ns'] <= new_main['start_ns'], new_main)

    # Image 1: every span ends "unmatched" with method "exec".
    m1 = Model(chk, run, 'execthread.c', records=image1, main_spans={pid: old_main})
    m1.match()
    m1.check_main(main1[0])
    for t in m1.threads:
        m1.check_thread(t, expect_end=False)
    for rec in main1 + m1.threads:
        span = m1.span_of.get(rec['tid'])
        if span is None:
            continue
        what = 'image 1 %s %s' % (rec.get('routine', 'main'), rec['tid'])
        end = span['end'] or {}
        chk.eq('%s: status' % what, span['status'], 'unmatched', span)
        chk.eq('%s: end.method' % what, end.get('method'), 'exec', span)
        chk.eq('%s: end.reason' % what, end.get('reason'), 'exec', span)
        chk.true('%s: end_ns known' % what, span['end_ns'] is not None, span)

    # Image 2: a new main span, and its thread traced in full.
    m2 = Model(chk, run, 'execthread.c', records=image2, main_spans={pid: new_main})
    m2.match()
    m2.check_all()
    chk.eq('image 2 thread records', [t['routine'] for t in m2.threads], ['after_exec_worker'])
    m1.check_no_extra_spans(allowed=list(m2.span_of.values()))
    chk.eq('metrics.unmatched_spans', run.doc['metrics']['unmatched_spans'], 3)
    chk.eq('metrics.threads_created', run.doc['metrics']['threads_created'], 3)


# ---------------------------------------------------------------------------
# 7. storm

def check_storm(chk, run):
    check_exit(chk, run, code=0)
    leaves = [t for t in truth_of(run, 'thread') if t['routine'] == 'leaf_worker']
    if len(leaves) != 1200:
        raise FrameworkError('storm truth has %d leaves' % len(leaves))
    m = Model(chk, run, 'storm.c')
    m.match()
    m.check_all()
    m.check_no_extra_spans()
    m.check_metrics()
    chk.eq('metrics.threads_created', run.doc['metrics']['threads_created'], 1204)
    chk.eq('metrics.max_depth', run.doc['metrics']['max_depth'], 2)
    uncertain = [s['id'] for s in thread_spans(run.doc) if s['uncertain']]
    chk.eq('uncertain spans', uncertain, [])
    complete = sum(1 for t in leaves
                   if (m.span_of.get(t['tid']) or {}).get('status') == 'completed')
    print('run %s: %d/1200 leaf spans completed, %d spans, %.2f s, stops %s'
          % (run.tmpdir, complete, len(thread_spans(run.doc)), run.elapsed,
             run.doc['session'].get('stops', {}).get('total')))


def case_storm(session, chk, variant='default'):
    exe = fixture('storm')
    if variant == 'default':
        for i in range(3):
            chk.prefix = '[run %d] ' % (i + 1)
            check_storm(chk, session.run([exe], timeout=35))
    elif variant == 'no-debug-files':
        check_storm(chk, session.run([exe], opts=['-q', '--no-debug-files'], timeout=35))
    else:
        raise FrameworkError('unknown storm variant %s' % variant)


# ---------------------------------------------------------------------------
# 8. signals

def case_signals(session, chk):
    run = session.run([fixture('signals')])
    check_exit(chk, run, code=0)
    sig = one_truth(run, 'signals')
    trapper = one_truth(run, 'trapper')['tid']
    for what, count, tid, want in (('SIGUSR1 (pthread_kill)', 'usr1_count', 'usr1_tid',
                                    sig['receiver']),
                                   ('SIGRTMIN+2 (pthread_kill)', 'rt_count', 'rt_tid',
                                    sig['receiver']),
                                   ('SIGTRAP (raise)', 'trap_raise_count', 'trap_raise_tid',
                                    trapper),
                                   ('SIGTRAP (int3)', 'trap_int3_count', 'trap_int3_tid',
                                    trapper)):
        chk.eq('%s deliveries to the program' % what, sig[count], 1)
        chk.eq('%s delivered to thread' % what, sig[tid], want)
    chk.eq('other SIGTRAP deliveries', sig['trap_other_count'], 0)
    m = Model(chk, run, 'signals.c')
    m.match()
    m.check_all()
    m.check_no_extra_spans()
    m.check_metrics()


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


def task_states(pid):
    states = {}
    try:
        tids = os.listdir('/proc/%d/task' % pid)
    except FileNotFoundError:
        return states
    for tid in tids:
        try:
            with open('/proc/%d/task/%s/stat' % (pid, tid)) as f:
                states[int(tid)] = f.read().rsplit(')', 1)[1].split()[0]
        except (FileNotFoundError, ProcessLookupError, IndexError):
            pass
    return states


def case_groupstop(session, chk):
    release_r, release_w = os.pipe()
    ready_r, ready_w = os.pipe()
    run, proc = session.start([fixture('signals'), '--stop'], opts=['-q'],
                              env={'PTW_RELEASE_FD': str(release_r),
                                   'PTW_READY_FD': str(ready_w)},
                              pass_fds=(release_r, ready_w))
    os.close(release_r)
    os.close(ready_w)
    try:
        line = read_line(ready_r, 20, 'ready')
        pid = int(line.split()[1])
        os.kill(pid, signal.SIGSTOP)
        deadline = time.monotonic() + 10
        while True:
            states = task_states(pid)
            if states and all(st in 'tT' for st in states.values()):
                break
            if time.monotonic() > deadline:
                raise Failed('after SIGSTOP, the threads of %d did not all stop within 10 s: %s'
                             % (pid, states))
            time.sleep(0.01)  # polling /proc in the harness
        print('stopped: %s' % states)
        os.kill(pid, signal.SIGCONT)
        os.write(release_w, b'xx')
        session.wait(run, proc, 30, 'ptwatch did not finish after SIGCONT')
    finally:
        if proc.returncode is None:
            kill_group(proc)
            proc.wait()
        os.close(release_w)
        os.close(ready_r)
    load_truth(run)
    load_doc(run)
    check_exit(chk, run, code=0)
    chk.eq('SIGCONT deliveries to the handler', one_truth(run, 'stop')['cont_count'], 1)
    m = Model(chk, run, 'signals.c')
    m.match()
    m.check_all()
    m.check_no_extra_spans()
    m.check_metrics()


# ---------------------------------------------------------------------------
# 9. stdout

def case_stdout(session, chk):
    run = session.run([fixture('stdout')], opts=['-q'], output='stdout')
    check_exit(chk, run, code=0)   # load_doc parsed the whole of stdout as one document
    lines = one_truth(run, 'lines')
    seen = {}
    for text in run.stderr_text().splitlines():
        parts = text.split()
        if len(parts) == 3 and parts[1] == 'line' and parts[2].isdigit():
            seen.setdefault(parts[0], []).append(int(parts[2]))
    chk.eq("fixture's main lines on stderr, in order", seen.get('main'),
           list(range(lines['main'])))
    for i in range(2):
        chk.eq("fixture's thread%d lines on stderr, in order" % i, seen.get('thread%d' % i),
               list(range(lines['thread'])))
    chk.true('no fixture line on stdout', b' line ' not in run.stdout)
    m = Model(chk, run, 'stdout.c')
    m.match()
    m.check_all()
    m.check_no_extra_spans()
    m.check_metrics()


# ---------------------------------------------------------------------------
# 10. exec failures and exit codes

def one_line_message(chk, run, what):
    text = run.stderr_text().strip()
    chk.true('%s: one line on stderr (got %r)' % (what, text), text and '\n' not in text)


def case_execfail(session, chk):
    run = session.run(['/nonexistent/ptw-no-such-command'], load=False)
    chk.eq('missing command: exit status', run.returncode, 127)
    one_line_message(chk, run, 'missing command')
    # Not specified: whether -o FILE gets a document when nothing ran. If
    # it holds one, it must be valid.
    if os.path.exists(run.doc_path):
        if os.path.getsize(run.doc_path):
            load_doc(run)
            print('note: exec failure with -o: document written, end_reason %s'
                  % run.doc['session']['end_reason'])
        else:
            print('note: exec failure with -o: ptwatch left an empty %s' % run.doc_path)

    d = session.mkdtemp()
    path = os.path.join(d, 'not-executable')
    with open(path, 'w') as f:
        f.write('#!/bin/sh\nexit 0\n')
    os.chmod(path, stat.S_IRUSR | stat.S_IWUSR | stat.S_IRGRP | stat.S_IROTH)
    if os.getuid() == 0 and os.access(path, os.X_OK):
        raise FrameworkError('%s is executable for root' % path)
    run = session.run([path], load=False)
    chk.eq('non-executable command: exit status', run.returncode, 126)
    one_line_message(chk, run, 'non-executable command')

    for argv in ([], ['--']):
        r = subprocess.run([os.environ['PTWATCH']] + argv, stdin=subprocess.DEVNULL,
                           capture_output=True, timeout=20)
        chk.eq('ptwatch %s (no command): exit status' % ' '.join(argv), r.returncode, 2)
        chk.true('ptwatch %s (no command): a message on stderr' % ' '.join(argv),
                 r.stderr.strip() != b'')


def case_exitcode(session, chk):
    run = session.run([fixture('exitcode'), '42'])
    check_exit(chk, run, code=42)
    m = Model(chk, run, 'exitcode.c')
    m.match()
    m.check_all()
    m.check_no_extra_spans()
    m.check_metrics()


# ---------------------------------------------------------------------------
# 11. interrupt (SIGINT / SIGTERM)

PR_SET_CHILD_SUBREAPER = 36


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


def text_diffs(pid, limit=20):
    """Compares every file-backed executable mapping of pid with its file:
    a breakpoint left behind shows up as a differing byte (0xcc). Returns
    a list of (module, address, file byte, memory byte), or None when the
    memory cannot be read."""
    diffs = []
    try:
        with open('/proc/%d/maps' % pid) as f:
            maps = f.read().splitlines()
        mem = open('/proc/%d/mem' % pid, 'rb', buffering=0)
    except OSError:
        return None
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
                    return None
                raise
            if got == want:
                continue
            for i in range(min(len(got), len(want))):
                if got[i] != want[i]:
                    diffs.append((os.path.basename(path), hex(start + i), hex(want[i]),
                                  hex(got[i])))
                    if len(diffs) >= limit:
                        return diffs
    return diffs


def case_interrupt(session, chk, signame='SIGINT'):
    signum = getattr(signal, signame)
    reaper = become_subreaper()
    block_r, block_w = os.pipe()
    ready_r, ready_w = os.pipe()
    run, proc = session.start([fixture('interrupt')], opts=['-q'],
                              env={'PTW_BLOCK_FD': str(block_r), 'PTW_READY_FD': str(ready_w)},
                              pass_fds=(block_r, ready_w))
    os.close(block_r)
    os.close(ready_w)
    pid = None
    status = None
    try:
        line = read_line(ready_r, 20, 'ready')
        pid = int(line.split()[1])
        # After "ready", main's only blocking call is pthread_join on the
        # first blocked thread: wait until it sleeps there.
        deadline = time.monotonic() + 10
        while task_states(pid).get(pid) != 'S':
            if time.monotonic() > deadline:
                raise Failed('the fixture main thread did not block in pthread_join: %s'
                             % task_states(pid))
            time.sleep(0.005)  # polling /proc in the harness
        os.kill(proc.pid, signum)
        session.wait(run, proc, 20, 'ptwatch did not exit after %s' % signame)
        chk.eq('ptwatch exit status after %s' % signame, run.returncode, 128 + signum)
        states = task_states(pid)
        chk.true('the fixture still runs after ptwatch exited (threads %s)' % states,
                 states and all(st in 'SR' for st in states.values()))
        diffs = text_diffs(pid)
        if diffs is None:
            print('note: cannot read /proc/%d/mem, text not compared' % pid)
        else:
            chk.eq('text bytes that differ from the files after the detach', diffs, [])
        os.write(block_w, b'xx')   # release the blocked threads
        # The fixture writes "finished" as its last record.
        deadline = time.monotonic() + 15
        finished = False
        while time.monotonic() < deadline and not finished:
            finished = any(r.get('kind') == 'finished' for r in load_truth(run))
            if not finished:
                time.sleep(0.02)
        chk.true('the fixture finished normally after the detach ("finished" record)', finished)
        if reaper:
            status = wait_pid(pid, 10)
            if isinstance(status, int):
                if os.WIFSIGNALED(status):
                    chk.fail('the fixture died of signal %d after the detach (SIGTRAP = %d)'
                             % (os.WTERMSIG(status), signal.SIGTRAP))
                else:
                    chk.eq('the fixture exit status', os.WEXITSTATUS(status), 0)
            else:
                chk.fail('cannot collect the fixture exit status: %s' % status)
        else:
            print('note: not a subreaper, exit status of the fixture not checked')
    finally:
        if proc.returncode is None:
            kill_group(proc)
            proc.wait()
        if pid is not None and status is None and reaper:
            if wait_pid(pid, 0.1) is None:
                try:
                    os.kill(pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
                wait_pid(pid, 5)
        os.close(block_w)
        os.close(ready_r)

    load_truth(run)
    doc = load_doc(run)
    chk.eq('session.end_reason', doc['session']['end_reason'], 'interrupted')
    chk.eq('target.exit', doc['target']['exit'], None)
    blocked = one_truth(run, 'blocked')['tids']
    # The truth records were written after the detach; the spans were open
    # at the interrupt. Names are not compared: ptwatch reads a thread's
    # name at its end, and open spans have none (name null).
    m = Model(chk, run, 'interrupt.c')
    m.match()
    m.check_main(dict(one_truth(run, 'main'), end='open', name=None))
    for t in m.threads:
        m.check_thread(dict(t, name=None), expect_end=False)
    main_tid = one_truth(run, 'main')['tid']
    for tid in blocked + [main_tid]:
        span = m.span_of.get(tid)
        if span is None:
            continue
        chk.eq('span of %s (blocked at the interrupt): status' % tid, span['status'], 'open', span)
        chk.eq('span of %s: end_ns' % tid, span['end_ns'], None, span)
        if tid == blocked[0]:
            # main was blocked in pthread_join on the first one
            js = span['join'] or {}
            chk.eq('span of %s: join.joiner_tid (main, still waiting)' % tid,
                   js.get('joiner_tid'), main_tid, span)
            chk.true('span of %s: join.call_ns known' % tid, js.get('call_ns') is not None, span)
            chk.eq('span of %s: join.return_ns (still waiting)' % tid, js.get('return_ns'), None,
                   span)
        else:
            chk.eq('span of %s: join' % tid, span['join'], None, span)
    chk.eq('blocked thread records', sorted(t['tid'] for t in m.threads), sorted(blocked))
    m.check_no_extra_spans()
    m.check_metrics(open_spans=3, unjoined=False)


# ---------------------------------------------------------------------------
# 12. rawclone

def case_rawclone(session, chk):
    run = session.run([fixture('rawclone')])
    check_exit(chk, run, code=0)
    rc = one_truth(run, 'rawclone')
    m = Model(chk, run, 'rawclone.c')
    m.match()
    m.check_all()
    span = find_span(chk, run.doc, rc['tid'], None, 'raw clone LWP %s' % rc['tid'],
                     index=span_index(run.doc))
    if span is not None:
        print('raw clone span: %s' % json.dumps(span))
        chk.eq('raw clone: origin', span['origin'], 'clone', span)
        chk.eq('raw clone: pthread', span['pthread'], None, span)
        chk.eq('raw clone: uncertain', span['uncertain'], False, span)
    m.check_no_extra_spans(allowed=[span] if span else [])
    m.check_metrics(created=False)


# ---------------------------------------------------------------------------
# 13. dlopen

def case_dlopen(session, chk):
    lib = fixture('dlmod')
    run = session.run([fixture('dlopen'), lib])
    check_exit(chk, run, code=0)
    for t in truth_of(run, 'thread'):
        if t['routine'] == 'dl_worker':
            t['source'] = 'dlmod.c'
            t['module'] = lib
    chk.eq('dl_worker records', sum(1 for t in truth_of(run, 'thread')
                                    if t['routine'] == 'dl_worker'), 1)
    m = Model(chk, run, 'dlopen.c')
    m.match()
    m.check_all()
    m.check_no_extra_spans()
    m.check_metrics()


# ---------------------------------------------------------------------------
# 15. static

def case_static(session, chk):
    exe = fixture('static')
    run = session.run([exe])
    check_exit(chk, run, code=0)
    report_warnings(run)
    m = Model(chk, run, 'static.c')
    m.match()
    m.check_all()
    m.check_no_extra_spans()
    m.check_metrics()


CASES = {
    'lifecycle': case_lifecycle,
    'nested': case_nested,
    'mainexit': case_mainexit,
    'crash': case_crash,
    'forkthreads': case_forkthreads,
    'execthread': case_execthread,
    'storm': case_storm,
    'signals': case_signals,
    'groupstop': case_groupstop,
    'stdout': case_stdout,
    'execfail': case_execfail,
    'exitcode': case_exitcode,
    'interrupt': case_interrupt,
    'rawclone': case_rawclone,
    'dlopen': case_dlopen,
    'static': case_static,
}

if __name__ == '__main__':
    main(CASES)
