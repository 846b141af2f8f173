"""A polymap mapping written back in Timeloop's format (``cost --export timeloop OUT.yaml``).

Before (``mapping.md``)::

    levels:
      - {level: MainMemory, order: [p]}
      - {level: Buffer, tile: {r: 3, p: 1}, order: [r]}

After (factors per level, permutations innermost first)::

    mapping:
      - {target: MainMemory, type: temporal, factors: R=1 P=8, permutation: PR}
      - {target: Buffer, type: temporal, factors: R=3 P=1, permutation: RP}
      - {target: Buffer, type: dataspace, keep: [Weights, Inputs, Outputs], bypass: []}

A level's factor of a loop is its tile's extent over the next inner level's
(1 below the innermost level); Timeloop needs exact factors, so a tile that
does not divide its enclosing tile is refused. A level ``X_spatial`` right
below ``X`` (made by ``import timeloop`` for a loop split both ways) is
written back as ``X``'s spatial factors. A loop ``x in 0..X`` over a
parameter ``X`` is Timeloop's dimension ``X``; other loops are upper-cased.
"""
from __future__ import annotations

from typing import Mapping as MappingT

import yaml

from polymap import ir
from polymap.errors import InputError
from polymap.mapping.model import Mapping, mapping_loop_extents
from polymap.timeloop.mapping import SPATIAL_SUFFIX


def dimension_names(kernel: ir.Kernel, loops: tuple[str, ...]) -> dict[str, str]:
    """Loop -> Timeloop dimension: the parameter bounding ``x in 0..X``, else the loop upper-cased."""
    out: dict[str, str] = {}
    for ctx in kernel.statements():
        for lp in ctx.loops:
            if (lp.var in loops and len(lp.lower) == 1 and len(lp.upper) == 1
                    and isinstance(lp.lower[0], ir.Const) and lp.lower[0].value == 0
                    and isinstance(lp.upper[0], ir.Var) and lp.upper[0].name in kernel.param_names):
                out.setdefault(lp.var, lp.upper[0].name)
    for x in loops:
        out.setdefault(x, x.upper())
    return out


def _tiles(mapping: Mapping, extents: MappingT[str, int]) -> list[dict[str, int]]:
    cur = dict(extents)
    out = []
    for lm in mapping.levels:
        for loop, t in zip(mapping.loops, lm.tile):
            if t is not None:
                cur[loop] = min(t, cur[loop])
        out.append(dict(cur))
    return out


def export_mapping(kernel: ir.Kernel, mapping: Mapping, params: MappingT[str, int]) -> str:
    """The Timeloop mapping file's text."""
    extents = mapping_loop_extents(kernel, mapping, params)
    dims = dimension_names(kernel, mapping.loops)
    tiles = _tiles(mapping, extents)
    entries: list[dict] = []
    for k, lm in enumerate(mapping.levels):
        inner = tiles[k + 1] if k + 1 < len(tiles) else {x: 1 for x in mapping.loops}
        trips = {}
        for x in mapping.loops:
            if tiles[k][x] % inner[x]:
                raise InputError(f"--export timeloop: at level {lm.level} the tile of {x} ({tiles[k][x]}) is not a "
                                 f"multiple of the next level's ({inner[x]}); Timeloop needs exact factors")
            trips[x] = tiles[k][x] // inner[x]
        spatial = [x for x in lm.spatial if trips[x] > 1]
        temporal = [x for x in lm.order if x not in lm.spatial and trips[x] > 1]
        temporal += [x for x in mapping.loops if x not in lm.order and x not in lm.spatial and trips[x] > 1]
        is_split = lm.level.endswith(SPATIAL_SUFFIX) and k > 0 and \
            mapping.levels[k - 1].level == lm.level[: -len(SPATIAL_SUFFIX)]
        if is_split:
            if temporal:
                raise InputError(f"--export timeloop: level {lm.level} holds temporal loops ({', '.join(temporal)})")
            target = mapping.levels[k - 1].level
        else:
            target = lm.level
            entries.append(_entry(target, "temporal", {x: trips[x] if x not in spatial else 1 for x in mapping.loops},
                                  list(reversed(temporal)) + [x for x in mapping.loops if x not in temporal], dims))
        if spatial:
            entries.append(_entry(target, "spatial", {x: trips[x] if x in spatial else 1 for x in mapping.loops},
                                  list(reversed(spatial)) + [x for x in mapping.loops if x not in spatial], dims))
        if k > 0 and not is_split:
            tensors = [d.name for d in kernel.decls if d.role != "local"]
            entries.append({"target": target, "type": "dataspace", "keep": [t for t in tensors if t in lm.keep],
                            "bypass": [t for t in tensors if t not in lm.keep]})
    head = f"# exported by polymap cost --export timeloop (kernel {kernel.name}); permutations innermost first\n"
    return head + yaml.safe_dump({"mapping": entries}, sort_keys=False, default_flow_style=None)


def _entry(target: str, kind: str, factors: dict[str, int], perm: list[str], dims: dict[str, str]) -> dict:
    names = [dims[x] for x in perm]
    sep = "" if all(len(n) == 1 for n in names) else " "
    return {"target": target, "type": kind, "factors": " ".join(f"{dims[x]}={v}" for x, v in factors.items()),
            "permutation": sep.join(names)}
