"""Handlers of the config commands: `validate`, `config`, `schema` and `init`."""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path
from typing import Any

from watchrun.cli.emit import Out, config_failed
from watchrun.config import LoadResult, load_config
from watchrun.config.diagnostics import Diagnostic
from watchrun.config.model import AgentSpec, Config, WatcherSpec
from watchrun.config.plans import plan_order
from watchrun.exitcodes import ExitStatus
from watchrun.match.optional import Unloadable
from watchrun.match.redact import clean_text
from watchrun.match.sanitize import edge_name, edge_text

__all__ = ["cmd_config", "cmd_init", "cmd_schema", "cmd_validate"]


def printable(text: str) -> str:
    """`text` through the edge sanitizer, so a config cannot restyle a terminal."""
    return edge_text(text)


def _plural(n: int, word: str) -> str:
    return f"{n} {word}{'' if n == 1 else 's'}"


def located(d: Diagnostic) -> str:
    """`watch.yaml:12:5: error: watchers[2].pattern: message`: the compiler form that editors,
    CI problem matchers (contrib/ci/watchrun-problem-matcher.json) and people read."""
    text = f"{d.path}: {d.message}" if d.path else d.message
    where = d.where()
    return f"{where}: {d.severity}: {text}" if where else f"{d.severity}: {text}"


def annotation(d: Diagnostic, workspace: str, title: str = "watchrun validate") -> str:
    """A GitHub workflow command for `d` (`::error file=…,line=…,col=…::…`); the file is given
    relative to `workspace` (the repository root), and left out when it is not inside it."""
    from watchrun.cli.gate_report import escape_data, escape_property

    props = []
    if d.file is not None:
        path = os.path.abspath(d.file)
        if path.startswith(os.path.abspath(workspace).rstrip("/") + "/"):
            props.append(f"file={escape_property(printable(os.path.relpath(path, workspace)))}")
            props += [f"{key}={n}" for key, n in (("line", d.line), ("col", d.column))
                      if n is not None]
    props.append(f"title={escape_property(title)}")
    text = f"{d.path}: {d.message}" if d.path else d.message
    return f"::{d.severity} {','.join(props)}::{escape_data(printable(text))}"


def _load(args: argparse.Namespace, strict: bool = False, engines: bool = False) -> LoadResult:
    from watchrun.sources.orphans import orphan_diagnostics
    from watchrun.views.watchers import added_at_runtime

    result = load_config(args.config, output_dir=args.output_dir, strict=strict, refresh=True,
                         engines=engines)
    if result.config is not None:  # checkpoints no watcher will read (when the dir exists)
        result.diagnostics.extend(orphan_diagnostics(result.config, added_at_runtime))
    return result


def _notes(w: WatcherSpec) -> list[tuple[str, str]]:
    """(key, note) for each of the watcher's regexes that RE2 cannot run."""
    from watchrun.config.validate import regex_engine_note

    regexes = [("pattern", w.pattern)]
    regexes += [(f"exclude[{i}]", x) for i, x in enumerate(w.exclude)]
    if w.gate is not None and w.gate.require is not None:
        regexes.append(("gate.require", w.gate.require))
    notes = [(key, regex_engine_note(rx, w.case_sensitive)) for key, rx in regexes]
    return [(key, note) for key, note in notes if note is not None]


def _engine(w: WatcherSpec) -> str:
    """The matching engine the runner will use for this watcher's pattern."""
    from watchrun.match.matcher import best_engine

    return best_engine(w.pattern, w.case_sensitive)  # (`validate`'s load saw it compile)


def _source(w: WatcherSpec, config: Config) -> str:
    """The path or command line, as `status` shows it (with `output.redact`, redacted)."""
    from watchrun.config.shellwords import command_line

    if w.path is not None:
        return clean_text(str(w.path), config.records_redactor())
    return clean_text(command_line(w.command or ()), config.records_redactor())


def _agent_command(a: AgentSpec, config: Config) -> list[str]:
    return [clean_text(arg, config.records_redactor()) for arg in a.command]


