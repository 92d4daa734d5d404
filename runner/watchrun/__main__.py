"""`python -m watchrun` runs the command-line interface."""

import sys

from watchrun.cli import entry

sys.exit(entry())
