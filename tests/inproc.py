"""Run one `watchrun` command in this test process: the same `main` the console script calls,
its stdout, stderr and exit status, without the ~0.1 s of CPU a new interpreter costs.

For commands that read (views, `validate`, `config`) or ask a running runner (`stop`, `add`,
`start`, `restart`, ...). Never `run` (it takes signals and forks): it starts a process, and
tests/test_cli_contract.py and test_packaging.py keep the console script itself under test.
"""

from __future__ import annotations

import contextlib
import gc
import io
import os
import subprocess
from collections.abc import Iterator, Mapping
from pathlib import Path

from watchrun.cli.main import main

_STARTS = frozenset({"run"})


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
    assert _STARTS.isdisjoint(args[:1]), f"`{args[0]}` starts a runner: use a process"
    out, err = io.StringIO(), io.StringIO()
    before = Path.cwd()
    os.chdir(cwd)
    try:
        with _environ(env), contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            try:
                code = main(list(args))
            except SystemExit as exc:  # argparse's usage errors, --help and --version
                code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 2)
    finally:
        os.chdir(before)
        gc.unfreeze()  # (main's start-up freezes the heap, as a process's own start may)
    return subprocess.CompletedProcess(["watchrun", *args], code, out.getvalue(), err.getvalue())
