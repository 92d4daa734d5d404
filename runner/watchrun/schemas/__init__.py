"""JSON Schemas of watchrun: the config, the JSONL records and the readable views."""
