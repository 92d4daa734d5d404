"""Reactions to a watcher's matches: webhooks and programs, with thresholds, throttles and caps."""
