"""JsonlSink: record format, seq across restarts, torn-record repair, rotation, external removal,
file modes, short writes, a full disk (AsyncWriter), and preparing the output directory."""

from __future__ import annotations

import asyncio
import contextlib
import errno
import json
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path

import pytest
from recordcheck import validate_records
from tmpfs import fill, mount_tmpfs, umount

from watchrun.output.outdir import OutputDirError, prepare_output_dir
from watchrun.output.records import iter_records, oldest_seq
from watchrun.output.sink import JsonlSink, SinkWriteError
from watchrun.output.writer import AsyncWriter

T0 = datetime(2026, 5, 16, 12, 0, tzinfo=UTC).timestamp()


class FixedClock:
    def __init__(self, now: float = T0) -> None:
        self.t = now

    def monotonic(self) -> float:
        return self.t

    def now(self) -> float:
        return self.t


def open_sink(path: Path, sid: str = "server", max_bytes: int = 1 << 20, keep: int = 3
              ) -> JsonlSink:
    return JsonlSink(path, sid, max_bytes=max_bytes, keep=keep, clock=FixedClock())


def match(n: int, pad: int = 0) -> dict[str, object]:
    return {"line": f"line {n} " + "x" * pad, "lineNo": n, "offset": n * 10, "run": 1}


def test_record_line_format(tmp_path: Path) -> None:
    with open_sink(tmp_path / "server.jsonl") as sink:
        assert sink.next_seq == 1 and sink.last_record is None
        line = sink.record("match", {"line": "x", "lineNo": 1, "offset": 0, "run": 1})
    assert line == (
        b'{"schema":1,"seq":1,"cursor":"server:0000000000000001","ts":"2026-05-16T12:00:00.000Z",'
        b'"kind":"match","line":"x","lineNo":1,"offset":0,"run":1}\n'
    )


@pytest.mark.parametrize(
    "text",
    ["new\nline", "cr\rhere", "\u2028sep\u2029", "esc\x1b[2J", "nul\x00", "é ü 漢字 😀",
     "\udcff lone"],
)
def test_any_text_stays_one_line(tmp_path: Path, text: str) -> None:
    with open_sink(tmp_path / "server.jsonl") as sink:
        line = sink.record("output", {"text": text})
    assert line.endswith(b"\n") and line.count(b"\n") == 1
    line.decode("utf-8")  # always valid UTF-8
    # a lone surrogate (an undecodable byte of a file name, as Python keeps it) is U+FFFD
    assert json.loads(line)["text"] == text.replace("\udcff", "\ufffd")


@pytest.mark.parametrize(
    "fields", [{"seq": 5}, {"kind": "x"}, {"cursor": "c"}, {"x": float("nan")}]
)
def test_bad_fields_are_refused_without_consuming_a_seq(
    tmp_path: Path, fields: dict[str, object]
) -> None:
    with open_sink(tmp_path / "server.jsonl") as sink:
        with pytest.raises(ValueError):
            sink.record("output", fields)
        assert sink.next_seq == 1


def test_seq_continues_across_reopen(tmp_path: Path) -> None:
    path = tmp_path / "server.jsonl"
    with open_sink(path) as sink:
        assert [sink.write("match", match(n)) for n in (1, 2, 3)] == [1, 2, 3]
    with open_sink(path) as sink:
        assert sink.next_seq == 4
        assert sink.last_record is not None and sink.last_record["lineNo"] == 3
        four = sink.record("match", match(4))
        sink.write_lines([four, sink.record("stop", {"reason": "shutdown"})])
    recs = validate_records(path)
    assert [r["seq"] for r in recs] == [1, 2, 3, 4, 5]
    assert recs[-1]["cursor"] == "server:0000000000000005"


def test_a_last_line_that_is_not_a_record_is_passed_over_on_reopen(tmp_path: Path) -> None:
    """The live file's last line gives the stream's last record only when it is one: a line of
    something else (written by hand) sends the sink to the records before it."""
    path = tmp_path / "server.jsonl"
    with open_sink(path) as sink:
        for n in (1, 2, 3):
            sink.write("match", match(n))
    with path.open("ab") as fh:
        fh.write(b"not a record\n")
    with open_sink(path) as sink:
        assert sink.repaired_bytes == 0
        assert sink.next_seq == 4
        assert sink.last_record is not None and sink.last_record["lineNo"] == 3


