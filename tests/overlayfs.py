"""Test helper: a real overlay file system, mounted again on demand under another device
number (as a share is after a reboot or a remount in another order); needs root."""

from __future__ import annotations

import os
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest


class Overlay:
    """An overlay file system of `lower` and `upper` at `mnt`, mounted again on demand under
    another device number: the old one is held by a tmpfs mounted in between, as another
    mount takes it when a share is mounted again after a reboot or in another order."""

    def __init__(self, root: Path) -> None:
        self.root, self.mnt = root, root / "mnt"
        for d in ("lower", "upper", "work", "mnt"):
            (root / d).mkdir(parents=True)
        self.mounted: list[Path] = []

    def mount(self) -> None:
        opts = ",".join(f"{d}dir={self.root / d}" for d in ("lower", "upper", "work"))
        done = subprocess.run(["mount", "-t", "overlay", "overlay", "-o", opts, str(self.mnt)],
                              capture_output=True, text=True, timeout=30)
        if done.returncode != 0:
            pytest.skip(f"cannot mount an overlay file system here ({done.stderr.strip()})")
        self.mounted.append(self.mnt)

    def again(self, *, lazy: bool = False) -> None:
        """Unmount and mount again, under another device number. `lazy`: `umount -l`, as a
        share whose files are open (a runner following one) is unmounted."""
        was = os.stat(self.mnt).st_dev
        for i in range(5):
            self._umount(self.mnt, lazy)
            spacer = self.root / f"spacer-{i}"
            spacer.mkdir()
            subprocess.run(["mount", "-t", "tmpfs", "-o", "size=64k", "spacer", str(spacer)],
                           check=True, timeout=30)
            self.mounted.append(spacer)
            self.mount()
            if os.stat(self.mnt).st_dev != was:
                return
        raise AssertionError("the overlay kept its device number over 5 mounts")

    def _umount(self, where: Path, lazy: bool) -> None:
        subprocess.run(["umount", *(["-l"] if lazy else []), str(where)], check=True,
                       timeout=30)
        self.mounted.remove(where)

    def close(self) -> None:
        for where in reversed(self.mounted):
            subprocess.run(["umount", "-l", str(where)], check=False, timeout=30)


def overlay_at(root: Path) -> Iterator[Overlay]:
    """An overlay mounted under `root` for one test (the body of an `overlay` fixture)."""
    fs = Overlay(root)
    try:
        fs.mount()
        yield fs
    finally:
        fs.close()
