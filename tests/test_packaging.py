"""Packaging works as written: `python -m build` makes the sdist and the wheel (the wheel from
the sdist), and the Dockerfile's build stage the same wheel out of what it copies; the wheel
installs into a fresh venv with no package index, as the Dockerfile's runtime stage installs
it, and the installed `watchrun` runs the example. The Dockerfile itself is linted (no Docker
engine here)."""

from __future__ import annotations

import json
import os
import re
import shlex
import shutil
import signal
import subprocess
import sys
import tarfile
import venv
import zipfile
from fnmatch import fnmatch
from pathlib import Path

import pytest
from liverunner import read_records, wait_for

from watchrun import __version__
from watchrun.cli.main import build_parser

ROOT = Path(__file__).resolve().parents[1]
IMAGE = f"ghcr.io/OWNER/watchrun:{__version__}"


# -- the Dockerfile ------------------------------------------------------------------------------
def instructions(text: str) -> list[tuple[str, str]]:
    """(INSTRUCTION, arguments) of a Dockerfile: comments dropped, `\\` continuations joined."""
    out: list[tuple[str, str]] = []
    pending = ""
    for raw in text.splitlines():
        line = raw.strip()
        if not pending and (not line or line.startswith("#")):
            continue
        if line.endswith("\\"):
            pending += line[:-1] + " "
            continue
        line, pending = pending + line, ""
        word, _, rest = line.partition(" ")
        out.append((word.upper(), " ".join(rest.split())))
    return out


def stages() -> list[tuple[str, list[tuple[str, str]]]]:
    """(stage name, its instructions) in order."""
    found: list[tuple[str, list[tuple[str, str]]]] = []
    for word, rest in instructions((ROOT / "Dockerfile").read_text()):
        if word == "FROM":
            m = re.fullmatch(r"(\S+) AS (\S+)", rest, re.I)
            assert m, f"every stage is named: FROM {rest}"
            found.append((m.group(2), []))
        elif found:
            found[-1][1].append((word, rest))
    return found


def test_the_dockerfile_is_multi_stage_and_runs_unprivileged() -> None:
    (build_name, build), (run_name, runtime) = stages()
    assert (build_name, run_name) == ("build", "runtime")
    users = [rest for word, rest in runtime if word == "USER"]
    assert users and users[-1].split(":")[0] not in ("0", "root")
    last_user = max(i for i, (word, _) in enumerate(runtime) if word == "USER")
    assert all(word != "RUN" for word, _ in runtime[last_user:])  # nothing runs as root after
    assert re.match(r"\d+$", users[-1].split(":")[0]), "numeric, so runAsNonRoot can check it"
    assert json.loads(dict(runtime)["ENTRYPOINT"]) == ["watchrun"]
    cmd = json.loads(dict(runtime)["CMD"])
    build_parser().parse_args(cmd)  # the default command is a valid watchrun command line
    port = cmd[cmd.index("--metrics") + 1].rpartition(":")[2]
    assert dict(runtime)["EXPOSE"] == port
    install = next(rest for word, rest in runtime if word == "RUN" and "pip install" in rest)
    assert "from=build" in install and "--no-index --find-links /wheels watchrun" in install
    steps = " ".join(rest for word, rest in build if word == "RUN")
    assert "python -m build --wheel --outdir /wheels" in steps
    assert "pip wheel --no-cache-dir --wheel-dir /wheels /wheels/watchrun-*.whl" in steps


def build_context() -> list[str]:
    """The sources the build stage copies (checked against .dockerignore)."""
    (_, build), _ = stages()
    copied = [src for word, rest in build if word == "COPY" for src in rest.split()[:-1]]
    ignore = [ln.strip() for ln in (ROOT / ".dockerignore").read_text().splitlines()
              if ln.strip() and not ln.startswith("#")]
    for src in copied:
        kept = False
        for pattern in ignore:  # last match wins, as in Docker
            if fnmatch(src.rstrip("/"), pattern.lstrip("!").rstrip("/")):
                kept = pattern.startswith("!")
        assert kept and (ROOT / src).exists(), f"{src} is not in the build context"
    return copied


def test_the_image_is_the_one_the_examples_use() -> None:
    assert IMAGE in (ROOT / "Dockerfile").read_text()
    for manifest in ("sidecar.yaml", "daemonset.yaml"):
        assert f"image: {IMAGE}" in (ROOT / "contrib" / "kubernetes" / manifest).read_text()
    assert f"docker build -t {IMAGE} ." in (ROOT / "README.md").read_text()


