"""watchrun: tail files and commands, match lines, supervise agents, write JSONL."""

__version__ = "0.1.0"
__all__ = ["__version__"]
