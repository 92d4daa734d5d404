"""`list` of a watcher whose output disk filled while it was writing: `paused` (README: "a full
disk pauses reading ... status `paused` in `list`"), also once its checkpoint could not be
saved either — never `error`, which says its file cannot be read."""

from __future__ import annotations

from pathlib import Path

from liverunner import LiveRunner, wait_for, write_config
from test_disk_full import listed
from tmpfs import grow, mount_tmpfs, umount

from watchrun.inotify import INotify

IN_DELETE = 0x200

LINES = 3000
BATCH = 100


def test_a_disk_that_fills_while_records_are_written_is_paused_not_error(tmp_path: Path) -> None:
    """The disk fills between two chunks: the records of the last one that fitted moved the
    checkpoint, whose save then fails (ENOSPC) while the next records wait for room. The
    file source took the failed save for an error of its own: `list` said `error` (as for an
    unreadable log) for as long as the disk was full."""
    mnt = tmp_path / "mnt"
    mount_tmpfs(mnt, "64k")
    try:
        log = tmp_path / "app.log"
        log.write_text("")
        config = write_config(tmp_path, {"output": {"dir": str(mnt / "out")}, "watchers": [
            {"id": "app", "path": str(log), "pattern": "ERROR"}]})
        r = LiveRunner(config)
        r.out = mnt / "out"
        try:
            r.wait_running()
            ino = INotify()
            ino.add_watch(mnt / "out" / "state", IN_DELETE)
            full = "cannot write records: ENOSPC"
            with open(log, "ab", buffering=0) as fh:  # batches, each recorded before the next,
                for k in range(0, LINES, BATCH):  # until one does not fit: the checkpoint the
                    fh.writelines(b"ERROR line %d\n" % n  # last one moved is saved after that
                                  for n in range(k + 1, k + BATCH + 1))
                    wait_for(lambda k=k: full in r.stderr() or len(r.matches("app")) == k + BATCH,
                             "the batch recorded, or the disk full")
                    if full in r.stderr():
                        fh.writelines(b"ERROR line %d\n" % n
                                      for n in range(k + BATCH + 1, LINES + 1))
                        break
            wait_for(lambda: any(e.name == "app.checkpoint.json.tmp" for e in ino.read()),
                     "the checkpoint save to fail")  # (its tmp file removed, not renamed)
            ino.close()
            app = listed(tmp_path)["app"]
            assert app["lastError"].startswith("cannot write records: ENOSPC"), app
            assert app["status"] == "paused", app
            grow(mnt, "8m")
            wait_for(lambda: len(r.matches("app")) == LINES, "every line recorded")
            wait_for(lambda: listed(tmp_path)["app"]["status"] == "running", "status running")
            saves = [x for x in r.records("app") if x["kind"] == "error"]  # (written now)
            assert [x["message"] for x in saves][:1] == [
                f"cannot save checkpoint: {mnt}/out/state/app.checkpoint.json: No space left "
                "on device"], saves
            assert listed(tmp_path)["app"]["errors"] == len(saves)
        finally:
            assert r.stop() == 0, r.stderr()
    finally:
        umount(mnt)
