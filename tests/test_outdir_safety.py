"""Nothing under the output dir is reached through a symlink (SPEC §10, issue #12 item 1).

A local user who could plant `watchers/x.jsonl -> /etc/passwd` must not get a root runner to
chmod, cut or append to the target. Each place a file lives (a live JSONL, a rotated segment,
a checkpoint and its temporary file, a status snapshot and its temporary file, the `.tail`, the
directories themselves) gets a real symlink, a hard link or a FIFO; the target (a
`passwd`-like file in a tmp dir, with a last line without its newline) must come out unchanged.
"""

from __future__ import annotations

import json
import os
import shutil
import stat
import subprocess
import sys
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from inproc import inproc
from liverunner import (
    LiveRunner,
    as_nobody,
    cli,
    read_records,
    wait_for,
    write_config,
)

from watchrun.output import safefs
from watchrun.output.backward import last_records
from watchrun.output.outdir import OutputDirError, prepare_output_dir
from watchrun.output.records import iter_records
from watchrun.output.sink import JsonlSink, SinkWriteError
from watchrun.sources.checkpoint_doc import FileState
from watchrun.sources.checkpoints import CheckpointStore
from watchrun.sources.identity import Checkpoint

PASSWD = b"root:x:0:0:root:/root:/bin/bash\nuser:x:1000:1000::/home/user:/bin/sh"
"""A target whose last line has no newline: the old sink "repaired" (cut) it."""


class Clock:
    def now(self) -> float:
        return 1_700_000_000.0

    def monotonic(self) -> float:
        return 0.0


@pytest.fixture
def target(tmp_path: Path) -> Iterator[Path]:
    """An /etc/passwd stand-in outside the output dir; checked unchanged after each test."""
    etc = tmp_path / "etc"
    etc.mkdir()
    path = etc / "passwd"
    path.write_bytes(PASSWD)
    path.chmod(0o644)
    before = path.stat()
    yield path
    after = path.stat()
    assert path.read_bytes() == PASSWD, "the target was written through"
    assert stat.S_IMODE(after.st_mode) == 0o644, "the target was chmodded"
    assert after.st_mtime_ns == before.st_mtime_ns


def sink(path: Path, max_bytes: int = 1 << 20, keep: int = 3) -> JsonlSink:
    return JsonlSink(path, "x", max_bytes=max_bytes, keep=keep, clock=Clock())


def rec(n: int) -> dict[str, object]:
    return {"line": f"line {n}", "lineNo": n, "offset": n, "run": 1}


# -- the live JSONL file ----------------------------------------------------------------------


def test_symlinked_live_jsonl_is_refused_not_written(tmp_path: Path, target: Path) -> None:
    layout = prepare_output_dir(tmp_path / "out")
    live = layout.jsonl("watcher", "x")
    live.symlink_to(target)
    with pytest.raises(SinkWriteError) as exc:
        sink(live)
    assert exc.value.errno_name == "ELOOP"
    assert str(live) in str(exc.value) and f"symlink (to {target})" in str(exc.value)
    assert live.is_symlink()


def test_dangling_symlink_is_refused_not_created_through(tmp_path: Path) -> None:
    layout = prepare_output_dir(tmp_path / "out")
    live = layout.jsonl("watcher", "x")
    planted = tmp_path / "etc" / "cron.d-evil"
    (tmp_path / "etc").mkdir()
    live.symlink_to(planted)
    with pytest.raises(SinkWriteError, match="symlink"):
        sink(live)
    assert not planted.exists()


def test_hard_link_to_another_file_is_refused(tmp_path: Path, target: Path) -> None:
    layout = prepare_output_dir(tmp_path / "out")
    live = layout.jsonl("watcher", "x")
    os.link(target, live)
    with pytest.raises(SinkWriteError) as exc:
        sink(live)
    assert exc.value.errno_name == "EPERM" and "2 hard links" in str(exc.value)


def test_fifo_in_place_of_the_jsonl_is_refused_without_hanging(tmp_path: Path) -> None:
    layout = prepare_output_dir(tmp_path / "out")
    live = layout.jsonl("watcher", "x")
    os.mkfifo(live)
    with pytest.raises(SinkWriteError, match="not a regular file"):
        sink(live)


