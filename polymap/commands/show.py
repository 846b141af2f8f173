"""``polymap show FILE [-D NAME=VALUE] [--kernel NAME] [--json]``: the polyhedral model.

For every selected kernel: its parameters (defaults overridden by ``-D``;
null in JSON when a parameter has neither), context, tensors and, per
statement, the iteration domain, the 2d+1 original schedule and the access
relations (:mod:`polymap.reports.model` renders them). The model itself stays
symbolic: ``show`` never needs numbers, so a parameter without a value is
not an error here.
"""
from __future__ import annotations

import argparse
import json
from typing import Sequence

from polymap import api, ir, pretty
from polymap.driver import (
    check_defines,
    load_program,
    parse_defines,
    print_warnings,
    select_kernels,
    warnings_of,
)
from polymap.reports.model import kernel_json, kernel_report


def main(args: argparse.Namespace) -> int:
    """Print the model of every selected kernel (one JSON document with ``--json``)."""
    program = load_program(args.file, cpp=args.cpp, limits=args.limits)
    kernels = select_kernels(program, args.kernel)
    defines = parse_defines(args.defines)
    check_defines(program, kernels, defines)
    if args.emit == "loop":
        return _emit_loop(kernels, as_json=args.json)
    models = [(api.model(k), shown_params(k, defines)) for k in kernels]
    if args.json:
        print_warnings(program, kernels)  # stdout holds the JSON document only
        doc = {"kernels": [kernel_json(m, p) for m, p in models]}
        print(json.dumps(doc, indent=2))
        return 0
    blocks = [kernel_report(m, p, warnings_of(program, m.kernel.name)) for m, p in models]
    print("\n\n".join(blocks))
    return 0


def _emit_loop(kernels: Sequence[ir.Kernel], *, as_json: bool) -> int:
    """The kernels in the ``.loop`` language (``show FILE.c --emit loop``)."""
    text = "\n".join(pretty.kernel(k) for k in kernels)
    print(json.dumps({"loop": text}, indent=2) if as_json else text, end="" if not as_json else "\n")
    return 0


def shown_params(kernel: ir.Kernel, defines: dict[str, int]) -> dict[str, int | None]:
    """``-D`` values over defaults, None for a parameter with neither.

    The values themselves were validated by :func:`~polymap.driver.check_defines`.
    """
    return {p.name: defines.get(p.name, p.default) for p in kernel.params}
