"""The CLI contract (SPEC §7, docs/cli.md) through the real `watchrun` console script: `-c`
anywhere on the line, ./watch.yaml found when `-c` is absent, `--json` on every command as one
object with camelCase keys, and the exit status of every class of error.

What runs as a process (`wr`): every `run`, `agent run` and bare `watchrun`; each reading
command once and `-c` in each place (`status`, `agent send`, layered `-c`); ./watch.yaml found
under each default name (`validate`); `run` and `validate` without a config; one command of each
class of error, text and `--json` (`REAL`); and what depends on the real streams (no colour on
a pipe, escaped output). The rest (the same `--json` shape asked again of each command, the
other commands of a class of error, views after a `run --once`) runs in this test process
through tests/inproc.py: the same `main()` the console script calls, with its stdout, stderr
and exit status (tests/test_inproc.py), without the ~0.1 s of CPU each new interpreter costs."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
from pathlib import Path
from typing import Any

import pytest
from inproc import inproc
from liverunner import watchrun_bin, write_config

from watchrun.cli.main import parse

CONFIG: dict[str, Any] = {
    "watchers": [
        {"id": "build", "command": "echo ERROR boom; echo fine", "pattern": "ERROR",
         "gate": {"maxMatches": 0}},
        {"id": "app", "path": "app.log", "pattern": "ERROR", "exclude": ["healthcheck"]},
    ],
    "agents": [{"name": "triage", "provider": "mock", "prompt": "{matches}"}],
}
CAMEL = re.compile(r"[a-z][A-Za-z0-9]*")
SEED_SHAPED = {("agent", "watch"), ("agent", "transcript")}
"""The views seeds 000 and 004 define, with their snake_case keys (docs/cli.md)."""


def wr(cwd: Path, *args: str, env: dict[str, str] | None = None,
       ) -> subprocess.CompletedProcess[str]:
    return subprocess.run([watchrun_bin(), *args], capture_output=True, text=True, cwd=cwd,
                          timeout=120, check=False, env=env)


def keys_not_camel(doc: Any, where: str = "") -> list[str]:
    """Field names in `doc` that are not camelCase (the values of `redacted` are counts by
    redaction kind: data, not field names)."""
    bad = []
    if isinstance(doc, dict):
        for k, v in doc.items():
            if not CAMEL.fullmatch(k):
                bad.append(f"{where}.{k}")
            if k != "redacted":
                bad += keys_not_camel(v, f"{where}.{k}")
    elif isinstance(doc, list):
        for i, v in enumerate(doc):
            bad += keys_not_camel(v, f"{where}[{i}]")
    return bad


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A config that has run once: JSONL, status snapshots and one agent turn."""
    cwd = tmp_path_factory.mktemp("site")
    write_config(cwd, CONFIG)
    (cwd / "app.log").write_text("ERROR one\nfine\n")
    p = wr(cwd, "run", "--once")
    assert p.returncode == 1, p.stderr  # the build gate is crossed
    p = wr(cwd, "agent", "run", "triage", "--prompt", "hello")
    assert p.returncode == 0, p.stderr
    return cwd


# (command words, positionals after the options) for every §7 command that reads a config;
# `-c watch.yaml` is put before the command, between, and after the positionals.
READERS = [
    (["validate"], []), (["config"], []), (["list"], []), (["status"], ["app"]),
    (["matches"], ["app"]), (["logs"], ["app"]), (["agent", "list"], []),
    (["agent", "watch"], ["triage"]), (["agent", "transcript"], ["triage"]),
]


def placements(cmd: list[str], pos: list[str]) -> list[list[str]]:
    c = ["-c", "watch.yaml"]
    found = [[*c, *cmd, *pos], [*cmd, *c, *pos], [*cmd, *pos, *c]]
    if len(cmd) == 2:  # (`agent list`: also between the command and its action)
        found.append([cmd[0], *c, cmd[1], *pos])
    return found


