"""Energy, cycles, bottleneck, utilization, intensity and the objectives: the one cost model.

The formulas are those of ``mapping.md`` (after the counts)::

    energy    = sum over levels of (reads + writebacks) * read_energy
                                 + (fills + updates) * write_energy
              + instances * compute energy
    cycles    = max(instances * waste / (active units * ops_per_cycle),
                    max over levels of (reads + updates) / bandwidth)
              + the team's start and barriers (two threads or more: no term hides them)
    intensity = instances / (reads + updates) per level

``active units`` and the compute term's waste are what the generated code
does with the mapping (:mod:`polymap.passes.counting.execution`): on an
accelerator the trip counts of its spatial loops; on a CPU its threads (the
spatial loops, else OpenMP's loop) times the vector lanes of its innermost
loop, capped by the compute instances. The compute term divides the
busiest unit's work, ``instances x waste x latency / active units`` (partial
vectors and uneven thread shares, exact from the tiles; the issue slots lost
to accumulation chains too short to hide the add's latency), by the ops per
cycle, and adds the cycles of the team's start and barriers (the
execution's barriers at this architecture's cost of a start and a barrier,
:func:`~polymap.passes.counting.execution.team_cycles`: a time, which neither
the ops per cycle nor calibration's compute factor scales) and those of the
panels the code copies (``Execution.pack_cycles``, likewise); the team's also go on every
level's term (:func:`level_term`: nothing moves while the team starts); utilization is active units over the compute instances.

Each formula is written once, over numbers or NumPy arrays alike
(:func:`level_energy`, :func:`compute_cycles`, :func:`level_cycles`,
:func:`objective_value`): :func:`evaluate` applies them to one mapping's
exact counts, the search's batch ranking
(:meth:`polymap.passes.search.space.SearchSpace.batch_objective`) to whole
arrays of candidates. The objectives (:class:`Objective`: cycles, energy,
energy-delay product) are what ``cost``, ``search`` and ``compile`` rank by::

    Objective.CYCLES.key(report)  -> (cycles, energy)
    Objective.ENERGY.key(report)  -> (energy, cycles)
    Objective.EDP.key(report)     -> (energy * cycles, cycles)
"""
from __future__ import annotations

import enum
from dataclasses import dataclass
from math import prod
from typing import Mapping as MappingT, Sequence, TypeVar

import numpy as np

from polymap.machine.arch import Architecture, Level
from polymap.mapping.model import Mapping, trip_counts
from polymap.passes.counting.counting import Counts, LevelCounts
from polymap.passes.counting.execution import Execution, execution as _execution_of, team_cycles
from polymap.poly import KernelModel

#: a number or an array of numbers (one per candidate)
Num = TypeVar("Num", int, float, np.ndarray)


class Objective(enum.Enum):
    """What a ranking minimises; ties are broken by the other term (cycles or energy)."""

    CYCLES = "cycles"
    ENERGY = "energy"
    EDP = "edp"

    def key(self, report: "CostReport") -> tuple[float, float]:
        """The sort key of one report (smaller is better)."""
        return rank_key(self, report.energy_pj, report.cycles)

    @classmethod
    def parse(cls, text: str) -> "Objective":
        """``"cycles"`` -> ``Objective.CYCLES``; anything else is a ``ValueError`` naming the choices."""
        for member in cls:
            if member.value == text:
                return member
        raise ValueError(f"unknown objective {text!r} (expected one of {', '.join(m.value for m in cls)})")


def objective_value(objective: Objective, energy_pj: Num, cycles: Num) -> Num:
    """The minimised quantity: cycles, energy (pJ) or their product (pJ x cycles)."""
    if objective is Objective.CYCLES:
        return cycles
    if objective is Objective.ENERGY:
        return energy_pj
    return energy_pj * cycles


def rank_terms(objective: Objective, energy_pj: Num, cycles: Num) -> tuple[Num, Num, Num]:
    """What a ranking compares, in order, over numbers or arrays alike: the objective's value, its
    tie-breaker, then the remaining term: cycles (energy, EDP), energy (cycles, EDP), EDP (cycles, energy)."""
    value = objective_value(objective, energy_pj, cycles)
    if objective is Objective.CYCLES:
        return value, energy_pj, energy_pj * cycles
    if objective is Objective.ENERGY:
        return value, cycles, energy_pj * cycles
    return value, cycles, energy_pj