def _summary(config: Config) -> dict[str, Any]:
    return {
        "watchers": [
            {"id": w.id, "kind": w.kind, "label": clean_text(w.label, config.records_redactor()),
             "source": _source(w, config), "wake": list(w.wake), "engine": _engine(w),
             "notes": [{"path": k, "note": n} for k, n in _notes(w)]}
            for w in config.watchers
        ],
        "agents": [
            {"name": a.name, "provider": a.provider, "command": _agent_command(a, config)}
            for a in config.agents
        ],
        "outputDir": str(config.output.dir),
    }


def _validate_doc(args: argparse.Namespace, result: LoadResult) -> dict[str, Any]:
    doc: dict[str, Any] = {
        "valid": result.ok,
        "files": [str(p) for p in args.config],
        "errors": len(result.errors),
        "warnings": len(result.warnings),
        "diagnostics": [d.to_dict() for d in result.diagnostics],
    }
    if result.config is not None:
        doc.update(_summary(result.config))
    return doc


def _validate_each(args: argparse.Namespace) -> int:
    """`validate --each`: every file on its own; JSON is `{"valid", "results": [...]}`, one
    document per file."""
    ones = [argparse.Namespace(**{**vars(args), "config": [p], "each": False})
            for p in args.config]
    if args.format == "json":
        results = [(one, _load(one, strict=args.strict, engines=True)) for one in ones]
        valid = all(r.ok for _, r in results)
        Out(True).doc({"valid": valid, "results": [_validate_doc(o, r) for o, r in results]})
        return ExitStatus.OK if valid else ExitStatus.USAGE
    return max(cmd_validate(one) for one in ones)


def _unchecked(args: argparse.Namespace, exc: ImportError | Unloadable) -> int:
    """A module a check needs would not load (croniter for `schedule:`, a google-re2 that is
    installed and cannot be loaded): one line naming it, or the `--json` error document, exit 3
    (not a traceback and Python's 1, a crossed gate's status), as a run that cannot begin."""
    why = str(exc) if isinstance(exc, Unloadable) else (
        f"a module a check needs would not load ({type(exc).__name__}: {exc}); reinstall "
        "watchrun with its dependencies")
    return Out.for_args(args).fail("check_failed", f"cannot check the config: {why}")


def cmd_validate(args: argparse.Namespace) -> int:
    try:
        return _validate(args)
    except (ImportError, Unloadable) as exc:
        return _unchecked(args, exc)


def _validate(args: argparse.Namespace) -> int:
    if getattr(args, "each", False) and len(args.config) > 1:
        return _validate_each(args)
    result = _load(args, strict=args.strict, engines=True)
    files = " + ".join(str(p) for p in args.config)
    errors, warnings = len(result.errors), len(result.warnings)
    if args.format == "json":
        Out(True).doc(_validate_doc(args, result))
        return ExitStatus.OK if result.ok else ExitStatus.USAGE
    for d in result.diagnostics:
        print(printable(located(d)))
    from watchrun.cli.gate_report import github_workspace, in_github_actions

    if in_github_actions():  # also as annotations, after the plain lines
        workspace = github_workspace()
        for d in result.diagnostics:
            print(annotation(d, workspace))
    if result.config is None:
        print(printable(f"{files}: invalid — {_plural(errors, 'error')}"
                         + (f", {_plural(warnings, 'warning')}" if warnings else "")))
        return ExitStatus.USAGE
    config = result.config
    line = f"{files}: valid — {_plural(len(config.watchers), 'watcher')}, " + _plural(
        len(config.agents), "agent")
    print(printable(line + (f" ({_plural(warnings, 'warning')})" if warnings else "")))
    width = max((len(w.id) for w in config.watchers), default=0)
    width = max([width, *(len(a.name) for a in config.agents)])
    for w in config.watchers:
        source = edge_name(_source(w, config))  # (a tab in a file name shown as `\t`)
        source = source if len(source) <= 72 else source[:71] + "…"
        wake = f"  → wakes {', '.join(w.wake)}" if w.wake else ""
        plan = plan_order(w.wake, {a.name: a.depends_on for a in config.agents})
        wake = f"  → plan {' → '.join(plan)}" if plan else wake
        print(printable(f"  watcher {w.id:<{width}}  {w.kind:<8} {source}{wake}"))
        print(printable(f"      engine: {_engine(w)}"))
        for act in w.actions:  # the origin only: a webhook's path may be its secret
            print(printable(f"      action {act.name}: {act.type} {act.origin()}"))
        for key, note in _notes(w):
            print(printable(f"      {key}: {note}"))
    for a in config.agents:
        print(printable(f"  agent   {a.name:<{width}}  {a.provider:<8} "
                         f"{' '.join(_agent_command(a, config))}"))
    return ExitStatus.OK


