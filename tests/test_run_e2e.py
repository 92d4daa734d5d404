"""The real runner end to end: files and commands in, JSONL out, signals, restarts."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
from pathlib import Path

import pytest
from liverunner import LiveRunner, cli, read_records, wait_for, watchrun_bin, write_config
from recordcheck import validate_records

PY = sys.executable


def cfg(tmp_path: Path, watchers: list[dict], **top: object) -> Path:
    return write_config(tmp_path, {"watchers": watchers, **top})


def append(path: Path, text: str) -> None:
    with open(path, "a", encoding="utf-8") as fh:
        fh.write(text)


def test_file_and_command_watchers_write_valid_jsonl_and_stop_cleanly(tmp_path: Path) -> None:
    log = tmp_path / "app.log"
    log.write_text("old ERROR before start\n")
    config = cfg(tmp_path, [
        {"id": "app", "path": "app.log", "pattern": "ERROR", "exclude": ["healthcheck"]},
        {"id": "cmd", "command": "echo boot; echo 'FATAL: disk'; exec sleep 1000",
         "pattern": "fatal"},
    ])
    r = LiveRunner(config)
    try:
        r.wait_log("following")
        wait_for(lambda: r.matches("cmd"), "the command's match")
        append(log, "INFO fine\nERROR one\nhealthcheck ERROR\nERROR two\n")
        wait_for(lambda: len(r.matches("app")) == 2, "two file matches")
    finally:
        rc = r.stop()
    assert rc == 0, r.stderr()
    assert r.left == []
    app = validate_records(r.out / "watchers" / "app.jsonl")
    matches = [x for x in app if x["kind"] == "match"]
    assert [m["line"] for m in matches] == ["ERROR one", "ERROR two"]  # not the old line
    assert matches[0]["lineNo"] == 3 and matches[0]["inode"] == log.stat().st_ino
    assert matches[0]["offset"] == len("old ERROR before start\nINFO fine\n")
    assert app[-1]["kind"] == "stop"
    cmd = validate_records(r.out / "watchers" / "cmd.jsonl")
    assert [m["line"] for m in cmd if m["kind"] == "match"] == ["FATAL: disk"]
    kinds = [x["kind"] for x in cmd]
    assert kinds[0] == "start" and "exit" in kinds and kinds[-1] == "stop"
    assert (os.stat(r.out / "watchers" / "app.jsonl").st_mode & 0o777) == 0o640


def test_restart_resumes_from_checkpoint_exactly_once(tmp_path: Path) -> None:
    log = tmp_path / "app.log"
    log.write_text("")
    config = cfg(tmp_path, [{"id": "app", "path": "app.log", "pattern": "ERROR"}])
    r = LiveRunner(config)
    try:
        r.wait_log("following")
        append(log, "ERROR 1\nERROR 2\n")
        wait_for(lambda: len(r.matches("app")) == 2, "two matches")
    finally:
        assert r.stop() == 0
    append(log, "ERROR 3 while stopped\npartial ERROR")
    r2 = LiveRunner(config)
    try:
        wait_for(lambda: len(r2.matches("app")) == 3, "the line written while stopped")
        append(log, " completed\n")
        wait_for(lambda: len(r2.matches("app")) == 4, "the completed partial line")
    finally:
        assert r2.stop() == 0
    recs = validate_records(tmp_path / ".watchrun" / "watchers" / "app.jsonl")
    lines = [m["line"] for m in recs if m["kind"] == "match"]
    assert lines == ["ERROR 1", "ERROR 2", "ERROR 3 while stopped", "partial ERROR completed"]
    seqs = [x["seq"] for x in recs]
    assert seqs == list(range(1, len(seqs) + 1))  # seq continues across the restart


def test_a_clean_stop_leaves_nothing_to_look_through_at_the_next_start(tmp_path: Path) -> None:
    """After a clean stop the checkpoint holds the seq of the `stop` record: the next start
    reads no records to find what a crash could have left (none), however long the history."""
    log = tmp_path / "app.log"
    log.write_text("")
    config = cfg(tmp_path, [{"id": "app", "path": "app.log", "pattern": "ERROR"}])
    out = tmp_path / ".watchrun"
    for n in range(3):  # one run with a match, then restarts with nothing new to read
        r = LiveRunner(config)
        try:
            r.wait_log("following")
            if n == 0:
                append(log, "ERROR 0\n")
            wait_for(lambda r=r: len(r.matches("app")) == 1, "the match")
        finally:
            assert r.stop() == 0
        checkpoint = json.loads((out / "state" / "app.checkpoint.json").read_text())
        last = read_records(out / "watchers" / "app.jsonl")[-1]
        assert (last["kind"], last["seq"]) == ("stop", checkpoint["seq"])


def test_sigkill_mid_stream_loses_and_duplicates_nothing(tmp_path: Path) -> None:
    log = tmp_path / "app.log"
    log.write_text("")
    config = cfg(tmp_path, [{"id": "app", "path": "app.log", "pattern": "ERROR"}])
    written = 0
    for round_ in range(4):
        r = LiveRunner(config)
        try:
            r.wait_log("following")
            # a burst, then kill -9 while the runner is still busy with it
            with open(log, "a") as fh:
                for _ in range(3000):
                    written += 1
                    fh.write(f"ERROR line {written} {'x' * (written % 50)}\n")
            seen = len(r.matches("app"))
            wait_for(lambda s=seen, r=r, w=written: len(r.matches("app")) > s
                     or len(r.matches("app")) == w, "some progress")
            r.send(signal.SIGKILL)
            r.proc.wait(timeout=10)
        finally:
            r.close()
        assert r.left == [], f"round {round_}"
    r = LiveRunner(config)
    try:
        r.wait_log("running")
        wait_for(lambda: len(r.matches("app")) >= written, f"all {written} matches")
    finally:
        assert r.stop() == 0
    recs = validate_records(tmp_path / ".watchrun" / "watchers" / "app.jsonl")
    numbers = [int(m["line"].split()[2]) for m in recs if m["kind"] == "match"]
    assert numbers == list(range(1, written + 1))


def test_ctrl_c_stops_every_group_checkpoints_and_exits_0(tmp_path: Path) -> None:
    """README "Running it": Ctrl-C (SIGINT to the terminal's foreground process group, here
    the runner's own group) stops every process group, checkpoints, and exits 0."""
    (tmp_path / "app.log").write_text("")
    config = cfg(tmp_path, [
        {"id": "app", "path": "app.log", "pattern": "ERROR"},
        {"id": "cmd", "command": "echo up; exec sleep 1000", "pattern": "up"},
    ])
    r = LiveRunner(config)
    try:
        wait_for(lambda: r.matches("cmd"), "the command to be up")
        r.wait_log("following")
        append(tmp_path / "app.log", "ERROR one\n")
        wait_for(lambda: r.matches("app"), "the file's match")
        os.killpg(r.pid, signal.SIGINT)
        rc = r.proc.wait(timeout=30)
    finally:
        r.close()
    assert rc == 0, r.stderr()
    assert r.left == []
    exit_rec = [x for x in r.records("cmd") if x["kind"] == "exit"][-1]
    assert exit_rec["signal"] == "SIGTERM" and r.records("cmd")[-1]["kind"] == "stop"
    last = r.records("app")[-1]
    assert (last["kind"], last["reason"]) == ("stop", "shutdown")
    checkpoint = json.loads((r.out / "state" / "app.checkpoint.json").read_text())
    assert checkpoint["generations"][-1]["offset"] == len("ERROR one\n")


def test_second_signal_kills_a_command_that_ignores_sigterm(tmp_path: Path) -> None:
    pids = tmp_path / "pids"
    # `$$$$` in a config is the shell's `$$` (the config's own `$$` is a literal `$`)
    script = (f"trap '' TERM; echo $$$$ >> {pids}; sleep 1000 & echo $! >> {pids}; "
              f"setsid sleep 1000 & echo $! >> {pids}; echo ready; wait")
    config = cfg(tmp_path, [{"id": "stubborn", "command": script, "pattern": "ready"}],
                 limits={"stopTimeout": "60s"})
    r = LiveRunner(config)
    try:
        wait_for(lambda: r.matches("stubborn"), "the command to be ready")
        wait_for(lambda: pids.exists() and len(pids.read_text().split()) == 3, "three pids")
        r.send(signal.SIGTERM)
        r.wait_log("stopping")
        r.send(signal.SIGTERM)  # the second signal: no 60 s grace
        rc = r.proc.wait(timeout=15)
    finally:
        r.close()
    assert rc == 0, r.stderr()
    assert r.left == []
    for pid in map(int, pids.read_text().split()):
        assert not Path(f"/proc/{pid}").exists() or "Z" in Path(f"/proc/{pid}/stat").read_text()


def test_a_second_signal_kills_what_a_stop_request_under_way_waits_for(tmp_path: Path) -> None:
    """`watchrun stop` of a command that ignores SIGTERM (60 s of grace) is under way when the
    runner gets SIGTERM twice: the runner's stop did not wait for that stop, so its second
    signal killed nothing and the runner exited only when the 60 s were over. Now the second
    signal kills it at once, and the `stop` request gets its answer and its `stop` record."""
    termed = tmp_path / "termed"
    config = cfg(tmp_path, [{"id": "deaf", "pattern": "up", "command":
                             f"trap 'touch {termed}' TERM; echo up; while :; do sleep 0.2; done"}],
                 limits={"stopTimeout": "60s"})
    r = LiveRunner(config)
    replies: list[dict[str, object]] = []
    try:
        wait_for(lambda: r.matches("deaf"), "the command to be up")
        asking = threading.Thread(target=lambda: replies.append(
            r.control({"cmd": "stop", "id": "deaf"})))
        asking.start()
        wait_for(termed.exists, "the command to have the stop request's SIGTERM")
        r.send(signal.SIGTERM)
        r.wait_log("stopping")
        r.send(signal.SIGTERM)
        assert r.proc.wait(timeout=15) == 0, r.stderr()
        asking.join(timeout=15)
    finally:
        r.close()
    assert "second signal: killing what remains now" in r.stderr()
    assert replies and replies[0]["ok"] is True, replies
    stops = [x for x in r.records("deaf") if x["kind"] == "stop"]
    assert [x["reason"] for x in stops] == ["requested"]
    assert r.left == []


def test_the_exit_record_says_the_second_signals_sigkill(tmp_path: Path) -> None:
    """A command (one process group) that ignores SIGTERM, killed by a second stop signal: its
    `exit` record said `signals: ["SIGTERM"]`, `stragglers: 0` (the SIGKILL went unrecorded).
    The second signal is sent once the command has had the first SIGTERM (test_procs covers a
    second signal that comes before it)."""
    termed = tmp_path / "termed"
    config = cfg(tmp_path, [{"id": "stubborn", "pattern": "up", "command":
                             f"trap 'touch {termed}' TERM; echo up; while :; do sleep 0.2; done"}],
                 limits={"stopTimeout": "30s"})
    r = LiveRunner(config)
    try:
        wait_for(lambda: r.matches("stubborn"), "the command to be up")
        r.send(signal.SIGTERM)
        wait_for(termed.exists, "the command to have its SIGTERM")
        r.send(signal.SIGTERM)
        assert r.proc.wait(timeout=15) == 0, r.stderr()
    finally:
        r.close()
    (exit_rec,) = [x for x in r.records("stubborn") if x["kind"] == "exit"]
    assert (exit_rec["signal"], exit_rec["signals"]) == ("SIGKILL", ["SIGTERM", "SIGKILL"])
    assert exit_rec["stragglers"] >= 1


def test_output_dir_unusable_fails_before_starting_anything(tmp_path: Path) -> None:
    (tmp_path / "blocker").write_text("a file, not a folder")
    marker = tmp_path / "ran"
    config = cfg(tmp_path, [{"id": "c", "command": f"touch {marker}", "pattern": "x"}],
                 output={"dir": "blocker/out"})
    p = cli("-c", config)
    assert p.returncode == 3
    assert "blocker" in p.stderr and "Traceback" not in p.stderr
    assert not marker.exists()


def test_a_second_runner_on_the_same_output_dir_is_refused(tmp_path: Path) -> None:
    config = cfg(tmp_path, [{"id": "c", "command": "sleep 1000", "pattern": "x"}])
    r = LiveRunner(config)
    try:
        r.wait_log("running")
        p = cli("-c", config)
        assert p.returncode == 3
        assert "another runner" in p.stderr
    finally:
        assert r.stop() == 0


def test_a_second_runner_is_refused_when_the_live_ones_socket_was_removed(
        tmp_path: Path) -> None:
    """A live runner whose control.sock was removed (an operator's `rm`, a tmp cleaner) was
    taken for none: a second runner started on the same output dir, ran the same commands and
    appended to the same JSONL. The output dir's lock is held for the runner's life."""
    marker = tmp_path / "runs"
    command = f"echo run >> {marker}; echo up; exec sleep 1000"
    config = cfg(tmp_path, [{"id": "c", "command": command, "pattern": "up"}])
    r = LiveRunner(config)
    try:
        wait_for(lambda: r.matches("c"), "the first runner's command")
        (r.out / "control.sock").unlink()
        second = subprocess.Popen([watchrun_bin(), "-c", str(config)], stderr=subprocess.PIPE,
                                  stdout=subprocess.DEVNULL, text=True, cwd=tmp_path,
                                  start_new_session=True)
        try:
            rc = second.wait(timeout=10)
        finally:
            if second.poll() is None:
                os.killpg(second.pid, signal.SIGKILL)
                second.wait()
        err = second.stderr.read() if second.stderr else ""
        assert rc == 3, err
        assert f"another runner is live on {r.out} (pid {r.pid}" in err and "Traceback" not in err
        assert marker.read_text() == "run\n"
        assert len(r.matches("c")) == 1
    finally:
        assert r.stop() == 0


def test_invalid_config_starts_nothing(tmp_path: Path) -> None:
    marker = tmp_path / "ran"
    config = cfg(tmp_path, [{"id": "c", "command": f"touch {marker}", "pattern": "(",
                             "patern": "x"}])
    p = cli("-c", config)
    assert p.returncode == 2
    assert "watchers[0].pattern" in p.stderr and "did you mean" in p.stderr
    assert not marker.exists() and not (tmp_path / ".watchrun").exists()


@pytest.mark.parametrize("mode", ["inotify", "poll"])
def test_rotation_through_the_real_runner(tmp_path: Path, mode: str) -> None:
    log = tmp_path / "app.log"
    log.write_text("")
    config = cfg(tmp_path, [{"id": "app", "path": "app.log", "pattern": "ERROR"}],
                 limits={"pollMs": 20})
    env = {"WATCHRUN_FORCE_POLL": "1"} if mode == "poll" else {}
    r = LiveRunner(config, env=env)
    try:
        r.wait_log("following")
        append(log, "ERROR a\n")
        wait_for(lambda: len(r.matches("app")) == 1, "first match")
        os.rename(log, tmp_path / "app.log.1")
        append(tmp_path / "app.log.1", "ERROR late to the old file\n")
        append(log, "ERROR b in the new file\n")
        wait_for(lambda: len(r.matches("app")) == 3, "matches across rename rotation")
        (tmp_path / "app.log").write_text("")  # copytruncate-style
        append(log, "ERROR c after truncate\n")
        wait_for(lambda: len(r.matches("app")) == 4, "the match after truncation")
    finally:
        assert r.stop() == 0
    recs = read_records(tmp_path / ".watchrun" / "watchers" / "app.jsonl")
    assert sorted(m["line"] for m in recs if m["kind"] == "match") == sorted(
        ["ERROR a", "ERROR late to the old file", "ERROR b in the new file",
         "ERROR c after truncate"])
    assert {x["reason"] for x in recs if x["kind"] == "rotate"} >= {"rename", "truncate"}


def test_inotify_watches_exhausted_fall_back_to_polling(tmp_path: Path) -> None:
    """In a user namespace of its own the runner gets only a few inotify watches (the limit is
    per user namespace, so the machine is not affected): watchers past the limit poll."""
    probe = subprocess.run(["unshare", "--user", "--map-root-user", "sh", "-c",
                            "echo 1 > /proc/sys/user/max_inotify_watches"],
                           capture_output=True, text=True)
    if probe.returncode != 0:
        pytest.skip(f"user namespaces are not available here: {probe.stderr.strip()}")
    watchers = []
    for i in range(4):
        (tmp_path / f"d{i}").mkdir()
        (tmp_path / f"d{i}" / "app.log").write_text("")
        watchers.append({"id": f"w{i}", "path": f"d{i}/app.log", "pattern": "ERROR"})
    config = cfg(tmp_path, watchers, limits={"pollMs": 20})
    script = ('echo 3 > /proc/sys/user/max_inotify_watches && exec "$0" run -c "$1"')
    err = open(tmp_path / "err", "wb")  # noqa: SIM115
    proc = subprocess.Popen(["unshare", "--user", "--map-root-user", "sh", "-c", script,
                             watchrun_bin(), str(config)], stderr=err, stdout=subprocess.DEVNULL,
                            start_new_session=True)
    try:
        wait_for(lambda: "running" in (tmp_path / "err").read_text(), "the runner to start")
        out = tmp_path / ".watchrun" / "watchers"
        wait_for(lambda: all(read_records(out / f"w{i}.jsonl") for i in range(4)),
                 "every watcher's start record (its position at the end of the file)")
        for i in range(4):
            append(tmp_path / f"d{i}" / "app.log", f"ERROR in {i}\n")
        wait_for(lambda: all(any(r["kind"] == "match" for r in read_records(out / f"w{i}.jsonl"))
                             for i in range(4)), "a match from every watcher")
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=30) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        err.close()
    log = (tmp_path / "err").read_text()
    assert "watchrun: warning: cannot watch" in log, log  # the fallback is said, not silent


