"""The wall time of a whole command, for the bench scripts.

Not subprocess.run(..., timeout=T) for a command whose output is not a
pipe: its wait polls with sleeps that double from 0.5 ms, so every time it
gives is a sum of them (16, 32, 64 ms...): bench/kstart.py printed 32.0 ms
for a start-up of 21 ms. Here the wait blocks in waitpid, and a timer
kills the command after `limit` seconds."""
import subprocess
import threading
import time


def wall(argv, limit=60, env=None, stderr=subprocess.DEVNULL):
    """(seconds, returncode) of argv run to its end, stdout discarded."""
    t0 = time.monotonic()
    p = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=stderr, env=env)
    timer = threading.Timer(limit, p.kill)
    timer.start()
    try:
        rc = p.wait()
    finally:
        timer.cancel()
    return time.monotonic() - t0, rc
