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
from polymap.driver import check_defines, load_program, parse_defines, select_kernels
from polymap.errors import IllegalTransformation, InputError
from polymap.reports.check import verdict_json, verdict_report


def parse_order(text: str) -> tuple[str, ...]:
    """``"i,k,j"`` -> ``("i", "k", "j")`` (which nest it names is :func:`polymap.api.order_of`'s to say)."""
    return tuple(x.strip() for x in text.split(",") if x.strip())


def main(args: argparse.Namespace) -> int:
    program = load_program(args.file, cpp=args.cpp, limits=args.limits)
    kernels = select_kernels(program, args.kernel)
    defines = parse_defines(args.defines)
    check_defines(program, kernels, defines)
    arch = None
    if args.mapping:
        arch = api.mapping_architecture(args.mapping, args.arch, limits=args.limits)
        if len(kernels) > 1:
            kernels = (program.kernel(api.mappings_of(program, args.mapping, arch, limits=args.limits)[0].kernel),)
    docs, reports, legal = [], [], True
    for kernel in kernels:
        params = {k: v for k, v in defines.items() if k in kernel.param_names}
        args.budget.check(f"the legality checks of kernel '{kernel.name}'")
        if args.mapping:
            mappings = api.mappings_of(kernel, args.mapping, arch, limits=args.limits)
            what = f"mapping {args.mapping}"
            verdict = api.check(kernel, mapping=mappings, arch=arch, params=params, limits=args.limits)
            nest = mappings[0].nest
        else:
            order = parse_order(args.order)
            nest, whole = _order_of(kernel, order, args.order, several=len(kernels) > 1)
            what = f"loop order ({', '.join(whole)})"
            verdict = api.check(kernel, order=order, params=params, limits=args.limits)
        legal &= verdict.legal
        docs.append(verdict_json(kernel.name, verdict))
        reports.append(verdict_report(kernel.name, what, verdict))
        if args.suggest:
            note = _write_suggestion(args.suggest, api.suggest(kernel, nest, arch=arch or args.arch or "host",
                                                               params=params))
            docs[-1]["suggestion"] = note
            reports[-1] += f"\n  {note}"
    doc = docs[0] if len(docs) == 1 else {"kernels": docs}
    report = "\n\n".join(reports)
    if not legal:
        raise IllegalTransformation(report, doc)
    print(json.dumps(doc, indent=2) if args.json else report)
    return 0


def _write_suggestion(path: str, found: api.Suggestion) -> str:
    """Write the suggested skew's mapping file (``--suggest``); say what was written and whether it is legal."""
    if found.mapping is None or found.verdict is None:
        return f"no skew to suggest for nest {found.nest}; {path} not written"
    try:
        with open(path, "w") as out:
            yaml.safe_dump(found.mapping.to_dict(), out, sort_keys=False, default_flow_style=None)
    except OSError as exc:
        raise InputError(f"--suggest {path}: cannot write: {exc.strerror or exc}") from None
    return (f"wrote {path}: nest {found.nest} skewed as suggested and tiled by 16 on {found.arch.name} "
            f"({'legal' if found.verdict.legal else 'still ILLEGAL'}); try check, transform and compile on it")


def _order_of(kernel: ir.Kernel, order: tuple[str, ...], text: str, *, several: bool) -> tuple[int, tuple[str, ...]]:
    """:func:`polymap.api.order_of`; with several kernels, the usual cause of an unknown loop is a missing
    ``--kernel``."""
    try:
        return api.order_of(kernel, order)
    except InputError as exc:
        if not several:
            raise
        raise InputError(f"{exc.diagnostics[0].message}; the file holds several kernels: "
                         f"pick one with --kernel NAME") from None
