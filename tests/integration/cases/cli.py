"""The command line and its documentation: bash completion, --help
against the man page, meson install."""

import json
import os
import re
import shutil
import subprocess

from ptw_test import case, Failed, fixture, FrameworkError, ptwatch_path, Skip, test
from helpers import run_ptwatch

# the source tree (tests/integration/cases/cli.py)
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))


@test('completion', timeout=30, kernel=True)
@case('completion')
def case_completion(session, chk):
    """completions/ptwatch in a real bash: options from ptwatch --help, values
    of --debug, a command after "--"."""
    script = os.path.join(os.environ.get('PTW_FIXTURE_SRC', '.'), '..', '..', 'completions',
                          'ptwatch')
    if not os.path.exists(script):
        raise FrameworkError('no completion script at %s' % script)
    bindir = os.path.dirname(ptwatch_path())

    def complete(*words):
        prog = ('PATH=%s:$PATH; source %s; COMP_WORDS=(%s); COMP_CWORD=%d; _ptwatch; '
                'printf "%%s\\n" "${COMPREPLY[@]}"'
                % (bindir, script, ' '.join("'%s'" % w for w in words), len(words) - 1))
        p = subprocess.run(['bash', '-c', prog], capture_output=True, text=True, timeout=20)
        return [w for w in p.stdout.split('\n') if w]

    chk.eq('--tr completes to --trace=', complete('ptwatch', '--tr'), ['--trace='])
    got = complete('ptwatch', '--')
    for opt in ('--pid=', '--snapshot', '--json', '--output=', '--open-timeout=', '--trace='):
        chk.true('%s among the long options (%s)' % (opt, got), opt in got)
    chk.eq('--debug values', complete('ptwatch', '--debug', '=', 's'), ['sym', 'spans'])
    chk.eq('--backend values', complete('ptwatch', '--backend', '=', 'k'), ['kernel'])
    chk.true('a command after --', 'true' in complete('ptwatch', '-q', '--', 'tru'))


# ---------------------------------------------------------------------------
# --help and the man page list the same options; meson install

def long_options(text):
    return set(re.findall(r'(?<![\w-])--([a-z][a-z0-9-]+)', text))


@test('help-man', timeout=30,
      kernel='the man page, --help and the README against each other: no backend runs')
@case('help-man')
def case_help_man(session, chk):
    help_ = run_ptwatch(['--help']).stdout.decode()
    with open(os.path.join(ROOT, 'man', 'ptwatch.1')) as f:
        man = f.read().replace('\\-', '-').replace('\\fB', '').replace('\\fR', '') \
            .replace('\\fI', '').replace('\\fP', '')
    # the OPTIONS section's entries; the man page names other programs'
    # options elsewhere (strace -f ...)
    opts_section = man[man.index('.SH OPTIONS'):]
    opts_section = opts_section[:opts_section.index('\n.SH ', 1)]
    in_help, in_man = long_options(help_), long_options(opts_section)
    print('--help: %s' % sorted(in_help))
    chk.eq('options in --help, not in the man page', sorted(in_help - in_man), [])
    chk.eq('options in the man page, not in --help', sorted(in_man - in_help), [])
    for fmt in ('json-lines', 'chrome', 'report'):
        chk.true('the man page documents %s' % fmt, fmt in man)


