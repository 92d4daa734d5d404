"""Test helper: replay a provider fixture through an adapter and summarise what a transcript
would show (texts, tool calls, results, files, usage, final status), with each observation's
fields as the recorder would write them."""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from watchrun.agents.clean import clean_record
from watchrun.agents.providers import KINDS, Adapter, Observation, Usage

FIXTURES = Path(__file__).parent / "fixtures" / "providers"


@dataclass
class Replay:
    obs: list[Observation]

    def of(self, kind: str) -> list[dict[str, Any]]:
        """The fields of every observation of `kind`, as the recorder writes them (cleaned)."""
        return [clean_record(kind, o.fields, None) for o in self.obs if o.kind == kind]

    @property
    def texts(self) -> list[str]:
        """Assistant text of the main agent (subagent text has a parentCallId)."""
        return [t["text"] for t in self.of("text") if "parentCallId" not in t]

    @property
    def final_text(self) -> str | None:
        return self.texts[-1] if self.texts else None

    @property
    def tools(self) -> list[tuple[str, str]]:
        return [(t["callId"], t["name"]) for t in self.of("tool")]

    @property
    def results(self) -> dict[str, bool]:
        """callId -> isError."""
        return {r["callId"]: r["isError"] for r in self.of("tool-result")}

    @property
    def files(self) -> list[tuple[str, str]]:
        return [(f["path"], f["op"]) for f in self.of("file-change")]

    @property
    def usage(self) -> Usage:
        total = Usage()
        for u in self.of("usage"):
            total = total + Usage(u["input"], u["cached"], u["output"], u["complete"])
        return total

    @property
    def completed(self) -> list[dict[str, Any]]:
        return self.of("completed")


def replay_lines(adapter: Adapter, lines: Iterable[str], exit_code: int | None = 0,
                 stderr: Iterable[str] = ()) -> Replay:
    """Every stdout line, then every stderr line, then the end with `exit_code`."""
    obs: list[Observation] = []
    for line in lines:
        obs += adapter.parse(line.rstrip("\n"))
    for line in stderr:
        obs += adapter.stderr(line)
    obs += adapter.finish(exit_code)
    for o in obs:  # every observation is a valid, serialisable record body
        assert o.kind in KINDS, o
        json.dumps(dict(o.fields))
        assert not (o.kind == "raw" and o.fields["reason"] == "malformed-event"), o
    return Replay(obs)


def replay(adapter: Adapter, provider: str, name: str, exit_code: int | None = 0) -> Replay:
    path = FIXTURES / provider / name
    return replay_lines(adapter, path.read_text(encoding="utf-8").splitlines(), exit_code)
