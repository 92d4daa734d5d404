"""Planning what to read when the followed file leaves the path, with the writer rotating again
while the plan is made (real files and a real symlink swap; the planner's directory listing is
the moment the second rotation happens)."""

from __future__ import annotations

import hashlib
import os
import subprocess
from pathlib import Path
from typing import Any

import msgspec
import pytest
from test_checkpoints import generation_of

from watchrun.output.recorded import Epoch, Mark
from watchrun.sources import copies, plans
from watchrun.sources.identity import Checkpoint, birth_ns, inode_generation, position
from watchrun.sources.resume import Recorded


def write(path: Path, text: str) -> None:
    path.write_text(text)


def swap(link: Path, target: str) -> None:
    tmp = link.with_name(link.name + ".tmp")
    os.symlink(target, tmp)
    os.replace(tmp, link)


def test_a_symlink_swapped_while_planning_is_planned_again(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """gen-0000 was followed; the path now points at gen-0001, and just after the planner
    opened it the writer creates gen-0002 and swaps the link again. gen-0002 is newer than the
    file the planner opened: it must not be read before gen-0001 (it was, then read again as
    the file at the path: a whole generation recorded twice)."""
    log = tmp_path / "app.log"
    write(tmp_path / "gen-0000.log", "a1\n")
    st = os.stat(tmp_path / "gen-0000.log")
    ended = position(st.st_dev, st.st_ino, st.st_mtime_ns, b"a1\n", b"a1\n", 3, 2,
                     str(tmp_path / "gen-0000.log"))  # (the link's target then, as kept)
    write(tmp_path / "gen-0001.log", "b1\n")
    swap(log, "gen-0001.log")
    real_scan, calls = plans.scan, []

    def scan(*args: Any) -> Any:
        calls.append(1)
        if len(calls) == 1:  # the writer rotates between the open and the listing
            write(tmp_path / "gen-0002.log", "c1\n")
            swap(log, "gen-0002.log")
        return real_scan(*args)

    monkeypatch.setattr(plans, "scan", scan)
    plan = plans.plan_switch(log, ended, [], 10, truncated=False)
    try:
        names = [os.path.basename(os.readlink(f"/proc/self/fd/{o.fd}")) for o in plan.steps]
        assert names == ["gen-0001.log", "gen-0002.log"] and plan.at_path
        assert len(calls) == 2  # planned again once the path held still
    finally:
        plan.close()


def emptied(log: Path) -> tuple[Checkpoint, os.stat_result]:
    """An empty `log` and the checkpoint the runner keeps of it (nothing to fingerprint)."""
    write(log, "")
    st = os.stat(log)
    return position(st.st_dev, st.st_ino, st.st_mtime_ns, b"", b"", 0, 1, str(log)), st


def copytruncate(log: Path, copy: Path, then: str) -> None:
    """What logrotate's copytruncate does: copy the file, truncate it; the writer goes on."""
    copy.write_bytes(log.read_bytes())
    with open(log, "r+") as f:
        f.truncate(0)
    write(log, then)


@pytest.mark.parametrize("copies", [0, 1, 3])
def test_copies_made_after_a_checkpoint_of_the_emptied_file_are_read(
        tmp_path: Path, copies: int) -> None:
    """The runner checkpointed the file just after a truncation (empty: nothing to recognise it
    by) and died; while it was down the file was copied and truncated `copies` times. Each copy
    is read, oldest first, the first one continuing the checkpoint; then the file at the path
    from its start, after a `truncate` record. (They were skipped: the file at the path was
    taken for the checkpointed one and read alone.)"""
    log = tmp_path / "app.log"
    empty, st = emptied(log)
    texts = [f"gen{i} line1\ngen{i} line2\n" for i in range(copies + 1)]
    write(log, texts[0])
    for i in range(copies):
        os.utime(log, ns=(st.st_mtime_ns + i + 1, st.st_mtime_ns + i + 1))
        copytruncate(log, tmp_path / f"app.log.{i + 1}", texts[i + 1])
        os.utime(tmp_path / f"app.log.{i + 1}", ns=(st.st_mtime_ns + i + 1,) * 2)
    plan = plans.plan_start(log, [empty], 10, Recorded())
    try:
        read = [os.pread(o.fd, 1 << 16, o.start).decode() for o in plan.steps]
        assert read == texts and plan.at_path
        assert [o.origin is empty for o in plan.steps] == [True] + [False] * copies
        announced = [o.announce["reason"] if o.announce else None for o in plan.steps]
        assert announced == ([None] if not copies else
                             [None] + ["rename"] * (copies - 1) + ["truncate"])
        assert not plan.gaps
    finally:
        plan.close()


def test_a_snapshot_of_the_followed_file_is_not_taken_for_a_copytruncate(tmp_path: Path) -> None:
    """A copy made after the checkpoint of the emptied file, while the file was not truncated
    (a backup: the file still begins as the copy does), is not read as a generation."""
    log = tmp_path / "app.log"
    empty, st = emptied(log)
    write(log, "a1\na2\n")
    (tmp_path / "app.log.bak").write_bytes(log.read_bytes())
    os.utime(tmp_path / "app.log.bak", ns=(st.st_mtime_ns + 1,) * 2)
    with open(log, "a") as f:
        f.write("a3\n")
    plan = plans.plan_start(log, [empty], 10, Recorded())
    try:
        assert [os.pread(o.fd, 99, o.start) for o in plan.steps] == [b"a1\na2\na3\n"]
        assert plan.steps[0].origin is empty and plan.steps[0].announce is None
    finally:
        plan.close()


def test_a_generation_deleted_after_its_rotate_record_is_a_gap(tmp_path: Path) -> None:
    """The runner moved on to the new file (its `rotate` record is written) while it still read
    the old one, deleted; it crashed; at the start the old one is gone. A `gap` says from which
    line of it nothing was read (nothing was said: a `rotate` record leaving an inode was taken
    for proof that it had been read to its end)."""
    log = tmp_path / "app.log"
    write(log, "a1\na2\na3\na4\n")
    a = os.stat(log)
    old = position(a.st_dev, a.st_ino, a.st_mtime_ns, b"a1\na2\na3\na4\n", b"a1\na2\n", 6, 3,
                   str(log), size=12)
    log.unlink()
    write(log, "b1\n")
    b = os.stat(log)
    new = position(b.st_dev, b.st_ino, b.st_mtime_ns, b"b1\n", b"b1\n", 3, 2, str(log))
    recorded = Recorded({a.st_ino: [Epoch(0, Mark(3, "a2", 2))],
                         b.st_ino: [Epoch(9, Mark(0, "b1", 1))]}, {a.st_ino})
    plan = plans.plan_start(log, [old, new], 10, recorded)
    try:
        assert [g["reason"] for g in plan.gaps] == ["missing"]
        gap = plan.gaps[0]
        assert (gap["inode"], gap["lineNo"], gap["offset"], gap["unreadBytes"]) == \
            (a.st_ino, 3, 6, 6)
        assert [os.pread(o.fd, 99, o.start) for o in plan.steps] == [b""]
    finally:
        plan.close()


def test_an_emptied_file_not_modified_since_its_checkpoint_lists_no_siblings(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A restart of watchers on empty files: the checkpoint of an empty file that has not been
    modified since cannot have been copied and truncated meanwhile, so nothing is listed (a
    listing of the directory per watcher doubled the start cost of 300 watchers)."""
    log = tmp_path / "app.log"
    empty, _ = emptied(log)
    (tmp_path / "app.log.1").write_text("old\n")
    listed: list[Any] = []
    monkeypatch.setattr(plans, "scan", lambda *a: listed.append(a) or [])
    plan = plans.plan_start(log, [empty], 10, Recorded())
    try:
        assert len(plan.steps) == 1 and plan.steps[0].origin is empty and listed == []
    finally:
        plan.close()


OLD = b"".join(b"L%04d line\n" % i for i in range(150))
"""1650 bytes: more than the 1 KiB of the head fingerprint."""


@pytest.mark.parametrize(("change", "kept", "expected"), [
    # the file at the path has the checkpoint's inode number and holds its bytes up to the
    # offset; or the same first KiB but other bytes before the offset (truncated and rewritten
    # in place, or a new file given the number)
    ("appended", "this", (len(OLD), None, [])),
    ("appended", "unknown", (len(OLD), None, [])),
    ("appended", "another", (0, "recreate", ["missing"])),
    ("rewritten", "this", (0, "truncate", [])),
    ("rewritten", "unknown", (0, "truncate", [])),
    ("rewritten", "another", (0, "recreate", ["missing"])),
])
def test_a_file_of_another_inode_generation_is_read_from_its_start(
        tmp_path: Path, change: str, kept: str, expected: tuple[int, str | None, list[str]]
) -> None:
    """The start plan resumes the checkpointed generation at its offset, and reads one rewritten
    in place again from 0 after `rotate{truncate}`. A file with the inode number and another
    generation number is another file, whatever it holds: `rotate{recreate}` and a
    `gap{missing}` from the old one's checkpoint, as for any file given a reused number.
    ("unknown": a checkpoint saved before the number was kept, or a tmpfs: the fingerprints.)"""
    log = tmp_path / "app.log"
    log.write_bytes(OLD)
    fd = os.open(log, os.O_RDONLY)
    real = inode_generation(fd)
    os.close(fd)
    if real is None:
        pytest.skip(f"the file system of {tmp_path} keeps no inode generation numbers")
    st = log.stat()
    cp = position(st.st_dev, st.st_ino, st.st_mtime_ns, OLD[:1024], OLD[-1024:], len(OLD), 151,
                  str(log), inode_gen={"this": real, "another": real ^ 1, "unknown": None}[kept])
    with log.open("ab" if change == "appended" else "r+b") as f:
        f.write(b"L0150 more\n" if change == "appended" else
                OLD[:1100] + b"X" * (len(OLD) - 1101) + b"\nL0150 more\n")
    plan = plans.plan_start(log, [cp], 10, Recorded())
    try:
        (o,) = plan.steps
        announce = o.announce["reason"] if o.announce else None
        assert (o.start, announce, [g["reason"] for g in plan.gaps]) == expected
        assert plan.at_path and o.st.st_ino == cp.inode
    finally:
        plan.close()


def test_a_copy_cut_short_of_what_was_read_is_not_read_again(tmp_path: Path) -> None:
    """copytruncate's copy raced the writer (a concurrent copy sees a write in part, at a page
    boundary) and ended before where the runner had read: all it holds was read already. It was
    taken for a newer generation and read from its first line: every line of it twice (found
    by bench_copytruncate under load). A newer generation with the same head that is not
    shorter is still read."""
    log = tmp_path / "app.log"
    lines = "".join(f"{n:09d} {'x' * 39}\n" for n in range(1, 701))
    write(log, lines)
    st = os.stat(log)
    data = log.read_bytes()
    ended = position(st.st_dev, st.st_ino, st.st_mtime_ns, data[:1024], data[-1024:], len(data),
                     701, str(log), inode_gen=inode_generation(os.open(log, os.O_RDONLY)))
    (tmp_path / "app.log.1").write_bytes(data[:32768])  # the copy, cut in line 656
    with open(log, "r+") as f:
        f.truncate(0)
    plan = plans.plan_switch(log, ended, [], 10, truncated=True)
    try:
        assert plan.steps == [] and plan.gaps == [] and plan.copy is None
    finally:
        plan.close()
    (tmp_path / "app.log.2").write_bytes(data + b"000000701 more\n")  # holds more: read on
    plan = plans.plan_switch(log, ended, [], 10, truncated=True)
    try:
        assert plan.copy is not None and plan.copy.start == len(data)
    finally:
        plan.close()


@pytest.mark.parametrize("names", [("app.log.1.gz", "app.log.2.gz"),
                                   ("app.log.2.gz", "app.log.1.gz")], ids=["first", "second"])
def test_an_archive_judged_already_is_never_named_for_another_generation(
        tmp_path: Path, names: tuple[str, str]) -> None:
    """Generations that begin alike (the same first lines): one compressed and judged by an
    earlier look, then the followed one gone, compressed before it was read to its end. Its
    gap could name the other's archive (one that begins as it did, with a later mtime: a
    compressor that rewrote it, a renumbering that did not keep it), and its own archive was
    then taken for a generation rotated since: two gaps, the first naming the wrong archive.
    An archive judged already is no other generation's."""
    import gzip

    from watchrun.sources.siblings import identity

    log = tmp_path / "app.log"
    write(log, "start\nb1\n")
    b = os.stat(log)
    followed = position(b.st_dev, b.st_ino, b.st_mtime_ns, b"start\nb1\n", b"b1\n", 9, 3,
                        str(log))
    judged, own = (tmp_path / n for n in names)
    judged.write_bytes(gzip.compress(b"start\nb1\nof an older generation\n"))
    own.write_bytes(gzip.compress(b"start\nb1\nb2 not read\n"))
    log.unlink()
    later = b.st_mtime_ns + 10**9
    for archive in (judged, own):
        os.utime(archive, ns=(later, later))
    plan = plans.plan_start(log, [followed], 10, Recorded(), [identity(os.stat(judged))])
    try:
        assert [(g["reason"], g["path"], g.get("lineNo")) for g in plan.gaps] == [
            ("compressed", str(own), 3)]
    finally:
        plan.close()


