"""A cache of validated configs: `watchrun run` on an unchanged config skips YAML and JSON Schema.

jsonschema stays the validator of record: an entry is only ever written from a full load that
found no error, and any miss validates again. An entry is found by a key over everything the
result depends on: each file's path and contents, `--output-dir` (as an absolute path: a
relative one is relative to the working directory), the strictness, the home directory (`~`),
whether google-re2 is importable (it decides which patterns need `backtracking`), the file
system's encoding and its error handler (a string it cannot encode is an error:
`config/checks.py`), UTF-8 mode and `-B` (the mock agent's default command passes both on:
`process/helper_start.py`), how many digits an integer may have (more is an error), watchrun's
version, the schema's contents, where the modules of `config/` and `match/` are and the size,
mtime, ctime and inode of every one of them. The entry also lists the environment variables the
config interpolated (recorded while it was validated) with a hash of each value: a changed or
newly set one is a miss; and
the interpreter's path when the result holds it (the mock agent's default command): another
interpreter is a miss; and where the output dir's symlinks led: a link pointed elsewhere since
is a miss; and the home each `~user` in a path was expanded to: a home moved since is a miss.
`validate` and `config` never read an entry and store what they validated without error, so a
`run` after them starts at once.

Where: `$WATCHRUN_CACHE_DIR`, else systemd's `$CACHE_DIRECTORY`, else `$XDG_CACHE_HOME/watchrun`
(`~/.cache/watchrun`), under `config/`; not state/, which lives in the output dir that only a
loaded config names. `WATCHRUN_CONFIG_CACHE=0` turns it off. An entry holds the interpolated
config (environment values included), so the directory is the runner's own, mode 0700, and each
file mode 0600, written atomically without following a link; a directory or file that another
user could have written is not trusted (the config is validated instead). Entries are JSON, not
pickle: reading one runs no code.
"""

from __future__ import annotations

import contextlib
import enum
import hashlib
import json
import os
import sys
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import msgspec

from watchrun import __version__
from watchrun.config import model
from watchrun.config.diagnostics import Diagnostic, LoadResult
from watchrun.config.homes import expand_home
from watchrun.config.loader import MAX_BYTES, read_regular
from watchrun.config.private import PrivateStore
from watchrun.match.redact import Rule

__all__ = ["FORMAT", "KEEP", "cache_dir", "cached_load"]

FORMAT = 1
"""Bumped when the entry layout changes."""
SCHEMA_FILE = "watch.schema.json"
"""The config schema (`config/schema.py` reads the same file through importlib.resources)."""
KEEP = 32
"""Entries kept; older ones are removed when a new one is written."""
_CLASSES: dict[str, type] = {
    **{name: obj for name, obj in vars(model).items()
       if isinstance(obj, type) and obj.__module__ == model.__name__},
    "Rule": Rule, "Diagnostic": Diagnostic, "LoadResult": LoadResult,
}
"""The only classes an entry may name: the config model's own (so a field added to it is
cached too), redaction rules and diagnostics."""


def cache_dir(environ: Mapping[str, str]) -> Path | None:
    """Where entries live, or None when the cache is off (also when it would be under a home
    directory and none can be found: `config/homes.py`)."""
    if environ.get("WATCHRUN_CONFIG_CACHE", "1") == "0":
        return None
    base = environ.get("WATCHRUN_CACHE_DIR") or environ.get("CACHE_DIRECTORY", "").split(":")[0]
    if not base:
        home = expand_home("~")
        xdg = environ.get("XDG_CACHE_HOME") or (os.path.join(home, ".cache") if home else None)
        if xdg is None:  # (no home found: not a `~` folder in the current directory)
            return None
        base = os.path.join(xdg, "watchrun")
    return Path(base) / "config"


class _Recording(Mapping[str, str]):
    """The environment, noting which variables were looked up."""

    def __init__(self, env: Mapping[str, str]) -> None:
        self.env, self.seen = env, set[str]()

    def __getitem__(self, name: str) -> str:
        self.seen.add(name)
        return self.env[name]

    def __iter__(self) -> Any:
        return iter(self.env)

    def __len__(self) -> int:
        return len(self.env)

    def __contains__(self, name: object) -> bool:
        if isinstance(name, str):
            self.seen.add(name)
        return name in self.env

    def get(self, name: str, default: Any = None) -> Any:
        self.seen.add(name)
        return self.env.get(name, default)


def cached_load(paths: Sequence[Path], env: Mapping[str, str], output_dir: Path | None,
                strict: bool, load: Callable[[Mapping[str, str], Sequence[bytes] | None],
                                             LoadResult], *,
                refresh: bool = False) -> LoadResult:
    """`load(env, contents)` (a full load of the files' contents as the key read them, or, with
    None, as it reads them), unless an entry for these files, settings and environment exists
    (never looked for with `refresh`); a full load without errors is stored."""
    where = cache_dir(os.environ)
    keyed = _key(paths, output_dir, strict) if where is not None else None
    if where is None or keyed is None:
        return load(env, None)
    key, contents = keyed
    store = PrivateStore(where, ".json", keep=KEEP, max_bytes=16 << 20)
    hit = None if refresh else _read(store.load(key), key, env)
    if hit is not None:
        return hit
    recording = _Recording(env)
    result = load(recording, contents)
    if result.config is not None:
        with contextlib.suppress(TypeError, ValueError):
            encoded = _encode(result)
            doc = {"format": FORMAT, "key": key,
                   "env": {n: _digest(env.get(n)) for n in sorted(recording.seen)},
                   "outputDir": _resolved(result), "result": encoded}
            if json.dumps(sys.executable)[1:-1] in json.dumps(encoded):
                doc["executable"] = sys.executable  # (the mock agent's default command)
            store.save(key, json.dumps(doc, separators=(",", ":")).encode())
    return result


