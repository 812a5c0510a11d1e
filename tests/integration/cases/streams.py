# SPDX-License-Identifier: MIT
"""Issue 10's cases (streams, reports, Chrome traces, the log's filters):
--json-lines, ptwatch report, --format=chrome, -e, --tid, --routine, -v,
and memory that stays bounded while threads come and go."""

import json
import os
import re
import select
import shutil
import signal
import subprocess
import sys
import time

from ptw_test import test
from ptw_test import (
    Failed, FrameworkError, backend, case, check_untouched, child_pids, comm, env_path, fixture, kill_group,
    load_truth, one_truth, ptwatch_path, tail, truth_of, validate, wait_for)
from helpers import read_line, run_ptwatch, wait_progress, wait_untraced, wait_watched
from cases.launch import check_lifecycle
from cases.locks import check_contended_waits, contend_rounds

LINE_TYPES = ('header', 'span_open', 'span', 'frame', 'open', 'wait', 'deadlock', 'warning', 'metrics')


# ---------------------------------------------------------------------------
# helpers

_lines_validator = None


def self_contained(lines, spans):
    """lines.schema.json with the parts of spans.schema.json it refers to
    copied in (Debian's jsonschema resolves refs across files poorly)."""
    prefix = spans['$id'] + '#'

    def rewrite(node, inside_spans):
        if isinstance(node, dict):
            ref = node.get('$ref')
            if ref is not None and (ref.startswith(prefix) or (inside_spans and ref.startswith('#'))):
                path = ref[len(prefix):] if ref.startswith(prefix) else ref[1:]
                parts = [p for p in path.split('/') if p]
                if parts[0] == '$defs':
                    return dict(node, **{'$ref': '#/$defs/spans_' + parts[1]})
                target = spans
                for p in parts:
                    target = target[p]
                return rewrite(target, True)
            return {k: rewrite(v, inside_spans) for k, v in node.items()}
        if isinstance(node, list):
            return [rewrite(v, inside_spans) for v in node]
        return node

    out = rewrite(lines, False)
    for name, sub in spans['$defs'].items():
        out['$defs']['spans_' + name] = rewrite(sub, True)
    return out


def lines_validator():
    global _lines_validator
    if _lines_validator is None:
        import jsonschema
        with open(env_path('PTW_SCHEMA')) as f:
            spans = json.load(f)
        with open(os.path.join(os.path.dirname(env_path('PTW_SCHEMA')), 'lines.schema.json')) as f:
            lines = json.load(f)
        jsonschema.Draft202012Validator.check_schema(lines)
        _lines_validator = jsonschema.Draft202012Validator(self_contained(lines, spans))
    return _lines_validator


def parse_lines(chk, data, what, complete=True):
    """The stream's objects, each checked against lines.schema.json, one
    object per line, as `jq -c` reads them."""
    text = data.decode('utf-8')
    objs = []
    lines = text.split('\n')
    if lines and lines[-1] == '':
        lines.pop()
    elif complete:
        chk.fail('%s: the stream ends with a newline' % what)
    for i, line in enumerate(lines):
        try:
            obj = json.loads(line)
        except ValueError as e:
            if not complete and i == len(lines) - 1:
                break  # cut mid-line by a kill
            raise Failed('%s: line %d is not JSON (%s): %r' % (what, i + 1, e, line[:200]))
        errors = list(lines_validator().iter_errors(obj))
        if errors:
            raise Failed('%s: line %d (%s) does not match lines.schema.json: %s'
                         % (what, i + 1, obj.get('type'), errors[0].message[:300]))
        objs.append(obj)
    if not objs or objs[0]['type'] != 'header':
        raise Failed('%s: the first line is not the header' % what)
    if complete:
        chk.eq('%s: the last line is the metrics' % what, objs[-1]['type'], 'metrics')
        chk.eq('%s: one metrics line' % what, sum(o['type'] == 'metrics' for o in objs), 1)
    if shutil.which('jq'):
        p = subprocess.run(['jq', '-c', '.type'], input=data, stdout=subprocess.PIPE,
                           stderr=subprocess.PIPE)
        if complete:
            chk.eq('%s: jq -c reads every line (%s)' % (what, p.stderr[:200]), p.returncode, 0)
            chk.eq('%s: jq -c finds as many objects' % what,
                   len(p.stdout.decode().split('\n')) - 1, len(objs))
    return objs


def doc_from_lines(objs):
    """The spans document the stream amounts to (what `report --format=json` makes)."""
    header, last = objs[0], objs[-1]
    spans = {}
    for o in objs:
        if o['type'] == 'span' and o['span']['id'] not in spans:
            spans[o['span']['id']] = o['span']
    frames = [o['frame'] for o in objs if o['type'] == 'frame']
    return {'schema': 'ptwatch.spans/11', 'tool': header['tool'], 'clock': header['clock'],
            'target': last['target'], 'session': last['session'],
            'spans': [spans[k] for k in sorted(spans)] + sorted(frames, key=lambda f: f['id']),
            'metrics': dict(last['metrics'], active_series=[]),
            'warnings': last['warnings']}


def check_summary_threads(chk, summary, threads, what):
    """A summary, not an empty string: its first line counts the threads
    the fixture's truth has."""
    chk.true('%s: "ptwatch: %d threads" first (%r)' % (what, threads, summary[:100]),
             summary.startswith('\nptwatch: %d threads ' % threads))


def summary_of(stderr):
    """The summary a live run printed at its end (after the event lines)."""
    text = stderr.decode('utf-8', 'replace')
    at = text.rfind('\nptwatch: ')
    return text[at:] if at >= 0 else ''


# ---------------------------------------------------------------------------
# --json-lines on the lifecycle fixture: schema, content, the report

