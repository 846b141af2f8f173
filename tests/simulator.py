"""A step-by-step simulator of a mapped loop nest, independent of ISL.

It enumerates the statement instances of the nest (the original program,
:func:`polymap.evaluate.iterate_statement_instances`), computes each
instance's mapped time vector in plain Python from the mapping (tile
coordinates by floor/mod, phases for missing loops, textual rank), sorts
them, and walks them level by level: each instance of a level keeps the
current residency's elements per tensor and counts what enters and leaves,
exactly as ``mapping.md`` says. The result has the shape of
:class:`polymap.passes.counting.counting.Counts` flattened into dicts.
"""
from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass

from polymap import ir
from polymap.evaluate import eval_int, iterate_statement_instances

from mapped_time import TimeKeys, contexts, mapped_nests

DTYPE_BYTES = {"f32": 4, "f64": 8, "i32": 4, "i64": 8}


@dataclass(frozen=True)
class Dim:
    level: int
    loop: str
    kind: str  # "phase" | "coord"
    spatial: bool


@dataclass
class Event:
    time: tuple
    accesses: list  # [(tensor, kind, element)], reads first


def events(kernel: ir.Kernel, mapping, params: dict) -> tuple[list[Dim], list[Event]]:
    """Every statement instance of the mapped nests with its mapped time and accesses, in mapped order."""
    keys = TimeKeys(kernel, mapping, params)
    nests = set(mapped_nests(mapping))
    dims = [Dim(l, x, kind, sp) for l, x, kind, sp in keys.dims()]
    out = []
    for ctx, env in iterate_statement_instances(kernel, params):
        if ctx.nest not in nests:
            continue
        acc = [(r.tensor, "read", tuple(eval_int(i, env) for i in r.indices)) for r in ir.reads_of(ctx.stmt)]
        t = ctx.stmt.target
        acc.append((t.tensor, "write", tuple(eval_int(i, env) for i in t.indices)))
        out.append(Event(keys.key(ctx, env), acc))
    out.sort(key=lambda e: e.time)
    return dims, out


def _residencies(dims, evs, level):
    """{instance id: [(prefix, [events])...]} for ``level`` (prefixes in time order)."""
    depth = sum(1 for d in dims if d.level < level)
    spatial = [j for j in range(depth) if dims[j].spatial]
    per: dict = defaultdict(list)
    for e in evs:
        prefix = e.time[:depth]
        inst = tuple(prefix[j] for j in spatial)
        seq = per[inst]
        if not seq or seq[-1][0] != prefix:
            seq.append((prefix, []))
        seq[-1][1].append(e)
    return per


def _walk_level(dims, evs, level, kept):
    """Fill and writeback events of ``kept`` tensors at ``level``, and its footprints."""
    fills = defaultdict(list)  # tensor -> [(prefix, element)]
    wbs = defaultdict(list)
    fp = fp_bytes = 0
    for inst, seq in _residencies(dims, evs, level).items():
        held: dict = {x: {} for x in kept}  # tensor -> {element: dirty}
        prefix_prev = None
        for prefix, group in seq:
            d = {x: {} for x in kept}  # element -> first access kind ("read"/"write")
            written = {x: set() for x in kept}
            for e in group:
                reads_here = {(x, el) for x, k, el in e.accesses if k == "read"}
                for x, kind, el in e.accesses:
                    if x not in d:
                        continue
                    if el not in d[x]:
                        d[x][el] = "read" if (kind == "read" or (x, el) in reads_here) else "write"
                    if kind == "write":
                        written[x].add(el)
            for x in kept:
                for el in list(held[x]):
                    if el not in d[x]:
                        if held[x].pop(el):
                            wbs[x].append((prefix_prev, el))
                for el, first in d[x].items():
                    if el not in held[x]:
                        held[x][el] = False
                        if first == "read":
                            fills[x].append((prefix, el))
                    if el in written[x]:
                        held[x][el] = True
            prefix_prev = prefix
            fp = max(fp, sum(len(d[x]) for x in kept))
            fp_bytes = max(fp_bytes, sum(len(d[x]) * _size(x) for x in kept))
        for x in kept:
            for el, dirty in held[x].items():
                if dirty:
                    wbs[x].append((prefix_prev, el))
    return fills, wbs, fp, fp_bytes


_SIZES: dict = {}


def _size(tensor: str) -> int:
    return _SIZES.get(tensor, 4)


def simulate(kernel: ir.Kernel, mapping, params: dict) -> dict:
    """``{"instances": n, "levels": [{"footprint", "footprint_bytes", "tensors": {X: {...}}}]}``."""
    _SIZES.clear()
    _SIZES.update({d.name: DTYPE_BYTES[d.dtype] for d in kernel.decls})
    dims, evs = events(kernel, mapping, params)
    used = {r.tensor for c in contexts(kernel, mapping) for r in ir.reads_of(c.stmt) + (c.stmt.target,)}
    tensors = [d.name for d in kernel.decls if d.name in used]
    n = len(mapping.levels)
    kept = [tuple(tensors) if l == 0 else tuple(x for x in tensors if x in mapping.levels[l].keep)
            for l in range(n)]
    walked = [None] + [_walk_level(dims, evs, l, kept[l]) for l in range(1, n)]
    levels = []
    for l in range(n):
        out = {}
        for x in kept[l]:
            inner = [c for c in range(l + 1, n) if x in kept[c]]
            if inner:
                c = inner[0]
                depth = sum(1 for d in dims if d.level < c)
                drop = {j for j in range(depth) if dims[j].spatial and dims[j].level >= l}
                seen = {(tuple(v for j, v in enumerate(p) if j not in drop), el) for p, el in walked[c][0][x]}
                reads, updates = len(seen), len(walked[c][1][x])
            else:
                reads = sum(1 for e in evs for t, k, _ in e.accesses if t == x and k == "read")
                updates = sum(1 for e in evs for t, k, _ in e.accesses if t == x and k == "write")
            entry = {"reads": reads, "updates": updates}
            if l > 0:
                entry["fills"] = len(walked[l][0][x])
                entry["writebacks"] = len(walked[l][1][x])
            out[x] = entry
        level = {"tensors": out}
        if l > 0:
            level["footprint"], level["footprint_bytes"] = walked[l][2], walked[l][3]
        levels.append(level)
    return {"instances": len(evs), "levels": levels}


def counts_as_dict(counts) -> dict:
    """:class:`polymap.passes.counting.counting.Counts` in the shape :func:`simulate` returns."""
    levels = []
    for lv in counts.levels:
        out = {}
        for t in lv.tensors:
            entry = {"reads": t.reads, "updates": t.updates}
            if lv.index > 0:
                entry["fills"], entry["writebacks"] = t.fills, t.writebacks
            out[t.tensor] = entry
        level = {"tensors": out}
        if lv.index > 0:
            level["footprint"], level["footprint_bytes"] = lv.footprint, lv.footprint_bytes
        levels.append(level)
    return {"instances": counts.instances, "levels": levels}
