"""Print a captured stream as an agent CLI would: STDOUT_FILE's bytes to stdout, STDERR_FILE's
(or nothing, for "-") to stderr, then exit with EXIT. Extra arguments (the prompt) are ignored.

Usage: replay_stream.py STDOUT_FILE STDERR_FILE EXIT [PROMPT...]
"""

from __future__ import annotations

import sys
from pathlib import Path


def main(argv: list[str]) -> int:
    out, err, code = argv[1], argv[2], int(argv[3])
    sys.stdout.buffer.write(Path(out).read_bytes())
    sys.stdout.buffer.flush()
    if err != "-":
        sys.stderr.buffer.write(Path(err).read_bytes())
        sys.stderr.buffer.flush()
    return code


if __name__ == "__main__":
    sys.exit(main(sys.argv))
