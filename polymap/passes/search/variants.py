"""Neighbours of a mapping: more candidates for ``--tune K`` than compile's few.

Compile's choice proposes a handful of mappings (register tiles, the
default heuristic, a few of the search's); measuring the model's best ``K``
needs ``K`` of them. The neighbours of a mapping change one decision at
one middle level (not the backing store, not the innermost level, so that
the register tile and its micro-kernel stay), each a mapping file's data
validated like one::

    L2 tile {i: 140, k: 192}  ->  {i: 70, k: 192}, {i: 280, k: 192}, {i: 140, k: 96}, ...
    L1 order j, i, k          ->  i, j, k   (a swap of two adjacent loops)

A tile is halved or doubled, kept a multiple of the inner level's tile
(the register tile divides it) and within the enclosing level's; the
model then counts, ranks and (with ``--tune``) the machine measures them.
"""
from __future__ import annotations

from typing import Iterator

from polymap.mapping.files import mapping_from_dict
from polymap.errors import MappingError
from polymap.mapping.model import Mapping, resolved_tile
from polymap import ir
from polymap.machine.arch import Architecture


def neighbours(mapping: Mapping, kernel: ir.Kernel, arch: Architecture, extents: dict[str, int]) -> Iterator[tuple[str, Mapping]]:
    """(what changed, mapping) for every valid neighbour of ``mapping`` (see the module docstring)."""
    # as a file reads it: a tile left out inherits the enclosing level's (a Mapping built in code may
    # say "whole loop" there instead)
    try:
        mapping = mapping_from_dict(mapping.to_dict(), kernel=kernel, arch=arch)
    except MappingError:
        return  # not expressible as a file (an inner tile larger than its parent's): no neighbours
    base = mapping.to_dict()
    n = len(mapping.levels)
    seen = {repr(base)}
    for k in range(1, n - 1):
        own = resolved_tile(mapping, k, extents)
        outer = resolved_tile(mapping, k - 1, extents) if k > 1 else dict(extents)
        inner = resolved_tile(mapping, k + 1, extents)
        for x in mapping.loops:
            for factor in (0.5, 2.0):
                t = _scaled(own[x], factor, inner[x], outer[x])
                if t is None or t == own[x]:
                    continue
                data = _with_tile(base, k, mapping, own, x, t)
                yield from _valid(data, seen, f"{mapping.levels[k].level} {x}={t}", kernel, arch)
        order = list(mapping.levels[k].order)
        for p in range(len(order) - 1):
            swapped = order[:p] + [order[p + 1], order[p]] + order[p + 2:]
            data = _copy(base)
            data["levels"][k]["order"] = swapped
            yield from _valid(data, seen, f"{mapping.levels[k].level} order {','.join(swapped)}", kernel, arch)


def _scaled(tile: int, factor: float, inner: int, outer: int) -> int | None:
    """``tile * factor`` rounded to a multiple of ``inner``, within [inner, outer]; None when impossible."""
    if inner <= 0 or tile <= 0:
        return None
    want = max(inner, min(outer, int(round(tile * factor / inner)) * inner))
    return want if inner <= want <= outer else None


def _copy(data: dict) -> dict:
    return {**data, "levels": [dict(lv, **({"tile": dict(lv["tile"])} if "tile" in lv else {}))
                               for lv in data["levels"]]}


def _with_tile(base: dict, k: int, mapping: Mapping, own: dict[str, int], x: str, t: int) -> dict:
    data = _copy(base)
    tile = {y: own[y] for y in mapping.loops if mapping.levels[k].tile[mapping.loops.index(y)] is not None}
    tile[x] = t
    data["levels"][k]["tile"] = tile
    return data


def _valid(data: dict, seen: set[str], label: str, kernel: ir.Kernel, arch: Architecture) -> Iterator[tuple[str, Mapping]]:
    text = repr(data)
    if text in seen:
        return
    seen.add(text)
    try:
        yield label, mapping_from_dict(data, kernel=kernel, arch=arch)
    except MappingError:
        return  # e.g. a tile that would grow inward: not a mapping