def test_file_of_another_user_is_refused(tmp_path: Path) -> None:
    if os.geteuid() != 0:
        pytest.skip("needs root to chown")
    layout = prepare_output_dir(tmp_path / "out")
    live = layout.jsonl("watcher", "x")
    live.write_bytes(b"")
    os.chown(live, 65534, 65534)
    with pytest.raises(SinkWriteError, match="owned by uid 65534"):
        sink(live)


def test_symlink_planted_while_running_is_not_written_through(tmp_path: Path,
                                                              target: Path) -> None:
    layout = prepare_output_dir(tmp_path / "out")
    live = layout.jsonl("watcher", "x")
    s = sink(live)
    s.write("match", rec(1))
    live.unlink()
    live.symlink_to(target)
    with pytest.raises(SinkWriteError, match="symlink"):
        s.write("match", rec(2))
    s.close()


# -- rotated segments -------------------------------------------------------------------------


def test_symlinked_rotated_segment_is_refused_by_readers_and_the_sink(
    tmp_path: Path, target: Path
) -> None:
    layout = prepare_output_dir(tmp_path / "out")
    live = layout.jsonl("watcher", "x")
    with sink(live) as s:
        s.write("match", rec(1))
    Path(f"{live}.1").symlink_to(target)
    with pytest.raises(safefs.UnsafePathError, match="symlink"):
        list(iter_records(live))
    with pytest.raises(safefs.UnsafePathError, match="symlink"):
        last_records(live, 5)
    with pytest.raises(SinkWriteError) as refused:
        sink(live)
    # the message names the link, not the live file (a tester's F7: it said `x.jsonl: is a
    # symlink`, a regular file, and the operator could not find the link from it)
    assert str(refused.value) == (
        f"ELOOP: cannot read the last record of {live}: its older file {live}.1: is a symlink (to "
        f"{target}); symlinks under the output dir are never followed")


def test_fifo_in_place_of_a_rotated_segment_fails_the_sink_without_hanging(
    tmp_path: Path,
) -> None:
    """The sink looks at its rotated segments without opening them: a FIFO at `.1` (which an
    open for reading would wait on) fails its start at once, as a reader refuses it."""
    layout = prepare_output_dir(tmp_path / "out")
    live = layout.jsonl("watcher", "x")
    with sink(live) as s:
        s.write("match", rec(1))
    os.mkfifo(f"{live}.1")
    with pytest.raises(SinkWriteError, match=f"its older file {live}.1: .*not a regular file"):
        sink(live)


def test_rotation_moves_planted_links_and_never_writes_through_them(
    tmp_path: Path, target: Path
) -> None:
    layout = prepare_output_dir(tmp_path / "out")
    live = layout.jsonl("watcher", "x")
    s = sink(live, max_bytes=300, keep=2)
    s.write("match", rec(1))
    for n in (1, 2, 3):  # planted after the sink opened
        Path(f"{live}.{n}").symlink_to(target)
    for n in range(2, 12):
        s.write("match", rec(n))
    s.close()
    assert not any(Path(f"{live}.{n}").is_symlink() for n in (1, 2, 3))
    assert [r["seq"] for r in iter_records(live)][-1] == 11


# -- directories ------------------------------------------------------------------------------


@pytest.mark.parametrize("sub", ["watchers", "agents", "state"])
def test_symlinked_subdirectory_is_refused(tmp_path: Path, sub: str) -> None:
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir(mode=0o750)
    root = tmp_path / "out"
    root.mkdir(mode=0o750)
    (root / sub).symlink_to(elsewhere, target_is_directory=True)
    with pytest.raises(OutputDirError) as exc:
        prepare_output_dir(root)
    assert exc.value.errno_name == "ELOOP" and exc.value.path == root / sub
    assert f"symlink (to {elsewhere})" in str(exc.value)
    assert list(elsewhere.iterdir()) == []


def test_symlinked_watchers_dir_is_refused_by_the_sink_too(tmp_path: Path) -> None:
    layout = prepare_output_dir(tmp_path / "out")
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    layout.watchers.rmdir()
    layout.watchers.symlink_to(elsewhere, target_is_directory=True)
    with pytest.raises(SinkWriteError, match="symlink"):
        sink(layout.jsonl("watcher", "x"))
    assert list(elsewhere.iterdir()) == []


