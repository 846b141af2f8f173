"""The ISL-based semantic checks of ``dsl.md``: bounds and uninitialised reads.

Two questions, answered symbolically in the parameters (under the kernel's
context) and reported with one concrete witness each:

* **out of bounds** (an error): can an access leave its tensor's box
  ``0 <= e_d < extent_d``? For ``in A[8]`` and ``for i in 0..8 { ... A[i + 1] }``::

      A[i + 1] reads A[8] when i = 7, but A has extent 8 in dimension 0

* **uninitialised read** (a warning): does an instance read an element of an
  ``out`` or ``local`` tensor that no earlier instance has written? This is
  ISL dataflow: the reads with no source among the writes before them in the
  original schedule.

Witnesses are taken at the parameters' defaults when one exists there,
otherwise at the lexicographically smallest parameter values, and then the
smallest instance; parameter values that are not the defaults are named in
the message (``(with N = 2, M = 1)``).
"""
from __future__ import annotations

from typing import Mapping

from polymap import ir, pretty
from polymap.errors import Diagnostic
from polymap.islcheck import isl
from polymap.poly import Access, KernelModel, StatementModel, aff_text, build_model, isl_name
from polymap.evaluate import eval_int
from polymap.limits import Limits, tractability_problems


def bounds_diagnostics(kernel: ir.Kernel, model: KernelModel | None = None, *,
                       limits: Limits | None = None) -> list[Diagnostic]:
    """Out-of-bounds errors, then uninitialised-read warnings, of one checked kernel.

    The uninitialised reads are ISL's dataflow, exponential in the pieces
    and moduli of a domain: on a kernel past ``limits`` (the analyses would
    refuse it too) they are left out, with a warning that says so, so that
    reading the file (``show``) still answers in seconds.
    """
    limits = limits if limits is not None else Limits()
    model = model if model is not None else build_model(kernel)
    found = out_of_bounds(model)
    past = tractability_problems(kernel, limits=limits, model=model, what="the uninitialised-read checks")
    if past:
        found.append(Diagnostic(f"uninitialised reads not checked: {past[0].message}", past[0].loc,
                                severity="warning"))
        return found
    return found + uninitialised_reads(model)


# --------------------------------------------------------------------------- witnesses


def _defaults(kernel: ir.Kernel) -> dict[str, int]:
    return {p.name: p.default for p in kernel.params if p.default is not None}


def _lexmin_point(s: isl.Set) -> tuple[dict[str, int], list[int]] | None:
    """(parameter values, set coordinates) of the smallest point of ``s``, params first."""
    if s.is_empty():
        return None
    space = s.get_space()
    n = s.dim(isl.dim_type.param)
    names = [space.get_dim_name(isl.dim_type.param, k) for k in range(n)]
    flat = s.move_dims(isl.dim_type.set, 0, isl.dim_type.param, 0, n)
    try:
        point = flat.lexmin().sample_point()
    except isl.Error:  # an unbounded direction: any point will do
        point = flat.sample_point()
    coords = [int(point.get_coordinate_val(isl.dim_type.set, k).to_python())
              for k in range(flat.dim(isl.dim_type.set))]
    return dict(zip(names, coords[:n])), coords[n:]


def witness(s: isl.Set, model: KernelModel) -> tuple[dict[str, int], list[int]] | None:
    """One point of parametric set ``s``: at the defaults if possible, else the smallest.

    Returns ``(parameter values by user name, set coordinates)`` or None when
    ``s`` is empty for every parameter value of the context.
    """
    s = s.intersect_params(model.context)
    defaults = _defaults(model.kernel)
    if defaults:
        conds = " and ".join(f"{isl_name(p)} = {v}" for p, v in defaults.items())
        at_defaults = isl.Set(f"[{', '.join(isl_name(p) for p in defaults)}] -> {{ : {conds} }}")
        found = _lexmin_point(s.intersect_params(at_defaults.align_params(s.get_space())))
        if found is None:
            found = _lexmin_point(s)
    else:
        found = _lexmin_point(s)
    if found is None:
        return None
    by_isl = {isl_name(p): p for p in model.params}
    params, coords = found
    return {by_isl.get(k, k): v for k, v in params.items()}, coords


def _when(stmt: StatementModel, coords: list[int]) -> str:
    if not stmt.loops:
        return ""
    return " when " + ", ".join(f"{v} = {c}" for v, c in zip(stmt.loops, coords))


def _with(model: KernelModel, params: Mapping[str, int]) -> str:
    defaults = _defaults(model.kernel)
    odd = [p for p in model.params if defaults.get(p) != params.get(p)]
    if not odd:
        return ""
    return " (with " + ", ".join(f"{p} = {params[p]}" for p in odd) + ")"


