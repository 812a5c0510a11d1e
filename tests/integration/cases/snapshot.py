"""--snapshot: every thread's stack and wait, deadlocks, threads read
asleep without a stop; the target is left as it was."""

import json
import os
import re
import shutil

from ptw_test import test, backend
from ptw_test import (
    case, check_attach_doc, check_untouched, fixture, FrameworkError, proc_status,
    report_warnings, Skip, span_index, task_states, thread_spans, tracer_pids, wait_for
)
from helpers import (
    check_main_span, check_open, check_preexisting, check_stack, check_target_exit, settled_states,
    wait_untraced
)


@test('snapshot-running',
      kernel=True)
@case('snapshot-running')
def case_snapshot_running(session, chk):
    """--snapshot of threads that run on: each stack is the one the thread
    had when it was stopped (copied then, unwound once it ran again), never
    a mix of two call chains; the sleepers' system calls are the ones
    they sleep in (read as they sleep, or from their registers)."""
    target = session.target('flipper')
    pid = target.ready()[0]
    flippers = [r['tid'] for r in target.truth() if r.get('kind') == 'flipper']
    sleepers = {r['tid']: r['syscall'] for r in target.truth() if r.get('kind') == 'sleeper'}
    full = set()    # the chains (a, b) seen whole, flip_x3 <- flip_x2 <- flip_x1 <- flipper
    attempt = 0
    # at least 5 snapshots, and until each chain was seen whole (a thread
    # stopped in flipper's loop or in flip_x1 has a shorter one, rarely)
    while attempt < 5 or (full != {'a', 'b'} and attempt < 20):
        # Each sleeper asleep (S) first, in its system call: it is read as
        # it sleeps, so its state is exactly that. A nap that an earlier
        # snapshot interrupted goes on in restart_syscall.
        asleep = wait_for(lambda: (lambda got: got if all(got.values()) else None)(
            {tid: sleeping_in(pid, tid) for tid in sleepers}), 10) or {}
        for tid, call in sleepers.items():
            allowed = (call, 'restart_syscall') if 'sleep' in call else (call,)
            if asleep.get(tid) not in allowed:
                raise FrameworkError('sleeper %d is not asleep in %s: %s (%s)'
                                     % (tid, call, asleep.get(tid), task_states(pid)))
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
                if len(chain) == 3:
                    full.add(chain[0][5])
        for tid, call in sleepers.items():
            what = 'run %d: sleeper %d' % (attempt, tid)
            spans = index.get(tid, [])
            if chk.eq('%s: spans' % what, len(spans), 1):
                chk.eq('%s: state (read as it slept)' % what, spans[0].get('state'),
                       'S ' + asleep[tid], spans[0])
        chk.eq('run %d: the fixture answers' % attempt, target.ask('p'), ['pong'])
        attempt += 1
    chk.eq('both call chains seen whole in %d snapshots' % attempt, sorted(full), ['a', 'b'])
    if backend() == 'kernel':
        # Not a single ptrace call, running threads included: the kernel
        # samples them (perf), strace -f sees every process ptwatch makes.
        log = os.path.join(session.mkdtemp(), 'strace.log')
        run = session.attach(pid, opts=('--snapshot',),
                             prefix=('strace', '-f', '-qq', '-e', 'trace=ptrace', '-o', log))
        check_attach_doc(chk, run, pid, 'snapshot', 'under strace')
        with open(log) as f:
            calls = [ln for ln in f if 'ptrace(' in ln]
        chk.eq('under strace: ptrace calls', calls[:5], [])
        chk.eq('under strace: session.backend', run.doc['session'].get('backend'), 'kernel')
        chk.eq('under strace: session.frozen_ns', run.doc['session'].get('frozen_ns'), 0)
        index = span_index(run.doc)
        for tid in flippers:
            spans = index.get(tid, [])
            if chk.eq('under strace: flipper %d: spans' % tid, len(spans), 1):
                check_stack(chk, spans[0], 'under strace: flipper %d (running)' % tid,
                            'flipper', 'flipper.c')
                chk.eq('under strace: flipper %d: state' % tid, spans[0].get('state'), 'R')
        chk.eq('after it: the fixture answers', target.ask('p'), ['pong'])