@pytest.mark.parametrize("made_by", ["anyone (a directory like /tmp)", "another user"])
def test_a_symlinked_output_dir_others_could_have_made_is_refused(tmp_path: Path,
                                                                   made_by: str) -> None:
    shared = tmp_path / "shared"
    shared.mkdir()
    real = tmp_path / "real"
    real.mkdir(mode=0o750)
    (shared / "out").symlink_to(real, target_is_directory=True)
    if made_by.startswith("anyone"):
        shared.chmod(0o1777)
    elif os.geteuid() == 0:
        os.lchown(shared / "out", 1234, 1234)
    else:
        pytest.skip("only root can give a link to another user")
    with pytest.raises(OutputDirError) as exc:
        prepare_output_dir(shared / "out")
    assert exc.value.errno_name == "ELOOP" and "give the real directory" in str(exc.value)
    assert list(real.iterdir()) == []


def test_systemds_state_directory_link_is_the_output_dir_it_leads_to(tmp_path: Path) -> None:
    """`DynamicUser=yes` with `StateDirectory=watchrun` (contrib/systemd) makes /var/lib/watchrun
    a link to private/watchrun (systemd.exec(5)): refused as a symlink, the shipped unit could
    never start (Restart=on-failure, every 2 s). A link only root or the runner could have made
    (theirs, in a directory of theirs no one else may write to) is followed, once, at start."""
    var_lib = tmp_path / "var" / "lib"
    (var_lib / "private" / "watchrun").mkdir(parents=True)
    var_lib.chmod(0o755)
    (var_lib / "watchrun").symlink_to("private/watchrun", target_is_directory=True)
    layout = prepare_output_dir(var_lib / "watchrun")
    assert layout.root == var_lib / "private" / "watchrun"
    assert sorted(p.name for p in layout.root.iterdir()) == ["agents", "state", "watchers"]


def test_own_group_writable_dirs_are_fixed_and_said(tmp_path: Path) -> None:
    root = tmp_path / "out"
    for d in (root, root / "watchers"):
        d.mkdir()
        d.chmod(0o775)
    layout = prepare_output_dir(root)
    assert stat.S_IMODE(root.stat().st_mode) == 0o755
    assert stat.S_IMODE(layout.watchers.stat().st_mode) == 0o755
    assert stat.S_IMODE(layout.state.stat().st_mode) == 0o750  # created now
    assert layout.fixed == (
        f"output dir: {root}: was writable by group or others (mode 0775); now 0755",
        f"output dir: {root / 'watchers'}: was writable by group or others (mode 0775); now 0755",
    )


@pytest.mark.parametrize(("mode", "shared"), [(0o777, ""), (0o1777, "a shared directory, ")])
@pytest.mark.parametrize("which", ["root", "watchers"])
def test_a_dir_others_may_write_is_refused_and_left_as_it_is(
        tmp_path: Path, mode: int, shared: str, which: str) -> None:
    """`--output-dir /tmp` as root made /tmp 1755 (its owner is root): a directory others may
    write to (world-writable, sticky or not) is refused, its mode untouched."""
    root = tmp_path / "out"
    root.mkdir()
    d = root if which == "root" else root / "watchers"
    d.mkdir(exist_ok=True)
    d.chmod(mode)
    with pytest.raises(OutputDirError) as err:
        prepare_output_dir(root)
    assert stat.S_IMODE(d.stat().st_mode) == mode
    assert str(err.value) == (
        f"output dir: {d}: EPERM: it is writable by others ({shared}mode {mode:04o}): anyone "
        "could plant links in it; choose a directory of the runner's own as output.dir (a new "
        f"one inside it will do), or remove the write bit: chmod o-w {d}")


@pytest.mark.parametrize("which", ["root", "state"])
def test_dir_of_another_user_is_refused_naming_path_owner_and_mode(
    tmp_path: Path, which: str
) -> None:
    if os.geteuid() != 0:
        pytest.skip("needs root to chown")
    root = tmp_path / "out"
    prepare_output_dir(root)
    victim = root if which == "root" else root / "state"
    victim.chmod(0o777)
    os.chown(victim, 65534, 65534)
    with pytest.raises(OutputDirError) as exc:
        prepare_output_dir(root)
    assert exc.value.path == victim and exc.value.errno_name == "EPERM"
    assert "owned by uid 65534 (mode 0777), not by the runner (uid 0)" in str(exc.value)
    assert stat.S_IMODE(victim.stat().st_mode) == 0o777  # someone else's: not changed


# -- state/: checkpoints and status snapshots -------------------------------------------------


def checkpoint() -> FileState:
    return FileState((Checkpoint(dev=1, inode=2, fingerprint="0" * 64, offset=3, line_no=4,
                                 path="/x", fingerprint_len=0, seq=7),), seq=7)


