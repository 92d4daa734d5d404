"""Invalid configs: every error is located exactly, says what is wrong, and all come at once."""

from __future__ import annotations

import socket
from pathlib import Path

import pytest

from watchrun.config import ConfigError, LoadResult, load_config

W = "watchers:\n  - id: a\n    path: app.log\n    pattern: x\n"
"""A valid file watcher to extend (YAML)."""
C = "watchers:\n  - id: a\n    command: echo hi\n    pattern: x\n"
"""A valid command watcher to extend (YAML)."""
AG = "agents:\n  - name: t\n    provider: mock\n"


def load_text(tmp_path: Path, text: str, ext: str = "yaml", **kw: object) -> LoadResult:
    path = tmp_path / f"watch.{ext}"
    path.write_text(text, encoding="utf-8")
    env = kw.pop("env", {})
    return load_config([path], env=env, **kw)  # type: ignore[arg-type]


# (format, config text, location, key phrase of the message)
INVALID = [
    ("yaml", W.replace("pattern: x", 'pattern: "(ab"'), "watchers[0].pattern",
     'invalid regex "(ab": missing ), unterminated subpattern at position 0'),
    ("yaml", W + '    exclude: ["ok", "a["]\n', "watchers[0].exclude[1]",
     "unterminated character set at position 1"),
    ("yaml", W + "    gate: {require: '*x'}\n", "watchers[0].gate.require",
     "nothing to repeat at position 0"),
    ("yaml", W + "    patern: y\n", "watchers[0].patern",
     "unknown key `patern`; did you mean `pattern`?"),
    ("yaml", "watcher: []\n", "watcher", "unknown key `watcher`; did you mean `watchers`?"),
    # names other tools use: spelling alone would offer `path` for `match`
    ("yaml", W + "    match: y\n", "watchers[0].match",
     "unknown key `match`; did you mean `pattern`?"),
    ("yaml", W + "    name: y\n", "watchers[0].name", "unknown key `name`; did you mean `id`?"),
    ("yaml", W + "    file: y\n", "watchers[0].file", "unknown key `file`; did you mean `path`?"),
    ("yaml", W + "    cmd: y\n", "watchers[0].cmd", "unknown key `cmd`; did you mean `command`?"),
    ("yaml", AG.replace("name: t", "id: t"), "agents[0].id",
     "unknown key `id`; did you mean `name`?"),
    ("yaml", W + "limits: {pollMS: 5}\n", "limits.pollMS", "did you mean `pollMs`?"),
    ("yaml", "watchers:\n  - id: a\n    path: x\n", "watchers[0].pattern",
     "required key is missing"),
    ("yaml", "watchers:\n  - path: x\n    pattern: y\n", "watchers[0].id",
     "required key is missing"),
    ("yaml", W + "    command: echo\n", "watchers[0]", "has both `path` and `command`"),
    # helper-92's F13: list, status and records showed `echo ERROR hi  sleep 100` (the OSC
    # stripped whole) while the shell ran the `touch` inside it
    ("yaml", C.replace("echo hi", '"echo ERROR hi \\e]0;touch /tmp/x;\\a sleep 1"'),
     "watchers[0].command", "contains U+001B, a terminal control character"),
    ("yaml", C.replace("echo hi", '"echo \\x9b2J"'), "watchers[0].command",
     "contains U+009B"),
    # helper-92's F1: an add with `exclude: ["\u0000"]` answered `exclude: [""]`, which reads
    # as excluding every line
    ("yaml", W + '    exclude: ["ok", "\\0"]\n', "watchers[0].exclude[1]",
     'holds U+0000, a control character, as itself: list, status and the MCP tool would show '
     'the pattern without it; write the regex escape `\\x00`'),
    ("yaml", W.replace("pattern: x", 'pattern: "a\\eb"'), "watchers[0].pattern", "U+001B"),
    # helper-92's F7: a watcher of its own JSONL recorded each match again, without end
    ("yaml", "output: {dir: out}\nwatchers:\n  - id: a\n    path: out/watchers/a.jsonl\n"
     "    pattern: x\n", "watchers[0].path", "a.jsonl is one of the runner's own files"),
    ("yaml", "watchers:\n  - id: a\n    path: .watchrun/state/b.tail\n    pattern: x\n",
     "watchers[0].path", "is one of the runner's own files"),
    # a tester's F17: a NUL in output.dir was a traceback (ValueError: embedded null byte)
    ("yaml", 'output: {dir: "out\\0x"}\n' + W, "output.dir",
     '"out\\u0000x" contains a NUL byte (\\0), which no command line, environment, path or URL '
     "can hold"),
    ("yaml", 'output: {dir: "out\\0x"}\n' + C, "output.dir", "contains a NUL byte"),
    ("yaml", "watchers:\n  - id: a\n    pattern: x\n", "watchers[0]",
     "needs a source: `path` (a file to follow) or `command`"),
    ("yaml", W.replace("id: a", "id: my id"), "watchers[0].id",
     'string "my id" is not a valid name'),
    ("yaml", W.replace("id: a", "id: '..'"), "watchers[0].id", "is not a valid name"),
    ("yaml", W + "  - id: a\n    path: b.log\n    pattern: y\n", "watchers[1].id",
     "duplicate id `a` (also at watchers[0].id)"),
    ("yaml", W + "  - id: A\n    path: b.log\n    pattern: y\n", "watchers[1].id",
     "differs from `a` at watchers[0].id only in case"),
    ("yaml", W + "    wake: nobody\n" + AG, "watchers[0].wake",
     "no agent named `nobody`; agents: t"),
    ("yaml", W + "    wake: [t, triag]\n" + AG + "  - name: triage\n    provider: mock\n",
     "watchers[0].wake[1]", "no agent named `triag`; did you mean `triage`?"),
    ("yaml", W + "    wake: on\n" + AG, "watchers[0].wake",
     "unquoted yes/no/on/off are strings in YAML 1.2"),
    ("yaml", W + "    wake: 5\n", "watchers[0].wake", "number 5 is not a valid wake"),
    ("yaml", C + "    schedule: '61 * * * *'\n", "watchers[0].schedule",
     "is not a valid cron expression"),
    ("yaml", C + "    schedule: '* * * *'\n", "watchers[0].schedule", "use 5 fields"),
    ("yaml", W + "    cwd: /tmp\n", "watchers[0].cwd",
     "`cwd` applies only to command watchers; this watcher has `path`"),
    ("yaml", W + "    env: {A: b}\n", "watchers[0].env", "applies only to command watchers"),
    ("yaml", W + "    restart: always\n", "watchers[0].restart",
     "applies only to command watchers"),
    ("yaml", W + "    schedule: '@hourly'\n", "watchers[0].schedule",
     "applies only to command watchers"),
    ("yaml", W + "    gate: {exitCode: true}\n", "watchers[0].gate.exitCode",
     "`exitCode` applies only to command watchers"),
    ("yaml", C + "    fromStart: true\n", "watchers[0].fromStart",
     "`fromStart` applies only to file watchers"),
    ("yaml", C + "    restart: sometimes\n", "watchers[0].restart",
     'string "sometimes" is not allowed; expected one of: never, on-failure, always'),
    ("yaml", C.replace("echo hi", "[]"), "watchers[0].command", "is not a command"),
    ("yaml", C + "    env: {1X: a}\n", "watchers[0].env.1X",
     "`1X` is not a valid environment variable name"),
    ("yaml", C + "    env: {A: true}\n", "watchers[0].env.A",
     "expected a string or a number, got true"),
    ("yaml", W + "    gate: {maxMatches: -1}\n", "watchers[0].gate.maxMatches",
     "number -1 is below the minimum 0"),
    ("yaml", W + "    caseSensitive: no\n", "watchers[0].caseSensitive",
     'expected true or false, got string "no" (unquoted yes/no/on/off'),
    ("yaml", W + "    label: 5\n", "watchers[0].label", "expected a string, got number 5"),
    ("yaml", W.replace("pattern: x", "pattern: ''"), "watchers[0].pattern", "must not be empty"),
    ("yaml", "watchers: {id: a}\n", "watchers", "expected a list, got a mapping"),
    ("yaml", W + "limits: {pollMs: fast}\n", "limits.pollMs",
     'string "fast" is not a duration: use a number of milliseconds'),
    ("yaml", W + "limits: {maxWatchers: many}\n", "limits.maxWatchers",
     'expected an integer, got string "many"'),
    ("yaml", W + "limits: {enabled: yes}\n", "limits.enabled", "write true or false"),
    ("yaml", W + "output: {maxBytes: lots}\n", "output.maxBytes", 'string "lots" is not a size'),
    ("yaml", W + "output: {dir: 5}\n", "output.dir", "expected a string, got number 5"),
    ("yaml", W + "  - id: b\n    path: b\n    pattern: y\nlimits: {maxWatchers: 1}\n",
     "watchers", "2 watchers configured but limits.maxWatchers is 1"),
    ("yaml", AG + "  - name: u\n    provider: mock\nlimits: {maxAgents: 1}\n", "agents",
     "2 agents configured but limits.maxAgents is 1"),
    ("yaml", "agents:\n  - name: t\n    provider: claud\n", "agents[0].provider",
     "expected one of: claude, codex, gemini, opencode, pi, cursor, copilot, mock, generic; "
     "did you mean `claude`?"),
    ("yaml", "agents:\n  - name: t\n    provider: generic\n", "agents[0].command",
     "is required for provider `generic`"),
    ("yaml", AG + "  - name: t\n    provider: codex\n", "agents[1].name", "duplicate name `t`"),
    ("yaml", "agents:\n  - provider: mock\n", "agents[0].name", "required key is missing"),
    ("yaml", AG + "    until: done\n", "agents[0].until", "is not a completion marker"),
    ("yaml", AG + "    command: \"cli 'unbalanced\"\n", "agents[0].command",
     "cannot split \"cli 'unbalanced\" into arguments: No closing quotation"),
    ("yaml", AG + "    deadline: soon\n", "agents[0].deadline", "is not a duration"),
    ("yaml", AG + "    maxTurns: lots\n", "agents[0].maxTurns", "expected an integer"),
    ("yaml", AG + "    schedule: 'every hour'\n", "agents[0].schedule", "use 5 fields"),
    ("yaml", W.replace("app.log", "${LOGDIR}/app.log"), "watchers[0].path",
     "environment variable LOGDIR is not set (used as `${LOGDIR}`)"),
    ("yaml", W.replace("app.log", "${1X}/app.log"), "watchers[0].path",
     "invalid reference `${1X}`"),
    ("yaml", W + "    pattern: y\n", "watchers[0].pattern", "duplicate key `pattern`"),
    ("json", '{"watchers": [{"id": "a", "path": "x", "pattern": "y", "fromstart": true}]}',
     "watchers[0].fromstart", "did you mean `fromStart`?"),
    ("json", '{"watchers": [{"id": "a", "path": "x", "pattern": "(?P<n"}]}',
     "watchers[0].pattern", "missing >, unterminated name at position 4"),
    ("toml", '[[watchers]]\nid = "a"\npath = "x"\npattern = "y"\nwake = "ghost"\n',
     "watchers[0].wake", "no agent named `ghost`; the config has no agents"),
    ("toml", '[limits]\nstopTimeout = "5 seconds"\n[[watchers]]\nid = "a"\npath = "x"\n'
     'pattern = "y"\n', "limits.stopTimeout", "is not a duration"),
]


