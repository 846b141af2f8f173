"""Checks after parsing: semantics, affinity, bounds, renaming."""
