#!/usr/bin/python3
"""Helpers for ptwatch's integration tests.

Runs ptwatch on a fixture with a fresh truth file in a temporary directory,
loads and validates the JSON document against spec/spans.schema.json, loads
the fixture's ground truth (JSON lines, see tests/fixtures/truth.h), matches
spans to truth records by (tid, pthread) and compares them, collecting every
mismatch with the span it concerns.

Attach mode (ptwatch -p PID): Target runs an attach fixture as the test's own
child and talks to it (tests/fixtures/attach.h); Session.attach/start_attach
run ptwatch on its pid; exec_mappings/compare_mappings, tracer_pids and
check_untouched check that the target was left as it was found.

Configuration comes from the environment (set by meson.build):
  PTWATCH          the ptwatch binary
  PTW_FIX_<name>   the path of fixture <name>
  PTW_FIXTURE_SRC  tests/fixtures in the source tree (to find routine lines)
  PTW_SCHEMA       spans.schema.json
  PTW_TMPDIR       where the runs' directories go (kept when a case fails)
  PTW_BACKEND      kernel: run ptwatch with --backend=kernel (the CASE@kernel
                   twins, tests/kernel/meson.build); unset: its default
  PTW_KERNEL_DEMO  tests/kernel's ptw-kernel-demo (can the kernel path run?)

Exit codes: 0 pass, 1 failure, 77 skip, 99 framework error.
"""

import json
import os
import re
import resource
import select
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import traceback

PASS, FAIL, SKIP, ERROR = 0, 1, 77, 99
CANCELED = '0xffffffffffffffff'  # PTHREAD_CANCELED, (void *)-1


class Skip(Exception):
    """The case cannot run here (the message says why)."""


class FrameworkError(Exception):
    """The test itself could not run: missing binary, fixture misbehaved..."""


class Failed(Exception):
    """ptwatch did something wrong that makes the rest of the case moot."""


# ---------------------------------------------------------------------------
# configuration

def env_path(name):
    value = os.environ.get(name)
    if not value:
        raise FrameworkError('$%s is not set (run the tests through meson test)' % name)
    return value


def ptwatch_path():
    path = env_path('PTWATCH')
    if not os.access(path, os.X_OK):
        raise FrameworkError('ptwatch binary %s is not executable' % path)
    return path


def backend():
    """The backend the case runs ptwatch with: 'kernel' for the CASE@kernel
    twins of the backend-neutral cases (tests/kernel/meson.build sets
    $PTW_BACKEND), None for ptwatch's default. A case that asserts what
    only one backend does (ptrace stops, restored bytes, the strategy)
    asks it."""
    return os.environ.get('PTW_BACKEND') or None


def check_backend_runs():
    """Raises Skip, with ptwatch's own one-line reason, when the backend
    of $PTW_BACKEND cannot run here (the kernel path: no privileges, no
    BPF, built without libbpf): asked of the library through
    ptw-kernel-demo ($PTW_KERNEL_DEMO), then of ptwatch, which must then
    refuse --backend=kernel with that line and a non-zero exit."""
    name = backend()
    if name is None:
        return
    if name != 'kernel':
        raise FrameworkError('$PTW_BACKEND=%s: only kernel is known' % name)
    demo = env_path('PTW_KERNEL_DEMO')
    probe = subprocess.run([demo, '0'], stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                           stderr=subprocess.STDOUT, timeout=30)
    help_ = subprocess.run([ptwatch_path(), '--help'], stdin=subprocess.DEVNULL,
                           stdout=subprocess.PIPE, stderr=subprocess.STDOUT, timeout=30)
    if b'--backend' not in help_.stdout:
        raise Failed('ptwatch --help does not mention --backend: the twins cannot be told apart')
    if probe.returncode != 77:
        return
    why = probe.stdout.decode('utf-8', 'replace').strip()
    p = subprocess.run([ptwatch_path(), '--backend=kernel', '-q', '--', 'true'],
                       stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                       timeout=30)
    lines = [l for l in p.stderr.decode('utf-8', 'replace').splitlines() if l.strip()]
    if p.returncode == 0 or len(lines) != 1:
        raise Failed('the kernel path cannot run here (%s), yet ptwatch --backend=kernel '
                     'exited %d saying %r (expected a failure and one line)'
                     % (why, p.returncode, lines))
    raise Skip('the kernel path cannot run here: %s' % lines[0])


def fixture(name):
    """The path of fixture `name` (PTW_FIX_<name>)."""
    value = os.environ.get('PTW_FIX_' + name)
    if value is None:
        raise Skip('fixture %s was not built (see tests/fixtures/meson.build)' % name)
    if not os.path.exists(value):
        raise FrameworkError('fixture %s: %s does not exist' % (name, value))
    return value


def fixture_source(basename):
    return os.path.join(env_path('PTW_FIXTURE_SRC'), basename)


_schema_validator = None


def schema_validator():
    global _schema_validator
    if _schema_validator is None:
        try:
            import jsonschema
        except ImportError as e:
            raise FrameworkError('python3-jsonschema is missing (%s); run with /usr/bin/python3' % e)
        path = env_path('PTW_SCHEMA')
        try:
            with open(path) as f:
                schema = json.load(f)
        except OSError as e:
            raise FrameworkError('cannot read the schema: %s' % e)
        jsonschema.Draft202012Validator.check_schema(schema)
        _schema_validator = jsonschema.Draft202012Validator(schema)
    return _schema_validator


# ---------------------------------------------------------------------------
# running ptwatch

class Run:
    """One ptwatch run: the process result, the document and the truth."""

    def __init__(self, tmpdir, argv):
        self.tmpdir = tmpdir
        self.argv = argv
        self.truth_path = os.path.join(tmpdir, 'truth.jsonl')
        self.doc_path = os.path.join(tmpdir, 'spans.json')
        self.returncode = None
        self.stdout = b''
        self.stderr = b''
        self.elapsed = 0.0
        self.doc = None
        self.truth = []

    def cmdline(self):
        return ' '.join(self.argv)

    def stderr_text(self):
        return self.stderr.decode('utf-8', 'replace')

    def stdout_text(self):
        return self.stdout.decode('utf-8', 'replace')

    def describe(self):
        return 'command: %s\nexit: %s\ntmpdir: %s' % (self.cmdline(), self.returncode, self.tmpdir)


def no_core():
    """preexec_fn: no core files from the target (ptwatch does the same for itself)."""
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))


