"""What the live runner answers (`list`; what `list` says when it lists none), and what a
watcher records, as it is recorded (`matches/logs --follow`)."""

from __future__ import annotations

import argparse
import errno
import fcntl
import os
import select
import stat
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any, NamedTuple

from watchrun.config.model import Config
from watchrun.exitcodes import ExitStatus
from watchrun.match.sanitize import edge_json, edge_text
from watchrun.views.humanize import DISABLED

if TYPE_CHECKING:
    from watchrun.notify import Watch

__all__ = ["Listed", "NoAnswer", "follow", "live_statuses", "none_listed"]

LIST_TIMEOUT_S = 5.0
"""How long `list` waits for a live runner's answer before it reads the snapshots instead."""
WAIT_S = 3600.0
"""A follower re-reads at least this often even when nothing wakes it."""


def _err(text: str) -> None:
    print(edge_text(text), file=sys.stderr)


class NoAnswer(Exception):
    """A runner listens on the output dir but gave no usable `list` (its loop stuck, a reset,
    a timeout, a garbled reply), or refused it (`said`: busy), or holds its `control.lock` and
    cannot be reached (not `reached`): what it runs is not known. `str()` says which."""

    def __init__(self, text: str, reached: bool = True) -> None:
        super().__init__(text if not reached else f"the runner did not answer ({text})")

    @classmethod
    def said(cls, error: object) -> NoAnswer:
        """It answered `list` with `error` (a `{code, message}`)."""
        err = error if isinstance(error, dict) else {}
        code, message = err.get("code", "failed"), err.get("message", "no reason given")
        return cls(f"the runner refused `list` ({code}: {message})", reached=False)


class Listed(NamedTuple):
    """The live runner's `list`: its watchers, and whether its config lets it run them."""

    watchers: list[dict[str, Any]]
    enabled: bool
    """False: `limits.enabled: false` (a runner that does not say is taken to run them)."""


def live_statuses(root: Path) -> Listed | None:
    """The live runner's `list` (origin, status, pid, uptime, restarts, last error, counts),
    or None when no runner listens on the output dir (the snapshots are read then);
    `NoAnswer` when one listens and does not answer."""
    from watchrun.runtime.client import NotListening, Unreachable, request

    try:
        reply = request(root / "control.sock", {"cmd": "list"}, timeout=LIST_TIMEOUT_S)
    except NotListening:
        return None
    except Unreachable as exc:
        raise NoAnswer(str(exc), reached=False) from exc
    except (OSError, ValueError) as exc:
        raise NoAnswer(str(exc)) from exc
    found = reply.get("watchers")
    if not reply.get("ok") or not isinstance(found, list):
        raise NoAnswer.said(reply.get("error"))
    return Listed([w for w in found if isinstance(w, dict)], reply.get("enabled") is not False)


def none_listed(root: Path, live: Listed | None, configured: list[str], recorded: list[str]
                ) -> str:
    """Why `list` shows no watcher. "No watchers have run" only when nothing says one did: a
    live runner's `clear --all` forgets them all, and their JSONL stays; a live runner whose
    config disables its watchers says so (`start` would be refused)."""
    if live is not None and not live.enabled:
        return f"the live runner on {root} lists no watchers: {DISABLED}"
    if live is not None:
        again = f"; `watchrun start ID` starts a config watcher again: {', '.join(configured)}"
        return (f"the live runner on {root} lists no watchers (`clear` forgets stopped "
                f"ones){again if configured else ''}")
    if recorded:
        return (f"no status snapshot is in {root / 'state'}; records of "
                f"{', '.join(recorded)} are kept (`watchrun matches ID`)")
    return f"no watchers have run with output dir {root}"


def follow(args: argparse.Namespace, root: Path, match_lines: int, config: Config | None) -> int:
    """`matches ID --follow` / `logs ID --follow`: the last `--lines`, then each new one as it
    is recorded, until Ctrl-C (exit 0). A reader that goes away (`| head`) ends it quietly."""
    n = max(1, min(args.lines if args.lines is not None else match_lines, 2000))
    as_json = args.format == "json"
    poll_ms = config.limits.poll_ms if config is not None else 500
    try:
        if args.op == "matches":
            return _follow_matches(root, config, args.id, n, as_json, poll_ms)
        return _follow_logs(root, config, args.id, n, as_json, poll_ms)
    except KeyboardInterrupt:
        return ExitStatus.OK
    except OSError as exc:  # e.g. a symlink in place of a JSONL file: never followed
        if isinstance(exc, BrokenPipeError):
            raise
        message = f"cannot follow {args.id}: {exc}"
        if as_json:  # the stream's last line, so a JSON Lines reader sees why it ended
            print(edge_json({"error": {"code": "read_failed", "message": message,
                                       "id": args.id}}), flush=True)
        else:
            _err(f"watchrun: error: {message}")
        return ExitStatus.RUNTIME


