"""The real `python -m watchrun.agents.mock_agent` program, read back with the mock adapter."""

from __future__ import annotations

import json
import os
import select
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from adapter_replay import Replay, replay_lines

from watchrun.agents.providers import UsageTracker, make_adapter

PROMPT = "These lines appeared in API server:\nERROR disk full\nERROR disk full again\n"
DEADLINE_S = 20.0


def mock(prompt: str | None, tmp_path: Path, *args: str,
         stdin: str | None = None) -> subprocess.CompletedProcess[str]:
    argv = [sys.executable, "-m", "watchrun.agents.mock_agent", *args]
    if prompt is not None:
        argv.append(prompt)
    return subprocess.run(argv, input=stdin or "", capture_output=True, text=True, cwd=tmp_path,
                          timeout=DEADLINE_S, check=False)


def read(proc: subprocess.CompletedProcess[str], tracker: UsageTracker | None = None) -> Replay:
    return replay_lines(make_adapter("mock", tracker), proc.stdout.splitlines())


def result_line(proc: subprocess.CompletedProcess[str]) -> dict[str, object]:
    results = [json.loads(x) for x in proc.stdout.splitlines() if '"type": "result"' in x]
    assert len(results) == 1 and isinstance(results[0], dict)
    return dict(results[0])


def test_plain_answer(tmp_path: Path) -> None:
    proc = mock(PROMPT, tmp_path)
    assert proc.returncode == 0 and proc.stderr == ""
    r = read(proc)
    answer = "Mock triage: read 3 prompt line(s); first: These lines appeared in API server:\nDONE"
    assert r.final_text == answer
    assert r.of("session")[0]["cwd"] == str(tmp_path)
    assert r.tools == [] and r.of("output") == []
    (done,) = r.completed
    assert done["ok"] is True and done["result"] == answer
    assert done["sessionId"] == r.of("session")[0]["sessionId"]
    assert r.of("reasoning") == [{"text": "Reading the prompt.",
                                  "messageId": r.of("text")[0]["messageId"]}]


def test_usage_increments_add_up_to_the_result_total(tmp_path: Path) -> None:
    proc = mock(PROMPT + "[mock:tool]", tmp_path)
    r = read(proc)
    usage = result_line(proc)["usage"]
    assert isinstance(usage, dict)
    assert r.usage.counts() == {
        "input": usage["input_tokens"] + usage["cache_creation_input_tokens"]
        + usage["cache_read_input_tokens"],
        "cached": usage["cache_read_input_tokens"], "output": usage["output_tokens"]}
    # the answer's usage is repeated on its thinking and text lines: counted once
    per_message = [u["messageId"] for u in r.of("usage") if u["source"] == "message"]
    assert len(per_message) == len(set(per_message)) == 2
    assert r.of("usage")[-1]["source"] == "result" and r.of("usage")[-1]["complete"] is True


def test_second_turn_with_the_same_session_counts_only_itself(tmp_path: Path) -> None:
    tracker = UsageTracker()
    first = read(mock(PROMPT, tmp_path, "--session-id", "s-1"), tracker)
    second = read(mock(PROMPT, tmp_path, "--session-id", "s-1"), tracker)
    assert second.of("session")[0]["sessionId"] == "s-1"
    assert second.usage.counts() == first.usage.counts() != {"input": 0, "cached": 0, "output": 0}


def test_prompt_from_stdin(tmp_path: Path) -> None:
    proc = mock(None, tmp_path, stdin="\n\nfirst real line\nsecond\n")
    assert proc.returncode == 0
    assert read(proc).final_text == (
        "Mock triage: read 2 prompt line(s); first: first real line\nDONE")


def test_tool_directive(tmp_path: Path) -> None:
    r = read(mock("check [mock:tool]", tmp_path))
    ((call_id, name),) = r.tools
    assert name == "Bash" and call_id.startswith("toolu_mock_")
    assert r.results == {call_id: False}
    assert r.of("tool-result")[0]["preview"] == "mock-tool"
    assert r.files == [("echo mock-tool", "run")]
    assert r.completed[0]["numTurns"] == 2


def test_fail_directive(tmp_path: Path) -> None:
    proc = mock("[mock:fail] do it", tmp_path)
    assert proc.returncode == 1
    r = read(proc)
    assert r.of("failure") == [{"message": "mock: simulated failure ([mock:fail])",
                                "code": "execution"}]
    assert r.completed[0]["ok"] is False
    assert r.completed[0]["reason"] == "error_during_execution"
    assert "DONE" not in proc.stdout


def test_oversized_line_has_exactly_n_bytes(tmp_path: Path) -> None:
    proc = mock("[mock:oversized=70000] big", tmp_path)
    sizes = [len(line.encode()) for line in proc.stdout.splitlines()]
    assert 70000 in sizes
    r = read(proc)
    assert any(t == "x" * len(t) and len(t) > 69000 for t in r.texts)
    assert r.completed[0]["ok"] is True


