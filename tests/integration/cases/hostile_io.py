"""Hostile input and lost output (issue 18): the user's terminal kept safe
from what the target names (thread names, paths, argv), outputs that
cannot be written said and given an exit status of their own, a tracer
that does not answer made to let go by the front (or by the restorer when
the front is gone), and the options' limits named."""

import json
import os
import re
import signal
import subprocess
import time

from ptw_test import test, WHY_WEDGED
from ptw_test import backend, case, Failed, fixture, ptwatch_path, thread_spans
from helpers import check_target_exit, run_ptwatch


# ---------------------------------------------------------------------------
# usage errors name what is wrong (issue 18, item 10)

@test('usage-limits', kernel=True)
@case('usage-limits')
def case_usage_limits(session, chk):
    """--duration and --open-timeout over a year say that the limit is a
    year; -e, --tid and --debug with a bad word in a list name that word."""
    year = '31536000'
    for opts, want in (
            (['--duration=1e9'], "ptwatch: invalid duration '1e9': more than a year "
                                 "(at most %s seconds)" % year),
            (['--duration=31536001'], "more than a year (at most %s seconds)" % year),
            (['--open-timeout=1e300'], "ptwatch: invalid open timeout '1e300': more than a "
                                       "year (at most %s seconds)" % year),
            (['--open-timeout=inf'], "more than a year"),
            (['--duration=x'], "ptwatch: invalid duration 'x' (seconds, > 0)"),
            (['-e', 'create,bogus'], "ptwatch: unknown event name in 'create,bogus': 'bogus' "
                                     "is none of exec, main,"),
            (['-e', ','], "ptwatch: unknown event name in ',': an empty name"),
            (['--tid', '12,x3'], "ptwatch: invalid --tid '12,x3': 'x3' is not a thread id"),
            (['--debug=sym,nope'], "ptwatch: unknown debug domain in 'sym,nope': 'nope' is "
                                   "none of attach,"),
            # what the user typed comes back escaped
            (['-e', 'end,\x1b[2J'], "'end,\\x1b[2J': '\\x1b[2J' is none of")):
        p = run_ptwatch(opts + ['--', 'true'])
        err = p.stderr.decode('utf-8', 'replace')
        first = err.splitlines()[0] if err else ''
        chk.eq('%s: exit status' % opts, p.returncode, 2)
        chk.true('%s: the first line says %r' % (opts, want), want in first, detail=err)
        chk.true('%s: no control character on stderr' % opts,
                 not re.search(r'[\x00-\x09\x0b-\x1f\x7f]', err), detail=repr(err))
    # a year itself is fine (the command ends first)
    for opts in (['--duration=31536000'], ['--open-timeout=31536000']):
        p = run_ptwatch(['-q'] + opts + ['--', 'true'])
        chk.eq('%s: accepted (exit status of true)' % opts, p.returncode, 0)


# ---------------------------------------------------------------------------
# what the target names reaches the terminal escaped (issue 18, item 7)

# ptwatch's escaping of text (ptw_buf_put_escaped, ptw_util.h), for the
# expected text: printable ASCII and valid UTF-8 as they are, a backslash
# doubled, \n \t \r, other control bytes, DEL, C1 controls, bidi controls
# and bytes that are not UTF-8 as \xHH.
BIDI = set(range(0x202a, 0x202f)) | set(range(0x2066, 0x206a)) | {0x200e, 0x200f}


def escape_text(raw):
    out = []
    i = 0
    while i < len(raw):
        c = raw[i]
        if 0x20 <= c < 0x7f and c != 0x5c:
            out.append(chr(c))
            i += 1
            continue
        if c < 0x80:
            out.append({0x5c: '\\\\', 0x0a: '\\n', 0x09: '\\t', 0x0d: '\\r'}.get(c, '\\x%02x' % c))
            i += 1
            continue
        n = 2 if 0xc2 <= c <= 0xdf else 3 if 0xe0 <= c <= 0xef else 4 if 0xf0 <= c <= 0xf4 else 0
        try:
            ch = raw[i:i + n].decode('utf-8') if n else None
        except UnicodeDecodeError:
            ch = None
        if ch is None or len(ch) != 1:
            out.append('\\x%02x' % c)
            i += 1
        elif 0x80 <= ord(ch) < 0xa0 or ord(ch) in BIDI:
            out.extend('\\x%02x' % b for b in raw[i:i + n])
            i += n
        else:
            out.append(ch)
            i += n
    return ''.join(out)


