#!/usr/bin/python3
"""Helpers for ptwatch's integration tests.

Runs ptwatch on a fixture with a fresh truth file in a temporary directory,
loads and validates the JSON document against spec/spans.schema.json, loads
the fixture's ground truth (JSON lines, see tests/fixtures/truth.h), matches
spans to truth records by (tid, pthread) and compares them, collecting every
mismatch with the span it concerns.

Configuration comes from the environment (set by meson.build):
  PTWATCH          the ptwatch binary
  PTW_FIX_<name>   the path of fixture <name>
  PTW_FIXTURE_SRC  tests/fixtures in the source tree (to find routine lines)
  PTW_SCHEMA       spans.schema.json
  PTW_TMPDIR       where the runs' directories go (kept when a case fails)

Exit codes: 0 pass, 1 failure, 77 skip, 99 framework error.
"""

import json
import os
import re
import resource
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

    def mkdtemp(self):
        base = os.environ.get('PTW_TMPDIR') or None
        if base:
            os.makedirs(base, exist_ok=True)
        d = tempfile.mkdtemp(prefix='ptw-%s-' % self.case, dir=base)
        self.dirs.append(d)
        return d

    def cleanup(self, keep):
        if keep:
            for d in self.dirs:
                print('kept %s' % d)
            return
        for d in self.dirs:
            shutil.rmtree(d, ignore_errors=True)

    # ---- running

    def argv(self, run, cmd, opts=(), output='file'):
        argv = [ptwatch_path()] + list(opts)
        if output == 'file':
            argv += ['-o', run.doc_path]
        elif output == 'stdout':
            argv += ['--json']
        argv += ['--'] + list(cmd)
        return argv

    def env(self, run, extra=None):
        env = dict(os.environ)
        env['PTWATCH_TRUTH'] = run.truth_path
        env.pop('PTWATCH_NO_DEBUG_FILES', None)
        if extra:
            env.update(extra)
        return env

    def start(self, cmd, opts=(), output='file', env=None, pass_fds=()):
        """Starts ptwatch in a session of its own; returns (run, Popen).

        stdout and stderr go to files in the run's directory, not pipes: the
        target inherits them and may outlive ptwatch (interrupt), and a
        pipe would then keep a reader waiting for its end."""
        run = Run(self.mkdtemp(), [])
        run.argv = self.argv(run, cmd, opts, output)
        self.runs.append(run)
        run.t0 = time.monotonic()
        with open(os.path.join(run.tmpdir, 'stdout'), 'wb') as out, \
                open(os.path.join(run.tmpdir, 'stderr'), 'wb') as err:
            proc = subprocess.Popen(run.argv, env=self.env(run, env), pass_fds=pass_fds,
                                    stdin=subprocess.DEVNULL, stdout=out, stderr=err,
                                    cwd=run.tmpdir, start_new_session=True, preexec_fn=no_core)
        return run, proc

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
        if span['spawn_latency_ns'] is not None:
            chk.eq('%s: spawn_latency_ns == start_ns - create_ns' % what,
                   span['spawn_latency_ns'], s - c, span)
        chk.eq('%s: lifetime_ns == end_ns - start_ns' % what, span['lifetime_ns'], e - s, span)


def check_location(chk, loc, what, span, symbol, source=None, line=None, addr=None,
                   module=None):
    if not chk.true('%s is known' % what, loc is not None, span):
        return
    chk.eq('%s.symbol' % what, loc['symbol'], symbol, span)
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

    def __init__(self, chk, run, source, stripped=False, records=None, main_spans=None):
        """records: the truth records to use (default: all of run's);
        main_spans: {tid: span} for main records, instead of looking the
        main span up by tid (after an exec, two main spans share a tid)."""
        self.chk = chk
        self.run = run
        self.doc = run.doc
        self.source = source
        self.stripped = stripped
        records = run.truth if records is None else records
        self.threads = [r for r in records if r.get('kind') == 'thread']
        self.mains = [r for r in records if r.get('kind') == 'main']
        self.main_spans = main_spans or {}
        self.joins = {}
        for j in (r for r in records if r.get('kind') == 'join'):
            if j['tid'] in self.joins:
                raise FrameworkError('two join records for tid %s' % j['tid'])
            self.joins[j['tid']] = j
        self.span_of = {}    # tid -> span (unique tids within these fixtures)
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
            self.depth_of[m['tid']] = 0
        for t in self.threads:
            if t['tid'] in self.span_of:
                raise FrameworkError('truth: tid %s appears twice' % t['tid'])
            span = find_span(chk, doc, t['tid'], t['pthread'],
                             'thread %s (%s)' % (t['tid'], t['routine']), index=index)
            if span:
                self.span_of[t['tid']] = span
        by_tid = {t['tid']: t for t in self.threads}

        def depth(tid, seen=()):
            if tid in self.depth_of:
                return self.depth_of[tid]
            if tid in seen or tid not in by_tid:
                raise FrameworkError('truth: creator chain of %s is broken' % tid)
            d = depth(by_tid[tid]['creator'], seen + (tid,)) + 1
            self.depth_of[tid] = d
            return d
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
            if not self.stripped:
                check_location(chk, sr, '%s: start_routine' % what, span, 'main',
                               self.source, routine_line(self.source, 'main'))
        if m.get('name'):
            chk.eq('%s: name' % what, span['name'], m['name'], span)
        if m['end'] in END_STATES:
            status, method = END_STATES[m['end']]
            chk.eq('%s: status' % what, span['status'], status, span)
            end = span['end'] or {}
            chk.eq('%s: end.method' % what, end.get('method'), method, span)
            chk.eq('%s: end.value' % what, end.get('value'), m['value'], span)
            check_order(chk, span, what)
            chk.eq('%s: join' % what, span['join'], None, span)

    def check_thread(self, t, expect_end=True):
        """Compares the span of thread record t with it."""
        chk = self.chk
        span = self.span_of.get(t['tid'])
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
        else:
            check_location(chk, cs, '%s: create_site' % what, span, t['create_fn'], self.source)
        chk.eq('%s: depth' % what, span['depth'], self.depth_of.get(t['tid']), span)
        chk.eq('%s: detached' % what, span['detached'], t['detached'], span)
        if t.get('name'):
            chk.eq('%s: name' % what, span['name'], t['name'], span)
        if expect_end and t['end'] in END_STATES:
            status, method = END_STATES[t['end']]
            chk.eq('%s: status' % what, span['status'], status, span)
            end = span['end'] or {}
            chk.eq('%s: end.method' % what, end.get('method'), method, span)
            chk.eq('%s: end.value' % what, end.get('value'), t['value'], span)
            check_order(chk, span, what)
            self.check_join(t, span, what)

    def check_join(self, t, span, what):
        chk = self.chk
        j = self.joins.get(t['tid'])
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
        known = {id(s) for s in self.span_of.values()} | {id(s) for s in allowed}
        for s in thread_spans(self.doc):
            if id(s) not in known:
                self.chk.fail('unexpected span %s: no truth record has it' % span_label(s), s)

    def unjoined_expected(self):
        return sum(1 for t in self.threads
                   if t['detached'] is False and t['tid'] not in self.joins)

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
# entry point

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
        cases[name](session, chk, *argv[2:])
        code = PASS if chk.ok() else FAIL
    except Skip as e:
        print('SKIP: %s' % e)
        code = SKIP
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
        print('%s: %d failure(s)' % (name, len(chk.failures)))
    elif code == PASS:
        print('%s: ok' % name)
    session.cleanup(keep=code in (FAIL, ERROR))
    sys.stdout.flush()
    sys.exit(code)
