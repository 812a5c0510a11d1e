"""Another tool's breakpoints where ptwatch hooks (issue 32): bpftrace
(Debian's package, scripts/deps.sh) holds uprobes on libc's pthread_create
and start_thread and on ld.so's _dl_debug_state, in every process that maps
them, while ptwatch --backend=ptrace traces the lifecycle fixture. Before,
ptwatch read their int3 at _dl_debug_state as the program's own, never set
up libthread_db (strategy lwp: 0 of 10 start routines, no join), and the
kernel took ptwatch's own int3 at libc's join, exit, cancel and detach in a
process with uprobes (the joins of 9 threads lost). They run alone and
last: bpftrace's uprobes are in every process while it runs, and the kernel
was seen to keep its uprobe at _dl_debug_state after it ended (no_dl_debug_state:
"never reached ptwatch's breakpoint")."""

import os
import re
import shutil
import signal
import subprocess

from ptw_test import test
from ptw_test import case, check_exit, fixture, FrameworkError, Model, Skip, truth_of, wait_for
from cases.launch import check_lifecycle


def mapped(name):
    """The path this process maps `name` from (the fixture maps the same:
    one libc, one ld.so on the machine)."""
    with open('/proc/self/maps') as f:
        for line in f:
            fields = line.split()
            if len(fields) >= 6 and os.path.basename(fields[5]) == name:
                return fields[5]
    raise FrameworkError('this process maps no %s' % name)


def symbol_offset(path, symbol, debug=False):
    """symbol's address in path (its debug file's symbol table if debug:
    start_thread is static), from nm: the file offset as well in libc and
    ld.so, whose text is mapped at its offset."""
    target = path
    if debug:
        notes = subprocess.run(['readelf', '-n', path], capture_output=True, text=True,
                               check=True).stdout
        m = re.search(r'Build ID: ([0-9a-f]{2})([0-9a-f]+)', notes)
        if not m:
            raise FrameworkError('%s has no build id' % path)
        target = '/usr/lib/debug/.build-id/%s/%s.debug' % (m.group(1), m.group(2))
        if not os.path.exists(target):
            raise FrameworkError('%s is missing (libc6-dbg: scripts/deps.sh)' % target)
    out = subprocess.run(['nm', '-D' if not debug else '-a', target], capture_output=True,
                         text=True, check=True).stdout
    for line in out.splitlines():
        f = line.split()
        if len(f) == 3 and f[2].split('@')[0] == symbol and f[1] in 'tTiW':
            return int(f[0], 16)
    raise FrameworkError('no %s in %s' % (symbol, target))


def text_byte(path, offset):
    """The byte at offset of path's mapping in this process, as it runs."""
    with open('/proc/self/maps') as f:
        for line in f:
            fields = line.split()
            if len(fields) < 6 or fields[5] != path:
                continue
            lo, hi = (int(x, 16) for x in fields[0].split('-'))
            foff = int(fields[2], 16)
            if foff <= offset < foff + hi - lo:
                with open('/proc/self/mem', 'rb') as mem:
                    mem.seek(lo + offset - foff)
                    return mem.read(1)[0]
    return None


def check_dlopen(chk, run, lib, loads):
    """The dlopen fixture's run: every thread as its truth says (dl_worker's
    in lib), its library loads, and no no_dl_debug_state warning: the loads
    were followed."""
    for t in truth_of(run, 'thread'):
        if t['routine'] == 'dl_worker':
            t['source'] = 'dlmod.c'
            t['module'] = lib
    chk.eq('dlopen: library loads', len(truth_of(run, 'library')), loads)
    Model(chk, run, 'dlopen.c').check_complete()
    chk.true('dlopen: no no_dl_debug_state warning (%s)' % run.doc['warnings'],
             not any(w['code'] == 'no_dl_debug_state' for w in run.doc['warnings']))


@test('foreign-uprobes', timeout=90, alone=True,
      kernel='the kernel path puts its uprobes beside another tool\'s: the kernel runs both '
             '(no int3 of its own to move)')
@test('foreign-uprobes-elsewhere', 'elsewhere', timeout=90, alone=True,
      kernel='the kernel path puts its uprobes beside another tool\'s: the kernel runs both '
             '(no int3 of its own to move)')
