"""Run generated code (C or NumPy) on arrays: what ``polymap run --target c|numpy`` calls.

The mapping is the one given (a YAML file) or the one ``compile`` would
choose (:func:`polymap.passes.search.default_mapping.choose_mappings`). Inputs are never
modified: the run works on copies and returns every ``out``/``inout``
tensor, like :func:`polymap.reference.execute`::

    outs = run_generated(kernel, {"A": a, "B": b}, {"M": 8, "N": 8, "K": 8}, target="c")
    outs["C"]   # == a @ b up to rounding
"""
from __future__ import annotations

from typing import Mapping, Sequence

import numpy as np

from polymap import ir
from polymap.errors import InputError
from polymap.poly import KernelModel, build_model
from polymap.tensors import allocate, numpy_dtype


def resolve_mappings(kernel: ir.Kernel, model: KernelModel, params: Mapping[str, int], *,
                     arch=None, mapping_path: str | None = None) -> tuple:
    """The mappings to generate code for: the file's, or the default choice for every nest."""
    from polymap.machine.presets import load_architecture

    architecture = load_architecture(arch or "host") if isinstance(arch, (str, type(None))) else arch
    if mapping_path is not None:
        from polymap.mapping.files import load_mapping

        return (load_mapping(mapping_path, kernel=kernel, arch=architecture),)
    from polymap.passes.search.default_mapping import choose_mappings

    return choose_mappings(model, architecture, params)


def run_generated(kernel: ir.Kernel, arrays: Mapping[str, np.ndarray], params: Mapping[str, int], *,
                  target: str, arch=None, mapping_path: str | None = None,
                  mappings: Sequence | None = None, model: KernelModel | None = None) -> dict[str, np.ndarray]:
    """Generate code for ``target`` ("c" or "numpy"), run it on copies of ``arrays``, return the outputs.

    ``mappings`` (already resolved) takes precedence over ``mapping_path``.
    """
    model = model if model is not None else build_model(kernel)
    if mappings is None:
        mappings = resolve_mappings(kernel, model, params, arch=arch, mapping_path=mapping_path)
    store = allocate(kernel, params)
    for d in kernel.decls:
        if d.role in ("in", "inout"):
            # np.array copies C-contiguous and keeps 0-d scalars 0-d (ascontiguousarray makes them 1-d)
            store[d.name] = np.array(arrays[d.name], dtype=numpy_dtype(d.dtype), copy=True, order="C")
    tensors = {d.name: store[d.name] for d in kernel.decls if d.role != "local"}
    if target == "c":
        _run_c(kernel, model, tuple(mappings), tensors, params)
    elif target == "numpy":
        _run_numpy(kernel, model, tuple(mappings), tensors, params)
    else:
        raise InputError(f"--target {target}: expected reference, c or numpy")
    return {d.name: tensors[d.name] for d in kernel.decls if d.role in ("out", "inout")}


def _run_c(kernel, model, mappings, tensors, params) -> None:
    from polymap.codegen.build import load_kernel
    from polymap.codegen.c.emitter import emit_c

    # the sizes at hand decide which loops are worth threads: the code compile writes for them
    fn = load_kernel(emit_c(kernel, model, mappings, params=params), kernel)
    fn(tensors, params)


def numpy_mapping_arg(mappings: tuple):
    """What ``emit_numpy`` takes: None, the one mapping, or the tuple when several nests are mapped."""
    if not mappings:
        return None
    return mappings[0] if len(mappings) == 1 else mappings


def load_numpy_function(kernel: ir.Kernel, model: KernelModel, mappings: tuple):
    """Emit the NumPy module and return its kernel function."""
    try:
        from polymap.codegen.numpy.emitter import emit_numpy
    except ImportError as exc:
        if exc.name is not None and exc.name.startswith("polymap.codegen"):
            raise InputError("--target numpy: the NumPy code generator is not available in this build") from None
        raise
    source = emit_numpy(kernel, model, numpy_mapping_arg(mappings))
    namespace: dict = {"__name__": f"polymap_generated_{kernel.name}"}
    exec(compile(source, f"<{kernel.name}.py>", "exec"), namespace)
    return namespace[kernel.name]


def _run_numpy(kernel, model, mappings, tensors, params) -> None:
    fn = load_numpy_function(kernel, model, mappings)
    fn(**tensors, **{p: int(params[p]) for p in kernel.param_names})
