"""Whole networks: every nest of every kernel searched in turn, per-layer results and totals.

Before -> after::

    kernels conv1, conv2_1, ..., fc   ->  NetworkResult(layers=[LayerResult(conv1, nest 0, SearchResult)...],
    (one .loop file, a layer each)        totals: energy, cycles, EDP of the best mappings, evaluated, seconds)

Layers run one after another on the whole machine (the nests of one layer
are independent searches), so the total energy and cycles are sums; the
total EDP is the product of the two totals, not the sum of the layers' EDPs.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Mapping as MappingT, Sequence

from polymap import ir
from polymap.driver import param_values
from polymap.passes.search.executors import Executor
from polymap.passes.search.lower_bound import Bound, level_bounds
from polymap.passes.search.mapsearch import Progress, SearchOptions, SearchResult, search_nest
from polymap.poly import build_model
from polymap.machine.arch import Architecture


@dataclass(frozen=True)
class LayerResult:
    kernel: str
    nest: int
    params: dict
    result: SearchResult
    bounds: tuple[Bound, ...]


@dataclass(frozen=True)
class NetworkResult:
    layers: tuple[LayerResult, ...]

    @property
    def energy_pj(self) -> float:
        return sum(l.result.best.cost.energy_pj for l in self.layers if l.result.best)

    @property
    def cycles(self) -> float:
        return sum(l.result.best.cost.cycles for l in self.layers if l.result.best)

    @property
    def edp(self) -> float:
        return self.energy_pj * self.cycles

    @property
    def evaluated(self) -> int:
        return sum(l.result.evaluated for l in self.layers)

    @property
    def seconds(self) -> float:
        return sum(l.result.seconds for l in self.layers)

    @property
    def unmapped(self) -> tuple[str, ...]:
        return tuple(f"{l.kernel} nest {l.nest}" for l in self.layers if l.result.best is None)


def search_kernels(kernels: Sequence[ir.Kernel], arch: Architecture, defines: MappingT[str, int], *,
                   options: SearchOptions, executor: Executor,
                   progress: Callable[[str, Progress], None] | None = None) -> NetworkResult:
    """Search every nest of every kernel (``defines`` override the defaults of each that has them)."""
    layers = []
    for kernel in kernels:
        params = param_values(kernel, dict(defines))
        model = build_model(kernel)
        for nest in range(len(kernel.nests())):
            name = kernel.name if len(kernel.nests()) == 1 else f"{kernel.name} nest {nest}"
            report = None if progress is None else (lambda p, name=name: progress(name, p))
            result = search_nest(model, nest, arch, params, options=options, executor=executor, progress=report)
            fast = result.context[0] if result.context else None
            bounds = tuple(level_bounds(fast, arch)) if fast is not None else ()
            layers.append(LayerResult(kernel.name, nest, params, result, bounds))
    return NetworkResult(tuple(layers))
