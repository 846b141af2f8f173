"""``polymap compile FILE``: tiled C and NumPy code for every kernel, verified.

Per kernel, one call of :func:`polymap.api.compile` (the mapping of
``--mapping``, refused when illegal, or the choice of
:mod:`polymap.passes.search.choice`), then the summary of
:mod:`polymap.reports.compile` (or, with ``--json``, the documents of every
kernel: ``NAME.json``'s content plus the files and the verification).
"""
from __future__ import annotations

import argparse
import json
from pathlib import Path

from polymap import api
from polymap.commands.common import choice_options, progress_printer
from polymap.driver import check_defines, load_program, param_values, parse_defines, print_warnings, select_kernels
from polymap.errors import InputError
from polymap.mapping.model import loop_extents, nest_tensors
from polymap.reports.compile import compile_document, summary_lines, with_outcome

TARGETS = ("c", "numpy")


def parse_targets(text: str) -> tuple[str, ...]:
    """``"c,numpy"`` -> ``("c", "numpy")``; anything else is bad input."""
    targets = tuple(t.strip() for t in text.split(",") if t.strip())
    bad = [t for t in targets if t not in TARGETS]
    if bad or not targets:
        raise InputError(f"--target {text}: expected a comma-separated list of {', '.join(TARGETS)}")
    return targets


def options_of(args: argparse.Namespace) -> api.CompileOptions:
    """The compile options the flags ask for."""
    return api.CompileOptions(targets=parse_targets(args.target), verify=not args.no_verify,
                              choice=choice_options(args))


def main(args: argparse.Namespace) -> int:
    program = load_program(args.file)
    kernels = select_kernels(program, args.kernel)
    print_warnings(program, kernels)
    options = options_of(args)
    arch = api.architecture(args.arch)
    defines = parse_defines(args.defines)
    check_defines(program, kernels, defines)
    out_dir = Path(args.output_dir)
    try:
        out_dir.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise InputError(f"-o {out_dir}: cannot create the directory: {exc.strerror or exc}") from None
    given = None
    if args.mapping:
        given = api.mappings_of(kernels if len(kernels) > 1 else kernels[0], args.mapping, arch)
    progress = progress_printer()
    documents = []
    for kernel in kernels:
        mine = None if given is None else tuple(m for m in given if m.kernel == kernel.name) or None
        result = api.compile(kernel, arch=arch, mapping=mine, params=param_values(kernel, defines),
                             out_dir=out_dir, options=options, progress=progress)
        documents.append(document(result))
        if not args.json:
            print("\n".join(summary(result)))
    if args.json:
        print(json.dumps({"kernels": documents}, indent=2))
    return 0


def document(result: api.CompiledKernel) -> dict:
    """The ``--json`` entry of one kernel."""
    doc = compile_document(result.name, dict(result.params), result.arch, result.why, result.mappings,
                           result.costs, result.choice)
    return with_outcome(doc, result.files, result.verification)


def summary(result: api.CompiledKernel) -> list[str]:
    """The human summary of one kernel."""
    params = dict(result.params)
    extents = [loop_extents(result.kernel, m.nest, params) for m in result.mappings]
    tensors = [nest_tensors(result.kernel, m.nest) for m in result.mappings]
    return summary_lines(result.name, result.why, result.mappings, extents, tensors, len(result.kernel.nests()),
                         result.choice, result.files, result.verification)