@test('json-lines', kernel=True, ns=True)
@case('json-lines')
def case_json_lines(session, chk):
    exe = fixture('lifecycle')
    run, proc = session.start([exe], opts=['--json-lines', '-o', 'stream.jsonl'], output=None)
    session.wait(run, proc, 60)
    path = os.path.join(run.tmpdir, 'stream.jsonl')
    with open(path, 'rb') as f:
        data = f.read()
    objs = parse_lines(chk, data, 'stream')
    kinds = [o['type'] for o in objs]
    print('line kinds: %s' % {k: kinds.count(k) for k in LINE_TYPES})
    opened = [o['span']['id'] for o in objs if o['type'] == 'span_open']
    ended = [o['span']['id'] for o in objs if o['type'] == 'span']
    chk.eq('a span_open line per span', sorted(opened), list(range(1, len(opened) + 1)))
    chk.eq('a span line per span, once', sorted(ended), sorted(opened))
    for o in objs:
        if o['type'] == 'span_open':
            chk.eq('span_open %d: open' % o['span']['id'], o['span']['status'], 'open')
    # each span line comes after its span_open line
    first = {}
    for i, o in enumerate(objs):
        if o['type'] in ('span_open', 'span'):
            first.setdefault((o['type'], o['span']['id']), i)
    for sid in ended:
        chk.true('span %d: its end after its beginning' % sid,
                 first[('span', sid)] > first[('span_open', sid)])
    # the same spans as a document run would give: the fixture's truth
    load_truth(run)
    run.doc = doc_from_lines(objs)
    validate(run.doc, run)
    check_lifecycle(chk, run)
    chk.true('event lines on stderr as without --json-lines', 'create' in run.stderr_text())
    # the report re-renders the live summary, line for line
    live = summary_of(run.stderr)
    check_summary_threads(chk, live, len([r for r in run.truth
                                          if r.get('kind') in ('thread', 'main')]),
                          'the live summary')
    rep = run_ptwatch(['report', path])
    chk.eq('report: exit status (%s)' % rep.stderr[:300], rep.returncode, 0)
    chk.eq('report of the stream = the live summary', rep.stdout.decode(), live)
    # and makes a document of it, which validates
    rep = run_ptwatch(['report', '--format=json', path, '-o', os.path.join(run.tmpdir, 'd.json')])
    chk.eq('report --format=json: exit status', rep.returncode, 0)
    with open(os.path.join(run.tmpdir, 'd.json')) as f:
        doc = json.load(f)
    validate(doc, run)
    chk.eq('report --format=json: the spans', [s['id'] for s in doc['spans']],
           [s['id'] for s in run.doc['spans']])


@test('report-document', kernel=True)
@case('report-document')
def case_report_document(session, chk):
    """A saved document: report prints the live summary again."""
    exe = fixture('lifecycle')
    run = session.run([exe], opts=())
    check_lifecycle(chk, run)
    live = summary_of(run.stderr)
    chk.true('a summary on stderr', live.startswith('\nptwatch: '))
    rep = run_ptwatch(['report', run.doc_path])
    chk.eq('report: exit status (%s)' % rep.stderr[:300], rep.returncode, 0)
    if rep.stdout.decode() != live:
        print('live:\n%s\nreport:\n%s' % (live, rep.stdout.decode()))
    chk.eq('report of the document = the live summary', rep.stdout.decode(), live)
    # the same from standard input
    with open(run.doc_path, 'rb') as f:
        rep = run_ptwatch(['report', '-'], stdin=f)
    chk.eq('report - (stdin) = the live summary', rep.stdout.decode(), live)
    # filters: --tid and --routine select spans
    spans = [s for s in run.doc['spans'] if s['kind'] == 'thread']
    cancel = [s for s in spans if s['start_routine'] and
              s['start_routine']['symbol'] == 'cancel_worker']
    rep = run_ptwatch(['report', '--routine=cancel_*', run.doc_path])
    rows = [ln for ln in rep.stdout.decode().splitlines() if re.match(r'^\s+\d+\s+\d+\s', ln)]
    chk.eq('--routine=cancel_*: one row', len(rows), 1)
    chk.true('--routine=cancel_*: the cancel_worker row (%r)' % rows,
             rows and 'cancel_worker' in rows[0] and str(cancel[0]['tid']) in rows[0])
    tids = '%d,%d' % (spans[0]['tid'], spans[1]['tid'])
    rep = run_ptwatch(['report', '--tid=' + tids, run.doc_path])
    rows = [ln.split()[1] for ln in rep.stdout.decode().splitlines()
            if re.match(r'^\s+\d+\s+\d+\s', ln)]
    chk.eq('--tid=%s: those rows' % tids, rows, [str(spans[0]['tid']), str(spans[1]['tid'])])
    chk.true('--tid: "2 threads"', 'ptwatch: 2 threads' in rep.stdout.decode())


@test('report-snapshot', kernel=True)
@case('report-snapshot')
def case_report_snapshot(session, chk):
    """--snapshot -o FILE: report FILE prints what the snapshot printed."""
    target = session.target('deadlock')
    pid = target.ready()[0]
    run = session.attach(pid, opts=('--snapshot',))
    live = run.stdout.decode()
    chk.true('the snapshot names a deadlock', 'DEADLOCK' in live)
    rep = run_ptwatch(['report', run.doc_path])
    chk.eq('report: exit status', rep.returncode, 0)
    if rep.stdout.decode() != live:
        print('live:\n%s\nreport:\n%s' % (live, rep.stdout.decode()))
    chk.eq('report of the snapshot = what it printed', rep.stdout.decode(), live)


