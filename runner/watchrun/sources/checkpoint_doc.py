"""A checkpoint file's text (pure): `FileState`, the positions of a file watcher's last
generations and what decided them, and its JSON, version 1 or 2 (`checkpoints.py` keeps the
files)."""

from __future__ import annotations

import json
from typing import Any

from msgspec import Struct
from msgspec.structs import replace

from watchrun.output.records import SEQ_LIMIT
from watchrun.sources.identity import Archive, Checkpoint

__all__ = ["NEWER", "VERSION", "FileState", "Watched", "decode", "encode"]

VERSION = 2
NEWER = "was written by a newer watchrun"


class LoadProblem(Struct, frozen=True):
    """What loading a watcher's checkpoint met: its `error` record's `code` (the errno's name of
    a read that failed, or `checkpoint-corrupt` for one set aside) and `message`."""

    code: str
    message: str

class Watched(Struct, frozen=True):
    """An archive said lost by a `gap{compressed}` while cut short, watched on so that its
    compressor finishing it is no second gap (`unsettled.Waiting.said`), across a restart."""

    path: str
    said: Archive
    """Its identity when last looked at, cut short still."""
    owner: Checkpoint
    """The truncated generation as read: an archive holding exactly that is its copy."""


class FileState(Struct, frozen=True):
    """What a file watcher checkpoints: its generations, oldest first (the last one is the file
    it follows), and the seq of the first record that may cover a line past them."""

    generations: tuple[Checkpoint, ...]
    seq: int | None = None
    path: str | None = None
    """The watcher's `path` (absolute) when it was saved: a checkpoint of another path is not
    applied (`FileSource`). None: saved before it was kept (applied, as then)."""
    archives: tuple[Archive, ...] = ()
    """Siblings judged already (`identity.Archive`), still there (`siblings.judged_kept`): a
    `gap` was written for each archive, or none was due, and the other siblings the last look
    listed were there then (`siblings.LISTED` among them: all of them); none is judged again,
    renumbered or not."""
    matching: tuple[tuple[str, str], ...] = ()
    """What decided the matching when it was saved: config key, digest (`applies.matching`);
    a once run sets aside one of another. (): saved before it was kept (a once run sets it
    aside too; a live runner applies it, as then)."""
    require_seen: bool = False
    """A gate's `require` was seen in the lines up to it (`applies.Required`)."""
    live: bool = False
    """Saved by a live runner, whose lines no gate judged: a once run sets it aside (`applies`)."""
    watched: tuple[Watched, ...] = ()
    """Archives said lost while cut short, watched on (`unsettled.WATCHED_KEPT` at most)."""

    @property
    def current(self) -> Checkpoint:
        return self.generations[-1]


_FIELDS: dict[str, tuple[str, type]] = {
    "dev": ("dev", int), "inode": ("inode", int), "fingerprint": ("fingerprint", str),
    "fingerprintLen": ("fingerprint_len", int), "offset": ("offset", int),
    "lineNo": ("line_no", int), "path": ("path", str),
}
_OPTIONAL: dict[str, tuple[str, type]] = {
    "tail": ("tail", str), "tailLen": ("tail_len", int), "size": ("size", int), "seq": ("seq", int),
    "mtimeNs": ("mtime_ns", int), "finished": ("finished", bool), "since": ("since", int),
    "deleted": ("deleted", bool), "announce": ("announce", str), "inodeGen": ("inode_gen", int),
    "releasedEarly": ("released_early", bool), "beside": ("beside", bool),
    "midLine": ("mid_line", bool), "birthNs": ("born", int),
}


def _position(doc: Any) -> Checkpoint:
    if not isinstance(doc, dict):
        raise ValueError("a generation is not a JSON object")
    values: dict[str, Any] = {}
    for key, (name, typ) in (_FIELDS | _OPTIONAL).items():
        val = doc.get(key)
        if val is None and key in _OPTIONAL:
            continue
        if not isinstance(val, typ) or (typ is int and isinstance(val, bool)):
            raise ValueError(f"field {key!r} missing or not a {typ.__name__}")
        values[name] = val
    if values["offset"] < 0 or values["line_no"] < 1 or values.get("since", 0) < 0 or \
            not 0 < values.get("seq", 1) < SEQ_LIMIT or not (
        0 <= values["fingerprint_len"] <= 1 << 20 and 0 <= values.get("tail_len", 0) <= 1 << 20
    ):
        raise ValueError("offset, lineNo, seq or a fingerprint length out of range")
    return Checkpoint(**values)


