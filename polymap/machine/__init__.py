"""Machines: architectures, the host and the presets."""
