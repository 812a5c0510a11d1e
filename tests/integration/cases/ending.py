"""Every way of ending ptwatch: SIGINT/SIGTERM to it, Ctrl-C in a
terminal, SIGKILL of its front or its tracer process, a signal while it
still attaches, and the ways of ptw_guardian.h (case end): the target
lives on, its text is the files' again."""

import json
import os
import re
import select
import shutil
import signal
import subprocess
import sys
import time

from ptw_test import (
    attach_stderr_lines, backend, case, check_untouched, child_pids, comm, compare_mappings,
    end_group, exec_mappings, Failed, fixture, kill_group, load_doc, load_truth, Model, one_truth,
    proc_status, read_outputs, Skip, tail, task_states, Terminal, test, thread_spans, tracer_pids,
    wait_for, warning_codes, WHY_RESTORER
)
from helpers import (
    become_subreaper, check_target_exit, kill_tracer, ptwatch_processes, read_line, start_attached,
    check_text_patched, check_text_restored, text_diffs, wait_pid, wait_progress, wait_traced,
    wait_untraced, wait_watched
)


# ---------------------------------------------------------------------------
# 11. interrupt (SIGINT / SIGTERM)

@test('interrupt-sigint', 'SIGINT', kernel=True, ns=True)
@test('interrupt-sigterm', 'SIGTERM', kernel=True)
@test('interrupt-after-thread-exec', 'exec-by-thread', kernel=True)
@case('interrupt')
def case_interrupt(session, chk, signame='SIGINT'):
    # exec-by-thread: the fixture first execs itself from a second thread
    # (the new image's leader is not the old one's), then runs as usual.
    exec_first = signame == 'exec-by-thread'
    if exec_first:
        signame = 'SIGINT'
    signum = getattr(signal, signame)
    reaper = become_subreaper()
    block_r, block_w = os.pipe()
    ready_r, ready_w = os.pipe()
    cmd = [fixture('interrupt')] + (['--exec-by-thread'] if exec_first else [])
    run, proc = session.start(cmd, opts=['-q'],
                              env={'PTW_BLOCK_FD': str(block_r), 'PTW_READY_FD': str(ready_w)},
                              pass_fds=(block_r, ready_w))
    os.close(block_r)
    os.close(ready_w)
    pid = None
    status = None
    try:
        line = read_line(ready_r, 20, 'ready')
        pid = int(line.split()[1])
        # After "ready", main's only blocking call is pthread_join on the
        # first blocked thread: wait until it sleeps there (exec-by-thread:
        # it creates and joins threads meanwhile, interrupted at once).
        deadline = time.monotonic() + 10
        while not exec_first and task_states(pid).get(pid) != 'S':
            if time.monotonic() > deadline:
                raise Failed('the fixture main thread did not block in pthread_join: %s'
                             % task_states(pid))
            time.sleep(0.005)  # polling /proc in the harness
        os.kill(proc.pid, signum)
        session.wait(run, proc, 20, 'ptwatch did not exit after %s' % signame)
        chk.eq('ptwatch exit status after %s' % signame, run.returncode, 128 + signum)
        states = task_states(pid)
        chk.true('the fixture still runs after ptwatch exited (threads %s)' % states,
                 states and all(st in 'SR' for st in states.values()))
        check_text_restored(chk, pid, 'after the detach')
        os.write(block_w, b'xx')   # release the blocked threads
        # The fixture writes "finished" as its last record.
        deadline = time.monotonic() + 15
        finished = False
        while time.monotonic() < deadline and not finished:
            finished = any(r.get('kind') == 'finished' for r in load_truth(run))
            if not finished:
                time.sleep(0.02)
        chk.true('the fixture finished normally after the detach ("finished" record)', finished)
        if reaper:
            status = wait_pid(pid, 10)
            if isinstance(status, int):
                if os.WIFSIGNALED(status):
                    chk.fail('the fixture died of signal %d after the detach (SIGTRAP = %d)'
                             % (os.WTERMSIG(status), signal.SIGTRAP))
                else:
                    chk.eq('the fixture exit status', os.WEXITSTATUS(status), 0)
            else:
                chk.fail('cannot collect the fixture exit status: %s' % status)
        else:
            print('note: not a subreaper, exit status of the fixture not checked')
    finally:
        end_group(proc)
        if pid is not None and status is None and reaper:
            if wait_pid(pid, 0.1) is None:
                try:
                    os.kill(pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
                wait_pid(pid, 5)
        os.close(block_w)
        os.close(ready_r)

    load_truth(run)
    doc = load_doc(run)
    chk.eq('session.end_reason', doc['session']['end_reason'], 'interrupted')
    chk.eq('target.exit', doc['target']['exit'], None)
    chk.eq('target.fate (checked as ptwatch let go)', doc['target'].get('fate'), 'lives_on')
    # sent to ptwatch's pid alone: the command did not get it
    chk.eq('session.interrupts', [(i['signal'], i['reached_target'], i['action'], i['why'])
                                  for i in doc['session'].get('interrupts', [])],
           [(signame, False, 'detached', 'ptwatch_alone')])
    if exec_first:
        ended = [sp for sp in doc['spans'] if (sp.get('end') or {}).get('method') == 'exec']
        chk.eq('spans ended by the exec (main, the waiting and the exec thread)', len(ended), 3)
        opened = sum(1 for sp in doc['spans'] if sp['status'] == 'open')
        chk.true('spans open at the interrupt: main of the new image, two blocked, at most one '
                 'churn_worker (got %d)' % opened, opened in (3, 4))
        print('threads created and joined by main while ptwatch detached: %s'
              % one_truth(run, 'churned')['threads'])
        return   # the spans of the first image are the execthread case's
    blocked = one_truth(run, 'blocked')['tids']
    # The truth records were written after the detach; the spans were open
    # at the interrupt. Names are not compared: ptwatch reads a thread's
    # name at its end, and open spans have none (name null).
    m = Model(chk, run, 'interrupt.c')
    m.match()
    m.check_main(dict(one_truth(run, 'main'), end='open', name=None))
    for t in m.threads:
        m.check_thread(dict(t, name=None), expect_end=False)
    main_tid = one_truth(run, 'main')['tid']
    for tid in blocked + [main_tid]:
        span = m.span_of.get(tid)
        if span is None:
            continue
        chk.eq('span of %s (blocked at the interrupt): status' % tid, span['status'], 'open', span)
        chk.eq('span of %s: end_ns' % tid, span['end_ns'], None, span)
        if tid == blocked[0]:
            # main was blocked in pthread_join on the first one
            js = span['join'] or {}
            chk.eq('span of %s: join.joiner_tid (main, still waiting)' % tid,
                   js.get('joiner_tid'), main_tid, span)
            chk.true('span of %s: join.call_ns known' % tid, js.get('call_ns') is not None, span)
            chk.eq('span of %s: join.return_ns (still waiting)' % tid, js.get('return_ns'), None,
                   span)
        else:
            chk.eq('span of %s: join' % tid, span['join'], None, span)
    chk.eq('blocked thread records', sorted(t['tid'] for t in m.threads), sorted(blocked))
    m.check_no_extra_spans()
    m.check_metrics(open_spans=3, unjoined=False)


@test('kill9-front', '3', kernel=True, first=True)
@test('kill9-front-static', '3', 'churner_static', kernel=True)
@case('kill9-front')
def case_kill9_front(session, chk, rounds='3', name='churner'):
    """name churner_static: the churner linked statically (the kernel path's
    probes in its own file)."""
    target = session.target(name)
    pid = target.ready()[0]
    before = exec_mappings(pid)
    for i in range(int(rounds)):
        chk.prefix = '[round %d] ' % (i + 1)
        run, proc = start_attached(session, target)
        try:
            traced = wait_watched(target)
            tracer = ptwatch_processes(proc.pid).get('tracer')
            chk.true('a ptw-tracer, child of the ptwatch we started (%s)' % tracer,
                     tracer is not None)
            if backend() != 'kernel':  # (the kernel path's tracer traces nothing)
                chk.eq('the target is traced by that tracer', traced.get(pid), tracer)
            # in full swing: breakpoints in, threads created under ptwatch
            wait_progress(chk, target, 'while traced', more=100)
            lines = wait_for(lambda: read_outputs(run) or ' create ' in run.stderr_text(), 10)
            chk.true('event lines on stderr before the kill', lines)
            if backend() == 'kernel':
                check_text_patched(chk, pid, 'while watched, before the kill')
            os.kill(proc.pid, signal.SIGKILL)
            proc.wait(timeout=10)
            if backend() != 'kernel':  # (never traced there: nothing to show)
                t = wait_untraced(pid, 2)
                print('round %d: guardian %d killed; target untraced after %s s'
                      % (i + 1, proc.pid, '%.3f' % t if t is not None else 'more than 2'))
                chk.true('TracerPid 0 within 2 s of the kill (tracers %s)' % tracer_pids(pid),
                         t is not None)
            else:
                # the kernel's probes (int3s it put in the text) go with
                # ptwatch's descriptors: the text is the files' again
                wait_for(lambda: text_diffs(pid) == [], 20)
                check_text_restored(chk, pid, 'after the kill')
            left = wait_for(lambda: not os.path.exists('/proc/%d' % tracer), 5)
            chk.true('the tracer %d exits after the detach (comm %s)' % (tracer, comm(tracer)),
                     left)
        finally:
            end_group(proc)
        read_outputs(run)
        if os.path.exists(run.doc_path) and os.path.getsize(run.doc_path):
            load_doc(run)
            print('round %d: document written, end_reason %s, warnings %s'
                  % (i + 1, run.doc['session']['end_reason'], warning_codes(run.doc)))
        target.check_alive('after the kill')
        check_untouched(chk, pid, 'after the kill')
        compare_mappings(chk, before, exec_mappings(pid), 'after the kill')
        wait_progress(chk, target, 'after the kill', more=300)
    chk.prefix = ''
    target.send('q')
    check_target_exit(chk, target, 'released')


@test('kill9-tracer', kernel=WHY_RESTORER)
@test('kill9-tracer-sigterm', 'sigterm', kernel=WHY_RESTORER)
@case('kill9-tracer')
def case_kill9_tracer(session, chk, then='command-exits'):
    """ptwatch -- COMMAND, and its tracer process is killed: the front
    restores the patched bytes, the command (idle, waiting) lives on, is
    reparented to the front, and ptwatch exits as the command does
    (command-exits), or with 128 + SIGTERM at once when it gets a SIGTERM
    meanwhile, the command left running (sigterm)."""
    ctl_r, ctl_w = os.pipe()
    rep_r, rep_w = os.pipe()
    run, proc = session.start([fixture('idle'), '4'], opts=['-q'],
                              env={'PTW_CTL_FD': str(ctl_r), 'PTW_REPLY_FD': str(rep_w)},
                              pass_fds=(ctl_r, rep_w))
    os.close(ctl_r)
    os.close(rep_w)
    try:
        words = read_line(rep_r, 20, 'ready').split()
        pid = int(words[1])
        traced = wait_traced(pid)
        tracer = set(traced.values())
        chk.eq('one tracer, the child of the ptwatch we started', sorted(tracer),
               [ptwatch_processes(proc.pid).get('tracer')])
        check_text_patched(chk, pid, 'while traced')
        kill_tracer(chk, proc.pid, tracer)
        t = wait_untraced(pid, 2)
        chk.true('TracerPid 0 within 2 s of the kill (tracers %s)' % tracer_pids(pid),
                 t is not None)
        chk.true('the command is now the child of ptwatch (children %s)' % child_pids(proc.pid),
                 wait_for(lambda: child_pids(proc.pid) == [pid], 5))
        check_untouched(chk, pid, 'after the kill')
        check_text_restored(chk, pid, 'after the kill')
        os.write(ctl_w, b'p')
        chk.eq('the command answers after the kill', read_line(rep_r, 10, 'pong').strip(),
               'pong')
        chk.eq('ptwatch still runs while the command does', proc.poll(), None)
        if then == 'sigterm':
            os.kill(proc.pid, signal.SIGTERM)
            session.wait(run, proc, 10, 'ptwatch did not exit after SIGTERM')
            chk.eq('ptwatch exit status after SIGTERM', run.returncode, 128 + signal.SIGTERM)
            os.write(ctl_w, b'p')
            chk.eq('the command still answers after ptwatch left',
                   read_line(rep_r, 10, 'pong').strip(), 'pong')
            os.write(ctl_w, b'q')
            chk.true('the command finished its work ("idle_done" record)',
                     wait_for(lambda: any(r.get('kind') == 'idle_done'
                                          for r in load_truth(run)), 15))
            return
        os.write(ctl_w, b'q')
        session.wait(run, proc, 20, 'ptwatch did not exit after the command')
    finally:
        end_group(proc)
        os.close(ctl_w)
        os.close(rep_r)
    chk.eq('ptwatch exit status: the command\'s', run.returncode, 0)
    chk.eq('the command finished its work ("idle_done" records)',
           len([r for r in load_truth(run) if r.get('kind') == 'idle_done']), 1)
    lines = attach_stderr_lines(run)
    chk.true('one line says what happened (stderr %r)' % lines,
             any('tracer process died' in x and 'still running, untraced' in x for x in lines))


@test('pipe-end', '3', kernel=True)
@case('pipe-end')
def case_pipe_end(session, chk, rounds='3'):
    """ptwatch --json -- COMMAND | reader: the reader sees the end of
    ptwatch's stdout and stderr as ptwatch exits, whatever its other
    processes still do. The kernel path's tracer closes its links after
    the front has exited (30-100 ms: grace periods); it is stopped as the
    front exits, so a pipe it (or the restorer) still held would not end
    until it went on. Before, `ptwatch --json -- true | cat` took 90-140 ms
    on the kernel path, against 30 ms without the pipe."""
    caught = 0
    for i in range(int(rounds)):
        chk.prefix = '[round %d] ' % (i + 1)
        ctl_r, ctl_w = os.pipe()
        rep_r, rep_w = os.pipe()
        out_r, out_w = os.pipe()
        err_r, err_w = os.pipe()
        run, proc = session.start([fixture('idle'), '2'], output='stdout',
                                  env={'PTW_CTL_FD': str(ctl_r), 'PTW_REPLY_FD': str(rep_w)},
                                  pass_fds=(ctl_r, rep_w), stdout=out_w, stderr=err_w)
        for fd in (ctl_r, rep_w, out_w, err_w):
            os.close(fd)
        tracer = None
        try:
            read_line(rep_r, 20, 'ready')
            tracer = ptwatch_processes(proc.pid).get('tracer')
            chk.true('a ptw-tracer, child of the ptwatch we started', tracer is not None)
            os.write(ctl_w, b'q')
            proc.wait(timeout=20)
            try:
                os.kill(tracer, signal.SIGSTOP)
                caught += 1
                print('round %d: the tracer %d still ran as the front exited: stopped'
                      % (i + 1, tracer))
            except ProcessLookupError:
                tracer = None
            got = {out_r: b'', err_r: b''}
            open_fds = [out_r, err_r]
            deadline = time.monotonic() + 10
            while open_fds and time.monotonic() < deadline:
                ready, _, _ = select.select(open_fds, [], [], deadline - time.monotonic())
                for fd in ready:
                    chunk = os.read(fd, 65536)
                    if chunk:
                        got[fd] += chunk
                    else:
                        open_fds.remove(fd)
            chk.eq('stdout and stderr ended with the front, the tracer %s'
                   % ('stopped' if tracer else 'gone'),
                   ['stdout' if fd == out_r else 'stderr' for fd in open_fds], [])
        finally:
            if tracer:
                os.kill(tracer, signal.SIGCONT)
            end_group(proc)
            for fd in (ctl_w, rep_r, out_r, err_r):
                os.close(fd)
        chk.eq('ptwatch exit status: the command\'s', proc.returncode, 0)
        doc = json.loads(got[out_r].decode())
        chk.eq('the document on the pipe: the command\'s main thread, ended',
               [((t['start_routine'] or {}).get('symbol'), t['status'])
                for t in doc['spans'] if t['kind'] == 'thread'][:1], [('main', 'completed')])
        if tracer:
            chk.true('the tracer %d ends once let go on' % tracer,
                     wait_for(lambda: not os.path.exists('/proc/%d' % tracer), 20))
    chk.prefix = ''
    if backend() == 'kernel':
        chk.true('the tracer still closed its links as the front exited (%d of %s rounds)'
                 % (caught, rounds), caught > 0)


def ctrlc_terminal(session, mode):
    """ptwatch -- ctrlc MODE as a terminal's job: (the Terminal, the
    fixture's report pipe, its command pipe)."""
    ready_r, ready_w = os.pipe()
    ctl_r, ctl_w = os.pipe()
    term = Terminal(session, [fixture('ctrlc'), mode], opts=(),
                    env={'PTW_READY_FD': str(ready_w), 'PTW_CTL_FD': str(ctl_r)},
                    pass_fds=(ready_w, ctl_r))
    os.close(ready_w)
    os.close(ctl_r)
    return term, ready_r, ctl_w


def ctrlc_waiting(ready_r):
    """The ctrlc fixture's pid, once its main thread waits for a command."""
    pid = int(read_line(ready_r, 20, 'ready').split()[1])
    if not wait_for(lambda: task_states(pid).get(pid) == 'S', 10, step=0.005):
        raise Failed('the fixture did not block: %s' % task_states(pid))
    return pid


@test('ctrlc-late-copy', kernel=True)
@case('ctrlc-late-copy')
def case_ctrlc_late_copy(session, chk):
    """^C typed while ptwatch's front is stopped: the command (ctrlc
    handle) handles its SIGINT and exits 3 before ptwatch's copy of the ^C
    can come (the front passes it on to the tracer). The front goes on once
    the command has ended; the session must still say that the ^C reached
    the command and was traced on. ctrlc-handles@kernel lost that race once
    on a busy machine ("interrupts": []): the kernel path did not tell the
    signal model of the command's delivery, so once it had seen the end it
    did not wait for the copy. Whether the tracer sees the end before the
    copy here depends on its drain (it reaps the command only after the
    wait, so the test cannot hold the front until then): the case checks
    the contract, the race is not forced."""
    term, ready_r, ctl_w = ctrlc_terminal(session, 'handle')
    run = term.run
    front = None
    try:
        pid = ctrlc_waiting(ready_r)
        fronts = [k for k in child_pids(term.leader.pid) if comm(k) == 'ptwatch']
        chk.eq('one ptwatch front, the terminal\'s job', len(fronts), 1)
        front = fronts[0]
        os.kill(front, signal.SIGSTOP)
        term.interrupt()
        chk.eq('the fixture saw the SIGINT', read_line(ready_r, 20, 'sigint').split()[0],
               'sigint')
        chk.true('the command ended while the front was stopped',
                 wait_for(lambda: set(task_states(pid).values()) <= {'Z', 'X'}, 20, step=0.001))
        os.kill(front, signal.SIGCONT)
        front = None
        term.wait(20, 'ptwatch did not end after ^C')
    finally:
        if front:
            os.kill(front, signal.SIGCONT)
        term.close()
        os.close(ready_r)
        os.close(ctl_w)
    chk.eq('ptwatch exit status (the command\'s)', run.returncode, 3)
    doc = load_doc(run)
    interrupts = doc['session'].get('interrupts')
    chk.eq('session.interrupts: the ^C, which reached the command',
           [(i.get('signal'), i.get('reached_target'), i.get('action'))
            for i in interrupts or []], [('SIGINT', True, 'traced_on')])
    chk.eq('target.exit', doc['target']['exit'], {'code': 3})
    chk.eq('session.end_reason', doc['session']['end_reason'], 'target_exited')


@test('attach-early-signal', '2',
      kernel='a signal that arrives while ptrace stops every thread at the attach: the kernel path stops none',
      first=True)
@case('attach-early-signal')
def case_attach_early_signal(session, chk, rounds='2'):
    """A signal that reaches ptwatch while it is still attaching (the
    target's main thread already has it as its tracer, the attach is not
    complete): ptwatch must still let go, promptly. SIGINT and SIGTERM to
    the pid we started, and SIGKILL of it (the guardian: its tracer must
    detach). The target is idle: no later event wakes ptwatch up. A fresh
    target each time: a tracer that does not let go may leave int3s."""
    for i in range(int(rounds)):
        for signame in ('SIGINT', 'SIGTERM', 'SIGKILL'):
            chk.prefix = '[round %d, %s] ' % (i + 1, signame)
            target = session.target('idle', [2])
            pid = target.ready()[0]
            run, proc = session.start_attach(pid)
            clean = True
            try:
                if not wait_for(lambda: tracer_pids(pid).get(pid) or proc.poll() is not None,
                                20, step=0.0005):
                    raise Failed('ptwatch -p %d did not seize the main thread within 20 s' % pid)
                tracer = tracer_pids(pid).get(pid)
                os.kill(proc.pid, getattr(signal, signame))
                try:
                    proc.wait(timeout=5)
                except subprocess.TimeoutExpired:
                    clean = chk.fail('ptwatch still runs 5 s after %s (sent as soon as the main '
                                     'thread had a tracer); tracers %s'
                                     % (signame, tracer_pids(pid)))
                if signame == 'SIGKILL':
                    t = wait_untraced(pid, 2)
                    clean = chk.true('TracerPid 0 within 2 s of the kill (tracers %s, tracer %s '
                                     'is %s)' % (tracer_pids(pid), tracer, comm(tracer)),
                                     t is not None)
            finally:
                # the guardian and its tracer share the process group
                kill_group(proc)
                if proc.returncode is None:
                    proc.wait()
            run.returncode = proc.returncode
            read_outputs(run)
            if not clean:
                target.kill()
                continue
            if signame != 'SIGKILL':
                chk.eq('exit status', run.returncode, 0)
                if os.path.exists(run.doc_path) and os.path.getsize(run.doc_path):
                    load_doc(run)
                    chk.eq('session.end_reason', run.doc['session']['end_reason'],
                           'interrupted')
            check_untouched(chk, pid, 'after %s' % signame)
            target.send('q')
            check_target_exit(chk, target, 'after %s' % signame)
    chk.prefix = ''


# ---------------------------------------------------------------------------
# Every way of ending ptwatch (ptw_guardian.h): the target lives on, its text
# is the files' again, no page of ours stays mapped, and everything it does
# afterwards works.

# Ways that reach the front only (the tracer has its own process group and a
# name that is not "ptwatch"): the tracer detaches cleanly, so even a target
# that is busy creating threads survives every time.
CLEAN_END_WAYS = ('front-kill9', 'pidof-kill9', 'pkill9', 'pgid-kill9', 'timeout-kill',
                  'SIGTERM', 'SIGINT', 'SIGHUP', 'SIGPIPE', 'terminal')
# Ways that kill the tracer (by its pid; both, as a cgroup kill would but
# for the restorer): the restorer puts the bytes back and writes the
# record. A thread that sat in one of our int3 stops then dies of SIGTRAP
# (the kernel lets it go before anyone can undo it): the fixture here has
# none there when the kill comes; bench/kill.py measures the rate on a busy
# one.
TRACER_END_WAYS = ('tracer-kill9', 'front-and-tracer-kill9')

TAKE_TTY = ('import fcntl, os, sys, termios\n'
            'fd = os.open(sys.argv[1], os.O_RDWR)\n'
            'try:\n'
            '    fcntl.ioctl(fd, termios.TIOCSCTTY, 0)\n'
            'except OSError:\n'
            '    pass\n'
            'os.execvp(sys.argv[2], sys.argv[2:])\n')


def matching(command, pattern):
    """The pids `pidof`/`pgrep` (pkill's selection) return for pattern."""
    res = subprocess.run([command, pattern], stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                         universal_newlines=True)
    return {int(x) for x in res.stdout.split()}


def end_ptwatch(chk, way, proc, ours, master):
    """Ends the ptwatch we started (proc; its processes `ours`) the given
    way. pidof and pkill are asked which processes they would pick, and only
    ours among them are signalled (other tests run ptwatch too)."""
    front = ours['front']
    if way == 'front-kill9':
        os.kill(front, signal.SIGKILL)
    elif way == 'tracer-kill9':
        os.kill(ours['tracer'], signal.SIGKILL)
    elif way == 'pidof-kill9':
        picked = matching('pidof', 'ptwatch') & set(ours.values())
        chk.eq('pidof ptwatch picks the front alone of ours %s' % ours, picked, {front})
        for p in picked:
            os.kill(p, signal.SIGKILL)
    elif way == 'pkill9':
        picked = matching('pgrep', 'ptwatch') & set(ours.values())
        chk.eq('pkill ptwatch picks the front alone of ours %s' % ours, picked, {front})
        for p in picked:
            os.kill(p, signal.SIGKILL)
    elif way == 'front-and-tracer-kill9':
        # the tracer first: the front's death would have it let go cleanly
        os.kill(ours['tracer'], signal.SIGKILL)
        os.kill(front, signal.SIGKILL)
    elif way == 'pgid-kill9':
        os.killpg(os.getpgid(front), signal.SIGKILL)
    elif way == 'timeout-kill':
        os.kill(proc.pid, signal.SIGALRM)  # timeout(1): the time is up now
    elif way == 'terminal':
        os.close(master)
    else:
        os.kill(front, getattr(signal, way))


def start_ptwatch_for_end(session, target, way):
    """ptwatch -p PID started for an end-* case, attached (its "found"
    lines are out); returns (run, proc, {front, tracer, restorer}, master)."""
    prefix, master = (), None
    if way == 'timeout-kill':
        prefix = ('timeout', '-s', 'KILL', '600')
    elif way == 'terminal':
        master, slave = os.openpty()
        prefix = (sys.executable, '-c', TAKE_TTY, os.ttyname(slave))
        os.close(slave)
    run, proc = session.start_attach(target.pid, opts=(), prefix=prefix)
    try:
        def attached():
            read_outputs(run)
            return ' found ' in run.stderr_text() or proc.poll() is not None
        if not wait_for(attached, 20) or proc.poll() is not None:
            raise Failed('ptwatch -p %d: not attached within 20 s (exit %s)\nstderr:\n%s'
                         % (target.pid, proc.poll(), run.stderr_text()[-2000:]))
        front = child_pids(proc.pid)[0] if way == 'timeout-kill' else proc.pid
        ours = wait_for(lambda: (lambda o: o if len(o) == 3 else None)(ptwatch_processes(front)),
                        10)
        if not ours:
            raise Failed('ptwatch %d: no tracer and restorer among its children %s'
                         % (front, [(k, comm(k)) for k in child_pids(front)]))
    except BaseException:
        kill_group(proc)
        proc.wait()
        if master is not None:
            os.close(master)
        raise
    return run, proc, ours, master


@test('end-exercise', 'exercise', 'all', timeout=120, kernel=True, first=True)
@test('end-churner', 'churner', 'clean', timeout=120, kernel=True, first=True)
@case('end')
def case_end(session, chk, fixture_name='exercise', which='all'):
    ways = {'all': CLEAN_END_WAYS + TRACER_END_WAYS, 'clean': CLEAN_END_WAYS}[which]
    if not shutil.which('timeout'):
        raise Skip('no timeout(1)')
    for way in ways:
        chk.prefix = '[%s] ' % way
        target = session.target(fixture_name)
        pid = target.ready()[0]
        before = exec_mappings(pid)
        run, proc, ours, master = start_ptwatch_for_end(session, target, way)
        try:
            wait_watched(target)
            # (uprobes are int3 bytes in the target's copy of the page too)
            check_text_patched(chk, pid, 'while traced', timeout=5)
            if fixture_name == 'churner':
                wait_progress(chk, target, 'while traced', more=50)
            end_ptwatch(chk, way, proc, ours, master)
            master = None if way == 'terminal' else master
            session.wait(run, proc, 20, 'ptwatch did not exit after %s' % way)
            chk.true('every thread untraced within 5 s (tracers %s)' % tracer_pids(pid),
                     wait_untraced(pid, 5) is not None)
            chk.true('the restorer %d ends' % ours['restorer'],
                     wait_for(lambda: proc_status(ours['restorer']).get('State', 'Z')[:1]
                              in 'ZX', 20))
        finally:
            end_group(proc)
            if master is not None:
                os.close(master)
        read_outputs(run)
        target.check_alive('after %s' % way)
        check_untouched(chk, pid, 'after %s' % way)
        compare_mappings(chk, before, exec_mappings(pid), 'after %s' % way)
        if fixture_name == 'churner':
            wait_progress(chk, target, 'after %s' % way, more=200)
        else:
            chk.eq('every hooked function works after %s' % way, target.ask('x'), ['done', '1'])
        chk.true('a document was written', os.path.exists(run.doc_path) and
                 os.path.getsize(run.doc_path) > 0)
        if os.path.exists(run.doc_path) and os.path.getsize(run.doc_path):
            doc = load_doc(run)
            died = way in TRACER_END_WAYS
            chk.eq('session.end_reason', doc['session']['end_reason'],
                   'tracer_died' if died else 'interrupted')
            if died:
                chk.true('a tracer_died warning (%s)' % warning_codes(doc),
                         'tracer_died' in warning_codes(doc))
                chk.true('the spans seen until the kill are in it', len(doc['spans']) >= 5)
                for sp in doc['spans']:
                    if sp['status'] == 'unmatched':
                        chk.eq('end.reason of unmatched span %d' % sp['id'],
                               sp['end']['reason'], 'tracer_died')
                chk.true('no span is left open', all(sp['status'] != 'open' for sp in doc['spans']))
        target.send('q')
        check_target_exit(chk, target, 'after %s' % way)
    chk.prefix = ''


# 17. Ctrl-C in a real terminal (launch mode)

# ptwatch detaches on a second Ctrl-C that comes within this many seconds of
# the previous one (man page, SIGNALS).
SECOND_CTRL_C_S = 2.0


@test('ctrlc-dies', 'die', kernel=True)
@test('ctrlc-handles', 'handle', kernel=True)
@test('ctrlc-ignores', 'ignore', kernel=True)
@test('ctrlc-dies-of-second', 'once', kernel=True)
@case('ctrlc')
def case_ctrlc(session, chk, mode):
    """ptwatch -- ctrlc MODE as the foreground job of a pty, and ^C typed:
    the terminal's SIGINT reaches ptwatch and the command. ptwatch must go
    on tracing until the command has reacted and report what it did: die of
    SIGINT (die), exit 3 from its handler (handle); a command that ignores it
    (ignore) is traced on until a second ^C, then left running, untraced; one
    that handles the first and dies of the second (once) must not be said to
    live on when ptwatch lets go at the second."""
    reaper = become_subreaper()
    term, ready_r, ctl_w = ctrlc_terminal(session, mode)
    run = term.run
    pid = None
    status = None
    try:
        pid = ctrlc_waiting(ready_r)
        term.interrupt()
        first = time.monotonic()
        if mode == 'die':
            term.wait(20, 'ptwatch did not end after ^C')
            chk.eq('ptwatch exit status (dies of SIGINT, as the command did)',
                   run.returncode, -signal.SIGINT)
        elif mode == 'handle':
            chk.eq('the fixture saw the SIGINT', read_line(ready_r, 20, 'sigint').split()[0],
                   'sigint')
            term.wait(20, 'ptwatch did not end after ^C')
            chk.eq('ptwatch exit status (the command\'s)', run.returncode, 3)
        elif mode == 'once':
            # handled, then its default action: the second ^C kills it,
            # and ptwatch, letting go, must not say it lives on
            chk.eq('the fixture saw the first SIGINT', read_line(ready_r, 20, 'sigint').split()[0],
                   'sigint')
            chk.eq('ptwatch still runs after the first ^C', term.poll(), None)
            second = time.monotonic()
            term.interrupt()
            term.wait(20, 'ptwatch did not end after the second ^C')
            chk.eq('ptwatch exit status (dies of SIGINT, as the command did)',
                   run.returncode, -signal.SIGINT)
        else:
            term.expect(r'\bsignal\s+SIGINT', 20, 'the SIGINT delivery line')
            chk.eq('ptwatch still runs after the first ^C', term.poll(), None)
            if backend() != 'kernel':   # (there: the thread made next is seen)
                chk.true('the fixture is still traced after the first ^C (tracers %s)'
                         % tracer_pids(pid), pid in tracer_pids(pid))
            os.write(ctl_w, b't')
            made = int(read_line(ready_r, 20, 'made').split()[1])
            term.expect(r'tid %d made_worker\b' % made, 20,
                        'the thread made after the first ^C')
            second = time.monotonic()
            term.interrupt()
            try:
                term.wait(5, 'ptwatch did not detach after a second ^C')
            except Failed:
                # Only if the second one came too late to count as such.
                if second - first <= SECOND_CTRL_C_S:
                    raise
                print('note: second ^C %.2f s after the first; typing a third'
                      % (second - first))
                term.interrupt()
                term.wait(5, 'ptwatch did not detach after two quick ^C')
            chk.eq('ptwatch exit status after the second ^C', run.returncode, 128 + signal.SIGINT)
            check_untouched(chk, pid, 'after the second ^C')
            os.write(ctl_w, b'q')
            if reaper:
                status = wait_pid(pid, 10)
                chk.true('the fixture exited 0 after the detach (status %r)' % status,
                         isinstance(status, int) and os.WIFEXITED(status)
                         and os.WEXITSTATUS(status) == 0)
    finally:
        term.close()
        if pid is not None and status is None and reaper and wait_pid(pid, 0.1) is None:
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            wait_pid(pid, 5)
        os.close(ready_r)
        os.close(ctl_w)

    text = term.text()
    print('terminal:\n%s' % tail(text, 12))
    doc = load_doc(run)
    load_truth(run)
    interrupts = doc['session'].get('interrupts')
    chk.true('session.interrupts: the first ^C, which reached the command (got %r)'
             % (interrupts,),
             isinstance(interrupts, list) and interrupts
             and interrupts[0].get('signal') == 'SIGINT'
             and interrupts[0].get('reached_target') is True
             and interrupts[0].get('action') == 'traced_on')
    if mode in ('die', 'handle', 'once'):
        want = {'signal': 'SIGINT', 'core_dumped': False} if mode != 'handle' else {'code': 3}
        chk.eq('target.exit', doc['target']['exit'], want)
        if mode == 'once' and doc['session']['end_reason'] != 'target_exited':
            # ptwatch let go at the second ^C and passed it on; it killed.
            # (Or the command's delivery came first, and ended it traced.)
            chk.true('second ^C within %.1f s (%.2f s)' % (SECOND_CTRL_C_S, second - first),
                     second - first <= SECOND_CTRL_C_S)
            chk.true('target.fate: ended (got %r)' % doc['target'].get('fate'),
                     doc['target'].get('fate') in ('ended', 'ended_after_detach'))
            chk.eq('session.end_reason', doc['session']['end_reason'], 'interrupted')
            chk.eq('session.interrupts: the second ^C detached',
                   [i.get('action') for i in interrupts or []], ['traced_on', 'detached'])
        else:
            chk.eq('target.fate', doc['target'].get('fate'), 'ended')
            chk.eq('session.end_reason', doc['session']['end_reason'], 'target_exited')
        chk.true('the terminal does not say "lives on"', 'lives on' not in text)
        end = r'process (was )?killed by SIGINT' if mode != 'handle' else 'process exited with code 3'
        chk.true('the summary says "%s"' % end, re.search(end, text))
        if doc['session']['end_reason'] == 'target_exited':
            # (once ptwatch let go first, the delivery happened untraced:
            # the summary's "then process was killed by SIGINT" says it)
            chk.true('the log shows the SIGINT delivery', re.search(r'\bsignal\s+SIGINT', text))
        if mode == 'handle':
            Model(chk, run, 'ctrlc.c').check_complete()
    else:
        chk.eq('target.exit', doc['target']['exit'], None)
        chk.eq('target.fate', doc['target'].get('fate'), 'lives_on')
        chk.eq('session.end_reason', doc['session']['end_reason'], 'interrupted')
        chk.true('session.interrupts: the last one detached (got %r)' % (interrupts,),
                 isinstance(interrupts, list) and len(interrupts) >= 2
                 and interrupts[-1].get('action') == 'detached')
        chk.true('the summary says the process lives on',
                 re.search(r'detached \(interrupted\), process %d lives on' % pid, text))
        made_spans = [sp for sp in thread_spans(doc)
                      if (sp.get('start_routine') or {}).get('symbol') == 'made_worker']
        chk.true('the thread made after the first ^C was traced to its end (%r)' % made_spans,
                 len(made_spans) == 1 and made_spans[0]['status'] == 'completed')
