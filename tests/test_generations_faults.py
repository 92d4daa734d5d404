"""The real runner against rotations that once made it claim losses it had not had, or record
lines twice: a generation compressed after it was read (delaycompress, the compressor giving
the archive a new mtime; `compress` between two `run --once` runs or across a restart), and the
followed path pointed back at a generation already read."""

from __future__ import annotations

import bz2
import collections
import gzip
import lzma
import os
import signal
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from liverunner import LiveRunner, read_records, wait_for, write_config
from test_once import once

Compress = Callable[[bytes], bytes]
COMPRESSORS: dict[str, tuple[str, Compress]] = {
    "gzip": (".gz", gzip.compress),
    "bzip2": (".bz2", bz2.compress),
    "xz": (".xz", lzma.compress),
}


def config_for(tmp_path: Path, log: Path, rotate_wait: str = "300ms") -> Path:
    return write_config(tmp_path, {"limits": {"rotateWait": rotate_wait}, "watchers": [
        {"id": "app", "path": str(log), "pattern": "^L", "fromStart": True}]})


def records(tmp_path: Path) -> list[dict[str, Any]]:
    return read_records(tmp_path / ".watchrun" / "watchers" / "app.jsonl")


def counted(tmp_path: Path) -> collections.Counter[int]:
    """Line number → how often it was recorded."""
    return collections.Counter(int(r["line"].split()[0][1:]) for r in records(tmp_path)
                               if r["kind"] == "match")


def write(log: Path, first: int, last: int) -> None:
    with log.open("a") as f:
        f.writelines(f"L{i} payload\n" for i in range(first, last + 1))


def read_up_to(tmp_path: Path, n: int) -> None:
    wait_for(lambda: n in counted(tmp_path), f"line L{n} recorded")


def rotate_compressing(log: Path, suffix: str, compress: Compress) -> None:
    """A rename rotation with delaycompress: .2<suffix> → .3<suffix>, .1 → .2, the file →
    .1, a new empty file; then .2 compressed into .2<suffix> (a new file, with a new mtime)
    and removed."""
    one, two = Path(f"{log}.1"), Path(f"{log}.2")
    if Path(f"{two}{suffix}").exists():
        Path(f"{two}{suffix}").rename(f"{log}.3{suffix}")
    if one.exists():
        one.rename(two)
    log.rename(one)
    log.touch()
    if two.exists():
        Path(f"{two}{suffix}").write_bytes(compress(two.read_bytes()))
        two.unlink()


def open_files(r: LiveRunner) -> list[str]:
    """What the runner's descriptors point at (a deleted file's name ends in ` (deleted)`)."""
    targets = []
    for fd in Path(f"/proc/{r.pid}/fd").iterdir():
        try:
            targets.append(os.readlink(fd))
        except OSError:
            continue
    return targets


def released(r: LiveRunner, log: Path, *others: Path) -> bool:
    """The runner holds no rotated generation of `log` open (nor `others`): each was read to
    its end and released after rotateWait."""
    return not any(t.startswith(f"{log}.") or t.split(" (deleted)")[0] in map(str, others)
                   for t in open_files(r))


def rotations_compressing(tmp_path: Path, r: LiveRunner, log: Path, kind: str, *,
                          release: bool) -> int:
    """Four rotations with delaycompress, each after every line was recorded (and, with
    `release`, after the runner released the rotated generations); the lines written."""
    suffix, compress = COMPRESSORS[kind]
    n = 0
    r.wait_running()
    for _ in range(4):
        write(log, n + 1, n + 100)
        n += 100
        read_up_to(tmp_path, n)
        if release:
            wait_for(lambda: released(r, log), "the rotated generations released")
        rotate_compressing(log, suffix, compress)
    write(log, n + 1, n + 100)
    n += 100
    read_up_to(tmp_path, n)
    return n


def every_line_once(tmp_path: Path, *ranges: range) -> None:
    got = counted(tmp_path)
    assert [k for k, v in got.items() if v > 1] == []
    assert sorted(got) == [i for rng in ranges for i in rng]


