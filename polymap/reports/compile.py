"""What ``compile`` reports: ``NAME.json`` (the document every command reads back) and the summary.

``NAME.json`` (:func:`compile_document`), per kernel::

    {"kernel", "params", "arch", "why",
     "mappings": [mapping-file data, one per mapped nest],
     "cost": [the full ``polymap cost`` document of each mapping, in the same order],
     "choice": {"renamed", "nests": [{"nest", "chosen", "objective", "stopped", "skipped",
                                      "scheduler_seconds", "candidates"}]}}

Given back as ``--mapping``, every command reads its ``mappings``
(:mod:`polymap.mapping.documents`). The summary (:func:`summary_lines`)
states every decision per nest, tiles, orders, spatial loops (only those
that run more than one iteration) and binding, then what was verified::

    kernel gemm: the best legal, fitting candidate of each nest by exact counts (fewest cycles, then energy)
      nest 0: register tiles
        L2   tile i=64,j=256,k=256  order j,k,i  keeps A, B, C
        ...
      verified against the reference (c, numpy) at 3 size vectors exercising every tile edge:
        largest absolute difference 9.2e-05 (C, numpy),
        3.2e-07 of C's largest magnitude; the tolerance on that ratio is 1.2e-05
"""
from __future__ import annotations

from typing import Any, Mapping as MappingT, Sequence

from polymap.codegen.verify_sizes import SizedVerification
from polymap.machine.arch import Architecture
from polymap.mapping.model import Mapping, trip_counts
from polymap.passes.counting.cost_model import CostReport, Objective
from polymap.passes.search.choice import Candidate, KernelChoice, NestChoice
from polymap.passes.search.isl_schedule import describe as describe_schedule
from polymap.reports.cost import report_json

OBJECTIVE_WORDS = {Objective.CYCLES: "fewest cycles, then energy", Objective.ENERGY: "least energy, then cycles",
                   Objective.EDP: "smallest energy-delay product, then cycles"}


def choice_json(choice: KernelChoice) -> dict[str, Any]:
    """The ranking of every nest's candidates."""
    nests = []
    for nc in choice.nests:
        cands = []
        for c in nc.candidates:
            entry: dict[str, Any] = {"source": c.source, "legal": c.legal, "chosen": c is nc.chosen}
            if c.report is not None:
                entry.update(cycles=c.report.cycles, energy_pj=c.report.energy_pj)
            if c.strided is not None:  # the tie-break between equal cycles (choice.rank)
                entry["strided"] = c.strided
            if c.problems:
                entry["problems"] = list(c.problems)
            if c.fit:
                entry["fit"] = [p.to_json() for p in c.fit]
            cands.append(entry)
        nests.append({"nest": nc.nest, "chosen": nc.chosen.source, "objective": nc.objective.value,
                      "original_schedule": nc.chosen.mapping is None, "stopped": list(nc.stopped),
                      "skipped": list(nc.skipped), "scheduler_seconds": nc.scheduler_seconds,
                      "candidates": cands})
    return {"renamed": {str(n): list(x) for n, x in choice.renamed},
            "expanded": {s: loop for s, loop in choice.expanded}, "nests": nests}


def compile_document(kernel: str, params: MappingT[str, int], arch: Architecture, why: str,
                     mappings: Sequence[Mapping], costs: Sequence[CostReport | None],
                     choice: KernelChoice | None, extra: MappingT[str, Any] | None = None) -> dict[str, Any]:
    """``NAME.json``: the mappings, each one's cost document, the choice when there was one, and ``extra``."""
    doc: dict[str, Any] = {"kernel": kernel, "params": dict(params), "arch": arch.name, "why": why,
                           "mappings": [m.to_dict() for m in mappings],
                           "cost": [None if r is None else report_json(r, arch) for r in costs]}
    if choice is not None:
        doc["choice"] = choice_json(choice)
    doc.update(extra or {})
    return doc


def with_outcome(doc: dict[str, Any], files: Sequence[str], verification: SizedVerification | None) -> dict[str, Any]:
    """``compile --json``'s entry of one kernel: ``NAME.json``'s document, the files and the verification."""
    out = dict(doc, files=list(files))
    if verification is not None:
        out["verification"] = verification.to_dict()
    return out


# --------------------------------------------------------------------------- the summary


