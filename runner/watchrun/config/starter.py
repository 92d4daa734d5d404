"""The commented starter config that `watchrun init` writes."""

from __future__ import annotations

__all__ = ["STARTER_YAML"]

STARTER_YAML = """\
# watch.yaml — a watchrun config. Run it:   watchrun -c watch.yaml   (Ctrl-C stops it)
# Check it:  watchrun validate -c watch.yaml        Resolved form:  watchrun config -c watch.yaml
# JSON Schema for editors:  watchrun schema > watch.schema.json       Reference: docs/config.md
#
# Relative paths resolve against this file's folder. Durations: 250ms, 10s, 5m, 2h or a number of
# milliseconds. Sizes: 64KiB, 16MiB, 1GiB or a number of bytes. ${VAR} and ${VAR:-default} are
# read from the environment; $$ is a literal $.

limits:
  pollMs: 500               # poll interval where inotify is unavailable (10 to 60000, clamped)
  maxLineBytes: 64KiB       # longer lines are cut and marked `truncated`
  stopTimeout: 5s           # SIGTERM → SIGKILL grace when stopping a command

output:
  dir: .watchrun            # JSONL: .watchrun/watchers/<id>.jsonl, .watchrun/agents/<name>.jsonl

watchers:
  # Follow a file like `tail -F`: it may not exist yet, and rotation is handled.
  - id: app-log
    label: app log
    path: logs/app.log
    pattern: "ERROR|FATAL|Traceback"
    exclude: ["healthcheck"]
    fromStart: false        # true: scan what is already in the file first

  # Run a command and match its merged stdout and stderr. A string runs under /bin/sh -c;
  # a list runs as argv.
  - id: disk
    label: disk usage
    command: "df -P ."
    pattern: "\\\\b(9[0-9]|100)%"
    schedule: "*/10 * * * *"  # run every 10 minutes instead of once
    # restart: on-failure     # never | on-failure | always, with restartDelay: 1s backoff
    # gate: {maxMatches: 0}   # `watchrun run --once` exits 1 if this watcher matches

# Agents are coding-agent CLIs woken by matches: add `wake: triage` to a watcher. The mock
# provider runs offline; claude, codex, gemini, opencode, pi, cursor and copilot run the real
# CLI.
# agents:
#   - name: triage
#     provider: mock
#     prompt: |
#       These lines appeared in {label}:
#       {matches}
#       Find the cause.
#     deadline: 10m
#     idleTimeout: 2m
"""
"""A self-contained starter: it validates and runs with no agent CLI and no API key."""
