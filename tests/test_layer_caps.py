"""More watchers (agents) than `limits.maxWatchers` (`maxAgents`) allows, over layers: the error
is where the first one past the cap was added, and says where the limit was set (explore-
layering F6: it named the last layer with a `watchers` key, one that only changed a pattern)."""

from __future__ import annotations

from pathlib import Path

import pytest
from liverunner import cli

from watchrun.config import load_config


def layers(tmp_path: Path, texts: dict[str, str]) -> list[Path]:
    for name, text in texts.items():
        (tmp_path / name).write_text(text)
    return [tmp_path / name for name in texts]


CASES = [
    pytest.param({
        "mw1.yaml": "limits: {maxWatchers: 2}\nwatchers:\n  - {id: a, path: a.log, pattern: A}\n",
        "mw2.yaml": "watchers:\n  - {id: b, path: b.log, pattern: B}\n"
                    "  - {id: c, path: c.log, pattern: C}\n",
        "mw3.json": '{"watchers": [{"id": "a", "pattern": "AA"}]}',
    }, "mw2.yaml", 3, 5, "3 watchers configured but limits.maxWatchers is 2 (set at "
       "{d}/mw1.yaml:1:10; it can be raised up to 500): the first past it is watchers[2] `c`",
        id="patched-later"),
    pytest.param({
        "base.yaml": "watchers:\n  - {id: a, path: a.log, pattern: A}\n"
                     "  - {id: b, path: b.log, pattern: B}\n",
        "more.json": '{"watchers": [\n  {"id": "c", "path": "c.log", "pattern": "C"}\n]}',
        "patch.yaml": "watchers:\n  - id: c\n    pattern: CC\n",
        "cap.toml": "[limits]\nmaxWatchers = 2\n",
    }, "more.json", 2, 3, "3 watchers configured but limits.maxWatchers is 2 (set at "
       "{d}/cap.toml; it can be raised up to 500): the first past it is watchers[2] `c`",
        id="itself-patched"),
    pytest.param({
        "a.yaml": "agents:\n  - {name: t, provider: mock}\n",
        "b.yaml": "limits:\n  maxAgents: 1\nagents:\n  - {name: u, provider: mock}\n",
        "c.yaml": "agents:\n  - {name: t, prompt: again}\n",
    }, "b.yaml", 4, 5, "2 agents configured but limits.maxAgents is 1 (set at {d}/b.yaml:2:3; "
       "it can be raised up to 64): the first past it is agents[1] `u`", id="agents"),
]


@pytest.mark.parametrize(("texts", "file", "line", "column", "message"), CASES)
def test_the_cap_error_is_where_the_first_past_it_was_added(
        tmp_path: Path, texts: dict[str, str], file: str, line: int, column: int,
        message: str) -> None:
    result = load_config(layers(tmp_path, texts), env={})
    assert result.config is None
    (error,) = [d for d in result.diagnostics if d.severity == "error"]
    assert (error.file, error.line, error.column) == (str(tmp_path / file), line, column)
    assert error.message == message.format(d=tmp_path)


def test_the_default_cap_says_so_and_validate_prints_the_place(tmp_path: Path) -> None:
    many = "".join(f"  - {{id: w{i}, path: w{i}.log, pattern: X}}\n" for i in range(19))
    paths = layers(tmp_path, {"one.yaml": f"watchers:\n{many}",
                              "two.yaml": "watchers:\n  - {id: w0, pattern: Y}\n"
                                          "  - {id: x, path: x.log, pattern: X}\n"
                                          "  - {id: y, path: y.log, pattern: X}\n"})
    p = cli("validate", "-c", "one.yaml", "-c", "two.yaml", cwd=tmp_path)
    assert p.returncode == 2
    assert ("two.yaml:4:5: error: watchers: 21 watchers configured but limits.maxWatchers is "
            "20 (the default; it can be raised up to 500): the first past it is watchers[20] "
            "`y`") in p.stdout, p.stdout
    assert load_config(paths, env={}).config is None
