"""Input ptwatch does not control, and odd targets (issue 18): a FIFO and a
valid-but-wrong entry in the symbol cache, -p with a thread id, a process
made with clone(CLONE_VM) without CLONE_VFORK."""

import glob
import os
import re
import signal

from ptw_test import test
from ptw_test import (
    backend, case, check_attach_doc, check_exit, fixture, load_truth, Model, one_truth,
    report_warnings,
    thread_spans, truth_of, wait_for,
    warning_codes
)
from helpers import check_target_exit
from cases.launch import check_lifecycle


def cache_files(home):
    return sorted(glob.glob(os.path.join(home, 'ptwatch', '*')))


@test('cache-fifo', kernel=True)
@case('cache-fifo')
def case_cache_fifo(session, chk):
    """Every file of the symbol cache replaced by a FIFO: ptwatch reads
    none of them (an open() of a FIFO would wait for a writer, with the
    target stopped) and traces as without a cache."""
    home = session.mkdtemp()
    env = {'XDG_CACHE_HOME': home}
    run = session.run([fixture('lifecycle')], opts=['-q'], env=env)
    check_lifecycle(chk, run)
    files = cache_files(home)
    chk.true('the first run wrote the cache (%s)' % files, len(files) >= 2)
    for f in files:
        os.unlink(f)
        os.mkfifo(f)
    chk.prefix = '[FIFOs] '
    run = session.run([fixture('lifecycle')], opts=['-q', '--debug=sym'], env=env, timeout=30)
    check_lifecycle(chk, run)
    chk.eq('strategy', run.doc['session'].get('strategy'), 'debuginfo')
    # not one of them was taken for a cache file: each file's first word is
    # not "loaded" (the kernel path loads libc's symbols twice in a launch,
    # ptwatch's copy before the exec, then the target's: the second may
    # load the file the first wrote in the FIFO's place)
    first = {}
    for path, what in re.findall(r'cache (\S+) for \S+: (\w+)', run.stderr_text()):
        first.setdefault(path, what)
    chk.eq('cache files loaded from FIFOs', sorted(p for p, w in first.items() if w == 'loaded'),
           [])


def fnv1a(data):
    h = 0xcbf29ce484222325
    for c in data:
        h = ((h ^ c) * 0x100000001b3) & 0xffffffffffffffff
    return h


def shift_cached_symbols(path, names, by):
    """A cache file whose answers for names are shifted by `by` bytes, its
    checksum recomputed: valid, and wrong."""
    with open(path, 'rb') as f:
        lines = f.read().split(b'\n')
    head, body = lines[:5], lines[5:]
    shifted = 0
    for i, line in enumerate(body):
        fields = line.split(b'\t')
        if len(fields) >= 3 and fields[0] in names and fields[1] == b'1':
            fields[2] = b'%x' % (int(fields[2], 16) + by)
            body[i] = b'\t'.join(fields)
            shifted += 1
    data = b'\n'.join(body)
    words = head[4].split(b' ')
    if not head[4].startswith(b'records') or words[-2] != b'checksum':
        raise ValueError('unexpected cache header %r' % head[4])
    words[-1] = b'%016x' % fnv1a(data)
    head[4] = b' '.join(words)
    with open(path, 'wb') as f:
        f.write(b'\n'.join(head) + b'\n' + data)
    return shifted


