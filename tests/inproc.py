"""Run one `watchrun` command in this test process: the same `main` the console script calls,
its stdout, stderr and exit status, without the ~0.1-0.2 s of CPU a new interpreter costs.

For commands that read (views, `validate`, `config`), ask a running runner (`stop`, `add`,
`start`, `restart`, ...), or `run --once` over files only (`once_in_process` says which: it
takes signals, becomes a subreaper and raises the descriptor limit, each put back afterwards,
and it starts no child). Never a live `run`: it starts a process, and
tests/test_cli_contract.py and test_packaging.py keep the console script itself under test.
"""

from __future__ import annotations

import contextlib
import gc
import io
import json
import logging
import os
import resource
import signal
import subprocess
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

from watchrun.cli.main import main
from watchrun.process import tree

_STARTS = frozenset({"run"})
_TAKEN = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP, signal.SIGCHLD, signal.SIGPIPE)
"""The signals a `run --once` takes while it runs."""


def once_in_process(config: Mapping[str, Any], env: Mapping[str, str] | None = None) -> bool:
    """Whether a `run --once` of `config` can run in this process: it runs no command (no
    command watcher, agent or action: a child of a test worker would be ended by no runner of
    its own, and the runner's end sweeps its adopted orphans), and `env` changes nothing the
    interpreter reads at its start (PYTHONPATH and the like: the test means a new one)."""
    text = json.dumps(config)
    return ('"command"' not in text and not config.get("agents") and '"actions"' not in text
            and not any(k.startswith(("PYTHON", "LD_")) and os.environ.get(k) != v
                        for k, v in (env or {}).items()))


@contextlib.contextmanager
def _process_state() -> Iterator[None]:
    """Signal handlers, the subreaper flag, the descriptor limit and the `watchrun` logger's
    handlers (a runner routes it into its log) as they were before."""
    handlers = {sig: signal.getsignal(sig) for sig in _TAKEN}
    nofile, children = resource.getrlimit(resource.RLIMIT_NOFILE), tree._child_nofile
    logger = logging.getLogger("watchrun")
    forwards, propagate = list(logger.handlers), logger.propagate
    try:
        yield
    finally:
        logger.handlers[:], logger.propagate = forwards, propagate
        for sig, handler in handlers.items():
            signal.signal(sig, handler)
        tree.become_subreaper(False)
        resource.setrlimit(resource.RLIMIT_NOFILE, nofile)
        tree._child_nofile = children


@contextlib.contextmanager
def _environ(env: Mapping[str, str] | None) -> Iterator[None]:
    """`env` as the whole environment while the command runs (as subprocess's `env=`)."""
    if env is None:
        yield
        return
    saved = dict(os.environ)
    os.environ.clear()
    os.environ.update(env)
    try:
        yield
    finally:
        os.environ.clear()
        os.environ.update(saved)


def inproc(cwd: Path, *args: str, env: Mapping[str, str] | None = None,
           ) -> subprocess.CompletedProcess[str]:
    """`watchrun ARGS` run in `cwd`, as `subprocess.run(..., capture_output=True, text=True)`
    would return it."""
    assert _STARTS.isdisjoint(args[:1]) or "--once" in args, \
        f"`{args[0]}` starts a live runner: use a process"
    out, err = io.StringIO(), io.StringIO()
    before = Path.cwd()
    os.chdir(cwd)
    try:
        with _process_state(), _environ(env), contextlib.redirect_stdout(out), \
                contextlib.redirect_stderr(err):
            try:
                code = main(list(args))
            except SystemExit as exc:  # argparse's usage errors, --help and --version
                code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 2)
    finally:
        os.chdir(before)
        gc.unfreeze()  # (main's start-up freezes the heap, as a process's own start may)
    return subprocess.CompletedProcess(["watchrun", *args], code, out.getvalue(), err.getvalue())
