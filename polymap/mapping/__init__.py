"""Mappings: the mapping model and its files."""
