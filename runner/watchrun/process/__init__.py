"""The OS seam for child processes: spawning in a session, stopping a tree, the process table."""