@pytest.mark.parametrize(("cmd", "pos"), READERS, ids=[" ".join(c) for c, _ in READERS])
def test_c_anywhere_and_json_is_one_camel_case_object(site: Path, cmd: list[str],
                                                       pos: list[str]) -> None:
    """The first placement through the console script, the others in-process (the parse is
    `main`'s); all three of `status` (a command with a positional) by the script, and all of
    `validate` and `config` in-process (they show the mock agent's command, `sys.executable`:
    the script's interpreter is not pytest's; both run by the script in
    test_c_repeats_and_layers_in_order and tests/test_cli_config.py)."""
    outs = []
    for i, argv in enumerate(placements(cmd, pos)):
        real = cmd == ["status"] or (i == 0 and cmd[0] not in ("validate", "config"))
        p = (wr if real else inproc)(site, *argv, "--json")
        assert p.returncode == 0, (argv, p.stdout, p.stderr)
        doc = json.loads(p.stdout)
        assert isinstance(doc, dict) and "error" not in doc
        if tuple(cmd) not in SEED_SHAPED:
            assert keys_not_camel(doc) == []
        outs.append(doc)
    if tuple(cmd) not in SEED_SHAPED:  # (the seed views carry the time they were made)
        assert all(out == outs[0] for out in outs)


def test_the_issues_two_command_lines(site: Path) -> None:
    """`status -c FILE ID` and `agent send -c FILE NAME TEXT` parse (nargs="+" ate them)."""
    p = wr(site, "status", "-c", "watch.yaml", "app")
    assert p.returncode == 0 and "app" in p.stdout
    p = wr(site, "agent", "send", "-c", "watch.yaml", "triage", "hi")
    assert p.returncode == 3  # parsed; no runner is live (the live case: test_cli_live)
    assert "no live runner" in p.stderr and "arguments are required" not in p.stderr


def test_c_repeats_and_layers_in_order(site: Path) -> None:
    (site / "extra.yaml").write_text("watchers:\n  - {id: extra, path: x.log, pattern: E}\n")
    for argv in (["-c", "watch.yaml", "validate", "-c", "extra.yaml"],
                 ["validate", "-c", "watch.yaml", "--json", "-c", "extra.yaml"]):
        doc = json.loads(wr(site, *argv, "--json").stdout)
        assert [w["id"] for w in doc["watchers"]] == ["build", "app", "extra"]
        assert doc["files"] == ["watch.yaml", "extra.yaml"]
    doc = json.loads(wr(site, "validate", "extra.yaml", "-c", "watch.yaml", "--json").stdout)
    assert doc["files"] == ["watch.yaml", "extra.yaml"]  # positional files after the -c ones


@pytest.mark.parametrize("shown", ["status", "list"])
def test_status_and_list_read_like_prose(site: Path, shown: str) -> None:
    p = wr(site, shown, *(["app"] if shown == "status" else []))
    assert p.returncode == 0
    for repr_ in ("['", "True", "False", "None", "{}"):
        assert repr_ not in p.stdout, p.stdout
    assert "\x1b[" not in p.stdout  # not a terminal: no colour
    if shown == "status":
        fields = dict(re.split(r" {2,}", line, maxsplit=1) for line in p.stdout.splitlines())
        assert fields["exclude"] == "healthcheck" and fields["live"] == "no"
        assert fields["status"] == "stopped" and fields["redacted"] == "-"
        assert re.fullmatch(r"\S+Z \((just now|\d+s ago|\d+m ago)\)", fields["startedAt"])
    else:
        header, *rows = (re.split(r" {2,}", x) for x in p.stdout.splitlines())
        assert header[:10] == ["ID", "STATUS", "ORIGIN", "KIND", "PID", "UPTIME", "RESTARTS",
                               "MATCHES", "LINES", "LAST MATCH"]
        assert re.fullmatch(r"just now|\d+s ago|\d+m ago", rows[0][9])