def test_an_archive_that_only_begins_as_the_generation_read_is_not_named_for_it(
        tmp_path: Path) -> None:
    """Two generations of the same first bytes and length: the followed one read to its end
    and gone, another's archive changed since it was judged (so judged again). The followed
    one's gap named that archive, `compressed` from its offset on, though the archive held
    nothing past it and its bytes before it were not the ones read (an explorer's rotation-3
    U1). Now an archive is the followed generation's only when it holds what was read of it
    (the bytes before the offset too) and more: the generation is `missing`, and the archive
    is judged as a generation of its own."""
    import gzip

    banner = "INFO banner " + "x" * 1100 + "\n"
    log = tmp_path / "app.log"
    write(log, banner + "ERROR a2\n")
    b, data = os.stat(log), log.read_bytes()
    followed = position(b.st_dev, b.st_ino, b.st_mtime_ns, data[:1024], b"ERROR a2\n",
                        len(data), 3, str(log))
    other = tmp_path / "app.log.2.gz"
    other.write_bytes(gzip.compress((banner + "ERROR a1\n").encode()))
    log.unlink()
    later = b.st_mtime_ns + 10**9
    os.utime(other, ns=(later, later))
    plan = plans.plan_start(log, [followed], 10, Recorded(), [])
    try:
        assert [(g["reason"], g["path"], g.get("offset")) for g in plan.gaps] == [
            ("missing", str(log), len(data)), ("compressed", str(other), None)]
    finally:
        plan.close()


