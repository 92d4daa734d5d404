"""`matches` and `logs` (once and `--follow`) read only what the output dir holds for a watcher
id, and say so when they cannot read it: the real CLI against real files. The commands that end
by themselves run in this process (tests/inproc.py: the console script's `main`, its output and
status); the followers a test stops with a signal, and one `stop`, are real processes."""

from __future__ import annotations

import json
import os
import select
import subprocess
from pathlib import Path

import pytest
from inproc import inproc
from liverunner import LiveRunner, cli, wait_for, watchrun_bin, write_config
from test_follow import Lines

from watchrun.output import tailfile


def wr(cwd: Path, *args: str, timeout: float = 60) -> subprocess.CompletedProcess[str]:
    """`watchrun ARGS` as a process of its own (liverunner.cli)."""
    return cli(*args, cwd=cwd, timeout=timeout)


def outside(tmp_path: Path) -> Path:
    """An empty output dir `od`, and a JSONL and a `.tail` beside it in `t2` (outside it)."""
    (tmp_path / "t2").mkdir()
    (tmp_path / "t2" / "evil.jsonl").write_text(json.dumps(
        {"schema": 1, "seq": 1, "kind": "match", "line": "read outside the output dir"}) + "\n")
    (tmp_path / "t2" / "evil.tail").write_bytes(tailfile.render("r", 1, ["TAIL outside"]))
    for sub in ("watchers", "state"):
        (tmp_path / "od" / sub).mkdir(parents=True)
    return tmp_path / "od"


@pytest.mark.parametrize("op", ["matches", "logs"])
@pytest.mark.parametrize("follow", [False, True])
@pytest.mark.parametrize("wid", ["ABS", "../../t2/evil", "", "."])
def test_an_id_that_is_a_path_is_refused_and_nothing_outside_is_read(
        tmp_path: Path, op: str, follow: bool, wid: str) -> None:
    """`matches /abs/evil` and `logs ../../t2/evil` printed the files outside the output dir
    (`-f` went on following them); an id is what the MCP tool takes as one, nothing else."""
    od = outside(tmp_path)
    wid = str(tmp_path / "t2" / "evil") if wid == "ABS" else wid
    flags = ["-f"] if follow else []
    p = inproc(tmp_path, op, wid, *flags, "--output-dir", str(od))
    assert p.returncode == 2 and p.stdout == "", (p.stdout, p.stderr)
    assert f"{wid!r} is not a watcher id (1 to 64 letters, digits" in p.stderr
    j = inproc(tmp_path, op, wid, *flags, "--json", "--output-dir", str(od))
    assert j.returncode == 2
    assert json.loads(j.stdout)["error"]["code"] == "invalid_argument"
    assert "outside" not in j.stdout


def recorded(tmp_path: Path, wid: str = "app") -> Path:
    """An output dir whose `watchers/` has `wid`'s JSONL (so `logs` knows the id)."""
    od = tmp_path / "out"
    for sub in ("watchers", "state"):
        (od / sub).mkdir(parents=True, exist_ok=True)
    (od / "watchers" / f"{wid}.jsonl").write_text("")
    return od


@pytest.mark.parametrize("kind", ["symlink", "fifo", "directory"])
def test_logs_of_a_tail_that_cannot_be_read_fails_as_the_follower_does(
        tmp_path: Path, kind: str) -> None:
    """`logs app` printed nothing and exited 0 (`"lines": []`), as for a watcher that printed
    nothing, where `logs -f` and `matches` fail with exit 3."""
    od = recorded(tmp_path)
    tail = od / "state" / "app.tail"
    if kind == "symlink":
        (tmp_path / "other.tail").write_bytes(tailfile.render("r", 1, ["elsewhere"]))
        tail.symlink_to(tmp_path / "other.tail")
    elif kind == "fifo":
        os.mkfifo(tail)
    else:
        tail.mkdir()
    p = inproc(tmp_path, "logs", "app", "--output-dir", str(od))
    assert p.returncode == 3 and p.stdout == ""
    assert p.stderr.startswith("watchrun: error: cannot read the logs of app: ")
    assert str(tail) in p.stderr
    j = inproc(tmp_path, "logs", "app", "--json", "--output-dir", str(od))
    assert j.returncode == 3 and json.loads(j.stdout)["error"]["code"] == "read_failed"