# -- --json on the commands that read no config, and on the live-runner ones without a runner
@pytest.mark.parametrize(("argv", "status", "keys"), [
    (["schema", "record"], 0, {"$schema"}),
    (["init", "new/watch.yaml"], 0, {"path", "format"}),
    (["completion", "bash"], 0, {"shell", "script"}),
    (["stop", "build"], 0, {"id", "stopped", "wasRunning", "message"}),
    (["agent", "stop", "triage"], 0, {"name", "stopped", "message"}),
    (["clear"], 3, {"error"}),
    (["agent", "send", "triage", "hi"], 3, {"error"}),
], ids=lambda v: " ".join(v) if isinstance(v, list) else None)
def test_every_other_command_json(site: Path, tmp_path: Path, argv: list[str], status: int,
                                  keys: set[str]) -> None:
    cwd = tmp_path if argv[0] in ("init", "schema", "completion") else site
    p = inproc(cwd, *argv, "--json")
    assert p.returncode == status, p.stderr
    doc = json.loads(p.stdout)
    assert isinstance(doc, dict) and keys <= set(doc)
    if "error" in doc:
        assert doc["error"]["code"] == "no_runner" and doc["error"]["message"]
    elif argv[0] != "schema":
        assert keys_not_camel(doc) == []


def test_run_once_and_agent_run_json(site: Path) -> None:
    p = wr(site, "run", "--once", "--json")
    assert p.returncode == 1  # the build gate is crossed
    doc = json.loads(p.stdout)  # nothing echoed: stdout is the one object
    assert (doc["passed"], doc["gates"], doc["crossed"]) == (False, 1, 1)
    (v,) = doc["verdicts"]
    assert (v["id"], v["status"], v["matches"]) == ("build", "fail", 1)
    assert keys_not_camel(doc) == []
    assert all(json.loads(line)["level"] for line in p.stderr.splitlines())  # JSON log lines
    p = wr(site, "agent", "run", "triage", "--prompt", "again", "--json")
    doc = json.loads(p.stdout)
    assert p.returncode == 0 and doc["status"] == "done" and doc["reply"]
    assert doc["failure"] is None and doc["usage"]["output"] > 0
    assert keys_not_camel(doc) == []


# -- the default config ---------------------------------------------------------------------
@pytest.mark.parametrize("name", ["watch.yaml", "watch.yml", "watch.json", "watch.toml"])
def test_each_default_name_is_found_and_named(tmp_path: Path, name: str) -> None:
    conf = {"watchers": [{"id": "w", "path": "w.log", "pattern": "E"}]}
    if name.endswith(".json"):
        (tmp_path / name).write_text(json.dumps(conf))
    elif name.endswith(".toml"):
        (tmp_path / name).write_text('[[watchers]]\nid = "w"\npath = "w.log"\npattern = "E"\n')
    else:
        write_config(tmp_path, conf, name)
    (tmp_path / "w.log").write_text("")
    for argv in (["validate"], ["config", "--json"], ["list"], ["agent", "list"]):
        p = (wr if argv == ["validate"] else inproc)(tmp_path, *argv)
        assert p.returncode == 0, (argv, p.stderr)
        assert f"watchrun: using {name} (no -c given" in p.stderr
    p = wr(tmp_path, "run", "--once")
    assert p.returncode == 0 and f"using {name}" in p.stderr


def test_the_first_name_wins_and_the_others_are_named(tmp_path: Path) -> None:
    write_config(tmp_path, {"watchers": [{"id": "a", "path": "a.log", "pattern": "E"}]},
                 "watch.yml")
    (tmp_path / "watch.json").write_text('{"watchers": []}')
    p = inproc(tmp_path, "validate", "--json")
    assert [w["id"] for w in json.loads(p.stdout)["watchers"]] == ["a"]
    assert "using watch.yml" in p.stderr and "not read: watch.json" in p.stderr


@pytest.mark.parametrize("argv", [["run"], ["validate"], ["config"], ["list"], ["status", "x"],
                                  ["agent", "list"], ["agent", "run", "triage"],
                                  ["stop", "x"]])
def test_no_config_found_is_exit_2_and_says_what_was_looked_for(tmp_path: Path,
                                                                argv: list[str]) -> None:
    via = wr if argv[0] in ("run", "validate") else inproc  # (`run` starts a runner)
    p = via(tmp_path, *argv)
    assert (p.returncode, p.stdout) == (2, "")
    assert "no config: none of watch.yaml, watch.yml, watch.json, watch.toml" in p.stderr
    doc = json.loads(via(tmp_path, *argv, "--json").stdout)
    assert doc["error"]["code"] == "config_not_found"
    assert doc["error"]["looked"] == ["watch.yaml", "watch.yml", "watch.json", "watch.toml"]


