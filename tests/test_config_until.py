"""`until: status:STATUS` is checked against what the provider's adapter reports: the runner's
own agent statuses and words no adapter emits are warnings (errors under --strict)."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest
from liverunner import cli

from watchrun.agents.providers import PROVIDERS, make_adapter
from watchrun.config import load_config
from watchrun.config.statuses import PROVIDER_STATUSES, RUNNER_STATUSES, STATUS_FAMILIES

ROOT = Path(__file__).parents[1]
PROVIDERS_DIR = ROOT / "runner" / "watchrun" / "agents" / "providers"
FIXTURES = ROOT / "tests" / "fixtures" / "providers"

CLAUDE_REPORTS = ("authenticated, authenticating, compacting, elicitation-complete, "
                  "files-persisted, hook-…, idle, notification, plugin-install, "
                  "prompt-suggestion, rate-limit, requesting, task-…, tool-progress, "
                  "tool-summary; Claude Code's "
                  "`system/status` words are passed through as written, so one not listed "
                  "here counts too")


def runner_status(status: str, provider: str, reports: str) -> str:
    return (f"`{status}` is the runner's own agent status, which never counts: this marker "
            f"waits for a status the {provider} adapter reports ({reports}), so it never ends "
            "a turn")


NO_STATUS = ("the {} adapter reports no status, so this marker never ends a turn; wait for "
             "`output:TEXT` or `event:KIND` instead")


@pytest.mark.parametrize(("provider", "until", "warning"), [
    ("claude", "status:compacting", None),
    ("claude", "status:rate-limit", None),
    ("claude", "status:requesting", None),
    ("claude", "status:task-started", None),
    ("claude", "status:hook-response", None),
    ("mock", "status:compacting", None),
    ("codex", "status:todo", None),
    ("codex", "status:input-requested", None),
    ("codex", "status:plan", None),
    ("codex", "status:config", None),
    ("pi", "status:compacting", None),
    ("codex", "output:running", None),  # (not a status marker)
    ("gemini", "event:status", None),
    ("codex", "status:running",
     runner_status("running", "codex", "config, input-requested, plan, todo")),
    ("pi", "status:stopping", runner_status("stopping", "pi", "compacting")),
    ("claude", "status:disabled", runner_status("disabled", "claude", CLAUDE_REPORTS)),
    ("gemini", "status:idle", runner_status("idle", "gemini", "none")),
    ("claude", "status:idle",
     "`idle` is also the runner's own agent status, which never counts: this marker waits for "
     "claude's `idle` only (a `system/status` with no status: a compaction ended)"),
    ("codex", "status:compacting", "the codex adapter reports no status `compacting`; it "
     "reports: config, input-requested, plan, todo"),
    ("codex", "status:todos", "the codex adapter reports no status `todos`; did you mean "
     "`todo`?"),
    ("pi", "status:compacted", "the pi adapter reports no status `compacted`; did you mean "
     "`compacting`?"),
    ("claude", "status:thinking", "the claude adapter reports no status `thinking` that "
     f"watchrun knows of; it reports: {CLAUDE_REPORTS}"),
    ("gemini", "status:compacting", NO_STATUS.format("gemini")),
    ("opencode", "status:busy", NO_STATUS.format("opencode")),
    ("cursor", "status:done", NO_STATUS.format("cursor")),
    ("copilot", "status:notification", None),  # its system.notification (explore-clis F9)
    ("copilot", "status:done", "the copilot adapter reports no status `done`; it reports: "
     "notification"),
    ("generic", "status:done", NO_STATUS.format("generic")),
])
def test_until_status(tmp_path: Path, provider: str, until: str, warning: str | None) -> None:
    path = tmp_path / "w.yaml"
    path.write_text(f"agents:\n  - name: t\n    provider: {provider}\n"
                    f"    command: [my-cli, '{{prompt}}']\n    until: '{until}'\n")
    result = load_config([path], env={})
    assert result.require().agents[0].until == until
    assert [(d.path, d.message) for d in result.warnings] == (
        [("agents[0].until", warning)] if warning else [])
    assert load_config([path], env={}, strict=True).ok is (warning is None)


def test_validate_warns_and_strict_refuses(tmp_path: Path) -> None:
    (tmp_path / "w.yaml").write_text("agents: [{name: t, provider: codex, until: 'status:idle'}]\n")
    plain = cli("validate", "-c", "w.yaml", cwd=tmp_path)
    assert plain.returncode == 0, plain.stdout + plain.stderr
    assert "warning: agents[0].until: `idle` is the runner's own agent status" in plain.stdout
    strict = cli("validate", "--strict", "-c", "w.yaml", cwd=tmp_path)
    assert strict.returncode == 2
    assert "error: agents[0].until: `idle` is the runner's own agent status" in strict.stdout


def test_the_runner_statuses_are_the_ones_the_runner_writes() -> None:
    """Every `status` the agents package writes itself (`"status": "<word>"` beside `"source":
    "runner"`) is one of RUNNER_STATUSES, and `disabled` is the hub's (`hub_stop.py`)."""
    written = set()
    for path in (ROOT / "runner" / "watchrun" / "agents").glob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Dict):
                pairs = {k.value: v.value for k, v in zip(node.keys, node.values, strict=True)
                         if isinstance(k, ast.Constant) and isinstance(v, ast.Constant)}
                if pairs.get("source") == "runner" and "status" in pairs:
                    written.add(pairs["status"])
    assert written <= set(RUNNER_STATUSES) and written >= {"running", "idle", "stopping"}
    assert '"disabled"' in (ROOT / "runner/watchrun/agents/hub_stop.py").read_text()


