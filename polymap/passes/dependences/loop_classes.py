"""Distance vectors, carrying loops and loop classes (parallel, reduction).

Two instances that share the loops ``L0 .. Lc-1`` (the same loop objects,
not merely the same names) are ordered by the first common loop on which
they differ: that loop *carries* their dependence. When they agree on every
common loop the dependence is loop-independent (textual order decides).

A loop is **parallel** when it carries no dependence; it is a **reduction**
loop when it carries some and every one of them links instances of one
reduction statement (``+=``, ``max=`` ...) through its own target, i.e.
updates of the same element. Loop classes use memory-based dependences: a
parallel loop must have no anti or output conflicts either.

Sketch for gemm::

    acc -> acc  C  distance (0, 0, 1)  carried by k
    loops: i parallel, j parallel, k reduction
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Iterable

from polymap import ir
from polymap.islcheck import isl
from polymap.poly import KernelModel, StatementModel
from polymap.passes.dependences.dependences import Dependence, memory_based

INDEPENDENT = ""  # name shown for a loop-independent dependence


def common_loops(model: KernelModel, source: str, sink: str) -> tuple[ir.Loop, ...]:
    """The loops enclosing both statements (by identity), outermost first."""
    a = model.statement(source).context.loops
    b = model.statement(sink).context.loops
    out = []
    for x, y in zip(a, b):
        if x is not y:
            break
        out.append(x)
    return tuple(out)


def distance_set(model: KernelModel, dep: Dependence) -> isl.Set:
    """``sink - source`` over the common loops, a set of integer vectors."""
    c = len(common_loops(model, dep.source, dep.sink))
    rel = dep.relation
    n_in, n_out = rel.dim(isl.dim_type.in_), rel.dim(isl.dim_type.out)
    rel = rel.project_out(isl.dim_type.in_, c, n_in - c).project_out(isl.dim_type.out, c, n_out - c)
    rel = rel.reset_tuple_id(isl.dim_type.in_).reset_tuple_id(isl.dim_type.out)
    return rel.deltas()


def _where(delta: isl.Set, text: str) -> isl.Set:
    """``delta`` intersected with a condition on its dimensions ``d0, d1, ...``."""
    n = delta.dim(isl.dim_type.set)
    dims = ", ".join(f"d{k}" for k in range(n))
    cond = isl.Set(f"{{ [{dims}] : {text} }}").align_params(delta.get_space())
    return delta.intersect(cond)


def _component(delta: isl.Set, k: int) -> str:
    """A number when component ``k`` is constant, else a direction: ``+ - 0+ 0- *``."""
    pos = not _where(delta, f"d{k} > 0").is_empty()
    neg = not _where(delta, f"d{k} < 0").is_empty()
    zero = not _where(delta, f"d{k} = 0").is_empty()
    if not pos and not neg:
        return "0"
    lo, hi = delta.dim_min(k), delta.dim_max(k)
    if lo.is_cst() and hi.is_cst() and lo.is_equal(hi):
        vals = {str(aff.get_constant_val()) for _, aff in lo.get_pieces()}
        if len(vals) == 1:
            return vals.pop()
    if pos and not neg:
        return "0+" if zero else "+"
    if neg and not pos:
        return "0-" if zero else "-"
    return "*"


def distance_vector(model: KernelModel, dep: Dependence) -> tuple[str, ...]:
    """The distance (or direction) of ``dep`` per common loop, as strings."""
    delta = distance_set(model, dep)
    return tuple(_component(delta, k) for k in range(delta.dim(isl.dim_type.set)))


def exact_distances(model: KernelModel, dep: Dependence, *, limit: int = 12) -> tuple[tuple[int, ...], ...] | None:
    """Every distance vector of ``dep`` when they are few constants, for any parameter values; else None.

    Seidel's ``A[i][j]`` RAW gives ``((0, 0, 1), (0, 1, -1), (0, 1, 0), ...)``
    where :func:`distance_vector` can only say ``(0+, *, *)``. The set is taken
    over all parameter values (a vector that occurs for some sizes is listed),
    so it is None when it grows with the parameters or holds more than ``limit``.
    """
    delta = distance_set(model, dep)
    flat = delta.project_out(isl.dim_type.param, 0, delta.dim(isl.dim_type.param))
    if flat.is_empty() or not flat.is_bounded():
        return None
    n = flat.dim(isl.dim_type.set)
    if n == 0:
        return ((),)
    points: list[tuple[int, ...]] = []

    def take(p: isl.Point) -> None:
        points.append(tuple(int(p.get_coordinate_val(isl.dim_type.set, k).to_python()) for k in range(n)))

    size = flat.card()
    total = sum(int(qp.get_constant_val().to_python()) for _, qp in size.get_pieces()) if size.get_pieces() else 0
    if total > limit:
        return None
    flat.foreach_point(take)
    return tuple(sorted(points))


def carrier_of(vector: tuple[int, ...], model: KernelModel, dep: Dependence) -> str:
    """The loop carrying one distance vector: its first nonzero component (``""``: loop-independent)."""
    loops = common_loops(model, dep.source, dep.sink)
    return next((loops[k].var for k, v in enumerate(vector) if v != 0), INDEPENDENT)


def carrying_levels(model: KernelModel, dep: Dependence) -> tuple[int, ...]:
    """Indices of the common loops that carry some pair of ``dep``; -1 for loop-independent pairs."""
    delta = distance_set(model, dep)
    n = delta.dim(isl.dim_type.set)
    out = []
    for k in range(n):
        cond = " and ".join([f"d{m} = 0" for m in range(k)] + [f"d{k} != 0"])
        if not _where(delta, cond).is_empty():
            out.append(k)
    zero = " and ".join(f"d{m} = 0" for m in range(n)) or "true"
    if not _where(delta, zero).is_empty():
        out.append(-1)
    return tuple(out)


def carrying_loops(model: KernelModel, dep: Dependence) -> tuple[str, ...]:
    """Names of the loops carrying ``dep`` (``""`` for loop-independent pairs)."""
    loops = common_loops(model, dep.source, dep.sink)
    return tuple(INDEPENDENT if k < 0 else loops[k].var for k in carrying_levels(model, dep))


@dataclass(frozen=True)
class DependenceFacts:
    """One dependence as ``polymap deps`` reports it, with its distances and carrying loops."""

    dependence: Dependence
    distance: tuple[str, ...]
    """The distance (or direction: ``+``, ``0+``, ``*``) per common loop (:func:`distance_vector`)."""
    carried_by: tuple[str, ...]
    """The loops carrying some pair (``""`` for loop-independent pairs)."""
    exact: tuple[tuple[tuple[int, ...], str], ...] | None
    """Every distance vector with the loop carrying it when they are few constants (:func:`exact_distances`)."""


def dependence_facts(model: KernelModel, dep: Dependence) -> DependenceFacts:
    """The distances and carrying loops of ``dep``."""
    vectors = exact_distances(model, dep)
    exact = None if vectors is None else tuple((v, carrier_of(v, model, dep)) for v in vectors)
    return DependenceFacts(dep, distance_vector(model, dep), carrying_loops(model, dep), exact)


@dataclass(frozen=True)
class LoopClass:
    """What one loop name is, over every loop of the kernel with that name."""

    name: str
    parallel: bool
    reduction: bool
    occurrences: int  # how many loops of the kernel have this name
    carried: tuple[Dependence, ...] = ()


def kernel_loops(kernel: ir.Kernel, nests: Iterable[int] | None = None) -> tuple[ir.Loop, ...]:
    """Every loop of the kernel (of its top-level ``nests`` only, when given), pre-order."""
    out: list[ir.Loop] = []

    def walk(nodes: Iterable[ir.Node]) -> None:
        for n in nodes:
            if isinstance(n, ir.Loop):
                out.append(n)
                walk(n.body)
            elif isinstance(n, ir.If):
                walk(n.then)
                walk(n.orelse)

    if nests is None:
        walk(kernel.body)
    else:
        top = kernel.nests()
        walk(top[k] for k in sorted(set(nests)))
    return tuple(out)


def loop_classes(model: KernelModel, deps: Iterable[Dependence] | None = None, *,
                 nests: Iterable[int] | None = None) -> dict[str, LoopClass]:
    """Per loop name, parallel / reduction (memory-based dependences unless ``deps`` given).

    A name stands for every loop of the kernel that has it, or with ``nests`` only for the loops of
    those top-level nests: covariance's ``i`` is a reduction in its first nest (``mean[j] +=
    data[i, j]``) and parallel in its last (``cov[i, j]``), and a mapping of the last nest means
    the last one's ``i``.
    """
    deps = memory_based(model) if deps is None else list(deps)
    carried: dict[int, list[Dependence]] = {}
    for d in deps:
        loops = common_loops(model, d.source, d.sink)
        for k in carrying_levels(model, d):
            if k >= 0:
                carried.setdefault(id(loops[k]), []).append(d)
    out: dict[str, LoopClass] = {}
    for lp in kernel_loops(model.kernel, nests):
        mine = tuple(carried.get(id(lp), ()))
        old = out.get(lp.var)
        all_carried = (old.carried if old else ()) + mine
        out[lp.var] = LoopClass(
            lp.var,
            parallel=not all_carried,
            reduction=bool(all_carried) and all(d.reduction for d in all_carried),
            occurrences=(old.occurrences if old else 0) + 1,
            carried=all_carried,
        )
    return out


# --------------------------------------------------------------------------- skewing


def named_distance_set(model: KernelModel, dep: Dependence, names: tuple[str, ...]) -> isl.Set:
    """``sink - source`` over loop *names* both statements have (a mapping fuses loops by name)."""
    def proj(stmt: str) -> isl.Map:
        s = model.statement(stmt)
        its = ", ".join(s.loops)
        return isl.Map(f"{{ {stmt}[{its}] -> [{', '.join(names)}] }}").align_params(dep.relation.get_space())

    return proj(dep.source).reverse().apply_range(dep.relation).apply_range(proj(dep.sink)).deltas()


def _skew_candidates(k: int, limit: int = 2) -> list[tuple[int, ...]]:
    """Coefficient vectors over ``k`` outer loops, smallest total first."""
    import itertools

    cands = [c for c in itertools.product(range(limit + 1), repeat=k) if any(c)]
    return sorted(cands, key=lambda c: (sum(c), c[::-1]))


def skew_hint(model: KernelModel, statements: Iterable[StatementModel], band: tuple[str, ...],
              deps: Iterable[Dependence] | None = None) -> str | None:
    """A skew that makes ``band`` fully permutable (tileable), when one is needed and small.

    ``for t, i`` with distances ``(1, -1)`` -> ``"skew i -> i + t"``: after it
    every distance component is >= 0, so any order and rectangular tiles of
    the band are legal.
    """
    skews = skew_coefficients(model, statements, band, deps)
    if not skews:
        return None
    parts = []
    for b, coeffs in skews.items():
        terms = [f"{'' if c == 1 else f'{c}*'}{band[m]}" for m, c in enumerate(coeffs) if c]
        parts.append(f"{b} -> {b} + {' + '.join(terms)}")
    return (f"skewing {', '.join(parts)} would make the band ({', '.join(band)}) permutable, "
            f"so that it can be reordered and tiled")


def skew_coefficients(model: KernelModel, statements: Iterable[StatementModel], band: tuple[str, ...],
                      deps: Iterable[Dependence] | None = None) -> dict[str, tuple[int, ...]] | None:
    """``{loop b: coefficients of the loops before it}`` of the skew :func:`skew_hint` words
    (``{"i": (1,)}``: ``i -> i + t``); None when no small skew makes the band permutable."""
    names = {s.name for s in statements}
    deps = memory_based(model, statements) if deps is None else [d for d in deps if d.source in names and d.sink in names]
    per_dep = []
    for d in deps:
        common = tuple(x for x in band if x in model.statement(d.source).loops and x in model.statement(d.sink).loops)
        if common:
            per_dep.append((common, named_distance_set(model, d, common)))
    skews: dict[str, tuple[int, ...]] = {}
    for k, b in enumerate(band):
        relevant = [(c, delta) for c, delta in per_dep if b in c]
        if all(_where(delta, f"d{c.index(b)} < 0").is_empty() for c, delta in relevant):
            continue
        for coeffs in _skew_candidates(k):
            if all(_skew_ok(c, delta, b, band[:k], coeffs) for c, delta in relevant):
                skews[b] = coeffs
                break
        else:
            return None
    return skews or None


def _skew_ok(common: tuple[str, ...], delta: isl.Set, b: str, outer: tuple[str, ...], coeffs: tuple[int, ...]
            ) -> bool:
    expr = [f"d{common.index(b)}"]
    expr += [f"{c}*d{common.index(x)}" for x, c in zip(outer, coeffs) if c and x in common]
    return _where(delta, f"{' + '.join(expr)} < 0").is_empty()