# (config text, every diagnostic said: location, message) — found by a hostile-config sweep
# (2026-12-05): a list of choices said twice, a "no condition" error beside a mistyped one, a
# Python repr for a rule with an unknown key
EXACT = [
    (AG.replace("mock", "foo"), [("agents[0].provider", 'string "foo" is not allowed; '
                                  "expected one of: claude, codex, gemini, opencode, pi, "
                                  "cursor, copilot, mock, generic")]),
    # validate refuses what no start can run (a run said EINVAL, "cannot start an empty command")
    (C.replace("echo hi", '"   "'), [("watchers[0].command", "must not be blank: a command line "
                                     'run by /bin/sh -c, e.g. "make test"')]),
    *[(C.replace("echo hi", argv), [("watchers[0].command[0]", "must not be blank: the first "
                                     "item is the program to run, the others its arguments")])
      for argv in ('[""]', '["  ", x]')],
    (C + "    actions: [{type: exec, command: ['', x]}]\n", [
        ("watchers[0].actions[0].command[0]", "must not be blank: the first item is the program "
         "to run, the others its arguments")]),
    (AG + "    command: ['', '{prompt}']\n", [
        ("agents[0].command[0]", "must not be blank: the first item is the program to run, the "
         "others its arguments")]),
    (C.replace("echo hi", "[]"), [("watchers[0].command", "an empty list is not a command: use "
                                   "a non-empty string or a non-empty list of strings")]),
    (C + "    gate: {maxMatches: 1.5}\n", [("watchers[0].gate.maxMatches",
                                           "expected an integer, got number 1.5")]),
    (C + "    gate: {max: 0}\n", [("watchers[0].gate.max", "unknown key `max`; allowed: "
                                  "exitCode, maxMatches, require")]),
    (C + "    actions: [{type: webhook, url: 'http://h:0/x'}]\n", [
        ("watchers[0].actions[0].url", "has port 0, which no receiver listens on; give the "
         "receiver's port, or none for the scheme's own (80, 443)")]),
    (C + "    actions: [{type: webhook, url: 'http://h/a b'}]\n", [
        ("watchers[0].actions[0].url", "contains whitespace or control characters, which a "
         "URL cannot hold; percent-encode them (a space is %20)")]),
    (C + "    actions: [{type: webhook, url: 'http://h/', headers: {X Api Key: v}}]\n", [
        ("watchers[0].actions[0].headers.X Api Key", 'string "X Api Key" is not a valid HTTP '
         "header name: use letters, digits and !#$%&'*+-.^_`|~ (no spaces, colons or line "
         "breaks)")]),
    (C + "    actions: [{type: exec, name: a, command: [x]}, {type: exec, name: A, "
     "command: [x]}]\n", [
        ("watchers[0].actions[1].name", "action name `A` differs from `a` at "
         "watchers[0].actions[0].name only in case; they name the action in records, logs "
         "and metrics, so they must be unique ignoring case")]),
    (C + "redact: [{kind: x, pattern: b, extra: 1}]\n", [
        ("redact[0].extra", "unknown key `extra`; allowed: kind, pattern")]),
    (C + "redact: [5]\n", [("redact[0]", "expected a string or a mapping, got number 5")]),
    (W.replace("path: app.log", "path: ~nosuchuser-9/x.log"), [  # (was ./~nosuchuser-9/x.log)
        ("watchers[0].path", '"~nosuchuser-9/x.log": no user "nosuchuser-9" here to expand '
         "`~` to (write ./~… for a folder named so)")]),
]


