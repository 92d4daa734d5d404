"""Run one firing of an exec action: argv from the config (never a shell built from log text),
the matched lines on stdin (JSONL) and in WATCHRUN_* variables, its own session, and the same
stop discipline as command watchers (TERM to the tree, grace, KILL) on timeout or cancel, and
for what it leaves running when it exits (counted in the result). What it printed is kept with
its `env` values hidden, then redacted."""

from __future__ import annotations

import asyncio

import msgspec

from watchrun.actions.hidden import Hidden, words
from watchrun.actions.payload import Outgoing
from watchrun.actions.results import Result
from watchrun.config.model import ActionSpec
from watchrun.match.redact import Redactor
from watchrun.match.sanitize import decode, sanitize
from watchrun.process.proc import until_done
from watchrun.process.spawn import ExitInfo, Proc, Spawner, SpawnError

__all__ = ["DRAIN_S", "OUTPUT_BYTES", "run_program"]

OUTPUT_BYTES = 1024
"""The end of the program's output kept for the result record."""
READ_BYTES = 16 * OUTPUT_BYTES
"""The end of the output read and redacted before the last OUTPUT_BYTES are kept: a secret
that the cut would split (`password=` before it, the value after) is redacted whole first."""
DRAIN_S = 0.5
"""After the program exits, its output is read this long more (a background child may hold the
pipe: then the tree is stopped)."""


async def run_program(spec: ActionSpec, outgoing: Outgoing, spawner: Spawner, grace_s: float,
                      redactor: Redactor) -> Result:
    """Run the program to its end, or until `spec.timeout_ms` (then it is stopped: `timeout`).
    Cancelled, it stops the program's whole tree before the cancellation goes on."""
    env = {**spec.env, **outgoing.environ()}
    starting = asyncio.ensure_future(spawner.spawn(list(spec.command), cwd=spec.cwd, env=env,
                                                   stdin_data=outgoing.stdin()))
    try:
        if await until_done(starting):  # cancelled while it started: it may run already (and
            await _stop_started(starting, grace_s)  # have begun its work): stopped as a
            raise asyncio.CancelledError  # running one is, with its grace, then the cancel
        proc = starting.result()
    except SpawnError as exc:
        return Result("failed", error={"code": exc.errno_name, "message": exc.message})
    except (OSError, ValueError) as exc:  # e.g. a NUL byte in an argument
        return Result("failed", error={"code": "EINVAL",
                                       "message": f"cannot start {spec.command[0]!r}: {exc}"})
    tail = bytearray()
    timed_out = False
    try:
        async with asyncio.TaskGroup() as tg:
            reading = tg.create_task(_read(proc, tail))
            try:
                async with asyncio.timeout(spec.timeout_ms / 1000):
                    await proc.wait()
                await asyncio.wait({reading}, timeout=DRAIN_S)
            except TimeoutError:
                timed_out = True
            finally:  # even when cancelled: no child outlives its firing
                info = await _stop(proc, grace_s)
            await asyncio.wait({reading}, timeout=DRAIN_S)
            reading.cancel()
    finally:
        proc.close()
    env_values = spec.env.values()  # (a secret passed to it that it printed: hidden too)
    hidden = Hidden("exec", env_values, words(env_values), redactor)
    result = _result(spec, info, timed_out, _output(bytes(tail), hidden))
    if not timed_out and info.signals_sent:  # it exited, and left these running: stopped
        result = msgspec.structs.replace(result, left_running=proc.signalled)
    return result


async def _read(proc: Proc, tail: bytearray) -> None:
    while data := await proc.read(64 * 1024):
        tail += data
        del tail[:-READ_BYTES]


async def _stop_started(starting: asyncio.Future[Proc], grace_s: float) -> None:
    """The program a cancelled start produced, if any: stopped (TERM, grace, KILL), closed."""
    if starting.cancelled() or starting.exception() is not None:
        return
    proc = starting.result()
    try:
        await _stop(proc, grace_s)
    finally:
        proc.close()


async def _stop(proc: Proc, grace_s: float) -> ExitInfo:
    """TERM the tree, wait `grace_s`, KILL what is left; finishes even if cancelled meanwhile
    (then the cancellation is raised after)."""
    ending = asyncio.ensure_future(proc.terminate(grace_s))
    cancelled = False
    while True:
        try:
            info = await asyncio.shield(ending)
            break
        except asyncio.CancelledError:
            cancelled = True
    if cancelled:
        raise asyncio.CancelledError
    return info


def _output(data: bytes, redactor: Hidden) -> str | None:
    """The last OUTPUT_BYTES of what the program printed, cleaned, its `env` values hidden and
    redacted (before the cut, so the cut cannot leave a secret's value without the name that
    marks it)."""
    text = redactor.redact(sanitize(decode(data))[0])[0]
    return text.encode()[-OUTPUT_BYTES:].decode("utf-8", "ignore").strip() or None


def _result(spec: ActionSpec, info: ExitInfo, timed_out: bool, output: str | None) -> Result:
    if timed_out:
        how = "" if info.signal is None else f"; stopped with {info.signal}"
        return Result("timeout", exit_code=info.exit_code, signal=info.signal, output=output,
                      error={"code": "timeout", "message": f"{spec.command[0]} ran longer than "
                             f"its timeout ({spec.timeout_ms} ms){how}"})
    if info.exit_code == 0:
        return Result("ok", exit_code=0, output=output)
    if info.signal is not None:
        error = {"code": "signal", "message": f"{spec.command[0]} was killed by {info.signal}"}
    else:
        error = {"code": "exit", "message": f"{spec.command[0]} exited with code "
                 f"{info.exit_code}"}
    return Result("failed", exit_code=info.exit_code, signal=info.signal, output=output,
                  error=error)
