"""Launch mode (ptwatch -- COMMAND): the thread lifecycle and what the
command does to it (nested creation, main's exit, a crash, fork and exec,
a thread storm, signals, stdout, exec failures and exit codes, raw clones,
dlopen, odd debug info, static programs)."""

import json
import os
import re
import signal
import stat
import subprocess
import time

from ptw_test import test
from ptw_test import (
    backend, CANCELED, case, check_exit, Gap, check_location, end_group, Failed, find_span, fixture,
    FrameworkError, load_doc, load_truth, Model, one_truth, report_warnings, routine_line,
    span_index, task_states, thread_spans, truth_of
)
from helpers import read_line, run_ptwatch
from cases.locks import check_waits_sane


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
        chk.eq('metrics.join_wait_ns.count (joined threads)', jw['count'], len(m.join_records))


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


@test('joins', 'default', kernel=True)
@test('joins-no-debug-files', 'no-debug-files', kernel=True)
@case('joins')
def case_joins(session, chk, variant='default'):
    """Joins that join and joins that do not (tests/fixtures/joins.c): a
    thread ended before its join, pthread_tryjoin_np -> EBUSY,
    pthread_timedjoin_np -> ETIMEDOUT then 0, a detached thread (EINVAL),
    a join of oneself (EDEADLK), a joiner cancelled in its join, a join
    that waits 20 ms. Each thread's join is the one that joined it, with
    its wait, and nothing else. On the ptrace path a plain join costs one
    stop (its entry): its return is told by the joined thread's end;
    without libc's debug file, every return of the join function is hooked
    (no-debug-files)."""
    opts = ['-q'] + (['--no-debug-files'] if variant == 'no-debug-files' else [])
    run = session.run([fixture('joins')], opts=opts)
    check_exit(chk, run, 0)
    names = {r['tid']: r['name'] for r in truth_of(run, 'worker')}
    joins = {r['tid']: r['joiner'] for r in truth_of(run, 'join')}
    index = span_index(run.doc)
    main = one_truth(run, 'main')['tid']
    for tid, name in sorted(names.items()):
        spans = index.get(tid, [])
        if not chk.eq('%s (%d): spans' % (name, tid), len(spans), 1):
            continue
        sp = spans[0]
        js = sp['join']
        if tid not in joins:
            chk.eq('%s: join (none joined it)' % name, js, None, sp)
            continue
        if not chk.true('%s: joined' % name, js is not None, sp):
            continue
        chk.eq('%s: join.joiner_tid' % name, js['joiner_tid'], joins[tid], sp)
        if chk.true('%s: join.return_ns known' % name, js['return_ns'] is not None, sp):
            chk.true('%s: call <= return' % name, js['call_ns'] <= js['return_ns'], sp)
            if sp['end_ns'] is not None:
                chk.true('%s: it ended before the join returned' % name,
                         sp['end_ns'] <= js['return_ns'], sp)
        if name == 'long_worker':
            # (it works once main sleeps in the join: at least its 20 ms)
            chk.true('long_worker: the join waited its 20 ms of work (%r)' % js['wait_ns'],
                     (js['wait_ns'] or 0) >= 20000000, sp)
    cancelled = [s for t, n in names.items() if n == 'cancel_joiner' for s in index.get(t, [])]
    if chk.eq('cancel_joiner: one span', len(cancelled), 1):
        chk.eq('cancel_joiner: status', cancelled[0]['status'], 'cancelled', cancelled[0])
    detached = [s for t, n in names.items() if n == 'detached_worker' for s in index.get(t, [])]
    if chk.eq('detached_worker: one span', len(detached), 1):
        chk.eq('detached_worker: detached', detached[0]['detached'], True, detached[0])
    m = run.doc['metrics']
    chk.eq('metrics.unjoined (each joinable thread was joined)', m['unjoined'], 0)
    chk.eq('join waits counted', m['join_wait_ns']['count'], len(joins))
    if backend() != 'kernel':
        stops = run.doc['session']['stops']
        print('stops: %s' % json.dumps(stops))
    chk.true('main span', main in index)
    report_warnings(run)


