"""contrib/ci and the pre-commit hook, exercised: the GitHub workflow's and the GitLab job's
commands run against the sample project; the hook's entry runs as pre-commit would run it."""

from __future__ import annotations

import json
import os
import re
import shlex
import shutil
import subprocess
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any

import pytest
import yaml
from inproc import inproc
from liverunner import watchrun_bin
from packaging.requirements import Requirement

ROOT = Path(__file__).resolve().parents[1]
CI = ROOT / "contrib" / "ci"
SAMPLE = CI / "sample"
TIMEOUT_S = 60


def env_for(repo: Path, **extra: str) -> dict[str, str]:
    """A CI-like environment: the venv's `watchrun` first on PATH, no outer CI variables."""
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("GITHUB_", "RUNNER_", "GITLAB_", "SAMPLE_")) and k != "CI"}
    env["PATH"] = f"{Path(watchrun_bin()).parent}{os.pathsep}{env.get('PATH', '')}"
    return {**env, "CI": "true", **extra}


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    """A fresh checkout of the sample project (no .watchrun/, no logs/)."""
    dest = tmp_path / "repo"
    shutil.copytree(SAMPLE, dest)
    assert not (dest / ".watchrun").exists() and not (dest / "logs").exists()
    return dest


def workflow() -> dict[Any, Any]:
    doc: dict[Any, Any] = yaml.safe_load((CI / "github-actions.yml").read_text())
    return doc


def gate_command(lines: list[str]) -> str:
    (cmd,) = [c for c in lines if c.startswith("watchrun run --once")]
    return cmd


def junit_arg(cmd: str) -> str:
    argv = shlex.split(cmd)
    return argv[argv.index("--junit") + 1]


def run_lines(lines: list[str], repo: Path, env: dict[str, str],
              shell: list[str]) -> subprocess.CompletedProcess[str]:
    """Run a job's script lines in order, as the CI's shell does, stopping at the first failure."""
    result: subprocess.CompletedProcess[str] | None = None
    for line in lines:
        result = subprocess.run([*shell, line], cwd=repo, env=env, capture_output=True,
                                text=True, timeout=TIMEOUT_S, check=False)
        if result.returncode != 0:
            break
    assert result is not None
    return result


PIN = "COMMIT"
"""What every install line pins until a release is tagged (README "Installing": a commit)."""


def assert_installs_a_commit(line: str, url_prefix: str) -> None:
    """The install line names something that exists: watchrun's repository at a commit (OWNER
    and COMMIT are the placeholders README says to replace), not an unpublished `pip install
    watchrun` nor a tag that was never made."""
    argv = shlex.split(line)
    assert argv[:4] == ["python", "-m", "pip", "install"] and len(argv) == 5
    req = Requirement(argv[4])
    assert req.name == "watchrun" and req.url is not None
    assert req.url.startswith(url_prefix)
    assert req.url.removeprefix(url_prefix).removesuffix(".tar.gz") == PIN


def test_every_documented_install_pins_a_commit_until_a_release_is_tagged() -> None:
    """No release tag exists yet: README, contrib/ and the hook file pinned `@v0.1.0`, so every
    documented install failed (`pathspec 'v0.1.0' did not match`). Each pins COMMIT, which
    README says how to fill in."""
    found = []
    for path in [ROOT / "README.md", ROOT / ".pre-commit-hooks.yaml",
                 *(p for p in sorted((ROOT / "contrib").rglob("*")) if p.is_file())]:
        for m in re.finditer(r"github\.com/OWNER/watchrun(?:@|/archive/(?:refs/tags/)?)"
                             r"([^\s\"']+?)(?:\.tar\.gz)?[\s\"']|^[\s#]*rev: *(\S+)",
                             path.read_text(), re.M):
            found.append((str(path.relative_to(ROOT)), m.group(1) or m.group(2)))
    assert {p for p, _ in found} == {"README.md", ".pre-commit-hooks.yaml",
                                     "contrib/ci/github-actions.yml", "contrib/ci/gitlab-ci.yml",
                                     "contrib/systemd/watchrun.service"}
    assert [(p, ref) for p, ref in found if ref != PIN] == []
    readme = " ".join((ROOT / "README.md").read_text().split())
    assert "`COMMIT` stands for a full commit hash" in readme


