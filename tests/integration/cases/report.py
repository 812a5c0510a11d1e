# SPDX-License-Identifier: MIT
"""Issue 18's cases: `ptwatch report` as a rule, for every family of
sessions (lifecycle, --trace, --locks, -f, --open-timeout, a snapshot, a
killed tracer): the summary the live session printed, report of its -o
document and report of its --json-lines stream are byte for byte the same;
a cut stream says it is cut and claims nothing it did not record;
--format=json keeps what the document had. And hostile files (two sessions
in one, /dev/zero, absurd claims): one line, exit status 1, quickly, in
bounded memory; a lost output: one line, exit status 3."""

import json
import os
import re
import resource
import signal
import subprocess
import time

from ptw_test import test
from ptw_test import backend, case, fixture, kill_group, validate, wait_for
from helpers import kill_tracer, run_ptwatch, wait_watched

SUMMARY_START = re.compile(r'\nptwatch: (\d+ threads|snapshot of )')
# what the front writes of its own after the summary (not in any file)
FRONT_LINES = re.compile(r'^ptwatch: the tracer process died.*\n?', re.M)


def live_summary(text):
    """The summary a live -q session printed (its stderr, or stdout for a
    snapshot): from its first line on, without the front's own lines."""
    m = SUMMARY_START.search(text)
    return FRONT_LINES.sub('', text[m.start():]) if m else ''


def report(chk, path, what, *opts):
    p = run_ptwatch(['report'] + list(opts) + [path])
    chk.eq('%s: report exits 0 (%r)' % (what, p.stderr[:300]), p.returncode, 0)
    return p.stdout.decode('utf-8', 'replace')


def same(chk, what, live, rep):
    if live != rep:
        print('--- %s, live:\n%s\n--- report:\n%s' % (what, live, rep))
    chk.true('%s: a summary (%r)' % (what, live[:80]), live.startswith('\nptwatch: '))
    chk.eq('%s: report = the live summary, byte for byte' % what, rep, live)


def check_cut(chk, path, what):
    """Cut in the middle of a line, past its header: it says so, and claims
    nothing it did not record."""
    with open(path, 'rb') as f:
        data = f.read()
    first = data.index(b'\n') + 1
    for frac in (0.3, 0.7):
        cut = max(first + 1, int(len(data) * frac))
        if data[cut - 1:cut] == b'\n':
            cut += 1
        p2 = path + '.cut'
        with open(p2, 'wb') as f:
            f.write(data[:cut])
        text = report(chk, p2, '%s cut at %d' % (what, cut))
        w = '%s cut at %d of %d' % (what, cut, len(data))
        chk.true('%s: says the stream was cut (%r)' % (w, text[:300]), 'the stream was cut' in text)
        for claim in ('process exited', 'killed by', '(null)', 'strategy ', 'ptrace stops ',
                      'lives on'):
            chk.true('%s: claims no %r' % (w, claim), claim not in text)
        m = re.search(r'ptwatch: (\d+) threads .* at most (\d+) at once', text)
        chk.true('%s: "at most N at once" counts what it shows (%r)' % (w, text[:200]),
                 m is not None and (int(m.group(1)) == 0 or int(m.group(2)) > 0))


def strip_series(doc):
    doc = dict(doc)
    doc['metrics'] = {k: v for k, v in doc['metrics'].items() if k != 'active_series'}
    return doc


def check_format_json(chk, run_dir, doc_path, what):
    """report --format=json of a document gives the document again (but the
    active series, which a report does not keep): waits, deadlocks,
    processes and each span's pid and process included."""
    out = os.path.join(run_dir, 'again.json')
    p = run_ptwatch(['report', '--format=json', '-o', out, doc_path])
    chk.eq('%s: report --format=json exits 0 (%r)' % (what, p.stderr[:300]), p.returncode, 0)
    with open(doc_path) as f:
        orig = json.load(f)
    with open(out) as f:
        again = json.load(f)
    validate(again)
    a, b = strip_series(orig), strip_series(again)
    for key in sorted(set(a) | set(b)):
        if a.get(key) != b.get(key):
            print('%s: %s differs:\n%s\n%s' % (what, key, json.dumps(a.get(key))[:1500],
                                                json.dumps(b.get(key))[:1500]))
        chk.eq('%s: --format=json keeps "%s"' % (what, key), b.get(key), a.get(key))


def launched(session, chk, family, cmd, opts, kinds=()):
    """The family's session twice (-o document, --json-lines stream): each
    report = its live summary."""
    runs = {}
    for mode in ('document', 'stream'):
        path = 'doc.json' if mode == 'document' else 's.jsonl'
        extra = ['--json-lines'] if mode == 'stream' else []
        run, proc = session.start(cmd, opts=['-q'] + list(opts) + extra + ['-o', path],
                                  output=None)
        session.wait(run, proc, 60)
        full = os.path.join(run.tmpdir, path)
        live = live_summary(run.stderr_text())
        same(chk, '%s %s' % (family, mode), live, report(chk, full, '%s %s' % (family, mode)))
        for kind in kinds:
            chk.true('%s %s: the summary has its %r' % (family, mode, kind), kind in live)
        runs[mode] = (run, full)
    check_format_json(chk, runs['document'][0].tmpdir, runs['document'][1], family)
    check_cut(chk, runs['stream'][1], family)
    return runs


