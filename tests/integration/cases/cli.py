"""The command line and its documentation: bash completion, --help
against the man page, meson install."""

import os
import re
import shutil
import subprocess

from ptw_test import case, Failed, FrameworkError, ptwatch_path, Skip
from helpers import run_ptwatch

# the source tree (tests/integration/cases/cli.py)
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))


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
    chk.true('a command after --', 'true' in complete('ptwatch', '-q', '--', 'tru'))


# ---------------------------------------------------------------------------
# --help and the man page list the same options; meson install

def long_options(text):
    return set(re.findall(r'(?<![\w-])--([a-z][a-z0-9-]+)', text))


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