class Session:
    """The temporary directories of one case; kept when the case fails."""

    def __init__(self, case):
        self.case = case
        self.dirs = []
        self.runs = []
        self.targets = []

    def mkdtemp(self):
        base = os.environ.get('PTW_TMPDIR') or None
        if base:
            os.makedirs(base, exist_ok=True)
        d = tempfile.mkdtemp(prefix='ptw-%s-' % self.case, dir=base)
        self.dirs.append(d)
        return d

    def cleanup(self, keep):
        for target in self.targets:
            target.close()
        if keep:
            for d in self.dirs:
                print('kept %s' % d)
            return
        for d in self.dirs:
            shutil.rmtree(d, ignore_errors=True)

    # ---- running

    def argv(self, run, cmd, opts=(), output='file', pid=None):
        """ptwatch OPTS [-o FILE | --json] -- CMD, or -p PID (attach mode)
        instead of the command when pid is given."""
        argv = [ptwatch_path()] + list(opts)
        if backend() and '--snapshot' not in opts:
            # (a snapshot is ptrace's whatever the backend: ptwatch refuses
            # --backend=kernel with it, and the twin runs the case's other
            # modes on the kernel path)
            argv[1:1] = ['--backend=' + backend()]
        if output == 'file':
            argv += ['-o', run.doc_path]
        elif output == 'stdout':
            argv += ['--json']
        if pid is not None:
            argv += ['-p', str(pid)]
        else:
            argv += ['--'] + list(cmd)
        return argv

    def env(self, run, extra=None):
        env = dict(os.environ)
        env['PTWATCH_TRUTH'] = run.truth_path
        env.pop('PTWATCH_NO_DEBUG_FILES', None)
        for name, value in (extra or {}).items():
            if value is None:
                env.pop(name, None)  # None: unset
            else:
                env[name] = value
        return env

    def start(self, cmd, opts=(), output='file', env=None, pass_fds=(), pid=None, stderr=None,
              prefix=(), stdout=None):
        """Starts ptwatch in a session of its own; returns (run, Popen).

        stdout and stderr go to files in the run's directory, not pipes: the
        target inherits them and may outlive ptwatch (interrupt), and a
        pipe would then keep a reader waiting for its end. stderr: another
        file object or descriptor for ptwatch's stderr (then not read back);
        stdout the same for its stdout. prefix: a command that runs ptwatch
        (setpriv ...)."""
        run = Run(self.mkdtemp(), [])
        run.argv = list(prefix) + self.argv(run, cmd, opts, output, pid)
        self.runs.append(run)
        run.t0 = time.monotonic()
        with open(os.path.join(run.tmpdir, 'stdout'), 'wb') as out, \
                open(os.path.join(run.tmpdir, 'stderr'), 'wb') as err:
            proc = subprocess.Popen(run.argv, env=self.env(run, env), pass_fds=pass_fds,
                                    stdin=subprocess.DEVNULL,
                                    stdout=out if stdout is None else stdout,
                                    stderr=err if stderr is None else stderr,
                                    cwd=run.tmpdir, start_new_session=True, preexec_fn=no_core)
        return run, proc

    def start_attach(self, pid, opts=('-q',), output='file', **kw):
        """ptwatch OPTS -p PID, started; returns (run, Popen)."""
        return self.start((), opts, output, pid=pid, **kw)

    def attach(self, pid, opts=('-q',), output='file', timeout=40, load=True, prefix=()):
        """Runs ptwatch OPTS -p PID to completion (--duration, --snapshot or
        a refusal); loads and validates the document when load is set."""
        run, proc = self.start_attach(pid, opts, output, prefix=prefix)
        self.wait(run, proc, timeout)
        if load:
            load_doc(run, run.stdout if output == 'stdout' else None)
        return run

    def target(self, name, args=(), env=None, exe=None):
        """Starts attach fixture `name` (see Target), or the program exe as
        it (a copy of it, say)."""
        target = Target(self, name, args, env, exe)
        self.targets.append(target)
        return target

    def wait(self, run, proc, timeout, what='ptwatch did not finish'):
        """Waits for ptwatch (killing it and its target on timeout) and
        reads what it wrote."""
        try:
            proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            kill_group(proc)
            proc.wait()
            read_outputs(run)
            raise Failed('%s within %d s\n%s\nstderr:\n%s'
                         % (what, timeout, run.describe(), tail(run.stderr_text())))
        run.elapsed = time.monotonic() - run.t0
        run.returncode = proc.returncode
        read_outputs(run)

    def run(self, cmd, opts=('-q',), output='file', env=None, timeout=40, load=True):
        """Runs ptwatch to completion (in its own temporary directory, also the
        target's working directory); loads the document and the truth."""
        run, proc = self.start(cmd, opts, output, env)
        self.wait(run, proc, timeout)
        if load:
            load_truth(run)
            load_doc(run, run.stdout if output == 'stdout' else None)
        return run


# ---------------------------------------------------------------------------
# a real terminal: ptwatch as the foreground job of a pty

# The session leader of the pty, as a shell would be: it makes the pty its
# controlling terminal, runs the command in a process group of its own that
# it puts in the foreground, writes the wait status to fd argv[1] and stays
# until fd argv[2] reaches its end (a session leader that exits would send
# SIGHUP to the foreground group: the command that ptwatch left running).
_PTY_LEADER = r"""
import fcntl, os, signal, sys, termios
status_fd, hold_fd, argv = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3:]
fcntl.ioctl(0, termios.TIOCSCTTY, 0)
signal.signal(signal.SIGTTOU, signal.SIG_IGN)
pid = os.fork()
if pid == 0:
    os.setpgid(0, 0)
    os.tcsetpgrp(0, os.getpid())
    for s in (signal.SIGTTOU, signal.SIGPIPE, signal.SIGXFSZ, signal.SIGINT):
        signal.signal(s, signal.SIG_DFL)
    os.close(status_fd)
    os.close(hold_fd)
    os.execv(argv[0], argv)
_, status = os.waitpid(pid, 0)
os.tcsetpgrp(0, os.getpgrp())
os.write(status_fd, b"%d\n" % status)
os.read(hold_fd, 1)
"""


