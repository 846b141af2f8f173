"""``polymap run FILE --inputs IN.npz -o OUT.npz``: run one kernel on given arrays.

``--target reference`` (the default) executes the original program from the
IR (:mod:`polymap.reference`); ``c`` and ``numpy`` run generated code for
``--mapping`` or for the mappings ``compile`` chooses (:func:`polymap.api.run`). ``IN.npz`` must hold exactly the
``in``/``inout`` tensors with their declared shapes and dtypes; ``OUT.npz``
receives every ``out`` and ``inout`` tensor.
"""
from __future__ import annotations

import argparse
import json
from typing import Any, Mapping as MappingT

import numpy as np

from polymap import api, ir
from polymap.commands.common import choice_options
from polymap.driver import (
    check_defines,
    load_program,
    param_values,
    parse_defines,
    print_warnings,
    select_kernels,
)
from polymap.errors import InputError
from polymap.limits import Limits, require_integers
from polymap.tensors import dtype_name, io_tensors, load_npz, save_npz, validate_inputs


def main(args: argparse.Namespace) -> int:
    """Run the selected kernel; print one summary line per output tensor (or JSON)."""
    program = load_program(args.file, cpp=args.cpp, limits=args.limits)
    kernel = _the_kernel(program, args.kernel)
    print_warnings(program, (kernel,))
    defines = parse_defines(args.defines)
    check_defines(program, (kernel,), defines)
    params = param_values(kernel, defines)
    require_integers(kernel, params, limits=args.limits, what="a run")  # before reading arrays of that size
    arrays = _inputs(kernel, args.inputs, limits=args.limits)
    validate_inputs(kernel, arrays, params, source_name=args.inputs or "--inputs")  # errors named after the file
    mapping = args.mapping if args.mapping and args.target != "reference" else None
    args.budget.check(f"the {args.target} execution of kernel '{kernel.name}'")
    outputs = api.run(kernel, arrays, params=params, target=args.target, mapping=mapping, arch=args.arch,
                      choice=choice_options(args), limits=args.limits)
    if args.output:
        save_npz(args.output, outputs)
    if args.json:
        print(json.dumps(_document(kernel, args.target, outputs, args.output), indent=2))
    else:
        print(_report(kernel, args.target, outputs, args.output))
    return 0


def _the_kernel(program: ir.Program, name: str | None) -> ir.Kernel:
    kernels = select_kernels(program, name)
    if len(kernels) != 1:
        names = ", ".join(k.name for k in kernels)
        raise InputError(f"{program.source.name}: the file holds several kernels ({names}); "
                         f"pick one with --kernel NAME")
    return kernels[0]


def _inputs(kernel: ir.Kernel, path: str | None, *, limits: Limits) -> dict[str, np.ndarray]:
    if path is not None:
        return load_npz(path, limits=limits)
    needed = io_tensors(kernel)
    if needed:
        names = ", ".join(d.name for d in needed)
        raise InputError(f"kernel '{kernel.name}' reads the tensors {names}: "
                         f"give them with --inputs IN.npz")
    return {}


def _stats(a: np.ndarray) -> dict[str, Any]:
    """min/max/mean as JSON-safe floats (None for empty arrays or non-finite values)."""
    if a.size == 0:
        return {"min": None, "max": None, "mean": None}
    values = {"min": a.min(), "max": a.max(), "mean": a.mean(dtype=np.float64)}
    return {k: (float(v) if np.isfinite(v) else None) for k, v in values.items()}


def _document(kernel: ir.Kernel, target: str, outputs: MappingT[str, np.ndarray], path: str | None) -> dict[str, Any]:
    return {
        "kernel": kernel.name,
        "target": target,
        "output_file": path,
        "outputs": {name: {"shape": list(a.shape), "dtype": dtype_name(a.dtype), **_stats(a)}
                    for name, a in outputs.items()},
    }


def _report(kernel: ir.Kernel, target: str, outputs: MappingT[str, np.ndarray], path: str | None) -> str:
    done = f"wrote {path}" if path else "no -o given, nothing written"
    rows = [("tensor", "shape", "dtype", "min", "max", "mean")]
    for name, a in outputs.items():
        if a.size:
            num = [f"{float(v):.6g}" for v in (a.min(), a.max(), a.mean(dtype=np.float64))]
        else:
            num = ["-", "-", "-"]
        rows.append((name, "x".join(map(str, a.shape)) or "scalar", dtype_name(a.dtype), *num))
    widths = [max(len(r[c]) for r in rows) for c in range(len(rows[0]))]
    lines = ["  " + "  ".join(cell.ljust(w) if c < 3 else cell.rjust(w)
                              for c, (cell, w) in enumerate(zip(r, widths))).rstrip() for r in rows]
    return "\n".join([f"kernel {kernel.name} ({target}): {done}", *lines])