@test('report-errors', timeout=120, kernel=True)
@case('report-errors')
def case_report_errors(session, chk):
    """Bad input: one line naming the file and the cause, exit status 1 (2
    for usage), never a crash; another schema version is named."""
    d = session.mkdtemp()
    exe = fixture('lifecycle')
    run = session.run([exe], opts=['-q'])
    with open(run.doc_path, 'rb') as f:
        good = f.read()

    def write(name, data):
        p = os.path.join(d, name)
        with open(p, 'wb') as f:
            f.write(data)
        return p

    cases = [
        ('old schema', write('old.json', good.replace(b'"ptwatch.spans/11"', b'"ptwatch.spans/2"')),
         'schema ptwatch.spans/2 is not supported'),
        ('newer schema', write('new.json', good.replace(b'"ptwatch.spans/11"', b'"ptwatch.spans/12"')),
         'schema ptwatch.spans/12 is not supported'),
        ('not ptwatch', write('other.json', b'{"traceEvents": []}\n'),
         'not a ptwatch spans document'),
        ('empty', write('empty.json', b''), 'unexpected end'),
        ('garbage', write('garbage', bytes(range(256)) * 4), 'line 1'),
        ('truncated document', write('cut.json', good[:len(good) // 2]), 'line '),
        ('missing file', os.path.join(d, 'nonexistent.json'), 'cannot open'),
        ('a directory', d, 'cannot read'),
    ]
    for what, path, words in cases:
        p = run_ptwatch(['report', path])
        err = p.stderr.decode('utf-8', 'replace')
        chk.eq('%s: exit status (%r)' % (what, err), p.returncode, 1)
        chk.true('%s: one line saying %r (%r)' % (what, words, err),
                 err.count('\n') == 1 and words in err and err.startswith('ptwatch: '))
        chk.eq('%s: nothing on stdout' % what, p.stdout, b'')
    # every prefix of a stream: a clear error or a report of what is there
    lrun, proc = session.start([exe], opts=['-q', '--json-lines', '-o', 's.jsonl'], output=None)
    session.wait(lrun, proc, 60)
    with open(os.path.join(lrun.tmpdir, 's.jsonl'), 'rb') as f:
        stream = f.read()
    crashes = []
    for cut in range(0, len(stream), max(1, len(stream) // 97)):
        p = run_ptwatch(['report', write('cut.jsonl', stream[:cut])])
        if p.returncode not in (0, 1) or (p.returncode == 1 and p.stderr.count(b'\n') != 1):
            crashes.append((cut, p.returncode, p.stderr[:200]))
    chk.eq('cut streams: exit 0 or 1 with one line', crashes, [])
    p = run_ptwatch(['report', write('cut.jsonl', stream[:stream.index(b'\n', 2000) + 1])])
    chk.eq('a stream cut between lines: reported', p.returncode, 0)
    chk.true('... with a warning that it was cut (%r)' % p.stdout[-300:],
             b'the stream ends before its last line' in p.stdout)
    for argv, words in ((['report'], 'report needs one FILE'),
                        (['report', '--format=json-lines', 'x'], 'report writes'),
                        (['report', '--format=svg', 'x'], "unknown format 'svg'")):
        p = run_ptwatch(argv)
        chk.eq('%s: exit status 2' % argv, p.returncode, 2)
        chk.true('%s: says %r (%r)' % (argv, words, p.stderr), words.encode() in p.stderr)


# ---------------------------------------------------------------------------
# a closed pipe: ptwatch --json-lines -- app | head -3

@test('json-lines-sigpipe', 'launch', kernel=True)
@test('json-lines-sigpipe-attach', 'attach', kernel=True)
@case('json-lines-sigpipe')
def case_json_lines_sigpipe(session, chk, mode='launch'):
    if mode == 'attach':
        target = session.target('churner')
        pid = target.ready()[0]
        argv = [ptwatch_path(), '--json-lines', '-q', '-p', str(pid)]
    else:
        ctl_r, ctl_w = os.pipe()
        rep_r, rep_w = os.pipe()
        argv = [ptwatch_path(), '--json-lines', '-q', '--', fixture('idle'), '8']
    d = session.mkdtemp()
    truth = os.path.join(d, 'truth.jsonl')
    env = dict(os.environ, PTWATCH_TRUTH=truth)
    out_r, out_w = os.pipe()
    kw = {}
    if mode == 'launch':
        env.update(PTW_CTL_FD=str(ctl_r), PTW_REPLY_FD=str(rep_w))
        kw['pass_fds'] = (ctl_r, rep_w)
    with open(os.path.join(d, 'stderr'), 'wb') as err:
        proc = subprocess.Popen(argv, stdout=out_w, stderr=err, stdin=subprocess.DEVNULL, env=env,
                                start_new_session=True, cwd=d, **kw)
    os.close(out_w)
    if mode == 'launch':
        os.close(ctl_r)
        os.close(rep_w)
    try:
        if mode == 'launch':
            pid = int(read_line(rep_r, 30, 'ready').split()[1])
        # head -3: three lines, then the pipe closes
        got = b''
        deadline = time.monotonic() + 30
        while got.count(b'\n') < 3 and time.monotonic() < deadline:
            r, _, _ = select.select([out_r], [], [], 1)
            if r:
                chunk = os.read(out_r, 65536)
                if not chunk:
                    break
                got += chunk
        os.close(out_r)
        out_r = -1
        first3 = got.split(b'\n')[:3]
        chk.eq('three lines read', len(first3), 3)
        for i, line in enumerate(first3):
            obj = json.loads(line)
            chk.true('line %d is a line of the stream (%s)' % (i + 1, obj.get('type')),
                     obj.get('type') in LINE_TYPES)
        chk.eq('the first is the header', json.loads(first3[0])['type'], 'header')
        if mode == 'launch':
            # the next lines (threads ending) meet the closed pipe
            os.write(ctl_w, b'q')
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            raise Failed('ptwatch did not exit after its output closed')
        print('ptwatch exit status %s' % proc.returncode)
        chk.true('ptwatch exit status: SIGPIPE (141, -13) or 0 (got %s)' % proc.returncode,
                 proc.returncode in (0, 141, -signal.SIGPIPE))
        if mode == 'launch':
            chk.true('the command finished its work untraced ("idle_done" record)',
                     wait_for(lambda: any('idle_done' in ln for ln in open(truth)), 15))
        else:
            chk.true('TracerPid 0 within 2 s', wait_untraced(pid, 2) is not None)
            target.check_alive('after the pipe closed')
            check_untouched(chk, pid, 'after the pipe closed')
            wait_progress(chk, target, 'after the pipe closed', more=50)
    finally:
        if proc.returncode is None:
            kill_group(proc)
            proc.wait()
        if out_r >= 0:
            os.close(out_r)
        if mode == 'launch':
            os.close(ctl_w)
            os.close(rep_r)


# ---------------------------------------------------------------------------
# the tracer killed: the restorer writes the rest of the stream

@test('json-lines-kill9', kernel=True)
@case('json-lines-kill9')
def case_json_lines_kill9(session, chk):
    target = session.target('churner')
    pid = target.ready()[0]
    run, proc = session.start_attach(pid, opts=('-q', '--json-lines', '-o', 'stream.jsonl'),
                                     output=None)
    path = os.path.join(run.tmpdir, 'stream.jsonl')
    try:
        wait_watched(target)
        chk.true('some spans ended',
                 wait_for(lambda: os.path.exists(path) and
                          open(path, 'rb').read().count(b'"type":"span"') >= 20, 20))
        tracer = [k for k in child_pids(proc.pid) if comm(k) == 'ptw-tracer']
        chk.eq('one tracer', len(tracer), 1)
        os.kill(tracer[0], signal.SIGKILL)
        session.wait(run, proc, 20, 'ptwatch did not exit after its tracer was killed')
    finally:
        if proc.returncode is None:
            kill_group(proc)
            proc.wait()
    chk.true('TracerPid 0', wait_untraced(pid, 2) is not None)
    with open(path, 'rb') as f:
        data = f.read()
    objs = parse_lines(chk, data, 'stream')
    last = objs[-1]
    chk.eq('the last line says the tracer died', last['session']['end_reason'], 'tracer_died')
    died_w = [o for o in objs if o['type'] == 'warning' and o['code'] == 'tracer_died']
    chk.true('a tracer_died warning line', died_w)
    if backend() == 'kernel':   # (nothing patched, nothing stopped: it lives on)
        chk.true('it says the process still runs (%s)' % died_w,
                 died_w and 'still runs, untraced' in died_w[0]['message'])
    spans = {}
    for o in objs:
        if o['type'] == 'span':
            spans.setdefault(o['span']['id'], o['span'])
    opened = {o['span']['id'] for o in objs if o['type'] == 'span_open'}
    chk.eq('every span begun has its span line', sorted(opened - set(spans)), [])
    died = [s for s in spans.values() if (s['end'] or {}).get('reason') == 'tracer_died']
    chk.true('the spans open at the kill: unmatched, tracer_died (%d)' % len(died), len(died) >= 1)
    print('%d spans, %d open at the kill' % (len(spans), len(died)))
    rep = run_ptwatch(['report', path])
    chk.eq('report reads it', rep.returncode, 0)
    chk.true("report: the record ends where the tracer died",
             b"ptwatch's tracer died" in rep.stdout)


# ---------------------------------------------------------------------------
# bounded memory: RSS does not grow with the threads that came and went

def descendants(pid):
    out = []
    for kid in child_pids(pid):
        out.append(kid)
        out.extend(descendants(kid))
    return out


def peak_rss(argv, env, timeout):
    """Runs ptwatch; the peak RSS (VmHWM, KiB) of each of its processes
    (front, ptw-tracer, pt-restorer), sampled until they exit; and, for
    each, its largest mappings when its RSS was highest as sampled."""
    proc = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, env=env,
                            start_new_session=True)
    peak = {}
    rss = {}
    where = {}
    deadline = time.monotonic() + timeout
    try:
        while proc.poll() is None:
            if time.monotonic() > deadline:
                raise Failed('%s did not finish within %d s' % (argv, timeout))
            for p in [proc.pid] + descendants(proc.pid):
                name = comm(p)
                if name not in ('ptwatch', 'ptw-tracer', 'pt-restorer'):
                    continue
                try:
                    with open('/proc/%d/status' % p) as f:
                        for ln in f:
                            if ln.startswith('VmRSS:') and int(ln.split()[1]) > rss.get(name, 0):
                                rss[name] = int(ln.split()[1])
                                where[name] = largest_mappings(p)
                            if ln.startswith('VmHWM:'):
                                peak[name] = max(peak.get(name, 0), int(ln.split()[1]))
                except OSError:
                    pass
            time.sleep(0.02)
    finally:
        if proc.returncode is None:
            kill_group(proc)
            proc.wait()
    err = proc.stderr.read().decode('utf-8', 'replace')
    return proc.returncode, peak, err, where


def largest_mappings(pid, n=4):
    """'NAME KiB' of the n mappings of pid with the most resident memory."""
    out = []
    name = None
    try:
        with open('/proc/%d/smaps' % pid) as f:
            for ln in f:
                first = ln.split(None, 1)[0]
                if '-' in first and not first.endswith(':'):
                    parts = ln.split()
                    name = parts[5] if len(parts) > 5 else '[anon %s]' % first
                elif first == 'Rss:':
                    out.append((int(ln.split()[1]), os.path.basename(name)))
    except OSError:
        return []
    return ['%s %d' % (m, k) for k, m in sorted(out, reverse=True)[:n]]


@test('memory-20000', '20000', '2000', timeout=300, kernel=True, first=True)
@case('memory')
def case_memory(session, chk, big='20000', small='2000'):
    """--json-lines -o FILE: the peak RSS of all three processes with `big`
    short threads is within 10% of the one with `small`.
    On the kernel path the ring buffer (8 MiB) becomes resident as it is
    first written, up to its size: the smaller run must go round it (20000
    threads do) for the two to differ only by the threads that came and
    went, and the bigger one is three times that. A loss (the converter
    outrun on a busy machine: how much is a figure of the machine's load,
    not a test) must be said once, by kind, and be exactly what is
    missing."""
    if backend() == 'kernel':
        small = str(max(int(small), 20000))
        big = str(3 * int(small))
    d = session.mkdtemp()
    # A symbol cache of its own, filled by a first run not measured: the
    # suite's is shared with cases that run at once and change what its
    # answers depend on (DEBUGINFOD_URLS), and a run that must look up
    # again costs what the other did not (libc's debug file: 12 MiB; in CI
    # the 60000 run once loaded libdebuginfod too, 8 MiB, for no server).
    env = dict(os.environ, PTWATCH_TRUTH=os.path.join(d, 'truth.jsonl'),
               XDG_CACHE_HOME=os.path.join(d, 'cache'))
    subprocess.run([ptwatch_path(), '-q', '-o', os.devnull, '--', fixture('many'), '10'],
                   env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, timeout=60,
                   check=True)
    figures = {}
    for n in (small, big):
        # --open-timeout=0: the long run would cross the 5 s default (main
        # and the creators stay open) and name where they wait, which maps
        # libc's debug information once (about 16 MiB): a cost of the
        # session's length, not of the threads that came and went
        argv = [ptwatch_path(), '-q', '--json-lines', '--open-timeout=0', '-o',
                os.path.join(d, 'stream.jsonl'), '--', fixture('many'), n]
        rc, peak, err, where = peak_rss(argv, env, 600)
        chk.eq('%s threads: exit status (%s)' % (n, tail(err, 5)), rc, 0)
        total = sum(peak.values())
        figures[n] = (total, peak)
        print('%s threads: peak RSS %d KiB %s' % (n, total, peak))
        print('%s threads: the tracer\'s largest mappings (KiB) %s'
              % (n, where.get('ptw-tracer')))
        with open(os.path.join(d, 'stream.jsonl'), 'rb') as f:
            data = f.read()
        spans = data.count(b'{"type":"span","')
        lost = {}
        for l in data.splitlines():
            if l.startswith(b'{"type":"warning"') and b'"kernel_events_lost"' in l:
                kinds = lost_by_kind(json.loads(l)['message'])
                if kinds:
                    chk.eq('%s threads: one statement of the loss' % n, lost, {})
                    lost = kinds
        if lost:
            # The ring holds what the converter has not read: a machine too
            # busy for it to keep up fills it, and what is lost is said, by
            # kind. A thread's span is made by its creation's record: the
            # span lines missing are the creations lost, no more, no less.
            print('%s threads: %d span lines, lost %s' % (n, spans, lost))
            chk.eq('%s threads: span lines missing = creations lost' % n,
                   int(n) + 3 - spans, lost.get('thread creations', 0))
        else:
            chk.eq('%s threads: a span line per thread' % n, spans, int(n) + 3)
        seen = int(n) + 3 - lost.get('thread creations', 0)
        chk.true('%s threads: "%s threads" in the summary' % (n, seen),
                 'ptwatch: %d threads' % seen in err)
    chk.eq('the three processes measured', sorted(figures[big][1]),
           ['pt-restorer', 'ptw-tracer', 'ptwatch'])
    chk.true('peak RSS with %s threads (%d KiB) within 10%% of %s threads (%d KiB)'
             % (big, figures[big][0], small, figures[small][0]),
             figures[big][0] <= figures[small][0] * 1.10)


# ---------------------------------------------------------------------------
# --format=chrome

def check_chrome(chk, trace, doc, what):
    events = trace['traceEvents']
    pid = doc['target']['pid']
    for e in events:
        for field in ('ph', 'name', 'pid', 'tid'):
            if field not in e:
                raise Failed('%s: an event without %s: %r' % (what, field, e))
        chk.eq('%s: pid of %s' % (what, e['name']), e['pid'], pid)
        if e['ph'] != 'M':
            chk.true('%s: %s has a ts in us' % (what, e['name']),
                     isinstance(e.get('ts'), (int, float)) and e['ts'] >= 0)
        if e['ph'] == 'X':
            chk.true('%s: %s has a dur' % (what, e['name']),
                     isinstance(e.get('dur'), (int, float)) and e['dur'] >= 0)
    b = [e for e in events if e['ph'] == 'B']
    chk.eq('%s: B/E pairs match' % what, len(b), len([e for e in events if e['ph'] == 'E']))
    names = {e['tid']: e['args']['name'] for e in events
             if e['ph'] == 'M' and e['name'] == 'thread_name'}
    threads = [s for s in doc['spans'] if s['kind'] == 'thread']
    for s in threads:
        n = names.get(s['tid'])
        chk.true('%s: track of %d named "name (tid)" (%r)' % (what, s['tid'], n),
                 n is not None and n.endswith(' (%d)' % s['tid']))
    slices = {e['args']['span']: e for e in events if e['ph'] == 'X' and
              e.get('cat', '').startswith('thread')}
    chk.eq('%s: a slice per thread span' % what, sorted(slices), sorted(s['id'] for s in threads))
    base = trace['otherData']['base_ns']
    for s in threads:
        e = slices.get(s['id'])
        if not e:
            continue
        chk.eq('%s: span %d on its thread\'s track' % (what, s['id']), e['tid'], s['tid'])
        if s['start_ns'] is not None:
            chk.true('%s: span %d begins at its start routine\'s entry' % (what, s['id']),
                     abs(e['ts'] - (s['start_ns'] - base) / 1000.0) < 0.002)
        if s['lifetime_ns'] is not None:
            chk.true('%s: span %d lasts its lifetime (%s, %s)' % (what, s['id'], e['dur'],
                                                                  s['lifetime_ns']),
                     abs(e['dur'] - s['lifetime_ns'] / 1000.0) < 0.002)
        chk.eq('%s: span %d args.status' % (what, s['id']), e['args']['status'], s['status'])
        if s['status'] in ('open', 'unmatched'):
            chk.true('%s: span %d marked %s' % (what, s['id'], s['status']),
                     s['status'] in e['cat'])
        if s['pthread']:
            chk.eq('%s: span %d args.pthread' % (what, s['id']), e['args'].get('pthread'),
                   s['pthread'])
    # flows: every start has its end
    starts = sorted(e['id'] for e in events if e['ph'] == 's')
    chk.eq('%s: flows end' % what, starts, sorted(e['id'] for e in events if e['ph'] == 'f'))
    spawned = [s for s in threads if s['spawn_latency_ns'] is not None]
    chk.eq('%s: a spawn flow per spawned span' % what,
           len([e for e in events if e['ph'] == 's' and e['cat'] == 'spawn']), len(spawned))
    joined = [s for s in threads if s['join'] and s['join']['return_ns'] is not None]
    chk.eq('%s: a join slice per join' % what,
           len([e for e in events if e['ph'] == 'X' and e.get('cat') == 'join']), len(joined))
    # frames nest in their thread's slice
    frames = [s for s in doc['spans'] if s['kind'] == 'frame']
    fslices = [e for e in events if e['ph'] == 'X' and e.get('cat', '').startswith('frame')]
    chk.eq('%s: a slice per frame span' % what, len(fslices), len(frames))
    by_tid = {}
    for e in slices.values():
        by_tid.setdefault(e['tid'], []).append(e)
    for f in fslices:
        inside = any(t['ts'] - 0.001 <= f['ts'] and f['ts'] + f['dur'] <= t['ts'] + t['dur'] + 0.001
                     for t in by_tid.get(f['tid'], []))
        chk.true('%s: frame %s nested in its thread slice' % (what, f['args']['frame']), inside)
    return events


@test('chrome', kernel=True)
@case('chrome')
def case_chrome(session, chk):
    exe = fixture('lifecycle')
    run = session.run([exe], opts=['-q'])
    rep = run_ptwatch(['report', '--format=chrome', run.doc_path, '-o',
                       os.path.join(run.tmpdir, 'trace.json')])
    chk.eq('report --format=chrome: exit status (%s)' % rep.stderr, rep.returncode, 0)
    with open(os.path.join(run.tmpdir, 'trace.json')) as f:
        check_chrome(chk, json.load(f), run.doc, 'from the document')
    # live, with frames (--trace)
    lrun, proc = session.start([fixture('frames'), 'recursion'],
                               opts=['-q', '--trace', 'fr_*', '--format=chrome', '-o',
                                     'trace.json'], output=None)
    session.wait(lrun, proc, 60)
    chk.eq('live --format=chrome: exit status (%s)' % tail(lrun.stderr_text()), lrun.returncode, 0)
    with open(os.path.join(lrun.tmpdir, 'trace.json')) as f:
        trace = json.load(f)
    # the same run's document, for the reference: convert the trace's source
    drun, proc = session.start([fixture('frames'), 'recursion'], opts=['-q', '--trace', 'fr_*'])
    session.wait(drun, proc, 60)
    with open(drun.doc_path) as f:
        doc = json.load(f)
    rep = run_ptwatch(['report', '--format=chrome', drun.doc_path])
    events = check_chrome(chk, json.loads(rep.stdout), doc, 'with frames')
    # the same frames in a stream, return values included
    srun, proc = session.start([fixture('frames'), 'recursion'],
                               opts=['-q', '--trace', 'fr_*', '--json-lines', '-o', 's.jsonl'],
                               output=None)
    session.wait(srun, proc, 60)
    with open(os.path.join(srun.tmpdir, 's.jsonl'), 'rb') as f:
        objs = parse_lines(chk, f.read(), 'stream with frames')
    sframes = sorted((o['frame'] for o in objs if o['type'] == 'frame'), key=lambda f: f['id'])
    dframes = [s for s in doc['spans'] if s['kind'] == 'frame']
    # (two runs: the threads interleave differently, ids with them)
    strip = lambda f: (f['depth'], f['status'], f['reason'] or '', f['value'] or '',
                       f['function']['symbol'])
    chk.eq('the stream has the frames of the document', sorted(strip(f) for f in sframes),
           sorted(strip(f) for f in dframes))
    rep = run_ptwatch(['report', os.path.join(srun.tmpdir, 's.jsonl')])
    check_summary_threads(chk, summary_of(srun.stderr),
                          len([r for r in load_truth(srun) if r.get('kind') == 'calls']),
                          'the live summary with frames')
    chk.eq('report of the stream with frames = its live summary', rep.stdout.decode(),
           summary_of(srun.stderr))
    chk.true('the summary says the calls are in the stream',
             '(each call: in the stream)' in rep.stdout.decode())
    chk.true('frames present', any(e.get('cat', '').startswith('frame') for e in events))
    check_chrome_recursion(chk, trace, load_truth(lrun), 'live trace')


def check_chrome_recursion(chk, trace, truth, what):
    """The Chrome trace of frames recursion under --trace 'fr_*', against
    the fixture's truth: one process, a named track and a thread slice per
    thread that recursed (main and the rec_workers), and on each track its
    calls of fr_rec, completed, fr_rec(n) returning n + ... + 1."""
    events = trace['traceEvents']
    calls = {r['tid']: r for r in truth if r.get('kind') == 'calls'}
    rec = [r for r in truth if r.get('kind') == 'recursion']
    pid = rec[0]['pid'] if rec else None
    if len(rec) != 1 or rec[0]['main'] != pid or sorted(calls) != sorted(
            set(calls) | {pid}) or len(calls) != rec[0]['threads'] + 1:
        raise FrameworkError('frames recursion truth: %s' % truth)
    procs = [e for e in events if e['ph'] == 'M' and e['name'] == 'process_name']
    chk.eq('%s: one process, the fixture\'s' % what, [e['pid'] for e in procs], [pid])
    tracks = sorted(e['tid'] for e in events if e['ph'] == 'M' and e['name'] == 'thread_name')
    chk.eq('%s: a named track per thread' % what, tracks, sorted(calls))
    threads = sorted((e['name'], e['tid']) for e in events
                     if e['ph'] == 'X' and e.get('cat', '').startswith('thread'))
    chk.eq('%s: a thread slice per thread: main and the rec_workers' % what, threads,
           sorted([('main', pid)] + [('rec_worker', t) for t in calls if t != pid]))
    for tid, c in sorted(calls.items()):
        frames = [e for e in events if e['ph'] == 'X' and e.get('cat', '').startswith('frame')
                  and e['tid'] == tid]
        n = c['max_depth']
        chk.eq('%s: thread %d: its calls of fr_rec (name, status, value), as many as it made'
               % (what, tid),
               sorted((e['name'], e['args'].get('status'), int(e['args'].get('value'), 16))
                      for e in frames),
               sorted(('fr_rec', 'completed', k * (k + 1) // 2)
                      for k in list(range(1, n + 1)) * (c['calls'] // n)))
    chk.true('%s: every event in the fixture\'s process' % what,
             all(e['pid'] == pid for e in events))


# ---------------------------------------------------------------------------
# the event log's filters and -v

LOG_LINE = re.compile(r'^\s*\d+\.\d{6}\s+\d+ (\S+)')


def log_words(stderr):
    words = []
    for line in stderr.decode('utf-8', 'replace').split('\nptwatch: ')[0].splitlines():
        m = LOG_LINE.match(line)
        if m:
            words.append(m.group(1))
    return words


@test('log-filters', kernel=True)
@case('log-filters')
def case_log_filters(session, chk):
    exe = fixture('lifecycle')
    run = session.run([exe], opts=['-e', 'create,end'])
    words = set(log_words(run.stderr))
    chk.eq('-e create,end: only those lines', words, {'create', 'end'})
    chk.true('the summary stays', 'ptwatch: ' in run.stderr_text())
    # --locks' lines are log words too: -e wait keeps the waits alone
    # (a deadlock is always said); --tid keeps a thread's waits
    locks = fixture('locks')
    run = session.run([locks, 'contend', '5'], opts=['--locks', '-e', 'wait'])
    words = set(log_words(run.stderr))
    chk.eq('--locks -e wait: only wait lines', words, {'wait'})
    waits = [line for line in run.stderr_text().split('\nptwatch: ')[0].splitlines()
             if LOG_LINE.match(line)]
    if waits:
        tid = int(waits[0].split()[1])
        run = session.run([locks, 'contend', '5'], opts=['--locks', '-e', 'WAIT,waited',
                                                         '--tid', '1'])
        chk.eq('--locks --tid 1 (no such thread): no wait line',
               set(log_words(run.stderr)) & {'wait', 'waited'}, set())
        print('a waiter: %d' % tid)
    spans = {s['id']: s for s in run.doc['spans'] if s['kind'] == 'thread'}
    run = session.run([exe], opts=['--routine', 'exit_*'])
    spans = {s['id']: s for s in run.doc['spans'] if s['kind'] == 'thread'}
    tags = set()
    for line in run.stderr_text().split('\nptwatch: ')[0].splitlines():
        m = re.search(r' \[(\d+)\]', line)
        if m:
            tags.add(int(m.group(1)))
    names = {spans[t]['start_routine']['symbol'] for t in tags if spans[t]['start_routine']}
    chk.eq('--routine exit_*: lines of exit_worker only', names, {'exit_worker'})
    run = session.run([exe], opts=['-v'])
    words = log_words(run.stderr)
    chk.true('-v: raw event lines', 'event' in words)
    # (the kernel path stops nothing: no such line there)
    chk.eq('-v: ptrace stop lines', 'stops' in words, backend() != 'kernel')
    chk.true('-v: the usual lines too', 'create' in words and 'end' in words)
    # --tid: attach to the churner and follow one of its creator threads
    target = session.target('churner')
    pid, *creators = target.ready()   # "ready PID C0 C1": the creators' tids
    run = session.attach(pid, opts=('--tid', str(creators[0]), '--duration', '1'))
    tids = {int(line.split()[1]) for line in run.stderr_text().split('\nptwatch: ')[0].splitlines()
            if LOG_LINE.match(line)}
    chk.eq('--tid CREATOR: lines of that thread only', tids, {creators[0]})
    check_untouched(chk, pid, 'after the detach')
    for opts, words in ((['-e', 'nonsense'], "unknown event name in 'nonsense'"),
                        (['--tid', 'x'], "invalid --tid 'x'"),
                        (['--json-lines', '--json'], 'give one output format')):
        p = run_ptwatch(opts + ['--', 'true'])
        chk.eq('%s: exit status 2' % opts, p.returncode, 2)
        chk.true('%s: says %r (%r)' % (opts, words, p.stderr), words.encode() in p.stderr)


# ---------------------------------------------------------------------------
# --json-lines with --locks: a wait line per contended wait that ended, the
# same waits as the document run's; a deadlock line once its cycle is known

@test('json-lines-locks', kernel=True)
@case('json-lines-locks')
def case_json_lines_locks(session, chk):
    """locks contend 5: a wait line per contended wait, exactly the
    fixture's 5 rounds (waiter, owner) and main's joins of the players; the
    Chrome trace of another run: a slice per wait, the same 5 on the
    waiters' tracks."""
    exe = fixture('locks')
    run, proc = session.start([exe, 'contend', '5'], opts=['--locks', '--json-lines', '-o',
                                                            'stream.jsonl'], output=None)
    session.wait(run, proc, 60)
    with open(os.path.join(run.tmpdir, 'stream.jsonl'), 'rb') as f:
        objs = parse_lines(chk, f.read(), 'contend stream')
    waits = [o['wait'] for o in objs if o['type'] == 'wait']
    load_truth(run)
    rec = one_truth(run, 'contend')
    check_contended_waits(chk, waits, rec, contend_rounds(chk, run, 5), 'stream')
    main_tid = objs[-1]['target']['pid']
    joins = [w for w in waits if w['wait'] == 'join']
    chk.true('the others are main\'s joins (%s)' % [w['wait'] for w in waits],
             all(w['wait'] in ('mutex', 'join') for w in waits))
    chk.true('main\'s joins: by main, each of a player, at most once (%s)'
             % [(w['tid'], w['owner_tid']) for w in joins],
             all(w['tid'] == main_tid for w in joins) and
             len({w['owner_tid'] for w in joins}) == len(joins) and
             {w['owner_tid'] for w in joins} <= {rec['a'], rec['b']})
    for w in waits:
        chk.eq('wait %d: completed' % w['id'], w['status'], 'completed')
    chk.eq('wait lines, once each', len({w['id'] for w in waits}), len(waits))
    metrics = objs[-1]['metrics']
    chk.eq('metrics.waits counts them', (metrics.get('waits') or {}).get('count'), len(waits))
    # the Chrome trace: a slice per wait, on the waiting thread's track
    crun = session.run([exe, 'contend', '5'], opts=['-q', '--locks', '--format=chrome', '-o',
                                                    'trace.json'], output=None, load=False)
    chk.eq('--format=chrome --locks: exit status (%s)' % tail(crun.stderr_text(), 5),
           crun.returncode, 0)
    load_truth(crun)
    crec = one_truth(crun, 'contend')
    with open(os.path.join(crun.tmpdir, 'trace.json')) as f:
        events = json.load(f)['traceEvents']
    slices = [e for e in events if e.get('cat', '').startswith('wait')]
    tracks = {e['tid'] for e in events if e.get('ph') == 'M' and e.get('name') == 'thread_name'}
    for e in slices:
        chk.true('wait slice %s: ph X with dur, on a named track' % e.get('name'),
                 e.get('ph') == 'X' and isinstance(e.get('dur'), (int, float))
                 and e.get('tid') in tracks, e)
    mutex = sorted((e for e in slices if e['args'].get('object') == crec['mutex']),
                   key=lambda e: e['ts'])
    chk.eq('trace: the slices of the waits on lock_m, in order, as (track, owner): one per '
           'round', [(e['tid'], e['args'].get('owner_tid')) for e in mutex],
           [(r['waiter'], r['owner']) for r in contend_rounds(chk, crun, 5)])
    chk.eq('trace: the other slices are main\'s joins',
           [e['name'] for e in slices if e not in mutex and e['name'].split()[1] != 'join'], [])


@test('chrome-follow', kernel=True)
@case('chrome-follow')
def case_chrome_follow(session, chk):
    """-f --format=chrome on forkthreads: each process its own pid and
    process_name, its threads' slices under it, against the fixture's
    truth: the fork child's pid and its three child_worker tids, the
    parent's threads, a process per /bin/true child and one for system()'s
    shell."""
    run = session.run([fixture('forkthreads')], opts=['-q', '-f', '--format=chrome', '-o',
                                                      'trace.json'], output=None, load=False)
    load_truth(run)
    chk.eq('exit status: the command\'s (%s)' % tail(run.stderr_text(), 5), run.returncode, 0)
    with open(os.path.join(run.tmpdir, 'trace.json')) as f:
        events = json.load(f)['traceEvents']
    main = one_truth(run, 'main')
    children = {c['how']: c for c in truth_of(run, 'child')}
    fork_pid = children['fork']['pid']
    names = {e['pid']: e['args']['name'] for e in events
             if e.get('ph') == 'M' and e.get('name') == 'process_name'}
    chk.eq('a process_name per process: the command, its fork child, posix_spawn\'s and '
           'vfork\'s /bin/true and system()\'s shell (%s)' % names, len(names), 5)
    chk.eq('the command\'s process name', names.get(main['pid']),
           'fixture-forkthreads (%d)' % main['pid'])
    chk.eq('the fork child\'s process name', names.get(fork_pid),
           'fixture-forkthreads (%d)' % fork_pid)
    for how in ('posix_spawn', 'vfork'):
        pid = children[how]['pid']
        chk.eq('%s child\'s process name' % how, names.get(pid), 'true (%d)' % pid)
    slices = [e for e in events if e.get('ph') == 'X' and e.get('cat', '').startswith('thread')]
    chk.true('every thread slice under a named process',
             all(e['pid'] in names for e in slices))
    # the fork child: its main and the three child_worker threads
    child_tids = sorted(t['tid'] for t in truth_of(run, 'child_thread')
                        if t['pid'] == fork_pid)
    chk.eq('truth: the fork child\'s 3 threads', len(child_tids), 3)
    chk.eq('the fork child\'s slices: (name, tid)',
           sorted((e['name'], e['tid']) for e in slices if e['pid'] == fork_pid),
           sorted([('main', fork_pid)] + [('child_worker', t) for t in child_tids]))
    chk.eq('the command\'s slices: (name, tid)',
           sorted((e['name'], e['tid']) for e in slices if e['pid'] == main['pid']),
           sorted([('main', main['tid'])] + [(t['routine'], t['tid'])
                                             for t in truth_of(run, 'thread')]))
    chk.eq('child_worker slices only in the fork child',
           sorted(e['tid'] for e in slices if e['name'] == 'child_worker'), child_tids)


# ---------------------------------------------------------------------------
# records lost: said at every ending, and what they were (issue 29)

LOST = re.compile(r"^(\d+) records lost \((.*)\): the ring buffer")


def lost_by_kind(message):
    """{'traced calls' entries': 123, ...} of a kernel_events_lost message."""
    m = LOST.match(message)
    if not m:
        return None
    out = {}
    for part in m.group(2).split(', '):
        n, what = part.split(' ', 1)
        out[what] = out.get(what, 0) + int(n)
    return out


@test('trace-loss', kernel=True)
@case('trace-loss')
def case_trace_loss(session, chk):
    """--trace tiny --json-lines on 2 threads calling a one-line function:
    every call is a frame line, or a loss said. On the kernel path 3,000,000
    calls overflow the ring (the converter cannot keep up): the command
    ends by itself, and still the stream's warning and metrics line say
    how many records were lost and of what kind (before: said only at a
    detach), and the frame lines are exactly the calls less the lost
    entries. On the ptrace path (slower: 20,000 calls) nothing is lost."""
    n = 3000000 if backend() == 'kernel' else 20000
    run = session.run([fixture('tinycalls'), str(n)],
                      opts=['-q', '--trace', 'tiny', '--json-lines'], output='file', load=False,
                      timeout=240)
    chk.eq('exit status', run.returncode, 0)
    truth = load_truth(run)
    calls = [r for r in truth if r.get('kind') == 'calls']
    if len(calls) != 1:
        raise FrameworkError('tinycalls truth: %s' % calls)
    with open(run.doc_path, 'rb') as f:
        objs = [json.loads(l) for l in f.read().splitlines() if l.strip()]
    frames = [o for o in objs if o['type'] == 'frame']
    lines = [o['message'] for o in objs if o['type'] == 'warning' and o['code'] == 'kernel_events_lost']
    last = objs[-1] if objs else {}
    chk.eq('the last line is the metrics line', last.get('type'), 'metrics')
    stated = [w['message'] for w in last.get('warnings', []) if w['code'] == 'kernel_events_lost']
    counted = [lost_by_kind(m) for m in stated if lost_by_kind(m) is not None]
    print('%d calls, %d frame lines, lost: %s' % (calls[0]['n'], len(frames), stated))
    if backend() != 'kernel':
        chk.eq('a frame line per call', len(frames), calls[0]['n'])
        chk.eq('nothing lost', stated, [])
        return
    chk.eq('one loss, said in the metrics line with its kinds', len(counted), 1, stated)
    chk.true('and as a warning line (%s)' % lines, any(LOST.match(m) for m in lines))
    if counted:
        entries = counted[0].get("traced calls' entries", 0)
        chk.eq('frame lines: every call whose entry record was not lost', len(frames),
               calls[0]['n'] - entries)
        chk.true('the loss is real here (%d entries lost)' % entries, entries > 0)


@test('trace-stepped', kernel=True)
@case('trace-stepped')
def case_trace_stepped(session, chk):
    """What a traced call costs is said: --trace on tiny() (first
    instruction push %rbp, which the kernel emulates at a uprobe) and on
    tiny_lea() (a lea, which it single-steps out of line at each call:
    some 10 times the cost). On the kernel path session.probes_stepped is
    0, then 1, and the summary says so; on the ptrace path always 0."""
    for fn, extra, stepped in (('tiny', [], 0), ('tiny_lea', ['lea'], 1)):
        chk.prefix = '[%s] ' % fn
        run = session.run([fixture('tinycalls'), '2000', '2'] + extra,
                          opts=['--trace', fn])
        chk.eq('exit status', run.returncode, 0)
        frames = [s for s in run.doc['spans'] if s['kind'] == 'frame']
        chk.eq('a frame per call', len(frames), 2000)
        want = stepped if backend() == 'kernel' else 0
        chk.eq('session.probes_stepped', run.doc['session'].get('probes_stepped'), want)
        err = run.stderr_text()
        said = 'single-stepped by the kernel at each call' in err
        chk.eq('the summary says it (%s)' % tail(err, 3), said, want > 0)
    chk.prefix = ''


# Runs argv, prints its status and peak RSS: a fresh, small process whose
# child's peak is ptwatch's own (a child's peak counts what it had before
# its exec: a copy of a big parent would be measured instead).
MAX_RSS_HELPER = """
import os, sys
pid = os.fork()
if pid == 0:
    os.execv(sys.argv[1], sys.argv[1:])
_, status, usage = os.wait4(pid, 0)
print(os.waitstatus_to_exitcode(status), usage.ru_maxrss)
"""


def max_rss_kib(argv, env, timeout):
    """Runs argv to its end: its exit status and the largest peak RSS
    (KiB) of it and every descendant it waited for (wait4's rusage: the
    tracer's too, up to its last byte written)."""
    p = subprocess.run([sys.executable, '-c', MAX_RSS_HELPER] + argv, stdout=subprocess.PIPE,
                       stderr=subprocess.PIPE, env=env, timeout=timeout)
    out = p.stdout.decode().split()
    if p.returncode != 0 or len(out) != 2:
        raise FrameworkError('max_rss helper: %r %r' % (p.stdout, p.stderr[-500:]))
    return int(out[0]), int(out[1]), p.stderr.decode('utf-8', 'replace')


@test('memory-trace-doc', timeout=120, kernel=True)
@case('memory-trace-doc')
def case_memory_trace_doc(session, chk):
    """--trace in document mode holds what the document must say, and no
    more: the peak RSS grows by at most 200 bytes per frame between a
    small and a big run (before: the document's whole text was built in
    memory before it was written, ~0.95 KB a frame with the frames
    themselves, 2.8 GB for 3 million calls; a frame was 192 bytes and a
    malloc'd block apart)."""
    small, big = (20000, 60000) if backend() != 'kernel' else (100000, 300000)
    d = session.mkdtemp()
    env = dict(os.environ, PTWATCH_TRUTH=os.path.join(d, 'truth.jsonl'))
    rss = {}
    for n in (small, big):
        argv = [ptwatch_path(), '-q', '--trace', 'tiny', '--json', '-o',
                os.path.join(d, 'spans-%d.json' % n), '--', fixture('tinycalls'), str(n), '1']
        rc, rss[n], err = max_rss_kib(argv, env, 110)
        chk.eq('%d calls: exit status (%s)' % (n, tail(err, 5)), rc, 0)
        print('%d frames: peak RSS %d KiB' % (n, rss[n]))
    frames = {}
    for n in (small, big):
        with open(os.path.join(d, 'spans-%d.json' % n)) as f:
            doc = json.load(f)
        frames[n] = sum(1 for s in doc['spans'] if s['kind'] == 'frame')
        lost = [w for w in doc['warnings'] if w['code'] == 'kernel_events_lost']
        if frames[n] < n and backend() == 'kernel':
            # (the converter outrun on a busy machine: said)
            chk.true('%d calls: fewer frames (%d) only with the loss said' % (n, frames[n]), lost)
        else:
            chk.eq('%d calls: a frame each' % n, frames[n], n)
    per = (rss[big] - rss[small]) * 1024 / max(frames[big] - frames[small], 1)
    chk.true('at most 200 bytes a frame (%.0f)' % per, per <= 200)
