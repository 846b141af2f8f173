"""Verify the code ``compile`` writes, in seconds: the parametric sources at reduced sizes.

The C and NumPy code is parametric in the kernel's sizes: the sizes it was
compiled for only decide things *inside* the text (which loops get threads,
the NumPy target's blocks), so running that same text at other sizes checks
the same code. :func:`verification_sizes` picks sizes that exercise every
edge of the chosen tiles: for each parameter, values around every tile size
of the loops it bounds (``t - 1, t, t + 1``: a partial, an exact and a full
plus partial tile; ``2t + 1``: two full tiles and a partial one; ``t/2 + 1``),
and ``1, 2, 3``, each varied alone from a small base (every parameter just
over twice the largest tile under 64, so that every small tile is cut), and
the base itself::

    gemm at M=N=K=1000, tiles i: 256/32/4, j: 512/64/8, k: 128/16/1
      base M=N=K=131; then M in {1, 2, 3, 3, 4, 5, 17, 31, 32, 33, 65, ...}, N=K=131; ...

A vector outside the kernel's context (``where M >= N``) or with more than
``max_instances`` statement instances is skipped. :func:`verify_written`
builds each source once, runs it at every vector against the reference on
random inputs, and reports which sizes were checked; ``full=True`` adds the
sizes compiled for.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Mapping as MappingT, Sequence

import numpy as np

from polymap import ir
from polymap.budget import Budget
from polymap.codegen.build import load_kernel
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
from polymap.poly import KernelModel, count, fix_params, param_set, to_int
from polymap.reference import execute
from polymap.tensors import allocate, numpy_dtype, random_inputs


@dataclass(frozen=True)
class SizedVerification:
    """Every size vector checked, and its result (all passed, or the first failure raised)."""

    kernel: str
    compiled_for: tuple[tuple[str, int], ...]
    results: tuple[VerifyResult, ...]
    full: bool

    @property
    def passed(self) -> bool:
        return all(r.passed for r in self.results)

    def largest(self) -> tuple[str, TensorCheck] | None:
        pairs = [p for r in self.results if (p := r.largest()) is not None]
        return max(pairs, key=lambda p: (not p[1].passed, p[1].max_rel), default=None)

    def to_dict(self) -> dict:
        return {"passed": self.passed, "full_size": self.full, "compiled_for": dict(self.compiled_for),
                "sizes_checked": [dict(r.params) for r in self.results],
                "results": [r.to_dict() for r in self.results]}

    def what(self) -> str:
        n = len(self.results)
        text = f"{n} size vector{'s' if n != 1 else ''} exercising every tile edge"
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


def verification_sizes(kernel: ir.Kernel, model: KernelModel, mappings: Sequence[Mapping],
                       params: MappingT[str, int], *, max_instances: int = 2_000_000) -> list[dict[str, int]]:
    """The size vectors of the module docstring, in the kernel's context, within ``max_instances``."""
    by_loop = loop_params(kernel)
    per_param: dict[str, set[int]] = {p: set() for p in kernel.param_names}
    for x, ts in _tiles(mappings).items():
        for p in by_loop.get(x, ()):
            per_param[p] |= ts
    small = [t for ts in per_param.values() for t in ts if t <= 64]
    base_size = 2 * max(small, default=3) + 3
    base = {p: min(int(params[p]), base_size) for p in kernel.param_names}
    vectors = [base]
    for p in kernel.param_names:
        values = {1, 2, 3}
        for t in per_param[p]:
            values |= {t - 1, t, t + 1, 2 * t + 1, t // 2 + 1}
        for v in sorted(values):
            if 1 <= v <= int(params[p]) and v != base[p]:
                vectors.append({**base, p: v})
    out, seen = [], set()
    for vec in vectors:
        key = tuple(sorted(vec.items()))
        if key in seen or not _in_context(model, vec) or _instances(model, vec) > max_instances:
            continue
        seen.add(key)
        out.append(vec)
    return out


def _in_context(model: KernelModel, vec: MappingT[str, int]) -> bool:
    return not model.context.intersect(param_set(model, vec)).is_empty()


def _instances(model: KernelModel, vec: MappingT[str, int]) -> int:
    return sum(to_int(count(fix_params(s.domain, model, vec)), vec) for s in model.statements)


Runner = Callable[[dict, MappingT[str, int]], None]


def runner(kernel: ir.Kernel, target: str, source: str) -> Runner:
    """Build ``source`` once; the function runs it in place on C-contiguous tensors."""
    if target == "c":
        fn = load_kernel(source, kernel)
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


def verify_written(kernel: ir.Kernel, params: MappingT[str, int], sources: MappingT[str, str], *,
                   model: KernelModel, mappings: Sequence[Mapping], full: bool = False,
                   budget: Budget | None = None, seed: int = 0) -> SizedVerification:
    """Run the written ``sources`` (target -> text) at :func:`verification_sizes` (and the full sizes
    with ``full``); raise :class:`VerificationFailure` at the first size where a target disagrees."""
    budget = budget if budget is not None else Budget()
    runners = {t: runner(kernel, t, s) for t, s in sources.items()}
    vectors = verification_sizes(kernel, model, mappings, params)
    if full:
        vectors.append({p: int(params[p]) for p in kernel.param_names})
    results = []
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
                    kernel.name, tuple(params.items()), tuple(results), full).to_dict()})
    return SizedVerification(kernel.name, tuple((p, int(params[p])) for p in kernel.param_names),
                             tuple(results), full)
