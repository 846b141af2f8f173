"""Energy, cycles, bottleneck, utilization and intensity from exact counts.

The formulas are those of ``mapping.md`` (after the counts)::

    energy    = sum over levels of (reads + writebacks) * read_energy
                                 + (fills + updates) * write_energy
              + instances * compute energy
    cycles    = max(instances / (active units * ops_per_cycle),
                    max over levels of (reads + updates) / bandwidth)
    intensity = instances / (reads + updates) per level

``active units`` is the product of the trip counts of every spatial loop
down the hierarchy, capped by the compute instances; utilization is that
over the compute instances.
"""
from __future__ import annotations

from dataclasses import dataclass
from math import prod
from typing import Mapping as MappingT

from polymap.passes.counting.counting import Counts


@dataclass(frozen=True)
class CostReport:
    """The cost of one mapping: ``counts`` plus what the architecture makes of them."""

    counts: Counts
    energy_pj: float
    energy_breakdown: tuple[tuple[str, float], ...]  # (level name or "compute", pJ)
    cycles: float
    cycle_terms: tuple[tuple[str, float], ...]  # ("compute", c), (level, traffic / bandwidth)...
    bottleneck: str  # "compute" or the name of the level whose bandwidth bounds the cycles
    active_units: int
    utilization: float
    intensity: tuple[tuple[str, float | None], ...]  # None: nothing crosses the boundary
    seconds: float


def active_compute_units(mapping, arch, extents: MappingT[str, int]) -> int:
    """Product of the trip counts of all spatial loops down the hierarchy, capped by compute instances."""
    from polymap.mapping.model import trip_counts

    active = 1
    for k, lm in enumerate(mapping.levels):
        if lm.spatial:
            trips = trip_counts(mapping, k, extents)
            active *= prod(max(trips[x], 1) for x in lm.spatial)
    return max(1, min(active, arch.compute.instances))


def _traffic(level) -> int:
    return level.reads + level.updates


def evaluate(counts: Counts, arch, *, active_units: int = 1) -> CostReport:
    """Energy, cycles, bottleneck, utilization and intensity of ``counts`` on ``arch``."""
    breakdown = []
    for lv, spec in zip(counts.levels, arch.levels):
        reads = sum(t.reads + (t.writebacks or 0) for t in lv.tensors)
        writes = sum(t.updates + (t.fills or 0) for t in lv.tensors)
        breakdown.append((lv.name, reads * spec.read_energy + writes * spec.write_energy))
    breakdown.append(("compute", counts.instances * arch.compute.energy))
    units = max(1, min(active_units, arch.compute.instances))
    terms = [("compute", counts.instances / (units * arch.compute.ops_per_cycle))]
    for lv, spec in zip(counts.levels, arch.levels):
        if spec.bandwidth is not None:
            terms.append((lv.name, _traffic(lv) / spec.bandwidth))
    bottleneck, cycles = max(terms, key=lambda t: t[1])
    intensity = tuple((lv.name, counts.instances / _traffic(lv) if _traffic(lv) else None)
                      for lv in counts.levels)
    return CostReport(counts, sum(e for _, e in breakdown), tuple(breakdown), cycles, tuple(terms),
                      bottleneck, units, units / arch.compute.instances, intensity,
                      cycles / arch.compute.frequency)