@pytest.mark.parametrize("kind", list(COMPRESSORS))
@pytest.mark.parametrize("release", [True, False], ids=["released", "still-open"])
def test_a_generation_compressed_after_it_was_read_is_no_gap(tmp_path: Path, kind: str,
                                                             release: bool) -> None:
    """The compressed generation was read to its end and released, or is still open (read
    to its end through its descriptor): every line once, and no `gap` claims a loss."""
    log = tmp_path / "app.log"
    log.touch()
    r = LiveRunner(config_for(tmp_path, log, "300ms" if release else "30s"))
    try:
        n = rotations_compressing(tmp_path, r, log, kind, release=release)
        assert r.stop() == 0, r.stderr()
    finally:
        r.close()
    every_line_once(tmp_path, range(1, n + 1))
    assert [x for x in records(tmp_path) if x["kind"] == "gap"] == []


def test_only_a_generation_compressed_before_it_was_read_is_a_gap(tmp_path: Path) -> None:
    """Generations compressed after they were read are no gap; one rotated and compressed
    while the runner was down, before it was read, is: one `gap{compressed}` names the archive
    and where in the generation reading stopped (it was a `gap{missing}` for the generation
    too: the same lines counted twice)."""
    log = tmp_path / "app.log"
    log.touch()
    suffix, compress = COMPRESSORS["gzip"]
    r = LiveRunner(config_for(tmp_path, log))
    try:
        n = rotations_compressing(tmp_path, r, log, "gzip", release=True)
        wait_for(lambda: released(r, log), "the rotated generations released")
        assert r.stop() == 0, r.stderr()
        write(log, n + 1, n + 50)  # never read: rotated and compressed while the runner is down
        lost, unread = log.stat().st_ino, Path(f"{log}-20261205{suffix}")  # (dateext)
        log.rename(f"{log}-20261205")
        unread.write_bytes(compress(Path(f"{log}-20261205").read_bytes()))
        Path(f"{log}-20261205").unlink()
        write(log, n + 51, n + 60)
        r = LiveRunner(config_for(tmp_path, log))
        r.wait_running()
        read_up_to(tmp_path, n + 60)
        assert r.stop() == 0, r.stderr()
    finally:
        r.close()
    every_line_once(tmp_path, range(1, n + 1), range(n + 51, n + 61))
    gaps = sorted((x["reason"], x["path"], x["inode"]) for x in records(tmp_path)
                  if x["kind"] == "gap")
    assert gaps == [("compressed", str(unread), unread.stat().st_ino)]
    [gap] = [x for x in records(tmp_path) if x["kind"] == "gap"]
    assert f"is the generation being read (inode {lost}), rotated and compressed" in \
        gap["message"]


def frozen_while(tmp_path: Path, log: Path, rotate: Callable[[], None], after: int) -> None:
    """A runner that read lines 1-2 of `log` is frozen while `rotate` runs; once it saw the
    rotation, lines `after` and `after + 1` are written and read, and it stops (exit 0)."""
    write(log, 1, 2)
    r = LiveRunner(config_for(tmp_path, log))
    try:
        read_up_to(tmp_path, 2)
        r.send(signal.SIGSTOP)
        rotate()
        r.send(signal.SIGCONT)
        wait_for(lambda: any(x["kind"] == "rotate" for x in records(tmp_path)), "the rotation")
        write(log, after, after + 1)
        read_up_to(tmp_path, after + 1)
        assert r.stop() == 0, r.stderr()
    finally:
        r.close()


