"""docs/control.md `endWithClient`: a long-lived runner keeps the rows of the last ENDED_KEPT
watchers whose client ended, and forgets older ones as `clear` forgets them (their row, state
files and metric series; their JSONL stays, and `watchrun matches ID` reads it). Every
`watchrun mcp` session on a live runner adds its watchers so: they stayed listed `stopped`,
with their state files and 13 metric series each, until someone ran `watchrun clear`, so each
agent session grew the list, `state/` and the scrape for the runner's life. What is not a row
its client left (an operator's stopped watcher, the config's) is never forgotten so."""

from __future__ import annotations

import re
from pathlib import Path

import anyio
from liverunner import LiveRunner, cli, wait_for, write_config
from mcpclient import mcp_session, until
from test_end_with_client_readd import Client, add, listed, settled, stops
from test_metrics import free_port
from test_metrics_churn import body, labelled

from watchrun.runtime.client_gone import ENDED_KEPT


def state_of(r: LiveRunner, wid: str) -> list[str]:
    """The files in state/ of watcher `wid`."""
    return sorted(p.name for p in (r.out / "state").iterdir()
                  if re.match(rf"(watchers-)?{re.escape(wid)}\.", p.name))


def session_adds_and_ends(config: Path) -> int:
    """A `watchrun mcp` session (a process of its own) adds `s1` and `s2` to the live runner,
    sees `s1` match, and ends as a client ends it (stdin closed); returns its pid."""
    log = config.parent / "app.log"

    async def session() -> int:
        async with mcp_session(config.parent, "-c", str(config)) as c:
            await c.ok(action="add", path=str(log), pattern="session", id="s1")
            await c.ok(action="add", path=str(log), pattern="nothing", id="s2")
            with log.open("a") as f:
                f.write("ERROR from the session\n")

            async def matched() -> bool:
                return bool((await c.status("s1"))["matchCount"] == 1)
            await until(matched, "s1 to match")
            assert c.pid is not None
            return c.pid
    pid: int = anyio.run(session)
    return pid


def test_a_runner_keeps_the_last_watchers_whose_client_ended(tmp_path: Path) -> None:
    assert ENDED_KEPT == 20
    config = write_config(tmp_path, {"limits": {"maxWatchers": 30}, "watchers": [
        {"id": "cfg", "path": "app.log", "pattern": "ERROR"}]})
    (tmp_path / "app.log").write_text("")
    port = free_port()
    r = LiveRunner(config, "--metrics", f"127.0.0.1:{port}")
    clients: list[Client] = []
    try:
        r.wait_running()
        assert r.control(add(tmp_path, "op", end_with_client=False))["ok"]  # an operator's
        assert r.control({"cmd": "stop", "id": "op"})["ok"]

        pid = session_adds_and_ends(config)
        r.wait_log(f"process {pid}, which added s1, s2, has ended (they are stopped already)")
        settled(r)
        assert listed(r) == {"cfg": "running", "op": "stopped", "s1": "stopped",
                             "s2": "stopped"}
        assert state_of(r, "s1")  # (its snapshot, tail and checkpoint)

        # a client adds 19 and is killed: 21 rows whose client ended, the oldest one goes
        first = [add(tmp_path, f"c{i}", end_with_client=True) for i in range(19)]
        clients.append(Client(r, *first))
        clients[-1].end(kill=True)
        wait_for(lambda: stops(r, "c18") == ["client-gone"], "c18 stopped with its client")
        settled(r)
        rows = listed(r)
        assert "s1" not in rows, rows
        assert rows == {"cfg": "running", "op": "stopped", "s2": "stopped",
                        **{f"c{i}": "stopped" for i in range(19)}}
        assert state_of(r, "s1") == []
        r.wait_log("forgot s1, stopped when the client that added them ended: the runner keeps "
                   f"the last {ENDED_KEPT} such watchers listed (their JSONL stays)")
        scraped = labelled(body(port))
        assert "s1" not in scraped and {"s2", "op", "cfg", "c0"} <= scraped, sorted(scraped)
        # its records stay readable, as after `clear`
        read = cli("matches", "s1", "-c", config, cwd=tmp_path)
        assert read.returncode == 0, read.stderr
        assert [line.endswith("app.log:1  ERROR from the session")
                for line in read.stdout.splitlines()] == [True], read.stdout

        # another client adds 5 and exits: still 20 rows whose client ended, the oldest gone
        clients.append(Client(r, *[add(tmp_path, f"d{i}", end_with_client=True)
                                   for i in range(5)]))
        clients[-1].end()
        wait_for(lambda: stops(r, "d4") == ["client-gone"], "d4 stopped with its client")
        settled(r)
        ended = {f"c{i}" for i in range(4, 19)} | {f"d{i}" for i in range(5)}
        assert listed(r) == {"cfg": "running", "op": "stopped", **dict.fromkeys(ended,
                                                                                 "stopped")}
        assert len(ended) == ENDED_KEPT
        snapshots = {p.name.removesuffix(".status.json")
                     for p in (r.out / "state").glob("*.status.json")}
        assert snapshots == {"cfg", "op", *ended}
        assert labelled(body(port)) == {"cfg", "op", *ended}
        for gone in ("s2", "c0", "c3"):
            assert (r.out / "watchers" / f"{gone}.jsonl").exists()
    finally:
        for client in clients:
            client.close()
        assert r.stop() == 0
