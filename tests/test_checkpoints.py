"""Checkpoint files: atomic, recoverable, ordered; identity by device + inode + fingerprints;
rotated generations found among the siblings by inode, then by content."""

from __future__ import annotations

import json
import os
import stat
from pathlib import Path

import pytest
from msgspec.structs import replace

from watchrun.sources.checkpoint_doc import FileState, Watched
from watchrun.sources.checkpoints import CheckpointStore
from watchrun.sources.identity import (
    Checkpoint,
    identifies,
    inode_generation,
    other_generation,
    position,
)
from watchrun.sources.orphans import orphaned
from watchrun.sources.rotated import scan
from watchrun.sources.siblings import locate


def cp_for(path: Path, offset: int, line_no: int = 1, head_len: int = 1024) -> Checkpoint:
    st = path.stat()
    data = path.read_bytes()
    return position(st.st_dev, st.st_ino, st.st_mtime_ns, data[:head_len],
                    data[max(0, offset - 1024) : offset], offset, line_no, str(path))


def one(cp: Checkpoint, seq: int | None = None) -> FileState:
    return FileState((cp,), seq)


def test_save_then_load_round_trips(tmp_path: Path) -> None:
    store = CheckpointStore(tmp_path / "state")
    cp = Checkpoint(1, 2, "ab" * 32, 300, 7, "/var/log/x.log", 1024, "cd" * 32, 1024, 900, 5,
                    seq=42, since=40, announce='{"reason": "rename"}')
    old = Checkpoint(1, 1, "ef" * 32, 40, 3, "/var/log/x.log.1", 40, finished=True, seq=12,
                     deleted=True)
    judged = ((1, 9, 57, 1796506699531171252),)  # (an archive judged: device, inode, size, mtime)
    watched = (Watched("/var/log/x.log.1.gz", judged[0], replace(old, seq=None)),)
    store.save("api", FileState((old, cp), 42, archives=judged, watched=watched))
    assert CheckpointStore(tmp_path / "state").load("api") == FileState(
        (old, cp), 42, archives=judged, watched=watched)
    assert store.load("other") is None
    mode = stat.S_IMODE(store.path("api").stat().st_mode)
    assert mode == 0o640
    assert sorted(p.name for p in store.dir.iterdir()) == ["api.checkpoint.json"]


def test_a_generation_saved_without_its_own_seq_takes_the_states(tmp_path: Path) -> None:
    """Checkpoints written before generations carried a seq still load: the state's seq."""
    store = CheckpointStore(tmp_path)
    store.save("w", FileState((Checkpoint(1, 2, "f", 10, 1, "/p", 0),), 7))
    doc = json.loads(store.path("w").read_text())
    for gen in doc["generations"]:
        for key in ("seq", "since", "deleted", "announce"):
            gen.pop(key, None)
    store.path("w").write_text(json.dumps(doc))
    loaded = store.load("w")
    assert loaded is not None and loaded.current.seq == 7 and not loaded.current.deleted


def test_save_replaces_the_previous_checkpoint(tmp_path: Path) -> None:
    store = CheckpointStore(tmp_path)
    for offset in (1, 2, 3):
        store.save("w", one(Checkpoint(1, 2, "f", offset, 1, "/p", 0)))
    loaded = store.load("w")
    assert loaded is not None and loaded.current.offset == 3


def test_a_complete_tmp_file_from_an_interrupted_save_is_used(tmp_path: Path) -> None:
    """Crash between fsync(tmp) and rename: the tmp file is complete and newer."""
    store = CheckpointStore(tmp_path)
    store.save("w", one(Checkpoint(1, 2, "f", 10, 1, "/p", 0)))
    newer = store.path("w").read_text().replace('"offset":10', '"offset":20')
    store.path("w").with_name("w.checkpoint.json.tmp").write_text(newer)
    loaded = store.load("w")
    assert loaded is not None and loaded.current.offset == 20
    assert not store.path("w").with_name("w.checkpoint.json.tmp").exists()
    assert store.taken("w") == []


def test_a_torn_tmp_file_is_ignored_and_the_stable_one_wins(tmp_path: Path) -> None:
    store = CheckpointStore(tmp_path)
    store.save("w", one(Checkpoint(1, 2, "f", 10, 1, "/p", 0)))
    store.path("w").with_name("w.checkpoint.json.tmp").write_text('{"version":2,"se')
    loaded = store.load("w")
    assert loaded is not None and loaded.current.offset == 10
    assert store.taken("w") == []


