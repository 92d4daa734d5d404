"""Make docs/top.svg: `watchrun top` over the demo in watch.yaml.example, run for real.

Not a test: run it by hand after changing the screen (`python tests/make_top_screenshot.py`).
It copies the example to a scratch folder, starts `watchrun run` on it, lets the demo write
for a while (so the watchers have matches and the mock agent has taken a turn), then drives the
screen headless and exports it as SVG.
"""

from __future__ import annotations

import asyncio
import shutil
import sys
import tempfile
import time
from pathlib import Path

from liverunner import LiveRunner, wait_for

from watchrun.tui.app import TopApp
from watchrun.tui.feed import Feed

ROOT = Path(__file__).resolve().parent.parent
SIZE = (118, 14)


def main() -> int:
    folder = Path(tempfile.gettempdir()) / "watchrun-demo"
    shutil.rmtree(folder, ignore_errors=True)
    folder.mkdir()
    config = folder / "watch.yaml"
    shutil.copy(ROOT / "watch.yaml.example", config)
    runner = LiveRunner(config)
    try:
        turn = runner.out / "agents" / "triage.jsonl"
        wait_for(lambda: any(r["kind"] == "dispatch-finished"
                             for r in runner.records("triage", "agents")) if turn.exists()
                 else False, "the mock agent's first turn", timeout=60)
        wait_for(lambda: len(runner.matches("demo-writer")) >= 6, "some demo output")
        app = TopApp(Feed(runner.out, {"triage": "mock"}), interval=0.5)

        async def shoot() -> None:
            async with app.run_test(size=SIZE) as pilot:
                end = time.monotonic() + 30
                while not (app.snapshot and len(app.list_screen.rows) == 3
                           and all(r.kind != "?" for r in app.list_screen.rows)):
                    assert time.monotonic() < end, "the rows did not appear"
                    await pilot.pause(0.1)
                while app.unreported.total() < 2:  # new matches arrive: the ! chip counts them
                    assert time.monotonic() < end + 30, "no new matches"
                    await pilot.pause(0.1)
                await pilot.press("j")
                await pilot.pause(0.3)
                app.save_screenshot("top.svg", str(ROOT / "docs"))
                await pilot.press("q")

        asyncio.run(shoot())
    finally:
        runner.stop()
    print(f"wrote {ROOT / 'docs' / 'top.svg'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