@pytest.mark.parametrize(("text", "said"), EXACT)
def test_the_diagnostics_are_exactly_these(tmp_path: Path, text: str,
                                           said: list[tuple[str, str]]) -> None:
    result = load_text(tmp_path, text)
    assert [(d.path, d.message) for d in result.errors] == said


YAML12 = " (unquoted yes/no/on/off are strings in YAML 1.2: write true or false)"
PLAIN = " (write true or false)"
JW = '{"watchers": [{"id": "a", "path": "x", "pattern": "y", '
TW = '[[watchers]]\nid = "a"\npath = "x"\npattern = "y"\n'
NOT_BOOL = 'expected true or false, got string "{}"'
# (format, config text, location, the whole message): the YAML 1.2 note only where it is true
BOOL_WORDS = [
    ("yaml", W + "    fromStart: yes\n", "watchers[0].fromStart", NOT_BOOL.format("yes") + YAML12),
    ("yaml", W + "    caseSensitive: Off\n", "watchers[0].caseSensitive",
     NOT_BOOL.format("Off") + YAML12),
    ("yaml", W + "    fromStart: y\n", "watchers[0].fromStart", NOT_BOOL.format("y") + YAML12),
    ("yaml", W + '    fromStart: "yes"\n', "watchers[0].fromStart", NOT_BOOL.format("yes") + PLAIN),
    ("yaml", W + "    fromStart: 'on'\n", "watchers[0].fromStart", NOT_BOOL.format("on") + PLAIN),
    ("yaml", W + "    fromStart: ${X}\n", "watchers[0].fromStart", NOT_BOOL.format("no") + PLAIN
     + "; it is the value of `${X}`, which is read as a boolean when it is true or false "
     "(True, TRUE, False, FALSE)"),  # (the value of a whole `${X}`: it says so)
    ("json", JW + '"fromStart": "yes"}]}', "watchers[0].fromStart", NOT_BOOL.format("yes") + PLAIN),
    ("toml", TW + 'fromStart = "yes"\n', "watchers[0].fromStart", NOT_BOOL.format("yes") + PLAIN),
    ("json", '{"limits": {"enabled": "off"}}', "limits.enabled", NOT_BOOL.format("off") + PLAIN),
    ("toml", '[limits]\nenabled = "off"\n', "limits.enabled", NOT_BOOL.format("off") + PLAIN),
    ("yaml", W + "    wake: on\n", "watchers[0].wake",
     "no agent named `on`; the config has no agents" + YAML12),
    ("yaml", W + '    wake: "on"\n', "watchers[0].wake",
     "no agent named `on`; the config has no agents" + PLAIN),
    ("json", JW + '"wake": "yes"}]}', "watchers[0].wake",
     "no agent named `yes`; the config has no agents" + PLAIN),
    ("toml", TW + 'wake = "yes"\n', "watchers[0].wake",
     "no agent named `yes`; the config has no agents" + PLAIN),
    # a name in a list, where true or false would not do either: no hint at all
    ("yaml", W + "    wake: [yes]\n", "watchers[0].wake[0]",
     "no agent named `yes`; the config has no agents"),
    ("yaml", AG + "  - name: u\n    provider: mock\n    dependsOn: [no]\n",
     "agents[1].dependsOn[0]", "no agent named `no`; agents: t, u"),
]


