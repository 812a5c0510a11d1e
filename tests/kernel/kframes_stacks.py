#!/usr/bin/python3
"""--trace on the kernel path where the kernel's one list of pending
uretprobe returns per thread would meet more than one stack (man page,
BUGS; docs/design.md): a context, or a signal handler on a sigaltstack,
above a thread's traced calls made the kernel drop their pending returns
(the program then killed by SIGILL on 6.18); two contexts with traced calls
open across their switches got each other's returns (pingpong computed 13,
not 39). A program that can switch stacks (it needs swapcontext,
setcontext or sigaltstack) has its returns seen by probes on the traced
functions' exits instead (src/kernel/kframes.c):

  ctxup, altstack (tests/kernel/kframes_stacks.c), pingpong and context
      (tests/fixtures/frames_sig.c), on both paths: the program's output
      is its untraced output, no kernel_limit note, and the frame trees are
      the same on both (ctxup and altstack: exactly the expected ones, the
      handler's call nested under the calls it interrupted, with its
      signal; none of them left).

    kframes_stacks.py PTWATCH FIXTURE_STACKS FIXTURE_FRAMES_SIG
    (exit 0 pass, 1 fail, 77 skip)
"""
import json
import os
import subprocess
import sys
import tempfile

ptwatch, stacks, frames_sig = sys.argv[1:4]
failures = []


def check(what, ok, detail=""):
    print("%s: %s%s" % ("ok" if ok else "FAIL", what, (" (%s)" % detail) if detail and not ok else ""))
    if not ok:
        failures.append(what)


def untraced(cmd):
    p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=60)
    return p.returncode, p.stdout.decode()


def traced(backend, cmd, pattern, tmp):
    doc = os.path.join(tmp, "doc-%s.json" % backend)
    p = subprocess.run([ptwatch, "--backend=" + backend, "-q", "--trace", pattern, "-o", doc, "--"] + cmd,
                       stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=120)
    err = p.stderr.decode()
    if p.returncode == 1 and "--backend=kernel cannot run" in err:
        print("skip: " + err.strip().splitlines()[-1])
        sys.exit(77)
    with open(doc) as f:
        d = json.load(f)
    notes = [w["message"] for w in d.get("warnings", []) if w["code"] == "kernel_limit"]
    frames = sorted((x for x in d["spans"] if x["kind"] == "frame"), key=lambda x: x["id"])
    tree = [((x.get("function") or {}).get("symbol"), x["depth"], x["status"], x.get("reason"),
             x.get("signal")) for x in frames]
    return p.stdout.decode(), notes, tree


def main():
    want = {"ctxup": [("ks_switcher", 1, "completed", None, None),
                      ("ks_on_context", 2, "completed", None, None),
                      ("ks_leaf", 3, "completed", None, None)],
            "altstack": [("ks_outer", 1, "completed", None, None),
                         ("ks_inner", 2, "completed", None, None),
                         ("ks_leaf", 3, "completed", None, "SIGUSR1")]}
    with tempfile.TemporaryDirectory() as tmp:
        for prog, mode, pattern in [(stacks, "ctxup", "ks_*"), (stacks, "altstack", "ks_*"),
                                    (frames_sig, "pingpong", "sg_*"),
                                    (frames_sig, "context", "sg_*")]:
            rc, out = untraced([prog, mode])
            check("%s untraced exits 0" % mode, rc == 0, rc)
            trees = {}
            for backend in ("kernel", "ptrace"):
                kout, notes, trees[backend] = traced(backend, [prog, mode], pattern, tmp)
                check("%s on %s: the program's output is its untraced output" % (mode, backend),
                      kout == out, (kout, out))
                check("%s on %s: no kernel_limit note" % (mode, backend), notes == [], notes)
                check("%s on %s: frames" % (mode, backend), len(trees[backend]) > 0)
                if mode in want:
                    check("%s on %s: the frame tree" % (mode, backend),
                          trees[backend] == want[mode], trees[backend])
            check("%s: the same frame tree on both paths" % mode,
                  trees["kernel"] == trees["ptrace"], trees)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