# -- build, install, run -----------------------------------------------------------------------
def run(*argv: str | Path, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    """`argv`, which must succeed, without the suite's PYTHONPATH: an installed `watchrun`
    runs the installed code, never the source tree the suite imports."""
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    p = subprocess.run([str(a) for a in argv], cwd=cwd, env=env, capture_output=True, text=True,
                       timeout=300)
    assert p.returncode == 0, f"{shlex.join(map(str, argv))}\n{p.stdout}\n{p.stderr}"
    return p


UNTRACKED = shutil.ignore_patterns(".git", ".venv", "__pycache__", "*.egg-info", ".pytest_cache",
                                   ".mypy_cache", ".ruff_cache", ".hypothesis", ".watchrun",
                                   "build", "dist")
"""What a checkout holds besides its sources (.gitignore's names, and .git)."""


def copy_tree(items: list[str], to: Path) -> Path:
    """`items` of the repository copied to `to`, without caches and build outputs."""
    to.mkdir(exist_ok=True)
    for item in items:
        path = ROOT / item
        if path.is_dir():
            shutil.copytree(path, to / item, ignore=UNTRACKED)
        else:
            shutil.copy(path, to / item)
    return to


@pytest.fixture(scope="module")
def dist(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """`python -m build` (the sdist, then the wheel from the sdist) on a copy of the source
    tree, as a release is built; the build backend comes from this environment (no download)."""
    names = os.listdir(ROOT)
    items = sorted(set(names) - UNTRACKED(str(ROOT), names))
    src = copy_tree(items, tmp_path_factory.mktemp("src"))
    out = tmp_path_factory.mktemp("dist")
    said = run(sys.executable, "-m", "build", "--no-isolation", "--outdir", out, src)
    (out / "build.log").write_text(said.stdout + said.stderr)
    return out


def test_the_image_builds_the_released_wheel(dist: Path, tmp_path: Path) -> None:
    """The Dockerfile's build stage (`python -m build --wheel` on what it copies) makes the
    wheel the release makes from its sdist, file for file."""
    src = copy_tree(build_context(), tmp_path / "context")
    run(sys.executable, "-m", "build", "--no-isolation", "--wheel", "--outdir", tmp_path, src)

    def contents(wheel: Path) -> dict[str, bytes]:
        with zipfile.ZipFile(wheel) as zf:
            return {n: zf.read(n) for n in zf.namelist() if not n.endswith("/RECORD")}

    (image,) = tmp_path.glob("*.whl")
    (released,) = dist.glob("*.whl")
    assert contents(image) == contents(released)


def test_the_sdist_and_wheel_carry_the_code_schemas_and_entry_point(dist: Path) -> None:
    (sdist,) = dist.glob(f"watchrun-{__version__}.tar.gz")
    with tarfile.open(sdist) as tar:
        names = set(tar.getnames())
    top = f"watchrun-{__version__}"
    assert {f"{top}/pyproject.toml", f"{top}/README.md", f"{top}/schemas/watch.schema.json",
            f"{top}/runner/watchrun/schemas/watch.schema.json",
            f"{top}/runner/watchrun/cli/main.py"} <= names
    (wheel,) = dist.glob(f"watchrun-{__version__}-py3-none-any.whl")
    with zipfile.ZipFile(wheel) as zf:
        names = set(zf.namelist())
        entry = zf.read(f"watchrun-{__version__}.dist-info/entry_points.txt").decode()
        meta = zf.read(f"watchrun-{__version__}.dist-info/METADATA").decode()
    schemas = {p.name for p in (ROOT / "runner" / "watchrun" / "schemas").glob("*.json")}
    assert {f"watchrun/schemas/{s}" for s in schemas} <= names
    packages = {str(p.relative_to(ROOT / "runner")) for p in (ROOT / "runner" / "watchrun")
                .rglob("*.py") if "__pycache__" not in p.parts}
    assert packages <= names
    assert "watchrun = watchrun.cli:entry" in entry
    assert "Requires-Dist: prometheus-client>=" in meta


def test_the_licence_text_ships_and_the_build_has_no_license_deprecation(dist: Path) -> None:
    """MIT's one condition is that its text goes with every copy: the sdist and the wheel carry
    LICENSE (the wheel's metadata names it), and the build says no license deprecation (the
    `project.license` table stops building after 2027-02-18)."""
    log = (dist / "build.log").read_text()
    said = [ln for ln in log.splitlines() if re.search(r"licen[cs]e", ln, re.I)
            and re.search(r"deprecat", ln, re.I)]
    assert said == [], log
    text = (ROOT / "LICENSE").read_text()
    assert text.startswith("MIT License") and "Copyright (c) 2026 the watchrun developers" in text
    top = f"watchrun-{__version__}"
    with tarfile.open(next(dist.glob("*.tar.gz"))) as tar:
        member = tar.extractfile(f"{top}/LICENSE")
        assert member is not None and member.read().decode() == text
    with zipfile.ZipFile(next(dist.glob("*.whl"))) as zf:
        assert zf.read(f"{top}.dist-info/licenses/LICENSE").decode() == text
        meta = zf.read(f"{top}.dist-info/METADATA").decode()
    assert "License-Expression: MIT" in meta and "License-File: LICENSE" in meta


def test_the_sdist_is_the_source_tree_and_its_tests_run(dist: Path, tmp_path: Path) -> None:
    """A packager (Debian, conda-forge, Nix) builds from the sdist and runs the tests there: it
    holds every file of the tree (git's list, in a checkout), not only tests/test_*.py, and its
    tests run from it."""
    (sdist,) = dist.glob("*.tar.gz")
    top = f"watchrun-{__version__}"
    with tarfile.open(sdist) as tar:
        names = {n.removeprefix(f"{top}/") for n in tar.getnames()}
        tar.extractall(tmp_path, filter="data")
    assert {"tests/conftest.py", "tests/liverunner.py", "watch.yaml.example", "MANIFEST.in",
            "contrib/systemd/watchrun.service", "docs/architecture.md"} <= names
    assert not [n for n in names if "__pycache__" in n or n.endswith(".pyc")]
    if (ROOT / ".git").exists():
        tracked = subprocess.run(["git", "-C", ROOT, "ls-files"], capture_output=True, text=True,
                                 check=True, timeout=60).stdout.split("\n")
        assert sorted(set(filter(None, tracked)) - names) == []
    env = {**os.environ, "PYTHONPATH": str(tmp_path / top / "runner")}
    done = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
                           "-p", "no:xdist", "tests/test_layout.py", "-k", "published"],
                          cwd=tmp_path / top, env=env, capture_output=True, text=True,
                          timeout=300)
    assert done.returncode == 0, done.stdout + done.stderr
    assert " passed" in done.stdout


