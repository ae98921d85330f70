"""Synthetic scenarios: deterministic simulated recordings with known parameters."""