def _follow_matches(root: Path, config: Config | None, wid: str, n: int, as_json: bool,
                    poll_ms: int) -> int:
    from watchrun.notify import Notifier
    from watchrun.output.backward import last_records
    from watchrun.output.records import ReadStats, retained_files
    from watchrun.views.follow import JsonlFollower
    from watchrun.views.watchers import match_line, skipped

    path = root / "watchers" / f"{wid}.jsonl"
    pipe = _pipe_out()
    notifier = Notifier(poll_ms)
    watch = notifier.watch(path)  # armed first: whatever is written from now on wakes us
    follower = JsonlFollower(path)
    try:
        if not retained_files(path):
            _waiting(root, config, wid)
        after, read = ReadStats(), ReadStats()  # (lines after the newest record: the
        newest = last_records(path, 1, stats=after)  # follower's to read, and to count)
        since = int(newest[0]["seq"]) if newest else 0
        shown = [r for r in last_records(path, n, {"match"}, stats=read) if r["seq"] <= since]
        follower.start_after(since)  # what came after `since` is the follower's to read
        restarts, gaps, missing, invalid = 0, 0, 0, 0
        if read.invalid > after.invalid:
            _err(f"watchrun: {skipped(wid, path, read.invalid - after.invalid)}")
        while True:
            for rec in shown:
                print(edge_json(rec) if as_json else match_line(rec))
            sys.stdout.flush()
            if watch.stale:
                watch.rearm()
            _wait(watch, pipe)
            shown = [r for r in follower.read() if r.get("kind") == "match"]
            if follower.restarts != restarts:
                restarts = follower.restarts
                _err(f"watchrun: {wid}: its JSONL was recreated; it starts over at seq 1")
            if follower.gaps != gaps:
                _err(f"watchrun: {wid}: {follower.gaps - gaps} records were rotated away "
                     "(output.keep) before they could be read")
                gaps = follower.gaps
            if follower.missing != missing:
                _err(f"watchrun: {wid}: {follower.missing - missing} records are missing from "
                     "its JSONL and no record says why (the file may be damaged)")
                missing = follower.missing
            if follower.stats.invalid != invalid:
                _err(f"watchrun: {skipped(wid, path, follower.stats.invalid - invalid)}")
                invalid = follower.stats.invalid
    finally:
        follower.close()
        watch.close()
        notifier.close()


def _follow_logs(root: Path, config: Config | None, wid: str, n: int, as_json: bool,
                 poll_ms: int) -> int:
    from watchrun.notify import Notifier
    from watchrun.views.follow import TailFollower

    path = root / "state" / f"{wid}.tail"
    pipe = _pipe_out()
    notifier = Notifier(poll_ms)
    watch = notifier.watch(path)
    follower = TailFollower(path)
    keep = config.limits.max_log_lines if config is not None else None
    try:
        lines = follower.first(n)
        if follower.run is None and not lines:
            _waiting(root, config, wid)
        while True:
            for line in lines:
                print(edge_json({"id": wid, "line": line}) if as_json else edge_text(line))
            sys.stdout.flush()
            if watch.stale:
                watch.rearm()
            _wait(watch, pipe)
            lines, lost = follower.read()
            if lost:
                bound = f"its last {keep}" if keep else "the lines it keeps (limits.maxLogLines)"
                _err(f"watchrun: {lost} lines of {wid} not shown: they scrolled out of {bound} "
                     "between two snapshots")
    finally:
        watch.close()
        notifier.close()


def _wait(watch: Watch, pipe: int | None) -> None:
    """Until the followed file may have changed, or stdout's reader went away (`pipe`:
    `_pipe_out()`): `| head -1` has its line and exits, and the pipeline ends now, as `tail -f
    | head -1` does, not at the next write (which may never come while the watcher matches
    nothing)."""
    watch.wait_blocking(WAIT_S, gone=pipe)
    if pipe is not None and select.select([pipe], [], [], 0)[0]:
        raise BrokenPipeError(errno.EPIPE, "stdout's reader went away")


def _pipe_out() -> int | None:
    """stdout's descriptor when it is the write-only end of a pipe (readable only once its
    reader has gone); None for anything else (a terminal is readable when a key is pressed)."""
    try:
        fd = sys.stdout.fileno()
        is_pipe = stat.S_ISFIFO(os.fstat(fd).st_mode)
        write_only = fcntl.fcntl(fd, fcntl.F_GETFL) & os.O_ACCMODE == os.O_WRONLY
    except (OSError, ValueError):
        return None
    return fd if is_pipe and write_only else None


def _waiting(root: Path, config: Config | None, wid: str) -> None:
    if config is None or config.watcher(wid) is None:
        _err(f"watchrun: nothing recorded for watcher {wid!r} in {root} yet; waiting for it "
             "(Ctrl-C ends)")