@test('cpu', kernel=True)
@case('cpu')
def case_cpu(session, chk):
    """A thread span's cpu (tests/fixtures/cpuburn.c): four threads burn
    60 ms of CPU each by their own clock, one sleeps in ten pieces; each
    span's on-CPU time is what the thread's clock said at its end (a
    little more: what it did after), the sleeper's tiny with its
    voluntary switches, and the sum over every span matches getrusage
    for the process within 2%. The summary's table has a CPU column."""
    run = session.run([fixture('cpuburn')], opts=())
    check_exit(chk, run, 0)
    index = span_index(run.doc)
    total = 0
    for sp in thread_spans(run.doc):
        if chk.true('span %d (tid %d): cpu known' % (sp['id'], sp['tid']),
                    isinstance(sp.get('cpu'), dict), sp):
            total += sp['cpu']['on_cpu_ns']
    for r in truth_of(run, 'burner'):
        sp = (index.get(r['tid']) or [None])[0]
        cpu = (sp or {}).get('cpu') or {}
        got = cpu.get('on_cpu_ns')
        chk.true('burner %d: on_cpu_ns %s, its clock at its end %d (at most 3 ms more)'
                 % (r['tid'], got, r['cpu_ns']),
                 got is not None and r['cpu_ns'] - 500000 <= got <= r['cpu_ns'] + 3000000, sp)
    for r in truth_of(run, 'sleeper'):
        sp = (index.get(r['tid']) or [None])[0]
        cpu = (sp or {}).get('cpu') or {}
        chk.true('sleeper: on_cpu_ns %s small (its clock %d)' % (cpu.get('on_cpu_ns'), r['cpu_ns']),
                 cpu.get('on_cpu_ns') is not None and cpu['on_cpu_ns'] < 5000000, sp)
        chk.true('sleeper: at least 10 voluntary switches (%s)' % cpu.get('voluntary_switches'),
                 (cpu.get('voluntary_switches') or 0) >= 10, sp)
    usage = one_truth(run, 'usage')
    print('sum of spans %d ns, getrusage %d ns (main %d ns)'
          % (total, usage['process_cpu_ns'], usage['main_cpu_ns']))
    chk.true('the spans\' CPU, %d ns, within 2%% of getrusage\'s %d ns'
             % (total, usage['process_cpu_ns']),
             abs(total - usage['process_cpu_ns']) <= 0.02 * usage['process_cpu_ns'])
    # the Chrome trace: a thread's slice carries its cpu as args
    p = run_ptwatch(['report', '--format=chrome', run.doc_path])
    chk.eq('report --format=chrome: exit status', p.returncode, 0)
    slices = {e['args']['span']: e['args'] for e in json.loads(p.stdout.decode())['traceEvents']
              if e['ph'] == 'X' and e.get('cat', '').startswith('thread')}
    for sp in thread_spans(run.doc):
        if sp.get('cpu'):
            chk.eq('chrome: span %d: args.on_cpu_ns' % sp['id'],
                   (slices.get(sp['id']) or {}).get('on_cpu_ns'), sp['cpu']['on_cpu_ns'])
    text = run.stderr_text()
    chk.true('the summary\'s table has a CPU column',
             re.search(r'^\s+SPAN\s+TID\s.*\sCPU\s+LIFETIME$', text, re.M), detail=text[-1500:])
    # the pools: the burners' CPU together first (240 ms), then the others
    chk.true('the summary: cpu per start routine, the burners first',
             re.search(r'^  cpu per start routine: burner 4 threads 2[34]\d\.\d+ ms; ', text, re.M),
             detail=text[-1500:])


