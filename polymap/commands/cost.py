"""``polymap cost FILE --arch ARCH --mapping M.yaml [--symbolic] [--plot ROOFLINE.png]``.

The exact counts of ``mapping.md`` per level and tensor
(:func:`polymap.passes.counting.counting.count_mapping`), then energy, cycles, the
bottleneck, utilization and intensities
(:func:`polymap.passes.counting.cost_model.evaluate`). A mapping whose spatial loops
need more instances than the architecture has, or whose footprint overflows
a level, is refused (exit 1) naming the level, its capacity and the footprint.
``--symbolic`` formulas that take longer than the time budget (``--budget``)
are refused (exit 2), saying so.
"""
from __future__ import annotations

import json

from polymap.machine.presets import load_architecture
from polymap.reports.cost import report_json, report_text
from polymap.driver import check_defines, load_program, param_values, parse_defines, select_kernels
from polymap.errors import InputError, InvalidMapping
from polymap.mapping.files import load_mapping
from polymap.mapping.model import check_fanout, loop_extents, mapping_loop_extents
from polymap.passes.counting.cost_model import active_compute_units, evaluate
from polymap.passes.counting.variance import variance
from polymap.passes.counting.convention import count_mapping_timeloop
from polymap.passes.counting.counting import capacity_violations, count_mapping
from polymap.passes.counting.symbolic_budget import count_symbolic_within
from polymap.poly import build_model
from polymap.limits import require_tractable


def _kernel(program, args, arch):
    kernels = select_kernels(program, args.kernel)
    if len(kernels) == 1:
        return kernels[0]
    # several kernels: the mapping file's `kernel:` picks one
    return program.kernel(load_mapping(args.mapping, kernel=program, arch=arch, limits=args.limits).kernel)


def _refuse_overfull(kernel, model, mapping, arch, params) -> None:
    problems = check_fanout(mapping, arch, mapping_loop_extents(kernel, mapping, params))
    for v in capacity_violations(model, mapping, arch, params):
        problems.append(f"level {v['level']}: the footprint is {v['footprint']} {v['unit']}, "
                        f"over its capacity of {v['capacity']} {v['unit']}")
    if problems:
        message = f"mapping {mapping_name(mapping)} does not fit:\n  " + "\n  ".join(problems)
        raise InvalidMapping(message, {"kernel": kernel.name, "valid": False, "problems": problems,
                                       "capacity": capacity_violations(model, mapping, arch, params)})


def _export(export: list[str], kernel, mapping, params) -> None:
    """``--export timeloop OUT.yaml``: the mapping in Timeloop's format."""
    from polymap.timeloop.export import export_mapping

    fmt, out = export
    if fmt != "timeloop":
        raise InputError(f"--export {fmt}: the formats are: timeloop")
    try:
        with open(out, "w") as f:
            f.write(export_mapping(kernel, mapping, params))
    except OSError as exc:
        raise InputError(f"--export {out}: cannot write: {exc.strerror or exc}") from None


def mapping_name(mapping) -> str:
    return f"of {mapping.kernel} (nest {mapping.nest})"


def _legality_note(model, mapping) -> list[str]:
    """A note when the mapping would change the results (cost does not require legality)."""
    try:
        from polymap.passes.legality.legality import is_legal_schedule
        from polymap.passes.schedule.tiling import mapped_schedule

        if not is_legal_schedule(model, mapped_schedule(model, mapping)):
            return ["this mapping is illegal (it reorders dependent instances; see `polymap check`); "
                    "the counts describe it anyway"]
    except ImportError:
        pass
    return []


def main(args) -> int:
    """Print the cost report (one JSON document with ``--json``); refuse an over-full mapping."""
    program = load_program(args.file, cpp=args.cpp, limits=args.limits)
    defines = parse_defines(args.defines)
    arch = load_architecture(args.arch, limits=args.limits)
    kernel = _kernel(program, args, arch)
    check_defines(program, (kernel,), defines)
    params = param_values(kernel, defines)
    mapping = load_mapping(args.mapping, kernel=kernel, arch=arch, limits=args.limits)
    model = build_model(kernel)
    require_tractable(kernel, limits=args.limits, model=model, what="the counts")
    _refuse_overfull(kernel, model, mapping, arch, params)
    if args.convention == "timeloop":
        if args.symbolic:
            raise InputError("--convention timeloop counts numbers only: leave out --symbolic")
        counts = count_mapping_timeloop(model, mapping, arch, params=params)
    elif args.symbolic:
        # formulas of deep tilings can take minutes: refused when the budget runs out
        counts = count_symbolic_within(model, mapping, arch, params=params, budget=args.budget)
    else:
        counts = count_mapping(model, mapping, arch, params=params)
    if args.export:
        _export(args.export, kernel, mapping, params)
    extents = mapping_loop_extents(kernel, mapping, params)
    units = active_compute_units(mapping, arch, extents)
    report = evaluate(counts, arch, active_units=units)
    spread = variance(kernel, mapping, arch, report.cycle_terms, extents, params)
    if args.plot:
        from polymap.reports.roofline import plot_roofline

        plot_roofline(report, arch, args.plot)
    if args.json:
        doc = report_json(report, arch, variance=spread)
        if args.convention != "exact":
            doc["convention"] = args.convention
        print(json.dumps(doc, indent=2))
    else:
        notes = _legality_note(model, mapping)
        if args.plot:
            notes.append(f"roofline written to {args.plot}")
        if args.export:
            notes.append(f"mapping written in Timeloop's format to {args.export[1]}")
        if args.convention == "timeloop":
            notes.append("counted with --convention timeloop: outputs start at zero; spatial_reduction levels "
                         "receive combined partial sums")
        print(report_text(report, arch, notes=notes, variance=spread))
    return 0