@pytest.mark.parametrize(("fmt", "text", "where", "said"), BOOL_WORDS,
                         ids=[f"{row[0]}-{row[2]}-{i}" for i, row in enumerate(BOOL_WORDS)])
def test_the_yaml_1_2_note_only_for_an_unquoted_yaml_word(
        tmp_path: Path, fmt: str, text: str, where: str, said: str) -> None:
    """JSON, TOML and a quoted YAML `"yes"` were told that unquoted words are strings in YAML
    1.2; `dependsOn: [no]` was told to write true or false."""
    result = load_text(tmp_path, text, fmt, env={"X": "no"})
    assert [(d.path, d.message) for d in result.errors] == [(where, said)]


def test_the_note_follows_the_layer_that_set_the_value(tmp_path: Path) -> None:
    base = tmp_path / "base.yaml"
    base.write_text(W + "    fromStart: yes\n    caseSensitive: on\n", encoding="utf-8")
    over = tmp_path / "over.json"
    over.write_text('{"watchers": [{"id": "a", "fromStart": "no"}]}', encoding="utf-8")
    result = load_config([base, over], env={})
    assert [(d.file, d.path, d.message) for d in result.errors] == [
        (str(base), "watchers[0].caseSensitive", NOT_BOOL.format("on") + YAML12),
        (str(over), "watchers[0].fromStart", NOT_BOOL.format("no") + PLAIN)]