@pytest.mark.parametrize(
    ("content", "reason"),
    [
        (b'{"version":1,"dev":1,"ino', "not valid JSON"),
        (b"\x00" * 64, "NUL bytes"),
        (b'{"version":0,"dev":1}', "unknown version 0"),
        (b'{"version":2,"seq":1,"generations":[]}', "'generations' missing or empty"),
        (b'{"version":2,"seq":0,"generations":[{}]}', "'seq' is not a positive"),
        (b"[1,2]", "not a JSON object"),
        (b"", "not valid JSON"),
        (b'{"version":1,"dev":1,"inode":2,"fingerprint":"f","fingerprintLen":0,'
         b'"offset":"10","lineNo":1,"path":"/p"}', "field 'offset'"),
        (b'{"version":1,"dev":1,"inode":2,"fingerprint":"f","fingerprintLen":0,'
         b'"offset":-1,"lineNo":1,"path":"/p"}', "out of range"),
        (b"\xff\xfe garbage", "not valid JSON"),
        (b'{"version":2,"generations":[{"dev":1,"inode":2,"fingerprint":"f","fingerprintLen":0,'
         b'"offset":1,"lineNo":1,"path":"/p"}],"archives":[[1,2,3]]}', "field 'archives'"),
        (b'{"version":2,"generations":[{"dev":1,"inode":2,"fingerprint":"f","fingerprintLen":0,'
         b'"offset":1,"lineNo":1,"path":"/p"}],"watched":[{"path":"/p.1.gz","archive":[1,3,4,5],'
         b'"owner":{"dev":1}}]}', "field 'watched': field 'inode'"),
        # a seq past what a stream counts to (its next record's cursor past 16 hex digits)
        (b'{"version":2,"seq":4611686018427387904,"generations":[{"dev":1,"inode":2,'
         b'"fingerprint":"f","fingerprintLen":0,"offset":1,"lineNo":1,"path":"/p"}]}',
         "not a positive integer below 2**62"),
        (b'{"version":2,"seq":1,"generations":[{"dev":1,"inode":2,"fingerprint":"f",'
         b'"fingerprintLen":0,"offset":1,"lineNo":1,"path":"/p","seq":99999999999999999999}]}',
         "seq or a fingerprint length out of range"),
    ],
    ids=["truncated", "nul", "version", "no-generations", "seq", "array", "empty", "type",
         "range", "binary", "archives", "watched", "seq-too-big", "generation-seq-too-big"],
)  # fmt: skip
def test_corrupt_checkpoint_is_set_aside_with_one_problem(
    tmp_path: Path, content: bytes, reason: str
) -> None:
    store = CheckpointStore(tmp_path)
    store.path("w").write_bytes(content)
    assert store.load("w") is None
    ((code, problem),) = [(p.code, p.message) for p in store.taken("w")]
    assert code == "checkpoint-corrupt"
    assert str(store.path("w")) in problem and reason in problem and "set aside" in problem
    (aside,) = tmp_path.glob("w.checkpoint.json.corrupt-*")
    assert aside.read_bytes() == content
    assert not store.path("w").exists()
    assert store.load("w") is None and store.taken("w") == []  # now simply absent


@pytest.mark.parametrize("planted", ["another user's", "hard-linked"])
def test_a_checkpoint_the_runner_does_not_own_alone_is_set_aside_not_trusted(
        tmp_path: Path, planted: str) -> None:
    """A checkpoint decides where reading resumes: one planted by another user (a state dir
    writable by others before the runner fixed its mode) could skip matches, and was used as
    it was (docs/security.md: the runner's own, with a single link). It is set aside, as a
    corrupt one is: the watcher starts without it."""
    cp = Checkpoint(1, 2, "ab" * 32, 300, 7, "/var/log/x.log", 1024, "cd" * 32, 1024, 900, 5)
    store = CheckpointStore(tmp_path)
    store.save("w", FileState((cp,), 5))
    if planted == "hard-linked":
        os.link(store.path("w"), tmp_path / "elsewhere")
        why = "has 2 hard links"
    elif os.geteuid() == 0:
        os.chown(store.path("w"), 1234, 1234)
        why = "is owned by uid 1234, not by the runner"
    else:
        pytest.skip("only root can give a file to another user")
    reader = CheckpointStore(tmp_path)
    assert reader.load("w") is None
    ((code, problem),) = [(p.code, p.message) for p in reader.taken("w")]
    assert code == "checkpoint-corrupt"
    assert why in problem and "not trusted" in problem and "set aside" in problem, problem
    fresh = CheckpointStore(tmp_path)
    assert fresh.load("w") is None and fresh.taken("w") == []  # (set aside by the first load)
    (aside,) = tmp_path.glob("w.checkpoint.json.corrupt-*")
    assert json.loads(aside.read_text())["seq"] == 5


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
        assert identifies(cp, fd, os.fstat(fd), inode_generation(fd))
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
        assert identifies(cp, fd, os.fstat(fd), inode_generation(fd)) is expected
    finally:
        os.close(fd)


