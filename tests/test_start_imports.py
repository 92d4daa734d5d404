"""What a start loads: `watchrun run --once` of a file watcher (its config cached, as on every
start after the first) imports neither google-re2 nor the control commands nor YAML and JSON
Schema, and builds no other command's parser (issue #14, "instant start")."""

from __future__ import annotations

import json
from pathlib import Path

from liverunner import fresh_python, write_config


def test_a_cached_file_watcher_start_loads_only_what_it_uses(tmp_path: Path) -> None:
    (tmp_path / "app.log").write_text("ERROR one\nINFO two\n")
    config = write_config(tmp_path, {"watchers": [
        {"id": "app", "path": "app.log", "pattern": "ERROR|FATAL", "exclude": ["healthcheck"],
         "fromStart": True}]})
    script = (
        "import argparse, contextlib, io, json, sys\n"
        "built = []\n"
        "real = argparse._SubParsersAction.add_parser\n"
        "def add_parser(self, name, **kw):\n"
        "    built.append(name)\n"
        "    return real(self, name, **kw)\n"
        "argparse._SubParsersAction.add_parser = add_parser\n"
        "from watchrun.cli.main import main\n"
        "with contextlib.redirect_stdout(io.StringIO()):\n"
        f"    assert main(['run', '--once', '--quiet', '-c', {str(config)!r}]) == 0\n"
        "print(json.dumps([sorted(sys.modules), built]))\n"
    )
    fresh_python(script, tmp_path)  # the first start validates and caches the config
    modules, built = json.loads(fresh_python(script, tmp_path)[-1])
    assert built == ["run"]
    for name in ("re2", "watchrun.runtime.commands", "yaml", "jsonschema"):
        assert name not in modules, f"{name} was imported by a cached start"
    assert "watchrun.match.matcher" in modules  # (it did start and scan)
