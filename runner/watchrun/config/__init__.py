"""Load, layer, interpolate, validate and resolve config files into the Config model."""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

import msgspec

from watchrun.config.diagnostics import ConfigError, Diagnostic, LoadResult, Reporter
from watchrun.config.tree import CMap, CSeq, KeyPath, Origin

if TYPE_CHECKING:
    from watchrun.config.layering import Dropped

__all__ = ["ConfigError", "Diagnostic", "LoadResult", "load_config"]


def load_config(
    paths: Sequence[Path],
    *,
    env: Mapping[str, str] | None = None,
    output_dir: Path | None = None,
    strict: bool = False,
    cache: bool = False,
    refresh: bool = False,
    engines: bool = False,
) -> LoadResult:
    """Load config files layered in order and validate them; never raises for a user mistake.

    `env` (default `os.environ`) feeds `${VAR}` interpolation; `output_dir` overrides
    `output.dir`; `strict` turns warnings into errors. The result has a Config only when there
    is no error, and every diagnostic (errors and warnings) either way. With `cache`, an
    unchanged config loaded before is not validated again (`config/cache.py`); with `refresh`,
    it is validated in full all the same, and stored when it has no error (`validate`). With
    `engines` (`validate`), a regex no engine `WATCHRUN_ENGINES` allows can run is an error.
    """
    environ = os.environ if env is None else env
    if cache or refresh:
        from watchrun.config.cache import cached_load

        return cached_load(paths, environ, output_dir, strict,
                           lambda e, read: _load(paths, e, output_dir, strict, read, engines),
                           refresh=refresh)
    return _load(paths, environ, output_dir, strict, engines=engines)


def _load(paths: Sequence[Path], env: Mapping[str, str], output_dir: Path | None,
          strict: bool, contents: Sequence[bytes] | None = None,
          engines: bool = False) -> LoadResult:
    """The load of `paths`, of their `contents` when the caller read them (the cache: what it
    keys is what is validated, never a file edited between two reads)."""
    from watchrun.config.checks import Ctx
    from watchrun.config.interpolate import interpolate_tree
    from watchrun.config.layering import layer
    from watchrun.config.loader import read_config_file
    from watchrun.config.schema import check_schema
    from watchrun.config.secrets import known_secrets
    from watchrun.config.validate import build_config, check_engines

    report = Reporter()
    displays = [str(p) for p in paths]
    if not paths:
        report.error((), "no config file given: use -c FILE")
        return LoadResult(None, report.finish(displays, strict))
    folders: dict[str, Path] = {}
    trees: list[CMap] = []
    empty: list[Path] = []
    for k, (path, display) in enumerate(zip(paths, displays, strict=True)):
        folders.setdefault(display, Path(os.path.abspath(path)).parent)
        tree = read_config_file(Path(path), display, report,
                                None if contents is None else contents[k])
        if tree is None:
            continue
        if not tree and len(paths) == 1:
            report.error((), "empty config: the file has no settings (`watchrun init` "
                         "writes a starter config)", Origin(display))
        elif not tree:
            report.warning((), "empty config file: this layer adds nothing", Origin(display))
            empty.append(Path(os.path.abspath(path)))
        elif trees:
            _warn_empty_lists(tree, report)
        trees.append(tree)
    if report.has_errors:
        return LoadResult(None, report.finish(displays, strict))
    root, dropped = layer(trees)
    report.root = root
    _report_dropped(root, dropped, report)
    known = known_secrets(root, env)  # (before interpolation: where each value stands)
    interpolate_tree(root, env, report)
    report.mute_failed_paths()
    check_schema(root, report)
    sources = tuple(Path(os.path.abspath(p)) for p in paths)
    config = build_config(Ctx(root, folders, report), sources, output_dir, known)
    if config is not None and empty:  # (a reload refuses a layer emptied since: runtime/retune)
        config = msgspec.structs.replace(config, empty=tuple(empty))
    unknown = check_engines(config, report) if engines and config is not None else None
    diagnostics = report.finish(displays, strict)
    if unknown is not None:
        diagnostics.append(Diagnostic("", unknown))
    if any(d.severity == "error" for d in diagnostics):
        config = None
    return LoadResult(config, diagnostics, report.homes)


def _warn_empty_lists(tree: CMap, report: Reporter) -> None:
    """A later layer's `watchers: []` or `agents: []`: read as "none of them", it removes
    nothing (a layer adds and changes, docs/config.md)."""
    for key in ("watchers", "agents"):
        value = tree.get(key)
        if isinstance(value, CSeq) and not value:
            report.warning((key,), f"an empty list in a layer removes nothing: a layer adds "
                           f"{key} and changes them, never removes one (to run without one, "
                           "keep it out of the base file; docs/config.md)", tree.origins[key])


def _report_dropped(root: CMap, dropped: list[Dropped], report: Reporter) -> None:
    """A `gate.exitCode` a layer dropped by making its command watcher a file watcher: a
    warning; an error when the gate went with it (a gate written must not vanish silently)."""
    ids = [w.get("id") if isinstance(w, dict) else None for w in root.get("watchers") or ()]
    for drop in dropped:
        at: KeyPath = ("watchers", ids.index(drop.watcher), "gate")
        by = ":".join(str(n) for n in (drop.by.file, drop.by.line, drop.by.column) if n is not None)
        why = (f"a later layer ({by}) makes watcher `{drop.watcher}` a file watcher (`path`), "
               "which has no exit code")
        if drop.emptied:
            report.error(at, f"dropped with `exitCode`, its only condition: {why}; a gate that "
                         "vanished would let every run pass: give it a condition in that layer "
                         "(`gate: {maxMatches: 0}` or `require`), or take it out of the earlier "
                         "file", drop.gate)
        else:
            report.warning((*at, "exitCode"), f"dropped: {why}; the gate keeps its other "
                           "conditions", drop.written)