@pytest.mark.parametrize(("fmt", "text", "where", "phrase"), INVALID)
def test_invalid_config(tmp_path: Path, fmt: str, text: str, where: str, phrase: str) -> None:
    result = load_text(tmp_path, text, fmt)
    assert result.config is None
    hits = [d for d in result.errors if d.path == where]
    assert hits, f"no error at {where}: {[d.format() for d in result.diagnostics]}"
    assert any(phrase in d.message for d in hits), [d.message for d in hits]
    assert all(d.file == str(tmp_path / f"watch.{fmt}") for d in hits)
    with pytest.raises(ConfigError) as info:
        result.require()
    assert where in str(info.value)


def test_invalid_table_is_large() -> None:
    assert len(INVALID) >= 30


def test_all_errors_are_reported_at_once(tmp_path: Path) -> None:
    text = (
        "limits:\n  pollMs: 5\n  maxLogLines: lots\n"
        "output: {keep: -3, colour: red}\n"
        "watchers:\n"
        "  - id: a\n    path: x\n    pattern: '(ab'\n    wake: ghost\n"
        "  - id: b\n    command: make\n    pattern: ok\n    schedule: 'nope'\n    fromStart: true\n"
        "  - id: a\n    path: y\n    pattern: '[z'\n"
        "agents:\n  - name: t\n    provider: generic\n  - name: u\n    provider: mocks\n"
    )
    result = load_text(tmp_path, text)
    assert result.config is None
    assert {d.path for d in result.errors} == {
        "limits.maxLogLines", "output.colour", "watchers[0].pattern", "watchers[0].wake",
        "watchers[1].schedule", "watchers[1].fromStart", "watchers[2].id",
        "watchers[2].pattern", "agents[0].command", "agents[1].provider",
    }
    assert {d.path for d in result.warnings} == {"limits.pollMs", "output.keep"}
    lines = {d.path: d.line for d in result.diagnostics}
    assert lines["watchers[0].pattern"] == 8
    assert lines["agents[1].provider"] == 22