# -- GitHub Actions -----------------------------------------------------------------------------
def github_run_lines() -> list[str]:
    """The workflow's `run:` steps that the sample can run here (not the install step)."""
    steps = workflow()["jobs"]["build"]["steps"]
    return [s["run"] for s in steps if "run" in s and "pip install" not in s["run"]]


def test_the_workflow_is_well_formed() -> None:
    wf = workflow()
    assert set(wf[True]) == {"push", "pull_request"}  # YAML 1.1 reads the `on:` key as True
    steps = wf["jobs"]["build"]["steps"]
    assert steps[0]["uses"].startswith("actions/checkout@")
    (install,) = [s["run"] for s in steps if "pip install" in s.get("run", "")]
    assert_installs_a_commit(install, "git+https://github.com/OWNER/watchrun@")
    (gate,) = [s for s in steps if s.get("run", "").startswith("watchrun run --once")]
    assert "continue-on-error" not in gate  # the exit status fails the job
    (upload,) = [s for s in steps if s.get("uses", "").startswith("actions/upload-artifact@")]
    assert upload["if"] == "always()" and upload["with"]["include-hidden-files"] is True
    assert junit_arg(gate["run"]) in upload["with"]["path"].split()
    assert ".watchrun/watchers/" in upload["with"]["path"].split()


def test_the_workflow_passes_on_the_sample_project(repo: Path) -> None:
    summary = repo.parent / "step-summary.md"
    env = env_for(repo, GITHUB_ACTIONS="true", GITHUB_STEP_SUMMARY=str(summary),
                  GITHUB_WORKSPACE=str(repo))
    r = run_lines(github_run_lines(), repo, env, ["bash", "--noprofile", "--norc", "-eo",
                                                   "pipefail", "-c"])
    assert r.returncode == 0, r.stdout + r.stderr
    out = r.stdout.splitlines()
    assert out[0].startswith("::stop-commands::") and "3 tests passed" in out
    assert "watchrun: passed: all 2 gates hold" in out
    assert not [ln for ln in out if ln.startswith(("::error", "::warning"))]
    assert "| `server-log` | 0 | 0 | - | ✅ pass |" in summary.read_text()
    report = ET.parse(repo / junit_arg(gate_command(github_run_lines()))).getroot()
    assert (report.get("tests"), report.get("failures"), report.get("errors")) == ("2", "0", "0")
    assert (repo / ".watchrun" / "watchers" / "build.jsonl").stat().st_size > 0


@pytest.mark.parametrize(("knob", "annotation"), [
    ("SAMPLE_WARN", "::error title=watchrun gate build::1 match of /warning:|deprecated/ (at "
     "most 0 allowed)%0Arun 1:2: src/main.c:12:9: warning: unused variable 'retries' "
     "[-Wunused-variable]"),
    ("SAMPLE_ERROR", "::error file=logs/server.log,line=3,title=watchrun gate server-log::1 match"
     " of /ERROR|FATAL|Traceback/ (at most 0 allowed)%0Alogs/server.log:3: 2026-05-16T12:00:02Z "
     "ERROR db: connection refused (retrying)"),
    ("SAMPLE_FAIL", "::error title=watchrun gate build::the command exited with code 1"),
])
def test_the_workflow_fails_with_an_annotation_when_a_gate_is_crossed(
        repo: Path, knob: str, annotation: str) -> None:
    env = env_for(repo, GITHUB_ACTIONS="true", GITHUB_WORKSPACE=str(repo), **{knob: "1"})
    r = run_lines(github_run_lines(), repo, env, ["bash", "--noprofile", "--norc", "-eo",
                                                   "pipefail", "-c"])
    assert r.returncode == 1, r.stdout + r.stderr
    assert annotation in r.stdout.splitlines()


