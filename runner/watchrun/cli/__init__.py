"""The command line: argument parsing and one handler module per group of commands."""
