"""The polyhedral model of ``polymap show``, as JSON and as a report for people.

The JSON document is the one of ``cli.md``: sets and maps are ISL strings,
symbolic in the parameters, that ``isl.Set``/``isl.Map`` parse back to the
model's exact sets (domains and relations keep the context constraints).
The human report drops what the reader already knows: the parameter
prefix, the context constraints inside each domain (ISL ``gist``) and the
domain constraints inside schedules and access relations::

    statement acc: C[i, j] += A[i, k] * B[k, j]   (line 10)
      domain    { acc[i, j, k] : 0 <= i < M and 0 <= j < N and 0 <= k < K }
      schedule  { acc[i, j, k] -> [0, i, 0, j, 1, k, 0] }
      accesses  read   A  { acc[i, j, k] -> A[i, k] }
"""
from __future__ import annotations

import re
from typing import Any, Mapping, Sequence

from polymap import ir, pretty
from polymap.errors import Diagnostic
from polymap.poly import KernelModel, StatementModel

_PARAMS_PREFIX = re.compile(r"^\s*\[[^\]]*\]\s*->\s*")


# --------------------------------------------------------------------------- JSON


def tensor_json(decl: ir.Decl) -> dict[str, Any]:
    """``{"name", "role", "dtype", "shape": [extent text, ...]}``."""
    return {"name": decl.name, "role": decl.role, "dtype": decl.dtype,
            "shape": [pretty.expr(e) for e in decl.shape]}


def statement_json(stmt: StatementModel) -> dict[str, Any]:
    """Name, loops, domain, schedule and accesses of one statement, ISL text for sets and maps."""
    return {
        "name": stmt.name,
        "loops": list(stmt.loops),
        "domain": str(stmt.domain),
        "schedule": str(stmt.schedule),
        "accesses": [{"tensor": a.tensor, "kind": a.kind, "relation": str(a.relation)}
                     for a in stmt.accesses],
    }


def kernel_json(model: KernelModel, params: Mapping[str, int | None]) -> dict[str, Any]:
    """One entry of ``show``'s ``kernels`` list; ``params`` gives the numbers (None: unknown)."""
    k = model.kernel
    return {
        "name": k.name,
        "params": {p: params.get(p) for p in k.param_names},
        "context": str(model.context),
        "tensors": [tensor_json(d) for d in k.decls],
        "statements": [statement_json(s) for s in model.statements],
    }


# --------------------------------------------------------------------------- human report


def readable(obj: object) -> str:
    """ISL text without the ``[M, N] ->`` parameter prefix."""
    return _PARAMS_PREFIX.sub("", str(obj))


def context_text(model: KernelModel) -> str:
    """The context's constraints only: ``M > 0 and N > 0`` (``true`` when there are none)."""
    m = re.search(r"\{\s*:\s*(.*?)\s*\}\s*$", str(model.context))
    return m.group(1) if m else "true"


def _table(rows: Sequence[Sequence[str]], indent: str) -> list[str]:
    widths = [max(len(r[c]) for r in rows) for c in range(len(rows[0]) - 1)]
    return [indent + "  ".join(cell.ljust(w) for cell, w in zip(r, widths)) + "  " + r[-1]
            for r in rows]


def statement_lines(model: KernelModel, stmt: StatementModel) -> list[str]:
    """The block of one statement: header, domain, schedule and an access table."""
    source = pretty.node_lines(stmt.stmt, 0)[0]
    if stmt.stmt.explicit_label:
        source = source.split(":", 1)[1].strip()
    where = f"   (line {stmt.stmt.loc.line})" if stmt.stmt.loc.line > 0 else ""
    domain = stmt.domain.gist_params(model.context)
    lines = [f"  statement {stmt.name}: {source}{where}",
             f"    loops     {', '.join(stmt.loops) if stmt.loops else '(none)'}",
             f"    domain    {readable(domain)}",
             f"    schedule  {readable(stmt.schedule.gist_domain(stmt.domain))}"]
    rows = [(a.kind, a.tensor, readable(a.relation.gist_domain(stmt.domain))) for a in stmt.accesses]
    table = _table(rows, "") if rows else ["(none)"]
    lines.append(f"    accesses  {table[0]}")
    lines += [f"              {row}" for row in table[1:]]
    return lines


def kernel_report(model: KernelModel, params: Mapping[str, int | None],
                  warnings: Sequence[Diagnostic] = ()) -> str:
    """The human block of one kernel: parameters, context, tensors, statements, warnings."""
    k = model.kernel
    shown = ", ".join(f"{p} = {'?' if params.get(p) is None else params[p]}" for p in k.param_names)
    lines = [f"kernel {k.name}({shown})",
             f"  context   {context_text(model)}",
             f"  time      {model.time_dims} dimensions (2d+1 original schedule)",
             "  tensors"]
    rows = [(d.role, d.name + (f"[{', '.join(pretty.expr(e) for e in d.shape)}]" if d.shape else ""),
             d.dtype) for d in k.decls]
    lines += _table(rows, "    ") if rows else ["    (none)"]
    for stmt in model.statements:
        lines.append("")
        lines += statement_lines(model, stmt)
    if warnings:
        lines += ["", "  warnings"]
        lines += [f"    {d.render().splitlines()[0]}" for d in warnings]
    return "\n".join(lines)
