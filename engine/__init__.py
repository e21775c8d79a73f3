"""kadmit engine: Kueue admission semantics, pure and deterministic (no I/O, no clock)."""
