"""Instant start, honestly: the validated-config cache returns exactly what a full validation
returns and is missed whenever anything validation depends on changed (a file, an interpolated
environment value, the schema); it never trusts a directory or file another user could write;
compiled hyperscan databases load from their store and a damaged one is compiled again; a
`run --once` of a file watcher imports neither jsonschema nor the agents hub, croniter or the
gate's XML, and starts no guardian process."""

from __future__ import annotations

import json
import os
import pwd
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from inproc import inproc

from watchrun.config import cache as config_cache
from watchrun.config import load_config, schema
from watchrun.match.matcher import Matcher
from watchrun.runtime.hscache import DiskStore, disk_store

CONFIG = """\
watchers:
  - id: app
    path: ./app.log
    pattern: "ERROR|FATAL"
    exclude: [healthcheck]
    gate: {maxMatches: 0}
  - id: build
    command: "make ${TARGET:-all} ${EXTRA}"
    pattern: "error:"
    restart: on-failure
    restartDelay: 250ms
    env: {TOKEN: "${TOKEN}"}
    wake: triage
agents:
  - name: triage
    provider: mock
    prompt: "look: {matches}"
    schedule: "0 * * * *"
redact: ["sk-[a-z0-9]{8}"]
limits: {pollMs: 5}
"""


