"""polymap: a polyhedral compiler pass over an affine IR.

Read a ``.loop`` kernel, model it with ISL, find its exact dependences,
check loop orders and mappings with concrete witnesses, count the exact
traffic of a mapping on a memory hierarchy, search mappings, and generate
verified C and NumPy code. Every ``polymap`` command is one function of
:mod:`polymap.api`, re-exported here::

    import polymap

    kernel = polymap.load("examples/gemm.loop").kernels[0]
    polymap.check(kernel, order=("k", "i", "j")).legal   # True
"""
from __future__ import annotations

from polymap.islcheck import isl  # noqa: F401  (fails loudly when islpy lacks card())
from polymap.api import (
    ChoiceOptions,
    CompileOptions,
    CostOptions,
    Objective,
    NestSearchOptions,
    architecture,
    check,
    choose_mappings,
    compile,
    cost,
    cost_nests,
    dependences,
    load,
    mapping_of,
    mappings_of,
    model,
    parse,
    run,
    search,
    search_ranked,
    transform,
)
from polymap.driver import load_program, param_values

__all__ = ["parse", "load", "model", "dependences", "check", "cost", "cost_nests", "search", "search_ranked",
           "transform", "compile", "choose_mappings", "run", "architecture", "mapping_of", "mappings_of",
           "load_program", "param_values", "CostOptions", "NestSearchOptions", "CompileOptions", "ChoiceOptions",
           "Objective"]
__version__ = "0.1.0"
