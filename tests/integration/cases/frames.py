"""--trace: frame spans (fixture-frames, fixture-frames-cxx)."""

import os
import signal
import subprocess
from collections import Counter

from ptw_test import test, WHY_RESTORER, WHY_LATE_PROBES
from ptw_test import (
    backend, case, check_exit, check_untouched, compare_mappings, end_group, exec_mappings, fixture,
    load_doc, load_truth, Model, one_truth, ptwatch_path, thread_spans, truth_of
)
from helpers import (
    check_same_as_untraced, check_target_exit, kill_tracer, read_line, start_attached, check_text_patched, check_text_restored,
    wait_traced, wait_untraced
)
from cases.launch import check_lifecycle


# ---------------------------------------------------------------------------
# 18. --trace: frame spans (fixture-frames, fixture-frames-cxx)

def frame_spans(doc):
    return [s for s in doc['spans'] if s['kind'] == 'frame']


def frame_symbol(fr):
    return (fr.get('function') or {}).get('symbol')


def check_recursion_frames(chk, frames, calls):
    """frames recursion: each of its 4 threads' calls of fr_rec (truth
    "calls" records) are its frames, every one completed, at each depth
    as many times, fr_rec(n) returning n + ... + 1 (the value tells the
    depth); no other frame."""
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
    chk.eq('frames of other threads', [f['id'] for f in frames
                                       if f['tid'] not in {c['tid'] for c in calls}], [])


def check_frames_sane(chk, doc, contexts=False):
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
            # (a call under way at the attach has no entry time: it is
            # entered before any other)
            chk.true('%s: parent of the same thread, one level up, entered before' % what,
                     p is not None and p['tid'] == fr['tid'] and p['depth'] + 1 == fr['depth'] and
                     (p['entry_ns'] is None or (fr['entry_ns'] is not None and
                                                p['entry_ns'] <= fr['entry_ns'])), fr)
            # (a context a frame started may outlive it: contexts=True)
            if (not contexts and p is not None and p['return_ns'] is not None and
                    fr['return_ns'] is not None):
                chk.true('%s: returns before its parent' % what,
                         fr['return_ns'] <= p['return_ns'], fr)
        chk.eq('%s: entry seen or before the attach, with a time only if seen' % what,
               (fr['entry'], fr['entry_ns'] is None),
               ('before_attach', True) if fr['entry'] == 'before_attach' else ('seen', False), fr)
        if fr['status'] == 'completed' and fr['entry_ns'] is None:
            chk.true('%s: a return, no duration' % what,
                     fr['return_ns'] is not None and fr['duration_ns'] is None and
                     fr['reason'] is None, fr)
        elif fr['status'] == 'completed':
            chk.true('%s: return at or after entry' % what,
                     fr['return_ns'] is not None and fr['return_ns'] >= fr['entry_ns'] and
                     fr['duration_ns'] == fr['return_ns'] - fr['entry_ns'] and
                     fr['reason'] is None, fr)
        else:
            chk.true('%s: no return, a reason' % what,
                     fr['return_ns'] is None and fr['reason'], fr)


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


@test('frames-recursion', 'recursion', kernel=True, ns=True)
@test('frames-longjmp', 'longjmp', kernel=True, ns=True)
@test('frames-tail-call', 'tail', kernel=True)
@test('frames-lib', 'lib',
      kernel=WHY_LATE_PROBES)