def test_a_compressed_generation_found_again_unchanged_is_named_once(tmp_path: Path) -> None:
    """A generation rotated and compressed while the runner was frozen is one `gap`, even when
    a later look lists it again: the next file was empty when opened, and when it had lines
    the look for copies of it found the archive, modified within the same clock tick as that
    file's creation (here made so), and named it a second time (found 2026-12-05)."""
    log = tmp_path / "app.log"
    suffix, compress = COMPRESSORS["gzip"]
    archive = Path(f"{log}.1{suffix}")

    def rotate() -> None:
        log.unlink()
        write(log, 3, 4)  # never read: compressed and deleted while the runner is frozen
        archive.write_bytes(compress(log.read_bytes()))
        log.unlink()
        log.touch()  # the next generation, empty
        tick = log.stat().st_mtime_ns
        os.utime(archive, ns=(tick, tick))

    frozen_while(tmp_path, log, rotate, 5)
    every_line_once(tmp_path, range(1, 3), range(5, 7))
    gaps = [(x["reason"], x["path"]) for x in records(tmp_path) if x["kind"] == "gap"]
    assert gaps == [("compressed", str(archive))]


def test_a_copy_compressed_before_the_runner_looked_is_no_loss(tmp_path: Path) -> None:
    """logrotate `copytruncate` + `compress` done before the runner looked (it was frozen, or
    slower than the rotator): the copy, compressed, holds exactly what was read, yet it was a
    `gap{compressed}` ("rotated and compressed before it was read"), a false loss record (found
    by an explorer, 2026-12-06). The look for a copy of a truncated file now takes an archive
    that holds exactly what was read as that copy."""
    log = tmp_path / "app.log"
    suffix, compress = COMPRESSORS["gzip"]

    def rotate() -> None:
        Path(f"{log}.1{suffix}").write_bytes(compress(log.read_bytes()))  # copy, compress
        os.truncate(log, 0)  # truncate

    frozen_while(tmp_path, log, rotate, 3)
    every_line_once(tmp_path, range(1, 5))
    assert [x for x in records(tmp_path) if x["kind"] == "gap"] == []
    [rotate_record] = [x for x in records(tmp_path) if x["kind"] == "rotate"]
    assert (rotate_record["reason"], rotate_record["unreadBytes"]) == ("truncate", 0)


def point_back(log: Path, link: str) -> None:
    """The path is made to name the first generation again, `a.log` (symlink: `ln -sfn`) or
    `app.log.1` (hard link: `ln -f`), in one rename."""
    tmp = log.with_name("tmp-link")
    if link == "symlink":
        tmp.symlink_to("a.log")
    else:
        os.link(f"{log}.1", tmp)
    tmp.replace(log)


def first_two_generations(tmp_path: Path, log: Path, link: str) -> tuple[Path, Path]:
    """A (L1-L10) at the path, then B (L11-L20): a symlink swapped from a.log to b.log, or a
    rename of app.log to app.log.1 and a new app.log. Returns A and B."""
    if link == "symlink":
        a, b = tmp_path / "a.log", tmp_path / "b.log"
        write(a, 1, 10)
        log.symlink_to("a.log")
    else:
        a, b = log, log
        write(log, 1, 10)
    return a, b


def swap_to_second(log: Path, a: Path, b: Path, link: str) -> Path:
    if link == "symlink":
        write(b, 11, 20)
        tmp = log.with_name("tmp-link")
        tmp.symlink_to("b.log")
        tmp.replace(log)
        return a
    log.rename(f"{log}.1")
    write(log, 11, 20)
    return Path(f"{log}.1")


def both_read(r: LiveRunner, tmp_path: Path, log: Path, a: Path, b: Path, link: str,
              release: bool) -> Path:
    """The first generation's lines read, the second's after the swap (`swap_to_second`, whose
    result this returns); with `release`, until the runner let the first one go."""
    read_up_to(tmp_path, 10)
    a = swap_to_second(log, a, b, link)
    read_up_to(tmp_path, 20)
    if release:
        wait_for(lambda: released(r, log, a), "the first one released")
    return a


def rotates(tmp_path: Path) -> list[tuple[str, int, int]]:
    return [(x["reason"], x["inode"], x["oldInode"]) for x in records(tmp_path)
            if x["kind"] == "rotate"]


