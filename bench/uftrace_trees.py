#!/usr/bin/python3
"""--trace on uftrace's own test programs: the kernel path's call trees
against the ptrace path's, and what each program prints against its
untraced run.

uftrace's tests/s-*.c and s-*.cpp that build from one file (the source
from a uftrace checkout: UFTRACE=/path/to/uftrace, or the mirror
`fetch github:namhyung/uftrace` leaves), at -O0 and -O2 (-g), each run
natively, then under `ptwatch --backend=ptrace` and `--backend=kernel`
with `--trace 'EXE:*'` (every function of the program itself). A tree is
each thread's frames in entry order as (symbol, depth, status, reason);
the two backends must give the same trees, and the program must print
what it prints untraced. Run as root (the kernel path).

    python3 bench/uftrace_trees.py build        # ONLY=substring to filter
"""
import json
import os
import subprocess
import sys
import tempfile

build = sys.argv[1] if len(sys.argv) > 1 else "build"
ptwatch = os.path.abspath(os.path.join(build, "ptwatch"))
src = os.environ.get("UFTRACE", "/work/.mirror/namhyung+uftrace/repo")
ONLY = os.environ.get("ONLY", "")
# needing more than one file, arguments, or a library of uftrace's own
SKIP = {"s-dlopen.c", "s-dlopen2.cpp", "s-lib.c", "s-libmain.c", "s-libdyn1.c", "s-libdyn2.c",
        "s-libexcept-main.cpp", "s-libexcept.cpp", "s-libfoo.cpp", "s-libbar.cpp",
        "s-libbaz.cpp", "s-agent.c", "s-daemon.c", "s-sdt.c", "s-patchable-abc.c",
        "s-dynmain.c", "s-dynamic.c", "s-chcpu.c", "s-per-cpu.c", "s-malloc-hook.c",
        "s-thread-exec.c", "s-forkexec.c", "s-vforkexec.c", "s-posix_spawn.c",
        "s-watch-global.c"}


def sources():
    if os.path.isdir(os.path.join(src, "tests")):
        names = sorted(os.listdir(os.path.join(src, "tests")))
        return {n: open(os.path.join(src, "tests", n), "rb").read() for n in names
                if n.startswith("s-") and n.endswith((".c", ".cpp"))}
    out = subprocess.run(["git", "-C", src, "ls-tree", "--name-only", "HEAD", "tests/"],
                         capture_output=True, text=True, check=True).stdout.split()
    return {os.path.basename(p): subprocess.run(["git", "-C", src, "show", "HEAD:" + p],
                                                capture_output=True, check=True).stdout
            for p in out if os.path.basename(p).startswith("s-") and p.endswith((".c", ".cpp"))}


def trees(doc):
    frames = sorted((s for s in doc["spans"] if s["kind"] == "frame"), key=lambda s: s["id"])
    by_tid = {}
    for f in frames:
        sym = (f.get("function") or {}).get("symbol")
        by_tid.setdefault(f["tid"], []).append((sym, f["depth"], f["status"], f.get("reason")))
    # threads in the order of their first frame (tids differ between runs)
    return [v for _, v in sorted(by_tid.items(), key=lambda kv: kv[1] and kv[0])]


def run(cmd, cwd):
    p = subprocess.run(cmd, cwd=cwd, capture_output=True, timeout=60)
    return p.returncode, p.stdout


def main():
    tmp = tempfile.mkdtemp(prefix="ptw-uftrace-")
    same = differ = failed = 0
    for name, text in sorted(sources().items()):
        if name in SKIP or (ONLY and ONLY not in name):
            continue
        path = os.path.join(tmp, name)
        with open(path, "wb") as f:
            f.write(text)
        for opt in ("-O0", "-O2"):
            exe = os.path.join(tmp, name.split(".")[0] + opt)
            cc = "g++" if name.endswith(".cpp") else "gcc"
            c = subprocess.run([cc, opt, "-g", "-pthread", "-o", exe, path, "-ldl"],
                               capture_output=True)
            if c.returncode:
                continue
            native = run([exe], tmp)
            got = {}
            for b in ("ptrace", "kernel"):
                doc = os.path.join(tmp, "doc.json")
                r = run([ptwatch, "--backend=" + b, "-q", "--json", "-o", doc, "--trace",
                         os.path.basename(exe) + ":*", "--", exe], tmp)
                try:
                    d = json.load(open(doc))
                except (OSError, ValueError):
                    d = None
                got[b] = (r, trees(d) if d else None,
                          sorted({w["code"] for w in d["warnings"]}) if d else None)
            what = "%s %s" % (name, opt)
            bad = [b for b in got if got[b][0] != native]
            if bad or got["ptrace"][1] is None or got["kernel"][1] is None:
                failed += 1
                print("%-32s output differs from untraced under %s" % (what, ",".join(bad)))
            elif got["ptrace"][1] != got["kernel"][1]:
                differ += 1
                a, k = got["ptrace"][1], got["kernel"][1]
                print("%-32s trees differ: ptrace %d frames, kernel %d; warnings %s / %s" %
                      (what, sum(map(len, a)), sum(map(len, k)), got["ptrace"][2],
                       got["kernel"][2]))
                for ta, tk in zip(a, k):
                    for i, (x, y) in enumerate(zip(ta, tk)):
                        if x != y:
                            print("    first difference at frame %d: ptrace %s, kernel %s" %
                                  (i, x, y))
                            break
            else:
                same += 1
    print("same trees %d, different %d, output differs or no document %d" %
          (same, differ, failed))


main()