def test_output_dir_alone_needs_no_config(site: Path, tmp_path: Path) -> None:
    p = inproc(tmp_path, "list", "--output-dir", str(site / ".watchrun"), "--json")
    assert p.returncode == 0 and "using" not in p.stderr
    assert {w["id"] for w in json.loads(p.stdout)["watchers"]} == {"build", "app"}


@pytest.mark.parametrize("argv", [
    ["-c", "watch.yaml", "schema"], ["schema", "-c", "watch.yaml"],
    ["schema", "record", "--config=watch.yaml"], ["init", "new.yaml", "-c", "watch.yaml"],
    ["completion", "bash", "--output-dir", "out"], ["--output-dir", "out", "init"],
], ids=" ".join)
def test_commands_without_a_config_refuse_c(tmp_path: Path, argv: list[str]) -> None:
    p = (wr if argv == ["-c", "watch.yaml", "schema"] else inproc)(tmp_path, *argv)
    assert p.returncode == 2, p.stderr
    command = next(w for w in argv if w in ("schema", "init", "completion"))
    assert f"`watchrun {command}` reads no config: drop -c/--output-dir" in p.stderr
    assert not (tmp_path / "new.yaml").exists() and p.stdout == ""


@pytest.mark.parametrize("argv", [
    ["run", "--once", "--output-dir", ""], ["--output-dir", "", "run", "--once"],
    ["list", "--output-dir", ""], ["validate", "-c", ""], ["init", ""],
    ["run", "--once", "--junit", ""],
], ids=repr)
def test_an_empty_path_is_refused_never_taken_for_here(site: Path, argv: list[str]) -> None:
    """`--output-dir "$OUT"` with `OUT` unset wrote agents/, watchers/, state/ and control.lock
    into the current directory (and `init ""` wrote ./watch.yaml); `output.dir: ""` in a
    config was refused all along."""
    before = sorted(p.name for p in site.iterdir())
    p = (wr if "run" in argv else inproc)(site, *argv)
    assert p.returncode == 2, p.stderr
    assert "must not be empty (an unset variable?)" in p.stderr and "Traceback" not in p.stderr
    assert sorted(p.name for p in site.iterdir()) == before


@pytest.mark.parametrize("argv", [
    ["config", "--json", "--format", "toml"], ["validate", "--json", "--format=text"],
    ["--json", "validate", "--format", "text"], ["config", "--format", "yaml", "--json"],
], ids=" ".join)
def test_json_and_another_format_are_refused_not_one_taken(site: Path, argv: list[str]) -> None:
    """`config --json --format toml` printed TOML (the last given won, whatever --json said:
    "exactly one JSON object")."""
    p = inproc(site, *argv)
    assert p.returncode == 2, p.stdout + p.stderr
    fmt = next(w.removeprefix("--format=") for i, w in enumerate(argv) if w.startswith(
        "--format=")) if any(w.startswith("--format=") for w in argv) else argv[
        argv.index("--format") + 1]
    error = json.loads(p.stdout or p.stderr)["error"]
    assert (error["code"], error["message"]) == (
        "usage", f"watchrun: --json and --format {fmt} disagree: give one of them")
    assert inproc(site, *[w for w in argv if w != "--json"]).returncode == 0


@pytest.mark.parametrize(("argv", "command"), [
    (["run", "--bogus"], "run"), (["agent", "run", "triage", "--bogus"], "agent run"),
    (["list", "--bogus", "x"], "list")], ids=" ".join)
def test_an_unknown_option_is_said_with_its_command_s_usage(site: Path, argv: list[str],
                                                           command: str) -> None:
    """`run --bogus` printed the top level's usage (`watchrun [-h] [--version] COMMAND`)."""
    p = (wr if argv[0] == "run" else inproc)(site, *argv)
    assert p.returncode == 2 and p.stdout == "", p.stderr
    assert p.stderr.startswith(f"usage: watchrun {command} "), p.stderr
    assert f"watchrun {command}: error: unrecognized arguments: " \
           f"{' '.join(argv[argv.index('--bogus'):])}" in p.stderr, p.stderr


