#!/usr/bin/python3
"""A fast exec chain whose images are read late: tests/fixtures/execchain.c
(a launched image that execs itself N times, each image making and joining
two chain_workers) under ptw-kernel-demo, its modules read from /proc
(--modules-from-proc) and each image's read at main() 20 ms late
(--main-read-delay-ms): by then the process runs a later image, its files
at other addresses. A read of a later image must not name an earlier
one's code: every start routine is chain_worker or unnamed, never another
name or an address named wrong; the first image's (read at its exec,
before the chain went on) are named; and each image left unnamed is said
(the note "N exec'd images ended before their modules could be read"),
two threads each. Before, the first image took a later one's modules at
its main(), its threads unnamed, and unnamed threads went unsaid.

    kexecchain.py PTW_KERNEL_DEMO EXECCHAIN      (exit 0 pass, 1 fail, 77 skip)
"""
import os
import re
import subprocess
import sys
import tempfile

demo, chain = (os.path.abspath(a) for a in sys.argv[1:3])
IMAGES = 30
CREATE = re.compile(r'^\s*[\d.]+\s+\d+\s+create\s+tid (\d+) pthread \S+ (\S+?)\(')
NOTE = re.compile(r"note: (\d+) exec'd images ended before their modules could be read")


def main():
    with tempfile.TemporaryDirectory(prefix='ptw-kexecchain-') as tmp:
        env = dict(os.environ, PTWATCH_TRUTH=os.path.join(tmp, 'truth.jsonl'))
        run = subprocess.run([demo, '--modules-from-proc', '--main-read-delay-ms', '20', '--',
                              chain, str(IMAGES)], env=env, cwd=tmp, stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE, timeout=100)
    if run.returncode == 77:
        print('SKIP: %s' % run.stderr.decode(errors='replace').strip())
        return 77
    out = run.stdout.decode(errors='replace')
    err = run.stderr.decode(errors='replace')
    if run.returncode != 0:
        print('FAIL: ptw-kernel-demo exit %d\n%s' % (run.returncode, err[-2000:]))
        return 1
    routines = [m.group(2) for m in map(CREATE.match, out.splitlines()) if m]
    notes = [int(m.group(1)) for m in NOTE.finditer(err)]
    unsaid = len(routines) - routines.count('chain_worker') - 2 * sum(notes)
    fails = []
    if len(routines) != 2 * (IMAGES + 1):
        fails.append('%d creations, %d images: %s' % (len(routines), IMAGES + 1, routines))
    wrong = sorted(set(r for r in routines if r not in ('chain_worker', '?')))
    if wrong:
        fails.append('routines named from another image: %s' % wrong)
    if routines[:2] != ['chain_worker', 'chain_worker']:
        fails.append("the first image's routines: %s" % routines[:2])
    if unsaid:
        fails.append('%d of %d routines unnamed and unsaid (notes: %s)'
                     % (unsaid, len(routines), notes))
    print('%d routines: %d chain_worker, %d unnamed; notes %s'
          % (len(routines), routines.count('chain_worker'),
             len(routines) - routines.count('chain_worker'), notes))
    for f in fails:
        print('FAIL: ' + f)
    return 1 if fails else 0


sys.exit(main())