@case('foreign-uprobes')
def case_foreign_uprobes(session, chk, where='hooks'):
    """where: 'hooks', bpftrace at points ptwatch hooks; 'elsewhere', at
    one it does not (getppid): the process has uprobes all the same, and
    where the kernel still keeps a uprobe at one of libc's thread
    functions (one whose last user has gone: docs/design.md, Facts, 15)
    it took ptwatch's int3 there, with no foreign int3 to tell (on this
    machine the joins of 9 threads were lost)."""
    if os.geteuid() != 0:
        raise Skip('bpftrace needs root')
    bpftrace = shutil.which('bpftrace')
    if not bpftrace:
        raise FrameworkError('no bpftrace (scripts/deps.sh installs it)')
    libc, ld = mapped('libc.so.6'), mapped('ld-linux-x86-64.so.2')
    create = symbol_offset(libc, 'pthread_create')
    start = symbol_offset(libc, 'start_thread', debug=True)
    if where == 'elsewhere':
        create = symbol_offset(libc, 'getppid')
        script = 'uprobe:%s:getppid { @getppid = count(); }' % libc
    else:
        # (by process: another process may make threads meanwhile, a
        # kernel path session of the case before closing its links in
        # the background, say)
        script = ('uprobe:%s:pthread_create { @creates[pid] = count(); } '
                  'uprobe:%s:0x%x { @starts[pid] = count(); } '
                  'uprobe:%s:_dl_debug_state { @loads[pid] = count(); }' % (libc, libc, start, ld))
    out_path = os.path.join(session.mkdtemp(), 'bpftrace.out')
    with open(out_path, 'w') as out:
        bt = subprocess.Popen([bpftrace, '-e', script], stdout=out, stderr=subprocess.STDOUT,
                              stdin=subprocess.DEVNULL)
    try:
        # its uprobes are file-wide: in this process's libc too once they are in
        if not wait_for(lambda: text_byte(libc, create) == 0xcc or bt.poll() is not None, 60):
            raise FrameworkError('bpftrace\'s uprobe at 0x%x not in after 60 s' % create)
        if bt.poll() is not None:
            raise FrameworkError('bpftrace ended: %s' % open(out_path).read()[-2000:])
        run = session.run([fixture('lifecycle')], opts=['-q'])
        # a library loaded by dlopen: ld.so's _dl_debug_state is a lone
        # ret, its hook cannot move: the return sites of its callers
        lib = fixture('dlmod')
        dl_run = session.run([fixture('dlopen'), lib], opts=['-q']) if where == 'hooks' else None
    finally:
        bt.send_signal(signal.SIGINT)
        try:
            bt.wait(30)
        except subprocess.TimeoutExpired:
            bt.kill()
            bt.wait()
    said = open(out_path).read()
    print('bpftrace: %s' % ' '.join(l for l in said.splitlines() if l.startswith('@')))

    # The same spans, fields and truth as without bpftrace.
    check_lifecycle(chk, run)
    chk.eq('session.strategy (libthread_db set up)', run.doc['session'].get('strategy'),
           'debuginfo')
    if where == 'elsewhere':
        chk.true('no foreign_breakpoint warning: none is where ptwatch hooks (%s)'
                 % run.doc['warnings'],
                 not any(w['code'] == 'foreign_breakpoint' for w in run.doc['warnings']))
        return
    chk.true('no no_dl_debug_state warning: library loads followed (%s)' % run.doc['warnings'],
             not any(w['code'] == 'no_dl_debug_state' for w in run.doc['warnings']))
    check_exit(chk, dl_run, code=0)
    check_dlopen(chk, dl_run, lib, 2)
    # said once, naming the place
    foreign = [w for w in run.doc['warnings'] if w['code'] == 'foreign_breakpoint']
    chk.true('a foreign_breakpoint warning names _dl_debug_state (%s)'
             % [w['message'] for w in foreign],
             any('_dl_debug_state' in w['message'] for w in foreign), run.doc['warnings'])
    chk.true('no hook_failed warning (%s)' % run.doc['warnings'],
             not any(w['code'] == 'hook_failed' for w in run.doc['warnings']))
    # bpftrace saw every creation and start (ptwatch took none of its traps)
    pids = {r.doc['target']['pid'] for r in (run, dl_run)}
    counts = {}
    for name, pid, n in re.findall(r'^@(\w+)\[(\d+)\]: (\d+)$', said, re.M):
        if int(pid) in pids:
            counts[name] = counts.get(name, 0) + int(n)
    created = sum(1 for r in (run, dl_run) for s in r.doc['spans'] if s.get('origin') == 'created')
    chk.eq('bpftrace @creates (the fixtures\')', counts.get('creates', -1), created)
    chk.eq('bpftrace @starts (the fixtures\')', counts.get('starts', -1), created)
    chk.true('bpftrace @loads (%s)' % counts.get('loads'), counts.get('loads', 0) >= 2)


