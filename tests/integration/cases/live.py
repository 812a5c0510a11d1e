"""The live table (--live) in a real terminal: tmux, read with
capture-pane (and a pty nobody reads)."""

import json
import os
import re
import select
import signal
import subprocess
import time

from ptw_test import test
from ptw_test import (
    case, check_untouched, Failed, fixture, FrameworkError, ptwatch_path, task_states,
    Terminal, thread_spans, Tmux, wait_for
)


# ---------------------------------------------------------------------------
# The live table (--live) in a real terminal: tmux, read with capture-pane.

def live_row(tid):
    """A thread view row of tid (first column)."""
    return r'^\s*%d\s' % tid


def live_counts(term, active, created, ended, what):
    term.expect(r'active %d\s+created %d\s+ended %d\b' % (active, created, ended), 20,
                'the counts: active %d, created %d, ended %d (%s)' % (active, created, ended, what))


def live_no_row(term, tid, what, timeout=15):
    term.expect(lambda text: not re.search(live_row(tid), text, re.M), timeout, what)


def shell_quote(argv):
    return ' '.join("'%s'" % a.replace("'", "'\\''") for a in argv)


@test('live-attach', 'attach', timeout=90, kernel=True)
@test('live-ctrlc', 'ctrlc', kernel=True)
@test('live-launch', 'launch', kernel=True)
@test('live-ends', 'ends', timeout=90, kernel=True)
@test('live-filter', 'filter', kernel=True)
@test('live-frames', 'frames', kernel=True)
@test('live-stuck', 'stuck', timeout=90, kernel=True)
@test('live-report', 'report', kernel=True)
@case('live')
def case_live(session, chk, mode):
    """ptwatch with its live table in tmux, on the live fixture, whose
    threads come and go when the test says so.
    attach: -p PID (the table is on by default: stderr is a terminal): rows
      appear and fade out, counts, routine view, filter, sort, pause,
      resize; q lets go, the fixture runs on, untraced; the screen and the
      shell's lines before are back, then the summary.
    ctrlc: --no-live keeps the event lines; then the table, and Ctrl-C
      restores the screen (the shell's lines are back) and detaches.
    launch: without --live a launched command keeps the terminal (event
      lines); with --live its terminal output goes to /dev/null (it does
      not garble the table), and q lets it run on.
    frames: -p --trace on a recursion six deep at the attach: the thread's
      row shows its innermost call, the function view its calls, in
      flight, then returned (fixture frames, mode deep)."""
    if mode == 'stuck':
        live_stuck(session, chk)
        return
    term = Tmux(session, 120, 30)
    try:
        if mode == 'launch':
            live_launch(chk, term)
        elif mode == 'ends':
            live_ends(session, chk, term)
        elif mode == 'filter':
            live_filter(session, chk, term)
        elif mode == 'frames':
            live_frames(session, chk, term)
        elif mode == 'report':
            live_report(session, chk, term)
        else:
            live_attach(session, chk, term, mode)
    finally:
        term.close()


