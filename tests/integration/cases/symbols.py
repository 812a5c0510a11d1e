"""Names: the build-id symbol cache, C++ names, names for stripped code
from debuginfod and MiniDebugInfo."""

import os
import re
import shutil
import socket
import subprocess
import time
import urllib.error
import urllib.request

from ptw_test import test
from ptw_test import (
    backend, case, check_exit, check_untouched, Failed, fixture, FrameworkError, load_doc,
    report_warnings, Skip, tail, thread_spans, warning_codes
)
from helpers import check_target_exit
from cases.launch import check_lifecycle, check_stripped_text


# 17. the build-id cache

def cache_lines(run, what):
    """The --debug=sym lines about libc: (debug file searches, cache opens)
    where each cache open is (path, state)."""
    searches, opens = [], []
    for line in run.stderr_text().splitlines():
        m = re.search(r'\]\s[\d.]+: debug file of (\S*libc\.so[^:]*): (.*)$', line)
        if m:
            searches.append(m.group(2))
        m = re.search(r'\]\s[\d.]+: cache (\S+) for (\S*libc\.so\S*): (.+), \d+ records', line)
        if m:
            opens.append((m.group(1), m.group(3)))
    print('%s: libc debug file searches %s, cache %s' % (what, searches, opens))
    return searches, opens


@test('cache',
      kernel="asserts the order of the ptrace path's cache events; a kernel path launch loads libc's symbols twice (ptwatch's copy before the exec, then the target's, from the cache the first wrote); cache-fifo and cache-wrong run on both")
@case('cache')
def case_cache(session, chk):
    """A second run reads nothing of libc's debug file; a corrupt cache file
    is ignored and replaced; --no-cache and an unwritable directory."""
    exe = fixture('lifecycle')
    home = session.mkdtemp()
    env = {'XDG_CACHE_HOME': home}
    opts = ['-q', '--debug=sym']

    chk.prefix = '[first run] '
    run = session.run([exe], opts=opts, env=env)
    check_lifecycle(chk, run)
    strategy = run.doc['session'].get('strategy')
    searches, opens = cache_lines(run, 'first run')
    chk.true('libc\'s debug file was looked for', len(searches) >= 1)
    chk.eq('a new cache for libc', [st for _, st in opens], ['new'])
    if not opens:
        raise Failed('no cache for libc in the debug log:\n%s' % run.stderr_text()[-3000:])
    path = opens[0][0]
    chk.true('the cache is in $XDG_CACHE_HOME/ptwatch (%s)' % path,
             os.path.dirname(path) == os.path.join(home, 'ptwatch') and os.path.isfile(path))

    chk.prefix = '[second run] '
    run = session.run([exe], opts=opts, env=env)
    check_lifecycle(chk, run)
    searches, opens = cache_lines(run, 'second run')
    chk.eq('libc\'s debug file not opened', searches, [])
    chk.eq('libc\'s cache loaded', opens, [(path, 'loaded')])
    chk.eq('the same strategy', run.doc['session'].get('strategy'), strategy)

    chk.prefix = '[corrupt] '
    with open(path, 'rb') as f:
        data = bytearray(f.read())
    # Keep the header, damage a record: it must not be trusted.
    i = data.index(b'member:pthread.result\t1\t') if b'member:pthread.result\t1\t' in data \
        else len(data) - 8
    data[i + 24:i + 27] = b'fff'
    with open(path, 'wb') as f:
        f.write(bytes(data))
    run = session.run([exe], opts=opts, env=env)
    check_lifecycle(chk, run)
    searches, opens = cache_lines(run, 'corrupt')
    chk.eq('the corrupt file is ignored', opens, [(path, 'invalid (ignored)')])
    chk.true('libc\'s debug file looked for again', len(searches) >= 1)
    chk.eq('the same strategy', run.doc['session'].get('strategy'), strategy)
    with open(path, 'rb') as f:
        chk.true('the file was rewritten', f.read() != bytes(data))
    run = session.run([exe], opts=opts, env=env)
    check_lifecycle(chk, run)
    searches, opens = cache_lines(run, 'after the rewrite')
    chk.eq('the rewritten file is used', (searches, opens), ([], [(path, 'loaded')]))
    leftovers = [n for n in os.listdir(os.path.dirname(path)) if '.tmp.' in n]
    chk.eq('no temporary files left', leftovers, [])

    chk.prefix = '[--no-cache] '
    empty = session.mkdtemp()
    run = session.run([exe], opts=opts + ['--no-cache'], env={'XDG_CACHE_HOME': empty})
    check_lifecycle(chk, run)
    chk.eq('nothing written', os.listdir(empty), [])
    chk.eq('no cache opened', cache_lines(run, '--no-cache')[1], [])

    chk.prefix = '[unwritable] '
    not_a_dir = os.path.join(empty, 'file')
    with open(not_a_dir, 'w') as f:
        f.write('x')
    run = session.run([exe], opts=['-q'], env={'XDG_CACHE_HOME': not_a_dir})
    check_lifecycle(chk, run)
    chk.true('no message about the cache without --debug',
             'cache' not in run.stderr_text().lower(), run.stderr_text())
    run = session.run([exe], opts=opts, env={'XDG_CACHE_HOME': not_a_dir})
    check_lifecycle(chk, run)
    notes = [l for l in run.stderr_text().splitlines() if 'not written' in l]
    print('unwritable: %s' % notes)
    chk.eq('one debug line says the cache was not written', len(notes), 1)
    chk.prefix = ''


