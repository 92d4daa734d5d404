"""Which runner answered a command line, said: its pid as this process sees it (the runner says
its own and its pid namespace; a runner in a container is found among the holders of
`control.lock`), its config files, whether it is a `watchrun mcp` session's own; and what a
`not_found` says when the runner's config is not the command's (two configs on one output dir:
the command talked to the other one's runner)."""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING, Any

from watchrun.match.sanitize import edge_text

if TYPE_CHECKING:
    from watchrun.config.model import Config

__all__ = ["described", "not_yours", "pid_here", "yours_differs"]


def pid_here(root: Path, runner: dict[str, Any]) -> int | None:
    """The runner's pid as this process sees it: its own when both are in one pid namespace,
    else the holder of `control.lock` whose `NSpid` ends in it (a runner in a container, seen
    from the host); None when this process cannot see it (a sibling namespace)."""
    from watchrun.output import flocks
    from watchrun.runtime.identity import pid_namespace

    pid = runner.get("pid")
    if not isinstance(pid, int) or isinstance(pid, bool) or pid <= 0:
        return None
    ns = runner.get("pidNamespace")
    if isinstance(ns, int) and ns == pid_namespace():
        return pid
    try:
        held = flocks.holders(root / "control.lock")
    except OSError:
        return None
    return next((h for h in held if flocks.is_process(h, pid)), None)


def described(root: Path, runner: dict[str, Any]) -> str:
    """`pid N, config PATH`, its pid as seen here (`pid N here, M in its own pid namespace`;
    `pid M in its own pid namespace, not visible from here`)."""
    pid, here = runner.get("pid"), pid_here(root, runner)
    if here is None:
        who = f"pid {pid} in its own pid namespace, not visible from here"
    elif here != pid:
        who = f"pid {here} here, {pid} in its own pid namespace"
    else:
        who = f"pid {here}"
    configs = [str(c) for c in runner.get("configs") or []]
    said = f"config {configs[0]}" if len(configs) == 1 else \
        f"configs {', '.join(configs)}" if configs else "no config file"
    return edge_text(f"{who}, {said}")


def yours_differs(config: Config | None, runner: dict[str, Any]) -> bool:
    """Whether the command's config files are not the runner's (none given: never)."""
    if config is None or not config.sources:
        return False
    theirs = [str(c) for c in runner.get("configs") or []]
    return [os.path.realpath(p) for p in config.sources] != \
        [os.path.realpath(p) for p in theirs]


def not_yours(root: Path, config: Config | None, runner: Any, wid: str) -> str | None:
    """When the runner that answered `not_found` of `wid` runs other config files than the
    command's, which name `wid`: which runner it is, and why the command reached it; else
    None."""
    if not isinstance(runner, dict) or config is None or config.watcher(wid) is None \
            or not yours_differs(config, runner):
        return None
    mine = ", ".join(str(p) for p in config.sources)
    return edge_text(f"the runner live on {root} ({described(root, runner)}) is not your "
                     f"config's: {mine} names {wid} and uses the same output dir, where one "
                     "runner runs at a time (stop that runner to run yours, or give yours "
                     "another output.dir)")
