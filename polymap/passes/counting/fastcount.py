"""Fast exact counts: many mappings of one nest at once, equal to the ISL path.

For nests in the class of :mod:`polymap.passes.counting.fastcount_nest` (one
statement, box domain, sum-of-iterator subscripts) the counts of
``mapping.md`` factor over loops. For level ``l`` and tensor ``X``:

- the residencies of one instance of ``l`` walk, in time order, the tile
  coordinates of the levels outside ``l``; going from ``r`` to its successor
  ``r'`` one temporal dimension ``j`` (loop ``y``) steps and every temporal
  dimension after it restarts. The elements that enter are
  ``|D(r')| - |D(r) & D(r')|``, and both terms are products over ``X``'s
  subscripts of sums over per-loop interval states
  (:mod:`polymap.passes.counting.fastcount_forms`), because the set of transitions
  at ``j`` is a product over loops;
- entries = ``|D(first residency)|`` per instance + the sum over ``j``;
  fills = entries if the statement reads ``X`` (else every element is born by
  a plain write), writebacks = entries if it writes ``X`` (every held element
  was written during its stay);
- a parent's reads are its child keeper's fills divided by the spatial
  fan-out of the loops between them that ``X`` does not depend on
  (multicast); siblings that differ in a loop ``X`` depends on take disjoint
  elements;
- the footprint is at the first residency, where every tile is whole.

Where this reasoning needs more than the nest's shape it is checked per
mapping and the mapping is reported *inexact* (callers use the ISL path):
a spatial loop whose parent tiles do not all have the same number of
children (an instance would idle at an edge tile), a multicast loop whose
parent tiles its tile does not divide, and (per mapping structure) a
multicast across a loop in a two-loop subscript (overlapping halos).
"""
from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property
from typing import Mapping as MappingT

import numpy as np

from polymap.mapping.model import Mapping
from polymap.poly import KernelModel, cached
from polymap.passes.frontend.params import param_values
from polymap.passes.counting import fastcount_forms as F
from polymap.passes.counting import fastcount_halo as H
from polymap.passes.counting.counts import Counts, LevelCounts, TensorCounts
from polymap.passes.counting.fastcount_nest import FastNest, NotSupported, TensorShape, analyse_nest
from polymap.machine.arch import Architecture
from typing import Sequence


@dataclass(frozen=True)
class Structure:
    """What a batch of mappings shares: orders, spatial loops and bindings per level."""

    orders: tuple[tuple[int, ...], ...]  # per level, loop indices outer -> inner
    spatial: tuple[frozenset[int], ...]
    keep: tuple[frozenset[str], ...]

    @classmethod
    def of(cls, mapping: Mapping) -> "Structure":
        idx = {x: k for k, x in enumerate(mapping.loops)}
        return cls(tuple(tuple(idx[x] for x in lm.order) for lm in mapping.levels),
                   tuple(frozenset(idx[x] for x in lm.spatial) for lm in mapping.levels),
                   tuple(frozenset(lm.keep) for lm in mapping.levels))

    @property
    def levels(self) -> int:
        return len(self.orders)

    def keepers(self, tensor: str) -> list[int]:
        return [l for l in range(self.levels) if l == 0 or tensor in self.keep[l]]

    def dims(self, before: int) -> list[tuple[int, int, bool]]:
        """``(level, loop, spatial)`` of the time dimensions of levels ``< before``, in time order."""
        return [(k, x, x in self.spatial[k]) for k in range(before) for x in self.orders[k]]


def tiles_of(mappings: Sequence[Mapping], nest: FastNest) -> np.ndarray:
    """``(B, levels, loops)`` tile extents (0 for ``None``, the whole enclosing tile)."""
    return np.array([[[0 if t is None else t for t in lm.tile] for lm in m.levels] for m in mappings],
                    dtype=np.int64)


@dataclass
class BatchCounts:
    """Counts of a batch: ``counts[l][X][name]`` arrays of shape ``(B,)``; ``exact`` marks valid entries."""

    instances: int
    counts: list[dict[str, dict[str, np.ndarray]]]
    footprint: list[np.ndarray | None]
    footprint_bytes: list[np.ndarray | None]
    exact: np.ndarray

    def as_counts(self, b: int, nest: FastNest, names: tuple[str, ...], mapping: Mapping | None = None) -> Counts:
        """Entry ``b`` as the :class:`Counts` of the ISL path."""
        levels = []
        for l, per in enumerate(self.counts):
            tensors = tuple(TensorCounts(x, _opt(c.get("fills"), b), _opt(c.get("writebacks"), b),
                                         int(c["reads"][b]), int(c["updates"][b])) for x, c in per.items())
            fp = self.footprint[l]
            levels.append(LevelCounts(names[l], l, tensors, _opt(fp, b), _opt(self.footprint_bytes[l], b)))
        return Counts(nest.kernel, nest.params, self.instances, tuple(levels), None, mapping)


