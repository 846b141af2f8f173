"""``polymap cost FILE --arch ARCH --mapping M.yaml [--symbolic] [--plot ROOFLINE.png]``.

One call of :func:`polymap.api.cost_nests` (exact counts, energy, cycles,
bottleneck, utilization and intensities of each mapping the file holds: one,
or one per nest for ``compile``'s ``NAME.json``), rendered by
:mod:`polymap.reports.cost`. A mapping whose spatial loops need more
instances than the architecture has, or whose footprint overflows a level,
is refused (exit 1) naming the level, its capacity and the footprint.
``--symbolic`` formulas that take longer than the time budget (``--budget``)
are refused (exit 2), saying so.
"""
from __future__ import annotations

import argparse
import json

from polymap import api, ir
from polymap.driver import check_defines, load_program, parse_defines, select_kernels
from polymap.errors import InputError
from polymap.reports.cost import cost_nests_json, report_text
from polymap.reports.roofline import plot_roofline


def options_of(args: argparse.Namespace) -> api.CostOptions:
    """The cost options the flags ask for."""
    return api.CostOptions(symbolic=args.symbolic, convention=args.convention)


def _kernel(program: ir.Program, args: argparse.Namespace, arch: api.Architecture) -> ir.Kernel:
    kernels = select_kernels(program, args.kernel)
    if len(kernels) == 1:
        return kernels[0]
    # several kernels: the mapping file's `kernel:` picks one
    return program.kernel(api.mappings_of(program, args.mapping, arch, limits=args.limits)[0].kernel)


def main(args: argparse.Namespace) -> int:
    """Print the cost report (one JSON document with ``--json``); refuse an over-full mapping."""
    program = load_program(args.file, cpp=args.cpp, limits=args.limits)
    defines = parse_defines(args.defines)
    arch = api.architecture(args.arch, limits=args.limits)
    kernel = _kernel(program, args, arch)
    check_defines(program, (kernel,), defines)
    params = {k: v for k, v in defines.items() if k in kernel.param_names}
    nests = api.cost_details(kernel, args.mapping, arch=arch, params=params, options=options_of(args),
                             budget=args.budget, limits=args.limits)
    if args.export:
        _export(args.export, kernel, nests, arch, params)
    if args.plot:
        plot_roofline(nests[0].report, arch, args.plot)
    if args.json:
        doc = cost_nests_json([n.report for n in nests], arch, [n.spread for n in nests])
        if args.convention != "exact":
            doc["convention"] = args.convention
        print(json.dumps(doc, indent=2))
        return 0
    texts = []
    for nest in nests:
        notes = [] if nest.legal else [
            "this mapping is illegal (it reorders dependent instances; see `polymap check`); "
            "the counts describe it anyway"]
        if args.plot:
            notes.append(f"roofline written to {args.plot}")
        if args.export:
            notes.append(f"mapping written in Timeloop's format to {args.export[1]}")
        if args.convention == "timeloop":
            notes.append("counted with --convention timeloop: outputs start at zero; spatial_reduction levels "
                         "receive combined partial sums")
        head = f"nest {nest.mapping.nest}:\n" if len(nests) > 1 else ""
        texts.append(head + report_text(nest.report, arch, notes=notes, variance=nest.spread))
    print("\n\n".join(texts))
    return 0


def _export(export: list[str], kernel: ir.Kernel, nests: tuple[api.NestCost, ...], arch: api.Architecture,
            params: dict[str, int]) -> None:
    """``--export timeloop OUT.yaml``: the mapping in Timeloop's format."""
    fmt, out = export
    if fmt != "timeloop":
        raise InputError(f"--export {fmt}: the formats are: timeloop")
    if len(nests) != 1:
        raise InputError(f"--export {fmt}: a Timeloop mapping holds one nest; the file holds {len(nests)}")
    text = api.export_timeloop(kernel, nests[0].mapping, arch=arch, params=params)
    try:
        with open(out, "w") as f:
            f.write(text)
    except OSError as exc:
        raise InputError(f"--export {out}: cannot write: {exc.strerror or exc}") from None