@pytest.mark.parametrize("dangling", [True, False])
def test_matches_of_a_jsonl_that_is_a_symlink_fails_to_read_it(tmp_path: Path,
                                                               dangling: bool) -> None:
    """Explorer views F2: a dangling link in place of the JSONL was "no status of 'e'"
    (`not_found`, exit 2) while `known` named it; a link to a file, `read_failed` (exit 3).
    Either is a JSONL that cannot be read: `read_failed`, exit 3, as `-f` says it."""
    od = tmp_path / "out"
    (od / "watchers").mkdir(parents=True)
    (tmp_path / "real.jsonl").write_text('{"schema":1,"seq":1,"kind":"match","line":"x"}\n')
    (od / "watchers" / "e.jsonl").symlink_to(tmp_path / ("gone.jsonl" if dangling else
                                                        "real.jsonl"))
    p = inproc(tmp_path, "matches", "e", "--output-dir", str(od))
    assert p.returncode == 3 and p.stdout == "", p.stderr
    assert p.stderr.startswith("watchrun: error: cannot read the matches of e: ")
    j = inproc(tmp_path, "matches", "e", "--json", "--output-dir", str(od))
    assert j.returncode == 3 and json.loads(j.stdout)["error"]["code"] == "read_failed"


def test_logs_of_a_watcher_with_no_tail_yet_is_empty(tmp_path: Path) -> None:
    od = recorded(tmp_path)
    p = inproc(tmp_path, "logs", "app", "--json", "--output-dir", str(od))
    assert p.returncode == 0 and json.loads(p.stdout) == {"id": "app", "lines": []}


def test_logs_of_a_tail_over_64_mib_are_its_last_lines(tmp_path: Path) -> None:
    """`maxLogLines: 20000` of 4000-character lines is an 80 MB snapshot: `logs` read its first
    64 MiB and showed line 16723 as the newest, `logs -f` too."""
    od = recorded(tmp_path)
    n = 17500
    lines = [f"line {i:06d} " + "x" * 4000 for i in range(1, n + 1)]
    (od / "state" / "app.tail").write_bytes(tailfile.render("r1", n, lines))
    assert (od / "state" / "app.tail").stat().st_size > 64 << 20
    p = inproc(tmp_path, "logs", "app", "--lines", "2", "--output-dir", str(od))
    assert p.returncode == 0, p.stderr
    assert [x[:11] for x in p.stdout.splitlines()] == ["line 017499", "line 017500"]
    f = subprocess.Popen([watchrun_bin(), "logs", "app", "-f", "--lines", "1", "--json",
                          "--output-dir", str(od)], cwd=tmp_path, stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, text=True)
    try:
        assert f.stdout is not None
        assert select.select([f.stdout], [], [], 60)[0], "no line from logs -f in 60 s"
        assert json.loads(f.stdout.readline())["line"][:11] == "line 017500"
    finally:
        f.kill()
        f.communicate()


@pytest.mark.parametrize("command", [["list"], ["status"], ["status", "x"], ["stop", "x"],
                                     ["matches", "x"], ["logs", "x", "-f"]])
@pytest.mark.parametrize("kind", ["file", "loop", "under a file"])
def test_an_output_dir_that_is_no_directory_is_said_so(
        tmp_path: Path, command: list[str], kind: str) -> None:
    """`--output-dir watch.yaml` was "the runner did not answer (… Not a directory) … may still
    be carried out", and `list` exited 0 with "no watchers have run"; no runner is there."""
    (tmp_path / "notadir").write_text("hi\n")
    (tmp_path / "loop").symlink_to("loop")
    od = {"file": "notadir", "loop": "loop", "under a file": "notadir/sub"}[kind]
    # (in this process, but one `stop` as a process of its own)
    run = wr if (command, kind) == (["stop", "x"], "file") else inproc
    p = run(tmp_path, *command, "--output-dir", od)
    why = {"file": "ENOTDIR: it exists and is not a directory",
           "loop": "ELOOP: cannot read it: too many levels of symbolic links",
           "under a file": "ENOTDIR: cannot read it: a path component is a file"}[kind]
    assert (p.returncode, p.stdout) == (3, ""), (p.stdout, p.stderr)
    assert p.stderr.startswith(f"watchrun: error: output dir: {od}: {why}"), p.stderr
    assert "did not answer" not in p.stderr
    j = run(tmp_path, *command, "--json", "--output-dir", od)
    assert j.returncode == 3
    assert json.loads(j.stdout)["error"]["code"] == "output_dir"


