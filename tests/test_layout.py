"""The package layout keeps its dependency arrows (docs/architecture.md): no import runs
against them, there are no import cycles, pyproject lists every package, and the published
schemas/ is the package's."""

from __future__ import annotations

import ast
import os
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PKG = ROOT / "runner" / "watchrun"

BASE = {"events", "clock", "cron", "exitcodes", "inotify", "inotify_watches", "arrivals",
        "notify", "offload", "preads"}
"""Top-level modules every layer may use: the event vocabulary, the clock seam and the cron
schedules on it, exit codes, the kernel's change notification and what waits on it (the
runner's file sources and the CLI's followers share one inotify binding), the worker thread
for blocking calls, and whole reads at an offset (a file system's reads may return fewer bytes)."""

ALLOWED: dict[str, set[str]] = {
    "match": set(),
    "config": {"match"},
    "schemas": set(),  # data: the JSON Schemas, read as package resources (config/schema.py)
    "output": {"match"},
    "process": {"output", "match"},  # state/processes.json is written through output.safefs;
    # a command is shortened for an error by match.sanitize
    "sources": {"config", "match", "output", "process"},
    "agents": {"config", "match", "output", "process"},
    "actions": {"config", "match", "output", "process"},
    "views": {"config", "match", "output", "agents"},
    "runtime": {"config", "match", "output", "process", "sources", "agents", "actions", "views"},
    "tui": {"config", "match", "output", "views"},
    "mcp": {"config", "match", "output", "process", "views", "runtime"},
    "cli": {"config", "match", "output", "process", "sources", "agents", "actions", "views",
            "runtime", "tui", "mcp"},
}
"""Layer -> the layers it may import (besides itself and BASE). The arrows point one way:
cli → tui / mcp → runtime → views/agents/actions/sources → output/process → config → match
(`mcp` embeds a runner for its session, so it sits above `runtime`)."""

ALLOWED_MODULES: dict[str, set[str]] = {"tui": {"watchrun.runtime.client"},
                                         "config": {"watchrun.process.helper_start"}}
"""Single modules a layer may import from a layer it may not: the live screen talks to the
runner through the control socket's client only (it imports no other layer), never through
the supervisor; the `mock` provider's default command is the argv every helper interpreter
is started with (which imports no layer)."""