def _opt(arr: np.ndarray | None, b: int) -> int | None:
    return None if arr is None else int(arr[b])


class Evaluator:
    """Exact counts of every mapping of ``nest`` with one :class:`Structure`, over batches of tiles."""

    def __init__(self, nest: FastNest, structure: Structure) -> None:
        self.nest, self.s = nest, structure
        self._check_multicast()

    def _check_multicast(self) -> None:
        x = self.nest.init_loop
        if x is not None and any(x in sp for sp in self.s.spatial):
            raise NotSupported(f"the initialisation lacks spatial loop {self.nest.loops[x]}")
        for t in self.nest.tensors:
            for parent in self.s.keepers(t.name)[:-1]:
                self.halo_groups(t, parent)  # NotSupported where a span spreads a halo loop twice

    def halo_groups(self, t: TensorShape, parent: int) -> dict[int, int]:
        """Loops of ``t``'s two-loop subscripts spread over the children ``parent`` multicasts to
        (spatial at a level between it and ``t``'s next inner keeper), each with that level."""
        keepers = self.s.keepers(t.name)
        child = next(c for c in keepers if c > parent)
        out: dict[int, int] = {}
        for k in range(parent, child):
            for x in self.s.spatial[k] & t.strided_loops:
                if x in out:
                    raise NotSupported(f"multicast of {t.name} across {self.nest.loops[x]}, spatial at two levels")
                out[x] = k
        return out

    @cached_property
    def _grouped_spatial(self) -> set[tuple[int, int]]:
        """``(level, loop)`` of every halo loop some multicast groups (its children must be whole)."""
        out = set()
        for t in self.nest.tensors:
            for parent in self.s.keepers(t.name)[:-1]:
                out |= {(k, x) for x, k in self.halo_groups(t, parent).items()}
        return out

    @cached_property
    def _irrelevant_spatial(self) -> set[tuple[int, int]]:
        return {(k, x) for k in range(self.s.levels) for x in self.s.spatial[k]
                if any(x not in t.loops for t in self.nest.tensors)}

    # ----------------------------------------------------------------- chains

    def resolve(self, tiles: np.ndarray) -> np.ndarray:
        """``(B, levels + 1, loops)``: clipped tile extents, the whole loop at 0, 1 below the innermost."""
        b, n, m = tiles.shape
        out = np.empty((b, n + 1, m), dtype=np.int64)
        out[:, 0] = np.array(self.nest.extents, dtype=np.int64)
        for k in range(1, n):
            t = tiles[:, k]
            out[:, k] = np.where(t <= 0, out[:, k - 1], np.minimum(t, out[:, k - 1]))
        out[:, n] = 1
        return out

    def _exact(self, T: np.ndarray, chains: Sequence[Sequence[list[F.State]]]) -> np.ndarray:
        ok = np.ones(T.shape[0], dtype=bool)
        for k in range(self.s.levels):
            for x in self.s.spatial[k]:
                want = F.ceil_div(T[:, k, x], T[:, k + 1, x])
                for cnt, length in chains[x][k]:
                    ok &= (cnt == 0) | (F.ceil_div(length, T[:, k + 1, x]) == want)
                    if (k, x) in self._irrelevant_spatial or (k, x) in self._grouped_spatial:
                        ok &= (cnt == 0) | (length % T[:, k + 1, x] == 0)
        return ok

    def evaluate(self, tiles: np.ndarray) -> BatchCounts:
        """Counts for a ``(B, levels, loops)`` array of tiles (see :func:`tiles_of`)."""
        T = self.resolve(np.asarray(tiles, dtype=np.int64))
        nest, n = self.nest, self.s.levels
        ones = np.ones(T.shape[0], dtype=np.int64)
        chains = loop_chains(nest, T, n)  # chains[x][k]: the level-k intervals of loop x
        entries = [None] + [self._entries(l, T, chains) for l in range(1, n)]
        multicast = self._multicast_entries(T, chains)
        counts, fps, fpb = [], [None], [None]
        for l in range(n):
            per = {}
            for t in nest.tensors:
                if l == 0 or t.name in self.s.keep[l]:
                    per[t.name] = self._tensor_counts(l, t, T, entries, multicast)
            counts.append(per)
        for l in range(1, n):
            fp, fb = level_footprints(nest, T, l, [t for t in nest.tensors if t.name in self.s.keep[l]])
            fps.append(fp)
            fpb.append(fb)
        return BatchCounts(nest.instances, counts, fps, fpb, self._exact(T, chains))

    # ----------------------------------------------------------------- per level

    def _entries(self, l: int, T: np.ndarray, chains: Sequence[Sequence[list[F.State]]]) -> dict[str, np.ndarray]:
        """Elements entering level ``l`` (fills before the write-first rule), per kept tensor."""
        return self._enter(l, T, chains, [t for t in self.nest.tensors if t.name in self.s.keep[l]], {})

    def _multicast_entries(self, T: np.ndarray, chains: Sequence[Sequence[list[F.State]]]) -> dict:
        """``{(parent, X): entries}``: what ``X``'s next inner keeper's children take in at each step,
        counted once for the group ``parent`` multicasts to, where the group spreads a halo loop."""
        out = {}
        for t in self.nest.tensors:
            for parent in self.s.keepers(t.name)[:-1]:
                groups = self.halo_groups(t, parent)
                if groups:
                    child = next(c for c in self.s.keepers(t.name) if c > parent)
                    out[parent, t.name] = self._enter(child, T, chains, [t], groups)
        return out

    def _enter(self, l: int, T: np.ndarray, chains: Sequence[Sequence[list[F.State]]], kept: list[TensorShape],
               groups: dict[int, int]) -> dict:
        """Elements of ``kept`` entering level ``l``, summed over its instances, or over the multicast
        groups when ``groups`` (halo loop -> the level it is spread at) is given."""
        if not kept:
            return {}
        m, x0 = len(self.nest.loops), self.nest.init_loop
        shifts = group_shifts(T, groups)
        first = first_states(self.nest, self.s.spatial, T, chains, l, groups)
        out = {t.name: _tensor_sum(t, first, m, shifts, (x0, self.nest.only(t))) for t in kept}
        # ``(X, "init")``: the elements entering at an initialisation's residencies (the first is one)
        out.update({(t.name, "init"): out[t.name] for t in kept if t.init_reads or t.init_writes})
        dims = self.s.dims(l)
        for j, (kj, y, spatial) in enumerate(dims):
            if spatial:
                continue
            pairs = {x: self._pairs(x, j, dims, kj, y, l, T, chains, groups.get(x)) for x in range(m)}
            for t in kept:
                only = (x0, self.nest.only(t))
                size, both = _tensor_pair_sums(t, pairs, m, shifts, only)
                out[t.name] = out[t.name] + size - both
                if (t.name, "init") in out:
                    size, both = _tensor_pair_sums(t, {**pairs, x0: F.into_init(pairs[x0])}, m, shifts, only)
                    out[t.name, "init"] = out[t.name, "init"] + size - both
        return out

    def _pairs(self, x: int, j: int, dims: Sequence[tuple[int, int, bool]], kj: int, y: int, l: int, T: np.ndarray,
               chains: Sequence[Sequence[list[F.State]]], group: int | None = None) -> list[F.Pair]:
        """Pair states of loop ``x`` for the transitions at time dimension ``j`` (loop ``y``)."""
        order = self.s.orders[kj]
        variant = "step" if x == y else ("before" if order.index(x) < order.index(y) else "after")
        return pair_states(self.nest, self.s.spatial, T, chains, kj, l, x, variant, group)

    def _tensor_counts(self, l: int, t: TensorShape, T: np.ndarray, entries: Sequence[dict[str, np.ndarray] | None],
                       multicast: dict) -> dict[str, np.ndarray]:
        """Counts of ``t`` at level ``l``; ``multicast`` holds the group entries of the spans that
        spread a halo loop (:meth:`_multicast_entries`), keyed ``(parent, X)``."""
        keepers = self.s.keepers(t.name)
        inner = [c for c in keepers if c > l]
        out = {}
        if l > 0:
            out["fills"], out["writebacks"] = _fills_writebacks(t, entries[l])
        if inner:
            c = inner[0]
            fills, writebacks = _fills_writebacks(t, entries[c])
            if (l, t.name) in multicast:
                # one read per element and step for the whole group (the children's images overlap)
                fills, _ = _fills_writebacks(t, multicast[l, t.name])
            elif self.halo_groups(t, l):
                raise ValueError(f"the multicast entries of {t.name} at level {l} are missing")
            fan = 1
            for k in range(l, c):
                for x in self.s.spatial[k]:
                    if x not in t.loops:
                        fan = fan * F.ceil_div(T[:, k, x], T[:, k + 1, x])
            out["reads"] = fills // fan
            out["updates"] = writebacks
        else:
            one = np.ones(T.shape[0], dtype=np.int64)
            out["reads"] = self.nest.read_events(t) * one
            out["updates"] = self.nest.write_events(t) * one
        return out


