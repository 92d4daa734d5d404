"""Handlers of the config commands: `validate`, `config`, `schema` and `init`."""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

from watchrun.config import LoadResult, load_config
from watchrun.config.model import Config, WatcherSpec
from watchrun.exitcodes import ExitStatus

__all__ = ["cmd_config", "cmd_init", "cmd_schema", "cmd_validate"]


def _printable(text: str) -> str:
    """`text` with control characters shown as escapes, so a config cannot restyle a terminal."""
    return "".join(c if c.isprintable() else repr(c)[1:-1] for c in text)


def _plural(n: int, word: str) -> str:
    return f"{n} {word}{'' if n == 1 else 's'}"


def _load(args: argparse.Namespace, strict: bool = False) -> LoadResult:
    from watchrun.sources.checkpoints import orphan_diagnostics

    result = load_config(args.config, output_dir=args.output_dir, strict=strict)
    if result.config is not None:  # checkpoints no watcher will read (when the dir exists)
        result.diagnostics.extend(orphan_diagnostics(result.config))
    return result


def _notes(w: WatcherSpec) -> list[tuple[str, str]]:
    """(key, note) for each of the watcher's regexes that RE2 cannot run."""
    from watchrun.config.validate import regex_engine_note

    regexes = [("pattern", w.pattern)]
    regexes += [(f"exclude[{i}]", x) for i, x in enumerate(w.exclude)]
    if w.gate is not None and w.gate.require is not None:
        regexes.append(("gate.require", w.gate.require))
    notes = [(key, regex_engine_note(rx)) for key, rx in regexes]
    return [(key, note) for key, note in notes if note is not None]


def _engine(w: WatcherSpec) -> str:
    """The matching engine the runner will use for this watcher's pattern."""
    from watchrun.match.matcher import best_engine

    try:
        return best_engine(w.pattern, w.case_sensitive)
    except ValueError:
        return "re"


def _source(w: WatcherSpec) -> str:
    import shlex

    if w.path is not None:
        return str(w.path)
    return w.command if isinstance(w.command, str) else shlex.join(w.command or ())


def _summary(config: Config) -> dict[str, Any]:
    return {
        "watchers": [
            {"id": w.id, "kind": w.kind, "label": w.label, "source": _source(w),
             "wake": list(w.wake), "engine": _engine(w),
             "notes": [{"path": k, "note": n} for k, n in _notes(w)]}
            for w in config.watchers
        ],
        "agents": [
            {"name": a.name, "provider": a.provider, "command": list(a.command)}
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
    """`validate --each`: every file on its own; JSON is a list of the per-file documents."""
    ones = [argparse.Namespace(**{**vars(args), "config": [p], "each": False})
            for p in args.config]
    if args.format == "json":
        results = [(one, _load(one, strict=args.strict)) for one in ones]
        print(json.dumps([_validate_doc(o, r) for o, r in results], indent=2, ensure_ascii=False))
        return ExitStatus.OK if all(r.ok for _, r in results) else ExitStatus.USAGE
    return max(cmd_validate(one) for one in ones)


def cmd_validate(args: argparse.Namespace) -> int:
    if getattr(args, "each", False) and len(args.config) > 1:
        return _validate_each(args)
    result = _load(args, strict=args.strict)
    files = " + ".join(str(p) for p in args.config)
    errors, warnings = len(result.errors), len(result.warnings)
    if args.format == "json":
        print(json.dumps(_validate_doc(args, result), indent=2, ensure_ascii=False))
        return ExitStatus.OK if result.ok else ExitStatus.USAGE
    for d in result.diagnostics:
        print(_printable(d.format()))
    if result.config is None:
        print(_printable(f"{files}: invalid — {_plural(errors, 'error')}"
                         + (f", {_plural(warnings, 'warning')}" if warnings else "")))
        return ExitStatus.USAGE
    config = result.config
    line = f"{files}: valid — {_plural(len(config.watchers), 'watcher')}, " + _plural(
        len(config.agents), "agent")
    print(_printable(line + (f" ({_plural(warnings, 'warning')})" if warnings else "")))
    width = max((len(w.id) for w in config.watchers), default=0)
    width = max([width, *(len(a.name) for a in config.agents)])
    for w in config.watchers:
        source = _source(w)
        source = source if len(source) <= 72 else source[:71] + "…"
        wake = f"  → wakes {', '.join(w.wake)}" if w.wake else ""
        print(_printable(f"  watcher {w.id:<{width}}  {w.kind:<8} {source}{wake}"))
        print(_printable(f"      engine: {_engine(w)}"))
        for key, note in _notes(w):
            print(_printable(f"      {key}: {note}"))
    for a in config.agents:
        print(_printable(f"  agent   {a.name:<{width}}  {a.provider:<8} {' '.join(a.command)}"))
    return ExitStatus.OK


def cmd_config(args: argparse.Namespace) -> int:
    from watchrun.config.dump import dump_config

    result = _load(args)
    for d in result.diagnostics:
        print(_printable(d.format()), file=sys.stderr)
    if result.config is None:
        return ExitStatus.USAGE
    sys.stdout.write(dump_config(result.config, args.format))
    return ExitStatus.OK


def cmd_schema(args: argparse.Namespace) -> int:
    from watchrun.config.schema import SCHEMA_FILES, schema_text

    try:
        text = schema_text(args.name)
    except FileNotFoundError:
        print(f"watchrun: error: the `{args.name}` schema is not available in this installation "
              f"({SCHEMA_FILES[args.name]} is missing from the watchrun.schemas package)",
              file=sys.stderr)
        return ExitStatus.USAGE
    sys.stdout.write(text if text.endswith("\n") else text + "\n")
    return ExitStatus.OK


def cmd_init(args: argparse.Namespace) -> int:
    from watchrun.config.loader import config_format
    from watchrun.config.starter import STARTER_YAML

    path = args.path / "watch.yaml" if args.path.is_dir() else args.path
    fmt = config_format(path)
    if fmt is None:
        print(f"watchrun: error: cannot tell the format of {path}: name it .yaml, .yml, .json "
              "or .toml", file=sys.stderr)
        return ExitStatus.USAGE
    text = STARTER_YAML
    if fmt != "yaml":
        import yaml

        from watchrun.config.dump import dump_document

        text = dump_document(yaml.safe_load(STARTER_YAML), fmt)
    try:
        with open(path, "x", encoding="utf-8") as out:
            out.write(text)
    except FileExistsError:
        print(f"watchrun: error: {path} already exists; not overwriting it (remove it or give "
              "another path: watchrun init PATH)", file=sys.stderr)
        return ExitStatus.USAGE
    except OSError as exc:
        print(f"watchrun: error: cannot write {path}: {exc.strerror or exc}", file=sys.stderr)
        return ExitStatus.USAGE
    if args.format == "json":
        print(json.dumps({"path": str(path), "format": fmt}))
    else:
        print(f"wrote {path}\nnext: watchrun validate -c {path}   then: watchrun -c {path}")
    return ExitStatus.OK