@pytest.mark.parametrize("name", ["x.checkpoint.json", "x.checkpoint.json.tmp"])
def test_symlinked_checkpoint_files_are_never_followed(
    tmp_path: Path, target: Path, name: str
) -> None:
    layout = prepare_output_dir(tmp_path / "out")
    (layout.state / name).symlink_to(target)
    store = CheckpointStore(layout.state)
    assert store.load("x") is None
    if name == "x.checkpoint.json":
        (problem,) = [p.message for p in store.taken("x")]
        assert "symlink (to" in problem
    store.save("x", checkpoint())
    path = layout.state / "x.checkpoint.json"
    assert not path.is_symlink() and store.load("x") == checkpoint()
    assert not (layout.state / "x.checkpoint.json.tmp").exists()


@pytest.mark.parametrize("name", ["x.status.json", ".x.status.json.tmp"])
def test_status_snapshot_replaces_a_planted_symlink(tmp_path: Path, target: Path,
                                                    name: str) -> None:
    layout = prepare_output_dir(tmp_path / "out")
    (layout.state / name).symlink_to(target)
    safefs.write_atomic(layout.state / "x.status.json", b'{"id": "x"}\n')
    assert (layout.state / "x.status.json").read_bytes() == b'{"id": "x"}\n'
    assert not (layout.state / "x.status.json").is_symlink()


def test_readers_do_not_follow_symlinked_state_files(tmp_path: Path, target: Path) -> None:
    from watchrun.views import watchers as views

    layout = prepare_output_dir(tmp_path / "out")
    (layout.state / "x.tail").symlink_to(target)
    (layout.state / "x.status.json").symlink_to(target)
    with pytest.raises(safefs.UnsafePathError):  # refused, never read as "no lines"
        views.logs(layout.root, "x", 10)
    assert views.load_statuses(layout.root) == []


def test_a_directory_in_place_of_a_status_snapshot_is_said_not_silently_never_written(
        tmp_path: Path) -> None:
    """Explorer security 1b: a directory left at `state/app.status.json` and `state/app.tail`
    (an earlier run's user, a restore): the runner ran on without writing either and without a
    word, and `logs app` said `[Errno 1] is not a regular file: '…'`. Now each is a warning
    (once), and the reader names the file and the problem."""
    log = tmp_path / "app.log"
    log.write_text("")
    state = tmp_path / ".watchrun" / "state"
    (state / "app.status.json").mkdir(parents=True)
    (state / "app.tail").mkdir()
    for d in (tmp_path / ".watchrun", state):
        d.chmod(0o750)
    config = write_config(tmp_path, {"watchers": [
        {"id": "app", "path": str(log), "pattern": "ERROR"}]})
    r = LiveRunner(config)
    try:
        r.wait_log("warning: cannot write <dir>/.watchrun/state/app.status.json: Is a directory;")
        r.wait_log("warning: cannot write <dir>/.watchrun/state/app.tail: Is a directory;")
        with log.open("a") as f:
            f.write("ERROR 1\n")
        wait_for(lambda: "ERROR 1" in r.stderr(), "the match")
        assert r.stop() == 0
    finally:
        r.close()
    assert r.stderr().count("cannot write") == 2  # once each, not at every snapshot
    shown = cli("logs", "app", "-c", str(config), cwd=tmp_path)
    assert shown.returncode == 3
    assert f"cannot read the logs of app: {state / 'app.tail'} is not a regular file" in \
        shown.stderr and "[Errno" not in shown.stderr


# -- end to end: the watcher fails closed, the others run, the gate says so -------------------


def test_run_once_refuses_a_symlinked_watcher_stream_before_anything_runs(
    tmp_path: Path, target: Path
) -> None:
    """Start-up is transactional (SPEC §10): every sink opens before any source starts, so a
    symlink in place of one watcher's JSONL stops the start, undoes it and exits 3; nothing
    was written through the link and no command ran."""
    out = tmp_path / "out"
    layout = prepare_output_dir(out)
    layout.jsonl("watcher", "evil").symlink_to(target)
    before = target.read_bytes()
    ran = tmp_path / "ran"
    cfg = write_config(tmp_path, {
        "output": {"dir": str(out)},
        "watchers": [
            {"id": "evil", "command": "echo ERROR one", "pattern": "ERROR",
             "gate": {"maxMatches": 0}},
            {"id": "fine", "command": f"touch {ran}; echo ERROR two", "pattern": "ERROR"},
        ],
    })
    res = cli("run", "--once", "-c", cfg, timeout=60)
    assert res.returncode == 3, res.stderr
    assert f"{layout.jsonl('watcher', 'evil')}" in res.stderr and "symlink" in res.stderr
    assert "evil" in res.stdout and "ERROR" in res.stdout  # its gate's verdict: could not run
    assert not ran.exists()
    assert target.read_bytes() == before
    assert "Traceback" not in res.stderr


