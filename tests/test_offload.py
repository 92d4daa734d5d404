"""The offloader: blocking calls off the loop in one worker thread, results handed back in
batches, a stuck call holding up no other, a cancelled call not run."""

from __future__ import annotations

import asyncio
import concurrent.futures
import threading
import time

import pytest

from watchrun.offload import DRAINERS, STUCK_S, Offload, offload, offloader


def test_each_awaiter_gets_its_own_result_or_exception() -> None:
    def fail(exc: BaseException) -> None:
        raise exc

    async def body() -> None:
        results = await asyncio.gather(
            offload(lambda: 1), offload(pow, 2, 10), offload(sorted, [3, 1, 2], reverse=True),
            offload(fail, ValueError("bad")), offload(fail, StopIteration()),
            return_exceptions=True)
        assert results[:3] == [1, 1024, [3, 2, 1]]
        assert isinstance(results[3], ValueError) and str(results[3]) == "bad"
        assert isinstance(results[4], RuntimeError)  # a future cannot hold a StopIteration
        assert "StopIteration" in str(results[4])

    asyncio.run(body())


def test_many_calls_share_a_thread_and_come_back_in_few_batches() -> None:
    """500 watchers starting: their calls share a worker thread (another only when the machine
    stalls one for STUCK_S) and a few wake-ups of the loop, not a hop and a wake-up each."""
    async def body() -> None:
        loop_thread = threading.get_ident()
        threads = await asyncio.gather(*(offload(threading.get_ident) for _ in range(500)))
        assert loop_thread not in threads
        assert len(set(threads)) <= DRAINERS
        assert offloader().wakeups <= 50, offloader().wakeups

    asyncio.run(body())


def test_a_stuck_call_holds_up_no_other() -> None:
    """A call that hangs (a dead NFS mount) keeps its thread; after STUCK_S another drainer
    runs the calls queued behind it."""
    release = threading.Event()

    async def body() -> None:
        stuck = asyncio.ensure_future(offload(release.wait, 30))
        started = time.monotonic()
        try:
            others = await asyncio.wait_for(asyncio.gather(*(offload(abs, -i) for i in range(20))),
                                            10)
            assert others == list(range(20))
            assert time.monotonic() - started >= STUCK_S  # they waited for the detection only
            assert not stuck.done()
        finally:
            release.set()
        assert await stuck is True

    asyncio.run(body())


def test_a_call_whose_awaiter_is_cancelled_before_it_runs_is_not_run() -> None:
    gate, ran = threading.Event(), []

    async def body() -> None:
        first = asyncio.ensure_future(offload(gate.wait, 30))
        await asyncio.sleep(0)  # queued first: the drainer reaches `later` only after it
        later = asyncio.ensure_future(offload(ran.append, "later"))
        await asyncio.sleep(0)  # queued behind the gate
        later.cancel()
        gate.set()
        assert await first is True
        assert await offload(ran.append, "after") is None
        assert ran == ["after"]
        with pytest.raises(asyncio.CancelledError):
            await later

    asyncio.run(body())


def test_results_come_back_while_a_drainer_is_still_busy() -> None:
    """A drainer wakes the loop only when it runs out of calls; the loop's tick collects what
    landed meanwhile, so a quick call's result does not wait for a slow call queued after it."""
    slow = threading.Event()

    async def body() -> None:
        off = Offload(asyncio.get_running_loop(), drainers=1)
        quick = asyncio.ensure_future(off.run(lambda: "quick"))
        blocked = asyncio.ensure_future(off.run(lambda: slow.wait(30)))
        try:
            assert await asyncio.wait_for(quick, 5) == "quick"
            assert not blocked.done()
        finally:
            slow.set()
        assert await blocked is True

    asyncio.run(body())


def test_offloaded_calls_leave_the_loop_free() -> None:
    """The loop keeps its timers while a drainer runs a long batch of calls."""
    async def body() -> None:
        loop = asyncio.get_running_loop()
        worst = 0.0

        async def ticker() -> None:
            nonlocal worst
            while True:
                due = loop.time() + 0.005
                await asyncio.sleep(0.005)
                worst = max(worst, loop.time() - due)

        tick = asyncio.ensure_future(ticker())
        await asyncio.gather(*(offload(time.sleep, 0.002) for _ in range(100)))
        tick.cancel()
        assert worst < 0.1, f"the loop stalled {worst:.3f} s"

    asyncio.run(body())


def test_a_stuck_call_at_the_end_of_a_run_raises_nothing_on_the_loop() -> None:
    """When the run ends while a call hangs, the executor is shutting down: the tick that would
    start another drainer gives up quietly (the queued call stays with its awaiter)."""
    release = threading.Event()

    async def body() -> None:
        loop = asyncio.get_running_loop()
        errors: list[dict[str, object]] = []
        loop.set_exception_handler(lambda _loop, context: errors.append(context))
        executor = concurrent.futures.ThreadPoolExecutor(2)
        loop.set_default_executor(executor)
        stuck = asyncio.ensure_future(offload(release.wait, 30))
        queued = asyncio.ensure_future(offload(abs, -1))
        await asyncio.sleep(0)
        executor.shutdown(wait=False)
        try:
            await asyncio.sleep(STUCK_S * 3)  # ticks that find the drainer stuck
            assert errors == []
            assert not queued.done()
        finally:
            release.set()
        assert await stuck is True
        assert await asyncio.wait_for(queued, 5) == 1  # the drainer, unstuck, runs it

    asyncio.run(body())
