"""`run --once --json`: the verdicts as one JSON object on stdout, camelCase (docs/cli.md)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from watchrun.runtime.gate import Status, Verdict

__all__ = ["verdicts_doc"]


def verdicts_doc(verdicts: Sequence[Verdict], interrupted: str | None = None,
                 problems: Sequence[str] = ()) -> dict[str, Any]:
    """`{"passed", "interrupted", "problems", "gates", "held", "crossed", "errors", "verdicts":
    [...]}`; `gates` counts the gated watchers (the table's `N of M gates`: one in `error` too,
    an ungated watcher's `error` not), `held` those whose gate holds (`pass`), `crossed` the
    verdicts whose gate is crossed, `errors` those in `error` (gated or not; one that crossed
    its gate too is in `crossed` as well);
    `status` of a verdict is `pass`, `fail` or `error` (lowercase here, whatever the table
    prints), `gated` whether its watcher has a gate, `errorKind` what kind of `error` it is
    (`not-run`, `unread`, `interrupted`, `failed`; null for the others), `crossed` whether its
    gate is crossed (also beside an `error`); `interrupted`: the signal that ended the run
    before it ended by itself, `problems`: why the run did not finish (that signal, a failure
    no verdict names): never a pass."""
    return {
        "passed": all(v.ok for v in verdicts) and interrupted is None and not problems,
        "interrupted": interrupted,
        "problems": list(problems),
        "gates": sum(v.gated for v in verdicts),
        "held": sum(v.ok for v in verdicts),
        "crossed": sum(v.crossed for v in verdicts),
        "errors": sum(v.status is Status.ERROR for v in verdicts),
        "verdicts": [
            {"id": v.id, "label": v.label, "status": v.status.value.lower(),
             "gated": v.gated, "crossed": v.crossed,
             "errorKind": None if v.error_kind is None else v.error_kind.value,
             "reasons": list(v.reasons), "matches": v.matches,
             "threshold": v.threshold,
             "exit": v.exit,
             "first": [{"where": ln.where, "line": ln.text, "path": ln.path,
                        "lineNo": ln.line_no} for ln in v.first]}
            for v in verdicts
        ],
    }
