"""Verify the code ``compile`` writes, in seconds: the parametric sources at reduced sizes.

The C and NumPy code is parametric in the kernel's sizes: the sizes it was
compiled for only decide things *inside* the text (which loops get threads,
the NumPy target's blocks), so running that same text at other sizes checks
the same code. :func:`plan_sizes` picks sizes that exercise every
edge of the chosen tiles: for each parameter, values around every tile size
of the loops it bounds (``t - 1, t, t + 1``: a partial, an exact and a full
plus partial tile; ``2t + 1``: two full tiles and a partial one; ``t/2 + 1``),
and ``1, 2, 3`` (:func:`edge_values`), and a small base (every parameter just
over twice the largest tile under 64, so that every small tile is cut)::

    gemm at M=N=K=1000, tiles i: 256/32/4, j: 512/64/8, k: 128/16/1
      base M=N=K=131; M in {1, 2, 3, 4, 5, 17, 31, 32, 33, 65, ...}, N and K likewise

The parameters bound different loops, so one vector can hold an edge value
of every parameter at once: the values are packed greedily into the fewest
vectors that stay in the kernel's context (``where M >= N``) and within
``max_instances`` statement instances (a value too large for that with the
others at the base gets a vector of its own, the others shrunk). Every edge
value is reached, or listed as unreached in the report. :func:`verify_written`
builds each source once, runs it at every vector against the reference on
random inputs, and reports which sizes were checked; ``full=True`` adds the
sizes compiled for.

A remembered mapping (a cache hit of ``compile --tune``) is verified at
fewer sizes, ``edges="partial"``: the base and, per parameter, 1 and the
least value over each tile that none of its tiles divides, so that every
tile level runs full tiles then a partial one (:func:`partial_edge_values`),
within what the reference runs as one region (:data:`PARTIAL_INSTANCES`;
gemm's hit: 4 vectors instead of 13)::

    gemm at M=400, N=480, K=300, tiles i: 258/6, j: 128/64, k: 352
      {M: 65, N: 65, K: 131}, {M: 259, N: 32, K: 65}, {M: 7, N: 129, K: 65}, {M: 1, N: 1, K: 1}
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Mapping as MappingT, Sequence

import numpy as np

from polymap import ir
from polymap.budget import Budget
from polymap.codegen.build import CallThread, load_kernel
from polymap.codegen.verify import (
    TargetCheck,
    TensorCheck,
    VerifyResult,
    compare,
    needs_well_conditioned,
    reduction_lengths,
)
from polymap.errors import VerificationFailure
from polymap.mapping.model import Mapping
from polymap.poly import KernelModel, count, param_set, to_int
from polymap.reference import execute
from polymap.reference.vector import MAX_INSTANCES as REGION_INSTANCES
from polymap.tensors import allocate, numpy_dtype, random_inputs


@dataclass(frozen=True)
class SizedVerification:
    """Every size vector checked, and its result (all passed, or the first failure raised)."""

    kernel: str
    compiled_for: tuple[tuple[str, int], ...]
    results: tuple[VerifyResult, ...]
    full: bool
    unreached: tuple[tuple[str, int], ...] = ()
    """Edge values no vector could reach (:attr:`SizePlan.unreached`), said in the report."""
    edges: str = "every"
    """The edge set of :func:`plan_sizes` the sizes come from (:data:`EDGE_SETS`)."""

    @property
    def passed(self) -> bool:
        return all(r.passed for r in self.results)

    def largest(self) -> tuple[str, TensorCheck] | None:
        pairs = [p for r in self.results if (p := r.largest()) is not None]
        return max(pairs, key=lambda p: (not p[1].passed, p[1].max_rel), default=None)

    def to_dict(self) -> dict:
        return {"passed": self.passed, "full_size": self.full, "edges": self.edges,
                "compiled_for": dict(self.compiled_for),
                "sizes_checked": [dict(r.params) for r in self.results],
                "edge_values_not_reached": [{"parameter": p, "value": v} for p, v in self.unreached],
                "results": [r.to_dict() for r in self.results]}

    def what(self) -> str:
        n = len(self.results)
        if self.edges == "partial":
            text = f"{n} size vector{'s' if n != 1 else ''} ending every tile level in a partial tile"
            return text + (" and the full sizes" if self.full else " (a remembered mapping, re-checked)")
        text = f"{n} size vector{'s' if n != 1 else ''} exercising every tile edge"
        if self.unreached:
            missed = ", ".join(f"{p}={v}" for p, v in self.unreached)
            text = (f"{n} size vector{'s' if n != 1 else ''} exercising the tile edges but {missed} "
                    f"(outside the kernel's context or over the instance limit)")
        return text + (" and the full sizes" if self.full else " (not the full sizes: --verify-full)")


def loop_params(kernel: ir.Kernel) -> dict[str, set[str]]:
    """For every loop, the parameters its extent depends on (through enclosing loops too)."""
    params = set(kernel.param_names)
    out: dict[str, set[str]] = {}
    for ctx in ir.walk_statements(kernel):
        for loop in ctx.loops:
            names = {e.name for b in loop.lower + loop.upper for e in ir.subexpressions(b) if isinstance(e, ir.Var)}
            deps = (names & params).union(*(out.get(x, set()) for x in names - params))
            out[loop.var] = out.get(loop.var, set()) | deps
    return out


def _tiles(mappings: Sequence[Mapping]) -> dict[str, set[int]]:
    tiles: dict[str, set[int]] = {}
    for m in mappings:
        for lv in m.levels:
            for x, t in zip(m.loops, lv.tile):
                if isinstance(t, int) and t > 1:
                    tiles.setdefault(x, set()).add(t)
    return tiles


def param_tiles(kernel: ir.Kernel, mappings: Sequence[Mapping]) -> dict[str, set[int]]:
    """Per parameter, the tiles (over 1) of every loop it bounds."""
    by_loop = loop_params(kernel)
    per_param: dict[str, set[int]] = {p: set() for p in kernel.param_names}
    for x, ts in _tiles(mappings).items():
        for p in by_loop.get(x, ()):
            per_param[p] |= ts
    return per_param


def edge_values(kernel: ir.Kernel, mappings: Sequence[Mapping], params: MappingT[str, int]) -> dict[str, list[int]]:
    """Per parameter, the values that exercise every edge of the tiles of the loops it bounds (the module
    docstring), within ``1..params[p]``, ascending."""
    out = {}
    for p, ts in param_tiles(kernel, mappings).items():
        values = {1, 2, 3}
        for t in ts:
            values |= {t - 1, t, t + 1, 2 * t + 1, t // 2 + 1}
        out[p] = sorted(v for v in values if 1 <= v <= int(params[p]))
    return out


def base_sizes(kernel: ir.Kernel, mappings: Sequence[Mapping], params: MappingT[str, int]) -> dict[str, int]:
    """Every parameter just over twice the largest tile under 64 of any loop (so every small tile is cut
    with full and partial tiles), at most its compiled-for value."""
    by_loop = loop_params(kernel)
    small = [t for x, ts in _tiles(mappings).items() if by_loop.get(x) for t in ts if t <= 64]
    size = 2 * max(small, default=3) + 3
    return {p: min(int(params[p]), size) for p in kernel.param_names}


#: What :func:`plan_sizes` exercises: ``"every"`` edge of every tile (compile's own choice), or a
#: ``"partial"`` tile after full ones at every level (a remembered mapping re-checked, docs/design.md).
EDGE_SETS = ("every", "partial")


def partial_base(kernel: ir.Kernel, mappings: Sequence[Mapping], params: MappingT[str, int]) -> dict[str, int]:
    """:func:`base_sizes`, each value lowered to the nearest one no tile of its parameter's loops divides
    (every tile under the base then ends in a partial one)."""
    tiles = param_tiles(kernel, mappings)
    return {p: _undivided_below(v, tiles[p]) for p, v in base_sizes(kernel, mappings, params).items()}


def partial_edge_values(kernel: ir.Kernel, mappings: Sequence[Mapping], params: MappingT[str, int]
                        ) -> dict[str, list[int]]:
    """Per parameter, 1 (one iteration of everything) and, for each tile ``t`` of the loops it bounds, the
    least value over ``t`` that none of those tiles divides (a full tile then a partial one, at every level
    at once), within ``1..params[p]``, ascending: the ``"partial"`` set of :func:`plan_sizes`. (The base
    alone would not do for the tiles under it: a vector over the instance limit is shrunk.)"""
    out = {}
    for p, ts in param_tiles(kernel, mappings).items():
        values = {1}
        for t in ts:
            v = t + 1
            while any(v % u == 0 for u in ts):
                v += 1
            values.add(v)
        out[p] = sorted(v for v in values if v <= int(params[p]))
    return out


@dataclass(frozen=True)
class SizePlan:
    """The size vectors to run, and the edge values no vector could reach (outside the kernel's context,
    or over the instance limit even with every other parameter shrunk)."""

    vectors: tuple[dict[str, int], ...]
    unreached: tuple[tuple[str, int], ...] = ()


def plan_sizes(kernel: ir.Kernel, model: KernelModel, mappings: Sequence[Mapping], params: MappingT[str, int], *,
               max_instances: int = 2_000_000, edges: str = "every") -> SizePlan:
    """The fewest size vectors (greedy) in which every parameter takes each of its :func:`edge_values`
    (``edges="partial"``: its :func:`partial_edge_values`, from :func:`partial_base`).

    The base (:func:`base_sizes`) comes first. Edge values are placed largest
    first, each into the existing vector with the fewest instances where its
    parameter is still at the base value and the result stays in the context
    and within ``max_instances``; otherwise it opens a vector of its own from
    the base, the other parameters halved (largest first) until it fits. The
    parameters' edges are independent loops' edges, so one vector checks an
    edge of each parameter at once; every vector keeps the other parameters
    at the base or at an edge value of their own.
    """
    counts = [count(s.domain) for s in model.statements]

    def instances(vec: MappingT[str, int]) -> int:
        return sum(to_int(c, vec) for c in counts)

    def fits(vec: MappingT[str, int]) -> bool:
        return _in_context(model, vec) and instances(vec) <= max_instances

    if edges not in EDGE_SETS:
        raise ValueError(f"edges={edges!r}: expected one of {', '.join(EDGE_SETS)}")
    partial = edges == "partial"
    base = (partial_base if partial else base_sizes)(kernel, mappings, params)
    tiles = param_tiles(kernel, mappings)

    def settle(p: str, v: int) -> int:  # a shrunk value still ends its tiles in partial ones
        return _undivided_below(v, tiles[p]) if partial else v

    if not fits(base):
        base = _shrunk(base, (), fits, settle)
    vectors: list[dict[str, int]] = [] if base is None else [base]
    edged: list[set[str]] = [set(kernel.param_names)] if base is not None else []
    sizes: list[int] = [] if base is None else [instances(base)]
    values = (partial_edge_values if partial else edge_values)(kernel, mappings, params)
    wanted = sorted(((v, p) for p, vs in values.items() for v in vs
                     if base is None or v != base[p]), key=lambda vp: (-vp[0], kernel.param_names.index(vp[1])))
    unreached = []
    for v, p in wanted:
        spots = sorted((n for n in range(len(vectors)) if p not in edged[n]), key=lambda n: (sizes[n], n))
        for n in spots:
            vec = {**vectors[n], p: v}
            if fits(vec):
                vectors[n], sizes[n] = vec, instances(vec)
                edged[n].add(p)
                break
        else:
            start = {**(base or {q: min(3, int(params[q])) for q in kernel.param_names}), p: v}
            vec = start if fits(start) else _shrunk(start, (p,), fits, settle)
            if vec is None:
                unreached.append((p, v))
                continue
            vectors.append(vec)
            edged.append({p})
            sizes.append(instances(vec))
    return SizePlan(tuple(vectors), tuple(unreached))


def _shrunk(vec: MappingT[str, int], fixed: Sequence[str], fits: Callable[[MappingT[str, int]], bool],
            settle: Callable[[str, int], int] = lambda p, v: v) -> dict[str, int] | None:
    """``vec`` with its largest parameter outside ``fixed`` halved (then ``settle``d) until ``fits``; None if
    it never does."""
    out = dict(vec)
    while not fits(out):
        free = [q for q in out if q not in fixed and out[q] > 1]
        if not free:
            return None
        big = max(free, key=lambda q: out[q])
        out[big] = settle(big, max(1, out[big] // 2))
    return out


def _undivided_below(v: int, tiles: set[int]) -> int:
    """The largest value at most ``v`` (at least 1) that no tile divides."""
    while v > 1 and any(v % t == 0 for t in tiles):
        v -= 1
    return v


def verification_sizes(kernel: ir.Kernel, model: KernelModel, mappings: Sequence[Mapping],
                       params: MappingT[str, int], *, max_instances: int = 2_000_000) -> list[dict[str, int]]:
    """The size vectors of :func:`plan_sizes`."""
    return list(plan_sizes(kernel, model, mappings, params, max_instances=max_instances).vectors)


def _in_context(model: KernelModel, vec: MappingT[str, int]) -> bool:
    return not model.context.intersect(param_set(model, vec)).is_empty()


Runner = Callable[[dict, MappingT[str, int]], None]


def runner(kernel: ir.Kernel, target: str, source: str, *, thread: CallThread | None = None) -> Runner:
    """Build ``source`` once; the function runs it in place on C-contiguous tensors (C code on ``thread``
    when given, else on a thread per call)."""
    if target == "c":
        fn = load_kernel(source, kernel)
        if thread is not None:
            return lambda tensors, params: thread.call(fn, tensors, params)
        return lambda tensors, params: fn(tensors, params)
    namespace: dict = {"__name__": f"polymap_generated_{kernel.name}"}
    exec(compile(source, f"<{kernel.name}.py>", "exec"), namespace)
    py = namespace[kernel.name]
    return lambda tensors, params: py(**tensors, **{p: int(params[p]) for p in kernel.param_names})


def check_at(kernel: ir.Kernel, runners: MappingT[str, Runner], params: MappingT[str, int], *,
             seed: int = 0) -> VerifyResult:
    """Every target's source at ``params`` against the reference on random inputs."""
    inputs = random_inputs(kernel, params, seed=seed, well_conditioned=needs_well_conditioned(kernel))
    want = execute(kernel, inputs, params)
    lengths = reduction_lengths(kernel, params)
    checks = []
    for target, run in runners.items():
        store = allocate(kernel, params)
        for d in kernel.decls:
            if d.role in ("in", "inout"):
                store[d.name] = np.array(inputs[d.name], dtype=numpy_dtype(d.dtype), copy=True, order="C")
        tensors = {d.name: store[d.name] for d in kernel.decls if d.role != "local"}
        run(tensors, params)
        checks.append(TargetCheck(target, tuple(
            compare(name, np.asarray(tensors[name]), want[name].astype(numpy_dtype(kernel.decl(name).dtype)),
                    lengths.get(name, 1)) for name in want)))
    return VerifyResult(kernel.name, tuple((p, int(params[p])) for p in kernel.param_names), tuple(checks))