@pytest.mark.parametrize(("argv", "says"), [
    (["remove", "app"], "unknown command 'remove'; a watcher is removed with `stop ID`, then "
     "`clear ID`; commands: run, validate, "),
    (["statsu"], "unknown command 'statsu'; did you mean 'status'? commands: run, "),
    (["-c", "watch.yaml", "lsit"], "unknown command 'lsit'; did you mean 'list'?"),
    (["watch.yaml"], "'watch.yaml' is not a command; to run a config, name it with -c: "
     "`watchrun -c watch.yaml`"),
    (["my config"], "'my config' is not a command; to run a config, name it with -c: "
     "`watchrun -c 'my config'`"),
], ids=lambda v: " ".join(v) if isinstance(v, list) else "")
def test_a_word_that_is_no_command_is_said_so(site: Path, argv: list[str], says: str) -> None:
    """`watchrun remove app` was refused as `watchrun run: error: unrecognized arguments: remove
    app`, with `run`'s usage: the user never typed `run`, and nothing named the commands."""
    (site / "my config").write_text("watchers: []\n")
    via = wr if argv == ["remove", "app"] else inproc
    p = via(site, *argv)
    assert p.returncode == 2 and p.stdout == "", p.stderr
    assert f"watchrun: error: {says}" in p.stderr, p.stderr
    assert "watchrun run" not in p.stderr
    j = json.loads(via(site, *argv, "--json").stdout)["error"]
    assert j["code"] == "usage" and says in j["message"], j


# -- exit status per error class ------------------------------------------------------------
REAL = [["list", "--bogus"], ["status", "nope"], ["agent", "watch", "triage", "--tail", "-1"],
        ["init", "watch.yaml"], ["init", "app.log/x.yaml"], ["clear"]]
"""One command of each class of error, run by the console script (the others: in-process)."""


@pytest.mark.parametrize(("argv", "status", "code", "says"), [
    (["list", "--bogus"], 2, "usage", "unrecognized arguments: --bogus"),
    (["matches", "app", "--lines", "0"], 2, "usage", "--lines: must be from 1 to 2000, not 0"),
    (["logs", "app", "--lines", "2001"], 2, "usage", "must be from 1 to 2000, not 2001"),
    (["logs", "app", "--lines", "ten"], 2, "usage", "must be a whole number from 1 to 2000"),
    (["status", "nope"], 2, "not_found", "no watcher 'nope'"),
    (["stop", "nope"], 2, "not_found", "no watcher 'nope' (known: app, build)"),
    (["agent", "stop", "nobody"], 2, "not_found", "no agent named 'nobody' (known agents: "
     "triage)"),
    (["agent", "send", "nobody", "hi"], 2, "not_found", "no agent named 'nobody'"),
    (["agent", "run", "nobody"], 2, "not_found", "no agent named 'nobody'"),
    (["agent", "watch", "triage", "--tail", "-1"], 2, "invalid_argument", "--tail -1"),
    (["init", "watch.yaml"], 2, "exists", "already exists; not overwriting it"),
    (["init", "app.log/x.yaml"], 3, "write_failed", "cannot write app.log/x.yaml"),
    (["clear"], 3, "no_runner", "no live runner on"),
], ids=lambda v: " ".join(v) if isinstance(v, list) else None)
def test_exit_status_per_error(site: Path, argv: list[str], status: int, code: str,
                               says: str) -> None:
    text = ["--format", "text"] if argv[:2] == ["agent", "watch"] else []  # JSON by default
    via = wr if argv in REAL else inproc
    p = via(site, *argv, *text)
    assert (p.returncode, p.stdout) == (status, ""), p.stderr
    assert says in p.stderr and "Traceback" not in p.stderr
    j = via(site, *argv, "--json")
    assert j.returncode == status
    err = json.loads(j.stdout)["error"]
    assert err["code"] == code and says in err["message"]