# ---------------------------------------------------------------------------
# 18. C++ names

@test('cxx', kernel=True)
@case('cxx')
def case_cxx(session, chk):
    """Start routines and create sites named for people (demangled), the
    mangled name beside them in linkage_name; text output too."""
    run = session.run([fixture('cxx')], opts=())
    check_exit(chk, run, code=0)
    report_warnings(run)
    spans = {s['tid']: s for s in thread_spans(run.doc)}
    threads = [t for t in run.truth if t['kind'] == 'thread']
    chk.eq('threads in the truth', len(threads), 3)
    joins = {(j['joiner'], j['tid']) for j in run.truth if j['kind'] == 'join'}
    for t in threads:
        span = spans.get(t['tid'])
        what = 'thread %s (%s)' % (t['tid'], t['routine'])
        if span is None:
            chk.true('%s has a span' % what, False)
            continue
        sr, site = span['start_routine'] or {}, span['create_site'] or {}
        chk.eq('%s: creator' % what, span['creator_tid'], t['creator'], span)
        chk.eq('%s: status' % what, span['status'], 'completed', span)
        chk.true('%s: joined' % what, span['join'] is not None and
                 (span['join']['joiner_tid'], t['tid']) in joins, span)
        if t['routine'] == 'std::thread':
            # libstdc++'s own routine: a placeholder, in libstdc++
            chk.true('%s: start routine in libstdc++' % what,
                     'libstdc++' in (sr.get('module') or ''), span)
            chk.true('%s: create site std::thread::_M_start_thread(...)' % what,
                     (site.get('symbol') or '').startswith('std::thread::_M_start_thread('), span)
            chk.true('%s: its linkage name' % what,
                     (site.get('linkage_name') or '').startswith('_ZNSt6thread15_M_start_thread'),
                     span)
            continue
        chk.eq('%s: start routine symbol' % what, sr.get('symbol'), 'fixture::Worker::run(void*)',
               span)
        chk.eq('%s: start routine linkage_name' % what, sr.get('linkage_name'),
               '_ZN7fixture6Worker3runEPv', span)
        chk.eq('%s: start routine address' % what, sr.get('addr'), t['routine_addr'], span)
        chk.eq('%s: create site' % what, site.get('symbol'), t['create_fn'], span)
        chk.eq('%s: create site linkage_name' % what, site.get('linkage_name'),
               None if t['create_fn'] == 'main' else '_ZZ4mainENKUlvE_clEv', span)
    main_span = [s for s in run.doc['spans'] if s.get('origin') == 'main']
    chk.true('main: symbol no linkage name',
             len(main_span) == 1 and main_span[0]['start_routine']['symbol'] == 'main' and
             main_span[0]['start_routine']['linkage_name'] is None, main_span)
    text = run.stderr_text()
    chk.true('the event lines say fixture::Worker::run(void*)',
             'fixture::Worker::run(void*)' in text and '_ZN7fixture' not in text, text[-2000:])
