#!/usr/bin/python3
"""The Open POSIX Test Suite's pthread conformance tests (the suite LTP
carries as open_posix_testsuite; Debian's posixtestsuite 1.5.2 source)
natively and under ptwatch, one after the other: issue 31's acceptance
run (`--locks -f --trace '*thread*'`, default options, as root: the
kernel path).

For each conformance/interfaces/pthread_*/N-M.c test: built once
(-buildonly ones only built), run natively, then under ptwatch with the
options given, each with a timeout. Reported: how many pass natively, how
many of those pass under ptwatch, the tests whose status changed, every
warning code seen (with the tests it came from), and the incomplete spans
(thread spans unmatched or open, wait spans unmatched or open, frames
open), per test.

    python3 bench/posix_pthread.py [BUILD_DIR] [-- PTWATCH OPTIONS...]
        default options: --locks -f --trace '*thread*'
    ONLY=pthread_cond_broadcast  (a substring of the tests' paths)
    TIMEOUT=60 (seconds, each run; under ptwatch at least SLACK=6 times
    the native run's)   JOBS=2 (builds at once)

The source comes from Debian's pool (checked against the sha256 of its
.dsc) into BUILD_DIR/posixtestsuite, once.
"""
import collections
import concurrent.futures
import hashlib
import json
import os
import shutil
import signal
import subprocess
import sys
import tarfile
import tempfile
import time
import urllib.request

POOL = "http://deb.debian.org/debian/pool/main/p/posixtestsuite/"
ORIG = "posixtestsuite_1.5.2.orig.tar.gz"
SHA256 = "15a2185672127cba851d35ec9d538ff6148defdbb75f99c7e9c50aeba0f94757"
STATUS = {0: "PASS", 1: "FAIL", 2: "UNRESOLVED", 4: "UNSUPPORTED", 5: "UNTESTED"}

args = sys.argv[1:]
opts = ["--locks", "-f", "--trace", "*thread*"]
if "--" in args:
    i = args.index("--")
    args, opts = args[:i], args[i + 1:]
build = os.path.abspath(args[0] if args else "build")
ptwatch = os.path.join(build, "ptwatch")
ONLY = os.environ.get("ONLY", "")
TIMEOUT = float(os.environ.get("TIMEOUT", "60"))
SLACK = float(os.environ.get("SLACK", "6"))
JOBS = int(os.environ.get("JOBS", "2"))


def fetch(dest):
    """The suite's source, unpacked under dest (once)."""
    top = os.path.join(dest, "posixtestsuite")
    if os.path.isdir(os.path.join(top, "conformance")):
        return top
    os.makedirs(dest, exist_ok=True)
    tarball = os.path.join(dest, ORIG)
    if not os.path.exists(tarball):
        with urllib.request.urlopen(POOL + ORIG, timeout=60) as r, open(tarball + ".part",
                                                                         "wb") as f:
            shutil.copyfileobj(r, f)
        os.rename(tarball + ".part", tarball)
    with open(tarball, "rb") as f:
        digest = hashlib.sha256(f.read()).hexdigest()
    if digest != SHA256:
        os.unlink(tarball)
        sys.exit("%s: sha256 %s, not %s" % (tarball, digest, SHA256))
    with tarfile.open(tarball) as t:
        t.extractall(dest, filter="data")
    return top


def tests_of(top):
    base = os.path.join(top, "conformance", "interfaces")
    out = []
    for d in sorted(os.listdir(base)):
        if not d.startswith("pthread_"):
            continue
        for f in sorted(os.listdir(os.path.join(base, d))):
            stem = f[:-2]
            parts = stem.replace("-buildonly", "").split("-")
            if f.endswith(".c") and len(parts) == 2 and all(p.isdigit() for p in parts):
                path = os.path.join(base, d, f)
                if ONLY in path:
                    out.append(path)
    return out


