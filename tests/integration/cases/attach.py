"""Attach mode (ptwatch -p PID): fixtures the test starts itself
(tests/fixtures/attach.h); ptwatch attaches, lets go, and the fixture
must go on as if nothing happened."""

import ctypes
import json
import os
import platform
import re
import select
import shutil
import signal
import subprocess
import threading
import time

from ptw_test import test
from ptw_test import (
    attach_stderr_lines, backend, case, check_attach_doc, check_untouched, comm, compare_mappings,
    end_group, kill_group, exec_mappings, fixture, FrameworkError, load_doc,
    ptwatch_path, report_warnings, Skip, span_index, task_states, thread_spans, tracer_pids, wait_for,
    warning_codes
)
from helpers import (
    bpf_prog_ids, check_bpf_freed, check_bystander, check_main_span, check_open,
    check_preexisting, check_stack, check_target_exit, check_text_patched, check_text_restored,
    ptwatch_processes, settled_states, start_attached, text_diffs, wait_for_text, wait_progress,
    wait_traced, wait_untraced, wait_watched
)


def check_churner_doc(chk, run, pid, what, counts):
    """counts: the fixture's counter (threads made, joined and checked)
    read (before the attach, once attached, at the end of the traced
    work, after the detach). Each creator_worker has one short_worker at a
    time: every short_worker counted after `attached` and up to `worked`
    was created while traced (but the first of each creator, which may
    have run at the attach) and ended before ptwatch let go; every
    complete span (created and ended while traced) is counted by
    `detached` (but the last of each creator, not yet joined)."""
    before, attached, worked, detached = counts
    doc = run.doc
    frozen = check_attach_doc(chk, run, pid, 'interrupted', what)
    if backend() == 'kernel':
        chk.eq('%s: session.frozen_ns (the kernel path stops nobody)' % what, frozen, 0)
    else:
        chk.true('%s: session.frozen_ns > 0 (got %r)' % (what, frozen),
                 isinstance(frozen, int) and frozen > 0)
    print('%s: frozen_ns %s, %d spans, %.2f s' % (what, frozen, len(doc['spans']), run.elapsed))
    check_main_span(chk, doc, pid, what)
    spans = thread_spans(doc)
    pre = [s for s in spans if s['origin'] == 'preexisting']
    created = [s for s in spans if s['origin'] == 'created']
    creators = [s for s in pre if (s['start_routine'] or {}).get('symbol') == 'creator_worker']
    chk.eq('%s: preexisting creator_worker spans' % what, len(creators), 2)
    creator_tids = {s['tid'] for s in creators}
    for s in creators:
        w = '%s: creator_worker %s' % (what, s['tid'])
        check_preexisting(chk, s, w, 'creator_worker')
        chk.eq('%s: detached' % w, s['detached'], False, s)
        check_open(chk, s, w)
    others = [s for s in pre if s not in creators]
    # (each creator's short_worker at the attach, and the one it joined
    # just before, whose task the kernel had not released yet when the
    # threads were listed: attach-churner-static@kernel listed 3 once)
    chk.true('%s: preexisting short_worker spans: at most two per creator (got %d)'
             % (what, len(others)), len(others) <= 4)
    tids = [s['tid'] for s in pre]
    chk.eq('%s: preexisting spans, each tid once' % what,
           sorted(t for t in set(tids) if tids.count(t) > 1), [])
    window = any(w['code'] == 'kernel_not_seen' and 'while the probes went in' in w['message']
                 for w in doc.get('warnings', []))
    for s in pre:
        if s not in creators:
            # a short_worker that ran at the attach
            sr = s['start_routine'] or {}
            if (backend() == 'kernel' and window and not sr
                    and s['status'] == 'lwp_exited'):
                # made and gone while the probes went in (said): a clone
                print('note: %s: preexisting %s made and ended while the probes went in'
                      % (what, s['tid']))
                continue
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
            # its argument n (odd from creator 1, even from creator 0) and
            # its value n + 1, by pthread_exit when n is odd
            arg = s.get('arg')
            value = (s['end'] or {}).get('value')
            if chk.true('%s: arg known (got %r)' % (w, arg), isinstance(arg, str), s):
                n = int(arg, 16)
                chk.eq('%s: end.value (arg + 1)' % w, value, hex(n + 1), s)
                chk.eq('%s: status (odd arg: pthread_exit)' % w, s['status'],
                       'exited' if n & 1 else 'completed', s)
            complete.append(s)
        else:
            chk.true('%s: status completed, exited or open (got %s)' % (w, s['status']),
                     s['status'] == 'open', s)
    opened = [s for s in created if s['status'] == 'open']
    chk.true('%s: created spans open at the detach: at most one per creator (got %d)'
             % (what, len(opened)), len(opened) <= 2)
    print('%s: counter %d before the attach, %d attached, %d at SIGINT, %d after the detach; '
          '%d complete created spans' % (what, before, attached, worked, detached, len(complete)))
    chk.true('%s: complete created spans (%d) at least the threads counted while traced, less '
             'the first of each creator (%d - %d - 2)' % (what, len(complete), worked, attached),
             len(complete) >= worked - attached - 2)
    chk.true('%s: complete created spans (%d) at most the threads counted from before the '
             'attach to after the detach, and the last of each creator (%d - %d + 2)'
             % (what, len(complete), detached, before), len(complete) <= detached - before + 2)
    report_warnings(run)


