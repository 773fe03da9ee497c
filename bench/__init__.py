"""Benchmarks: `python -m bench` (see docs/benchmarks.md).

Each run starts its own embedded PostgreSQL, measures the baselines and the
scenarios on it, and writes `bench/results/<date>.json` and `.md`. Nothing
here asserts a time: the figures are for reading, not for gating.
"""