# -- GitLab CI ----------------------------------------------------------------------------------
def test_the_gitlab_job_runs_on_the_sample_project(repo: Path) -> None:
    job = yaml.safe_load((CI / "gitlab-ci.yml").read_text())["watchrun-gate"]
    (install,) = [ln for ln in job["before_script"] if "pip install" in ln]
    assert_installs_a_commit(install, "https://github.com/OWNER/watchrun/archive/")
    cmd = gate_command(job["script"])
    assert job["artifacts"]["when"] == "always"
    assert job["artifacts"]["reports"]["junit"] == junit_arg(cmd)
    ok = run_lines(job["script"], repo, env_for(repo, GITLAB_CI="true"), ["sh", "-e", "-c"])
    assert ok.returncode == 0, ok.stdout + ok.stderr
    assert "::stop-commands::" not in ok.stdout  # workflow commands are GitHub's only
    assert ok.stdout.rstrip().endswith("watchrun: passed: all 2 gates hold")
    failing = run_lines(job["script"], repo, env_for(repo, GITLAB_CI="true", SAMPLE_FAIL="1"),
                        ["sh", "-e", "-c"])
    assert failing.returncode == 1, failing.stdout + failing.stderr
    report = ET.parse(repo / junit_arg(cmd)).getroot()
    failure = report.find("testcase[@name='build']/failure")
    assert failure is not None
    assert failure.get("message") == ("the command exited with code 1; required pattern "
                                      "/tests passed/ never appeared")


# -- pre-commit ---------------------------------------------------------------------------------
def hook() -> dict[str, Any]:
    hooks = yaml.safe_load((ROOT / ".pre-commit-hooks.yaml").read_text())
    assert isinstance(hooks, list)
    (only,) = hooks
    assert isinstance(only, dict)
    return only


def run_hook(files: list[Path], cwd: Path) -> subprocess.CompletedProcess[str]:
    """What pre-commit does: the entry, split like a shell would, plus the staged file names."""
    argv = shlex.split(hook()["entry"])
    assert argv[0] == "watchrun"
    return subprocess.run([watchrun_bin(), *argv[1:], *(str(f) for f in files)], cwd=cwd,
                          capture_output=True, text=True, timeout=TIMEOUT_S, check=False)


def test_the_pre_commit_hook_is_declared_for_python() -> None:
    h = hook()
    assert (h["id"], h["language"], h.get("pass_filenames", True)) == (
        "watchrun-validate", "python", True)
    assert h["entry"] == "watchrun validate --each"  # the file names follow as FILE…


@pytest.mark.parametrize(("path", "checked"), [
    ("watch.yaml", True), ("ci/watch.ci.yaml", True), ("deploy/watch-prod.yml", True),
    ("watch.toml", True), ("watch.json", True), (".watchrun.yaml", True),
    ("watchrun.yml", True), ("stopwatch.yaml", False), ("watchdog.yaml", False),
    ("docker-compose.yaml", False), ("watch.yaml.example", False), ("watch.py", False),
    # README has you keep these in your repository; validate refused them, failing each commit
    (".github/watchrun-problem-matcher.json", False), ("schemas/watch.schema.json", False),
    (".vscode/watch.schema.json", False), ("watch.schema.yaml", True),
    # the names README lists, and the one it says is not taken
    ("watch-ci.yaml", True), ("watch.prod.yml", True), ("watchrun.json", True),
    (".watchrun.toml", True), ("watch_ci.yaml", False),
    # README: `watch` or `watchrun` with an optional leading dot (only `.watchrun` was taken)
    (".watch.yaml", True), ("ci/.watch-prod.yml", True), (".watchdog.yaml", False),
])
def test_the_hook_checks_watchrun_config_names(path: str, checked: bool) -> None:
    assert picked(path) is checked


def picked(path: str) -> bool:
    h = hook()
    return re.search(h["files"], path) is not None and not re.search(h["exclude"], path)