def _module_name(path: Path) -> str:
    rel = path.relative_to(PKG.parent).with_suffix("")
    parts = list(rel.parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _imports(path: Path) -> list[tuple[str, int]]:
    """Every `watchrun.*` module imported by `path` (top level, lazy or TYPE_CHECKING)."""
    tree = ast.parse(path.read_text("utf-8"))
    found: list[tuple[str, int]] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            if node.module == "watchrun":
                found += [(f"watchrun.{a.name}", node.lineno) for a in node.names]
            elif node.module.startswith("watchrun."):
                found.append((node.module, node.lineno))
        elif isinstance(node, ast.ImportFrom) and node.level:
            found.append(("<relative>", node.lineno))
        elif isinstance(node, ast.Import):
            found += [(a.name, node.lineno) for a in node.names if a.name.startswith("watchrun.")]
    return found


def _layer(module: str) -> str:
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else ""


MODULES = sorted(PKG.rglob("*.py"))


def test_every_module_belongs_to_a_layer() -> None:
    for path in MODULES:
        layer = _layer(_module_name(path))
        assert layer in ALLOWED or layer in BASE or layer in ("", "__main__"), path


@pytest.mark.parametrize("path", MODULES, ids=lambda p: str(p.relative_to(PKG)))
def test_imports_follow_the_arrows(path: Path) -> None:
    me = _module_name(path)
    mine = _layer(me)
    bad = []
    for target, line in _imports(path):
        assert target != "<relative>", f"{path}:{line}: use absolute imports"
        theirs = _layer(target)
        if theirs in BASE or theirs == mine or theirs == "__version__":
            continue
        if target in ALLOWED_MODULES.get(mine, set()):
            continue
        if mine in BASE:
            bad.append(f"{path.name}:{line} imports {target} (base modules import no layer)")
        elif mine in ("", "__main__"):
            continue
        elif theirs not in ALLOWED.get(mine, set()):
            bad.append(f"{path.name}:{line} {mine} → {theirs} ({target})")
    assert not bad, "imports against the arrows:\n" + "\n".join(bad)


def test_the_modules_a_layer_may_borrow_import_only_what_it_may() -> None:
    """A borrowed module brings no layer the borrower could not import itself."""
    for borrower, modules in ALLOWED_MODULES.items():
        for module in modules:
            path = PKG.parent / (module.replace(".", "/") + ".py")
            extra = [t for t, _ in _imports(path)
                     if _layer(t) not in BASE and _layer(t) not in ALLOWED[borrower]]
            assert extra == [], module


def test_the_control_client_loads_no_other_layer() -> None:
    """docs/architecture.md: the screen's one module of `runtime` imports no layer itself, nor
    asyncio, so `watchrun top` and the control commands load none of the runner with it."""
    done = subprocess.run([sys.executable, "-c", "import sys, watchrun.runtime.client; "
                           "print(*sorted(m for m in sys.modules if m.startswith('watchrun')), "
                           "'asyncio' in sys.modules)"],
                          capture_output=True, text=True, check=True, timeout=60)
    assert done.stdout.split() == ["watchrun", "watchrun.runtime", "watchrun.runtime.client",
                                   "False"]


def test_no_import_cycles() -> None:
    graph: dict[str, set[str]] = {}
    names = {_module_name(p) for p in MODULES}
    for path in MODULES:
        deps = set()
        for target, _ in _imports(path):
            # `from watchrun.x import y` may name a submodule y or an attribute of x.
            mod = target if target in names else target.rsplit(".", 1)[0]
            if mod in names:
                deps.add(mod)
        graph[_module_name(path)] = deps - {_module_name(path)}
    state: dict[str, int] = {}
    stack: list[str] = []

    def visit(node: str) -> None:
        state[node] = 1
        stack.append(node)
        for dep in sorted(graph[node]):
            # A package's __init__ importing its own modules is not a cycle of its own.
            if state.get(dep) == 1 and not node.startswith(dep + "."):
                cycle = [*stack[stack.index(dep):], dep]
                raise AssertionError("import cycle: " + " → ".join(cycle))
            if dep not in state:
                visit(dep)
        stack.pop()
        state[node] = 2

    for node in sorted(graph):
        if node not in state:
            visit(node)


def test_pyproject_lists_every_package() -> None:
    config = tomllib.loads((ROOT / "pyproject.toml").read_text("utf-8"))
    listed = set(config["tool"]["setuptools"]["packages"])
    found = {_module_name(p.parent / "__init__.py") for p in PKG.rglob("__init__.py")}
    assert found == listed
    assert config["tool"]["setuptools"]["package-dir"] == {"": "runner"}


def test_a_source_tree_reads_its_own_schemas() -> None:
    """Code run from a tree (`PYTHONPATH=<tree>/runner`) gets that tree's schemas, never those
    of another install: the schemas are package data under runner/, mapped from nowhere else."""
    done = subprocess.run([sys.executable, "-c", "import watchrun.schemas as s; print(s.__file__)"],
                          env={**os.environ, "PYTHONPATH": str(ROOT / "runner")},
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert Path(done.stdout.strip()) == PKG / "schemas" / "__init__.py"


@pytest.mark.parametrize("name", sorted(p.name for p in (PKG / "schemas").glob("*.json")))
def test_the_published_schemas_are_the_packages(name: str) -> None:
    """The top-level schemas/ (SPEC §2, the copy an editor or a raw URL points at) is the
    package's schemas byte for byte; watchrun reads runner/watchrun/schemas/, edit it there."""
    published = ROOT / "schemas" / name
    assert published.exists(), f"schemas/{name} is missing: cp runner/watchrun/schemas/{name} " \
        "schemas/"
    assert published.read_bytes() == (PKG / "schemas" / name).read_bytes(), (
        f"schemas/{name} differs from runner/watchrun/schemas/{name}, the one watchrun reads: "
        "make the change there and copy it to schemas/")


def test_the_published_schemas_are_all_packaged() -> None:
    published = (p.name for p in (ROOT / "schemas").iterdir() if p.name != "__pycache__")
    assert sorted(published) == sorted(p.name for p in (PKG / "schemas").glob("*.json"))  # (a
    # checkout that once held the package there may keep its ignored `__pycache__`)


def test_every_module_says_its_job() -> None:
    for path in MODULES:
        tree = ast.parse(path.read_text("utf-8"))
        if path.name == "__init__.py" and not tree.body:
            continue
        assert ast.get_docstring(tree), f"{path.relative_to(PKG)} has no docstring"


def test_docs_architecture_names_every_module() -> None:
    """"Read this page first": a module it does not name is one a newcomer cannot place. The
    provider adapters are named as a group (`agents/providers/`, one adapter per agent CLI)."""
    text = (ROOT / "docs" / "architecture.md").read_text()
    unnamed = [str(p.relative_to(PKG)) for p in MODULES
               if p.name not in ("__init__.py", "__main__.py") and p.name not in text
               and p.parent.name != "providers"]
    assert unnamed == []
