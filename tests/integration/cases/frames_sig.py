"""--trace: frames of code entered without a call (fixture-frames-sig):
signal handlers and makecontext/swapcontext contexts (issue 20)."""

import json
import os
import signal
import tempfile

from ptw_test import test
from ptw_test import backend, case, check_exit, fixture, validate
from helpers import check_same_as_untraced, run_ptwatch
from cases.frames import check_frames_sane, frame_spans, frame_symbol


def signame(n):
    return signal.Signals(n).name if n else None


def frame_tree(frames):
    """(symbol, depth, parent's entry rank, status, reason, signal), in
    entry order: ids and parents renumbered 1..n in that order."""
    frames = sorted(frames, key=lambda f: f['id'])
    rank = {f['id']: i + 1 for i, f in enumerate(frames)}
    return [(frame_symbol(f), f['depth'], rank.get(f['parent'], 0), f['status'], f['reason'],
             f.get('signal')) for f in frames]


def truth_tree(truth):
    recs = sorted((r for r in truth if r.get('kind') == 'frame'), key=lambda r: r['n'])
    return [(r['fn'], r['depth'], r['parent'], r['status'], r['reason'], signame(r['signal']))
            for r in recs]


@test('frames-sig-handler', 'handler', kernel=True)
@test('frames-sig-siglongjmp', 'siglongjmp', kernel=True)
@test('frames-sig-nested', 'nested', kernel=True)
@test('frames-sig-context', 'context', kernel=True)
@test('frames-sig-pingpong', 'pingpong', kernel=True)
@test('frames-sig-abandoned', 'abandoned', kernel=True)
@case('frames-sig')
def case_frames_sig(session, chk, mode='handler'):
    """Each mode's frame tree (function, nesting, status, reason, signal)
    is exactly the one the fixture recorded as it ran; the program computes
    the same with and without --trace; ptwatch report --format=json gives
    the frames (their signal too) back."""
    cmd = [fixture('frames_sig'), mode]
    run = session.run(cmd, opts=['-q', '--trace', 'sg_*'])
    check_exit(chk, run, code=0)
    check_frames_sane(chk, run.doc, contexts=mode == 'pingpong')
    frames = frame_spans(run.doc)
    want = truth_tree(run.truth)
    chk.true('the fixture recorded frames', len(want) > 0, run.truth)
    got = frame_tree(frames)
    if got != want:
        print('frames:\n%s\ntruth:\n%s' % ('\n'.join(map(str, got)), '\n'.join(map(str, want))))
    chk.eq('frames (symbol, depth, parent, status, reason, signal) = the truth', got, want)
    tid = {r['tid'] for r in run.truth if r.get('kind') == 'frame'}
    chk.eq('every frame on the fixture\'s thread', {f['tid'] for f in frames}, tid)
    # (--trace's own: a kernel session on another process at the same time
    # can leave uprobe int3s in libc that the lifecycle hooks then refuse)
    chk.eq('no --trace warning', [w['code'] for w in run.doc.get('warnings', [])
                                  if w['code'].startswith('trace_')], [])
    check_same_as_untraced(chk, session, cmd, run)
    # the document read back: the frames, with their signal, unchanged
    out = os.path.join(os.path.dirname(run.doc_path), 'again.json')
    p = run_ptwatch(['report', '--format=json', '-o', out, run.doc_path])
    chk.eq('report --format=json exits 0 (%r)' % p.stderr[:300], p.returncode, 0)
    with open(out) as f:
        again = json.load(f)
    validate(again)
    chk.eq('report --format=json keeps the frames', frame_spans(again), frames)


@test('frames-sig-script', kernel=True)
@case('frames-sig-script')
def case_frames_sig_script(session, chk):
    """The command is a script that execs the fixture (pingpong: two
    contexts with traced calls open across their switches). What it will
    run cannot be read before it runs, so the kernel path gives no
    uretprobe to anything, libc's traced functions included (before, libc's
    were uretprobe'd, and a warning said they were at risk): the untraced
    result, every write() completed. (The exec'd image's own functions are
    probed once ptwatch has read that its main() started: on the kernel
    path the fixture may be done by then, frames-exec.)"""
    exe = fixture('frames_sig')
    with tempfile.TemporaryDirectory() as d:
        script = os.path.join(d, 'run-pingpong')
        with open(script, 'w') as f:
            f.write('#!/bin/sh\nexec %s pingpong\n' % exe)
        os.chmod(script, 0o755)
        run = session.run([script], opts=['-q', '--trace', 'sg_*', '--trace', 'libc.so.6:write'])
    check_exit(chk, run, code=0)
    chk.eq('the untraced result', run.stdout_text(), 'pingpong result 39\n')
    limits = [w['message'] for w in run.doc.get('warnings', []) if w['code'] == 'kernel_limit']
    chk.true('no function probed with a uretprobe before it could switch stacks (%r)' % limits,
             not any('before the process could throw or switch stacks' in m for m in limits))
    frames = frame_spans(run.doc)
    if backend() != 'kernel':
        got = frame_tree([f for f in frames if frame_symbol(f).startswith('sg_')])
        chk.eq('the sg_ frames = the truth', got, truth_tree(run.truth))
    chk.eq('write traced, every call completed',
           {f['status'] for f in frames if frame_symbol(f) in ('write', '__write')}, {'completed'})
