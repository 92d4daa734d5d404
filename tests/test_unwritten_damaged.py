"""A damaged note of seqs given up unwritten (`state/<kind>-<id>.unwritten`) fails closed
(explorer ex-durable, F2): garbage, or a write torn by a crash (new JSON, NULs, old bytes), was
taken for an empty note in silence: no `gap{unwritten}`, no warning, the seqs it kept used
again, and a `floor` of `output.keep: 0` lost. A floor of 10^20 numbered records past 16 hex
digits. Now the note has two checksummed slots written in turn (a torn write leaves the other
whole), and a damaged one is said (a warning, an `error{note-corrupt}` record), set aside, and
numbered past."""

from __future__ import annotations

import signal
from pathlib import Path

import pytest
from liverunner import LiveRunner, cli, wait_for, write_config
from recordcheck import validate_records
from test_disk_full import Clock, explained

from watchrun.output.notefile import SLOT, read_note
from watchrun.output.outdir import prepare_output_dir
from watchrun.output.sink import JsonlSink
from watchrun.output.unwritten import Unwritten

DAMAGED = {
    # a torn in-place rewrite of a note written before the slots: new JSON, NULs, old bytes
    "torn": (b'{"runs": [[13, 20, {"match": 8}]]}' + b"\0" * 600 + b'12, 3, {"m',
             "slot 1: not JSON", 21),
    "garbage": (b"\x00\xff garbage {{{", "slot 1: not JSON", 13),
    # whole JSON, but a seq no stream counts to: the next record's cursor had 17 hex digits
    "floor": (b'{"floor": 99999999999999999999}',
              "slot 1: `floor` 99999999999999999999 is out of range", 13),
}


@pytest.mark.parametrize("shape", sorted(DAMAGED))
def test_a_damaged_note_is_said_set_aside_and_numbered_past(tmp_path: Path, shape: str) -> None:
    """The explorer's reproduction: 10 matches and a clean stop (seq 12), then the note
    damaged as a previous run's rewrite could leave it. The next start warns, naming the note
    and what is wrong, writes `error{note-corrupt}` with its path first, and numbers past every
    seq the note still names (the torn one names 13..20: from 21); the note is set aside."""
    data, why, first = DAMAGED[shape]
    log = tmp_path / "app.log"
    log.write_text("".join(f"ERROR line {i}\n" for i in range(1, 11)))
    config = write_config(tmp_path, {"output": {"dir": "out"}, "watchers": [
        {"id": "app", "path": str(log), "fromStart": True, "pattern": "ERROR"}]})
    jsonl, note = tmp_path / "out" / "watchers" / "app.jsonl", \
        tmp_path / "out" / "state" / "watchers-app.unwritten"
    for n, line in enumerate(("ERROR line 11\n", "ERROR line 12\n")):
        r = LiveRunner(config)
        r.out = tmp_path / "out"
        try:
            r.wait_running()
            wait_for(lambda n=n: jsonl.read_text().count('"kind":"match"') == 10 + n,
                     "the lines recorded")
        finally:
            assert r.stop(signal.SIGTERM) == 0, r.stderr()
        if n == 0:
            with open(note, "r+b") as fh:
                fh.write(data)
        with open(log, "a") as fh:
            fh.write(line)
    assert "Traceback" not in r.stderr()
    recs = validate_records(jsonl, contiguous=False)
    assert [x["seq"] for x in recs[:12]] == list(range(1, 13)) and recs[11]["kind"] == "stop"
    error = recs[12]
    assert (error["seq"], error["kind"], error["code"], error["path"]) == \
        (first, "error", "note-corrupt", str(note))
    assert f"is damaged ({why})" in error["message"]
    assert f"from seq {first}" in error["message"]
    assert [x["kind"] for x in recs[13:]] == ["start", "match", "stop"]
    assert [x["seq"] for x in recs[13:]] == [first + 1, first + 2, first + 3]
    assert f"[app] warning: the note of records given up unwritten {note} is damaged " \
        f"({why}); set aside as watchers-app.unwritten.corrupt-" in r.stderr()
    (aside,) = note.parent.glob("watchers-app.unwritten.corrupt-*")
    assert aside.read_bytes().startswith(data)


def test_the_slot_a_crash_tore_is_said_and_the_other_still_counts(tmp_path: Path) -> None:
    """A note written twice: runs 4..5, then 4..6 into the other slot, that second write torn
    by a crash (its first bytes written, the rest as before). The slot written first is whole:
    its runs get their `gap` record; the torn one is said and set aside, and a start after that
    finds a clean note that keeps nothing."""
    out = prepare_output_dir(tmp_path / "out")
    path, note = out.jsonl("agent", "a"), out.state / "agents-a.unwritten"
    with JsonlSink(path, "a", max_bytes=1 << 20, keep=1, clock=Clock()) as sink:
        built = [sink.record("output", {"text": f"r{i}"}) for i in range(1, 7)]
        sink.write_lines(built[:3])  # seqs 1..3
    kept = Unwritten(note)
    assert kept.prepare(3) == 4
    kept.give_up(built[3:5])
    assert kept.keep() == (0, None)  # runs 4..5: slot 1
    kept.give_up(built[5:])
    assert kept.save_note()  # runs 4..6: slot 2
    with open(note, "r+b") as fh:
        fh.seek(SLOT + 12)
        fh.write(b"\0" * (SLOT - 12))  # torn: only its first bytes reached the disk
    again = JsonlSink(path, "a", max_bytes=1 << 20, keep=1, clock=Clock())
    assert again.unwritten.damage is not None
    assert f"{note} is damaged (slot 2: its checksum does not match" in again.unwritten.damage
    assert again.next_seq == 6
    again.write("status", {"status": "running"})
    again.close()
    recs = validate_records(path, contiguous=False)
    assert [(x["seq"], x["kind"]) for x in recs] == \
        [(1, "output"), (2, "output"), (3, "output"), (5, "gap"), (6, "status")]
    (gap,) = explained(recs)
    assert (gap["fromSeq"], gap["toSeq"], gap["kinds"]) == (4, 5, {"output": 2})
    assert len(list(note.parent.glob("agents-a.unwritten.corrupt-*"))) == 1
    third = JsonlSink(path, "a", max_bytes=1 << 20, keep=1, clock=Clock())
    assert third.unwritten.damage is None and third.next_seq == 7
    third.close()
    with open(note, "rb") as fh:
        assert not read_note(fh.fileno()).keeps


def test_an_agent_says_its_damaged_note_too(tmp_path: Path) -> None:
    """`watchrun agent run` on a stream whose note is garbage: the warning, and the stream's
    first record is `error{note-corrupt}` (as a watcher's)."""
    out = prepare_output_dir(tmp_path / "out")
    note = out.state / "agents-triage.unwritten"
    note.write_bytes(b'{"runs": [[7, 9, ' + b"\xff" * 40)
    config = write_config(tmp_path, {"output": {"dir": str(out.root)}, "agents": [
        {"name": "triage", "provider": "mock"}]})
    res = cli("agent", "run", "triage", "-c", config, cwd=tmp_path)
    assert res.returncode == 0, res.stderr
    assert f"[triage] warning: the note of records given up unwritten {note} is damaged" \
        in res.stderr
    recs = validate_records(out.jsonl("agent", "triage"), contiguous=False)
    assert (recs[0]["kind"], recs[0]["code"], recs[0]["seq"]) == ("error", "note-corrupt", 10)
    assert "the highest: 9" in recs[0]["message"]
