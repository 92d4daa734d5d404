"""A `${VAR}` value the config puts where a secret goes is hidden whole in the label, the
command line and the path, however watchrun quoted it (cfgsec findings 8, 9, 11, 16): the
`known` rules of `config/secrets.py`, run by the one redactor every surface uses.

The secrets below are fakes."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from liverunner import write_config

from watchrun.config import load_config
from watchrun.config.model import Config
from watchrun.config.secrets import written_forms
from watchrun.match.redact import clean_text, redactor


def _load(folder: Path, watchers: list[dict[str, Any]], env: dict[str, str],
          redact: bool = True) -> Config | None:
    cfg = write_config(folder, {"output": {"dir": "out", "redact": redact},
                                "watchers": watchers})
    return load_config([cfg], env=env).config


def _shown(config: Config) -> list[str]:
    hide = config.records_redactor()
    assert hide is not None
    return [clean_text(w.label, hide) for w in config.watchers]


# (watcher, environment, the label as status shows it)
SHAPES = [
    ({"command": ["mysqladmin", "--password=${PW}", "ping"]}, {"PW": "Tr0ub4dor'sPassw0rdXYZ"},
     "mysqladmin '--password=[REDACTED:password]' ping"),
    ({"command": 'PGPASSWORD="${PW}" psql; mysql --password="${PW}" -e 1'},
     {"PW": "Hunter2Hunter2"},
     'PGPASSWORD="[REDACTED:password]" psql; mysql --password="[REDACTED:password]" -e 1'),
    ({"command": "export DB_PASSWORD='${PW}'; echo"}, {"PW": "Hunter2Hunter2"},
     "export DB_PASSWORD='[REDACTED:password]'; echo"),
    ({"command": ["sh", "-c", "true", "sh", "--password=${PW}", "--api-key=${PW}"]},
     {"PW": "correct horse battery staple"},
     "sh -c true sh '--password=[REDACTED:password]' '--api-key=[REDACTED:secret]'"),
    ({"command": ["db", "--password=${PW}"]}, {"PW": "it's a s3cret"},
     "db '--password=[REDACTED:password]'"),
    ({"command": ["curl", "-H", "Authorization: Bearer ${T}", "postgres://app:${PW}@db/x"]},
     {"T": "tok-0123456789abcdef", "PW": "p@ss w0rd"},
     "curl -H 'Authorization: Bearer [REDACTED:authorization]' "
     "'postgres://app:[REDACTED:url-credentials]@db/x'"),
    ({"command": ["db", "--password=${PW}", "--user=ab"]}, {"PW": "ab"},  # short: by its name
     "db --password=[REDACTED:password] --user=ab"),
    ({"command": ["log", '{\\"password\\":\\"${PW}\\"}']}, {"PW": "ab1"},
     """log '{\\"password\\":\\"[REDACTED:password]\\"}'"""),
    ({"path": "/srv/db_password=${PW}/app.log"}, {"PW": "Hunter2Hunter2"},
     "/srv/db_password=[REDACTED:password]/app.log"),
]


@pytest.mark.parametrize(("watcher", "env", "shown"), SHAPES)
def test_a_secret_placed_value_is_hidden_whole_however_it_was_quoted(
        tmp_path: Path, watcher: dict[str, Any], env: dict[str, str], shown: str) -> None:
    # before: `--password=[REDACTED:password]"'"'sPassw0rdXYZ'`,
    # `PGPASSWORD=[REDACTED:password]Hunter2Hunter2""`, `'--password=[REDACTED:password] horse
    # battery staple'`; a path's secret hidden in `status` only
    config = _load(tmp_path, [{"id": "w", "pattern": "ERROR", **watcher}], env)
    assert config is not None  # (in a string command, a value with a `'` is refused at load)
    assert _shown(config) == [shown]
    hide = config.records_redactor()
    assert hide is not None and hide.redact(shown) == (shown, {})  # (a prompt is redacted
    # again: under `output.redact` its label was already)


def test_a_value_not_placed_as_a_secret_is_left_alone(tmp_path: Path) -> None:
    config = _load(tmp_path, [{"id": "w", "pattern": "E", "command": "deploy ${BRANCH} --x"}],
                   {"BRANCH": "main-branch"})
    assert config is not None and not any(r.known for r in config.redact)
    assert _shown(config) == ["deploy main-branch --x"]


def test_a_short_value_is_hidden_after_its_name_only(tmp_path: Path) -> None:
    config = _load(tmp_path, [{"id": "w", "pattern": "E",
                               "command": ["db", "--use-password=${F}", "--password=${P}"]}],
                   {"F": "true", "P": "ab c"}, redact=False)
    assert config is not None
    hide = redactor(config.redact)
    assert hide.redact(config.watchers[0].label)[0] == \
        "db --use-password=[REDACTED:password] '--password=[REDACTED:password]'"
    assert hide.redact('{"ok": "true", "x": true, "y": "ab c"}') == (
        '{"ok": "true", "x": true, "y": "ab c"}', {})


def test_the_config_dump_shows_no_rule_of_a_secret(tmp_path: Path) -> None:
    from watchrun.config.dump import config_to_dict

    config = _load(tmp_path, [{"id": "w", "pattern": "E", "command": ["db", "--password=${PW}"]}],
                   {"PW": "Hunter2Hunter2"})
    assert config is not None and any(r.known for r in config.redact)
    assert config_to_dict(config)["redact"] == []


def test_a_logged_echo_of_the_secret_is_hidden_and_counted(tmp_path: Path) -> None:
    config = _load(tmp_path, [{"id": "w", "pattern": "E", "command": ["db", "--password=${PW}"]}],
                   {"PW": "Hunter2Hunter2"}, redact=False)
    assert config is not None and config.records_redactor() is None
    assert redactor(config.redact).redact("connect as app with Hunter2Hunter2 failed") == (
        "connect as app with [REDACTED:password] failed", {"password": 1})


@pytest.mark.parametrize("watcher", [
    {"command": ["db", "--password=${P}"]}, {"command": "echo E", "env": {"V": "${P}"}},
    {"command": "echo E", "actions": [{"type": "exec", "command": ["true"],
                                       "env": {"API_TOKEN": "${P}"}}]},
])  # (in a webhook's URL it is refused: tests/test_config_text_surrogates.py)
def test_a_secret_that_is_not_utf8_is_hidden_as_it_is_shown(
        tmp_path: Path, watcher: dict[str, Any]) -> None:
    """A value whose bytes are not UTF-8 (`P=$(printf 'ab\\xffcdefghij')`: a lone surrogate in
    Python) in a secret's place: building its rule raised UnicodeEncodeError, and `run`
    stopped with a traceback (the records.md audit F1). Each byte is U+FFFD where it shows."""
    value = "ab\udcffcdefghijkl"
    config = _load(tmp_path, [{"id": "w", "pattern": "E", **watcher}], {"P": value},
                   redact=False)
    assert config is not None
    red, counts = redactor(config.redact).redact("echoed ab\ufffdcdefghijkl back")
    assert "cdefghijkl" not in red and sum(counts.values()) == 1, red


VALUES = st.text(st.sampled_from("abcXYZ0189 '\"\\$`;&|<>()!*#=@/:-_.,%\t"),
                 min_size=8, max_size=30).filter(lambda v: sum(c.isalnum() for c in v) >= 6)
PLACES = [
    {"command": "db --password=${V} ping"}, {"command": "PGPASSWORD=\"${V}\" psql"},
    {"command": "db --password='${V}' ping"}, {"command": "x # password: ${V}"},
    {"command": ["db", "--password=${V}"]}, {"command": ["db", "DB_PASSWORD=${V}", "x"]},
    {"command": ["sh", "-c", "db --api-key=${V}"]},
    {"command": ["sh", "-c", "db \"--password=${V}\""]},
    {"path": "/srv/db_password=${V}/app.log"}, {"path": "/srv/secret_key=${V}"},
]


@settings(max_examples=150, deadline=None)
@given(st.sampled_from(PLACES), VALUES)
def test_no_piece_of_a_placed_value_survives_in_the_label(place: dict[str, Any],
                                                         value: str) -> None:
    """Whatever the value holds and wherever it is placed, no run of 4 letters or digits of
    it is left in the label `status` shows, and a count means it is gone."""
    import tempfile

    with tempfile.TemporaryDirectory() as folder:
        config = _load(Path(folder), [{"id": "w", "pattern": "E", **place}], {"V": value})
    if config is None:
        return  # refused at load: it is never shown
    hide = config.records_redactor()
    assert hide is not None
    shown, counts = hide.redact(clean_text(config.watchers[0].label, None))
    assert counts
    for piece in re.findall(r"[A-Za-z0-9]{4,}", value):
        assert piece not in shown.replace("[REDACTED:", ""), (value, shown)


def test_a_value_in_a_path_is_hidden_as_the_name_shows_it(tmp_path: Path) -> None:
    """A path's controls are shown escaped (`\\u007f`), never removed: the value is hidden in
    that form, exactly (with a non-ASCII letter beside the DEL, neither JSON form is it; the
    `password=` rule alone took the rest of the path with it)."""
    config = _load(tmp_path, [{"id": "w", "pattern": "E",
                               "path": "/srv/db_password=${V}/app.log"}],
                   {"V": "H\u00fcnter2Hunter2\x7fXyz"})
    assert config is not None
    assert _shown(config) == ["/srv/db_password=[REDACTED:password]/app.log"]


@given(st.text(min_size=1, max_size=20))
def test_every_written_form_is_found_by_its_rule(value: str) -> None:
    forms = written_forms(value)
    assert value in forms and forms == sorted(forms, key=lambda f: (-len(f), f))
