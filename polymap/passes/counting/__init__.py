"""Counting: residencies, exact traffic, footprints, the cost model, the fast path."""
