"""A mapping of the renamed kernel, said of the kernel as written.

``compile`` renames loops that share a name apart
(:func:`polymap.passes.frontend.rename.distinct_loop_names`) and maps the
renamed kernel. Its ``NAME.json`` must mean the same against the file the
user wrote, where ``j_2`` does not exist: each statement whose iterators were
renamed gets a ``schedule`` entry placing it at its new loops, with its own
iterators as coordinates. For jacobi-2d's second sweep::

    renamed kernel: to_a[t, i_2, j_2]          the original kernel:
    levels: order [t, i, j, i_2, j_2] ...  ->  schedule: {to_a: {t: t, i_2: i, j_2: j}}
                                               levels: order [t, i, j, i_2, j_2] ...

Entries the mapping already has are rewritten in the original iterators.
The mapped schedule is the same one, statement by statement.
"""
from __future__ import annotations

import dataclasses
import re

from polymap import ir
from polymap.mapping.model import Mapping
from polymap.mapping.schedule import ScheduleEntry, entry_of, mapped_nests
from polymap.poly import isl_name


def _substitute(text: str, names: dict[str, str]) -> str:
    return re.sub(r"[A-Za-z_][A-Za-z0-9_]*", lambda m: names.get(m.group(0), m.group(0)), text)


def in_original_terms(original: ir.Kernel, renamed: ir.Kernel, mapping: Mapping) -> Mapping:
    """``mapping`` (of ``renamed``) as a mapping of ``original``: the same schedule, original names."""
    if original is renamed:
        return mapping
    nests = set(mapped_nests(mapping))
    before = {c.name: c for c in original.statements()}
    entries = []
    for ctx in renamed.statements():
        if ctx.nest not in nests:
            continue
        orig = before[ctx.name]
        names = dict(zip(ctx.iterators, orig.iterators))
        isl_names = {isl_name(a): isl_name(b) for a, b in names.items()}
        entry = entry_of(mapping, ctx.name)
        if entry is not None:
            entries.append(ScheduleEntry(ctx.name, entry.loops,
                                         tuple(_substitute(e, names) for e in entry.exprs),
                                         tuple(_substitute(e, isl_names) for e in entry.isl)))
        elif ctx.iterators != orig.iterators:
            entries.append(ScheduleEntry(ctx.name, ctx.iterators, orig.iterators,
                                         tuple(isl_name(x) for x in orig.iterators)))
    return dataclasses.replace(mapping, schedule=tuple(entries))
