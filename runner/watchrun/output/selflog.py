"""The runner's own log as a watcher may meet it: refused as a file, never echoed as a match.

Every match is echoed into the log with its line, so a watcher that reads the log matches the
echo again (JSON-escaped once more in the JSON format: each step ~3.5 times longer), without
end. Two guards:

- `own_log`: the file the log is written to when stderr is a regular file (`2>>watchrun.log`,
  or a symlink to `/dev/stderr`, as the nginx image ships its logs) is refused when a watcher
  opens it, as the runner's own records are (`sources/generation.open_regular`);
- `echoes_a_match`: where the log reaches a watcher through a pipe (a container runtime writes
  the runner's stderr to `/var/log/pods/…`, `journalctl -f` as a command), no device and inode
  tell; a matched line that is the log's echo of a match is recorded, never echoed again
  (`output/runlog.py`), which ends the loop at its first turn.
"""

from __future__ import annotations

import os
import re
import stat

__all__ = ["OWN_LOG", "SELF_ECHO_NOTE", "echoes_a_match", "own_log"]

LOG_FD = 2
"""The log is written to stderr, and only there (stdout holds a once run's echo and report)."""

_ECHO = re.compile(
    # text: `watchrun: [id] match where:N: line` (journalctl shows `watchrun[pid]: [id] match`)
    r"watchrun(?:\[\d+\])?: \[[A-Za-z0-9][A-Za-z0-9_.-]{0,63}\] match "
    # JSON: `"event":"match","watcher":` in the order `runlog.ENVELOPE` writes them, however
    # often it was JSON-escaped again on its way (a container runtime's `{"log":"…"}`)
    r'|\\*"event\\*":\\*"match\\*",\\*"watcher\\*":')

OWN_LOG = ("it is the runner's own log (its stderr is this file): every match is echoed into "
           "the log, where this watcher would match it again, without end; write the log "
           "elsewhere, or leave this file out")
"""Why a watcher of the log file is refused (`own_log`)."""

SELF_ECHO_NOTE = ("matched a line of watchrun's own log, its echo of a match: such matches are "
                  "recorded (see the JSONL) but not echoed, since each echo would be matched "
                  "again, without end; is this watcher reading watchrun's own log?")
"""Said once per watcher, the first time one of its matches is such a line."""


def own_log(inode: tuple[int, int]) -> bool:
    """Whether `inode` (st_ino, st_dev) is the file the runner's log is written to: stderr
    redirected to a regular file. Looked at each time (an fstat): a forked runner, a test's
    redirection, each has its own."""
    try:
        st = os.fstat(LOG_FD)
    except OSError:  # (no stderr at all)
        return False
    return stat.S_ISREG(st.st_mode) and (st.st_ino, st.st_dev) == inode


def echoes_a_match(line: str) -> bool:
    """Whether a matched line holds the log's echo of a match, in either log format, behind
    whatever a collector put before it (a timestamp, a CRI `stderr F`, a journal's host and
    unit) or however often it escaped it."""
    return "match" in line and _ECHO.search(line) is not None
