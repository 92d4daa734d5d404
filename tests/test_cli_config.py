"""The config commands as real `watchrun` processes: validate, config, schema, init, --version
and --help.

Each command runs as a process of its own (`run`, liverunner.cli) at least once here: `validate`
of the example, `config` from another folder, `schema`, `init`, `--version`, `--help`, no
arguments, a bare `-c`, and a closed pipe (the console script). Their other cases run in this
test process (`here`, tests/inproc.py: the same `main()` the script calls, its stdout, stderr
and exit status) without the ~0.1 s of CPU each new interpreter costs."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from inproc import inproc
from liverunner import cli

ROOT = Path(__file__).parents[1]
_BESIDE = Path(sys.executable).parent / "watchrun"
WATCHRUN = str(_BESIDE) if _BESIDE.exists() else (shutil.which("watchrun") or "watchrun")
BAD = (
    "limits: {pollMs: 5}\n"
    "watchers:\n  - id: a\n    path: app.log\n    pattern: '(ab'\n    patern: x\n"
)


def run(*args: str, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    """`watchrun ARGS`, a process of its own (liverunner.cli)."""
    return cli(*args, cwd=cwd, timeout=60)


def here(*args: str, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    """`run`, in this process (tests/inproc.py)."""
    return inproc(Path.cwd() if cwd is None else cwd, *args)


def test_validate_the_example() -> None:
    proc = run("validate", "-c", str(ROOT / "watch.yaml.example"))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    lines = proc.stdout.splitlines()
    assert lines[0] == f"{ROOT / 'watch.yaml.example'}: valid — 2 watchers, 1 agent"
    assert lines[1].split() == ["watcher", "app-log", "file",
                                str(ROOT / ".watchrun/demo/app.log"), "→", "wakes", "triage"]
    assert lines[2].split()[0] == "engine:"
    assert lines[3].split()[:4] == ["watcher", "demo-writer", "command", "mkdir"]
    assert lines[5].split()[:3] == ["agent", "triage", "mock"]


def test_validate_reports_every_problem_and_exits_2(tmp_path: Path) -> None:
    (tmp_path / "w.yaml").write_text(BAD)
    proc = here("validate", "-c", "w.yaml", cwd=tmp_path)
    assert proc.returncode == 2
    assert proc.stdout.splitlines() == [
        "w.yaml:1:10: warning: limits.pollMs: 5 clamped to 10 (allowed 10–60000)",  # noqa: RUF001
        'w.yaml:5:5: error: watchers[0].pattern: invalid regex "(ab": missing ), unterminated '
        "subpattern at position 0",
        "w.yaml:6:5: error: watchers[0].patern: unknown key `patern`; did you mean `pattern`?",
        "w.yaml: invalid — 2 errors, 1 warning",
    ]


def test_validate_refuses_a_command_run_cannot_start(tmp_path: Path) -> None:
    """A blank command or program name passed validate (exit 0), then every run said "cannot
    start an empty command": validate refuses it, naming where, exit 2."""
    (tmp_path / "w.yaml").write_text(
        "watchers:\n  - {id: h, command: '   ', pattern: x}\n"
        "  - {id: j, command: ['  ', x], pattern: x}\n")
    proc = here("validate", "-c", "w.yaml", cwd=tmp_path)
    assert proc.returncode == 2, proc.stdout + proc.stderr
    errors = [ln for ln in proc.stdout.splitlines() if ": error: " in ln]
    assert [ln.split(": error: ")[1].split(":")[0] for ln in errors] == [
        "watchers[0].command", "watchers[1].command[0]"]
    assert all("must not be blank" in ln for ln in errors)


@pytest.mark.parametrize("flag", [["--format", "json"], ["--json"]])
def test_validate_json(tmp_path: Path, flag: list[str]) -> None:
    (tmp_path / "w.yaml").write_text(BAD)
    proc = here("validate", "-c", "w.yaml", *flag, cwd=tmp_path)
    assert proc.returncode == 2
    doc = json.loads(proc.stdout)
    assert (doc["valid"], doc["errors"], doc["warnings"]) == (False, 2, 1)
    assert [(d["path"], d["severity"], d["line"]) for d in doc["diagnostics"]] == [
        ("limits.pollMs", "warning", 1), ("watchers[0].pattern", "error", 5),
        ("watchers[0].patern", "error", 6)]
    good = here("validate", "-c", str(ROOT / "watch.yaml.example"), *flag)
    assert good.returncode == 0
    doc = json.loads(good.stdout)
    assert doc["valid"] is True and doc["diagnostics"] == []
    assert [(w["id"], w["kind"], w["wake"]) for w in doc["watchers"]] == [
        ("app-log", "file", ["triage"]), ("demo-writer", "command", [])]