def decode(text: str) -> FileState:
    """Parse a checkpoint file's text (version 1 or 2); ValueError naming what is wrong."""
    if "\x00" in text:
        raise ValueError("contains NUL bytes")
    try:
        doc = json.loads(text)
    except json.JSONDecodeError as exc:
        raise ValueError(f"not valid JSON ({exc.msg} at char {exc.pos})") from None
    if not isinstance(doc, dict):
        raise ValueError("not a JSON object")
    if doc.get("version") == 1:  # one generation, no seq: written before generations
        return FileState((_position(doc),))
    if isinstance(version := doc.get("version"), int) and version > VERSION:  # (not damaged)
        raise ValueError(f"{NEWER} (version {version}; this one reads up to {VERSION})")
    if version != VERSION:
        raise ValueError(f"unknown version {version!r} (expected {VERSION})")
    gens, seq = doc.get("generations"), doc.get("seq")
    if not isinstance(gens, list) or not gens:
        raise ValueError("field 'generations' missing or empty")
    if seq is not None and (not isinstance(seq, int) or isinstance(seq, bool) or
                            not 0 < seq < SEQ_LIMIT):
        raise ValueError("field 'seq' is not a positive integer below 2**62")
    path = doc.get("path")
    if path is not None and (not isinstance(path, str) or not path):
        raise ValueError("field 'path' is not a non-empty string")
    # a generation saved without its own seq (before it had one) has the state's
    return FileState(tuple(p if p.seq is not None else replace(p, seq=seq)
                           for p in map(_position, gens)), seq, path,
                     _archives(doc.get("archives", [])), _matching(doc.get("matching", {})),
                     doc.get("requireSeen") is True, doc.get("live") is True,
                     _watched(doc.get("watched", [])))


def _matching(doc: Any) -> tuple[tuple[str, str], ...]:
    if not isinstance(doc, dict) or not all(isinstance(v, str) for v in doc.values()):
        raise ValueError("field 'matching' is not an object of strings")
    return tuple(doc.items())


def _archives(doc: Any) -> tuple[Archive, ...]:
    if not isinstance(doc, list) or not all(
            isinstance(a, list) and len(a) == 4 and
            all(isinstance(n, int) and not isinstance(n, bool) for n in a)
            for a in doc):
        raise ValueError("field 'archives' is not a list of [dev, inode, size, mtimeNs]")
    return tuple((a[0], a[1], a[2], a[3]) for a in doc)


def _watched(doc: Any) -> tuple[Watched, ...]:
    try:
        if not isinstance(doc, list) or not all(
                isinstance(w, dict) and isinstance(w.get("path"), str) for w in doc):
            raise ValueError("not a list of objects with a 'path'")
        return tuple(Watched(w["path"], _archives([w.get("archive")])[0],
                             _position(w.get("owner"))) for w in doc)
    except ValueError as exc:
        raise ValueError(f"field 'watched': {exc}") from None


def _generation(cp: Checkpoint) -> dict[str, Any]:
    return {key: getattr(cp, name) for key, (name, _) in (_FIELDS | _OPTIONAL).items()}


def encode(state: FileState) -> bytes:
    gens = [_generation(cp) for cp in state.generations]
    doc: dict[str, Any] = {"version": VERSION, "seq": state.seq, "generations": gens}
    if state.path is not None:  # (an optional field: version 2 still, read by older runners)
        doc["path"] = state.path
    if state.archives:  # (optional too: an older runner judges those archives again)
        doc["archives"] = [list(a) for a in state.archives]
    if state.matching:  # (optional too: an older runner applies it whatever it was saved under)
        doc["matching"] = dict(state.matching)
    if state.require_seen:
        doc["requireSeen"] = True
    if state.live:  # (optional too: an older runner's once run applies it)
        doc["live"] = True
    if state.watched:  # (optional too: an older runner judges those archives again)
        doc["watched"] = [{"path": w.path, "archive": list(w.said), "owner": _generation(w.owner)}
                          for w in state.watched]
    return (json.dumps(doc, separators=(",", ":")) + "\n").encode()