def test_a_not_found_names_twenty_known_ids_and_counts_the_rest(tmp_path: Path) -> None:
    """helper-92's F14: with 3000 JSONL files in the output dir, `stop nope` said every id
    (83 KB); `--json`'s `known` keeps the whole list for programs."""
    (tmp_path / "out" / "watchers").mkdir(parents=True)
    ids = [f"w{i:04d}" for i in range(3000)]
    for wid in ids:
        (tmp_path / "out" / "watchers" / f"{wid}.jsonl").write_text("")
    p = inproc(tmp_path, "stop", "nope", "--output-dir", "out")
    assert p.returncode == 2 and p.stderr == (
        f"watchrun: error: no watcher 'nope' (known: {', '.join(ids[:20])}, … and 2980 "
        "more)\n"), p.stderr
    assert json.loads(inproc(tmp_path, "stop", "nope", "--output-dir", "out", "--json").stdout)[
        "error"]["known"] == ids


def test_an_invalid_config_is_exit_2_everywhere(tmp_path: Path) -> None:
    (tmp_path / "watch.yaml").write_text("watchers:\n  - {id: a, path: a.log, pattern: '(x'}\n")
    for argv in (["run"], ["validate"], ["config"], ["list"], ["agent", "list"], ["stop", "a"]):
        p = (wr if argv == ["run"] else inproc)(tmp_path, *argv)
        assert p.returncode == 2, argv
        assert "watchers[0].pattern" in p.stdout + p.stderr
    doc = json.loads(inproc(tmp_path, "list", "--json").stdout)
    assert doc["error"]["code"] == "config_invalid"
    assert doc["error"]["diagnostics"][0]["path"] == "watchers[0].pattern"


def test_a_crossed_gate_is_1_and_a_command_that_cannot_start_is_3(tmp_path: Path) -> None:
    write_config(tmp_path, {"watchers": [{"id": "x", "command": ["no-such-program-15b"],
                                          "pattern": "E", "gate": {"exitCode": True}}]})
    p = wr(tmp_path, "run", "--once", "--json")
    assert p.returncode == 3 and json.loads(p.stdout)["verdicts"][0]["status"] == "error"


# -- init -----------------------------------------------------------------------------------
@pytest.mark.parametrize("target", ["ci/watch.yaml", "nodir/deeper/x.yaml", "newdir/"])
def test_init_creates_missing_folders(tmp_path: Path, target: str) -> None:
    p = inproc(tmp_path, "init", target)
    written = tmp_path / (target + "watch.yaml" if target.endswith("/") else target)
    assert p.returncode == 0 and written.is_file(), p.stderr
    assert p.stdout.splitlines()[0] == f"wrote {written.relative_to(tmp_path)}"
    assert inproc(tmp_path, "validate", "-c", str(written)).returncode == 0


def test_run_once_json_under_github_actions_keeps_stdout_one_document(site: Path) -> None:
    env = {**os.environ, "GITHUB_ACTIONS": "true", "GITHUB_WORKSPACE": str(site)}
    env.pop("GITHUB_STEP_SUMMARY", None)
    p = wr(site, "run", "--once", "--json", env=env)
    assert p.returncode == 1
    assert json.loads(p.stdout)["crossed"] == 1  # no fence, no annotation on stdout
    assert "::error " in p.stderr and "::stop-commands::" not in p.stdout + p.stderr


def test_bare_watchrun_runs_the_config_here_or_shows_help(tmp_path: Path) -> None:
    p = wr(tmp_path)
    assert p.returncode == 2 and p.stderr.startswith("usage: watchrun")
    (tmp_path / "a.log").write_text("ERROR\n")
    write_config(tmp_path, {"watchers": [{"id": "a", "path": "a.log", "pattern": "ERROR",
                                          "fromStart": True}]})
    proc = subprocess.Popen([watchrun_bin()], cwd=tmp_path, stdout=subprocess.DEVNULL,
                            stderr=subprocess.PIPE, text=True, start_new_session=True)
    try:
        assert proc.stderr is not None
        seen = ""
        while "running" not in seen:
            line = proc.stderr.readline()
            assert line, seen
            seen += line
        assert "using watch.yaml" in seen
    finally:
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=60) == 0


