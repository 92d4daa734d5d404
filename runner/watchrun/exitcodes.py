"""Process exit codes of the `watchrun` command (SPEC §7)."""

from enum import IntEnum


class ExitStatus(IntEnum):
    OK = 0
    """Success; in once mode every gate held."""
    GATE_FAILED = 1
    """A CI gate was crossed, or an agent turn failed (`agent run`)."""
    USAGE = 2
    """Bad command line or invalid configuration: nothing was started."""
    RUNTIME = 3
    """A runtime failure: a command could not start, the output dir is unwritable, ..."""