def test_the_hook_takes_the_names_readme_lists_and_the_ones_run_finds() -> None:
    """README's pre-commit names are taken and its "not" names are not; so is every name `run`
    looks for without `-c`, also hidden (a leading dot)."""
    from watchrun.cli.discover import NAMES

    readme = (ROOT / "README.md").read_text()
    bullet = readme.split("* **pre-commit**", 1)[1].split("each file on", 1)[0]
    taken, refused = bullet.split("; not", 1)
    names = re.findall(r"`([^`]+\.(?:ya?ml|json|toml))`", taken)
    assert ".watch.yaml" in names and ".watchrun.toml" in names
    assert [n for n in [*names, *NAMES, *(f".{n}" for n in NAMES)] if not picked(n)] == []
    others = [n.replace("*", "watch") for n in re.findall(r"`([^`]+\.json|[^`]+\.yaml)`", refused)]
    assert others and [n for n in others if picked(n)] == []


def test_the_hook_passes_valid_files_and_names_the_location_of_errors(tmp_path: Path) -> None:
    shutil.copy(SAMPLE / "watch.ci.yaml", tmp_path / "watch.ci.yaml")
    (tmp_path / "watch.yaml").write_text("watchers:\n  - id: a\n    command: make\n"
                                         "    pattern: x\n")
    ok = run_hook([Path("watch.ci.yaml"), Path("watch.yaml")], tmp_path)
    assert ok.returncode == 0, ok.stdout + ok.stderr
    assert "watch.ci.yaml: valid" in ok.stdout and "watch.yaml: valid" in ok.stdout
    (tmp_path / "watch-bad.yaml").write_text("watchers:\n  - id: b\n    command: make\n"
                                             "    patern: x\n")
    bad = run_hook([Path("watch.yaml"), Path("watch-bad.yaml")], tmp_path)
    assert bad.returncode == 2, bad.stdout + bad.stderr
    assert "watch-bad.yaml:4:5" in bad.stdout and "did you mean `pattern`?" in bad.stdout
    assert "watch.yaml: valid" in bad.stdout  # the good file is still reported on its own


def test_each_file_is_validated_on_its_own_not_layered(tmp_path: Path) -> None:
    (tmp_path / "watch.a.yaml").write_text("watchers:\n  - id: w\n    command: make\n"
                                           "    pattern: x\n")
    (tmp_path / "watch.b.yaml").write_text("watchers:\n  - id: w\n    path: app.log\n"
                                           "    pattern: x\n")
    files = [tmp_path / "watch.a.yaml", tmp_path / "watch.b.yaml"]
    each = run_hook(files, tmp_path)
    assert each.returncode == 0, each.stdout + each.stderr
    assert re.search(r"watch\.a\.yaml: valid .*\n  watcher w +command +make", each.stdout)
    assert re.search(r"watch\.b\.yaml: valid .*\n  watcher w +file ", each.stdout)
    layered = subprocess.run([watchrun_bin(), "validate", "-c", *map(str, files)],
                             capture_output=True, text=True, timeout=TIMEOUT_S, check=False)
    assert " + " in layered.stdout and "command" not in layered.stdout  # merged by id: one `w`
    each_json = subprocess.run([watchrun_bin(), "validate", "--each", "--json", "-c",
                                *map(str, files)], capture_output=True, text=True,
                               timeout=TIMEOUT_S, check=False)
    doc = yaml.safe_load(each_json.stdout)
    docs = doc["results"]
    assert doc["valid"] is True
    assert [(d["files"], d["valid"], d["watchers"][0]["kind"]) for d in docs] == [
        ([str(files[0])], True, "command"), ([str(files[1])], True, "file")]


# -- the README's example is the sample -----------------------------------------------------------
def readme_blocks(heading: str) -> list[str]:
    text = (ROOT / "README.md").read_text()
    start = text.index(f"\n{heading}\n")
    end = text.find("\n## ", start + 1)
    section = text[start: end if end >= 0 else len(text)]
    return re.findall(r"```ya?ml\n(.*?)```", section, re.S)


def test_the_readme_ci_section_shows_the_sample_config_and_workflow() -> None:
    text = (ROOT / "README.md").read_text()
    assert text.index("\n## Running it\n") < text.index("\n## Gate your CI on log patterns\n")
    blocks = [yaml.safe_load(b) for b in readme_blocks("## Gate your CI on log patterns")]
    assert yaml.safe_load((SAMPLE / "watch.ci.yaml").read_text()) in blocks
    assert workflow() in blocks