@pytest.mark.parametrize("kind", ["notadir/sub", "loop"])
def test_a_socket_path_under_a_file_or_a_loop_is_no_runner(tmp_path: Path, kind: str) -> None:
    """ENOTDIR and ELOOP on connect were taken for a runner that did not answer (NoReply)."""
    from watchrun.runtime.client import NotListening, request

    (tmp_path / "notadir").write_text("hi\n")
    (tmp_path / "loop").symlink_to("loop")
    with pytest.raises(NotListening):
        request(tmp_path / kind / "control.sock", {"cmd": "list"}, timeout=5)


@pytest.mark.parametrize("op", ["matches", "logs"])
def test_following_an_id_nobody_knows_is_not_found(tmp_path: Path, op: str) -> None:
    """`matches app-lgo -f` waited until Ctrl-C ("nothing recorded … yet; waiting for it"), and
    `--json` printed nothing, where without `-f` it is `not_found`, exit 2."""
    od = recorded(tmp_path, "app-log")
    p = inproc(tmp_path, op, "app-lgo", "-f", "--output-dir", str(od))
    assert (p.returncode, p.stdout) == (2, "")
    assert p.stderr == f"watchrun: error: no watcher 'app-lgo' in {od} (known: app-log)\n"
    j = inproc(tmp_path, op, "app-lgo", "-f", "--json", "--output-dir", str(od))
    assert j.returncode == 2
    assert json.loads(j.stdout)["error"] == {
        "code": "not_found", "message": f"no watcher 'app-lgo' in {od} (known: app-log)",
        "id": "app-lgo", "known": ["app-log"]}


def test_following_a_configured_id_that_has_not_run_waits_for_it(tmp_path: Path) -> None:
    (tmp_path / "watch.yaml").write_text(
        "output: {dir: out}\nwatchers:\n  - {id: later, command: 'echo ERROR', "
        "pattern: ERROR}\n")
    f = subprocess.Popen([watchrun_bin(), "matches", "later", "-f", "--json", "-c",
                          "watch.yaml"], cwd=tmp_path, stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, text=True)
    try:
        (tmp_path / "out" / "watchers").mkdir(parents=True)
        (tmp_path / "out" / "watchers" / "later.jsonl").write_text(json.dumps(
            {"schema": 1, "seq": 1, "kind": "match", "line": "ERROR at last"}) + "\n")
        assert f.stdout is not None
        assert select.select([f.stdout], [], [], 60)[0], "no line from matches -f in 60 s"
        assert json.loads(f.stdout.readline())["line"] == "ERROR at last"
    finally:
        f.kill()
        f.communicate()


@pytest.mark.parametrize("op", ["matches", "logs"])
def test_a_json_follower_that_cannot_read_ends_with_an_error_line(
        tmp_path: Path, op: str) -> None:
    """`matches app -f --json` with a directory in place of its JSONL printed nothing on
    stdout (only a text line on stderr): a JSON Lines reader did not learn why it ended."""
    od = recorded(tmp_path)
    bad = od / "watchers" / "app.jsonl" if op == "matches" else od / "state" / "app.tail"
    bad.unlink(missing_ok=True)
    bad.mkdir()
    p = inproc(tmp_path, op, "app", "-f", "--json", "--output-dir", str(od))
    assert p.returncode == 3, (p.stdout, p.stderr)
    last = json.loads(p.stdout.splitlines()[-1])
    assert last["error"]["code"] == "read_failed" and last["error"]["id"] == "app"
    assert last["error"]["message"].startswith("cannot follow app: ")
    assert str(bad) in last["error"]["message"]


GARBAGE = (b'garbage \x1b[2J here\n\xff\xfebinary\n[1,2]\n{"kind":"match","line":"no seq"}\n'
           b'{"schema":1,"seq":"9","kind":"match","line":"string seq"}\n')


def three_matches(tmp_path: Path) -> Path:
    od = recorded(tmp_path, "cmd")
    path = od / "watchers" / "cmd.jsonl"
    path.write_text("".join(json.dumps({"schema": 1, "seq": i, "kind": "match",
                                        "line": f"ERROR {i}"}) + "\n" for i in (1, 2, 3)))
    return path


