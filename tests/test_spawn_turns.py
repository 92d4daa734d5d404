"""Children started at once take turns to fork: the loop runs between two forks. Each fork holds
the loop while it copies the process; 500 command watchers forked in one turn of the loop held
it 10 s (no status, no reads, no signals handled) before the forks took turns."""

from __future__ import annotations

import asyncio
from typing import Any

from watchrun.process.spawn import Spawner

CHILDREN = 40


def test_children_started_at_once_fork_in_different_turns_of_the_loop() -> None:
    """The seam is the loop's subprocess_exec: each call notes how many turns the loop had run
    (a task counts them). Forks that share a count held the loop together."""
    turns_at_fork: list[int] = []

    async def main() -> None:
        loop = asyncio.get_running_loop()
        turns = 0
        real = loop.subprocess_exec

        async def noted(*args: Any, **kwargs: Any) -> Any:
            turns_at_fork.append(turns)
            return await real(*args, **kwargs)

        async def count() -> None:
            nonlocal turns
            while True:
                turns += 1
                await asyncio.sleep(0)

        loop.subprocess_exec = noted  # type: ignore[method-assign]
        counter = asyncio.create_task(count())
        spawner = Spawner()
        procs = await asyncio.gather(*(spawner.spawn(["true"], cwd=None, env={})
                                       for _ in range(CHILDREN)))
        counter.cancel()
        for proc in procs:
            await proc.wait()
            proc.close()

    asyncio.run(main())
    assert len(turns_at_fork) == CHILDREN
    shared = CHILDREN - len(set(turns_at_fork))
    assert shared == 0, f"{shared} of {CHILDREN} forks ran in a turn of the loop with another"