def test_the_readme_try_it_locally_line_prints_what_the_readme_shows(repo: Path) -> None:
    """Step 3 of the README's CI section, run as written (from the repository root, so the
    `cd` is made relative to a copy of the repository holding the sample): exit 1, the build's
    echo, then exactly the verdict the README prints."""
    text = (ROOT / "README.md").read_text()
    section = text[text.index("**3.** Try it locally"):text.index("Good to know:")]
    line, shown = re.findall(r"```(?:sh)?\n(.*?)```", section, re.S)
    checkout = repo.parent / "checkout"
    (checkout / "contrib" / "ci").mkdir(parents=True)
    repo.rename(checkout / "contrib" / "ci" / "sample")
    r = subprocess.run(["sh", "-c", line.strip()], cwd=checkout, env=env_for(checkout),
                       capture_output=True, text=True, timeout=TIMEOUT_S, check=False)
    assert r.returncode == 1, r.stdout + r.stderr
    echo, verdict = r.stdout.split("WATCHER", 1)
    assert "src/main.c:12:9: warning: unused variable 'retries'" in echo
    assert "WATCHER" + verdict == shown


# -- validate's annotations and the problem matcher -----------------------------------------------
BAD_CONFIG = ("limits: {pollMs: 5}\nwatchers:\n  - id: a\n    path: app.log\n"
              "    pattern: '(ab'\n    patern: x\n  - id: b\n    command: make\n"
              "    pattern: x\n    \"50%\\nnew::error::forged\": 1\n")


def validate_in(cwd: Path, config: str, **env: str) -> subprocess.CompletedProcess[str]:
    """`watchrun validate` in this process (tests/inproc.py; the hook and the workflow above
    run the console script itself), with `env` as the whole environment."""
    clean = {k: v for k, v in os.environ.items() if not k.startswith("GITHUB_")}
    return inproc(cwd, "validate", "-c", config, env={**clean, **env})


def json_diagnostics(cwd: Path, config: str) -> list[dict[str, Any]]:
    p = inproc(cwd, "validate", "--format", "json", "-c", config)
    diagnostics: list[dict[str, Any]] = yaml.safe_load(p.stdout)["diagnostics"]
    return diagnostics


def test_validate_under_github_actions_annotates_the_file_line_and_column(tmp_path: Path) -> None:
    (tmp_path / "ci").mkdir()
    (tmp_path / "ci" / "watch.yaml").write_text(BAD_CONFIG)
    p = validate_in(tmp_path / "ci", "watch.yaml", GITHUB_ACTIONS="true",
                    GITHUB_WORKSPACE=str(tmp_path))
    assert p.returncode == 2
    notes = [ln for ln in p.stdout.splitlines() if ln.startswith("::")]
    assert notes[:3] == [
        "::warning file=ci/watch.yaml,line=1,col=10,title=watchrun validate::limits.pollMs: "
        "5 clamped to 10 (allowed 10–60000)",  # noqa: RUF001
        "::error file=ci/watch.yaml,line=5,col=5,title=watchrun validate::watchers[0].pattern: "
        'invalid regex "(ab": missing ), unterminated subpattern at position 0',
        "::error file=ci/watch.yaml,line=6,col=5,title=watchrun validate::watchers[0].patern: "
        "unknown key `patern`; did you mean `pattern`?"]
    # a key with a newline and a percent sign cannot start a workflow command of its own
    assert len(notes) == 4 and "%25" in notes[3] and "\\n" in notes[3]
    assert not [ln for ln in p.stdout.splitlines() if ln.startswith("new::")]
    plain = validate_in(tmp_path / "ci", "watch.yaml")
    assert plain.returncode == 2 and "::" not in "".join(
        ln[:2] for ln in plain.stdout.splitlines())  # no workflow commands off GitHub


