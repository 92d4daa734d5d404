"""Print this program's arguments (after argv[0]) as one JSON list: what a shell passed it."""

import json
import sys

print(json.dumps(sys.argv[1:]))