def test_torn_record_is_cut_on_open(tmp_path: Path) -> None:
    path = tmp_path / "server.jsonl"
    with open_sink(path) as sink:
        for n in (1, 2, 3):
            sink.write("match", match(n))
        half = sink.record("match", match(4))[:37]
    fd = os.open(path, os.O_WRONLY | os.O_APPEND)
    os.write(fd, half)  # a crash in the middle of a write
    os.close(fd)
    with open_sink(path) as sink:
        assert sink.repaired_bytes == 37
        assert sink.next_seq == 4  # the torn record was never complete: its seq is reused
        sink.write("error", {"code": "sink-repaired", "message": "cut 37 bytes", "bytes": 37})
    assert [r["kind"] for r in validate_records(path)] == ["match"] * 3 + ["error"]


def test_file_that_is_only_a_torn_line_continues_from_rotated_copy(tmp_path: Path) -> None:
    path = tmp_path / "server.jsonl"
    with open_sink(path, max_bytes=300) as sink:
        for n in range(1, 8):
            sink.write("match", match(n))
    first_live = json.loads(path.read_bytes().split(b"\n")[0])["seq"]
    assert first_live > 1
    path.write_bytes(b'{"schema":1,"seq":8,"cur')  # a crash right after a rotation
    with open_sink(path, max_bytes=300) as sink:
        assert sink.repaired_bytes == 24 and path.stat().st_size == 0
        assert sink.next_seq == first_live  # continues after the last record of .1


class Killed(BaseException):
    """The runner's SIGKILL, at the seam: nothing after it runs."""


@pytest.mark.parametrize("left", ["no live file", "a torn record"])
def test_a_crash_in_a_rotation_with_none_kept_never_begins_the_seqs_again(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, left: str) -> None:
    """`output.keep: 0`: a rotation removes the live file, then makes the next. A SIGKILL in
    between (744 of 1765 looks under a flood, explorer output 2d) or during the new file's first
    write left no record of the stream, and the next start numbered from seq 1 again, its
    cursors the same as records shipped before. The seam: the kill right after the removal."""
    layout = prepare_output_dir(tmp_path / "out")
    path = layout.jsonl("watcher", "app")
    sink = open_sink(path, "app", max_bytes=300, keep=0)
    import watchrun.output.sink as sink_module

    real, opened = sink_module.open_live, []

    def killed_after_the_removal(where: Path) -> object:
        opened.append(where)
        raise Killed()

    monkeypatch.setattr(sink_module, "open_live", killed_after_the_removal)
    with pytest.raises(Killed):
        for n in range(1, 100):
            sink.write("match", match(n))
    monkeypatch.setattr(sink_module, "open_live", real)
    assert opened and not path.exists()  # the rotation removed it; the kill came before more
    reached = sink.next_seq - 1  # the record the kill kept from the new file (not written)
    if left == "a torn record":
        path.write_bytes(b'{"schema":1,"seq":%d,"cur' % reached)
    with open_sink(path, "app", max_bytes=300, keep=0) as again:
        assert again.next_seq == reached > 1
        again.write("match", match(1))
    assert [r["seq"] for r in iter_records(path)] == [reached]


def test_rotation_keeps_n_files_and_everything_retained_reads_in_order(tmp_path: Path) -> None:
    path = tmp_path / "server.jsonl"
    Path(f"{path}.7").write_bytes(b"stale\n")  # from an older, larger `keep`
    with open_sink(path, max_bytes=1000, keep=3) as sink:
        for n in range(1, 41):
            sink.write("match", match(n))
        sink.write_lines([sink.record("match", match(n)) for n in range(41, 121)])
        sink.write("match", match(121, pad=3000))  # bigger than max_bytes: alone in a file
        sink.write("match", match(122))
        assert sink.rotations > 10
    names = sorted(p.name for p in tmp_path.iterdir())
    assert names == ["server.jsonl", "server.jsonl.1", "server.jsonl.2", "server.jsonl.3"]
    for p in tmp_path.iterdir():
        assert p.stat().st_size <= 1000 or p.name == "server.jsonl.1"
        assert p.stat().st_mode & 0o777 == 0o640
    recs = validate_records(path)  # contiguous seqs across the retained files
    assert recs[-1]["seq"] == 122 and recs[-2]["lineNo"] == 121
    assert oldest_seq(path) == recs[0]["seq"] > 1
    assert [r["seq"] for r in iter_records(path)] == [r["seq"] for r in recs]


