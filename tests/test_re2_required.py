"""google-re2 is required for redaction, which has no fallback engine (a config's own patterns
run over every line): without it, or with one that cannot be loaded, a config that redacts
(`output.redact`, `redact:` rules, the values of its `${VAR}`s; an agent's prompts and an
action's bodies always are) is refused in one line that
names the package and how to install it, exit 3; it was `No module named 're2'`, and a
traceback from `validate`. Matching itself still falls back to the other engines."""

from __future__ import annotations

import json
import os
import site
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
REQUIRED = ("google-re2 is required for redaction (output.redact, redact: rules, the values of "
            "a config's ${VAR}s, agents' prompts, actions' bodies), which runs only on RE2's "
            "linear-time engine, and it ")
HOW = ": pip install google-re2 (wheels for Linux with glibc on x86_64 and aarch64; elsewhere "
CONFIGS = {
    "interpolates": "watchers:\n  - id: cmd\n    command: \"echo ERROR here ${HOME}\"\n"
                    "    pattern: ERROR\n",
    "redact-rule": "redact:\n  - {kind: ticket, pattern: 'TICKET-[0-9]+'}\n"
                   "watchers:\n  - {id: cmd, command: echo ERROR here, pattern: ERROR}\n",
    "output-redact": "output: {redact: true}\n"
                     "watchers:\n  - {id: cmd, command: echo ERROR here, pattern: ERROR}\n",
    "agent": "watchers:\n  - {id: cmd, command: echo ERROR here, pattern: ERROR, wake: [t]}\n"
             "agents:\n  - {name: t, provider: mock}\n",
    "action": "watchers:\n  - id: cmd\n    command: echo ERROR here\n    pattern: ERROR\n"
              "    actions: [{type: exec, name: x, command: [\"true\"]}]\n",
}


def watchrun(cwd: Path, path: list[Path], *args: str,
             flags: tuple[str, ...] = ()) -> subprocess.CompletedProcess[str]:
    """`python [flags] -m watchrun ARGS` with `path` first on the module path (then this tree's
    code, then the suite's PYTHONPATH)."""
    paths = [*map(str, path), str(ROOT / "runner"), os.environ.get("PYTHONPATH", "")]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in paths if p),
           "WATCHRUN_CACHE_DIR": str(cwd / "cache")}
    return subprocess.run([sys.executable, *flags, "-m", "watchrun", *args], cwd=cwd, env=env,
                          capture_output=True, text=True, timeout=60, check=False)


def said_in_one_line(done: subprocess.CompletedProcess[str], why: str, run: bool = True) -> None:
    """The one line, exit 3: a run's `could not start`, validate's and config's `cannot check
    the config` (docs/cli.md)."""
    assert done.returncode == 3, done.stdout + done.stderr
    assert "Traceback" not in done.stderr and "invalid config" not in done.stderr
    said = "could not start" if run else "cannot check the config"
    line = f"watchrun: error: {said}: {REQUIRED}{why}{HOW}"
    assert [ln for ln in done.stderr.splitlines() if ln.startswith(line)], done.stderr


@pytest.mark.parametrize("command", [["validate"], ["run", "--once"], ["config"]])
@pytest.mark.parametrize("config", ["interpolates", "redact-rule"])
def test_an_re2_that_cannot_be_loaded_is_said_with_the_package_and_how_to_install_it(
        tmp_path: Path, command: list[str], config: str) -> None:
    shadow = tmp_path / "site"  # (found first on the path: installed, not loadable)
    shadow.mkdir()
    (shadow / "re2.py").write_text(
        'raise ImportError("libre2.so.11: cannot open shared object file")\n')
    (tmp_path / "watch.yaml").write_text(CONFIGS[config])
    done = watchrun(tmp_path, [shadow], *command, "-c", "watch.yaml")
    said_in_one_line(done, "could not be loaded (libre2.so.11: cannot open shared object file)",
                     run=command[0] == "run")


@pytest.fixture
def without_re2(tmp_path: Path) -> Path:
    """A module path holding this interpreter's packages but google-re2 (and any watchrun):
    an install where it has no wheel and was left out (`pip install --no-deps`)."""
    farm = tmp_path / "packages"
    farm.mkdir()
    for folder in site.getsitepackages():
        for entry in Path(folder).iterdir():
            name = entry.name.lower()
            if not name.startswith(("re2", "_re2", "google_re2", "watchrun", "__editable__")) \
                    and not name.endswith(".pth") and not (farm / entry.name).exists():
                (farm / entry.name).symlink_to(entry)
    return farm


def test_validate_json_says_it_in_the_error_document(tmp_path: Path) -> None:
    shadow = tmp_path / "site"
    shadow.mkdir()
    (shadow / "re2.py").write_text('raise ImportError("no libre2")\n')
    (tmp_path / "watch.yaml").write_text(CONFIGS["interpolates"])
    done = watchrun(tmp_path, [shadow], "validate", "--json", "-c", "watch.yaml")
    assert done.returncode == 3, done.stderr
    error = json.loads(done.stdout)["error"]
    assert error["code"] == "check_failed"
    assert error["message"].startswith(f"cannot check the config: {REQUIRED}could not be "
                                       f"loaded (no libre2){HOW}")


@pytest.mark.parametrize("config", ["interpolates", "output-redact", "agent", "action"])
def test_without_re2_a_config_that_redacts_is_refused_and_one_that_does_not_runs(
        tmp_path: Path, without_re2: Path, config: str) -> None:
    (tmp_path / "watch.yaml").write_text(CONFIGS[config])
    # (-S: no site-packages but the packages listed)
    done = watchrun(tmp_path, [without_re2], "run", "--once", "-c", "watch.yaml", flags=("-S",))
    said_in_one_line(done, "is not installed")
    (tmp_path / "plain.yaml").write_text(
        "watchers:\n  - {id: cmd, command: echo ERROR here, pattern: ERROR}\n")
    plain = watchrun(tmp_path, [without_re2], "run", "--once", "-c", "plain.yaml",
                     flags=("-S",))
    assert plain.returncode == 0, plain.stderr
