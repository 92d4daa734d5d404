"""Matching: frame bytes into lines, sanitize text, analyse regexes, scan chunks with an engine."""
