"""How a helper process watchrun runs from its own files is started: one argv for all.

The guardian, the regex worker, the compile probe's child and the mock agent's default command
are Python programs of the watchrun package. Started as `python -m watchrun.…`, a helper would
have its current directory first on its module path: a `watchrun/` package in the runner's (or
an agent's) working directory — a CI checkout, a shared workspace, /tmp — would run instead of
the installed one, as the runner's user (often root). So each runs in this interpreter with
`-I` (the current directory, PYTHONPATH, PYTHONSTARTUP and the user site do not reach it) and
`-S` (no site: no .pth file is run), and `-c` code that puts after the standard library the
directory this runner imported watchrun from (`watchrun_home`), then, for a helper that needs
them, the runner's other module directories (google-re2, hyperscan and msgspec found where the
runner found them; a package found only through an import hook a .pth file installs is not),
and calls the module's `main`. What `-I` would drop from the runner's environment that changes
how the helper runs is passed on as options: UTF-8 mode (`-X utf8`: how arguments, paths and
the environment are decoded) and PYTHONDONTWRITEBYTECODE (`-B`: a helper started under a file
size limit wrote its `.pyc` cut short, and every later start from that tree failed).
"""

from __future__ import annotations

import os
import sys

__all__ = ["helper_command", "watchrun_home"]


def watchrun_home() -> str:
    """The directory this interpreter found the watchrun package in (a normal install's
    site-packages, an editable install's source directory): each helper is pointed there."""
    import watchrun

    return os.path.dirname(os.path.dirname(os.path.abspath(watchrun.__file__)))


def helper_command(module: str, packages: bool = False) -> list[str]:
    """The argv that runs `module`'s `main()` (its return value the exit status; arguments
    appended to the argv are its `sys.argv[1:]`). `packages`: the runner's module directories
    too (absolute ones only: never a current directory), for a helper that imports more than
    the standard library and watchrun."""
    home = watchrun_home()
    path = [home, *(p for p in sys.path if os.path.isabs(p) and p != home)] if packages \
        else [home]
    options = ["-I", "-S", "-X", f"utf8={sys.flags.utf8_mode}",
               *(["-B"] if sys.dont_write_bytecode else [])]
    return [sys.executable, *options, "-c",
            f"import sys; sys.path += {path!r}; from {module} import main; sys.exit(main())"]
