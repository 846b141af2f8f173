"""Does a mapping fit its architecture? The one place that decides, as typed records.

Two rules of ``mapping.md``, each written once:

- **fan-out**: at a level with spatial loops, their combined trip count must
  not exceed the instances of the next inner level (or of the compute units)
  per instance of this level;
- **capacity**: the footprint of a level (the most elements held at once by
  one instance, :func:`polymap.passes.counting.footprint.level_footprint`, or
  the same numbers from the fast path where it applies,
  :func:`polymap.passes.counting.fastcount.fast_footprints`; both routes:
  :func:`level_footprints`) must not exceed its capacity, in elements, or in
  bytes when the capacity has a unit.

Before, five callers rebuilt these checks with three wordings and legality
parsed a level name back out of a message. Now every caller gets
:class:`FitProblem` records and renders them in its own words::

    fit_problems(model, mapping, toy, {"M": 64, ...})
      -> (FitProblem(kind="capacity", level="RF", level_index=2, capacity=64,
                     footprint=99, unit="elements"),)

:func:`exceeds` and :func:`fanout_available` are the rules themselves, over
numbers or NumPy arrays (the search ranks whole batches with them).
"""
from __future__ import annotations

from dataclasses import dataclass, field
from math import prod
from typing import Any, Mapping as MappingT

import numpy as np

from polymap.machine.arch import Architecture, Level
from polymap.mapping.model import Mapping, mapping_loop_extents, trip_counts
from polymap.passes.counting.counts import Counts
from polymap.passes.counting.fastcount import fast_path
from polymap.passes.counting.footprint import enumerable, level_footprint
from polymap.passes.counting.residency import Residencies, residencies
from polymap.poly import KernelModel


@dataclass(frozen=True)
class FitProblem:
    """One way a mapping does not fit: a level's capacity or a level's fan-out."""

    kind: str
    """``"capacity"`` or ``"fanout"``."""
    level: str
    """The level's name (``"RF"``)."""
    level_index: int
    """The level's position, outermost 0."""
    capacity: int
    """What the level offers: elements or bytes (capacity), instances of the inner level per instance (fan-out)."""
    footprint: int
    """What the mapping needs: elements or bytes held at once, or instances its spatial loops use."""
    unit: str
    """``"elements"``, ``"bytes"`` or ``"instances"``."""
    loops: tuple[tuple[str, int], ...] = ()
    """Fan-out: the level's spatial loops with their trip counts."""
    inner: str = ""
    """Fan-out: the level (or ``"compute"``) whose instances the spatial loops use."""

    def describe(self) -> str:
        """A plain sentence (callers may word it their own way)."""
        if self.kind == "fanout":
            walk = " x ".join(f"{x}: {t}" for x, t in self.loops)
            return (f"level {self.level}: spatial loops need {self.footprint} instances of {self.inner} "
                    f"({walk}), but each {self.level} instance has {self.capacity}")
        return (f"level {self.level}: the footprint is {self.footprint} {self.unit}, over its capacity "
                f"of {self.capacity} {self.unit}")

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"kind": self.kind, "level": self.level, "capacity": self.capacity,
                               "footprint": self.footprint, "unit": self.unit}
        if self.kind == "fanout":
            out["loops"] = {x: t for x, t in self.loops}
            out["inner"] = self.inner
        return out


def exceeds(spec: Level, elements: Any, nbytes: Any) -> Any:
    """Does a footprint overflow ``spec``? Elements against an element capacity, bytes against a byte one.

    Works on numbers (a bool) and on NumPy arrays (an array of bools).
    """
    if spec.capacity_elements is not None:
        return elements > spec.capacity_elements
    if spec.capacity_bytes is not None:
        return nbytes > spec.capacity_bytes
    return np.zeros_like(elements, dtype=bool) if isinstance(elements, np.ndarray) else False


def fanout_available(arch: Architecture, level_index: int) -> int:
    """Instances of the next inner level (or compute) that one instance of the level feeds."""
    return arch.inner_instances(level_index) // arch.levels[level_index].instances


