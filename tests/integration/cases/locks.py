"""--locks: wait spans and live deadlocks (fixture 'locks')."""

import json
import os
import signal
import subprocess

from ptw_test import test
from ptw_test import (
    case, check_exit, check_untouched, end_group, fixture, FrameworkError, load_doc, load_truth, one_truth,
    ptwatch_path, read_outputs, thread_spans, truth_of, wait_for
)
from helpers import (
    end_with,     check_same_as_untraced, kill_tracer, ptwatch_processes, start_attached, check_text_restored,
    settled_states, wait_for_text, wait_untraced
)


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
        if w['start'] == 'before_attach':
            # (under way at the attach: its start unknown, no duration)
            chk.true('%s: begun before the attach: no start, no duration' % what,
                     w['start_ns'] is None and w['duration_ns'] is None, w)
            if w['status'] == 'completed':
                chk.true('%s: an end' % what, w['end_ns'] is not None, w)
            else:
                chk.true('%s: no end; a reason unless open' % what,
                         w['end_ns'] is None and (w['status'] == 'open' or w['reason']), w)
        elif w['status'] == 'completed':
            chk.true('%s: end at or after start' % what,
                     w['end_ns'] >= w['start_ns'] and w['duration_ns'] == w['end_ns'] - w['start_ns'],
                     w)
        else:
            chk.true('%s: no end; a reason unless open' % what,
                     w['end_ns'] is None and (w['status'] == 'open' or w['reason']), w)


def contend_rounds(chk, run, n):
    """The fixture's "round" records (locks contend N), in round order:
    one contended wait each, by its waiter for its owner."""
    rounds = sorted(truth_of(run, 'round'), key=lambda r: r['round'])
    if [r['round'] for r in rounds] != list(range(n)):
        raise FrameworkError('locks contend %d: round records %s' % (n, rounds))
    return rounds


def check_contended_waits(chk, waits, rec, rounds, what='lock_m'):
    """The waits on the contend fixture's mutex (rec: its "contend"
    record) are the rounds', one each, in order: (waiter, owner) exactly.
    Returns them, in order."""
    mutex = sorted((w for w in waits if w['wait'] == 'mutex' and
                    w['object']['addr'] == rec['mutex']), key=lambda w: w['start_ns'])
    chk.eq('%s: the contended waits, in order, as (waiter, owner): one per round of the '
           'fixture' % what, [(w['tid'], w['owner_tid']) for w in mutex],
           [(r['waiter'], r['owner']) for r in rounds])
    return mutex


def locks_fixture(variant):
    """variant static: the fixture linked statically (libc in it)."""
    return fixture('locks_static' if variant == 'static' else 'locks')


def locks_opts(variant):
    return ['-q', '--locks'] + (['--no-debug-files'] if variant == 'no-debug-files' else [])


@test('locks-object', kernel=True)
@case('locks-object')
def case_locks_object(session, chk):
    """--object GLOB: of --locks' output, the waits on the objects whose
    name or address matches. locks contend 5 has lock_m (the players'
    waits) and main's joins of the players (thread objects): --object
    lock_m keeps the players' wait lines, lock_m's row in the objects'
    table, the players' wait lines and rows in the summary, not main's;
    report --object of the document says the same; '0x*' matches by
    address (every object)."""
    from helpers import run_ptwatch
    import re
    cmd = [fixture('locks'), 'contend', '5']
    run = session.run(cmd, opts=['--locks', '--object', 'lock_m'])
    check_exit(chk, run, code=0)
    rec = one_truth(run, 'contend')
    players = {rec['a'], rec['b']}
    text = run.stderr_text()
    log, _, summary = text.partition('\nptwatch: ')
    waits = [ln for ln in log.splitlines() if re.match(r'^\s*[\d.]+\s+\d+\s+waited?\s', ln)]
    chk.true('wait lines, each on lock_m (%d)' % len(waits),
             waits and all(' mutex lock_m ' in ln for ln in waits), detail='\n'.join(waits[:6]))
    chk.true('no wait line of main\'s joins', not any('joins thread' in ln for ln in waits))
    rows = {int(m.group(1)) for m in re.finditer(r'^\s+\d+\s+(\d+)\s', summary, re.M)}
    chk.eq('the summary\'s thread rows: the players (%s)' % sorted(players), rows, players)
    objects = re.findall(r'^  (\S+)\s+(mutex|thread|cond)\s+\d+', summary, re.M)
    chk.eq('the objects\' table: lock_m alone', [o[0] for o in objects], ['lock_m'])
    per_thread = {int(t) for t in re.findall(r'^  thread (\d+) \[\d+\] waited', summary, re.M)}
    chk.true('the threads\' waits: players only (%s)' % per_thread, per_thread <= players and per_thread)
    # the document is the session's, whole: report --object filters it so
    rep = run_ptwatch(['report', '--object', 'lock_m', run.doc_path])
    chk.eq('report --object: exit status', rep.returncode, 0)
    chk.eq('report --object lock_m: the same objects\' table',
           re.findall(r'^  (\S+)\s+(?:mutex|thread|cond)\s+\d+', rep.stdout.decode(), re.M),
           ['lock_m'])
    # and its Chrome trace: lock_m's wait slices alone
    rep = run_ptwatch(['report', '--format=chrome', '--object', 'lock_m', run.doc_path])
    import json as _json
    names = {e['name'] for e in _json.loads(rep.stdout.decode())['traceEvents']
             if e.get('cat', '').startswith('wait')}
    chk.eq('report --format=chrome --object lock_m: its wait slices', names, {'wait mutex lock_m'})
    rep = run_ptwatch(['report', '--object', '0x*', run.doc_path])
    every = re.findall(r'^  (\S+)\s+(?:mutex|thread|cond)\s+\d+', rep.stdout.decode(), re.M)
    chk.true('report --object 0x*: every object, by address (%s)' % every,
             'lock_m' in every and len(every) >= 2)