MODULES = {"claude": ["claude.py", "claude_notices.py"],
           "mock": ["claude.py", "claude_notices.py"], "codex": ["codex.py", "codex_legacy.py"]}


def literal_statuses(provider: str) -> tuple[set[str], bool]:
    """The `status=` words of `observation("status", ...)` calls in the provider's modules, and
    whether one of them is not a literal (a word passed through)."""
    words, passed = set(), False
    for name in MODULES.get(provider, [f"{provider}.py"]):
        for node in ast.walk(ast.parse((PROVIDERS_DIR / name).read_text())):
            if (isinstance(node, ast.Call) and getattr(node.func, "id", None) == "observation"
                    and node.args and isinstance(node.args[0], ast.Constant)
                    and node.args[0].value == "status"):
                (value,) = [k.value for k in node.keywords if k.arg == "status"]
                if isinstance(value, ast.Constant):
                    words.add(value.value)
                else:
                    passed = True
    return words, passed


@pytest.mark.parametrize("provider", sorted(PROVIDERS))
def test_the_table_is_what_each_adapter_emits(provider: str) -> None:
    """The words each adapter's code writes as a literal are its table's; a provider whose
    adapter passes words through (claude's `system/status`, `task_*`/`hook_*`) is the only one
    with families or words beyond its literals."""
    words, passed = literal_statuses(provider)
    table = PROVIDER_STATUSES[provider]
    assert words <= table
    assert passed is (provider in ("claude", "mock"))
    if not passed:
        assert table == words
        assert not STATUS_FAMILIES.get(provider)


def test_every_status_in_the_fixtures_is_in_the_table() -> None:
    """Run every provider fixture through its adapter: each `status` it reports counts."""
    seen: dict[str, set[str]] = {}
    for folder in FIXTURES.iterdir():
        if not folder.is_dir():
            continue
        for path in folder.glob("*.jsonl"):
            adapter = make_adapter(folder.name)
            for line in path.read_text().splitlines():
                for obs in adapter.parse(line):
                    if obs.kind == "status":
                        seen.setdefault(folder.name, set()).add(obs.fields["status"])
    assert seen["claude"] >= {"requesting", "rate-limit", "task-started"}
    for provider, statuses in seen.items():
        for status in statuses:
            assert status in PROVIDER_STATUSES[provider] or any(
                status.startswith(f) for f in STATUS_FAMILIES.get(provider, ())), (
                provider, status)