# -- as a user other than root ----------------------------------------------------------------

NOBODY_CHILD = r"""
import os, sys
from pathlib import Path
from watchrun.output.outdir import OutputDirError, prepare_output_dir
from watchrun.output.sink import JsonlSink, SinkWriteError
class C:
    def now(self): return 0.0
    def monotonic(self): return 0.0
layout = prepare_output_dir(Path(sys.argv[1]))
for name in ("link", "rootfile", "fine"):
    try:
        JsonlSink(layout.jsonl("watcher", name), name, max_bytes=1 << 20, keep=1,
                  clock=C()).write("match", {"line": "x", "lineNo": 1, "offset": 0, "run": 1})
        print(name, "ok")
    except SinkWriteError as exc:
        print(name, exc.errno_name, exc)
"""


def test_as_nobody_symlinks_and_foreign_files_are_refused() -> None:
    """The checks hold for an unprivileged runner too (a child run as uid 65534)."""
    nobody = as_nobody()
    base = Path(tempfile.mkdtemp(prefix="watchrun-nobody-"))
    try:
        base.chmod(0o755)
        target = base / "nobody-owned-target"
        target.write_bytes(PASSWD)
        os.chown(target, 65534, 65534)
        out = base / "out"
        for d in (out, out / "watchers", out / "agents", out / "state"):
            d.mkdir(mode=0o750)
            os.chown(d, 65534, 65534)
        (out / "watchers" / "link.jsonl").symlink_to(target)
        rootfile = out / "watchers" / "rootfile.jsonl"  # root's file in nobody's dir, that
        rootfile.write_bytes(b"")  # nobody could write: refused as someone else's file
        rootfile.chmod(0o666)
        cmd = [*nobody, sys.executable, "-c", NOBODY_CHILD, str(out)]
        res = subprocess.run(cmd, capture_output=True, text=True, timeout=60, check=False,
                             cwd="/")
        if res.returncode != 0 and "ModuleNotFoundError" in res.stderr:
            pytest.skip(f"the package is not importable as nobody: {res.stderr[-200:]}")
        assert res.returncode == 0, res.stderr
        lines = dict(line.split(" ", 1) for line in res.stdout.splitlines())
        assert lines["link"].startswith("ELOOP") and "symlink" in lines["link"]
        assert lines["rootfile"].startswith("EPERM") and "owned by uid 0" in lines["rootfile"]
        assert lines["fine"] == "ok"
        assert target.read_bytes() == PASSWD
    finally:
        shutil.rmtree(base)


def test_symlinked_agent_stream_stops_the_run_with_a_clear_error(tmp_path: Path,
                                                                 target: Path) -> None:
    out = tmp_path / "out"
    layout = prepare_output_dir(out)
    layout.jsonl("agent", "triage").symlink_to(target)
    cfg = write_config(tmp_path, {
        "output": {"dir": str(out)},
        "agents": [{"name": "triage", "provider": "mock"}],
        "watchers": [{"id": "app", "command": "echo ERROR", "pattern": "ERROR",
                      "wake": "triage"}],
    })
    res = cli("run", "--once", "-c", cfg, timeout=60)
    assert res.returncode == 3, res.stderr
    assert "could not start: agents" in res.stderr
    assert str(layout.jsonl("agent", "triage")) in res.stderr
    assert "Traceback" not in res.stderr


def test_run_warns_when_it_fixes_a_group_writable_output_dir(tmp_path: Path) -> None:
    out = tmp_path / "out"
    out.mkdir()
    out.chmod(0o775)
    cfg = write_config(tmp_path, {"output": {"dir": str(out)},
                                  "watchers": [{"id": "a", "command": "true", "pattern": "x"}]})
    res = cli("run", "--once", "-c", cfg, timeout=60)
    assert res.returncode == 0, res.stderr
    assert f"{out}: was writable by group or others (mode 0775); now 0755" in res.stderr
    assert stat.S_IMODE(out.stat().st_mode) == 0o755


