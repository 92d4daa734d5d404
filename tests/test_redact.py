"""Redaction before anything leaves the machine (issue #12 item 3): one true positive and one
near miss per built-in rule, `redact:` patterns from the config, and the two places it applies
end to end: every agent prompt (always) and JSONL match records with `output.redact: true`.

The secrets below are fakes in the right shape (none is a live credential)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st
from liverunner import cli, read_records, write_config
from recordcheck import validate_records

from watchrun.config import load_config
from watchrun.match.redact import (
    RedactError,
    Rule,
    builtin_rules,
    check_rule,
    redact_line,
    redact_tree,
    redactor,
)

JWT = ("eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0."
       "dozjgNryP4J3jVmNHl0w5N_XgL0n3I9PlFUP0THsR8U")
PEM = "-----BEGIN RSA PRIVATE KEY-----\nMIIEowIBAAKCAQEAu1SU1L\n-----END RSA PRIVATE KEY-----"

# kind: (text with a secret, the secret, text around it that stays, a near miss)
RULES: dict[str, tuple[str, str, str, str]] = {
    "private-key": (f"key:\n{PEM}\nnext", "MIIEowIBAAKCAQEAu1SU1L", "next",
                    "-----BEGIN PUBLIC KEY-----\nMIIBIjAN\n-----END PUBLIC KEY-----"),
    "aws-access-key-id": ("using AKIAIOSFODNN7EXAMPLE now", "AKIAIOSFODNN7EXAMPLE", "using ",
                          "using AKIAIOSFODNN7EXAMPL now"),
    "aws-secret-access-key": (
        "aws_secret_access_key = wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY",
        "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY", "aws_secret_access_key = ",
        "aws_secret_access_key is not set"),
    "gcp-api-key": ("key=AIza" + "SyB" * 11 + "xy", "AIza" + "SyB" * 11 + "xy", "",
                    "AIza" + "SyB" * 11 + "x"),
    "gcp-oauth-client-secret": ("GOCSPX-" + "Ab1_" * 7, "Ab1_" * 7, "",
                                "GOCSPX-" + "Ab1_" * 6 + "Ab1"),
    "gcp-service-account-key-id": ('"private_key_id": "' + "0123456789abcdef" * 2 + "01234567\"",
                                   "0123456789abcdef" * 2, '"private_key_id": "',
                                   '"private_key_id": "' + "0123456789abcdef" * 2 + '012345"'),
    "azure-storage-key": ("AccountName=x;AccountKey=" + "Ab1+" * 21 + "Ab==;EndpointSuffix=net",
                          "Ab1+" * 21, "AccountKey=", "AccountKey=" + "Ab1+" * 5 + "=="),
    "azure-sas-signature": ("https://a.blob.core.windows.net/c/b?sv=2022-11-02&sig="
                            + "Zm9v%2Bbar" * 4 + "&se=2030", "Zm9v%2Bbar" * 4, "&sig=",
                            "https://a.blob.core.windows.net/c/b?sv=2022&sig=short"),
    "github-token": ("token ghp_" + "a1B2" * 9 + " used", "a1B2" * 9, "token ",
                     "token ghp_" + "a1B2" * 8 + "a1B used"),
    "github-fine-grained-token": ("github_pat_" + "11AB_cd" * 11 + "12345", "11AB_cd" * 11, "",
                                  "github_pat_" + "11AB_cd" * 3),
    "gitlab-token": ("glpat-" + "xY_-" * 5, "xY_-" * 5, "", "glpat-" + "xY_-" * 4 + "xY_"),
    "slack-token": ("xoxb-123456789012-1234567890123-abcdef", "1234567890123-abcdef", "",
                    "xoxb-12345678"),
    "slack-webhook": ("post https://hooks.slack.com/services/T00000000/B00000000/XXXXXXXXXXXX",
                      "T00000000/B00000000/XXXXXXXXXXXX", "https://hooks.slack.com/services/",
                      "see https://api.slack.com/services/T00000000/B00000000/XXXXXXXXXXXX"),
    "anthropic-api-key": ("ANTHROPIC=sk-ant-api03-" + "Ab_-" * 10, "api03-" + "Ab_-" * 10,
                          "ANTHROPIC=", "sk-ant-short"),
    "openai-api-key": ("sk-proj-" + "Ab1_" * 12, "Ab1_" * 12, "", "sk-proj-" + "Ab1_" * 5),
    "stripe-key": ("sk_live_" + "a1B2" * 6, "a1B2" * 6, "", "pk_live_" + "a1B2" * 6),
    "npm-token": ("//registry.npmjs.org/:_authToken=npm_" + "a1B2" * 9, "a1B2" * 9,
                  "//registry.npmjs.org/:_authToken=", "npm_" + "a1B2" * 8 + "a1B"),
    "jwt": (f"cookie {JWT}", JWT, "cookie ", "eyJhbGciOi.not-a-token"),
    "url-credentials": ("cloning https://bob:hunter2@git.example.com/r.git", "hunter2",
                        "https://bob:", "https://git.example.com:8443/r?mail=a@b.c"),
    "authorization": ("Authorization: Bearer abc123def", "abc123def", "Authorization: Bearer ",
                      "authorization failed for bob"),
    "bearer-token": ("curl -H 'X-Auth: Bearer abcdefghijklmnop1234'", "abcdefghijklmnop1234",
                     "X-Auth: Bearer ", "Bearer short"),
    "password": ("db password=hunter2 host=db1", "hunter2", "host=db1",
                 "password reset requested for bob"),
    "secret": ('{"api_key": "12345abcde"}', "12345abcde", '{"api_key": ',
               "secret santa list"),
    "token": ("GITHUB_TOKEN=TokValue87654321 next", "TokValue87654321", "GITHUB_TOKEN=",
              "tokens=42 token_count=3 max_token=4096 Unexpected token: '}'"),
}

# (text, what it becomes) — names as environments and SDKs spell them, and quoted values with
# spaces: found by an actions explorer (2026-12-05), each of these left in a webhook's body
SHAPES = [
    ("DB_PASSWORD=hunter2secret", "DB_PASSWORD=[REDACTED:password]"),
    ("PGPASSWORD=pgsecret1 psql", "PGPASSWORD=[REDACTED:password] psql"),
    ("GITHUB_CLIENT_SECRET=xyzsecretvalue", "GITHUB_CLIENT_SECRET=[REDACTED:secret]"),
    ("STRIPE_API_KEY=abcdefgh123", "STRIPE_API_KEY=[REDACTED:secret]"),
    ("x-api-key: abc123", "x-api-key: [REDACTED:secret]"),
    ('password="correct horse battery" next=1', "password=[REDACTED:password] next=1"),
    ("password='a b c'", "password=[REDACTED:password]"),
    ('password="cut short', "password=[REDACTED:password]"),
    ('{"Credentials": {"SecretAccessKey": "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY", '
     '"SessionToken": "FwoGZXIvYXdzEBYaDH"}}',
     '{"Credentials": {"SecretAccessKey": "[REDACTED:aws-secret-access-key]", '
     '"SessionToken": [REDACTED:secret]}}'),
    ("secretAccessKey: wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY",
     "secretAccessKey: [REDACTED:aws-secret-access-key]"),
    ("password_policy=strict max_tokens=100 passwords: 3", None),
]


@pytest.mark.parametrize(("text", "out"), SHAPES)
def test_names_as_environments_spell_them_and_quoted_values_whole(text: str,
                                                                  out: str | None) -> None:
    assert redactor().redact(text)[0] == (text if out is None else out)


def test_every_builtin_rule_has_a_case_here() -> None:
    assert sorted(r.kind for r in builtin_rules()) == sorted(RULES)
    for rule in builtin_rules():
        check_rule(rule)


@pytest.mark.parametrize("kind", sorted(RULES))
def test_rule_true_positive_and_near_miss(kind: str) -> None:
    text, secret, kept, near = RULES[kind]
    out, counts = redactor().redact(text)
    assert counts == {kind: 1}, out
    assert secret not in out and f"[REDACTED:{kind}]" in out and kept in out
    assert redactor().redact(near) == (near, {})


def test_user_patterns_add_kinds_and_keep_what_is_outside_the_secret_group() -> None:
    extra = (Rule("custom", r"corp-[0-9]{6}"), Rule("employee-id", r"emp=(?P<secret>\d+)"))
    out, counts = redactor(extra).redact("corp-123456 emp=42 password=x")
    assert out == "[REDACTED:custom] emp=[REDACTED:employee-id] password=[REDACTED:password]"
    assert counts == {"custom": 1, "employee-id": 1, "password": 1}


@pytest.mark.parametrize(
    ("rule", "why"),
    [
        (Rule("custom", r"(?=x)abc"), "RE2 cannot compile"),
        (Rule("custom", r"(a)\1"), "RE2 cannot compile"),
        (Rule("custom", r"x*"), "matches the empty string"),
        (Rule("Bad Kind", r"x"), "invalid kind"),
        (Rule("custom", r"(?P<secret>a)(?P<secret>b)"), "at most one group"),
    ],
)
def test_unusable_rules_are_refused(rule: Rule, why: str) -> None:
    with pytest.raises(RedactError, match=why):
        check_rule(rule)


ANY_TEXT = st.text(st.characters(codec="utf-8"), max_size=200)


@given(ANY_TEXT, st.sampled_from(sorted(RULES)), ANY_TEXT)
def test_a_secret_anywhere_is_redacted_and_redacting_again_changes_nothing(
    before: str, kind: str, after: str
) -> None:
    _, secret, _, _ = RULES[kind]
    text = f"{before} {RULES[kind][0]}\n{after}"
    out, counts = redactor().redact(text)
    assert secret not in out and sum(counts.values()) >= 1
    assert redactor().redact(out) == (out, {})


@given(st.lists(st.sampled_from(sorted(RULES)), min_size=2, max_size=3),
       st.lists(st.sampled_from(["", " ", "@", ":", "/", "https://", "=", "\n", "x"]),
                min_size=4, max_size=4))
def test_secrets_side_by_side_are_redacted_once(kinds: list[str], glue: list[str]) -> None:
    """Two or three rules' secrets next to each other, joined by URL and key syntax: a second
    redaction changes nothing (a marker was read as a URL's user and password, and marked
    again)."""
    text = glue[0] + "".join(RULES[k][1] + g for k, g in zip(kinds, glue[1:], strict=False))
    out, _ = redactor().redact(text)
    assert redactor().redact(out) == (out, {})


def test_a_token_in_a_url_is_marked_once() -> None:
    token = "ghp_" + "a1B2" * 9
    out, counts = redactor().redact(f"git clone https://{token}@github.com/o/r.git")
    assert (out, counts) == ("git clone https://[REDACTED:github-token]@github.com/o/r.git",
                             {"github-token": 1})
    assert redactor().redact(out) == (out, {})


def test_text_dressed_as_a_marker_hides_no_secret() -> None:
    out, counts = redactor().redact("[REDACTED: key AKIAIOSFODNN7EXAMPLE ]")
    assert "AKIAIOSFODNN7EXAMPLE" not in out and counts == {"aws-access-key-id": 1}


def test_raw_field_is_dropped_when_an_escape_split_a_secret() -> None:
    raw = "key AKIA\x1b[0mIOSFODNN7EXAMPLE"
    text = "key AKIAIOSFODNN7EXAMPLE"
    assert redact_line(redactor(), text, raw) == (
        "key [REDACTED:aws-access-key-id]", None, {"aws-access-key-id": 1})
    assert redact_line(redactor(), "pw: password=x\x00", "pw: password=x\x00")[1] is not None


# -- config -----------------------------------------------------------------------------------


def test_redact_config_and_layering(tmp_path: Path) -> None:
    base = write_config(tmp_path, {"redact": ["corp-[0-9]{6}"], "output": {"redact": True},
                                   "watchers": [{"id": "a", "command": "ls", "pattern": "x"}]},
                        "base.yaml")
    over = write_config(tmp_path, {"redact": [{"kind": "emp", "pattern": r"emp=(?P<secret>\d+)"}]},
                        "over.yaml")
    result = load_config([base, over], env={})
    assert result.config is not None, [d.format() for d in result.diagnostics]
    assert result.config.redact == (Rule("custom", "corp-[0-9]{6}"),
                                    Rule("emp", r"emp=(?P<secret>\d+)"))
    assert result.config.output.redact is True


def test_bad_redact_pattern_is_a_located_error(tmp_path: Path) -> None:
    cfg = write_config(tmp_path, {"redact": ["ok-[0-9]+", {"kind": "x", "pattern": "(?<=a)b"}],
                                  "watchers": [{"id": "a", "command": "ls", "pattern": "x"}]})
    result = load_config([cfg], env={})
    assert result.config is None
    (err,) = [d for d in result.diagnostics if d.severity == "error"]
    assert err.path == "redact[1].pattern" and "RE2 cannot compile" in err.message


# -- end to end -------------------------------------------------------------------------------

ARGV = str(Path(__file__).parent / "progs" / "argv_json.py")
LEAKY = "ERROR login failed password=hunter2 key AKIAIOSFODNN7EXAMPLE"


def run_once(tmp_path: Path, redact: bool) -> subprocess.CompletedProcess[str]:
    (tmp_path / "app.log").write_text(LEAKY + "\n")  # the secret is in the log, not the config
    cfg = write_config(tmp_path, {
        "output": {"dir": "out", "redact": redact},
        "agents": [{"name": "triage", "provider": "generic",
                    "command": [sys.executable, ARGV, "{prompt}"],
                    "prompt": "Look at:\n{matches}"}],
        "watchers": [{"id": "app", "command": "cat app.log", "cwd": str(tmp_path),
                      "pattern": "ERROR", "wake": "triage"}],
    })
    return cli("run", "--once", "-c", cfg, timeout=60)


def test_secret_in_a_matched_line_never_reaches_the_agent(tmp_path: Path) -> None:
    res = run_once(tmp_path, redact=False)
    assert res.returncode == 0, res.stderr
    recs = validate_records(tmp_path / "out" / "agents" / "triage.jsonl")
    prompt = next(r for r in recs if r["kind"] == "prompt")
    assert prompt["text"] == ("Look at:\nERROR login failed password=[REDACTED:password] key "
                              "[REDACTED:aws-access-key-id]")
    assert prompt["redacted"] == {"password": 1, "aws-access-key-id": 1}
    argv = [json.loads(r["text"]) for r in recs if r["kind"] in ("text", "output")]
    assert argv == [[prompt["text"]]]  # what the agent process was given
    turn = [r for r in recs if r.get("turnId") == prompt["turnId"] and r["kind"] != "delivery"]
    assert "hunter2" not in json.dumps(turn) and "AKIAIOSFODNN7EXAMPLE" not in json.dumps(turn)
    # output.redact is off: the JSONL and the runner's log of matches keep the line as it was
    matches = read_records(tmp_path / "out" / "watchers" / "app.jsonl")
    assert [m["line"] for m in matches if m["kind"] == "match"] == [LEAKY]
    assert "hunter2" in res.stderr


def test_a_manual_prompt_is_redacted_too(tmp_path: Path) -> None:
    cfg = write_config(tmp_path, {"output": {"dir": "out"}, "agents": [{
        "name": "t", "provider": "generic", "command": [sys.executable, ARGV, "{prompt}"]}]})
    token = "ghp_" + "a1B2" * 9
    res = cli("agent", "run", "t", "-c", cfg, "--prompt", f"why does {token} fail?", timeout=60)
    assert res.returncode == 0, res.stderr
    assert json.loads(res.stdout.splitlines()[0]) == ["why does [REDACTED:github-token] fail?"]
    assert token not in (tmp_path / "out" / "agents" / "t.jsonl").read_text()


def test_output_redact_covers_records_status_logs_and_the_runner_log(tmp_path: Path) -> None:
    res = run_once(tmp_path, redact=True)
    assert res.returncode == 0, res.stderr
    out = tmp_path / "out"
    for path in out.rglob("*"):
        if path.is_file():
            assert b"hunter2" not in path.read_bytes(), path
    assert "hunter2" not in res.stderr + res.stdout.split("\n", 1)[1]  # the echo is the build's
    (match,) = [r for r in validate_records(out / "watchers" / "app.jsonl")
                if r["kind"] == "match"]
    assert match["line"] == ("ERROR login failed password=[REDACTED:password] key "
                             "[REDACTED:aws-access-key-id]")
    status = json.loads((out / "state" / "app.status.json").read_text())
    assert status["redacted"] == {"password": 1, "aws-access-key-id": 1}


BODY = ["MIIEowIBAAKCAQEAu1SU1LfVLPHCozMxH2Mo4lgOEePzNm0tRgeLezV6ffAt0gun",
        "VTLw7onLRnrq0/IzW7yWR7QkrmBL7jTKEn5u+qKhbwKfBstIs+bMY2Zkp18gnTxK",
        "LxoS2tFczGkPLPgizskuemMghRniWaoLcyehkd3qqGElvW/VDL5AaWTg0nLVkjRo"]
KEY_LOG = ["INFO start", "-----BEGIN RSA PRIVATE KEY-----", *BODY,
           "-----END RSA PRIVATE KEY-----", "INFO done"]


def test_a_matched_private_key_body_reaches_the_agent_as_markers(tmp_path: Path) -> None:
    """A match of a key's base64 lines carries no BEGIN line, which the prompt's redaction needs:
    the pipeline follows the block even without `output.redact`, and the lines inside it reach
    the agent as markers (the records keep them: `output.redact` is off)."""
    (tmp_path / "key.log").write_text("\n".join(KEY_LOG) + "\n")
    cfg = write_config(tmp_path, {
        "output": {"dir": "out"},
        "agents": [{"name": "triage", "provider": "generic",
                    "command": [sys.executable, ARGV, "{prompt}"], "prompt": "{matches}"}],
        "watchers": [{"id": "keys", "path": str(tmp_path / "key.log"), "fromStart": True,
                      "pattern": "^[A-Za-z0-9+/]{60,}$", "wake": "triage"}],
    })
    res = cli("run", "--once", "-c", cfg, timeout=60)
    assert res.returncode == 0, res.stderr
    recs = validate_records(tmp_path / "out" / "agents" / "triage.jsonl")
    prompt = next(r for r in recs if r["kind"] == "prompt")
    assert prompt["text"].splitlines() == ["[REDACTED:private-key]"] * 3
    agent_file = (tmp_path / "out" / "agents" / "triage.jsonl").read_text()
    assert not any(line in agent_file for line in BODY)
    matches = read_records(tmp_path / "out" / "watchers" / "keys.jsonl")
    assert [m["line"] for m in matches if m["kind"] == "match"] == BODY


def test_redact_tree_redacts_every_string_and_keeps_keys_and_other_values() -> None:
    r = redactor()
    doc = {"password=hunter2xyz": ["ok", {"line": "x password=hunter2xyz"}], "n": 3,
           "none": None, "flag": True}
    assert redact_tree(doc, r) == {"password=hunter2xyz": ["ok", {
        "line": "x password=[REDACTED:password]"}], "n": 3, "none": None, "flag": True}


ANCHORED = [Rule("tok", r"token=\S+$"), Rule("auth", r"(?i)^auth: \S+"),
            Rule("pin", r"^pin=\d+$")]
LINES = ["a token=abc123", "b token=def456", "c token=x y", "AUTH: s3cr3t", "x auth: kept",
         "pin=1234", "pin=12 34"]


def test_anchors_are_each_lines_when_lines_go_out_together() -> None:
    """(explore-fresh F2) A firing's lines (an action's body, an agent's prompt, `logs` with
    `output.redact`) are redacted as one text; RE2's `^` and `$` were that text's ends, so
    `token=\\S+$` redacted the last line's token only and sent the others as they were."""
    r = redactor(tuple(ANCHORED))
    out, counts = r.redact_lines(LINES)
    assert out == ["a [REDACTED:tok]", "b [REDACTED:tok]", "c token=x y", "[REDACTED:auth]",
                   "x auth: kept", "[REDACTED:pin]", "pin=12 34"]
    assert counts == {"tok": 2, "auth": 1, "pin": 1}
    assert out == [r.redact(line)[0] for line in LINES]  # as each line alone
    assert r.redact("\n".join(LINES))[0] == "\n".join(out)  # (a prompt: one text)


@given(st.lists(st.sampled_from(LINES), min_size=1, max_size=6))
def test_lines_redacted_together_are_redacted_as_each_alone(lines: list[str]) -> None:
    r = redactor(tuple(ANCHORED))
    assert r.redact_lines(lines)[0] == [r.redact(line)[0] for line in lines]


def test_logs_redacts_every_line_an_anchored_rule_names(tmp_path: Path) -> None:
    (tmp_path / "app.log").write_text("".join(f"ERROR {c} token=t0k3n{c}\n" for c in "abc"))
    config = write_config(tmp_path, {
        "output": {"dir": "out", "redact": True}, "redact": [
            {"kind": "tok", "pattern": r"token=\S+$"}],
        "watchers": [{"id": "app", "path": "app.log", "pattern": "ERROR", "fromStart": True}]})
    assert cli("run", "--once", "-c", config).returncode == 0
    logs = cli("logs", "app", "-c", config)
    assert logs.stdout.splitlines() == [f"ERROR {c} [REDACTED:tok]" for c in "abc"], logs.stdout