@test('frames-ends', 'ends', kernel=True)
@test('frames-spin', 'spin', kernel=True)
@test('frames-starts', 'starts', kernel=True)
@case('frames')
def case_frames(session, chk, mode='recursion'):
    exe = fixture('frames')
    cmd = [exe, mode]
    opts = ['--trace', 'fr_*']
    env = None
    if mode == 'lib':
        cmd.append(fixture('framemod'))
        opts = ['--trace', 'libptwframelib.so*:fr_lib_*', '--trace', 'fr_mod_*',
                '--trace', 'zz_matches_nothing_*', '--trace', 'libnothere.so:fr_*']
    if mode == 'spin':
        # (its first instruction, lock decl, is one uprobes refuse: the
        # kernel path probes the next; glibc's retry passes both again)
        opts = ['--trace', 'pthread_spin_lock']
    if mode == 'starts':
        opts = ['--trace', 'st_*']
    run = session.run(cmd, opts=opts)
    check_frames_sane(chk, run.doc)
    frames = frame_spans(run.doc)
    m = run.doc['metrics']
    chk.eq('metrics.frames.count', (m.get('frames') or {}).get('count'), len(frames))
    if mode == 'recursion':
        check_exit(chk, run, code=0)
        check_recursion_frames(chk, frames, truth_of(run, 'calls'))
        fn = [x for x in m.get('functions', []) if x['function']['symbol'] == 'fr_rec']
        ncalls = sum(c['calls'] for c in truth_of(run, 'calls'))
        chk.true('metrics.functions: fr_rec with every call', len(fn) == 1 and
                 fn[0]['calls'] == ncalls and fn[0]['completed'] == ncalls and
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
    elif mode == 'spin':
        check_exit(chk, run, code=0)
        t = one_truth(run, 'spin')
        chk.eq('one call of pthread_spin_lock in each thread, completed (the spinner\'s '
               'passed its start twice)',
               sorted((f['tid'], frame_symbol(f), f['depth'], f['status']) for f in frames),
               sorted((tid, 'pthread_spin_lock', 1, 'completed') for tid in (t['main'], t['waiter'])))
        chk.eq('nothing said', [(w['code'], w['message']) for w in run.doc['warnings']], [])
    elif mode == 'starts':
        # What they compute is checked below (the same as untraced); a
        # probe on a VEX-encoded instruction changed it on the kernel path
        # (st_vex: one on its first, which the kernel took for a jbe).
        check_exit(chk, run, code=0)
        t = one_truth(run, 'starts')
        kernel = backend() == 'kernel'
        # each path has one it cannot probe: the kernel's, a VEX load (a
        # load can fault: no passing it); the tracer's, a jrcxz
        refused = 'st_vex_load' if kernel else 'st_jrcxz'
        fns = ['st_vex', 'st_vex_load', 'st_passed', 'st_riprel', 'st_jrcxz', 'st_shared',
               'st_shared_pre'] + \
            (['st_evex'] if t['evex'] else [])
        fns.remove(refused)
        chk.eq('each traced function\'s calls, completed, in its thread: (tid, function, '
               'status) -> frames',
               dict(Counter((f['tid'], frame_symbol(f), f['status']) for f in frames)),
               {(t['tid'], fn, 'completed'): t['calls'] for fn in fns})
        # (counted once, though the dlopen made the tracer scan again)
        said = [(w['code'], w['message']) for w in run.doc['warnings']]
        chk.true('%s alone is said not traced, and why, of the 8 (%r)' % (refused, said),
                 len(said) == 1 and said[0][0] == 'trace_unhookable' and
                 "'st_*': 1 of the 8 functions it matched are not traced: %s (%s" %
                 (refused, 'it begins with a VEX' if kernel else 'its first instruction') in said[0][1])
        if kernel:
            # st_passed's probe goes past its endbr64 and mov to its push,
            # which the kernel emulates (it single-stepped the endbr64)
            alone = session.run(cmd, opts=['--trace', 'st_passed'])
            chk.eq('st_passed: no function single-stepped',
                   alone.doc['session'].get('probes_stepped'), 0)
            chk.eq('st_passed: its calls', len(frame_spans(alone.doc)), t['calls'])
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


@test('frames-lib-late', kernel=True)
@case('frames-lib-late')
def case_frames_lib_late(session, chk):
    """--trace and a library the program dlopens twice (frames lib): the
    kernel path probes it once it has read that ld.so mapped it, while the
    program runs on, and says so (kernel_limit, naming it) when the
    library has functions the patterns match, and only then (it said so
    whenever a library came late). The ptrace path says nothing and sees
    both calls."""
    cmd = [fixture('frames'), 'lib', fixture('framemod')]
    # (the patterns match nothing in the dlopened library)
    run = session.run(cmd, opts=['--trace', 'fr_lib_*'])
    check_exit(chk, run, code=0)
    chk.eq("fr_lib_* alone: the linked library's call",
           [(frame_symbol(f), f['status']) for f in frame_spans(run.doc)],
           [('fr_lib_fn', 'completed')])
    chk.eq('fr_lib_* alone: nothing said of the library loaded late',
           [w['message'] for w in run.doc['warnings'] if w['code'] == 'kernel_limit'], [])
    run = session.run(cmd, opts=['--trace', 'fr_mod_*'])
    check_exit(chk, run, code=0)
    said = [w['message'] for w in run.doc['warnings'] if w['code'] == 'kernel_limit']
    frames = [(frame_symbol(f), f['status']) for f in frame_spans(run.doc)]
    if backend() == 'kernel':
        chk.true('fr_mod_*: said once, naming the library',
                 len(said) == 1 and '1 library with traced functions' in said[0] and
                 'libptwframemod.so' in said[0], said)
        chk.true('fr_mod_*: its calls seen (some may not be), each completed',
                 frames in ([], [('fr_mod_fn', 'completed')], [('fr_mod_fn', 'completed')] * 2),
                 frames)
    else:
        chk.eq('fr_mod_*: nothing said', said, [])
        chk.eq('fr_mod_*: both calls', frames, [('fr_mod_fn', 'completed')] * 2)


@test('frames-cxx', kernel=True)
@case('frames-cxx')
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


@test('frames-cxx-deep', kernel=True)
@case('frames-cxx-deep')
def case_frames_cxx_deep(session, chk):
    """A recursion 1,001 calls deep (past the kernel's 64 pending
    uretprobe returns), an exception thrown from its bottom every third
    round and caught 500 calls up: every call a frame, those the exception
    left unmatched "exception", the others completed, at their depth; the
    program's checksum unchanged."""
    exe = fixture('frames_cxx')
    run = session.run([exe, 'deep'], opts=['-q', '--trace', 'frx::deep*'])
    check_exit(chk, run, code=0)
    check_frames_sane(chk, run.doc)
    truth = one_truth(run, 'deep')
    frames = frame_spans(run.doc)
    chk.eq('a frame per call', len(frames), truth['calls'])
    done = [f for f in frames if f['status'] == 'completed']
    chk.eq('completed', len(done), truth['completed'])
    left = [f for f in frames if f['status'] != 'completed']
    chk.eq('the others left by the exception',
           sorted({(f['status'], f['reason']) for f in left}), [('unmatched', 'exception')])
    chk.eq('the deepest frame', max(f['depth'] for f in frames), 1001)
    chk.eq('left frames below the catch', min(f['depth'] for f in left), 502)
    chk.eq('no warning', [w['code'] for w in run.doc.get('warnings', [])], [])
    check_same_as_untraced(chk, session, [exe, 'deep'], run)


@test('frames-cxx-land', kernel=True)
@case('frames-cxx-land')
def case_frames_cxx_land(session, chk):
    """A call of a function that only throws, whose catch lands at the
    call's return address (gcc -O2 puts the landing pad there): the frame
    is left by the exception, not returned (the ptrace path's return
    breakpoint there took the landing for a return, with the exception
    object for a value)."""
    exe = fixture('frames_cxx')
    run = session.run([exe, 'land'], opts=['-q', '--trace', 'frx::always_throws*',
                                           '--trace', 'frx::lands_at_return*'])
    check_exit(chk, run, code=0)
    check_frames_sane(chk, run.doc)
    chk.eq('the result', one_truth(run, 'land')['result'], 42)
    expect_frames(chk, run.doc, [
        ('frx::lands_at_return(int)', 1, None, 'completed', None),
        ('frx::always_throws(int)', 2, 'frx::lands_at_return(int)', 'unmatched', 'exception')])
    check_same_as_untraced(chk, session, [exe, 'land'], run)


@test('frames-tail-return', kernel=True)
@case('frames-tail-return')
def case_frames_tail_return(session, chk):
    """A traced function that leaves by a jump into code not traced (a
    tail call), in a C++ program (whose returns the kernel path probes at
    the functions' exits): its frame ends at the return that follows, with
    its value, as the tracer's does. On the kernel path the return site's
    probe goes in once the first such jump is seen, and the fixture calls
    on until that site holds its int3, then 3 times more: the calls before
    may have ended as tail calls; the last 3 completed."""
    exe = fixture('frames_cxx')
    cmd = [exe, 'tailret', '20000' if backend() == 'kernel' else '20']
    run = session.run(cmd, opts=['-q', '--trace', 'frx_tail_f'])
    check_exit(chk, run, code=0)
    check_frames_sane(chk, run.doc)
    truth = one_truth(run, 'tailret')
    frames = sorted(frame_spans(run.doc), key=lambda f: f['id'])
    chk.eq('a frame per call', len(frames), truth['calls'])
    how = [(f['status'], f['reason']) for f in frames]
    if backend() == 'kernel':
        chk.true('the site was probed (%r)' % truth, truth['probed_after'] > 0)
        n = truth['probed_after']
        chk.true('before: completed or tail calls (%r)' % how[:n],
                 set(how[:n]) <= {('completed', None), ('unmatched', 'tail_call')})
        rest = frames[n:]
    else:
        rest = frames
    chk.eq('completed, each with its value',
           [(f['status'], f.get('value')) for f in rest],
           [('completed', hex(((i + len(frames) - len(rest)) % 8 + 1) * 2 + 1))
            for i in range(len(rest))])
    # (how many calls it made depends on when the probe went in: what it
    # computed is every call's result checked)
    chk.eq('every call returned what it does untraced', run.stdout_text(),
           'tailret wrong results 0\n')


@test('frames-attach', kernel=True, ns=True)
@case('frames-attach')
def case_frames_attach(session, chk):
    """--trace with -p: the call open at the attach (fr_serve) is a frame
    whose entry was before the attach; fr_outer -> fr_block entered while
    traced are its children, and all are unmatched 'detach' when ptwatch
    lets go with them open; the target then returns through their return
    sites (no int3 left) and goes on."""
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
        ('fr_serve', 1, None, 'unmatched', 'detach'),
        ('fr_outer', 2, 'fr_serve', 'completed', None),
        ('fr_block', 3, 'fr_outer', 'completed', None),
        ('fr_outer', 2, 'fr_serve', 'unmatched', 'detach'),
        ('fr_block', 3, 'fr_outer', 'unmatched', 'detach')])
    chk.eq('entries: fr_serve\'s before the attach, the others seen',
           [f['entry'] for f in sorted(frame_spans(run.doc), key=lambda f: f['id'])],
           ['before_attach'] + ['seen'] * 4)
    target.check_alive('after the detach')
    compare_mappings(chk, before, exec_mappings(pid), 'after the detach')
    check_untouched(chk, pid, 'after the detach')
    check_text_restored(chk, pid, 'after the detach')
    target.send('x')
    chk.eq('the open call returns after the detach', target.line(20, 'out'), 'out 12')
    target.send('q')
    check_target_exit(chk, target, 'after the detach')


