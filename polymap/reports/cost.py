"""Rendering a :class:`~polymap.passes.counting.cost_model.CostReport`: JSON (``cli.md``) and a table.

JSON shape (``polymap cost --json``)::

    {"kernel", "params", "instances",
     "levels": [{"name", "footprint" (not the backing store), "footprint_unit",
                 "tensors": {X: {"fills", "writebacks", "reads", "updates"}}}],
     "energy_pj", "cycles", "utilization", "intensity": {level: value},
     "bottleneck", "energy_breakdown_pj": {level|compute: pJ}, "seconds", "active_units"}

With ``--symbolic`` every count also appears as ``"<count>_formula"``.
"""
from __future__ import annotations

from typing import Sequence

from polymap.machine.arch import Architecture, Level
from polymap.passes.counting.cost_model import CostReport
from polymap.passes.counting.counting import LevelCounts
from polymap.passes.counting.variance import Variance


def _footprint(level: LevelCounts, spec: Level) -> tuple[int, str]:
    if spec is not None and spec.capacity_bytes is not None:
        return level.footprint_bytes, "bytes"
    return level.footprint, "elements"


def report_json(report: CostReport, arch: Architecture, *, variance: Variance | None = None) -> dict:
    """The ``cli.md`` document for ``polymap cost``, plus bottleneck and energy breakdown."""
    c = report.counts
    levels = []
    for lv, spec in zip(c.levels, arch.levels):
        tensors = {}
        for t in lv.tensors:
            names = ("reads", "updates") if lv.index == 0 else ("fills", "writebacks", "reads", "updates")
            entry = {k: getattr(t, k) for k in names}
            for k in names:
                if t.formula(k) is not None:
                    entry[f"{k}_formula"] = t.formula(k)
            tensors[t.tensor] = entry
        doc = {"name": lv.name}
        if lv.index > 0:
            doc["footprint"], doc["footprint_unit"] = _footprint(lv, spec)
            doc["capacity"] = spec.capacity_bytes if spec.capacity_bytes is not None else spec.capacity_elements
        doc["tensors"] = tensors
        levels.append(doc)
    out = {"kernel": c.kernel, "params": dict(c.params), "instances": c.instances}
    if c.instances_formula is not None:
        out["instances_formula"] = c.instances_formula
    out.update({
        "levels": levels,
        "energy_pj": report.energy_pj,
        "cycles": report.cycles,
        "utilization": report.utilization,
        "intensity": dict(report.intensity),
        "bottleneck": report.bottleneck,
        "energy_breakdown_pj": dict(report.energy_breakdown),
        "active_units": report.active_units,
        "seconds": report.seconds,
    })
    if variance is not None:
        out["cycles_pessimistic"] = variance.pessimistic_cycles
        out["pessimistic"] = variance.to_json()
    return out


def _num(x: int | float | None) -> str:
    if x is None:
        return "-"
    if isinstance(x, float) and not x.is_integer():
        return f"{x:,.2f}"
    return f"{int(x):,}"


def _table(rows: list[list[str]]) -> list[str]:
    widths = [max(len(r[k]) for r in rows) for k in range(len(rows[0]))]
    out = []
    for n, r in enumerate(rows):
        # no trailing blanks: a level's own row has empty count cells (README's tour is the output as printed)
        out.append("  ".join(cell.ljust(w) if k == 0 else cell.rjust(w)
                             for k, (cell, w) in enumerate(zip(r, widths))).rstrip())
        if n == 0:
            out.append("  ".join("-" * w for w in widths))
    return out


def report_text(report: CostReport, arch: Architecture, *, notes: list[str] | None = None,
                variance: Variance | None = None) -> str:
    """A readable report: counts per level and tensor (elements), energy, cycles, intensities."""
    c = report.counts
    params = ", ".join(f"{k}={v}" for k, v in c.params)
    lines = [f"kernel {c.kernel} ({params}) on {arch.name}: {_num(c.instances)} statement instances", ""]
    rows = [["level / tensor", "fills", "writebacks", "reads", "updates"]]
    for lv, spec in zip(c.levels, arch.levels):
        head = lv.name
        if lv.index > 0:
            fp, unit = _footprint(lv, spec)
            head += f"  (footprint {_num(fp)} {unit} of {spec.capacity_text()})"
        rows.append([head, "", "", "", ""])
        for t in lv.tensors:
            rows.append([f"  {t.tensor}", _num(t.fills), _num(t.writebacks), _num(t.reads), _num(t.updates)])
    lines += _table(rows)
    lines += ["", "counts are in elements, summed over the instances of each level", ""]
    rows = [["energy", "pJ", "share"]]
    for name, e in report.energy_breakdown:
        share = f"{100 * e / report.energy_pj:.1f}%" if report.energy_pj else "-"
        rows.append([name, _num(e), share])
    rows.append(["total", _num(report.energy_pj), "100%" if report.energy_pj else "-"])
    lines += _table(rows)
    lines += ["", f"cycles: {_num(report.cycles)} ({report.seconds * 1e6:.3f} us at "
                  f"{arch.compute.frequency / 1e9:g} GHz); bottleneck: {report.bottleneck}"]
    for name, cyc in report.cycle_terms:
        lines.append(f"  {name:<12} {_num(cyc)} cycles")
    if variance is not None:
        lines.append(f"pessimistic cycles: {_num(variance.pessimistic_cycles)} (derating x{variance.derating:.3g} "
                     f"over the nominal; binds: {variance.binding})")
        for b in variance.bounds:
            lines.append(f"  {b.kind:<16} x{b.factor:.3g} on {b.term}: {b.detail}")
    lines.append(f"utilization: {100 * report.utilization:.1f}% ({report.active_units} of "
                 f"{arch.compute.instances} compute units active)")
    lines.append("arithmetic intensity (instances per element crossing the level's inner boundary):")
    for name, value in report.intensity:
        lines.append(f"  {name:<12} {'-' if value is None else f'{value:,.3f}'}")
    for note in notes or ():
        lines.append(f"note: {note}")
    return "\n".join(lines)


def cost_nests_json(reports: Sequence[CostReport], arch: Architecture, spreads: Sequence | None = None) -> dict:
    """``polymap cost --json``: one report's document, or ``{"kernel", "nests": [...]}`` for several
    (``spreads``: each one's pessimistic cycles, :mod:`polymap.passes.counting.variance`)."""
    spreads = list(spreads) if spreads is not None else [None] * len(reports)
    docs = [report_json(r, arch, variance=s) for r, s in zip(reports, spreads)]
    if len(docs) == 1:
        return docs[0]
    return {"kernel": reports[0].counts.kernel if reports else None, "nests": docs}
