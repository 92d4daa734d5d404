"""Sources of lines: a followed file (with checkpoints and change notification) or a command."""