@test('lifecycle', 'default', kernel=True, ns=True)
@test('lifecycle-no-debug-files', 'no-debug-files', kernel=True, ns=True)
@test('lifecycle-create-events', 'create-events', kernel=True)
@test('lifecycle-locks', 'locks', kernel=True)
@test('stripped', 'stripped', kernel=True)
@case('lifecycle')
def case_lifecycle(session, chk, variant='default'):
    exe = fixture('lifecycle')
    if variant == 'default':
        # without -q: the event lines go to stderr, the document to the file
        run = session.run([exe], opts=())
        check_lifecycle(chk, run)
        chk.true('event lines on stderr without -q', 'create' in run.stderr_text())
        # libc6-dbg (scripts/deps.sh installs it): struct pthread from it,
        # on either path
        chk.eq('session.strategy', run.doc['session'].get('strategy'), 'debuginfo')
    elif variant == 'no-debug-files':
        for how, opts, env in (('--no-debug-files', ['-q', '--no-debug-files'], None),
                               ('PTWATCH_NO_DEBUG_FILES=1', ['-q'],
                                {'PTWATCH_NO_DEBUG_FILES': '1'})):
            chk.prefix = '[%s] ' % how
            run = session.run([exe], opts=opts, env=env)
            strategy = run.doc['session'].get('strategy')
            print('%s: strategy %s' % (how, strategy))
            # without libc's debug file: libthread_db still, the return
            # value and detach state from breakpoints ("breakpoints"; with
            # it "debuginfo", without libthread_db "lwp": src/tracer); the
            # kernel path derives struct pthread's members from libthread_db's
            # descriptors ("descriptors": src/kernel/layout.c)
            chk.eq('%s: session.strategy' % how, strategy,
                   'descriptors' if backend() == 'kernel' else 'breakpoints')
            check_lifecycle(chk, run)
    elif variant == 'create-events':
        run = session.run([exe], opts=['-q', '--create-events'],
                          load=backend() != 'kernel')
        if backend() == 'kernel':
            # a ptrace cross-check: refused in one line, nothing run
            lines = [l for l in run.stderr_text().splitlines() if l.strip()]
            chk.eq('--backend=kernel --create-events: exit status 1', run.returncode, 1)
            chk.true('one line saying --create-events is ptrace only (%r)' % lines,
                     len(lines) == 1 and '--create-events' in lines[0]
                     and 'ptrace only' in lines[0])
            chk.eq('no truth: the command did not run', load_truth(run.truth_path)
                   if os.path.exists(run.truth_path) else [], [])
        else:
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

@test('nested', kernel=True)
@case('nested')
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

@test('mainexit', kernel=True)
@case('mainexit')
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

@test('crash', kernel=True, ns=True)
@test('crash-int3', 'int3', kernel=True)
@test('crash-raise', 'raise', kernel=True)
@case('crash')
def case_crash(session, chk, how='segv'):
    """A thread crashes while the others are blocked: every span ends with
    the crash, the crashing thread's killed by its signal. With how int3
    (an int3 of the program's own) or raise (raise(SIGTRAP)) the process
    dies of SIGTRAP, and a sigtrap_death warning says it was not at an
    address ptwatch patched (issue 27: a SIGTRAP of ptwatch's own is a bug
    report, never the program's fate)."""
    run = session.run([fixture('crash'), how])
    signame = 'SIGSEGV' if how == 'segv' else 'SIGTRAP'
    check_exit(chk, run, signame=signame)
    chk.eq('target.exit', run.doc['target']['exit'], {'signal': signame, 'core_dumped': False})
    traps = [w['message'] for w in run.doc['warnings'] if w['code'] == 'sigtrap_death']
    if how == 'segv':
        chk.eq('no sigtrap_death warning', traps, [])
    else:
        crasher = [t for t in truth_of(run, 'thread') if t['end'] == 'crash']
        chk.eq('one sigtrap_death warning', len(traps), 1, traps)
        if traps and crasher:
            msg = traps[0]
            chk.true('it names the process and the thread',
                     ('process %d ' % run.doc['target']['pid']) in msg
                     and ('thread %d' % crasher[0]['tid']) in msg, msg)
            chk.true('it says ptwatch had patched nothing there',
                     'ptwatch had patched nothing there' in msg, msg)
            chk.true('it says which kind of trap',
                     ('an int3 of the program' in msg) if how == 'int3'
                     else ('not a breakpoint trap' in msg), msg)
            if how == 'int3':
                chk.true('it names the function', 'crash_worker+0x' in msg, msg)
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
            chk.eq('%s (the crashing thread): end.signal' % what, end.get('signal'), signame,
                   span)
        else:
            chk.eq('%s: end.method' % what, end.get('method'), 'process_exit', span)
        chk.true('%s: end_ns known' % what, span['end_ns'] is not None, span)
    m.check_no_extra_spans()
    m.check_metrics(unjoined=False, unmatched=3)