def live_report(session, chk, term):
    """ptwatch report --live DOC: the lifecycle fixture's recording in the
    live table, at its end first (every thread ended, as it ended), then
    moved through: b the beginning (no thread yet), n a moment on, t a time
    typed, e the end again; q quits, exit 0."""
    from ptw_test import load_truth, truth_of
    run = session.run([fixture('lifecycle')], opts=['-q'])
    load_truth(run)
    workers = {t['tid']: t['routine'] for t in truth_of(run, 'thread')}
    term.line(shell_quote([ptwatch_path(), 'report', '--live', run.doc_path]) + '; echo AFTER-$?')
    term.expect(r'ptwatch report \S+', 20, 'the recording\'s title')
    term.expect(r'moment (\d+) of \1\)', 10, 'at its last moment first')
    tid, routine = sorted(workers.items())[0]
    term.expect(live_row(tid) + r'.*\s%s \(lifecycle\.c:\d+\)' % routine, 10,
                'the row of %d (%s), ended' % (tid, routine))
    term.keys('b')
    term.expect(r'\s0 rows\b', 10, 'the beginning: no thread yet')
    term.expect(r'at 0\.000000 s of .* \(moment 1 of', 10, 'moment 1, at 0 s')
    term.keys('n')
    term.expect(r'\(moment 2 of', 10, 'n: the next moment')
    term.keys('e')
    text = term.expect(r'moment (\d+) of \1\)', 10, 'e: the end again').string
    last = float(re.search(r' at ([\d.]+) s of ', text).group(1))
    term.keys('t')
    term.type('%.6f' % (last / 2))
    term.keys('Enter')
    text = term.expect(r' at ([\d.]+) s of ', 10, 'a time typed').string
    shown = float(re.search(r' at ([\d.]+) s of ', text).group(1))
    chk.true('t %.6f: the first moment from there (%.6f)' % (last / 2, shown),
             last / 2 <= shown <= last)
    term.keys('q')
    term.expect(r'^AFTER-0', 20, 'report --live quit with q, exit 0')
    # Ctrl-C: the screen and the terminal's modes back, then it dies of it
    term.line('clear; echo BEFORE-MARK')
    term.expect(r'^BEFORE-MARK', 10, 'the echo')
    term.line(shell_quote([ptwatch_path(), 'report', '--live', run.doc_path]))
    term.expect(r'moment (\d+) of \1\)', 10, 'the table again')
    term.keys('C-c')
    term.expect(lambda text: 'BEFORE-MARK' in text and 'moment' not in text, 10,
                'after Ctrl-C: the shell\'s screen back, the table gone')
    term.line('echo MODES-$(stty -g | cut -c1-4)')
    term.expect(r'^MODES-', 10, 'the terminal echoes again (its modes back)')
    # --locks: each wait's beginning and end is a moment too, and a
    # deadlock's (locks contend 3: three contended waits, main's joins)
    lrun = session.run([fixture('locks'), 'contend', '3'], opts=['-q', '--locks'])
    doc = lrun.doc
    start = doc['session']['start_ns']
    times = {start}
    for sp in doc['spans']:
        keys = (('create_ns', 'start_ns', 'end_ns') if sp['kind'] == 'thread' else
                ('start_ns', 'end_ns') if sp['kind'] == 'wait' else ())
        times |= {sp[k] for k in keys if sp.get(k) is not None}
    times |= {d['ns'] for d in doc.get('deadlocks', []) if d.get('ns') is not None}
    want = len([t for t in times if t >= start])
    waits = [sp for sp in doc['spans'] if sp['kind'] == 'wait']
    chk.true('locks contend 3 --locks: waits recorded (%d)' % len(waits), len(waits) >= 3)
    term.line('clear; ' + shell_quote([ptwatch_path(), 'report', '--live', lrun.doc_path]) +
              '; echo AFTER-$?')
    term.expect(r'moment %d of %d\)' % (want, want), 20,
                'as many moments as the threads\' and the waits\' times (%d)' % want)
    term.keys('q')
    term.expect(r'^AFTER-0', 20, 'report --live of a --locks recording quit with q, exit 0')


def processes_named(first, pid):
    """The pids whose command line starts with `first` and has -p PID."""
    found = []
    for entry in os.listdir('/proc'):
        if not entry.isdigit():
            continue
        try:
            with open('/proc/%s/cmdline' % entry, 'rb') as f:
                args = f.read().split(b'\0')
        except OSError:
            continue
        if args and args[0].endswith(first.encode()) and str(pid).encode() in args:
            found.append(int(entry))
    return found