def test_matches_says_how_many_lines_are_not_records(tmp_path: Path) -> None:
    """Five lines that are no record were skipped without a word (`ReadStats.invalid`)."""
    path = three_matches(tmp_path)
    with path.open("ab") as f:
        f.write(GARBAGE)
    for fmt in ([], ["--json"]):
        p = inproc(tmp_path, "matches", "cmd", *fmt, "--output-dir", str(path.parents[1]))
        assert p.returncode == 0
        assert p.stderr == f"watchrun: cmd: 5 lines of {path} are not records (skipped)\n"
    assert [m["line"] for m in json.loads(p.stdout)["matches"]] == ["ERROR 1", "ERROR 2",
                                                                     "ERROR 3"]


def test_matches_follow_says_how_many_lines_are_not_records(tmp_path: Path) -> None:
    path = three_matches(tmp_path)
    lines = path.read_bytes().splitlines(keepends=True)
    path.write_bytes(lines[0] + b"between\n" + b"".join(lines[1:]) + GARBAGE[:30])
    f = subprocess.Popen([watchrun_bin(), "matches", "cmd", "-f", "--output-dir",
                          str(path.parents[1])], cwd=tmp_path, stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, text=True)
    try:
        out = Lines(f)
        assert [x.rsplit("  ", 1)[1] for x in out.take(3)] == ["ERROR 1", "ERROR 2", "ERROR 3"]
        with path.open("ab") as jsonl:
            jsonl.write(GARBAGE[30:])
            jsonl.write(b'{"schema":1,"seq":4,"kind":"match","line":"ERROR 4"}\n')
        assert out.take(1)[0].endswith("ERROR 4")
    finally:
        f.send_signal(2)
        _, err = f.communicate(timeout=30)
    said = err.splitlines()  # (the 2 lines after record 3 are the follower's to count)
    assert said[0] == f"watchrun: cmd: 1 line of {path} is not a record (skipped)"
    counts = [int(x.split()[2]) for x in said[1:]]
    assert sum(counts) == 5, err
    assert all(x.endswith(f"lines of {path} are not records (skipped)") for x in said[1:]), err


def test_matches_and_logs_mark_where_a_line_was_cut(tmp_path: Path) -> None:
    """A line cut at `maxLineBytes` showed in `matches` as if whole (only `--json` said
    `truncated`), and `logs` cut every line to 4096 characters without a mark."""
    (tmp_path / "app.log").write_text("")
    config = write_config(tmp_path, {"limits": {"maxLineBytes": 8192}, "watchers": [
        {"id": "app", "path": "app.log", "pattern": "ERROR"}]})
    r = LiveRunner(config)
    try:
        r.wait_running()
        with (tmp_path / "app.log").open("a") as f:
            f.write("ERROR huge " + "x" * 20000 + " END\nERROR short\n")
        wait_for(lambda: len(r.matches("app")) == 2, "both matches")
        cut = r.matches("app")[0]
        assert cut["truncated"] is True
        p = inproc(tmp_path, "matches", "app", "-c", "watch.yaml")
        huge, short = p.stdout.splitlines()
        assert huge.endswith(f"xxx [cut: {cut['omittedBytes']} more bytes not kept]"), huge[-80:]
        assert short.endswith("  ERROR short")
        tail = r.out / "state" / "app.tail"
        wait_for(lambda: tail.exists() and b"ERROR short" in tail.read_bytes(), "the snapshot")
        logs = inproc(tmp_path, "logs", "app", "-c", "watch.yaml").stdout.splitlines()
        assert logs[0] == "ERROR huge " + "x" * (4096 - 11) + " [cut: longer than 4096 characters]"
        assert logs[1] == "ERROR short"
    finally:
        assert r.stop() == 0


def test_list_shows_an_argv_command_quoted_as_validate_does(tmp_path: Path) -> None:
    """`list` joined an argv with bare spaces (`sh -c echo ERROR a b; sleep 20 x y`): pasted
    into a shell, another command than the watcher's."""
    config = write_config(tmp_path, {"watchers": [
        {"id": "v", "command": ["sh", "-c", "echo ERROR a b; sleep 20", "x y"],
         "pattern": "ERROR"}]})
    quoted = "sh -c 'echo ERROR a b; sleep 20' 'x y'"
    assert quoted in inproc(tmp_path, "validate", "-c", str(config)).stdout
    r = LiveRunner(config)
    try:
        r.wait_running()
        wait_for(lambda: r.matches("v"), "its match")
        row = inproc(tmp_path, "list", "-c", "watch.yaml").stdout.splitlines()[1]  # the runner's
        assert f"  {quoted}  " in row, row
    finally:
        assert r.stop() == 0
    row = inproc(tmp_path, "list", "-c", "watch.yaml").stdout.splitlines()[1]  # the snapshot's
    assert row.startswith("v ") and f"  {quoted}  " in row, row