def test_validate_strict_turns_warnings_into_errors(tmp_path: Path) -> None:
    (tmp_path / "w.yaml").write_text("limits: {pollMs: 5}\nwatchers: [{id: a, path: x, "
                                     "pattern: y}]\n")
    assert here("validate", "-c", "w.yaml", cwd=tmp_path).returncode == 0
    proc = here("validate", "--strict", "-c", "w.yaml", cwd=tmp_path)
    assert proc.returncode == 2
    assert proc.stdout.startswith("w.yaml:1:10: error: limits.pollMs: 5 clamped to 10")


def test_validate_refuses_backtracking_patterns_unless_the_watcher_opts_in(tmp_path: Path) -> None:
    config = ("watchers: [{id: srv, path: x, pattern: '^(a+)+(?=b)c', exclude: [ok, '(a)\\1'],"
              " gate: {require: '(?<=x)y'}%s}]\n")
    (tmp_path / "w.yaml").write_text(config % "")
    proc = here("validate", "--format", "json", "-c", "w.yaml", cwd=tmp_path)
    assert proc.returncode == 2
    errors = {d["path"]: d["message"] for d in json.loads(proc.stdout)["diagnostics"]}
    assert set(errors) == {"watchers[0].pattern", "watchers[0].exclude[1]",
                           "watchers[0].gate.require"}
    assert errors["watchers[0].pattern"].startswith(
        '"^(a+)+(?=b)c" uses lookahead (?=…), which only Python re, a backtracking engine, '
        "can run")
    assert "Set `backtracking: true` on watcher `srv`" in errors["watchers[0].pattern"]
    assert "a backreference" in errors["watchers[0].exclude[1]"]
    assert "lookbehind (?<=…)" in errors["watchers[0].gate.require"]
    (tmp_path / "w.yaml").write_text(config % ", backtracking: true")
    proc = here("validate", "--strict", "-c", "w.yaml", cwd=tmp_path)
    assert proc.returncode == 0, proc.stdout
    assert proc.stdout.splitlines()[2].split()[1] in ("re", "re+prefilter")  # engine: …
    isolated = "matched with Python re (backtracking) in an isolated worker, 250 ms per line"
    assert proc.stdout.splitlines()[3:] == [
        f"      pattern: uses lookahead (?=…); {isolated}",
        f"      exclude[1]: uses a backreference \\N; {isolated}",
        f"      gate.require: uses lookbehind (?<=…); {isolated}",
    ]


@pytest.mark.parametrize("fmt", ["yaml", "json", "toml"])
def test_config_output_validates_again(tmp_path: Path, fmt: str) -> None:
    first = here("config", "-c", str(ROOT / "watch.yaml.example"), "--format", fmt)
    assert first.returncode == 0, first.stderr
    saved = tmp_path / f"resolved.{fmt}"
    saved.write_text(first.stdout)
    check = here("validate", "-c", str(saved))
    assert check.returncode == 0, check.stdout
    assert "valid — 2 watchers, 1 agent" in check.stdout
    again = here("config", "-c", str(saved), "--format", fmt)
    assert again.stdout == first.stdout  # resolving a resolved config changes nothing


def test_config_is_resolved_from_any_cwd(tmp_path: Path) -> None:
    conf = tmp_path / "conf"
    conf.mkdir()
    (conf / "w.yaml").write_text("watchers: [{id: a, path: logs/a.log, pattern: x}]\n"
                                 "limits: {stopTimeout: 2s, maxLineBytes: 1MiB}\n")
    (tmp_path / "other").mkdir()
    proc = run("config", "-c", "../conf/w.yaml", "--json", "--output-dir", "out",
               cwd=tmp_path / "other")
    assert proc.returncode == 0, proc.stderr
    doc = json.loads(proc.stdout)
    assert doc["watchers"][0]["path"] == str(conf / "logs" / "a.log")
    assert doc["output"]["dir"] == str(tmp_path / "other" / "out")
    assert (doc["limits"]["stopTimeout"], doc["limits"]["maxLineBytes"]) == (2000, 1048576)


def test_config_of_an_invalid_file_prints_errors_only(tmp_path: Path) -> None:
    (tmp_path / "w.yaml").write_text(BAD)
    proc = here("config", "-c", "w.yaml", cwd=tmp_path)
    assert proc.returncode == 2
    assert proc.stdout == ""
    assert "error: watchers[0].patern: unknown key" in proc.stderr


