"""What the HTML report of one kernel shows, gathered before anything is rendered.

Before: a kernel, an architecture, a mapping (or none: the default choice of
every nest), the parameter values. After: a :class:`KernelFacts` holding the
numbers and the pictures (as SVG text) of every section::

    facts = gather(kernel, arch, mappings, params, options=ReportOptions(loops=("i", "j")))
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
from polymap.codegen.c.emitter import emit_c
from polymap.errors import PolymapError
from polymap.machine.arch import Architecture
from polymap.mapping.model import Mapping, mapping_loop_extents
from polymap.passes.counting.cost_model import CostReport, mapping_execution, evaluate
from polymap.passes.counting.counting import count_mapping
from polymap.passes.counting.fit import fanout_problems, capacity_problems
from polymap.passes.dependences.dependences import Dependence, dependences, group
from polymap.passes.dependences.loop_classes import LoopClass, loop_classes
from polymap.passes.legality.legality import Verdict, check_mapping
from polymap.poly import KernelModel, build_model
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
    mapping_source: str  # "given" | "default choice" | "none"
    extents: dict[str, int]
    classes: dict[str, LoopClass]
    deps: tuple[Dependence, ...]
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


def gather(kernel: ir.Kernel, arch: Architecture, mappings: tuple[Mapping, ...], params: MappingT[str, int], *,
           source: str, options: ReportOptions = ReportOptions()) -> KernelFacts:
    """Every section's data for ``kernel`` under ``mappings`` (the first is the one costed and checked)."""
    model = build_model(kernel)
    deps = tuple(group(dependences(model)))
    classes = loop_classes(model)
    mapping = mappings[0] if mappings else None
    verdict = check_mapping(model, mapping, arch=arch, params=params) if mapping is not None else None
    cost, refusal, extents = None, "", {}
    if mapping is not None:
        extents = mapping_loop_extents(kernel, mapping, params, model=model)
        cost, refusal = _cost(model, mapping, arch, params, extents)
    roof = roofline_data(cost, arch) if cost is not None else None
    roof_svg = _svg(lambda buf: draw_roofline(roof, buf, fmt="svg")) if roof is not None else ""
    picture, pic_svg, pic_refusal, labels = _slice(model, list(deps), verdict, params, options)
    legal = verdict is None or verdict.legal
    code, code_refusal = "", ""
    if legal:
        code = emit_c(kernel, model, mappings, params=params)
    else:
        code_refusal = "no code: the mapping is illegal, so the tiled code would compute something else"
    return KernelFacts(kernel, arch, dict(params), mapping, source if mapping is not None else "none", extents,
                       classes, deps, verdict, cost, refusal, roof, roof_svg, picture, pic_svg, pic_refusal,
                       labels, code, code_refusal)


def _cost(model: KernelModel, mapping: Mapping, arch: Architecture, params: MappingT[str, int],
          extents: MappingT[str, int]) -> tuple[CostReport | None, str]:
    problems = [p.describe() for p in fanout_problems(mapping, arch, extents)]
    problems += [p.describe() for p in capacity_problems(model, mapping, arch, params)]
    if problems:
        return None, "the mapping does not fit: " + "; ".join(problems)
    counts = count_mapping(model, mapping, arch, params=dict(params))
    return evaluate(counts, arch, execution=mapping_execution(model, mapping, arch, extents)), ""


def _slice(model: KernelModel, deps: list[Dependence], verdict: Verdict | None, params: MappingT[str, int],
           options: ReportOptions) -> tuple[SlicePicture | None, str, str, tuple[str, ...]]:
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
