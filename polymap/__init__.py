"""polymap: a polyhedral compiler pass over an affine IR.

Read a ``.loop`` kernel, model it with ISL, find its exact dependences,
check loop orders and mappings with concrete witnesses, count the exact
traffic of a mapping on a memory hierarchy, search mappings, and generate
verified C and NumPy code.

The Python API (every command is a thin layer over it)::

    import polymap
    prog = polymap.parse(open("gemm.loop").read(), "gemm.loop")
"""
from __future__ import annotations

from .islcheck import isl  # noqa: F401  (fails loudly without barvinok)
from .driver import load_program, param_values, parse

__all__ = ["parse", "load_program", "param_values"]
__version__ = "0.1.0"
