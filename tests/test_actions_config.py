"""The `actions:` and `dependsOn` config: every mistake located and reported at once, clamps
as warnings, the model built, `watchrun config` round-tripping, and `${VAR}` in an exec command
kept one argument (one shell word inside `sh -c`)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from test_config_invalid import load_text

from watchrun.config.dump import dump_config
from watchrun.config.model import ThresholdSpec

W = "watchers:\n  - id: app\n    path: app.log\n    pattern: ERROR\n"
AG = "agents:\n  - name: review\n    provider: mock\n  - name: fix\n    provider: mock\n"

# (config text, location, key phrase of the message)
INVALID = [
    (W + "    actions: [{type: mail}]\n", "watchers[0].actions[0].type", "expected one of"),
    (W + "    actions: [{type: webhook}]\n", "watchers[0].actions[0].url", "needs `url`"),
    (W + "    actions: [{type: webhook, url: 'ftp://x/y'}]\n", "watchers[0].actions[0].url",
     "not an http:// or https:// URL"),
    (W + "    actions: [{type: webhook, url: 'http://x:port/'}]\n",
     "watchers[0].actions[0].url", "is not a valid URL"),
    (W + "    actions: [{type: webhook, url: 'http://x', command: [a]}]\n",
     "watchers[0].actions[0].command", "applies only to exec actions"),
    (W + "    actions: [{type: exec, command: [a], url: 'http://x'}]\n",
     "watchers[0].actions[0].url", "applies only to webhook actions"),
    (W + "    actions: [{type: exec}]\n", "watchers[0].actions[0].command", "needs `command`"),
    (W + "    actions: [{type: exec, command: 'notify $LINE'}]\n",
     "watchers[0].actions[0].command", "never a shell string"),
    (W + "    actions: [{type: webhook, url: 'http://x', headers: {Host: evil}}]\n",
     "watchers[0].actions[0].headers.Host", "written by watchrun itself"),
    (W + '    actions: [{type: webhook, url: "http://x", headers: {X-A: "a\\r\\nX-B: b"}}]\n',
     "watchers[0].actions[0].headers.X-A", "header injection"),
    *[(W + f"    actions: [{{type: webhook, url: 'http://x', headers: {{{name}: v}}}}]\n",
       f"watchers[0].actions[0].headers.{name}", "written by watchrun itself")
      for name in ("Content-Length", "transfer-encoding", "Connection")],
    ('{"watchers": [{"id": "app", "path": "app.log", "pattern": "ERROR", "actions": [{"type": '
     '"webhook", "url": "http://x", "headers": {"X-A": "a\\u0000b"}}]}]}',
     "watchers[0].actions[0].headers.X-A", "header injection"),
    (W + "    actions: [{type: exec, command: [a], when: {threshold: 'often'}}]\n",
     "watchers[0].actions[0].when.threshold", "is not a threshold"),
    (W + "    actions: [{type: exec, command: [a], when: sometimes}]\n",
     "watchers[0].actions[0].when", "is not a valid `when`"),
    (W + "    actions: [{type: exec, command: [a]}, {type: exec, command: [b], name: EXEC}]\n",
     "watchers[0].actions[1].name", "differs from `exec`"),
    (AG.replace("provider: mock\n  - name: fix", "provider: mock\n    dependsOn: [fx]\n"
                "  - name: fix"), "agents[0].dependsOn[0]", "no agent named `fx`"),
    (AG + "    dependsOn: [fix]\n", "agents[1].dependsOn[0]", "dependency cycle: fix → fix"),
    (AG.replace("provider: mock\n  - name: fix", "provider: mock\n    dependsOn: [fix]\n"
                "  - name: fix") + "    dependsOn: [review]\n", "agents[1].dependsOn[0]",
     "dependency cycle: review → fix → review"),
    (AG + "    prompt: '{deps.lint.answer}'\n", "agents[1].prompt",
     "names `lint`, which `fix` does not depend on"),
]


@pytest.mark.parametrize(("text", "where", "phrase"), INVALID)
def test_invalid_actions_and_plans_are_located(tmp_path: Path, text: str, where: str,
                                               phrase: str) -> None:
    result = load_text(tmp_path, text, "json" if text.startswith("{") else "yaml")
    assert result.config is None
    errors = [d for d in result.diagnostics if d.severity == "error"]
    assert any(d.path == where and phrase in d.message for d in errors), [
        (d.path, d.message) for d in errors]


def test_every_problem_comes_at_once(tmp_path: Path) -> None:
    text = (W + "    actions: [{type: webhook}, {type: exec}]\n" + AG +
            "    dependsOn: [fix, nobody]\n")
    result = load_text(tmp_path, text)
    where = {d.path for d in result.diagnostics if d.severity == "error"}
    assert {"watchers[0].actions[0].url", "watchers[0].actions[1].command",
            "agents[1].dependsOn[0]", "agents[1].dependsOn[1]"} <= where


def test_out_of_range_values_are_clamped_with_warnings(tmp_path: Path) -> None:
    text = W + ("    actions: [{type: exec, command: [a], throttle: 10ms, timeout: 1h, "
                "concurrency: 99, queue: -1, maxBodyBytes: 1KiB, "
                "when: {threshold: '0 in 10ms'}}]\n")
    result = load_text(tmp_path, text)
    assert result.config is not None
    (a,) = result.config.watchers[0].actions
    assert (a.throttle_ms, a.timeout_ms, a.concurrency, a.queue, a.max_body_bytes) == (
        1000, 600_000, 16, 0, 16 * 1024)
    assert a.threshold == ThresholdSpec(1, 1000)
    assert len([d for d in result.diagnostics if "clamped" in d.message]) == 7


@pytest.mark.parametrize(("given", "kept"), [(99, 10), (-1, 0), (10, 10), (0, 0)])
def test_retries_are_clamped_to_0_to_10(tmp_path: Path, given: int, kept: int) -> None:
    text = W + f"    actions: [{{type: webhook, url: 'https://h.example/x', retries: {given}}}]\n"
    result = load_text(tmp_path, text)
    assert result.config is not None, result.diagnostics
    assert result.config.watchers[0].actions[0].retries == kept
    clamped = [d.format() for d in result.diagnostics if "clamped" in d.message]
    assert len(clamped) == (given != kept) and all("retries" in c for c in clamped), clamped


def test_an_action_without_options_has_the_documented_defaults(tmp_path: Path) -> None:
    """README and docs/config.md: `when: match`, no throttle, `timeout` 10s, `concurrency` 1,
    `queue` 100, `retries` 3, `maxBodyBytes` 1 MiB, `format: json`, names `webhook`, `exec`,
    then `webhook-2`."""
    text = W + ("    actions: [{type: webhook, url: 'https://h.example/x'}, {type: exec, "
                "command: [a]}, {type: webhook, url: 'https://h.example/y'}]\n")
    result = load_text(tmp_path, text)
    assert result.config is not None, result.diagnostics
    hook, run, second = result.config.watchers[0].actions
    assert (hook.name, run.name, second.name) == ("webhook", "exec", "webhook-2")
    for a in (hook, run):
        assert (a.threshold, a.throttle_ms, a.timeout_ms, a.concurrency, a.queue,
                a.max_body_bytes) == (None, None, 10_000, 1, 100, 1024 * 1024)
    assert (hook.retries, hook.format, hook.headers) == (3, "json", {})
    assert (run.cwd, run.env) == (tmp_path, {})


def test_the_model_and_the_resolved_config_round_trip(tmp_path: Path) -> None:
    text = W + ("    wake: [fix]\n    actions:\n"
                "      - {type: webhook, url: 'https://h.example/T/${SECRET}', format: slack,"
                " headers: {Authorization: 'Bearer ${TOKEN}'}, throttle: 5m}\n"
                "      - {type: exec, command: [tee, -a, out.jsonl], when: {threshold: '5 in 1m'}}"
                "\n" + AG + "    dependsOn: [review]\n    prompt: '{deps.review.answer}'\n")
    env = {"SECRET": "s3", "TOKEN": "t0"}
    result = load_text(tmp_path, text, env=env)
    assert result.config is not None, result.diagnostics
    hook, run = result.config.watchers[0].actions
    assert (hook.name, hook.url, hook.format, hook.throttle_ms) == (
        "webhook", "https://h.example/T/s3", "slack", 300_000)
    assert hook.headers == {"Authorization": "Bearer t0"} and hook.origin() == "https://h.example"
    assert (run.name, run.command, run.cwd) == ("exec", ("tee", "-a", "out.jsonl"), tmp_path)
    assert run.threshold == ThresholdSpec(5, 60_000)
    assert result.config.agent("fix").depends_on == ("review",)  # type: ignore[union-attr]
    again = tmp_path / "again"
    again.mkdir()
    dumped = again / "watch.yaml"
    dumped.write_text(dump_config(result.config, "yaml"))
    reloaded = load_text(again, dumped.read_text(), env={})
    assert reloaded.config is not None
    assert reloaded.config.watchers == result.config.watchers
    assert reloaded.config.agents == result.config.agents


def test_a_variable_in_an_exec_script_stays_one_shell_word(tmp_path: Path) -> None:
    text = W + "    actions: [{type: exec, command: [sh, -c, 'echo ${V} > out']}]\n"
    result = load_text(tmp_path, text, env={"V": "x  *"})
    assert result.config is not None
    script = result.config.watchers[0].actions[0].command[2]
    subprocess.run(["sh", "-c", script], cwd=tmp_path, check=True, timeout=10)
    assert (tmp_path / "out").read_text() == "x  *\n"
    result = load_text(tmp_path, text, env={"V": "x; touch pwned"})  # could run code: refused
    (err,) = [d for d in result.diagnostics if d.severity == "error"]
    assert err.path == "watchers[0].actions[0].command[2]"
    assert "`${V}` is in shell code and its value holds ';'" in err.message


def test_validate_shows_plans_and_actions_but_never_a_webhook_path(tmp_path: Path) -> None:
    from liverunner import cli

    config = tmp_path / "watch.yaml"
    config.write_text(W + "    wake: fix\n    actions: [{type: webhook, url: "
                      "'https://hooks.example/services/T0/s3cr3t'}]\n" + AG +
                      "    dependsOn: [review]\n")
    p = cli("validate", "-c", config, timeout=30)
    assert p.returncode == 0, p.stderr
    assert "→ plan review → fix" in p.stdout
    assert "action webhook: webhook https://hooks.example" in p.stdout
    assert "s3cr3t" not in p.stdout + p.stderr


def test_the_actions_are_imported_only_when_a_config_has_them() -> None:
    code = ("import sys; import watchrun.cli.run, watchrun.runtime.supervisor; "
            "print(sorted(m for m in sys.modules if m.startswith('watchrun.actions')))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         timeout=30, check=True).stdout
    assert out.strip() == "[]"


def test_a_header_value_from_the_environment_with_a_line_break_is_refused(
        tmp_path: Path) -> None:
    text = W + "    actions: [{type: webhook, url: 'http://x', headers: {X-A: '${V}'}}]\n"
    result = load_text(tmp_path, text, env={"V": "a\r\nX-Injected: b"})
    assert result.config is None
    (err,) = [d for d in result.diagnostics if d.severity == "error"]
    assert err.path == "watchers[0].actions[0].headers.X-A" and "header injection" in err.message
