"""Interchange candidates: the program's loops reordered so that the innermost loop walks memory contiguously.

A reference *strides* when the innermost loop enclosing its statement (in a
given order) appears in a subscript other than its last: successive
iterations then touch elements a row apart, and the loop cannot be
vectorised. PolyBench's doitgen, for instance, runs ``s`` innermost::

    for r, q { for p { sum[p] = 0; for s { sum[p] += A[r, q, s] * C4[s, p] } } ... }
      C4[s, p] strides along s; sinking p below s (order r, q, s, p) makes every
      reference unit stride or invariant:
    for r, q { for p { sum[p] = 0 } for s { for p { sum[p] += A[r, q, s] * C4[s, p] } } ... }

:func:`strided_weight` counts strided references weighted by their
statement's instances (loop extents at the given sizes). A *sink* moves one
loop right after the last loop nested inside it (``p`` after ``s`` above);
:func:`interchange_orders` applies, greedily, every sink that lowers the
weight, and proposes the result (and the best single sink, when different).
:func:`interchange_mappings` turns an order into a mapping that walks the
outer loops at the backing store and holds the innermost loops (the order's
longest suffix of statements' innermost loops) whole below it, so that the
counts see the rows an inner level keeps.
Statements that lack a loop run before or after it (``mapping.md``), which
can break a dependence: every candidate goes through compile's exact
legality check like any other; nothing here decides legality.
"""
from __future__ import annotations

from math import prod
from typing import Iterable, Mapping as MappingT

from polymap import ir
from polymap.machine.arch import Architecture
from polymap.mapping.model import LevelMapping, Mapping, loop_extents, nest_loops, nest_tensors
from polymap.mapping.schedule import new_coordinates
from polymap.poly import KernelModel

#: at most this many orders proposed per nest (each costs an exact legality check and counts)
MAX_ORDERS = 2


def descendants(kernel: ir.Kernel, nest: int) -> dict[str, set[str]]:
    """Per loop of the nest, the loops nested inside it (any depth)."""
    out: dict[str, set[str]] = {}

    def walk(nodes: Iterable[ir.Node], outer: tuple[str, ...]) -> None:
        for node in nodes:
            if isinstance(node, ir.Loop):
                out.setdefault(node.var, set())
                for x in outer:
                    out[x].add(node.var)
                walk(node.body, outer + (node.var,))
            elif isinstance(node, ir.If):
                walk(node.then, outer)
                walk(node.orelse, outer)

    walk((kernel.nests()[nest],), ())
    return out


def innermost(loops: Iterable[str], order: tuple[str, ...]) -> str | None:
    """The statement loop that comes last in ``order`` (None for a statement outside every loop)."""
    inside = [x for x in loops if x in order]
    return max(inside, key=order.index) if inside else None


def strided_refs(stmt: ir.Assign, inner: str | None) -> int:
    """References of ``stmt`` (its target and reads) that ``inner`` indexes outside the last subscript."""
    if inner is None:
        return 0
    refs = [stmt.target] + [r for r in ir.subexpressions(stmt.value) if isinstance(r, ir.Ref)]
    return sum(any(inner in ir.variables(s) for s in r.indices[:-1]) for r in refs)


def strided_weight(model: KernelModel, nest: int, order: tuple[str, ...], params: MappingT[str, int]) -> int:
    """Strided references of the nest with ``order`` as the innermost walk, weighted by instances."""
    extents = loop_extents(model.kernel, nest, params)
    total = 0
    for s in model.nest_statements(nest):
        n = strided_refs(s.stmt, innermost(s.loops, order))
        if n:
            total += n * prod(max(1, extents.get(x, 1)) for x in s.loops)
    return total


def sink(order: tuple[str, ...], loop: str, inside: set[str]) -> tuple[str, ...]:
    """``order`` with ``loop`` moved right after the last loop nested inside it (unchanged if none)."""
    below = [x for x in order if x in inside]
    if not below:
        return order
    rest = [x for x in order if x != loop]
    at = rest.index(max(below, key=order.index)) + 1
    return tuple(rest[:at] + [loop] + rest[at:])


def interchange_orders(model: KernelModel, nest: int, params: MappingT[str, int]) -> list[tuple[str, ...]]:
    """Orders with fewer strided references than the program's (see the module docstring), best first."""
    kernel = model.kernel
    original = nest_loops(kernel, nest)
    inside = descendants(kernel, nest)

    def weight(order: tuple[str, ...]) -> int:
        return strided_weight(model, nest, order, params)

    base = weight(original)
    if base == 0:
        return []
    # distinct orders in the program's loop order (a set's order changed with PYTHONHASHSEED, and with
    # MAX_ORDERS so did which tied order became a candidate: gemm_tiled's second nest); sorted stably
    singles = sorted(((weight(o), o) for o in dict.fromkeys(sink(original, x, inside[x]) for x in original)
                      if o != original), key=lambda t: t[0])
    greedy, best = original, base
    for _ in range(len(original)):
        step = min(((weight(o), o) for o in (sink(greedy, x, inside[x]) for x in original) if o != greedy),
                   key=lambda t: t[0], default=None)
        if step is None or step[0] >= best:
            break
        best, greedy = step
    proposals = [greedy] if best < base else []
    proposals += [o for w, o in singles if w < base]
    return list(dict.fromkeys(proposals))[:MAX_ORDERS]


def interchange_mapping(model: KernelModel, nest: int, arch: Architecture, order: tuple[str, ...]) -> Mapping:
    """``order`` walked at the backing store; below it, whole, the longest suffix of ``order`` made of
    statements' innermost loops (a suffix: the levels' walks then nest in the order's sequence)."""
    kernel = model.kernel
    loops = nest_loops(kernel, nest)
    innermosts = {innermost(s.loops, order) for s in model.nest_statements(nest)}
    inner: set[str] = set()
    for x in reversed(order):
        if x not in innermosts:
            break
        inner.add(x)
    keep = nest_tensors(kernel, nest)
    below = tuple(None if x in inner else 1 for x in loops)
    levels = tuple(LevelMapping(lv.name, below if k else (1,) * len(loops), order, (), keep)
                   for k, lv in enumerate(arch.levels))
    return Mapping(kernel.name, nest, loops, levels)


def interchange_mappings(model: KernelModel, nest: int, arch: Architecture,
                         params: MappingT[str, int]) -> list[tuple[str, Mapping]]:
    """compile's interchange candidates for ``nest``: ``[("interchange o,r,d,e,r", mapping)]``."""
    return [(f"interchange {','.join(o)}", interchange_mapping(model, nest, arch, o))
            for o in interchange_orders(model, nest, params)]


def mapping_strided_weight(model: KernelModel, nest: int, mapping: Mapping | None,
                           params: MappingT[str, int]) -> int:
    """:func:`strided_weight` of the order a mapping's innermost level walks, skipping the loops it walks
    once (tile 1 at the level above). None is the program's own order, and so is a mapping with new
    coordinates (this rule knows only the program's loops)."""
    kernel = model.kernel
    if mapping is None or new_coordinates(model, mapping) or mapping.nests:
        return strided_weight(model, nest, nest_loops(kernel, nest), params)
    order = tuple(mapping.levels[-1].order)
    order += tuple(x for x in mapping.loops if x not in order)
    if len(mapping.levels) > 1:
        above = dict(zip(mapping.loops, mapping.levels[-2].tile))
        order = tuple(x for x in order if above.get(x) != 1) or order
    return strided_weight(model, nest, order, params)