def live_stuck(session, chk):
    """A terminal that stops taking output (nobody reads the pty) must not
    hold the tracer up: ptwatch --live -p on a pty the test does not read,
    made to redraw the whole table again and again (size changes), while
    the fixture makes threads, which it can only do if ptwatch serves their
    breakpoints."""
    import fcntl
    import struct
    import termios
    target = session.target('live')
    pid = target.ready()[0]
    term = Terminal(session, (), opts=('--live',), env={'TERM': 'xterm'}, pid=pid)
    try:
        term.expect(r'ptwatch -p %d' % pid, 20, 'the live table')

        def unread():
            return struct.unpack('i', fcntl.ioctl(term.master, termios.FIONREAD, b'\0' * 4))[0]
        made = []

        def round_(i):
            # a new size: the whole table again; a thread made (and, every
            # other round, one ended): only if ptwatch serves its stops
            fcntl.ioctl(term.master, termios.TIOCSWINSZ,
                        struct.pack('HHHH', 40 + i % 2, 150 + i % 2, 0, 0))
            made.append(int(target.ask('c', 10)[1]))
            if i % 2:
                target.ask('e', 10)
        # until the terminal's buffer is full (each redraw is 4 KiB or more,
        # at most one per 50 ms): bounded
        i = 0
        while unread() < 4000 and i < 200:
            before = unread()
            round_(i)
            wait_for(lambda: unread() > before, 0.5, step=0.01)
            i += 1
        stuck = unread()
        print('terminal stuck with %d bytes unread after %d rounds' % (stuck, i))
        chk.true('the terminal was stuck: %d bytes unread (its 4 KiB buffer full)' % stuck,
                 stuck >= 4000)
        # and stays stuck while the fixture goes on making threads
        for j in range(i, i + 30):
            round_(j)
        chk.eq('ptwatch still runs', term.poll(), None)
        # the terminal reads again: the table catches up
        term.expect(r'%d pool-\d' % made[-1], 20, 'the last thread made, %d' % made[-1])
        os.write(term.master, b'q')
        term.wait(20, 'ptwatch did not end after q')
        chk.eq('ptwatch exit status after q', term.run.returncode, 0)
        check_untouched(chk, pid, 'after q')
        chk.eq('the fixture still answers', target.ask('p'), ['pong'])
    finally:
        term.close()


