"""Suite-wide settings: the config cache of every runner the tests start lives in the session's
temporary directory, not in the user's ~/.cache (tests of the cache set their own); property
tests have no per-example deadline; Ctrl-C (and a SIGHUP) reaches the processes the tests start
however the suite was launched; xdist's workers share the work of rewriting the test modules'
asserts; the file-source tests' notifiers are closed after each test."""

from __future__ import annotations

import contextlib
import importlib
import os
import signal
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import settings
from overlayfs import Overlay, overlay_at
from tmpfs import tiny

# Hypothesis fails an example that takes over 200 ms by default: on a loaded 2-core box the
# first example of a property test (which pays the lazy imports and compiles of what it calls)
# can. (`test_mcp_pure.py::test_any_arguments_give_a_call_or_a_call_error` failed once in a
# loaded run, its output not kept; the deadline is the only timing it depends on.) The
# properties are about results; pytest-timeout bounds each test's time.
settings.register_profile("watchrun", deadline=None)
settings.load_profile("watchrun")

# A shell without job control starts a background command (`pytest … &`, as a CI harness may)
# with SIGINT ignored, and every process it starts inherits that: the tests that press Ctrl-C on
# a runner or a follower then saw it ignored and timed out. Tests act as a terminal's user does.
if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
    signal.signal(signal.SIGINT, signal.default_int_handler)
# Under `nohup` every process the suite starts inherits SIGHUP ignored, and a POSIX shell cannot
# trap a signal ignored when it began: the DaemonSet test's stand-in runner (`trap … HUP` in
# sh) never saw pods.py's reload (found running the suite under nohup, 2026-12-08).
if signal.getsignal(signal.SIGHUP) is signal.SIG_IGN:
    signal.signal(signal.SIGHUP, signal.SIG_DFL)

# The mock agent obeys the `[mock:…]` directives in its prompt only when told to (a log line must
# not make it hang or fork): the tests drive it with them, and every process they start inherits
# this. (`test_mock_agent.py` runs it without, too.)
os.environ["WATCHRUN_MOCK_DIRECTIVES"] = "1"


@pytest.hookimpl(tryfirst=True)
def pytest_collection(session: pytest.Session) -> None:
    """In an xdist worker, import the test modules before collecting them, each worker starting
    at its own share of them and writing the modules pytest rewrote (their asserts) to
    `__pycache__`, so that each rewrites about 1/N of them and loads the rest. All four workers
    rewrote every module at once (PYTHONDONTWRITEBYTECODE, or a fresh clone): ~7 s of CPU each
    on a suite bound by two cores' CPU. A module that fails to import here is left to pytest's
    own collection, which reports it. (A worker is told by its config, not by the environment:
    a pytest that a test starts inherits PYTEST_XDIST_WORKER, and importing every module there
    took the sdist's test 38 s of a loaded suite.)"""
    given = getattr(session.config, "workerinput", None)
    if given is None or int(given["workercount"]) < 2:
        return
    count = int(given["workercount"])
    files = sorted(p.stem for p in Path(__file__).parent.glob("test_*.py"))
    start = int(given["workerid"].removeprefix("gw")) % count * len(files) // count
    saved, sys.dont_write_bytecode = sys.dont_write_bytecode, False
    try:
        for name in files[start:] + files[:start]:
            with contextlib.suppress(Exception, pytest.skip.Exception):
                importlib.import_module(name)
    finally:
        sys.dont_write_bytecode = saved


@pytest.fixture(autouse=True, scope="session")
def _config_cache_dir(tmp_path_factory: pytest.TempPathFactory) -> Iterator[None]:
    saved = os.environ.get("WATCHRUN_CACHE_DIR")
    os.environ["WATCHRUN_CACHE_DIR"] = str(tmp_path_factory.mktemp("watchrun-cache"))
    yield
    if saved is None:
        os.environ.pop("WATCHRUN_CACHE_DIR", None)
    else:
        os.environ["WATCHRUN_CACHE_DIR"] = saved


@pytest.fixture(autouse=True)
def _close_notifiers() -> Iterator[None]:
    """The file-source tests' notifiers (tests/filehelpers.py) are closed after each test."""
    yield
    helpers = sys.modules.get("filehelpers")
    if helpers is not None:
        helpers.close_notifiers()


@pytest.fixture
def pipe() -> Iterator[tuple[int, int]]:
    """A pipe (read end, write end); each end the test has not closed is closed after it."""
    r, w = os.pipe()
    yield r, w
    for fd in (r, w):
        with contextlib.suppress(OSError):  # closed by the test already
            os.close(fd)


@pytest.fixture
def tiny_fs(tmp_path: Path) -> Iterator[Path]:
    """A real, small tmpfs (tests/tmpfs.py), unmounted after the test."""
    yield from tiny(tmp_path)


@pytest.fixture
def overlay(tmp_path: Path) -> Iterator[Overlay]:
    """An overlay file system mounted under tmp_path/ov (tests/overlayfs.py), unmounted after
    the test."""
    yield from overlay_at(tmp_path / "ov")