def rank_key(objective: Objective, energy_pj: float, cycles: float) -> tuple[float, float]:
    """``(objective value, tie-breaker)`` of :func:`rank_terms`: the sort key of one candidate."""
    value, tie, _ = rank_terms(objective, energy_pj, cycles)
    return (float(value), float(tie))


def level_energy(spec: Level, outgoing: Num, incoming: Num) -> Num:
    """pJ of one level: elements read out of it (reads + writebacks) and written into it (fills + updates)."""
    return outgoing * spec.read_energy + incoming * spec.write_energy


def compute_energy(arch: Architecture, instances: Num) -> Num:
    """pJ of the statement instances themselves."""
    return instances * arch.compute.energy


def capped_units(arch: Architecture, active: Num) -> Num:
    """Active compute units: at least 1, at most the architecture's compute instances."""
    if isinstance(active, np.ndarray):
        return np.clip(active, 1, arch.compute.instances)
    return max(1, min(active, arch.compute.instances))


def compute_cycles(arch: Architecture, instances: Num, active_units: Num, waste: Num = 1.0) -> Num:
    """Cycles of the compute units: the busiest unit's share (instances x waste / active units)
    over the ops per cycle."""
    return instances * waste / (capped_units(arch, active_units) * arch.compute.ops_per_cycle)


def level_cycles(spec: Level, crossing: Num) -> Num | None:
    """Cycles to move ``crossing`` elements (reads + updates) over the level's inner boundary; None: unbounded."""
    if spec.bandwidth is None or not spec.bandwidth:
        return None
    return crossing / spec.bandwidth


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
    execution: Execution = Execution()  # threads, lanes and waste behind active_units

    def objective(self, objective: Objective) -> float:
        """The value ``objective`` minimises for this mapping."""
        return float(objective_value(objective, self.energy_pj, self.cycles))


def active_compute_units(mapping: Mapping, arch: Architecture, extents: MappingT[str, int]) -> int:
    """Product of the trip counts of all spatial loops down the hierarchy, capped by compute instances
    (what an accelerator runs; a CPU's code also has threads and lanes: :func:`mapping_execution`)."""
    active = 1
    for k, lm in enumerate(mapping.levels):
        if lm.spatial:
            trips = trip_counts(mapping, k, extents)
            active *= prod(max(trips[x], 1) for x in lm.spatial)
    return capped_units(arch, active)


def mapping_execution(model: KernelModel, mapping: Mapping, arch: Architecture,
                      extents: MappingT[str, int], **options: int) -> Execution:
    """The units that run ``mapping``'s instances and their waste (:mod:`~polymap.passes.counting.execution`;
    ``options``: its keyword-only ones, ``min_work``)."""
    return _execution_of(model, mapping, arch, extents, **options)


def level_flows(reads: Num, writebacks: Num, fills: Num, updates: Num) -> tuple[Num, Num, Num]:
    """What one tensor's counts at a level mean to the model: elements read out of the level (reads +
    writebacks, priced at its read energy), written into it (fills + updates, its write energy), and
    crossing its inner boundary (reads + updates, what its bandwidth limits)."""
    return reads + writebacks, fills + updates, reads + updates


def _traffic(level: LevelCounts) -> int:
    return sum(level_flows(t.reads, t.writebacks or 0, t.fills or 0, t.updates)[2] for t in level.tensors)


def array_cost(arch: Architecture, instances: Num, counts: Sequence[MappingT[str, MappingT[str, Num]]],
               active_units: Num, waste: Num = 1.0, *, team: Num = 0.0) -> tuple[Num, Num]:
    """``(energy pJ, cycles)`` of batches of candidates: :func:`evaluate`'s formulas over arrays
    (``active_units`` and ``waste`` as :func:`mapping_execution` gives them, or
    :func:`~polymap.passes.counting.execution.batch_execution` over arrays; ``team``: the team's
    cycles, which ``waste`` already stretches the compute term by, added to every level's term as
    :func:`level_term` adds them).

    ``counts[level][tensor]`` holds ``"reads"``, ``"updates"`` and (below the backing store)
    ``"fills"`` and ``"writebacks"``, as numbers or arrays of one value per candidate.
    """
    energy = compute_energy(arch, instances)
    cycles = compute_cycles(arch, instances, active_units, waste)
    for spec, per in zip(arch.levels, counts):
        crossing = 0
        for c in per.values():
            out, into, across = level_flows(c["reads"], c.get("writebacks", 0), c.get("fills", 0), c["updates"])
            energy = energy + level_energy(spec, out, into)
            crossing = crossing + across
        term = level_term(spec, crossing, team)
        if term is not None:
            cycles = np.maximum(cycles, term)
    return energy, cycles