@pytest.fixture()
def cached(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    where = tmp_path / "cache"
    monkeypatch.setenv("WATCHRUN_CACHE_DIR", str(where))
    return where / "config"


def write(tmp_path: Path, text: str = CONFIG) -> Path:
    path = tmp_path / "watch.yaml"
    path.write_text(text)
    return path


ENV = {"EXTRA": "-j4", "TOKEN": "t0"}


def _validations(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """One item per full validation from now on."""
    calls: list[int] = []
    real = schema.check_schema

    def counted(tree: object, report: object) -> None:
        calls.append(1)
        real(tree, report)  # type: ignore[arg-type]

    monkeypatch.setattr(schema, "check_schema", counted)
    return calls


def test_a_hit_is_exactly_what_validation_returned(tmp_path: Path, cached: Path,
                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    path = write(tmp_path)
    full = load_config([path], env=ENV)
    assert full.config is not None and full.warnings  # pollMs is clamped: a warning
    first = load_config([path], env=ENV, cache=True)
    assert list(cached.glob("*.json")), "the validated config was stored"

    def no_validation(*a: object, **k: object) -> None:
        raise AssertionError("validated again")

    monkeypatch.setattr("watchrun.config.schema.check_schema", no_validation)
    hit = load_config([path], env=ENV, cache=True)
    assert hit.config == full.config == first.config
    assert hit.diagnostics == full.diagnostics  # the warnings are said again


@pytest.mark.parametrize("change", ["file", "env", "new-env", "unset-env", "schema", "code"])
def test_anything_validation_depends_on_is_a_miss(tmp_path: Path, cached: Path, change: str,
                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    path = write(tmp_path)
    env = dict(ENV)
    load_config([path], env=env, cache=True)
    if change == "file":
        write(tmp_path, CONFIG.replace("pollMs: 5", "pollMs: 20"))
    elif change == "env":
        env["TOKEN"] = "t1"
    elif change == "new-env":
        env["TARGET"] = "install"  # used through a default: now it is set
    elif change == "unset-env":
        del env["EXTRA"]  # an error now: the cache must not hide it
    elif change == "schema":
        monkeypatch.setattr(config_cache, "_code", lambda: ["another schema"])
    else:
        monkeypatch.setattr(config_cache, "__version__", "9.9.9")
    calls = _validations(monkeypatch)
    result = load_config([path], env=env, cache=True)
    assert calls == [1], f"a {change} change must validate again"
    fresh = load_config([path], env=env)
    assert result.config == fresh.config and result.diagnostics == fresh.diagnostics


def test_the_key_holds_the_schema_and_every_module_validation_runs(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """What the `schema` and `code` cases above stand in for: an edited (or reinstalled)
    module of config/ or match/, or another schema, makes another key."""
    import watchrun.schemas

    here = Path(str(config_cache.__file__)).parent  # (copies: touching the installed modules
    for folder in (here, here.parent / "match"):  # made another worker's entries misses)
        shutil.copytree(folder, tmp_path / "pkg" / folder.name, copy_function=shutil.copy2,
                        ignore=shutil.ignore_patterns("__pycache__"))
    monkeypatch.setattr(config_cache, "__file__", str(tmp_path / "pkg" / "config" / "cache.py"))
    for path in (tmp_path / "pkg" / "config" / "cache.py", tmp_path / "pkg" / "match" /
                 "regex.py"):  # one of each folder
        before = config_cache._code()
        assert config_cache._code() == before  # (nothing else changes it)
        st = path.stat()
        os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns + 1000))
        assert config_cache._code() != before, path
    before = config_cache._code()
    real = Path(str(watchrun.schemas.__file__)).parent / config_cache.SCHEMA_FILE
    (tmp_path / config_cache.SCHEMA_FILE).write_bytes(real.read_bytes() + b" ")
    monkeypatch.setattr(watchrun.schemas, "__file__", str(tmp_path / "__init__.py"))
    assert config_cache._code() != before


def test_another_install_or_a_reinstall_with_the_same_sizes_and_mtimes_is_a_miss(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Two installs whose modules have the same sizes and mtimes (a Nix store sets every mtime
    to 1; an image build clamps them), one with a check changed in place (a bound of the same
    width), are two keys: the one did not run with the other's clamps. So is a module written
    again with the same size and its mtime set back."""
    here = Path(str(config_cache.__file__)).parent
    keys = []
    for name in ("a", "b"):
        for folder in (here, here.parent / "match"):
            shutil.copytree(folder, tmp_path / name / folder.name,
                            ignore=shutil.ignore_patterns("__pycache__"))
        for path in (tmp_path / name).rglob("*.py"):
            os.utime(path, ns=(1_000_000_000, 1_000_000_000))
        monkeypatch.setattr(config_cache, "__file__", str(tmp_path / name / "config" / "cache.py"))
        keys.append(config_cache._code())
    assert keys[0] != keys[1]
    clamp = tmp_path / "b" / "config" / "clamp.py"
    text = clamp.read_text()
    clamp.write_text(text.replace("64 * 1024", "32 * 1024", 1))
    assert len(clamp.read_text()) == len(text) and clamp.read_text() != text
    os.utime(clamp, ns=(1_000_000_000, 1_000_000_000))
    assert config_cache._code() != keys[1]


@pytest.mark.parametrize("command", ["validate", "config"])
def test_validate_validates_in_full_and_stores_it_for_the_run_after_it(
        tmp_path: Path, cached: Path, monkeypatch: pytest.MonkeyPatch, command: str) -> None:
    """README "Start-up caches": `validate` and `config` never read an entry (each call
    validates) and store what they validated, so a `run` (or a view) after them validates
    nothing."""
    path = write(tmp_path)
    calls = _validations(monkeypatch)
    env = {**os.environ, **ENV}
    for _ in range(2):
        assert inproc(tmp_path, command, "-c", str(path), env=env).returncode == 0
    assert calls == [1, 1] and len(list(cached.glob("*.json"))) == 1
    hit = load_config([path], env=ENV, cache=True)
    assert calls == [1, 1], "the run after validate validated again"
    assert hit.config == load_config([path], env=ENV).config


def test_an_entry_names_the_interpreter_only_when_its_config_holds_it(
        tmp_path: Path, cached: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The mock agent's default command is this interpreter: an entry of a config with one is
    missed under another interpreter (`python3` beside `python`); one without is not."""
    with_mock = write(tmp_path)
    files_only = tmp_path / "files.yaml"
    files_only.write_text("watchers:\n  - {id: app, path: app.log, pattern: ERROR}\n")
    for path in (with_mock, files_only):
        load_config([path], env=ENV, cache=True)
    entries = {json.loads(f.read_bytes())["result"][2]["config"][2]["agents"][1] != []:
               json.loads(f.read_bytes()) for f in cached.glob("*.json")}
    assert entries[True]["executable"] == sys.executable and "executable" not in entries[False]
    calls = _validations(monkeypatch)
    monkeypatch.setattr(sys, "executable", sys.executable + "3")
    load_config([files_only], env=ENV, cache=True)
    assert calls == [], "a config without the interpreter's path missed under another"
    load_config([with_mock], env=ENV, cache=True)
    assert calls == [1], "a config holding the interpreter's path was hit under another"


def test_a_config_edited_while_it_is_loaded_is_never_stored_as_what_it_held_before(
        tmp_path: Path, cached: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Explorer config F1: the key was made of one read of the file and the config of a second;
    a file edited in between (a deploy's write while the runner starts) was stored under the
    key of what it held before, and from then on that content ran the other command (`echo
    BBBB` while the file said `echo AAAA`). Now what is keyed is what is validated."""
    path = write(tmp_path, CONFIG.replace("make ", "echo AAAA "))
    read = config_cache.read_regular

    def edited_after(p: Path, limit: int = -1) -> bytes:  # the edit lands just after the read
        data = read(p, limit)
        p.write_text(CONFIG.replace("make ", "echo BBBB "))
        return data

    monkeypatch.setattr(config_cache, "read_regular", edited_after)
    first = load_config([path], env=ENV, cache=True)
    monkeypatch.undo()
    monkeypatch.setenv("WATCHRUN_CACHE_DIR", str(cached.parent))
    assert first.config is not None and "AAAA" in str(first.config.watchers[1].command)
    path.write_text(CONFIG.replace("make ", "echo AAAA "))  # the file as it was keyed
    calls = _validations(monkeypatch)
    again = load_config([path], env=ENV, cache=True)
    assert again.config is not None and "AAAA" in str(again.config.watchers[1].command)
    assert calls == [], "the entry is used: it holds the content it was keyed by"


def test_an_output_dir_link_pointed_elsewhere_is_a_miss(tmp_path: Path, cached: Path) -> None:
    """Explorer config F2: validation refuses a watcher of the runner's own files where the
    output dir's symlink leads; the key held the link's path only, so a link pointed into a
    watched folder since was still "valid" from the cache, and the runner started. Now where
    the link leads is part of the entry: pointed elsewhere, the config is validated again."""
    (tmp_path / "x").mkdir()
    (tmp_path / "y" / "watchers").mkdir(parents=True)
    link = tmp_path / "out"
    link.symlink_to(tmp_path / "x")
    path = write(tmp_path, "watchers:\n  - id: z\n    path: ./y/watchers/z.jsonl\n"
                           "    pattern: ERROR\n")
    assert load_config([path], env=ENV, output_dir=link, cache=True).config is not None
    link.unlink()
    link.symlink_to(tmp_path / "y")
    again = load_config([path], env=ENV, output_dir=link, cache=True)
    assert again.config is None
    assert any("is one of the runner's own files" in d.message for d in again.diagnostics)


def test_a_users_home_moved_is_a_miss(tmp_path: Path, cached: Path,
                                      monkeypatch: pytest.MonkeyPatch) -> None:
    """A `~user` path is that user's home as the user database says now (`usermod -d` moved
    it): the entry keeps the home each `~user` gave, and a moved one is validated again."""
    me = pwd.getpwuid(os.getuid())
    path = write(tmp_path, f"watchers:\n  - id: a\n    path: ~{me.pw_name}/app.log\n"
                           "    pattern: ERROR\n")
    first = load_config([path], env=ENV, cache=True).require()
    assert first.watchers[0].path == Path(me.pw_dir, "app.log")
    real = pwd.getpwnam

    def moved(name: str) -> pwd.struct_passwd:
        e = real(name)
        return pwd.struct_passwd((*e[:5], str(tmp_path / "moved"), e[6])) if name == me.pw_name \
            else e

    monkeypatch.setattr(pwd, "getpwnam", moved)
    again = load_config([path], env=ENV, cache=True).require()
    assert again.watchers[0].path == tmp_path / "moved" / "app.log"


def test_an_invalid_config_is_never_stored(tmp_path: Path, cached: Path) -> None:
    path = write(tmp_path, CONFIG.replace('pattern: "error:"', 'pattern: "[oops"'))
    assert load_config([path], env=ENV, cache=True).config is None
    assert not cached.exists() or not list(cached.glob("*.json"))


def test_a_directory_or_entry_others_could_write_is_not_trusted(tmp_path: Path,
                                                                cached: Path) -> None:
    path = write(tmp_path)
    load_config([path], env=ENV, cache=True)
    (entry,) = cached.glob("*.json")
    doc = json.loads(entry.read_text())
    forged = json.dumps(doc).replace("make all", "rm -rf")
    entry.write_text(forged)
    os.chmod(entry, 0o666)  # writable by anyone: ignored, validated again
    assert "rm -rf" not in str(load_config([path], env=ENV, cache=True).config)
    entry.write_text(forged)
    os.chmod(entry, 0o600)  # (the forged entry is the runner's own again: it is read)
    assert "rm -rf" in str(load_config([path], env=ENV, cache=True).config)
    os.chmod(cached, 0o777)  # the directory: ignored too
    assert "rm -rf" not in str(load_config([path], env=ENV, cache=True).config)
    os.chmod(cached, 0o700)
    shutil.rmtree(cached)
    cached.parent.mkdir(parents=True, exist_ok=True)
    (tmp_path / "elsewhere").mkdir(mode=0o700)
    cached.symlink_to(tmp_path / "elsewhere")  # a link in place of the directory: not followed
    assert load_config([path], env=ENV, cache=True).config is not None
    assert not list((tmp_path / "elsewhere").iterdir())


def test_a_directory_or_entry_of_another_user_is_not_trusted(tmp_path: Path,
                                                             cached: Path) -> None:
    """docs/security.md guard 7: an entry or a directory not the runner's own is ignored,
    however private its mode (root gives them to nobody here), and so is the directory when
    the folder it is in is another user's or anyone may write it."""
    if os.geteuid() != 0:
        pytest.skip("needs root to give a file to another user")
    path = write(tmp_path)
    load_config([path], env=ENV, cache=True)
    (entry,) = cached.glob("*.json")
    entry.write_text(json.dumps(json.loads(entry.read_text())).replace("make all", "rm -rf"))
    assert "rm -rf" in str(load_config([path], env=ENV, cache=True).config)  # (it is read)
    os.chown(entry, 65534, 65534)
    assert "rm -rf" not in str(load_config([path], env=ENV, cache=True).config)
    os.chown(entry, 0, 0)
    os.chown(cached, 65534, 65534)
    assert "rm -rf" not in str(load_config([path], env=ENV, cache=True).config)
    os.chown(cached, 0, 0)
    entry.write_text(json.dumps(json.loads(entry.read_text())).replace("make all", "rm -rf"))
    assert "rm -rf" in str(load_config([path], env=ENV, cache=True).config)  # (forged again:
    # the misses above stored the config they validated)
    base = cached.parent  # $WATCHRUN_CACHE_DIR: another user's folder can have its content
    os.chown(base, 65534, 65534)  # swapped (explorer security, 2c): not trusted either
    assert "rm -rf" not in str(load_config([path], env=ENV, cache=True).config)
    os.chown(base, 0, 0)
    os.chmod(base, 0o777)  # nor one anyone may write
    assert "rm -rf" not in str(load_config([path], env=ENV, cache=True).config)
    os.chmod(base, 0o755)  # root's and no one else may write it: the entry is read again
    assert "rm -rf" in str(load_config([path], env=ENV, cache=True).config)


def test_the_cache_can_be_turned_off(tmp_path: Path, cached: Path,
                                     monkeypatch: pytest.MonkeyPatch) -> None:
    """`WATCHRUN_CONFIG_CACHE=0` turns off both caches: the configs' and the compiled
    patterns' (`disk_store`, which `run` uses)."""
    assert disk_store(os.environ) is not None
    monkeypatch.setenv("WATCHRUN_CONFIG_CACHE", "0")
    load_config([write(tmp_path)], env=ENV, cache=True)
    assert not cached.exists()
    assert disk_store(os.environ) is None


def test_compiled_databases_load_from_the_store(tmp_path: Path) -> None:
    pytest.importorskip("hyperscan")
    store = DiskStore(tmp_path / "hs")
    data = b"INFO a\nERROR healthcheck\nERROR b\nfatal c\n"
    first = Matcher("ERROR|FATAL", ["healthcheck"], store=store)
    (db,) = (tmp_path / "hs").glob("*.db")
    assert first.engine == "hyperscan" and oct(db.stat().st_mode & 0o777) == "0o600"
    loaded = Matcher("ERROR|FATAL", ["healthcheck"], store=DiskStore(tmp_path / "hs"))
    assert loaded.find(data) == first.find(data) == [(25, 32), (33, 40)]
    db.write_bytes(b"not a database")  # damaged: compiled again, and stored again
    again = Matcher("ERROR|FATAL", ["healthcheck"], store=DiskStore(tmp_path / "hs"))
    assert again.find(data) == [(25, 32), (33, 40)]
    assert db.read_bytes() != b"not a database"
    os.chmod(db, 0o666)  # a database others could write: not read
    assert DiskStore(tmp_path / "hs").load(db.stem) is None
    os.chmod(db, 0o600)
    assert DiskStore(tmp_path / "hs").load(db.stem) is not None
    os.chmod(tmp_path / "hs", 0o777)  # a directory others could write: not read
    assert DiskStore(tmp_path / "hs").load(db.stem) is None


def twice(tmp_path: Path, argv: list[str]) -> list[tuple[str, set[str]]]:
    """`watchrun ARGV -c w.yaml` run twice in `tmp_path` with its own empty cache: each run's
    stdout and the modules it had loaded at its end."""
    probe = (
        "import sys, runpy\n"
        f"sys.argv = ['watchrun', *{argv!r}, '-c', 'w.yaml']\n"
        "try:\n    runpy.run_module('watchrun', run_name='__main__')\n"
        "except SystemExit:\n    pass\n"
        "print('\\n' + ' '.join(sorted(sys.modules)), file=sys.stderr)\n"
    )
    env = {**os.environ, "WATCHRUN_CACHE_DIR": str(tmp_path / "cache")}
    runs = [subprocess.run([sys.executable, "-c", probe], cwd=tmp_path, env=env,
                           capture_output=True, text=True, check=True) for _ in range(2)]
    return [(r.stdout, set(r.stderr.split("\n")[-2].split())) for r in runs]


def test_a_once_run_of_a_file_watcher_imports_only_what_it_uses(tmp_path: Path) -> None:
    (tmp_path / "app.log").write_text("INFO a\nERROR b\n")
    (tmp_path / "w.yaml").write_text(json.dumps({"watchers": [
        {"id": "app", "path": "app.log", "pattern": "ERROR", "fromStart": True}]}))
    (_, first), (_, second) = twice(tmp_path, ["run", "--once", "--quiet"])
    assert "jsonschema" in first  # validated: the cache was empty
    for absent in ("jsonschema", "yaml", "croniter", "xml.etree.ElementTree",
                   "watchrun.agents.hub", "watchrun.runtime.isolation", "prometheus_client",
                   "shtab", "importlib.resources"):
        assert absent not in second, f"{absent} imported by a once run of a file watcher"


@pytest.mark.parametrize("argv", [["list"], ["status", "app", "--json"], ["agent", "list"]],
                         ids=["list", "status", "agent-list"])
def test_the_commands_that_read_the_config_use_the_cache_too(tmp_path: Path,
                                                            argv: list[str]) -> None:
    """README "Start-up caches": `list`, `status` and the agent views read the config to find
    the output dir; on an unchanged config the second call validates nothing (no jsonschema,
    no YAML) and prints the same, and none of them loads asyncio."""
    (tmp_path / "w.yaml").write_text(json.dumps({"watchers": [
        {"id": "app", "path": "app.log", "pattern": "ERROR"}]}))
    (out1, first), (out2, second) = twice(tmp_path, argv)
    assert "jsonschema" in first and "yaml" in first
    assert "jsonschema" not in second and "yaml" not in second
    assert "asyncio" not in second  # the control socket's client blocks: no event loop
    assert out1 == out2 and out2


def test_validate_checks_everything_and_loads_no_asyncio(tmp_path: Path) -> None:
    """`validate` never uses the cache (jsonschema on every call) and, a check of files only,
    runs no event loop: the orphaned-checkpoint check reads state/ without the module that
    saves checkpoints from the loop (asyncio cost ~40 ms of every call's ~250)."""
    (tmp_path / "w.yaml").write_text(json.dumps({"watchers": [
        {"id": "app", "path": "app.log", "pattern": "ERROR"}]}))
    (tmp_path / ".watchrun" / "state").mkdir(parents=True)
    (tmp_path / ".watchrun" / "state" / "gone.checkpoint.json").write_text("{}")
    (_, first), (out2, second) = twice(tmp_path, ["validate"])
    assert "jsonschema" in first and "jsonschema" in second
    assert "asyncio" not in first and "asyncio" not in second
    assert "watchrun.sources.orphans" in second and "gone" in out2, out2


def test_the_guardian_starts_with_the_first_child_not_with_the_runner() -> None:
    """A runner of files only starts no guardian process; one that spawns starts it first."""
    import asyncio

    from watchrun.process.groups import GroupRegistry
    from watchrun.process.guard_lazy import LazyGuardian
    from watchrun.process.spawn import Spawner

    async def main() -> None:
        order: list[str] = []
        guardian = LazyGuardian(order.append)

        def told(line: str) -> None:
            order.append("told")
            guardian.tell(line)

        def prepare() -> None:
            order.append("guardian")
            guardian.start()

        registry = GroupRegistry(None, told, None, prepare)
        spawner = Spawner(registry)
        assert guardian.pid is None
        proc = await spawner.spawn(["sleep", "30"], cwd=None, env={})
        assert order == ["guardian", "told"], "the guardian is up before the child is told"
        assert guardian.pid is not None and guardian.pid != proc.pid
        await proc.terminate(5.0)
        proc.close()
        guardian.close()

    asyncio.run(main())


@pytest.mark.parametrize(("env", "where"), [
    ({"WATCHRUN_CACHE_DIR": "own", "CACHE_DIRECTORY": "unit", "XDG_CACHE_HOME": "xdg"}, "own"),
    ({"CACHE_DIRECTORY": "unit:other", "XDG_CACHE_HOME": "xdg"}, "unit"),
    ({"XDG_CACHE_HOME": "xdg"}, "xdg/watchrun"),
    ({}, "home/.cache/watchrun"),
], ids=["WATCHRUN_CACHE_DIR", "CACHE_DIRECTORY", "XDG_CACHE_HOME", "HOME"])
def test_run_caches_where_the_readme_says_and_uses_what_validate_stored(
        tmp_path: Path, env: dict[str, str], where: str) -> None:
    """README "Start-up caches": `$WATCHRUN_CACHE_DIR`, else `$CACHE_DIRECTORY`, else
    `$XDG_CACHE_HOME` or `~/.cache`, `/watchrun`; the directory 0700, its files 0600; what
    `validate` stored (here through `python -m watchrun`, another interpreter path than the
    console script's `python3`) is what the `run` after it uses: the entry is not written
    again."""
    (tmp_path / "app.log").write_text("fine\n")
    config = write(tmp_path, "watchers:\n  - {id: app, path: app.log, pattern: ERROR}\n")
    clean = {k: v for k, v in os.environ.items() if k not in (
        "WATCHRUN_CACHE_DIR", "CACHE_DIRECTORY", "XDG_CACHE_HOME", "WATCHRUN_CONFIG_CACHE")}
    full = {**clean, "HOME": str(tmp_path / "home"),
            **{k: ":".join(str(tmp_path / p) for p in v.split(":")) for k, v in env.items()}}
    watchrun = shutil.which("watchrun", path=os.path.dirname(sys.executable))
    assert watchrun is not None
    p = subprocess.run([sys.executable, "-m", "watchrun", "validate", "-c", str(config)],
                       env=full, capture_output=True, text=True, timeout=60, check=False)
    assert p.returncode == 0, p.stderr
    (entry,) = (tmp_path / where / "config").iterdir()
    stored = entry.stat()
    p = subprocess.run([watchrun, "run", "--once", "-c", str(config)], env=full,
                       capture_output=True, text=True, timeout=60, check=False)
    assert p.returncode == 0, p.stderr
    assert list((tmp_path / where / "config").iterdir()) == [entry]
    used = entry.stat()
    assert (used.st_ino, used.st_mtime_ns) == (stored.st_ino, stored.st_mtime_ns), "stored again"
    assert (tmp_path / where / "config").stat().st_mode & 0o777 == 0o700
    assert (tmp_path / where).stat().st_mode & 0o777 == 0o700  # created private, as said
    assert used.st_mode & 0o777 == 0o600
    others = [d for d in ("own", "unit", "other", "xdg", "home") if not where.startswith(d)]
    assert not [d for d in others if (tmp_path / d).exists()]
