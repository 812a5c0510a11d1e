#!/usr/bin/python3
"""ptwatch's integration test cases: cases.py CASE [VARIANT].

Each case runs ptwatch on a fixture (tests/fixtures), validates the JSON
document against the schema and compares it with the fixture's own truth.
The attach cases (16.) start the fixture themselves and run ptwatch -p on it.
Exit codes: 0 pass, 1 failure, 77 skip, 99 framework error.
"""

import ctypes
import errno
import json
import os
import platform
import re
import select
import shutil
import signal
import socket
import stat
import subprocess
import tempfile
import sys
import threading
import time
import urllib.error
import urllib.request

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from ptw_test import (  # noqa: E402
    CANCELED, Failed, FrameworkError, Model, Skip, Terminal, attach_stderr_lines, check_attach_doc,
    check_exit, check_location, check_untouched, child_pids, comm, compare_mappings,
    end_group, exec_mappings, find_span, fixture, fixture_source, kill_group, load_doc, load_truth,
    main, one_truth, proc_status, ptwatch_path, read_outputs, report_warnings, routine_line, span_index,
    tail, task_states, thread_spans, tracer_pids, truth_of, wait_for, warning_codes, Tmux)


# ---------------------------------------------------------------------------
# 1. lifecycle (default, --no-debug-files, --create-events) and 14. stripped

def check_lifecycle(chk, run, stripped=False, symbols_only=False):
    check_exit(chk, run, code=3)
    report_warnings(run)
    m = Model(chk, run, 'lifecycle.c', stripped=stripped, symbols_only=symbols_only)
    m.check_complete(expect_main_pthread=True)
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


def check_stripped_text(chk, run):
    """Nothing names the start routines: the JSON leaves file:line out, the
    text shows module+offset."""
    # not the debug log (--debug), which names libthread_db's symbols
    text = '\n'.join(l for l in run.stderr_text().splitlines() if not l.startswith('ptwatch['))
    for s in thread_spans(run.doc):
        sr = s['start_routine'] or {}
        if s['origin'] == 'created':
            chk.eq('stripped: %s start_routine.file' % s['tid'], sr.get('file'), None, s)
            # the text names it as eu-stack and perf do: module+offset
            want = '%s+%s' % (os.path.basename(sr.get('module') or '?'), sr.get('offset'))
            chk.true('stripped: %s shown as %s' % (s['tid'], want),
                     re.search(r'\b%d\b.*%s' % (s['tid'], re.escape(want)), text) is not None,
                     detail=text[-3000:])
    chk.true('stripped: the text never says pthread_start_routine',
             'pthread_start_routine' not in text, detail=text[-3000:])


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
    elif variant == 'locks':
        # --locks leaves the thread spans as they are (transparency)
        run = session.run([exe], opts=['-q', '--locks'])
        check_lifecycle(chk, run)
        check_waits_sane(chk, run.doc)
    elif variant == 'stripped':
        run = session.run([fixture('stripped')], opts=['-q'])
        check_lifecycle(chk, run, stripped=True)
        check_stripped_text(chk, run)
    else:
        raise FrameworkError('unknown lifecycle variant %s' % variant)


# ---------------------------------------------------------------------------
# 2. nested

def case_nested(session, chk):
    run = session.run([fixture('nested')])
    check_exit(chk, run, code=0)
    m = Model(chk, run, 'nested.c')
    m.check_complete()
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
    m.check_complete()
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
    m.check_complete()
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
    m.check_complete()
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
    m.check_complete()


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
        end_group(proc)
        os.close(release_w)
        os.close(ready_r)
    load_truth(run)
    load_doc(run)
    check_exit(chk, run, code=0)
    chk.eq('SIGCONT deliveries to the handler', one_truth(run, 'stop')['cont_count'], 1)
    m = Model(chk, run, 'signals.c')
    m.check_complete()


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
    m.check_complete()


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
    m.check_complete()


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


def text_diffs(pid, limit=20, tid=None):
    """Compares every file-backed executable mapping of pid with its file:
    a breakpoint left behind shows up as a differing byte (0xcc). Returns
    a list of (module, address, file byte, memory byte), or None when the
    memory cannot be read. tid: read through that thread (a zombie leader
    has no maps)."""
    diffs = []
    base = '/proc/%d' % pid if tid is None else '/proc/%d/task/%d' % (pid, tid)
    try:
        with open(base + '/maps') as f:
            maps = f.read().splitlines()
        mem = open(base + '/mem', 'rb', buffering=0)
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
    # exec-by-thread: the fixture first execs itself from a second thread
    # (the new image's leader is not the old one's), then runs as usual.
    exec_first = signame == 'exec-by-thread'
    if exec_first:
        signame = 'SIGINT'
    signum = getattr(signal, signame)
    reaper = become_subreaper()
    block_r, block_w = os.pipe()
    ready_r, ready_w = os.pipe()
    cmd = [fixture('interrupt')] + (['--exec-by-thread'] if exec_first else [])
    run, proc = session.start(cmd, opts=['-q'],
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
        # first blocked thread: wait until it sleeps there (exec-by-thread:
        # it creates and joins threads meanwhile, interrupted at once).
        deadline = time.monotonic() + 10
        while not exec_first and task_states(pid).get(pid) != 'S':
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
        end_group(proc)
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
    chk.eq('target.fate (checked as ptwatch let go)', doc['target'].get('fate'), 'lives_on')
    # sent to ptwatch's pid alone: the command did not get it
    chk.eq('session.interrupts', [(i['signal'], i['reached_target'], i['action'], i['why'])
                                  for i in doc['session'].get('interrupts', [])],
           [(signame, False, 'detached', 'ptwatch_alone')])
    if exec_first:
        ended = [sp for sp in doc['spans'] if (sp.get('end') or {}).get('method') == 'exec']
        chk.eq('spans ended by the exec (main, the waiting and the exec thread)', len(ended), 3)
        opened = sum(1 for sp in doc['spans'] if sp['status'] == 'open')
        chk.true('spans open at the interrupt: main of the new image, two blocked, at most one '
                 'churn_worker (got %d)' % opened, opened in (3, 4))
        print('threads created and joined by main while ptwatch detached: %s'
              % one_truth(run, 'churned')['threads'])
        return   # the spans of the first image are the execthread case's
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

def check_lwp_exited(chk, span, what, exit_code=0):
    """A thread whose end ptwatch saw only as its LWP's own exit: status
    lwp_exited (not exited, which is pthread_exit), no made-up value, a
    lifetime from its creation."""
    chk.eq('%s: status' % what, span['status'], 'lwp_exited', span)
    end = span['end'] or {}
    chk.eq('%s: end.method' % what, end.get('method'), 'unknown', span)
    chk.eq('%s: end.reason' % what, end.get('reason'), 'lwp_exit', span)
    chk.eq('%s: end.value (the start routine\'s value is not known)' % what, end.get('value'),
           None, span)
    chk.eq('%s: end.exit_code' % what, end.get('exit_code'), exit_code, span)
    chk.eq('%s: start_ns (its start cannot be seen)' % what, span['start_ns'], None, span)
    c, e = span['create_ns'], span['end_ns']
    if chk.true('%s: create_ns and end_ns known' % what, None not in (c, e), span):
        chk.eq('%s: lifetime_ns == end_ns - create_ns' % what, span['lifetime_ns'], e - c, span)


def check_lifetime_metric(chk, doc):
    """metrics.lifetime_ns counts every span with a lifetime."""
    lives = [s['lifetime_ns'] for s in thread_spans(doc) if s['lifetime_ns'] is not None]
    d = doc['metrics']['lifetime_ns']
    chk.eq('metrics.lifetime_ns.count (spans with a lifetime_ns)', d['count'], len(lives), d)
    if lives:
        chk.eq('metrics.lifetime_ns.max', d['max'], max(lives), d)
        chk.eq('metrics.lifetime_ns.min', d['min'], min(lives), d)


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
        check_lwp_exited(chk, span, 'raw clone', rc['exit_code'])
        # glibc's clone() left its function and argument on the child's stack
        check_location(chk, span['start_routine'], 'raw clone: start_routine', span,
                       'clone_child', 'rawclone.c', routine_line('rawclone.c', 'clone_child'),
                       addr=rc['routine_addr'])
        chk.eq('raw clone: arg', span['arg'], rc['arg'], span)
        row = [l for l in run.stderr_text().splitlines()
               if re.match(r'\s+%d\s+%d\s' % (span['id'], span['tid']), l)]
        chk.true('raw clone: a table row with START ROUTINE clone_child (%s)' % row,
                 len(row) == 1 and re.search(r'\sclone_child \(rawclone.c:\d+\)\s+%s\s'
                                             % span['status'], row[0]) is not None)
    chk.true('raw clone: the text never says pthread_start_routine',
             'pthread_start_routine' not in run.stderr_text(), run.stderr_text()[-3000:])
    m.check_no_extra_spans(allowed=[span] if span else [])
    m.check_metrics(created=False)
    check_lifetime_metric(chk, run.doc)


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
                                    if t['routine'] == 'dl_worker'), 2)
    addrs = [r['routine_addr'] for r in truth_of(run, 'library')]
    chk.eq('library loads', len(addrs), 2)
    if len(set(addrs)) != 1:
        print('note: the library came back at another address: %s' % addrs)
    m = Model(chk, run, 'dlopen.c')
    m.check_complete()


# ---------------------------------------------------------------------------
# 13b. noaranges: the source line of code whose CU has no .debug_aranges

def case_noaranges(session, chk):
    """far_worker's CU has no .debug_aranges entry (as Go's CUs in a cgo
    program): its line comes from its own CU, never from the CU whose
    arange lies below it (noaranges_tail.c)."""
    run = session.run([fixture('noaranges')])
    check_exit(chk, run, code=0)
    for t in truth_of(run, 'thread'):
        t['source'] = 'noaranges_worker.c'
    m = Model(chk, run, 'noaranges.c')
    m.check_complete()
    chk.true('no location names noaranges_tail.c',
             'noaranges_tail.c' not in json.dumps(run.doc) and
             'noaranges_tail.c' not in run.stderr_text(), run.stderr_text()[-2000:])


# ---------------------------------------------------------------------------
# 15. static

def case_static(session, chk):
    exe = fixture('static')
    run = session.run([exe])
    check_exit(chk, run, code=0)
    report_warnings(run)
    m = Model(chk, run, 'static.c')
    m.check_complete()
    # libc6-dbg cannot help a static program: the warning must not say so.
    for w in run.doc.get('warnings', []):
        if w.get('code') == 'no_libc_debuginfo':
            chk.true('static: no_libc_debuginfo does not advise libc6-dbg (%s)' % w['message'],
                     'install libc6-dbg' not in w['message'] and 'static' in w['message'], w)


def case_static_stripped(session, chk):
    """The static fixture without its symbols: libthread_db cannot be used
    (strategy lwp), so every thread is an LWP seen from its clone to its
    exit. main() is still found, from the entry point's code."""
    exe = fixture('static_stripped')
    run = session.run([exe])
    check_exit(chk, run, code=0)
    report_warnings(run)
    doc = run.doc
    chk.eq('session.strategy', doc['session'].get('strategy'), 'lwp')
    # no pthread_t without libthread_db: match the spans by tid alone
    records = [dict(r, pthread=None) if r.get('kind') == 'thread' else r for r in run.truth]
    m = Model(chk, run, 'static.c', stripped=True, records=records)
    m.match()
    for mrec in m.mains:
        m.check_main(mrec)
    main_tid = m.mains[0]['tid'] if m.mains else None
    for t in m.threads:
        span = m.span_of.get(t['tid'])
        if span is None:
            continue
        what = 'thread %s (%s)' % (t['tid'], t['routine'])
        chk.eq('%s: origin' % what, span['origin'], 'clone', span)
        chk.eq('%s: pthread (no libthread_db)' % what, span['pthread'], None, span)
        chk.eq('%s: start_routine (cannot be known)' % what, span['start_routine'], None, span)
        chk.eq('%s: creator_tid' % what, span['creator_tid'], main_tid, span)
        chk.eq('%s: uncertain' % what, span['uncertain'], False, span)
        check_lwp_exited(chk, span, what)
        row = [l for l in run.stderr_text().splitlines()
               if re.match(r'\s+%d\s+%d\s' % (span['id'], span['tid']), l)]
        chk.true('%s: a table row with START ROUTINE "-", status lwp_exited (%s)' % (what, row),
                 len(row) == 1 and re.search(r'\s-\s+lwp_exited\s', row[0]) is not None)
    chk.true('the text never says pthread_start_routine',
             'pthread_start_routine' not in run.stderr_text(), run.stderr_text()[-3000:])
    m.check_no_extra_spans()
    check_lifetime_metric(chk, doc)
    chk.eq('metrics.lifetime_ns.count (main and the three workers)',
           doc['metrics']['lifetime_ns']['count'], 4)


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


def check_churner_doc(chk, run, pid, what):
    doc = run.doc
    frozen = check_attach_doc(chk, run, pid, 'interrupted', what)
    chk.true('%s: session.frozen_ns > 0 (got %r)' % (what, frozen),
             isinstance(frozen, int) and frozen > 0)
    print('%s: frozen_ns %s, %d spans, %.2f s' % (what, frozen, len(doc['spans']), run.elapsed))
    check_main_span(chk, doc, pid, what)
    spans = thread_spans(doc)
    pre = [s for s in spans if s['origin'] == 'preexisting']
    created = [s for s in spans if s['origin'] == 'created']
    chk.true('%s: at least one preexisting span (got %d)' % (what, len(pre)), len(pre) >= 1)
    creators = [s for s in pre if (s['start_routine'] or {}).get('symbol') == 'creator_worker']
    chk.eq('%s: preexisting creator_worker spans' % what, len(creators), 2)
    creator_tids = {s['tid'] for s in creators}
    for s in creators:
        w = '%s: creator_worker %s' % (what, s['tid'])
        check_preexisting(chk, s, w, 'creator_worker')
        chk.eq('%s: detached' % w, s['detached'], False, s)
        check_open(chk, s, w)
    for s in pre:
        if s not in creators:
            # a short_worker that ran at the attach
            sr = s['start_routine'] or {}
            chk.eq('%s: preexisting span %s start_routine.symbol' % (what, s['tid']),
                   sr.get('symbol'), 'short_worker', s)
            if s['status'] == 'unmatched':
                print('note: %s: preexisting short_worker %s ended unmatched: %s, uncertain %s'
                      % (what, s['tid'], json.dumps(s['end']), s['uncertain']))
    complete = []
    for s in created:
        w = '%s: created span %s (tid %s)' % (what, s['id'], s['tid'])
        sr = s['start_routine'] or {}
        if not chk.eq('%s: start_routine.symbol' % w, sr.get('symbol'), 'short_worker', s):
            continue
        chk.true('%s: creator is a creator_worker (%s)' % (w, s['creator_tid']),
                 s['creator_tid'] in creator_tids, s)
        if s['status'] in ('completed', 'exited'):
            if None in (s['create_ns'], s['start_ns'], s['end_ns']):
                chk.fail('%s: ended (%s) without create_ns/start_ns/end_ns' % (w, s['status']), s)
                continue
            chk.true('%s: create_ns <= start_ns <= end_ns' % w,
                     s['create_ns'] <= s['start_ns'] <= s['end_ns'], s)
            arg = s.get('arg')
            value = (s['end'] or {}).get('value')
            if arg is not None:
                n = int(arg, 16)
                chk.eq('%s: end.value (arg + 1)' % w, value, hex(n + 1), s)
                chk.eq('%s: status (odd arg: pthread_exit)' % w, s['status'],
                       'exited' if n & 1 else 'completed', s)
            complete.append(s)
        else:
            chk.true('%s: status completed, exited or open (got %s)' % (w, s['status']),
                     s['status'] == 'open', s)
    chk.true('%s: at least one created span complete with start and end (got %d of %d)'
             % (what, len(complete), len(created)), len(complete) >= 1)
    report_warnings(run)


def case_attach_churner(session, chk):
    target = session.target('churner')
    pid = target.ready()[0]
    before = exec_mappings(pid)
    run, proc = start_attached(session, target)
    try:
        # ptwatch follows the churn for a while: 1,000 more threads
        wait_progress(chk, target, 'while traced', more=1000, timeout=20)
        os.kill(proc.pid, signal.SIGINT)
        session.wait(run, proc, 20, 'ptwatch did not let go after SIGINT')
    finally:
        end_group(proc)
    load_doc(run)
    check_churner_doc(chk, run, pid, 'SIGINT')
    target.check_alive('after the detach')
    compare_mappings(chk, before, exec_mappings(pid), 'after the detach')
    check_untouched(chk, pid, 'after the detach')
    wait_progress(chk, target, 'after the detach', more=500)
    target.send('q')
    if check_target_exit(chk, target, 'after the detach'):
        churn = target.one_truth('churn', 'released')
        print('churner made %d threads' % churn['count'])


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


def case_completion(session, chk):
    """completions/ptwatch in a real bash: options from ptwatch --help, values
    of --debug, a command after "--"."""
    script = os.path.join(os.environ.get('PTW_FIXTURE_SRC', '.'), '..', '..', 'completions',
                          'ptwatch')
    if not os.path.exists(script):
        raise FrameworkError('no completion script at %s' % script)
    bindir = os.path.dirname(ptwatch_path())

    def complete(*words):
        prog = ('PATH=%s:$PATH; source %s; COMP_WORDS=(%s); COMP_CWORD=%d; _ptwatch; '
                'printf "%%s\\n" "${COMPREPLY[@]}"'
                % (bindir, script, ' '.join("'%s'" % w for w in words), len(words) - 1))
        p = subprocess.run(['bash', '-c', prog], capture_output=True, text=True, timeout=20)
        return [w for w in p.stdout.split('\n') if w]

    chk.eq('--tr completes to --trace=', complete('ptwatch', '--tr'), ['--trace='])
    got = complete('ptwatch', '--')
    for opt in ('--pid=', '--snapshot', '--json', '--output=', '--open-timeout=', '--trace='):
        chk.true('%s among the long options (%s)' % (opt, got), opt in got)
    chk.eq('--debug values', complete('ptwatch', '--debug', '=', 's'), ['sym', 'spans'])
    chk.true('a command after --', 'true' in complete('ptwatch', '-q', '--', 'tru'))


def case_snapshot_running(session, chk):
    """--snapshot of threads that run on: each stack is the one the thread
    had when it was stopped (copied then, unwound once it ran again), never
    a mix of two call chains; the sleepers' system calls are the ones
    they sleep in (read as they sleep, or from their registers)."""
    target = session.target('flipper')
    pid = target.ready()[0]
    flippers = [r['tid'] for r in target.truth() if r.get('kind') == 'flipper']
    sleepers = {r['tid']: r['syscall'] for r in target.truth() if r.get('kind') == 'sleeper'}
    for attempt in range(5):
        run = session.attach(pid, opts=('--snapshot',))
        check_attach_doc(chk, run, pid, 'snapshot', 'snapshot')
        index = span_index(run.doc)
        for tid in flippers:
            what = 'run %d: flipper %d' % (attempt, tid)
            spans = index.get(tid, [])
            if not chk.eq('%s: spans' % what, len(spans), 1):
                continue
            s = spans[0]
            check_stack(chk, s, what, 'flipper', 'flipper.c')
            names = [f['symbol'] for f in s.get('stack') or []]
            chain = [n for n in names if re.fullmatch(r'flip_[ab][123]', n or '')]
            # innermost first: flip_x3, flip_x2, flip_x1 or a suffix of it
            chk.true('%s: one call chain, in order (got %s)' % (what, names),
                     len({n[5] for n in chain}) <= 1 and
                     [n[6] for n in chain] == ['3', '2', '1'][3 - len(chain):], s)
            if chain:
                i = names.index(chain[-1])
                chk.eq('%s: the chain is called from flipper' % what,
                       names[i + 1] if i + 1 < len(names) else None, 'flipper')
        for tid, call in sleepers.items():
            what = 'run %d: sleeper %d' % (attempt, tid)
            spans = index.get(tid, [])
            if chk.eq('%s: spans' % what, len(spans), 1):
                # A sleep that an earlier snapshot interrupted goes on in
                # restart_syscall (the kernel's way to resume nanosleep);
                # on a busy machine it may not have run yet to go back to
                # sleep: runnable (R) in restart_syscall, which is true.
                calls = (('S ' + call, 'S restart_syscall', 'R restart_syscall')
                         if 'sleep' in call else ('S ' + call, 'R ' + call, 'R'))
                chk.true('%s: state %r in %s' % (what, spans[0].get('state'), calls),
                         spans[0].get('state') in calls, spans[0])
        chk.eq('run %d: the fixture answers' % attempt, target.ask('p'), ['pong'])


def case_snapshot_sleepers(session, chk, mode='quiet'):
    """--snapshot reads a thread asleep in the kernel without stopping it
    (its stack pointer and pc from /proc/TID/syscall, its stack copied,
    schedstat the same before and after) and stops the others. The
    fixture is built -O2 without frame pointers. quiet: every thread
    sleeps (one with a stack deeper than the 32 KiB copied: the rest is
    read from the process, then schedstat once more); none is stopped (frozen_ns 0, the text says so) and every
    stack is whole. mixed: also a thread whose innermost frame's CFA is
    its frame pointer (stopped: its unwind needs rbp), one that spins
    (stopped: it runs) and eight that wake every 50 us (some of them run
    while read, or wake while the others are stopped: stopped then);
    every stack is whole too, the sleepers' still read without a stop.
    Then the fixture is untraced, unharmed, answers and ends as it
    should."""
    if not os.path.exists('/proc/self/schedstat'):
        raise Skip('this kernel has no /proc/PID/schedstat: every thread is stopped')
    target = session.target('sleepers', [mode])
    pid = target.ready()[0]
    recs = [r for r in target.truth() if r.get('kind') == 'sleeper']
    run = session.attach(pid, opts=('--snapshot', '--debug=tracer'))
    frozen = check_attach_doc(chk, run, pid, 'snapshot', 'snapshot')
    err = run.stderr_text()
    m = re.search(r'snapshot of %d: (\d+) threads, (\d+) read asleep without a stop, '
                  r'(\d+) stopped' % pid, err)
    if not chk.true('the debug log counts the threads read and stopped', m, detail=err[-2000:]):
        return
    nthreads, still, stopped = (int(x) for x in m.groups())
    print('%s: %d threads, %d read asleep without a stop, %d stopped, frozen %s ns'
          % (mode, nthreads, still, stopped, frozen))
    chk.eq('threads', nthreads, len(recs) + 1)
    chk.eq('every thread read asleep or stopped', still + stopped, nthreads)
    said_stopped = {int(t): why for t, why in
                    re.findall(r'snapshot: (\d+) is stopped: ([^\n]*)', err)}
    index = span_index(run.doc)
    for r in recs + [{'role': 'main', 'tid': pid, 'chain': ['main', '__libc_start_call_main']}]:
        what = '%s thread %d' % (r['role'], r['tid'])
        spans = index.get(r['tid'], [])
        if not chk.eq('%s: spans' % what, len(spans), 1):
            continue
        names = [f.get('symbol') for f in spans[0].get('stack') or []]
        # the chain, in order (where it sleeps: after the libc frames)
        first = names.index(r['chain'][0]) if r['chain'][0] in names else -1
        chk.eq('%s: the stack holds %s in order (stack %s)' % (what, r['chain'], names),
               names[first:first + len(r['chain'])] if first >= 0 else None, r['chain'])
        if r['role'] != 'main':
            chk.eq('%s: the stack ends in the clone call (stack %s)' % (what, names),
                   names[-1:], ['__clone3'])
        if r['role'] in ('omit', 'cond', 'deep', 'main'):
            chk.true('%s: read asleep, not stopped (debug: %r)' % (what, said_stopped.get(r['tid'])),
                     r['tid'] not in said_stopped)
        if r['role'] == 'fp':
            chk.eq('fp thread: stopped, and why', said_stopped.get(r['tid']),
                   'its unwind needs more than sp and pc')
    deep = [r['tid'] for r in recs if r['role'] == 'deep']
    chk.true('the deep thread\'s unwind read beyond the stack copied (debug log)',
             deep and re.search(r'snapshot: %d: its unwind read beyond' % deep[0], err))
    if mode == 'quiet':
        chk.eq('no thread stopped', (still, stopped), (nthreads, 0))
        chk.eq('session.frozen_ns', frozen, 0)
        chk.true('the text says none was stopped',
                 'threads, none stopped (each was read while it slept)' in run.stdout_text(),
                 detail=run.stdout_text()[:300])
    else:
        ticks = [r['tid'] for r in recs if r['role'] == 'tick']
        print('tickers: %s' % {t: said_stopped.get(t, 'read asleep') for t in ticks})
        chk.true('the busy thread: stopped, not asleep',
                 said_stopped.get([r['tid'] for r in recs if r['role'] == 'busy'][0]) in
                 ('it was not asleep in the kernel', 'it woke as it was read'))
        chk.true('stopped: the fp thread, the busy one and perhaps tickers (%d)' % stopped,
                 2 <= stopped <= 2 + len(ticks))
        chk.true('read asleep without a stop: the others (%d)' % still,
                 still >= nthreads - 2 - len(ticks))
        chk.true('session.frozen_ns > 0 (got %r)' % frozen, frozen > 0)
    chk.true('untraced after the snapshot (tracers %s)' % tracer_pids(pid),
             wait_untraced(pid, 2) is not None)
    check_untouched(chk, pid, 'after the snapshot', allowed='SR')
    chk.eq('the fixture answers', target.ask('p'), ['pong'])
    target.send('q')
    check_target_exit(chk, target, 'released')
    chk.eq('every thread woke and returned ("sleepers_done")',
           len([r for r in target.truth() if r.get('kind') == 'sleepers_done']), 1)