# x86-64 system call numbers of the sleepers' calls (/proc/TID/syscall)
SYSCALL_NAMES = {0: 'read', 35: 'nanosleep', 219: 'restart_syscall', 230: 'clock_nanosleep'}


def sleeping_in(pid, tid):
    """The name of the system call thread tid sleeps in (state S), or None."""
    try:
        with open('/proc/%d/task/%d/syscall' % (pid, tid)) as f:
            words = f.read().split()
    except OSError:
        return None
    if not words or not words[0].isdigit() or task_states(pid).get(tid) != 'S':
        return None
    return SYSCALL_NAMES.get(int(words[0]), words[0])


def ctxt_switches(pid, tid):
    """(voluntary, involuntary) context switches of thread tid so far."""
    st = proc_status(pid, tid)
    if 'voluntary_ctxt_switches' not in st:
        raise FrameworkError('no context switch counts in /proc/%d/task/%d/status' % (pid, tid))
    return int(st['voluntary_ctxt_switches']), int(st['nonvoluntary_ctxt_switches'])


@test('snapshot-sleepers', 'quiet',
      kernel=True)
@test('snapshot-sleepers-mixed', 'mixed',
      kernel=True)
@case('snapshot-sleepers')
def case_snapshot_sleepers(session, chk, mode='quiet'):
    """--snapshot reads a thread asleep in the kernel without stopping it
    (its stack pointer and pc from /proc/TID/syscall, its stack copied,
    schedstat the same before and after) and stops the others; on the
    kernel path (@kernel) it stops none: the kernel gives the others'
    registers (a task iterator) or samples them as they run (perf). The
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
    # Independently of what ptwatch says: a thread stopped (ptrace stop,
    # even for a moment) has switched out voluntarily once more; one read
    # asleep without a stop has not run at all. The main thread first
    # goes back to sleep in read() of the control pipe after its reply.
    if not wait_for(lambda: sleeping_in(pid, pid) == 'read', 10):
        raise FrameworkError('the main thread of %d did not sleep in read()' % pid)
    role_of = {r['tid']: r['role'] for r in recs}
    role_of[pid] = 'main'
    switches = {tid: ctxt_switches(pid, tid) for tid in role_of}
    run = session.attach(pid, opts=('--snapshot', '--debug=tracer'))
    frozen = check_attach_doc(chk, run, pid, 'snapshot', 'snapshot')
    chk.true('untraced after the snapshot (tracers %s)' % tracer_pids(pid),
             wait_untraced(pid, 2) is not None)
    after = {tid: ctxt_switches(pid, tid) for tid in role_of}
    for tid, role in sorted(role_of.items()):
        what = '%s thread %d: context switches (voluntary, involuntary)' % (role, tid)
        if role in ('omit', 'cond', 'deep', 'main'):
            # asleep all along: read without a stop
            chk.eq('%s unchanged: read asleep, not stopped' % what, after[tid], switches[tid])
        elif role == 'fp' and backend() == 'kernel':
            chk.eq('%s unchanged: read by the kernel, not stopped' % what, after[tid][0],
                   switches[tid][0])
        elif role in ('fp', 'busy') and backend() != 'kernel':
            # had to be stopped: its unwind needs rbp, or it runs
            chk.true('%s %s, then %s: stopped, so one voluntary switch more at least'
                     % (what, switches[tid], after[tid]), after[tid][0] > switches[tid][0])
    err = run.stderr_text()
    m = re.search(r'snapshot of %d: (\d+) threads, (\d+) read asleep without a stop, '
                  r'(\d+) read by the kernel, (\d+) stopped' % pid, err)
    if not chk.true('the debug log counts the threads read and stopped', m, detail=err[-2000:]):
        return
    nthreads, still, by_kernel, stopped = (int(x) for x in m.groups())
    print('%s: %d threads, %d read asleep without a stop, %d read by the kernel, %d stopped, '
          'frozen %s ns' % (mode, nthreads, still, by_kernel, stopped, frozen))
    chk.eq('threads', nthreads, len(recs) + 1)
    chk.eq('every thread read asleep, by the kernel or stopped', still + by_kernel + stopped,
           nthreads)
    if backend() == 'kernel':
        chk.eq('session.backend', run.doc['session'].get('backend'), 'kernel')
        chk.eq('@kernel: no thread stopped', stopped, 0)
        chk.eq('@kernel: session.frozen_ns', frozen, 0)
    else:
        chk.eq('ptrace: none read by the kernel', by_kernel, 0)
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
        if r['role'] == 'fp' and backend() != 'kernel':
            chk.eq('fp thread: stopped, and why', said_stopped.get(r['tid']),
                   'its unwind needs more than sp and pc')
    deep = [r['tid'] for r in recs if r['role'] == 'deep']
    chk.true('the deep thread\'s unwind read beyond the stack copied (debug log)',
             deep and re.search(r'snapshot: %d: its unwind read beyond' % deep[0], err))
    if backend() == 'kernel':
        chk.true('the text says none was stopped',
                 'threads, none stopped (each read by the kernel as it slept or ran)'
                 in run.stdout_text(), detail=run.stdout_text()[:300])
        if mode == 'mixed':
            chk.true('the fp and busy threads read by the kernel (%d)' % by_kernel,
                     by_kernel >= 2)
    elif mode == 'quiet':
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
    check_untouched(chk, pid, 'after the snapshot', allowed='SR')
    chk.eq('the fixture answers', target.ask('p'), ['pong'])
    target.send('q')
    check_target_exit(chk, target, 'released')
    chk.eq('every thread woke and returned ("sleepers_done")',
           len([r for r in target.truth() if r.get('kind') == 'sleepers_done']), 1)


@test('snapshot-deleted',
      kernel=True)
@case('snapshot-deleted')
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


@test('snapshot-deadlock',
      kernel=True)
@test('snapshot-deadlock-no-debug-files', 'no-debug-files', kernel=True)
@case('snapshot-deadlock')
def case_snapshot_deadlock(session, chk, mode='default'):
    """--snapshot of the 'deadlock' fixture (eleven threads blocked on
    purpose): each thread's state, stack and what it waits for (kind,
    object, owner) as the fixture's own records say, with the kinds --locks
    says (rwlock to read or to write, a semaphore, a lock inside glibc); the
    AB/BA deadlock in the text and the document; the target unharmed.
    no-debug-files: the same without libc's debug file (glibc's slow paths
    found from its exported functions' code)."""
    target = session.target('deadlock')
    pid = target.ready()[0]
    dl = target.one_truth('deadlock')
    blocked = [r for r in target.truth() if r.get('kind') == 'blocked']
    role = {}
    for r in blocked:
        role.setdefault(r['role'], []).append(r)
    ab, ba = role['ab'][0], role['ba'][0]
    # (its ready line comes just before main's read: wait until it sleeps
    # there, as the state checked below is a sleeping main thread's)
    settled_states(pid, {t: 'S' for t in [pid] + [r['tid'] for r in blocked]})
    extra = ('--no-debug-files',) if mode == 'no-debug-files' else ()
    run = session.attach(pid, opts=('--snapshot',) + extra)
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
        # the kinds --locks says (a rwlock's readers and writers apart, a
        # semaphore, a lock inside glibc), from the code of glibc's slow
        # paths, not from frame names
        kind = {'rwlock': 'rwlock_read' if r['role'] == 'rd_waiter' else 'rwlock_write'}.get(
            r['waits'], r['waits'])
        chk.eq('%s: waits_for.kind' % what, wf.get('kind'), kind, s)
        # the object's own address (pthread_mutex_t, pthread_cond_t,
        # pthread_rwlock_t, not that of a futex word inside it; the joined
        # thread's pthread_t)
        got = wf.get('object')
        inside = ''
        if r['waits'] != 'join' and isinstance(got, str) and got != r['object']:
            inside = ' (the %s + %#x)' % (r['waits'], int(got, 16) - int(r['object'], 16))
        chk.eq('%s: waits_for.object%s' % (what, inside), got, r['object'], s)
        if r['waits'] in ('mutex', 'join', 'rwlock'):
            # the mutex's owner, the joined thread, the rwlock's writer
            chk.eq('%s: waits_for.owner_tid' % what, wf.get('owner_tid'), r['owner'], s)
        else:
            chk.eq('%s: waits_for.owner_tid (a condition variable has none)' % what,
                   wf.get('owner_tid'), None, s)
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