def test_usage_errors_quote_what_was_typed_sanitized(tmp_path: Path) -> None:
    p = wr(tmp_path, "list", "--output-dir", str(tmp_path), "\x1b[2Jboom\u2028x")
    assert p.returncode == 2 and "unrecognized arguments: boom\\u2028x" in p.stderr
    assert "\x1b" not in p.stderr
    j = wr(tmp_path, "list", "--output-dir", str(tmp_path), "\x1b[2Jboom", "--json")
    assert j.returncode == 2 and "\x1b" not in j.stdout
    assert json.loads(j.stdout)["error"]["message"].endswith("\x1b[2Jboom")  # escaped, kept


# -- the documented options are the parser's ------------------------------------------------
def _commands() -> dict[tuple[str, ...], set[str]]:
    """Every command and agent action with the long options its parser takes."""
    import argparse

    from watchrun.cli.main import build_parser

    found: dict[tuple[str, ...], set[str]] = {}

    def walk(parser: argparse.ArgumentParser, path: tuple[str, ...]) -> None:
        for action in parser._actions:
            if isinstance(action, argparse._SubParsersAction):
                for name, sub in action.choices.items():
                    found[(*path, name)] = {o for a in sub._actions for o in a.option_strings
                                            if o.startswith("--")} - {"--help"}
                    walk(sub, (*path, name))
    walk(build_parser(None), ())
    return found


def _synopsis(doc: str) -> list[str]:
    """The lines of a doc's synopsis block (the first bare ``` block starting with `watchrun`),
    continuation lines joined to their command."""
    block = re.search(r"```\n(watchrun .*?)```", doc, flags=re.S)
    assert block is not None
    lines: list[str] = []
    for line in block.group(1).splitlines():
        if line.startswith("watchrun"):
            lines.append(line)
        elif line.strip():
            lines[-1] += " " + line.strip()
    return lines


DOCS = Path(__file__).resolve().parents[1]


@pytest.mark.parametrize("doc", ["docs/cli.md", "README.md"])
def test_every_option_in_the_synopsis_is_the_parsers(doc: str) -> None:
    commands = _commands()
    for line in _synopsis((DOCS / doc).read_text()):
        words = set(re.findall(r"[\w-]+", line))
        named = [opts for path, opts in commands.items() if path[-1] in words and
                 (len(path) == 1 or "agent" in words)] or [commands[("run",)]]
        known = set().union(*named)
        unknown = [o for o in re.findall(r"--[a-z][a-z-]*", line) if o not in known]
        assert not unknown, f"{doc}: {line!r} names options no parser has: {unknown}"


def test_every_option_of_every_command_is_in_docs_cli_md() -> None:
    cli = (DOCS / "docs" / "cli.md").read_text()
    missing = {" ".join(path): sorted(o for o in opts
                                      if not re.search(rf"(?<![\w-]){o}(?![\w-])", cli))
               for path, opts in _commands().items()}
    assert {k: v for k, v in missing.items() if v} == {}
    synopsis = " ".join(_synopsis(cli))
    words = set(re.findall(r"[\w-]+", synopsis))
    assert [" ".join(p) for p in _commands() if p[-1] not in words] == []


def test_lines_defaults_to_the_configs_match_lines_and_50_without_a_config(
        tmp_path: Path) -> None:
    """docs/cli.md "Bounds": without `--lines`, `limits.matchLines` of the config applies (50
    with `--output-dir` alone), for `matches` and `logs` alike."""
    write_config(tmp_path, {"limits": {"matchLines": 2}, "watchers": [
        {"id": "b", "command": "i=0; while [ $$i -lt 60 ]; do i=$$((i+1)); echo ERROR $$i; done",
         "pattern": "ERROR"}]})
    assert wr(tmp_path, "run", "--once").returncode == 0
    out = ["--output-dir", str(tmp_path / ".watchrun")]
    for cmd, key in (("matches", "matches"), ("logs", "lines")):
        shown = json.loads(inproc(tmp_path, cmd, "b", "--json").stdout)[key]
        assert len(shown) == 2, cmd
        shown = json.loads(inproc(tmp_path, cmd, "b", *out, "--json").stdout)[key]
        assert len(shown) == 50, cmd
        last = shown[-1]["line"] if cmd == "matches" else shown[-1]
        assert last == "ERROR 60"


