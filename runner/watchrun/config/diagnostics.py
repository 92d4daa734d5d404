"""Config diagnostics: one located error or warning each, collected and reported all at once."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Literal

import msgspec
from msgspec import Struct, field

from watchrun.config.tree import KeyPath, Origin, format_path, locate
from watchrun.match.sanitize import edge_text

if TYPE_CHECKING:
    from watchrun.config.model import Config

__all__ = ["ConfigError", "Diagnostic", "LoadResult", "Reporter"]

Severity = Literal["error", "warning"]


class Diagnostic(Struct, frozen=True):
    """One problem in a config, located like `watchers[2].pattern` (`""` is the whole file)."""

    path: str
    message: str
    severity: Severity = "error"
    file: str | None = None
    line: int | None = None
    column: int | None = None

    def where(self) -> str:
        """`watch.yaml:12:5`, `watch.yaml` or `` when the file is unknown."""
        if self.file is None:
            return ""
        parts = [self.file, *(str(n) for n in (self.line, self.column) if n is not None)]
        return ":".join(parts)

    def format(self) -> str:
        """One line for a terminal: `error: watchers[2].pattern: ... (watch.yaml:12:5)`.

        A problem of a whole file reads `error: watch.yaml:3:1: YAML syntax error: ...`. Config
        values quoted in a message are untrusted text: the line goes through `edge_text`.
        """
        where = self.where()
        if not self.path:  # about a whole file: syntax, unreadable, empty
            return edge_text(f"{self.severity}: {where or '(config)'}: {self.message}")
        text = f"{self.severity}: {self.path}: {self.message}"
        return edge_text(f"{text} ({where})" if where else text)

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "path": self.path,
            "message": self.message,
            "severity": self.severity,
        }
        for key in ("file", "line", "column"):
            if getattr(self, key) is not None:
                out[key] = getattr(self, key)
        return out


class ConfigError(Exception):
    """Raised by `LoadResult.require()` when a config has errors; carries every diagnostic."""

    def __init__(self, diagnostics: list[Diagnostic]) -> None:
        self.diagnostics = diagnostics
        super().__init__("\n".join(d.format() for d in diagnostics))


class LoadResult(Struct):
    """The outcome of `load_config`: a Config when there is no error, and every diagnostic."""

    config: Config | None
    diagnostics: list[Diagnostic] = field(default_factory=list)
    homes: dict[str, str] = field(default_factory=dict)
    """Each `~user` the config's paths name, and the home it was expanded to (a cached load
    holds while every one still expands to it: `config/cache.py`)."""

    @property
    def errors(self) -> list[Diagnostic]:
        return [d for d in self.diagnostics if d.severity == "error"]

    @property
    def warnings(self) -> list[Diagnostic]:
        return [d for d in self.diagnostics if d.severity == "warning"]

    @property
    def ok(self) -> bool:
        return self.config is not None

    def require(self) -> Config:
        """The config, or raise ConfigError with every diagnostic."""
        if self.config is None:
            raise ConfigError(self.diagnostics)
        return self.config


class Reporter:
    """Collects diagnostics for one load, locating each path in the merged config tree."""

    def __init__(self) -> None:
        self.root: Any = None
        self.diagnostics: list[Diagnostic] = []
        self._muted: set[str] = set()
        self.homes: dict[str, str] = {}  # `~user` → home, as `LoadResult.homes`
        self.interpolated: dict[KeyPath, str] = {}
        """Values that were one whole reference (`"${X}"`, `"${X:-d}"`): path → the reference
        as written (`config/schema.py` reads one as true/false or an integer there)."""
        self.yaml_words: set[Origin] = set()
        """Where a value was an unquoted YAML `yes`/`no`/`on`/`off`/`y`/`n` (the origin its
        key or list item is located at): a boolean to YAML 1.1, a string here."""

    def mute_failed_paths(self) -> None:
        """Drop later errors at paths that already have one (e.g. a failed `${VAR}`)."""
        self._muted = {d.path for d in self.diagnostics if d.severity == "error" and d.path}

    def add(
        self,
        path: KeyPath,
        message: str,
        severity: Severity = "error",
        origin: Origin | None = None,
    ) -> None:
        if severity == "error" and format_path(path) in self._muted:
            return
        where = origin or locate(self.root, path)
        self.diagnostics.append(
            Diagnostic(
                format_path(path),
                message,
                severity,
                where.file if where else None,
                where.line if where else None,
                where.column if where else None,
            )
        )

    def error(self, path: KeyPath, message: str, origin: Origin | None = None) -> None:
        self.add(path, message, "error", origin)

    def warning(self, path: KeyPath, message: str, origin: Origin | None = None) -> None:
        self.add(path, message, "warning", origin)

    @property
    def errors(self) -> list[Diagnostic]:
        return [d for d in self.diagnostics if d.severity == "error"]

    @property
    def has_errors(self) -> bool:
        return any(d.severity == "error" for d in self.diagnostics)

    def finish(self, files: list[str], strict: bool) -> list[Diagnostic]:
        """The diagnostics in file and line order; with `strict`, warnings become errors."""
        rank = {name: i for i, name in enumerate(files)}

        def key(d: Diagnostic) -> tuple[int, int, int]:
            return (rank.get(d.file or "", -1), d.line or 0, d.column or 0)

        out = sorted(dict.fromkeys(self.diagnostics), key=key)
        if strict:
            out = [msgspec.structs.replace(d, severity="error") for d in out]
        return out