def fanout_problems(mapping: Mapping, arch: Architecture, extents: MappingT[str, int]) -> tuple[FitProblem, ...]:
    """Levels whose spatial loops need more instances than the inner level offers."""
    out = []
    for k, lm in enumerate(mapping.levels):
        if not lm.spatial:
            continue
        trips = trip_counts(mapping, k, extents)
        needed = prod(trips[x] for x in lm.spatial)
        available = fanout_available(arch, k)
        if needed > available:
            inner = arch.levels[k + 1].name if k + 1 < len(arch.levels) else "compute"
            out.append(FitProblem("fanout", lm.level, k, available, needed, "instances",
                                  tuple((x, trips[x]) for x in lm.spatial), inner))
    return tuple(out)


#: every level's ``(elements, bytes)`` footprint, outermost first; None at the backing store and at
#: a level with no capacity to check (unbounded), or one not counted
Footprints = tuple[tuple[int, int] | None, ...]


@dataclass(frozen=True)
class FitCheck:
    """What :func:`fit_check` found: the problems (empty: the mapping fits), every level's footprint
    (:func:`bounded_footprints`), the residencies they were walked on (None where the fast path gave
    them) and the fast path's exact counts where it gave those too: what the counts of the same mapping
    at the same sizes reuse (issue 9)."""

    problems: tuple["FitProblem", ...]
    footprints: Footprints
    res: Residencies | None = field(default=None, compare=False, repr=False)
    counts: Counts | None = field(default=None, compare=False, repr=False)
    """The mapping's exact counts where the fast path gave them with the footprints (None otherwise)."""


def bounded_footprints(model: KernelModel, mapping: Mapping, arch: Architecture,
                       params: MappingT[str, int]) -> Footprints:
    """Per level, ``(elements, bytes)`` held at once by one instance at its fullest, for every bounded
    level below the backing store (None for the others): what :func:`capacity_problems` checks.

    The numbers :func:`~polymap.passes.counting.counting.count_mapping` reports, by the same route
    (:func:`_evaluate`); a caller that counts the mapping after checking its fit passes them on
    (:func:`fit_check`) instead of walking them twice (heat-3d's isl candidates: 40% of their
    counting time, issue 9)."""
    return _evaluate(model, mapping, arch, params)[0]


def level_footprints(model: KernelModel, mapping: Mapping, params: MappingT[str, int]) -> Footprints:
    """Every level's footprint at ``params`` below the backing store, bounded or not (no architecture
    at hand: :func:`footprints_and_fast_counts`)."""
    return footprints_and_fast_counts(model, mapping, params)[0]


def footprints_and_fast_counts(model: KernelModel, mapping: Mapping, params: MappingT[str, int],
                               arch: Architecture | None = None) -> tuple[Footprints, Counts | None]:
    """The footprints a fit check needs (:func:`bounded_footprints`; every level's when ``arch`` is
    None) and the mapping's exact counts where the fast path gives them, from one evaluation.

    A remembered mapping re-checked at new sizes (:mod:`polymap.passes.search.remember`): the counts
    are its report when they come free; else the footprints alone decide whether it fits, and only a
    mapping that fits is counted, with them passed on (``count_mapping(..., footprints=)``; syrk's
    triangle: a fifth of a whole ISL count). ``arch`` names the counts' levels (None: the mapping's)."""
    footprints, counts, _ = _evaluate(model, mapping, arch, params)
    return footprints, counts


def _evaluate(model: KernelModel, mapping: Mapping, arch: Architecture | None, params: MappingT[str, int]
              ) -> tuple[Footprints, Counts | None, Residencies | None]:
    """The footprints (only ``arch``'s bounded levels when given), the fast path's exact counts where it
    gives them, and the residencies the ISL path built (None on the fast path): the fast path's closed
    forms where it applies (its footprints exact also where its other counts are not:
    :func:`~polymap.passes.counting.fastcount.fast_path`), else the ISL path's
    (:func:`~polymap.passes.counting.footprint.level_footprint`, the residencies' maximum)."""
    values = dict(params)
    wanted = [k > 0 and (arch is None or arch.levels[k].bounded) for k in range(len(mapping.levels))]
    counts, known = fast_path(model, mapping, arch, params=values)  # the ISL path's numbers, in ms
    if counts is not None:
        known = tuple(None if k == 0 else (lv.footprint, lv.footprint_bytes) for k, lv in enumerate(counts.levels))
    if known is not None:
        return tuple(known[k] if wanted[k] else None for k in range(len(wanted))), counts, None
    res = residencies(model, mapping, params=values)
    by_points = enumerable(model, mapping, values)
    return tuple(level_footprint(model, res.levels[k], values, by_points=by_points) if wanted[k] else None
                 for k in range(len(wanted))), None, res


