"""``polymap deps FILE [--memory-based] [--plot OUT.png] [--dot OUT.dot]``: dependences.

For every selected kernel: the exact dependences of the original program
(value-based unless ``--memory-based``) per pair of statements and tensor,
with distance vectors and the loops that carry them, and the loop classes
(parallel / reduction). ``--plot`` draws a 2-D slice of an iteration space,
``--dot`` writes the statement dependence graph.
"""
from __future__ import annotations

import json
import sys

from polymap.driver import check_defines, load_program, param_values, parse_defines, select_kernels
from polymap.errors import InputError
from polymap.passes.dependences.depgraph import dependence_graph, to_dot
from polymap.reports.dep_plot import plot_iteration_space
from polymap.passes.dependences.dependences import dependences, group
from polymap.passes.dependences.loop_classes import (
    carrier_of,
    carrying_loops,
    distance_vector,
    exact_distances,
    loop_classes,
)
from polymap.poly import KernelModel, build_model
from polymap.limits import require_tractable


def kernel_deps(model: KernelModel, *, memory: bool) -> dict:
    """The JSON document of ``cli.md`` for one kernel (plus distances and carrying loops)."""
    deps = group(dependences(model, memory=memory))
    classes = loop_classes(model)
    return {
        "kernel": model.kernel.name,
        "analysis": "memory-based" if memory else "value-based",
        "dependences": [{
            "kind": d.kind, "source": d.source, "sink": d.sink, "tensor": d.tensor,
            "relation": str(d.relation),
            "distance": list(distance_vector(model, d)),
            "distances": _exact(model, d),
            "carried_by": [c or None for c in carrying_loops(model, d)],
            "reduction": d.reduction,
        } for d in deps],
        "loops": {n: {"parallel": c.parallel, "reduction": c.reduction} for n, c in classes.items()},
    }


def _exact(model: KernelModel, d) -> list[dict] | None:
    """Each exact distance vector with the loop carrying it, when they are few constants."""
    vectors = exact_distances(model, d)
    if vectors is None:
        return None
    return [{"vector": list(v), "carried_by": carrier_of(v, model, d) or None} for v in vectors]


def _table(rows: list[list[str]]) -> list[str]:
    widths = [max(len(r[k]) for r in rows) for k in range(len(rows[0]))]
    return ["  " + "  ".join(c.ljust(w) for c, w in zip(r, widths)).rstrip() for r in rows]


def kernel_report(model: KernelModel, doc: dict) -> str:
    """Human-readable report: dependence table and loop classes."""
    lines = [f"kernel {doc['kernel']}: {doc['analysis']} dependences"]
    rows = [["kind", "source -> sink", "tensor", "distance", "carried by"]]
    for d in doc["dependences"]:
        red = " [reduction]" if d["reduction"] else ""
        head = [d["kind"], f"{d['source']} -> {d['sink']}", d["tensor"]]
        if d["distances"] is not None:  # exact vectors, one row each with the loop that carries it
            for k, v in enumerate(d["distances"]):
                dist = "(" + ", ".join(str(x) for x in v["vector"]) + ")"
                rows.append((head if k == 0 else ["", "", ""])
                            + [dist, (v["carried_by"] or "(loop-independent)") + red])
            continue
        dist = "(" + ", ".join(d["distance"]) + ")"
        carriers = ", ".join(c if c else "(loop-independent)" for c in d["carried_by"])
        rows.append(head + [dist, carriers + red])
    lines += _table(rows) if len(rows) > 1 else ["  (none)"]
    classes = loop_classes(model)
    lines.append("loops:")
    rows = [["loop", "parallel", "reduction", ""]]
    for n, c in classes.items():
        what = f"{c.occurrences} loops named {n}, decided together" if c.occurrences > 1 else ""
        rows.append([n, "yes" if c.parallel else "no", "yes" if c.reduction else "no", what])
    lines += _table(rows)
    return "\n".join(lines)


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


def main(args) -> int:
    program = load_program(args.file, cpp=args.cpp, limits=args.limits)
    kernels = select_kernels(program, args.kernel)
    defines = parse_defines(args.defines)
    check_defines(program, kernels, defines)
    if not args.plot and (args.loops or args.fix or args.statement):
        raise InputError("--loops, --fix and --statement choose what --plot draws: give --plot OUT.png too")
    models = [build_model(k) for k in kernels]
    for m in models:
        require_tractable(m.kernel, limits=args.limits, model=m, what="the dependence analyses")
    docs = []
    for m in models:
        args.budget.check(f"the {'memory' if args.memory_based else 'value'}-based dependences of kernel "
                          f"'{m.kernel.name}'")
        docs.append(kernel_deps(m, memory=args.memory_based))
    wrote = _pictures(args, models, defines) if args.plot or args.dot else []
    if args.json:
        print(json.dumps(docs[0] if len(docs) == 1 else {"kernels": docs}, indent=2))
    else:
        print("\n\n".join(kernel_report(m, d) for m, d in zip(models, docs)))
    for line in wrote:  # stdout holds only the JSON document with --json
        print(line, file=sys.stderr if args.json else sys.stdout)
    return 0


def _pictures(args, models: list[KernelModel], defines: dict[str, int]) -> list[str]:
    """Write the --dot and --plot files; return the lines saying what was written."""
    if len(models) != 1:
        raise InputError("--plot and --dot need one kernel: pick it with --kernel NAME")
    model = models[0]
    deps = group(dependences(model, memory=args.memory_based))
    wrote: list[str] = []
    if args.dot:
        try:
            with open(args.dot, "w") as f:
                f.write(to_dot(dependence_graph(model, deps)))
        except OSError as exc:
            raise InputError(f"--dot {args.dot}: cannot write: {exc.strerror or exc}") from None
        wrote.append(f"wrote {args.dot}")
    if args.plot:
        loops = None
        if args.loops:
            loops = tuple(x.strip() for x in args.loops.split(","))
            if len(loops) != 2:
                raise InputError(f"--loops {args.loops}: name exactly two loops, e.g. --loops i,j")
        params = param_values(model.kernel, defines)
        if args.window < 2:
            raise InputError(f"--window {args.window}: draw at least 2 values of each loop")
        try:
            picture = plot_iteration_space(model, deps, args.plot, loops=loops, fixed=_fixes(args.fix),
                                           statement=args.statement, params=params, window=args.window)
        except OSError as exc:
            raise InputError(f"--plot {args.plot}: cannot write: {exc.strerror or exc}") from None
        wrote.append(f"wrote {args.plot}: {picture.statement}({', '.join(picture.loops)}), "
                     f"{len(picture.arrows):,} arrows")
        wrote += [f"  note: {n}" for n in picture.notes]
    return wrote
