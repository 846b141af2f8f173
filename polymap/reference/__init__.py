"""The reference execution: the original program run on NumPy arrays, straight from the IR.

It is the oracle every generated target is checked against, so it shares no
code with :mod:`polymap.codegen` and uses no dependence analysis. Modules:

* :mod:`.interpreter`: ``execute``, statement by statement in textual order;
* :mod:`.index` and :mod:`.values`: subscripts, bounds, conditions, and the
  value rules (C's conversions, float32 rounding after every operation);
* :mod:`.vector`, :mod:`.plan`, :mod:`.vector_values`: whole loops on arrays
  when, on the concrete indices, that gives exactly the sequential result.
"""
from polymap.reference.interpreter import (
    compile_condition,
    compile_index,
    compile_subscripts,
    execute,
)

__all__ = ["execute", "compile_index", "compile_condition", "compile_subscripts"]
