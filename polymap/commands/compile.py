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
import os
import sys
from pathlib import Path
from typing import Mapping as MappingT

from polymap import api
from polymap.userdirs import user_cache_dir
from polymap.commands.common import choice_options, progress_printer
from polymap.driver import check_defines, load_program, param_values, parse_defines, print_warnings, select_kernels
from polymap.codegen.timing import ProcessTimer, timing_environment
from polymap.errors import InputError
from polymap.passes.search.tune import confirmation_line, tuning_lines
from polymap.mapping.model import mapping_loop_extents, nest_tensors
from polymap.reports.compile import compile_document, level_text, summary_lines, with_outcome

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
                              verify_full=args.verify_full, reassociate=args.reassociate,
                              choice=choice_options(args), tune=args.tune)


def main(args: argparse.Namespace) -> int:
    program = load_program(args.file, cpp=args.cpp, limits=args.limits)
    kernels = select_kernels(program, args.kernel)
    print_warnings(program, kernels)
    options = options_of(args)
    arch = api.architecture(args.arch, limits=args.limits)
    defines = parse_defines(args.defines)
    check_defines(program, kernels, defines)
    out_dir = Path(args.output_dir)
    try:
        out_dir.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise InputError(f"-o {out_dir}: cannot create the directory: {exc.strerror or exc}") from None
    given = None
    if args.mapping:
        given = api.mappings_of(kernels if len(kernels) > 1 else kernels[0], args.mapping, arch,
                                limits=args.limits)
    progress = progress_printer()
    documents = []
    for kernel in kernels:
        mine = None if given is None else tuple(m for m in given if m.kernel == kernel.name) or None
        result = api.compile(kernel, arch=args.arch, mapping=mine, params=param_values(kernel, defines),
                             out_dir=out_dir, options=options, progress=progress, command=args.command_line, budget=args.budget,
                             cache_dir=None if args.no_cache else cache_dir_from_environment(),
                             timer=ProcessTimer(timing_environment(os.environ)),
                             limits=args.limits)
        for w in result.warnings:
            print(f"warning: {w}", file=sys.stderr)
        documents.append(document(result))
        if not args.json:
            print("\n".join(summary(result, result.tuning)))
    if args.json:
        print(json.dumps({"kernels": documents}, indent=2))
    return 0


def cache_dir_from_environment(environ: MappingT[str, str] = os.environ) -> Path:
    """``$XDG_CACHE_HOME/polymap``, else ``~/.cache/polymap`` (``cli.md``)."""
    return user_cache_dir(environ)


def document(result: api.CompiledKernel) -> dict:
    """The ``--json`` entry of one kernel."""
    doc = compile_document(result.name, dict(result.params), result.arch, result.why, result.written_mappings,
                           result.costs, result.choice, result.extra)
    return with_outcome(doc, result.files, result.verification)


def summary(result: api.CompiledKernel, tuning: tuple = ()) -> list[str]:
    """The human summary of one kernel."""
    params = dict(result.params)
    extents = [mapping_loop_extents(result.kernel, m, params) for m in result.mappings]
    tensors = [nest_tensors(result.kernel, m.nest) for m in result.mappings]
    lines = summary_lines(result.name, result.why, result.mappings, extents, tensors, len(result.kernel.nests()),
                          result.choice, result.files, result.verification)
    confirmed = result.extra.get("tuning_confirmed")
    if confirmed is not None:  # after the nests' tables, which are inserted before it
        lines[1:1] = ["  " + confirmation_line(confirmed)]
    for t in reversed(tuning):
        lines[1:1] = ["  tuned " + line if k == 0 else "  " + line for k, line in enumerate(tuning_lines(t))]
    at = len(lines) - (1 if result.verification is not None else 0) - (1 if result.files else 0)
    more = [f"  nest {e['nest']}: C register tile {e['tile']} {e['dtype']}: {e['why']}"
            for e in result.extra.get("register_tiles", ())]
    if result.choice is not None:
        for m in result.numpy_mappings:
            more.append(f"  nest {m.nest} mapping of the NumPy target (its own choice, whole-array blocks):")
            more += [f"    {level_text(m, k, mapping_loop_extents(result.kernel, m, params), nest_tensors(result.kernel, m.nest))}"
                     for k in range(len(m.levels))]
        if not result.numpy_mappings:
            more.append("  NumPy target: every nest in its original schedule")
    lines[at:at] = more
    return lines