@test('cache-wrong', kernel=True)
@case('cache-wrong')
def case_cache_wrong(session, chk):
    """libc's cached address of __nptl_version (what libthread_db checks
    first) shifted, the checksum recomputed: libthread_db fails with the
    cached answers; ptwatch forgets the cache (--debug=sym says so), asks
    the modules again and traces with libthread_db as usual, and the cache
    it writes is right for the next run."""
    home = session.mkdtemp()
    env = {'XDG_CACHE_HOME': home}
    run = session.run([fixture('lifecycle')], opts=['-q'], env=env)
    check_lifecycle(chk, run)
    names = [b'sym:__nptl_version']
    shifted = 0
    for f in cache_files(home):
        shifted += shift_cached_symbols(f, names, 0x10)
    chk.true('a cached __nptl_version was shifted (%d)' % shifted, shifted >= 1)

    chk.prefix = '[wrong cache] '
    run = session.run([fixture('lifecycle')], opts=['-q', '--debug=sym'], env=env)
    check_lifecycle(chk, run)
    chk.eq('strategy', run.doc['session'].get('strategy'), 'debuginfo')
    chk.true('no no_thread_db warning (%s)' % warning_codes(run.doc),
             'no_thread_db' not in warning_codes(run.doc))
    chk.true('--debug=sym says the cache was forgotten',
             re.search(r'records forgotten', run.stderr_text()) is not None)

    chk.prefix = '[next run] '
    run = session.run([fixture('lifecycle')], opts=['-q', '--debug=sym'], env=env)
    check_lifecycle(chk, run)
    chk.eq('strategy', run.doc['session'].get('strategy'), 'debuginfo')
    chk.true('the cache is loaded, and not forgotten again',
             'loaded' in run.stderr_text() and 'records forgotten' not in run.stderr_text())


@test('attach-tid', kernel=True)
@case('attach-tid')
def case_attach_tid(session, chk):
    """-p with the id of a thread that is not the main one: ptwatch says
    whose thread it is and attaches to its process: target.pid is the
    process, its main thread is main."""
    target = session.target('idle', [3])
    pid = target.ready()[0]
    tids = sorted(int(t) for t in os.listdir('/proc/%d/task' % pid))
    worker = [t for t in tids if t != pid][-1]
    for mode, opts in (('snapshot', ('-q', '--snapshot')), ('duration', ('-q', '--duration=0.2'))):
        chk.prefix = '[%s] ' % mode
        run = session.attach(worker, opts=opts, timeout=30)
        check_attach_doc(chk, run, pid, mode, mode)
        chk.eq('target.pid', run.doc['target']['pid'], pid)
        spans = {s['tid']: s for s in thread_spans(run.doc)}
        chk.eq('threads', sorted(spans), tids)
        chk.eq('the main thread is main', spans.get(pid, {}).get('origin'), 'main')
        chk.eq('the thread named is preexisting', spans.get(worker, {}).get('origin'),
               'preexisting')
        said = '%d is a thread of process %d' % (worker, pid)
        chk.true('stderr says "%s"' % said, said in run.stderr_text())
        report_warnings(run)
    chk.prefix = ''
    target.send('q')
    check_target_exit(chk, target, 'released')


@test('clonevm', kernel=True)
@case('clonevm')
def case_clonevm(session, chk, follow=False):
    """A process made with clone(CLONE_VM | SIGCHLD), no CLONE_VFORK: the
    kernel reports a fork, but the child shares the parent's memory, int3s
    included. Its "copy" of them must not be restored (that would remove
    the parent's): every later thread of the parent is complete and
    joined. With -f the child is a process of the session (exit 7), named
    by the program it runs, with no thread span of its own (it is not a
    pthread) and certainly not a second main."""
    opts = ['-q', '-f'] if follow else ['-q']
    run = session.run([fixture('clonevm')], opts=opts)
    check_exit(chk, run, code=0)
    m = Model(chk, run, 'clonevm.c')
    m.check_complete()
    child = one_truth(run, 'clonevm')
    mains = [s for s in thread_spans(run.doc) if s.get('origin') == 'main']
    chk.eq('one main span, the process\'s', [s['tid'] for s in mains], [run.doc['target']['pid']])
    chk.eq('no span of the child %d' % child['pid'],
           [s['tid'] for s in thread_spans(run.doc) if s.get('pid') == child['pid'] or
            s['tid'] == child['pid']], [])
    if follow:
        procs = {p['pid']: p for p in run.doc.get('processes', [])}
        p = procs.get(child['pid'])
        chk.true('the child %d is a process of the session (%s)' % (child['pid'], sorted(procs)),
                 p is not None)
        if p:
            chk.eq('its exit', p.get('exit'), {'code': child['exit']})
            chk.eq('its exe', p.get('exe'), fixture('clonevm'))
    report_warnings(run)