@test('attach-churner', kernel=True, ns=True)
@test('attach-churner-static', 'churner_static', kernel=True)
@case('attach-churner')
def case_attach_churner(session, chk, name='churner'):
    """name churner_static: the same program linked statically (libc in
    it: the kernel path's probes and struct pthread's layout come from
    the executable)."""
    target = session.target(name)
    pid = target.ready()[0]
    before = exec_mappings(pid)
    c_before = target.count()
    run, proc = start_attached(session, target)
    try:
        wait_watched(target)
        c_attached = target.count()
        # ptwatch follows the churn for a while: 1,000 more threads
        c_worked = wait_for(lambda: (lambda c: c if c >= c_attached + 1000 else None)(
            target.count()), 20, step=0.02) or target.count()
        chk.true('while traced: the counter went from %d to %d (expected +1000)'
                 % (c_attached, c_worked), c_worked >= c_attached + 1000)
        os.kill(proc.pid, signal.SIGINT)
        session.wait(run, proc, 20, 'ptwatch did not let go after SIGINT')
    finally:
        end_group(proc)
    c_detached = target.count()
    load_doc(run)
    check_churner_doc(chk, run, pid, 'SIGINT', (c_before, c_attached, c_worked, c_detached))
    target.check_alive('after the detach')
    compare_mappings(chk, before, exec_mappings(pid), 'after the detach')
    check_untouched(chk, pid, 'after the detach')
    wait_progress(chk, target, 'after the detach', more=500)
    target.send('q')
    if check_target_exit(chk, target, 'after the detach'):
        churn = target.one_truth('churn', 'released')
        print('churner made %d threads' % churn['count'])


@test('attach-idle-1000', '1000', timeout=120, kernel=True, first=True)
@case('attach-idle')
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


@test('attach-stripped', kernel=True)
@case('attach-stripped')
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


@test('attach-stopped', kernel=True)
@case('attach-stopped')
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
        frozen = run.doc['session']['frozen_ns']
        print('%s: ptwatch took %.2f s, frozen_ns %d' % (mode, run.elapsed, frozen))
        # by ptwatch's own clock: it never waited for a stop (a thread that
        # does not stop is waited for 1 s, README)
        chk.true('%s: threads held stopped less than the 1 s stop deadline (frozen_ns %d)'
                 % (mode, frozen), frozen < STOP_DEADLINE_NS)
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


def refusal_prefix():
    """How a refused attach begins: the kernel path names itself."""
    return ('ptwatch: --backend=kernel cannot attach to ' if backend() == 'kernel'
            else 'ptwatch: cannot attach to ')


def check_refusal(chk, run, what, pid=None, reason=None):
    """Exit 1 and one line: "ptwatch: cannot attach to PID: <reason>"
    ("ptwatch: --backend=kernel cannot attach to PID: <reason>")."""
    chk.eq('%s: exit status' % what, run.returncode, 1)
    lines = attach_stderr_lines(run)
    print('%s: %r' % (what, run.stderr_text().strip()))
    if not chk.eq('%s: lines on stderr' % what, len(lines), 1):
        return ''
    prefix = refusal_prefix() + '%s: ' % (pid if pid is not None else '')
    line = lines[0]
    if pid is not None:
        chk.true('%s: message starts with %r (got %r)' % (what, prefix, line),
                 line.startswith(prefix))
    else:
        chk.true('%s: message starts with %r (got %r)' % (what, refusal_prefix(), line),
                 line.startswith(refusal_prefix()))
    if reason is not None:
        chk.true('%s: the reason matches %r (got %r)' % (what, reason, line),
                 re.search(reason, line) is not None)
    if os.path.exists(run.doc_path) and os.path.getsize(run.doc_path):
        load_doc(run)
        print('note: %s: a document was written (end_reason %s)'
              % (what, run.doc['session']['end_reason']))
    return line