def _resolved(result: LoadResult) -> str | None:
    """Where the output dir's symlinks lead: validation refuses a watcher of the runner's own
    files there (`config/watchers.py`), so a link pointed elsewhere since is a miss."""
    return None if result.config is None else os.path.realpath(result.config.output.dir)


def _digest(value: str | bytes | None) -> str | None:
    if value is None:
        return None
    return hashlib.sha256(value.encode("utf-8", "surrogateescape") if isinstance(value, str)
                          else value).hexdigest()


def _key(paths: Sequence[Path], output_dir: Path | None, strict: bool
         ) -> tuple[str, list[bytes]] | None:
    """The hex key of a load of `paths` and the files' contents it was made of (the load
    validates those, not a second read: a file edited in between would be stored under the key
    of what it held before), or None when a file cannot be read (validation then reports it)."""
    files, contents = [], []
    try:
        for p in paths:
            contents.append(read_regular(Path(p), MAX_BYTES + 1))
            files.append((str(p), os.path.abspath(p), _digest(contents[-1])))
    except OSError:  # missing, unreadable, or not a regular file (a FIFO is never waited on)
        return None
    import importlib.util

    out = os.path.abspath(output_dir) if output_dir else None  # (relative: to the cwd)
    head = [FORMAT, __version__, _code(), files, out, strict,
            os.path.expanduser("~"), importlib.util.find_spec("re2") is not None,
            sys.getfilesystemencoding(), sys.getfilesystemencodeerrors(), sys.flags.utf8_mode,
            sys.dont_write_bytecode, sys.get_int_max_str_digits()]
    return hashlib.sha256(json.dumps(head).encode()).hexdigest(), contents


def _code() -> list[Any]:
    """What validation runs: the schema's contents, and where the modules of config/ and match/
    are and each one's size, mtime, ctime and inode: an edited or reinstalled module is a miss,
    and so is another install, though its modules have the same sizes and mtimes (a Nix store
    sets every mtime to 1; an image build clamps them to one date): no tool sets a ctime."""
    import importlib  # the schema read as a file: importlib.resources costs more than the rest

    schemas = importlib.import_module("watchrun.schemas")
    here = Path(__file__).parent
    mods = [(e.name, st.st_size, st.st_mtime_ns, st.st_ctime_ns, st.st_ino)
            for d in (here, here.parent / "match")
            for e in sorted(os.scandir(d), key=lambda e: e.name) if e.name.endswith(".py")
            for st in (e.stat(),)]
    with open(Path(str(schemas.__file__)).parent / SCHEMA_FILE, "rb") as fh:
        return [_digest(fh.read()), str(here), mods]


def _read(data: bytes | None, key: str, env: Mapping[str, str]) -> LoadResult | None:
    """The entry's result, unless it is missing, for another key, or an interpolated
    variable or the home of a `~user` it names changed since it was written."""
    if data is None:
        return None
    try:
        doc = json.loads(data)
        if doc.get("format") != FORMAT or doc.get("key") != key:
            return None
        if doc.get("executable", sys.executable) != sys.executable:
            return None
        if any(_digest(env.get(name)) != digest for name, digest in doc["env"].items()):
            return None
        result = _decode(doc["result"])
        if not isinstance(result, LoadResult) or result.config is None:
            return None
        if any(os.path.expanduser(f"~{user}") != home for user, home in result.homes.items()):
            return None  # (a user's home moved: its paths are others now)
        return result if doc.get("outputDir") == _resolved(result) else None
    except (ValueError, KeyError, TypeError, AttributeError):
        return None


def _encode(value: Any) -> Any:
    """`value` as JSON: every non-JSON value is a tagged list ([tag, ...])."""
    if value is None or (isinstance(value, bool | int | float | str) and not isinstance(
            value, enum.Enum)):  # fmt: skip
        return value
    if isinstance(value, enum.Enum):
        return ["e", _named(type(value)), value.value]
    if isinstance(value, msgspec.Struct):
        return ["c", _named(type(value)), {f: _encode(getattr(value, f))
                                           for f in value.__struct_fields__}]
    if isinstance(value, Path):
        return ["p", str(value)]
    if isinstance(value, tuple):
        return ["t", [_encode(v) for v in value]]
    if isinstance(value, list):
        return ["l", [_encode(v) for v in value]]
    if isinstance(value, Mapping):
        return ["d", [[_encode(k), _encode(v)] for k, v in value.items()]]
    raise TypeError(f"not cacheable: {type(value).__name__}")


def _named(cls: type) -> str:
    if _CLASSES.get(cls.__name__) is not cls:
        raise TypeError(f"not cacheable: {cls.__name__}")
    return cls.__name__


def _decode(value: Any) -> Any:
    if not isinstance(value, list):
        return value
    tag = value[0]
    if tag == "e":
        return _CLASSES[value[1]](value[2])
    if tag == "c":
        return _CLASSES[value[1]](**{k: _decode(v) for k, v in value[2].items()})
    if tag == "p":
        return Path(value[1])
    if tag == "t":
        return tuple(_decode(v) for v in value[1])
    if tag == "l":
        return [_decode(v) for v in value[1]]
    if tag == "d":
        return {_decode(k): _decode(v) for k, v in value[1]}
    raise ValueError(f"unknown tag {tag!r}")