def case_snapshot_deleted(session, chk):
    """--snapshot of a static program whose file was deleted: libdwfl has
    no module to unwind with. Every thread is listed (stopped, without a
    stack), ptwatch exits 0, the program runs on unharmed. (It once died of
    "out of memory" there: a negative frame count became a huge malloc.)"""
    exe = os.path.join(session.mkdtemp(), 'sleepers-deleted')
    shutil.copy(fixture('sleepers_static'), exe)
    target = session.target('sleepers_static', ['quiet'], exe=exe)
    pid = target.ready()[0]
    os.unlink(exe)
    recs = [r for r in target.truth() if r.get('kind') == 'sleeper']
    run = session.attach(pid, opts=('--snapshot', '--debug=tracer'))
    check_attach_doc(chk, run, pid, 'snapshot', 'snapshot')
    chk.eq('every thread listed', sorted(s['tid'] for s in thread_spans(run.doc)),
           sorted([pid] + [r['tid'] for r in recs]))
    chk.true('not "read asleep" without a whole unwind',
             'read asleep without a stop, 0 stopped' not in run.stderr_text(),
             detail=run.stderr_text()[-1500:])
    chk.true('untraced after the snapshot', wait_untraced(pid, 2) is not None)
    chk.eq('the program answers', target.ask('p'), ['pong'])
    target.send('q')
    check_target_exit(chk, target, 'released')


def case_snapshot_deadlock(session, chk):
    target = session.target('deadlock')
    pid = target.ready()[0]
    dl = target.one_truth('deadlock')
    blocked = [r for r in target.truth() if r.get('kind') == 'blocked']
    role = {}
    for r in blocked:
        role.setdefault(r['role'], []).append(r)
    ab, ba = role['ab'][0], role['ba'][0]
    run = session.attach(pid, opts=('--snapshot',))
    doc = run.doc
    # The report is the command's output: standard output, as eu-stack,
    # gdb and pstack write theirs (ptwatch -p PID --snapshot > stacks.txt).
    text = run.stdout_text()
    chk.true('the report is on standard output, not standard error (stderr %r)'
             % run.stderr_text()[:200], 'DEADLOCK' not in run.stderr_text())
    frozen = check_attach_doc(chk, run, pid, 'snapshot', 'snapshot')
    print('snapshot: frozen_ns %s, %.2f s' % (frozen, run.elapsed))
    # the text: the deadlock, and the three condvar waiters as one group
    chk.true('text: says DEADLOCK', 'DEADLOCK' in text)
    dl_text = text[text.find('DEADLOCK'):].split('\n\n')[0] if 'DEADLOCK' in text else ''
    for r in (ab, ba):
        chk.true('text: the deadlock lists thread %s' % r['tid'],
                 re.search(r'thread %d\b' % r['tid'], dl_text) is not None,
                 detail='deadlock text: %r' % dl_text)
    chk.true('text: a group of 3 threads in cond_worker',
             re.search(r'^3 threads in cond_worker\b', text, re.M) is not None)
    # the document's cycle
    cycles = doc.get('deadlocks')
    if chk.true('deadlocks: a list with one cycle (got %r)' % (cycles,),
                isinstance(cycles, list) and len(cycles) == 1):
        cyc = cycles[0]
        chk.eq('deadlocks[0].tids', sorted(cyc['tids']), sorted([ab['tid'], ba['tid']]))
        ids = {s['tid']: s['id'] for s in thread_spans(doc)}
        chk.eq('deadlocks[0].spans', sorted(cyc['spans']),
               sorted(ids.get(t) for t in (ab['tid'], ba['tid'])))
    index = span_index(doc)
    chk.eq('snapshot: spans', len(thread_spans(doc)), len(blocked) + 1)
    main_span = check_main_span(chk, doc, pid, 'snapshot')
    if main_span is not None:
        check_stack(chk, main_span, 'main thread', 'main', 'deadlock.c')
        chk.true('main thread: state starts with S (got %r)' % main_span.get('state'),
                 str(main_span.get('state')).startswith('S'), main_span)
    for r in blocked:
        spans = index.get(r['tid'], [])
        what = '%s %s' % (r['routine'], r['tid'])
        if not chk.eq('%s: spans with its tid' % what, len(spans), 1):
            continue
        s = spans[0]
        check_preexisting(chk, s, what, r['routine'], r['pthread'])
        chk.eq('%s: detached' % what, s['detached'], False, s)
        check_open(chk, s, what)
        check_stack(chk, s, what, r['routine'], 'deadlock.c')
        chk.true('%s: state starts with S (got %r)' % (what, s.get('state')),
                 str(s.get('state')).startswith('S'), s)
        wf = s.get('waits_for')
        if r['waits'] == 'read':
            chk.true('%s: waits_for null or other (blocked in read; got %r)' % (what, wf),
                     wf is None or wf.get('kind') == 'other', s)
            continue
        if not chk.true('%s: waits_for known' % what, isinstance(wf, dict), s):
            continue
        chk.eq('%s: waits_for.kind' % what, wf.get('kind'), r['waits'], s)
        if r['waits'] in ('mutex', 'cond', 'rwlock'):
            # the object's own address (pthread_mutex_t, pthread_cond_t,
            # pthread_rwlock_t), not that of a futex word inside it
            got = wf.get('object')
            inside = ''
            if isinstance(got, str) and got != r['object']:
                inside = ' (the %s + %#x)' % (r['waits'], int(got, 16) - int(r['object'], 16))
            chk.eq('%s: waits_for.object%s' % (what, inside), got, r['object'], s)
        else:
            print('%s: waits_for %s (joined pthread_t %s)' % (what, json.dumps(wf), r['object']))
        if r['waits'] in ('mutex', 'join'):
            chk.eq('%s: waits_for.owner_tid' % what, wf.get('owner_tid'), r['owner'], s)
        elif r['waits'] == 'rwlock':
            print('%s: waits_for.owner_tid %s (the writer: %s)'
                  % (what, wf.get('owner_tid'), r['owner']))
            chk.true('%s: waits_for.owner_tid is null or the writer %s (got %r)'
                     % (what, r['owner'], wf.get('owner_tid')),
                     wf.get('owner_tid') in (None, r['owner']), s)
    print('objects: %s' % json.dumps(dl))
    report_warnings(run)
    # the target was not harmed: every thread sleeps where it slept (S),
    # none stopped, none traced
    settled_states(pid, {t: 'S' for t in [pid] + [r['tid'] for r in blocked]})
    check_untouched(chk, pid, 'after the snapshot', allowed='S')
    chk.eq('after the snapshot: the fixture answers', target.ask('p'), ['pong'])
    # --json without -o: the document owns standard output, the report
    # goes to standard error
    run = session.attach(pid, opts=('--snapshot',), output='stdout')
    chk.eq('--snapshot --json: exit status', run.returncode, 0)
    chk.true('--snapshot --json: the report is on standard error',
             'DEADLOCK' in run.stderr_text())
    chk.true('--snapshot --json: standard output is the document alone',
             run.stdout_text().lstrip().startswith('{') and 'DEADLOCK' not in run.stdout_text())
    # no document: the report alone, on standard output
    run = session.attach(pid, opts=('--snapshot',), output=None, load=False)
    chk.eq('--snapshot alone: exit status', run.returncode, 0)
    chk.true('--snapshot alone: the report is on standard output',
             'DEADLOCK' in run.stdout_text())
    chk.eq('--snapshot alone: standard error', run.stderr_text(), '')
    settled_states(pid, {t: 'S' for t in [pid] + [r['tid'] for r in blocked]})
    check_untouched(chk, pid, 'after three snapshots', allowed='S')
    target.kill()


def case_attach_idle(session, chk, count='1000'):
    n = int(count)
    target = session.target('idle', [n])
    pid = target.ready(timeout=60)[0]
    idle = {r['tid']: r for r in target.truth() if r.get('kind') == 'idle'}
    if len(idle) != n:
        raise FrameworkError('idle truth: %d records for %d threads' % (len(idle), n))
    for mode, opts in (('duration', ('-q', '--duration=0.3')), ('snapshot', ('-q', '--snapshot'))):
        chk.prefix = '[%s] ' % mode
        run = session.attach(pid, opts=opts, timeout=60)
        doc = run.doc
        frozen = check_attach_doc(chk, run, pid, mode, mode)
        print('%s: %d threads: ptwatch took %.2f s, frozen_ns %s (%.3f s)'
              % (mode, n + 1, run.elapsed, frozen, (frozen or 0) / 1e9))
        chk.true('%s: frozen_ns under 5 s (got %s)' % (mode, frozen),
                 isinstance(frozen, int) and frozen < 5e9)
        spans = thread_spans(doc)
        chk.eq('%s: spans' % mode, len(spans), n + 1)
        main_span = check_main_span(chk, doc, pid, mode)
        if main_span is not None and mode == 'snapshot':
            check_stack(chk, main_span, 'main thread', 'main', 'idle.c')
        seen = set()
        for s in spans:
            if s['origin'] == 'main':
                continue
            rec = idle.get(s['tid'])
            what = 'span %s (tid %s)' % (s['id'], s['tid'])
            if not chk.true('%s: the tid of an idle_worker' % what, rec is not None, s):
                continue
            seen.add(s['tid'])
            check_preexisting(chk, s, what, 'idle_worker', rec['pthread'])
            chk.eq('%s: detached' % what, s['detached'], False, s)
            check_open(chk, s, what)
            if mode == 'snapshot':
                check_stack(chk, s, what, 'idle_worker', 'idle.c')
                chk.eq('%s: state' % what, s.get('state'), 'S read', s)
        chk.eq('%s: idle_worker threads without a span' % mode, sorted(set(idle) - seen), [])
        report_warnings(run)
        check_untouched(chk, pid, 'after %s' % mode)
        chk.eq('after %s: the fixture answers' % mode, target.ask('p'), ['pong'])
    chk.prefix = ''
    target.send('q')
    if check_target_exit(chk, target, 'released', timeout=30):
        chk.eq('idle_done threads', target.one_truth('idle_done', 'released')['threads'], n)


def case_attach_stripped(session, chk):
    """ptwatch -p on a program without symbols names the main thread's
    start routine as a launch does: main, at main's address (not null);
    the workers' are placeholders at their routine's address."""
    target = session.target('idle_stripped', [2])
    pid = target.ready()[0]
    rec = target.one_truth('idle_main')
    for mode, opts in (('duration', ('--duration=0.3',)), ('snapshot', ('-q', '--snapshot'))):
        chk.prefix = '[%s] ' % mode
        run = session.attach(pid, opts=opts, timeout=30)
        doc = run.doc
        check_attach_doc(chk, run, pid, mode, mode)
        span = check_main_span(chk, doc, pid, mode)
        if span is not None:
            sr = span['start_routine'] or {}
            chk.eq('main: start_routine.addr', sr.get('addr'), rec['routine_addr'], span)
            chk.eq('main: start_routine.placeholder', sr.get('placeholder'), False, span)
            chk.eq('main: start_routine.module', sr.get('module') and
                   os.path.realpath(sr['module']), os.path.realpath(fixture('idle_stripped')),
                   span)
        for s in thread_spans(doc):
            if s['origin'] == 'main':
                continue
            what = 'span %s (tid %s)' % (s['id'], s['tid'])
            check_preexisting(chk, s, what, 'pthread_start_routine')
            sr = s['start_routine'] or {}
            chk.eq('%s: start_routine.addr' % what, sr.get('addr'), rec['worker_addr'], s)
            chk.eq('%s: start_routine.placeholder' % what, sr.get('placeholder'), True, s)
        chk.eq('%s: spans' % mode, len(thread_spans(doc)), 3)
        if mode == 'duration':
            rows = [l for l in run.stderr_text().splitlines()
                    if re.match(r'\s+\d+\s+%d\s' % pid, l)]
            chk.true('the main thread\'s table row says main (%s)' % rows,
                     len(rows) == 1 and ' main (' in rows[0])
        report_warnings(run)
    chk.prefix = ''
    target.send('q')
    check_target_exit(chk, target, 'released')


def case_attach_stopped(session, chk):
    target = session.target('idle', [3])
    pid = target.ready()[0]
    os.kill(pid, signal.SIGSTOP)
    states = wait_for(lambda: (lambda st: st if st and all(v == 'T' for v in st.values())
                               else None)(task_states(pid)), 10)
    if not states:
        raise FrameworkError('after SIGSTOP, the threads of %d did not all stop: %s'
                             % (pid, task_states(pid)))
    for mode, opts in (('duration', ('-q', '--duration=0.3')), ('snapshot', ('-q', '--snapshot'))):
        run = session.attach(pid, opts=opts, timeout=30)
        check_attach_doc(chk, run, pid, mode, mode)
        chk.eq('%s: spans' % mode, len(thread_spans(run.doc)), 4)
        # every thread was stopped (T) all along: nothing to wait for
        print('%s: ptwatch took %.2f s' % (mode, run.elapsed))
        chk.true('%s: returned within 2.5 s (took %.2f s)' % (mode, run.elapsed),
                 run.elapsed < 2.5)
        chk.true('%s: no threads_not_stopped warning (got %s)' % (mode, warning_codes(run.doc)),
                 'threads_not_stopped' not in warning_codes(run.doc))
        if mode == 'snapshot':
            print('snapshot of a stopped process: states %s'
                  % sorted({s.get('state') for s in thread_spans(run.doc)}))
        report_warnings(run)
        settled_states(pid, {t: 'T' for t in states})
        check_untouched(chk, pid, 'after %s' % mode, stopped=True)
    os.kill(pid, signal.SIGCONT)
    chk.eq('SIGCONT deliveries to the handler (ours only)', target.ask('k'), ['cont', '1'])
    target.send('q')
    check_target_exit(chk, target, 'after SIGCONT')
    chk.eq('idle_done cont_count', target.one_truth('idle_done', 'released')['cont_count'], 1)


def check_refusal(chk, run, what, pid=None, reason=None):
    """Exit 1 and one line: "ptwatch: cannot attach to PID: <reason>"."""
    chk.eq('%s: exit status' % what, run.returncode, 1)
    lines = attach_stderr_lines(run)
    print('%s: %r' % (what, run.stderr_text().strip()))
    if not chk.eq('%s: lines on stderr' % what, len(lines), 1):
        return ''
    prefix = 'ptwatch: cannot attach to %s: ' % (pid if pid is not None else '')
    line = lines[0]
    if pid is not None:
        chk.true('%s: message starts with %r (got %r)' % (what, prefix, line),
                 line.startswith(prefix))
    else:
        chk.true('%s: message starts with "ptwatch: cannot attach to " (got %r)' % (what, line),
                 line.startswith('ptwatch: cannot attach to '))
    if reason is not None:
        chk.true('%s: the reason matches %r (got %r)' % (what, reason, line),
                 re.search(reason, line) is not None)
    if os.path.exists(run.doc_path) and os.path.getsize(run.doc_path):
        load_doc(run)
        print('note: %s: a document was written (end_reason %s)'
              % (what, run.doc['session']['end_reason']))
    return line


def case_attach_refusals(session, chk):
    ptw = ptwatch_path()
    # a pid that does not exist
    with open('/proc/sys/kernel/pid_max') as f:
        pid_max = int(f.read())
    missing = next(p for p in range(pid_max - 1, 1, -1) if not os.path.exists('/proc/%d' % p))
    check_refusal(chk, session.attach(missing, load=False), 'no such pid %d' % missing, missing)

    # usage error
    for arg in ('abc', '0', '-5'):
        r = subprocess.run([ptw, '-p', arg], stdin=subprocess.DEVNULL, capture_output=True,
                           timeout=20)
        if arg == 'abc':
            chk.eq('-p abc: exit status (usage)', r.returncode, 2)
        else:
            chk.true('-p %s: exit status 1 or 2 (got %s)' % (arg, r.returncode),
                     r.returncode in (1, 2))
        print('-p %s: exit %s: %r' % (arg, r.returncode, r.stderr.decode().strip()))
        chk.true('-p %s: a message on stderr' % arg, r.stderr.strip() != b'')

    # ptwatch itself
    r = subprocess.run(['/bin/sh', '-c', 'exec "$0" -p $$', ptw], stdin=subprocess.DEVNULL,
                       capture_output=True, timeout=20)
    text = r.stderr.decode('utf-8', 'replace').strip()
    print('ptwatch -p itself: exit %s: %r' % (r.returncode, text))
    chk.eq('ptwatch -p itself: exit status', r.returncode, 1)
    chk.true('ptwatch -p itself: one line "ptwatch: cannot attach to PID: ..." (got %r)' % text,
             re.match(r'^ptwatch: cannot attach to \d+: \S.*$', text) is not None)

    # a kernel thread
    kthreadd = comm(2)
    if kthreadd != 'kthreadd':
        print('note: pid 2 is %r, not kthreadd' % kthreadd)
    check_refusal(chk, session.attach(2, load=False), 'pid 2 (%s)' % kthreadd, 2,
                  r'kernel thread')
    chk.eq('pid 2 after the refusal: TracerPid', tracer_pids(2), {})

    # a zombie: a child of ours that exited, not reaped
    zombie = subprocess.Popen(['/bin/true'])
    if not wait_for(lambda: task_states(zombie.pid).get(zombie.pid) == 'Z', 10):
        raise FrameworkError('child %d did not become a zombie' % zombie.pid)
    check_refusal(chk, session.attach(zombie.pid, load=False), 'zombie %d' % zombie.pid,
                  zombie.pid)
    chk.eq('zombie after the refusal: state', task_states(zombie.pid).get(zombie.pid), 'Z')
    zombie.wait()

    target = session.target('idle', [2])
    pid = target.ready()[0]

    # already traced: a first ptwatch holds it
    first, first_proc = start_attached(session, target)
    try:
        traced = wait_traced(target)
        tracer = traced[pid]
        line = check_refusal(chk, session.attach(pid, load=False), 'already traced', pid,
                             r'already traced by PID %d \(%s\)' % (tracer, re.escape(
                                 comm(tracer) or '?')))
        print('the first ptwatch: guardian %d, tracer %d (%s)'
              % (first_proc.pid, tracer, comm(tracer)))
        chk.eq('the tracer is the child of the ptwatch we started',
               ptwatch_processes(first_proc.pid).get('tracer'), tracer)
        chk.eq('the tracer comm', comm(tracer), 'ptw-tracer')
        chk.true('already traced: still held by the first ptwatch (%s)' % line,
                 tracer_pids(pid).get(pid) == tracer)
        os.kill(first_proc.pid, signal.SIGINT)
        session.wait(first, first_proc, 20, 'the first ptwatch did not let go after SIGINT')
    finally:
        end_group(first_proc)
    load_doc(first)
    check_attach_doc(chk, first, pid, 'interrupted', 'the first ptwatch')
    check_untouched(chk, pid, 'after the first ptwatch')

    # not allowed: ptwatch as nobody against our (root's) fixture
    setpriv = shutil.which('setpriv')
    if os.getuid() != 0:
        print('SKIP (sub-check): permission denied needs root (uid %d)' % os.getuid())
    elif setpriv is None:
        print('SKIP (sub-check): permission denied needs setpriv (util-linux)')
    else:
        prefix = [setpriv, '--reuid=nobody', '--regid=nogroup', '--clear-groups']
        probe = subprocess.run(prefix + [ptw, '--version'], capture_output=True, timeout=20)
        if probe.returncode != 0:
            print('SKIP (sub-check): nobody cannot run %s: %r'
                  % (ptw, probe.stderr.decode().strip()))
        else:
            # no -o: nobody cannot write in our temporary directory
            run = session.attach(pid, output=None, load=False, prefix=prefix)
            check_refusal(chk, run, 'as nobody', pid, r'uid|CAP_SYS_PTRACE')
    check_untouched(chk, pid, 'after the refusals')
    chk.eq('after the refusals: the fixture answers', target.ask('p'), ['pong'])
    target.send('q')
    check_target_exit(chk, target, 'released')


def case_attach_zombie_leader(session, chk):
    target = session.target('leaderexit')
    pid = target.ready()[0]
    rec = target.one_truth('leader')
    served = 0
    for mode, opts in (('duration', ('-q', '--duration=0.3')), ('snapshot', ('-q', '--snapshot'))):
        chk.prefix = '[%s] ' % mode
        run = session.attach(pid, opts=opts, timeout=30)
        doc = run.doc
        check_attach_doc(chk, run, pid, mode, mode)
        codes = warning_codes(doc)
        chk.true('%s: warning zombie_leader (got %s)' % (mode, codes), 'zombie_leader' in codes)
        report_warnings(run)
        index = span_index(doc)
        for tid, pthread, routine in ((rec['command_tid'], rec['command_pthread'],
                                       'command_worker'),
                                      (rec['cond_tid'], rec['cond_pthread'], 'cond_worker')):
            spans = index.get(tid, [])
            if not chk.eq('%s: spans of %s %s' % (mode, routine, tid), len(spans), 1):
                continue
            s = spans[0]
            check_preexisting(chk, s, '%s %s' % (routine, tid), routine, pthread)
            check_open(chk, s, '%s %s' % (routine, tid))
            if mode == 'snapshot':
                check_stack(chk, s, '%s %s' % (routine, tid), routine, 'leaderexit.c')
        leader = index.get(pid, [])
        print('%s: leader spans: %s' % (mode, json.dumps(leader)))
        others = [s['tid'] for s in thread_spans(doc)
                  if s['tid'] not in (pid, rec['command_tid'], rec['cond_tid'])]
        chk.eq('%s: spans of unknown threads' % mode, others, [])
        states = settled_states(pid, {pid: 'Z', rec['command_tid']: 'S', rec['cond_tid']: 'S'})
        chk.eq('after %s: the leader is still a zombie' % mode, states.get(pid), 'Z')
        chk.eq('after %s: threads with a tracer' % mode, tracer_pids(pid), {})
        chk.eq('after %s: worker states' % mode,
               {t: st for t, st in states.items() if t != pid},
               {rec['command_tid']: 'S', rec['cond_tid']: 'S'})
        served += 1
        chk.eq('after %s: the workers go on' % mode, target.ask('p'), ['pong', str(served)])
    # The tracer dies while attached: the front restores the bytes through
    # a live thread's view (the leader's maps are empty).
    chk.prefix = '[kill9] '
    worker = rec['command_tid']
    run, proc = session.start_attach(pid)
    try:
        workers = {rec['command_tid'], rec['cond_tid']}
        chk.true('the workers traced (tracers %s)' % tracer_pids(pid),
                 wait_for(lambda: set(tracer_pids(pid)) >= workers, 20))
        patched = wait_for(lambda: text_diffs(pid, tid=worker), 20)
        chk.true('breakpoints in while traced (text bytes that differ: %s)' % patched,
                 patched is None or len(patched) > 0)
        for tracer in set(tracer_pids(pid).values()):
            os.kill(tracer, signal.SIGKILL)
        session.wait(run, proc, 20, 'ptwatch did not exit after its tracer was killed')
    finally:
        end_group(proc)
    chk.eq('threads with a tracer after the kill', wait_untraced(pid, 2) is not None, True)
    diffs = text_diffs(pid, tid=worker)
    if diffs is not None:
        chk.eq('text bytes that differ from the files after the kill', diffs, [])
    lines = attach_stderr_lines(run)
    chk.true('one line says the bytes were restored and the target lives (stderr %r)' % lines,
             any(re.search(r'restored [1-9][0-9]* patched bytes; the target was still running',
                           x) for x in lines))
    served += 1
    chk.eq('after the kill: the workers go on', target.ask('p'), ['pong', str(served)])
    chk.prefix = ''
    target.send('q')
    check_target_exit(chk, target, 'released')


