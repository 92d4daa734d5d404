"""`python -m watchrun` runs the command-line interface."""

import sys

from watchrun.cli.main import main

sys.exit(main())
