"""Which reads the generated code copies into panels, their layout, and where the copies sit.

The decision half of :mod:`polymap.codegen.c.packing` (which prints the copies, the buffers and the
packed subscripts), here so that the cost model (:mod:`polymap.passes.counting.execution`, which may
not import codegen) counts the copies the code makes by the same rules: :func:`plan_packs` says what
is packed and in which layout, :func:`copies_here` and :func:`hoisted` where the copy sits, and
:func:`copy_place` applies those two to the loops the code prints around a statement. The rules
themselves are described in :mod:`polymap.codegen.c.packing`'s docstring.

A panel's whole dimensions (a loop whole at the keeping level, conv2d's ``W[k, c, r, s]`` with
``c, r, s`` whole) count the loop's run-time extent: C text for the code (``packing.whole_extents``),
a number for the model (the loop's extent at the given sizes); :func:`whole_loops` says which loops
have one.
"""
from __future__ import annotations

from dataclasses import dataclass
from math import inf
from typing import Mapping as MappingT, Sequence

from polymap import ir
from polymap.mapping.model import Mapping
from polymap.poly import KernelModel, cached


Count = int | str  # a number of elements; C text where it is the run-time extent of a whole loop


@dataclass(frozen=True)
class PackDim:
    """One dimension of a packed buffer: digit ``((x - origin) % modulus) / divisor`` of loop ``loop``.

    ``count`` and ``stride`` are C text (parenthesised) where a loop is whole at the keeping level (the
    row rule's panels: conv2d's ``W[k, c, r, s]`` with ``c, r, s`` whole, :func:`plan_packs`)."""

    level: int
    loop: str
    count: Count
    divisor: int
    modulus: int | None
    stride: Count


def _times(a: Count, b: Count) -> Count:
    """``a * b``: a number, or parenthesised C text when either is text."""
    if isinstance(a, int) and isinstance(b, int):
        return a * b
    if a == 1 or b == 1:
        return b if a == 1 else a
    return f"({a} * {b})"


@dataclass(frozen=True)
class Pack:
    """Reads ``tensor[loops...]`` of one nest packed at the entry of level ``level``'s tiles."""

    tensor: str
    loops: tuple[str, ...]  # the subscripts, in the tensor's dimension order
    level: int
    tiles: tuple[int | None, ...]  # the level's tile extent along each of ``loops`` (None: whole)
    dims: tuple[PackDim, ...]

    @property
    def size(self) -> Count:
        out: Count = 1
        for d in self.dims:
            out = _times(out, d.count)
        return out

    @property
    def key(self) -> tuple[str, tuple[str, ...]]:
        return (self.tensor, self.loops)

    def unit_last(self, loop: str) -> bool:
        """Is ``loop`` the buffer's last, unit-stride dimension (its lanes contiguous)?"""
        return bool(self.dims) and self.dims[-1].loop == loop and self.dims[-1].divisor == 1


def reads_panel(packs: MappingT[tuple[str, tuple[str, ...]], Pack], ref: ir.Ref, loop: str) -> bool:
    """Is ``ref`` read from one of ``packs`` (:func:`plan_packs`' answer) whose last, unit-stride
    dimension is ``loop``: a register tile in vectors along ``loop`` loads it from consecutive
    elements (syrk's ``A[j, k]`` under the row rule). The one test for regtile's vectors and the cost
    model's lanes (``execution.vectorises(tile=True, packed=...)``): a read the code does not pack
    is loaded strided, and the tile falls back to scalars (syrk at PolyBench MINI, whose ``j`` is
    whole at the level above the registers and has no one extent: no panel, no vectors)."""
    view = _bare(ref)
    pack = None if view is None else packs.get((ref.tensor, view))
    return pack is not None and pack.unit_last(loop)


def _bare(ref: ir.Ref) -> tuple[str, ...] | None:
    names = tuple(s.name for s in ref.indices if isinstance(s, ir.Var))
    if len(names) != len(ref.indices) or len(set(names)) != len(names):
        return None
    return names


def plan_packs(model: KernelModel, mapping: Mapping, whole: MappingT[str, Count]
               ) -> dict[tuple[str, tuple[str, ...]], Pack]:
    """The packed references of ``mapping``'s nest (:mod:`polymap.codegen.c.packing`'s docstring).
    ``whole``: the run-time extent of each loop :func:`whole_loops` gives, as C text (the code) or a
    number (the model), for the row rule's panels that span a loop whole."""
    n = len(mapping.levels)
    if n < 3:
        return {}
    written, refs = cached(model, ("packs", "reads", mapping.nest), lambda: _reads(model, mapping.nest))

    out = {}
    for tensor, views in refs.items():
        if tensor in written or None in views:
            continue
        keeping = [lv for lv in range(1, n - 1) if tensor in mapping.levels[lv].keep]
        if not keeping:
            continue
        for loops in views:
            level = keeping[-1]
            # the levels just above that keep it too, walk no spatial loop and hold a constant box:
            # the copy is made there, and the inner level's tile is a contiguous part of that panel
            above = None  # (the pack at ``level`` once the test below has built it: not built twice)
            while (level - 1 in keeping and not mapping.levels[level - 1].spatial
                   and (above := _pack(mapping, tensor, loops, level - 1)) is not None):
                level -= 1
            if level == n - 2 and _broadcast_rows(mapping, loops):
                continue
            pack = above if above is not None and above.level == level else _pack(mapping, tensor, loops, level)
            if pack is not None:
                out[pack.key] = pack
    # a read strided along the register tile's row loop is packed at the level above the registers,
    # so that the row is contiguous (syrk's A[j, k] under a tile over i, j)
    row = mapping.levels[-1].order[-1] if mapping.levels[-1].order else None
    if row is not None and (mapping.tile(n - 1).get(row) or 1) > 1:
        for tensor, views in refs.items():
            if tensor in written or None in views:
                continue
            for loops in views:
                if row not in loops or loops[-1] == row or (tensor, loops) in out:
                    continue
                pack = _pack(mapping, tensor, loops, n - 2, whole)
                if pack is not None and pack.unit_last(row):
                    out[pack.key] = pack
    return out


