"""``polymap deps FILE [--memory-based] [--plot OUT.png] [--dot OUT.dot]``: dependences.

For every selected kernel: the exact dependences of the original program
(value-based unless ``--memory-based``) per pair of statements and tensor,
with distance vectors and the loops that carry them, and the loop classes
(parallel / reduction). ``--plot`` draws a 2-D slice of an iteration space,
``--dot`` writes the statement dependence graph.
"""
from __future__ import annotations

import argparse
import json
import sys

from polymap import api
from polymap.commands.common import parse_fixes
from polymap.driver import check_defines, load_program, param_values, parse_defines, select_kernels
from polymap.errors import InputError
from polymap.reports.dep_plot import plot_iteration_space
from polymap.reports.deps import deps_dot, deps_json, deps_text


def main(args: argparse.Namespace) -> int:
    program = load_program(args.file, cpp=args.cpp, limits=args.limits)
    kernels = select_kernels(program, args.kernel)
    defines = parse_defines(args.defines)
    check_defines(program, kernels, defines)
    if not args.plot and (args.loops or args.fix or args.statement):
        raise InputError("--loops, --fix and --statement choose what --plot draws: give --plot OUT.png too")
    if (args.plot or args.dot) and len(kernels) != 1:
        raise InputError("--plot and --dot need one kernel: pick it with --kernel NAME")
    reports = []
    for k in kernels:
        args.budget.check(f"the {'memory' if args.memory_based else 'value'}-based dependences of kernel "
                          f"'{k.name}'")
        reports.append(api.dependences(k, memory_based=args.memory_based, graph=bool(args.dot),
                                       limits=args.limits))
    wrote = _pictures(args, reports[0], defines) if args.plot or args.dot else []
    if args.json:
        docs = [deps_json(r) for r in reports]
        print(json.dumps(docs[0] if len(docs) == 1 else {"kernels": docs}, indent=2))
    else:
        print("\n\n".join(deps_text(r) for r in reports))
    for line in wrote:  # stdout holds only the JSON document with --json
        print(line, file=sys.stderr if args.json else sys.stdout)
    return 0


def _pictures(args: argparse.Namespace, report: api.DependenceReport, defines: dict[str, int]) -> list[str]:
    """Write the --dot and --plot files of the report; return the lines saying what was written."""
    wrote: list[str] = []
    if args.dot:
        try:
            with open(args.dot, "w") as f:
                f.write(deps_dot(report))
        except OSError as exc:
            raise InputError(f"--dot {args.dot}: cannot write: {exc.strerror or exc}") from None
        wrote.append(f"wrote {args.dot}")
    if args.plot:
        loops = None
        if args.loops:
            loops = tuple(x.strip() for x in args.loops.split(","))
            if len(loops) != 2:
                raise InputError(f"--loops {args.loops}: name exactly two loops, e.g. --loops i,j")
        model = report.model
        params = param_values(model.kernel, defines)
        if args.window < 2:
            raise InputError(f"--window {args.window}: draw at least 2 values of each loop")
        try:
            picture = plot_iteration_space(model, [f.dependence for f in report.merged], args.plot, loops=loops,
                                           fixed=parse_fixes(args.fix), statement=args.statement, params=params,
                                           window=args.window)
        except OSError as exc:
            raise InputError(f"--plot {args.plot}: cannot write: {exc.strerror or exc}") from None
        wrote.append(f"wrote {args.plot}: {picture.statement}({', '.join(picture.loops)}), "
                     f"{len(picture.arrows):,} arrows")
        wrote += [f"  note: {n}" for n in picture.notes]
    return wrote
