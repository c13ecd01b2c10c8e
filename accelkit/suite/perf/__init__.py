"""The perf suite: one module per kind of measurement (see harness.py for the shared parts)."""
