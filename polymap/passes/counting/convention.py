"""``--convention timeloop``: the counts as Timeloop and ZigZag define them (``mapping.md``).

Two differences from the exact default, both exact for what they define:

* **outputs start at zero**: an element of a tensor the nest writes is,
  on its first stay in an instance of a level, neither filled nor read from
  the parent (``firsts = held - held at some earlier residency``, minus the
  stays born by a plain write, which are not filled anyway); at the innermost
  level keeping it, the first update of each element by each compute
  instance reads nothing (when every write of the tensor is a reduction);
* **spatial reduction**: a level with ``spatial_reduction: true`` receives
  the partial sums of its spatial children combined by an adder tree, one
  update per element and step (the spatial dimensions below it projected
  out, as multicast does for reads).

Before/after for ``O[p] += W[r] * I[p + r]`` (P=8, R=3) on MainMemory over a
Buffer keeping everything (weight-stationary order)::

    exact:     Buffer O fills 8, MainMemory O reads 8, Buffer O reads 24
    timeloop:  Buffer O fills 0, MainMemory O reads 0, Buffer O reads 16
"""
from __future__ import annotations

from polymap.islcheck import isl
from polymap.passes.counting.counting import (
    Counts,
    Quasi,
    TensorCounts,
    _card,
    _Counter,
    _default_params,
    _keepers,
    _multicast,
    _writeback_ends,
    assemble_counts,
)
from polymap.machine.arch import Architecture
from polymap.mapping.model import Mapping
from polymap.passes.counting.residency import Residencies, residencies
from polymap.poly import KernelModel

CONVENTIONS = ("exact", "timeloop")


class TimeloopCounter(_Counter):
    """The exact counter with Timeloop's two conventions applied on top."""

    def __init__(self, model: KernelModel, mapping: Mapping, res: Residencies, params: dict[str, int],
                 arch: Architecture | None) -> None:
        super().__init__(model, mapping, res, params, False)
        self.arch = arch
        written = {a.tensor for s in res.schedule.statements for a in s.accesses if a.kind == "write"}
        self.outputs = written
        self.reductions_only = {x for x in written
                                if all(s.stmt.is_reduction for s in res.schedule.statements
                                       if any(a.tensor == x and a.kind == "write" for a in s.accesses))}

    def _first_fills(self, level: int, tensor: str) -> isl.Map:
        """``r -> e``: the first stay of e in its instance of ``level``, when it would be a fill."""
        lr = self.res.levels[level]
        t = lr.tensor(tensor)
        strictly_later = lr.not_before.subtract(isl.Map.identity(lr.not_before.get_space()))
        earlier = strictly_later.reverse().apply_range(t.held)
        firsts = t.held.subtract(earlier)
        return firsts if t.write_first.is_empty() else firsts.subtract(t.write_first)

    def fills_tl(self, level: int, tensor: str) -> isl.Map:
        return self.fills(level, tensor).subtract(self._first_fills(level, tensor))

    def _parent_reads_tl(self, level: int, child: int, tensor: str, depth: int) -> Quasi:
        rel = self.fills_tl(child, tensor)
        if any(d.spatial and d.level >= level for d in self.res.dims[:depth]):
            rel = _multicast(rel, self.res.dims, level, depth)
        return _card(rel)

    def _first_compute_reads(self, tensor: str) -> Quasi:
        """One per (compute instance, element): the first update of each reads nothing."""
        writes = self.res.events_of(tensor).writes
        spatial = [j for j, d in enumerate(self.res.dims) if d.spatial]
        rel = writes
        for j in reversed(range(len(self.res.dims))):
            if j not in spatial:
                rel = rel.project_out(isl.dim_type.in_, j, 1)
        return _card(rel)

    def _combined_updates(self, level: int, child: int | None, tensor: str) -> Quasi:
        """Updates at a spatial_reduction level: one per element and step for all children."""
        if child is None:
            rel = self.res.events_of(tensor).writes
            depth = len(self.res.dims)
        else:
            rel = _writeback_ends(self.res.levels[child], tensor).unwrap()
            depth = self.res.levels[child].depth
        return _card(_multicast(rel, self.res.dims, level, depth))

    def tensor_counts(self, level: int, tensor: str) -> TensorCounts:
        exact = super().tensor_counts(level, tensor)
        if tensor not in self.outputs:
            return exact
        keepers = _keepers(self.mapping, tensor)
        inner = [c for c in keepers if c > level]
        child = inner[0] if inner else None
        reads, updates, fills = exact.reads, exact.updates, exact.fills
        if child is not None:
            reads = self.number(self._parent_reads_tl(level, child, tensor, self.res.levels[child].depth))
        elif tensor in self.reductions_only:
            reads = exact.reads - self.number(self._first_compute_reads(tensor))
        if level > 0:
            fills = self.number(_card(self.fills_tl(level, tensor)))
        spec = self.arch.levels[level] if self.arch is not None else None
        if spec is not None and spec.spatial_reduction:
            updates = self.number(self._combined_updates(level, child, tensor))
        return TensorCounts(tensor, fills, exact.writebacks, reads, updates)


def count_mapping_timeloop(model: KernelModel, mapping: Mapping, arch: Architecture | None, *,
                           params: dict | None = None) -> Counts:
    """:func:`~polymap.passes.counting.counting.count_mapping` under Timeloop's convention (numbers only)."""
    values = _default_params(model, params)
    res = residencies(model, mapping, params=values)
    return assemble_counts(model, mapping, arch, res, TimeloopCounter(model, mapping, res, values, arch), values)
