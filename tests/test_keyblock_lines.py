"""A watcher's matched lines reach an agent line for line, as they reach its actions: a
private-key block spanning matched lines becomes one `[REDACTED:private-key]` per line, each
line in its place.

The agent's prompt was redacted as one text, and a block from a BEGIN on one line to an END on a
later one became a single marker: the lines it spanned were joined into one, and a matched line
vanished from the prompt (its delivery still counted it). The actions' lines (`payload.build`:
`Redactor.redact_lines`) kept one marker per line. Pure (a table and Hypothesis over the agent's
path against the actions'), and end to end: a live runner whose watcher wakes an agent and runs
an exec action on the same matches."""

from __future__ import annotations

import json
import sys
from pathlib import Path

from hypothesis import given
from hypothesis import strategies as st
from liverunner import LiveRunner, read_records, wait_for, write_config

from watchrun.agents.clean import clean_text
from watchrun.agents.prompt import Delivery, render_turn_prompt
from watchrun.match.redact import redactor
from watchrun.match.sanitize import sanitize

MARK = "[REDACTED:private-key]"
CUT = 256
"""The `maxLineBytes` of the cut case (the least a config may set)."""
B64 = "MIIEowIBAAKCAQEAu1SU1LfVLPHCozMxH2Mo4lgOEePzNm0tRgeLezV6ffAt0gun"
JSON_KEY = ('ERROR a {"key": "-----BEGIN RSA PRIVATE KEY-----\\n' + "\\n".join([B64] * 8)
            + '\\n-----END RSA PRIVATE KEY-----\\n"}')
"""A key JSON-escaped on one line, longer than CUT: cut at CUT, its END line is lost."""
HAND = ["ERROR a -----BEGIN RSA PRIVATE KEY----- abc",
        "ERROR b -----BEGIN OPENSSH PRIVATE KEY----- xyz -----END OPENSSH PRIVATE KEY-----",
        "ERROR c"]
"""The three matched lines that were found by hand: line b went missing from the prompt."""


def as_hub_keeps(lines: list[str], max_line_bytes: int = 65536) -> list[str]:
    """A watcher's matched lines as the hub queues them for an agent (`AgentHub.deliver`)."""
    return [sanitize(x, max_line_bytes)[0] for x in lines]


def agent_lines(lines: list[str], template: str = "{matches}") -> list[str]:
    """The lines of the prompt an agent is given for one delivery of `lines`, made as a wake turn
    makes it: rendered (`render_turn_prompt`), cleaned and redacted (`TurnRunner.run`)."""
    d = Delivery("d-1", "app", 100, "app")
    d.add(lines)
    prompt = render_turn_prompt(template, [d], 100)
    return redactor().redact(clean_text(prompt, None)[0])[0].split("\n")


def action_lines(lines: list[str]) -> list[str]:
    """The same lines as an action hands them on (`payload.build`)."""
    return redactor().redact_lines(lines)[0]


TABLE: list[tuple[list[str], list[str]]] = [
    (HAND, ["ERROR a " + MARK, MARK, "ERROR c"]),
    (as_hub_keeps([JSON_KEY, HAND[1], HAND[2]], CUT),
     ['ERROR a {"key": "' + MARK, MARK, "ERROR c"]),
    (["ERROR x -----BEGIN PRIVATE KEY-----", B64, "ERROR y -----END PRIVATE KEY----- tail",
      "ERROR z"], ["ERROR x " + MARK, MARK, MARK + " tail", "ERROR z"]),
    (["ERROR -----BEGIN PRIVATE KEY-----", "ERROR password=hunter2", "ERROR z"],
     ["ERROR " + MARK, "ERROR password=[REDACTED:password]", "ERROR z"]),  # no END follows
]


def test_the_agent_gets_each_matched_line_in_its_place() -> None:
    for lines, want in TABLE:
        assert action_lines(lines) == want, lines
        assert agent_lines(lines) == want, lines
        got = agent_lines(lines, "Look at:\n{matches}\nThat is all.")
        assert got == ["Look at:", *want, "That is all."], lines


PARTS = ["ERROR", "a", "-----BEGIN RSA PRIVATE KEY-----", "-----END RSA PRIVATE KEY-----",
         "-----BEGIN OPENSSH PRIVATE KEY-----", "-----END OPENSSH PRIVATE KEY-----", B64,
         "password=hunter2", "AKIAIOSFODNN7EXAMPLE", '{"key": "', "\\n", '"}']
LINE = st.lists(st.sampled_from(PARTS), min_size=1, max_size=5).map(" ".join)


@given(st.lists(LINE, min_size=1, max_size=6))
def test_the_agent_and_the_actions_redact_matched_lines_alike(lines: list[str]) -> None:
    want = action_lines(lines)
    assert len(want) == len(lines)
    assert agent_lines(lines) == want


# -- end to end -------------------------------------------------------------------------------

AGENT = "import sys, os; open('prompt.tmp', 'w').write(sys.argv[1]); " \
        "os.replace('prompt.tmp', 'prompt.txt')"
EXEC = "import sys, os; open('stdin.tmp', 'w').write(sys.stdin.read()); " \
       "os.replace('stdin.tmp', 'stdin.txt')"


def test_a_block_across_matched_lines_reaches_the_agent_line_for_line(tmp_path: Path) -> None:
    """The lines found by hand, then a JSON-escaped key cut at `maxLineBytes` before two more:
    the agent (its prompt as its argument) and the exec action (its stdin) each get every line, in
    place."""
    log = tmp_path / "app.log"
    log.write_text("")
    cfg = write_config(tmp_path, {
        "limits": {"maxLineBytes": CUT},
        "agents": [{"name": "triage", "provider": "generic",
                    "command": [sys.executable, "-c", AGENT, "{prompt}"], "cwd": str(tmp_path),
                    "prompt": "{matches}"}],
        "watchers": [{"id": "app", "path": "app.log", "pattern": "ERROR", "wake": "triage",
                      "actions": [{"type": "exec", "name": "dump", "cwd": str(tmp_path),
                                   "command": [sys.executable, "-c", EXEC]}]}],
    })
    prompt, stdin = tmp_path / "prompt.txt", tmp_path / "stdin.txt"
    r = LiveRunner(cfg)
    try:
        r.wait_log("running")
        for lines, want in [(HAND, TABLE[0][1]), ([JSON_KEY, *HAND[1:]], TABLE[1][1])]:
            prompt.unlink(missing_ok=True)
            stdin.unlink(missing_ok=True)
            with open(log, "a") as fh:
                fh.write("".join(x + "\n" for x in lines))
            got = wait_for(lambda: prompt.exists() and prompt.read_text(), "the agent's prompt")
            sent = wait_for(lambda: stdin.exists() and stdin.read_text(), "the exec's stdin")
            assert [json.loads(x)["line"] for x in sent.splitlines()] == want
            assert got.split("\n") == want
    finally:
        assert r.stop() == 0
    recs = read_records(r.out / "agents" / "triage.jsonl")
    queued = [x for x in recs if x["kind"] == "delivery" and x["deliveryState"] == "queued"]
    assert [x["count"] for x in queued] == [3, 3]
    assert [x["text"].split("\n") for x in recs if x["kind"] == "prompt"] == [
        TABLE[0][1], TABLE[1][1]]
    assert all(B64 not in json.dumps(x) for x in recs if x["kind"] != "delivery")