def _reads(model: KernelModel, nest: int) -> tuple[set[str], dict[str, set]]:
    """``(tensors written, {tensor: its views})`` of ``nest``: what :func:`plan_packs` may pack, whatever
    the tiles (a view is its distinct bare subscripts, None when not; the views read once dropped)."""
    stmts = model.nest_statements(nest)
    written = {s.stmt.target.tensor for s in stmts}
    refs: dict[str, set] = {}
    once: dict[tuple[str, tuple[str, ...] | None], bool] = {}
    for s in stmts:
        for r in ir.subexpressions(s.stmt.value):
            if isinstance(r, ir.Ref) and r.indices:
                view = _bare(r)
                refs.setdefault(r.tensor, set()).add(view)
                # distinct bare subscripts over every loop of the statement: each element read once
                key = (r.tensor, view)
                once[key] = once.get(key, True) and view is not None and set(view) == set(s.loops)
    # a view read once per element in the whole nest has no reuse a copy could serve: the copy only adds
    # a pass over the tensor (and a buffer to fault in). mvt's A at LARGE: 16 MB panels malloc'd per tile
    return written, {t: {v for v in views if v is None or not once[(t, v)]} for t, views in refs.items()}


def whole_loops(model: KernelModel, nest: int) -> dict[str, ir.Loop]:
    """The loops of ``nest`` whose bounds are one expression each of the sizes only (``for c in 0..C``),
    step 1: those a panel may span whole, a dimension of their run-time extent (``upper - lower``)."""
    out: dict[str, ir.Loop] = {}
    loops = {lp.var for s in model.nest_statements(nest) for lp in s.context.loops}
    for s in model.nest_statements(nest):
        for lp in s.context.loops:
            if len(lp.lower) != 1 or len(lp.upper) != 1 or lp.step != 1:
                continue
            if (ir.variables(lp.lower[0]) | ir.variables(lp.upper[0])) & loops:
                continue  # (a triangle's bound: no one extent)
            out[lp.var] = lp
    return out