def test_a_rotated_file_is_synced_off_the_writing_thread(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A rotation does not wait for the fsync of the file it rotated away (up to maxBytes of
    dirty pages: the event loop would stall); close waits for it, and a failed one is an error
    of the close that names the file."""
    real_fsync = os.fsync
    entered, release, synced = threading.Event(), threading.Event(), []

    def fsync(fd: int) -> None:
        if threading.current_thread().name == "watchrun-fsync":
            synced.append(os.readlink(f"/proc/self/fd/{fd}"))
            entered.set()
            assert release.wait(30), "the test never released the fsync"
        real_fsync(fd)

    monkeypatch.setattr(os, "fsync", fsync)
    sink = JsonlSink(tmp_path / "w.jsonl", "w", max_bytes=400, keep=2, clock=FixedClock())
    for i in range(6):
        sink.write("output", {"text": f"line {i} " + "x" * 60})
    assert sink.rotations >= 1
    assert entered.wait(10), "no fsync of the rotated file was started"
    assert not release.is_set()  # every write returned while that fsync was still blocked
    assert synced[0].startswith(str(tmp_path / "w.jsonl")) and synced[0] != str(sink.path)
    release.set()
    sink.close()
    assert [r["text"][:6] for r in iter_records(tmp_path / "w.jsonl")] == \
        [f"line {i}" for i in range(6)]  # fmt: skip

    def failing(fd: int) -> None:
        if threading.current_thread().name == "watchrun-fsync":
            raise OSError(errno.EIO, os.strerror(errno.EIO))
        real_fsync(fd)

    monkeypatch.setattr(os, "fsync", failing)
    fds = len(os.listdir("/proc/self/fd"))
    sink = JsonlSink(tmp_path / "v.jsonl", "v", max_bytes=400, keep=2, clock=FixedClock())
    for i in range(6):
        sink.write("output", {"text": f"line {i} " + "x" * 60})
    with pytest.raises(SinkWriteError, match=r"EIO: cannot sync .*v\.jsonl"):
        sink.close()
    assert len(os.listdir("/proc/self/fd")) == fds  # the rotated files' descriptors are closed


def test_keep_zero_starts_a_new_file(tmp_path: Path) -> None:
    path = tmp_path / "server.jsonl"
    with open_sink(path, max_bytes=500, keep=0) as sink:
        for n in range(1, 30):
            sink.write("match", match(n))
    assert [p.name for p in tmp_path.iterdir()] == ["server.jsonl"]
    recs = validate_records(path)
    assert recs[-1]["seq"] == 29 and oldest_seq(path) == recs[0]["seq"] > 1


def deleted_fds() -> list[str]:
    out = []
    for fd in os.listdir("/proc/self/fd"):
        with contextlib.suppress(OSError):
            out.append(os.readlink(f"/proc/self/fd/{fd}"))
    return [t for t in out if t.endswith("(deleted)")]


@pytest.mark.parametrize("how", ["rm", "mv"])
def test_externally_removed_file_is_reopened(tmp_path: Path, how: str) -> None:
    path = tmp_path / "server.jsonl"
    with open_sink(path) as sink:
        sink.write("match", match(1))
        if how == "rm":
            path.unlink()
        else:
            (tmp_path / "old").mkdir()
            path.rename(tmp_path / "old" / "server.jsonl")
        sink.write("match", match(2))
        sink.write("match", match(3))
        assert sink.reopens == 1
        assert not [t for t in deleted_fds() if "server.jsonl" in t]
    assert [r["seq"] for r in validate_records(path, contiguous=False)] == [2, 3]
    if how == "mv":
        assert [r["seq"] for r in validate_records(tmp_path / "old" / "server.jsonl")] == [1]


def test_file_and_dir_modes_whatever_the_umask(tmp_path: Path) -> None:
    old = os.umask(0o077)
    try:
        with open_sink(tmp_path / "a.jsonl") as sink:
            sink.write("match", match(1))
        os.umask(0o000)
        with open_sink(tmp_path / "b.jsonl") as sink:
            sink.write("match", match(1))
    finally:
        os.umask(old)
    assert (tmp_path / "a.jsonl").stat().st_mode & 0o777 == 0o640
    assert (tmp_path / "b.jsonl").stat().st_mode & 0o777 == 0o640


def test_two_sinks_on_two_files_in_threads(tmp_path: Path) -> None:
    def run(sid: str) -> None:
        with open_sink(tmp_path / f"{sid}.jsonl", sid, max_bytes=8_000) as sink:
            for b in range(30):
                sink.write_lines([sink.record("match", match(b * 20 + k)) for k in range(20)])

    threads = [threading.Thread(target=run, args=(sid,)) for sid in ("one", "two")]
    for t in threads:
        t.start()
    for t in threads:
        t.join(30)
    for sid in ("one", "two"):
        recs = validate_records(tmp_path / f"{sid}.jsonl")
        assert recs[-1]["seq"] == 600 and recs[-1]["cursor"] == f"{sid}:0000000000000258"


def test_big_batch_is_written_whole_and_in_order(tmp_path: Path) -> None:
    path = tmp_path / "server.jsonl"
    with open_sink(path, max_bytes=64 << 20) as sink:  # 2.4 MB: three write calls
        sink.write_lines([sink.record("match", match(n, pad=2000)) for n in range(1, 1201)])
    assert path.read_bytes().count(b"\n") == 1200
    assert [r["lineNo"] for r in iter_records(path)] == list(range(1, 1201))


def test_closed_sink_refuses_writes(tmp_path: Path) -> None:
    sink = open_sink(tmp_path / "server.jsonl")
    sink.close()
    sink.close()
    with pytest.raises(ValueError, match="closed"):
        sink.write("match", match(1))


def test_unopenable_path_is_a_sink_error(tmp_path: Path) -> None:
    (tmp_path / "file").write_text("")
    with pytest.raises(SinkWriteError) as exc:
        open_sink(tmp_path / "file" / "server.jsonl")
    assert exc.value.errno_name == "ENOTDIR" and "file/server.jsonl" in str(exc.value)


FSIZE_CHILD = r"""
import json, resource, signal, sys
from pathlib import Path
from watchrun.output.sink import JsonlSink, SinkWriteError
class C:
    def now(self): return 0.0
    def monotonic(self): return 0.0
signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
sink = JsonlSink(Path(sys.argv[1]), "server", max_bytes=64 << 20, keep=1, clock=C())
lines = [sink.record("match", {"line": "y" * 8000, "lineNo": n, "offset": n, "run": 1})
         for n in range(1, 301)]
resource.setrlimit(resource.RLIMIT_FSIZE, (int(sys.argv[2]), resource.RLIM_INFINITY))
if sys.argv[3] == "async":  # AsyncWriter retries the unwritten rest; the limit lifts on error
    import asyncio
    from watchrun.output.writer import AsyncWriter
    def lift(msg):
        errors.append(msg)
        resource.setrlimit(resource.RLIMIT_FSIZE, (resource.RLIM_INFINITY,) * 2)
    errors = []
    writer = AsyncWriter(sink, on_error=lift, initial_delay=0.001)
    asyncio.run(writer.write_lines(lines))
    sink.close()
    print(json.dumps({"errors": errors, "failing": writer.failing}))
    raise SystemExit(0)
try:
    sink.write_lines(lines)
    raise SystemExit("no error at the size limit")
except SinkWriteError as exc:
    err, written = exc.errno_name, exc.written
size_after_error = Path(sys.argv[1]).stat().st_size
resource.setrlimit(resource.RLIMIT_FSIZE, (resource.RLIM_INFINITY, resource.RLIM_INFINITY))
sink.write_lines(lines[written:])  # the retry: only what was not written
sink.close()
print(json.dumps({"errno": err, "written": written, "size_after_error": size_after_error,
                  "written_bytes": sum(map(len, lines[:written]))}))
"""


@pytest.mark.parametrize("limit", [5000, 1_500_000])
def test_short_write_at_a_size_limit_is_cut_back_and_retried_exactly_once(
    tmp_path: Path, limit: int
) -> None:
    """RLIMIT_FSIZE makes the kernel write part of a batch, then fail: the partial batch is cut
    back to whole records and the retry writes each record exactly once. 2.4 MB go out in
    1 MiB write calls, so with the higher limit the first call succeeds and the second fails."""
    path = tmp_path / "server.jsonl"
    res = subprocess.run([sys.executable, "-c", FSIZE_CHILD, str(path), str(limit), "sync"],
                         capture_output=True, text=True, timeout=60, check=False)
    assert res.returncode == 0, res.stderr
    out = json.loads(res.stdout)
    assert out["errno"] == "EFBIG"
    assert (out["written"] == 0) == (limit < 1 << 20)
    assert out["size_after_error"] == out["written_bytes"] < limit  # whole records only
    recs = validate_records(path)
    assert [r["lineNo"] for r in recs] == list(range(1, 301))


def test_async_writer_retries_only_the_unwritten_rest(tmp_path: Path) -> None:
    path = tmp_path / "server.jsonl"
    res = subprocess.run([sys.executable, "-c", FSIZE_CHILD, str(path), "1500000", "async"],
                         capture_output=True, text=True, timeout=60, check=False)
    assert res.returncode == 0, res.stderr
    out = json.loads(res.stdout)
    assert len(out["errors"]) == 1 and out["errors"][0].startswith("EFBIG: ")
    assert not out["failing"]
    assert [r["lineNo"] for r in validate_records(path)] == list(range(1, 301))


# -- a full disk: AsyncWriter blocks, retries, and writes everything exactly once --------------


async def wait_until(cond: Callable[[], bool], what: str, timeout: float = 20.0) -> None:
    deadline = time.monotonic() + timeout
    while not cond():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        await asyncio.sleep(0.005)


def test_full_disk_blocks_then_writes_everything_exactly_once(tiny_fs: Path) -> None:
    path = prepare_output_dir(tiny_fs / "out").jsonl("watcher", "server")
    errors: list[str] = []
    recovered: list[bool] = []

    async def main() -> None:
        sink = open_sink(path)
        writer = AsyncWriter(sink, on_error=errors.append, initial_delay=0.005, max_delay=0.02,
                             on_recovered=lambda: recovered.append(True))
        await writer.write_lines([sink.record("match", match(n)) for n in range(1, 21)])
        for episode in (1, 2):
            filler = fill(tiny_fs)
            first = sink.next_seq
            big = writer.write_lines([sink.record("match", match(n, 1000)) for n in range(1, 51)])
            small = writer.write(  # queued behind the big batch: order is kept
                "error", {"code": "output-write-failed", "message": "disk was full"})
            tasks = [asyncio.create_task(big), asyncio.create_task(small)]
            want = 3 * episode
            await wait_until(lambda: writer.retries >= want, "retries")  # noqa: B023 (awaited here)
            # while the disk is full: only whole records, nothing of the failing batch
            seqs = [r["seq"] for r in validate_records(path)]
            assert seqs == list(range(1, first))
            assert len(errors) == episode and "ENOSPC" in errors[-1] and str(path) in errors[-1]
            assert writer.failing
            filler.unlink()
            writer.retry_now()
            await asyncio.wait_for(asyncio.gather(*tasks), 20)
            assert recovered == [True] * episode and not writer.failing
        sink.close()

    asyncio.run(main())
    recs = validate_records(path)
    assert [r["seq"] for r in recs] == list(range(1, 123))  # 20 + 2 * (50 + 1), each once
    assert [r["kind"] for r in recs].count("error") == 2


# -- the output directory ---------------------------------------------------------------------


def test_prepare_output_dir_layout_and_modes(tmp_path: Path) -> None:
    old = os.umask(0o077)
    try:
        layout = prepare_output_dir(tmp_path / "out")
    finally:
        os.umask(old)
    root = tmp_path / "out"
    assert (layout.root, layout.control_socket) == (root, root / "control.sock")
    for d in (root, layout.watchers, layout.agents, layout.state):
        assert d.is_dir() and d.stat().st_mode & 0o777 == 0o750, d
    assert layout.jsonl("watcher", "server") == root / "watchers" / "server.jsonl"
    assert layout.jsonl("agent", "triage.v2") == root / "agents" / "triage.v2.jsonl"
    assert sorted(p.name for p in root.iterdir()) == ["agents", "state", "watchers"]
    layout.watchers.chmod(0o755)  # an existing directory keeps its mode
    assert prepare_output_dir(root) == layout
    assert layout.watchers.stat().st_mode & 0o777 == 0o755


@pytest.mark.parametrize("bad", ["", "../x", "a/b", "x\n", "-x", ".x", "a" * 65, "a b"])
def test_jsonl_refuses_ids_that_are_not_file_names(tmp_path: Path, bad: str) -> None:
    layout = prepare_output_dir(tmp_path / "out")
    with pytest.raises(ValueError, match="invalid watcher id"):
        layout.jsonl("watcher", bad)


@pytest.mark.parametrize(
    ("setup", "target", "errno_name", "names"),
    [
        (lambda t: None, "missing/out", "ENOENT", "missing/out"),
        (lambda t: (t / "f").write_text(""), "f/out", "ENOTDIR", "f/out"),
        (lambda t: (t / "out").write_text(""), "out", "ENOTDIR", "out"),
        (lambda t: ((t / "out").mkdir(), (t / "out" / "state").write_text("")), "out",
         "ENOTDIR", "out/state"),
    ],
)
def test_output_dir_errors_name_the_path_and_errno(
    tmp_path: Path, setup: Callable[[Path], object], target: str, errno_name: str, names: str
) -> None:
    setup(tmp_path)
    with pytest.raises(OutputDirError) as exc:
        prepare_output_dir(tmp_path / target)
    assert exc.value.errno_name == errno_name
    assert str(tmp_path / names) in str(exc.value) and errno_name in str(exc.value)


def test_read_only_file_system(tmp_path: Path) -> None:
    mnt = tmp_path / "ro"
    mount_tmpfs(mnt, "64k")
    try:
        layout = prepare_output_dir(mnt / "out")
        subprocess.run(["mount", "-o", "remount,ro", str(mnt)], check=True, timeout=30)
        for target, where in [(mnt / "new", mnt / "new"), (mnt / "out", layout.root)]:
            with pytest.raises(OutputDirError) as exc:
                prepare_output_dir(target)  # a new dir, and one that exists already
            assert exc.value.errno_name == "EROFS" and "read-only" in str(exc.value)
            assert exc.value.path == where
    finally:
        umount(mnt)


PERM_CHILD = r"""
import sys
from pathlib import Path
from watchrun.output.outdir import OutputDirError, prepare_output_dir
try:
    prepare_output_dir(Path(sys.argv[1]))
except OutputDirError as exc:
    print(exc.errno_name, exc)
"""


@pytest.mark.parametrize("where", ["parent", "root"])
def test_mode_0555_directory_is_refused(where: str) -> None:
    """As root, permission bits do not apply, so the check runs as `nobody` in a child."""
    base = Path(tempfile.mkdtemp(prefix="watchrun-perm-"))
    try:
        base.chmod(0o755)
        locked = base / "locked"
        locked.mkdir(0o555)
        locked.chmod(0o555)
        target = locked / "out" if where == "parent" else locked
        cmd = [sys.executable, "-c", PERM_CHILD, str(target)]
        if os.geteuid() == 0:
            setpriv = shutil.which("setpriv")
            if setpriv is None:
                pytest.skip("running as root without setpriv: mode bits cannot be tested")
            cmd = [setpriv, "--reuid=65534", "--regid=65534", "--clear-groups", *cmd]
        res = subprocess.run(cmd, capture_output=True, text=True, timeout=60, check=False, cwd="/")
        if res.returncode != 0 and os.geteuid() == 0:
            pytest.skip(f"cannot run a child as nobody here: {res.stderr.strip()[-200:]}")
        assert res.returncode == 0, res.stderr
        assert str(target) in res.stdout
        if where == "parent":
            assert res.stdout.startswith("EACCES ") and "permission denied" in res.stdout
        else:  # it exists, and it is root's: another user's directory is refused outright
            assert res.stdout.startswith("EPERM ") and "owned by uid 0 (mode 0555)" in res.stdout
    finally:
        (base / "locked").chmod(0o755)
        shutil.rmtree(base)