def live_ends(session, chk, term):
    """The other ways out: the target exits, SIGTERM to ptwatch, SIGKILL
    of its tracer process (the front puts the terminal back); Ctrl-Z does
    not stop ptwatch under the table."""
    for way in ('exit', 'sigterm', 'sigkill', 'sigkill-front'):
        target = session.target('live')
        pid = target.ready()[0]
        term.line('clear; echo BEFORE-MARK-%s' % way)
        term.expect(r'^BEFORE-MARK-%s' % way, 10, 'the echo')
        opts = ['--open-timeout=0.3'] if way == 'exit' else []
        term.line(shell_quote([ptwatch_path(), '-p', str(pid)] + opts) + '; echo AFTER-$?')
        term.expect(r'ptwatch -p %d \(fixture-live\)' % pid, 20, 'the live table\'s title')
        if way == 'exit':
            # open past --open-timeout: "late", where it waits, highlighted
            term.expect(live_row(pid) + r'.* late S read', 20, 'the main thread late')
            line = [ln for ln in term.screen(attributes=True).splitlines()
                    if re.search(r'\b%d\b.*late S read' % pid, ln)]
            chk.true('the late row is highlighted (red, bold or reverse): %r' % line,
                     line and re.search(r'\x1b\[([0-9;]*;)?(31|1|7)[;m]', line[0]))
            term.keys('C-z')
            tid = int(target.ask('c')[1])
            term.expect(live_row(tid), 20, 'a new thread after Ctrl-Z: ptwatch runs on')
            target.send('q')
            status = 'AFTER-0'
            summary = r'process exited with code 0'
        elif way == 'sigterm':
            front = processes_named('ptwatch', pid)
            chk.eq('one ptwatch front process for %d' % pid, len(front), 1)
            os.kill(front[0], signal.SIGTERM)
            status = 'AFTER-0'
            summary = r'^ptwatch: \d+ threads'
        elif way == 'sigkill-front':
            # the tracer (PR_SET_PDEATHSIG) lets go and puts the terminal back
            front = processes_named('ptwatch', pid)
            chk.eq('one ptwatch front process for %d' % pid, len(front), 1)
            os.kill(front[0], signal.SIGKILL)
            status = None
            summary = r'^ptwatch: \d+ threads'
        else:
            tracer = processes_named('ptw-tracer', pid)
            chk.eq('one ptw-tracer process for %d' % pid, len(tracer), 1)
            os.kill(tracer[0], signal.SIGKILL)
            status = 'AFTER-%d' % (128 + signal.SIGKILL)
            summary = r'the tracer process died'
            # the restorer's summary, which it writes once the tracer died
            term.expect(r'^ptwatch: \d+ threads', 20, 'the restorer\'s summary')
        if way == 'sigkill-front':
            # The shell has the terminal back at once, and may print its
            # AFTER line and prompt on the table's screen before the tracer
            # switches back: only the summary and the echo below are sure.
            text = term.expect(summary, 20, 'the tracer\'s summary').string
        else:
            text = term.expect(r'^%s' % status, 20, 'ptwatch ended (%s), %s'
                               % (way, status)).string
        chk.true('%s: the shell\'s lines are back' % way,
                 re.search(r'^BEFORE-MARK-%s' % way, text, re.M), detail=text)
        chk.true('%s: %s' % (way, summary), re.search(summary, text, re.M))
        chk.true('%s: no table left on the screen' % way,
                 'tab/v view' not in text and not re.search(r'active \d+\s+created', text))
        # the terminal's modes are back: a line typed is echoed
        term.line('echo ECHO-IS-BACK-%s' % way)
        term.expect(r'echo ECHO-IS-BACK-%s' % way, 10, '%s: the typed line echoed' % way)
        if way != 'exit':
            check_untouched(chk, pid, 'after %s' % way)
            chk.eq('%s: the fixture still answers' % way, target.ask('p'), ['pong'])
        target.close()


def live_filter(session, chk, term):
    """--routine GLOB (as for the event lines) keeps the table to the spans
    it matches: odd_worker's thread shows, pool_worker's do not."""
    target = session.target('live')
    pid = target.ready()[0]
    t1 = int(target.ask('c')[1])
    argv = [ptwatch_path(), '-o', os.path.join(term.dir, 'doc.json'), '-p', str(pid),
            '--routine', 'odd_*']
    term.line(shell_quote(argv) + '; echo AFTER-$?')
    term.expect(r'ptwatch -p %d \(fixture-live\)' % pid, 20, 'the live table\'s title')
    t3 = int(target.ask('o')[1])
    term.expect(live_row(t3) + r'\s*odd-\d+\s+odd_worker', 20, 'the row of odd thread %d' % t3)
    t2 = int(target.ask('c')[1])
    # a later thread's row drawn: the table has caught up with t2's creation
    t5 = int(target.ask('o')[1])
    text = term.expect(live_row(t5) + r'\s*odd-\d+\s+odd_worker', 20,
                       'the row of odd thread %d, made after pool thread %d' % (t5, t2)).string
    chk.true('pool_worker threads %d and %d are not shown (odd %d and %d are)' % (t1, t2, t3, t5),
             not re.search(live_row(t1), text, re.M) and not re.search(live_row(t2), text, re.M)
             and re.search(live_row(t3), text, re.M), detail=text)
    term.keys('q')
    term.expect(r'^AFTER-0', 20, 'q: ptwatch ended, exit 0')
    check_untouched(chk, pid, 'after q')


