"""The default config when `-c` is absent: ./watch.yaml, then watch.yml, watch.json, watch.toml."""

from __future__ import annotations

from pathlib import Path

from msgspec import Struct

__all__ = ["NAMES", "Found", "discover", "none_found", "using"]

NAMES = ("watch.yaml", "watch.yml", "watch.json", "watch.toml")
"""Looked for in this order in the current directory; the first that exists wins (a FIFO or a
directory too: loading it then says what it is, rather than passing over it as absent)."""


class Found(Struct, frozen=True):
    """What discovery found: the file used (or None), and the other candidates present."""

    path: Path | None
    ignored: tuple[Path, ...] = ()
    looked: tuple[str, ...] = NAMES


def discover(cwd: Path) -> Found:
    """The first of NAMES that exists in `cwd` (relative to it, as a user would type it)."""
    present = [Path(n) for n in NAMES if (cwd / n).exists()]
    if not present:
        return Found(None)
    return Found(present[0], tuple(present[1:]))


def using(found: Found) -> str:
    """The note printed when a discovered config is used."""
    text = f"using {found.path} (no -c given; found in the current directory)"
    if found.ignored:
        text += "; also there, not read: " + ", ".join(str(p) for p in found.ignored)
    return text


def none_found(output_dir_ok: bool) -> str:
    """The error when nothing was found."""
    alt = ", or --output-dir DIR" if output_dir_ok else ""
    return (f"no config: none of {', '.join(NAMES)} is in the current directory; pass -c FILE"
            f"{alt} (`watchrun init` writes a starter watch.yaml)")
