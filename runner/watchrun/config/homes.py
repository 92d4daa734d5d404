"""`~` and `~user` at the start of a path: the home they name, or none when none can be found.

`os.path.expanduser` returns a path as it is when it cannot expand its `~`: HOME unset and no
entry for the uid in the user database (an arbitrary container uid, an `env -i` wrapper,
`setpriv` or `runuser` without a login environment), or an unknown user. Taken as it is, `~/x`
is a folder named `~` in the current directory: the start-up cache made in a CI workspace, an
output dir in the config's repository, a directory that invites `rm -rf ~`. So a `~` that
cannot be expanded, or that expands to a relative path (a relative HOME), names no home: the
start-up cache is off (`config/cache.py`), and a path in the config, `--output-dir`, `add
--path`/`--cwd` and the `watch` tool's paths are refused with `unexpanded`'s reason.
"""

from __future__ import annotations

import json
import os

__all__ = ["expand_home", "unexpanded"]


def expand_home(value: str) -> str | None:
    """`value` with a leading `~` or `~user` expanded (`value` itself when it has none); None
    when its home cannot be found or is not an absolute path."""
    if not value.startswith("~"):
        return value
    expanded = os.path.expanduser(value)
    return expanded if os.path.isabs(expanded) else None


def unexpanded(value: str) -> str:
    """Why `expand_home(value)` is None, for an error message that names `value`."""
    user = value[1:].split("/", 1)[0]
    shown = json.dumps(value)
    if user:
        home = os.path.expanduser(f"~{user}")
        if home == f"~{user}":
            return (f"{shown}: no user {json.dumps(user)} here to expand `~` to (write ./~… for "
                    "a folder named so)")
        return f"{shown}: the home of {json.dumps(user)} is not an absolute path ({home})"
    if "HOME" in os.environ:
        return (f"{shown}: `~` cannot be expanded: HOME is not an absolute path "
                f"({json.dumps(os.environ['HOME'])})")
    return (f"{shown}: `~` cannot be expanded: HOME is unset and the user database has no home "
            f"for uid {os.getuid()}")