def test_a_version_1_checkpoint_still_loads(tmp_path: Path) -> None:
    """Written by watchrun before generations: one position, no seq."""
    store = CheckpointStore(tmp_path)
    store.path("w").write_text('{"version":1,"dev":1,"inode":2,"fingerprint":"f",'
                               '"fingerprintLen":0,"offset":10,"lineNo":3,"path":"/p"}')
    assert store.load("w") == one(Checkpoint(1, 2, "f", 10, 3, "/p", 0))


def test_an_older_save_never_replaces_a_newer_one(tmp_path: Path) -> None:
    """Saves run in worker threads: one that finishes late must not put an old position back."""
    store = CheckpointStore(tmp_path)
    new = one(Checkpoint(1, 2, "f", 20, 1, "/p", 0))
    old = one(Checkpoint(1, 2, "f", 10, 1, "/p", 0))
    assert store.save("w", new, ticket=2)
    assert not store.save("w", old, ticket=1)
    assert store.load("w") == new


def test_orphaned_checkpoints_and_adoption(tmp_path: Path) -> None:
    store = CheckpointStore(tmp_path)
    for wid in ("api", "old-api", "gone"):
        store.save(wid, one(Checkpoint(1, 2, "f", 10, 1, "/p", 0)))
    (tmp_path / "api.status.json").write_text("{}")
    assert orphaned(tmp_path, {"api", "web"}) == ["gone", "old-api"]
    assert orphaned(tmp_path / "missing", {"api"}) == []
    assert store.adopt("old-api", "api2") and not store.adopt("old-api", "api2")
    assert not store.adopt("gone", "api")  # api has its own checkpoint: kept
    assert orphaned(tmp_path, {"api", "api2"}) == ["gone"]


def test_locate_finds_the_rotated_file_by_inode_and_fingerprint(tmp_path: Path) -> None:
    f = tmp_path / "app.log"
    f.write_bytes(b"a\nb\n")
    cp = cp_for(f, 2)
    f.rename(tmp_path / "app.log.1")
    f.write_bytes(b"new\n")
    found = locate(cp, scan(f, [cp]), set())
    assert found is not None
    try:
        assert found.st.st_ino == cp.inode and found.start == 2 and found.origin == cp
        assert os.pread(found.fd, 10, 0) == b"a\nb\n"
    finally:
        os.close(found.fd)
    (tmp_path / "app.log.1").unlink()
    assert locate(cp, scan(f, [cp]), set()) is None
    assert scan(tmp_path / "missing-dir" / "app.log", [cp]) == []


def test_locate_finds_a_copy_and_nothing_rewritten(tmp_path: Path) -> None:
    """copytruncate: the copy holds the same bytes up to the offset under another inode. A file
    with the inode but other bytes before the offset (rewritten) is not it."""
    f = tmp_path / "app.log"
    f.write_bytes(b"".join(b"line %04d\n" % i for i in range(300)))
    cp = cp_for(f, 2000)
    (tmp_path / "app.log-20261201").write_bytes(f.read_bytes() + b"more\n")  # the copy
    f.write_bytes(f.read_bytes()[:1000] + b"X" * 2000)  # same head, rewritten before offset
    found = locate(cp, scan(f, [cp]), set())
    assert found is not None
    os.close(found.fd)
    assert found.path.endswith("app.log-20261201") and found.start == 2000
    (tmp_path / "app.log-20261201").unlink()
    (tmp_path / "unrelated.txt").write_bytes(f.read_bytes())
    assert locate(cp, scan(f, [cp]), set()) is None  # not a sibling by name


def test_scan_follows_the_series_of_a_symlinks_targets(tmp_path: Path) -> None:
    """The link pointed at gen-0001 (checkpointed) and now at gen-0003: gen-0002 came between;
    gen-0000 (older), gen-0004 (not pointed at yet) and worker-2's series are no generations.
    With no target before the one now, nothing tells which digits count: none by its digits."""
    for name in ("gen-0000.log", "gen-0001.log", "gen-0002.log", "gen-0003.log",
                 "gen-0003.log.1", "gen-0004.log", "worker-2-0002.log", "other.log"):
        (tmp_path / name).write_text("x\n")
    link = tmp_path / "app.log"
    link.symlink_to(tmp_path / "gen-0003.log")
    names = sorted(os.path.basename(e.path) for e in scan(link, [cp_for(tmp_path / "gen-0001.log",
                                                                        2)]))
    assert names == ["gen-0001.log", "gen-0002.log", "gen-0003.log.1"]
    assert [os.path.basename(e.path) for e in scan(link, [])] == ["gen-0003.log.1"]


