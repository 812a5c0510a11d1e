#!/usr/bin/python3
"""--trace on the kernel path where the kernel's one list of pending
uretprobe returns per thread would meet more than one stack (man page,
BUGS; docs/design.md): a context, or a signal handler on a sigaltstack,
above a thread's traced calls makes the kernel drop their pending returns
(the program then killed by SIGILL on 6.18); two contexts with traced calls
open across their switches get each other's returns (pingpong computes 13,
not 39). So the kernel path gives no return probes to a program that can
switch stacks (it needs swapcontext, setcontext or sigaltstack):

  ctxup, altstack (tests/kernel/kframes_stacks.c), pingpong and context
      (tests/fixtures/frames_sig.c) on the kernel path: a kernel_limit note
      says it can switch stacks, no frame, and the program's output is its
      untraced output.
  ctxup, altstack under --backend=ptrace: the program's untraced output
      and the exact trees (the handler's call nested under the calls it
      interrupted, with its signal; none of them left).

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


def kernel_run(cmd, pattern, tmp):
    doc = os.path.join(tmp, "doc.json")
    p = subprocess.run([ptwatch, "--backend=kernel", "-q", "--trace", pattern, "-o", doc, "--"] + cmd,
                       stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=120)
    err = p.stderr.decode()
    if p.returncode == 1 and "--backend=kernel cannot run" in err:
        print("skip: " + err.strip().splitlines()[-1])
        sys.exit(77)
    with open(doc) as f:
        d = json.load(f)
    notes = [w["message"] for w in d.get("warnings", []) if w["code"] == "kernel_limit"]
    frames = len([x for x in d["spans"] if x["kind"] == "frame"])
    return p.stdout.decode(), err, notes, frames


def main():
    with tempfile.TemporaryDirectory() as tmp:
        for prog, mode, pattern in [(stacks, "ctxup", "ks_*"), (stacks, "altstack", "ks_*"),
                                    (frames_sig, "pingpong", "sg_*"),
                                    (frames_sig, "context", "sg_*")]:
            rc, out = untraced([prog, mode])
            check("%s untraced exits 0" % mode, rc == 0, rc)
            kout, err, notes, frames = kernel_run([prog, mode], pattern, tmp)
            check("%s: a kernel_limit note says it can switch stacks" % mode,
                  any("it can switch stacks (" in n for n in notes), notes)
            check("%s: no frame on the kernel path" % mode, frames == 0, frames)
            check("%s: the program's output is its untraced output" % mode, kout == out,
                  (kout, out))
        want = {"ctxup": [("ks_switcher", 1, "completed", None), ("ks_on_context", 2, "completed", None),
                          ("ks_leaf", 3, "completed", None)],
                "altstack": [("ks_outer", 1, "completed", None), ("ks_inner", 2, "completed", None),
                             ("ks_leaf", 3, "completed", "SIGUSR1")]}
        for mode in ("ctxup", "altstack"):
            rc, out = untraced([stacks, mode])
            doc = os.path.join(tmp, "ptrace.json")
            p = subprocess.run([ptwatch, "--backend=ptrace", "-q", "--trace", "ks_*", "-o", doc, "--",
                                stacks, mode], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                               timeout=120)
            check("%s under ptrace: the untraced output" % mode, p.stdout.decode() == out,
                  (p.stdout, out))
            with open(doc) as f:
                frames = [x for x in json.load(f)["spans"] if x["kind"] == "frame"]
            got = [((x.get("function") or {}).get("symbol"), x["depth"], x["status"], x.get("signal"))
                   for x in sorted(frames, key=lambda x: x["id"])]
            check("%s under ptrace: the frame tree" % mode, got == want[mode], got)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
