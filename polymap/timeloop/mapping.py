"""Timeloop mappings as polymap mappings (and the architecture levels they need).

Before (Timeloop, permutations innermost first)::

    mapping:
      - {target: MainMemory, type: temporal, factors: K=2 R=1 P=2, permutation: PKR}
      - {target: Buffer, type: temporal, factors: K=2 R=3 P=2, permutation: RPK}
      - {target: Buffer, type: spatial, factors: K=1 R=1 P=2}
      - {target: Buffer, type: dataspace, keep: [Weights, Outputs], bypass: [Inputs]}

After (``mapping.md``: tiles are the extents one residency covers, orders outer -> inner)::

    levels:
      - {level: MainMemory, order: [k, p]}
      - {level: Buffer, tile: {k: 2, r: 3, p: 4}, order: [k, r, p], spatial: [p], keep: [Weights, Outputs]}

The loops at a Timeloop level are the loops at the polymap level of the same
name; a level's tile is the product of its own factors and of every inner
level's. Spatial loops come after the temporal ones of their level. A level
whose spatial factors split a loop that its temporal factors also split
(``P=2`` both ways) cannot say that with one loop per name, so it becomes two
polymap levels: ``X`` with the temporal loops and ``X_spatial`` (no capacity,
keeping nothing, as many instances as ``X``) with the spatial ones; the files
say so.
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field
from math import prod

from polymap.timeloop.arch import TimeloopArch
from polymap.timeloop.problem import Problem
from polymap.yamlsource import YamlDocument

SPATIAL_SUFFIX = "_spatial"


@dataclass
class TargetFactors:
    temporal: dict[str, int] = field(default_factory=dict)
    spatial: dict[str, int] = field(default_factory=dict)
    permutation: tuple[str, ...] = ()  # temporal, innermost first
    spatial_permutation: tuple[str, ...] = ()
    keep: tuple[str, ...] | None = None
    bypass: tuple[str, ...] = ()


def _factors(doc: YamlDocument, path: tuple, value: object, dims: tuple[str, ...]) -> dict[str, int]:
    items: list[tuple[str, object]] = []
    if isinstance(value, str):
        for part in value.split():
            name, sep, v = part.partition("=")
            if not sep:
                doc.fail(path, f"factors: '{part}' is not DIM=VALUE")
            items.append((name, v))
    elif isinstance(value, dict):
        items = list(value.items())
    elif isinstance(value, list):
        for part in value:
            name, _, v = str(part).partition("=")
            items.append((name, v))
    else:
        doc.fail(path, "factors are 'K=1 R=3 P=16' (or a mapping of dimension to factor)")
    out = {}
    for name, v in items:
        if name not in dims:
            doc.fail(path, f"factors: '{name}' is not a dimension of the problem ({', '.join(dims)})")
        try:
            out[name] = int(v)
        except (TypeError, ValueError):
            doc.fail(path, f"factors: {name}={v} is not an integer")
        if out[name] < 1:
            doc.fail(path, f"factors: {name}={v}: factors are at least 1")
    return out


def _permutation(doc: YamlDocument, path: tuple, value: object, dims: tuple[str, ...]) -> tuple[str, ...]:
    if isinstance(value, list):
        names = [str(v) for v in value]
    elif isinstance(value, str):
        text = value.strip()
        names = list(text) if all(c in dims for c in text) else re.split(r"[\s,]+", text)
    else:
        doc.fail(path, "a permutation is a string of dimensions, innermost first ('PRK')")
    bad = [n for n in names if n not in dims]
    if bad:
        doc.fail(path, f"permutation: '{bad[0]}' is not a dimension of the problem ({', '.join(dims)})")
    return tuple(names)


def read_mapping(doc: YamlDocument, problem: Problem, arch: TimeloopArch) -> dict[str, TargetFactors]:
    data = doc.data
    entries = data.get("mapping") if isinstance(data, dict) else data
    base = ("mapping",) if isinstance(data, dict) else ()
    if not isinstance(entries, list):
        doc.fail((), "a Timeloop mapping file is a list of entries under 'mapping:'")
    names = [c.name for c in arch.storage]
    dims = problem.dimensions
    out = {n: TargetFactors() for n in names}
    spaces = [d.name for d in problem.data_spaces]
    for k, e in enumerate(entries):
        path = base + (k,)
        if not isinstance(e, dict) or e.get("target") not in names:
            doc.fail(path, f"every entry needs a 'target', one of the storage levels ({', '.join(names)})")
        t = out[e["target"]]
        kind = e.get("type", "temporal")
        if kind in ("temporal", "spatial"):
            factors = _factors(doc, path + ("factors",), e.get("factors", ""), dims)
            perm = _permutation(doc, path + ("permutation",), e.get("permutation", ""), dims)
            if kind == "temporal":
                t.temporal.update(factors)
                t.permutation = perm
            else:
                t.spatial.update(factors)
                t.spatial_permutation = perm
        elif kind in ("dataspace", "datatype", "bypass"):
            for key in ("keep", "bypass"):
                listed = e.get(key, [])
                if not isinstance(listed, list) or any(x not in spaces for x in listed):
                    doc.fail(path + (key,), f"{key}: a list of data spaces ({', '.join(spaces)})")
            t.keep = tuple(e.get("keep", [])) if "keep" in e else t.keep
            t.bypass = tuple(e.get("bypass", []))
        else:
            doc.fail(path + ("type",), f"type '{kind}': expected temporal, spatial or dataspace")
    for d in dims:
        total = prod(t.temporal.get(d, 1) * t.spatial.get(d, 1) for t in out.values())
        if total != problem.instance[d]:
            doc.fail(base, f"the factors of {d} multiply to {total}, but the problem's {d} is {problem.instance[d]}")
    return out


def polymap_files(problem: Problem, arch: TimeloopArch, targets: dict[str, TargetFactors] | None,
                  levels: list[dict]) -> tuple[list[dict], dict | None, list[str]]:
    """(architecture levels, mapping dict, notes): the split levels inserted where needed."""
    notes: list[str] = []
    if targets is None:
        return levels, None, notes
    dims = problem.dimensions
    names = [c.name for c in arch.storage]
    arch_levels: list[dict] = []
    mapped: list[dict] = []
    spaces = [d.name for d in problem.data_spaces]
    inner = {d: 1 for d in dims}
    per_level: list[tuple[str, dict, dict]] = []  # computed innermost first
    for k in range(len(names) - 1, -1, -1):
        t = targets[names[k]]
        after_spatial = {d: inner[d] * t.spatial.get(d, 1) for d in dims}
        own = {d: after_spatial[d] * t.temporal.get(d, 1) for d in dims}
        per_level.append((names[k], own, after_spatial))
        inner = own
    per_level.reverse()
    for k, (name, tile, after_spatial) in enumerate(per_level):
        t = targets[name]
        spec = levels[k]
        temporal = [d for d in reversed(t.permutation) if t.temporal.get(d, 1) > 1]
        temporal += [d for d in dims if t.temporal.get(d, 1) > 1 and d not in temporal]
        spatial = [d for d in reversed(t.spatial_permutation) if t.spatial.get(d, 1) > 1]
        spatial += [d for d in dims if t.spatial.get(d, 1) > 1 and d not in spatial]
        keep = [x for x in (t.keep if t.keep is not None else spaces) if x not in t.bypass]
        entry: dict = {"level": name}
        if k > 0:
            entry["tile"] = {problem.loop(d): tile[d] for d in dims}
        split = bool(set(temporal) & set(spatial))
        loops = temporal if split else temporal + spatial
        if loops:
            entry["order"] = [problem.loop(d) for d in loops]
        if spatial and not split:
            entry["spatial"] = [problem.loop(d) for d in spatial]
        if k > 0:
            entry["keep"] = keep
        arch_levels.append(spec)
        mapped.append(entry)
        if split:
            extra = f"{name}{SPATIAL_SUFFIX}"
            both = ", ".join(d for d in temporal if d in spatial)
            notes.append(f"Timeloop level {name} splits {both} into a temporal and a spatial part: polymap "
                         f"has one loop per name and level, so its spatial loops run at the level {extra} "
                         f"(no capacity, keeps nothing, {spec.get('instances', 1)} instance(s)) below it")
            v: dict = {"name": extra}
            if spec.get("instances", 1) != 1:
                v["instances"] = spec["instances"]
            arch_levels.append(v)
            mapped.append({"level": extra, "tile": {problem.loop(d): after_spatial[d] for d in dims},
                           "order": [problem.loop(d) for d in spatial], "spatial": [problem.loop(d) for d in spatial],
                           "keep": []})
    return arch_levels, {"kernel": problem.name, "levels": mapped}, notes