# 19. names for stripped code: debuginfod and MiniDebugInfo

def build_id(path):
    """The hex build-id of an ELF file (readelf -n)."""
    out = subprocess.run(['readelf', '-n', path], capture_output=True, text=True).stdout
    m = re.search(r'Build ID:\s*([0-9a-f]+)', out)
    if not m:
        raise FrameworkError('%s has no build-id note' % path)
    return m.group(1)


def free_port():
    with socket.socket() as s:
        s.bind(('127.0.0.1', 0))
        return s.getsockname()[1]


class Debuginfod:
    """A debuginfod server of the test's own on a free localhost port,
    serving the files of one directory (-F), started and killed by it."""

    def __init__(self, session, directory, build_ids):
        self.session = session
        self.directory = directory
        self.build_ids = build_ids
        self.proc = None
        self.url = None

    def start(self, timeout=30):
        exe = shutil.which('debuginfod')
        if not exe:
            raise Skip('debuginfod is not installed (scripts/deps.sh installs it)')
        env = dict(os.environ)
        for name in list(env):
            if name.startswith('DEBUGINFOD_'):
                del env[name]  # no upstream federation, no client settings
        for attempt in range(3):
            port = free_port()
            work = self.session.mkdtemp()
            log = open(os.path.join(work, 'debuginfod.log'), 'wb')
            # -t0: no rescans, -g0: no grooming; its database in a temp dir
            self.proc = subprocess.Popen(
                [exe, '-F', '-p', str(port), '-d', os.path.join(work, 'db.sqlite'), '-t', '0',
                 '-g', '0', self.directory],
                stdin=subprocess.DEVNULL, stdout=log, stderr=log, env=env,
                start_new_session=True)
            log.close()
            self.url = 'http://127.0.0.1:%d' % port
            # Ready when it serves every debug file (it scans in the
            # background); one that serves none, when it answers at all.
            waiting = ['/buildid/%s/debuginfo' % b for b in self.build_ids] or ['/metrics']
            deadline = time.monotonic() + timeout
            while waiting and time.monotonic() < deadline and self.proc.poll() is None:
                try:
                    probe = self.url + waiting[0]
                    with urllib.request.urlopen(probe, timeout=2) as r:
                        if r.status == 200:
                            waiting.pop(0)
                            continue
                except (urllib.error.URLError, OSError):
                    pass
                time.sleep(0.05)
            if not waiting:
                print('debuginfod on %s ready (attempt %d)' % (self.url, attempt))
                return
            self.stop()
            with open(os.path.join(work, 'debuginfod.log'), 'rb') as f:
                print('debuginfod (port %d) not ready:\n%s' % (port, tail(f.read().decode(
                    'utf-8', 'replace'))))
        raise FrameworkError('debuginfod did not serve %s within %d s' % (self.build_ids, timeout))

    def stop(self):
        if self.proc and self.proc.poll() is None:
            self.proc.kill()
        if self.proc:
            self.proc.wait()
        self.proc = None


def debug_file_lines(run, exe):
    """--debug=sym: what the search for exe's debug file found, one string
    per search ("PATH (debuginfod: fetched, 3.1 ms)", "none (...)"); every
    module's when exe is None."""
    pat = re.compile(r'\]\s[\d.]+: debug file of %s: (.*)$' % (re.escape(exe) if exe else r'\S+'))
    found = [m.group(1) for m in map(pat.search, run.stderr_text().splitlines()) if m]
    print('debug file of %s: %s' % (os.path.basename(exe) if exe else 'any module', found))
    return found


def empty_dir(path):
    for name in os.listdir(path):
        p = os.path.join(path, name)
        if os.path.isdir(p) and not os.path.islink(p):
            shutil.rmtree(p)
        else:
            os.unlink(p)


