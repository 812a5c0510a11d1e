#!/usr/bin/python3
"""ptwatch's integration tests: run.py CASE [ARGS...].

Each case runs ptwatch on a fixture (tests/fixtures), validates the JSON
document against the schema and compares it with the fixture's own truth.
The cases live in tests/integration/cases/*.py, one module per family
(launch, attach, snapshot, ending, ...), each registering its cases with
@case('name') (ptw_test.CASES); this driver imports every module there and
runs the one case named. Helpers: ptw_test.py (running ptwatch, the
document, the truth, Check, Model, Target) and helpers.py (what several
families share). tests/integration/meson.build lists the cases with their
arguments and timeouts.

Exit codes: 0 pass, 1 failure, 77 skip, 99 framework error.
"""

import glob
import importlib
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

from ptw_test import CASES, main, meson_lines  # noqa: E402


def load_cases():
    for path in sorted(glob.glob(os.path.join(HERE, 'cases', '*.py'))):
        name = os.path.basename(path)[:-3]
        if not name.startswith('_'):
            importlib.import_module('cases.' + name)
    return CASES


if __name__ == '__main__':
    if sys.argv[1:] == ['--meson']:
        # the tests' list for meson (ptw_test.test): configure-time
        load_cases()
        print('\n'.join(meson_lines()))
        sys.exit(0)
    main(load_cases())