def json_text(raw):
    """What the JSON document holds for raw bytes: the string whole, valid
    UTF-8 as it is, each byte that is not as the code point of its value."""
    s = raw.decode('utf-8', 'surrogateescape')
    return ''.join(chr(ord(ch) - 0xdc00) if 0xdc80 <= ord(ch) <= 0xdcff else ch for ch in s)


UNSAFE = re.compile(rb'[\x00-\x09\x0b-\x1f\x7f]|\xc2[\x80-\x9f]|\xe2\x80[\x8e\x8f\xaa-\xae]|'
                    rb'\xe2\x81[\xa6-\xa9]')


def terminal_unsafe(data):
    """What in data a terminal would act on (a list of reprs; [] if none)."""
    bad = [m.group(0) for m in UNSAFE.finditer(data)]
    try:
        data.decode('utf-8')
    except UnicodeDecodeError as e:
        bad.append(data[e.start:e.start + 4])
    return [repr(b) for b in bad[:10]]


def hostile_copy(session):
    """The fixture under a file name that is an attack too."""
    d = session.mkdtemp()
    path = os.path.join(d, 'hos\x1b[2Jtile\n\x07exe')
    with open(fixture('hostile'), 'rb') as src, open(path, 'wb') as dst:
        dst.write(src.read())
    os.chmod(path, 0o755)
    return path


def hostile_names(run):
    """{index: (tid, raw bytes)} from the fixture's truth."""
    return {r['index']: (r['tid'], bytes.fromhex(r['hex']))
            for r in run.truth if r.get('kind') == 'hostile_name'}


NEWLINE_NAME = 4   # the fixture's "nl\nname"


@test('hostile-names', kernel=True)
@test('hostile-name-newline', 'newline', kernel=True)
@case('hostile-names')
def case_hostile_names(session, chk, which='all'):
    """ptwatch -- FIXTURE (its file name an escape sequence) whose threads
    are named to retitle and clear the terminal: the event lines and the
    summary on stderr, and `ptwatch report` of the document, hold no byte a
    terminal acts on and show each name escaped; the document keeps every
    name, the exe and argv whole.
    which=newline: the name with a newline, whole in the document and the
    text (ptwatch reads /proc/TID/comm, whose last newline is the file's)."""
    exe = hostile_copy(session)
    arg = '\x1b]2;argv\x07\nx'
    run = session.run([exe, 'launch', arg], opts=(), timeout=40)
    names = hostile_names(run)
    chk.eq('the fixture named its threads', sorted(names), list(range(5)))
    spans = {s['tid']: s for s in run.doc['spans'] if s['kind'] == 'thread'}
    err = run.stderr_text()
    picked = [NEWLINE_NAME] if which == 'newline' else [i for i in names if i != NEWLINE_NAME]
    if which != 'newline':
        chk.eq('exit status', run.returncode, 0)
        chk.eq('stderr: nothing a terminal acts on', terminal_unsafe(run.stderr), [])
        chk.eq('target.exe whole in the document', run.doc['target']['exe'], exe)
        chk.eq('target.argv whole in the document', run.doc['target']['argv'][1:],
               ['launch', arg])
        chk.true('the exec line names the exe escaped (%r)' % escape_text(exe.encode()),
                 (' exec     ' + escape_text(exe.encode())) in err, detail=err[:600])
    for i in picked:
        tid, raw = names[i]
        span = spans.get(tid)
        if not chk.true('name %d (%r): a span for tid %d' % (i, raw, tid), span is not None):
            continue
        chk.eq('name %d: the document keeps it whole' % i, span['name'], json_text(raw), span)
        chk.true('name %d: the summary shows it escaped (%s)' % (i, escape_text(raw)),
                 re.search(r'^\s+\d+\s+%d\s+\d+\s+%s\s' % (tid, re.escape(escape_text(raw))),
                           err, re.M), detail=err)
    # ptwatch report: the summary again, escaped the same way (a name that
    # is not UTF-8 came back from the document as its code points)
    rep = run_ptwatch(['report', run.doc_path])
    chk.eq('report: exit status', rep.returncode, 0)
    chk.eq('report: nothing a terminal acts on', terminal_unsafe(rep.stdout), [])
    out = rep.stdout.decode('utf-8', 'replace')
    for i in picked:
        tid, raw = names[i]
        want = escape_text(json_text(raw).encode('utf-8'))
        chk.true('report: name %d shown escaped (%s)' % (i, want),
                 re.search(r'^\s+\d+\s+%d\s+\d+\s+%s\s' % (tid, re.escape(want)), out, re.M),
                 detail=out)