def live_frames(session, chk, term):
    """--trace under the table: the fixture's thread is as deep in fr_deep
    as its truth says when ptwatch attaches; its row's CALL is fr_deep,
    the function view has its calls all in flight, then all returned with
    no duration (their entries were before the attach)."""
    target = session.target('frames', ['deep'])
    pid = target.ready()[0]
    tid = int(target.line(20, 'deep').split()[1])
    depth = target.one_truth('deep')['depth']
    argv = [ptwatch_path(), '-o', os.path.join(term.dir, 'doc.json'), '-p', str(pid),
            '--trace', 'fr_*']
    term.line(shell_quote(argv) + '; echo AFTER-$?')
    term.expect(r'ptwatch -p %d \(fixture-frames\)' % pid, 20, 'the live table\'s title')
    term.expect(r'START ROUTINE\s.*\sCALL\s', 20, 'the CALL column (--trace)')
    term.expect(live_row(tid) + r'.*\sfr_deep \(frames\.c:\d+\)', 20,
                'the row of %d: in fr_deep' % tid)
    term.keys('Tab')
    term.expect(r'view routines', 10, 'the routine view')
    term.keys('Tab')
    term.expect(r'view functions', 10, 'the function view (--trace)')
    term.expect(r'FUNCTION\s+CALLS\s+IN FLIGHT\s+RETURNED\s+P50\s+P99\s+SLOWEST', 10,
                'the function view\'s columns')
    term.expect(r'^fr_deep \(frames\.c:\d+\)\s+%d\s+%d\s+0\s+-\s+-\s+-\s*$' % (depth, depth),
                20, 'fr_deep: %d calls, all in flight' % depth)
    chk.eq('the recursion returns', target.ask('x'), ['out', str(depth * (depth + 1) // 2)])
    term.expect(r'^fr_deep \(frames\.c:\d+\)\s+%d\s+0\s+%d\s+-\s+-\s+-\s*$' % (depth, depth),
                20, 'fr_deep: %d calls, all returned, no duration known' % depth)
    term.keys('Tab')
    term.expect(r'view threads', 10, 'the thread view again')
    term.keys('q')
    term.expect(r'^AFTER-0', 20, 'ptwatch let go after q, exit 0')
    target.send('q')
    chk.eq('the fixture ends', target.wait_exit(20), 0)


def live_attach(session, chk, term, mode):
    target = session.target('live')
    pid = target.ready()[0]
    t1 = int(target.ask('c')[1])  # running before ptwatch: preexisting
    doc_path = os.path.join(term.dir, 'doc.json')
    argv = [ptwatch_path(), '-o', doc_path, '-p', str(pid)]
    term.line('echo BEFORE-MARK')
    term.expect(r'^BEFORE-MARK', 10, 'the echo')
    if mode == 'ctrlc':
        term.line(shell_quote(argv[:1] + ['--no-live'] + argv[1:]) + '; echo AFTER-$?')
        term.expect(r'found\s+\[\d+\] pool_worker', 20, '--no-live: the event line of a thread')
        term.keys('C-c')
        term.expect(r'^AFTER-0', 20, 'ptwatch --no-live ended after Ctrl-C, exit 0')
        check_untouched(chk, pid, 'after ptwatch --no-live let go')
        term.line('clear; echo BEFORE-MARK')
        term.expect(r'^BEFORE-MARK', 10, 'the echo')
    term.line(shell_quote(argv) + '; echo AFTER-$?')
    term.expect(r'ptwatch -p %d \(fixture-live\)' % pid, 20, 'the live table\'s title')
    term.expect(live_row(t1) + r'\s*pool-0\s+pool_worker', 20, 'the row of %d' % t1)
    chk.true('the shell\'s lines are hidden by the table', 'BEFORE-MARK' not in term.screen())
    # CPU%: from two readings of its schedstat a second apart; asleep, 0.0
    term.expect(r'\sSTATE\s+CPU%\s+AGE\s', 10, 'the CPU% column')
    term.expect(live_row(t1) + r'.*\sread\s+0\.0\s', 20, 'the sleeping %d at 0.0%% CPU' % t1)
    live_counts(term, 2, 0, 0, 'after the attach')
    t2 = int(target.ask('c')[1])
    term.expect(live_row(t2) + r'\s*pool-1\s+pool_worker .*running', 20,
                'the row of new thread %d' % t2)
    live_counts(term, 3, 1, 0, 'one thread made')
    if mode == 'ctrlc':
        term.keys('C-c')
        text = term.expect(r'^AFTER-0', 20, 'ptwatch ended after Ctrl-C, exit 0').string
        chk.true('the shell\'s lines are back after Ctrl-C',
                 re.search(r'^BEFORE-MARK', text, re.M), detail=text)
        chk.true('the summary after Ctrl-C', re.search(r'^ptwatch: \d+ threads', text, re.M))
        chk.true('no table left on the screen',
                 'tab/v view' not in text and not re.search(r'active \d+\s+created', text))
        check_untouched(chk, pid, 'after Ctrl-C')
        chk.eq('the fixture still answers', target.ask('p'), ['pong'])
        return
    t3 = int(target.ask('o')[1])
    term.expect(live_row(t3) + r'\s*odd-2\s+odd_worker', 20, 'the row of odd thread %d' % t3)
    live_counts(term, 4, 2, 0, 'two threads made')
    # t1 ends: shown as returned (dim) for a few seconds, then gone
    chk.eq('the oldest worker ended', target.ask('e'), ['ended', str(t1)])
    term.expect(live_row(t1) + r'.*returned', 20, 'the ended thread %d as returned' % t1)
    live_counts(term, 3, 2, 1, 'one thread ended')
    live_no_row(term, t1, 'the ended thread %d fading out' % t1)
    # the routine view: pools
    term.keys('Tab')
    term.expect(r'^pool_worker \(live\.c:\d+\)\s+1\s+1\s+2\s+0\s', 20,
                'the pool_worker group: 1 live, 1 ended, 2 in all')
    term.expect(r'^odd_worker \(live\.c:\d+\)\s+1\s+0\s+1\s', 20, 'the odd_worker group')
    term.keys('Tab')
    term.expect(live_row(t2), 20, 'the thread view again')
    # filter
    term.type('/odd')
    term.keys('Enter')
    term.expect(lambda text: re.search(live_row(t3), text, re.M)
                and not re.search(live_row(t2), text, re.M), 20, 'only the odd thread (filter)')
    term.expect(r"filter 'odd'", 5, 'the filter in the status line')
    term.keys('Escape')
    term.expect(lambda text: re.search(live_row(t2), text, re.M), 20, 'every row again (Esc)')
    # sort: cycle to the name column, reversed: pool-1 above odd-2
    term.keys('s')
    term.expect(r'sort name', 10, 'sorting by name')
    term.keys('r')
    text = term.expect(r'sort name reversed', 10, 'reversed').string
    rows = [int(m.group(1)) for m in re.finditer(r'^\s*(\d+)\s+\S', text, re.M)]
    chk.true('reversed name order: pool-1 (%d) above odd-2 (%d): %s' % (t2, t3, rows),
             t2 in rows and t3 in rows and rows.index(t2) < rows.index(t3))
    # pause: a new thread does not show until unpaused. Nothing is drawn
    # while paused, so no later event can show that the table caught up:
    # an unpaused table draws a change within 200 ms of its last frame
    # and redraws every second (AGE), so the screen is watched for 1.5 s
    # once the thread was made (the tracer saw its creation before it
    # ran): it must not change at all.
    term.keys('p')
    frozen = term.expect(r'PAUSED', 10, 'paused').string
    for _ in range(20):   # the paused frame, whole (a slow terminal takes it in parts)
        more = term.changes(frozen, 0.2)
        if more is None:
            break
        frozen = more
    t4 = int(target.ask('c')[1])
    changed = term.changes(frozen, 1.5)
    chk.true('paused: the screen stays as it was, the new thread %d not shown%s'
             % (t4, '' if changed is None else ' (it changed to:\n%s)' % changed),
             changed is None)
    # A key that redraws while paused (a sort key, a scroll) draws the
    # paused table again, not the live one: the new thread stays out
    # (issue 18). The sort key shows in the header: the redraw came.
    sort = re.search(r' sort (\w+)', frozen).group(1)
    term.keys('s')
    term.expect(r' sort (?!%s )\w+.*PAUSED' % sort, 10, 'paused, sorted by the next column')
    text = term.screen()
    chk.true('paused, after a key that redraws (s): the new thread %d is not shown' % t4,
             'PAUSED' in text and not re.search(live_row(t4), text, re.M), detail=text)
    term.keys('S', 'k')
    term.expect(r' sort %s .*PAUSED' % sort, 10, 'paused, sorted by %s again' % sort)
    text = term.screen()
    chk.true('paused, after k: the new thread %d is not shown' % t4,
             not re.search(live_row(t4), text, re.M), detail=text)
    term.keys('p')
    term.expect(live_row(t4), 20, 'the new thread %d once unpaused' % t4)
    # resize: the table follows the window
    for w, h in ((80, 20), (140, 36)):
        term.resize(w, h)
        term.expect(lambda text: (lambda lines: len(lines) == h and 'q quit' in lines[h - 1]
                                  and 'active' in lines[0])(text.split('\n')[:-1]), 20,
                    'the table at %dx%d (title on top, keys on the last line)' % (w, h))
    # q: let go; the fixture runs on; the screen is back, then the summary
    term.keys('q')
    text = term.expect(r'^AFTER-0', 20, 'ptwatch ended after q, exit 0').string
    chk.true('the shell\'s lines are back after q', re.search(r'^BEFORE-MARK', text, re.M),
             detail=text)
    chk.true('the summary after q', re.search(r'^ptwatch: \d+ threads', text, re.M))
    check_untouched(chk, pid, 'after q')
    chk.eq('the fixture still answers after q', target.ask('p'), ['pong'])
    chk.eq('a thread made after q', target.ask('c')[0], 'made')
    with open(doc_path) as f:
        doc = json.load(f)
    chk.eq('session.end_reason after q', doc['session']['end_reason'], 'detached')
    chk.eq('target.fate after q', doc['target']['fate'], 'lives_on')
    tids = {s['tid'] for s in thread_spans(doc)}
    chk.true('the document has the threads shown (%s)' % sorted(tids), {t1, t2, t3, t4} <= tids)


def live_launch(chk, term):
    # usage errors: one line (and the --help hint), exit 2
    for opts, msg in ((['--live', '--', 'true'], '--live needs a terminal on standard error'),
                      (['--live', '--snapshot', '-p', '1'],
                       '--live cannot be used with --snapshot')):
        r = subprocess.run([ptwatch_path()] + opts, stdin=subprocess.DEVNULL,
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=20)
        err = r.stderr.decode()
        chk.eq('ptwatch %s: exit status' % ' '.join(opts), r.returncode, 2)
        chk.eq('ptwatch %s: the message' % ' '.join(opts), err.splitlines()[:1],
               ['ptwatch: ' + msg])
    ctl = os.path.join(term.dir, 'ctl')
    rep = os.path.join(term.dir, 'reply')
    os.mkfifo(ctl)
    os.mkfifo(rep)
    doc_path = os.path.join(term.dir, 'doc.json')
    # without --live, with --live and q, with --live and the command's end
    # (it exits; a terminal's Ctrl-C kills it)
    for live, end in ((False, None), (True, 'q'), (True, 'exit'), (True, 'C-c')):
        # O_RDWR: opening does not wait for the fixture, which opens them
        # through its shell redirections
        ctl_fd = os.open(ctl, os.O_RDWR)
        rep_fd = os.open(rep, os.O_RDWR)
        argv = ([ptwatch_path()] + (['--live'] if live else [])
                + ['-o', doc_path, '--', fixture('live')])
        term.line('clear; echo BEFORE-MARK; PTW_CTL_FD=5 PTW_REPLY_FD=6 %s 5<ctl 6>reply; '
                  'echo AFTER-$?' % shell_quote(argv))
        buf = b''

        def line():
            nonlocal buf
            deadline = time.monotonic() + 20
            while b'\n' not in buf:
                left = deadline - time.monotonic()
                if left <= 0 or not select.select([rep_fd], [], [], left)[0]:
                    raise Failed('no line from the fixture; the terminal shows:\n%s'
                                 % term.screen())
                buf += os.read(rep_fd, 4096)
            got, buf = buf.split(b'\n', 1)
            return got.decode().split()

        def ask(command):
            os.write(ctl_fd, command.encode())
            return line()
        try:
            words = line()
            if words[0] != 'ready':
                raise FrameworkError('expected "ready PID", got %r' % words)
            pid = int(words[1])
            t1 = int(ask('c')[1])
            chk.eq('the fixture wrote', ask('w'), ['wrote'])
            if not live:
                term.expect(r'create\s+\[\d+\] tid %d pool_worker' % t1, 20,
                            'without --live: the event line of thread %d' % t1)
                term.expect(r'^FIXTURE-SAYS-HELLO', 20, 'without --live: the command\'s output')
                os.write(ctl_fd, b'q')
                term.expect(r'^AFTER-0', 20, 'ptwatch ended with the command')
                continue
            term.expect(live_row(t1) + r'\s*pool-0\s+pool_worker', 20, 'the row of %d' % t1)
            chk.true('--live: the command\'s output is not on the table',
                     'FIXTURE-SAYS-HELLO' not in term.screen())
            if end != 'q':
                # the command ends under the table: screen back, summary, its status
                if end == 'exit':
                    os.write(ctl_fd, b'q')
                else:
                    term.keys('C-c')
                if end == 'exit':
                    text = term.expect(r'^AFTER-0', 20, 'ptwatch ended as the command did, '
                                       'exit 0').string
                else:  # sh drops the rest of the line after a job killed by SIGINT
                    text = term.expect(lambda t: re.search(r'process killed by SIGINT', t) and
                                       re.search(r'^[$#]\s*\Z', t.rstrip('\n').split('\n')[-1])
                                       and t, 20, 'the summary and the prompt after Ctrl-C')
                chk.true('%s: the shell\'s lines are back' % end,
                         re.search(r'^BEFORE-MARK', text, re.M), detail=text)
                summary = (r'process exited with code 0' if end == 'exit'
                           else r'process killed by SIGINT')
                chk.true('%s: the summary says "%s"' % (end, summary),
                         re.search(summary, text), detail=text)
                continue
            term.keys('q')
            text = term.expect(r'^AFTER-0', 20, 'ptwatch ended after q, exit 0').string
            chk.true('the shell\'s lines are back after q',
                     re.search(r'^BEFORE-MARK', text, re.M), detail=text)
            chk.true('the summary after q', re.search(r'^ptwatch: \d+ threads', text, re.M))
            check_untouched(chk, pid, 'the launched command after q')
            chk.eq('the command runs on after q', ask('p'), ['pong'])
            chk.eq('and makes threads', ask('c')[0], 'made')
            ask('w')
            chk.true('its output still goes to /dev/null',
                     'FIXTURE-SAYS-HELLO' not in term.screen())
            with open(doc_path) as f:
                doc = json.load(f)
            chk.eq('session.end_reason after q', doc['session']['end_reason'], 'detached')
            os.write(ctl_fd, b'q')
            chk.true('the command ends when told', wait_for(lambda: not task_states(pid), 20))
        finally:
            os.close(ctl_fd)
            os.close(rep_fd)