# ---------------------------------------------------------------------------
# 5. forkthreads

@test('forkthreads', kernel=True)
@case('forkthreads')
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

@test('execthread', kernel=True, ns=True)
@test('execthread-wait', 'wait', kernel=True)
@case('execthread')
def case_execthread(session, chk, variant=None):
    """A thread that is not the main one execs while another is blocked:
    image 1's spans end with the exec, image 2 gets a main span of its own
    and its thread. The kernel path puts its probes in again a moment
    after such an exec: what image 2 does before is seen as clones (a
    warning says so), every thread of it still has a span. With wait,
    image 2 waits (by observation: its pthread_create probed) before it
    makes its thread: whole on both paths."""
    run = session.run([fixture('execthread')] + ([variant] if variant else []))
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
    # (on the kernel path the new image's main() is not seen: below)
    new_start = new_main['start_ns'] if backend() != 'kernel' else new_main['create_ns']
    chk.true('the new image main span comes after the old one ends (%s <= %s)'
             % (old_main['end_ns'], new_start),
             old_main['end_ns'] is not None and new_start is not None
             and old_main['end_ns'] <= new_start, new_main)

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

    if backend() == 'kernel':
        # The kernel path's probes followed the old main thread (gone): they
        # are put in again for the new one, a moment after the exec, and a
        # warning says what the new image did before is not seen (no
        # made-up value). When they came in time, image 2 is whole.
        codes = {}
        for w in run.doc.get('warnings', []):
            codes[w['code']] = codes.get(w['code'], '') + w['message'] + '\n'
        chk.true('a kernel_not_seen warning names the exec by a thread not the main one (%s)'
                 % codes, 'not the main thread, exec\'d' in codes.get('kernel_not_seen', ''))
        chk.eq('no raw clone warning (the new image\'s threads are not raw clones)',
               'raw clone' in codes.get('kernel_limit', ''), False)
        # (a placeholder routine, "pthread_start_routine", is not a name:
        # the thread was made before the probes came back)
        named = {s['tid']: s for s in thread_spans(run.doc)
                 if s.get('start_routine') and not s['start_routine'].get('placeholder')}
        threads_whole = all(t['tid'] in named for t in image2 if t['kind'] == 'thread')
        # (its main() may have begun before the probes came back: then its
        # start is not seen, and its span says so, whatever its threads)
        whole = (threads_whole and new_main['start_ns'] is not None
                 and (new_main.get('start_routine') or {}).get('file') is not None)
        print('image 2 %s on the kernel path (%s)' % ('whole' if whole else 'not seen whole',
                                                       codes.get('kernel_not_seen')))
        if variant == 'wait':
            # made after the probes were back: named, and in full
            chk.true('image 2 threads whole after waiting for the probes', threads_whole)
            for t in image2:
                sp = named.get(t['tid']) if t['kind'] == 'thread' else None
                if sp:
                    chk.eq('image 2 thread %s: routine' % t['tid'],
                           sp['start_routine'].get('symbol'), t['routine'], sp)
                    chk.eq('image 2 thread %s: completed' % t['tid'], sp['status'],
                           'completed', sp)
        if not whole:
            # Threads of image 2 made before the probes came back: seen as
            # clones, without their routine, but each has a span, and the
            # new main span is there and ends as image 2 did.
            by_tid = {s['tid']: s for s in thread_spans(run.doc)}
            for t in image2:
                if t['kind'] == 'thread':
                    chk.true('image 2 thread %s has a span' % t['tid'], t['tid'] in by_tid)
            # (its main() may have returned before the probes came back:
            # then its end is the process's, said so, not a made-up return)
            chk.true('image 2 main span: completed, or ended with the process',
                     new_main['status'] == 'completed' or
                     (new_main['status'] == 'unmatched' and
                      (new_main['end'] or {}).get('reason') == 'process_exit'), new_main)
            chk.true('image 2 main span ends', new_main['end_ns'] is not None, new_main)
            chk.eq('metrics.threads_created', run.doc['metrics']['threads_created'], 3)
            return
    if variant == 'wait':
        chk.eq('image 2 waited until its libc was probed',
               [r.get('probed') for r in truth_of(run, 'probed')], [True])
    # Image 2: a new main span, and its thread traced in full.
    m2 = Model(chk, run, 'execthread.c', records=image2, main_spans={pid: new_main})
    m2.match()
    m2.check_all()
    chk.eq('image 2 thread records', [t['routine'] for t in m2.threads], ['after_exec_worker'])
    m1.check_no_extra_spans(allowed=list(m2.span_of.values()))
    chk.eq('metrics.unmatched_spans', run.doc['metrics']['unmatched_spans'], 3)
    chk.eq('metrics.threads_created', run.doc['metrics']['threads_created'], 3)


