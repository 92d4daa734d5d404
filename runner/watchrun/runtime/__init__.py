"""The live runner: the supervisor loop, watcher wiring, status, control socket, metrics."""