@test('hostile-tracer-name', kernel=True)
@case('hostile-tracer-name')
def case_hostile_tracer_name(session, chk):
    """ptwatch -p on a process another one traces: the refusal names that
    tracer with its name, which anyone chooses: escaped."""
    import ctypes
    target = session.target('hostile')
    pid = target.ready()[0]
    libc = ctypes.CDLL(None, use_errno=True)
    with open('/proc/self/comm', 'rb') as f:
        mine = f.read().rstrip(b'\n')
    evil = b'\x1b]0;pwn\x07\x1b[2J'
    debugger = Debugger(pid)   # the test traces the fixture
    try:
        libc.prctl(15, ctypes.c_char_p(evil), 0, 0, 0)   # PR_SET_NAME
        p = run_ptwatch(['-q', '-p', str(pid)])
    finally:
        libc.prctl(15, ctypes.c_char_p(mine), 0, 0, 0)
        libc.ptrace(Debugger.PTRACE_DETACH, pid, None, None)
    chk.eq('exit status', p.returncode, 1)
    chk.eq('stderr: nothing a terminal acts on', terminal_unsafe(p.stderr), [])
    chk.true('the refusal names the tracer, escaped',
             ('already traced by PID %d (\\x1b]0;pwn\\x07\\x1b[2J)' % os.getpid()).encode()
             in p.stderr, detail=p.stderr.decode('utf-8', 'replace'))
    chk.eq('the fixture answers', target.ask('p'), ['pong'])


@test('hostile-thread-list', timeout=90, kernel=True)
@case('hostile-thread-list')
def case_hostile_thread_list(session, chk):
    """ptwatch -p on a process whose list of threads in memory goes round
    in a loop that libthread_db walks without reporting its nodes (a fake
    descriptor filtered by priority, pointing to itself): ptwatch attached
    for ever before, the target held stopped on the ptrace path. Now the
    walk ends at the loop: both threads are there, the worker (met before
    the loop) with its start routine, and a warning says what happened;
    the target lives on, mends its list and exits."""
    target = session.target('looplist')
    pid, worker, hidden = target.ready()
    modes = [('duration', ('-q', '--duration=0.3'))]
    if backend() != 'kernel':
        modes.append(('snapshot', ('-q', '--snapshot')))
    for mode, opts in modes:
        chk.prefix = '[%s] ' % mode
        run = session.attach(pid, opts=opts, timeout=30)
        chk.eq('exit status', run.returncode, 0, run.stderr_text()[-2000:])
        doc = run.doc
        warnings = [w for w in doc.get('warnings', []) if w['code'] == 'thread_db_iteration']
        chk.eq('one thread_db_iteration warning', len(warnings), 1, doc.get('warnings'))
        chk.true('it says the list loops', warnings and 'goes round in a loop' in
                 warnings[0]['message'], warnings)
        spans = {s['tid']: s for s in thread_spans(doc)}
        chk.eq('spans by tid', sorted(spans), sorted([pid, worker, hidden]))
        routine = lambda tid: ((spans.get(tid) or {}).get('start_routine') or {}).get('symbol')
        chk.eq('main\'s routine', routine(pid), 'main')
        chk.eq('the worker\'s routine (met before the loop)', routine(worker), 'worker')
        print('[%s] the hidden worker (beyond the loop): %r' % (mode, spans.get(hidden)))
        chk.eq('the hidden worker\'s routine (beyond the loop: from its TLS)', routine(hidden),
               'hidden_worker')
    chk.prefix = ''
    chk.eq('the fixture answers', target.ask('p'), ['pong'])
    target.send('q')
    if check_target_exit(chk, target, 'released'):
        chk.eq('its list mended, the worker joined', target.one_truth('looplist', 'q'),
               {'kind': 'looplist', 'worker': worker, 'hidden': hidden, 'mended': True})


