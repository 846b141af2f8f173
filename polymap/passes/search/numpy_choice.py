"""The NumPy target's own mapping: blocks so large that each innermost tile is one whole-array expression.

The C target wants register tiles (6 x 64 walked millions of times); in
generated NumPy every innermost tile costs a Python-level statement, so
the NumPy target gets the opposite: every loop whole, in the original order,
and the innermost level's box handed to the vectoriser
(:mod:`polymap.codegen.numpy.vectorize`) as one ``@``/``einsum`` or
whole-array expression. A block is split only to bound the temporaries::

    gemm 1024^3 on host (C target: 6 x 64 register tiles)
      NumPy: every level whole  ->  C[0:M, 0:N] += A[0:M, 0:K] @ B[0:K, 0:N]   (one call)

A pure contraction (:mod:`polymap.passes.frontend.contraction`: gemm's
``C[i, j] += A[i, k] * B[k, j]``, whose result is an output nothing else
reads), and with ``reassociate`` (``compile --reassociate``) any contraction (a
product of references), is one ``@``/``einsum`` and materialises only its
target's box (kept under :data:`MAX_TARGET_ELEMENTS`); otherwise the emitter
keeps the original rounding by folding the products in order (``ufunc.accumulate``
over the whole box), so, like any other statement, the box is kept at most
:data:`MAX_ELEMENTS` elements by halving its longest loop: the module is
then a short Python loop over blocks, bounded in memory, and far slower
than ``@``. A blocking
is kept only when legal (loops sharing a name would fuse; compile renames
them apart first); otherwise the nest keeps its original schedule (no
mapping), which is always right.
"""
from __future__ import annotations

from math import prod
from typing import Mapping as MappingT

from polymap import ir
from polymap.passes.frontend.contraction import folds_in_any_order
from polymap.mapping.model import LevelMapping, Mapping, loop_extents, nest_loops, nest_tensors
from polymap.poly import KernelModel
from polymap.passes.legality.legality import is_legal
from polymap.machine.arch import Architecture

#: the largest box (elements) one non-contraction statement may broadcast over
MAX_ELEMENTS = 1 << 24
#: the largest target box of a contraction
MAX_TARGET_ELEMENTS = 1 << 26


def numpy_blocks(model: KernelModel, nest: int, params: MappingT[str, int], *,
                 reassociate: bool = False) -> dict[str, int | None]:
    """Per loop, the block (None: whole) that bounds every statement's temporaries."""
    loops = nest_loops(model.kernel, nest)
    extents = loop_extents(model.kernel, nest, params, model=model)
    tiles = {x: max(1, extents.get(x, 1)) for x in loops}
    for s in model.nest_statements(nest):
        stmt = s.stmt
        if folds_in_any_order(model.kernel, stmt, reassociate):
            box, limit = [x for x in s.loops if any(x in ir.variables(i) for i in stmt.target.indices)], MAX_TARGET_ELEMENTS
        else:
            box, limit = list(s.loops), MAX_ELEMENTS
        while box and prod(tiles[x] for x in box) > limit:
            longest = max(box, key=lambda x: tiles[x])
            if tiles[longest] == 1:
                break
            tiles[longest] = -(-tiles[longest] // 2)
    return {x: None if tiles[x] >= extents.get(x, 1) else tiles[x] for x in loops}


def numpy_mapping(model: KernelModel, nest: int, arch: Architecture, params: MappingT[str, int], *,
                  reassociate: bool = False) -> Mapping | None:
    """The mapping of the module docstring, or None (original schedule) when a split block is illegal."""
    kernel = model.kernel
    loops = tuple(nest_loops(kernel, nest))
    if not loops:
        return None
    blocks = numpy_blocks(model, nest, params, reassociate=reassociate)
    keep = nest_tensors(kernel, nest)
    whole = tuple(None for _ in loops)
    inner = tuple(blocks[x] for x in loops)
    levels = [LevelMapping(lv.name, whole, loops, (), keep) for lv in arch.levels[:-1]]
    levels.append(LevelMapping(arch.levels[-1].name, inner, loops, (), keep))
    mapping = Mapping(kernel.name, nest, loops, tuple(levels))
    if not is_legal(model, mapping):
        return None
    return mapping


def numpy_mappings(model: KernelModel, arch: Architecture, params: MappingT[str, int], *,
                   reassociate: bool = False) -> tuple[Mapping, ...]:
    """The NumPy target's mapping of every nest that has loops (``reassociate``: as compile's flag)."""
    out = []
    for nest in range(len(model.kernel.nests())):
        m = numpy_mapping(model, nest, arch, params, reassociate=reassociate)
        if m is not None:
            out.append(m)
    return tuple(out)
