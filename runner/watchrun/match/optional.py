"""The optional engines' modules, imported at first use: None when not installed, an error
when installed and not loadable."""

from __future__ import annotations

import functools
import importlib
import importlib.util
from typing import Any

__all__ = ["Unloadable", "optional", "re2", "re2_installed"]


class Unloadable(RuntimeError):
    """An engine that is installed but cannot be loaded (its shared object cannot be mapped:
    short of memory, a broken install): a failure of this run, not a missing engine."""


def optional(name: str, installed: bool = False) -> Any:
    """The module `name`, or None when it is not installed (an optional engine). `installed`:
    it is (`find_spec` found it), so a failure to load it is `Unloadable`, not None: under a
    memory limit google-re2's import failed, and the config was judged as if it were missing
    (patterns refused, exit 2) where the run could not start (exit 3)."""
    try:
        return importlib.import_module(name)
    except ImportError as exc:
        if not installed:
            return None
        raise Unloadable(f"{name} is installed but could not be loaded: {exc}") from None


@functools.cache
def re2() -> Any:
    """google-re2, imported at first use (a start whose patterns need no RE2 does not pay the
    2 ms of loading it), or None when it is not installed (`Unloadable`: it is, and cannot be
    loaded)."""
    return optional("re2", installed=re2_installed())


@functools.cache
def re2_installed() -> bool:
    """Whether google-re2 is there, without importing it."""
    return importlib.util.find_spec("re2") is not None
