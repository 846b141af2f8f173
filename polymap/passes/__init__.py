"""Analyses and transforms over the IR and its polyhedral model, one topic a module."""