@test('report-rule-lifecycle', 'lifecycle', kernel=True)
@test('report-rule-trace', 'trace', kernel=True)
@test('report-rule-locks', 'locks', kernel=True)
@test('report-rule-follow', 'follow', kernel=True)
@test('report-rule-open-timeout', 'open-timeout', kernel=True)
@test('report-rule-snapshot', 'snapshot', kernel=True)
@test('report-rule-tracer-killed', 'tracer-killed', kernel=True)
@case('report-rule')
def case_report_rule(session, chk, family='lifecycle'):
    if family == 'lifecycle':
        launched(session, chk, family, [fixture('lifecycle')], [])
    elif family == 'trace':
        launched(session, chk, family, [fixture('frames'), 'recursion'], ['--trace', 'fr_*'],
                 kinds=('frames: ', 'FUNCTION'))
    elif family == 'locks':
        launched(session, chk, family, [fixture('locks'), 'contend', '20'], ['--locks'],
                 kinds=('waits: ', 'OBJECT', ' waited '))
    elif family == 'follow':
        launched(session, chk, family, [fixture('prefork'), 'workers'], ['-f'],
                 kinds=('  process ', 'exited with code 10'))
    elif family == 'open-timeout':
        # main must outlive 2 ms: 20 rounds do under ptrace; the kernel path,
        # which stops no one, runs them in 1.5 ms at times
        rounds = '1000' if backend() == 'kernel' else '20'
        launched(session, chk, family, [fixture('locks'), 'contend', rounds],
                 ['--open-timeout=0.002'], kinds=('seen open past',))
    elif family == 'snapshot':
        snapshot(session, chk)
    elif family == 'tracer-killed':
        tracer_killed(session, chk)
    else:
        raise ValueError(family)


def snapshot(session, chk):
    """--snapshot: what it printed (on stdout), again, from the document and
    from the stream."""
    target = session.target('deadlock')
    pid = target.ready()[0]
    for mode, opts in (('document', ('--snapshot',)),
                       ('stream', ('--snapshot', '--json-lines', '-o', 'snap.jsonl'))):
        run = session.attach(pid, opts=opts, output='file' if mode == 'document' else None,
                             load=False)
        path = run.doc_path if mode == 'document' else os.path.join(run.tmpdir, 'snap.jsonl')
        live = live_summary(run.stdout.decode())
        chk.true('snapshot %s: names the deadlock' % mode, 'DEADLOCK' in live)
        same(chk, 'snapshot %s' % mode, live, report(chk, path, 'snapshot ' + mode))


def tracer_killed(session, chk):
    """kill -9 of ptw-tracer: the restorer ends the record; the summary
    printed then is report's, but for the front's own line."""
    for mode in ('document', 'stream'):
        target = session.target('idle', args=('4',))
        pid = target.ready()[0]
        path = 'doc.json' if mode == 'document' else 's.jsonl'
        # (event lines: the document's session has begun once they come)
        extra = ['--json-lines', '-q'] if mode == 'stream' else ['--no-live']
        run, proc = session.start_attach(pid, opts=extra + ['-o', path], output=None)
        full = os.path.join(run.tmpdir, path)
        err = os.path.join(run.tmpdir, 'stderr')
        try:
            wait_watched(target)
            # once the session has begun (its header line, its first event
            # line): a tracer killed before leaves an empty file and no
            # summary, which is the restorer's to fix
            chk.true('the session begins', wait_for(
                lambda: mode == 'document' and os.path.getsize(err) > 0 or
                os.path.exists(full) and b'\n' in open(full, 'rb').read(), 20))
            kill_tracer(chk, proc.pid)
            session.wait(run, proc, 20, 'ptwatch did not exit after its tracer was killed')
        finally:
            if proc.returncode is None:
                kill_group(proc)
                proc.wait()
        text = run.stderr_text()
        chk.true('%s: the front says the tracer died' % mode, 'tracer process died' in text)
        live = live_summary(text)
        chk.true('%s: the summary says so' % mode, "ptwatch's tracer died" in live)
        same(chk, 'tracer killed, %s' % mode, live, report(chk, full, 'tracer killed ' + mode))


# ---------------------------------------------------------------------------
# hostile files: one line, exit status 1, quickly, in bounded memory