#: The instance limit of a ``"partial"`` plan: what the reference execution runs as one region
#: (:data:`polymap.reference.vector.MAX_INSTANCES`). gemm's hit had two vectors of 1.1 M instances, just
#: over it, which the reference ran row by row (259 regions planned each): 0.3-0.4 s of a 1.2 s hit.
PARTIAL_INSTANCES = REGION_INSTANCES


def verify_written(kernel: ir.Kernel, params: MappingT[str, int], sources: MappingT[str, str], *,
                   model: KernelModel, mappings: Sequence[Mapping], full: bool = False,
                   budget: Budget | None = None, seed: int = 0, edges: str = "every") -> SizedVerification:
    """Run the written ``sources`` (target -> text) at the sizes of :func:`plan_sizes` for ``edges`` (and
    the full sizes with ``full``); raise :class:`VerificationFailure` at the first size where a target
    disagrees."""
    budget = budget if budget is not None else Budget()
    limit = {"max_instances": PARTIAL_INSTANCES} if edges == "partial" else {}
    plan = plan_sizes(kernel, model, mappings, params, edges=edges, **limit)
    vectors = list(plan.vectors)
    if full:
        vectors.append({p: int(params[p]) for p in kernel.param_names})
    results = []
    with CallThread() as thread:  # one OpenMP team for every size, not one per call
        runners = {t: runner(kernel, t, s, thread=thread) for t, s in sources.items()}
        for vec in vectors:
            budget.check(f"the verification of kernel {kernel.name} at {vec}")
            result = check_at(kernel, runners, vec, seed=seed)
            results.append(result)
            if not result.passed:
                target, c = result.largest()
                sizes = ", ".join(f"{p}={v}" for p, v in vec.items())
                raise VerificationFailure(
                    f"kernel {kernel.name}: the {target} code differs from the reference at {sizes} on tensor "
                    f"{c.tensor}: largest difference {c.max_abs:.6g} at {list(c.index)} (relative {c.max_rel:.3g}, "
                    f"tolerance {c.tolerance:.3g})\n" + result.summary(),
                    {"kernel": kernel.name, "verification": SizedVerification(
                        kernel.name, tuple(params.items()), tuple(results), full, plan.unreached,
                        edges).to_dict()})
    return SizedVerification(kernel.name, tuple((p, int(params[p])) for p in kernel.param_names),
                             tuple(results), full, plan.unreached, edges)