def test_a_copy_is_found_when_the_checkpoint_is_before_the_read_position(tmp_path: Path) -> None:
    """The checkpoint stays before a line still being read: the bytes before it that it keeps
    are fewer than 1 KiB, and the copy is still recognised by them."""
    f = tmp_path / "app.log"
    f.write_bytes(b"".join(b"line %04d\n" % i for i in range(300)))
    st = f.stat()
    data = f.read_bytes()
    cp = position(st.st_dev, st.st_ino, st.st_mtime_ns, data[:1024], data[2000 - 700 : 2000],
                  2000, 201, str(f))
    (tmp_path / "app.log.1").write_bytes(data)
    f.write_bytes(b"new\n")
    found = locate(cp, scan(f, [cp]), set(), copies_only=True)
    assert found is not None and found.path.endswith("app.log.1") and found.start == 2000
    os.close(found.fd)


def generation_of(path: Path) -> int | None:
    fd = os.open(path, os.O_RDONLY)
    try:
        return inode_generation(fd)
    finally:
        os.close(fd)


@pytest.mark.parametrize(("kept", "now", "same"), [
    (None, None, True),  # neither known: the fingerprints decide (as before)
    (None, 7, True),  # a checkpoint saved before the number was kept
    (7, None, True),  # the file system keeps none (tmpfs): unknown, not another file
    (7, 7, True),
    (7, 8, False),  # the inode number was given to another file since
])
def test_identifies_by_the_inode_generation_number_when_both_are_known(
        tmp_path: Path, kept: int | None, now: int | None, same: bool) -> None:
    """Same device, inode and bytes up to the offset: the generation numbers decide when the
    checkpoint's and the open file's are both known."""
    f = tmp_path / "f"
    f.write_bytes(b"".join(b"line %04d\n" % i for i in range(200)))
    cp = replace(cp_for(f, 1500), inode_gen=kept)
    fd = os.open(f, os.O_RDONLY)
    try:
        assert identifies(cp, fd, os.fstat(fd), now) is same
        assert other_generation(cp, now) is not same
    finally:
        os.close(fd)


@pytest.mark.parametrize("kept", ["this", "another", "unknown"])
def test_identifies_by_the_generation_number_the_descriptor_gives(
        tmp_path: Path, kept: str) -> None:
    """`identifies` with the open file's own number (FS_IOC_GETVERSION)."""
    f = tmp_path / "f"
    f.write_bytes(b"a\nb\n")
    real = generation_of(f)
    if real is None:
        pytest.skip(f"the file system of {tmp_path} keeps no inode generation numbers")
    cp = replace(cp_for(f, 4), inode_gen={"this": real, "another": real ^ 1,
                                          "unknown": None}[kept])
    fd = os.open(f, os.O_RDONLY)
    try:
        assert identifies(cp, fd, os.fstat(fd), inode_generation(fd)) is (kept != "another")
    finally:
        os.close(fd)


def test_a_new_file_given_an_inode_number_has_another_generation_number(
        tmp_path: Path) -> None:
    """What the runner relies on, on this file system: delete a file, create files until one
    gets its inode number; that one's generation number is another."""
    f = tmp_path / "f"
    f.write_text("x\n")
    inode, gen = f.stat().st_ino, generation_of(f)
    if gen is None:
        pytest.skip(f"the file system of {tmp_path} keeps no inode generation numbers")
    f.unlink()
    for i in range(200):
        f.write_text("x\n")
        if f.stat().st_ino == inode:
            assert generation_of(f) != gen
            return
        f.rename(tmp_path / f"other-{i}")
    pytest.skip(f"no new file got inode number {inode} back (another process took it)")


def test_a_checkpoint_keeps_the_generation_number_and_an_early_release(tmp_path: Path) -> None:
    """Saved and loaded; a checkpoint file written before they were kept loads as unknown and
    not released early."""
    store = CheckpointStore(tmp_path)
    cp = Checkpoint(1, 2, "f", 10, 1, "/p", 0, seq=5, inode_gen=3_000_000_000,
                    released_early=True)
    store.save("w", one(cp, 5))
    assert store.load("w") == one(cp, 5)
    doc = json.loads(store.path("w").read_text())
    assert (doc["generations"][0]["inodeGen"], doc["generations"][0]["releasedEarly"]) == (
        3_000_000_000, True)
    for key in ("inodeGen", "releasedEarly"):
        del doc["generations"][0][key]
    store.path("w").write_text(json.dumps(doc))
    loaded = store.load("w")
    assert loaded is not None
    assert (loaded.current.inode_gen, loaded.current.released_early) == (None, False)
