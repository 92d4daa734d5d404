"""A compressed stream is told by its whole header and, for gzip, bzip2 and xz, by first bytes
that decompress: a plain-text log that begins like a magic number (`BZh1 starting`) is text,
read and gated as any log, also once rotated (`run --once` end to end)."""

from __future__ import annotations

import bz2
import gzip
import io
import lzma
import os
import zipfile
from pathlib import Path

import pytest
from test_once import once, rotated_by_rename, table_row

from watchrun.sources.compressed import compressed


def _zip(text: bytes | None) -> bytes:
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as z:
        if text is not None:
            z.writestr("app.log", text)
    return buf.getvalue()


TEXT = b"started\nERROR failed\n" * 40
STREAMS = {
    "gzip": gzip.compress(TEXT), "gzip-empty": gzip.compress(b""),
    "bzip2": bz2.compress(TEXT), "bzip2-empty": bz2.compress(b""),
    "bzip2-big": bz2.compress(os.urandom(300_000))[:4096],  # (no output before the block ends)
    "xz": lzma.compress(TEXT), "zip": _zip(TEXT), "zip-empty": _zip(None),
    "zstd": b"\x28\xb5\x2f\xfd\x24\x2a\x51\x01\x00" + TEXT[:42],  # (a frame header, then raw)
    "lz4": b"\x04\x22\x4d\x18\x64\x40\xa7" + TEXT[:42],
}
PLAIN = {
    "BZh1 text": b"BZh1 starting service\nERROR x\n",
    "a whole bzip2 header as text": b"BZh91AY&SY is the bzip2 magic\nERROR x\n" * 3,
    "BZh alone": b"BZh\n", "PK and ETX": b"PK\x03 report\n", "PK header-like": b"PK\x03\x04\n",
    "a short gzip-like start": b"\x1f\x8b\x08\x00", "gzip magic, text after":
        b"\x1f\x8b\x08\x00\x00\x00\x00\x00\x00\x03 not deflate at all, just text\n" * 4,
    "zstd magic, reserved bit": b"\x28\xb5\x2f\xfd\x08text\n",
    "lz4 magic, bad flags": b"\x04\x22\x4d\x18\x00\x00\x00text\n",
}


@pytest.mark.parametrize("name", list(STREAMS))
def test_a_compressed_stream_is_told_by_its_header(name: str) -> None:
    assert compressed(STREAMS[name][:4096])


@pytest.mark.parametrize("name", list(PLAIN))
def test_text_that_begins_like_a_magic_number_is_not_compressed(name: str) -> None:
    assert not compressed(PLAIN[name])


@pytest.mark.parametrize("first", ["BZh1 starting service", "BZh91AY&SY banner of a tool"])
def test_a_text_log_beginning_with_bzh_is_read_and_gated_also_once_rotated(
        tmp_path: Path, first: str) -> None:
    """`BZh` was taken for bzip2 by its 3 bytes: the run was an ERROR ("is compressed", exit 3);
    once rotated with an unread ERROR line, the generation was refused as compressed, called
    gone (`unreadBytes: 0`) and the gate passed over that line. Now it is text: a pass, then
    the rotated generation is read on and the gate is crossed."""
    log = tmp_path / "app.log"
    log.write_text(f"{first}\n")
    config = {"watchers": [{"id": "app", "path": "app.log", "pattern": "ERROR",
                            "gate": {"maxMatches": 0}}]}
    r = once(tmp_path, config)
    assert (r.rc, table_row(r.out, "app")[1:]) == (0, ["0", "0", "-", "pass"]), r.out + r.err
    rotated_by_rename(log, "ERROR written after", "PK ok")
    r = once(tmp_path, config)
    assert (r.rc, table_row(r.out, "app")[1:]) == (1, ["1", "0", "-", "FAIL"]), r.out + r.err
    assert "ERROR written after" in r.out
