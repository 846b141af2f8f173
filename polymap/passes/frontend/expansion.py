"""Scalar expansion: a local scalar that carries no value from one iteration of a loop to another
becomes an array indexed by that loop, so that the loop can be reordered.

A scalar temporary written and read in every iteration of a loop orders all
iterations of that loop (each one overwrites what the previous one left),
so no interchange that moves the loop is legal, even when no value ever
passes between its iterations. PolyBench's symm::

    for i in 0..M, j in 0..N {               for i in 0..M, j in 0..N {
      temp2 = 0.0                              temp2[j] = 0.0
      for k in 0..i {                          for k in 0..i {
        C[k, j] += alpha * B[i, j] * A[i, k]     C[k, j] += alpha * B[i, j] * A[i, k]
        temp2 += B[k, j] * A[i, k]                temp2[j] += B[k, j] * A[i, k]
      }                                        }
      C[i, j] = ... + alpha * temp2            C[i, j] = ... + alpha * temp2[j]
    }                                        }

After the expansion the order ``i, k, j`` (``j`` innermost: every reference
unit stride) is legal; before it, ``temp2`` forbade it.

The rule, checked exactly (ISL's value-based dataflow of the original
program): a ``local`` scalar ``s`` is expanded along loop ``x`` when

- every statement that reads or writes ``s`` lies inside the same loop ``x``
  (one loop object, not two loops of one name), which starts at 0, steps by
  1 and ends at an expression of the parameters only (the array's extent);
- every read of ``s`` has a writer in the program (no read of its undefined
  initial value), and every writer -> reader pair has the same value of ``x``.

Then each read still reads the value of the same write: under the original
schedule the writes of ``s[x]`` are the original writes of ``s`` at that
``x``, and the original writer (the last write of ``s`` before the read, at
the read's ``x``) is also the last of those. So the expanded kernel computes
exactly what the original computes, bit for bit, and every later pass
(legality, counts, code) sees an ordinary array. Of the loops that qualify,
the innermost is used: one dimension, the least storage that frees a loop
(``docs/design.md``, "Scalar expansion").
"""
from __future__ import annotations

import dataclasses
from typing import Any, Iterable, Mapping as MappingT

from polymap import ir
from polymap.islcheck import isl
from polymap.passes.dependences.dependences import Dependence, value_based
from polymap.poly import KernelModel, StatementModel, build_model


def expansions(model: KernelModel) -> dict[str, str]:
    """Per expandable ``local`` scalar of ``model``'s kernel, the loop it is expanded along."""
    kernel = model.kernel
    params = set(kernel.param_names)
    out: dict[str, str] = {}
    scalars = [d.name for d in kernel.decls if d.role == "local" and d.is_scalar]
    if not scalars:
        return out
    deps = [d for d in value_based(model) if d.kind == "RAW" and d.tensor in scalars]
    for s in scalars:
        users = [sm for sm in model.statements if any(a.tensor == s for a in sm.accesses)]
        if not users:
            continue
        common = _common_loops([sm.context.loops for sm in users])
        flows = [d for d in deps if d.tensor == s]
        if not _every_read_has_a_writer(users, s, flows):
            continue
        by_name = {sm.name: sm for sm in model.statements}
        for loop in reversed(common):
            if not _rectangular(loop, params):
                continue
            if all(_same_iteration(d, by_name, loop.var) for d in flows):
                out[s] = loop.var
                break
    return out


def expand_scalars(kernel: ir.Kernel, along: MappingT[str, str]) -> ir.Kernel:
    """``kernel`` with each scalar of ``along`` (from :func:`expansions`) an array indexed by its loop."""
    if not along:
        return kernel
    extents = {}
    for ctx in kernel.statements():  # the loop around the scalar's own statements (loops may share a name)
        used = {r.tensor for r in ir.subexpressions(ctx.stmt.value) if isinstance(r, ir.Ref)} | {ctx.stmt.target.tensor}
        for lp in ctx.loops:
            for name in used & along.keys():
                if lp.var == along[name]:
                    extents[name] = lp.upper[0]
    decls = tuple(dataclasses.replace(d, shape=(extents[d.name],)) if d.name in along and d.is_scalar else d
                  for d in kernel.decls)
    body = tuple(_node(n, along) for n in kernel.body)
    return dataclasses.replace(kernel, decls=decls, body=body)


def kernel_for(kernel: ir.Kernel, mappings: Iterable[Any]) -> ir.Kernel:
    """The kernel ``mappings`` map: ``kernel`` with the scalars their ``expand`` entries name expanded
    (``kernel`` itself when none does). Every command that takes a mapping maps this kernel, so that
    a mapping compile chose on the expanded kernel (``NAME.json`` records ``expand``) means the same
    to ``cost``, ``check``, ``transform`` and ``compile --mapping``."""
    return expand_scalars(kernel, {s: x for mp in mappings for s, x in mp.expand})