def test_slow_directive_spaces_the_lines(tmp_path: Path) -> None:
    start = time.monotonic()
    proc = mock("[mock:slow=60] hi", tmp_path)
    elapsed = time.monotonic() - start
    lines = proc.stdout.splitlines()
    assert len(lines) == 4  # init, thinking, text, result
    assert elapsed >= 0.06 * (len(lines) - 1)


def test_color_lines_are_output(tmp_path: Path) -> None:
    r = read(mock("[mock:color] hi", tmp_path))
    colored = r.of("output")  # as written: clean text, the colours kept in `raw`
    assert [o["text"] for o in colored] == ["● mock agent starting", "mock: answer ready"]
    assert all("\x1b[" in o["raw"] for o in colored)
    assert r.completed[0]["ok"] is True


def test_stderr_directive(tmp_path: Path) -> None:
    proc = mock("[mock:stderr] hi", tmp_path)
    assert proc.stderr == "mock: a diagnostic line on stderr\n"
    assert "diagnostic" not in proc.stdout


@pytest.mark.parametrize(("prompt", "message"), [
    ("[mock:explode]", "unknown directive [mock:explode]"),
    ("[mock:slow=soon]", "[mock:slow=N] needs a non-negative integer"),
    ("[mock:tool=1]", "[mock:tool] takes no value"),
])
def test_bad_directive_is_a_usage_error(tmp_path: Path, prompt: str, message: str) -> None:
    proc = mock(prompt, tmp_path)
    assert proc.returncode == 2 and proc.stdout == ""
    assert message in proc.stderr


def _wait_for_line(proc: subprocess.Popen[bytes]) -> bytes:
    assert proc.stdout is not None
    ready, _, _ = select.select([proc.stdout], [], [], DEADLINE_S)
    assert ready, "no output before the deadline"
    return proc.stdout.readline()


def _sig_ignored(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("SigIgn:"):
            return int(line.split()[1], 16)
    raise AssertionError("no SigIgn in /proc status")


@pytest.mark.parametrize("ignore_term", [False, True])
def test_hang_until_killed(tmp_path: Path, ignore_term: bool) -> None:
    prompt = "[mock:hang]" + (" [mock:ignore-term]" if ignore_term else "")
    proc = subprocess.Popen([sys.executable, "-m", "watchrun.agents.mock_agent", prompt],
                            stdout=subprocess.PIPE, cwd=tmp_path)
    try:
        init = json.loads(_wait_for_line(proc))
        assert init["type"] == "system" and init["subtype"] == "init"
        term_bit = 1 << (signal.SIGTERM - 1)
        assert bool(_sig_ignored(proc.pid) & term_bit) is ignore_term
        proc.send_signal(signal.SIGTERM)
        if ignore_term:
            assert proc.poll() is None  # an ignored signal is discarded when sent
            proc.kill()
        assert proc.wait(timeout=DEADLINE_S) == (
            -signal.SIGKILL if ignore_term else -signal.SIGTERM)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        assert proc.stdout is not None
        proc.stdout.close()


def test_fork_leaves_a_child_in_its_own_session(tmp_path: Path) -> None:
    proc = mock("[mock:fork] hi", tmp_path)
    assert proc.returncode == 0
    line = proc.stderr.strip()
    assert line.startswith("mock: forked pid ")
    pid = int(line.rsplit(" ", 1)[1])
    try:
        assert os.getsid(pid) == pid != os.getsid(0)
        assert Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")[:2] == [b"sleep", b"1000"]
    finally:
        os.kill(pid, signal.SIGKILL)
    deadline = time.monotonic() + DEADLINE_S
    while Path(f"/proc/{pid}").exists() and time.monotonic() < deadline:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
        if state == "Z":
            break
        time.sleep(0.01)
    assert not Path(f"/proc/{pid}").exists() or "Z" in Path(f"/proc/{pid}/stat").read_text()


def test_directives_in_its_prompt_are_text_unless_a_harness_enables_them(tmp_path: Path) -> None:
    """A log line that merely mentions `[mock:hang]` made the quick start's agent hang until
    its deadline (forever without one); `[mock:fork]` left a process behind, an unknown one
    failed the turn. Only a harness's WATCHRUN_MOCK_DIRECTIVES=1 enables them now."""
    line = "ERROR see [mock:hang] and [mock:nope] in the docs"
    env = {k: v for k, v in os.environ.items() if k != "WATCHRUN_MOCK_DIRECTIVES"}
    proc = subprocess.run([sys.executable, "-m", "watchrun.agents.mock_agent", line],
                          capture_output=True, text=True, cwd=tmp_path, env=env,
                          timeout=DEADLINE_S, check=False)
    assert (proc.returncode, proc.stderr) == (0, "")
    assert read(proc).final_text == f"Mock triage: read 1 prompt line(s); first: {line}\nDONE"
