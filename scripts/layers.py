#!/usr/bin/python3
# SPDX-License-Identifier: MIT
"""Does any source file call a file of a layer below its own?

docs/design.md, Layers: data flows one way, down the table; a file may
call files of its own folder and of the folders above it, never below.
For every object file of ptwatch (the libraries and the program, not tests
or fixtures), the symbols it uses that another folder's object defines are
checked against LAYERS. Prints each call that goes down, and exits 1 if
there is one (0 if none, 2 if the build is missing).

    scripts/layers.py [BUILD_DIR]      (default: build)
"""
import glob
import os
import subprocess
import sys

# docs/design.md's table, top first: a folder may call the ones before it.
LAYERS = [
    'util',
    'attach',
    'symbols',
    'thread_db',
    'breakpoints',
    'glibc',
    'observe',
    'tracer',
    'kernel',
    'record',
    'spans',
    'output',
    'session',
    'guardian',
    'main',
]
LIBS = ['libptwcore.a.p', 'libptwtracer.a.p', 'libptwkernel.a.p', 'libptwkconv.a.p', 'ptwatch.p']


def folder(obj):
    """src_tracer_core.c.o -> 'tracer'; src_main.c.o -> 'main'."""
    name = os.path.basename(obj)
    if not name.startswith('src_'):
        return None  # (generated: the BPF skeleton's, the BTF's)
    rest = name[len('src_'):]
    if rest.startswith('main.c'):
        return 'main'
    for f in LAYERS:
        if rest.startswith(f + '_'):
            return f
    return '?' + rest


def symbols(obj, *flags):
    out = subprocess.run(['nm'] + list(flags) + [obj], capture_output=True, text=True,
                         check=True).stdout
    return {line.split()[-1] for line in out.splitlines() if line.strip()}


def main():
    build = sys.argv[1] if len(sys.argv) > 1 else 'build'
    objs = sorted(o for lib in LIBS for o in glob.glob(os.path.join(build, lib, '*.o')))
    if not objs:
        print('layers: no object files under %s (build first)' % build, file=sys.stderr)
        return 2
    defined = {}
    for o in objs:
        for s in symbols(o, '--defined-only', '-g'):
            defined.setdefault(s, o)
    bad = 0
    for o in objs:
        mine = folder(o)
        if mine is None:
            continue
        if mine.startswith('?'):
            print('layers: %s is in no layer of LAYERS (docs/design.md)' % o)
            bad += 1
            continue
        down = {}
        for s in symbols(o, '-u'):
            d = defined.get(s)
            theirs = folder(d) if d else None
            if theirs and not theirs.startswith('?') and LAYERS.index(theirs) > LAYERS.index(mine):
                down.setdefault(d, []).append(s)
        for d, syms in sorted(down.items()):
            bad += 1
            print('%s (%s) calls %s (%s, below it): %s'
                  % (os.path.basename(o)[4:-2].replace('_', '/', 1), mine,
                     os.path.basename(d)[4:-2].replace('_', '/', 1), folder(d),
                     ' '.join(sorted(syms))))
    if not bad:
        print('layers: no file calls a layer below its own')
    return 1 if bad else 0


if __name__ == '__main__':
    sys.exit(main())