def case_attach_unstoppable(session, chk):
    target = session.target('vforker')
    pid, vfork_tid = target.ready()
    rec = target.one_truth('vforker')
    run = session.attach(pid, opts=('-q', '--snapshot'), timeout=30)
    doc = run.doc
    print('snapshot with a thread in D: %.2f s' % run.elapsed)
    chk.true('snapshot returned within 2.5 s (took %.2f s)' % run.elapsed, run.elapsed < 2.5)
    check_attach_doc(chk, run, pid, 'snapshot', 'snapshot')
    codes = warning_codes(doc)
    chk.true('warning threads_not_stopped (got %s)' % codes, 'threads_not_stopped' in codes)
    msgs = [w['message'] for w in doc.get('warnings', []) if w['code'] == 'threads_not_stopped']
    chk.true('the warning names the thread %d (%s)' % (vfork_tid, msgs),
             any(re.search(r'\btid %d\b' % vfork_tid, m) for m in msgs))
    report_warnings(run)
    index = span_index(doc)
    chk.eq('spans', len(thread_spans(doc)), 4)
    spans = index.get(vfork_tid, [])
    if chk.eq('spans of vfork_worker %s' % vfork_tid, len(spans), 1):
        s = spans[0]
        print('the D thread: %s' % json.dumps(s))
        chk.true('vfork_worker: state starts with D (got %r)' % s.get('state'),
                 str(s.get('state')).startswith('D'), s)
        # It cannot be stopped: its stack is what was read while it slept,
        # the frames its stack pointer and pc unwind, true but not all
        # (vfork keeps its return address in rdi, which /proc does not give).
        names = [f.get('symbol') for f in s.get('stack') or []]
        chk.true('vfork_worker: stack, as read asleep: [vfork] (got %s)' % names,
                 names in (['__vfork'], ['vfork']), s)
        check_preexisting(chk, s, 'vfork_worker', 'vfork_worker', rec['vfork_pthread'])
    main_span = check_main_span(chk, doc, pid, 'snapshot')
    if main_span is not None:
        check_stack(chk, main_span, 'main thread', 'main', 'vforker.c')
        chk.true('main: state starts with S (got %r)' % main_span.get('state'),
                 str(main_span.get('state')).startswith('S'), main_span)
    for tid, pthread in zip(rec['cond_tids'], rec['cond_pthreads']):
        spans = index.get(tid, [])
        if not chk.eq('spans of cond_worker %s' % tid, len(spans), 1):
            continue
        s = spans[0]
        what = 'cond_worker %s' % tid
        check_preexisting(chk, s, what, 'cond_worker', pthread)
        check_stack(chk, s, what, 'cond_worker', 'vforker.c')
        chk.true('%s: state starts with S (got %r)' % (what, s.get('state')),
                 str(s.get('state')).startswith('S'), s)
        chk.eq('%s: waits_for.kind' % what, (s.get('waits_for') or {}).get('kind'), 'cond', s)
    # the target: untraced (the D thread too), D thread still in vfork
    gone = wait_untraced(pid, 2)
    chk.true('after the snapshot: no thread traced within 2 s (tracers %s)' % tracer_pids(pid),
             gone is not None)
    expected = {t: 'S' for t in [pid] + rec['cond_tids']}
    expected[vfork_tid] = 'D'
    chk.eq('after the snapshot: states', settled_states(pid, expected), expected)
    # tracing (--duration) copes with it too
    run = session.attach(pid, opts=('-q', '--duration=0.3'), timeout=30)
    print('--duration=0.3 with a thread in D: %.2f s' % run.elapsed)
    check_attach_doc(chk, run, pid, 'duration', '--duration')
    chk.true('--duration: warning threads_not_stopped (got %s)' % warning_codes(run.doc),
             'threads_not_stopped' in warning_codes(run.doc))
    report_warnings(run)
    chk.eq('--duration: spans', sorted(s['tid'] for s in thread_spans(run.doc)),
           sorted(expected))
    chk.true('after --duration: no thread traced within 2 s (tracers %s)' % tracer_pids(pid),
             wait_untraced(pid, 2) is not None)
    chk.eq('after --duration: states', settled_states(pid, expected), expected)
    target.send('x')    # the vfork child execs /bin/true
    chk.eq('released: the fixture finished', target.line(20, 'done'), 'done')
    check_target_exit(chk, target, 'released')


# Real-time signals, queued with a value: seq | target << 16.
SI_QUEUE = -1
SYS_rt_tgsigqueueinfo = 297   # x86-64


class SigInfo(ctypes.Structure):
    _fields_ = [('si_signo', ctypes.c_int), ('si_errno', ctypes.c_int), ('si_code', ctypes.c_int),
                ('pad', ctypes.c_int), ('si_pid', ctypes.c_int), ('si_uid', ctypes.c_uint),
                ('si_value', ctypes.c_void_p), ('rest', ctypes.c_char * 96)]


def case_attach_signals(session, chk, cycles='10'):
    """Real-time signals queued with a value, one every millisecond, to the
    process and to each of its threads, while ptwatch attaches and detaches
    over and over: each must arrive exactly once, in the right thread, with
    its own si_code and value (signals pass through unchanged)."""
    if platform.machine() != 'x86_64':
        raise Skip('rt_tgsigqueueinfo syscall number for %s' % platform.machine())
    libc = ctypes.CDLL(None, use_errno=True)
    libc.sigqueue.argtypes = [ctypes.c_int, ctypes.c_int, ctypes.c_void_p]
    libc.syscall.argtypes = [ctypes.c_long, ctypes.c_int, ctypes.c_int, ctypes.c_int,
                             ctypes.c_void_p]
    target = session.target('rtsig')
    words = target.ready()
    pid, workers = words[0], words[1:] + [words[0]]    # the rt_workers, main
    sig = signal.SIGRTMIN + 1
    sent = []
    errors = []
    stop = threading.Event()

    def sender():
        seq = 0
        while not stop.is_set() and seq < 16000:
            seq += 1
            dest = seq % (len(workers) + 1)       # 0: the process, i + 1: thread i
            value = seq | dest << 16
            if dest == 0:
                rc = libc.sigqueue(pid, sig, value)
            else:
                info = SigInfo(si_signo=sig, si_code=SI_QUEUE, si_pid=os.getpid(),
                               si_uid=os.getuid(), si_value=value)
                rc = libc.syscall(SYS_rt_tgsigqueueinfo, pid, workers[dest - 1], sig,
                                  ctypes.byref(info))
            if rc != 0:
                errors.append((seq, os.strerror(ctypes.get_errno())))
                return
            sent.append(seq)
            time.sleep(0.001)   # a steady pace, not synchronisation

    thread = threading.Thread(target=sender)
    thread.start()
    tracers = {}    # the pid of each cycle's tracer: cycle number
    try:
        for i in range(int(cycles)):
            chk.prefix = '[cycle %d] ' % (i + 1)
            run, proc = session.start_attach(pid, opts=('-q', '--duration=0.2'))
            tracer = wait_for(lambda: tracer_pids(pid).get(pid) or proc.poll() is not None, 20,
                              step=0.001)
            if tracer is not True:
                tracers[tracer] = i + 1
            session.wait(run, proc, 30)
            load_doc(run)
            check_attach_doc(chk, run, pid, 'duration')
            chk.eq('spans', len(thread_spans(run.doc)), len(workers))
            report_warnings(run)
            check_untouched(chk, pid, 'after cycle %d' % (i + 1))
    finally:
        chk.prefix = ''
        stop.set()
        thread.join()
    if errors:
        raise FrameworkError('sending signal %s: %s' % (errors[0][0], errors[0][1]))
    n = len(sent)
    print('%d signals sent (%d to the process, %d to single threads) over %s cycles'
          % (n, sum(1 for s in sent if s % (len(workers) + 1) == 0),
             sum(1 for s in sent if s % (len(workers) + 1)), cycles))
    target.send('q')
    if not check_target_exit(chk, target, 'released'):
        return
    rt = target.one_truth('rtsig', 'released')
    print('fixture: %s' % json.dumps(rt))
    chk.eq('deliveries (handled + still pending at the end)', rt['deliveries'], n)
    chk.eq('distinct values received', rt['distinct'], n)
    chk.eq('highest value received', rt['max_seq'], n)
    chk.eq('values delivered twice', rt['duplicated'], 0)
    chk.eq('thread-directed signals that reached another thread', rt['wrong_tid'], 0)
    if not chk.eq('signals without our si_code (SI_QUEUE) and value', rt['bad'], 0):
        bad = rt['first_bad']
        print('the first one: si_code %s (SI_TKILL = -6), si_pid %s (%s), value %s, in thread %s'
              % (bad['si_code'], bad['si_pid'],
                 'the tracer of cycle %d' % tracers[bad['si_pid']]
                 if bad['si_pid'] in tracers else 'not a tracer of ours: %s' % sorted(tracers),
                 bad['value'], bad['tid']))


def case_attach_exec_fork(session, chk):
    target = session.target('execfork')
    pid, image = target.ready()
    if image != 1:
        raise FrameworkError('execfork: first image says %d' % image)

    def cycle(what, duration='0.3'):
        run = session.attach(pid, opts=('-q', '--duration=%s' % duration), timeout=30)
        check_attach_doc(chk, run, pid, 'duration', what)
        report_warnings(run)
        check_untouched(chk, pid, 'after %s' % what)
        wait_progress(chk, target, 'after %s' % what, more=20)
        return run

    for i in range(2):
        cycle('image 1, cycle %d' % (i + 1))
    # traced while the worker thread execs
    run, proc = start_attached(session, target, opts=('--duration=3',))
    try:
        target.send('x')
        again = target.ready(timeout=20)
        chk.eq('the new image says so', again[1:], [2])
        session.wait(run, proc, 30, 'ptwatch did not end at --duration=3')
    finally:
        end_group(proc)
    load_doc(run)
    check_attach_doc(chk, run, pid, 'duration', 'across the exec')
    report_warnings(run)
    execs = [s for s in thread_spans(run.doc) if (s['end'] or {}).get('method') == 'exec']
    mains = [s for s in thread_spans(run.doc) if s['origin'] == 'main']
    print('across the exec: %d spans, %d ended by the exec, main spans %s, exe %s'
          % (len(thread_spans(run.doc)), len(execs),
             [(s['id'], s['status'], (s['start_routine'] or {}).get('symbol')) for s in mains],
             run.doc['target']['exe']))
    chk.true('across the exec: spans ended by exec (got %d)' % len(execs), len(execs) >= 1)
    check_untouched(chk, pid, 'after the exec')
    before = exec_mappings(pid)
    for i in range(2):
        cycle('image 2, cycle %d' % (i + 1))
    compare_mappings(chk, before, exec_mappings(pid), 'image 2, after the cycles')
    target.send('q')
    if check_target_exit(chk, target, 'released'):
        rec = target.one_truth('execfork', 'released')
        print('image 2 forked %d children' % rec['forked'])
        chk.eq('execfork record: image', rec['image'], 2)


def case_attach_pipe_closed(session, chk):
    target = session.target('churner')
    pid = target.ready()[0]
    before = exec_mappings(pid)
    for variant, output in (('-o FILE', 'file'), ('no document', None)):
        chk.prefix = '[%s] ' % variant
        err_r, err_w = os.pipe()
        try:
            run, proc = session.start_attach(pid, opts=(), output=output, stderr=err_w)
        finally:
            os.close(err_w)
        try:
            r, _, _ = select.select([err_r], [], [], 20)
            first = os.read(err_r, 4096).split(b'\n')[0] if r else b''
            print('%s: first stderr line: %r' % (variant, first))
            os.close(err_r)
            err_r = None
            session.wait(run, proc, 20, 'ptwatch did not exit after its stderr closed')
        finally:
            if err_r is not None:
                os.close(err_r)
            end_group(proc)
        chk.true('first line read (%r)' % first, first != b'')
        print('%s: ptwatch exit status %s after %.2f s (Popen: -13 is death by SIGPIPE)'
              % (variant, run.returncode, run.elapsed))
        chk.true('ptwatch exit status 0 or SIGPIPE (got %s)' % run.returncode,
                 run.returncode in (0, 141, -signal.SIGPIPE))
        if output == 'file':
            if os.path.exists(run.doc_path) and os.path.getsize(run.doc_path):
                load_doc(run)
                print('%s: document end_reason %s, exit %s'
                      % (variant, run.doc['session']['end_reason'], run.doc['target']['exit']))
                chk.eq('target.exit', run.doc['target']['exit'], None)
            else:
                print('note: %s: no document after SIGPIPE' % variant)
        gone = wait_untraced(pid, 2)
        chk.true('TracerPid 0 within 2 s (tracers %s)' % tracer_pids(pid), gone is not None)
        target.check_alive('after the pipe closed')
        check_untouched(chk, pid, 'after the pipe closed')
        compare_mappings(chk, before, exec_mappings(pid), 'after the pipe closed')
        wait_progress(chk, target, 'after the pipe closed', more=300)
    chk.prefix = ''
    target.send('q')
    check_target_exit(chk, target, 'released')


def case_kill9_front(session, chk, rounds='3'):
    target = session.target('churner')
    pid = target.ready()[0]
    before = exec_mappings(pid)
    for i in range(int(rounds)):
        chk.prefix = '[round %d] ' % (i + 1)
        run, proc = start_attached(session, target)
        try:
            traced = wait_traced(target)
            tracer = traced[pid]
            chk.eq('the tracer is the child of the ptwatch we started',
                   ptwatch_processes(proc.pid).get('tracer'), tracer)
            # in full swing: breakpoints in, threads created under ptwatch
            wait_progress(chk, target, 'while traced', more=100)
            lines = wait_for(lambda: read_outputs(run) or ' create ' in run.stderr_text(), 10)
            chk.true('event lines on stderr before the kill', lines)
            os.kill(proc.pid, signal.SIGKILL)
            proc.wait(timeout=10)
            t = wait_untraced(pid, 2)
            print('round %d: guardian %d killed; target untraced after %s s'
                  % (i + 1, proc.pid, '%.3f' % t if t is not None else 'more than 2'))
            chk.true('TracerPid 0 within 2 s of the kill (tracers %s)' % tracer_pids(pid),
                     t is not None)
            left = wait_for(lambda: not os.path.exists('/proc/%d' % tracer), 5)
            chk.true('the tracer %d exits after the detach (comm %s)' % (tracer, comm(tracer)),
                     left)
        finally:
            end_group(proc)
        read_outputs(run)
        if os.path.exists(run.doc_path) and os.path.getsize(run.doc_path):
            load_doc(run)
            print('round %d: document written, end_reason %s, warnings %s'
                  % (i + 1, run.doc['session']['end_reason'], warning_codes(run.doc)))
        target.check_alive('after the kill')
        check_untouched(chk, pid, 'after the kill')
        compare_mappings(chk, before, exec_mappings(pid), 'after the kill')
        wait_progress(chk, target, 'after the kill', more=300)
    chk.prefix = ''
    target.send('q')
    check_target_exit(chk, target, 'released')


def case_kill9_tracer(session, chk, then='command-exits'):
    """ptwatch -- COMMAND, and its tracer process is killed: the front
    restores the patched bytes, the command (idle, waiting) lives on, is
    reparented to the front, and ptwatch exits as the command does
    (command-exits), or with 128 + SIGTERM at once when it gets a SIGTERM
    meanwhile, the command left running (sigterm)."""
    ctl_r, ctl_w = os.pipe()
    rep_r, rep_w = os.pipe()
    run, proc = session.start([fixture('idle'), '4'], opts=['-q'],
                              env={'PTW_CTL_FD': str(ctl_r), 'PTW_REPLY_FD': str(rep_w)},
                              pass_fds=(ctl_r, rep_w))
    os.close(ctl_r)
    os.close(rep_w)
    try:
        words = read_line(rep_r, 20, 'ready').split()
        pid = int(words[1])
        traced = wait_traced(pid)
        tracer = set(traced.values())
        chk.eq('one tracer, the child of the ptwatch we started', sorted(tracer),
               [ptwatch_processes(proc.pid).get('tracer')])
        before = text_diffs(pid)
        chk.true('breakpoints in while traced (text bytes that differ: %s)' % before,
                 before is None or len(before) > 0)
        kill_tracer(chk, proc.pid, tracer)
        t = wait_untraced(pid, 2)
        chk.true('TracerPid 0 within 2 s of the kill (tracers %s)' % tracer_pids(pid),
                 t is not None)
        chk.true('the command is now the child of ptwatch (children %s)' % child_pids(proc.pid),
                 wait_for(lambda: child_pids(proc.pid) == [pid], 5))
        check_untouched(chk, pid, 'after the kill')
        diffs = text_diffs(pid)
        if diffs is not None:
            chk.eq('text bytes that differ from the files after the kill', diffs, [])
        os.write(ctl_w, b'p')
        chk.eq('the command answers after the kill', read_line(rep_r, 10, 'pong').strip(),
               'pong')
        chk.eq('ptwatch still runs while the command does', proc.poll(), None)
        if then == 'sigterm':
            os.kill(proc.pid, signal.SIGTERM)
            session.wait(run, proc, 10, 'ptwatch did not exit after SIGTERM')
            chk.eq('ptwatch exit status after SIGTERM', run.returncode, 128 + signal.SIGTERM)
            os.write(ctl_w, b'p')
            chk.eq('the command still answers after ptwatch left',
                   read_line(rep_r, 10, 'pong').strip(), 'pong')
            os.write(ctl_w, b'q')
            chk.true('the command finished its work ("idle_done" record)',
                     wait_for(lambda: any(r.get('kind') == 'idle_done'
                                          for r in load_truth(run)), 15))
            return
        os.write(ctl_w, b'q')
        session.wait(run, proc, 20, 'ptwatch did not exit after the command')
    finally:
        end_group(proc)
        os.close(ctl_w)
        os.close(rep_r)
    chk.eq('ptwatch exit status: the command\'s', run.returncode, 0)
    chk.eq('the command finished its work ("idle_done" records)',
           len([r for r in load_truth(run) if r.get('kind') == 'idle_done']), 1)
    lines = attach_stderr_lines(run)
    chk.true('one line says what happened (stderr %r)' % lines,
             any('tracer process died' in x and 'still running, untraced' in x for x in lines))


def case_attach_early_signal(session, chk, rounds='2'):
    """A signal that reaches ptwatch while it is still attaching (the
    target's main thread already has it as its tracer, the attach is not
    complete): ptwatch must still let go, promptly. SIGINT and SIGTERM to
    the pid we started, and SIGKILL of it (the guardian: its tracer must
    detach). The target is idle: no later event wakes ptwatch up. A fresh
    target each time: a tracer that does not let go may leave int3s."""
    for i in range(int(rounds)):
        for signame in ('SIGINT', 'SIGTERM', 'SIGKILL'):
            chk.prefix = '[round %d, %s] ' % (i + 1, signame)
            target = session.target('idle', [2])
            pid = target.ready()[0]
            run, proc = session.start_attach(pid)
            clean = True
            try:
                if not wait_for(lambda: tracer_pids(pid).get(pid) or proc.poll() is not None,
                                20, step=0.0005):
                    raise Failed('ptwatch -p %d did not seize the main thread within 20 s' % pid)
                tracer = tracer_pids(pid).get(pid)
                os.kill(proc.pid, getattr(signal, signame))
                try:
                    proc.wait(timeout=5)
                except subprocess.TimeoutExpired:
                    clean = chk.fail('ptwatch still runs 5 s after %s (sent as soon as the main '
                                     'thread had a tracer); tracers %s'
                                     % (signame, tracer_pids(pid)))
                if signame == 'SIGKILL':
                    t = wait_untraced(pid, 2)
                    clean = chk.true('TracerPid 0 within 2 s of the kill (tracers %s, tracer %s '
                                     'is %s)' % (tracer_pids(pid), tracer, comm(tracer)),
                                     t is not None)
            finally:
                # the guardian and its tracer share the process group
                kill_group(proc)
                if proc.returncode is None:
                    proc.wait()
            run.returncode = proc.returncode
            read_outputs(run)
            if not clean:
                target.kill()
                continue
            if signame != 'SIGKILL':
                chk.eq('exit status', run.returncode, 0)
                if os.path.exists(run.doc_path) and os.path.getsize(run.doc_path):
                    load_doc(run)
                    chk.eq('session.end_reason', run.doc['session']['end_reason'],
                           'interrupted')
            check_untouched(chk, pid, 'after %s' % signame)
            target.send('q')
            check_target_exit(chk, target, 'after %s' % signame)
    chk.prefix = ''


# ---------------------------------------------------------------------------
# Every way of ending ptwatch (ptw_guardian.h): the target lives on, its text
# is the files' again, no page of ours stays mapped, and everything it does
# afterwards works.

# Ways that reach the front only (the tracer has its own process group and a
# name that is not "ptwatch"): the tracer detaches cleanly, so even a target
# that is busy creating threads survives every time.
CLEAN_END_WAYS = ('front-kill9', 'pidof-kill9', 'pkill9', 'pgid-kill9', 'timeout-kill',
                  'SIGTERM', 'SIGINT', 'SIGHUP', 'SIGPIPE', 'terminal')
# Ways that kill the tracer (by its pid; both, as a cgroup kill would but
# for the restorer): the restorer puts the bytes back and writes the
# record. A thread that sat in one of our int3 stops then dies of SIGTRAP
# (the kernel lets it go before anyone can undo it): the fixture here has
# none there when the kill comes; bench/kill.py measures the rate on a busy
# one.
TRACER_END_WAYS = ('tracer-kill9', 'front-and-tracer-kill9')

TAKE_TTY = ('import fcntl, os, sys, termios\n'
            'fd = os.open(sys.argv[1], os.O_RDWR)\n'
            'try:\n'
            '    fcntl.ioctl(fd, termios.TIOCSCTTY, 0)\n'
            'except OSError:\n'
            '    pass\n'
            'os.execvp(sys.argv[2], sys.argv[2:])\n')


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


def kill_tracer(chk, front, tracers=None):
    """SIGKILLs the tracer of the ptwatch whose front is `front` (or the
    given tracer pids) and waits until its restorer has ended: the
    restorer puts the bytes back after the tracer is gone, so TracerPid 0
    alone does not say they are back."""
    ours = ptwatch_processes(front)
    restorer = ours.get('restorer')
    chk.true('a restorer process', restorer is not None, ours)
    for tid in tracers if tracers is not None else [ours.get('tracer')]:
        if tid:
            os.kill(tid, signal.SIGKILL)
    if restorer:
        chk.true('the restorer %d ends within 10 s of the kill' % restorer,
                 wait_for(lambda: proc_status(restorer).get('State', 'Z')[:1] in 'ZX', 10))