def test_run_refuses_a_shared_output_dir_before_starting_anything(tmp_path: Path) -> None:
    out, marker = tmp_path / "shared", tmp_path / "ran"
    out.mkdir()
    out.chmod(0o1777)
    cfg = write_config(tmp_path, {"watchers": [{"id": "a", "command": f"touch {marker}",
                                                "pattern": "x"}]})
    res = cli("run", "--once", "-c", cfg, "--output-dir", out, timeout=60)
    assert res.returncode == 3, res.stderr
    assert f"{out}: EPERM: it is writable by others (a shared directory, mode 1777)" in res.stderr
    assert "Traceback" not in res.stderr
    assert stat.S_IMODE(out.stat().st_mode) == 0o1777
    assert not marker.exists() and list(out.iterdir()) == []


def test_a_kernel_file_system_is_refused_for_what_it_is() -> None:
    """`--output-dir /proc/self` said "the parent directory does not exist" of a directory that
    exists: procfs answers ENOENT to creating a file in it."""
    with pytest.raises(OutputDirError) as err:
        prepare_output_dir(Path("/proc/self"))
    assert err.value.errno_name == "ENOENT"
    assert "parent directory" not in str(err.value)
    assert str(err.value).endswith(
        "cannot write a file in it: its file system does not let files be created (a kernel "
        "file system such as /proc or /sys); choose another output.dir")


def test_an_output_dir_removed_while_running_is_not_made_again(tmp_path: Path) -> None:
    """`rm -rf .watchrun` under a running runner: the checkpoint's save made the output dir and
    `state/` again (mode 0755 from the umask, a tree no `prepare_output_dir` checked), while
    the records had nowhere to go. Now nothing is made again, and what was lost is said."""
    log = tmp_path / "app.log"
    log.write_text("")
    r = LiveRunner(write_config(tmp_path, {"watchers": [
        {"id": "app", "path": str(log), "pattern": "ERROR"}]}))
    try:
        r.wait_running()
        with log.open("a") as f:
            f.write("ERROR 1\n")
        wait_for(lambda: "ERROR 1" in r.stderr(), "the first match")
        shutil.rmtree(r.out)
        with log.open("a") as f:
            f.write("ERROR 2\n")
        r.wait_log("cannot write records: ENOENT")
        rc = r.stop()
    finally:
        r.close()
    assert not r.out.exists()
    assert rc != 0, r.stderr()  # (records were given up: never a clean exit)
    err = r.stderr()
    assert (f"cannot save checkpoint: {r.out / 'state' / 'app.checkpoint.json'}: No such file "
            "or directory") in err
    assert "records given up" in err and "SinkWriteError(" not in err


def test_a_runner_whose_output_dir_was_replaced_never_writes_into_the_new_one(
        tmp_path: Path) -> None:
    """The output dir removed under a runner, and a second runner started on the same path
    (the lock went with the dir): the first reopened `watchers/app.jsonl` by path in the new
    dir, so every match was there twice, its seqs interleaved with the second runner's, and its
    checkpoint went into the second's `state/` (found by an operations explorer). It writes
    only into the directories it started with: nothing, once they are gone."""
    log = tmp_path / "app.log"
    log.write_text("")
    config = write_config(tmp_path, {"watchers": [
        {"id": "app", "path": str(log), "pattern": "ERROR"}]})
    first = LiveRunner(config)
    second: LiveRunner | None = None
    try:
        first.wait_running()
        shutil.rmtree(first.out)
        with log.open("a") as f:
            f.write("ERROR 1\n")
        first.wait_log("cannot write records")
        second = LiveRunner(config)
        second.wait_running()
        with log.open("a") as f:
            f.write("ERROR 2\n")
        wait_for(lambda: [m["line"] for m in second.matches("app")] == ["ERROR 2"],
                 "the second runner's match")
        snapshot = second.out / "state" / "app.status.json"
        wait_for(lambda: snapshot.exists() and json.loads(snapshot.read_text())["matchCount"]
                 == 1, "the second runner's snapshot of its match")
        rc = first.stop()  # (its last snapshots: written where it started, or nowhere)
        assert json.loads(snapshot.read_text())["runnerPid"] == second.pid
        assert "ERROR 1" not in (second.out / "state" / "app.tail").read_text()
        assert second.stop() == 0, second.stderr()
    finally:
        first.close()
        if second is not None:
            second.close()
    recs = read_records(second.out / "watchers" / "app.jsonl")
    assert [r["seq"] for r in recs] == list(range(1, len(recs) + 1))  # one writer
    assert [r["line"] for r in recs if r["kind"] == "match"] == ["ERROR 2"]
    assert rc != 0
    assert "is not the directory this runner started with" in first.stderr()