def _fills_writebacks(t: TensorShape, entries: dict) -> tuple[np.ndarray, np.ndarray]:
    """Fills and writebacks of ``t`` at a level from its entries: an entry is filled when the first
    statement to touch it there reads it (the body or, at its own residencies, the initialisation);
    every stay is written when the statements accessing ``t`` write it (both do, or neither)."""
    e = entries[t.name]
    at_init = entries.get((t.name, "init"), 0 * e)
    fills = (e - at_init) * (t.reads > 0) + at_init * (t.init_reads > 0)
    return fills, e * (t.writes > 0 or t.init_writes > 0)


def level_footprints(nest: FastNest, T: np.ndarray, l: int, kept: Sequence[TensorShape]
                     ) -> tuple[np.ndarray, np.ndarray]:
    """``(elements, bytes)`` held at once by one instance of level ``l``: at its first residency, where
    every tile is whole (:func:`tile_footprints` of level ``l``'s tiles)."""
    return tile_footprints(nest, {x: T[:, l, x] for x in range(len(nest.loops))}, kept)


def tile_footprints(nest: FastNest, lengths: MappingT[int, np.ndarray], kept: Sequence[TensorShape]
                    ) -> tuple[np.ndarray, np.ndarray]:
    """``(elements, bytes)`` of the tensors ``kept`` over one tile with the given per-loop ``lengths``:
    a residency's; with an initialisation, the larger of a body residency's and the
    initialisation's (each holds only the tensors its statement accesses, :meth:`FastNest.only`),
    elements and bytes each maximised on their own as the ISL path does. The one rule the counts
    and the search's fit filter use."""
    shape = np.shape(next(iter(lengths.values()))) if lengths else ()
    zero = np.zeros(shape, dtype=np.int64)
    sizes = [(t, _product(F.image_size(sub, lengths) for sub in t.subscripts) + zero) for t in kept]
    body = [(t, sz) for t, sz in sizes if nest.only(t) != "init"]
    elems, nbytes = sum((sz for _, sz in body), zero), sum((sz * t.dtype_bytes for t, sz in body), zero)
    if nest.init_loop is None:
        return elems, nbytes
    # the initialisation's residency: the tensors it accesses (none has its loop in a subscript)
    init = [(t, sz) for t, sz in sizes if t.init_reads or t.init_writes]
    return (np.maximum(elems, sum((sz for _, sz in init), zero)),
            np.maximum(nbytes, sum((sz * t.dtype_bytes for t, sz in init), zero)))


