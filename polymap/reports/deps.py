"""``polymap deps``: a :class:`~polymap.api.DependenceReport`'s dependences as JSON (``cli.md``) and a table.

JSON, per kernel: ``{"kernel", "analysis", "dependences": [{"kind", "source", "sink", "tensor",
"relation", "distance", "carried_by", "reduction"}], "loops": {loop: {"parallel", "reduction"}}}``;
the dependences are grouped per (kind, source, sink, tensor)
(:func:`polymap.passes.dependences.dependences.group`).
"""
from __future__ import annotations

from typing import Any, Protocol

from polymap.passes.dependences.dependences import Dependence, group
from polymap.passes.dependences.loop_classes import LoopClass, carrying_loops, distance_vector
from polymap.poly import KernelModel


class DependenceResult(Protocol):
    """What :func:`polymap.api.dependences` returns (the report reads only these fields)."""

    kernel: str
    analysis: str
    dependences: tuple[Dependence, ...]
    loops: dict[str, LoopClass]
    model: KernelModel | None


def deps_json(report: DependenceResult) -> dict[str, Any]:
    """The JSON document of ``cli.md`` for one kernel (plus distances and carrying loops)."""
    model = report.model
    assert model is not None, "the dependence report carries its model"
    return {
        "kernel": report.kernel,
        "analysis": report.analysis,
        "dependences": [{
            "kind": d.kind, "source": d.source, "sink": d.sink, "tensor": d.tensor,
            "relation": str(d.relation),
            "distance": list(distance_vector(model, d)),
            "carried_by": [c or None for c in carrying_loops(model, d)],
            "reduction": d.reduction,
        } for d in group(list(report.dependences))],
        "loops": {n: {"parallel": c.parallel, "reduction": c.reduction} for n, c in report.loops.items()},
    }


def _table(rows: list[list[str]]) -> list[str]:
    widths = [max(len(r[k]) for r in rows) for k in range(len(rows[0]))]
    return ["  " + "  ".join(c.ljust(w) for c, w in zip(r, widths)).rstrip() for r in rows]


def deps_text(report: DependenceResult) -> str:
    """Human-readable report: dependence table and loop classes."""
    doc = deps_json(report)
    lines = [f"kernel {doc['kernel']}: {doc['analysis']} dependences"]
    rows = [["kind", "source -> sink", "tensor", "distance", "carried by"]]
    for d in doc["dependences"]:
        dist = "(" + ", ".join(d["distance"]) + ")"
        carriers = ", ".join(c if c else "(loop-independent)" for c in d["carried_by"])
        red = " [reduction]" if d["reduction"] else ""
        rows.append([d["kind"], f"{d['source']} -> {d['sink']}", d["tensor"], dist, carriers + red])
    lines += _table(rows) if len(rows) > 1 else ["  (none)"]
    lines.append("loops:")
    rows = [["loop", "parallel", "reduction", ""]]
    for n, c in report.loops.items():
        what = f"{c.occurrences} loops named {n}, decided together" if c.occurrences > 1 else ""
        rows.append([n, "yes" if c.parallel else "no", "yes" if c.reduction else "no", what])
    lines += _table(rows)
    return "\n".join(lines)