@test('clonevm-follow', kernel=True)
@case('clonevm-follow')
def case_clonevm_follow(session, chk):
    case_clonevm(session, chk, follow=True)


def clonevm_child_done(run, timeout=10):
    """The clone child's "clonevm-child" record (it calls a libc entry
    ptwatch hooks once its parent's memory is no longer traced: an int3
    left there would have killed it), waited for: it may outlive ptwatch."""
    def found():
        return [r for r in load_truth(run) if r.get('kind') == 'clonevm-child']
    return wait_for(found, timeout)


@test('clonevm-exec', kernel=True)
@case('clonevm-exec')
def case_clonevm_exec(session, chk, follow=False):
    """The parent execs while its clone(CLONE_VM) child still runs in the
    old memory, int3s included: before the journal forgets them they are
    written back through the child, which is let go; it calls a hooked
    libc entry afterwards and exits 7 (not SIGTRAP), as the new image,
    traced on, records."""
    for follow in (False, True):
        chk.prefix = '[-f] ' if follow else ''
        opts = ['-q', '-f'] if follow else ['-q']
        run = session.run([fixture('clonevm'), 'exec'], opts=opts)
        check_exit(chk, run, code=0)
        chk.true('the child called the hooked entry and recorded it', clonevm_child_done(run))
        rec = one_truth(run, 'clonevm')
        chk.eq('the child\'s end, as its reaper saw it', (rec['exit'], rec['signal']), (7, 0))
        report_warnings(run)


@test('clonevm-orphan', kernel=True)
@case('clonevm-orphan')
def case_clonevm_orphan(session, chk):
    """The parent exits while its clone(CLONE_VM) child runs on in the same
    memory: the child is let go then, the bytes written back through it
    (it waits until it is untraced before it calls a hooked libc entry).
    The parent is the target, or a process the target forked (-f: the
    child's stops must not go to the tracer of its ended parent)."""
    for mode, opts in (('orphan', ['-q']), ('orphan', ['-q', '-f']),
                       ('fork-orphan', ['-q', '-f']), ('fork-orphan', ['-q'])):
        chk.prefix = '[%s %s] ' % (mode, ' '.join(opts))
        run = session.run([fixture('clonevm'), mode], opts=opts)
        check_exit(chk, run, code=0)
        chk.true('the child called the hooked entry and recorded it', clonevm_child_done(run))
        chk.eq('warnings', warning_codes(run.doc), [])
        report_warnings(run)


