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
