"""``polymap transform FILE --mapping M.yaml [--arch ARCH]``: the mapped nest as ``.loop`` text.

The printed kernel parses again and computes the same results as the
original (:mod:`polymap.codegen.loop_emitter`). An illegal mapping is
refused (exit 1) with the legality checker's reasons.

Architecture: ``--arch`` when given; otherwise the one ``check`` takes
(:func:`polymap.api.mapping_architecture`: the architecture a compile
document names, or the preset whose level names the mapping file uses).
The printed loops depend only on the tiles and orders, not on capacities.
``-D`` values become the printed parameters' defaults.
"""
from __future__ import annotations

import argparse
import json

from polymap import api
from polymap.driver import check_defines, load_program, parse_defines, select_kernels


def main(args: argparse.Namespace) -> int:
    program = load_program(args.file, cpp=args.cpp, limits=args.limits)
    kernels = select_kernels(program, args.kernel)
    defines = parse_defines(args.defines)
    check_defines(program, kernels, defines)
    arch = api.mapping_architecture(args.mapping, args.arch, limits=args.limits)
    mapping = api.mapping_of(kernels if len(kernels) > 1 else kernels[0], args.mapping, arch, limits=args.limits)
    kernel = program.kernel(mapping.kernel) or kernels[0]
    source = api.transform(kernel, mapping, arch=arch, params={k: v for k, v in defines.items()
                                                               if k in kernel.param_names}, limits=args.limits)
    if args.json:
        print(json.dumps({"kernel": kernel.name, "source": source}, indent=2))
    else:
        print(source, end="")
    return 0
