"""Code generators: C, NumPy and the .loop language, plus building and running."""
