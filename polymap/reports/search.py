"""Rendering a search (:class:`~polymap.passes.search.network.NetworkResult`): table, JSON, CSV.

JSON (``cli.md``): a list of ``{"mapping", "cost"}``, best first, per layer in
file order; each entry adds ``"kernel"``, ``"nest"``, ``"rank"``,
``"objective"`` (its value), ``"confirmed"`` (legal with its own tiles and the
fast path's counts equal to the ISL path's), and on the first entry of a
layer ``"search"`` (space, pruned by reason, evaluated, exhaustive, seconds,
path) and ``"lower_bounds"`` (per level: capacity, bound, the best mapping's
traffic and their ratio).

CSV: one row per evaluated mapping: kernel, nest, per level order / spatial
/ tiles / keep, energy, cycles, EDP, and every count (``LEVEL.TENSOR.fills``...;
empty where the level bypasses the tensor).
"""
from __future__ import annotations

import csv
from typing import IO

from polymap.machine.arch import Architecture
from polymap.mapping.model import Mapping
from polymap.passes.search.explore import COUNT_NAMES
from polymap.passes.search.lower_bound import level_traffic
from polymap.passes.search.mapspace import full_orders
from polymap.passes.search.network import LayerResult, NetworkResult
from polymap.reports.cost import report_json


def bound_rows(layer: LayerResult) -> list[dict]:
    best = layer.result.best
    out = []
    for b in layer.bounds:
        entry = {"level": b.level, "capacity": b.capacity, "instances": b.instances, "kind": b.kind,
                 "lower_bound": b.traffic, "note": b.note}
        if best is not None:
            k = next(i for i, lv in enumerate(best.cost.counts.levels) if lv.name == b.level)
            bypassed = [t.tensor for t in best.cost.counts.levels[0].tensors
                        if t.tensor not in best.mapping.levels[k].keep]
            if bypassed:
                # the bound counts every tensor entering the level: a bypassed one never does
                entry["note"] = (f"{b.note}; not compared: the best mapping bypasses "
                                 f"{', '.join(bypassed)} here, and the bound counts every tensor")
            else:
                traffic = level_traffic(best.cost.counts, k)
                entry["traffic"] = traffic
                entry["ratio"] = traffic / b.traffic if b.traffic else None
        out.append(entry)
    return out


def search_json(net: NetworkResult, arch: Architecture) -> list[dict]:
    out = []
    for layer in net.layers:
        r = layer.result
        for rank, f in enumerate(r.found, 1):
            entry = {"kernel": layer.kernel, "nest": layer.nest, "rank": rank, "mapping": f.mapping.to_dict(),
                     "cost": report_json(f.cost, arch), "objective": f.objective, "confirmed": f.confirmed}
            if rank == 1:
                entry["search"] = {"objective": r.objective.value, "space": r.space, "pruned": r.pruned,
                                   "evaluated": r.evaluated, "exhaustive": r.exhaustive,
                                   "seconds": r.seconds, "path": r.path, "notes": r.notes}
                entry["lower_bounds"] = bound_rows(layer)
            out.append(entry)
    return out


def _tiles(mapping: Mapping) -> str:
    parts = []
    for lm in mapping.levels[1:]:
        tile = ",".join(f"{x}{t}" for x, t in zip(mapping.loops, lm.tile) if t is not None) or "whole"
        parts.append(f"{lm.level}[{tile}]")
    return " ".join(parts)