def capacity_problems(model: KernelModel, mapping: Mapping, arch: Architecture,
                      params: MappingT[str, int]) -> tuple[FitProblem, ...]:
    """Levels whose footprint exceeds their capacity (in elements, or bytes with dtype sizes)."""
    return footprint_problems(bounded_footprints(model, mapping, arch, params), arch)


def footprint_problems(footprints: Footprints, arch: Architecture) -> tuple[FitProblem, ...]:
    """:func:`capacity_problems` from footprints known already (None: a level not checked)."""
    return tuple(p for k, lv in enumerate(arch.levels) if k > 0 and lv.bounded and footprints[k] is not None
                 if (p := _capacity_problem(k, lv, *footprints[k])) is not None)


def capacity_problems_of(counts: Counts, arch: Architecture) -> tuple[FitProblem, ...]:
    """:func:`capacity_problems` from a mapping's exact counts (their footprints are the same numbers):
    a caller that counts the mapping anyway (a remembered choice re-checked at new sizes) checks the
    capacities without counting the footprints twice."""
    return footprint_problems(_counted_footprints(counts, arch), arch)


def _counted_footprints(counts: Counts, arch: Architecture) -> Footprints:
    """The footprints :func:`bounded_footprints` gives, read from a mapping's exact counts."""
    return tuple((counts.levels[k].footprint, counts.levels[k].footprint_bytes) if k > 0 and lv.bounded else None
                 for k, lv in enumerate(arch.levels))


def _capacity_problem(k: int, lv: Level, elems: int, nbytes: int) -> FitProblem | None:
    """Level ``k``'s problem when a footprint of ``elems`` elements, ``nbytes`` bytes overflows it."""
    if not exceeds(lv, elems, nbytes):
        return None
    in_bytes = lv.capacity_elements is None
    return FitProblem("capacity", lv.name, k, lv.capacity_bytes if in_bytes else lv.capacity_elements,
                      nbytes if in_bytes else elems, "bytes" if in_bytes else "elements")


def fit_problems(model: KernelModel, mapping: Mapping, arch: Architecture,
                 params: MappingT[str, int]) -> tuple[FitProblem, ...]:
    """Every fan-out problem, then every capacity problem (empty: the mapping fits)."""
    return fit_check(model, mapping, arch, params).problems


def fit_check_counted(model: KernelModel, mapping: Mapping, arch: Architecture, params: MappingT[str, int],
                      counts: Counts) -> FitCheck:
    """:func:`fit_check` of a mapping whose exact counts at ``params`` are known already (those of a
    mapping with the same residencies: :func:`~polymap.passes.counting.residency.same_residencies`):
    its fan-out from its own loops, its capacities from the counts' footprints (the same numbers,
    :func:`capacity_problems_of`), nothing walked; ``counts`` come back as its counts."""
    values = dict(params)
    extents = mapping_loop_extents(model.kernel, mapping, values, model=model)
    footprints = _counted_footprints(counts, arch)
    return FitCheck(fanout_problems(mapping, arch, extents) + footprint_problems(footprints, arch), footprints, None,
                    counts)


def fit_check(model: KernelModel, mapping: Mapping, arch: Architecture, params: MappingT[str, int]) -> FitCheck:
    """:func:`fit_problems` with the footprints it checked and their residencies, for a caller that
    counts the mapping next (``count_mapping(..., footprints=, res=)``)."""
    values = dict(params)
    extents = mapping_loop_extents(model.kernel, mapping, values, model=model)
    footprints, counts, res = _evaluate(model, mapping, arch, values)
    return FitCheck(fanout_problems(mapping, arch, extents) + footprint_problems(footprints, arch), footprints, res,
                    counts)