@pytest.fixture(scope="module")
def installed(dist: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A fresh venv with watchrun installed from the wheel and a wheelhouse, no index: the
    Dockerfile's steps. The wheelhouse is what `pip wheel` collects for the wheel (from pip's
    cache or the registry); the installation itself is offline."""
    (wheel,) = dist.glob("*.whl")
    house = tmp_path_factory.mktemp("wheels")
    shutil.copy(wheel, house)
    run(sys.executable, "-m", "pip", "wheel", "--quiet", "--wheel-dir", house, house / wheel.name)
    env = tmp_path_factory.mktemp("fresh") / "venv"
    venv.EnvBuilder(with_pip=False).create(env)  # this pip installs into it (no 6 s ensurepip)
    run(sys.executable, "-m", "pip", "--python", env / "bin" / "python", "install", "--quiet",
        "--no-index", "--find-links", house, "watchrun")
    return env / "bin"


def test_the_installed_wheel_runs_version_schema_and_validate(installed: Path) -> None:
    assert run(installed / "watchrun", "--version").stdout.strip() == f"watchrun {__version__}"
    schema = json.loads(run(installed / "watchrun", "schema", "config").stdout)
    assert schema["$schema"].startswith("https://json-schema.org/")
    run(installed / "watchrun", "validate", "-c", ROOT / "watch.yaml.example")


def test_the_installed_wheel_runs_the_example(installed: Path, tmp_path: Path) -> None:
    config = tmp_path / "watch.yaml.example"
    config.write_text((ROOT / "watch.yaml.example").read_text())
    err = (tmp_path / "err").open("w")
    env = {k: v for k, v in os.environ.items() if k not in ("VIRTUAL_ENV", "PYTHONPATH")}
    env["PATH"] = f"{installed}{os.pathsep}/usr/bin:/bin"
    proc = subprocess.Popen([installed / "watchrun", "-c", config], cwd=tmp_path, env=env,
                            stdout=subprocess.DEVNULL, stderr=err, start_new_session=True)
    out = tmp_path / ".watchrun"
    try:
        wait_for(lambda: [r for r in read_records(out / "watchers" / "app-log.jsonl")
                          if r["kind"] == "match"], "a match in the demo log")
        finished = wait_for(lambda: [r for r in read_records(out / "agents" / "triage.jsonl")
                                     if r["kind"] == "dispatch-finished"], "the mock agent's turn")
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=30) == 0
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
        err.close()
    assert finished[0]["status"] == "done", (tmp_path / "err").read_text()
