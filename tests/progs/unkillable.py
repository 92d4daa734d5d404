"""Test program: ignores SIGTERM, optionally leaves a setsid'd daemon, records its pids.

usage: unkillable.py PIDFILE [--daemon] [--spew]
Appends its own pid (and with --daemon the pid of a double-forked, setsid'd grandchild that
also ignores SIGTERM and is orphaned at once) to PIDFILE, prints "ready", then waits forever
(with --spew it prints a line every few milliseconds instead).
"""

import os
import signal
import sys
import time


def record(path: str, pid: int) -> None:
    with open(path, "a") as f:
        f.write(f"{pid}\n")


def main() -> None:
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    pidfile = sys.argv[1]
    if "--daemon" in sys.argv and os.fork() == 0:
        os.setsid()  # the intermediate leaves the session, forks the daemon and exits
        if os.fork() == 0:
            record(pidfile, os.getpid())
            while True:
                signal.pause()
        os._exit(0)
    record(pidfile, os.getpid())
    sys.stdout.write("ready\n")
    sys.stdout.flush()
    n = 0
    while True:
        if "--spew" in sys.argv:
            n += 1
            sys.stdout.write(f"spew {n}\n")
            sys.stdout.flush()
            time.sleep(0.005)
        else:
            signal.pause()


if __name__ == "__main__":
    main()