def test_a_directory_made_again_never_passes_for_the_one_a_writer_started_with(
        tmp_path: Path) -> None:
    """A writer knows its directory by (device, inode). ext4 hands a removed directory's inode
    number to the next directory made, at once: the state/ a second runner made passed for the
    first runner's, which wrote its last snapshot there (seen in a CI run of the test above).
    The directory a writer keeps is held open, so its number is not handed on."""
    state = tmp_path / "out" / "state"
    state.mkdir(parents=True)
    identity = safefs.dir_identity(state)
    shutil.rmtree(tmp_path / "out")
    made = []
    for i in range(20):  # (without the pin, ext4 gave the first one the old number)
        again = tmp_path / f"again{i}"
        again.mkdir()
        made.append(again)
    state.mkdir(parents=True)
    assert identity is not None
    assert identity.key not in [(st.st_dev, st.st_ino) for st in map(os.stat, [*made, state])]
    with pytest.raises(safefs.UnsafePathError, match="is not the directory this runner started"):
        safefs.same_dir(state, identity)


def test_a_watcher_led_to_its_own_records_by_a_link_refuses_them(tmp_path: Path) -> None:
    """A tester's F12: `path: link.log`, a symlink to the watcher's own JSONL, passed the own-files
    check (it compares paths as written) and the watcher recorded each match again without end,
    ~45 MB/s. A file watcher now refuses any file the runner is writing, whatever link led to it;
    the other watchers go on."""
    (tmp_path / "link.log").symlink_to(".watchrun/watchers/a.jsonl")
    (tmp_path / "b.log").write_text("")
    config = write_config(tmp_path, {"watchers": [
        {"id": "a", "path": "link.log", "pattern": "schema"},
        {"id": "b", "path": "b.log", "pattern": "ERROR"}]})
    r = LiveRunner(config)
    try:
        r.wait_running()
        with (tmp_path / "b.log").open("a") as f:
            f.write("ERROR one\n")
        wait_for(lambda: r.matches("b"), "b's match")
        [a] = [w for w in r.control({"cmd": "list"})["watchers"] if w["id"] == "a"]
        assert a["status"] == "error", a
        assert a["lastError"] == (
            f"cannot read {tmp_path}/link.log: it is {tmp_path}/.watchrun/watchers/a.jsonl, the "
            "runner's own records (through a link): a watcher of its records would record each "
            "match again, without end")
        assert r.matches("a") == []
    finally:
        r.stop()
    once = cli("run", "--once", "-c", config, cwd=tmp_path)
    assert once.returncode == 3 and "the runner's own records (through a link)" in once.stdout, \
        once



@pytest.mark.parametrize(("name", "what"), [
    ("watchers-app.unwritten", "watcher app: ELOOP: cannot read the note of records given up "),
    ("agents-triage.unwritten", "agents: ELOOP: cannot read the note of records given up "),
    ("agents-triage.lock", "agents: ")])
def test_symlinked_notes_and_agent_lock_are_never_followed(tmp_path: Path, target: Path,
                                                           name: str, what: str) -> None:
    """The note of records given up on a full disk (`state/<kind>-<id>.unwritten`) and an
    agent's lock (`state/agents-<name>.lock`): planted links to a file the runner may write as
    root are not written through (the security.md audit: no test had them), and the run stops,
    naming them. (A planted note was refused in silence, and the seqs a real one kept could
    then be used again.)"""
    out = tmp_path / "out"
    layout = prepare_output_dir(out)
    (layout.state / name).symlink_to(target)
    cfg = write_config(tmp_path, {
        "output": {"dir": str(out)},
        "agents": [{"name": "triage", "provider": "mock"}],
        "watchers": [{"id": "app", "command": "echo ERROR", "pattern": "ERROR",
                      "wake": "triage"}]})
    res = cli("run", "--once", "-c", cfg, timeout=60)
    assert "Traceback" not in res.stderr
    assert res.returncode == 3, res.stderr
    assert (f"could not start: {what}{layout.state / name}: is a symlink (to {target}); "
            "symlinks under the output dir are never followed") in res.stderr
    assert (layout.state / name).is_symlink()