@test('frames-under-way', kernel=True)
@test('frames-under-way-kill9', 'kill9', kernel=True)
@case('frames-under-way')
def case_frames_under_way(session, chk, mode='returns'):
    """--trace with -p while a thread is six calls deep in fr_deep and
    blocked at the bottom: the six calls are frames whose entry was before
    the attach (entry_ns null), nested as on its stack, each completed
    after the attach with its return value, exactly as the fixture says
    (truth "deep"); no other frame, no warning; the thread and the process
    go on to their end.
    kill9: ptwatch's tracer SIGKILLed with the six return sites patched:
    every byte is put back, the recursion returns through them untraced,
    and the restorer's document has the six frames, unmatched
    tracer_died."""
    target = session.target('frames', ['deep'])
    pid = target.ready()[0]
    deep_tid = int(target.line(20, 'deep').split()[1])
    run, proc = start_attached(session, target, opts=['--trace', 'fr_*'])
    if mode == 'kill9':
        try:
            check_text_patched(chk, pid, 'entry and return breakpoints, while traced',
                               at_least=2)
            kill_tracer(chk, proc.pid)
            check_text_restored(chk, pid, 'after the kill')
            chk.eq('the recursion returns after the kill', target.ask('x'), ['out', '21'])
            session.wait(run, proc, 20, 'ptwatch did not exit after its tracer was killed')
        finally:
            end_group(proc)
        target.send('q')
        check_target_exit(chk, target, 'after the kill')
        load_doc(run)
        chk.eq('end_reason', run.doc['session']['end_reason'], 'tracer_died')
        expect_frames(chk, run.doc, [('fr_deep', d, 'fr_deep' if d > 1 else None, 'unmatched',
                                      'tracer_died') for d in range(1, 7)])
        chk.eq('entries before the attach',
               [f['entry'] for f in frame_spans(run.doc)], ['before_attach'] * 6)
        return
    try:
        chk.eq('the recursion returns once let go on', target.ask('x'), ['out', '21'])
        target.send('q')
        session.wait(run, proc, 20, 'ptwatch did not end with the command')
    finally:
        end_group(proc)
    truth = target.one_truth('deep', 'the recursion blocked at its bottom')
    chk.eq('the thread that recursed', truth['tid'], deep_tid)
    load_doc(run)
    check_frames_sane(chk, run.doc)
    frames = sorted(frame_spans(run.doc), key=lambda f: f['id'])
    n = truth['depth']
    # fr_deep(k) returns k + ... + 1; the outermost call is fr_deep(n)
    chk.eq('frames (tid, symbol, depth, parent, entry, entry_ns, status, value)',
           [(f['tid'], frame_symbol(f), f['depth'], f['parent'], f['entry'], f['entry_ns'],
             f['status'], f['value']) for f in frames],
           [(truth['tid'], truth['fn'], d, d - 1 if d > 1 else None, 'before_attach', None,
             'completed', hex((n - d + 1) * (n - d + 2) // 2)) for d in range(1, n + 1)])
    start = run.doc['session']['start_ns']
    chk.true('returned after the attach, innermost first',
             all(f['return_ns'] is not None and f['return_ns'] > start for f in frames) and
             [f['return_ns'] for f in frames] == sorted((f['return_ns'] for f in frames),
                                                         reverse=True), frames)
    chk.eq('warnings', run.doc['warnings'], [])
    stats = run.doc['metrics']['functions']
    chk.eq('fr_deep\'s figures: 6 calls returned, none with a known duration',
           [(s['function']['symbol'], s['calls'], s['completed'], 'p50_ns' in s) for s in stats],
           [('fr_deep', n, n, False)])
    check_target_exit(chk, target, 'after the recursion returned')


@test('frames-kill9',
      kernel=WHY_RESTORER)
@case('frames-kill9')
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
        check_text_patched(chk, pid, 'entry and return breakpoints, while traced', at_least=2)
        kill_tracer(chk, proc.pid, set(traced.values()))
        chk.true('TracerPid 0 within 2 s of the kill', wait_untraced(pid, 2) is not None)
        check_text_restored(chk, pid, 'after the kill')
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


@test('frames-stripped', kernel=True)
@case('frames-stripped')
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


@test('frames-exec',
      kernel=WHY_LATE_PROBES)
@case('frames-exec')
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


@test('frames-pthread', kernel=True)
@test('frames-pthread-no-debug-files', 'no-debug-files', kernel=True)
@case('frames-pthread')
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
    threads = truth_of(run, 'thread')
    joins = truth_of(run, 'join')

    def calls(fn):
        return sorted((f['tid'], f['status'], f['reason']) for f in frames
                      if frame_symbol(f) == fn)
    # one call per thread made, by its creator; one join per join, by the
    # joiner; one death event per thread that ended, in it; each start
    # routine once, in its thread (level_a ends in pthread_exit)
    chk.eq('pthread_create: a call per thread made, by its creator (tid, status, reason)',
           calls('pthread_create'), sorted((t['creator'], 'completed', None) for t in threads))
    chk.eq('pthread_join: a call per join, by the joiner', calls('pthread_join'),
           sorted((j['joiner'], 'completed', None) for j in joins))
    # (glibc calls it only for a thread whose report_events libthread_db
    # turned on: the ptrace path does where it needs TD_DEATH, without
    # libc's debug file; with it, a thread made while traced ends at its
    # exit stop, and the kernel path writes nothing in the target: the
    # program never calls it there)
    chk.eq('__nptl_death_event: a call per thread that ended, in it',
           calls('__nptl_death_event'),
           sorted((t['tid'], 'completed', None) for t in threads)
           if backend() != 'kernel' and variant == 'no-debug-files' else [])
    for t in threads:
        chk.eq('%s: one call, in its thread' % t['routine'], calls(t['routine']),
               [(t['tid'], 'completed', None) if t['end'] == 'return'
                else (t['tid'], 'unmatched', 'thread_exit')])
    chk.eq('pthread_exit: a call per thread that called it, unmatched thread_exit',
           calls('pthread_exit'), sorted((t['tid'], 'unmatched', 'thread_exit')
                                         for t in threads if t['end'] == 'pthread_exit'))
    check_same_as_untraced(chk, session, [exe], run)


@test('frames-usage', kernel=True)
@case('frames-usage')
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