@test('hostile-terminal', 'lines', kernel=True)
@test('hostile-terminal-live', 'live', kernel=True)
@case('hostile-terminal')
def case_hostile_terminal(session, chk, mode='lines'):
    """A real terminal (tmux) keeps its title and its lines when ptwatch
    shows the hostile names: lines: the summary of ptwatch -q -- FIXTURE;
    live: the live table of ptwatch -p on the fixture with its named
    threads waiting."""
    from ptw_test import Tmux, check_untouched
    term = Tmux(session, 160, 40)
    try:
        title = term.cmd('display-message', '-p', '-t', 'ptw', '#{pane_title}').strip()
        term.line('echo BEFORE-MARK')
        term.expect(r'^BEFORE-MARK', 10, 'the echo')
        if mode == 'live':
            target = session.target('hostile')
            pid = target.ready()[0]
            tids = [int(t) for t in target.ask('n')[1:]]
            term.line("'%s' -p %d; echo AFTER-$?" % (ptwatch_path(), pid))
            term.expect(r'ptwatch -p %d' % pid, 20, 'the live table')
            # (the NAME column shows the first 16 characters)
            term.expect(r'^\s*%d %s ' % (tids[0], re.escape(r'\x1b]0;pwn\x07\x')), 20,
                        'the first name, escaped')
            term.expect(r'^\s*%d %s ' % (tids[2], re.escape(r'back\\sl\x7f\x08')), 20,
                        'the third name, escaped')
            term.keys('q')
            term.expect(r'^AFTER-0', 20, 'ptwatch ended after q, exit 0')
            target.send('e')
            chk.eq('the fixture ended its threads', target.line(), 'ended')
            check_untouched(chk, pid, 'after q')
            chk.eq('threads named', len(tids), 5)
        else:
            term.line("'%s' -q -- '%s' launch; echo AFTER-$?" % (ptwatch_path(),
                                                                fixture('hostile')))
            term.expect(r'^AFTER-0', 20, 'ptwatch ended, exit 0')
            screen = term.screen()
            chk.true('the summary shows the first name escaped',
                     r'\x1b]0;pwn\x07\x1b[2J' in screen, detail=screen)
        screen = term.screen()
        chk.true('the lines before ptwatch are still on the screen (not cleared)',
                 re.search(r'^BEFORE-MARK', screen, re.M), detail=screen)
        now = term.cmd('display-message', '-p', '-t', 'ptw', '#{pane_title}').strip()
        chk.eq('the terminal\'s title', now, title)
    finally:
        term.close()


# ---------------------------------------------------------------------------
# an output that cannot be written is said, with a status of its own
# (issue 18, item 8)

LOST = 3   # PTW_EXIT_LOST_OUTPUT (ptw_session.h; man page, EXIT STATUS)
ENOSPC = os.strerror(28)


def run_to(argv, stdout=None, stderr=subprocess.PIPE, timeout=60, env=None):
    """ptwatch ARGV with its stdout (and stderr) where the case says."""
    e = dict(os.environ)
    e.update(env or {})
    return subprocess.run([ptwatch_path()] + argv, stdout=stdout or subprocess.PIPE,
                          stderr=stderr, stdin=subprocess.DEVNULL, timeout=timeout, env=e)


def lost_lines(err):
    return [ln for ln in err.decode('utf-8', 'replace').splitlines()
            if ln.startswith('ptwatch: lost output')]


@test('lost-output', 'launch', kernel=True)
@test('lost-output-attach', 'attach', kernel=True)
@test('lost-output-restorer', 'restorer',
      kernel=WHY_WEDGED)
