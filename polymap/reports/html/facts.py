"""What the HTML report of one kernel shows, gathered before anything is rendered.

:func:`polymap.api.report_facts` gathers a :class:`KernelFacts` per kernel
(dependences, legality, cost, code: the API's own answers); this module
holds the record and turns two of its parts into pictures: the iteration
space (:func:`slice_section`) and the roofline (:func:`roofline_section`)::

    facts = polymap.api.report_facts([kernel], arch="toy", params=sizes)[0]
    facts.verdict.legal, facts.cost.energy_pj, facts.slice.arrows, facts.c_source

The slice picture goes through a legality witness when the mapping is
illegal (its statement, its values of the loops not drawn, a window around
it), and rings the witness's two instances.
"""
from __future__ import annotations

import io
from dataclasses import dataclass, field
from typing import Callable, Mapping as MappingT

from polymap import ir
from polymap.errors import PolymapError
from polymap.machine.arch import Architecture
from polymap.mapping.model import Mapping
from polymap.passes.counting.cost_model import CostReport
from polymap.passes.dependences.dependences import Dependence
from polymap.passes.dependences.loop_classes import DependenceFacts, LoopClass
from polymap.passes.legality.legality import Verdict
from polymap.poly import KernelModel
from polymap.reports.dep_plot import SlicePicture, draw, slice_picture
from polymap.reports.roofline import RooflineData, draw_roofline, roofline_data


@dataclass(frozen=True)
class ReportOptions:
    loops: tuple[str, str] | None = None  # the two loops of the iteration-space picture
    fixed: dict[str, int] = field(default_factory=dict)  # values of the loops not drawn
    statement: str | None = None
    window: int = 8


@dataclass(frozen=True)
class KernelFacts:
    kernel: ir.Kernel
    arch: Architecture
    params: dict[str, int]
    mapping: Mapping | None  # the mapping the cost, legality and tile sections are about
    mapping_source: str  # "given" | "compile's choice" | "none"
    extents: dict[str, int]
    classes: dict[str, LoopClass]
    deps: tuple[DependenceFacts, ...]  # merged per kind, statements and tensor, with distances
    verdict: Verdict | None
    cost: CostReport | None
    cost_refusal: str  # why there is no cost ("" when there is one)
    roofline: RooflineData | None
    roofline_svg: str
    slice: SlicePicture | None
    slice_svg: str
    slice_refusal: str
    witness_labels: tuple[str, ...]
    c_source: str
    code_refusal: str


def _svg(draw_to: Callable[[io.StringIO], object]) -> str:
    buf = io.StringIO()
    draw_to(buf)
    text = buf.getvalue()
    return text[text.index("<svg"):] if "<svg" in text else text


def roofline_section(cost: CostReport | None, arch: Architecture) -> tuple[RooflineData | None, str]:
    """The roofline's numbers and its SVG (none without a cost)."""
    if cost is None:
        return None, ""
    roof = roofline_data(cost, arch)
    return roof, _svg(lambda buf: draw_roofline(roof, buf, fmt="svg"))


def slice_section(model: KernelModel, deps: list[Dependence], verdict: Verdict | None,
                  params: MappingT[str, int], options: ReportOptions) -> tuple[SlicePicture | None, str, str, tuple[str, ...]]:
    """The iteration-space picture, through the first witness when there is one."""
    witness = next((v.witness for v in (verdict.violations if verdict else ()) if v.witness is not None), None)
    statement, fixed, start = options.statement, dict(options.fixed), None
    loops = options.loops
    if witness is not None and not options.fixed and options.statement is None:
        sink = witness.sink
        its = model.statement(sink.statement).loops
        if len(its) >= 2:
            statement = sink.statement
            loops = loops if loops and set(loops) <= set(its) else (its[-2], its[-1])
            values = dict(sink.values)
            fixed = {n: v for n, v in values.items() if n not in loops}
            start = {n: values[n] - options.window // 2 for n in loops}
    try:
        picture = slice_picture(model, deps, loops=loops, fixed=fixed, statement=statement, params=params,
                                window=options.window, start=start)
    except PolymapError as exc:
        return None, "", exc.render(), ()
    rings = []
    if witness is not None:
        for role, inst in (("source", witness.source), ("sink", witness.sink)):
            where = picture.position(inst.statement, dict(inst.values))
            if where is not None:
                rings.append((f"witness {role}: {inst}", where))
    svg = _svg(lambda buf: draw(picture, buf, fmt="svg", highlight=tuple(rings)))
    return picture, svg, "", tuple(label for label, _ in rings)