@test('locks-contend', kernel=True, ns=True)
@test('locks-contend-no-debug-files', 'no-debug-files', kernel=True)
@test('locks-contend-static', 'static', kernel=True)
@case('locks-contend')
def case_locks_contend(session, chk, variant='default'):
    """Two threads take turns holding lock_m, the other one waiting each
    round (20 rounds, each one a contended wait: the holder lets go only
    once the waiter sleeps on lock_m's futex): exactly the fixture's 20
    waits, in order, each by that round's waiter for its owner (the other
    player); the object named lock_m, the call site in player; the
    summary's most contended object is lock_m. The fixture's results are
    the same without --locks."""
    cmd = [locks_fixture(variant), 'contend', '20']
    run = session.run(cmd, opts=locks_opts(variant))
    check_exit(chk, run, code=0)
    check_waits_sane(chk, run.doc)
    rec = one_truth(run, 'contend')
    a, b = rec['a'], rec['b']
    rounds = contend_rounds(chk, run, 20)
    mutex = check_contended_waits(chk, wait_spans(run.doc, 'mutex'), rec, rounds)
    for w in mutex:
        what = 'wait %d' % w['id']
        chk.eq('%s: object symbol' % what, obj_symbol(w), 'lock_m', w)
        chk.eq('%s: object kind' % what, w['object']['kind'], 'mutex', w)
        chk.eq('%s: call site' % what, site_symbol(w), 'player', w)
        chk.eq('%s: status' % what, w['status'], 'completed', w)
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


@test('locks-kinds', timeout=90, kernel=True, ns=True)
@test('locks-kinds-no-debug-files', 'no-debug-files', timeout=90, kernel=True)
@test('locks-kinds-static', 'static', timeout=90, kernel=True)
@case('locks-kinds')
def case_locks_kinds(session, chk, variant='default'):
    """A join, a reader and a writer on a write-held rwlock, a condition
    variable, a semaphore: each wait is seen with its kind, object (named
    when global), owner (joined thread, rwlock writer) and call site."""
    exe = locks_fixture(variant)
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


@test('locks-nocontend', kernel=True)
@case('locks-nocontend')
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


@test('locks-deadlock', 'launch', kernel=True, ns=True)
@test('locks-deadlock-attach', 'attach', kernel=True, ns=True)
@test('locks-deadlock-kill9', 'kill9', kernel=True)
@case('locks-deadlock')
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
        check_text_restored(chk, pid, 'after the detach')
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
            check_text_restored(chk, pid, 'after the kill')
            chk.true('both threads still sleep on their mutexes after the kill',
                     wait_for(lambda: blocked_on(pid, rec['ab'], rec['mutex_b']) and
                              blocked_on(pid, rec['ba'], rec['mutex_a']), 5))
        os.kill(pid, signal.SIGKILL)
        session.wait(run, proc, 20, 'ptwatch did not exit after the target was killed')
    finally:
        end_with(proc, pid)
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


