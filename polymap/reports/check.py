"""The verdict of ``polymap check`` as JSON (``cli.md``) and in words, one violation and its witness a block::

    kernel seidel2d: loop order (t, j, i) is ILLEGAL
      violation 1 (RAW relax -> relax on A):
        relax(t=0, i=1, j=2) writes A[1,2], which relax(t=0, i=2, j=1) reads; the new order runs the read first
"""
from __future__ import annotations

from typing import Any

from polymap.passes.legality.legality import Verdict


def verdict_json(kernel: str, verdict: Verdict) -> dict[str, Any]:
    """The JSON document of one kernel's verdict."""
    return {"kernel": kernel, "legal": verdict.legal,
            "violations": [v.to_json() for v in verdict.violations],
            "notes": list(verdict.notes), "hints": list(verdict.hints)}


def verdict_report(kernel: str, what: str, verdict: Verdict) -> str:
    """The verdict in words: ``what`` (an order or a mapping) is legal or not, and why."""
    head = f"kernel {kernel}: {what} is {'legal' if verdict.legal else 'ILLEGAL'}"
    lines = [head]
    for k, v in enumerate(verdict.violations, 1):
        pair = f" {v.source} -> {v.sink} on {v.tensor}" if v.source else ""
        lines.append(f"  violation {k} ({v.kind}{pair}):")
        lines.append(f"    {v.reason}")
    for n in verdict.notes:
        lines.append(f"  note: {n}")
    for h in verdict.hints:
        lines.append(f"  hint: {h}")
    return "\n".join(lines)
