"""What a crash kept past a file watcher's checkpoint (`Recorded`), and the context that numbers
its records (`Resumable`): how a restart skips the lines recorded before it."""

from __future__ import annotations

from collections.abc import Collection
from typing import Protocol, cast, runtime_checkable

from msgspec import Struct, field

from watchrun.events import SourceContext
from watchrun.output.recorded import Epoch, Mark
from watchrun.sources.identity import Checkpoint


class Recorded(Struct):
    """What a stream recorded since a checkpoint's seq (records a crash kept past it)."""

    epochs: dict[int, list[Epoch]] = field(default_factory=dict)
    """inode → the generations read from it, oldest first (`output.recorded.Epoch`)."""
    ended: set[int] = field(default_factory=set)
    """Inodes a `rotate` record left (moved on from; maybe still read for rotateWait after)."""

    def last(self, cp: Checkpoint) -> Mark | None:
        """The last line recorded from the checkpointed generation `cp` past its checkpoint."""
        every = self.epochs.get(cp.inode, [])
        of = [e for e in every if _may_be(e, cp.inode_gen)]
        if cp.announce:  # its records follow the next `rotate` record into its inode
            found = [e.mark for e in of if e.since >= (cp.seq or 0) and e.since > 0][:1]
        else:  # those after the `rotate` record it follows, or before any (one older than
            # these); the record it follows by its seq, whatever generation number it names:
            # a copy's records follow the last one into its inode number, which may have been
            # another generation's (a deleted one's number given to the copy)
            found = [e.mark for e in (every if cp.since else of) if e.since == cp.since] or \
                [e.mark for e in of[:1]]
        return found[0] if found and found[0].offset >= 0 else None

    def began(self, inode: int) -> int:
        """The seq of the last `rotate` record into `inode` (0: none among these records)."""
        own = self.epochs.get(inode)
        return own[-1].since if own else 0

    def announced(self, cp: Checkpoint) -> int | None:
        """The seq of the `rotate` record a checkpoint still had to write (`cp.announce`) when
        the records show it written before the crash; None when it was not."""
        if not cp.announce:
            return None
        written = [e.since for e in self.epochs.get(cp.inode, [])
                   if e.since >= (cp.seq or 0) and e.since > 0 and _may_be(e, cp.inode_gen)]
        return written[0] if written else None

    def marks(self, inode: int, inode_gen: int | None, origin: Checkpoint | None,
              renewed: bool, finished: Collection[tuple[int, int]] = ()) -> list[Mark]:
        """Where the last line recorded from the generation now open as `inode` (its generation
        number `inode_gen`, None: not known) may be: the records of the checkpointed generation
        `origin` it continues (itself, or the original of a copy) and, for a copy, its own; for a
        generation opened afresh (None), those of the last one read from the inode (`renewed`:
        only when it began after a `rotate` record, as the inode held another generation
        before), unless that one is `finished` (inode and `since` of generations checkpointed
        as read to their end and released: the inode number was given to a new file since) or
        its `rotate` record named another generation number (a new file got the number)."""
        own = [e for e in self.epochs.get(inode, [])[-1:] if _may_be(e, inode_gen)]  # its last
        found: list[Mark] = []
        if origin is not None:
            mark = self.last(origin)
            found += [mark] if mark is not None else []
            if inode != origin.inode:
                found += [e.mark for e in own]
        elif own and not (renewed and own[0].since == 0) and (inode, own[0].since) not in finished:
            found.append(own[0].mark)
        return [m for m in found if m.offset >= 0]


def _may_be(epoch: Epoch, inode_gen: int | None) -> bool:
    """`epoch` may be of the generation numbered `inode_gen`: one of the two is not known, or
    they are the same."""
    return epoch.inode_gen is None or inode_gen is None or epoch.inode_gen == inode_gen


@runtime_checkable
class Resumable(Protocol):
    """A `SourceContext` that numbers its records (the pipeline does). The checkpoint keeps
    the seq from which records may cover lines past it; after a crash the source asks what
    was recorded since, and skips what would be recorded twice."""

    @property
    def next_seq(self) -> int:
        """The seq the next record will get."""
        ...

    async def recorded(self, since_seq: int) -> Recorded:
        """What was recorded from `since_seq` on (read off the loop)."""
        ...

    def skipped(self, lines: int) -> None:
        """`lines` were not read again: they were recorded before a crash."""
        ...


_RESUMES: dict[type, bool] = {}


def resumable(ctx: SourceContext) -> Resumable | None:
    kind = type(ctx)
    ok = _RESUMES.get(kind)
    if ok is None:
        ok = _RESUMES[kind] = isinstance(ctx, Resumable)
    return cast(Resumable, ctx) if ok else None


def next_seq(ctx: SourceContext) -> int | None:
    """The seq the context's next record gets, when it numbers its records."""
    r = resumable(ctx)
    return r.next_seq if r is not None else None