@test('attach-refusals', kernel=True)
@case('attach-refusals')
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

    # ptwatch itself ($PTWATCH_BACKEND chooses the backend)
    r = subprocess.run(['/bin/sh', '-c', 'exec "$0" -p $$', ptw], stdin=subprocess.DEVNULL,
                       capture_output=True, timeout=20)
    text = r.stderr.decode('utf-8', 'replace').strip()
    print('ptwatch -p itself: exit %s: %r' % (r.returncode, text))
    chk.eq('ptwatch -p itself: exit status', r.returncode, 1)
    chk.true('ptwatch -p itself: one line "%sPID: ..." (got %r)' % (refusal_prefix(), text),
             re.match(r'^%s\d+: \S.*$' % re.escape(refusal_prefix()), text) is not None)

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

    # a process in another PID namespace (a container's, seen from the
    # host): its thread ids there are not ptwatch's, both backends refuse
    # (issue 28). Not when this case runs in a namespace of its own
    # (NAME@kernel-ns): the host is not there to be seen from.
    ns = subprocess.Popen(['unshare', '--pid', '--fork', '--kill-child', 'sleep', '120'],
                          stdin=subprocess.DEVNULL)
    try:
        def inner():
            kids = []
            for t in os.listdir('/proc/%d/task' % ns.pid):
                with open('/proc/%d/task/%s/children' % (ns.pid, t)) as f:
                    kids += [int(k) for k in f.read().split()]
            return kids[0] if kids and comm(kids[0]) == 'sleep' else None
        if not wait_for(inner, 10):
            raise FrameworkError('unshare --pid did not start its child')
        other = inner()
        check_refusal(chk, session.attach(other, load=False), 'in another PID namespace', other,
                      r'another PID namespace than ptwatch.*nsenter -t %d -p -m' % other)
        chk.eq('in another PID namespace: TracerPid after the refusal', tracer_pids(other), {})
    finally:
        ns.kill()
        ns.wait()

    target = session.target('idle', [2])
    pid = target.ready()[0]

    # already traced: a first ptwatch holds it (the ptrace path; on the
    # kernel path nothing holds it: a second session may watch it too)
    first, first_proc = start_attached(session, target)
    try:
        if backend() == 'kernel':
            second = session.attach(pid, opts=('-q', '--duration=0.3'))
            check_attach_doc(chk, second, pid, 'duration', 'a second ptwatch at once')
        else:
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
            check_refusal(chk, run, 'as nobody', pid,
                          r'CAP_BPF' if backend() == 'kernel' else r'uid|CAP_SYS_PTRACE')
    check_untouched(chk, pid, 'after the refusals')
    chk.eq('after the refusals: the fixture answers', target.ask('p'), ['pong'])
    target.send('q')
    check_target_exit(chk, target, 'released')


