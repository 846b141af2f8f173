"""The C backend."""