def level_term(spec: Level, crossing: Num, team: Num = 0.0) -> Num | None:
    """A level's term of the cycles: moving ``crossing`` elements over its inner boundary
    (:func:`level_cycles`) plus the team's start and barriers (``team``, :func:`team_term`), which no
    traffic hides: while the threads wake and wait for each other nothing moves for the work they
    have not started, so a nest that memory binds on two threads still pays them on top (correlation
    and covariance's mean and deviation nests at PolyBench LARGE, design.md "The team's start and
    barriers"). None: the level is unbounded."""
    term = level_cycles(spec, crossing)
    return None if term is None else term + team


def team_term(arch: Architecture, execution: Execution) -> float:
    """The team's cycles ``execution`` pays on ``arch``: its start and barriers at this architecture's
    costs (:func:`~polymap.passes.counting.execution.team_cycles`; a calibrated file's measured ones),
    none with one thread or where a ranking leaves them out (``Execution.team``)."""
    return (team_cycles(execution.syncs, execution.threads, arch, region=execution.region)
            if execution.team else 0.0)


def compute_term(arch: Architecture, instances: int, execution: Execution) -> float:
    """The compute term of :func:`evaluate`'s cycles: ``instances`` on ``execution``'s units, with its waste,
    plus the team's cycles. It needs no traffic counts, and the cycles are at least this term: a bound
    compile ranks a candidate by before counting it (``choice.compute_bound``)."""
    units = capped_units(arch, execution.units)
    work = compute_cycles(arch, instances, units, execution.waste * execution.latency * execution.passes)
    # the team's start and barriers are cycles, not work: added as they are, whatever this architecture's
    # compute rate (on the one the execution was found for, the same as stretching by execution.sync), at
    # this architecture's cost of a start and a barrier (a calibrated file's measured ones)
    # the panels' copies (execution.pack_cycles) likewise: cycles of the copy loops, not of the work
    return work + team_term(arch, execution) + execution.pack_cycles


def evaluate(counts: Counts, arch: Architecture, *, active_units: int = 1,
             execution: Execution | None = None) -> CostReport:
    """Energy, cycles, bottleneck, utilization and intensity of ``counts`` on ``arch``.

    ``execution`` (:func:`mapping_execution`) gives the active units and the waste; without it,
    ``active_units`` with no waste."""
    if execution is None:
        execution = Execution(threads=max(1, int(active_units)))
    breakdown = []
    for lv, spec in zip(counts.levels, arch.levels):
        flows = [level_flows(t.reads, t.writebacks or 0, t.fills or 0, t.updates) for t in lv.tensors]
        outgoing = sum(f[0] for f in flows)
        incoming = sum(f[1] for f in flows)
        breakdown.append((lv.name, level_energy(spec, outgoing, incoming)))
    breakdown.append(("compute", compute_energy(arch, counts.instances)))
    units = capped_units(arch, execution.units)
    terms = [("compute", compute_term(arch, counts.instances, execution))]
    team = team_term(arch, execution)
    for lv, spec in zip(counts.levels, arch.levels):
        c = level_term(spec, _traffic(lv), team)
        if c is not None:
            terms.append((lv.name, c))
    bottleneck, cycles = max(terms, key=lambda t: t[1])
    intensity = tuple((lv.name, counts.instances / _traffic(lv) if _traffic(lv) else None)
                      for lv in counts.levels)
    return CostReport(counts, sum(e for _, e in breakdown), tuple(breakdown), cycles, tuple(terms),
                      bottleneck, units, units / arch.compute.instances, intensity,
                      cycles / arch.compute.frequency, execution)
