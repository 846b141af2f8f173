"""``polymap check FILE (--order i,k,j | --mapping M.yaml [--arch ARCH])``: is it legal?

Exit 0 when the loop order or the mapping keeps every read's writer and
every element's final writer (and, for a mapping, its spatial loops carry
no dependence the generated code cannot combine, and it fits the
architecture); exit 1 otherwise, with one concrete witness per violation.
"""
from __future__ import annotations

import argparse
import json

import yaml

from polymap import api, ir
from polymap.commands.common import mapping_arch
from polymap.driver import check_defines, load_program, param_values, parse_defines, select_kernels
from polymap.errors import IllegalTransformation, InputError
from polymap.mapping.model import nest_loops
from polymap.limits import require_tractable
from polymap.passes.legality.legality import Verdict
from polymap.machine.arch import Architecture
from polymap.machine.presets import load_architecture
from polymap.passes.legality.legality import check_mapping
from polymap.passes.schedule.suggest import suggested_mapping
from polymap.poly import KernelModel, build_model


def parse_order(kernel: ir.Kernel, text: str) -> tuple[int, tuple[str, ...], tuple[str, ...]]:
    """``"i,k,j"`` -> (nest, nest loops, order); unknown or repeated names are an ``InputError``."""
    order = tuple(x.strip() for x in text.split(",") if x.strip())
    if not order:
        raise InputError(f"--order {text!r}: name the loops outer -> inner, e.g. --order i,k,j")
    dup = [x for x in order if order.count(x) > 1]
    if dup:
        raise InputError(f"--order {text}: loop '{dup[0]}' is named twice")
    for nest in range(len(kernel.nests())):
        loops = nest_loops(kernel, nest)
        if all(x in loops for x in order):
            return nest, loops, order
    known = ", ".join("(" + ", ".join(nest_loops(kernel, n)) + ")" for n in range(len(kernel.nests())))
    missing = [x for x in order if all(x not in nest_loops(kernel, n) for n in range(len(kernel.nests())))]
    what = f"kernel '{kernel.name}' has no loop '{missing[0]}'" if missing else "no single nest holds all these loops"
    raise InputError(f"--order {text}: {what} (its nests' loops: {known or 'none'})")


def verdict_json(kernel: str, verdict: Verdict) -> dict:
    return {"kernel": kernel, "legal": verdict.legal,
            "violations": [v.to_json() for v in verdict.violations],
            "notes": list(verdict.notes), "hints": list(verdict.hints)}


def verdict_report(kernel: str, what: str, verdict: Verdict) -> str:
    head = f"kernel {kernel}: {what} is {'legal' if verdict.legal else 'ILLEGAL'}"
    lines = [head]
    for k, v in enumerate(verdict.violations, 1):
        pair = f" {v.source} -> {v.sink} on {v.tensor}" if v.source else ""
        lines.append(f"  violation {k} ({v.kind}{pair}):")
        lines.append(f"    {v.reason}")
    for n in verdict.notes:
        lines.append(f"  note: {n}")
    for h in verdict.hints:
        lines.append(f"  hint: {h}")
    return "\n".join(lines)


def main(args: argparse.Namespace) -> int:
    program = load_program(args.file, cpp=args.cpp, limits=args.limits)
    kernels = select_kernels(program, args.kernel)
    defines = parse_defines(args.defines)
    check_defines(program, kernels, defines)
    arch = None
    if args.mapping:
        arch = mapping_arch(args.arch, args.mapping, limits=args.limits)
        if len(kernels) > 1:
            kernels = (program.kernel(api.mappings_of(program, args.mapping, arch, limits=args.limits)[0].kernel),)
    docs, reports, legal = [], [], True
    for kernel in kernels:
        params = _params(kernel, defines)
        args.budget.check(f"the legality checks of kernel '{kernel.name}'")
        require_tractable(kernel, limits=args.limits, model=build_model(kernel), what="the legality checks")
        if args.mapping:
            mappings = api.mappings_of(kernel, args.mapping, arch, limits=args.limits)
            what = f"mapping {args.mapping}"
            verdict = api.check(kernel, mapping=mappings, arch=arch, params=params)
            nest = mappings[0].nest
        else:
            nest, loops, order = _order_of(kernel, args.order, several=len(kernels) > 1)
            what = f"loop order ({', '.join(order + tuple(x for x in loops if x not in order))})"
            verdict = api.check(kernel, order=order, params=params)
        legal &= verdict.legal
        docs.append(verdict_json(kernel.name, verdict))
        reports.append(verdict_report(kernel.name, what, verdict))
        if args.suggest:
            note = _write_suggestion(args, kernel, build_model(kernel), nest, arch, params)
            docs[-1]["suggestion"] = note
            reports[-1] += f"\n  {note}"
    doc = docs[0] if len(docs) == 1 else {"kernels": docs}
    report = "\n\n".join(reports)
    if not legal:
        raise IllegalTransformation(report, doc)
    print(json.dumps(doc, indent=2) if args.json else report)
    return 0


def _write_suggestion(args: argparse.Namespace, kernel: ir.Kernel, model: KernelModel, nest: int,
                      arch: Architecture | None, params: dict[str, int] | None) -> str:
    """Write the suggested skew's mapping file (``--suggest``); say what was written and whether it is legal."""
    arch = arch if arch is not None else load_architecture(args.arch or "host", limits=args.limits)
    mapping = suggested_mapping(model, nest, arch)
    if mapping is None:
        return f"no skew to suggest for nest {nest}; {args.suggest} not written"
    with open(args.suggest, "w") as out:
        yaml.safe_dump(mapping.to_dict(), out, sort_keys=False, default_flow_style=None)
    verdict = check_mapping(model, mapping, params=params)
    return (f"wrote {args.suggest}: nest {nest} skewed as suggested and tiled by 16 on {arch.name} "
            f"({'legal' if verdict.legal else 'still ILLEGAL'}); try check, transform and compile on it")


def _order_of(kernel: ir.Kernel, text: str, *, several: bool) -> tuple[int, tuple[str, ...], tuple[str, ...]]:
    """:func:`parse_order`; with several kernels, the usual cause of an unknown loop is a missing ``--kernel``."""
    try:
        return parse_order(kernel, text)
    except InputError as exc:
        if not several:
            raise
        raise InputError(f"{exc.diagnostics[0].message}; the file holds several kernels: "
                         f"pick one with --kernel NAME") from None


def _params(kernel: ir.Kernel, defines: dict[str, int]) -> dict[str, int] | None:
    """Numbers for witnesses and capacity checks; None when some parameter has no value."""
    if all(p.name in defines or p.default is not None for p in kernel.params):
        return param_values(kernel, defines)
    return None