def _digits(extent: Count, inner: int) -> Count:
    """How many tiles of ``inner`` a whole loop of run-time extent ``extent`` holds: a number, or C text."""
    if isinstance(extent, int):
        return -(-extent // inner)
    return extent if inner == 1 else f"(({extent} + {inner - 1}) / {inner})"


def _broadcast_rows(mapping: Mapping, loops: tuple[str, ...]) -> bool:
    """Is a view kept only just above the registers read there in place: the register tile broadcasts
    it (it does not move along the tile's row loop) and each of its rows is a contiguous run along a
    loop the tile steps through one at a time (gemm's A[i, k] under a 6 x 64 tile: six streams along
    k, which the hardware prefetches)? A copy there is made per tile of the level and serves only
    its few panels of reuse: the streamed form's A (register_mapping.stream_blocks) measured 15%
    slower packed (session 26)."""
    n = len(mapping.levels)
    rf = mapping.tile(n - 1)
    row = mapping.levels[-1].order[-1] if mapping.levels[-1].order else None
    return (row is not None and (rf.get(row) or 1) > 1 and row not in loops
            and (rf.get(loops[-1]) or 1) == 1)


def _pack(mapping: Mapping, tensor: str, loops: tuple[str, ...], level: int,
          whole: MappingT[str, Count] | None = None) -> Pack | None:
    """The pack of ``tensor[loops]`` at ``level``, or None. A loop whole at ``level`` (a ``None`` tile
    there or at every level above it) makes the box depend on the sizes: refused, unless ``whole``
    gives its run-time extent (C text, counting its digits at run time, or the model's number)."""
    n = len(mapping.levels)
    tiles = [mapping.tile(lv) for lv in range(level, n)]
    if any(tiles[0].get(x) is None and (whole is None or x not in whole) for x in loops):
        return None  # a whole loop: the box would depend on the sizes
    if whole is None and any(t.get(x) is None for t in tiles for x in loops):
        return None
    # each level's tile, a whole one the enclosing level's (inf: the loop's run-time extent)
    eff: list[dict[str, float]] = []
    for t in tiles:
        eff.append({x: (eff[-1][x] if eff else inf) if t.get(x) is None else t[x] for x in loops})
    bound: dict[str, float] = dict(eff[0])
    raw = []
    pending: dict[str, int] = {}  # a tile narrower than the one above: the next digit of its loop wraps
    for lv in range(level, n):
        here = eff[lv - level]
        inner = eff[lv - level + 1] if lv + 1 < n else {x: 1 for x in loops}
        for x in mapping.levels[lv].order:
            if x not in loops:
                continue
            if lv > level and here[x] < bound[x]:
                pending[x] = bound[x] = here[x]
            span = min(bound[x], here[x])
            if span == inf and inner[x] == inf:
                continue  # one tile
            count: Count = -(-int(span) // int(inner[x])) if span != inf else _digits(whole[x], int(inner[x]))
            if span == inf or count > 1:  # (a whole loop's digit is one at run time, or a number's not)
                # the modulus of a level whose own digit is 1 (one tile) belongs to the next digit
                raw.append((lv, x, count, int(inner[x]), pending.pop(x, None)))
    if all(b == 1 for b in bound.values()):
        return None
    dims = []
    stride: Count = 1
    for lv, x, count, div, mod in reversed(raw):
        dims.append(PackDim(lv, x, count, div, mod, stride))
        stride = _times(stride, count)
    return Pack(tensor, loops, level, tuple(tiles[0].get(x) for x in loops), tuple(reversed(dims)))


def source_order(pack: Pack) -> list[PackDim]:
    """The copy's loops over the buffer's digits in the source's memory order: tensor dimension first,
    larger divisor outer (``packing._copy``: the source read as it lies in memory, the writes strided)."""
    return sorted(pack.dims, key=lambda d: (pack.loops.index(d.loop), -d.divisor))


def unit_writes(pack: Pack) -> bool:
    """Does the copy's innermost loop (:func:`source_order`) write consecutive elements of the buffer
    (gemm's ``B[k, j] -> [j / 16][k][j % 16]``: runs of 16, which the compiler copies in vectors), or
    strided ones (conv2d's ``W[k, c, r, s] -> [k / 32][c][r][s][k % 32]``: every write 32 apart)?"""
    order = source_order(pack)
    return not order or order[-1].stride == 1


# --------------------------------------------------------------------------- where the copy sits


def copies_here(pack: Pack, level: int, loop: str, *, indexing_inside: bool, outer_inside: bool,
                indexing_around: bool) -> bool:
    """Is ``pack`` copied at the top of the body of level ``level``'s loop over ``loop``?

    The copy sits in the body of the innermost loop of the levels above the pack's that indexes the
    tensor (``loop`` in the pack's loops, and no such loop inside the body: ``indexing_inside``): the
    loops of those levels inside it (which do not index it) walk tiles that hold the same box, which
    the counts fill once (``mapping.md``: fills are what a residency holds that the previous did not),
    so the copy is made once for all of them. gemm with B's columns kept at L2 in groups, the last
    level walking ``i, k, j``: A's rows x KC block is packed once per ``k`` step, not once per group
    of ``j``. When no loop of those levels indexes the tensor (none around, ``indexing_around``),
    the innermost one does (no loop of those levels inside: ``outer_inside``), unless the copy was
    hoisted before the nest (:func:`hoisted`)."""
    if level >= pack.level or indexing_inside:
        return False
    return loop in pack.loops or (not outer_inside and not indexing_around)


def hoisted(*, indexing_anywhere: bool, outer_anywhere: bool) -> bool:
    """Is a pack copied once, before its nest: no loop of the levels above the pack's indexes its
    tensor anywhere in the nest (``indexing_anywhere``), and the nest has a loop of those levels
    (``outer_anywhere``; else no loop would hold the copy)? Every tile of those levels then holds
    the same box, which the counts fill once; a copy per iteration of the innermost of those loops
    repeated it: conv2d's ``W`` panel, 36 K elements, once per row ``p`` of a 28 x 28 layer. The
    panel is only read, and shared by the threads."""
    return outer_anywhere and not indexing_anywhere


#: :func:`copy_place` of a pack copied once before its nest
BEFORE = -1


def copy_place(pack: Pack, chain: Sequence[tuple[int, str]]) -> int | None:
    """Where ``pack``'s copy sits among ``chain``, the loops the code prints around the statement
    that reads it (``(level, loop)``, outermost first): the index of the loop in whose body it is
    copied, :data:`BEFORE` when hoisted before the nest, None when no loop holds it (the level
    above the pack's prints no loop). :func:`hoisted` and :func:`copies_here` over a chain of loops,
    as the code applies them to its loops."""
    outer = [q for q, (lv, _) in enumerate(chain) if lv < pack.level]
    indexing = [q for q in outer if chain[q][1] in pack.loops]
    if hoisted(indexing_anywhere=bool(indexing), outer_anywhere=bool(outer)):
        return BEFORE
    for q, (lv, x) in enumerate(chain):
        if copies_here(pack, lv, x, indexing_inside=any(p > q for p in indexing),
                       outer_inside=any(p > q for p in outer), indexing_around=any(p < q for p in indexing)):
            return q
    return None
