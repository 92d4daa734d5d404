"""What the runner writes: JSONL sinks, reading records back, the output dir, its own log."""