@pytest.mark.parametrize("link", ["symlink", "hardlink"])
@pytest.mark.parametrize("release", [True, False], ids=["released", "still-open"])
def test_the_path_pointed_back_at_a_generation_read_goes_on_from_where_it_was(
        tmp_path: Path, link: str, release: bool) -> None:
    """A blue/green symlink flipped back to its old target, or `ln -f app.log.1 app.log`:
    the first generation, read before (still open, or released after rotateWait), is read on
    from where it was, by one reader: every line once, no gap."""
    log = tmp_path / "app.log"
    a, b = first_two_generations(tmp_path, log, link)
    r = LiveRunner(config_for(tmp_path, log, "300ms" if release else "30s"))
    try:
        r.wait_running()
        a = both_read(r, tmp_path, log, a, b, link, release)
        b_ino = log.stat().st_ino
        point_back(log, link)
        wait_for(lambda: len(rotates(tmp_path)) == 2, "the path's change seen")
        write(log, 21, 25)
        read_up_to(tmp_path, 25)
        assert r.stop() == 0, r.stderr()
    finally:
        r.close()
    every_line_once(tmp_path, range(1, 26))
    assert [x for x in records(tmp_path) if x["kind"] == "gap"] == []
    assert rotates(tmp_path)[1] == ("rename", a.stat().st_ino, b_ino)


@pytest.mark.parametrize("link", ["symlink", "hardlink"])
@pytest.mark.parametrize("release", [True, False], ids=["released", "still-open"])
def test_the_path_pointed_back_while_stopped_goes_on_from_where_it_was(
        tmp_path: Path, link: str, release: bool) -> None:
    """The same while the runner is stopped: at its start the first generation is found at
    the path and read on from its checkpoint (not taken for gone, nor read again from its
    first line); the second is found where it is now, read to its end."""
    log = tmp_path / "app.log"
    a, b = first_two_generations(tmp_path, log, link)
    config = config_for(tmp_path, log, "300ms" if release else "30s")
    r = LiveRunner(config)
    try:
        r.wait_running()
        a = both_read(r, tmp_path, log, a, b, link, release)
        assert r.stop() == 0, r.stderr()
        if link == "hardlink":
            log.rename(f"{log}.2")  # (B is kept: it is the one last followed)
        point_back(log, link)
        write(log, 21, 25)
        r = LiveRunner(config)
        r.wait_running()
        read_up_to(tmp_path, 25)
        assert r.stop() == 0, r.stderr()
    finally:
        r.close()
    every_line_once(tmp_path, range(1, 26))
    assert [x for x in records(tmp_path) if x["kind"] == "gap"] == []


def logrotate(log: Path, suffix: str, compress: Compress, *, delay: bool,
              copytruncate: bool = False) -> None:
    """A daily logrotate `create` (or `copytruncate`) + `compress` (with `delaycompress`: the
    newest rotated file stays plain until the next rotation), `rotate 5`: the archives are
    renumbered."""
    for k in range(5, 0, -1):
        if Path(f"{log}.{k}{suffix}").exists():
            Path(f"{log}.{k}{suffix}").rename(f"{log}.{k + 1}{suffix}")
    one = Path(f"{log}.1")
    if one.exists():
        Path(f"{log}.2{suffix}").write_bytes(compress(one.read_bytes()))
        one.unlink()
    if copytruncate:
        one.write_bytes(log.read_bytes())
        os.truncate(log, 0)
    else:
        log.rename(one)
    if not delay:
        Path(f"{log}.1{suffix}").write_bytes(compress(one.read_bytes()))
        one.unlink()
    log.touch()