@test('debuginfod', timeout=90, kernel=True)
@case('debuginfod')
def case_debuginfod(session, chk):
    """A stripped fixture named through debuginfod (a local server serving
    its debug file): start routines and file:line; fetched once; then the
    server gone (refused), silent (ptwatch's own timeout), and back again
    (the symbol cache must not keep the answers learned without it)."""
    served = session.mkdtemp()
    bids = {}
    for name, stripped, debug in (('lifecycle', 'stripped', 'lifecycle_debug'),
                                  ('idle', 'idle_stripped', 'idle_debug')):
        bids[name] = build_id(fixture(stripped))
        if build_id(fixture(debug)) != bids[name]:
            raise FrameworkError('%s and %s have different build-ids' % (stripped, debug))
        shutil.copy(fixture(debug), os.path.join(served, name + '.debug'))
    exe, bid = fixture('stripped'), bids['lifecycle']
    client_cache, home = session.mkdtemp(), session.mkdtemp()
    fetched_file = os.path.join(client_cache, bid, 'debuginfo')
    server = Debuginfod(session, served, list(bids.values()))
    env = {'DEBUGINFOD_CACHE_PATH': client_cache, 'XDG_CACHE_HOME': home,
           'DEBUGINFOD_TIMEOUT': None, 'DEBUGINFOD_RETRY_LIMIT': None,
           'DEBUGINFOD_MAXTIME': None, 'DEBUGINFOD_PROGRESS': None}
    opts = ['-q', '--debug=sym']
    try:
        chk.prefix = '[not served] '
        # A server without the file: "not found" is an answer, not a failure
        # (no warning), and libdebuginfod records it as an empty file in
        # its cache, which must not count as a debug file.
        empty = Debuginfod(session, session.mkdtemp(), [])
        empty.start()
        env['DEBUGINFOD_URLS'] = empty.url
        try:
            run = session.run([exe], opts=opts, env=env)
        finally:
            empty.stop()
        check_lifecycle(chk, run, stripped=True)
        chk.eq('no warning', warning_codes(run.doc), [])
        lines = debug_file_lines(run, exe)
        chk.true('asked once: not found (%s)' % lines,
                 sum('debuginfod: No such file' in l for l in lines) == 1)
        chk.true('libdebuginfod recorded the miss (an empty file)',
                 os.path.isfile(fetched_file) and os.path.getsize(fetched_file) == 0)
        # and lets it expire at once: the next query goes to the server
        with open(os.path.join(client_cache, 'cache_miss_s'), 'w') as f:
            f.write('0\n')
        server.start()

        chk.prefix = '[--no-debug-files] '
        env['DEBUGINFOD_URLS'] = server.url
        run = session.run([exe], opts=opts + ['--no-debug-files'], env=env)
        check_lifecycle(chk, run, stripped=True)
        chk.true('debuginfod not asked', not debug_file_lines(run, exe))

        chk.prefix = '[served] '
        run = session.run([exe], opts=opts, env=env)
        check_lifecycle(chk, run)
        print('elapsed %.2f s' % run.elapsed)
        lines = debug_file_lines(run, exe)
        chk.true('the debug file was fetched by debuginfod into its client cache (%s)' % lines,
                 len(lines) == 1 and lines[0].startswith(fetched_file + ' (debuginfod: fetched'))
        chk.eq('no warning', warning_codes(run.doc), [])

        chk.prefix = '[served, again] '
        run = session.run([exe], opts=opts, env=env)
        check_lifecycle(chk, run)
        lines = debug_file_lines(run, exe)
        chk.true('not fetched again (%s)' % lines, not any('fetched' in l for l in lines))

        chk.prefix = '[attach] '
        # -p: fetched while the threads run, before they are stopped
        target = session.target('idle_stripped', [4])
        pid = target.ready(timeout=60)[0]
        run, proc = session.start_attach(pid, opts=('-q', '--duration=0.3', '--debug=sym,tracer'),
                                         env=env)
        session.wait(run, proc, 40)
        load_doc(run)
        log = run.stderr_text().splitlines()
        fetch = [i for i, l in enumerate(log) if re.search(
            r'debug file of \S*fixture-idle-stripped: \S+ \(debuginfod: fetched', l)]
        stopped = [i for i, l in enumerate(log) if 'attach: all stopped' in l]
        print('attach: fetched at log line %s, all stopped at %s' % (fetch, stopped))
        if backend() == 'kernel':   # (which stops no one)
            chk.eq('fetched once (lines %s)' % fetch, len(fetch), 1)
        else:
            chk.true('fetched before the threads were stopped (lines %s, %s)' % (fetch, stopped),
                     len(fetch) == 1 and len(stopped) == 1 and fetch[0] < stopped[0])
        workers = [s for s in thread_spans(run.doc) if s['origin'] != 'main']
        chk.eq('attach: 4 workers', len(workers), 4)
        for s in workers:
            sr = s['start_routine'] or {}
            chk.true('attach: %s named idle_worker (idle.c)' % s['tid'],
                     sr.get('symbol') == 'idle_worker' and
                     os.path.basename(sr.get('file') or '') == 'idle.c', s)
        check_untouched(chk, pid, 'after the attach')
        target.send('q')
        check_target_exit(chk, target, 'released', timeout=30)

        chk.prefix = '[server gone] '
        server.stop()
        empty_dir(client_cache)
        run = session.run([exe], opts=opts, env=env, timeout=60)
        check_lifecycle(chk, run, stripped=True)
        check_stripped_text(chk, run)
        print('elapsed with a dead server: %.2f s' % run.elapsed)
        chk.true('bounded time with a dead server (%.2f s < 10 s)' % run.elapsed,
                 run.elapsed < 10)
        chk.eq('one warning', warning_codes(run.doc), ['debuginfod_failed'])
        lines = debug_file_lines(run, exe)
        chk.true('not found (%s)' % lines, lines and all(l.startswith('none') for l in lines))
        # asked once in the session, whichever module was first (the
        # executable; libc on the kernel path, whose probes go in first)
        asks = debug_file_lines(run, None)
        chk.eq('asked once in the session (%s)' % asks,
               sum('(debuginfod: ' in l for l in asks), 1)

        chk.prefix = '[silent server] '
        # Accepts connections (the kernel does, into the backlog) and never
        # answers: only a timeout ends the query. libdebuginfod's own default
        # is 90 s, three times; ptwatch's is 5 s, once.
        with socket.socket() as silent:
            silent.bind(('127.0.0.1', 0))
            silent.listen(16)
            env['DEBUGINFOD_URLS'] = 'http://127.0.0.1:%d' % silent.getsockname()[1]
            run = session.run([exe], opts=opts, env=env, timeout=60)
        check_lifecycle(chk, run, stripped=True)
        print('elapsed with a silent server: %.2f s' % run.elapsed)
        chk.true('bounded by ptwatch\'s DEBUGINFOD_TIMEOUT (%.2f s < 12 s)' % run.elapsed,
                 run.elapsed < 12)
        chk.eq('one warning', warning_codes(run.doc), ['debuginfod_failed'])
        msg = ' '.join(w['message'] for w in run.doc['warnings'])
        chk.true('it names the timeout (%s)' % msg, 'DEBUGINFOD_TIMEOUT=5' in msg)

        chk.prefix = '[server back] '
        server.start()
        env['DEBUGINFOD_URLS'] = server.url
        run = session.run([exe], opts=opts, env=env)
        check_lifecycle(chk, run)
        lines = debug_file_lines(run, exe)
        chk.true('fetched again (%s)' % lines,
                 len(lines) == 1 and lines[0].startswith(fetched_file + ' (debuginfod: fetched'))
        chk.eq('no warning', warning_codes(run.doc), [])
    finally:
        server.stop()
    chk.prefix = ''