def perf_uprobe(path, offset, pid):
    """A uprobe of the kernel's own at offset of path (perf_event_open,
    the uprobe PMU), for process pid alone (the kernel's filter: its int3
    is in that process only) or, pid -1, for every process. Returns its
    descriptor: the uprobe lasts while it is open."""
    import ctypes
    import struct
    libc = ctypes.CDLL(None, use_errno=True)
    with open('/sys/bus/event_source/devices/uprobe/type') as f:
        kind = int(f.read())
    name = ctypes.create_string_buffer(path.encode())
    attr = bytearray(128)  # struct perf_event_attr
    struct.pack_into('IIQ', attr, 0, kind, len(attr), 0)  # type, size, config (not a return)
    struct.pack_into('QQ', attr, 56, ctypes.addressof(name), offset)  # config1, config2
    buf = (ctypes.c_char * len(attr)).from_buffer(attr)
    fd = libc.syscall(298, buf, pid, 0 if pid == -1 else -1, -1, 0)  # perf_event_open
    if fd < 0:
        raise FrameworkError('perf_event_open(uprobe %s+0x%x, pid %d): %s'
                             % (path, offset, pid, os.strerror(ctypes.get_errno())))
    return fd


@test('foreign-uprobes-swallowed', timeout=60, alone=True,
      kernel='the kernel path puts no int3 of its own in: nothing for the kernel to take')
@case('foreign-uprobes-swallowed')
def case_foreign_uprobes_swallowed(session, chk):
    """The kernel takes ptwatch's trap at ld.so's _dl_debug_state (Facts,
    15): it keeps a uprobe there for another process alone (filtered: no
    int3 of its own in ours), and ours has uprobes (one on libc's getppid
    for every process), so its uprobe code handles our int3 there, finds
    the probe by file and offset, filters it out and takes the int3 away.
    libthread_db is then never said to be ready, and the dlopen fixture's
    constructor, which loads its library and makes a thread before main(),
    had that thread as an LWP without routine or join, with no warning.
    Now a thread made before main() finds libc ready: every routine named,
    every join, and the loads after main() followed through the return
    sites of _dl_debug_state's callers."""
    if os.geteuid() != 0:
        raise Skip('a uprobe of the kernel\'s needs root')
    libc, ld = mapped('libc.so.6'), mapped('ld-linux-x86-64.so.2')
    getppid = symbol_offset(libc, 'getppid')
    sleeper = subprocess.Popen(['sleep', '120'])
    fds = []
    try:
        fds.append(perf_uprobe(ld, symbol_offset(ld, '_dl_debug_state'), sleeper.pid))
        fds.append(perf_uprobe(libc, getppid, -1))
        if not wait_for(lambda: text_byte(libc, getppid) == 0xcc, 30):
            raise FrameworkError('the uprobe at getppid is not in this process after 30 s')
        lib = fixture('dlmod')
        run = session.run([fixture('dlopen'), lib, 'early'], opts=['-q', '--debug=tracer'])
    finally:
        for fd in fds:
            os.close(fd)
        sleeper.kill()
        sleeper.wait()
    check_exit(chk, run, code=0)
    debug = run.stderr_text()
    # the premise: ld.so's breakpoint fired once (RT_ADD, before libc and
    # its uprobe were mapped), then the kernel took the trap
    chk.true('the kernel took the trap: the return sites of _dl_debug_state\'s callers hooked',
             re.search(r"_dl_debug_state's return sites hooked: [1-9]", debug),
             detail='\n'.join(l for l in debug.splitlines() if 'dl_debug_state' in l))
    check_dlopen(chk, run, lib, 3)  # (one before main, two after)
    chk.eq('session.strategy', run.doc['session'].get('strategy'), 'debuginfo')
