"""Encoding match records, in-process: the JSON encoders next to each other (not a test).

    .venv/bin/python bench/bench_records.py [--records 200000] [--rounds 5]

The records are real: the matching lines of the realistic log (gen_log.py, 10 % ERROR/FATAL),
sanitized, as `match` records with the fields a file watcher writes, encoded in batches of 2000
(as the pipeline builds a chunk's records, so what each encoder allocates stays alive the same
way). Competitors, rounds interleaved, CPU time per record:

- stdlib json + escape regex: the encoder before issue #14 (a shared `json.JSONEncoder`, then a
  regex over the output escaping DEL, C1 and U+2028/U+2029);
- orjson, with the escapes done before encoding (`output/jsonl.py` `dumps`: what every other
  record kind uses);
- msgspec (when installed: it is measured, not a dependency);
- watchrun's match path: from the lines' bytes, their JSON bodies made in one pass over the
  batch (`plain_texts`, `plain_bodies`; a line that is not plain on its own), in a bytes
  template, from columns (`JsonlSink.match_records`).

Every encoder's output must parse back to the same records (exit 1 otherwise).
"""

from __future__ import annotations

import argparse
import json
import re
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from benchlib import context_lines, loadavg, print_table

from watchrun.match.plain import plain_texts
from watchrun.match.sanitize import decode, sanitize
from watchrun.output.jsonl import dumps, json_str, plain_bodies
from watchrun.output.sink import JsonlSink

BATCH = 2000
_UNSAFE = re.compile("[\x7f-\x9f\u2028\u2029]")
_ENCODE = json.JSONEncoder(ensure_ascii=False, separators=(",", ":"), allow_nan=False).encode


def before(rec: dict[str, Any]) -> bytes:
    text = _ENCODE(rec)
    if _UNSAFE.search(text) is not None:
        text = _UNSAFE.sub(lambda m: f"\\u{ord(m.group()):04x}", text)
    return text.encode() + b"\n"


class Clock:
    def monotonic(self) -> float:
        return 0.0

    def now(self) -> float:
        return 1778932800.123


def lines(n: int) -> list[str]:
    import random

    from gen_log import make_line

    rng = random.Random(42)
    out: list[str] = []
    while len(out) < n:
        kind = "error" if rng.random() < 0.1 else "normal"
        line = make_line(rng, kind, len(out) // 2000).encode()
        if kind == "error":
            out.append(sanitize(decode(line), 65536)[0])
    return out


def bodies(raw: list[bytes]) -> list[bytes]:
    """The `line` fields' JSON strings without their quotes, from the lines' bytes, as the
    pipeline makes them: one check and one escape of the whole batch, a line that is not plain
    on its own."""
    utf8, _, odd = plain_texts(raw, list(map(len, raw)), 65536)
    out = plain_bodies(utf8)
    for k in odd:
        out[k] = json_str(sanitize(decode(raw[k]), 65536)[0])[1:-1]
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--records", type=int, default=200_000)
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    for line in context_lines(sys.argv):
        print(line)
    texts = lines(args.records)
    path, ts = "/var/log/app/server.log", "2026-05-16T12:00:00.123Z"

    def record(seq: int, text: str) -> dict[str, Any]:
        return {"schema": 1, "seq": seq, "cursor": f"big:{seq:016x}", "ts": ts, "kind": "match",
                "line": text, "lineNo": seq * 7, "offset": seq * 900, "path": path,
                "inode": 1234567}  # fmt: skip

    def per_record(encode: Callable[[dict[str, Any]], bytes]) -> Callable[[], list[bytes]]:
        def run() -> list[bytes]:
            out: list[bytes] = []
            for k in range(0, len(texts), BATCH):
                batch = [encode(record(s, t)) for s, t in
                         zip(range(k + 1, k + 1 + BATCH), texts[k : k + BATCH], strict=False)]
                out.append(b"".join(batch))
            return out
        return run

    competitors: dict[str, Callable[[], list[bytes]]] = {
        "stdlib json + escape regex (before)": per_record(before),
        "orjson (jsonl.dumps)": per_record(dumps),
    }
    try:
        import msgspec
    except ImportError:
        print("msgspec is not installed: not measured")
    else:
        menc = msgspec.json.Encoder()
        competitors["msgspec (escapes as orjson's)"] = per_record(
            lambda rec: menc.encode(rec) + b"\n")
    with tempfile.TemporaryDirectory() as tmp:
        sink = JsonlSink(Path(tmp) / "big.jsonl", "big", max_bytes=1 << 40, keep=1, clock=Clock())
        members = b',"path":%b,"inode":1234567' % json_str(path)
        raw = [t.encode() for t in texts]  # (the pipeline's input: the lines as read)

        def columns() -> list[bytes]:
            out: list[bytes] = []
            for k in range(0, len(texts), BATCH):
                chunk = raw[k : k + BATCH]
                sink.next_seq = k + 1
                seqs = range(k + 1, k + 1 + len(chunk))
                out.append(b"".join(sink.match_records(
                    bodies(chunk), [s * 7 for s in seqs],
                    [s * 900 for s in seqs], [members] * len(chunk))))
            return out

        competitors["watchrun match path (template)"] = columns
        times: dict[str, list[float]] = {name: [] for name in competitors}
        outputs: dict[str, list[bytes]] = {}
        for _ in range(args.rounds):
            for name, run in competitors.items():
                started = time.process_time()
                outputs[name] = run()
                times[name].append((time.process_time() - started) / len(texts) * 1e6)
        sink.close()
    want = [json.loads(x) for x in b"".join(outputs["stdlib json + escape regex (before)"])
            .splitlines()]  # fmt: skip
    ok = True
    rows = []
    base = statistics.median(times["stdlib json + escape regex (before)"])
    for name, t in times.items():
        same = [json.loads(x) for x in b"".join(outputs[name]).splitlines()] == want
        ok = ok and same
        med = statistics.median(t)
        rows.append([name, f"{med:.3f}", f"{min(t):.3f}-{max(t):.3f}", f"{base / med:.1f}x",
                     "yes" if same else "NO"])  # fmt: skip
    print(f"\n{len(texts)} match records (realistic lines), batches of {BATCH}, {args.rounds} "
          "rounds interleaved, CPU µs per record")
    print_table(["encoder", "median µs", "min-max µs", "speed-up", "same records"], rows)
    print(f"load average at end: {loadavg()}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