def loaded_debuginfod(ld_dir):
    """The processes (LD_DEBUG=files, LD_DEBUG_OUTPUT=ld_dir/ld) that
    loaded libdebuginfod."""
    pids = set()
    for name in os.listdir(ld_dir):
        with open(os.path.join(ld_dir, name), 'rb') as f:
            for line in f:
                if b'file=libdebuginfod.so' in line:
                    pids.add(line.split(b':')[0].strip().decode())
    return sorted(pids)


@test('debug-files-here', timeout=90, kernel=True)
@case('debug-files-here')
def case_debug_files_here(session, chk):
    """Without debuginfod servers (DEBUGINFOD_URLS unset, then empty) a
    module without a debug file must not make ptwatch load libdebuginfod
    (elfutils 0.188 loads it all the same, with libcurl, GnuTLS and
    libcrypto: 8 MiB, for no server), and the debug files here are still
    found wherever libdwfl looks: FILE.debug beside the file, in .debug
    there, by a debuglink, under /usr/lib/debug by build-id (libc). The
    runs share one symbol cache: a debug file put beside the program
    between two runs must be used by the second."""
    objcopy = shutil.which('objcopy')
    if not objcopy:
        raise Skip('objcopy is not installed (scripts/deps.sh installs binutils)')
    work = session.mkdtemp()
    home = session.mkdtemp()
    debug = fixture('lifecycle_debug')
    # (step, DEBUGINFOD_URLS, where the debug file is, a search is made:
    # the cache cannot answer)
    for step, urls, place, search in (
            ('none', None, None, True),
            ('none, DEBUGINFOD_URLS empty', '', None, False),
            ('beside', None, 'app.debug', True),
            ('in .debug', None, '.debug/app.debug', False),
            ('in .debug, another cache', None, '.debug/app.debug', True),
            ('by debuglink', None, None, True),
            ('gone again', None, None, True)):
        chk.prefix = '[%s] ' % step
        d = os.path.join(work, re.sub(r'\W+', '-', step))
        os.makedirs(os.path.join(d, '.debug'))
        ld = os.path.join(d, 'ld')
        os.makedirs(ld)
        app = os.path.join(d, 'app')
        if step == 'by debuglink':
            # the link names the file's base name, the CRC its content
            subprocess.run([objcopy, '--add-gnu-debuglink=' + debug, fixture('stripped'), app],
                           check=True)
            shutil.copy(debug, os.path.join(d, '.debug', os.path.basename(debug)))
        else:
            shutil.copy(fixture('stripped'), app)
        if place:
            shutil.copy(debug, os.path.join(d, place))
        env = {'DEBUGINFOD_URLS': urls, 'LD_DEBUG': 'files',
               'LD_DEBUG_OUTPUT': os.path.join(ld, 'ld'),
               'XDG_CACHE_HOME': session.mkdtemp() if 'another cache' in step else home}
        run = session.run([app], opts=['-q', '--debug=sym'], env=env)
        named = step == 'by debuglink' or place is not None
        if named:
            check_lifecycle(chk, run)
        else:
            check_lifecycle(chk, run, stripped=True)
        found = debug_file_lines(run, app)
        chk.eq('searched for the debug file of app (%s)' % found, bool(found), search)
        chk.true('what the search found: %s' % found,
                 all(f.startswith(d + '/') == named for f in found))
        chk.eq('processes that loaded libdebuginfod', loaded_debuginfod(ld), [])
    chk.prefix = ''