@case('lost-output')
def case_lost_output(session, chk, mode='launch'):
    """launch: --json-lines -o /dev/full, --json-lines > /dev/full, -o
    /dev/full (the document, the Chrome trace), 2> /dev/full: ptwatch
    exits 3 and says in one line which output it lost and how the command
    ended (exited, killed by a signal); a closed pipe is not a loss.
    attach: -p with the stream, and --snapshot > /dev/full: exit 3, the
    process let go of. restorer: the tracer killed, the restorer cannot
    write the end either: exit 3 from the front, with the line."""
    from ptw_test import check_untouched
    from ptw_test import read_outputs, wait_for
    from helpers import kill_tracer, wait_traced, wait_untraced
    full = open('/dev/full', 'wb')
    try:
        if mode == 'launch':
            for argv, out, where, status in (
                    (['--json-lines', '-o', '/dev/full'], None, '/dev/full', 0),
                    (['--json-lines'], full, 'standard output', 0),
                    (['-o', '/dev/full'], None, '/dev/full', 0),
                    (['--format=chrome', '-o', '/dev/full'], None, '/dev/full', 0),
                    (['--json'], full, 'standard output', 7),
                    (['-o', '/dev/full'], None, '/dev/full', 'SIGSEGV')):
                cmd = (['sh', '-c', 'exit 7'] if status == 7 else
                       ['sh', '-c', 'kill -SEGV $$'] if status == 'SIGSEGV' else
                       [fixture('hostile'), 'launch'])
                p = run_to(['-q'] + argv + ['--'] + cmd, stdout=out)
                what = '%s%s' % (' '.join(argv), ' > /dev/full' if out else '')
                chk.eq('%s: exit status' % what, p.returncode, LOST)
                ended = ('command killed by SIGSEGV' if status == 'SIGSEGV'
                         else 'command exited with %d' % status)
                chk.eq('%s: one line says what was lost' % what, lost_lines(p.stderr),
                       ['ptwatch: lost output %s: %s (%s)' % (where, ENOSPC, ended)])
                chk.true('%s: and nothing else about it' % what,
                         b'cannot write' not in p.stderr, detail=p.stderr.decode()[-500:])
            # standard error itself: nothing can be said, the status says it
            p = run_to(['-q', '--', fixture('hostile'), 'launch'], stderr=full)
            chk.eq('2> /dev/full: exit status', p.returncode, LOST)
            # a closed pipe is the reader's choice (SIGPIPE, man page SIGNALS)
            r, w = os.pipe()
            os.close(r)
            p = run_to(['-q', '--json', '--', 'true'], stdout=w)
            os.close(w)
            chk.true('--json | (closed): not a lost output (exit %s)' % p.returncode,
                     p.returncode != LOST and not lost_lines(p.stderr),
                     detail=p.stderr.decode()[-500:])
        elif mode == 'attach':
            target = session.target('idle', ['4'])
            pid = target.ready()[0]
            p = run_to(['-q', '--json-lines', '-o', '/dev/full', '--duration=0.3', '-p',
                        str(pid)])
            chk.eq('-p --json-lines -o /dev/full: exit status', p.returncode, LOST)
            chk.eq('-p: the line', lost_lines(p.stderr),
                   ['ptwatch: lost output /dev/full: %s' % ENOSPC])
            check_untouched(chk, pid, 'after -p')
            p = run_to(['--snapshot', '-p', str(pid)], stdout=full)
            chk.eq('--snapshot > /dev/full: exit status', p.returncode, LOST)
            chk.eq('--snapshot: the line', lost_lines(p.stderr),
                   ['ptwatch: lost output standard output: %s' % ENOSPC])
            check_untouched(chk, pid, 'after --snapshot')
            target.send('q')
            chk.eq('the fixture ends as it should', target.wait_exit(20), 0)
        else:   # restorer
            target = session.target('idle', ['4'])
            pid = target.ready()[0]
            run, proc = session.start_attach(pid, opts=('--json-lines', '-o', '/dev/full'),
                                             output=None)
            try:
                wait_traced(target)
                chk.true('attached: its "found" lines',
                         wait_for(lambda: read_outputs(run) or ' found ' in run.stderr_text(),
                                  20))
                kill_tracer(chk, proc.pid)
                session.wait(run, proc, 20, 'ptwatch did not exit after its tracer was killed')
            finally:
                if proc.returncode is None:
                    proc.kill()
                    proc.wait()
            chk.eq('tracer killed, stream lost: exit status', run.returncode, LOST)
            chk.eq('the line', lost_lines(run.stderr),
                   ['ptwatch: lost output /dev/full: %s' % ENOSPC])
            chk.true('untraced', wait_untraced(pid, 2) is not None)
            check_untouched(chk, pid, 'after the kill')
            target.send('q')
            chk.eq('the fixture ends as it should', target.wait_exit(20), 0)
    finally:
        full.close()


