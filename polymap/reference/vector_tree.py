"""The vector form of a loop body: each statement's value, subscripts and combine operator
compiled once to NumPy closures (:mod:`polymap.reference.vector_values`).

``for j { C[i, j] += A[i, j] }`` -> ``(LoopNode("j", lo, hi, 1, (StmtNode(acc, "f32", value,
(A,), target_index, ref_index, "+"),)),)``. Something that cannot be compiled raises
:class:`~polymap.reference.vector_values.Fallback`: the reference then runs that loop one
instance at a time. :mod:`polymap.reference.plan` walks the tree on concrete indices;
:mod:`polymap.reference.vector` executes it.
"""
from __future__ import annotations

from dataclasses import dataclass

from polymap import ir
from polymap.reference.values import COMBINE
from polymap.reference.vector_values import (
    Fallback,
    VTyped,
    compile_vcondition,
    compile_vextreme,
    compile_vindex,
    compile_vvalue,
)


@dataclass(frozen=True)
class StmtNode:
    """A statement compiled for the vector path."""

    stmt: ir.Assign
    dtype: str
    value: VTyped
    refs: tuple[ir.Ref, ...]  # right-hand side references, in the order of ``value``'s loads
    target_index: tuple  # vindex closures of the target's subscripts
    ref_index: tuple[tuple, ...]  # the same for each of ``refs``
    combine: str | None  # the operator of ``t OP= v`` (None for ``=``)


@dataclass(frozen=True)
class LoopNode:
    var: str
    lower: object
    upper: object
    step: int
    body: tuple


@dataclass(frozen=True)
class IfNode:
    cond: object
    then: tuple
    orelse: tuple


def compile_tree(nodes: tuple[ir.Node, ...], dtypes: dict[str, str]) -> tuple:
    """The vector form of a loop body (raises :class:`Fallback` when something cannot be)."""
    out = []
    for node in nodes:
        match node:
            case ir.Assign(target=target, op=op, value=value):
                refs: list[ir.Ref] = []
                typed = compile_vvalue(value, dtypes, refs)
                out.append(StmtNode(node, dtypes[target.tensor], typed, tuple(refs),
                                    tuple(compile_vindex(e) for e in target.indices),
                                    tuple(tuple(compile_vindex(e) for e in r.indices) for r in refs),
                                    None if op == "=" else COMBINE[op]))
            case ir.Loop(var=var, lower=lo, upper=hi, step=step, body=body):
                if step == 0:
                    raise Fallback("step 0")
                out.append(LoopNode(var, compile_vextreme(lo, "max"), compile_vextreme(hi, "min"),
                                    step, compile_tree(body, dtypes)))
            case ir.If(cond=cond, then=then, orelse=orelse):
                out.append(IfNode(compile_vcondition(cond), compile_tree(then, dtypes),
                                  compile_tree(orelse, dtypes)))
            case _:
                raise Fallback(f"not a statement: {node!r}")
    return tuple(out)