@pytest.mark.parametrize(
    ("fmt", "text", "line", "column", "phrase"),
    [
        ("yaml", "watchers:\n  - id: a\n    pattern: [x\n", 4, 1, "YAML syntax error"),
        ("yaml", "limits:\n\tpollMs: 5\n", 2, 1, "YAML does not allow tabs"),
        ("yaml", "a: 1\n---\nb: 2\n", 2, 1, "YAML syntax error"),
        ("json", '{"watchers": [\n  {"id": "a",}\n]}', 2, 14, "JSON syntax error"),
        ("json", '{"limits": {}}\n{"x": 1}', 2, 1, "JSON syntax error: Extra data"),
        ("toml", '[limits]\npollMs = = 5\n', 2, 10, "TOML syntax error: Invalid value"),
        # a tester's F5: a control character had no line (PyYAML's "position 52"), a NEL was
        # put at line 6 of a 4-line file, and JSON's message ended in "at"
        ("yaml", 'watchers:\n  - {id: a, path: /tmp/x,\n     pattern: "x\0y"}\n', 3, 17,
         "character U+0000 as itself (YAML does not allow it); write it as \\u0000 inside a "
         "double-quoted string"),
        ("yaml", "watchers:\n  - id: a\n    path: /tmp/x\n    pattern: x\x85y\n", 4, 15,
         "character U+0085 as itself (PyYAML would read it as a line break); write it as "
         "\\u0085"),
        ("yaml", "# a \u2028 in a comment\nlimits: {}\n", 1, 5, "character U+2028"),
        ("json", '{"watchers":[{"id":"a","path":"/tmp/x","pattern":"x\x1by"}]}', 1, 52,
         "control character U+001B inside a string; JSON allows it only escaped, as \\u001b"),
    ],
)
def test_syntax_error_names_file_line_and_column(
    tmp_path: Path, fmt: str, text: str, line: int, column: int, phrase: str
) -> None:
    result = load_text(tmp_path, text, fmt)
    assert result.config is None
    [d] = result.errors
    assert (d.file, d.line, d.column) == (str(tmp_path / f"watch.{fmt}"), line, column)
    assert phrase in d.message
    assert d.format().startswith(f"error: {d.file}:{line}:{column}: {fmt.upper()} syntax error")