@test('minidebuginfo', kernel=True)
@case('minidebuginfo')
def case_minidebuginfo(session, chk):
    """A stripped fixture with MiniDebugInfo (.gnu_debugdata, as Fedora
    ships): start routines and create sites named from it, without file:line;
    with and without debug files; through the symbol cache, also when a
    file of the same build-id but another content (the stripped copy) used
    the cache in between."""
    exe = fixture('minidebuginfo')
    home = session.mkdtemp()
    env = {'XDG_CACHE_HOME': home, 'DEBUGINFOD_URLS': None}
    for what, opts, fix, symbols in (('first run', ['-q'], exe, True),
                                     ('second run (cache)', ['-q'], exe, True),
                                     ('--no-debug-files', ['-q', '--no-debug-files'], exe, True),
                                     ('the stripped copy', ['-q'], fixture('stripped'), False),
                                     ('after the stripped copy', ['-q'], exe, True),
                                     ('again', ['-q'], exe, True)):
        chk.prefix = '[%s] ' % what
        run = session.run([fix], opts=opts + ['--debug=sym'], env=env)
        if symbols:
            check_lifecycle(chk, run, symbols_only=True)
        else:
            check_lifecycle(chk, run, stripped=True)
        opens = re.findall(r'cache \S+ for %s: ([^,]+),' % re.escape(fix), run.stderr_text())
        print('%s: cache %s' % (what, opens))
        if what == 'second run (cache)' or what == 'again':
            chk.eq('the cache was used', opens, ['loaded'])
    chk.prefix = ''