def test_a_long_label_leaves_a_snapshot_its_readers_take(tmp_path: Path) -> None:
    """A valid config's 1.5 MB label made the runner write a status snapshot over the 1 MiB
    its readers take: once the runner stopped, `list` said `unreadable` and `status big` that
    the runner's own file was "damaged, not a regular file, or a copy of another watcher's"."""
    config = write_config(tmp_path, {"watchers": [
        {"id": "big", "label": "L" * 1_500_000, "command": "echo ERROR; sleep 30",
         "pattern": "ERROR"}]})
    r = LiveRunner(config)
    try:
        r.wait_running()
        wait_for(lambda: r.matches("big"), "its match")
    finally:
        assert r.stop() == 0
    snap = r.out / "state" / "big.status.json"
    assert snap.stat().st_size < 1 << 20
    listed = inproc(tmp_path, "list", "--json", "-c", "watch.yaml")
    (w,) = json.loads(listed.stdout)["watchers"]
    assert w["status"] == "stopped", w.get("lastError")
    assert w["label"] == "L" * 16384 + " [cut: 1483616 more characters]"
    status = inproc(tmp_path, "status", "big", "-c", "watch.yaml")
    assert status.returncode == 0, status.stderr


def test_a_snapshot_over_1_mib_is_said_to_be_too_large(tmp_path: Path) -> None:
    state = tmp_path / "out" / "state"
    state.mkdir(parents=True)
    (state / "big.status.json").write_text(json.dumps({"id": "big", "label": "L" * (1 << 20)}))
    p = inproc(tmp_path, "status", "big", "--output-dir", str(tmp_path / "out"))
    assert p.returncode == 3
    assert "cannot be read: not its status snapshot (it is larger than 1 MiB, which no " \
        "snapshot is)" in p.stderr, p.stderr
    listed = inproc(tmp_path, "list", "--json", "--output-dir", str(tmp_path / "out")).stdout
    (w,) = json.loads(listed)["watchers"]
    assert w["status"] == "unreadable" and "(it is larger than 1 MiB" in w["lastError"]


def test_the_mcp_reads_of_a_file_that_cannot_be_read_are_an_error(tmp_path: Path) -> None:
    """The MCP tool's `matches` of a symlinked JSONL, and (since `logs` fails closed) its `logs`
    of a symlinked `.tail`, said "internal error: UnsafePathError(…)"; now what `watchrun
    matches/logs` say."""
    from watchrun.mcp.reads import ReadError, read_logs, read_matches

    od = recorded(tmp_path)
    (od / "state" / "app.tail").symlink_to(tmp_path / "elsewhere.tail")
    with pytest.raises(ReadError, match=r"^cannot read the logs of app: .*is a symlink"):
        read_logs(od, "app", 10)
    (od / "watchers" / "app.jsonl").unlink()
    (od / "watchers" / "app.jsonl").symlink_to(tmp_path / "elsewhere.jsonl")
    with pytest.raises(ReadError, match=r"^cannot read the matches of app: .*is a symlink"):
        read_matches(od, "app", 10, None)


@pytest.mark.parametrize(("path", "shown"), [
    (["a"], "a:5"), ({"k": "v"}, "k=v:5"), (7, "7:5"), (True, "yes:5"), ("/x.log", "/x.log:5"),
])  # fmt: skip
def test_a_match_line_shows_a_mistyped_path_as_text_never_a_repr(path: object,
                                                                   shown: str) -> None:
    """Explorer views F4: a crafted or damaged record whose `path` is a list printed `['a']`
    (docs/cli.md: never a Python repr)."""
    from watchrun.views.watchers import match_line

    line = match_line({"ts": "2026-12-07T00:00:00.000Z", "path": path, "lineNo": 5, "line": "x"})
    assert line == f"2026-12-07T00:00:00.000Z  {shown}  x"