@test('liar-fakecancel', 'fakecancel', kernel=True)
@test('liar-badroutine', 'badroutine', kernel=True)
@test('liar-jit', 'jit', kernel=True)
@test('liar-dlmopen', 'dlmopen', kernel=True)
@case('liar')
def case_liar(session, chk, mode='fakecancel'):
    """Threads that lie, or run code no file of the main namespace holds
    (fixture liar, issue 29 items 5 and 6); what ptwatch says must stay
    true on both backends:
    fakecancel: a thread sets CANCELED|EXITING itself and returns 0x1111,
      nobody calls pthread_cancel: not a certain cancellation (the kernel
      path said cancelled, uncertain false, from the bits alone);
    badroutine: start routine 0x4141414141414141: no module's, not named
      (the ptrace path named it in ld.so, at offset 0x4140c1beddaf2141:
      libdwfl's answer for an address past every module);
    jit: a routine written into an anonymous page: no module (the ptrace
      path said /etc/ld.so.cache, mapped there when it read the modules);
    dlmopen: a routine of a library in a new link-map namespace: named
      (the kernel path walked namespace 0's list only)."""
    argv = [fixture('liar'), mode] + ([fixture('liarmod')] if mode == 'dlmopen' else [])
    run = session.run(argv, opts=['-q'])
    check_exit(chk, run, code=0)
    truth = one_truth(run, 'liar')
    routine = truth['routine_addr']
    spans = [s for s in thread_spans(run.doc) if s['origin'] == 'created']
    chk.eq('one created thread', len(spans), 1)
    if not spans:
        return
    sp = spans[0]
    if truth['tid']:
        chk.eq('its tid', sp['tid'], truth['tid'])
    loc = sp.get('start_routine') or {}
    chk.eq('its start routine address', loc.get('addr'), routine)
    if mode == 'fakecancel':
        chk.eq('its value', (sp.get('end') or {}).get('value'), truth['value'])
        chk.true('not a certain cancellation (status %s, uncertain %s)'
                 % (sp['status'], sp.get('uncertain')),
                 sp['status'] != 'cancelled' or sp.get('uncertain') is True)
    elif mode in ('badroutine', 'jit'):
        chk.eq('no module', loc.get('module'), None, loc)
        chk.eq('no offset', loc.get('offset'), None, loc)
        chk.eq('no symbol but the placeholder', (loc.get('symbol'), loc.get('placeholder')),
               ('pthread_start_routine', True), loc)
        if mode == 'jit':
            chk.eq('its value', (sp.get('end') or {}).get('value'), truth['value'])
            chk.eq('completed', sp['status'], 'completed')
    else:
        chk.eq('named', (loc.get('symbol'), loc.get('placeholder')), ('liar_routine', False), loc)
        chk.true('in the module loaded with dlmopen (%s)' % loc.get('module'),
                 (loc.get('module') or '').endswith('libptwfixture-liarmod.so'))
        chk.eq('its value', (sp.get('end') or {}).get('value'), truth['value'])
        chk.eq('completed', sp['status'], 'completed')


@test('remap-text', 'mprotect', kernel=True)
@test('remap-text-rwx', 'rwx', kernel=True)
@case('remap-text')
def case_remap_text(session, chk, mode='mprotect'):
    """A program that moves libc's code into anonymous memory (fixture
    remaptext: the huge-page text trick, issue 29 item 1). On the ptrace
    path its breakpoints stay at their addresses and it lives: exit 0, its
    10 threads spanned. On the kernel path the copy carries the uprobes'
    int3 bytes and no uprobe covers it: the kernel kills it with SIGTRAP
    at its first probed call after the move (man page, BUGS: no fix under
    kernel lockdown, and nothing tells beforehand). What is asserted there
    is that the death is told for what it is: the sigtrap_death warning
    names a probe's breakpoint in copied or remapped code, not the
    program's."""
    run = session.run([fixture('remaptext'), mode], opts=['-q'])
    remapped = truth_of(run, 'remapped')
    chk.eq('libc moved', len(remapped), 1)
    if backend() != 'kernel':
        check_exit(chk, run, code=0)
        created = [s for s in thread_spans(run.doc) if s['origin'] == 'created']
        chk.eq('its 10 threads', len(created), 10)
        chk.eq('all completed', sorted(set(s['status'] for s in created)), ['completed'])
        return
    chk.eq('killed by SIGTRAP (ptwatch dies of it as it did)', run.returncode, -signal.SIGTRAP)
    ws = [w['message'] for w in run.doc['warnings'] if w['code'] == 'sigtrap_death']
    chk.eq('one sigtrap_death warning', len(ws), 1, ws)
    chk.true("it says a probe's breakpoint in copied or remapped code (%s)" % ws,
             ws and "a uprobe's breakpoint" in ws[0] and 'copied or remapped' in ws[0]
             and "the trap was a probe's" in ws[0])