def test_schema() -> None:
    proc = run("schema")
    assert proc.returncode == 0
    schema = json.loads(proc.stdout)
    assert schema == json.loads((ROOT / "runner" / "watchrun" / "schemas" /
                                 "watch.schema.json").read_text())
    assert here("schema", "config").stdout == proc.stdout
    from jsonschema import Draft202012Validator  # type: ignore[import-untyped]

    Draft202012Validator.check_schema(schema)


@pytest.mark.parametrize("name", ["record", "agent-watch", "transcript"])
def test_other_schemas_print_or_say_they_are_missing(name: str) -> None:
    proc = here("schema", name)
    if proc.returncode == 0:
        assert json.loads(proc.stdout)["$schema"].endswith("2020-12/schema")
    else:
        assert proc.returncode == 2
        assert f"the `{name}` schema is not available in this installation" in proc.stderr
        assert "Traceback" not in proc.stderr


def test_schema_without_the_schemas_package_is_not_found_not_a_traceback(tmp_path: Path) -> None:
    """docs/config.md: `watchrun schema` exits 2 when the schema is not installed, and so it does
    when the whole `watchrun.schemas` package is gone (a tree or install without it): a copy of
    the code without it, run with the dependencies on the path and no site hooks (-S: no
    editable install's finder can supply another tree's schemas)."""
    import site

    shutil.copytree(ROOT / "runner" / "watchrun", tmp_path / "watchrun",
                    ignore=shutil.ignore_patterns("__pycache__", "schemas"))
    path = os.pathsep.join([str(tmp_path), *site.getsitepackages()])
    for json_flag in ([], ["--json"]):
        proc = subprocess.run([sys.executable, "-S", "-m", "watchrun", *json_flag, "schema",
                               "record"], env={**os.environ, "PYTHONPATH": path}, cwd=tmp_path,
                              capture_output=True, text=True, timeout=60)
        assert proc.returncode == 2, proc.stderr
        error = json.loads(proc.stdout)["error"]  # `schema` prints JSON, its errors too
        assert error["code"] == "not_found"
        assert "the `record` schema is not available in this installation" in error["message"]
        assert "Traceback" not in proc.stderr


def test_every_schema_property_is_described_and_closed() -> None:
    schema = json.loads(here("schema").stdout)

    def walk(node: object, where: str) -> None:
        if isinstance(node, dict):
            if node.get("type") == "object" and "propertyNames" not in node:
                assert node.get("additionalProperties") is False, where
            for key, prop in node.get("properties", {}).items():
                assert prop.get("description"), f"{where}.{key}"
            for key, value in node.items():
                walk(value, f"{where}/{key}")
        elif isinstance(node, list):
            for i, value in enumerate(node):
                walk(value, f"{where}[{i}]")

    walk(schema, "#")


