"""A burst of signals while the loop is busy: none is lost and nothing is printed.

Found by hand: a SIGTERM to a runner of 500 command watchers took 25 s and wrote dozens of
`Exception ignored when trying to write to the signal wakeup fd` tracebacks into its log (a
`--log-format json` log was no longer JSON). `loop.add_signal_handler` writes one byte a signal
into a socket; the SIGCHLDs of hundreds of children ended at once filled it while the loop was
busy, CPython reported each byte that did not fit, and a SIGTERM among them was dropped with
its byte. Here a real process holds its loop with that socket full, has 50 children exit, then
sends itself SIGTERM: the inbox has the SIGTERM, the SIGCHLD callback ran, stderr is empty."""

from __future__ import annotations

import subprocess
import sys
import textwrap

SCRIPT = textwrap.dedent("""
    import asyncio, os, signal, time
    from watchrun.runtime.signals import SignalInbox, handle_signals

    async def main():
        loop = asyncio.get_running_loop()
        inbox = SignalInbox(loop)
        chld = asyncio.Event()
        restore = handle_signals(loop, {signal.SIGCHLD: chld.set})
        # The loop is held while its wake-up socket is full, as in a runner whose worker
        # threads and child watchers woke it for hundreds of children at once.
        for _ in range(20000):
            loop.call_soon_threadsafe(lambda: None)
        pids = []
        for i in range(50):
            pid = os.fork()
            if pid == 0:
                time.sleep(i / 500)
                os._exit(0)
            pids.append(pid)
        time.sleep(0.3)  # every SIGCHLD arrives meanwhile
        os.kill(os.getpid(), signal.SIGTERM)
        time.sleep(0.1)
        for pid in pids:
            os.waitpid(pid, 0)
        got = await asyncio.wait_for(inbox.next(), 10)
        await asyncio.wait_for(chld.wait(), 10)
        inbox.close()
        restore()
        print(got.name)

    asyncio.run(main())
""")


def test_a_burst_of_sigchld_loses_no_sigterm_and_prints_nothing() -> None:
    done = subprocess.run([sys.executable, "-c", SCRIPT], capture_output=True, text=True,
                          timeout=60)
    assert (done.returncode, done.stdout.strip(), done.stderr) == (0, "SIGTERM", "")