PLANTED: dict[str, Callable[[Path, Path], None]] = {
    "a directory": lambda note, _: note.mkdir(),
    "a FIFO": lambda note, _: os.mkfifo(note),
    "a hard link": lambda note, target: os.link(target, note),
    "another user's file": lambda note, _: (note.touch(0o640), os.chown(note, 65534, 65534)),
}


@pytest.mark.parametrize("planted", sorted(PLANTED))
def test_a_planted_note_of_any_kind_stops_the_stream(tmp_path: Path, target: Path,
                                                     planted: str) -> None:
    """What is at a stream's note is no note of the runner's: the note it replaced may have
    kept seqs, as with a planted symlink (above). A directory or a FIFO there was taken for "no
    note possible": the stream started and could give its seqs out again."""
    out = tmp_path / "out"
    note = prepare_output_dir(out).state / "watchers-app.unwritten"
    PLANTED[planted](note, target)
    cfg = write_config(tmp_path, {"output": {"dir": str(out)}, "watchers": [
        {"id": "app", "command": "echo ERROR", "pattern": "ERROR"}]})
    res = cli("run", "--once", "-c", cfg, timeout=60)
    assert "Traceback" not in res.stderr
    assert res.returncode == 3, res.stderr
    assert (f"could not start: watcher app: EPERM: cannot read the note of records given up "
            f"{note}: ") in res.stderr
    assert not (out / "watchers" / "app.jsonl").exists() or \
        b'"kind":"match"' not in (out / "watchers" / "app.jsonl").read_bytes()


def test_fifos_in_place_of_state_files_and_streams_hang_no_command(tmp_path: Path) -> None:
    """A FIFO at `processes.json`, a checkpoint, a `.tail`, a status snapshot, an agent's and a
    watcher's JSONL: opening one to read blocks until someone writes, so a command that opened
    it would hang for good (the security.md audit: only the live JSONL and a rotated segment
    had a test). Each command ends, says what it refused, and no Traceback."""
    out = tmp_path / "out"
    layout = prepare_output_dir(out)
    for path in (layout.state / "processes.json", layout.state / "app.checkpoint.json",
                 layout.state / "app.tail", layout.state / "app.status.json",
                 layout.jsonl("agent", "triage"), layout.jsonl("watcher", "app")):
        os.mkfifo(path)
    log = tmp_path / "app.log"
    log.write_text("ERROR one\n")
    cfg = write_config(tmp_path, {"output": {"dir": str(out)},
                                  "agents": [{"name": "triage", "provider": "mock"}],
                                  "watchers": [{"id": "app", "path": str(log),
                                                "pattern": "ERROR"}]})
    said = {("list",): (0, "its status snapshot"),
            ("status", "app"): (3, f"{layout.state / 'app.status.json'}) cannot be read"),
            ("logs", "app"): (3, f"{layout.state / 'app.tail'} is not a regular file"),
            ("matches", "app"): (3, f"{layout.jsonl('watcher', 'app')} is not a regular file"),
            ("agent", "list"): (3, f"{layout.jsonl('agent', 'triage')}: is not a regular file"),
            ("run", "--once"): (3, f"cannot open {layout.jsonl('agent', 'triage')}: is not a "
                                   "regular file")}
    for args, (code, text) in said.items():  # (the views in this process: a hang would
        # still fail the test, at its timeout; the run is a process: it starts an agent)
        res = (cli(*args, "-c", cfg) if args[0] == "run"
               else inproc(tmp_path, *args, "-c", str(cfg)))
        assert "Traceback" not in res.stderr, args
        assert res.returncode == code and text in res.stdout + res.stderr, (args, res.stderr)
    layout.jsonl("agent", "triage").unlink()  # the run then goes past the streams' opening
    layout.jsonl("watcher", "app").unlink()
    (layout.state / "processes.json").unlink()  # (replaced by the run above)
    os.mkfifo(layout.state / "processes.json")
    res = cli("run", "--once", "-c", cfg)
    assert res.returncode == 3, res.stderr  # where the last run ended is lost: not a pass
    assert "app.checkpoint.json is corrupt: it is a named pipe (FIFO)" in res.stderr
    assert all(stat.S_ISREG((layout.state / name).stat().st_mode) for name in (
        "processes.json", "app.checkpoint.json", "app.tail", "app.status.json"))
