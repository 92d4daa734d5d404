"""Checkpoint files: atomic, recoverable, identity by device + inode + head fingerprint."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest

from watchrun.sources.checkpoints import (
    Checkpoint,
    CheckpointStore,
    find_moved,
    fingerprint,
    identifies,
)


def cp_for(path: Path, offset: int, line_no: int = 1, head_len: int = 1024) -> Checkpoint:
    st = path.stat()
    head = path.read_bytes()[:head_len]
    return Checkpoint(
        st.st_dev, st.st_ino, fingerprint(head), offset, line_no, str(path), len(head)
    )


def test_save_then_load_round_trips(tmp_path: Path) -> None:
    store = CheckpointStore(tmp_path / "state")
    cp = Checkpoint(1, 2, "ab" * 32, 300, 7, "/var/log/x.log", 1024)
    store.save("api", cp)
    assert CheckpointStore(tmp_path / "state").load("api") == cp
    assert store.load("other") is None
    mode = stat.S_IMODE(store.path("api").stat().st_mode)
    assert mode == 0o640
    assert sorted(p.name for p in store.dir.iterdir()) == ["api.checkpoint.json"]


def test_save_replaces_the_previous_checkpoint(tmp_path: Path) -> None:
    store = CheckpointStore(tmp_path)
    for offset in (1, 2, 3):
        store.save("w", Checkpoint(1, 2, "f", offset, 1, "/p", 0))
    loaded = store.load("w")
    assert loaded is not None and loaded.offset == 3


def test_a_complete_tmp_file_from_an_interrupted_save_is_used(tmp_path: Path) -> None:
    """Crash between fsync(tmp) and rename: the tmp file is complete and newer."""
    store = CheckpointStore(tmp_path)
    store.save("w", Checkpoint(1, 2, "f", 10, 1, "/p", 0))
    newer = store.path("w").read_text().replace('"offset":10', '"offset":20')
    store.path("w").with_name("w.checkpoint.json.tmp").write_text(newer)
    loaded = store.load("w")
    assert loaded is not None and loaded.offset == 20
    assert not store.path("w").with_name("w.checkpoint.json.tmp").exists()
    assert store.problems == []


def test_a_torn_tmp_file_is_ignored_and_the_stable_one_wins(tmp_path: Path) -> None:
    store = CheckpointStore(tmp_path)
    store.save("w", Checkpoint(1, 2, "f", 10, 1, "/p", 0))
    store.path("w").with_name("w.checkpoint.json.tmp").write_text('{"version":1,"de')
    loaded = store.load("w")
    assert loaded is not None and loaded.offset == 10
    assert store.problems == []


@pytest.mark.parametrize(
    ("content", "reason"),
    [
        (b'{"version":1,"dev":1,"ino', "not valid JSON"),
        (b"\x00" * 64, "NUL bytes"),
        (b'{"version":2,"dev":1}', "unknown version 2"),
        (b"[1,2]", "not a JSON object"),
        (b"", "not valid JSON"),
        (b'{"version":1,"dev":1,"inode":2,"fingerprint":"f","fingerprintLen":0,'
         b'"offset":"10","lineNo":1,"path":"/p"}', "field 'offset'"),
        (b'{"version":1,"dev":1,"inode":2,"fingerprint":"f","fingerprintLen":0,'
         b'"offset":-1,"lineNo":1,"path":"/p"}', "out of range"),
        (b"\xff\xfe garbage", "not valid JSON"),
    ],
    ids=["truncated", "nul", "version", "array", "empty", "type", "range", "binary"],
)  # fmt: skip
def test_corrupt_checkpoint_is_set_aside_with_one_problem(
    tmp_path: Path, content: bytes, reason: str
) -> None:
    store = CheckpointStore(tmp_path)
    store.path("w").write_bytes(content)
    assert store.load("w") is None
    (problem,) = store.problems
    assert str(store.path("w")) in problem and reason in problem and "set aside" in problem
    (aside,) = tmp_path.glob("w.checkpoint.json.corrupt-*")
    assert aside.read_bytes() == content
    assert not store.path("w").exists()
    assert store.load("w") is None and len(store.problems) == 1  # now simply absent


@pytest.mark.parametrize("wid", ["../escape", "a/b", "", ".hidden"])
def test_watcher_ids_that_are_not_file_names_are_refused(tmp_path: Path, wid: str) -> None:
    with pytest.raises(ValueError, match="invalid watcher id"):
        CheckpointStore(tmp_path).path(wid)


def test_identifies_small_file_that_grew(tmp_path: Path) -> None:
    """The fingerprint covers only the bytes that existed: growth keeps the identity."""
    f = tmp_path / "f"
    f.write_bytes(b"short\n")
    cp = cp_for(f, 6)
    assert cp.fingerprint_len == 6
    f.write_bytes(b"short\n" + b"more\n" * 500)
    fd = os.open(f, os.O_RDONLY)
    try:
        assert identifies(cp, fd, os.fstat(fd))
    finally:
        os.close(fd)


@pytest.mark.parametrize(
    ("change", "expected"),
    [
        ("none", True),
        ("append", True),
        ("rewrite-same-inode-bigger", False),
        ("truncate-below-offset", False),
        ("other-inode", False),
    ],
)
def test_identifies(tmp_path: Path, change: str, expected: bool) -> None:
    f = tmp_path / "f"
    f.write_bytes(b"".join(b"line %04d\n" % i for i in range(200)))  # 2000 bytes
    cp = cp_for(f, 1500)
    if change == "append":
        with open(f, "ab") as h:
            h.write(b"tail\n")
    elif change == "rewrite-same-inode-bigger":
        with open(f, "wb") as h:
            h.write(b"".join(b"next %04d\n" % i for i in range(300)))
    elif change == "truncate-below-offset":
        os.truncate(f, 1000)
    elif change == "other-inode":
        f.rename(tmp_path / "g")  # keeps the old inode allocated: no reuse
        f.write_bytes((tmp_path / "g").read_bytes())  # same content, another inode
    fd = os.open(f, os.O_RDONLY)
    try:
        assert identifies(cp, fd, os.fstat(fd)) is expected
    finally:
        os.close(fd)


def test_find_moved_finds_the_rotated_file_by_inode_and_fingerprint(tmp_path: Path) -> None:
    f = tmp_path / "app.log"
    f.write_bytes(b"a\nb\n")
    cp = cp_for(f, 2)
    f.rename(tmp_path / "app.log.1")
    f.write_bytes(b"new\n")
    found = find_moved(tmp_path, cp, "app.log")
    assert found is not None
    fd, st, resume = found
    try:
        assert st.st_ino == cp.inode and os.pread(fd, 10, 0) == b"a\nb\n" and resume
    finally:
        os.close(fd)
    (tmp_path / "app.log.1").unlink()
    assert find_moved(tmp_path, cp, "app.log") is None
    assert find_moved(tmp_path / "missing-dir", cp, "app.log") is None


@pytest.mark.parametrize(("name", "found"), [("app.log.1", True), ("unrelated.txt", False)])
def test_find_moved_truncated_after_checkpoint(tmp_path: Path, name: str, found: bool) -> None:
    """Same inode, different head: a rotated name means "read it from the start"; any other
    name may be an unrelated file that got a reused inode number, and is left alone."""
    f = tmp_path / "app.log"
    f.write_bytes(b"old line\n")
    cp = cp_for(f, 9)
    f.write_bytes(b"new generation\n")  # truncated and rewritten, same inode
    f.rename(tmp_path / name)
    result = find_moved(tmp_path, cp, "app.log")
    assert (result is not None) is found
    if result is not None:
        os.close(result[0])
        assert result[2] is False