@test('exec-orphan-forks', kernel=True)
@test('exec-orphan-forks-follow', '-f', kernel=True)
@case('exec-orphan-forks')
def case_exec_orphan_forks(session, chk, variant=None):
    """Six threads fork without pause while main execs. A fork made by a
    thread the exec kills before the fork is reported is never reported
    (the kernel skips that stop once the kill is pending); its child is
    traced from birth with a copy of our int3s and waits at its first stop
    for an event that does not come. ptwatch sets it up all the same: the
    new image reaps every child it inherited, none dies of SIGTRAP, none
    stays stopped, ptwatch ends. Image 1's threads end with the exec (not
    as their own exit: killed threads report exit status 0). The race
    comes in about one run in five: eight runs. With -f every child is
    followed, those whose fork was never reported too, each to its end
    (exit 7)."""
    orphans = 0
    for i in range(8):
        chk.prefix = '[run %d] ' % (i + 1)
        opts = ('-q',) + (('--debug=attach',) if backend() != 'kernel' else ())
        opts += (variant,) if variant else ()
        run = session.run([fixture('execforks')], opts=opts, timeout=60)
        check_exit(chk, run, code=0)
        rec = one_truth(run, 'orphans')
        chk.eq('no child stayed stopped (the new image reaped them all)', rec['stuck'], False)
        chk.eq('children that died of SIGTRAP', rec['sigtrap'], 0)
        chk.eq('children that ended otherwise than with _exit(7)', rec['other'], 0)
        pid = one_truth(run, 'exec')['pid']
        spans = [s for s in thread_spans(run.doc) if s.get('pid', pid) == pid]
        if variant == '-f':
            procs = run.doc['processes']
            children = [p for p in procs if p['pid'] != pid]
            chk.eq('followed children that did not exit 7',
                   [(p['pid'], p['exit']) for p in children if p['exit'] != {'code': 7}], [])
            chk.true('children followed (%d)' % len(children), len(children) >= 6 * 20)
            # (kernel: each child makes its thread at once, often before
            # its links are in: said in a note, and nothing else)
            chk.eq('warnings (but what came before links)', Gap(run.doc).other_warnings(run.doc),
                   [])
        mains = [s for s in spans if s['tid'] == pid and s['origin'] == 'main']
        # (image 2 makes no thread: every span but its main is image 1's)
        image1 = [s for s in spans if not mains or s['id'] != max(m['id'] for m in mains)]
        chk.eq('image 1 spans (main, 6 fork_worker)',
               sorted((s['start_routine'] or {}).get('symbol') or '' for s in image1),
               ['fork_worker'] * 6 + ['main'])
        for s in image1:
            chk.eq('span %s (%s): ended by the exec' % (s['id'], s['tid']),
                   ((s['end'] or {}).get('method'), s['status']), ('exec', 'unmatched'), s)
        orphans += run.stderr_text().count('fork event lost')
    chk.prefix = ''
    print('forks whose event was lost, set up at their first stop: %d in 8 runs' % orphans)


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
                   if (m.span_for.get(id(t)) or {}).get('status') == 'completed')
    print('run %s: %d/1200 leaf spans completed, %d spans, %.2f s, stops %s'
          % (run.tmpdir, complete, len(thread_spans(run.doc)), run.elapsed,
             (run.doc['session'].get('stops') or {}).get('total')))