def matching(command, pattern):
    """The pids `pidof`/`pgrep` (pkill's selection) return for pattern."""
    res = subprocess.run([command, pattern], stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                         universal_newlines=True)
    return {int(x) for x in res.stdout.split()}


def end_ptwatch(chk, way, proc, ours, master):
    """Ends the ptwatch we started (proc; its processes `ours`) the given
    way. pidof and pkill are asked which processes they would pick, and only
    ours among them are signalled (other tests run ptwatch too)."""
    front = ours['front']
    if way == 'front-kill9':
        os.kill(front, signal.SIGKILL)
    elif way == 'tracer-kill9':
        os.kill(ours['tracer'], signal.SIGKILL)
    elif way == 'pidof-kill9':
        picked = matching('pidof', 'ptwatch') & set(ours.values())
        chk.eq('pidof ptwatch picks the front alone of ours %s' % ours, picked, {front})
        for p in picked:
            os.kill(p, signal.SIGKILL)
    elif way == 'pkill9':
        picked = matching('pgrep', 'ptwatch') & set(ours.values())
        chk.eq('pkill ptwatch picks the front alone of ours %s' % ours, picked, {front})
        for p in picked:
            os.kill(p, signal.SIGKILL)
    elif way == 'front-and-tracer-kill9':
        # the tracer first: the front's death would have it let go cleanly
        os.kill(ours['tracer'], signal.SIGKILL)
        os.kill(front, signal.SIGKILL)
    elif way == 'pgid-kill9':
        os.killpg(os.getpgid(front), signal.SIGKILL)
    elif way == 'timeout-kill':
        os.kill(proc.pid, signal.SIGALRM)  # timeout(1): the time is up now
    elif way == 'terminal':
        os.close(master)
    else:
        os.kill(front, getattr(signal, way))


def start_ptwatch_for_end(session, target, way):
    """ptwatch -p PID started for an end-* case, attached (its "found"
    lines are out); returns (run, proc, {front, tracer, restorer}, master)."""
    prefix, master = (), None
    if way == 'timeout-kill':
        prefix = ('timeout', '-s', 'KILL', '600')
    elif way == 'terminal':
        master, slave = os.openpty()
        prefix = (sys.executable, '-c', TAKE_TTY, os.ttyname(slave))
        os.close(slave)
    run, proc = session.start_attach(target.pid, opts=(), prefix=prefix)
    try:
        def attached():
            read_outputs(run)
            return ' found ' in run.stderr_text() or proc.poll() is not None
        if not wait_for(attached, 20) or proc.poll() is not None:
            raise Failed('ptwatch -p %d: not attached within 20 s (exit %s)\nstderr:\n%s'
                         % (target.pid, proc.poll(), run.stderr_text()[-2000:]))
        front = child_pids(proc.pid)[0] if way == 'timeout-kill' else proc.pid
        ours = wait_for(lambda: (lambda o: o if len(o) == 3 else None)(ptwatch_processes(front)),
                        10)
        if not ours:
            raise Failed('ptwatch %d: no tracer and restorer among its children %s'
                         % (front, [(k, comm(k)) for k in child_pids(front)]))
    except BaseException:
        kill_group(proc)
        proc.wait()
        if master is not None:
            os.close(master)
        raise
    return run, proc, ours, master


def case_end(session, chk, fixture_name='exercise', which='all'):
    ways = {'all': CLEAN_END_WAYS + TRACER_END_WAYS, 'clean': CLEAN_END_WAYS}[which]
    if not shutil.which('timeout'):
        raise Skip('no timeout(1)')
    for way in ways:
        chk.prefix = '[%s] ' % way
        target = session.target(fixture_name)
        pid = target.ready()[0]
        before = exec_mappings(pid)
        run, proc, ours, master = start_ptwatch_for_end(session, target, way)
        try:
            wait_traced(target)
            patched = text_diffs(pid)
            chk.true('int3 bytes in while traced (%s)' % patched, patched)
            if fixture_name == 'churner':
                wait_progress(chk, target, 'while traced', more=50)
            end_ptwatch(chk, way, proc, ours, master)
            master = None if way == 'terminal' else master
            session.wait(run, proc, 20, 'ptwatch did not exit after %s' % way)
            chk.true('every thread untraced within 5 s (tracers %s)' % tracer_pids(pid),
                     wait_untraced(pid, 5) is not None)
            chk.true('the restorer %d ends' % ours['restorer'],
                     wait_for(lambda: proc_status(ours['restorer']).get('State', 'Z')[:1]
                              in 'ZX', 20))
        finally:
            end_group(proc)
            if master is not None:
                os.close(master)
        read_outputs(run)
        target.check_alive('after %s' % way)
        check_untouched(chk, pid, 'after %s' % way)
        compare_mappings(chk, before, exec_mappings(pid), 'after %s' % way)
        if fixture_name == 'churner':
            wait_progress(chk, target, 'after %s' % way, more=200)
        else:
            chk.eq('every hooked function works after %s' % way, target.ask('x'), ['done', '1'])
        chk.true('a document was written', os.path.exists(run.doc_path) and
                 os.path.getsize(run.doc_path) > 0)
        if os.path.exists(run.doc_path) and os.path.getsize(run.doc_path):
            doc = load_doc(run)
            died = way in TRACER_END_WAYS
            chk.eq('session.end_reason', doc['session']['end_reason'],
                   'tracer_died' if died else 'interrupted')
            if died:
                chk.true('a tracer_died warning (%s)' % warning_codes(doc),
                         'tracer_died' in warning_codes(doc))
                chk.true('the spans seen until the kill are in it', len(doc['spans']) >= 5)
                for sp in doc['spans']:
                    if sp['status'] == 'unmatched':
                        chk.eq('end.reason of unmatched span %d' % sp['id'],
                               sp['end']['reason'], 'tracer_died')
                chk.true('no span is left open', all(sp['status'] != 'open' for sp in doc['spans']))
        target.send('q')
        check_target_exit(chk, target, 'after %s' % way)
    chk.prefix = ''


# 17. the build-id cache

def cache_lines(run, what):
    """The --debug=sym lines about libc: (debug file searches, cache opens)
    where each cache open is (path, state)."""
    searches, opens = [], []
    for line in run.stderr_text().splitlines():
        m = re.search(r'\]\s[\d.]+: debug file of (\S*libc\.so[^:]*): (.*)$', line)
        if m:
            searches.append(m.group(2))
        m = re.search(r'\]\s[\d.]+: cache (\S+) for (\S*libc\.so\S*): (.+), \d+ records', line)
        if m:
            opens.append((m.group(1), m.group(3)))
    print('%s: libc debug file searches %s, cache %s' % (what, searches, opens))
    return searches, opens


def case_cache(session, chk):
    """A second run reads nothing of libc's debug file; a corrupt cache file
    is ignored and replaced; --no-cache and an unwritable directory."""
    exe = fixture('lifecycle')
    home = session.mkdtemp()
    env = {'XDG_CACHE_HOME': home}
    opts = ['-q', '--debug=sym']

    chk.prefix = '[first run] '
    run = session.run([exe], opts=opts, env=env)
    check_lifecycle(chk, run)
    strategy = run.doc['session'].get('strategy')
    searches, opens = cache_lines(run, 'first run')
    chk.true('libc\'s debug file was looked for', len(searches) >= 1)
    chk.eq('a new cache for libc', [st for _, st in opens], ['new'])
    if not opens:
        raise Failed('no cache for libc in the debug log:\n%s' % run.stderr_text()[-3000:])
    path = opens[0][0]
    chk.true('the cache is in $XDG_CACHE_HOME/ptwatch (%s)' % path,
             os.path.dirname(path) == os.path.join(home, 'ptwatch') and os.path.isfile(path))

    chk.prefix = '[second run] '
    run = session.run([exe], opts=opts, env=env)
    check_lifecycle(chk, run)
    searches, opens = cache_lines(run, 'second run')
    chk.eq('libc\'s debug file not opened', searches, [])
    chk.eq('libc\'s cache loaded', opens, [(path, 'loaded')])
    chk.eq('the same strategy', run.doc['session'].get('strategy'), strategy)

    chk.prefix = '[corrupt] '
    with open(path, 'rb') as f:
        data = bytearray(f.read())
    # Keep the header, damage a record: it must not be trusted.
    i = data.index(b'member:pthread.result\t1\t') if b'member:pthread.result\t1\t' in data \
        else len(data) - 8
    data[i + 24:i + 27] = b'fff'
    with open(path, 'wb') as f:
        f.write(bytes(data))
    run = session.run([exe], opts=opts, env=env)
    check_lifecycle(chk, run)
    searches, opens = cache_lines(run, 'corrupt')
    chk.eq('the corrupt file is ignored', opens, [(path, 'invalid (ignored)')])
    chk.true('libc\'s debug file looked for again', len(searches) >= 1)
    chk.eq('the same strategy', run.doc['session'].get('strategy'), strategy)
    with open(path, 'rb') as f:
        chk.true('the file was rewritten', f.read() != bytes(data))
    run = session.run([exe], opts=opts, env=env)
    check_lifecycle(chk, run)
    searches, opens = cache_lines(run, 'after the rewrite')
    chk.eq('the rewritten file is used', (searches, opens), ([], [(path, 'loaded')]))
    leftovers = [n for n in os.listdir(os.path.dirname(path)) if '.tmp.' in n]
    chk.eq('no temporary files left', leftovers, [])

    chk.prefix = '[--no-cache] '
    empty = session.mkdtemp()
    run = session.run([exe], opts=opts + ['--no-cache'], env={'XDG_CACHE_HOME': empty})
    check_lifecycle(chk, run)
    chk.eq('nothing written', os.listdir(empty), [])
    chk.eq('no cache opened', cache_lines(run, '--no-cache')[1], [])

    chk.prefix = '[unwritable] '
    not_a_dir = os.path.join(empty, 'file')
    with open(not_a_dir, 'w') as f:
        f.write('x')
    run = session.run([exe], opts=['-q'], env={'XDG_CACHE_HOME': not_a_dir})
    check_lifecycle(chk, run)
    chk.true('no message about the cache without --debug',
             'cache' not in run.stderr_text().lower(), run.stderr_text())
    run = session.run([exe], opts=opts, env={'XDG_CACHE_HOME': not_a_dir})
    check_lifecycle(chk, run)
    notes = [l for l in run.stderr_text().splitlines() if 'not written' in l]
    print('unwritable: %s' % notes)
    chk.eq('one debug line says the cache was not written', len(notes), 1)
    chk.prefix = ''


# ---------------------------------------------------------------------------
# 18. C++ names

def case_cxx(session, chk):
    """Start routines and create sites named for people (demangled), the
    mangled name beside them in linkage_name; text output too."""
    run = session.run([fixture('cxx')], opts=())
    check_exit(chk, run, code=0)
    report_warnings(run)
    spans = {s['tid']: s for s in thread_spans(run.doc)}
    threads = [t for t in run.truth if t['kind'] == 'thread']
    chk.eq('threads in the truth', len(threads), 3)
    joins = {(j['joiner'], j['tid']) for j in run.truth if j['kind'] == 'join'}
    for t in threads:
        span = spans.get(t['tid'])
        what = 'thread %s (%s)' % (t['tid'], t['routine'])
        if span is None:
            chk.true('%s has a span' % what, False)
            continue
        sr, site = span['start_routine'] or {}, span['create_site'] or {}
        chk.eq('%s: creator' % what, span['creator_tid'], t['creator'], span)
        chk.eq('%s: status' % what, span['status'], 'completed', span)
        chk.true('%s: joined' % what, span['join'] is not None and
                 (span['join']['joiner_tid'], t['tid']) in joins, span)
        if t['routine'] == 'std::thread':
            # libstdc++'s own routine: a placeholder, in libstdc++
            chk.true('%s: start routine in libstdc++' % what,
                     'libstdc++' in (sr.get('module') or ''), span)
            chk.true('%s: create site std::thread::_M_start_thread(...)' % what,
                     (site.get('symbol') or '').startswith('std::thread::_M_start_thread('), span)
            chk.true('%s: its linkage name' % what,
                     (site.get('linkage_name') or '').startswith('_ZNSt6thread15_M_start_thread'),
                     span)
            continue
        chk.eq('%s: start routine symbol' % what, sr.get('symbol'), 'fixture::Worker::run(void*)',
               span)
        chk.eq('%s: start routine linkage_name' % what, sr.get('linkage_name'),
               '_ZN7fixture6Worker3runEPv', span)
        chk.eq('%s: start routine address' % what, sr.get('addr'), t['routine_addr'], span)
        chk.eq('%s: create site' % what, site.get('symbol'), t['create_fn'], span)
        chk.eq('%s: create site linkage_name' % what, site.get('linkage_name'),
               None if t['create_fn'] == 'main' else '_ZZ4mainENKUlvE_clEv', span)
    main_span = [s for s in run.doc['spans'] if s.get('origin') == 'main']
    chk.true('main: symbol main, no linkage name',
             len(main_span) == 1 and main_span[0]['start_routine']['symbol'] == 'main' and
             main_span[0]['start_routine']['linkage_name'] is None, main_span)
    text = run.stderr_text()
    chk.true('the event lines say fixture::Worker::run(void*)',
             'fixture::Worker::run(void*)' in text and '_ZN7fixture' not in text, text[-2000:])
# 19. names for stripped code: debuginfod and MiniDebugInfo

def build_id(path):
    """The hex build-id of an ELF file (readelf -n)."""
    out = subprocess.run(['readelf', '-n', path], capture_output=True, text=True).stdout
    m = re.search(r'Build ID:\s*([0-9a-f]+)', out)
    if not m:
        raise FrameworkError('%s has no build-id note' % path)
    return m.group(1)


def free_port():
    with socket.socket() as s:
        s.bind(('127.0.0.1', 0))
        return s.getsockname()[1]


class Debuginfod:
    """A debuginfod server of the test's own on a free localhost port,
    serving the files of one directory (-F), started and killed by it."""

    def __init__(self, session, directory, build_ids):
        self.session = session
        self.directory = directory
        self.build_ids = build_ids
        self.proc = None
        self.url = None

    def start(self, timeout=30):
        exe = shutil.which('debuginfod')
        if not exe:
            raise Skip('debuginfod is not installed (scripts/deps.sh installs it)')
        env = dict(os.environ)
        for name in list(env):
            if name.startswith('DEBUGINFOD_'):
                del env[name]  # no upstream federation, no client settings
        for attempt in range(3):
            port = free_port()
            work = self.session.mkdtemp()
            log = open(os.path.join(work, 'debuginfod.log'), 'wb')
            # -t0: no rescans, -g0: no grooming; its database in a temp dir
            self.proc = subprocess.Popen(
                [exe, '-F', '-p', str(port), '-d', os.path.join(work, 'db.sqlite'), '-t', '0',
                 '-g', '0', self.directory],
                stdin=subprocess.DEVNULL, stdout=log, stderr=log, env=env,
                start_new_session=True)
            log.close()
            self.url = 'http://127.0.0.1:%d' % port
            # Ready when it serves every debug file (it scans in the
            # background); one that serves none, when it answers at all.
            waiting = ['/buildid/%s/debuginfo' % b for b in self.build_ids] or ['/metrics']
            deadline = time.monotonic() + timeout
            while waiting and time.monotonic() < deadline and self.proc.poll() is None:
                try:
                    probe = self.url + waiting[0]
                    with urllib.request.urlopen(probe, timeout=2) as r:
                        if r.status == 200:
                            waiting.pop(0)
                            continue
                except (urllib.error.URLError, OSError):
                    pass
                time.sleep(0.05)
            if not waiting:
                print('debuginfod on %s ready (attempt %d)' % (self.url, attempt))
                return
            self.stop()
            with open(os.path.join(work, 'debuginfod.log'), 'rb') as f:
                print('debuginfod (port %d) not ready:\n%s' % (port, tail(f.read().decode(
                    'utf-8', 'replace'))))
        raise FrameworkError('debuginfod did not serve %s within %d s' % (self.build_ids, timeout))

    def stop(self):
        if self.proc and self.proc.poll() is None:
            self.proc.kill()
        if self.proc:
            self.proc.wait()
        self.proc = None


def debug_file_lines(run, exe):
    """--debug=sym: what the search for exe's debug file found, one string
    per search ("PATH (debuginfod: fetched, 3.1 ms)", "none (...)")."""
    pat = re.compile(r'\]\s[\d.]+: debug file of %s: (.*)$' % re.escape(exe))
    found = [m.group(1) for m in map(pat.search, run.stderr_text().splitlines()) if m]
    print('debug file of %s: %s' % (os.path.basename(exe), found))
    return found


def empty_dir(path):
    for name in os.listdir(path):
        p = os.path.join(path, name)
        if os.path.isdir(p) and not os.path.islink(p):
            shutil.rmtree(p)
        else:
            os.unlink(p)


def case_debuginfod(session, chk):
    """A stripped fixture named through debuginfod (a local server serving
    its debug file): start routines and file:line; fetched once; then the
    server gone (refused), silent (ptwatch's own timeout), and back again
    (the symbol cache must not keep the answers learned without it)."""
    served = session.mkdtemp()
    bids = {}
    for name, stripped, debug in (('lifecycle', 'stripped', 'lifecycle_debug'),
                                  ('idle', 'idle_stripped', 'idle_debug')):
        bids[name] = build_id(fixture(stripped))
        if build_id(fixture(debug)) != bids[name]:
            raise FrameworkError('%s and %s have different build-ids' % (stripped, debug))
        shutil.copy(fixture(debug), os.path.join(served, name + '.debug'))
    exe, bid = fixture('stripped'), bids['lifecycle']
    client_cache, home = session.mkdtemp(), session.mkdtemp()
    fetched_file = os.path.join(client_cache, bid, 'debuginfo')
    server = Debuginfod(session, served, list(bids.values()))
    env = {'DEBUGINFOD_CACHE_PATH': client_cache, 'XDG_CACHE_HOME': home,
           'DEBUGINFOD_TIMEOUT': None, 'DEBUGINFOD_RETRY_LIMIT': None,
           'DEBUGINFOD_MAXTIME': None, 'DEBUGINFOD_PROGRESS': None}
    opts = ['-q', '--debug=sym']
    try:
        chk.prefix = '[not served] '
        # A server without the file: "not found" is an answer, not a failure
        # (no warning), and libdebuginfod records it as an empty file in
        # its cache, which must not count as a debug file.
        empty = Debuginfod(session, session.mkdtemp(), [])
        empty.start()
        env['DEBUGINFOD_URLS'] = empty.url
        try:
            run = session.run([exe], opts=opts, env=env)
        finally:
            empty.stop()
        check_lifecycle(chk, run, stripped=True)
        chk.eq('no warning', warning_codes(run.doc), [])
        lines = debug_file_lines(run, exe)
        chk.true('asked once: not found (%s)' % lines,
                 sum('debuginfod: No such file' in l for l in lines) == 1)
        chk.true('libdebuginfod recorded the miss (an empty file)',
                 os.path.isfile(fetched_file) and os.path.getsize(fetched_file) == 0)
        # and lets it expire at once: the next query goes to the server
        with open(os.path.join(client_cache, 'cache_miss_s'), 'w') as f:
            f.write('0\n')
        server.start()

        chk.prefix = '[--no-debug-files] '
        env['DEBUGINFOD_URLS'] = server.url
        run = session.run([exe], opts=opts + ['--no-debug-files'], env=env)
        check_lifecycle(chk, run, stripped=True)
        chk.true('debuginfod not asked', not debug_file_lines(run, exe))

        chk.prefix = '[served] '
        run = session.run([exe], opts=opts, env=env)
        check_lifecycle(chk, run)
        print('elapsed %.2f s' % run.elapsed)
        lines = debug_file_lines(run, exe)
        chk.true('the debug file was fetched by debuginfod into its client cache (%s)' % lines,
                 len(lines) == 1 and lines[0].startswith(fetched_file + ' (debuginfod: fetched'))
        chk.eq('no warning', warning_codes(run.doc), [])

        chk.prefix = '[served, again] '
        run = session.run([exe], opts=opts, env=env)
        check_lifecycle(chk, run)
        lines = debug_file_lines(run, exe)
        chk.true('not fetched again (%s)' % lines, not any('fetched' in l for l in lines))

        chk.prefix = '[attach] '
        # -p: fetched while the threads run, before they are stopped
        target = session.target('idle_stripped', [4])
        pid = target.ready(timeout=60)[0]
        run, proc = session.start_attach(pid, opts=('-q', '--duration=0.3', '--debug=sym,tracer'),
                                         env=env)
        session.wait(run, proc, 40)
        load_doc(run)
        log = run.stderr_text().splitlines()
        fetch = [i for i, l in enumerate(log) if re.search(
            r'debug file of \S*fixture-idle-stripped: \S+ \(debuginfod: fetched', l)]
        stopped = [i for i, l in enumerate(log) if 'attach: all stopped' in l]
        print('attach: fetched at log line %s, all stopped at %s' % (fetch, stopped))
        chk.true('fetched before the threads were stopped (lines %s, %s)' % (fetch, stopped),
                 len(fetch) == 1 and len(stopped) == 1 and fetch[0] < stopped[0])
        workers = [s for s in thread_spans(run.doc) if s['origin'] != 'main']
        chk.eq('attach: 4 workers', len(workers), 4)
        for s in workers:
            sr = s['start_routine'] or {}
            chk.true('attach: %s named idle_worker (idle.c)' % s['tid'],
                     sr.get('symbol') == 'idle_worker' and
                     os.path.basename(sr.get('file') or '') == 'idle.c', s)
        check_untouched(chk, pid, 'after the attach')
        target.send('q')
        check_target_exit(chk, target, 'released', timeout=30)

        chk.prefix = '[server gone] '
        server.stop()
        empty_dir(client_cache)
        run = session.run([exe], opts=opts, env=env, timeout=60)
        check_lifecycle(chk, run, stripped=True)
        check_stripped_text(chk, run)
        print('elapsed with a dead server: %.2f s' % run.elapsed)
        chk.true('bounded time with a dead server (%.2f s < 10 s)' % run.elapsed,
                 run.elapsed < 10)
        chk.eq('one warning', warning_codes(run.doc), ['debuginfod_failed'])
        lines = debug_file_lines(run, exe)
        chk.true('asked once (%s)' % lines,
                 sum('debuginfod: ' in l for l in lines) == 1 and
                 all(l.startswith('none') for l in lines))

        chk.prefix = '[silent server] '
        # Accepts connections (the kernel does, into the backlog) and never
        # answers: only a timeout ends the query. libdebuginfod's own default
        # is 90 s, three times; ptwatch's is 5 s, once.
        with socket.socket() as silent:
            silent.bind(('127.0.0.1', 0))
            silent.listen(16)
            env['DEBUGINFOD_URLS'] = 'http://127.0.0.1:%d' % silent.getsockname()[1]
            run = session.run([exe], opts=opts, env=env, timeout=60)
        check_lifecycle(chk, run, stripped=True)
        print('elapsed with a silent server: %.2f s' % run.elapsed)
        chk.true('bounded by ptwatch\'s DEBUGINFOD_TIMEOUT (%.2f s < 12 s)' % run.elapsed,
                 run.elapsed < 12)
        chk.eq('one warning', warning_codes(run.doc), ['debuginfod_failed'])
        msg = ' '.join(w['message'] for w in run.doc['warnings'])
        chk.true('it names the timeout (%s)' % msg, 'DEBUGINFOD_TIMEOUT=5' in msg)

        chk.prefix = '[server back] '
        server.start()
        env['DEBUGINFOD_URLS'] = server.url
        run = session.run([exe], opts=opts, env=env)
        check_lifecycle(chk, run)
        lines = debug_file_lines(run, exe)
        chk.true('fetched again (%s)' % lines,
                 len(lines) == 1 and lines[0].startswith(fetched_file + ' (debuginfod: fetched'))
        chk.eq('no warning', warning_codes(run.doc), [])
    finally:
        server.stop()
    chk.prefix = ''


