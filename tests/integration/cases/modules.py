"""A command that ends at once (issue 19): on the kernel path its code is
named from ld.so's own list, walked in the process, not from
/proc/PID/maps read while it runs (gone by then). Backend-neutral
(quick-exit@kernel too)."""

import os

from ptw_test import test
from ptw_test import backend, case, check_exit, fixture, FrameworkError, Model, one_truth, truth_of


@test('quick-exit', kernel=True)
@case('quick-exit')
def case_quick_exit(session, chk):
    """tests/fixtures/quick.c: three threads made and joined, main returns,
    well under a millisecond: every routine named (one in a library the
    program links), with its module, source line, argument and value."""
    lib = fixture('quicklib')
    run = session.run([fixture('quick')])
    check_exit(chk, run, code=0)
    for t in truth_of(run, 'thread'):
        if t['routine'] == 'quick_lib_worker':
            t['source'] = 'quicklib.c'
            t['module'] = lib
    threads = truth_of(run, 'thread')
    if len(threads) != 3:
        raise FrameworkError('quick truth: %d thread records' % len(threads))
    m = Model(chk, run, 'quick.c')
    m.check_complete()
    # every start routine has a name, none a placeholder (Model checks the
    # names against the truth; this says it in one line)
    spans = [s for s in (run.doc or {}).get('spans') or [] if s.get('kind') == 'thread']
    chk.eq('thread spans', len(spans), 4)
    unnamed = [s.get('tid') for s in spans
               if (s.get('start_routine') or {}).get('placeholder', True)]
    chk.eq('threads without a named routine', unnamed, [])
    chk.eq('warnings', [w.get('code') for w in (run.doc or {}).get('warnings') or []], [])
    q = one_truth(run, 'quick')
    print('%s: main ran %.0f us' % ('ptwatch --backend=%s' % backend() if backend() else 'ptwatch',
                                   q['main_ns'] / 1000.0))
    chk.true('the lib worker is in %s' % os.path.basename(lib),
             any(t['routine'] == 'quick_lib_worker' for t in threads))


@test('exec-chain', '300', kernel=True)
@case('exec-chain')
def case_exec_chain(session, chk, n='300'):
    """A launched image that execs itself N times, each image making and
    joining two threads (issue 29: on the kernel path every exec added a
    false kernel_not_seen warning, 'the probes stay on the libc of the
    image it was attached in', though every thread was seen; the probes
    are on libc's file). Every thread of every image is a span with its
    routine and value, and nothing warns."""
    run = session.run([fixture('execchain'), n])
    check_exit(chk, run, code=0)
    threads = truth_of(run, 'thread')
    chk.eq('threads in the truth', len(threads), 2 * (int(n) + 1))
    spans = {s['tid']: s for s in run.doc['spans'] if s['kind'] == 'thread'}
    got = sorted((t['tid'], (spans.get(t['tid']) or {}).get('status'),
                  ((spans.get(t['tid']) or {}).get('start_routine') or {}).get('symbol'),
                  ((spans.get(t['tid']) or {}).get('end') or {}).get('value'))
                 for t in threads)
    chk.eq('every thread of every image: completed, its routine and value', got,
           sorted((t['tid'], 'completed', 'chain_worker', t['value']) for t in threads))
    chk.eq('no warning', run.doc['warnings'], [])


@test('warnings-many', kernel=True)
@case('warnings-many')
def case_warnings_many(session, chk):
    """Twenty --trace patterns that match nothing: twenty trace_no_match
    warnings, each once (issue 29: the kernel path dropped every warning
    past its sixteenth, and the ptrace path's report said each twice once
    warnings were counted); in the document, the stream's metrics line and
    the summary alike."""
    opts = ['-q']
    for i in range(20):
        opts += ['--trace', 'zz_nomatch_%d' % i]
    run = session.run([fixture('execchain'), '2'], opts=opts)
    check_exit(chk, run, code=0)
    got = sorted((w['code'], w['message'], w.get('count')) for w in run.doc['warnings'])
    chk.eq('twenty warnings, each said once', [(c, n) for c, _, n in got],
           [('trace_no_match', None)] * 20)
    for i in range(20):
        chk.true('pattern %d named' % i,
                 any("'zz_nomatch_%d'" % i in m for _, m, _ in got), got)
    chk.eq('twenty in the summary', run.stderr_text().count('warning: '), 20)