def test_a_once_run_with_an_invalid_config_annotates_it_too(tmp_path: Path) -> None:
    """`run --once` under GitHub Actions with the same config exited 2 with the errors on its
    log only: the job's annotations showed nothing. It annotates them as `validate` does."""
    (tmp_path / "ci").mkdir()
    (tmp_path / "ci" / "watch.yaml").write_text(BAD_CONFIG)
    for extra in ([], ["--json"]):
        p = subprocess.run([watchrun_bin(), "run", "--once", "-c", "watch.yaml", *extra],
                           cwd=tmp_path / "ci", capture_output=True, text=True, check=False,
                           timeout=TIMEOUT_S, env={**os.environ, "GITHUB_ACTIONS": "true",
                                                   "GITHUB_WORKSPACE": str(tmp_path)})
        assert p.returncode == 2, p.stdout + p.stderr
        notes = [ln for ln in p.stderr.splitlines() if ln.startswith("::")]
        assert "::error file=ci/watch.yaml,line=5,col=5,title=watchrun config::watchers[0]." \
            'pattern: invalid regex "(ab": missing ), unterminated subpattern at position 0' \
            in notes, p.stderr
        assert not [ln for ln in p.stdout.splitlines() if ln.startswith("::")]


def test_a_config_outside_the_workspace_is_annotated_without_a_file(tmp_path: Path) -> None:
    (tmp_path / "watch.yaml").write_text(BAD_CONFIG)
    p = validate_in(tmp_path, "watch.yaml", GITHUB_ACTIONS="true",
                    GITHUB_WORKSPACE=str(tmp_path / "elsewhere"))
    notes = [ln for ln in p.stdout.splitlines() if ln.startswith("::")]
    assert notes and all(ln.startswith(("::error title=", "::warning title=")) for ln in notes)


def test_json_output_stays_json_under_github_actions(tmp_path: Path) -> None:
    (tmp_path / "watch.yaml").write_text(BAD_CONFIG)
    p = subprocess.run([watchrun_bin(), "validate", "--format", "json", "-c", "watch.yaml"],
                       cwd=tmp_path, env={**os.environ, "GITHUB_ACTIONS": "true"},
                       capture_output=True, text=True, timeout=TIMEOUT_S, check=False)
    assert yaml.safe_load(p.stdout)["errors"] == 3


Problem = tuple[str, int | None, int | None, str, str]


def matched_problems(output: str) -> list[Problem]:
    """What GitHub makes of `output` with the problem matcher registered: it applies the
    matcher's regexp (JavaScript syntax; this one is also Python's) to each line, and every
    match is one annotation (file, line, column, severity, message)."""
    doc = json.loads((CI / "watchrun-problem-matcher.json").read_text())
    (matcher,) = doc["problemMatcher"]
    (pattern,) = matcher["pattern"]
    rx = re.compile(pattern["regexp"])
    found: list[Problem] = []
    for line in output.splitlines():
        m = rx.match(line)
        if m:
            g = {k: m.group(v) for k, v in pattern.items() if k != "regexp"}
            found.append((g["file"], g["line"] and int(g["line"]),
                          g["column"] and int(g["column"]), g["severity"], g["message"]))
    return found


def test_the_problem_matcher_reads_real_validate_output(tmp_path: Path) -> None:
    """Every diagnostic validate prints must come out with its file, line, column, severity and
    message, and nothing else may match."""
    (tmp_path / "watch.yaml").write_text(BAD_CONFIG)
    (tmp_path / "broken.yaml").write_text("watchers: [\n")
    for name in ("watch.yaml", "broken.yaml", "missing.yaml", "good.yaml"):
        if name == "good.yaml":
            shutil.copy(SAMPLE / "watch.ci.yaml", tmp_path / name)
        p = validate_in(tmp_path, name)
        found = matched_problems(p.stdout)
        expected = [(d["file"], d.get("line"), d.get("column"), d["severity"],
                     (f"{d['path']}: {d['message']}" if d["path"] else d["message"]).replace(
                         "\n", "\\n"))  # printed with the control character escaped
                    for d in json_diagnostics(tmp_path, name)]
        assert found == expected, p.stdout
        assert (len(found) > 0) == (name != "good.yaml")


def once_run(cwd: Path, config: str, **env: str) -> subprocess.CompletedProcess[str]:
    """`watchrun run --once` as a CI step runs it: no TTY, outside GitHub Actions' reach."""
    return subprocess.run([watchrun_bin(), "run", "--once", "-c", config], cwd=cwd,
                          env=env_for(cwd, **env), capture_output=True, text=True,
                          timeout=TIMEOUT_S, check=False)


