"""The dependences of ``polymap deps``, as JSON (``cli.md``) and as a table for people.

Both render an :class:`polymap.api.DependenceReport` and compute nothing::

    kernel gemm: value-based dependences
      kind  source -> sink  tensor  distance   carried by
      RAW   acc -> acc      C       (0, 0, 1)  k [reduction]
    loops:
      loop  parallel  reduction
      k     no        yes
"""
from __future__ import annotations

from typing import Any, Protocol, Sequence

import networkx as nx

from polymap.passes.dependences.depgraph import to_dot
from polymap.passes.dependences.loop_classes import DependenceFacts, LoopClass


class DependenceReportLike(Protocol):
    """What is rendered (:class:`polymap.api.DependenceReport`): a protocol, as reports sit below the API."""

    kernel: str
    analysis: str
    loops: dict[str, LoopClass]
    merged: tuple[DependenceFacts, ...]
    graph: nx.MultiDiGraph | None


def deps_json(report: DependenceReportLike) -> dict[str, Any]:
    """The JSON document of ``cli.md`` for one kernel (plus exact distances and carrying loops)."""
    return {
        "kernel": report.kernel,
        "analysis": report.analysis,
        "dependences": [{
            "kind": f.dependence.kind, "source": f.dependence.source, "sink": f.dependence.sink,
            "tensor": f.dependence.tensor, "relation": str(f.dependence.relation),
            "distance": list(f.distance),
            "distances": None if f.exact is None else [{"vector": list(v), "carried_by": c or None}
                                                       for v, c in f.exact],
            "carried_by": [c or None for c in f.carried_by],
            "reduction": f.dependence.reduction,
        } for f in report.merged],
        "loops": {n: {"parallel": c.parallel, "reduction": c.reduction} for n, c in report.loops.items()},
    }


def _table(rows: Sequence[Sequence[str]]) -> list[str]:
    widths = [max(len(r[k]) for r in rows) for k in range(len(rows[0]))]
    return ["  " + "  ".join(c.ljust(w) for c, w in zip(r, widths)).rstrip() for r in rows]


def deps_text(report: DependenceReportLike) -> str:
    """The dependence table and the loop classes of one kernel."""
    lines = [f"kernel {report.kernel}: {report.analysis} dependences"]
    rows: list[list[str]] = [["kind", "source -> sink", "tensor", "distance", "carried by"]]
    for f in report.merged:
        d = f.dependence
        red = " [reduction]" if d.reduction else ""
        head = [d.kind, f"{d.source} -> {d.sink}", d.tensor]
        if f.exact is not None:  # exact vectors, one row each with the loop that carries it
            for k, (vector, carrier) in enumerate(f.exact):
                dist = "(" + ", ".join(str(x) for x in vector) + ")"
                rows.append((head if k == 0 else ["", "", ""]) + [dist, (carrier or "(loop-independent)") + red])
            continue
        dist = "(" + ", ".join(f.distance) + ")"
        carriers = ", ".join(c if c else "(loop-independent)" for c in f.carried_by)
        rows.append(head + [dist, carriers + red])
    lines += _table(rows) if len(rows) > 1 else ["  (none)"]
    lines.append("loops:")
    rows = [["loop", "parallel", "reduction", ""]]
    for n, c in report.loops.items():
        what = f"{c.occurrences} loops named {n}, decided together" if c.occurrences > 1 else ""
        rows.append([n, "yes" if c.parallel else "no", "yes" if c.reduction else "no", what])
    lines += _table(rows)
    return "\n".join(lines)


def deps_dot(report: DependenceReportLike) -> str:
    """The statement dependence graph as DOT text (``deps --dot``; the report must hold its graph)."""
    if report.graph is None:
        raise ValueError("the report holds no graph: ask polymap.dependences(..., graph=True)")
    return to_dot(report.graph)