# ---------------------------------------------------------------------------
# a tracer that does not answer is made to let go (issue 18, item 2)

def tracer_of(front):
    from helpers import ptwatch_processes
    return ptwatch_processes(front).get('tracer')


def wchan(pid):
    try:
        with open('/proc/%d/wchan' % pid) as f:
            return f.read().strip()
    except OSError:
        return ''


class Debugger:
    """The test as a debugger of a process: PTRACE_SEIZE, then
    PTRACE_INTERRUPT: it stays stopped (state t) until let go; SIGCONT
    does not move it, SIGKILL does."""
    PTRACE_SEIZE, PTRACE_INTERRUPT, PTRACE_DETACH = 0x4206, 0x4207, 17

    def __init__(self, pid):
        import ctypes
        self.libc = ctypes.CDLL(None, use_errno=True)
        self.libc.ptrace.argtypes = [ctypes.c_long, ctypes.c_long, ctypes.c_void_p,
                                     ctypes.c_void_p]
        self.pid = pid
        if self.libc.ptrace(self.PTRACE_SEIZE, pid, None, None) != 0:
            raise Failed('cannot PTRACE_SEIZE %d: %s' % (pid, os.strerror(ctypes.get_errno())))
        self.libc.ptrace(self.PTRACE_INTERRUPT, pid, None, None)
        os.waitpid(pid, 0x40000000)  # __WALL: its interrupt stop

    def reap(self):
        """The debuggee's end (it was killed), as its debugger sees it."""
        try:
            os.waitpid(self.pid, 0x40000000)
        except ChildProcessError:
            pass


@test('stuck-tracer', 'pipe', timeout=120,
      kernel=WHY_WEDGED)
@test('stuck-tracer-front-killed', 'front-killed', timeout=120,
      kernel=WHY_WEDGED)
@test('stuck-tracer-stopped', 'stopped', timeout=120,
      kernel=WHY_WEDGED)
@test('stuck-tracer-debugger', 'debugger', timeout=120,
      kernel=WHY_WEDGED)
