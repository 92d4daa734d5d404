"""What the `watch` tool's `add` text says of a file watcher that does not read its file yet:
it said `w1 added: tailing PATH for /ERROR/` for a directory it cannot read (status `error`)
and for a file not there yet (`waiting`), where the runner's `message` and `watchrun add` say
so (explore-runtime F6); only the structured result had it, and many clients show the model
the text. It now says what they say, with the session's own runner and with a live one."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import anyio
import pytest
from liverunner import LiveRunner, write_config
from mcp import types
from mcpclient import mcp_inproc


@contextmanager
def runner_of(kind: str, config: Path) -> Iterator[None]:
    """A live `watchrun run` of `config` for `live`; none for `session` (the first `add`
    starts the session's own)."""
    if kind == "session":
        yield
        return
    runner = LiveRunner(config)
    try:
        runner.wait_running()
        yield
    finally:
        assert runner.stop() == 0


@pytest.mark.parametrize("kind", ["session", "live"])
def test_add_says_its_file_is_not_there_or_cannot_be_read(tmp_path: Path, kind: str) -> None:
    config = write_config(tmp_path, {"watchers": []})
    (tmp_path / "adir").mkdir()
    (tmp_path / "app.log").write_text("")
    adir, missing = tmp_path / "adir", tmp_path / "nothere.log"
    texts: dict[str, str] = {}

    async def body() -> None:
        async with mcp_inproc(tmp_path, "-c", str(config)) as c:
            for wid, path in (("d", "adir"), ("m", "nothere.log"), ("ok", "app.log")):
                result = await c.call(action="add", path=path, pattern="ERROR", id=wid)
                assert not result.is_error, result.content
                assert isinstance(result.structured_content, dict)
                assert result.structured_content["runner"] == kind
                block = result.content[0]
                assert isinstance(block, types.TextContent)
                texts[wid] = block.text
    with runner_of(kind, config):
        anyio.run(body)
    assert texts["d"] == (
        f"d added: cannot read {adir} yet: is a directory, not a regular file (it is kept, and "
        "tries again whenever the path changes: a regular file there is followed; the `stop` "
        "action ends it); it looks for /ERROR/")
    assert texts["m"] == (f"m added: waiting for {missing} (not there yet; followed once it "
                          "appears); it looks for /ERROR/")
    assert texts["ok"] == f"ok added: tailing {tmp_path / 'app.log'} for /ERROR/"
