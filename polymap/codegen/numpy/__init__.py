"""The NumPy backend."""
