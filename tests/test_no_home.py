"""A runner with no home (HOME unset and no entry for its uid in the user database, or a HOME
that is not an absolute path) makes no folder named `~` (or after the HOME) in its current
directory: no start-up cache, and a `~/…` path it is given is refused, saying why
(`config/homes.py`; an explorer's P10: the cache went to `./~/.cache/watchrun`)."""

from __future__ import annotations

import os
import pwd
import shutil
import subprocess
import tempfile
from pathlib import Path

import pytest
from liverunner import watchrun_bin

from watchrun.config.homes import expand_home, unexpanded
from watchrun.mcp.calls import CallError, normalize

UID = 4242
"""A uid with no entry in the user database (checked)."""
CONFIG = "watchers:\n  - {id: app, path: app.log, fromStart: true, pattern: ERROR}\n"


def homeless(folder: Path, env: dict[str, str]) -> dict[str, str]:
    """The runner's environment: `env` over this one without HOME and the cache variables."""
    gone = ("HOME", "WATCHRUN_CACHE_DIR", "CACHE_DIRECTORY", "XDG_CACHE_HOME",
            "WATCHRUN_CONFIG_CACHE")
    (folder / "app.log").write_text("one ERROR\n")
    (folder / "w.yaml").write_text(CONFIG)
    return {**{k: v for k, v in os.environ.items() if k not in gone}, **env}


def watchrun(folder: Path, env: dict[str, str], *args: str, prefix: tuple[str, ...] = ()
             ) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*prefix, watchrun_bin(), *args], cwd=folder, env=env, text=True,
                          capture_output=True, timeout=60, stdin=subprocess.DEVNULL)


def check_no_home(folder: Path, env: dict[str, str], why: str, made: str,
                  prefix: tuple[str, ...] = ()) -> None:
    """A once run works without a cache and leaves nothing named `made` in `folder`; a `~/x`
    output dir and an `add --path ~/…` are refused, saying `why`."""
    done = watchrun(folder, env, "run", "--once", "-c", "w.yaml", prefix=prefix)
    assert done.returncode == 0, done.stderr
    assert (folder / ".watchrun" / "watchers" / "app.jsonl").exists()
    assert not (folder / made).exists(), sorted(p.name for p in folder.iterdir())  # (no cache)
    out = watchrun(folder, env, "run", "--once", "-c", "w.yaml", "--output-dir", "~/x",
                   prefix=prefix)
    assert out.returncode == 2, out.stderr
    assert f'error: --output-dir "~/x": `~` cannot be expanded: {why}' in out.stderr
    add = watchrun(folder, env, "add", "-c", "w.yaml", "new", "--path", "~/new.log",
                   "--pattern", "ERROR", prefix=prefix)
    assert (add.returncode, add.stderr) == (
        2, f'watchrun: error: --path "~/new.log": `~` cannot be expanded: {why}\n')
    assert not (folder / made).exists(), sorted(p.name for p in folder.iterdir())


def test_a_uid_with_no_home_makes_no_folder_named_tilde() -> None:
    """As the explorer ran it: `setpriv` to a uid the user database does not know, HOME
    unset, in a folder of that uid."""
    setpriv = shutil.which("setpriv")
    if os.geteuid() != 0 or setpriv is None:
        pytest.skip("needs root and setpriv to run watchrun as another uid")
    with pytest.raises(KeyError):
        pwd.getpwuid(UID)
    prefix = (setpriv, f"--reuid={UID}", f"--regid={UID}", "--clear-groups")
    folder = Path(tempfile.mkdtemp(prefix="watchrun-no-home-"))  # (tmp_path: out of its reach)
    try:
        env = homeless(folder, {})
        if watchrun(folder, env, "--version", prefix=prefix).returncode != 0:
            pytest.skip(f"uid {UID} cannot run this watchrun here (its Python is out of reach)")
        for path in (folder, folder / "app.log", folder / "w.yaml"):
            os.chown(path, UID, UID)
        check_no_home(folder, env, f"HOME is unset and the user database has no home for uid "
                      f"{UID}", "~", prefix)
    finally:
        shutil.rmtree(folder)


def test_a_relative_home_makes_no_folder_after_it(tmp_path: Path) -> None:
    """HOME=`nest` (not absolute): the cache went to `./nest/.cache/watchrun`."""
    env = homeless(tmp_path, {"HOME": "nest"})
    check_no_home(tmp_path, env, 'HOME is not an absolute path ("nest")', "nest")


def test_the_reasons(monkeypatch: pytest.MonkeyPatch) -> None:
    """What `unexpanded` says for each way a `~` names no home; a home found is expanded."""
    monkeypatch.setenv("HOME", "/home/me")
    assert expand_home("~/x") == "/home/me/x" and expand_home("x/~") == "x/~"
    assert expand_home("~no-such-user-here/x") is None
    assert unexpanded("~no-such-user-here/x") == ('"~no-such-user-here/x": no user '
                                                  '"no-such-user-here" here to expand `~` to '
                                                  "(write ./~… for a folder named so)")
    monkeypatch.setenv("HOME", "rel")
    assert expand_home("~") is None
    assert unexpanded("~") == '"~": `~` cannot be expanded: HOME is not an absolute path ("rel")'
    monkeypatch.delenv("HOME")

    def unknown(uid: int) -> pwd.struct_passwd:
        raise KeyError(f"getpwuid(): uid not found: {uid}")

    monkeypatch.setattr(pwd, "getpwuid", unknown)
    assert expand_home("~/x") is None
    assert unexpanded("~/x") == ('"~/x": `~` cannot be expanded: HOME is unset and the user '
                                 f"database has no home for uid {os.getuid()}")


def test_the_watch_tools_paths_are_refused_too(monkeypatch: pytest.MonkeyPatch) -> None:
    """`watchrun mcp`'s `add`: its `~/…` paths resolve against its home, or are refused."""
    monkeypatch.setenv("HOME", "rel")
    with pytest.raises(CallError) as refused:
        normalize({"action": "add", "id": "a", "path": "~/a.log", "pattern": "E"}, "/srv")
    assert str(refused.value) == ('path: "~/a.log": `~` cannot be expanded: HOME is not an '
                                  'absolute path ("rel")')