def case_minidebuginfo(session, chk):
    """A stripped fixture with MiniDebugInfo (.gnu_debugdata, as Fedora
    ships): start routines and create sites named from it, without file:line;
    with and without debug files; through the symbol cache, also when a
    file of the same build-id but another content (the stripped copy) used
    the cache in between."""
    exe = fixture('minidebuginfo')
    home = session.mkdtemp()
    env = {'XDG_CACHE_HOME': home, 'DEBUGINFOD_URLS': None}
    for what, opts, fix, symbols in (('first run', ['-q'], exe, True),
                                     ('second run (cache)', ['-q'], exe, True),
                                     ('--no-debug-files', ['-q', '--no-debug-files'], exe, True),
                                     ('the stripped copy', ['-q'], fixture('stripped'), False),
                                     ('after the stripped copy', ['-q'], exe, True),
                                     ('again', ['-q'], exe, True)):
        chk.prefix = '[%s] ' % what
        run = session.run([fix], opts=opts + ['--debug=sym'], env=env)
        if symbols:
            check_lifecycle(chk, run, symbols_only=True)
        else:
            check_lifecycle(chk, run, stripped=True)
        opens = re.findall(r'cache \S+ for %s: ([^,]+),' % re.escape(fix), run.stderr_text())
        print('%s: cache %s' % (what, opens))
        if what == 'second run (cache)' or what == 'again':
            chk.eq('the cache was used', opens, ['loaded'])
    chk.prefix = ''


# 17. Ctrl-C in a real terminal (launch mode)

# ptwatch detaches on a second Ctrl-C that comes within this many seconds of
# the previous one (man page, SIGNALS).
SECOND_CTRL_C_S = 2.0


def case_ctrlc(session, chk, mode):
    """ptwatch -- ctrlc MODE as the foreground job of a pty, and ^C typed:
    the terminal's SIGINT reaches ptwatch and the command. ptwatch must go
    on tracing until the command has reacted and report what it did: die of
    SIGINT (die), exit 3 from its handler (handle); a command that ignores it
    (ignore) is traced on until a second ^C, then left running, untraced; one
    that handles the first and dies of the second (once) must not be said to
    live on when ptwatch lets go at the second."""
    reaper = become_subreaper()
    ready_r, ready_w = os.pipe()
    ctl_r, ctl_w = os.pipe()
    term = Terminal(session, [fixture('ctrlc'), mode], opts=(),
                    env={'PTW_READY_FD': str(ready_w), 'PTW_CTL_FD': str(ctl_r)},
                    pass_fds=(ready_w, ctl_r))
    run = term.run
    os.close(ready_w)
    os.close(ctl_r)
    pid = None
    status = None
    try:
        pid = int(read_line(ready_r, 20, 'ready').split()[1])
        # the fixture's main thread waits for a command
        if not wait_for(lambda: task_states(pid).get(pid) == 'S', 10, step=0.005):
            raise Failed('the fixture did not block: %s' % task_states(pid))
        term.interrupt()
        first = time.monotonic()
        if mode == 'die':
            term.wait(20, 'ptwatch did not end after ^C')
            chk.eq('ptwatch exit status (dies of SIGINT, as the command did)',
                   run.returncode, -signal.SIGINT)
        elif mode == 'handle':
            chk.eq('the fixture saw the SIGINT', read_line(ready_r, 20, 'sigint').split()[0],
                   'sigint')
            term.wait(20, 'ptwatch did not end after ^C')
            chk.eq('ptwatch exit status (the command\'s)', run.returncode, 3)
        elif mode == 'once':
            # handled, then its default action: the second ^C kills it,
            # and ptwatch, letting go, must not say it lives on
            chk.eq('the fixture saw the first SIGINT', read_line(ready_r, 20, 'sigint').split()[0],
                   'sigint')
            chk.eq('ptwatch still runs after the first ^C', term.poll(), None)
            second = time.monotonic()
            term.interrupt()
            term.wait(20, 'ptwatch did not end after the second ^C')
            chk.eq('ptwatch exit status (dies of SIGINT, as the command did)',
                   run.returncode, -signal.SIGINT)
        else:
            term.expect(r'\bsignal\s+SIGINT', 20, 'the SIGINT delivery line')
            chk.eq('ptwatch still runs after the first ^C', term.poll(), None)
            chk.true('the fixture is still traced after the first ^C (tracers %s)'
                     % tracer_pids(pid), pid in tracer_pids(pid))
            os.write(ctl_w, b't')
            made = int(read_line(ready_r, 20, 'made').split()[1])
            term.expect(r'tid %d made_worker\b' % made, 20,
                        'the thread made after the first ^C')
            second = time.monotonic()
            term.interrupt()
            try:
                term.wait(5, 'ptwatch did not detach after a second ^C')
            except Failed:
                # Only if the second one came too late to count as such.
                if second - first <= SECOND_CTRL_C_S:
                    raise
                print('note: second ^C %.2f s after the first; typing a third'
                      % (second - first))
                term.interrupt()
                term.wait(5, 'ptwatch did not detach after two quick ^C')
            chk.eq('ptwatch exit status after the second ^C', run.returncode, 128 + signal.SIGINT)
            check_untouched(chk, pid, 'after the second ^C')
            os.write(ctl_w, b'q')
            if reaper:
                status = wait_pid(pid, 10)
                chk.true('the fixture exited 0 after the detach (status %r)' % status,
                         isinstance(status, int) and os.WIFEXITED(status)
                         and os.WEXITSTATUS(status) == 0)
    finally:
        term.close()
        if pid is not None and status is None and reaper and wait_pid(pid, 0.1) is None:
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            wait_pid(pid, 5)
        os.close(ready_r)
        os.close(ctl_w)

    text = term.text()
    print('terminal:\n%s' % tail(text, 12))
    doc = load_doc(run)
    load_truth(run)
    interrupts = doc['session'].get('interrupts')
    chk.true('session.interrupts: the first ^C, which reached the command (got %r)'
             % (interrupts,),
             isinstance(interrupts, list) and interrupts
             and interrupts[0].get('signal') == 'SIGINT'
             and interrupts[0].get('reached_target') is True
             and interrupts[0].get('action') == 'traced_on')
    if mode in ('die', 'handle', 'once'):
        want = {'signal': 'SIGINT', 'core_dumped': False} if mode != 'handle' else {'code': 3}
        chk.eq('target.exit', doc['target']['exit'], want)
        if mode == 'once' and doc['session']['end_reason'] != 'target_exited':
            # ptwatch let go at the second ^C and passed it on; it killed.
            # (Or the command's delivery came first, and ended it traced.)
            chk.true('second ^C within %.1f s (%.2f s)' % (SECOND_CTRL_C_S, second - first),
                     second - first <= SECOND_CTRL_C_S)
            chk.true('target.fate: ended (got %r)' % doc['target'].get('fate'),
                     doc['target'].get('fate') in ('ended', 'ended_after_detach'))
            chk.eq('session.end_reason', doc['session']['end_reason'], 'interrupted')
            chk.eq('session.interrupts: the second ^C detached',
                   [i.get('action') for i in interrupts or []], ['traced_on', 'detached'])
        else:
            chk.eq('target.fate', doc['target'].get('fate'), 'ended')
            chk.eq('session.end_reason', doc['session']['end_reason'], 'target_exited')
        chk.true('the terminal does not say "lives on"', 'lives on' not in text)
        end = r'process (was )?killed by SIGINT' if mode != 'handle' else 'process exited with code 3'
        chk.true('the summary says "%s"' % end, re.search(end, text))
        chk.true('the log shows the SIGINT delivery', re.search(r'\bsignal\s+SIGINT', text))
        if mode == 'handle':
            Model(chk, run, 'ctrlc.c').check_complete()
    else:
        chk.eq('target.exit', doc['target']['exit'], None)
        chk.eq('target.fate', doc['target'].get('fate'), 'lives_on')
        chk.eq('session.end_reason', doc['session']['end_reason'], 'interrupted')
        chk.true('session.interrupts: the last one detached (got %r)' % (interrupts,),
                 isinstance(interrupts, list) and len(interrupts) >= 2
                 and interrupts[-1].get('action') == 'detached')
        chk.true('the summary says the process lives on',
                 re.search(r'detached \(interrupted\), process %d lives on' % pid, text))
        made_spans = [sp for sp in thread_spans(doc)
                      if (sp.get('start_routine') or {}).get('symbol') == 'made_worker']
        chk.true('the thread made after the first ^C was traced to its end (%r)' % made_spans,
                 len(made_spans) == 1 and made_spans[0]['status'] == 'completed')



# ---------------------------------------------------------------------------
# 20. open timeouts (--open-timeout): a span open past the limit is reported
# as it crosses it, with where its thread is; it keeps open_after_ns when it
# ends later. The fixture (slow) holds a thread until the test, having seen
# that report, releases it: no sleep orders anything.

def open_lines(run, tid):
    """ptwatch's "open" event lines for thread tid: [(line, span id)]."""
    rx = re.compile(r'^\s*\d+\.\d+\s+%d open\s+\[(\d+)\] ' % tid)
    return [(line, int(m.group(1))) for line in run.stderr_text().splitlines()
            for m in [rx.match(line)] if m]


def wait_open_line(run, proc, tid, timeout=20):
    """The first "open" event line for tid on ptwatch's stderr, once it is
    there (ptwatch writes its event lines out before it waits)."""
    def seen():
        read_outputs(run)
        return open_lines(run, tid) or proc.poll() is not None
    wait_for(seen, timeout)
    lines = open_lines(run, tid)
    if not lines:
        raise Failed('no "open" event line for thread %d within %d s (ptwatch exit %s)\n'
                     'stderr:\n%s' % (tid, timeout, proc.poll(), tail(run.stderr_text())))
    return lines[0]


def open_for_ns(line):
    """The duration in an "open ... open for 201.23 ms" line, in ns."""
    m = re.search(r' open for (?:at least )?([0-9.]+) (ns|us|ms|s),', line)
    if not m:
        return None
    return int(float(m.group(1)) * {'ns': 1, 'us': 1e3, 'ms': 1e6, 's': 1e9}[m.group(2)])


def check_open_line(chk, line, what, limit_ns):
    """The line names the span (routine, name) and says how long and where."""
    chk.true('%s: names the thread and its start routine (%r)' % (what, line),
             ' slow-holder ' in line and ' slow_holder' in line)
    took = open_for_ns(line)
    chk.true('%s: open for at least the limit, %d ns (got %r in %r)' % (what, limit_ns, took, line),
             took is not None and limit_ns <= took < limit_ns + 5 * 10**9)
    # /proc says where it is; the thread was not stopped for it (not 't')
    chk.true('%s: says where the thread is now: sleeping in read (%r)' % (what, line),
             ', now S read' in line)


def check_open_where(chk, span, what):
    """open_where: the holder sleeps in read(), called from libc's read."""
    where = span.get('open_where') or {}
    chk.eq('%s: open_where.state' % what, where.get('state'), 'S read', span)
    pc = where.get('pc') or {}
    chk.true('%s: open_where.pc in libc (%r)' % (what, pc),
             'libc' in (pc.get('module') or ''), span)


def check_bad_open_timeouts(session, chk):
    for bad in ('abc', '-1', '', '1s', 'nan'):
        run = session.run(['/bin/true'], opts=['--open-timeout', bad], load=False, timeout=20)
        lines = attach_stderr_lines(run)
        chk.eq('--open-timeout %r: exit status' % bad, run.returncode, 2)
        chk.true('--open-timeout %r: one line names the value (%r)' % (bad, lines),
                 len(lines) >= 1 and lines[0].startswith('ptwatch: invalid open timeout')
                 and repr(bad).strip('\'') in lines[0])


def case_open_timeout(session, chk):
    check_bad_open_timeouts(session, chk)
    limit = 200 * 10**6
    ctl_r, ctl_w = os.pipe()
    rep_r, rep_w = os.pipe()
    run, proc = session.start([fixture('slow')], opts=['--open-timeout', '0.2'],
                              env={'PTW_CTL_FD': str(ctl_r), 'PTW_REPLY_FD': str(rep_w)},
                              pass_fds=(ctl_r, rep_w))
    os.close(ctl_r)
    os.close(rep_w)
    try:
        words = read_line(rep_r, 20, 'ready').split()
        holder, quick = int(words[2]), int(words[3])
        line, span_id = wait_open_line(run, proc, holder)
        check_open_line(chk, line, 'open line of the holder', limit)
        chk.eq('the holder still blocks in read() when reported (ptwatch exit %s)' % proc.poll(),
               proc.poll(), None)
        os.write(ctl_w, b'r')
        chk.eq('the fixture finishes once released', read_line(rep_r, 20, 'done').strip(),
               'done')
        session.wait(run, proc, 20, 'ptwatch did not exit after the command')
    finally:
        end_group(proc)
        os.close(ctl_w)
        os.close(rep_r)
    load_truth(run)
    doc = load_doc(run)
    chk.eq('exit status: the command\'s', run.returncode, 0)
    chk.eq('session.open_timeout_ns', doc['session'].get('open_timeout_ns'), limit)
    spans = {s['tid']: s for s in thread_spans(doc)}
    h, q = spans.get(holder), spans.get(quick)
    if not chk.true('spans for the holder and the quick thread', h and q, sorted(spans)):
        return
    chk.eq('the open line names the holder\'s span', span_id, h['id'])
    chk.eq('one open line for the holder', len(open_lines(run, holder)), 1)
    chk.eq('no open line for the quick thread', open_lines(run, quick), [])
    chk.eq('holder: status (it returned, late)', h['status'], 'completed', h)
    chk.eq('holder: end.value', (h['end'] or {}).get('value'), '0x5107', h)
    chk.eq('holder: name', h['name'], 'slow-holder', h)
    after = h.get('open_after_ns')
    if chk.true('holder: open_after_ns set (got %r)' % after, isinstance(after, int), h):
        chk.true('holder: create_ns + limit <= open_after_ns < end_ns',
                 h['create_ns'] + limit <= after < h['end_ns'], h)
    check_open_where(chk, h, 'holder')
    chk.eq('quick: status', q['status'], 'completed', q)
    chk.eq('quick: open_after_ns (it ended in time)', q.get('open_after_ns'), None, q)
    main_span = [s for s in thread_spans(doc) if s['origin'] == 'main'][0]
    chk.true('main: open past the limit too (it outlived the holder)',
             isinstance(main_span.get('open_after_ns'), int), main_span)
    chk.eq('metrics.open_timeouts (main and the holder)', doc['metrics'].get('open_timeouts'), 2)
    # where the thread was came from /proc: no thread was interrupted for it
    chk.eq('no interrupt stop (session.stops)', doc['session']['stops'].get('interrupt'), None,
           doc['session']['stops'])
    text = run.stderr_text()
    end = [x for x in text.splitlines() if re.match(r'^\s*\d+\.\d+\s+%d end\s+\[%d\]' % (holder, h['id']), x)]
    chk.true('the holder\'s end line says it was slow (%r)' % end,
             len(end) == 1 and '(slow: open past ' in end[0])
    chk.true('the summary counts it ("2 seen open past 200.00 ms")',
             ', 2 seen open past 200.00 ms' in text,
             tail(text, 12))
    for t in truth_of(run, 'thread'):
        span = spans.get(t['tid'])
        if span:
            chk.eq('thread %s: end.value matches the truth' % t['tid'],
                   (span['end'] or {}).get('value'), t['value'], span)


def case_attach_open_timeout(session, chk, end='sigint'):
    """ptwatch -p PID --open-timeout 0.2 on a process whose thread blocks:
    the thread is reported open, then ptwatch lets go (SIGINT) and its span
    is open (not unmatched) with open_after_ns; or (kill9) ptwatch's tracer
    process is killed: the restorer's document says tracer_died and keeps
    open_after_ns. Either way the target runs on and finishes."""
    limit = 200 * 10**6
    target = session.target('slow')
    pid, holder, quick = target.ready()
    run, proc = start_attached(session, target, opts=['--open-timeout', '0.2'])
    try:
        line, span_id = wait_open_line(run, proc, holder)
        check_open_line(chk, line, 'open line of the holder', limit)
        if end == 'kill9':
            tracer = ptwatch_processes(proc.pid).get('tracer')
            if not tracer:
                raise Skip('no tracer process (ptwatch runs in one process here)')
            os.kill(tracer, signal.SIGKILL)
            session.wait(run, proc, 20, 'ptwatch did not exit after its tracer was killed')
        else:
            os.kill(proc.pid, signal.SIGINT)
            session.wait(run, proc, 20, 'ptwatch did not let go after SIGINT')
    finally:
        end_group(proc)
    doc = load_doc(run)
    if end == 'kill9':
        chk.eq('session.end_reason', doc['session']['end_reason'], 'tracer_died')
    else:
        check_attach_doc(chk, run, pid, 'interrupted')
    chk.eq('session.open_timeout_ns', doc['session'].get('open_timeout_ns'), limit)
    spans = {s['tid']: s for s in thread_spans(doc)}
    h = spans.get(holder)
    if not chk.true('a span for the holder', h, sorted(spans)):
        return
    chk.eq('the open line names the holder\'s span', span_id, h['id'])
    chk.eq('holder: origin', h['origin'], 'preexisting', h)
    chk.true('the open line says "at least": it ran before the attach (%r)' % line,
             ' open for at least ' in line)
    if end == 'kill9':
        chk.eq('holder: status (the tracer died while tracing)', h['status'], 'unmatched', h)
        chk.eq('holder: end.reason', (h['end'] or {}).get('reason'), 'tracer_died', h)
    else:
        check_open(chk, h, 'holder')
        chk.eq('metrics.unmatched_spans', doc['metrics']['unmatched_spans'], 0)
    after = h.get('open_after_ns')
    chk.true('holder: open_after_ns set (got %r)' % after, isinstance(after, int), h)
    check_open_where(chk, h, 'holder')
    chk.true('metrics.open_timeouts >= 1 (got %r)' % doc['metrics'].get('open_timeouts'),
             (doc['metrics'].get('open_timeouts') or 0) >= 1)
    target.check_alive('after ptwatch ended')
    wait_untraced(pid, 5)
    check_untouched(chk, pid, 'after ptwatch ended')
    target.send('r')
    chk.eq('the target finishes once released', target.line(20, 'done'), 'done')
    check_target_exit(chk, target, 'after ptwatch ended')

# ---------------------------------------------------------------------------
# 18. --trace: frame spans (fixture-frames, fixture-frames-cxx)

def frame_spans(doc):
    return [s for s in doc['spans'] if s['kind'] == 'frame']


def frame_symbol(fr):
    return (fr.get('function') or {}).get('symbol')


def check_frames_sane(chk, doc):
    """What holds for every frame span: its parent is a frame of the same
    thread one level up that encloses it; its thread span has its tid;
    completed ones have a return at or after their entry, unmatched ones a
    reason; ids are 1..n."""
    frames = frame_spans(doc)
    by_id = {f['id']: f for f in frames}
    chk.eq('frame ids are 1..n', sorted(by_id), list(range(1, len(frames) + 1)))
    threads = {s['id']: s for s in thread_spans(doc)}
    for fr in frames:
        what = 'frame %d (%s, tid %d)' % (fr['id'], frame_symbol(fr), fr['tid'])
        ts = threads.get(fr['thread_span'])
        chk.true('%s: its thread span has its tid' % what, ts is not None and ts['tid'] == fr['tid'],
                 fr)
        if fr['parent'] is None:
            chk.eq('%s: depth without a parent' % what, fr['depth'], 1, fr)
        else:
            p = by_id.get(fr['parent'])
            chk.true('%s: parent of the same thread, one level up, entered before' % what,
                     p is not None and p['tid'] == fr['tid'] and p['depth'] + 1 == fr['depth'] and
                     p['entry_ns'] <= fr['entry_ns'], fr)
            if p is not None and p['return_ns'] is not None and fr['return_ns'] is not None:
                chk.true('%s: returns before its parent' % what,
                         fr['return_ns'] <= p['return_ns'], fr)
        if fr['status'] == 'completed':
            chk.true('%s: return at or after entry' % what,
                     fr['return_ns'] is not None and fr['return_ns'] >= fr['entry_ns'] and
                     fr['duration_ns'] == fr['return_ns'] - fr['entry_ns'] and
                     fr['reason'] is None, fr)
        else:
            chk.true('%s: no return, a reason' % what,
                     fr['return_ns'] is None and fr['reason'], fr)


def check_same_as_untraced(chk, session, cmd, traced, env=None):
    """The target's output and exit status do not depend on --trace."""
    plain = session.run(cmd, opts=['-q'], env=env)
    chk.eq('exit status with and without --trace', traced.returncode, plain.returncode)
    chk.eq('output with and without --trace', traced.stdout_text(), plain.stdout_text())


def expect_frames(chk, doc, expected):
    """expected: [(symbol, depth, parent symbol or None, status, reason)] in
    entry order, for one thread."""
    got = []
    by_id = {f['id']: f for f in frame_spans(doc)}
    for fr in sorted(frame_spans(doc), key=lambda f: f['id']):
        parent = by_id.get(fr['parent'])
        got.append((frame_symbol(fr), fr['depth'], frame_symbol(parent) if parent else None,
                    fr['status'], fr['reason']))
    chk.eq('frames (symbol, depth, parent, status, reason)', got, expected)


