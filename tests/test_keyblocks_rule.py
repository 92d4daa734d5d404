"""One definition of a private-key block for both paths that redact one: the redaction rule over
a text (an agent's prompt, a firing's lines: `Redactor.redact_lines`) and `keyblocks.KeyBlocks`
over a stream read in chunks of lines (match records with `output.redact`). Both take the block
rule of `redact_rules.json` (`redact.key_block()`); a table of texts, redacted both ways and
the stream cut into chunks every way, finds the same blocks on the same lines."""

from __future__ import annotations

import json
from importlib import resources

from hypothesis import given
from hypothesis import strategies as st

from watchrun.match.keyblocks import KeyBlocks, inside
from watchrun.match.redact import Redactor, Rule, builtin_rules, key_block, redactor, rules_from

KEY = ["-----BEGIN OPENSSH PRIVATE KEY-----", "b3BlbnNzaC1rZXktdjEAAAAABG5vbmU",
       "QyNTUxOQAAACBFakeFakeFakeFake", "-----END OPENSSH PRIVATE KEY-----"]
RSA = ["-----BEGIN RSA PRIVATE KEY-----", "MIIEowIBAAKCAQEAfake", "-----END RSA PRIVATE KEY-----"]
PGP = ["-----BEGIN PGP PRIVATE KEY BLOCK-----", "lQOYBGfakefake",
       "-----END PGP PRIVATE KEY BLOCK-----"]
ENC = ["-----BEGIN ENCRYPTED PRIVATE KEY-----", "MIIFHzBJBgkqfake",
       "-----END ENCRYPTED PRIVATE KEY-----"]

TABLE: list[tuple[list[str], set[int], int]] = [
    # (lines, the lines inside a block, how many blocks)
    (["a", *KEY, "b"], {1, 2, 3, 4}, 1),
    (["x " + RSA[0], RSA[1], RSA[2] + " y", "b"], {0, 1, 2}, 1),
    ([*PGP, "between", *ENC], {0, 1, 2, 4, 5, 6}, 2),
    ([RSA[0] + "AAAA" + RSA[2], "b"], {0}, 1),  # one line
    ([RSA[0], "c", ENC[0], "d", KEY[3], "after"], {0, 1, 2, 3, 4}, 1),  # a BEGIN inside one
    ([KEY[0], "x", RSA[2]], {0, 1, 2}, 1),  # any kind ends any kind
    (["-----BEGIN CERTIFICATE-----", "MIIB", "-----END CERTIFICATE-----"], set(), 0),
    (["-----BEGIN PUBLIC KEY-----", "MIIB", "-----END PUBLIC KEY-----"], set(), 0),
    (["-----begin private key-----", "x", "-----end private key-----"], set(), 0),
    (["----BEGIN PRIVATE KEY-----", "x", "-----END PRIVATE KEY-----"], set(), 0),
    (["END first", KEY[3], "b"], set(), 0),  # an END with no BEGIN
]


def by_rule(lines: list[str], rules: Redactor | None = None, kind: str = "private-key"
            ) -> tuple[set[int], int]:
    """The lines the redaction rule marks (lines that go out together: one text), and the
    blocks it counts."""
    out, counts = (rules or redactor()).redact_lines(lines)
    return {i for i, x in enumerate(out) if f"[REDACTED:{kind}]" in x}, counts.get(kind, 0)


def by_stream(lines: list[str], cuts: list[int], keys: KeyBlocks | None = None
              ) -> tuple[set[int], int]:
    """The lines KeyBlocks puts inside a block when the stream comes in chunks cut before the
    line indexes `cuts`, and the blocks it saw."""
    keys = keys or KeyBlocks()
    found, start = set(), 0
    for end in [*sorted({c for c in cuts if 0 < c < len(lines)}), len(lines)]:
        regions = keys.regions("".join(x + "\n" for x in lines[start:end]).encode())
        pos = 0
        for i in range(start, end):
            if inside(regions, pos):
                found.add(i)
            pos += len(lines[i].encode()) + 1
        start = end
    return found, keys.blocks


def test_both_paths_redact_the_same_blocks() -> None:
    for lines, want, blocks in TABLE:
        assert by_rule(lines) == (want, blocks), lines
        assert by_stream(lines, []) == (want, blocks), lines
        every_line = list(range(1, len(lines)))  # each line a chunk of its own
        assert by_stream(lines, every_line) == (want, blocks), lines


@given(st.sampled_from(TABLE), st.lists(st.integers(1, 6), max_size=6))
def test_a_block_split_across_chunks_is_the_same_block(row: tuple[list[str], set[int], int],
                                                       cuts: list[int]) -> None:
    lines, _, _ = row
    assert by_stream(lines, cuts) == by_rule(lines)


def test_a_block_whose_end_has_not_come_is_followed_further_in_a_stream() -> None:
    """The one deliberate difference: a text without the END line is whole, so only the BEGIN
    line is redacted; a stream's END may still come, so the lines after it are held inside (up
    to MAX_BLOCK_BYTES, `tests/test_keyblocks.py`)."""
    lines = ["a", KEY[0], KEY[1], KEY[2]]
    assert by_rule(lines) == ({1}, 1)
    assert by_stream(lines, [2, 3]) == ({1, 2, 3}, 1)


def test_the_stream_follows_the_rules_edges() -> None:
    """The redaction rule is made of the block's edges, and KeyBlocks follows those edges:
    change them in the rules document, and both paths follow the change together."""
    assert KeyBlocks().block == key_block()
    assert key_block().rule() in builtin_rules()
    assert [r.kind for r in builtin_rules()].count(key_block().kind) == 1
    text = resources.files("watchrun.match").joinpath("redact_rules.json").read_text("utf-8")
    doc = json.loads(text)
    [entry] = [r for r in doc["rules"] if r["kind"] == key_block().kind]
    assert "pattern" not in entry  # its edges are the only definition
    for r in doc["rules"]:
        if "begin" in r:
            r["begin"] = r["begin"].replace("PRIVATE KEY", "SECRET BLOB")
            r["end"] = r["end"].replace("PRIVATE KEY", "SECRET BLOB")
    rules, block = rules_from(doc)
    assert block.kind == "private-key" and isinstance(rules[0], Rule)
    moved = Redactor(rules)
    for lines, want, blocks in TABLE:
        renamed = [x.replace("PRIVATE KEY", "SECRET BLOB") for x in lines]
        assert by_rule(renamed, moved) == (want, blocks), renamed
        assert by_stream(renamed, [2], KeyBlocks(block)) == (want, blocks), renamed
        assert by_stream(lines, [2], KeyBlocks(block)) == (set(), 0), lines