def test_validate_annotations_show_a_hostile_config_name_escaped(tmp_path: Path) -> None:
    """`validate`'s GitHub annotation wrote the config's file name into `file=` raw: a name
    from a pull request (pre-commit's `validate --each`) restyled the job log."""
    name = "bad\x1b[2J\x1b]0;t\x07\u202e.yaml"
    (tmp_path / name).write_text("watchers: [{id: a, command: echo, pattern: '('}]\n")
    env = {**os.environ, "GITHUB_ACTIONS": "true", "GITHUB_WORKSPACE": str(tmp_path)}
    p = wr(tmp_path, "validate", "--each", name, env=env)
    assert p.returncode == 2
    out = p.stdout + p.stderr
    (line,) = [ln for ln in out.splitlines() if ln.startswith("::error ")]
    assert not any(c in out for c in ("\x1b", "\x07", "\u202e")), repr(out)
    assert "file=bad" in line and "\\u202e.yaml" in line


def test_status_and_list_of_a_damaged_snapshot_say_so(tmp_path: Path) -> None:
    """A status file that is not a snapshot was reported as "it has not run with this output
    dir" — of a watcher that had; `list` left the watcher out (and with no other, said that no
    watcher had run)."""
    (tmp_path / "app.log").write_text("ERROR one\n")
    write_config(tmp_path, {"watchers": [{"id": "app", "path": "app.log", "pattern": "ERROR",
                                          "fromStart": True}]})
    assert wr(tmp_path, "run", "--once").returncode == 0
    (tmp_path / ".watchrun" / "state" / "app.status.json").write_text("garbage{")
    p = inproc(tmp_path, "status", "app")
    assert p.returncode == 3
    assert "cannot be read: not its status snapshot" in p.stderr and "has not run" not in p.stderr
    listed = inproc(tmp_path, "list")
    assert listed.returncode == 0, listed.stderr
    assert "no watchers have run" not in listed.stdout, listed.stdout
    row = next(ln.split() for ln in listed.stdout.splitlines() if ln.startswith("app "))
    assert row[1:4] == ["unreadable", "?", "?"], listed.stdout
    doc = json.loads(inproc(tmp_path, "list", "--json").stdout)
    (entry,) = doc["watchers"]
    assert (entry["id"], entry["status"]) == ("app", "unreadable")
    assert "app.status.json cannot be read" in entry["lastError"]


@pytest.mark.parametrize("between", [["--json"], ["--output-dir", "out"], ["--config=w.yaml"],
                                     ["-c", "w.yaml", "--json", "--output-dir=out"]])
def test_options_between_agent_and_its_action_are_the_actions(between: list[str]) -> None:
    """`watchrun agent -c w.yaml list` said "invalid choice: 'w.yaml'" and `agent --json list`
    "unrecognized arguments: --json", though -c goes "anywhere on the line" (README)."""
    assert vars(parse(["agent", *between, "list"])) == vars(parse(["agent", "list", *between]))


@pytest.mark.parametrize("argv", [["agent", "-c"], ["agent", "--output-dir"],
                                  ["agent", "-c", "w.yaml", "--output-dir"],
                                  ["--json", "agent", "-c"]])
def test_an_option_before_an_agent_action_without_its_value_is_a_usage_error(
        tmp_path: Path, argv: list[str]) -> None:
    """`watchrun agent -c<Enter>` was a traceback (`KeyError: None`) and exit 1, a crossed
    gate's status; it is argparse's usage error, exit 2, as `watchrun agent list -c` is."""
    done = wr(tmp_path, *argv)
    assert done.returncode == 2, done.stderr
    assert "Traceback" not in done.stderr
    option = "--output-dir" if argv[-1] == "--output-dir" else "-c/--config"
    said = json.loads(done.stdout)["error"]["message"] if "--json" in argv else done.stderr
    assert f"watchrun agent: error: argument {option}: expected one argument" in said or \
        f"watchrun agent: argument {option}: expected one argument" in said, said


def test_agent_without_its_action_says_an_action_is_due(tmp_path: Path) -> None:
    done = inproc(tmp_path, "agent", "-c", "w.yaml")
    assert done.returncode == 2
    assert "the following arguments are required: ACTION" in done.stderr, done.stderr