def _element(tensor: str, coords: list[int]) -> str:
    return f"{tensor}[{', '.join(str(c) for c in coords)}]" if coords else tensor


# --------------------------------------------------------------------------- out of bounds


def _outside(model: KernelModel, decl: ir.Decl, dim: int) -> isl.Set:
    """``[params] -> { A[e0, ...] : e_dim < 0 or e_dim >= extent_dim }``."""
    taken = {isl_name(p) for p in model.params}
    prefix = "e"
    while any(f"{prefix}{d}" in taken for d in range(len(decl.shape))):
        prefix += "_"
    names = [f"{prefix}{d}" for d in range(len(decl.shape))]
    x, extent = names[dim], aff_text(decl.shape[dim])
    params = ", ".join(isl_name(p) for p in model.params)
    return isl.Set(f"[{params}] -> {{ {decl.name}[{', '.join(names)}] : {x} < 0 or {x} >= {extent} }}")


def _access_oob(model: KernelModel, stmt: StatementModel, acc: Access) -> Diagnostic | None:
    decl = model.kernel.decl(acc.tensor)
    if decl is None or decl.is_scalar:
        return None
    bad = [acc.relation.intersect_range(_outside(model, decl, d)).wrap().flatten()
           for d in range(len(decl.shape))]
    for d, s in enumerate(bad):
        found = witness(s, model)
        if found is None:
            continue
        params, coords = found
        n = len(stmt.loops)
        extent = eval_int(decl.shape[d], params)
        verb = "reads" if acc.kind == "read" else "writes"
        msg = (f"{pretty.expr(acc.ref)} {verb} {_element(acc.tensor, coords[n:])}"
               f"{_when(stmt, coords[:n])}, but {acc.tensor} has extent {extent} in dimension {d}"
               f"{_with(model, params)}")
        return Diagnostic(msg, acc.ref.loc)
    return None


def out_of_bounds(model: KernelModel) -> list[Diagnostic]:
    """One error per reference that can leave its tensor's bounds, with a witness.

    The target of a compound assignment (``+=``) is both read and written:
    it is reported once, as a write.
    """
    out: list[Diagnostic] = []
    for stmt in model.statements:
        seen: set[int] = set()
        for acc in sorted(stmt.accesses, key=lambda a: a.kind != "write"):
            if id(acc.ref) in seen:
                continue
            seen.add(id(acc.ref))
            diag = _access_oob(model, stmt, acc)
            if diag is not None:
                out.append(diag)
    return sorted(out, key=lambda d: (d.loc.line, d.loc.col) if d.loc else (0, 0))


# --------------------------------------------------------------------------- uninitialised reads


def _no_source(model: KernelModel, tensors: set[str]) -> isl.UnionMap:
    """The (instance -> element) reads of ``tensors`` that no earlier write provides."""
    space = model.context.get_space()
    sinks = isl.UnionMap.empty(space)
    sources = isl.UnionMap.empty(space)
    for stmt in model.statements:
        for acc in stmt.accesses:
            if acc.tensor in tensors:
                rel = isl.UnionMap.from_map(acc.relation)
                if acc.kind == "read":
                    sinks = sinks.union(rel)
                else:
                    sources = sources.union(rel)
    info = isl.UnionAccessInfo.from_sink(sinks).set_must_source(sources)
    flow = info.set_schedule_map(model.schedule).compute_flow()
    return flow.get_may_no_source()


def uninitialised_reads(model: KernelModel) -> list[Diagnostic]:
    """One warning per statement and ``out``/``local`` tensor it may read before any write."""
    tensors = {d.name for d in model.kernel.decls if d.role in ("out", "local")}
    if not tensors:
        return []
    missing = _no_source(model, tensors)
    out: list[Diagnostic] = []
    for stmt in model.statements:
        seen: set[str] = set()
        for acc in stmt.reads:
            if acc.tensor not in tensors or acc.tensor in seen:
                continue
            bad = missing.extract_map(acc.relation.get_space()).intersect(acc.relation)
            found = witness(bad.wrap().flatten(), model)
            if found is None:
                continue
            seen.add(acc.tensor)
            params, coords = found
            n = len(stmt.loops)
            elem = _element(acc.tensor, coords[n:])
            msg = (f"{stmt.name} reads {elem}{_when(stmt, coords[:n])}, but no earlier statement "
                   f"instance writes {elem}{_with(model, params)}")
            out.append(Diagnostic(msg, acc.ref.loc, severity="warning"))
    return out
