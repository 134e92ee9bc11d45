"""The sampler's parts: the source supervisor, the entity tracker, the publisher and enrichers.

exporter/sampler.py composes them into the one thread that owns the source; the report's replay
(exporter/report/replay.py) observes that sampler's snapshots and reuses the tracker's gap rule.
"""