def test_an_archive_of_another_generation_that_begins_alike_is_a_gap(tmp_path: Path) -> None:
    """Generations that begin with one banner (the same first KiB): an archive of one never
    read was taken for the archive of one read to its end, by its first bytes alone, and no
    gap said its lines were not read. Now it must hold what was read of that generation (the
    bytes before its offset too); the true archive still needs no gap."""
    import gzip

    banner = "INFO banner " + "x" * 1100 + "\n"
    log = tmp_path / "app.log"
    gone = tmp_path / "a1"
    write(gone, banner + "ERROR a1\n")
    s1, d1 = os.stat(gone), gone.read_bytes()
    read = position(s1.st_dev, s1.st_ino, s1.st_mtime_ns, d1[:1024], d1[-9:], len(d1), 3,
                    str(log), finished=True)
    gone.unlink()
    write(log, banner + "INFO a2\n")
    s2, d2 = os.stat(log), log.read_bytes()
    followed = position(s2.st_dev, s2.st_ino, s2.st_mtime_ns, d2[:1024], d2[-8:], len(d2), 3,
                        str(log))
    os.rename(log, tmp_path / "app.log.1")
    write(log, "fresh\n")
    other, own = tmp_path / "app.log.2.gz", tmp_path / "app.log.3.gz"
    other.write_bytes(gzip.compress((banner + "ERROR never read\n").encode()))
    own.write_bytes(gzip.compress(d1))
    later = s2.st_mtime_ns + 10**9
    for archive in (other, own):
        os.utime(archive, ns=(later, later))
    plan = plans.plan_start(log, [read, followed], 10, Recorded(), [])
    try:
        assert [(g["reason"], g["path"]) for g in plan.gaps] == [("compressed", str(other))]
        assert [s.path for s in plan.steps] == [str(tmp_path / "app.log.1"), str(log)]
    finally:
        plan.close()


