"""Check generated code against the reference execution on random inputs.

For each target, the outputs are compared tensor by tensor with
:func:`polymap.reference.execute`. Integers must match exactly; floats
within ``rtol * max|reference|`` where::

    rtol = SAFETY * eps(dtype) * sqrt(reduction length + 1)

the reduction length of a tensor being the number of loop iterations that
update one of its elements (the product of the extents of the writing
statements' loops that do not index it, summed over statements). Inputs are
well-conditioned (symmetric, diagonally dominant square matrices) when the
kernel divides or takes square roots or logarithms.
"""
from __future__ import annotations

from dataclasses import dataclass
from math import prod, sqrt
from typing import Mapping as MappingT, Sequence

import numpy as np

from polymap import ir
from polymap.errors import VerificationFailure
from polymap.poly import KernelModel, build_model
from polymap.tensors import numpy_dtype, random_inputs
from polymap.codegen.loop_emitter import MappingsArg, as_mappings
from polymap.codegen.runner import run_generated
from polymap.mapping.model import Mapping, loop_extents
from polymap.reference import execute

SAFETY = 64


@dataclass(frozen=True)
class TensorCheck:
    """One output tensor of one target."""

    tensor: str
    max_abs: float
    max_rel: float  # max_abs / max|reference| (0 when the reference is all zero and so is the result)
    tolerance: float  # on max_rel
    index: tuple[int, ...]  # where the largest difference is
    passed: bool


@dataclass(frozen=True)
class TargetCheck:
    target: str
    tensors: tuple[TensorCheck, ...]

    @property
    def passed(self) -> bool:
        return all(t.passed for t in self.tensors)


@dataclass(frozen=True)
class VerifyResult:
    kernel: str
    params: tuple[tuple[str, int], ...]
    targets: tuple[TargetCheck, ...]

    @property
    def passed(self) -> bool:
        return all(t.passed for t in self.targets)

    def largest(self) -> tuple[str, TensorCheck] | None:
        """(target, check) with the largest relative difference."""
        pairs = [(t.target, c) for t in self.targets for c in t.tensors]
        return max(pairs, key=lambda p: (not p[1].passed, p[1].max_rel), default=None)

    def to_dict(self) -> dict:
        return {"kernel": self.kernel, "params": dict(self.params), "passed": self.passed,
                "targets": {t.target: {c.tensor: {"max_abs": c.max_abs, "max_rel": c.max_rel,
                                                  "tolerance": c.tolerance, "index": list(c.index),
                                                  "passed": c.passed} for c in t.tensors}
                            for t in self.targets}}

    def summary(self) -> str:
        lines = []
        for t in self.targets:
            for c in t.tensors:
                lines.append(f"  {t.target:6s} {c.tensor:10s} largest difference {c.max_abs:.3g} "
                             f"(relative {c.max_rel:.3g}, tolerance {c.tolerance:.3g}) "
                             f"{'ok' if c.passed else 'MISMATCH at ' + str(list(c.index))}")
        return "\n".join(lines)


def needs_well_conditioned(kernel: ir.Kernel) -> bool:
    """True when some statement divides or takes sqrt/log/pow (random data could blow up)."""
    for ctx in kernel.statements():
        if ctx.stmt.op == "/=":
            return True
        for e in ir.subexpressions(ctx.stmt.value):
            if isinstance(e, ir.BinOp) and e.op in ("/", "%") or isinstance(e, ir.Call) and e.func in ("sqrt", "log", "pow"):
                return True
    return False


def reduction_lengths(kernel: ir.Kernel, params: MappingT[str, int]) -> dict[str, int]:
    """Per written tensor, the iterations that update one element (see the module docstring)."""
    extents: dict[str, int] = {}
    for nest in range(len(kernel.nests())):
        for x, n in loop_extents(kernel, nest, params).items():
            extents[x] = max(extents.get(x, 0), n)
    out: dict[str, int] = {}
    for ctx in kernel.statements():
        used = {e.name for sub in ctx.stmt.target.indices for e in ir.subexpressions(sub) if isinstance(e, ir.Var)}
        free = [extents.get(x, 1) for x in ctx.iterators if x not in used]
        t = ctx.stmt.target.tensor
        out[t] = out.get(t, 0) + max(1, prod(free))
    return out


def compare(tensor: str, got: np.ndarray, want: np.ndarray, length: int) -> TensorCheck:
    """The largest difference of ``got`` from ``want`` and whether it is within tolerance."""
    if got.size == 0:
        return TensorCheck(tensor, 0.0, 0.0, 0.0, (), True)
    g, w = got.astype(np.float64), want.astype(np.float64)
    both_nan = np.isnan(g) & np.isnan(w)
    same_inf = np.isinf(w) & (g == w)
    diff = np.where(both_nan | same_inf, 0.0, np.abs(g - w))
    diff = np.where(np.isnan(diff), np.inf, diff)
    flat = int(np.argmax(diff))
    index = tuple(int(v) for v in np.unravel_index(flat, diff.shape)) if diff.ndim else ()
    max_abs = float(diff.reshape(-1)[flat])
    finite = w[np.isfinite(w)]
    scale = float(np.max(np.abs(finite))) if finite.size else 0.0
    max_rel = max_abs / scale if scale > 0 else (0.0 if max_abs == 0 else float("inf"))
    if np.issubdtype(want.dtype, np.integer):
        tol = 0.0
    else:
        tol = SAFETY * float(np.finfo(want.dtype).eps) * sqrt(length + 1)
    return TensorCheck(tensor, max_abs, max_rel, tol, index, max_rel <= tol)


def verify(kernel: ir.Kernel, params: MappingT[str, int], *, targets: Sequence[str] = ("c",),
           mapping: MappingsArg = None, seed: int = 0, model: KernelModel | None = None,
           raise_on_failure: bool = True,
           target_mappings: MappingT[str, Sequence[Mapping]] | None = None) -> VerifyResult:
    """Run each target on random inputs and compare with the reference.

    ``mapping``: None (original order), one mapping or a sequence of them.
    Raises :class:`~polymap.errors.VerificationFailure` (exit 1) naming the
    largest difference when a target disagrees (unless ``raise_on_failure``
    is false). ``target_mappings`` gives a target its own mappings (the NumPy
    target's choice differs from the C target's).
    """
    model = model if model is not None else build_model(kernel)
    mappings = as_mappings(mapping)
    inputs = random_inputs(kernel, params, seed=seed, well_conditioned=needs_well_conditioned(kernel))
    want = execute(kernel, inputs, params)
    lengths = reduction_lengths(kernel, params)
    checks = []
    for target in targets:
        own = (target_mappings or {}).get(target)
        got = run_generated(kernel, inputs, params, target=target, model=model,
                            mappings=mappings if own is None else as_mappings(tuple(own)))
        checks.append(TargetCheck(target, tuple(
            compare(name, np.asarray(got[name]), want[name].astype(numpy_dtype(kernel.decl(name).dtype)),
                    lengths.get(name, 1))
            for name in want)))
    result = VerifyResult(kernel.name, tuple((p, int(params[p])) for p in kernel.param_names), tuple(checks))
    if raise_on_failure and not result.passed:
        target, c = result.largest()
        raise VerificationFailure(
            f"kernel {kernel.name}: the {target} code differs from the reference on tensor {c.tensor}: "
            f"largest difference {c.max_abs:.6g} at {list(c.index)} (relative {c.max_rel:.3g}, "
            f"tolerance {c.tolerance:.3g})\n{result.summary()}",
            {"kernel": kernel.name, "verification": result.to_dict()})
    return result