def compile_one(top, src, outdir):
    name = os.path.relpath(src, os.path.join(top, "conformance", "interfaces"))[:-2]
    exe = os.path.join(outdir, name.replace("/", "__"))
    if os.path.exists(exe) and os.path.getmtime(exe) >= os.path.getmtime(src):
        return name, exe, None
    p = subprocess.run(["gcc", "-O2", "-D_XOPEN_SOURCE=600", "-I", os.path.join(top, "include"),
                        "-o", exe, src, "-lpthread", "-lrt", "-lm"],
                       stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    return name, exe, (p.stderr.strip().splitlines() or ["?"])[-1] if p.returncode else None


def run(cmd, cwd, timeout=TIMEOUT):
    """(exit status or "timeout", seconds, stderr); on a timeout the whole
    process group goes (the test too, which outlives a killed ptwatch)."""
    t0 = time.monotonic()
    p = subprocess.Popen(cmd, cwd=cwd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                         start_new_session=True)
    try:
        _, err = p.communicate(timeout=timeout)
        return p.returncode, time.monotonic() - t0, err.decode(errors="replace")
    except subprocess.TimeoutExpired:
        os.killpg(p.pid, signal.SIGKILL)
        p.communicate()
        return "timeout", time.monotonic() - t0, ""


def incomplete(doc):
    """What the document left incomplete: "kind status/reason" -> count. (A
    forked child's main thread that ended with its process, exit() called
    in its copy of main, is complete: the ptrace path says the same.)"""
    got = collections.Counter()
    root = (doc.get("target") or {}).get("pid")
    for s in doc.get("spans", []):
        end = s.get("end") or {}
        if s.get("kind", "thread") == "thread" and s.get("pid") not in (None, root) and \
                s.get("tid") == s.get("pid") and end.get("reason") == "process_exit":
            continue
        kind = s.get("kind", "thread")
        status = s.get("status")
        if kind == "frame":
            if status == "open":
                got["frame open"] += 1
        elif kind == "wait":
            if status in ("open", "unmatched"):
                got["wait %s/%s" % (status, s.get("reason"))] += 1
        elif status in ("open", "unmatched"):
            got["thread %s/%s" % (status, end.get("reason"))] += 1
    return got


def main():
    if not os.access(ptwatch, os.X_OK):
        sys.exit("no %s: build first" % ptwatch)
    top = fetch(build)
    outdir = os.path.join(build, "posixtestsuite-bin")
    os.makedirs(outdir, exist_ok=True)
    srcs = tests_of(top)
    with concurrent.futures.ThreadPoolExecutor(JOBS) as ex:
        built = list(ex.map(lambda s: compile_one(top, s, outdir), srcs))
    failed_builds = [(n, e) for n, _, e in built if e]
    runnable = [(n, x) for n, x, e in built if not e and "buildonly" not in n]
    print("bench/posix_pthread.py: %d tests (%d build-only), %d did not build; ptwatch %s"
          % (len(srcs), sum("buildonly" in n for n, _, _ in built), len(failed_builds),
             " ".join(opts)))
    native = collections.Counter()
    traced = collections.Counter()
    changed, warned, partial, slower = [], collections.defaultdict(list), [], []
    t_native = t_traced = 0.0
    with tempfile.TemporaryDirectory() as tmp:
        for name, exe in runnable:
            code, t0, _ = run([exe], tmp)
            t_native += t0
            native[STATUS.get(code, str(code))] += 1
            doc_path = os.path.join(tmp, "doc.json")
            # (a test that runs long natively is given as many times more)
            tcode, t, err = run([ptwatch, "-q", *opts, "--json", "-o", doc_path, "--", exe], tmp,
                                max(TIMEOUT, SLACK * t0))
            t_traced += t
            if code == 0 and t0 >= 1:
                slower.append((t / t0, name, t0, t))
            traced[STATUS.get(tcode, str(tcode))] += 1
            if tcode != code:
                changed.append((name, STATUS.get(code, code), STATUS.get(tcode, tcode),
                                err.strip().splitlines()[-1:] if err.strip() else ""))
            doc = None
            try:
                with open(doc_path) as f:
                    doc = json.load(f)
            except (OSError, ValueError):
                pass
            if doc:
                for w in doc.get("warnings", []):
                    warned[w["code"]].append((name, w["message"][:160]))
                inc = incomplete(doc)
                if inc and code == 0:
                    partial.append((name, dict(inc)))
                os.unlink(doc_path)
            elif code == 0:
                partial.append((name, {"no document": 1}))
    passing = native["PASS"]
    print("native:  %s  (%.0f s)" % (dict(native), t_native))
    print("ptwatch: %s  (%.0f s)" % (dict(traced), t_traced))
    print("passing natively: %d; status changed under ptwatch: %d" % (passing, len(changed)))
    for ratio, n, t0, t in sorted(slower, reverse=True)[:5]:
        print("  slowest under ptwatch (of those running 1 s or more natively): %s: %.1f s, "
              "natively %.1f s (%.1fx)" % (n, t, t0, ratio))
    for c in changed:
        print("  changed: %s: %s -> %s %s" % c)
    print("warnings: %d codes in %d tests" % (len(warned), len({n for v in warned.values()
                                                               for n, _ in v})))
    for code, v in sorted(warned.items()):
        print("  %s: %d, in %d tests (first: %s: %s)" % (code, len(v), len({n for n, _ in v}),
                                                         v[0][0], v[0][1]))
    print("tests passing natively with incomplete spans under ptwatch: %d" % len(partial))
    for n, inc in partial[:40]:
        print("  %s: %s" % (n, inc))
    print("records lost (kernel path, kernel_events_lost): %d tests"
          % len({n for n, _ in warned.get("kernel_events_lost", [])}))
    for n, e in failed_builds:
        print("  did not build: %s: %s" % (n, e))


if __name__ == "__main__":
    main()
