"""One agent turn: start its process, supervise it (deadline, idle timeout, settle, stop
requests, a pipe reader that failed), stop it, sum it up; its output becomes records in
`turn_output.py`."""

from __future__ import annotations

import asyncio
import functools
from collections.abc import Callable, Coroutine, Sequence
from typing import Any

from watchrun.agents.clean import clean_text
from watchrun.agents.prompt import PROMPT_TOKEN, fit_argument, render_command
from watchrun.agents.providers.usage import UsageTracker
from watchrun.agents.recorder import Recorder
from watchrun.agents.tally import REPLY_BYTES, TurnResult, turn_error, turn_outcome
from watchrun.agents.turn_output import TurnOutput
from watchrun.clock import Clock
from watchrun.config.model import AgentSpec, Limits
from watchrun.match.redact import redactor
from watchrun.process.proc import left_behind
from watchrun.process.spawn import ExitInfo, Proc, Spawner, SpawnError

__all__ = ["FINAL_SETTLE_S", "PROMPT_BYTES", "SETTLE_S", "TurnResult", "TurnRunner"]

SETTLE_S = 1.0
"""After the `until` marker, the provider gets this long to finish writing and exit."""
FINAL_SETTLE_S = 5.0
"""After the provider's final result (`completed`), a process that prints no event of its
protocol this long without exiting (a background shell or MCP server it started holds it, and
may print on) is stopped: its turn is over. A later event starts the wait again."""
DRAIN_S = 2.0
"""After the process exits (or is stopped), output still in the pipes is read this long."""
PROMPT_BYTES = 256 * 1024
"""A `prompt` record keeps this many bytes of the prompt."""
_EXCEPTION_CHARS = 500
"""A failed reader's exception is told in this many characters of its text at most."""