@test('locks-deadlock-join', kernel=True)
@case('locks-deadlock-join')
def case_locks_deadlock_join(session, chk):
    """A deadlock through a join: main holds mutex_a and joins a thread
    that waits for it. Found as the AB/BA one is: each waits for the other
    (main for the thread it joins, that thread for mutex_a's owner), said
    once in the event log and in the document."""
    run, proc = session.start([fixture('locks'), 'joindeadlock'], opts=['-q', '--locks'])
    pid = None
    try:
        chk.true('the truth record', wait_for(lambda: any(r.get('kind') == 'joindeadlock'
                                                          for r in load_truth(run)), 20))
        rec = one_truth(run, 'joindeadlock')
        pid = rec['pid']
        chk.true('DEADLOCK said in the event log (with -q)',
                 wait_for_text(run, proc, 'DEADLOCK #1', 20), run.stderr_text()[-2000:])
        chk.eq('ptwatch still runs', proc.poll(), None)
        os.kill(pid, signal.SIGKILL)
        session.wait(run, proc, 20, 'ptwatch did not exit after the target was killed')
    finally:
        end_with(proc, pid)
    load_doc(run)
    dls = run.doc.get('deadlocks') or []
    chk.eq('one deadlock in the document (%r)' % dls, len(dls), 1)
    if dls:
        chk.eq('deadlock tids', sorted(dls[0]['tids']), sorted([rec['main'], rec['worker']]))
    waits = {w['id']: w for w in wait_spans(run.doc)}
    want = {rec['main']: ('join', rec['worker']), rec['worker']: ('mutex', rec['main'])}
    for wid in (dls[0]['waits'] if dls else []):
        w = waits.get(wid)
        if not chk.true('deadlock wait %s is a wait span' % wid, w is not None):
            continue
        kind, owner = want.get(w['tid'], (None, None))
        chk.eq('wait %d: kind' % wid, w['wait'], kind, w)
        chk.eq('wait %d: owner' % wid, w['owner_tid'], owner, w)
        if kind == 'mutex':
            chk.eq('wait %d: object' % wid, w['object']['addr'], rec['mutex_a'], w)
    lines = [x for x in run.stderr_text().splitlines() if 'DEADLOCK #' in x and 'threads wait' in x]
    chk.eq('said once in the event log (%r)' % lines, len(lines), 1)
    check_waits_sane(chk, run.doc)


