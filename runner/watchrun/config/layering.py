"""Layer config trees from repeated `-c`: later keys win, watchers and agents merge by id/name,
`redact` rules add up."""

from __future__ import annotations

from collections.abc import Callable
from functools import partial
from typing import Any, NamedTuple

from watchrun.config.tree import CMap, CSeq, Origin
from watchrun.config.watchers import COMMAND_ONLY, FILE_ONLY

__all__ = ["Dropped", "layer"]


class Dropped(NamedTuple):
    """A watcher's `gate.exitCode` that a layer dropped by making it a file watcher."""

    watcher: str
    """Its id."""
    written: Origin
    """Where `exitCode` was written."""
    gate: Origin
    """Where its gate was written."""
    by: Origin
    """Where the layer set `path`."""
    emptied: bool
    """The gate had no other condition, and the layer sets none: the whole gate went."""

_KEYED_LISTS = {"watchers": "id", "agents": "name"}
"""Top-level lists whose items merge by a key instead of being replaced."""

_APPENDED_LISTS = {"redact"}
"""Top-level lists to which each layer adds (a later layer never drops a redaction rule)."""

_SOURCE_KEYS = ("path", "command")
"""A watcher has exactly one source: a later layer that sets one drops the other."""


def layer(trees: list[CMap]) -> tuple[CMap, list[Dropped]]:
    """Merge `trees` in order into one new tree, and say which gate conditions the merge
    dropped (the caller reports them); the inputs are not changed."""
    out = CMap(trees[0].origin)
    dropped: list[Dropped] = []
    for tree in trees:
        out = _merge_map(out, tree, dropped)
    return out, dropped


def _merge_map(base: CMap, over: CMap, dropped: list[Dropped] | None = None) -> CMap:
    """`over` merged into `base`; `dropped` is given at the top level only."""
    out = CMap(base.origin)
    for key, value in base.items():
        out.put(key, value, base.origins[key])
    for key, value in over.items():
        old = out.get(key)
        if dropped is not None and key in _KEYED_LISTS and isinstance(old, CSeq) \
                and isinstance(value, CSeq):
            merged: Any = _merge_keyed(old, value, _KEYED_LISTS[key],
                                       partial(_switched, dropped=dropped)
                                       if key == "watchers" else _reprovided)
        elif dropped is not None and key in _APPENDED_LISTS and isinstance(old, CSeq) \
                and isinstance(value, CSeq):
            merged = CSeq(old.origin)
            for item, origin in [*zip(old, old.origins, strict=True),
                                 *zip(value, value.origins, strict=True)]:
                merged.put(item, origin)
        elif isinstance(old, CMap) and isinstance(value, CMap):
            merged = _merge_map(old, value)
        else:
            merged = value
        out.put(key, merged, over.origins[key])
    return out


def _merge_keyed(base: CSeq, over: CSeq, key: str,
                 before: Callable[[CMap, CMap], CMap]) -> CSeq:
    """`base` with each item of `over` merged into the earlier item of its id/name, or appended.
    Only an earlier layer's item is merged into: a second item of one id/name in the same layer
    is appended, so validation reports the duplicate as it does in a file given alone.
    `before(old, over)`: the earlier item as `over` is merged into it."""
    out = CSeq(base.origin)
    index: dict[str, int] = {}
    for item, origin in zip(base, base.origins, strict=True):
        if isinstance(item, CMap) and isinstance(item.get(key), str):
            index.setdefault(item[key], len(out))
        out.put(item, origin)
    for item, origin in zip(over, over.origins, strict=True):
        name = item.get(key) if isinstance(item, CMap) else None
        at = index.pop(name, None) if isinstance(name, str) else None
        if at is None:
            out.put(item, origin)
            continue
        out[at] = _merge_map(before(out[at], item), item)
        out.origins[at] = origin
    return out


def _switched(old: CMap, over: CMap, dropped: list[Dropped]) -> CMap:
    """Watcher `old` without its source when `over` sets one; and when that changes its kind,
    without the keys only its old kind may set (a command watcher made a file watcher loses its
    `cwd`, `env`, `restart`, `restartDelay`, `schedule` and `gate.exitCode`; a file watcher made
    a command watcher its `fromStart` and `previousId`), which the new kind may not have. A
    dropped `gate.exitCode` is added to `dropped`."""
    if not any(k in over for k in _SOURCE_KEYS):
        return old
    if "path" in over and "command" not in over and "command" in old:
        out = _without(old, (*_SOURCE_KEYS, *COMMAND_ONLY))
        gate = out.get("gate")
        if isinstance(gate, CMap) and "exitCode" in gate:
            rest = _without(gate, ("exitCode",))
            dropped.append(Dropped(str(old.get("id")), gate.origins["exitCode"],
                                   out.origins["gate"], over.origins["path"],
                                   not rest and "gate" not in over))
            if rest:
                out.put("gate", rest, out.origins["gate"])
            else:  # (a gate on the exit code alone: no condition is left)
                out = _without(out, ("gate",))
        return out
    if "command" in over and "path" not in over and "path" in old:
        return _without(old, (*_SOURCE_KEYS, *FILE_ONLY))
    return _without(old, _SOURCE_KEYS)


def _reprovided(old: CMap, over: CMap) -> CMap:
    """Agent `old` without its `command` when `over` changes its `provider` and sets none: the
    provider reads its command's output, so the old provider's command is not the new one's."""
    if "provider" in over and "command" not in over and over["provider"] != old.get("provider"):
        return _without(old, ("command",))
    return old


def _without(tree: CMap, keys: tuple[str, ...]) -> CMap:
    out = CMap(tree.origin)
    for key, value in tree.items():
        if key not in keys:
            out.put(key, value, tree.origins[key])
    return out