def level_text(mapping: Mapping, k: int, extents: MappingT[str, int], all_tensors: Sequence[str]) -> str:
    """One level's decisions: tile, order, spatial loops that run more than once, binding."""
    lv = mapping.levels[k]
    tile = {x: t for x, t in zip(mapping.loops, lv.tile) if t is not None}
    text = lv.level.ljust(max(len(m.level) for m in mapping.levels))
    if k > 0:
        text += "  tile " + (",".join(f"{x}={t}" for x, t in tile.items()) if tile else "whole")
    else:
        text += "  (the whole nest)"
    trips = trip_counts(mapping, k, extents)
    walked = [x for x in lv.order if trips.get(x, 0) > 1 and x not in lv.spatial]
    text += "  order " + (",".join(walked) if walked else "(one iteration)")
    spatial = [f"{x} ({trips[x]} instances)" for x in lv.spatial if trips.get(x, 0) > 1]
    if spatial:
        text += "  spatial " + ", ".join(spatial)
    if tuple(lv.keep) == tuple(all_tensors):
        text += "  keeps every tensor"
    elif lv.keep:
        text += "  keeps " + ", ".join(lv.keep) + "; bypassed: " + ", ".join(
            t for t in all_tensors if t not in lv.keep)
    else:
        text += "  keeps nothing (bypassed)"
    return text


def candidate_line(cand: Candidate, chosen: Candidate) -> str:
    mark = "*" if cand is chosen else " "
    if cand.report is not None:
        return (f"  {mark} {cand.source:16s} cycles {cand.report.cycles:.3g}, energy {cand.report.energy_pj:.3g} pJ, "
                f"bottleneck {cand.report.bottleneck}")
    if cand.legal or cand.legal is None:  # None: not checked (its compute term lost), not rejected
        return f"  {mark} {cand.source:16s} {cand.problems[0] if cand.problems else 'not counted'}"
    return f"  {mark} {cand.source:16s} rejected: {cand.problems[0] if cand.problems else 'no counts'}"


def nest_choice_lines(choice: NestChoice) -> list[str]:
    """What was chosen for the nest and why: the ranking, then traffic and intensity per level."""
    c = choice.chosen
    what = "the original schedule" if c.mapping is None else c.source
    lines = [f"nest {choice.nest}: {what} ({OBJECTIVE_WORDS[choice.objective]}, among legal fitting candidates)"]
    lines += [candidate_line(cand, c) for cand in choice.candidates]
    for s in choice.stopped:
        lines.append(f"    note: {s} (a wall-clock limit, so this choice may differ on a faster machine)")
    for s in choice.skipped:
        lines.append(f"    note: {s}")
    if choice.scheduler_seconds is not None:
        lines.append(f"    isl's scheduler, with building its candidates: {choice.scheduler_seconds:.2f} s")
    if c.report is not None:
        intensity = dict(c.report.intensity)
        for lv in c.report.counts.levels:
            i = intensity.get(lv.name)
            lines.append(f"    {lv.name:6s} {lv.reads + lv.updates} elements to inner levels, intensity "
                         f"{'-' if i is None else f'{i:.3g}'} instances/element")
    return lines


def verification_line(result: SizedVerification) -> str:
    """The verification in words where each number says what it is."""
    targets = ", ".join(t.target for t in result.results[0].targets) if result.results else "-"
    largest = result.largest()
    if largest is None:
        return f"verified against the reference ({targets}): no output to compare"
    target, c = largest
    verdict = "within" if c.passed else "OVER"
    return (f"verified against the reference ({targets}) at {result.what()}: largest absolute "
            f"difference {c.max_abs:.3g} "
            f"(tensor {c.tensor}, {target} code), which is {c.max_rel:.3g} of the largest magnitude in the "
            f"reference {c.tensor}; {verdict} the tolerance of {c.tolerance:.3g} on that ratio")


def summary_lines(kernel: str, why: str, mappings: Sequence[Mapping], extents: Sequence[MappingT[str, int]],
                  tensors: Sequence[Sequence[str]], nests: int, choice: KernelChoice | None,
                  files: Sequence[str], verification: SizedVerification | None) -> list[str]:
    """compile's human summary of one kernel (``extents`` and ``tensors``: per mapping)."""
    lines = [f"kernel {kernel}: {why}"]
    if choice is not None:
        for nest, names in choice.renamed:
            lines.append(f"  nest {nest}: loops sharing a name ({', '.join(names)}) renamed apart")
        for scalar, loop in choice.expanded:
            lines.append(f"  scalar {scalar} expanded along loop {loop} ({scalar}[{loop}]): no value passes "
                         f"between iterations of {loop}, so {loop} may move")
        for nc in choice.nests:
            lines += ["  " + line for line in nest_choice_lines(nc)]
            if nc.chosen.mapping is not None:  # a schedule (skew, shift, fusion) in words
                lines += ["    " + line for line in describe_schedule(nc.chosen.mapping, choice.model)]
    mapped = {m.nest for m in mappings}
    for m, ext, keep in zip(mappings, extents, tensors):
        lines.append(f"  nest {m.nest} mapping:")
        lines += [f"    {level_text(m, k, ext, keep)}" for k in range(len(m.levels))]
    rest = [str(n) for n in range(nests) if n not in mapped]
    if rest:
        lines.append(f"  nest{'s' if len(rest) > 1 else ''} {', '.join(rest)}: original schedule")
    if files:
        lines.append("  wrote " + ", ".join(files))
    if verification is not None:
        lines.append("  " + verification_line(verification))
    return lines
