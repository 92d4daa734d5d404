"""Shared helpers for the tests (not tests themselves)."""
