#!/usr/bin/python3
"""The tests that did not run, said plainly after `make check`.

    test-skips.py BUILD_DIR [--fail]

Reads BUILD_DIR/meson-logs/testlog.json (what the last `meson test` ran)
and lists every skipped test with the reason it printed (a "SKIP: ..."
line), grouped by reason. A developer without root, or without the kernel
path's dependencies, sees here what was not tested and why. With --fail
(or PTW_NO_SKIPS=1 in the environment, which .ci/run sets: CI runs as
root with every dependency installed), any skip is a failure: a test that
cannot run where it should must not pass unnoticed.
"""
import json
import os
import sys


def main(argv):
    if len(argv) < 2:
        print(__doc__.strip(), file=sys.stderr)
        return 2
    log = os.path.join(argv[1], 'meson-logs', 'testlog.json')
    strict = '--fail' in argv[2:] or os.environ.get('PTW_NO_SKIPS') == '1'
    try:
        with open(log) as f:
            results = [json.loads(line) for line in f if line.strip()]
    except (OSError, ValueError) as e:
        print('test-skips: cannot read %s: %s' % (log, e), file=sys.stderr)
        return 1
    skipped = {}
    for r in results:
        if r.get('result') != 'SKIP':
            continue
        out = (r.get('stdout') or '') + (r.get('stderr') or '')
        why = next((l[5:].strip() for l in out.splitlines() if l.startswith('SKIP:')),
                   'no reason printed')
        skipped.setdefault(why, []).append(r['name'])
    n = sum(len(v) for v in skipped.values())
    if not n:
        print('test-skips: every test of the %d ran (none skipped)' % len(results))
        return 0
    print('test-skips: %d of the %d tests did not run here:' % (n, len(results)))
    for why, names in sorted(skipped.items(), key=lambda kv: -len(kv[1])):
        shown = ', '.join(sorted(names)[:6]) + (', ...' if len(names) > 6 else '')
        print('  %d: %s\n     (%s)' % (len(names), why, shown))
    if strict:
        print('test-skips: a skip is a failure here (PTW_NO_SKIPS=1 or --fail)', file=sys.stderr)
        return 1
    return 0


if __name__ == '__main__':
    sys.exit(main(sys.argv))