def child_limits(mib):
    """At most mib MiB of address space (not under ASan, which reserves
    terabytes of it)."""
    def limit():
        resource.setrlimit(resource.RLIMIT_AS, (mib << 20, mib << 20))
    return None if 'asan' in os.environ['PTWATCH'] else limit


def refused(chk, path, words, what, timeout=20, mib=1024):
    t0 = time.monotonic()
    p = subprocess.run([os.environ['PTWATCH'], 'report', path], stdout=subprocess.PIPE,
                       stderr=subprocess.PIPE, timeout=timeout, preexec_fn=child_limits(mib))
    took = time.monotonic() - t0
    err = p.stderr.decode('utf-8', 'replace')
    chk.eq('%s: exit status 1 (%r)' % (what, err[:300]), p.returncode, 1)
    chk.true('%s: one line saying %r (%r)' % (what, words, err[:300]),
             err.count('\n') == 1 and err.startswith('ptwatch: ') and words in err)
    chk.eq('%s: nothing on stdout' % what, p.stdout, b'')
    print('%s: %.2f s: %s' % (what, took, err.strip()))
    return took


@test('report-hostile', timeout=120, kernel=True)
@case('report-hostile')
def case_report_hostile(session, chk):
    d = session.mkdtemp()

    def write(name, data):
        p = os.path.join(d, name)
        with open(p, 'wb') as f:
            f.write(data)
        return p

    run, proc = session.start([fixture('lifecycle')], opts=['-q', '--json-lines', '-o', 's.jsonl'],
                              output=None)
    session.wait(run, proc, 60)
    with open(os.path.join(run.tmpdir, 's.jsonl'), 'rb') as f:
        stream = f.read()
    n = stream.count(b'\n')
    # 1: cat a.jsonl b.jsonl (before: double free, SIGSEGV)
    refused(chk, write('two.jsonl', stream + stream),
            'line %d: a second session begins here' % (n + 1), 'two sessions')
    metrics = stream[stream.rindex(b'{"type":"metrics"'):]
    refused(chk, write('twice.jsonl', stream + metrics),
            'line %d: a metrics line after the metrics line' % (n + 1), 'two metrics lines')
    # 10: one "line" in a message
    bad = stream.replace(b'\n', b'\n#', 1)
    refused(chk, write('bad.jsonl', bad), 'bad.jsonl: line 2, column 1: ', 'a bad second line')
    # 3: /dev/zero and claims beyond a session (before: gigabytes, 30 s)
    took = refused(chk, '/dev/zero', 'line 1, column 1: ', '/dev/zero', timeout=10, mib=512)
    chk.true('/dev/zero: at once (%.2f s)' % took, took < 5)
    doc = run_ptwatch(['report', '--format=json', os.path.join(run.tmpdir, 's.jsonl')]).stdout
    deep = json.loads(doc)
    deep['spans'].append({'id': 1, 'kind': 'frame', 'thread_span': 1, 'tid': deep['target']['pid'],
                          'function': None, 'entry_ns': 1, 'return_ns': None, 'left_ns': None,
                          'depth': 500000000, 'parent': None, 'status': 'open', 'reason': None,
                          'value': None, 'open_after_ns': None, 'open_where': None})
    took = refused(chk, write('deep.json', json.dumps(deep).encode()),
                   '"depth" is 500000000, more than a session can reach (at most 1048576)',
                   'a frame 500000000 deep', mib=512)
    chk.true('a frame 500000000 deep: at once (%.2f s)' % took, took < 5)
    named = json.loads(doc)
    named['spans'][0]['name'] = 'n' * (1 << 20)
    refused(chk, write('name.json', json.dumps(named).encode()),
            '"name" is a string of 1048576 bytes (report reads at most 65536)', 'a 1 MiB name')
    big = write('big.json', b' ' * (257 << 20) + doc)
    refused(chk, big, 'more than 256 MiB', 'a 257 MiB document', timeout=60, mib=512)
    os.unlink(big)


@test('report-lost-output', kernel=True)
@case('report-lost-output')
def case_report_lost_output(session, chk):
    """8: report > /dev/full: one line, exit status 3 (before: 1, silent)."""
    run = session.run([fixture('lifecycle')], opts=['-q'], load=False)
    for argv, what in ((['report', run.doc_path], 'the summary'),
                       (['report', '--format=chrome', run.doc_path], 'the trace'),
                       (['report', '--format=json', run.doc_path], 'the document')):
        with open('/dev/full', 'wb') as full:
            p = subprocess.run([os.environ['PTWATCH']] + argv, stdout=full,
                               stderr=subprocess.PIPE, timeout=30)
        err = p.stderr.decode()
        chk.eq('%s to /dev/full: exit status 3 (%r)' % (what, err), p.returncode, 3)
        chk.true('%s to /dev/full: one line saying it was lost (%r)' % (what, err),
                 err.count('\n') == 1 and '%s of ' % what in err and 'was lost' in err
                 and 'No space left on device' in err)