def test_init_writes_a_valid_config_and_never_overwrites(tmp_path: Path) -> None:
    proc = run("init", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.startswith("wrote watch.yaml")
    text = (tmp_path / "watch.yaml").read_text()
    assert text.startswith("# watch.yaml")
    check = here("validate", "-c", "watch.yaml", "--strict", cwd=tmp_path)
    assert check.returncode == 0, check.stdout
    again = here("init", cwd=tmp_path)
    assert again.returncode == 2
    assert "watch.yaml already exists; not overwriting it" in again.stderr
    assert (tmp_path / "watch.yaml").read_text() == text


@pytest.mark.parametrize("target", ["ci/watch.toml", "ci/watch.json", "ci"])
def test_init_other_formats_and_folders(tmp_path: Path, target: str) -> None:
    (tmp_path / "ci").mkdir()
    proc = here("init", target, "--json", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    written = json.loads(proc.stdout)["path"]
    assert written == (target if "." in target else "ci/watch.yaml")
    assert here("validate", "-c", written, "--strict", cwd=tmp_path).returncode == 0


def test_init_refuses_an_unknown_format(tmp_path: Path) -> None:
    proc = here("init", "watch.txt", cwd=tmp_path)
    assert proc.returncode == 2
    assert "cannot tell the format of watch.txt" in proc.stderr
    assert not (tmp_path / "watch.txt").exists()


@pytest.mark.parametrize(("target", "said"), [
    ("notadir/watch.yaml", "cannot create notadir: it exists and is not a directory"),
    ("notadir/sub/watch.yaml", "cannot create notadir/sub: Not a directory")])
def test_init_under_a_file_says_the_file_is_no_directory(
        tmp_path: Path, target: str, said: str) -> None:
    """`init notadir/watch.yaml` said "cannot create notadir: File exists", as if creating the
    folder failed because it is there."""
    (tmp_path / "notadir").write_text("hi\n")
    proc = here("init", target, cwd=tmp_path)
    assert proc.returncode == 3
    assert proc.stderr == f"watchrun: error: cannot write {target}: {said}\n"


def test_version_and_help() -> None:
    from watchrun import __version__

    assert run("--version").stdout == f"watchrun {__version__}\n"
    top = run("--help")
    assert top.returncode == 0
    for name in ("run", "validate", "config", "schema", "init"):
        assert name in top.stdout
        sub = (run if name == "run" else here)(name, "--help")  # (`run` is never in-process)
        assert sub.returncode == 0
        assert "examples:" in sub.stdout and f"watchrun {name}" in sub.stdout


def test_no_arguments_is_a_usage_error() -> None:
    proc = run()
    assert proc.returncode == 2
    assert proc.stderr.startswith("usage: watchrun")


def test_bare_config_flag_means_run() -> None:
    proc = run("--once", "-c")  # rejected by the `run` parser, so nothing runs
    assert proc.returncode == 2
    assert proc.stderr.startswith("usage: watchrun run")
    assert "argument -c/--config: expected one argument" in proc.stderr


def test_a_closed_pipe_is_not_a_traceback(tmp_path: Path) -> None:
    watchers = "".join(f"  - {{id: w{i}, path: l{i}.log, pattern: '(E{i}', exclude: ['[x'], "
                       "colour: red}\n" for i in range(400))  # 1200 errors: about 150 KB of text
    (tmp_path / "w.yaml").write_text("limits: {maxWatchers: 500}\nwatchers:\n" + watchers)
    proc = subprocess.Popen([WATCHRUN, "validate", "-c", "w.yaml"], cwd=tmp_path,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    assert proc.stdout is not None and proc.stderr is not None
    assert proc.stdout.read(7) == b"w.yaml:"  # it started writing
    proc.stdout.close()  # the reader goes away with most of the output unread
    assert proc.wait(timeout=60) == 141  # 128 + SIGPIPE, like `yes | head`
    assert proc.stderr.read() == b""
    proc.stderr.close()


def test_validate_shows_the_engine_of_each_watcher(tmp_path: Path) -> None:
    from watchrun.match.matcher import engines_available

    cfg = tmp_path / "w.yaml"
    cfg.write_text("watchers:\n"
                   "  - {id: fast, command: 'true', pattern: 'ERROR|FATAL'}\n"
                   "  - {id: backref, command: 'true', pattern: '(a)\\1', backtracking: true}\n")
    p = here("validate", "-c", str(cfg), "--format", "json")
    assert p.returncode == 0, p.stdout + p.stderr
    engines = {w["id"]: w["engine"] for w in json.loads(p.stdout)["watchers"]}
    assert engines["fast"] == engines_available()[0]  # the best engine installed
    assert engines["backref"] in ("re", "re+prefilter")  # backreferences need backtracking
    text = here("validate", "-c", str(cfg)).stdout
    assert f"engine: {engines['fast']}" in text


@pytest.mark.parametrize("command", [["validate"], ["validate", "--json"], ["config"],
                                     ["config", "--json"]], ids=" ".join)
def test_a_check_whose_module_will_not_load_is_one_line_and_exit_3(
        tmp_path: Path, command: list[str]) -> None:
    """An explorer's P4: with croniter broken (a half-replaced install: here a `croniter.py`
    without `croniter` in it, first on the path), `validate` and `config` of a `schedule:`
    ended in a traceback and exit 1, a crossed gate's status, and `--json` printed no JSON. Now
    one line naming the module (or the error document), exit 3, as a run that cannot begin."""
    broken = tmp_path / "site"
    broken.mkdir()
    (broken / "croniter.py").write_text("")
    path = os.pathsep.join([str(broken), *filter(None, [os.environ.get("PYTHONPATH")])])
    (tmp_path / "w.yaml").write_text(
        "agents:\n  - name: a\n    provider: mock\n    schedule: '*/5 * * * *'\n")
    proc = subprocess.run([WATCHRUN, *command, "-c", "w.yaml"], cwd=tmp_path, text=True,
                          capture_output=True, timeout=60, env={**os.environ, "PYTHONPATH": path})
    said = ("cannot check the config: a module a check needs would not load (ImportError: "
            f"cannot import name 'croniter' from 'croniter' ({broken / 'croniter.py'})); "
            "reinstall watchrun with its dependencies")
    assert proc.returncode == 3, proc.stdout + proc.stderr
    if "--json" in command:
        assert json.loads(proc.stdout) == {"error": {"code": "check_failed", "message": said}}
        assert proc.stderr == ""
    else:
        assert (proc.stdout, proc.stderr) == ("", f"watchrun: error: {said}\n")
