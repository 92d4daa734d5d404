"""Assignment and URL shapes the redaction rules must hide whole (cfgsec findings 2, 3, 4, 18):
escaped JSON inside a JSON log line, `=>` hash syntax, URLs with an empty user or a raw `@` in
the password, Slack app-level tokens; and the property that a count always means the value is
gone.

The secrets below are fakes in the right shape (none is a live credential)."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from watchrun.match.redact import redactor

AWS = "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY"

# (log text, the secrets in it, what it becomes)
SHAPES = [
    (r'{"msg":"login {\"user\":\"bob\",\"password\":\"hunter2hunter2\"}"}', ["hunter2hunter2"],
     r'{"msg":"login {\"user\":\"bob\",\"password\":[REDACTED:password]}"}'),
    (r'{"msg":"creds {\"SecretAccessKey\":\"' + AWS + r'\",\"api_key\":\"k-1234567890ab\"}"}',
     [AWS, "k-1234567890ab"],
     r'{"msg":"creds {\"SecretAccessKey\":\"[REDACTED:aws-secret-access-key]\",'
     r'\"api_key\":[REDACTED:secret]}"}'),
    (r'{"req":"{\"headers\":{\"Authorization\":\"Basic dXNlcjpwYXNzd29yZA==\"}}"}',
     ["dXNlcjpwYXNzd29yZA=="],
     r'{"req":"{\"headers\":{\"Authorization\":\"Basic [REDACTED:authorization]\"}}"}'),
    (r'{\"private_key_id\":\"' + "0123456789abcdef" * 2 + r'01234567\"}',
     ["0123456789abcdef" * 2],
     r'{\"private_key_id\":\"[REDACTED:gcp-service-account-key-id]\"}'),
    ("config = { password => 'hunter2hunter2', 'api_key' => 'k-1234567890ab' }",
     ["hunter2hunter2", "k-1234567890ab"],
     "config = { password => [REDACTED:password], 'api_key' => [REDACTED:secret] }"),
    ('password := "hunter2hunter2"', ["hunter2hunter2"], "password := [REDACTED:password]"),
    ("if password == 'hunter2hunter2'", ["hunter2hunter2"], "if password == [REDACTED:password]"),
    ("password=ab\\cd next", ["cd"], "password=[REDACTED:password] next"),
    ("slack xapp-1-A0123ABCDEF-1234567890123-" + "0123456789abcdef" * 4 + " bot",
     ["A0123ABCDEF", "0123456789abcdef"], "slack [REDACTED:slack-token] bot"),
    ("REDIS_URL=redis://:onlypass1234@redis:6379/0", ["onlypass1234"],
     "REDIS_URL=redis://:[REDACTED:url-credentials]@redis:6379/0"),
    ("postgres://u:p@ss@h/db", ["p@ss", "ss"], "postgres://u:[REDACTED:url-credentials]@h/db"),
    # a quote escaped inside a quoted value (the security audit: the rest of it went out)
    (r'{"password":"ab\"cdef-secret-tail"}', ["cdef-secret-tail"],
     '{"password":[REDACTED:password]}'),
    ("UPDATE u SET password='it''s-a-secret' WHERE id=1", ["s-a-secret"],
     "UPDATE u SET password=[REDACTED:password] WHERE id=1"),
    (r"api_key: 'k-12\'34567890ab' next", ["34567890ab"], "api_key: [REDACTED:secret] next"),
    ('token="abcdefgh\\"ijkl" ok', ["ijkl"], "token=[REDACTED:token] ok"),
]


@pytest.mark.parametrize(("text", "secrets", "out"), SHAPES)
def test_escaped_json_hash_syntax_and_url_shapes_are_hidden_whole(
        text: str, secrets: list[str], out: str) -> None:
    # before: escaped JSON and `redis://:pass@` went out verbatim, `password => 'x'` became
    # `password =[REDACTED:password] 'x'` (only the `>` hidden, yet counted), `p@ss` left `ss`
    red, counts = redactor().redact(text)
    assert red == out
    assert sum(counts.values()) == red.count("[REDACTED:")
    assert not any(s in red for s in secrets)
    assert redactor().redact(red) == (red, {})


NAMES = ["password", "DB_PASSWORD", "passwd", "api_key", "x-api-key", "client_secret",
         "access_token", "GITHUB_TOKEN_secret", "SessionToken", "GITHUB_TOKEN", "token",
         "csrfToken"]
SEPARATORS = ["=", ": ", " = ", ":", " => ", "=>", " := ", " == "]
# how a name and its value are written: unquoted, quoted, in JSON, in JSON inside a JSON string
STYLES = [
    "{n}{s}{v}", '{n}{s}"{v}"', "{n}{s}'{v}'", '"{n}"{s}"{v}"', "'{n}'{s}'{v}'",
    r'\"{n}\"{s}\"{v}\"', r'\\\"{n}\\\"{s}\\\"{v}\\\"', "--{n}{s}{v}",
]
SAFE = st.text(st.sampled_from("abcXYZ0189_-./+@!%?#"), min_size=8, max_size=30)
SPACED = st.text(st.sampled_from("abcXYZ0189_-./+@!%?# "), min_size=8, max_size=30).filter(
    lambda v: v.strip() == v and "  " not in v)


@given(st.sampled_from(NAMES), st.sampled_from(SEPARATORS), st.sampled_from(STYLES), SAFE,
       st.text(st.sampled_from(" ,;}\n\"'"), max_size=3))
def test_every_name_separator_and_quoting_hides_the_value(
        name: str, sep: str, style: str, value: str, after: str) -> None:
    text = "log: " + style.format(n=name, s=sep, v=value) + after + " end"
    red, counts = redactor().redact(text)
    assert value not in red and sum(counts.values()) >= 1, red


@given(st.sampled_from(NAMES), st.sampled_from(SEPARATORS), st.sampled_from(STYLES[1:6]),
       SPACED)
def test_a_quoted_value_with_spaces_is_hidden_whole(
        name: str, sep: str, style: str, value: str) -> None:
    red, counts = redactor().redact(style.format(n=name, s=sep, v=value) + " end")
    assert not any(word in red for word in value.split(" ") if len(word) > 3), red
    assert sum(counts.values()) >= 1


@given(st.sampled_from(NAMES), st.sampled_from(SEPARATORS), SAFE, SAFE,
       st.sampled_from(['"{a}\\"{b}"', "'{a}\\'{b}'", "'{a}''{b}'"]))
def test_a_quote_escaped_inside_a_quoted_value_does_not_end_it(
        name: str, sep: str, head: str, tail: str, quoted: str) -> None:
    """JSON's and C's `\\"`, and SQL's doubled `''`, inside the value: the part after it was
    left in clear, with the value counted as redacted."""
    red, counts = redactor().redact(f"{name}{sep}{quoted.format(a=head, b=tail)} end")
    assert head not in red and tail not in red and sum(counts.values()) >= 1, red
    assert red.endswith(" end"), red


@given(st.text(st.sampled_from("pasword_kyAPIX=:>-\"'\\ {},;&@/ab1"), max_size=60),
       SAFE.filter(lambda v: not v.startswith(("=", ":", ">"))))
def test_a_count_means_the_value_after_the_operator_is_gone(junk: str, value: str) -> None:
    """Whatever precedes it, when `password`/`api_key` followed by an operator is counted, the
    value after the operator is not left behind (the `>` of `=>` was the whole "secret")."""
    text = f"{junk} password => {value} ; api_key -> x"
    red, counts = redactor().redact(text)
    if counts.get("password"):
        assert value not in red, red


@given(st.text(st.sampled_from("abcXYZ019._~-"), max_size=8),
       st.text(st.sampled_from("abcXYZ019._~-!$&'()*+,;=%:@"), min_size=8, max_size=30),
       st.sampled_from(["redis", "postgres", "https", "amqp+ssl"]),
       st.sampled_from(["", " next", "\n", '"', "', x"]))
def test_url_credentials_are_hidden_whatever_the_password_holds(
        user: str, password: str, scheme: str, after: str) -> None:
    """An empty user (`redis://:pw@`) and a raw `@` or `:` in the password: the whole
    password is hidden, up to the `@` before the host."""
    text = f"url={scheme}://{user}:{password}@db.internal:5432/app{after}"
    red, counts = redactor().redact(text)
    assert counts.get("url-credentials") == 1, red
    assert red.startswith(f"url={scheme}://{user}:[REDACTED:url-credentials]@db.internal:5432")


# (log line, what it becomes): the names CI systems and SDKs give their tokens (sec finding 5)
# and the words of ordinary logs that only look like them
TOKENS = [
    ("GITHUB_TOKEN=TokValue87654321", "GITHUB_TOKEN=[REDACTED:token]"),
    ("NPM_TOKEN=TokValue87654321 npm publish", "NPM_TOKEN=[REDACTED:token] npm publish"),
    ("export VAULT_TOKEN='hvs.CAESIJ2x'", "export VAULT_TOKEN=[REDACTED:token]"),
    ("REFRESH_TOKEN: TokValue87654321", "REFRESH_TOKEN: [REDACTED:token]"),
    ("SLACK_BOT_TOKEN=TokValue87654321", "SLACK_BOT_TOKEN=[REDACTED:token]"),
    ("HF_TOKEN=TokValue87654321", "HF_TOKEN=[REDACTED:token]"),
    ("login token=TokValue87654321 ok", "login token=[REDACTED:token] ok"),
    ('{"id_token": "eyJhbGciOi-not-a-jwt"}', '{"id_token": [REDACTED:token]}'),
    ("AUTH_TOKEN=TokValue87654321", "AUTH_TOKEN=[REDACTED:secret]"),  # (as before)
    ("tokens=42 prompt_tokens=12345678 token_count=3", None),  # counts, not tokens
    ("max_token=4096 token=short next_token: 1234567", None),  # under 8 characters
    ("SyntaxError: Unexpected token: '}' in JSON", None),
    ("tokenizer=sentencepiece_model token_type=bearer", None),
]


@pytest.mark.parametrize(("text", "out"), TOKENS)
def test_a_value_of_a_name_ending_in_token_is_hidden_and_counts_are_not(
        text: str, out: str | None) -> None:
    # before: GITHUB_TOKEN=, NPM_TOKEN=, VAULT_TOKEN=, REFRESH_TOKEN=, token= left in clear
    red, counts = redactor().redact(text)
    assert red == (text if out is None else out)
    assert sum(counts.values()) == red.count("[REDACTED:")


@pytest.mark.parametrize("text", ["password=\ud800abcdefgh x", "a \udc80 password=abcdefghij"])
def test_a_lone_surrogate_is_no_crash_and_hides_nothing_less(text: str) -> None:
    """RE2 reads UTF-8 only: a lone surrogate (an env value's undecodable byte, JSON's
    `"\\ud800"`) raised UnicodeEncodeError out of a config load. It reads as U+FFFD now."""
    out, counts = redactor().redact(text)
    assert counts == {"password": 1} and "abcdefg" not in out, out
    [(start, end, kind)] = redactor().spans(text)
    assert kind == "password" and text[start:end].startswith(("\ud800", "abcdefghij"))