def test_sigkill_right_after_a_rotation_loses_and_duplicates_nothing(tmp_path: Path) -> None:
    """The checkpoint may lag the records by up to a second; a rotation inside that second and
    then a SIGKILL must still give every line exactly once (per-inode high-water marks)."""
    log = tmp_path / "app.log"
    log.write_text("")
    config = cfg(tmp_path, [{"id": "app", "path": "app.log", "pattern": "ERROR"}])
    written = 0

    def burst(path: Path, n: int) -> None:
        nonlocal written
        with open(path, "a") as fh:
            for _ in range(n):
                written += 1
                fh.write(f"ERROR line {written}\n")

    for round_ in range(3):
        r = LiveRunner(config)
        try:
            r.wait_log("following")
            burst(log, 2000)
            wait_for(lambda r=r, w=written: len(r.matches("app")) >= w, "the first burst")
            os.rename(log, tmp_path / f"app.log.{round_}")
            burst(log, 500)
            wait_for(lambda r=r, w=written: len(r.matches("app")) >= w, "the rotated burst")
            r.send(signal.SIGKILL)  # well inside the checkpoint's one-second lag
            r.proc.wait(timeout=10)
        finally:
            r.close()
    r = LiveRunner(config)
    try:
        r.wait_log("running")
        burst(log, 1)
        wait_for(lambda: len(r.matches("app")) >= written, f"all {written} matches")
    finally:
        assert r.stop() == 0
    recs = validate_records(tmp_path / ".watchrun" / "watchers" / "app.jsonl")
    numbers = [int(m["line"].split()[2]) for m in recs if m["kind"] == "match"]
    assert sorted(numbers) == list(range(1, written + 1))  # each exactly once
