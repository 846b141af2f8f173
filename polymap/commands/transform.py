"""``polymap transform FILE --mapping M.yaml [--arch ARCH]``: the mapped nest as ``.loop`` text.

The printed kernel parses again and computes the same results as the
original (:mod:`polymap.codegen.loop_emitter`). An illegal mapping is
refused (exit 1) with the legality checker's reasons.

Architecture: ``--arch`` when given; otherwise the first of ``toy``,
``host``, ``eyeriss`` whose level names include every level the mapping
file names and that accepts the mapping (the printed loops depend only on
the tiles and orders, not on capacities). ``-D`` values become the printed
parameters' defaults.
"""
from __future__ import annotations

import argparse
import json
from typing import Sequence

from polymap import api, ir
from polymap.driver import check_defines, load_program, parse_defines, select_kernels
from polymap.errors import MappingError
from polymap.machine.presets import load_architecture
from polymap.mapping.files import load_mapping
from polymap.mapping.model import Mapping
from polymap.yamlsource import read_yaml
from polymap.limits import require_tractable
from polymap.poly import build_model

#: Architectures tried, in order, when ``--arch`` is not given.
ARCH_CANDIDATES = ("toy", "host", "eyeriss")


def _mapping_levels(path: str) -> list[str] | None:
    """The level names a mapping file uses (None when the file cannot tell)."""
    data = read_yaml(path).data
    if not isinstance(data, dict) or not isinstance(data.get("levels"), list):
        return None
    return [lv.get("level") for lv in data["levels"] if isinstance(lv, dict)]


def resolve_mapping(path: str, kernels: ir.Kernel | Sequence[ir.Kernel], arch_spec: str | None) -> Mapping:
    """Load ``path`` against ``kernels`` with ``arch_spec`` or the first architecture that fits."""
    if arch_spec is not None:
        return load_mapping(path, kernel=kernels, arch=load_architecture(arch_spec))
    used = _mapping_levels(path)
    first_error: MappingError | None = None
    for name in ARCH_CANDIDATES:
        arch = load_architecture(name)
        if used is not None and not set(used) <= set(arch.level_names):
            continue
        try:
            return load_mapping(path, kernel=kernels, arch=arch)
        except MappingError as exc:
            first_error = first_error or exc
    if first_error is not None:
        raise first_error
    return load_mapping(path, kernel=kernels, arch=load_architecture(ARCH_CANDIDATES[0]))


def main(args: argparse.Namespace) -> int:
    program = load_program(args.file, cpp=args.cpp, limits=args.limits)
    kernels = select_kernels(program, args.kernel)
    defines = parse_defines(args.defines)
    check_defines(program, kernels, defines)
    mapping = resolve_mapping(args.mapping, kernels if len(kernels) > 1 else kernels[0], args.arch)
    kernel = program.kernel(mapping.kernel) or kernels[0]
    require_tractable(kernel, limits=args.limits, model=build_model(kernel), what="the legality checks")
    source = api.transform(kernel, mapping, params={k: v for k, v in defines.items() if k in kernel.param_names})
    if args.json:
        print(json.dumps({"kernel": kernel.name, "source": source}, indent=2))
    else:
        print(source, end="")
    return 0
