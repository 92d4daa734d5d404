"""N file watchers in one folder, L lines of 1 KiB appended to each log once: the runner's CPU
(user, sys) from before the appends until every JSONL holds the last line (`cpu`), and until
every checkpoint and status snapshot does too (`settled`: what the appends cost, the saves and
snapshots written up to a second after them included).

    python bench/bench_many_watchers.py N L [DIR]
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path


def main() -> None:
    n, lines = int(sys.argv[1]), int(sys.argv[2])
    d = Path(sys.argv[3]) if len(sys.argv) > 3 else Path(tempfile.mkdtemp()) / f"n{n}"
    shutil.rmtree(d, ignore_errors=True)
    d.mkdir(parents=True)
    logs = [d / f"f{i}.log" for i in range(n)]
    for p in logs:
        p.write_text("")
    (d / "w.json").write_text(json.dumps({
        "limits": {"maxWatchers": 500, "maxLogLines": 100, "maxMatches": 50},
        "watchers": [{"id": f"w{i}", "path": str(p), "pattern": "ERROR"}
                     for i, p in enumerate(logs)]}))  # fmt: skip
    with (d / "err").open("w") as err:
        proc = subprocess.Popen([sys.executable, "-m", "watchrun", "-c", str(d / "w.json")],
                                stderr=err)
    tick = os.sysconf("SC_CLK_TCK")

    def cpu() -> tuple[float, float]:
        f = Path(f"/proc/{proc.pid}/stat").read_text().rsplit(")", 1)[1].split()
        return int(f[11]) / tick, int(f[12]) / tick

    while (d / "err").read_text().count("following") < n:
        time.sleep(0.1)
    time.sleep(1)
    while True:  # the start's last saves and snapshots written: the runner is idle
        idle = sum(cpu())
        time.sleep(0.5)
        if sum(cpu()) - idle < 0.03:
            break
    (u0, s0), t0 = cpu(), time.time()
    for i, p in enumerate(logs):
        body = [f"{'ERROR' if k % 2 else 'INFO'} app-{i} line {k} ".ljust(1023, "x")
                for k in range(lines - 1)]
        with p.open("a") as fh:
            fh.write("\n".join([*body, "ERROR done".ljust(1023, "x")]) + "\n")
    out, left = d / ".watchrun" / "watchers", set(range(n))
    while left:
        left = {i for i in left if b"ERROR done" not in (out / f"w{i}.jsonl").read_bytes()}
        time.sleep(0.05)
    (u1, s1), t1 = cpu(), time.time()
    state, left = d / ".watchrun" / "state", set(range(n))
    while left:
        left = {i for i in left if f'"offset":{lines * 1024},' not in
                (state / f"w{i}.checkpoint.json").read_text() or f'"linesRead": {lines},'
                not in (state / f"w{i}.status.json").read_text()}
        time.sleep(0.05)
    time.sleep(0.3)
    u2, s2 = cpu()
    print(n, lines, "cpu", round(u1 + s1 - u0 - s0, 2), "user", round(u1 - u0, 2), "sys",
          round(s1 - s0, 2), "wall", round(t1 - t0, 2), "settled", round(u2 + s2 - u0 - s0, 2))
    proc.terminate()
    proc.wait()


if __name__ == "__main__":
    main()