@test('locks-under-way', kernel=True)
@test('locks-under-way-follow', 'follow', kernel=True)
@test('locks-under-way-no-debug-files', 'no-debug-files', kernel=True)
@case('locks-under-way')
def case_locks_under_way(session, chk, mode='attach'):
    """-p --locks on a process whose threads already wait (the 'deadlock'
    fixture: an AB/BA deadlock, a join of one of them, rwlock readers and
    writers behind a holder, three cond waiters): each wait under way is a
    wait span whose start was before the attach (its kind, object, owner and
    call site those of the fixture's own record; none for the thread in
    read()), the deadlock is said at once in the event log and confirmed;
    the cond waiters woken, their waits are completed (an end, no duration)
    before the fixture's own "woke" record; Ctrl-C detaches and the others
    still sleep where they did, no byte left changed. follow: the fixture
    is the child of a shell, attached with -p -f: a process forked before
    the attach, its waits under way found as the shell's would be.
    no-debug-files: without libc's debug file (the slow paths and the join
    function found from the exported functions' code)."""
    if mode == 'follow':
        target = session.target('deadlock', ['-c', '"$0"; :', fixture('deadlock')],
                                exe='/bin/sh')
    else:
        target = session.target('deadlock')
    # (the fixture's own pid: the shell's child with follow)
    words = target.line(30, 'ready').split()
    if words[:1] != ['ready']:
        raise FrameworkError('%s: expected "ready PID", got %r' % (target, words))
    pid = int(words[1])
    blocked = [r for r in target.truth() if r.get('kind') == 'blocked']
    settled_states(pid, {t: 'S' for t in [pid] + [r['tid'] for r in blocked]})
    run, proc = start_attached(session, target,
                               opts=['--locks'] + {'follow': ['-f'],
                                                   'no-debug-files': ['--no-debug-files']}.get(mode, []))
    try:
        chk.true('DEADLOCK said in the event log', wait_for_text(run, proc, 'DEADLOCK #1', 20),
                 run.stderr_text()[-2000:])
        target.send('w')
        chk.eq('the cond waiters woke', target.line(20, 'woken'), 'woken')
        chk.true('their waits\' ends said in the event log',
                 wait_for(lambda: (read_outputs(run), run.stderr_text().count(
                     '(begun before ptwatch came)'))[1] >= 3, 20), run.stderr_text()[-2000:])
        os.kill(proc.pid, signal.SIGINT)
        session.wait(run, proc, 20, 'ptwatch did not let go after SIGINT')
    finally:
        end_group(proc)
    load_doc(run)
    doc = run.doc
    chk.eq('fate', doc['target']['fate'], 'lives_on')
    woke = {r['tid']: r['ns'] for r in target.truth() if r.get('kind') == 'woke'}
    kinds = {'mutex': 'mutex', 'join': 'join', 'cond': 'cond', 'lock': 'lock', 'sem': 'sem'}
    # (all but the thread in read())
    nunder = len([r for r in blocked if r['waits'] != 'read'])
    waits = wait_spans(doc)
    for r in blocked:
        mine = [w for w in waits if w['tid'] == r['tid']]
        what = '%s %d' % (r['role'], r['tid'])
        if r['waits'] == 'read':
            chk.eq('%s (in read): no wait' % what, mine, [])
            continue
        kind = kinds.get(r['waits']) or ('rwlock_read' if r['role'] == 'rd_waiter'
                                         else 'rwlock_write')
        under = [w for w in mine if w['wait'] == kind]
        if not chk.eq('%s: one %s wait' % (what, kind), len(under), 1, mine):
            continue
        w = under[0]
        chk.eq('%s: begun before the attach' % what, w['start'], 'before_attach', w)
        chk.eq('%s: object' % what, w['object']['addr'], r['object'], w)
        chk.eq('%s: owner' % what, w['owner_tid'], r['owner'] or None, w)
        chk.eq('%s: call site' % what, site_symbol(w), r['routine'], w)
        if r['waits'] == 'cond':
            chk.eq('%s: completed once woken' % what, w['status'], 'completed', w)
            chk.true('%s: it ended before the thread said it woke' % what,
                     w['end_ns'] is not None and r['tid'] in woke and
                     doc['session']['start_ns'] < w['end_ns'] <= woke[r['tid']], (w, woke))
        else:
            chk.eq('%s: still waiting at the detach' % what, w['status'], 'open', w)
    # the deadlock: its members' waits, those under way
    by_role = {r['role']: r for r in blocked}
    dls = doc.get('deadlocks') or []
    chk.eq('one deadlock (%r)' % dls, len(dls), 1)
    if dls:
        d = dls[0]
        chk.eq('deadlock tids', sorted(d['tids']), sorted([by_role['ab']['tid'],
                                                             by_role['ba']['tid']]))
        chk.eq('confirmed by', d['confirmed_by'],
               'owners_reread' if doc['session']['backend'] == 'kernel' else 'threads_stopped')
        ids = {w['id']: w for w in waits}
        for wid in d['waits']:
            chk.true('deadlock wait %s: under way at the attach, part of it' % wid,
                     wid in ids and ids[wid]['start'] == 'before_attach' and
                     ids[wid]['deadlock'] == 1, ids.get(wid))
    m = doc['metrics']['waits']
    chk.eq('metrics: %d waits under way at the attach' % nunder, m['before_attach'], nunder, m)
    chk.true('metrics: the timed ones are the completed whose start was seen',
             m['timed'] == len([w for w in waits if w['status'] == 'completed' and
                                w['start'] == 'seen']), m)
    check_waits_sane(chk, doc)
    lines = [x for x in run.stderr_text().splitlines() if '(under way when ptwatch came)' in x]
    chk.eq('event log: %d waits under way (%r)' % (nunder, lines), len(lines), nunder)
    # read back by report: the same waits, the same figures
    p = subprocess.run([ptwatch_path(), 'report', '--format=json', run.doc_path],
                       stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=60)
    again = json.loads(p.stdout) if p.returncode == 0 else {}
    chk.eq('report: the waits read back (start, start_ns, end_ns, duration_ns)',
           [(w['id'], w['start'], w['start_ns'], w['end_ns'], w['duration_ns'])
            for w in wait_spans(again)] if again else p.stderr,
           [(w['id'], w['start'], w['start_ns'], w['end_ns'], w['duration_ns']) for w in waits])
    chk.eq('report: the figures read back', (again.get('metrics') or {}).get('waits'), m)
    p = subprocess.run([ptwatch_path(), 'report', run.doc_path], stdout=subprocess.PIPE,
                       stderr=subprocess.PIPE, timeout=60)
    chk.true('report: the summary counts them',
             '(%d under way when ptwatch came)' % nunder in p.stdout.decode(errors='replace'),
             p.stdout.decode(errors='replace')[-1500:])
    check_untouched(chk, pid, 'after the detach', allowed='S')
    chk.true('ab and ba still sleep on their mutexes after the detach',
             wait_for(lambda: blocked_on(pid, by_role['ab']['tid'], by_role['ab']['object']) and
                      blocked_on(pid, by_role['ba']['tid'], by_role['ba']['object']), 5))
    check_text_restored(chk, pid, 'after the detach')
    target.kill()


@test('locks-usage', kernel=True)
@case('locks-usage')
def case_locks_usage(session, chk):
    """--locks with --snapshot: one clear line, exit status 2."""
    argv = [ptwatch_path(), '--locks', '--snapshot', '-p', str(os.getpid())]
    p = subprocess.run(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=20)
    err = p.stderr.decode()
    chk.eq('exit status', p.returncode, 2)
    chk.true('says why (%r)' % err, err.splitlines()[:1] and
             '--locks cannot be used with --snapshot' in err.splitlines()[0])
