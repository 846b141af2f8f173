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

from polymap import api
from polymap.driver import check_defines, load_program, param_values, parse_defines, select_kernels
from polymap.errors import InputError
from polymap.passes.dependences.depgraph import dependence_graph, to_dot
from polymap.passes.dependences.dependences import group
from polymap.reports.deps import deps_json, deps_text
from polymap.reports.dep_plot import plot_iteration_space


def _fixes(items: list[str]) -> dict[str, int]:
    out = {}
    for item in items:
        name, sep, value = item.partition("=")
        name = name.strip()
        if not sep or not name.isidentifier():
            raise InputError(f"--fix {item}: expected LOOP=VALUE")
        try:
            v = int(value)
        except ValueError:
            raise InputError(f"--fix {item}: expected LOOP=VALUE with an integer value") from None
        if name in out and out[name] != v:
            raise InputError(f"--fix {item}: loop '{name}' is already fixed at {out[name]}")
        out[name] = v
    return out


def main(args: argparse.Namespace) -> int:
    program = load_program(args.file)
    kernels = select_kernels(program, args.kernel)
    defines = parse_defines(args.defines)
    check_defines(program, kernels, defines)
    if not args.plot and (args.loops or args.fix or args.statement):
        raise InputError("--loops, --fix and --statement choose what --plot draws: give --plot OUT.png too")
    reports = [api.dependences(k, memory_based=args.memory_based) for k in kernels]
    if args.plot or args.dot:
        _pictures(args, reports, defines)
    if args.json:
        docs = [deps_json(r) for r in reports]
        print(json.dumps(docs[0] if len(docs) == 1 else {"kernels": docs}, indent=2))
    else:
        print("\n\n".join(deps_text(r) for r in reports))
    return 0


def _pictures(args: argparse.Namespace, reports: list[api.DependenceReport], defines: dict[str, int]) -> None:
    if len(reports) != 1:
        raise InputError("--plot and --dot need one kernel: pick it with --kernel NAME")
    model = reports[0].model
    deps = group(list(reports[0].dependences))
    if args.dot:
        try:
            with open(args.dot, "w") as f:
                f.write(to_dot(dependence_graph(model, deps)))
        except OSError as exc:
            raise InputError(f"--dot {args.dot}: cannot write: {exc.strerror or exc}") from None
    if args.plot:
        loops = None
        if args.loops:
            loops = tuple(x.strip() for x in args.loops.split(","))
            if len(loops) != 2:
                raise InputError(f"--loops {args.loops}: name exactly two loops, e.g. --loops i,j")
        params = param_values(model.kernel, defines)
        try:
            plot_iteration_space(model, deps, args.plot, loops=loops, fixed=_fixes(args.fix),
                                 statement=args.statement, params=params)
        except OSError as exc:
            raise InputError(f"--plot {args.plot}: cannot write: {exc.strerror or exc}") from None
