"""A live file watcher's generations as checkpointed at its stop: a rotated one deleted and read
to its end is released then, as after rotateWait; one with bytes past what was read keeps them."""

from __future__ import annotations

import os

from msgspec.structs import replace

from watchrun.inotify import known_local
from watchrun.sources.generation import Generation
from watchrun.sources.identity import Checkpoint


def at_stop(gen: Generation, *, followed: bool) -> Checkpoint:
    """`gen`'s checkpoint at the stop. A rotated-away generation (not the one `followed` at the
    path) with no name left, on a local file system, that holds nothing past its last recorded
    line (its size now, by its descriptor) is finished: the next start finds it gone and that
    is no loss, as for one released after rotateWait or deleted by another host (`lost_gap`:
    a rotated one gets a gap only with bytes known unread). What its writer adds after the stop
    is not read, as after a release. Otherwise its size is the largest known, its descriptor's
    too: a start that finds it gone counts what it held past what was read (`missing_gap`);
    where the size cannot be trusted (a remote file system, or the descriptor answers for
    another file) it stays as seen, and the start's gap says what was seen."""
    cp = gen.checkpoint()
    if followed or not cp.deleted:
        return cp  # (still named: the next start finds it and reads on from its checkpoint)
    try:
        st = os.fstat(gen.fd)
    except OSError:
        return cp
    if not gen.is_file(st) or not known_local(gen.fd):
        return cp
    if max(cp.size, st.st_size) <= cp.offset:
        return replace(cp, finished=True)
    return replace(cp, size=max(cp.size, st.st_size))
