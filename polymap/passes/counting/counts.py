"""The result type of the exact counts: per level and tensor, fills, writebacks, reads, updates.

Both ways of counting build it: the ISL path
(:func:`polymap.passes.counting.counting.isl_count_mapping`) and the fast
exact path (:mod:`polymap.passes.counting.fastcount`); equal numbers give
equal values (``==``), which is how the tests compare them.
"""
from __future__ import annotations

from dataclasses import dataclass, field

COUNT_NAMES = ("fills", "writebacks", "reads", "updates")


@dataclass(frozen=True)
class TensorCounts:
    """What one level does with one tensor. ``fills``/``writebacks`` are None at the backing store."""

    tensor: str
    fills: int | None
    writebacks: int | None
    reads: int
    updates: int
    formulas: tuple[tuple[str, str], ...] = ()  # ("fills", ISL text) when symbolic

    def formula(self, name: str) -> str | None:
        return dict(self.formulas).get(name)


@dataclass(frozen=True)
class LevelCounts:
    """Counts of one architecture level, summed over its instances."""

    name: str
    index: int
    tensors: tuple[TensorCounts, ...]
    footprint: int | None = None  # elements, max over residencies of one instance (None: backing store)
    footprint_bytes: int | None = None  # the same with each tensor's dtype size

    def tensor(self, name: str) -> TensorCounts:
        return next(t for t in self.tensors if t.tensor == name)

    @property
    def reads(self) -> int:
        return sum(t.reads for t in self.tensors)

    @property
    def updates(self) -> int:
        return sum(t.updates for t in self.tensors)


@dataclass(frozen=True)
class Counts:
    """The exact counts of ``mapping.md`` for one mapping at given parameter values."""

    kernel: str
    params: tuple[tuple[str, int], ...]
    instances: int
    levels: tuple[LevelCounts, ...]
    instances_formula: str | None = None
    mapping: object = field(default=None, compare=False, repr=False)

    def level(self, name: str) -> LevelCounts:
        return next(lv for lv in self.levels if lv.name == name)