@test('install', kernel='installs the build (meson install): no backend runs')
@case('install')
def case_install(session, chk):
    build = os.path.dirname(ptwatch_path())
    dest = session.mkdtemp()
    meson = shutil.which('meson')
    if not meson:
        raise Skip('no meson')
    p = subprocess.run([meson, 'install', '-C', build, '--no-rebuild', '--destdir', dest,
                        '--quiet'], stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    if p.returncode != 0:
        raise Failed('meson install: %s' % p.stdout.decode()[-2000:])
    found = set()
    for root, _, files in os.walk(dest):
        for f in files:
            found.add(os.path.relpath(os.path.join(root, f), dest))
    print('\n'.join(sorted(found)))
    for want in (r'bin/ptwatch$', r'share/man/man1/ptwatch\.1', r'share/ptwatch/spans\.schema\.json$',
                 r'share/ptwatch/lines\.schema\.json$'):
        chk.true('installed: %s' % want, any(re.search(want, f) for f in found))


# ---------------------------------------------------------------------------
# --backend: which one runs, and why (the document, the summary)

@test('backend-choice', kernel='chooses the backend itself (--backend, PTWATCH_BACKEND, auto)')
@case('backend-choice')
def case_backend_choice(session, chk):
    """--backend and PTWATCH_BACKEND: the document's session.backend and
    backend_why, the summary's line, and the refusals (a bad name, the
    kernel path with --snapshot or an option it does not do)."""
    def doc_of(argv, env=None):
        p = run_ptwatch(argv, env=env)
        try:
            return p, json.loads(p.stdout.decode())
        except ValueError:
            return p, None

    p = run_ptwatch(['--backend=bogus', '--', 'true'])
    chk.eq('--backend=bogus: exit status', p.returncode, 2)
    chk.true('--backend=bogus: says the names (%r)' % p.stderr,
             b'none of auto, ptrace, kernel' in p.stderr)
    p = run_ptwatch(['--', 'true'], env={'PTWATCH_BACKEND': 'nope'})
    chk.eq('PTWATCH_BACKEND=nope: exit status', p.returncode, 2)
    # --snapshot on the kernel path: no thread stopped (the kernel's
    # registers), or one line saying why it cannot run here
    sleeper = subprocess.Popen(['sleep', '60'])
    try:
        p, d = doc_of(['--json', '--backend=kernel', '--snapshot', '-p', str(sleeper.pid)])
    finally:
        sleeper.kill()
        sleeper.wait()
    if p.returncode == 0:
        chk.eq('--backend=kernel --snapshot: backend', d and d['session']['backend'], 'kernel')
        chk.eq('--backend=kernel --snapshot: frozen_ns', d and d['session']['frozen_ns'], 0)
    else:
        chk.eq('--backend=kernel --snapshot where it cannot run: exit status', p.returncode, 1)
        chk.eq('... one line', len(p.stderr.decode().strip().splitlines()), 1)

    p, d = doc_of(['--json', '-q', '--backend=ptrace', '--', 'true'], env={'PTWATCH_BACKEND': 'kernel'})
    chk.eq('--backend=ptrace over PTWATCH_BACKEND=kernel: backend', d and d['session']['backend'], 'ptrace')
    chk.eq('--backend=ptrace: why', d and d['session']['backend_why'], '--backend=ptrace')
    chk.eq('--backend=ptrace: no probes', d and d['session']['probes'], 0)
    chk.eq('schema', d and d['schema'], 'ptwatch.spans/11')

    p, d = doc_of(['--json', '-q', '--backend=kernel', '--', 'true'])
    if p.returncode != 0:
        # the kernel path cannot run here: one line that says why, exit 1
        err = p.stderr.decode()
        chk.eq('--backend=kernel where it cannot run: exit status', p.returncode, 1)
        chk.true('one line, the reason (%r)' % err,
                 err.count('\n') == 1 and '--backend=kernel cannot run' in err)
        p, d = doc_of(['--json', '-q', '--', 'true'], env={'PTWATCH_BACKEND': 'auto'})
        chk.eq('auto where the kernel path cannot run: ptrace', d and d['session']['backend'], 'ptrace')
        chk.true('auto says why (%r)' % (d and d['session']['backend_why']),
                 d and d['session']['backend_why'].startswith('auto: the kernel path cannot run here'))
        raise Skip('the kernel path cannot run here: %s' % err.strip())
    chk.eq('--backend=kernel: backend', d['session']['backend'], 'kernel')
    chk.eq('--backend=kernel: why', d['session']['backend_why'], '--backend=kernel')
    chk.true('--backend=kernel: probes (%d)' % d['session']['probes'], d['session']['probes'] > 0)
    chk.eq('--backend=kernel: no ptrace stop', d['session']['stops']['total'], 0)
    chk.eq('--backend=kernel: nothing frozen', d['session']['frozen_ns'], 0)
    chk.eq('--backend=kernel: exit', d['target']['exit'], {'code': 0})
    # -f: each followed process has links of its own (docs/design.md,
    # Facts, 16): nothing to say of the machine, and auto takes it (before:
    # its probes were on the files for every process, said here, and auto
    # took ptrace)
    p = run_ptwatch(['--json', '--backend=kernel', '-f', '--', 'true'])
    d = json.loads(p.stdout.decode())
    chk.eq('--backend=kernel -f: why', d['session']['backend_why'], '--backend=kernel')
    chk.eq('... no warning', d['warnings'], [])
    p, d = doc_of(['--json', '-q', '-f', '--', 'true'], env={'PTWATCH_BACKEND': 'auto'})
    chk.eq('auto -f as root: kernel', d and d['session']['backend'], 'kernel')
    p, d = doc_of(['--json', '-q', '--', 'true'], env={'PTWATCH_BACKEND': 'auto'})
    chk.eq('auto as root: kernel', d and d['session']['backend'], 'kernel')
    chk.true('auto says why', d and d['session']['backend_why'].startswith('auto: '))
    # --trace too, a C++ program among them (its returns by probes on the
    # functions' exits: no uretprobe trampoline for its unwinder)
    p, d = doc_of(['--json', '-q', '--trace', 'frx::*', '--', fixture('frames_cxx')],
                  env={'PTWATCH_BACKEND': 'auto'})
    chk.eq('auto --trace, a C++ program: kernel', d and d['session']['backend'], 'kernel')
    chk.eq('... its frames', d and len([s for s in d['spans'] if s['kind'] == 'frame']), 5)
    # a static program: the kernel path where its symbols name the probe
    # points, ptrace where it is stripped
    for name, want in (('static', 'kernel'), ('static_stripped', 'ptrace')):
        p, d = doc_of(['--json', '-q', '--', fixture(name)], env={'PTWATCH_BACKEND': 'auto'})
        chk.eq('auto, the %s fixture: backend' % name, d and d['session']['backend'], want)
        if want == 'ptrace':
            chk.true('auto says why (%r)' % (d and d['session']['backend_why']),
                     d and 'static program without the symbols' in d['session']['backend_why'])
    p, d = doc_of(['--json', '-q', '--', 'false'], env={'PTWATCH_BACKEND': 'kernel'})
    chk.eq('PTWATCH_BACKEND=kernel: backend', d and d['session']['backend'], 'kernel')
    chk.eq('PTWATCH_BACKEND=kernel: false exits 1', p.returncode, 1)
    p = run_ptwatch(['-q', '--backend=kernel', '--', 'true'])
    err = p.stderr.decode()
    chk.true('the summary says the kernel path (%r)' % err,
             'kernel path: ' in err and 'no ptrace stop' in err and '(--backend=kernel)' in err)
    p = run_ptwatch(['--backend=kernel', '--', 'no-such-command-ptw'])
    chk.eq('--backend=kernel, a missing command: 127', p.returncode, 127)
    chk.true('command not found (%r)' % p.stderr, b'command not found' in p.stderr)