@pytest.mark.parametrize("kind", list(COMPRESSORS))
@pytest.mark.parametrize("delay", [True, False], ids=["delaycompress", "compress"])
@pytest.mark.parametrize("copytruncate", [False, True], ids=["create", "copytruncate"])
def test_once_runs_across_logrotate_compress_claim_no_loss(tmp_path: Path, kind: str,
                                                            delay: bool,
                                                            copytruncate: bool) -> None:
    """A nightly `run --once` with logrotate's `compress` (and `delaycompress`) between the
    runs: every generation was read to its end before it was compressed. Every run after a
    rotation was an ERROR (exit 3, "lines were never read: app.log.2.gz was rotated and
    compressed before it was read") with a `gap{missing}` and `gap{compressed}` each time.
    Now every run passes and no `gap` is written; every line once."""
    log = tmp_path / "app.log"
    log.touch()
    suffix, compress = COMPRESSORS[kind]
    config = {"watchers": [{"id": "app", "path": str(log), "pattern": "^L",
                            "gate": {"maxMatches": 1000}}]}
    n = 0
    for _ in range(3):  # (the third renumbers a compressed archive: `.2.gz` to `.3.gz`)
        write(log, n + 1, n + 10)
        n += 10
        r = once(tmp_path, config)
        assert r.rc == 0, r.out + r.err
        logrotate(log, suffix, compress, delay=delay, copytruncate=copytruncate)
    write(log, n + 1, n + 10)
    r = once(tmp_path, config)
    assert r.rc == 0, r.out + r.err
    every_line_once(tmp_path, range(1, n + 11))
    assert [x for x in records(tmp_path) if x["kind"] == "gap"] == []


def read_then_stopped(tmp_path: Path, config: Path, n: int) -> None:
    """A live runner of `config` started, waited for until line Ln is recorded, stopped."""
    r = LiveRunner(config)
    try:
        read_up_to(tmp_path, n)
        assert r.stop() == 0, r.stderr()
    finally:
        r.close()


def stopped_after_reading(tmp_path: Path, log: Path) -> Path:
    """`log` with lines L1..L10, read by a live runner that was then stopped; its config."""
    write(log, 1, 10)
    config = config_for(tmp_path, log)
    read_then_stopped(tmp_path, config, 10)
    return config


def test_a_live_runner_stopped_before_its_file_was_compressed_claims_no_loss(
        tmp_path: Path) -> None:
    """Stopped at idle (every line read), then rotated and gzipped (`compress` without
    `delaycompress`), then started: it wrote `gap{missing}` and `gap{compressed}`."""
    log = tmp_path / "app.log"
    config = stopped_after_reading(tmp_path, log)
    logrotate(log, ".gz", gzip.compress, delay=False)
    write(log, 11, 20)
    read_then_stopped(tmp_path, config, 20)
    every_line_once(tmp_path, range(1, 21))
    assert [x for x in records(tmp_path) if x["kind"] == "gap"] == []


def test_a_generation_compressed_while_the_path_is_missing_is_said_at_the_start(
        tmp_path: Path) -> None:
    """logrotate's `nocreate` + `compress` while the runner was stopped, with lines written
    after its last look: the path is missing at the start (the app makes it again at its next
    write). The plan's `gap` was dropped with the missing path, so the loss was said only once
    a file came to the path, never if none did (an explorer's FALSE 2). Now it is said at the
    start, once: a restart does not say it again, and the file made later is read whole."""
    log = tmp_path / "app.log"
    config = stopped_after_reading(tmp_path, log)
    write(log, 11, 12)  # (while it was stopped)
    Path(f"{log}.1.gz").write_bytes(gzip.compress(log.read_bytes()))
    log.unlink()
    r = LiveRunner(config)
    try:
        for restart in range(2):
            if restart:
                assert r.stop() == 0, r.stderr()
                r = LiveRunner(config)
            r.wait_running()
            gaps = [x for x in records(tmp_path) if x["kind"] == "gap"]
            assert [(g["reason"], g["path"], g["lineNo"], g["unreadBytes"]) for g in gaps] == [
                ("compressed", f"{log}.1.gz", 11, 0)], (restart, gaps)
        write(log, 13, 14)  # the app makes it again
        read_up_to(tmp_path, 14)
        assert r.stop() == 0, r.stderr()
    finally:
        r.close()
    every_line_once(tmp_path, range(1, 11), range(13, 15))
    assert len([x for x in records(tmp_path) if x["kind"] == "gap"]) == 1