class Terminal:
    """ptwatch run as the foreground job of a pseudo-terminal, the way a
    shell runs it: the terminal's interrupt character (^C) reaches its whole
    process group, ptwatch and the command it launched. What ptwatch writes
    to the terminal is collected in run.stderr (as the terminal shows it,
    with ^C echoed); the document goes to -o FILE."""

    def __init__(self, session, cmd, opts=(), env=None, pass_fds=(), pid=None):
        import pty
        self.run = run = Run(session.mkdtemp(), [])
        run.argv = session.argv(run, cmd, opts, 'file', pid)
        session.runs.append(run)
        self.master, slave = pty.openpty()
        status_r, status_w = os.pipe()
        self.hold_r, self.hold_w = os.pipe()
        self.status_r = status_r
        self.output = b''
        self.returncode = None
        run.t0 = time.monotonic()
        self.leader = subprocess.Popen(
            ['/usr/bin/python3', '-c', _PTY_LEADER, str(status_w), str(self.hold_r)] + run.argv,
            env=session.env(run, env), pass_fds=(status_w, self.hold_r) + tuple(pass_fds),
            stdin=slave, stdout=slave, stderr=slave, cwd=run.tmpdir, start_new_session=True,
            preexec_fn=no_core)
        os.close(slave)
        os.close(status_w)
        os.close(self.hold_r)

    def _pump(self, timeout):
        """Reads what the terminal shows for up to timeout seconds (less if
        the status comes); True if the status pipe is readable."""
        r, _, _ = select.select([self.master, self.status_r], [], [], max(timeout, 0))
        if self.master in r:
            try:
                chunk = os.read(self.master, 65536)
            except OSError:    # EIO: no one has the terminal open any more
                chunk = b''
            self.output += chunk
            self.run.stderr = self.output.replace(b'\r\n', b'\n')
        return self.status_r in r

    def text(self):
        return self.output.replace(b'\r\n', b'\n').decode('utf-8', 'replace')

    def expect(self, pattern, timeout=20, what=None):
        """Waits until the terminal shows a match of regex pattern; the match."""
        deadline = time.monotonic() + timeout
        while True:
            m = re.search(pattern, self.text(), re.M)
            if m:
                return m
            left = deadline - time.monotonic()
            if left <= 0 or (self._pump(min(left, 0.5)) and self.returncode is not None):
                raise Failed('the terminal did not show %s within %d s; it shows:\n%s'
                             % (what or repr(pattern), timeout, tail(self.text())))
            if self.returncode is None:
                self.poll()

    def interrupt(self):
        """Types the interrupt character (VINTR, ^C)."""
        os.write(self.master, b'\x03')

    def poll(self):
        """ptwatch's wait status as Popen spells it (negative: its signal), or None."""
        if self.returncode is None:
            r, _, _ = select.select([self.status_r], [], [], 0)
            if r:
                line = os.read(self.status_r, 64)
                status = int(line.decode().strip())
                self.returncode = (-os.WTERMSIG(status) if os.WIFSIGNALED(status)
                                   else os.WEXITSTATUS(status))
                self.run.returncode = self.returncode
                self.run.elapsed = time.monotonic() - self.run.t0
        return self.returncode

    def wait(self, timeout, what='ptwatch did not finish'):
        deadline = time.monotonic() + timeout
        while self.poll() is None:
            left = deadline - time.monotonic()
            if left <= 0:
                raise Failed('%s within %d s\n%s\nterminal:\n%s'
                             % (what, timeout, self.run.describe(), tail(self.text())))
            self._pump(min(left, 0.5))
        # what is still on its way to the terminal
        while select.select([self.master], [], [], 0.05)[0]:
            before = len(self.output)
            self._pump(0)
            if len(self.output) == before:
                break
        return self.returncode

    def close(self):
        """Lets the session leader go; kills ptwatch's process group if it still runs."""
        if self.returncode is None and self.poll() is None:
            for pid in child_pids(self.leader.pid):
                try:
                    os.killpg(pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
        for fd in (self.hold_w, self.master, self.status_r):
            try:
                os.close(fd)
            except OSError:
                pass
        try:
            self.leader.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.leader.kill()
            self.leader.wait()


def read_outputs(run):
    with open(os.path.join(run.tmpdir, 'stdout'), 'rb') as f:
        run.stdout = f.read()
    with open(os.path.join(run.tmpdir, 'stderr'), 'rb') as f:
        run.stderr = f.read()


def kill_group(proc):
    """Kills ptwatch and its target (they share the session ptwatch was started in)."""
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass


def end_group(proc):
    """If ptwatch still runs (a check failed, or timed out): kills it and its
    target, and reaps it."""
    if proc.returncode is None:
        kill_group(proc)
        proc.wait()


def tail(text, lines=40):
    parts = text.splitlines()
    if len(parts) > lines:
        parts = ['[... %d lines ...]' % (len(parts) - lines)] + parts[-lines:]
    return '\n'.join(parts)


def load_doc(run, data=None):
    """Parses and validates the JSON document (from the -o file or stdout)."""
    if data is None:
        try:
            with open(run.doc_path, 'rb') as f:
                data = f.read()
        except OSError as e:
            raise Failed('no JSON document: %s\n%s\nstderr:\n%s'
                         % (e, run.describe(), tail(run.stderr_text())))
    try:
        doc = json.loads(data)
    except ValueError as e:
        raise Failed('the document is not valid JSON: %s\n%s\nstart: %r'
                     % (e, run.describe(), data[:300]))
    validate(doc, run)
    ran = (doc.get('session') or {}).get('backend')
    if (backend() == 'kernel' and ran and ran != 'kernel' and '--snapshot' not in run.cmdline()
            and '--backend=ptrace' not in run.argv[2:] and '--backend=auto' not in run.argv[2:]):
        # a NAME@kernel twin that ran ptrace would prove nothing (unless
        # the case asked for it: a concurrent session of the other kind,
        # or auto, whose choice the case checks)
        raise Failed('$PTW_BACKEND=kernel, yet the session ran the %s backend\n%s'
                     % (ran, run.describe()))
    run.doc = doc
    return doc


def validate(doc, run=None):
    errors = sorted(schema_validator().iter_errors(doc), key=lambda e: list(e.absolute_path))
    if errors:
        msg = ['the document does not match spans.schema.json (%d errors):' % len(errors)]
        for e in errors[:10]:
            msg.append('  at /%s: %s' % ('/'.join(str(p) for p in e.absolute_path),
                                         e.message[:300]))
        if run:
            msg.append(run.describe())
        raise Failed('\n'.join(msg))


def load_truth(run):
    try:
        with open(run.truth_path) as f:
            lines = f.read().splitlines()
    except FileNotFoundError:
        lines = []
    truth = []
    for n, line in enumerate(lines, 1):
        try:
            truth.append(json.loads(line))
        except ValueError as e:
            raise FrameworkError('truth line %d is not JSON (%s): %r' % (n, e, line))
    run.truth = truth
    return truth


# ---------------------------------------------------------------------------
# checks

class Check:
    """Collects mismatches; each names the span it is about (the span's JSON
    is printed with its first mismatch). Prints at most MAX_PRINTED."""

    MAX_PRINTED = 60

    def __init__(self, case):
        self.case = case
        self.failures = []
        self.shown_spans = set()
        self.prefix = ''

    def fail(self, what, span=None, detail=None):
        lines = ['FAIL: %s%s' % (self.prefix, what)]
        if span is not None and not isinstance(span, dict):
            # something else given where the span goes (a text, a list):
            # shown as the detail
            more = span if isinstance(span, str) else json.dumps(span, default=str)
            detail, span = '%s\n%s' % (detail, more) if detail else more, None
        if detail:
            lines.append('      ' + detail)
        if span is not None and id(span) not in self.shown_spans:
            self.shown_spans.add(id(span))
            lines.append('      span %s: %s' % (span.get('id'), json.dumps(span, sort_keys=True)))
        self.failures.append('\n'.join(lines))
        if len(self.failures) <= self.MAX_PRINTED:
            print('\n'.join(lines))
        elif len(self.failures) == self.MAX_PRINTED + 1:
            print('FAIL: ... (further failures counted, not printed)')
        return False

    def eq(self, what, actual, expected, span=None):
        if actual != expected:
            return self.fail('%s: expected %r, got %r' % (what, expected, actual), span)
        return True

    def true(self, what, cond, span=None, detail=None):
        if not cond:
            return self.fail(what, span, detail)
        return True

    def ok(self):
        return not self.failures


def span_label(span):
    sr = span.get('start_routine') or {}
    return 'span %s (tid %s, %s)' % (span.get('id'), span.get('tid'), sr.get('symbol'))


def thread_spans(doc):
    return [s for s in doc['spans'] if s['kind'] == 'thread']


class Gap:
    """-f on the kernel path links each followed process once its fork is
    read: what the document says its processes did before (the
    kernel_not_seen notes that count it). made: threads made then (their
    pthread_create calls unseen: no call site, no join of theirs may be
    seen); ended: of those, ended then too (unmatched, death_unclassified,
    with their values); mains: processes that exec'd and were in main() by
    then (their main threads' spans have no start); from_files: of those,
    processes gone before they were read, their programs named from their
    files (their libraries' code unnamed); calls, callers: --trace calls
    under way at the fork of that many processes not reported in them
    (left, or not readable, by then); returns: --trace calls made before
    the links that returned after (no entry: not reported); waits:
    --locks, threads asleep in futex when the links went in that woke
    before their wait could be read (one begun before: not reported). All
    0 elsewhere."""

    MADE = re.compile(r'(\d+) threads of \d+ processes were made before their '
                      r'process\'s own probes were in.*; (\d+) of them also ended then')
    MAINS = re.compile(r'(\d+) followed processes exec\'d before their own probes were in')
    FILES = re.compile(r'(\d+) followed processes that exec\'d early were gone before their '
                       r'memory maps could be read')
    CALLS = re.compile(r'(\d+) --trace calls under way at the fork of (\d+) followed processes '
                       r'.* are not reported in them')
    RETURNS = re.compile(r'(\d+) --trace calls that (\d+) followed processes made before their '
                         r'own probes were in returned once they were')
    WAITS = re.compile(r'--locks: (\d+) threads of \d+ followed processes were asleep in futex '
                       r'when their process\'s own probes went in')

    def __init__(self, doc):
        self.made = self.ended = self.mains = self.from_files = 0
        self.calls = self.callers = self.returns = self.waits = 0
        self.notes = []
        for w in doc.get('warnings', []):
            m = self.MADE.search(w.get('message', ''))
            n = self.MAINS.search(w.get('message', ''))
            f = self.FILES.search(w.get('message', ''))
            c = self.CALLS.search(w.get('message', ''))
            rt = self.RETURNS.search(w.get('message', ''))
            wt = self.WAITS.search(w.get('message', ''))
            if m:
                self.made, self.ended = int(m.group(1)), int(m.group(2))
            if n:
                self.mains = int(n.group(1))
            if f:
                self.from_files = int(f.group(1))
            if c:
                self.calls, self.callers = int(c.group(1)), int(c.group(2))
            if rt:
                self.returns = int(rt.group(1))
            if wt:
                self.waits = int(wt.group(1))
            if m or n or f or c or rt or wt:
                self.notes.append(w)

    def ended_unseen(self, span):
        """span ended before its process's probes were in, as said."""
        end = span.get('end') or {}
        return (self.ended > 0 and span.get('status') == 'unmatched' and
                end.get('reason') == 'death_unclassified')

    def made_unseen(self, span):
        """span's thread was made before its process's probes were in (its
        pthread_create call unseen: no call site)."""
        return (self.made > 0 and span.get('origin') == 'created' and
                span.get('create_site') is None)

    def other_warnings(self, doc):
        """The document's warning codes but for the notes above."""
        return sorted(set(w['code'] for w in doc.get('warnings', []) if w not in self.notes))


def truth_of(run, kind):
    return [r for r in run.truth if r.get('kind') == kind]


def one_truth(run, kind):
    recs = truth_of(run, kind)
    if len(recs) != 1:
        raise FrameworkError('expected one %r truth record, found %d:\n%s'
                             % (kind, len(recs), '\n'.join(json.dumps(r) for r in run.truth)))
    return recs[0]


def find_span(chk, doc, tid, pthread, what, origin=None, index=None):
    """The one thread span with this tid and pthread (and origin)."""
    candidates = index.get(tid, []) if index is not None else thread_spans(doc)
    found = [s for s in candidates
             if s['tid'] == tid and (pthread is None or s['pthread'] == pthread)
             and (origin is None or s['origin'] == origin)]
    if len(found) != 1:
        same_tid = [s for s in candidates if s['tid'] == tid]
        chk.fail('%s: expected exactly one span with tid %s, pthread %s%s; found %d'
                 % (what, tid, pthread, ', origin %s' % origin if origin else '', len(found)),
                 detail='spans with tid %s: %s' % (tid, json.dumps(same_tid)))
        return None
    return found[0]


def span_index(doc):
    index = {}
    for s in thread_spans(doc):
        index.setdefault(s['tid'], []).append(s)
    return index


_line_cache = {}


def routine_line(source, func):
    """The line ptwatch should report for func's entry: gcc's first line-table
    row of a function is the line of its opening brace."""
    key = (source, func)
    if key in _line_cache:
        return _line_cache[key]
    with open(fixture_source(source)) as f:
        lines = f.read().split('\n')
    pat = re.compile(r'^(?:static\s+)?(?:int|void\s*\*|void)?\s*\*?\s*%s\s*\(' % re.escape(func))
    line = None
    for i, text in enumerate(lines):
        if pat.match(text) and not text.rstrip().endswith(';'):
            for j in range(i, min(i + 5, len(lines))):
                if '{' in lines[j]:
                    line = j + 1
                    break
            break
    if line is None:
        raise FrameworkError('cannot find the definition of %s in %s' % (func, source))
    _line_cache[key] = line
    return line


END_STATES = {
    'return': ('completed', 'return'),
    'pthread_exit': ('exited', 'pthread_exit'),
    'cancel': ('cancelled', 'cancel'),
}


def check_order(chk, span, what):
    c, s, e = span['create_ns'], span['start_ns'], span['end_ns']
    if chk.true('%s: create_ns, start_ns, end_ns all known' % what,
                None not in (c, s, e), span):
        chk.true('%s: create_ns <= start_ns <= end_ns (%s, %s, %s)' % (what, c, s, e),
                 c <= s <= e, span)
        if span['origin'] == 'created':
            # a created thread whose creation and start were seen has one
            chk.eq('%s: spawn_latency_ns == start_ns - create_ns' % what,
                   span['spawn_latency_ns'], s - c, span)
        else:
            # main: nothing spawned it
            chk.eq('%s: spawn_latency_ns (%s)' % (what, span['origin']),
                   span['spawn_latency_ns'], None, span)
        chk.eq('%s: lifetime_ns == end_ns - start_ns' % what, span['lifetime_ns'], e - s, span)


def check_location(chk, loc, what, span, symbol, source=None, line=None, addr=None,
                   module=None):
    if not chk.true('%s is known' % what, loc is not None, span):
        return
    chk.eq('%s.symbol' % what, loc['symbol'], symbol, span)
    chk.eq('%s.placeholder' % what, loc.get('placeholder'),
           symbol in ('pthread_start_routine', '??'), span)
    if addr is not None:
        chk.eq('%s.addr' % what, loc['addr'], addr, span)
    if module is not None:
        chk.eq('%s.module' % what, loc.get('module') and os.path.realpath(loc['module']),
               os.path.realpath(module), span)
    if source is not None:
        f = loc.get('file')
        chk.true('%s.file ends with %s (got %r)' % (what, source, f),
                 isinstance(f, str) and os.path.basename(f) == source, span)
    if line is not None:
        chk.eq('%s.line' % what, loc.get('line'), line, span)


class Model:
    """The truth of one run, indexed: thread records, joins, main, and the
    spans matched to them."""

    def __init__(self, chk, run, source, stripped=False, records=None, main_spans=None,
                 symbols_only=False):
        """stripped: no names at all (placeholders); symbols_only: names
        from a symbol table but no file:line (MiniDebugInfo);
        records: the truth records to use (default: all of run's);
        main_spans: {tid: span} for main records, instead of looking the
        main span up by tid (after an exec, two main spans share a tid)."""
        self.chk = chk
        self.run = run
        self.doc = run.doc
        self.source = source
        self.stripped = stripped
        self.symbols_only = symbols_only
        records = run.truth if records is None else records
        self.threads = [r for r in records if r.get('kind') == 'thread']
        self.mains = [r for r in records if r.get('kind') == 'main']
        self.main_spans = main_spans or {}
        # A tid can come back within a run (pid_max wraps while other
        # tests make threads): a thread that ended before being joined
        # gives its tid up. A thread record goes with the first join
        # record left of its tid by its creator, else of its tid (a tid is
        # reused only once its thread ended, and the fixtures join in
        # creation order).
        self.join_records = [r for r in records if r.get('kind') == 'join']
        self.join_of = {}    # id(thread record) -> its join record
        left = {}
        for j in self.join_records:
            left.setdefault(j['tid'], []).append(j)
        for t in self.threads:
            js = left.get(t['tid'], [])
            mine = [j for j in js if j['joiner'] == t['creator']] or js
            if mine:
                self.join_of[id(t)] = mine[0]
                js.remove(mine[0])
        self.span_for = {}   # id(record) -> span
        self.span_of = {}    # tid -> span (of the latest record with that tid)
        self.depth_of = {}

    def match(self):
        chk, doc = self.chk, self.doc
        index = span_index(doc)
        for m in self.mains:
            if m['tid'] in self.main_spans:
                span = self.main_spans[m['tid']]
            else:
                span = find_span(chk, doc, m['tid'], None, 'main thread %s' % m['tid'], 'main',
                                 index)
            if span:
                self.span_of[m['tid']] = span
                self.span_for[id(m)] = span
            self.depth_of[m['tid']] = 0
        by_tid = {}
        for t in self.threads:
            if t['tid'] in self.depth_of and t['tid'] not in by_tid:
                raise FrameworkError('truth: tid %s is main\'s and a thread\'s' % t['tid'])
            if any(r['pthread'] == t['pthread'] for r in by_tid.get(t['tid'], [])):
                raise FrameworkError('truth: tid %s came back with the same pthread_t: %s'
                                     % (t['tid'], by_tid[t['tid']] + [t]))
            by_tid.setdefault(t['tid'], []).append(t)
            span = find_span(chk, doc, t['tid'], t['pthread'],
                             'thread %s (%s)' % (t['tid'], t['routine']), index=index)
            if span:
                self.span_of[t['tid']] = span
                self.span_for[id(t)] = span

        def depth(tid, seen=()):
            if tid in self.depth_of:
                return self.depth_of[tid]
            if tid in seen or tid not in by_tid:
                raise FrameworkError('truth: creator chain of %s is broken' % tid)
            ds = {depth(r['creator'], seen + (tid,)) + 1 for r in by_tid[tid]}
            if len(ds) != 1:
                raise FrameworkError('truth: tid %s came back at another depth' % tid)
            self.depth_of[tid] = ds.pop()
            return self.depth_of[tid]
        for t in self.threads:
            depth(t['tid'])

    def check_main(self, m, expect_pthread=False):
        chk = self.chk
        span = self.span_of.get(m['tid'])
        if span is None:
            return
        what = 'main thread %s' % m['tid']
        chk.eq('%s: origin' % what, span['origin'], 'main', span)
        if expect_pthread:
            chk.eq('%s: pthread (pthread_self() of the main thread)' % what, span['pthread'],
                   m['pthread'], span)
        chk.eq('%s: depth' % what, span['depth'], 0, span)
        chk.eq('%s: creator_tid' % what, span['creator_tid'], None, span)
        chk.eq('%s: creator_span' % what, span['creator_span'], None, span)
        chk.eq('%s: uncertain' % what, span['uncertain'], False, span)
        sr = span['start_routine']
        if chk.true('%s: start_routine known' % what, sr is not None, span):
            chk.eq('%s: start_routine.symbol' % what, sr['symbol'], 'main', span)
            chk.eq('%s: start_routine.addr' % what, sr['addr'], m['routine_addr'], span)
            if not self.stripped and not self.symbols_only:
                check_location(chk, sr, '%s: start_routine' % what, span, 'main',
                               self.source, routine_line(self.source, 'main'))
        if m.get('name'):
            chk.eq('%s: name' % what, span['name'], m['name'], span)
        if self.check_end(m, span, what):
            chk.eq('%s: join' % what, span['join'], None, span)

    def check_thread(self, t, expect_end=True):
        """Compares the span of thread record t with it."""
        chk = self.chk
        span = self.span_for.get(id(t))
        if span is None:
            return
        what = 'thread %s (%s)' % (t['tid'], t['routine'])
        chk.eq('%s: origin' % what, span['origin'], 'created', span)
        chk.eq('%s: uncertain' % what, span['uncertain'], False, span)
        sr = span['start_routine']
        source = t.get('source', self.source)
        if self.stripped:
            check_location(chk, sr, '%s: start_routine' % what, span, 'pthread_start_routine',
                           addr=t['routine_addr'])
        elif self.symbols_only:
            check_location(chk, sr, '%s: start_routine' % what, span, t['routine'],
                           addr=t['routine_addr'])
            chk.eq('%s: start_routine.file (no DWARF)' % what, (sr or {}).get('file'), None, span)
        else:
            check_location(chk, sr, '%s: start_routine' % what, span, t['routine'], source,
                           routine_line(source, t['routine']), addr=t['routine_addr'],
                           module=t.get('module'))
        chk.eq('%s: creator_tid' % what, span['creator_tid'], t['creator'], span)
        creator_span = self.span_of.get(t['creator'])
        if creator_span is not None:
            chk.eq('%s: creator_span (the span of tid %s)' % (what, t['creator']),
                   span['creator_span'], creator_span['id'], span)
        cs = span['create_site']
        if self.stripped:
            chk.true('%s: create_site known' % what, cs is not None, span)
        elif self.symbols_only:
            check_location(chk, cs, '%s: create_site' % what, span, t['create_fn'])
        else:
            check_location(chk, cs, '%s: create_site' % what, span, t['create_fn'], self.source)
        chk.eq('%s: depth' % what, span['depth'], self.depth_of.get(t['tid']), span)
        chk.eq('%s: detached' % what, span['detached'], t['detached'], span)
        if t.get('name'):
            chk.eq('%s: name' % what, span['name'], t['name'], span)
        if expect_end and self.check_end(t, span, what):
            self.check_join(t, span, what)

    def check_end(self, rec, span, what):
        """How the span ended, against record rec; False when rec's end is
        not one a span reports (nothing checked)."""
        if rec['end'] not in END_STATES:
            return False
        chk = self.chk
        status, method = END_STATES[rec['end']]
        chk.eq('%s: status' % what, span['status'], status, span)
        end = span['end'] or {}
        chk.eq('%s: end.method' % what, end.get('method'), method, span)
        chk.eq('%s: end.value' % what, end.get('value'), rec['value'], span)
        check_order(chk, span, what)
        return True

    def check_join(self, t, span, what):
        chk = self.chk
        j = self.join_of.get(id(t))
        if j is None:
            chk.eq('%s: join (never joined)' % what, span['join'], None, span)
            return
        js = span['join']
        if not chk.true('%s: join recorded (joined by %s)' % (what, j['joiner']),
                        js is not None, span):
            return
        chk.eq('%s: join.joiner_tid' % what, js['joiner_tid'], j['joiner'], span)
        if chk.true('%s: join.return_ns known' % what, js['return_ns'] is not None, span):
            chk.true('%s: join.call_ns <= join.return_ns' % what,
                     js['call_ns'] <= js['return_ns'], span)
            chk.eq('%s: join.wait_ns == return_ns - call_ns' % what, js['wait_ns'],
                   js['return_ns'] - js['call_ns'], span)
            if span['end_ns'] is not None:
                chk.true('%s: end_ns <= join.return_ns' % what, span['end_ns'] <= js['return_ns'],
                         span)

    def check_all(self, expect_main_pthread=False):
        for m in self.mains:
            self.check_main(m, expect_main_pthread)
        for t in self.threads:
            self.check_thread(t)

    def check_no_extra_spans(self, allowed=()):
        """Every thread span in the document belongs to a truth record."""
        known = {id(s) for s in self.span_for.values()} | {id(s) for s in allowed}
        for s in thread_spans(self.doc):
            if id(s) not in known:
                self.chk.fail('unexpected span %s: no truth record has it' % span_label(s), s)

    def unjoined_expected(self):
        return sum(1 for t in self.threads
                   if t['detached'] is False and id(t) not in self.join_of)

    def check_complete(self, expect_main_pthread=False):
        """The whole comparison of a run that went to its end: every record
        matched and checked, no span without a record, the metrics."""
        self.match()
        self.check_all(expect_main_pthread)
        self.check_no_extra_spans()
        self.check_metrics()

    def check_metrics(self, created=None, unjoined=True, open_spans=0, unmatched=0):
        """created: expected threads_created (default: the thread records;
        False: not checked)."""
        chk, m = self.chk, self.doc['metrics']
        chk.eq('metrics.threads_seen', m['threads_seen'], len(thread_spans(self.doc)))
        if created is not False:
            chk.eq('metrics.threads_created', m['threads_created'],
                   len(self.threads) if created is None else created)
        chk.eq('metrics.max_depth', m['max_depth'], max(self.depth_of.values(), default=0))
        if unjoined:
            chk.eq('metrics.unjoined', m['unjoined'], self.unjoined_expected())
        chk.eq('metrics.open_spans', m['open_spans'], open_spans)
        chk.eq('metrics.unmatched_spans', m['unmatched_spans'], unmatched)


def check_exit(chk, run, code=None, signame=None):
    doc = run.doc
    if code is not None:
        chk.eq('ptwatch exit status', run.returncode, code)
        if doc is not None:
            chk.eq('target.exit', doc['target']['exit'], {'code': code})
            chk.eq('session.end_reason', doc['session']['end_reason'], 'target_exited')
    if signame is not None:
        chk.eq('ptwatch exit status (death by %s)' % signame, run.returncode,
               -getattr(signal, signame))
        if doc is not None:
            ex = doc['target']['exit'] or {}
            chk.eq('target.exit.signal', ex.get('signal'), signame)
            chk.eq('session.end_reason', doc['session']['end_reason'], 'target_exited')


def report_warnings(run):
    if run.doc and run.doc.get('warnings'):
        for w in run.doc['warnings']:
            print('note: ptwatch warning %s: %s' % (w['code'], w['message']))


# ---------------------------------------------------------------------------
# attach mode (ptwatch -p PID): fixtures started by the test itself

class Target:
    """An attach fixture (tests/fixtures/attach.h) run by the test, not by
    ptwatch: the test is its parent (it can collect its exit status), talks
    to it through two pipes ($PTW_CTL_FD: one-byte commands, $PTW_REPLY_FD:
    lines) and gives it a truth file in a directory of its own, where its
    stdout and stderr go too. Killed at the end of the case if still alive."""

    def __init__(self, session, name, args=(), env=None, exe=None):
        self.name = name
        self.dir = session.mkdtemp()
        self.truth_path = os.path.join(self.dir, 'truth.jsonl')
        self.argv = [exe or fixture(name)] + [str(a) for a in args]
        ctl_r, ctl_w = os.pipe()
        rep_r, rep_w = os.pipe()
        full_env = dict(os.environ)
        full_env.update({'PTWATCH_TRUTH': self.truth_path, 'PTW_CTL_FD': str(ctl_r),
                         'PTW_REPLY_FD': str(rep_w)})
        if env:
            full_env.update(env)
        try:
            with open(os.path.join(self.dir, 'stdout'), 'wb') as out, \
                    open(os.path.join(self.dir, 'stderr'), 'wb') as err:
                self.proc = subprocess.Popen(self.argv, env=full_env, pass_fds=(ctl_r, rep_w),
                                             stdin=subprocess.DEVNULL, stdout=out, stderr=err,
                                             cwd=self.dir, start_new_session=True,
                                             preexec_fn=no_core)
        finally:
            os.close(ctl_r)
            os.close(rep_w)
        self.pid = self.proc.pid
        self.ctl = ctl_w
        self.rep = rep_r
        self.buf = b''
        self.returncode = None

    def __str__(self):
        return 'fixture %s (pid %d)' % (self.name, self.pid)

    def stderr_text(self):
        try:
            with open(os.path.join(self.dir, 'stderr'), 'rb') as f:
                return f.read().decode('utf-8', 'replace')
        except OSError:
            return ''

    def describe(self):
        return '%s: %s\nexit: %s\ndir: %s' % (self, ' '.join(self.argv), self.returncode,
                                               self.dir)

    def line(self, timeout=20, what='reply'):
        """The fixture's next line on the reply pipe (buffered: replies may
        come several at once)."""
        deadline = time.monotonic() + timeout
        while b'\n' not in self.buf:
            left = deadline - time.monotonic()
            if left <= 0:
                raise Failed('%s: no %s line within %d s (got %r)\n%s\nstderr:\n%s'
                             % (self, what, timeout, self.buf, self.describe(),
                                tail(self.stderr_text())))
            r, _, _ = select.select([self.rep], [], [], left)
            if r:
                chunk = os.read(self.rep, 4096)
                if not chunk:
                    self.poll()
                    raise Failed('%s: its reply pipe closed before a %s line (got %r)\n%s\n'
                                 'stderr:\n%s' % (self, what, self.buf, self.describe(),
                                                  tail(self.stderr_text())))
                self.buf += chunk
        line, self.buf = self.buf.split(b'\n', 1)
        return line.decode()

    def ready(self, timeout=30):
        """The words of the fixture's "ready PID ..." line, as ints."""
        words = self.line(timeout, 'ready').split()
        if not words or words[0] != 'ready' or int(words[1]) != self.pid:
            raise FrameworkError('%s: expected "ready %d ...", got %r' % (self, self.pid, words))
        return [int(w) for w in words[1:]]

    def send(self, command):
        try:
            os.write(self.ctl, command.encode())
        except BrokenPipeError:
            self.poll()
            raise Failed('%s: it no longer reads commands\n%s\nstderr:\n%s'
                         % (self, self.describe(), tail(self.stderr_text())))

    def ask(self, command, timeout=20):
        """Sends a command, returns the words of the reply line."""
        self.send(command)
        return self.line(timeout, 'reply to %r' % command).split()

    def count(self, timeout=20):
        """The fixture's progress counter (command 'c', reply "count N")."""
        words = self.ask('c', timeout)
        if len(words) != 2 or words[0] != 'count':
            raise FrameworkError('%s: expected "count N", got %r' % (self, words))
        return int(words[1])

    def truth(self):
        run = Run(self.dir, self.argv)
        run.truth_path = self.truth_path
        return load_truth(run)

    def one_truth(self, kind, what=None):
        """The one record of this kind. what: the record is the fixture's
        last word, written after ptwatch let go: without it, the fixture
        did not finish its work as written (a failure, not the test's)."""
        recs = [r for r in self.truth() if r.get('kind') == kind]
        if len(recs) != 1:
            msg = '%s: expected one %r truth record, found %d' % (self, kind, len(recs))
            if what:
                raise Failed('%s: %s (exit %s): it did not run to its end as written\n'
                             'its records: %s' % (what, msg, self.returncode, self.truth()))
            raise FrameworkError(msg)
        return recs[0]

    def poll(self):
        if self.returncode is None:
            self.returncode = self.proc.poll()
        return self.returncode

    def wait_exit(self, timeout):
        """The fixture's exit status (Popen style: -N for a signal), None
        when it is still running after timeout seconds."""
        try:
            self.returncode = self.proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            return None
        return self.returncode

    def alive(self):
        return self.poll() is None

    def check_alive(self, what):
        """Raises Failed (with the fixture's own words) when it has ended."""
        if self.poll() is None:
            return
        raise Failed('%s: %s has ended: %s\nits stderr:\n%s'
                     % (what, self, 'exit %d' % self.returncode if self.returncode >= 0
                        else 'signal %d' % -self.returncode, tail(self.stderr_text())))

    def kill(self):
        if self.poll() is None:
            try:
                os.kill(self.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            self.wait_exit(10)

    def close(self):
        self.kill()
        for fd in (self.ctl, self.rep):
            try:
                os.close(fd)
            except OSError:
                pass
        self.ctl = self.rep = -1


def task_states(pid):
    """{tid: state letter} of every thread of pid ({} when it is gone)."""
    states = {}
    try:
        tids = os.listdir('/proc/%d/task' % pid)
    except FileNotFoundError:
        return states
    for tid in tids:
        try:
            with open('/proc/%d/task/%s/stat' % (pid, tid)) as f:
                states[int(tid)] = f.read().rsplit(')', 1)[1].split()[0]
        except (FileNotFoundError, ProcessLookupError, IndexError):
            pass
    return states


def proc_status(pid, tid=None):
    """The fields of /proc/PID[/task/TID]/status ({} when it is gone)."""
    path = '/proc/%d/status' % pid if tid is None else '/proc/%d/task/%d/status' % (pid, tid)
    fields = {}
    try:
        with open(path) as f:
            for line in f:
                key, _, value = line.partition(':')
                fields[key] = value.strip()
    except (FileNotFoundError, ProcessLookupError):
        pass
    return fields


def tracer_pids(pid):
    """{tid: TracerPid} of every thread of pid whose TracerPid is not 0."""
    traced = {}
    try:
        tids = [int(t) for t in os.listdir('/proc/%d/task' % pid)]
    except FileNotFoundError:
        return traced
    for tid in tids:
        tracer = int(proc_status(pid, tid).get('TracerPid', '0'))
        if tracer:
            traced[tid] = tracer
    return traced


def wait_for(cond, timeout, step=0.01):
    """Polls cond() (a real condition, in the harness) until it is true or
    timeout seconds passed; returns its last value."""
    deadline = time.monotonic() + timeout
    while True:
        value = cond()
        if value or time.monotonic() >= deadline:
            return value
        time.sleep(step)  # polling in the harness


def comm(pid):
    try:
        with open('/proc/%d/comm' % pid) as f:
            return f.read().strip()
    except OSError:
        return None


def child_pids(pid):
    """The children of process pid (its main thread's /proc children list)."""
    try:
        with open('/proc/%d/task/%d/children' % (pid, pid)) as f:
            return [int(p) for p in f.read().split()]
    except OSError:
        return []


def exec_mappings(pid):
    """Every executable mapping of pid: {(range, perms, offset, path): bytes
    in memory}, read through /proc/PID/mem (a string saying why when the
    kernel does not let them be read, as for [vsyscall]); None when the
    process is gone."""
    result = {}
    try:
        with open('/proc/%d/maps' % pid) as f:
            maps = f.read().splitlines()
        mem = open('/proc/%d/mem' % pid, 'rb', buffering=0)
    except (FileNotFoundError, ProcessLookupError):
        return None
    with mem:
        for line in maps:
            parts = line.split(None, 5)
            if len(parts) < 5 or 'x' not in parts[1]:
                continue
            path = parts[5].strip() if len(parts) > 5 else ''
            start, end = (int(x, 16) for x in parts[0].split('-'))
            key = (parts[0], parts[1], parts[2], path)
            try:
                mem.seek(start)
                result[key] = mem.read(end - start)
            except OSError as e:
                result[key] = 'unreadable: %s' % e.strerror
            except OverflowError:    # [vsyscall], above the signed offsets
                result[key] = 'unreadable: offset'
    return result


def _file_and_own_byte(path, file_offset):
    """The byte at file_offset of path in the file, and in this test's own
    mapping of it (None where it cannot be read or is not mapped)."""
    file_byte = own = None
    try:
        with open(path, 'rb') as f:
            f.seek(file_offset)
            b = f.read(1)
            file_byte = b[0] if b else None
        with open('/proc/self/maps') as f:
            maps = f.read().splitlines()
        for line in maps:
            parts = line.split(None, 5)
            if len(parts) < 6 or parts[5].strip() != path:
                continue
            lo, hi = (int(x, 16) for x in parts[0].split('-'))
            off = int(parts[2], 16)
            if off <= file_offset < off + (hi - lo):
                with open('/proc/self/mem', 'rb', buffering=0) as mem:
                    mem.seek(lo + file_offset - off)
                    b = mem.read(1)
                    own = b[0] if b else None
                break
    except OSError:
        pass
    return file_byte, own


def foreign_int3(path, file_offset):
    """Whether an int3 (0xcc) at file_offset of path, where the file has
    another byte, is in this test's own copy of the file too: the kernel's,
    for another session (one whose probes are on the file for every
    process: -f on a kernel without uprobe_multi), not ptwatch's."""
    file_byte, own = _file_and_own_byte(path, file_offset)
    return file_byte is not None and file_byte != 0xcc and own == 0xcc


def foreign_int3_gone(path, file_offset, now):
    """Whether a byte that was an int3 and is now the file's (now) was
    another session's int3, gone since from every process: this test's own
    copy has the file's byte too. (An int3 of another tool that ptwatch
    took away from its target alone stays in this test's copy.)"""
    file_byte, own = _file_and_own_byte(path, file_offset)
    return file_byte is not None and now == file_byte and own == file_byte


def compare_mappings(chk, before, after, what, limit=8):
    """Same executable mappings, same bytes: no page left mapped, no byte
    (an int3 0xcc) left patched."""
    if before is None or after is None:
        return chk.fail('%s: cannot compare the executable mappings: the process is gone' % what)
    added = sorted(set(after) - set(before))
    removed = sorted(set(before) - set(after))
    # the kernel's own page for the instructions its uprobes step
    # out of line: mapped at a process's first uprobe hit, for its
    # life (nothing of ptwatch's; it holds no breakpoint). On the
    # ptrace path: another session's uprobes (issue 31: a kernel path
    # -f session elsewhere in the suite probes every process).
    xol = [k for k in added if k[3] == '[uprobes]']
    if xol:
        print('note: %s: the kernel\'s [uprobes] page stays mapped (%s)'
              % (what, ' '.join(xol[0])))
    added = [k for k in added if k[3] != '[uprobes]']
    chk.eq('%s: executable mappings added' % what, [' '.join(k) for k in added], [])
    chk.eq('%s: executable mappings removed' % what, [' '.join(k) for k in removed], [])
    for key in added:
        data = after[key]
        if not isinstance(data, str):
            used = data.rstrip(b'\0')
            print('      added mapping %s: %d bytes used, starts with %s'
                  % (' '.join(key), len(used), data[:32].hex(' ')))
    for key in sorted(set(before) & set(after)):
        b, a = before[key], after[key]
        if b == a:
            continue
        if isinstance(a, str) or isinstance(b, str):
            chk.fail('%s: mapping %s: before %s, after %s'
                     % (what, ' '.join(key), b if isinstance(b, str) else 'read',
                        a if isinstance(a, str) else 'read'))
            continue
        start = int(key[0].split('-')[0], 16)
        diffs = [i for i in range(min(len(a), len(b))) if a[i] != b[i]]
        offset = int(key[2], 16)
        theirs = [i for i in diffs if a[i] == 0xcc and foreign_int3(key[3], offset + i)]
        gone = [i for i in diffs if b[i] == 0xcc and a[i] != 0xcc
                and foreign_int3_gone(key[3], offset + i, a[i])]
        if theirs:
            print('note: %s: %s: the int3 at %s is also in this test\'s own copy of the '
                  'file: another session\'s kernel uprobe, not ptwatch\'s'
                  % (what, key[3], ', '.join('%#x' % (start + i) for i in theirs)))
        if gone:
            print('note: %s: %s: the int3 at %s, there before, is gone from this test\'s '
                  'own copy of the file too: another session\'s kernel uprobe, removed'
                  % (what, key[3], ', '.join('%#x' % (start + i) for i in gone)))
        theirs = set(theirs + gone)
        diffs = [i for i in diffs if i not in theirs]
        if not diffs:
            continue
        int3 = sum(1 for i in diffs if a[i] == 0xcc)
        chk.fail('%s: %d bytes of %s changed (%d of them now 0xcc): %s'
                 % (what, len(diffs), ' '.join(key), int3,
                    ', '.join('%#x: %#04x -> %#04x' % (start + i, b[i], a[i])
                              for i in diffs[:limit])))


def check_untouched(chk, pid, what, stopped=False, allowed='SR'):
    """The process lives on as before: not traced, running (each thread in
    one of the states `allowed`), or still stopped (T) when stopped is set."""
    states = task_states(pid)
    if not chk.true('%s: process %d is alive' % (what, pid), bool(states)):
        return
    chk.eq('%s: process %d, threads with a tracer {tid: TracerPid}' % (what, pid),
           tracer_pids(pid), {})
    if stopped:
        allowed = 'T'
    # (a thread on its way out, X or Z, is not one left behind: a churning
    # process has one now and then; kill9-front@kernel met an X)
    bad = {tid: st for tid, st in states.items()
           if st not in allowed and not (st in 'XZ' and tid != pid)}
    chk.eq('%s: process %d, threads not in state %s' % (what, pid, '/'.join(allowed)), bad, {})


def attach_stderr_lines(run):
    return [line for line in run.stderr_text().splitlines() if line.strip()]


def check_attach_doc(chk, run, pid, end_reason, what=None):
    """The common part of an attach document: mode, pid, exit null (the
    target lives on), end_reason, frozen_ns."""
    what = what or 'ptwatch -p %d' % pid
    doc = run.doc
    chk.eq('%s: exit status' % what, run.returncode, 0)
    chk.eq('%s: target.mode' % what, doc['target']['mode'], 'attach')
    chk.eq('%s: target.pid' % what, doc['target']['pid'], pid)
    chk.eq('%s: target.exit (detached, the target lives on)' % what, doc['target']['exit'], None)
    chk.eq('%s: session.end_reason' % what, doc['session']['end_reason'], end_reason)
    frozen = doc['session'].get('frozen_ns')
    chk.true('%s: session.frozen_ns reported (got %r)' % (what, frozen),
             isinstance(frozen, int) and frozen >= 0)
    return frozen


def warning_codes(doc):
    return [w['code'] for w in doc.get('warnings', [])]


# ---------------------------------------------------------------------------
# the registry of cases and the entry point

# name -> function(session, chk, *args): filled by @case in the family
# modules (tests/integration/cases/*.py), which run.py imports.
CASES = {}
# meson test name -> Test: filled by the @test lines above each @case; the
# one list of the integration tests (tests/integration/meson.build asks
# run.py --meson for it), with where each runs.
TESTS = {}

# Why a case has no kernel twin, where several share the reason (@test kernel=).
WHY_RESTORER = ('the restorer puts back the bytes ptrace patched and lets go of threads held in its stops; the kernel path patches and holds nothing (its kill -9 cases: kill9-front@kernel, kernel-kill9-everything)')
WHY_LATE_PROBES = ("a library's or an exec'd image's first calls come before the kernel path's probes for them (issue 31)")
WHY_WEDGED = ("wedges the tracer while it holds the target's threads in ptrace stops; the kernel path holds none (its stuck outputs: json-lines-sigpipe@kernel, live-stuck@kernel)")


class Test:
    """One meson test of a case: its name, the case's arguments, its
    timeout (seconds), whether it runs again on the kernel path as
    NAME@kernel (kernel: True) or why not (kernel: the reason), whether it
    runs once more in a PID namespace without tracefs (ns: NAME@kernel-ns,
    tests/kernel/isolated.sh), whether it is started first (first: a
    long one), and whether it runs alone and last (alone: it changes what
    every process on the machine sees, as another tool's file-wide uprobes
    do, and the kernel may keep those uprobes after it: docs/design.md,
    Facts, 15)."""

    def __init__(self, name, case, args, timeout, kernel, ns, first, alone=False):
        self.name, self.case, self.args = name, case, list(args)
        self.timeout, self.kernel, self.ns, self.first = timeout, kernel, ns, first
        self.alone = alone


def test(name, *args, timeout=60, kernel, ns=False, first=False, alone=False):
    """Declares the meson test `name` of the case below it: run.py CASE
    ARGS. kernel is required, so that no case can forget where it runs:
    True for a twin on the kernel path, or a sentence saying why the case
    does not hold there (what only ptrace does, what the kernel path does
    not do yet: then an issue or docs/design.md says so)."""
    if kernel is not True and (not isinstance(kernel, str) or len(kernel) < 10):
        raise FrameworkError('test %s: kernel= must be True or a reason, not %r' % (name, kernel))
    if ns and kernel is not True:
        raise FrameworkError('test %s: ns= runs the kernel twin: it needs kernel=True' % name)

    def declare(fn):
        # (applied after @case, below it: the case's name is known)
        case_name = getattr(fn, 'ptw_case', None)
        if case_name is None:
            raise FrameworkError('test %s: @test goes above @case' % name)
        if name in TESTS:
            raise FrameworkError('test %s declared twice (cases %s and %s)'
                                 % (name, TESTS[name].case, case_name))
        TESTS[name] = Test(name, case_name, args, timeout, kernel, ns, first, alone)
        return fn
    return declare


def case(name):
    """Registers the decorated function as case `name` (run.py NAME ARGS...),
    with the meson tests its @test lines declare (at least one)."""
    def register(fn):
        if name in CASES:
            raise FrameworkError('case %s registered twice (%s and %s)'
                                 % (name, CASES[name].__module__, fn.__module__))
        CASES[name] = fn
        fn.ptw_case = name
        return fn
    return register


def meson_lines():
    """The tests for tests/integration/meson.build, one per line: name,
    case, arguments (space-separated), timeout, kernel twin (1/0), in a
    namespace too (1/0), first (1/0), alone (1/0), tab-separated."""
    idle = sorted(set(CASES) - {t.case for t in TESTS.values()})
    if idle:
        raise FrameworkError('cases that declare no @test: %s' % ', '.join(idle))
    out = []
    for t in sorted(TESTS.values(), key=lambda t: t.name):
        for a in t.args:
            if not a or any(c.isspace() for c in a):
                raise FrameworkError('test %s: argument %r cannot be passed to meson' % (t.name, a))
        out.append('\t'.join([t.name, t.case, ' '.join(t.args), str(t.timeout),
                              '1' if t.kernel is True else '0', '1' if t.ns else '0',
                              '1' if t.first else '0', '1' if t.alone else '0']))
    return out


def main(cases, argv=None):
    """Runs the case named by argv[1]; exits 0/1/77/99."""
    argv = sys.argv if argv is None else argv
    if len(argv) < 2 or argv[1] not in cases:
        print('usage: %s CASE\ncases: %s' % (argv[0], ' '.join(sorted(cases))))
        sys.exit(ERROR)
    name = argv[1]
    session = Session(name)
    chk = Check(name)
    code = ERROR
    try:
        check_backend_runs()
        cases[name](session, chk, *argv[2:])
        code = PASS if chk.ok() else FAIL
    except Skip as e:
        # failures win over a skip: a check that failed before the case
        # found it could not go on is still a failure
        print('SKIP: %s' % e)
        code = FAIL if chk.failures else SKIP
        if chk.failures:
            print('(%d check(s) failed before the skip: the case fails)' % len(chk.failures))
    except Failed as e:
        chk.failures.append(str(e))
        print('FAIL: %s' % e)
        code = FAIL
    except FrameworkError as e:
        print('ERROR (framework): %s' % e)
        code = ERROR
    except Exception:
        traceback.print_exc()
        code = ERROR
    if code == FAIL:
        for run in session.runs:
            print('--- run: %s' % run.describe())
            if run.stderr:
                print('stderr (tail):\n%s' % tail(run.stderr_text(), 25))
        for target in session.targets:
            target.poll()
            print('--- target: %s' % target.describe())
            if target.stderr_text():
                print('stderr (tail):\n%s' % tail(target.stderr_text(), 10))
        print('%s: %d failure(s)' % (name, len(chk.failures)))
    elif code == PASS:
        print('%s: ok' % name)
    session.cleanup(keep=code in (FAIL, ERROR))
    sys.stdout.flush()
    sys.exit(code)


class Tmux:
    """A real terminal: a tmux server of the case's own (its socket in a
    temporary directory) with one window of width x height running a shell
    (sh, prompt "$ ", or "# " as root). What the terminal shows is read with capture-pane;
    keys are typed with send-keys. Nothing here sleeps to synchronise:
    expect() polls the screen until what it waits for shows (bounded)."""

    def __init__(self, session, width=120, height=30, env=None):
        self.tmux = shutil.which('tmux')
        if not self.tmux:
            raise FrameworkError('tmux is missing (scripts/deps.sh installs it)')
        self.dir = session.mkdtemp()
        self.sock = os.path.join(self.dir, 'tmux.sock')
        full_env = dict(os.environ)
        full_env.update({'PS1': '$ ', 'ENV': '', 'HOME': self.dir})
        full_env.pop('TMUX', None)
        full_env.update(env or {})
        self.env = full_env
        self.cmd('new-session', '-d', '-s', 'ptw', '-x', str(width), '-y', str(height),
                 '-c', self.dir, '/bin/sh')
        try:
            self.expect(r'^[$#](\s|$)', 10, 'the shell prompt')
        except BaseException:
            self.close()
            raise

    def cmd(self, *args):
        r = subprocess.run([self.tmux, '-S', self.sock, '-f', '/dev/null'] + list(args),
                           env=self.env, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                           stderr=subprocess.PIPE, timeout=20)
        if r.returncode:
            raise FrameworkError('tmux %s: %s' % (' '.join(args), r.stderr.decode().strip()))
        return r.stdout.decode('utf-8', 'replace')

    def screen(self, attributes=False):
        """The lines the terminal shows now (with attributes: with their
        SGR escape sequences, capture-pane -e)."""
        return self.cmd('capture-pane', '-p', '-t', 'ptw', *(['-e'] if attributes else []))

    def size(self):
        w, h = self.cmd('display-message', '-p', '-t', 'ptw',
                        '#{pane_width} #{pane_height}').split()
        return int(w), int(h)

    def keys(self, *keys):
        """send-keys: key names (Tab, C-c, Escape, Enter) or literal text."""
        self.cmd('send-keys', '-t', 'ptw', *keys)

    def type(self, text):
        self.cmd('send-keys', '-t', 'ptw', '-l', text)

    def line(self, command):
        """Types a shell command line and Enter."""
        self.type(command)
        self.keys('Enter')

    def resize(self, width, height):
        self.cmd('resize-window', '-t', 'ptw', '-x', str(width), '-y', str(height))

    def expect(self, cond, timeout=20, what=None):
        """Waits until the screen shows a match of regex cond (or cond(screen)
        is true); returns the match (or cond's value)."""
        deadline = time.monotonic() + timeout
        while True:
            text = self.screen()
            got = re.search(cond, text, re.M) if isinstance(cond, str) else cond(text)
            if got:
                return got
            if time.monotonic() >= deadline:
                raise Failed('the terminal did not show %s within %d s; it shows:\n%s'
                             % (what or repr(cond), timeout, text.rstrip()))
            time.sleep(0.05)

    def changes(self, screen, seconds, step=0.05):
        """Watches the screen for `seconds` (an observation, not a wait for
        an order): the first screen that differs from `screen`, or None if
        it stayed the same all along."""
        deadline = time.monotonic() + seconds
        while True:
            text = self.screen()
            if text != screen:
                return text
            if time.monotonic() >= deadline:
                return None
            time.sleep(step)

    def close(self):
        try:
            self.cmd('kill-server')
        except (FrameworkError, subprocess.TimeoutExpired):
            pass
