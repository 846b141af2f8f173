"""``polymap check FILE (--order i,k,j | --mapping M.yaml [--arch ARCH])``: is it legal?

Exit 0 when the loop order or the mapping keeps every read's writer and
every element's final writer (and, for a mapping, its spatial loops carry
no dependence the generated code cannot combine, and it fits the
architecture); exit 1 otherwise, with one concrete witness per violation.
"""
from __future__ import annotations

import json

import yaml

from polymap import ir
from polymap.driver import check_defines, load_program, param_values, parse_defines, select_kernels
from polymap.errors import IllegalTransformation, InputError
from polymap.mapping.model import nest_loops
from polymap.passes.legality.legality import Verdict, check_mapping
from polymap.passes.schedule.tiling import order_mapping
from polymap.poly import build_model
from polymap.limits import require_tractable


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


def _arch(args, mapping_path: str):
    from polymap.machine.presets import load_architecture, presets

    if args.arch:
        return load_architecture(args.arch, limits=args.limits)
    # Without --arch, the architecture whose level names the mapping uses.
    from polymap.mapping.files import MAPPING_KEYS
    from polymap.yamlsource import read_yaml

    doc = read_yaml(mapping_path)
    data = doc.data
    if not isinstance(data, dict):
        doc.fail((), f"a mapping file holds a mapping with keys {', '.join(MAPPING_KEYS)}")
    levels = data.get("levels")
    if not isinstance(levels, list):
        doc.fail(("levels",) if "levels" in data else (),
                 "levels: expected a list with one entry per architecture level, outermost first")
    names = [lv.get("level") for lv in levels if isinstance(lv, dict)]
    known = []
    for name in presets():
        arch = load_architecture(name)
        if [lv.name for lv in arch.levels] == names:
            return arch
        known.append(f"{name}: {', '.join(arch.level_names)}")
    doc.fail(("levels",), f"the levels ({', '.join(map(str, names)) or 'none named'}) match no preset "
                          f"architecture ({'; '.join(known)}); give one with --arch")


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


def main(args) -> int:
    program = load_program(args.file, cpp=args.cpp, limits=args.limits)
    kernels = select_kernels(program, args.kernel)
    defines = parse_defines(args.defines)
    check_defines(program, kernels, defines)
    arch = None
    if args.mapping:
        arch = _arch(args, args.mapping)
        if len(kernels) > 1:
            from polymap.mapping.files import load_mapping

            kernels = (program.kernel(load_mapping(args.mapping, kernel=program, arch=arch, limits=args.limits).kernel),)
    docs, reports, legal = [], [], True
    for kernel in kernels:
        params = _params(kernel, defines)
        model = build_model(kernel)
        require_tractable(kernel, limits=args.limits, model=model, what="the legality checks")
        if args.mapping:
            from polymap.mapping.files import load_mapping

            mapping = load_mapping(args.mapping, kernel=kernel, arch=arch, limits=args.limits)
            what = f"mapping {args.mapping}"
            verdict = check_mapping(model, mapping, arch=arch, params=params)
            verdict = _with_fusion_note(kernel, mapping.nest, verdict)
        else:
            nest, loops, order = _order_of(kernel, args.order, several=len(kernels) > 1)
            what = f"loop order ({', '.join(order + tuple(x for x in loops if x not in order))})"
            verdict = check_mapping(model, order_mapping(kernel, nest, loops, order), params=params)
            verdict = _with_fusion_note(kernel, nest, verdict)
        legal &= verdict.legal
        docs.append(verdict_json(kernel.name, verdict))
        reports.append(verdict_report(kernel.name, what, verdict))
        if getattr(args, "suggest", None):
            note = _write_suggestion(args, kernel, model, mapping.nest if args.mapping else nest, arch, params)
            docs[-1]["suggestion"] = note
            reports[-1] += f"\n  {note}"
    doc = docs[0] if len(docs) == 1 else {"kernels": docs}
    report = "\n\n".join(reports)
    if not legal:
        raise IllegalTransformation(report, doc)
    print(json.dumps(doc, indent=2) if args.json else report)
    return 0


def _write_suggestion(args, kernel: ir.Kernel, model, nest: int, arch, params) -> str:
    """Write the suggested skew's mapping file (``--suggest``); say what was written and whether it is legal."""
    from polymap.machine.presets import load_architecture
    from polymap.passes.schedule.suggest import suggested_mapping

    arch = arch if arch is not None else load_architecture(args.arch or "host", limits=args.limits)
    mapping = suggested_mapping(model, nest, arch)
    if mapping is None:
        return f"no skew to suggest for nest {nest}; {args.suggest} not written"
    with open(args.suggest, "w") as out:
        yaml.safe_dump(mapping.to_dict(), out, sort_keys=False, default_flow_style=None)
    verdict = check_mapping(model, mapping, params=params)
    return (f"wrote {args.suggest}: nest {nest} skewed as suggested and tiled by 16 on {arch.name} "
            f"({'legal' if verdict.legal else 'still ILLEGAL'}); try check, transform and compile on it")


def _with_fusion_note(kernel: ir.Kernel, nest: int, verdict: Verdict) -> Verdict:
    """Say so when loops of the nest share a name: an order names each loop once, so it fuses them."""
    from dataclasses import replace

    from polymap.passes.frontend.rename import repeated_loop_names

    names = repeated_loop_names(kernel).get(nest)
    if not names:
        return verdict
    listed = ", ".join(f"'{x}'" for x in names)
    note = (f"several loops of this nest are named {listed}: an order or mapping names each loop once, "
            f"so it runs them as one loop (fusing them); give them distinct names in the source to "
            f"order them apart")
    return replace(verdict, notes=verdict.notes + (note,))


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