@test('attach-zombie-leader', kernel=True)
@case('attach-zombie-leader')
def case_attach_zombie_leader(session, chk):
    """A process whose main thread called pthread_exit (a zombie): its
    other threads found, each with its routine and pthread_t; the kernel
    path ties its probes to one of those threads (its uprobe_multi links
    would need the leader's memory) and changes no other process (a cat
    started meanwhile has its files' text); once that thread ends, the
    others are seen by the tracepoints alone, as a note says."""
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
    if backend() == 'kernel':
        # -f: its links per child would need the leader's memory, and the
        # files' probes would be in every process: the kernel path by
        # name refuses, in one line; auto takes the ptrace path.
        chk.prefix = '[follow] '
        run = session.attach(pid, opts=('-q', '-f', '--duration=0.3', '--backend=kernel'),
                             load=False)
        check_refusal(chk, run, '-f --backend=kernel', pid, r'--backend=ptrace follows it')
        run = session.attach(pid, opts=('-q', '-f', '--duration=0.3', '--backend=auto'))
        chk.eq('-f, auto: the ptrace path', run.doc['session']['backend'], 'ptrace')
        chk.true('-f, auto: why (%r)' % run.doc['session']['backend_why'],
                 'the kernel path failed' in run.doc['session']['backend_why'] and
                 'every process' in run.doc['session']['backend_why'])
        served += 1
        chk.eq('after -f: the workers go on', target.ask('p'), ['pong', str(served)])
        # Nothing to restore: ptwatch killed while attached (its probes
        # tied to a worker, since the leader has no memory), the workers
        # go on and no probe of its stays behind.
        chk.prefix = '[kill9] '
        worker = rec['command_tid']
        run, proc = start_attached(session, target)
        try:
            # the probes in the workers' libc (read through a worker: the
            # leader has no memory), none in another process, and the
            # programs ptwatch holds
            check_text_patched(chk, pid, 'while watched', tid=worker, timeout=20)
            check_bystander(chk, 'while watched')
            ids = bpf_prog_ids(ptwatch_processes(proc.pid).values())
            kill_group(proc)
            proc.wait(timeout=20)
        finally:
            end_group(proc)
        check_untouched(chk, pid, 'after the kill', allowed='SRZ')
        wait_for(lambda: text_diffs(pid, tid=worker) == [], 20)
        check_text_restored(chk, pid, 'after the kill', tid=worker)
        check_bpf_freed(chk, ids, 'after the kill')
        served += 1
        chk.eq('after the kill: the workers go on', target.ask('p'), ['pong', str(served)])
        # The thread the probes are tied to ends while attached ('r':
        # command_worker releases cond_worker, the older, and joins it):
        # its own end is seen, then the probes are tied to command_worker,
        # and a thread made after ('n') is seen whole: its routine, value
        # and join. Then 'q': command_worker, the last, returns.
        chk.prefix = '[anchor] '
        # (the debug log says when the probes are tied again: the thread
        # made after must be made after)
        run, proc = start_attached(session, target, opts=['--debug=tracer'])
        try:
            chk.eq('cond_worker released', target.ask('r'), ['released', str(rec['cond_tid'])])
            chk.true('the probes tied again',
                     wait_for_text(run, proc, 'probes tied to %d: in' % rec['command_tid'], 20),
                     run.stderr_text()[-2000:])
            words = target.ask('n')
            target.send('q')
            session.wait(run, proc, 20, 'ptwatch did not end with the process')
        finally:
            end_group(proc)
        load_doc(run)
        chk.eq('ptwatch exits 0 (the process ended)', run.returncode, 0)
        index = span_index(run.doc)
        cond = index.get(rec['cond_tid'], [{}])[-1]
        chk.eq('cond_worker: returned 0xc0d, seen by its probes', (cond.get('status'),
               (cond.get('end') or {}).get('value')), ('completed', '0xc0d'), cond)
        leaf_tid = int(words[1]) if len(words) == 2 and words[0] == 'leaf' else None
        leaf = index.get(leaf_tid, [{}])[-1]
        chk.eq('leaf_worker, made once the probes were tied again: its routine, value and '
               'join, seen by the probes',
               ((leaf.get('start_routine') or {}).get('symbol'), leaf.get('status'),
                (leaf.get('end') or {}).get('value'), (leaf.get('join') or {}).get('joiner_tid')),
               ('leaf_worker', 'completed', '0x1eaf', rec['command_tid']), leaf)
        cmd = index.get(rec['command_tid'], [{}])[-1]
        chk.eq('command_worker: returned 0xc3d, seen by its probes', (cmd.get('status'),
               (cmd.get('end') or {}).get('value')), ('completed', '0xc3d'), cmd)
        msgs = [w['message'] for w in run.doc.get('warnings', [])]
        chk.true('the probes tied to cond_worker %d, the oldest live thread (%s)'
                 % (rec['cond_tid'], msgs),
                 any(('the probes are tied to its thread %d' % rec['cond_tid']) in m
                     for m in msgs))
        chk.true('a note says that thread ended, and which they are tied to now (%s)' % msgs,
                 any(('thread %d, which the probes were tied to' % rec['cond_tid']) in m and
                     ('they are tied to thread %d' % rec['command_tid']) in m for m in msgs))
        check_target_exit(chk, target, 'released')
        chk.prefix = ''
        return
    # The tracer dies while attached: the front restores the bytes through
    # a live thread's view (the leader's maps are empty).
    chk.prefix = '[kill9] '
    worker = rec['command_tid']
    run, proc = session.start_attach(pid)
    try:
        workers = {rec['command_tid'], rec['cond_tid']}
        chk.true('the workers traced (tracers %s)' % tracer_pids(pid),
                 wait_for(lambda: set(tracer_pids(pid)) >= workers, 20))
        check_text_patched(chk, pid, 'while traced', tid=worker, timeout=20)
        for tracer in set(tracer_pids(pid).values()):
            os.kill(tracer, signal.SIGKILL)
        session.wait(run, proc, 20, 'ptwatch did not exit after its tracer was killed')
    finally:
        end_group(proc)
    chk.eq('threads with a tracer after the kill', wait_untraced(pid, 2) is not None, True)
    check_text_restored(chk, pid, 'after the kill', tid=worker)
    lines = attach_stderr_lines(run)
    chk.true('one line says the bytes were restored and the target lives (stderr %r)' % lines,
             any(re.search(r'restored [1-9][0-9]* patched bytes; the target was still running',
                           x) for x in lines))
    served += 1
    chk.eq('after the kill: the workers go on', target.ask('p'), ['pong', str(served)])
    chk.prefix = ''
    target.send('q')
    check_target_exit(chk, target, 'released')


