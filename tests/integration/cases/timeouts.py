"""Open timeouts (--open-timeout): a span open past the limit is
reported as it crosses it, with where its thread is; it keeps
open_after_ns when it ends later. The fixture (slow) holds a thread until
the test, having seen that report, releases it: no sleep orders anything."""

import os
import re
import signal

from ptw_test import test
from ptw_test import (
    attach_stderr_lines, case, check_attach_doc, check_untouched, child_pids, comm, end_group,
    Failed, fixture, load_doc, load_truth, read_outputs, tail, thread_spans, truth_of, wait_for
)
from helpers import (
    check_open, check_target_exit, ptwatch_processes, read_line, start_attached, wait_untraced
)


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


@test('open-timeout', kernel=True)
@case('open-timeout')
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


@test('attach-open-timeout', 'sigint', kernel=True)
@test('attach-open-timeout-kill9', 'kill9', kernel=True)
@case('attach-open-timeout')
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
        # main, blocked joining the holder since before the attach, crosses
        # the limit at the same time
        main_line, main_id = wait_open_line(run, proc, pid)
        if end == 'kill9':
            tracer = ptwatch_processes(proc.pid).get('tracer')
            if not tracer:
                # ptwatch always runs a tracer process (ptw_guardian.h)
                raise Failed('ptwatch %d: no ptw-tracer among its children %s'
                             % (proc.pid, [(k, comm(k)) for k in child_pids(proc.pid)]))
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
    m = spans.get(pid)
    if chk.true('a span for main', m, sorted(spans)):
        chk.eq('main\'s open line names its span', main_id, m['id'])
        chk.true('main: open_after_ns set (got %r)' % m.get('open_after_ns'),
                 isinstance(m.get('open_after_ns'), int), m)
    chk.eq('one open line each for the holder and main',
           (len(open_lines(run, holder)), len(open_lines(run, pid))), (1, 1))
    chk.eq('no open line for another thread',
           [l for l in run.stderr_text().splitlines()
            if re.match(r'^\s*\d+\.\d+\s+\d+ open\s', l) and not
            re.match(r'^\s*\d+\.\d+\s+(%d|%d) open\s' % (holder, pid), l)], [])
    chk.eq('metrics.open_timeouts (the holder and main)', doc['metrics'].get('open_timeouts'), 2)
    target.check_alive('after ptwatch ended')
    wait_untraced(pid, 5)
    check_untouched(chk, pid, 'after ptwatch ended')
    target.send('r')
    chk.eq('the target finishes once released', target.line(20, 'done'), 'done')
    check_target_exit(chk, target, 'after ptwatch ended')