@test('storm', 'default', timeout=120, kernel=True, ns=True, first=True)
@test('storm-no-debug-files', 'no-debug-files', timeout=120, kernel=True, first=True)
@case('storm')
def case_storm(session, chk, variant='default'):
    exe = fixture('storm')
    if variant == 'default':
        for i in range(3):
            chk.prefix = '[run %d] ' % (i + 1)
            run = session.run([exe], timeout=35)
            check_storm(chk, run)
            if backend() != 'kernel':
                # The ptrace path's floor (issue 32): a create + join
                # lifecycle in 4 stops (the clone event, the new thread's
                # first stop, its death, the join's entry), plus a few
                # for the process (exec, main, its exit). "exited" is a
                # notification, not a stop.
                st = run.doc['session']['stops']
                stops = st['total'] - st.get('exited', 0)
                chk.true('at most 4 stops per thread created, and a few (%d stops: %s)'
                         % (stops, json.dumps(st)), stops <= 4 * 1204 + 24)
    elif variant == 'no-debug-files':
        check_storm(chk, session.run([exe], opts=['-q', '--no-debug-files'], timeout=35))
    else:
        raise FrameworkError('unknown storm variant %s' % variant)


# ---------------------------------------------------------------------------
# 8. signals

@test('signals', kernel=True, ns=True)
@case('signals')
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


@test('signals-groupstop', kernel=True)
@case('groupstop')
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

@test('stdout', kernel=True)
@case('stdout')
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


@test('execfail', kernel=True)
@case('execfail')
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


@test('exitcode', kernel=True)
@case('exitcode')
def case_exitcode(session, chk):
    run = session.run([fixture('exitcode'), '42'])
    check_exit(chk, run, code=42)
    m = Model(chk, run, 'exitcode.c')
    m.check_complete()


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


@test('rawclone', kernel=True)
@case('rawclone')
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

@test('dlopen', kernel=True)
@case('dlopen')
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

@test('noaranges', kernel=True)
@case('noaranges')
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

@test('static', kernel=True)
@case('static')
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


@test('static-stripped', kernel=True)
@case('static-stripped')
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
    if backend() == 'kernel':
        # No symbols to put the probes on: the kernel path sees clones and
        # exits only (not main's start and return), and says why.
        ws = [w for w in doc.get('warnings', []) if w.get('code') == 'kernel_not_seen']
        chk.true('kernel: a kernel_not_seen warning names the stripped static program (%s)'
                 % ws, len(ws) == 1 and 'static program' in ws[0]['message'] and
                 'stripped' in ws[0]['message'] and os.path.realpath(exe) in ws[0]['message'])
        chk.eq('kernel: warnings', len(doc.get('warnings', [])), 1, doc.get('warnings'))
    for mrec in (m.mains if backend() != 'kernel' else []):
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