def case_frames(session, chk, mode='recursion'):
    exe = fixture('frames')
    cmd = [exe, mode]
    opts = ['--trace', 'fr_*']
    env = None
    if mode == 'lib':
        cmd.append(fixture('framemod'))
        opts = ['--trace', 'libptwframelib.so*:fr_lib_*', '--trace', 'fr_mod_*',
                '--trace', 'zz_matches_nothing_*', '--trace', 'libnothere.so:fr_*']
    run = session.run(cmd, opts=opts)
    check_frames_sane(chk, run.doc)
    frames = frame_spans(run.doc)
    m = run.doc['metrics']
    chk.eq('metrics.frames.count', (m.get('frames') or {}).get('count'), len(frames))
    if mode == 'recursion':
        check_exit(chk, run, code=0)
        calls = truth_of(run, 'calls')
        chk.eq('threads that recursed', len(calls), 4)
        for c in calls:
            mine = [f for f in frames if f['tid'] == c['tid']]
            what = 'tid %d' % c['tid']
            chk.eq('%s: calls of fr_rec' % what, len(mine), c['calls'])
            chk.true('%s: every call completed' % what,
                     all(f['status'] == 'completed' and frame_symbol(f) == 'fr_rec' for f in mine))
            chk.eq('%s: depths' % what, sorted(f['depth'] for f in mine),
                   sorted(list(range(1, c['max_depth'] + 1)) * (c['calls'] // c['max_depth'])))
            # fr_rec(n) returns n + ... + 1: the value tells the depth
            for f in mine:
                n = c['max_depth'] - f['depth'] + 1
                chk.eq('%s: frame %d value' % (what, f['id']), f['value'], hex(n * (n + 1) // 2), f)
        fn = [x for x in m.get('functions', []) if x['function']['symbol'] == 'fr_rec']
        chk.true('metrics.functions: fr_rec with every call', len(fn) == 1 and
                 fn[0]['calls'] == 40 and fn[0]['completed'] == 40 and
                 fn[0]['self_ns'] <= fn[0]['total_ns'], fn)
    elif mode == 'longjmp':
        check_exit(chk, run, code=0)
        expect_frames(chk, run.doc, [
            ('fr_top', 1, None, 'completed', None),
            ('fr_mid', 2, 'fr_top', 'unmatched', 'longjmp'),
            ('fr_inner', 3, 'fr_mid', 'unmatched', 'longjmp'),
            ('fr_leaf', 2, 'fr_top', 'completed', None)])
    elif mode == 'tail':
        check_exit(chk, run, code=0)
        expect_frames(chk, run.doc, [
            ('fr_tail_a', 1, None, 'unmatched', 'tail_call'),
            ('fr_tail_b', 1, None, 'completed', None)])
    elif mode == 'lib':
        check_exit(chk, run, code=0)
        expect_frames(chk, run.doc, [
            ('fr_lib_fn', 1, None, 'completed', None),
            ('fr_mod_fn', 1, None, 'completed', None),
            ('fr_mod_fn', 1, None, 'completed', None)])
        mods = [os.path.basename((f['function'] or {}).get('module') or '') for f in frames]
        chk.eq('modules', mods, ['libptwframelib.so', 'libptwframemod.so', 'libptwframemod.so'])
        msgs = [w['message'] for w in run.doc['warnings'] if w['code'] == 'trace_no_match']
        chk.true('a warning names the pattern that matched nothing (%r)' % msgs,
                 any("'zz_matches_nothing_*'" in x for x in msgs))
        chk.true('a warning names the module that is not there (%r)' % msgs,
                 any('libnothere.so' in x for x in msgs))
        chk.true('no warning for the patterns that matched (%r)' % msgs,
                 not any('fr_mod_' in x or 'fr_lib_' in x for x in msgs))
    elif mode == 'ends':
        check_exit(chk, run, code=3)
        ends = {r['fn']: r for r in truth_of(run, 'end')}
        chk.eq('truth: three ends', sorted(ends), ['fr_cancelled', 'fr_doexit', 'fr_exiter'])
        for fr in frames:
            t = ends.get(frame_symbol(fr))
            chk.true('frame %s is expected' % frame_symbol(fr), t is not None, fr)
            if t:
                chk.eq('%s: tid' % t['fn'], fr['tid'], t['tid'], fr)
                chk.eq('%s: status' % t['fn'], fr['status'], 'unmatched', fr)
                chk.eq('%s: reason' % t['fn'], fr['reason'], t['reason'], fr)
        chk.eq('three frames', len(frames), 3)
    check_same_as_untraced(chk, session, cmd, run)
    text = run.stderr_text()
    if frames:
        chk.true('the summary lists the frames and the functions',
                 'frames: %d calls' % len(frames) in text and 'FUNCTION' in text, text[-3000:])


def case_frames_cxx(session, chk):
    """A C++ exception thrown through traced frames, caught above them."""
    exe = fixture('frames_cxx')
    run = session.run([exe], opts=['--trace', 'frx::*'])
    check_exit(chk, run, code=0)
    check_frames_sane(chk, run.doc)
    chk.eq('the result', one_truth(run, 'cxx_frames')['result'], 43)
    expect_frames(chk, run.doc, [
        ('frx::catcher(int)', 1, None, 'completed', None),
        ('frx::a(int)', 2, 'frx::catcher(int)', 'unmatched', 'exception'),
        ('frx::b(int)', 3, 'frx::a(int)', 'unmatched', 'exception'),
        ('frx::c(int)', 4, 'frx::b(int)', 'unmatched', 'exception'),
        ('frx::after(int)', 2, 'frx::catcher(int)', 'completed', None)])
    for fr in frame_spans(run.doc):
        chk.true('linkage name of %s' % frame_symbol(fr),
                 (fr['function'].get('linkage_name') or '').startswith('_ZN3frx'), fr)
    check_same_as_untraced(chk, session, [exe], run)


def case_frames_attach(session, chk):
    """--trace with -p: frames open at the attach (fr_serve) are not
    reported; fr_outer -> fr_block entered while traced are, and are
    unmatched 'detach' when ptwatch lets go with them open; the target then
    returns through their return sites (no int3 left) and goes on."""
    target = session.target('frames', ['attach'])
    pid = target.ready()[0]
    before = exec_mappings(pid)
    run, proc = start_attached(session, target, opts=['--trace', 'fr_*'])
    try:
        chk.eq('a first call while traced', target.ask('a'), ['in'])
        chk.eq('its return', target.ask('x'), ['out', '6'])
        # the second call stays open: ptwatch lets go meanwhile
        chk.eq('a second call while traced', target.ask('a'), ['in'])
        os.kill(proc.pid, signal.SIGINT)
        session.wait(run, proc, 20, 'ptwatch did not let go after SIGINT')
    finally:
        end_group(proc)
    load_doc(run)
    check_frames_sane(chk, run.doc)
    expect_frames(chk, run.doc, [
        ('fr_outer', 1, None, 'completed', None),
        ('fr_block', 2, 'fr_outer', 'completed', None),
        ('fr_outer', 1, None, 'unmatched', 'detach'),
        ('fr_block', 2, 'fr_outer', 'unmatched', 'detach')])
    chk.true('fr_serve, running at the attach, is not reported',
             not any(frame_symbol(f) == 'fr_serve' for f in frame_spans(run.doc)))
    target.check_alive('after the detach')
    compare_mappings(chk, before, exec_mappings(pid), 'after the detach')
    check_untouched(chk, pid, 'after the detach')
    diffs = text_diffs(pid)
    if diffs is not None:
        chk.eq('text bytes that differ from the files after the detach', diffs, [])
    target.send('x')
    chk.eq('the open call returns after the detach', target.line(20, 'out'), 'out 12')
    target.send('q')
    check_target_exit(chk, target, 'after the detach')


def case_frames_kill9(session, chk):
    """ptwatch --trace -- COMMAND with frames open (their return sites
    patched) and its tracer process SIGKILLed: every byte is put back, the
    command returns through them and exits 0."""
    ctl_r, ctl_w = os.pipe()
    rep_r, rep_w = os.pipe()
    run, proc = session.start([fixture('frames'), 'attach'], opts=['-q', '--trace', 'fr_*'],
                              env={'PTW_CTL_FD': str(ctl_r), 'PTW_REPLY_FD': str(rep_w)},
                              pass_fds=(ctl_r, rep_w))
    os.close(ctl_r)
    os.close(rep_w)
    try:
        pid = int(read_line(rep_r, 20, 'ready').split()[1])
        traced = wait_traced(pid)
        os.write(ctl_w, b'a')
        chk.eq('in the traced call', read_line(rep_r, 20, 'in').strip(), 'in')
        diffs = text_diffs(pid)
        chk.true('entry and return breakpoints in while traced (%s)' % diffs,
                 diffs is None or len(diffs) >= 2)
        kill_tracer(chk, proc.pid, set(traced.values()))
        chk.true('TracerPid 0 within 2 s of the kill', wait_untraced(pid, 2) is not None)
        diffs = text_diffs(pid)
        if diffs is not None:
            chk.eq('text bytes that differ from the files after the kill', diffs, [])
        os.write(ctl_w, b'x')
        chk.eq('the open calls return after the kill', read_line(rep_r, 10, 'out').strip(),
               'out 6')
        os.write(ctl_w, b'q')
        session.wait(run, proc, 20, 'ptwatch did not exit after the command')
    finally:
        end_group(proc)
        os.close(ctl_w)
        os.close(rep_r)
    chk.eq('ptwatch exit status: the command\'s', run.returncode, 0)
    chk.eq('the command finished ("attach_done" record)',
           len([r for r in load_truth(run) if r.get('kind') == 'attach_done']), 1)
    # The restorer wrote the document from the record: the open calls are
    # there, unmatched tracer_died.
    load_doc(run)
    chk.eq('end_reason', run.doc['session']['end_reason'], 'tracer_died')
    expect_frames(chk, run.doc, [
        ('fr_serve', 1, None, 'unmatched', 'tracer_died'),
        ('fr_outer', 2, 'fr_serve', 'unmatched', 'tracer_died'),
        ('fr_block', 3, 'fr_outer', 'unmatched', 'tracer_died')])


def case_frames_stripped(session, chk):
    """--trace on a stripped program: its static functions cannot be found;
    the warning names the pattern and the module only .dynsym could be
    searched in; thread spans as without --trace."""
    exe = fixture('stripped')
    run = session.run([exe], opts=['--trace', 'worker*'])
    check_lifecycle(chk, run, stripped=True)
    msgs = [w['message'] for w in run.doc['warnings'] if w['code'] == 'trace_no_match']
    chk.true('the warning names the pattern and the stripped module (%r)' % msgs,
             any("'worker*'" in x and os.path.basename(exe) in x and 'dynamic symbols' in x
                 for x in msgs))
    chk.eq('no frame spans', frame_spans(run.doc), [])
    check_same_as_untraced(chk, session, [exe], run)


def case_frames_exec(session, chk):
    """--trace through an execve by a thread: the calls under way in the old
    image are unmatched 'exec'; the new image is traced again."""
    exe = fixture('execthread')
    run = session.run([exe], opts=['--trace', 'exec*', '--trace', '*_worker'])
    check_exit(chk, run, code=0)
    check_frames_sane(chk, run.doc)
    frames = frame_spans(run.doc)
    execs = [f for f in frames if (frame_symbol(f) or '').startswith('exec')]
    chk.true('the exec call is unmatched exec (%r)' % [(frame_symbol(f), f['reason'])
                                                       for f in execs],
             execs and all(f['status'] == 'unmatched' and f['reason'] == 'exec' for f in execs))
    after = [f for f in frames if frame_symbol(f) == 'after_exec_worker']
    chk.true('the new image is traced: after_exec_worker completed (%r)' % after,
             len(after) == 1 and after[0]['status'] == 'completed')
    check_same_as_untraced(chk, session, [exe], run)


def case_frames_pthread(session, chk, variant='default'):
    """--trace on the very functions ptwatch hooks for thread spans
    (pthread_create, pthread_exit, pthread_join, __nptl_death_event,
    _dl_debug_state, the start routines): the thread spans are exactly as
    without --trace, and their calls are frames too. no-debug-files: the
    start routines' return site carries ptwatch's own hook as well."""
    exe = fixture('nested')
    extra = ['--no-debug-files'] if variant == 'no-debug-files' else []
    run = session.run([exe], opts=['-q', '--trace', 'pthread_*', '--trace', '__nptl_*',
                                   '--trace', '_dl_debug_state', '--trace', 'level_*'] + extra)
    check_exit(chk, run, code=0)
    m = Model(chk, run, 'nested.c')
    m.check_complete()
    check_frames_sane(chk, run.doc)
    frames = frame_spans(run.doc)
    count = {}
    for f in frames:
        count[frame_symbol(f)] = count.get(frame_symbol(f), 0) + 1
    for fn in ('pthread_create', 'pthread_join', 'level_b', 'level_c', '__nptl_death_event'):
        chk.true('%s is traced (%r)' % (fn, count), count.get(fn, 0) >= 1)
    exits = [f for f in frames if frame_symbol(f) == 'pthread_exit']
    chk.true('pthread_exit: unmatched thread_exit (%r)' % exits,
             len(exits) == 1 and exits[0]['reason'] == 'thread_exit')
    levels = [f for f in frames if frame_symbol(f) in ('level_b', 'level_c')]
    chk.true('level_b and level_c return (%r)' % levels,
             len(levels) == 2 and all(f['status'] == 'completed' for f in levels))
    check_same_as_untraced(chk, session, [exe], run)


def case_frames_usage(session, chk):
    """Bad --trace input: one clear line, exit status 2, nothing run."""
    for opts, words in ((['--trace', ''], "invalid --trace pattern ''"),
                        (['--trace', 'libfoo.so:'], "invalid --trace pattern 'libfoo.so:'"),
                        (['--trace', 'x', '--snapshot', '-p', str(os.getpid())],
                         '--trace cannot be used with --snapshot')):
        argv = [ptwatch_path()] + opts + ([] if '-p' in opts else ['--', 'true'])
        p = subprocess.run(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=20)
        err = p.stderr.decode()
        chk.eq('%s: exit status' % opts, p.returncode, 2)
        chk.true('%s: says %r (%r)' % (opts, words, err),
                 err.splitlines()[:1] and words in err.splitlines()[0])


# ---------------------------------------------------------------------------
# The live table (--live) in a real terminal: tmux, read with capture-pane.

def live_row(tid):
    """A thread view row of tid (first column)."""
    return r'^\s*%d\s' % tid


def live_counts(term, active, created, ended, what):
    term.expect(r'active %d\s+created %d\s+ended %d\b' % (active, created, ended), 20,
                'the counts: active %d, created %d, ended %d (%s)' % (active, created, ended, what))


def live_no_row(term, tid, what, timeout=15):
    term.expect(lambda text: not re.search(live_row(tid), text, re.M), timeout, what)


def shell_quote(argv):
    return ' '.join("'%s'" % a.replace("'", "'\\''") for a in argv)


def case_live(session, chk, mode):
    """ptwatch with its live table in tmux, on the live fixture, whose
    threads come and go when the test says so.
    attach: -p PID (the table is on by default: stderr is a terminal): rows
      appear and fade out, counts, routine view, filter, sort, pause,
      resize; q lets go, the fixture runs on, untraced; the screen and the
      shell's lines before are back, then the summary.
    ctrlc: --no-live keeps the event lines; then the table, and Ctrl-C
      restores the screen (the shell's lines are back) and detaches.
    launch: without --live a launched command keeps the terminal (event
      lines); with --live its terminal output goes to /dev/null (it does
      not garble the table), and q lets it run on."""
    if mode == 'stuck':
        live_stuck(session, chk)
        return
    term = Tmux(session, 120, 30)
    try:
        if mode == 'launch':
            live_launch(chk, term)
        elif mode == 'ends':
            live_ends(session, chk, term)
        elif mode == 'filter':
            live_filter(session, chk, term)
        else:
            live_attach(session, chk, term, mode)
    finally:
        term.close()


def processes_named(first, pid):
    """The pids whose command line starts with `first` and has -p PID."""
    found = []
    for entry in os.listdir('/proc'):
        if not entry.isdigit():
            continue
        try:
            with open('/proc/%s/cmdline' % entry, 'rb') as f:
                args = f.read().split(b'\0')
        except OSError:
            continue
        if args and args[0].endswith(first.encode()) and str(pid).encode() in args:
            found.append(int(entry))
    return found


def live_stuck(session, chk):
    """A terminal that stops taking output (nobody reads the pty) must not
    hold the tracer up: ptwatch --live -p on a pty the test does not read,
    made to redraw the whole table again and again (size changes), while
    the fixture makes threads, which it can only do if ptwatch serves their
    breakpoints."""
    import fcntl
    import struct
    import termios
    target = session.target('live')
    pid = target.ready()[0]
    term = Terminal(session, (), opts=('--live',), env={'TERM': 'xterm'}, pid=pid)
    try:
        term.expect(r'ptwatch -p %d' % pid, 20, 'the live table')

        def unread():
            return struct.unpack('i', fcntl.ioctl(term.master, termios.FIONREAD, b'\0' * 4))[0]
        made = []

        def round_(i):
            # a new size: the whole table again; a thread made (and, every
            # other round, one ended): only if ptwatch serves its stops
            fcntl.ioctl(term.master, termios.TIOCSWINSZ,
                        struct.pack('HHHH', 40 + i % 2, 150 + i % 2, 0, 0))
            made.append(int(target.ask('c', 10)[1]))
            if i % 2:
                target.ask('e', 10)
        # until the terminal's buffer is full (each redraw is 4 KiB or more,
        # at most one per 50 ms): bounded
        i = 0
        while unread() < 4000 and i < 200:
            before = unread()
            round_(i)
            wait_for(lambda: unread() > before, 0.5, step=0.01)
            i += 1
        stuck = unread()
        print('terminal stuck with %d bytes unread after %d rounds' % (stuck, i))
        chk.true('the terminal was stuck: %d bytes unread (its 4 KiB buffer full)' % stuck,
                 stuck >= 4000)
        # and stays stuck while the fixture goes on making threads
        for j in range(i, i + 30):
            round_(j)
        chk.eq('ptwatch still runs', term.poll(), None)
        # the terminal reads again: the table catches up
        term.expect(r'%d pool-\d' % made[-1], 20, 'the last thread made, %d' % made[-1])
        os.write(term.master, b'q')
        term.wait(20, 'ptwatch did not end after q')
        chk.eq('ptwatch exit status after q', term.run.returncode, 0)
        check_untouched(chk, pid, 'after q')
        chk.eq('the fixture still answers', target.ask('p'), ['pong'])
    finally:
        term.close()


def live_ends(session, chk, term):
    """The other ways out: the target exits, SIGTERM to ptwatch, SIGKILL
    of its tracer process (the front puts the terminal back); Ctrl-Z does
    not stop ptwatch under the table."""
    for way in ('exit', 'sigterm', 'sigkill', 'sigkill-front'):
        target = session.target('live')
        pid = target.ready()[0]
        term.line('clear; echo BEFORE-MARK-%s' % way)
        term.expect(r'^BEFORE-MARK-%s' % way, 10, 'the echo')
        opts = ['--open-timeout=0.3'] if way == 'exit' else []
        term.line(shell_quote([ptwatch_path(), '-p', str(pid)] + opts) + '; echo AFTER-$?')
        term.expect(r'ptwatch -p %d \(fixture-live\)' % pid, 20, 'the live table\'s title')
        if way == 'exit':
            # open past --open-timeout: "late", where it waits, highlighted
            term.expect(live_row(pid) + r'.* late S read', 20, 'the main thread late')
            line = [ln for ln in term.screen(attributes=True).splitlines()
                    if re.search(r'\b%d\b.*late S read' % pid, ln)]
            chk.true('the late row is highlighted (red, bold or reverse): %r' % line,
                     line and re.search(r'\x1b\[([0-9;]*;)?(31|1|7)[;m]', line[0]))
            term.keys('C-z')
            tid = int(target.ask('c')[1])
            term.expect(live_row(tid), 20, 'a new thread after Ctrl-Z: ptwatch runs on')
            target.send('q')
            status = 'AFTER-0'
            summary = r'process exited with code 0'
        elif way == 'sigterm':
            front = processes_named('ptwatch', pid)
            chk.eq('one ptwatch front process for %d' % pid, len(front), 1)
            os.kill(front[0], signal.SIGTERM)
            status = 'AFTER-0'
            summary = r'^ptwatch: \d+ threads'
        elif way == 'sigkill-front':
            # the tracer (PR_SET_PDEATHSIG) lets go and puts the terminal back
            front = processes_named('ptwatch', pid)
            chk.eq('one ptwatch front process for %d' % pid, len(front), 1)
            os.kill(front[0], signal.SIGKILL)
            status = None
            summary = r'^ptwatch: \d+ threads'
        else:
            tracer = processes_named('ptw-tracer', pid)
            chk.eq('one ptw-tracer process for %d' % pid, len(tracer), 1)
            os.kill(tracer[0], signal.SIGKILL)
            status = 'AFTER-%d' % (128 + signal.SIGKILL)
            summary = r'the tracer process died'
            # the restorer's summary, which it writes once the tracer died
            term.expect(r'^ptwatch: \d+ threads', 20, 'the restorer\'s summary')
        if way == 'sigkill-front':
            # The shell has the terminal back at once, and may print its
            # AFTER line and prompt on the table's screen before the tracer
            # switches back: only the summary and the echo below are sure.
            text = term.expect(summary, 20, 'the tracer\'s summary').string
        else:
            text = term.expect(r'^%s' % status, 20, 'ptwatch ended (%s), %s'
                               % (way, status)).string
        chk.true('%s: the shell\'s lines are back' % way,
                 re.search(r'^BEFORE-MARK-%s' % way, text, re.M), detail=text)
        chk.true('%s: %s' % (way, summary), re.search(summary, text, re.M))
        chk.true('%s: no table left on the screen' % way,
                 'tab/v view' not in text and not re.search(r'active \d+\s+created', text))
        # the terminal's modes are back: a line typed is echoed
        term.line('echo ECHO-IS-BACK-%s' % way)
        term.expect(r'echo ECHO-IS-BACK-%s' % way, 10, '%s: the typed line echoed' % way)
        if way != 'exit':
            check_untouched(chk, pid, 'after %s' % way)
            chk.eq('%s: the fixture still answers' % way, target.ask('p'), ['pong'])
        target.close()


def live_filter(session, chk, term):
    """--routine GLOB (as for the event lines) keeps the table to the spans
    it matches: odd_worker's thread shows, pool_worker's do not."""
    target = session.target('live')
    pid = target.ready()[0]
    t1 = int(target.ask('c')[1])
    argv = [ptwatch_path(), '-o', os.path.join(term.dir, 'doc.json'), '-p', str(pid),
            '--routine', 'odd_*']
    term.line(shell_quote(argv) + '; echo AFTER-$?')
    term.expect(r'ptwatch -p %d \(fixture-live\)' % pid, 20, 'the live table\'s title')
    t3 = int(target.ask('o')[1])
    term.expect(live_row(t3) + r'\s*odd-\d+\s+odd_worker', 20, 'the row of odd thread %d' % t3)
    t2 = int(target.ask('c')[1])
    chk.true('pool_worker threads %d and %d are not shown' % (t1, t2),
             not re.search(live_row(t1), term.screen(), re.M)
             and not re.search(live_row(t2), term.screen(), re.M), detail=term.screen())
    term.keys('q')
    term.expect(r'^AFTER-0', 20, 'q: ptwatch ended, exit 0')
    check_untouched(chk, pid, 'after q')


def live_attach(session, chk, term, mode):
    target = session.target('live')
    pid = target.ready()[0]
    t1 = int(target.ask('c')[1])  # running before ptwatch: preexisting
    doc_path = os.path.join(term.dir, 'doc.json')
    argv = [ptwatch_path(), '-o', doc_path, '-p', str(pid)]
    term.line('echo BEFORE-MARK')
    term.expect(r'^BEFORE-MARK', 10, 'the echo')
    if mode == 'ctrlc':
        term.line(shell_quote(argv[:1] + ['--no-live'] + argv[1:]) + '; echo AFTER-$?')
        term.expect(r'found\s+\[\d+\] pool_worker', 20, '--no-live: the event line of a thread')
        term.keys('C-c')
        term.expect(r'^AFTER-0', 20, 'ptwatch --no-live ended after Ctrl-C, exit 0')
        check_untouched(chk, pid, 'after ptwatch --no-live let go')
        term.line('clear; echo BEFORE-MARK')
        term.expect(r'^BEFORE-MARK', 10, 'the echo')
    term.line(shell_quote(argv) + '; echo AFTER-$?')
    term.expect(r'ptwatch -p %d \(fixture-live\)' % pid, 20, 'the live table\'s title')
    term.expect(live_row(t1) + r'\s*pool-0\s+pool_worker', 20, 'the row of %d' % t1)
    chk.true('the shell\'s lines are hidden by the table', 'BEFORE-MARK' not in term.screen())
    live_counts(term, 2, 0, 0, 'after the attach')
    t2 = int(target.ask('c')[1])
    term.expect(live_row(t2) + r'\s*pool-1\s+pool_worker .*running', 20,
                'the row of new thread %d' % t2)
    live_counts(term, 3, 1, 0, 'one thread made')
    if mode == 'ctrlc':
        term.keys('C-c')
        text = term.expect(r'^AFTER-0', 20, 'ptwatch ended after Ctrl-C, exit 0').string
        chk.true('the shell\'s lines are back after Ctrl-C',
                 re.search(r'^BEFORE-MARK', text, re.M), detail=text)
        chk.true('the summary after Ctrl-C', re.search(r'^ptwatch: \d+ threads', text, re.M))
        chk.true('no table left on the screen',
                 'tab/v view' not in text and not re.search(r'active \d+\s+created', text))
        check_untouched(chk, pid, 'after Ctrl-C')
        chk.eq('the fixture still answers', target.ask('p'), ['pong'])
        return
    t3 = int(target.ask('o')[1])
    term.expect(live_row(t3) + r'\s*odd-2\s+odd_worker', 20, 'the row of odd thread %d' % t3)
    live_counts(term, 4, 2, 0, 'two threads made')
    # t1 ends: shown as returned (dim) for a few seconds, then gone
    chk.eq('the oldest worker ended', target.ask('e'), ['ended', str(t1)])
    term.expect(live_row(t1) + r'.*returned', 20, 'the ended thread %d as returned' % t1)
    live_counts(term, 3, 2, 1, 'one thread ended')
    live_no_row(term, t1, 'the ended thread %d fading out' % t1)
    # the routine view: pools
    term.keys('Tab')
    term.expect(r'^pool_worker \(live\.c:\d+\)\s+1\s+1\s+2\s+0\s', 20,
                'the pool_worker group: 1 live, 1 ended, 2 in all')
    term.expect(r'^odd_worker \(live\.c:\d+\)\s+1\s+0\s+1\s', 20, 'the odd_worker group')
    term.keys('Tab')
    term.expect(live_row(t2), 20, 'the thread view again')
    # filter
    term.type('/odd')
    term.keys('Enter')
    term.expect(lambda text: re.search(live_row(t3), text, re.M)
                and not re.search(live_row(t2), text, re.M), 20, 'only the odd thread (filter)')
    term.expect(r"filter 'odd'", 5, 'the filter in the status line')
    term.keys('Escape')
    term.expect(lambda text: re.search(live_row(t2), text, re.M), 20, 'every row again (Esc)')
    # sort: cycle to the name column, reversed: pool-1 above odd-2
    term.keys('s')
    term.expect(r'sort name', 10, 'sorting by name')
    term.keys('r')
    text = term.expect(r'sort name reversed', 10, 'reversed').string
    rows = [int(m.group(1)) for m in re.finditer(r'^\s*(\d+)\s+\S', text, re.M)]
    chk.true('reversed name order: pool-1 (%d) above odd-2 (%d): %s' % (t2, t3, rows),
             t2 in rows and t3 in rows and rows.index(t2) < rows.index(t3))
    # pause: a new thread does not show until unpaused
    term.keys('p')
    term.expect(r'PAUSED', 10, 'paused')
    t4 = int(target.ask('c')[1])
    chk.true('paused: the new thread %d is not shown' % t4,
             not re.search(live_row(t4), term.screen(), re.M))
    term.keys('p')
    term.expect(live_row(t4), 20, 'the new thread %d once unpaused' % t4)
    # resize: the table follows the window
    for w, h in ((80, 20), (140, 36)):
        term.resize(w, h)
        term.expect(lambda text: (lambda lines: len(lines) == h and 'q quit' in lines[h - 1]
                                  and 'active' in lines[0])(text.split('\n')[:-1]), 20,
                    'the table at %dx%d (title on top, keys on the last line)' % (w, h))
    # q: let go; the fixture runs on; the screen is back, then the summary
    term.keys('q')
    text = term.expect(r'^AFTER-0', 20, 'ptwatch ended after q, exit 0').string
    chk.true('the shell\'s lines are back after q', re.search(r'^BEFORE-MARK', text, re.M),
             detail=text)
    chk.true('the summary after q', re.search(r'^ptwatch: \d+ threads', text, re.M))
    check_untouched(chk, pid, 'after q')
    chk.eq('the fixture still answers after q', target.ask('p'), ['pong'])
    chk.eq('a thread made after q', target.ask('c')[0], 'made')
    with open(doc_path) as f:
        doc = json.load(f)
    chk.eq('session.end_reason after q', doc['session']['end_reason'], 'detached')
    chk.eq('target.fate after q', doc['target']['fate'], 'lives_on')
    tids = {s['tid'] for s in thread_spans(doc)}
    chk.true('the document has the threads shown (%s)' % sorted(tids), {t1, t2, t3, t4} <= tids)


def live_launch(chk, term):
    # usage errors: one line (and the --help hint), exit 2
    for opts, msg in ((['--live', '--', 'true'], '--live needs a terminal on standard error'),
                      (['--live', '--snapshot', '-p', '1'],
                       '--live cannot be used with --snapshot')):
        r = subprocess.run([ptwatch_path()] + opts, stdin=subprocess.DEVNULL,
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=20)
        err = r.stderr.decode()
        chk.eq('ptwatch %s: exit status' % ' '.join(opts), r.returncode, 2)
        chk.eq('ptwatch %s: the message' % ' '.join(opts), err.splitlines()[:1],
               ['ptwatch: ' + msg])
    ctl = os.path.join(term.dir, 'ctl')
    rep = os.path.join(term.dir, 'reply')
    os.mkfifo(ctl)
    os.mkfifo(rep)
    doc_path = os.path.join(term.dir, 'doc.json')
    # without --live, with --live and q, with --live and the command's end
    # (it exits; a terminal's Ctrl-C kills it)
    for live, end in ((False, None), (True, 'q'), (True, 'exit'), (True, 'C-c')):
        # O_RDWR: opening does not wait for the fixture, which opens them
        # through its shell redirections
        ctl_fd = os.open(ctl, os.O_RDWR)
        rep_fd = os.open(rep, os.O_RDWR)
        argv = ([ptwatch_path()] + (['--live'] if live else [])
                + ['-o', doc_path, '--', fixture('live')])
        term.line('clear; echo BEFORE-MARK; PTW_CTL_FD=5 PTW_REPLY_FD=6 %s 5<ctl 6>reply; '
                  'echo AFTER-$?' % shell_quote(argv))
        buf = b''

        def line():
            nonlocal buf
            deadline = time.monotonic() + 20
            while b'\n' not in buf:
                left = deadline - time.monotonic()
                if left <= 0 or not select.select([rep_fd], [], [], left)[0]:
                    raise Failed('no line from the fixture; the terminal shows:\n%s'
                                 % term.screen())
                buf += os.read(rep_fd, 4096)
            got, buf = buf.split(b'\n', 1)
            return got.decode().split()

        def ask(command):
            os.write(ctl_fd, command.encode())
            return line()
        try:
            words = line()
            if words[0] != 'ready':
                raise FrameworkError('expected "ready PID", got %r' % words)
            pid = int(words[1])
            t1 = int(ask('c')[1])
            chk.eq('the fixture wrote', ask('w'), ['wrote'])
            if not live:
                term.expect(r'create\s+\[\d+\] tid %d pool_worker' % t1, 20,
                            'without --live: the event line of thread %d' % t1)
                term.expect(r'^FIXTURE-SAYS-HELLO', 20, 'without --live: the command\'s output')
                os.write(ctl_fd, b'q')
                term.expect(r'^AFTER-0', 20, 'ptwatch ended with the command')
                continue
            term.expect(live_row(t1) + r'\s*pool-0\s+pool_worker', 20, 'the row of %d' % t1)
            chk.true('--live: the command\'s output is not on the table',
                     'FIXTURE-SAYS-HELLO' not in term.screen())
            if end != 'q':
                # the command ends under the table: screen back, summary, its status
                if end == 'exit':
                    os.write(ctl_fd, b'q')
                else:
                    term.keys('C-c')
                if end == 'exit':
                    text = term.expect(r'^AFTER-0', 20, 'ptwatch ended as the command did, '
                                       'exit 0').string
                else:  # sh drops the rest of the line after a job killed by SIGINT
                    text = term.expect(lambda t: re.search(r'process killed by SIGINT', t) and
                                       re.search(r'^[$#]\s*\Z', t.rstrip('\n').split('\n')[-1])
                                       and t, 20, 'the summary and the prompt after Ctrl-C')
                chk.true('%s: the shell\'s lines are back' % end,
                         re.search(r'^BEFORE-MARK', text, re.M), detail=text)
                summary = (r'process exited with code 0' if end == 'exit'
                           else r'process killed by SIGINT')
                chk.true('%s: the summary says "%s"' % (end, summary),
                         re.search(summary, text), detail=text)
                continue
            term.keys('q')
            text = term.expect(r'^AFTER-0', 20, 'ptwatch ended after q, exit 0').string
            chk.true('the shell\'s lines are back after q',
                     re.search(r'^BEFORE-MARK', text, re.M), detail=text)
            chk.true('the summary after q', re.search(r'^ptwatch: \d+ threads', text, re.M))
            check_untouched(chk, pid, 'the launched command after q')
            chk.eq('the command runs on after q', ask('p'), ['pong'])
            chk.eq('and makes threads', ask('c')[0], 'made')
            ask('w')
            chk.true('its output still goes to /dev/null',
                     'FIXTURE-SAYS-HELLO' not in term.screen())
            with open(doc_path) as f:
                doc = json.load(f)
            chk.eq('session.end_reason after q', doc['session']['end_reason'], 'detached')
            os.write(ctl_fd, b'q')
            chk.true('the command ends when told', wait_for(lambda: not task_states(pid), 20))
        finally:
            os.close(ctl_fd)
            os.close(rep_fd)


# ---------------------------------------------------------------------------
# --locks: wait spans and live deadlocks (fixture 'locks')

def wait_spans(doc, wait=None):
    return [x for x in doc['spans'] if x['kind'] == 'wait' and (wait is None or x['wait'] == wait)]


def obj_symbol(w):
    return (w.get('object') or {}).get('symbol')


def site_symbol(w):
    return (w.get('site') or {}).get('symbol')


def check_waits_sane(chk, doc):
    """What holds for every wait span: ids 1..n; its thread span and its
    owner's have their tids; a completed one ends at or after its start."""
    waits = wait_spans(doc)
    chk.eq('wait ids are 1..n', sorted(w['id'] for w in waits), list(range(1, len(waits) + 1)))
    threads = {x['id']: x for x in thread_spans(doc)}
    for w in waits:
        what = 'wait %d (%s, tid %d)' % (w['id'], w['wait'], w['tid'])
        ts = threads.get(w['thread_span'])
        chk.true('%s: its thread span has its tid' % what, ts is not None and ts['tid'] == w['tid'],
                 w)
        if w['owner_span'] is not None:
            os_ = threads.get(w['owner_span'])
            chk.true('%s: its owner span has the owner tid' % what,
                     os_ is not None and os_['tid'] == w['owner_tid'], w)
        if w['status'] == 'completed':
            chk.true('%s: end at or after start' % what,
                     w['end_ns'] >= w['start_ns'] and w['duration_ns'] == w['end_ns'] - w['start_ns'],
                     w)
        else:
            chk.true('%s: no end; a reason unless open' % what,
                     w['end_ns'] is None and (w['status'] == 'open' or w['reason']), w)


def locks_opts(variant):
    return ['-q', '--locks'] + (['--no-debug-files'] if variant == 'no-debug-files' else [])


def case_locks_contend(session, chk, variant='default'):
    """Two threads take turns holding lock_m, the other one waiting each
    round (20 rounds): at most 20 mutex waits and at least one, each by one
    of them for the other; the object named lock_m, the call site in
    player; the summary's most contended object is lock_m. The fixture's
    results are the same without --locks."""
    cmd = [fixture('locks'), 'contend', '20']
    run = session.run(cmd, opts=locks_opts(variant))
    check_exit(chk, run, code=0)
    check_waits_sane(chk, run.doc)
    rec = one_truth(run, 'contend')
    a, b = rec['a'], rec['b']
    chk.eq('truth: 20 rounds', len(truth_of(run, 'round')), 20)
    mutex = [w for w in wait_spans(run.doc, 'mutex') if w['object']['addr'] == rec['mutex']]
    chk.true('between 1 and 20 waits on lock_m (%d)' % len(mutex), 1 <= len(mutex) <= 20)
    owners = 0
    for w in mutex:
        what = 'wait %d' % w['id']
        chk.true('%s: by one of the two players' % what, w['tid'] in (a, b), w)
        if w['owner_tid'] is not None:
            owners += 1
            chk.eq('%s: the owner is the other player' % what, w['owner_tid'],
                   b if w['tid'] == a else a, w)
        chk.eq('%s: object symbol' % what, obj_symbol(w), 'lock_m', w)
        chk.eq('%s: object kind' % what, w['object']['kind'], 'mutex', w)
        chk.eq('%s: call site' % what, site_symbol(w), 'player', w)
        chk.eq('%s: status' % what, w['status'], 'completed', w)
    chk.true('an owner reported at least once', owners >= 1)
    m = run.doc['metrics']
    objs = [o for o in m.get('contended_objects', []) if o['object']['addr'] == rec['mutex']]
    chk.true('metrics.contended_objects: lock_m with its waits and both players (%r)' % objs,
             len(objs) == 1 and objs[0]['waits'] == len(mutex) and
             set(objs[0]['tids']) == {a, b} and objs[0]['total_ns'] >= objs[0]['max_ns'] > 0)
    tw = {x['tid']: x for x in m.get('thread_waits', [])}
    chk.true('metrics.thread_waits: both players (%r)' % tw, a in tw and b in tw)
    chk.eq('metrics.waits.count', m['waits']['count'], len(wait_spans(run.doc)))
    chk.eq('no deadlock', run.doc.get('deadlocks'), [])
    text = run.stderr_text()
    chk.true('the summary lists lock_m among the contended objects',
             'waits: ' in text and 'lock_m' in text, text[-2000:])
    check_same_as_untraced(chk, session, cmd, run)


def case_locks_kinds(session, chk, variant='default'):
    """A join, a reader and a writer on a write-held rwlock, a condition
    variable, a semaphore: each wait is seen with its kind, object (named
    when global), owner (joined thread, rwlock writer) and call site."""
    exe = fixture('locks')
    opts = locks_opts(variant)
    run = session.run([exe, 'join'], opts=opts)
    check_exit(chk, run, code=0)
    check_waits_sane(chk, run.doc)
    rec = one_truth(run, 'joined')
    joins = wait_spans(run.doc, 'join')
    chk.eq('join: one wait (%r)' % joins, len(joins), 1)
    if joins:
        w = joins[0]
        chk.eq('join: by main', w['tid'], rec['joiner'], w)
        chk.eq('join: for the thread', w['owner_tid'], rec['tid'], w)
        chk.eq('join: object is its pthread_t', w['object']['addr'], rec['pthread'], w)
        chk.eq('join: object kind', w['object']['kind'], 'thread', w)
        chk.eq('join: call site', site_symbol(w), 'join_mode', w)
        chk.eq('join: completed', w['status'], 'completed', w)
    check_same_as_untraced(chk, session, [exe, 'join'], run)

    run = session.run([exe, 'rwlock'], opts=opts)
    check_exit(chk, run, code=0)
    check_waits_sane(chk, run.doc)
    for rec in truth_of(run, 'rw'):
        ws = [w for w in wait_spans(run.doc, rec['wait']) if w['tid'] == rec['waiter']]
        chk.eq('%s: one wait by %d (%r)' % (rec['wait'], rec['waiter'], ws), len(ws), 1)
        for w in ws:
            chk.eq('%s: object' % rec['wait'], w['object']['addr'], rec['rwlock'], w)
            chk.eq('%s: object symbol' % rec['wait'], obj_symbol(w), 'rw_lock', w)
            chk.eq('%s: object kind' % rec['wait'], w['object']['kind'], 'rwlock', w)
            chk.eq('%s: owner (the writer)' % rec['wait'], w['owner_tid'], rec['owner'], w)
            chk.eq('%s: call site' % rec['wait'], site_symbol(w),
                   'rw_reader' if rec['wait'] == 'rwlock_read' else 'rw_writer', w)
    chk.eq('rwlock: two rounds in the truth', len(truth_of(run, 'rw')), 2)
    check_same_as_untraced(chk, session, [exe, 'rwlock'], run)

    for mode, kind, field, sym in (('cond', 'cond', 'cond', 'cond_v'), ('sem', 'sem', 'sem', 'sem_s')):
        run = session.run([exe, mode], opts=opts)
        check_exit(chk, run, code=0)
        check_waits_sane(chk, run.doc)
        rec = one_truth(run, mode)
        ws = [w for w in wait_spans(run.doc, kind) if w['object']['addr'] == rec[field]]
        chk.eq('%s: one wait on %s (%r)' % (mode, sym, ws), len(ws), 1)
        for w in ws:
            chk.eq('%s: by the waiter' % mode, w['tid'], rec['waiter'], w)
            chk.eq('%s: object symbol' % mode, obj_symbol(w), sym, w)
            chk.eq('%s: no owner' % mode, w['owner_tid'], None, w)
            chk.eq('%s: call site' % mode, site_symbol(w), mode + '_waiter', w)
            chk.eq('%s: completed' % mode, w['status'], 'completed', w)
        check_same_as_untraced(chk, session, [exe, mode], run)


def case_locks_nocontend(session, chk):
    """--locks on a program that takes its locks, rwlocks and semaphores
    20,000 times each and never waits: no wait span, and as many stops as
    without --locks (the fast paths cost nothing)."""
    cmd = [fixture('locks'), 'nocontend']
    run = session.run(cmd, opts=['-q', '--locks'])
    check_exit(chk, run, code=0)
    chk.eq('no wait spans', wait_spans(run.doc), [])
    plain = session.run(cmd, opts=['-q'])
    chk.eq('ptrace stops with and without --locks', run.doc['session']['stops']['total'],
           plain.doc['session']['stops']['total'])
    chk.eq('output with and without --locks', run.stdout_text(), plain.stdout_text())
    chk.eq('exit status with and without --locks', run.returncode, plain.returncode)


def wait_for_text(run, proc, needle, timeout=20):
    def seen():
        read_outputs(run)
        return needle in run.stderr_text() or proc.poll() is not None
    return wait_for(seen, timeout) and needle in run.stderr_text()


def blocked_on(pid, tid, addr):
    """Thread tid sleeps in futex on addr."""
    try:
        with open('/proc/%d/task/%d/syscall' % (pid, tid)) as f:
            words = f.read().split()
    except OSError:
        return False
    return len(words) > 1 and words[0] == '202' and int(words[1], 16) == int(addr, 16)


def check_deadlock_doc(chk, doc, rec, status):
    """One deadlock, ab and ba with mutex_b and mutex_a, their waits in it;
    their thread spans show their stacks and what they wait for."""
    dls = doc.get('deadlocks') or []
    chk.eq('one deadlock in the document (%r)' % dls, len(dls), 1)
    if not dls:
        return
    d = dls[0]
    chk.eq('deadlock tids', sorted(d['tids']), sorted([rec['ab'], rec['ba']]))
    chk.eq('deadlock objects', sorted(d['objects']), sorted([rec['mutex_a'], rec['mutex_b']]))
    threads = {x['id']: x for x in thread_spans(doc)}
    chk.eq('deadlock spans are the threads\' spans', sorted(threads[i]['tid'] for i in d['spans']
                                                           if i in threads),
           sorted(d['tids']))
    waits = {w['id']: w for w in wait_spans(doc)}
    want = {rec['ab']: (rec['mutex_b'], 'mutex_b', rec['ba'], 'ab_worker'),
            rec['ba']: (rec['mutex_a'], 'mutex_a', rec['ab'], 'ba_worker')}
    for wid in d['waits']:
        w = waits.get(wid)
        if not chk.true('deadlock wait %s is a wait span' % wid, w is not None):
            continue
        obj, sym, owner, routine = want.get(w['tid'], (None, None, None, None))
        chk.eq('wait %d: object' % wid, w['object']['addr'], obj, w)
        chk.eq('wait %d: object symbol' % wid, obj_symbol(w), sym, w)
        chk.eq('wait %d: owner' % wid, w['owner_tid'], owner, w)
        chk.eq('wait %d: part of deadlock 1' % wid, w['deadlock'], 1, w)
        chk.eq('wait %d: status' % wid, w['status'], status, w)
        ts = [x for x in thread_spans(doc) if x['tid'] == w['tid']]
        stack = [f['symbol'] for f in (ts[0].get('stack') or [])] if ts else []
        chk.true('thread %d: its stack goes through %s (%r)' % (w['tid'], routine, stack),
                 routine in stack)
        wf = ts[0].get('waits_for') if ts else None
        chk.true('thread %d: waits_for %s held by %d (%r)' % (w['tid'], sym, owner, wf),
                 wf is not None and wf['object'] == obj and wf['owner_tid'] == owner)


def case_locks_deadlock(session, chk, mode='launch'):
    """An AB/BA deadlock forms while traced: said at once in the event log
    (once, with both threads, their mutexes and stacks) while the process
    runs on; the test then ends it. launch: killed by the test (the
    document has it); attach: -p, then Ctrl-C (SIGINT) detaches and both
    threads still sleep on their mutexes, untraced, no byte left changed;
    kill9: the tracer process is killed after the report, the restorer's
    document has the deadlock, every byte is put back and the threads
    still wait."""
    exe = fixture('locks')
    if mode == 'attach':
        target = session.target('locks', ['deadlock'])
        pid = target.ready()[0]
        run, proc = start_attached(session, target, opts=['--locks'])
        try:
            target.send('d')
            chk.eq('the deadlock formed', target.line(20, 'deadlocked'), 'deadlocked')
            chk.true('DEADLOCK said in the event log',
                     wait_for_text(run, proc, 'DEADLOCK #1', 20), run.stderr_text()[-2000:])
            chk.eq('ptwatch still runs', proc.poll(), None)
            rec = target.one_truth('deadlock')
            os.kill(proc.pid, signal.SIGINT)
            session.wait(run, proc, 20, 'ptwatch did not let go after SIGINT')
        finally:
            end_group(proc)
        load_doc(run)
        chk.eq('fate', run.doc['target']['fate'], 'lives_on')
        check_deadlock_doc(chk, run.doc, rec, 'open')
        check_untouched(chk, pid, 'after the detach', allowed='S')
        chk.true('both threads still sleep on their mutexes after the detach',
                 wait_for(lambda: blocked_on(pid, rec['ab'], rec['mutex_b']) and
                          blocked_on(pid, rec['ba'], rec['mutex_a']), 5))
        diffs = text_diffs(pid)
        if diffs is not None:
            chk.eq('text bytes that differ from the files after the detach', diffs, [])
        lines = [x for x in run.stderr_text().splitlines() if 'DEADLOCK #' in x and 'threads wait' in x]
        chk.eq('said once (%r)' % lines, len(lines), 1)
        target.kill()
        return

    run, proc = session.start([exe, 'deadlock'], opts=['-q', '--locks'])
    pid = None
    try:
        chk.true('DEADLOCK said in the event log (with -q)',
                 wait_for_text(run, proc, 'DEADLOCK #1', 20), run.stderr_text()[-2000:])
        chk.true('the truth record', wait_for(lambda: any(r.get('kind') == 'deadlock'
                                                          for r in load_truth(run)), 10))
        rec = one_truth(run, 'deadlock')
        pid = rec['pid']
        chk.eq('ptwatch still runs', proc.poll(), None)
        chk.true('the process runs on, its threads asleep on their mutexes',
                 wait_for(lambda: blocked_on(pid, rec['ab'], rec['mutex_b']) and
                          blocked_on(pid, rec['ba'], rec['mutex_a']), 5))
        if mode == 'kill9':
            chk.true('a tracer process', ptwatch_processes(proc.pid).get('tracer') is not None)
            kill_tracer(chk, proc.pid)
            chk.true('TracerPid 0 within 2 s of the kill', wait_untraced(pid, 2) is not None)
            diffs = text_diffs(pid)
            if diffs is not None:
                chk.eq('text bytes that differ from the files after the kill', diffs, [])
            chk.true('both threads still sleep on their mutexes after the kill',
                     wait_for(lambda: blocked_on(pid, rec['ab'], rec['mutex_b']) and
                              blocked_on(pid, rec['ba'], rec['mutex_a']), 5))
        os.kill(pid, signal.SIGKILL)
        session.wait(run, proc, 20, 'ptwatch did not exit after the target was killed')
    finally:
        end_group(proc)
        if pid:
            try:
                os.kill(pid, signal.SIGKILL)
            except OSError:
                pass
    load_doc(run)
    if mode == 'kill9':
        chk.eq('end_reason', run.doc['session']['end_reason'], 'tracer_died')
        check_deadlock_doc(chk, run.doc, rec, 'unmatched')
    else:
        chk.eq('ptwatch dies of the command\'s signal', run.returncode, -signal.SIGKILL)
        check_deadlock_doc(chk, run.doc, rec, 'unmatched')
        lines = [x for x in run.stderr_text().splitlines() if 'DEADLOCK #' in x and 'threads wait' in x]
        chk.eq('said once in the event log (%r)' % lines, len(lines), 1)
        chk.true('the summary names the deadlock', 'DEADLOCK #1: threads' in run.stderr_text())
    check_waits_sane(chk, run.doc)


def case_locks_usage(session, chk):
    """--locks with --snapshot: one clear line, exit status 2."""
    argv = [ptwatch_path(), '--locks', '--snapshot', '-p', str(os.getpid())]
    p = subprocess.run(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=20)
    err = p.stderr.decode()
    chk.eq('exit status', p.returncode, 2)
    chk.true('says why (%r)' % err, err.splitlines()[:1] and
             '--locks cannot be used with --snapshot' in err.splitlines()[0])




# ---------------------------------------------------------------------------
# -f: follow forks (fixture prefork)

def follow_common(chk, run):
    """The processes array and the spans agree: process ids are 0, 1, ...
    in order; every span names the entry of its process (same pid), every
    parent the entry of its ppid; span ids are unique. Returns {pid: the
    latest entry with that pid} (a pid may come back within a session)."""
    doc = run.doc
    procs = doc.get('processes')
    if not chk.true('a processes array with -f', isinstance(procs, list) and procs, doc.get('processes')):
        return {}
    chk.eq('process ids in order', [p['id'] for p in procs], list(range(len(procs))))
    by_id = {p['id']: p for p in procs}
    for p in procs[1:]:
        parent = by_id.get(p['parent_process'])
        if not chk.true('process %s: its parent %s is listed, with pid %s'
                        % (p['id'], p['parent_process'], p['ppid']),
                        parent is not None and parent['pid'] == p['ppid'], p):
            break
    ids = [s['id'] for s in thread_spans(doc)]
    chk.eq('span ids unique', len(ids), len(set(ids)))
    for s in thread_spans(doc):
        entry = by_id.get(s.get('process'))
        if not chk.true('span %s: its process entry, with its pid' % s['id'],
                        entry is not None and entry['pid'] == s.get('pid'), s):
            break
    by_pid = {}
    for p in procs:
        by_pid[p['pid']] = p
    return by_pid


def case_follow(session, chk, mode='workers'):
    if mode in ('workers', 'workers-no-debug-files'):
        opts = ['-q', '-f'] + (['--no-debug-files'] if mode != 'workers' else [])
        run = session.run([fixture('prefork'), 'workers'], opts=opts)
        check_exit(chk, run, code=0)
        by_pid = follow_common(chk, run)
        children = truth_of(run, 'child')
        chk.eq('3 workers in the truth', len(children), 3)
        codes = sorted(c['code'] for c in children)
        chk.eq('workers exited 10, 11, 12', codes, [10, 11, 12])
        for c in children:
            p = by_pid.get(c['pid'])
            if not chk.true('worker %s listed' % c['pid'], p is not None):
                continue
            chk.eq('worker %s ppid' % c['pid'], p['ppid'], run.doc['target']['pid'])
            chk.eq('worker %s exit' % c['pid'], p['exit'], {'code': c['code']})
            chk.true('worker %s: the forking thread span' % c['pid'], p['parent_span'] is not None, p)
            m = p.get('metrics', {})
            chk.eq('worker %s: threads_seen' % c['pid'], m.get('threads_seen'), 4)
            chk.eq('worker %s: threads_created' % c['pid'], m.get('threads_created'), 3)
            chk.eq('worker %s: join waits' % c['pid'], (m.get('join_wait_ns') or {}).get('count'), 3)
        threads = truth_of(run, 'worker_thread')
        spans = {(s.get('pid'), s['tid']): s for s in thread_spans(run.doc)}
        chk.eq('9 worker threads in the truth', len(threads), 9)
        for t in threads:
            sp = spans.get((t['pid'], t['tid']))
            if not chk.true('span of worker thread %s/%s' % (t['pid'], t['tid']), sp is not None):
                continue
            chk.eq('thread %s status' % t['tid'], sp['status'], 'completed', sp)
            chk.eq('thread %s value' % t['tid'], sp['end']['value'] if sp.get('end') else None,
                   hex(t['value']), sp)
            chk.eq('thread %s routine' % t['tid'], (sp.get('start_routine') or {}).get('symbol'),
                   'pool_worker', sp)
    elif mode == 'many':
        n = int(os.environ.get('PTW_FOLLOW_MANY', '1000'))
        run = session.run([fixture('prefork'), 'many', str(n)], opts=['-q', '-f'], timeout=170)
        check_exit(chk, run, code=0)
        follow_common(chk, run)
        chk.eq('%d children and the master listed' % n, len(run.doc['processes']), n + 1)
        created = [s for s in thread_spans(run.doc) if s['origin'] == 'created']
        chk.eq('2 threads spanned per child', len(created), 2 * n)
        chk.eq('every created span completed', [s['id'] for s in created if s['status'] != 'completed'], [])
    elif mode in ('exec', 'vfork'):
        run = session.run([fixture('prefork'), mode, fixture('lifecycle')], opts=['-q', '-f'])
        check_exit(chk, run, code=0)
        by_pid = follow_common(chk, run)
        child = one_truth(run, 'child')
        chk.eq('the child exited 3 (lifecycle returns 3)', child.get('code'), 3)
        p = by_pid.get(child['pid'], {})
        chk.true('child exe is the lifecycle fixture (%s)' % p.get('exe'),
                 (p.get('exe') or '').endswith('fixture-lifecycle'))
        chk.eq('child argv', (p.get('argv') or [None])[0], fixture('lifecycle'))
        lc = [s for s in thread_spans(run.doc) if s.get('pid') == child['pid'] and s['origin'] == 'created']
        lc_truth = [r for r in run.truth if r.get('kind') == 'thread']
        chk.true('the exec\'d fixture\'s threads are spanned (%d spans, %d in its truth)' % (len(lc), len(lc_truth)),
                 len(lc) >= 1 and len(lc) == len(lc_truth))
    elif mode == 'wide':
        # 80 children alive at once: 63 get a journal slot (the target has
        # one of the 64), the others are warned about and run free.
        run = session.run([fixture('prefork'), 'wide', '80'], opts=['-q', '-f'], timeout=120)
        check_exit(chk, run, code=0)
        by_pid = follow_common(chk, run)
        done = one_truth(run, 'wide_done')
        chk.eq('every child exited with its code', done.get('bad'), 0)
        procs = run.doc['processes']
        chk.eq('80 children and the master listed', len(procs), 81)
        followed = [p for p in procs if p['followed']]
        chk.eq('63 children followed, and the master', len(followed), 64)
        let_go = [p for p in procs if not p['followed']]
        chk.eq('why the others were not',
               sorted(set(p.get('not_followed_why') for p in let_go)),
               ['too many processes traced at once'])
        created = [s for s in thread_spans(run.doc) if s['origin'] == 'created']
        chk.eq('the thread of each followed child spanned', len(created), 63)
    elif mode == 'usage':
        p = subprocess.run([ptwatch_path(), '-f', '--snapshot', '-p', str(os.getpid())],
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=20)
        err = p.stderr.decode()
        chk.eq('-f --snapshot: exit status', p.returncode, 2)
        chk.true('-f --snapshot: one line that says why (%r)' % err,
                 '-f cannot be used with --snapshot' in (err.splitlines() or [''])[0])
    elif mode == 'setuid':
        prog = '/usr/bin/mount'
        if not os.path.exists(prog) or not os.stat(prog).st_mode & 0o4000:
            raise Skip('%s is not set-user-ID here' % prog)
        for how in ('exec', 'vfork'):
            chk.prefix = '[%s] ' % how
            run = session.run([fixture('prefork'), how, prog, '--version'], opts=['-q', '-f'])
            check_exit(chk, run, code=0)
            by_pid = follow_common(chk, run)
            child = one_truth(run, 'child')
            chk.eq('the set-uid program ran and exited 0', child.get('code'), 0)
            p = by_pid.get(child['pid'], {})
            chk.eq('it is listed as not followed', p.get('followed'), False, p)
            chk.true('why: set-user-ID (%s)' % p.get('not_followed_why'),
                     'set-user-ID' in (p.get('not_followed_why') or ''))
            chk.eq('its exe', p.get('exe'), prog)
            msgs = [w['message'] for w in run.doc['warnings'] if w['code'] == 'process_not_followed']
            chk.true('a process_not_followed warning names it (%s)' % msgs,
                     any(str(child['pid']) in m and prog in m for m in msgs))
        chk.prefix = ''
    elif mode == 'killed':
        run = session.run([fixture('prefork'), 'killed'], opts=['-q', '-f'])
        check_exit(chk, run, code=0)
        by_pid = follow_common(chk, run)
        child = one_truth(run, 'child')
        chk.eq('the child was killed by SIGKILL', child.get('signal'), signal.SIGKILL)
        p = by_pid.get(child['pid'], {})
        chk.eq('its exit in processes', p.get('exit'), {'signal': 'SIGKILL', 'core_dumped': False})
        spans = [s for s in thread_spans(run.doc) if s.get('pid') == child['pid']]
        chk.eq('3 spans in the killed child', len(spans), 3)
        for s in spans:
            chk.eq('span %s unmatched' % s['id'], s['status'], 'unmatched', s)


def case_follow_kill9(session, chk):
    """ptwatch -f -- a pre-forking server (master and 2 workers, each with
    threads), and its tracer is SIGKILLed while it follows them all: the
    restorer puts back every process's bytes, every process survives,
    untraced, and the server finishes its work."""
    ctl_r, ctl_w = os.pipe()
    rep_r, rep_w = os.pipe()
    run, proc = session.start([fixture('preforkd'), '2'], opts=['-q', '-f'],
                              env={'PTW_CTL_FD': str(ctl_r), 'PTW_REPLY_FD': str(rep_w)},
                              pass_fds=(ctl_r, rep_w))
    os.close(ctl_r)
    os.close(rep_w)
    try:
        pids = [int(w) for w in read_line(rep_r, 20, 'ready').split()[1:]]
        tracers = set()
        for pid in pids:
            tracers |= set(wait_traced(pid).values())
        chk.eq('one tracer for the master and its workers', len(tracers), 1)
        for pid in pids:
            d = text_diffs(pid)
            chk.true('breakpoints in %d while traced (%s)' % (pid, d), d is None or len(d) > 0)
        for tid in tracers:
            os.kill(tid, signal.SIGKILL)
        # The restorer traces each process again for a moment to unmap the
        # out-of-line pages: check once the front says it is done.
        def said():
            read_outputs(run)
            return 'tracer process died' in run.stderr_text()
        chk.true('the front reports the tracer died within 10 s', wait_for(said, 10))
        for pid in pids:
            chk.true('%d untraced within 2 s of the kill' % pid, wait_untraced(pid, 2) is not None)
            check_untouched(chk, pid, 'after the kill')
            diffs = text_diffs(pid)
            if diffs is not None:
                chk.eq('%d: text bytes that differ from the files after the kill' % pid, diffs, [])
        os.write(ctl_w, b'p')
        chk.eq('the master answers after the kill', read_line(rep_r, 10, 'pong').strip(), 'pong')
        os.write(ctl_w, b'q')
        chk.eq('the server finishes', read_line(rep_r, 20, 'done').strip(), 'done')
        session.wait(run, proc, 20, 'ptwatch did not exit')
        chk.eq('ptwatch exits as the command', run.returncode, 0)
        codes = sorted(r['code'] for r in load_truth(run) if r.get('kind') == 'worker')
        chk.eq('the workers exited 20 and 21', codes, [20, 21])
        # The restorer's document: every process, each span with its pid.
        load_doc(run)
        chk.eq('end_reason', run.doc['session']['end_reason'], 'tracer_died')
        by_pid = follow_common(chk, run)
        chk.eq('the restorer lists every process', sorted(by_pid), sorted(pids))
        for pid in pids[1:]:
            chk.eq('worker %d: its ppid' % pid, by_pid.get(pid, {}).get('ppid'), pids[0])
    finally:
        os.close(ctl_w)
        os.close(rep_r)


def case_follow_attach(session, chk):
    """ptwatch -p MASTER -f on a running pre-forking server: the workers
    that run are attached too (their threads found), a worker forked while
    traced is followed, and SIGINT lets go of every process: alive,
    untraced, every executable mapping as it was."""
    target = session.target('preforkd', [2])
    pids = target.ready()
    master = pids[0]
    before = {pid: exec_mappings(pid) for pid in pids}
    run, proc = session.start_attach(master, opts=('-q', '-f'))
    for pid in pids:
        wait_traced(pid)
    words = target.ask('f', timeout=20)
    chk.eq('the master forked a worker while traced', words[0], 'forked')
    new = int(words[1])
    wait_traced(new)
    chk.eq('the master answers while traced', target.ask('p'), ['pong'])
    proc.send_signal(signal.SIGINT)
    session.wait(run, proc, 20, 'ptwatch did not detach after SIGINT')
    chk.eq('ptwatch exit status after SIGINT', run.returncode, 0)
    load_doc(run)
    doc = run.doc
    by_pid = follow_common(chk, run)
    chk.eq('processes listed', sorted(by_pid), sorted(pids + [new]))
    for pid in pids + [new]:
        check_untouched(chk, pid, 'after the detach')
    for pid in pids:
        compare_mappings(chk, before[pid], exec_mappings(pid), 'process %d' % pid)
    # forked from the master while traced: its layout is the master's
    compare_mappings(chk, before[master], exec_mappings(new), 'new worker %d' % new)
    for pid in pids[1:]:
        threads = [s for s in thread_spans(doc) if s.get('pid') == pid]
        chk.eq('worker %d: 3 spans found at the attach' % pid, len(threads), 3, threads)
        chk.eq('worker %d: its ppid' % pid, by_pid.get(pid, {}).get('ppid'), master)
    newspans = [s for s in thread_spans(doc) if s.get('pid') == new]
    chk.eq('new worker: main and 2 created spans',
           sorted(s['origin'] for s in newspans), ['created', 'created', 'main'])
    chk.eq('the master answers after the detach', target.ask('p'), ['pong'])
    target.send('q')
    chk.eq('the server finishes after the detach', target.line(20, 'done').strip(), 'done')


def case_follow_python(session, chk):
    """A real program: python's multiprocessing pool (workers forked, a
    thread per task) under -f prints what it prints without ptwatch, and
    every task's thread is spanned in the worker that ran it."""
    script = fixture_source('mppool.py')
    python = '/usr/bin/python3'
    native = subprocess.run([python, script], stdout=subprocess.PIPE, timeout=60, check=True)
    run = session.run([python, script], opts=['-q', '-f'], timeout=60)
    check_exit(chk, run, code=0)
    with open(os.path.join(run.tmpdir, 'stdout'), 'rb') as f:
        traced = f.read()
    chk.eq('output identical to a run without ptwatch', traced.decode(), native.stdout.decode())
    by_pid = follow_common(chk, run)
    root = run.doc['target']['pid']
    workers = [p for p in by_pid.values() if p['ppid'] == root]
    chk.true('at least 2 forked workers (%d)' % len(workers), len(workers) >= 2)
    created = [s for s in thread_spans(run.doc)
               if s.get('pid') != root and s['origin'] == 'created']
    chk.eq('a span per task thread in the workers', len(created), 20)
    # Python's join returns once the thread's Python code is done, before
    # its OS thread has left (detached): a worker that exits (or is
    # terminated by the pool) at that moment takes it down. So a task
    # thread either completed or went down with its process.
    chk.eq('every task thread completed or went down with its worker',
           [s['id'] for s in created if s['status'] != 'completed'
            and (s.get('end') or {}).get('reason') not in ('process_exit', 'killed')], [])


def case_follow_make(session, chk):
    """A real program: `make -j2` of a small tree under -f builds what it
    builds without ptwatch and prints the same lines; every compiler,
    assembler and linker process is in the document."""
    if not shutil.which('make') or not shutil.which('cc'):
        raise Skip('make or cc is not installed')
    tree = tempfile.mkdtemp(prefix='ptwmake.', dir=os.environ.get('PTW_TMPDIR'))
    try:
        for i in range(1, 5):
            with open(os.path.join(tree, 'f%d.c' % i), 'w') as f:
                f.write('int f%d(void) { return %d; }\n' % (i, i))
        with open(os.path.join(tree, 'main.c'), 'w') as f:
            f.write('#include <stdio.h>\nint f1(void); int f2(void); int f3(void); int f4(void);\n'
                    'int main(void) { printf("%d\\n", f1() + f2() + f3() + f4()); return 0; }\n')
        with open(os.path.join(tree, 'Makefile'), 'w') as f:
            f.write('app: main.o f1.o f2.o f3.o f4.o\n\t$(CC) -o $@ $^ -pthread\n'
                    '%.o: %.c\n\t$(CC) -O0 -c -o $@ $<\nclean:\n\trm -f *.o app\n')

        def build(cmd):
            subprocess.run(['make', '-s', '-C', tree, 'clean'], check=True, timeout=60)
            r = subprocess.run(cmd, cwd=tree, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                               timeout=120)
            app = subprocess.run([os.path.join(tree, 'app')], stdout=subprocess.PIPE, timeout=20)
            return r, app.stdout.decode()

        native, native_app = build(['make', '-j2'])
        doc_path = os.path.join(tree, 'spans.json')
        traced, traced_app = build([ptwatch_path(), '-f', '-q', '-o', doc_path, '--',
                                    'make', '-j2'])
        chk.eq('make exit status under ptwatch', traced.returncode, native.returncode)
        chk.eq('the same lines printed (in any order: -j2)',
               sorted(traced.stdout.decode().splitlines()),
               sorted(native.stdout.decode().splitlines()))
        chk.eq('the program built runs as without ptwatch', traced_app, native_app)
        chk.eq('it prints 10', traced_app.strip(), '10')
        with open(doc_path) as f:
            doc = json.load(f)
        from ptw_test import validate
        validate(doc)
        exes = [os.path.basename(p['exe'] or '') for p in doc['processes']]
        chk.true('a compiler proper per source (cc1 x5) in the processes (%s)' % exes,
                 exes.count('cc1') == 5 or exes.count('cc1plus') == 5 or len(exes) >= 10)
        chk.true('a linker in the processes (%s)' % exes, any('ld' in e for e in exes))
        chk.eq('every process followed', [p['pid'] for p in doc['processes'] if not p['followed']], [])
        chk.eq('every process exited 0',
               [p['pid'] for p in doc['processes'] if p['exit'] != {'code': 0}], [])
    finally:
        shutil.rmtree(tree, ignore_errors=True)


def case_follow_attach_busy(session, chk):
    """ptwatch -p MASTER -f when another tracer (strace) holds a worker:
    that worker gets a process_not_followed warning naming it and stays
    strace's, unharmed; the rest is traced, then let go."""
    if not shutil.which('strace'):
        raise Skip('strace is not installed')
    target = session.target('preforkd', [2])
    pids = target.ready()
    master, busy, free = pids
    st = subprocess.Popen(['strace', '-qq', '-o', '/dev/null', '-p', str(busy)],
                          stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        if not wait_for(lambda: tracer_pids(busy) and set(tracer_pids(busy).values()) == {st.pid}, 10):
            raise FrameworkError('strace did not attach to %d: %s' % (busy, tracer_pids(busy)))
        before = {pid: exec_mappings(pid) for pid in (master, free)}
        run = session.attach(master, opts=('-q', '-f', '--duration=0.5'))
        check_attach_doc(chk, run, master, 'duration')
        by_pid = follow_common(chk, run)
        p = by_pid.get(busy, {})
        chk.eq('the busy worker is listed, not followed', p.get('followed'), False, p)
        chk.true('why: traced by strace (%s)' % p.get('not_followed_why'),
                 'strace' in (p.get('not_followed_why') or ''))
        msgs = [w['message'] for w in run.doc['warnings'] if w['code'] == 'process_not_followed']
        chk.true('a process_not_followed warning names it (%s)' % msgs,
                 any(str(busy) in m for m in msgs))
        chk.eq('the busy worker is still strace\'s', set(tracer_pids(busy).values()), {st.pid})
        chk.eq('the other worker was followed', by_pid.get(free, {}).get('followed'), True)
        for pid in (master, free):
            check_untouched(chk, pid, 'after the detach')
            compare_mappings(chk, before[pid], exec_mappings(pid), 'process %d' % pid)
    finally:
        st.terminate()
        st.wait()
    chk.eq('the master answers', target.ask('p'), ['pong'])
    target.send('q')
    chk.eq('the server finishes', target.line(20, 'done').strip(), 'done')


def case_follow_attach_kill9(session, chk):
    """ptwatch -p MASTER -f, and its tracer is SIGKILLed: the restorer puts
    back the bytes of the master and of every worker (each its own journal
    slot, each through its own memory fd); all run on, untraced."""
    target = session.target('preforkd', [3])
    pids = target.ready()
    run, proc = session.start_attach(pids[0], opts=('-q', '-f'))
    tracers = set()
    for pid in pids:
        tracers |= set(wait_traced(pid).values())
    # every process set up (breakpoints in), not only seized
    chk.true('breakpoints in every process while traced',
             wait_for(lambda: all(text_diffs(pid) for pid in pids), 10))
    for tid in tracers:
        os.kill(tid, signal.SIGKILL)
    session.wait(run, proc, 20, 'ptwatch did not exit after its tracer was killed')
    for pid in pids:
        chk.true('%d untraced' % pid, wait_untraced(pid, 2) is not None)
        check_untouched(chk, pid, 'after the kill')
        chk.eq('%d: text bytes that differ from the files after the kill' % pid,
               text_diffs(pid), [])
    load_doc(run)
    chk.eq('end_reason', run.doc['session']['end_reason'], 'tracer_died')
    by_pid = follow_common(chk, run)
    chk.eq('the restorer lists every process', sorted(by_pid), sorted(pids))
    chk.eq('the master answers', target.ask('p'), ['pong'])
    target.send('q')
    chk.eq('the server finishes', target.line(20, 'done').strip(), 'done')


CASES = {
    'open-timeout': case_open_timeout,
    'attach-open-timeout': case_attach_open_timeout,
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
    'noaranges': case_noaranges,
    'static': case_static,
    'static-stripped': case_static_stripped,
    'attach-stripped': case_attach_stripped,
    'attach-churner': case_attach_churner,
    'snapshot-deadlock': case_snapshot_deadlock,
    'snapshot-running': case_snapshot_running,
    'snapshot-sleepers': case_snapshot_sleepers,
    'snapshot-deleted': case_snapshot_deleted,
    'completion': case_completion,
    'attach-idle': case_attach_idle,
    'attach-stopped': case_attach_stopped,
    'attach-refusals': case_attach_refusals,
    'attach-zombie-leader': case_attach_zombie_leader,
    'attach-unstoppable': case_attach_unstoppable,
    'attach-signals': case_attach_signals,
    'attach-exec-fork': case_attach_exec_fork,
    'attach-pipe-closed': case_attach_pipe_closed,
    'kill9-front': case_kill9_front,
    'kill9-tracer': case_kill9_tracer,
    'attach-early-signal': case_attach_early_signal,
    'end': case_end,
    'cache': case_cache,
    'cxx': case_cxx,
    'debuginfod': case_debuginfod,
    'minidebuginfo': case_minidebuginfo,
    'ctrlc': case_ctrlc,
    'frames': case_frames,
    'frames-cxx': case_frames_cxx,
    'frames-attach': case_frames_attach,
    'frames-kill9': case_frames_kill9,
    'frames-stripped': case_frames_stripped,
    'frames-exec': case_frames_exec,
    'frames-pthread': case_frames_pthread,
    'frames-usage': case_frames_usage,
    'locks-contend': case_locks_contend,
    'locks-kinds': case_locks_kinds,
    'locks-nocontend': case_locks_nocontend,
    'locks-deadlock': case_locks_deadlock,
    'locks-usage': case_locks_usage,
    'live': case_live,
    'follow': case_follow,
    'follow-kill9': case_follow_kill9,
    'follow-attach': case_follow_attach,
    'follow-python': case_follow_python,
    'follow-make': case_follow_make,
    'follow-attach-busy': case_follow_attach_busy,
    'follow-attach-kill9': case_follow_attach_kill9,
}

if __name__ == '__main__':
    main(CASES)
