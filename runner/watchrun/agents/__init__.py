"""Agents: provider adapters, the supervised turn, the wake hub that queues deliveries."""
