"""Dependences: exact relations, distances, loop classes, the graph."""
