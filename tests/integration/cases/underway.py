"""--trace -p: calls under way at the attach in a thread asleep and in one
running (fixture-underway), on either backend (issue 20)."""

from ptw_test import test
from ptw_test import case, end_group, load_doc, wait_for
from helpers import check_target_exit, start_attached
from cases.frames import check_frames_sane, frame_spans, frame_symbol


def asleep_in_read(pid, tid):
    """Thread tid of pid is asleep in read(2) (/proc's syscall: number 0)."""
    try:
        with open('/proc/%d/task/%d/syscall' % (pid, tid)) as f:
            return f.read().split()[0] == '0'
    except (FileNotFoundError, ProcessLookupError, IndexError):
        return False


@test('frames-under-way-running', kernel=True)
@case('frames-under-way-running')
def case_frames_under_way_running(session, chk):
    """-p --trace 'uw_*' while one thread is asleep in read() two traced
    calls deep (uw_block -> uw_block_inner) and another spins two traced
    calls deep (uw_spin -> uw_spin_inner). The asleep one's calls are
    frames whose entry was before the attach, completed after it with
    their values, on both backends. The running one: the ptrace path stops
    and unwinds it (the same frames); the kernel path never stops anyone
    and can read its registers only while it is off a CPU: if it ran
    while ptwatch attached (nearly always), it has no such frames and a
    kernel_limit warning names it; if it happened not to, its frames are
    as on ptrace. Nothing else: no other frame, no other warning."""
    target = session.target('underway')
    pid = target.ready()[0]
    spin = int(target.line(20, 'spin').split()[1])
    block = int(target.line(20, 'block').split()[1])
    chk.true('the blocked thread is asleep in read() before the attach',
             wait_for(lambda: asleep_in_read(pid, block), 20))
    run, proc = start_attached(session, target, opts=['--trace', 'uw_*'])
    try:
        chk.eq('both return once let go on', target.ask('x'), ['out', '8', '42'])
        target.send('q')
        session.wait(run, proc, 20, 'ptwatch did not end with the command')
    finally:
        end_group(proc)
    truth = target.one_truth('underway', 'both threads returned')
    chk.eq('truth: the threads', (truth['block'], truth['spin']), (block, spin))
    load_doc(run)
    check_frames_sane(chk, run.doc)
    kernel = run.doc['session']['backend'] == 'kernel'
    warnings = run.doc['warnings']
    spin_said = [w for w in warnings if w['code'] == 'kernel_limit' and
                 '(the first: %d)' % spin in w['message']]
    by_id = {f['id']: f for f in frame_spans(run.doc)}

    def frames_of(tid):
        return [(frame_symbol(f), f['depth'],
                 frame_symbol(by_id[f['parent']]) if f['parent'] else None,
                 f['entry'], f['entry_ns'], f['status'], f['value'])
                for f in sorted(frame_spans(run.doc), key=lambda f: f['depth']) if f['tid'] == tid]
    chk.eq('the blocked thread\'s calls under way', frames_of(block),
           [('uw_block', 1, None, 'before_attach', None, 'completed', hex(8)),
            ('uw_block_inner', 2, 'uw_block', 'before_attach', None, 'completed', hex(7))])
    spin_frames = [('uw_spin', 1, None, 'before_attach', None, 'completed', hex(42)),
                   ('uw_spin_inner', 2, 'uw_spin', 'before_attach', None, 'completed', hex(40))]
    if kernel and spin_said:
        chk.eq('the running thread: no frames (it ran while ptwatch attached)',
               frames_of(spin), [])
        chk.eq('warnings: the running thread\'s only', warnings, spin_said)
    else:
        chk.eq('the running thread\'s calls under way (%s)' % run.doc['session']['backend'],
               frames_of(spin), spin_frames)
        chk.eq('warnings', warnings, [])
    chk.eq('no other thread has frames',
           sorted({f['tid'] for f in frame_spans(run.doc)} - {block, spin}), [])
    print('frames-under-way-running: %s, the running thread %s' % (
        run.doc['session']['backend'], 'said (ran)' if spin_said else 'unwound'))
    check_target_exit(chk, target, 'after both returned')