def test_a_bzip2_archive_of_a_generation_read_to_its_end_is_no_gap(tmp_path: Path) -> None:
    """bzip2 gives its archive the mtime of the file it compressed to the whole second only:
    the archive looked older than the checkpoint, was passed over, and the generation read to
    its end was a `gap{missing}` (an explorer's rotation-4 S1-bz2)."""
    import bz2

    log = tmp_path / "app.log"
    write(log, "INFO one\nERROR two\n")
    stamp = 1_796_000_000 * 10**9 + 700_000_000  # (a part of a second)
    os.utime(log, ns=(stamp, stamp))
    b, data = os.stat(log), log.read_bytes()
    followed = position(b.st_dev, b.st_ino, b.st_mtime_ns, data, data[-10:], len(data), 3,
                        str(log))
    archive = tmp_path / "app.log.1.bz2"
    archive.write_bytes(bz2.compress(data))
    os.utime(archive, ns=(stamp - 700_000_000, stamp - 700_000_000))
    log.unlink()
    write(log, "fresh\n")
    plan = plans.plan_start(log, [followed], 10, Recorded(), [])
    try:
        assert plan.gaps == []
        assert [s.path for s in plan.steps] == [str(log)]
    finally:
        plan.close()


def test_an_archive_still_being_written_is_known_by_its_first_bytes(tmp_path: Path) -> None:
    """A compressed sibling cut short before the offset of the generation it begins as (its
    compressor still writing it) cannot be compared as far as that generation was read: it is
    taken for that generation's archive by its first bytes, as before that comparison, not
    written as a gap it will never be looked at again for."""
    import gzip

    banner = "INFO banner " + "x" * 1100 + "\n"
    log = tmp_path / "app.log"
    gone = tmp_path / "a1"
    write(gone, banner + "".join(f"ERROR {n} {'y' * 60}\n" for n in range(2000)))
    s1, d1 = os.stat(gone), gone.read_bytes()
    read = position(s1.st_dev, s1.st_ino, s1.st_mtime_ns, d1[:1024], d1[-1024:], len(d1),
                    2002, str(log), finished=True)
    gone.unlink()
    write(log, "INFO a2\n")
    s2, d2 = os.stat(log), log.read_bytes()
    followed = position(s2.st_dev, s2.st_ino, s2.st_mtime_ns, d2, d2, len(d2), 2, str(log))
    os.rename(log, tmp_path / "app.log.1")
    write(log, "fresh\n")
    whole = gzip.compress(d1, compresslevel=1)
    partial = tmp_path / "app.log.2.gz"
    partial.write_bytes(whole[: len(whole) // 2])
    later = s2.st_mtime_ns + 10**9
    os.utime(partial, ns=(later, later))
    plan = plans.plan_start(log, [read, followed], 10, Recorded(), [])
    try:
        assert plan.gaps == []
    finally:
        plan.close()


def test_an_archive_is_decompressed_once_however_many_generations_begin_alike(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Generations read to their end that all begin with one banner: an archive was
    decompressed as far as each of them was read, one after the other (up to 64 remembered).
    One pass now tells whether it holds what was read of any: the one it holds, among five,
    needs no gap; an archive of none of them is one."""
    import gzip

    from watchrun.sources import compressed

    banner = "INFO banner " + "x" * 1100 + "\n"
    gens = [banner + "".join(f"INFO {g} {n}\n" for n in range(50 * (g + 1)))
            for g in range(5)]
    read = []
    for g, text in enumerate(gens):
        f = tmp_path / f"g{g}"
        write(f, text)
        st, data = os.stat(f), f.read_bytes()
        read.append(position(st.st_dev, st.st_ino, st.st_mtime_ns, data[:1024], data[-1024:],
                             len(data), data.count(b"\n") + 1, str(f), finished=True))
    calls = []
    real = compressed._decompressor
    monkeypatch.setattr(compressed, "_decompressor",
                        lambda first: calls.append(first) or real(first))
    for text, held in ((gens[2], True), (banner + "ERROR never read\n" * 200, False)):
        archive = tmp_path / "archive.gz"
        archive.write_bytes(gzip.compress(text.encode()))
        fd = os.open(archive, os.O_RDONLY)
        try:
            calls.clear()
            assert compressed.drained_or_empty(fd, read) is held
            assert len(calls) == 2  # (its first KiB, then one pass)
        finally:
            os.close(fd)


BANNER = b"".join(b"# app 1.0 started, config /etc/app.conf, pid file /run/a%03d\n" % i
                  for i in range(20))
"""What the writer puts first in every generation: more than the 1 KiB of the head
fingerprint, so a checkpoint just past it matches the file written again after a truncation."""


def at_banner_end(log: Path) -> Checkpoint:
    """The checkpoint of `log` read to the end of its banner (and nothing since)."""
    write(log, BANNER.decode())
    st = os.stat(log)
    return position(st.st_dev, st.st_ino, st.st_mtime_ns, BANNER[:1024], BANNER[-1024:],
                    len(BANNER), 21, str(log), inode_gen=generation_of(log))


def away(log: Path, cp: Checkpoint, b_lines: bytes, c_lines: bytes, packer: str | None) -> None:
    """While the runner is away: B written, copied (then compressed by `packer`) and truncated,
    the banner written again, then C (rotation-4 S8)."""
    with open(log, "ab") as f:
        f.write(b_lines)
    os.utime(log, ns=(cp.mtime_ns + 1,) * 2)
    copytruncate(log, log.with_name("app.log.1"), BANNER.decode() + c_lines.decode())
    os.utime(log.with_name("app.log.1"), ns=(cp.mtime_ns + 1,) * 2)
    if packer is not None:
        subprocess.run([packer, "-n" if packer == "gzip" else "-q", str(log) + ".1"],
                       check=True)


B_LINES = b"".join(b"B%02d ERROR while the runner was away\n" % i for i in range(10))
C_LINES = b"".join(b"C%02d after the banner came back\n" % i for i in range(15))


def test_a_copytruncate_whose_banner_comes_back_is_read_from_the_copy(tmp_path: Path) -> None:
    """rotation-4 S8, uncompressed: checkpointed at the end of the banner; while the runner
    was away B was written, the file copied and truncated, the banner written again, then C.
    The file at the path held the checkpoint's bytes, so it was taken for the file read and B
    was lost with no gap. The copy goes on past the offset otherwise than the file at the path:
    B is read from it, then the file at the path from its start, after a `truncate`."""
    log = tmp_path / "app.log"
    cp = at_banner_end(log)
    away(log, cp, B_LINES, C_LINES, None)
    plan = plans.plan_start(log, [cp], 10, Recorded())
    try:
        read = [os.pread(o.fd, 1 << 16, o.start) for o in plan.steps]
        assert read == [B_LINES, BANNER + C_LINES] and plan.at_path and not plan.gaps
        assert plan.steps[0].origin is cp and plan.steps[0].line_no == 21
        announce = plan.steps[1].announce
        assert announce is not None and announce["reason"] == "truncate"
    finally:
        plan.close()


@pytest.mark.parametrize("packer", ["gzip", "bzip2"])
def test_a_copytruncate_compressed_whose_banner_comes_back_is_a_gap(
        tmp_path: Path, packer: str) -> None:
    """rotation-4 S8 as the explorer ran it: the copy was compressed. B cannot be read: a
    `gap{compressed}` names the archive and where the loss began (the checkpoint's line)."""
    log = tmp_path / "app.log"
    cp = at_banner_end(log)
    away(log, cp, B_LINES, C_LINES, packer)
    plan = plans.plan_start(log, [cp], 10, Recorded())
    try:
        assert [os.pread(o.fd, 1 << 16, o.start) for o in plan.steps] == [BANNER + C_LINES]
        (gap,) = plan.gaps
        assert gap["reason"] == "compressed" and gap["path"].endswith("app.log.1." + (
            "gz" if packer == "gzip" else "bz2"))
        assert (gap["offset"], gap["lineNo"]) == (len(BANNER), 21)
        assert gap["unreadBytes"] == len(B_LINES)  # (what it holds past the offset: all known)
        announce = plan.steps[0].announce
        assert announce is not None and announce["reason"] == "truncate"
    finally:
        plan.close()


@pytest.mark.parametrize("packer", [None, "gzip"])
def test_a_snapshot_the_file_goes_on_from_is_no_copytruncate(
        tmp_path: Path, packer: str | None) -> None:
    """A copy made while the runner was away of a file that was not truncated (logrotate's
    `copy`, a backup): the file at the path goes on past the offset as the copy does; it is
    read on from its checkpoint, and the copy is neither read nor a gap."""
    log = tmp_path / "app.log"
    cp = at_banner_end(log)
    with open(log, "ab") as f:
        f.write(B_LINES)
    (tmp_path / "app.log.1").write_bytes(log.read_bytes())
    os.utime(tmp_path / "app.log.1", ns=(cp.mtime_ns + 1,) * 2)
    if packer:
        subprocess.run([packer, "-n", str(tmp_path / "app.log.1")], check=True)
    with open(log, "ab") as f:
        f.write(C_LINES)
    plan = plans.plan_start(log, [cp], 10, Recorded())
    try:
        assert [os.pread(o.fd, 1 << 16, o.start) for o in plan.steps] == [B_LINES + C_LINES]
        assert plan.steps[0].origin is cp and not plan.gaps
    finally:
        plan.close()


def test_a_file_grown_in_a_directory_unchanged_since_lists_no_siblings(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A restart of a watcher whose file grew while it was away: no file was made or renamed
    beside it (its directory unchanged), so no copy can have been made; nothing is listed."""
    log = tmp_path / "app.log"
    cp = at_banner_end(log)
    os.utime(tmp_path, ns=(cp.mtime_ns - 1,) * 2)
    with open(log, "ab") as f:
        f.write(B_LINES)
    listed: list[Any] = []
    monkeypatch.setattr(plans, "scan", lambda *a: listed.append(a) or [])
    plan = plans.plan_start(log, [cp], 10, Recorded())
    try:
        assert [os.pread(o.fd, 1 << 16, o.start) for o in plan.steps] == [B_LINES]
        assert listed == []
    finally:
        plan.close()


def test_an_older_generation_written_late_is_no_copy_of_the_file(tmp_path: Path) -> None:
    """rotation-5 S3f: `app.log.1`, a generation made before the checkpoint (never read: it was
    rotated before the watcher existed) that begins with the same banner, written by a late
    writer while the runner was away, is no copy: it was made before the checkpoint. The file
    at the path is read on from its checkpoint, nothing else (it was taken for a copy: its
    lines recorded as the file's, a false `truncate`, the banner recorded twice)."""
    old = tmp_path / "app.log.1"
    old.write_bytes(BANNER + b"OLD line\n")
    if birth_ns(str(old)) is None:
        pytest.skip("the file system does not tell when a file was made")
    log = tmp_path / "app.log"
    cp = at_banner_end(log)
    if cp.mtime_ns <= (born := birth_ns(str(old)) or 0):  # (one tick of the file clock)
        os.utime(log, ns=(born + 1,) * 2)
        cp = msgspec.structs.replace(cp, mtime_ns=born + 1)
    with open(old, "ab") as f:
        f.write(b"LATE line\n")
    with open(log, "ab") as f:
        f.write(B_LINES)
    (tmp_path / "app.pid").write_text("1\n")  # (the directory changed)
    plan = plans.plan_start(log, [cp], 10, Recorded())
    try:
        assert [os.pread(o.fd, 1 << 16, o.start) for o in plan.steps] == [B_LINES]
        assert plan.steps[0].origin is cp and not plan.gaps
    finally:
        plan.close()


@pytest.mark.parametrize("tick", ["apart", "same"])
def test_the_oldest_copy_is_the_one_the_file_went_on_into(
        tmp_path: Path, tick: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """rotation-5 S2c (delaycompress): two copytruncates while the runner was away; B's copy
    was renumbered and compressed (`app.log.2.gz`), C's is plain (`app.log.1`). The archive,
    made first, is the generation being read (its gap from the checkpoint's line); C's copy is
    a whole generation, read from its start (it was read from the offset as the continuation,
    and its banner's last line was lost). Made in the same tick of the file clock (its birth
    times equal: file times move by the kernel's tick), the archive is known older by the
    mtime it kept."""
    log = tmp_path / "app.log"
    cp = at_banner_end(log)
    if tick == "same":
        monkeypatch.setattr(copies, "birth_ns", lambda fd: cp.mtime_ns + 5)
    away(log, cp, B_LINES, C_LINES, None)
    one, two = tmp_path / "app.log.1", tmp_path / "app.log.2"
    os.rename(one, two)
    subprocess.run(["gzip", "-n", str(two)], check=True)
    copytruncate(log, one, BANNER.decode() + "E00 ERROR\n")
    plan = plans.plan_start(log, [cp], 10, Recorded())
    try:
        read = [os.pread(o.fd, 1 << 16, o.start) for o in plan.steps]
        assert read == [BANNER + C_LINES, BANNER + b"E00 ERROR\n"]
        (gap,) = plan.gaps
        assert gap["path"] == str(two) + ".gz" and (gap["offset"], gap["lineNo"]) == (
            len(BANNER), 21)
    finally:
        plan.close()


def test_a_copy_beside_a_symlinks_target_is_found(tmp_path: Path) -> None:
    """rotation-5 S8: the path is a symlink to a file in another directory, where the copy is
    made: that directory's change opens the look (the link's own did not change)."""
    (tmp_path / "links").mkdir()
    (tmp_path / "data").mkdir()
    target = tmp_path / "data" / "app.log"
    link = tmp_path / "links" / "app.log"
    os.symlink(target, link)
    cp = at_banner_end(target)
    cp = msgspec.structs.replace(cp, path=str(target))
    os.utime(tmp_path / "links", ns=(cp.mtime_ns - 1,) * 2)
    away(target, cp, B_LINES, C_LINES, None)
    plan = plans.plan_start(link, [cp], 10, Recorded())
    try:
        read = [os.pread(o.fd, 1 << 16, o.start) for o in plan.steps]
        assert read == [B_LINES, BANNER + C_LINES] and not plan.gaps
    finally:
        plan.close()


def test_output_written_alike_after_the_banner_does_not_hide_the_copy(tmp_path: Path) -> None:
    """rotation-5 S6b: 5.4 KiB of start-up output the same in both generations follow the
    banner; the copy and the file differ past that (4 KiB compared: the copy was taken for a
    backup, and B was lost)."""
    block = b"".join(b"INFO bean %04d initialised in the application context\n" % i
                     for i in range(100))
    log = tmp_path / "app.log"
    cp = at_banner_end(log)
    away(log, cp, block + B_LINES, C_LINES, None)
    with open(log, "r+b") as f:  # (the banner, the same output, then C)
        f.truncate(0)
        f.write(BANNER + block + C_LINES)
    plan = plans.plan_start(log, [cp], 10, Recorded())
    try:
        read = [os.pread(o.fd, 1 << 16, o.start) for o in plan.steps]
        assert read == [block + B_LINES, BANNER + block + C_LINES]
    finally:
        plan.close()


def test_past_max_generations_the_copies_kept_are_read_whole(tmp_path: Path) -> None:
    """rotation-5 E1: three copytruncates while the runner was away, limits.maxGenerations 1:
    the two oldest copies (B's with them) are a `max-generations` gap, and the one kept is a
    later generation, read from its start (it was read from the offset as the continuation)."""
    log = tmp_path / "app.log"
    cp = at_banner_end(log)
    away(log, cp, B_LINES, C_LINES, None)
    for n, body in ((2, b"D00 ERROR\n"), (3, b"E00 ERROR\n")):
        for k in range(n - 1, 0, -1):
            os.rename(tmp_path / f"app.log.{k}", tmp_path / f"app.log.{k + 1}")
        copytruncate(log, tmp_path / "app.log.1", (BANNER + body).decode())
    plan = plans.plan_start(log, [cp], 1, Recorded())
    try:
        read = [os.pread(o.fd, 1 << 16, o.start) for o in plan.steps]
        assert read == [BANNER + b"D00 ERROR\n", BANNER + b"E00 ERROR\n"]
        assert [g["reason"] for g in plan.gaps] == ["max-generations"]
    finally:
        plan.close()


def test_an_archive_still_being_written_that_may_be_the_copy_is_a_gap(tmp_path: Path) -> None:
    """rotation-5 E3: at the start, the copy's archive is still being written (cut short
    before the offset's bytes come out) and the plain copy is gone: it cannot be told a copy
    or not, and B may be in it. It is a gap (nothing was said before, and B was lost); the file
    at the path is read on from its checkpoint."""
    log = tmp_path / "app.log"
    cp = at_banner_end(log)
    noise = b"".join(b"B ERROR %s\n" % hashlib.sha256(b"%d" % i).hexdigest().encode()
                     for i in range(2000))  # (compresses little: part of the archive holds more)
    away(log, cp, noise, C_LINES, "gzip")
    archive = tmp_path / "app.log.1.gz"
    whole = archive.read_bytes()
    archive.write_bytes(whole[: len(whole) // 4])  # (gzip has written a quarter of it: what
    # was read and a little more, not the 64 KiB past the offset compared)
    plan = plans.plan_start(log, [cp], 10, Recorded())
    try:
        assert [os.pread(o.fd, 1 << 16, o.start) for o in plan.steps] == [C_LINES]
        (gap,) = plan.gaps
        assert gap["reason"] == "compressed" and gap["path"] == str(archive)
    finally:
        plan.close()


def test_a_copytruncate_of_the_emptied_file_whose_banner_comes_back_is_read_from_the_copy(
        tmp_path: Path) -> None:
    """The checkpoint of the emptied file (nothing to recognise it by), then, while the runner
    was away, the banner and B written, the file copied and truncated, the banner and C
    written: the copy began as the file does for more than 1 KiB, so it was taken for a backup
    and B was lost with no gap. It goes on otherwise than the file does: it is read, then the
    file at the path from its start after a `truncate`."""
    log = tmp_path / "app.log"
    empty, st = emptied(log)
    write(log, (BANNER + B_LINES).decode())
    os.utime(log, ns=(st.st_mtime_ns + 1,) * 2)
    copytruncate(log, tmp_path / "app.log.1", (BANNER + C_LINES).decode())
    os.utime(tmp_path / "app.log.1", ns=(st.st_mtime_ns + 1,) * 2)
    plan = plans.plan_start(log, [empty], 10, Recorded())
    try:
        read = [os.pread(o.fd, 1 << 16, o.start) for o in plan.steps]
        assert read == [BANNER + B_LINES, BANNER + C_LINES] and plan.at_path and not plan.gaps
        assert plan.steps[0].origin is empty
        announce = plan.steps[1].announce
        assert announce is not None and announce["reason"] == "truncate"
    finally:
        plan.close()


def three_lines(log: Path) -> Checkpoint:
    """`log` holding three lines, and the checkpoint of them read to their end."""
    write(log, "line 1\nline 2\nline 3\n")
    st, data = log.stat(), log.read_bytes()
    return position(st.st_dev, st.st_ino, st.st_mtime_ns, data, data, len(data), 4, str(log))


FUSE = 0x65735546
"""statfs's f_type of a FUSE file system (sshfs): one whose inode numbers may not outlive a
mount (`identity.NUMBERED_ANEW`)."""


def on_fuse(monkeypatch: pytest.MonkeyPatch) -> None:
    """The files opened are taken to be on FUSE (the seam: `identity.fs_type`)."""
    monkeypatch.setattr("watchrun.sources.identity.fs_type", lambda at: FUSE)


@pytest.mark.parametrize("number", ["device", "inode"])
def test_the_followed_file_under_other_numbers_is_read_on_from_its_checkpoint(
        tmp_path: Path, number: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """The checkpoint was saved before a remount gave the file system another device number
    (or, on FUSE, gave the file another inode number): the file at the path, holding what was
    read, is read on from the checkpoint, with no `rotate` and no `gap`; the siblings listed to
    make sure the generation was not renamed beside it are judged as they are numbered now. (It
    was read from its first line after a `gap{missing}`.)"""
    if number == "inode":
        on_fuse(monkeypatch)
    log = tmp_path / "app.log"
    write(tmp_path / "app.log.1", "older\n")
    cp = three_lines(log)
    was = msgspec.structs.replace(cp, **{"dev" if number == "device" else "inode": 1 << 40})
    write(log, "line 1\nline 2\nline 3\nline 4\n")
    plan = plans.plan_start(log, [was], 10, Recorded())
    try:
        (o,) = plan.steps
        assert (o.start, o.line_no, o.origin, o.announce) == (cp.offset, 4, was, None)
        assert plan.at_path and plan.renumbered and not plan.gaps
        older = (tmp_path / "app.log.1").stat()
        assert plan.archives is not None and (older.st_dev, older.st_ino, older.st_size,
                                              older.st_mtime_ns) in plan.archives
    finally:
        plan.close()


def test_another_inode_number_on_a_local_disk_is_another_file_however_it_begins(
        tmp_path: Path) -> None:
    """explore-fresh3 F1: on a local disk inode numbers do not change under a file, so a file
    at the path under another one is a new file even when it begins with the bytes read (a log
    made again with the same banner): read from its first line, with a `gap{missing}` for the
    generation gone. (Taken for the old file renumbered, what the old one held past the
    checkpoint was lost without a gap.)"""
    log = tmp_path / "app.log"
    cp = three_lines(log)
    was = msgspec.structs.replace(cp, inode=1 << 40)
    write(log, "line 1\nline 2\nline 3\nline 4\n")
    plan = plans.plan_start(log, [was], 10, Recorded())
    try:
        (o,) = plan.steps
        assert (o.start, o.origin, plan.renumbered) == (0, None, False)
        assert [g["reason"] for g in plan.gaps] == ["missing"]
    finally:
        plan.close()


def test_a_copy_of_the_followed_file_renamed_beside_it_is_no_renumbering(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The guard: the followed file was copied, renamed `app.log.1` (its writer adds line 4 to
    it) and the copy moved to the path. The generation is beside the path under its numbers:
    it is read on from the checkpoint (line 4 is there only), and the copy at the path is a
    generation of its own. (Taken for the file renumbered, line 4 was never read.)"""
    on_fuse(monkeypatch)  # (where another inode number could be the same file)
    log = tmp_path / "app.log"
    cp = three_lines(log)
    copy = tmp_path / "copy"
    copy.write_bytes(log.read_bytes())
    log.rename(tmp_path / "app.log.1")
    with open(tmp_path / "app.log.1", "a") as f:
        f.write("line 4\n")
    os.replace(copy, log)
    plan = plans.plan_start(log, [cp], 10, Recorded())
    try:
        renamed, at_path = plan.steps
        assert (renamed.path, renamed.start, at_path.start) == (
            str(tmp_path / "app.log.1"), cp.offset, 0)
        assert at_path.st.st_ino == log.stat().st_ino and not plan.renumbered
    finally:
        plan.close()


def test_a_checkpoint_of_a_deleted_generation_is_not_renumbered(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A generation checkpointed deleted is gone: a file at the path that holds its bytes
    under another inode number is another one, read from its first line."""
    on_fuse(monkeypatch)  # (where another inode number could be the same file)
    log = tmp_path / "app.log"
    cp = msgspec.structs.replace(three_lines(log), inode=1 << 40, deleted=True)
    plan = plans.plan_start(log, [cp], 10, Recorded())
    try:
        (o,) = plan.steps
        assert (o.start, o.origin, plan.renumbered) == (0, None, False)
    finally:
        plan.close()


def test_a_file_given_the_generations_inode_number_beside_it_is_not_the_generation(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The followed file was replaced by a copy (another inode number) and its old number was
    given to a new file beside it (`runner.err`: ext4 hands a freed number out at once). That
    file is no generation: the copy at the path is read on from the checkpoint. (Taken for the
    generation renamed beside the path by its numbers, the copy was read from line 1.) On
    FUSE, where the copy's other inode number may be a mount's renumbering."""
    on_fuse(monkeypatch)
    log = tmp_path / "app.log"
    cp = three_lines(log)
    err = tmp_path / "runner.err"
    write(err, "not the log\n")
    copy = tmp_path / "copy"
    copy.write_bytes(log.read_bytes() + b"line 4\n")
    os.replace(copy, log)
    plan = plans.plan_start(log, [msgspec.structs.replace(cp, inode=err.stat().st_ino)], 10,
                            Recorded())
    try:
        (o,) = plan.steps
        assert (o.start, plan.renumbered) == (cp.offset, True)
    finally:
        plan.close()