class TurnRunner:
    """Runs one turn of one agent and writes its records. Not reusable: one instance per turn."""

    def __init__(self, spec: AgentSpec, limits: Limits, out: Recorder, spawner: Spawner,
                 clock: Clock, tracker: UsageTracker | None = None, *,
                 settle_s: float = SETTLE_S) -> None:
        self.spec, self.limits, self.out = spec, limits, out
        self.spawner, self.clock = spawner, clock
        self.turn_id = ""
        self.pid: int | None = None
        self.stop_reason: str | None = None
        self._stop_message = ""
        self._stop_by: str | None = None
        self._poke = asyncio.Event()
        self._started = 0.0
        self._cancelled = False
        self.output = TurnOutput(spec, limits, out, clock, tracker, settle_s, self._poke,
                                 self._request_stop)
        self._redactor = redactor(spec.redact)
        """What hides secrets before they leave: in the prompt, and in the recorded command."""
        self.redacted: dict[str, int] = {}
        """Secrets redacted from this turn's prompt, by kind."""
        self.cut = 0
        """Bytes cut from the prompt's middle to fit in one argument (`fit_argument`)."""
        self.result: TurnResult | None = None
        """How it ended, once `dispatch-finished` is recorded (also when `run` then raised
        CancelledError: the runner stopped it)."""

    # -- control --------------------------------------------------------------------------
    def abort(self, message: str, by: str) -> None:
        """Stop the turn (reason `aborted`); its status becomes `cancelled`. `by` says who
        (the `stopped` record's `by`: request, reload-changed, reload-removed, runner-stopping,
        interrupted)."""
        self._request_stop("aborted", message, by)

    def _request_stop(self, reason: str, message: str, by: str | None = None) -> None:
        if self.stop_reason is not None:
            return
        self.stop_reason, self._stop_message, self._stop_by = reason, message, by
        if self.turn_id:
            self._record_stop()
        self._poke.set()

    def _record_stop(self) -> None:
        tid = self.turn_id
        self.out.emit("status", {"status": "stopping", "source": "runner", "turnId": tid})
        fields = {"turnId": tid, "reason": self.stop_reason, "message": self._stop_message}
        if self._stop_by is not None:
            fields["by"] = self._stop_by
        self.out.emit("stopped", fields)

    # -- the turn ---------------------------------------------------------------------------
    async def run(self, prompt: str, *, trigger: str, deliveries: Sequence[str] = (),
                  on_start: Callable[[str], None] | None = None,
                  plan: str | None = None) -> TurnResult:
        """Start the process, supervise it to its end, write `dispatch-finished`. When the task
        running this is cancelled, the process is stopped (`aborted`) and recorded first.
        The agent gets the prompt cleaned as the recorder cleans text (SPEC §6), then redacted."""
        prompt = clean_text(prompt, None)[0]
        prompt, self.redacted = self._redactor.redact(prompt)  # before it leaves
        stdin = None
        if not self.spec.pty and not any(PROMPT_TOKEN in a for a in self.spec.command):
            stdin = prompt.encode()  # no {prompt} in the command: the prompt goes to stdin
        else:  # in an argument: one that would not fit fails the start (E2BIG)
            prompt, self.cut = fit_argument(self.spec.command, prompt)
        argv = render_command(self.spec.command, prompt)
        self._started = self.output.activity = self.clock.monotonic()
        proc: Proc | None = None
        failure: dict[str, str] | None = None
        try:
            proc = await self.spawner.spawn(
                argv, cwd=self.spec.cwd, env=self.spec.env, pty=self.spec.pty,
                separate_stderr=not self.spec.pty, stdin_data=stdin)
        except SpawnError as exc:
            failure = {"code": exc.errno_name, "message": exc.message}
        except (OSError, ValueError) as exc:  # e.g. a NUL byte in an argument
            failure = {"code": "EINVAL", "message": f"cannot start {argv[0]!r}: {exc}"}
        self.pid = proc.pid if proc is not None else None
        self._begin(prompt, trigger, deliveries, plan)
        if on_start is not None:
            on_start(self.turn_id)
        if failure is not None:
            self.out.emit("error", {**failure, "turnId": self.turn_id})
            info = ExitInfo(None, None, "not-started")
            return await self._finish(info, failure)
        assert proc is not None
        if self.stop_reason is not None:
            self._record_stop()  # aborted while it was starting
        info = await self._supervise(proc)
        result = await self._finish(info, None)
        if self._cancelled:
            raise asyncio.CancelledError
        return result

    def _begin(self, prompt: str, trigger: str, deliveries: Sequence[str],
               plan: str | None) -> None:
        self.turn_id = self.output.turn_id = tid = f"turn-{self.out.next_seq}"
        self.out.emit("dispatch-start", {
            "turnId": tid, "trigger": trigger, "deliveries": list(deliveries),
            # (a `${VAR}` secret in the command: hidden always, as in a prompt: agents/*.jsonl
            # may be shipped off the machine)
            "command": [self._redactor.redact(part)[0] for part in self.spec.command],
            "pid": self.pid, "pty": self.spec.pty,
            "provider": self.spec.provider, **({"planId": plan} if plan else {})})
        self.out.emit("prompt", {"turnId": tid, "text": prompt,
                                 **({"redacted": self.redacted} if self.redacted else {}),
                                 **({"cutBytes": self.cut} if self.cut else {})},
                      limit=PROMPT_BYTES)
        self.out.emit("status", {"status": "running", "source": "runner", "turnId": tid})

    async def _supervise(self, proc: Proc) -> ExitInfo:
        readers = [self._reader(self.output.read_stdout(proc), "stdout")]
        if not self.spec.pty:
            readers.append(self._reader(self.output.read_stderr(proc), "stderr"))
        exited = asyncio.ensure_future(proc.wait())
        try:
            while self.stop_reason is None and not exited.done():
                self._poke.clear()
                delay = self._check_timers(proc)
                if self.stop_reason is not None:
                    break
                poke = asyncio.ensure_future(self._poke.wait())
                try:
                    await asyncio.wait({exited, poke}, timeout=delay,
                                       return_when=asyncio.FIRST_COMPLETED)
                finally:
                    poke.cancel()
            if self.stop_reason is None:  # it exited by itself: read what is still in the pipe
                await self._drain(readers)
        except asyncio.CancelledError:
            self._cancelled = True
            self._request_stop("aborted", "the runner stopped")
        finally:
            exited.cancel()
        ending = asyncio.ensure_future(self._end(proc, readers))
        while True:  # no orphans: the tree is stopped and recorded even when cancelled again
            try:
                return await asyncio.shield(ending)
            except asyncio.CancelledError:
                self._cancelled = True

    async def _end(self, proc: Proc, readers: list[asyncio.Task[None]]) -> ExitInfo:
        """Stop the whole process tree (leftovers too), read the rest, release everything.
        What the agent left running when it exited, and output still open once the tree is
        stopped (held by a process out of reach), are `error` records."""
        info = await proc.terminate(self.limits.stop_timeout_ms / 1000)
        if self.stop_reason is None and info.signals_sent:
            n = proc.signalled
            self.out.emit("error", {
                "code": "left-running", "turnId": self.turn_id, "count": n,
                "message": left_behind("the agent", "kept running", n, info.stragglers)})
        if readers and await self._drain(readers):
            self.out.emit("error", {
                "code": "output-held-open", "turnId": self.turn_id, "unread": True,
                "message": f"output still open {DRAIN_S:g}s after every process of the turn "
                           "was stopped; stopped reading it"})
        for task in readers:
            task.cancel()
        await asyncio.gather(*readers, return_exceptions=True)  # (a failure: `_reader_ended`)
        proc.close()
        return info

    async def _drain(self, readers: list[asyncio.Task[None]]) -> set[asyncio.Task[None]]:
        """Wait DRAIN_S for the readers to reach the end of their pipes, and on while stdout's
        is still writing the records of what it read; those still reading."""
        pending = set(readers)
        while pending:
            pending = (await asyncio.wait(pending, timeout=DRAIN_S))[1]
            if not self.output.parsing:
                break
        return pending

    def _reader(self, reading: Coroutine[Any, Any, None], stream: str) -> asyncio.Task[None]:
        """A task reading one of the agent's pipes, watched by `_reader_ended`."""
        task = asyncio.create_task(reading)
        task.add_done_callback(functools.partial(self._reader_ended, stream))
        return task

    def _reader_ended(self, stream: str, task: asyncio.Task[None]) -> None:
        """A reader that raised (parsing or recording a line) leaves nobody reading its pipe:
        the agent would block on it, full, and the turn wait for its deadline. It is an
        `error` naming the exception, and the turn is stopped at once (`reader-failed`): the
        same stop as a deadline's, the turn failed."""
        exc = None if task.cancelled() else task.exception()
        if exc is None:
            return
        text = str(exc)
        if len(text) > _EXCEPTION_CHARS:
            text = text[:_EXCEPTION_CHARS] + "…"
        what = f"{type(exc).__name__}: {text}" if text else type(exc).__name__
        self.out.emit("error", {"code": "internal", "turnId": self.turn_id,
                                "message": f"reading the agent's {stream} failed: {what}"})
        self._request_stop("reader-failed",
                           f"reading the agent's {stream} failed ({what}); stopped the agent")

    def _check_timers(self, proc: Proc) -> float | None:
        """Fire the deadline, idle timeout or completion settle; seconds to the next one. An
        idle timeout that is due with output waiting in the agent's pipes, unread, is not: the
        agent printed while the runner did not run (a freeze), and its output counts from now,
        when the runner sees it."""
        now, spec = self.clock.monotonic(), self.spec
        timers: list[tuple[float, str, str]] = []
        if spec.deadline_ms is not None:
            timers.append((self._started + spec.deadline_ms / 1000, "deadline",
                           f"the turn ran longer than its deadline ({spec.deadline_ms} ms)"))
        if spec.idle_timeout_ms is not None:
            idle_s = spec.idle_timeout_ms / 1000
            if now >= self.output.activity + idle_s and proc.output_waiting():
                self.output.activity = now
            timers.append((self.output.activity + idle_s, "idle-timeout",
                           f"no output for {spec.idle_timeout_ms} ms (idleTimeout)"))
        if self.output.settle_at is not None:
            timers.append((self.output.settle_at, "completion",
                           f"completion marker {spec.until!r}"))
        elif self.output.final_at is not None:
            timers.append((self.output.final_at + FINAL_SETTLE_S, "completion",
                           "the provider gave its final result and then no event of its "
                           f"protocol for {FINAL_SETTLE_S:g} s, without exiting"))
        for at, reason, message in sorted(timers):
            if now >= at:
                self._request_stop(reason, message)
                return None
        return max(0.0, min(t[0] for t in timers) - now) if timers else None

    # -- the end ----------------------------------------------------------------------------
    async def _finish(self, info: ExitInfo, failure: dict[str, str] | None) -> TurnResult:
        tally = self.output.tally
        if failure is None:
            self.output.finish(info.exit_code)
        status, completed = turn_outcome(
            stop_reason=self.stop_reason, completed_ok=tally.completed_ok,
            marker_seen=tally.marker_seen, exit_code=info.exit_code,
            generic=self.spec.provider == "generic")
        if failure is not None:
            status, completed = "failed", False
        error = failure or turn_error(status, self.stop_reason, self._stop_message, tally,
                                      info.exit_code, info.signal)
        reply, reply_cut = tally.reply()
        usage = tally.usage
        duration = max(0, round((self.clock.monotonic() - self._started) * 1000))
        fields: dict[str, Any] = {
            "turnId": self.turn_id, "status": status, "completed": completed,
            "usage": usage.fields(), "tokens": usage.tokens, "durationMs": duration,
            "exitCode": info.exit_code, "signal": info.signal, "reply": reply}
        if reply_cut:
            fields["replyTruncated"] = True
        if self.stop_reason is not None:
            fields["stopReason"] = self.stop_reason
        if error is not None:
            fields["error"] = error
        fin = self.out.emit("dispatch-finished", fields, limit=REPLY_BYTES)
        self.out.emit("status", {"status": "idle", "source": "runner"})
        self.result = TurnResult(self.turn_id, status, completed, fin["reply"], usage,
                                 info.exit_code, info.signal, duration, self.stop_reason,
                                 fin.get("error"), started=info.status != "not-started",
                                 reply_truncated=fin.get("replyTruncated") is True)
        await self.out.flush()
        return self.result
