#!/usr/bin/env python3
"""Runs a command once and prints "wall_s cpu_s peak_kib status" on one line (for bench/ scripts).

    bench/measure.py LIMIT_S OUTPUT -- CMD ARGS...

CMD's stdout and stderr go to OUTPUT. cpu_s is the user + system time of CMD and its children at
microseconds' resolution (os.wait4; /usr/bin/time rounds it to 10 ms); peak_kib is CMD's peak
resident set as /usr/bin/time reports it (os.wait4's would include this Python process, whose
pages the child carries until it execs). status is CMD's exit status, 124 when it ran past
LIMIT_S and was killed (as timeout(1) says).
"""
import os
import signal
import subprocess
import sys
import tempfile
import threading
import time


def main() -> int:
    if len(sys.argv) < 5 or sys.argv[3] != "--":
        print(__doc__.strip().splitlines()[2].strip(), file=sys.stderr)
        return 2
    limit = float(sys.argv[1])
    rss = tempfile.NamedTemporaryFile(prefix="measure-", suffix=".rss", delete=False)
    rss.close()
    command = ["/usr/bin/time", "-f", "%M", "-o", rss.name] + sys.argv[4:]
    with open(sys.argv[2], "wb") as out:
        start = time.monotonic()
        child = subprocess.Popen(command, stdout=out, stderr=subprocess.STDOUT, start_new_session=True)
        # A blocking wait, and a timer for the limit: polling would take CPU time from the
        # command, which on a machine with as many cores as the command has threads slows it.
        expired = threading.Event()

        def kill() -> None:
            expired.set()
            os.killpg(child.pid, signal.SIGKILL)

        timer = threading.Timer(limit, kill)
        timer.start()
        _, raw, usage = os.wait4(child.pid, 0)
        timer.cancel()
        wall = time.monotonic() - start
        status = 124 if expired.is_set() else os.waitstatus_to_exitcode(raw)
    cpu = usage.ru_utime + usage.ru_stime
    with open(rss.name) as f:
        lines = [line.strip() for line in f if line.strip()]
    os.unlink(rss.name)
    peak = lines[-1] if lines and lines[-1].isdigit() else "0"
    print(f"{wall:.6f} {cpu:.6f} {peak} {status if status >= 0 else 128 - status}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