def kernel_expansions(kernel: ir.Kernel) -> tuple[tuple[str, str], ...]:
    """``(scalar, loop)`` per expandable scalar of ``kernel`` as written (:func:`expansions`; no model is
    built for a kernel without local scalars)."""
    if not any(d.role == "local" and d.is_scalar for d in kernel.decls):
        return ()
    return tuple(sorted(expansions(build_model(kernel)).items()))


def expanded(kernel: ir.Kernel) -> tuple[ir.Kernel, KernelModel, tuple[tuple[str, str], ...]]:
    """``kernel`` with its expandable scalars expanded (:func:`kernel_expansions`), its model, and
    ``(scalar, loop)`` per expansion (empty, and ``kernel`` itself, when there is none). compile maps
    this kernel with its loops also renamed apart (``choice.kernel_to_map``)."""
    done = kernel_expansions(kernel)
    new = expand_scalars(kernel, dict(done))
    return new, build_model(new), done


def _common_loops(chains: list[tuple[ir.Loop, ...]]) -> tuple[ir.Loop, ...]:
    """The loops (the same objects) enclosing every chain, outermost first."""
    first = chains[0]
    n = 0
    while n < len(first) and all(len(c) > n and c[n] is first[n] for c in chains):
        n += 1
    return first[:n]


def _rectangular(loop: ir.Loop, params: set[str]) -> bool:
    """Starts at 0, steps by 1, ends at one expression of parameters and literals."""
    if loop.step != 1 or len(loop.lower) != 1 or len(loop.upper) != 1:
        return False
    lo = loop.lower[0]
    if not (isinstance(lo, ir.Const) and lo.value == 0):
        return False
    names = {x.name for x in ir.subexpressions(loop.upper[0]) if isinstance(x, ir.Var)}
    return names <= params and not any(isinstance(x, ir.Ref) for x in ir.subexpressions(loop.upper[0]))


def _every_read_has_a_writer(users: list[StatementModel], s: str, flows: list[Dependence]) -> bool:
    """No instance of a read of ``s`` reads the scalar's initial (undefined) value."""
    for sm in users:
        for a in sm.accesses:
            if a.tensor != s or a.kind != "read":
                continue
            fed = isl.Set.empty(sm.domain.get_space())
            for d in flows:
                if d.sink_tag == a.tag:
                    fed = fed.union(d.relation.range())
            if not sm.domain.is_subset(fed):
                return False
    return True


def _same_iteration(dep: Dependence, by_name: dict[str, StatementModel], var: str) -> bool:
    """Does every writer -> reader pair of ``dep`` have the same value of loop ``var``?"""
    src, snk = by_name[dep.source], by_name[dep.sink]
    rel = dep.relation
    same = isl.Map.universe(rel.get_space()).equate(isl.dim_type.in_, src.loops.index(var),
                                                    isl.dim_type.out, snk.loops.index(var))
    return rel.is_subset(same)


def _node(node: ir.Node, chosen: MappingT[str, str]) -> ir.Node:
    if isinstance(node, ir.Assign):
        return dataclasses.replace(node, target=_ref(node.target, chosen), value=_expr(node.value, chosen))
    if isinstance(node, ir.Loop):
        return dataclasses.replace(node, body=tuple(_node(n, chosen) for n in node.body))
    return dataclasses.replace(node, cond=_expr(node.cond, chosen),
                               then=tuple(_node(n, chosen) for n in node.then),
                               orelse=tuple(_node(n, chosen) for n in node.orelse))


def _ref(r: ir.Ref, chosen: MappingT[str, str]) -> ir.Ref:
    if r.tensor in chosen and not r.indices:
        return dataclasses.replace(r, indices=(ir.Var(chosen[r.tensor], r.loc),))
    return r


def _expr(e: ir.Expr, chosen: MappingT[str, str]) -> ir.Expr:
    """``e`` with every expanded scalar subscripted (a rebuild of the frozen expression tree)."""
    if isinstance(e, ir.Ref):
        return _ref(dataclasses.replace(e, indices=tuple(_expr(x, chosen) for x in e.indices)), chosen)
    if not dataclasses.is_dataclass(e):
        return e
    changes = {}
    for f in dataclasses.fields(e):
        v = getattr(e, f.name)
        if isinstance(v, tuple):
            changes[f.name] = tuple(_expr(x, chosen) if _is_expr(x) else x for x in v)
        elif _is_expr(v):
            changes[f.name] = _expr(v, chosen)
    return dataclasses.replace(e, **changes) if changes else e


def _is_expr(v: object) -> bool:
    return dataclasses.is_dataclass(v) and not isinstance(v, (ir.Loc, type))