@case('stuck-tracer')
def case_stuck_tracer(session, chk, mode='pipe'):
    """ptwatch --json-lines -p PID with its standard output a pipe the test
    does not read: at the attach, the spans of the fixture's 1000 idle
    threads fill it and the tracer blocks in write() (a real way to get
    stuck: a pager stopped with Ctrl-Z, a consumer that hangs).
    pipe: SIGTERM to ptwatch: 5 s later the front says what is stuck and
      kills the tracer; the restorer puts the bytes back and writes the
      stream's end (read once the test drains the pipe); ptwatch exits
      with 128 + SIGTERM; the target runs, untraced, as it was.
    front-killed: SIGKILL to ptwatch's front (timeout -s KILL): the
      restorer, left alone, does the same.
    stopped: the tracer stopped (SIGSTOP, the pipe read): the front
      continues it, and it lets go cleanly (exit 0).
    debugger: the tracer stopped by a debugger (the test: ptrace): SIGCONT
      cannot move it; the front kills it."""
    from ptw_test import check_untouched, compare_mappings, exec_mappings, wait_for
    from helpers import wait_traced, wait_untraced
    from cases.streams import parse_lines
    target = session.target('idle', ['1000'])
    pid = target.ready(60)[0]
    before = exec_mappings(pid)
    d = session.mkdtemp()
    out_r, out_w = os.pipe()
    argv = [ptwatch_path(), '-q', '--json-lines', '-p', str(pid)]
    with open(os.path.join(d, 'stderr'), 'wb') as err:
        proc = subprocess.Popen(argv, stdout=out_w, stderr=err, stdin=subprocess.DEVNULL,
                                start_new_session=True, cwd=d)
    os.close(out_w)
    data = b''
    debugger = None
    tracer = None
    try:
        wait_traced(target, 60)
        tracer = wait_for(lambda: tracer_of(proc.pid), 10)
        chk.true('a tracer process', tracer)
        if mode == 'stopped':
            # stopped (wherever it is: the pipe is read meanwhile)
            import select
            os.kill(tracer, signal.SIGSTOP)
            while not wait_for(lambda: (open('/proc/%d/stat' % tracer).read()
                                        .rsplit(')', 1)[1].split()[0] == 'T'), 0.05):
                if select.select([out_r], [], [], 0.1)[0]:
                    data += os.read(out_r, 1 << 20)
        else:
            chk.true('the tracer blocks writing to the full pipe (wchan %r)' % wchan(tracer),
                     wait_for(lambda: 'pipe_write' in wchan(tracer), 60))
        if mode == 'debugger':
            debugger = Debugger(tracer)
        t0 = time.monotonic()
        os.kill(proc.pid, signal.SIGKILL if mode == 'front-killed' else signal.SIGTERM)
        errpath = os.path.join(d, 'stderr')

        def said(what):
            with open(errpath, 'rb') as f:
                return what in f.read()
        if mode == 'stopped':
            chk.true('the front says the tracer is stopped and continues it',
                     wait_for(lambda: said(b'it is stopped (by SIGSTOP or SIGTSTP); '
                                           b'continuing it'), 20))
        else:
            who = (b'the front is gone and ptw-tracer %d has not ended for'
                   if mode == 'front-killed' else b'ptw-tracer %d has not answered SIGTERM for'
                   ) % tracer
            where = (b'it is stopped by its debugger (process %d); killing it' % os.getpid()
                     if mode == 'debugger' else b'it is stuck in write() (')
            chk.true('stderr says what is stuck: %r ... %r' % (who, where),
                     wait_for(lambda: said(who) and said(where), 20))
            waited = time.monotonic() - t0
            print('said after %.1f s' % waited)
            chk.true('not before the grace period (5 s): %.1f s' % waited, waited >= 4.9)
            if debugger:
                debugger.reap()
        # the rest of the stream: the restorer's end (or the tracer's own)
        import select
        deadline = time.monotonic() + 40
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                raise Failed('the stream did not end within 40 s of the signal')
            if not select.select([out_r], [], [], left)[0]:
                continue
            chunk = os.read(out_r, 1 << 20)
            if not chunk:
                break
            data += chunk
        proc.wait(timeout=30)
    finally:
        if proc.returncode is None:
            proc.kill()
            proc.wait()
        if tracer and os.path.exists('/proc/%d' % tracer):
            os.kill(tracer, signal.SIGKILL)   # (a case that failed)
        os.close(out_r)
    with open(os.path.join(d, 'stderr'), 'rb') as f:
        err = f.read().decode('utf-8', 'replace')
    print(err[-1500:])
    want = {'front-killed': -signal.SIGKILL, 'stopped': 0}.get(mode, 128 + signal.SIGTERM)
    chk.eq('ptwatch exit status', proc.returncode, want)
    objs = parse_lines(chk, data, 'the stream')
    last = objs[-1] if objs else {}
    chk.eq('the stream ends with its metrics line', last.get('type'), 'metrics')
    chk.eq('session.end_reason', (last.get('session') or {}).get('end_reason'),
           'interrupted' if mode == 'stopped' else 'tracer_died')
    chk.eq('every one of the 1001 threads has its span line',
           len({o['span']['id'] for o in objs if o['type'] == 'span'}), 1001)
    chk.true('untraced', wait_untraced(pid, 5) is not None)
    check_untouched(chk, pid, 'after the tracer let go')
    compare_mappings(chk, before, exec_mappings(pid), 'after the tracer let go')
    target.send('q')
    chk.eq('the fixture ends as it should (its threads pass where the int3s were)',
           target.wait_exit(30), 0)