def test_json_duplicate_keys_are_errors(tmp_path: Path) -> None:
    result = load_text(tmp_path, '{"limits": {"pollMs": 10, "pollMs": 20}}', "json")
    assert [d.message for d in result.errors] == [
        "duplicate key `pollMs` in a JSON object; remove one of them"]


@pytest.mark.parametrize(
    ("name", "content", "phrase"),
    [
        ("missing.yaml", None, "config file not found"),
        ("folder.yaml", "DIR", "is a directory, not a config file"),
        ("socket.yaml", "SOCKET", "is a socket, not a config file"),
        ("watch.ini", "a=1", "unknown config format '.ini'"),
        ("noext", "a: 1", "unknown config format '(no extension)'"),
        ("empty.yaml", "", "empty config: the file has no settings"),
        ("comments.yaml", "# nothing here\n", "empty config"),
        ("empty.json", "  \n", "empty config"),
        ("empty.toml", "# nothing\n", "empty config"),
        ("list.yaml", "- a\n- b\n", "the top level must be a mapping"),
        ("scalar.json", "42", "the top level must be a mapping"),
        ("latin1.yaml", b"limits:\n  x: caf\xe9\n", "not UTF-8 text: invalid byte 0xe9"),
        ("tag.yaml", "limits: !!python/object:os.system {}\n", "unsupported YAML tag"),
        ("big.yaml", "watchers: []\n" + "#" * 16 * 1024**2, "config file is larger than 16 MiB"),
        ("two.yaml", "watchers: []\n---\nagents: []\n", "expected a single document"),
    ],
)
def test_unusable_files_get_one_clear_error(
    tmp_path: Path, name: str, content: str | bytes | None, phrase: str
) -> None:
    path = tmp_path / name
    if content == "DIR":
        path.mkdir()
    elif content == "SOCKET":
        listening = socket.socket(socket.AF_UNIX)
        listening.bind(str(path))
        listening.close()  # the socket file stays
    elif isinstance(content, bytes):
        path.write_bytes(content)
    elif content is not None:
        path.write_text(content)
    result = load_config([path], env={})
    assert result.config is None
    assert any(phrase in d.message for d in result.errors), [d.format() for d in result.errors]
    assert all(d.file == str(path) for d in result.errors)


def test_an_empty_layer_is_only_a_warning(tmp_path: Path) -> None:
    (tmp_path / "base.yaml").write_text(W)
    (tmp_path / "empty.yaml").write_text("# nothing to add\n")
    result = load_config([tmp_path / "base.yaml", tmp_path / "empty.yaml"], env={})
    assert result.config is not None
    assert [(d.severity, d.file, d.message) for d in result.diagnostics] == [
        ("warning", str(tmp_path / "empty.yaml"), "empty config file: this layer adds nothing")]


def test_an_alias_bomb_is_refused(tmp_path: Path) -> None:
    lines = ["a0: &a0 [x, x, x, x, x, x, x, x, x, x]"]
    lines += [f"a{i}: &a{i} [" + ", ".join([f"*a{i - 1}"] * 10) + "]" for i in range(1, 9)]
    result = load_text(tmp_path, "\n".join(lines) + "\n")
    assert result.config is None
    assert "alias bomb" in result.errors[0].message


def test_unreadable_file(tmp_path: Path) -> None:
    import os

    path = tmp_path / "secret.yaml"
    path.write_text(W)
    path.chmod(0)
    if os.access(path, os.R_OK):
        pytest.skip("running as a user that can read any file (root)")
    result = load_config([path], env={})
    assert "cannot read config file: Permission denied" in result.errors[0].message


@pytest.mark.skipif(not Path("/proc/self/mem").exists(), reason="needs Linux /proc")
def test_a_read_error_is_reported_not_raised() -> None:
    result = load_config([Path("/proc/self/mem")], env={})  # reading offset 0 fails with EIO
    assert [d.format() for d in result.errors] == [
        "error: /proc/self/mem: cannot read config file: Input/output error"]
