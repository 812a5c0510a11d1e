#!/usr/bin/python3
"""--trace on the kernel path where the kernel's one list of pending
uretprobe returns per thread meets more than one stack (man page, BUGS;
docs/design.md): what ptwatch says, and what became of the program.

  ctxup, altstack (tests/kernel/kframes_stacks.c): a context, or a signal
      handler on a sigaltstack, above a thread's traced calls: the kernel
      drops their pending returns; a kernel_limit note must say so. The
      program's fate is printed (on 6.18: killed by SIGILL).
  pingpong (tests/fixtures/frames_sig.c): two contexts with traced calls
      open across their switches: the note must say that returns went to
      another call's return address, and that the program did not compute
      what it does untraced (printed).
  context (the same fixture): a call-like context below its caller: no
      such note, and the program's output is its untraced output.
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
    return p.stdout.decode(), err, notes


def main():
    with tempfile.TemporaryDirectory() as tmp:
        for mode, said in [("ctxup", "a context ran traced calls on a stack above"),
                           ("altstack", "alternate stack (sigaltstack) above")]:
            rc, out = untraced([stacks, mode])
            check("%s untraced exits 0" % mode, rc == 0, rc)
            if "%s other-above 1" % mode not in out:
                print("skip: the other stack is not above the thread's here:\n" + out)
                sys.exit(77)
            kout, err, notes = kernel_run([stacks, mode], "ks_*", tmp)
            check("%s: a kernel_limit note says the kernel dropped the returns" % mode,
                  any(said in n for n in notes), notes)
            fate = [l for l in err.splitlines() if "process " in l and "threads" in l]
            print("%s: untraced %r; kernel path %r, %s" % (mode, out.splitlines()[-1],
                  kout.splitlines()[-1] if kout.strip() else "", fate[-1] if fate else "?"))
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
        rc, out = untraced([frames_sig, "pingpong"])
        kout, err, notes = kernel_run([frames_sig, "pingpong"], "sg_*", tmp)
        check("pingpong: a kernel_limit note says returns went to another call's return address",
              any("went to another call's return address" in n for n in notes), notes)
        print("pingpong: untraced %r, kernel path %r" % (out.strip(), kout.strip()))
        rc, out = untraced([frames_sig, "context"])
        kout, err, notes = kernel_run([frames_sig, "context"], "sg_*", tmp)
        check("context: no note of returns dropped or sent elsewhere",
              not any("dropped" in n or "another call's return address" in n for n in notes),
              notes)
        check("context: the program's output is its untraced output", kout == out, (kout, out))
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