def search_text(net: NetworkResult, arch: Architecture) -> str:
    lines = []
    for layer in net.layers:
        r = layer.result
        head = f"kernel {layer.kernel}" + (f" nest {layer.nest}" if layer.nest else "")
        params = ", ".join(f"{k}={v}" for k, v in sorted(layer.params.items()))
        lines.append(f"{head} ({params}) on {arch.name}: objective {r.objective.value}")
        pruned = sum(r.pruned.values())
        why = ", ".join(f"{k} {v:.3g}" for k, v in r.pruned.items() if v)
        lines.append(f"  space {r.space:.4g} mappings; pruned {pruned:.4g} ({why or 'nothing'}); "
                     f"evaluated {r.evaluated:,}{' (exhaustive)' if r.exhaustive else ' (budget reached)'} "
                     f"in {r.seconds:.1f} s by the {r.path} path")
        for note in r.notes:
            lines.append(f"  note: {note}")
        if not r.found:
            lines.append(f"  none of the {r.evaluated:,} mappings searched is legal and fits this architecture")
            continue
        lines.append(f"  {'rank':>4}  {'energy pJ':>14}  {'cycles':>12}  {'EDP':>10}  ok  mapping")
        for rank, f in enumerate(r.found, 1):
            lines.append(f"  {rank:>4}  {f.cost.energy_pj:>14,.0f}  {f.cost.cycles:>12,.0f}  "
                         f"{f.cost.energy_pj * f.cost.cycles:>10.3g}  {'yes' if f.confirmed else 'NO '}  "
                         f"{_tiles(f.mapping)}")
        best = r.best.mapping
        lines.append("  best mapping:")
        for lm in best.levels:
            tile = ", ".join(f"{x}: {t}" for x, t in zip(best.loops, lm.tile) if t is not None) or "whole"
            sp = f", spatial {' '.join(lm.spatial)}" if lm.spatial else ""
            every = len(lm.keep) == len(r.best.cost.counts.levels[0].tensors)
            keep = "" if every else f", keep {' '.join(lm.keep) or 'nothing'}"
            lines.append(f"    {lm.level:<6} tile {{{tile}}} order {' '.join(lm.order)}{sp}{keep}")
        rows = bound_rows(layer)
        if not rows:
            why = ("the nest is outside the fast path's class, whose access shapes the bounds are derived from"
                   if r.path == "isl" else "no level below the backing store has a capacity")
            lines.append(f"  lower bounds: none ({why})")
        if rows:
            lines.append("  traffic across each level's upper boundary (fills + writebacks) vs its lower bound:")
            for b in rows:
                ratio = f"{b['ratio']:.3f}x" if b.get("ratio") else "-"
                lines.append(f"    {b['level']:<6} capacity {b['capacity']:,} x {b['instances']}: "
                             f"best {format(b['traffic'], ',') if 'traffic' in b else '-'}  bound {b['lower_bound']:,.0f} ({b['kind']})  "
                             f"ratio {ratio}")
                lines.append(f"           {b['note']}")
    if len(net.layers) > 1:
        lines.append(f"total over {len(net.layers)} layers: energy {net.energy_pj:,.0f} pJ, "
                     f"cycles {net.cycles:,.0f}, EDP {net.edp:.4g}; {net.evaluated:,} mappings evaluated "
                     f"in {net.seconds:.1f} s")
        if net.unmapped:
            lines.append(f"  without a mapping: {', '.join(net.unmapped)}")
    return "\n".join(lines)


def write_csv(net: NetworkResult, arch: Architecture, out: IO[str]) -> int:
    """Every evaluated mapping of every layer; returns the rows written."""
    writer = csv.writer(out)
    count_cols = [f"{lv.name}.{what}" for lv in arch.levels for what in ("footprint",)]
    header_done = False
    rows = 0
    for layer in net.layers:
        r = layer.result
        if r.context is None or not r.table:
            continue
        fast, space, groups = r.context
        names = [f"{lv.name}.{t.name}.{w}" for l, lv in enumerate(arch.levels) for t in fast.tensors
                 for w in COUNT_NAMES if l > 0 or w in ("reads", "updates")]
        cols = names + [c for c in count_cols if not c.startswith(arch.levels[0].name + ".")]
        if not header_done:
            writer.writerow(["kernel", "nest"] + [f"{lv.name}.{k}" for lv in arch.levels
                                                  for k in ("order", "spatial", "tile", "keep")]
                            + ["energy_pj", "cycles", "edp"] + cols)
            header_done = True
        for item in r.table:
            t = item.table
            for i in range(len(t["row"])):
                g = groups[int(t["group"][i])]
                plan = space.plans[g.plan]
                orders = full_orders(g, plan, len(fast.loops), int(t["order"][i]))
                tiles = g.tiles[int(t["row"][i])]
                desc = []
                kept = plan.kept(fast)
                for k in range(len(arch.levels)):
                    desc += [" ".join(fast.loops[x] for x in orders[k]),
                             " ".join(fast.loops[x] for x in sorted(plan.loops[k])),
                             " ".join(str(int(v)) for v in tiles[k]),
                             " ".join(t.name for t in fast.tensors if t.name in kept[k])]
                e, c = float(t["energy_pj"][i]), float(t["cycles"][i])
                writer.writerow([layer.kernel, layer.nest] + desc + [e, c, e * c]
                                + [int(t[col][i]) if col in t else "" for col in cols])
                rows += 1
    return rows