# README: "A thread in uninterruptible sleep is reported after 1 s and not
# waited for again."
STOP_DEADLINE_NS = 10**9


def check_waited_once(chk, run, tid, what):
    """A thread that cannot stop (D): one threads_not_stopped warning that
    names it and the 1 s it was waited for; the others were held stopped
    (frozen_ns, ptwatch's own clock) that second, not a second one."""
    msgs = [w['message'] for w in run.doc.get('warnings', []) if w['code'] == 'threads_not_stopped']
    chk.eq('%s: one threads_not_stopped warning (%s)' % (what, msgs), len(msgs), 1)
    chk.true('%s: the warning names the thread %d and the 1 s waited (%s)' % (what, tid, msgs),
             any(re.search(r'\btid %d\b' % tid, m) and 'did not stop within 1000 ms' in m
                 for m in msgs))
    frozen = run.doc['session']['frozen_ns']
    chk.true('%s: the others held stopped for the 1 s wait, not twice as long (frozen_ns %d)'
             % (what, frozen), STOP_DEADLINE_NS <= frozen < 2 * STOP_DEADLINE_NS)


@test('attach-unstoppable',
      kernel='a thread that will not stop for ptrace (uninterruptible sleep): the kernel path stops no thread')
@case('attach-unstoppable')
def case_attach_unstoppable(session, chk):
    target = session.target('vforker')
    pid, vfork_tid = target.ready()
    rec = target.one_truth('vforker')
    run = session.attach(pid, opts=('-q', '--snapshot'), timeout=30)
    doc = run.doc
    print('snapshot with a thread in D: %.2f s' % run.elapsed)
    check_attach_doc(chk, run, pid, 'snapshot', 'snapshot')
    check_waited_once(chk, run, vfork_tid, 'snapshot')
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
    check_waited_once(chk, run, vfork_tid, '--duration')
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


@test('attach-signals', '10', kernel=True)
@case('attach-signals')
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


@test('attach-exec-fork', kernel=True, first=True)
@case('attach-exec-fork')
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
    # the three threads of image 1 at the exec: main (joining exec_worker),
    # fork_worker and exec_worker, which execs (the fork children are not
    # followed without -f)
    rec = target.one_truth('exec')
    chk.eq('across the exec: spans ended by exec: the three threads of image 1 (%s)'
           % [(s['tid'], (s['start_routine'] or {}).get('symbol')) for s in execs], len(execs), 3)
    chk.eq('across the exec: main and exec_worker among them',
           sorted({pid, rec['tid']} & {s['tid'] for s in execs}), sorted({pid, rec['tid']}))
    chk.eq('across the exec: the routines ended by it',
           sorted((s['start_routine'] or {}).get('symbol') or '' for s in execs),
           ['exec_worker', 'fork_worker', 'main'])
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


@test('attach-pipe-closed', kernel=True)
@case('attach-pipe-closed')
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
        # a closed output is one of the ways to let go (README: SIGPIPE
        # makes ptwatch restore every byte, detach and write its report)
        chk.eq('ptwatch exit status: it let go (not death by SIGPIPE)', run.returncode, 0)
        if output == 'file':
            chk.true('the document was written', os.path.exists(run.doc_path) and
                     os.path.getsize(run.doc_path) > 0)
            load_doc(run)
            print('%s: document end_reason %s, exit %s'
                  % (variant, run.doc['session']['end_reason'], run.doc['target']['exit']))
            check_attach_doc(chk, run, pid, 'interrupted', variant)
            chk.eq('target.fate', run.doc['target'].get('fate'), 'lives_on')
        gone = wait_untraced(pid, 2)
        chk.true('TracerPid 0 within 2 s (tracers %s)' % tracer_pids(pid), gone is not None)
        target.check_alive('after the pipe closed')
        check_untouched(chk, pid, 'after the pipe closed')
        compare_mappings(chk, before, exec_mappings(pid), 'after the pipe closed')
        wait_progress(chk, target, 'after the pipe closed', more=300)
    chk.prefix = ''
    target.send('q')
    check_target_exit(chk, target, 'released')