def test_the_problem_matcher_annotates_a_once_run_s_warning_once(repo: Path) -> None:
    """A gate-crossing compiler warning was annotated three times: the echoed compiler line, and
    the verdict's `    run 1:2: src/main.c…` and the log's `<time> watchrun: [build] match run
    1:2: src/main.c…` as files of those names. Only the compiler's own line is a problem."""
    subprocess.run(["sh", "smoke.sh"], cwd=repo, capture_output=True, timeout=TIMEOUT_S,
                   check=True)
    p = once_run(repo, "watch.ci.yaml", SAMPLE_WARN="1")
    assert p.returncode == 1, p.stdout + p.stderr
    assert "match run 1:2: src/main.c:12:9: warning" in p.stderr  # the log still says it
    assert matched_problems(p.stdout + p.stderr) == [
        ("src/main.c", 12, 9, "warning", "unused variable 'retries' [-Wunused-variable]")]


def test_a_once_run_with_an_invalid_config_prints_validate_s_lines(tmp_path: Path) -> None:
    """Without a TTY the log's lines were `<time> watchrun: error: … (watch.yaml:5:5)`: the
    matcher made a file named `<time> watchrun` of each, with no line. A once run now prints
    validate's `file:line:col: severity: …` lines, so each problem is one annotation on its
    file, exactly as validate's."""
    (tmp_path / "watch.yaml").write_text(BAD_CONFIG)
    p = once_run(tmp_path, "watch.yaml")
    assert p.returncode == 2, p.stdout + p.stderr
    assert "watch.yaml:5:5: error: watchers[0].pattern: invalid regex" in p.stderr
    assert "invalid config; nothing was started" in p.stderr
    validated = matched_problems(validate_in(tmp_path, "watch.yaml").stdout)
    assert matched_problems(p.stderr) == validated and len(validated) == 4


def test_the_readme_s_container_validate_names_the_file_as_in_the_checkout(tmp_path: Path) -> None:
    """README's `docker run … validate -c /work/watch.yaml` printed `/work/watch.yaml:4:5: …`:
    the matcher passed a container path, no file of the workspace, and nothing was marked. Run
    as README now says (in the mounted checkout, a relative -c), the file is the checkout's."""
    (line,) = [ln for ln in (ROOT / "README.md").read_text().splitlines()
               if ln.startswith("docker run") and " validate " in ln]
    argv = shlex.split(line)
    workdir, config = argv[argv.index("-w") + 1], argv[argv.index("-c") + 1]
    assert f"$PWD:{workdir}:ro" in argv and not os.path.isabs(config)
    (tmp_path / config).write_text(BAD_CONFIG)
    problems = matched_problems(validate_in(tmp_path, config).stdout)  # (cwd: the mount)
    assert problems and {p[0] for p in problems} == {config}


def test_the_workflow_s_header_counts_the_annotations_as_the_run_prints_them(repo: Path) -> None:
    """Its header said one `::error` per crossed gate; 2 crossed gates printed 7 (one per matched
    line shown, one per other reason)."""
    subprocess.run(["sh", "smoke.sh"], cwd=repo, capture_output=True, timeout=TIMEOUT_S,
                   check=True)
    (repo / "logs" / "server.log").write_text("".join(f"ERROR number {i}\n" for i in range(14)))
    p = once_run(repo, "watch.ci.yaml", GITHUB_ACTIONS="true", GITHUB_WORKSPACE=str(repo),
                 SAMPLE_FAIL="1")
    errors = [ln for ln in p.stdout.splitlines() if ln.startswith("::error")]
    shown = [ln for ln in errors if ln.startswith("::error file=logs/server.log,line=")]
    assert p.returncode == 1 and len(shown) == 5 and len(errors) == 7, p.stdout
    header = " ".join(ln.lstrip("# ") for ln in (CI / "github-actions.yml").read_text()
                      .splitlines() if ln.startswith("#"))
    assert "annotation per matched line shown" in header and "one per other reason" in header
    assert "per crossed gate" not in header