def cmd_config(args: argparse.Namespace) -> int:
    from watchrun.config.dump import dump_config

    try:
        result = _load(args)
    except (ImportError, Unloadable) as exc:
        return _unchecked(args, exc)
    if result.config is None:
        return config_failed(Out.for_args(args), result.diagnostics)
    for d in result.diagnostics:
        print(printable(d.format()), file=sys.stderr)
    if args.format == "json":  # the config itself is the document, through the edge
        import json

        Out(True).doc(json.loads(dump_config(result.config, "json")))
    else:  # YAML/TOML escape controls themselves; the edge is a guard, not a rewrite
        sys.stdout.write(edge_text(dump_config(result.config, args.format), multiline=True))
    return ExitStatus.OK


def cmd_schema(args: argparse.Namespace) -> int:
    from watchrun.config.schema import SCHEMA_FILES, schema_text

    try:
        text = schema_text(args.name)
    except FileNotFoundError:
        return Out.for_args(args).fail(
            "not_found", f"the `{args.name}` schema is not available in this installation "
            f"({SCHEMA_FILES[args.name]} is missing from the watchrun.schemas package)")
    sys.stdout.write(text if text.endswith("\n") else text + "\n")
    return ExitStatus.OK


def _init_target(raw: str) -> Path:
    """`init PATH`: a folder (existing, or written with a trailing `/`) gets watch.yaml."""
    path = Path(raw)
    return path / "watch.yaml" if raw.endswith("/") or path.is_dir() else path


def cmd_init(args: argparse.Namespace) -> int:
    """Write the starter config; missing folders on the way are created (`init ci/watch.yaml`).
    An existing file is never overwritten (exit 2); a file that cannot be written is exit 3."""
    from watchrun.config.loader import config_format
    from watchrun.config.starter import STARTER_YAML

    out = Out.for_args(args)
    path = _init_target(str(args.path))
    fmt = config_format(path)
    if fmt is None:
        return out.fail("invalid_argument", f"cannot tell the format of {path}: name it .yaml, "
                        ".yml, .json or .toml", path=str(path))
    text = STARTER_YAML
    if fmt != "yaml":
        import yaml

        from watchrun.config.dump import dump_document

        text = dump_document(yaml.safe_load(STARTER_YAML), fmt)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
    except OSError as exc:  # (a file where the folder should be is EEXIST here)
        why = "it exists and is not a directory" if isinstance(exc, FileExistsError) else \
            exc.strerror or str(exc)
        return out.fail("write_failed", f"cannot write {path}: cannot create {path.parent}: "
                        f"{why}", path=str(path))
    try:
        with open(path, "x", encoding="utf-8") as fh:
            fh.write(text)
    except FileExistsError:
        return out.fail("exists", f"{path} already exists; not overwriting it (remove it or "
                        "give another path: watchrun init PATH)", path=str(path))
    except OSError as exc:
        return out.fail("write_failed", f"cannot write {path}: {exc.strerror or exc}",
                        path=str(path))
    if out.as_json:
        out.doc({"path": str(path), "format": fmt})
    else:
        out.line(f"wrote {path}")
        out.line(f"next: watchrun validate -c {path}   then: watchrun -c {path}")
    return ExitStatus.OK