def loop_chains(nest: FastNest, T: np.ndarray, n: int) -> list[list[list]]:
    """``chains[x][k]``: the level-``k`` intervals of loop ``x`` as states; the loop the
    initialisation lacks gets its residency (length 0) as the first child of the whole loop."""
    ones = np.ones(T.shape[0], dtype=np.int64)
    chains = []
    for x in range(len(nest.loops)):
        states = [(ones, T[:, 0, x].copy())]
        per = [states]
        for k in range(1, n):
            states = F.split_all(states, T[:, k, x])
            if k == 1 and x == nest.init_loop:
                states = [(ones, 0 * ones)] + states
            per.append(states)
        chains.append(per)
    return chains


def group_shifts(T: np.ndarray, groups: dict[int, int]) -> dict[int, H.Shift]:
    """Per halo loop spread over a multicast group at level ``k``: ``(children, their length)``."""
    return {x: (T[:, k, x] // T[:, k + 1, x], T[:, k + 1, x]) for x, k in groups.items()}


def group_chain(chain: list, T: np.ndarray, x: int, k: int) -> list:
    """``chain`` (the level intervals of loop ``x``) below level ``k`` followed in child 0 of each
    level-``k`` interval only: the representative of the multicast group (its siblings are shifts)."""
    out = list(chain[:k + 1])
    states = F.split_first(chain[k], T[:, k + 1, x])
    for j in range(k + 1, len(chain)):
        if j > k + 1:
            states = F.split_all(states, T[:, j, x])
        out.append(states)
    return out


def first_states(nest: FastNest, spatial: tuple[frozenset[int], ...], T: np.ndarray, chains: list, l: int,
                 groups: dict[int, int] | None = None) -> dict:
    """Per loop, the states of the first residency of level ``l`` (every instance's; with an
    initialisation, its residency comes first); a loop of ``groups`` is followed in the
    representative child of its multicast group at its level."""
    first = {}
    groups = groups or {}
    for x in range(len(nest.loops)):
        states = chains[x][0]
        for k in range(l):
            split = F.split_all if x in spatial[k] and groups.get(x) != k else F.split_first
            states = split(states, T[:, k + 1, x])
            if k == 0 and x == nest.init_loop:
                states = [(np.ones(T.shape[0], dtype=np.int64), np.zeros(T.shape[0], dtype=np.int64))]
        first[x] = states
    return first


def pair_states(nest: FastNest, spatial: tuple[frozenset[int], ...], T: np.ndarray, chains: list, k: int, l: int,
                x: int, variant: str, group: int | None = None) -> list:
    """Pair states of loop ``x`` at the steps of a time dimension of level ``k`` seen from level ``l``:
    ``x`` is the stepping loop (``"step"``), stands before it in level ``k``'s order (keeps its
    interval) or after it (restarts). With ``group``, ``x`` is spatial there and followed in the
    representative child of each multicast group (:func:`group_chain`)."""
    init = x == nest.init_loop and k == 0
    chain = chains[x] if group is None else group_chain(chains[x], T, x, group)
    if variant == "step":
        pairs, start = F.pair_step(chain[k], T[:, k + 1, x]), k + 1
        if init:
            pairs = pairs + [F.init_pair(T[:, 0, x], T[:, 1, x])]
    else:
        start = k + (0 if variant == "after" else 1)
        pairs = F.as_pairs(chain[start])
    for j in range(start, l):
        if init and j == 0:
            pairs = F.restart_at_init(pairs, T[:, 1, x])
            continue
        if j == group:
            pairs = F.pair_first(pairs, T[:, j + 1, x])
            continue
        step = F.pair_spatial if x in spatial[j] else F.pair_temporal
        pairs = step(pairs, T[:, j + 1, x])
    return pairs


def _product(values: Sequence[np.ndarray]) -> np.ndarray | int:
    out = 1
    for v in values:
        out = out * v
    return out


def _spread(sub: tuple, shifts: dict | None) -> bool:
    return bool(shifts) and any(x in shifts for x, _ in sub)


def _tensor_sum(t: TensorShape, states: dict, m: int, shifts: dict | None = None,
                only: tuple[int | None, str | None] = (None, None)) -> np.ndarray | int:
    """``sum |D_X(r)|`` over the joint states (a product over subscripts and unused loops); a
    subscript with a loop of ``shifts`` counts the union over its multicast group. ``only`` =
    ``(initialisation's loop, FastNest.only(t))``: that loop counts the residencies holding ``t``."""
    out = _product(H.union_state_sum(sub, states, shifts) if _spread(sub, shifts) else F.group_state_sum(sub, states)
                   for sub in t.subscripts)
    return out * _product(F.total_holding(states[x], only[1] if x == only[0] else None)
                          for x in range(m) if x not in t.loops)


def _tensor_pair_sums(t: TensorShape, pairs: dict, m: int, shifts: dict | None = None,
                      only: tuple[int | None, str | None] = (None, None)) -> tuple[np.ndarray | int, np.ndarray | int]:
    sums = [H.union_pair_sums(sub, pairs, shifts) if _spread(sub, shifts) else F.group_pair_sums(sub, pairs)
            for sub in t.subscripts]
    rest = [F.pair_totals_holding(pairs[x], only[1] if x == only[0] else None) for x in range(m) if x not in t.loops]
    return (_product(s for s, _ in sums) * _product(s for s, _ in rest),
            _product(b for _, b in sums) * _product(b for _, b in rest))


# --------------------------------------------------------------------------- entry points

def evaluator_for(model: KernelModel, mapping: Mapping, params: MappingT[str, int]) -> Evaluator:
    """The evaluator of ``mapping``'s nest and structure, kept in ``model.cache``;
    :class:`NotSupported` if none."""
    structure = Structure.of(mapping)

    def build() -> Evaluator | NotSupported:
        try:
            return Evaluator(analyse_nest(model, mapping.nest, params), structure)
        except NotSupported as exc:
            return exc

    key = ("fastcount evaluator", mapping.nest, tuple(sorted(dict(params).items())), structure)
    found = cached(model, key, build)
    if isinstance(found, NotSupported):
        raise found
    return found


def _evaluator(model: KernelModel, mapping: Mapping, params: MappingT[str, int]) -> Evaluator | None:
    """The evaluator of ``mapping`` (kept in ``model.cache``), or None outside the fast path's class."""
    if mapping.schedule or len(mapping.mapped_nests) > 1:
        return None  # a statement schedule or fused nests: not one nest's loops
    try:
        ev = evaluator_for(model, mapping, params)
    except NotSupported:
        return None
    if tuple(mapping.loops) != ev.nest.loops:
        return None  # the tiles are read by the nest's loop positions
    return ev


def in_class(model: KernelModel, mapping: Mapping, params: MappingT[str, int] | None = None) -> bool:
    """Does the fast path evaluate ``mapping`` (its counts exact or not)? Without evaluating it: an evaluation
    is milliseconds to a tenth of a second (conv2d's seven loops), the class test a look-up once made."""
    return _evaluator(model, mapping, param_values(model.kernel) if params is None else params) is not None


def _evaluated(model: KernelModel, mapping: Mapping, params: MappingT[str, int] | None
               ) -> tuple[Evaluator, BatchCounts] | None:
    """The evaluator of ``mapping`` and its batch of one, or None outside the fast path's class."""
    ev = _evaluator(model, mapping, param_values(model.kernel) if params is None else params)
    return None if ev is None else (ev, ev.evaluate(tiles_of([mapping], ev.nest)))


def fast_path(model: KernelModel, mapping: Mapping, arch: Architecture | None, *,
              params: MappingT[str, int] | None = None
              ) -> tuple[Counts | None, tuple[tuple[int, int] | None, ...] | None]:
    """One evaluation of ``mapping`` by the fast path: (its counts, None) where they are exact, (None,
    every level's ``(elements, bytes)`` footprint, None at the backing store) where only the footprints
    are, (None, None) outside the class.

    The footprints are exact also where the other counts are not. What makes a batch inexact is which
    instances of a level work at an edge (a spatial loop's parent tiles with fewer children, multicast
    groups cut by an edge tile), not what one instance holds at its fullest, its first residency, where
    every tile is whole (:func:`level_footprints`). The ISL path's footprints (barvinok's count of every
    residency, 1.1 s of gemm's 1.5 s for a five-level tiling at 400 x 480 x 300) are replaced by these
    there (:func:`polymap.passes.counting.counting.count_mapping`); ``tests/test_count_paths.py`` checks
    them equal to the ISL path's."""
    found = _evaluated(model, mapping, params)
    if found is None:
        return None, None
    ev, batch = found
    if batch.exact[0]:
        names = tuple(arch.levels[l].name if arch is not None else lm.level for l, lm in enumerate(mapping.levels))
        return batch.as_counts(0, ev.nest, names, mapping), None
    return None, _footprints(batch)


def fast_counts(model: KernelModel, mapping: Mapping, arch: Architecture, *, params: dict | None = None
               ) -> Counts | None:
    """The counts of :func:`polymap.passes.counting.counting.count_mapping`, or None outside the fast path's
    class or where they are inexact (:func:`fast_path`)."""
    return fast_path(model, mapping, arch, params=params)[0]


def fast_footprints(model: KernelModel, mapping: Mapping, *, params: MappingT[str, int] | None = None
                    ) -> tuple[tuple[int, int] | None, ...] | None:
    """Every level's ``(elements, bytes)`` footprint (None at the backing store) by the fast path, or None
    outside its class (:func:`fast_path`'s, exact counts or not)."""
    found = _evaluated(model, mapping, params)
    return None if found is None else _footprints(found[1])


def _footprints(batch: BatchCounts) -> tuple[tuple[int, int] | None, ...]:
    """The first (only) mapping's ``(elements, bytes)`` per level of ``batch``, None at the backing store."""
    return tuple(None if fp is None else (int(fp[0]), int(fb[0]))
                 for fp, fb in zip(batch.footprint, batch.footprint_bytes))
