"""Run generated code (C or NumPy) on arrays: what ``polymap run --target c|numpy`` calls.

The runner takes the mappings to generate code for; it never chooses them
(that is :func:`polymap.api.run`'s job, with the choice of ``compile``).
Inputs are never modified: the run works on copies and returns every
``out``/``inout`` tensor, like :func:`polymap.reference.execute`::

    outs = run_generated(kernel, {"A": a, "B": b}, {"M": 8, "N": 8, "K": 8}, target="c", mappings=())
    outs["C"]   # == a @ b up to rounding
"""
from __future__ import annotations

from typing import Any, Callable, Mapping, Sequence

import numpy as np

from polymap import ir
from polymap.codegen.build import load_kernel
from polymap.codegen.c.emitter import emit_c
from polymap.codegen.numpy.emitter import emit_numpy
from polymap.errors import InputError
from polymap.mapping.model import Mapping as LoopMapping
from polymap.poly import KernelModel, build_model
from polymap.tensors import allocate, numpy_dtype


def run_generated(kernel: ir.Kernel, arrays: Mapping[str, np.ndarray], params: Mapping[str, int], *,
                  target: str, mappings: Sequence[LoopMapping], model: KernelModel | None = None
                  ) -> dict[str, np.ndarray]:
    """Generate code for ``target`` ("c" or "numpy") under ``mappings`` (empty: the original
    schedule), run it on copies of ``arrays``, return the outputs."""
    model = model if model is not None else build_model(kernel)
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


def _run_c(kernel: ir.Kernel, model: KernelModel, mappings: tuple[LoopMapping, ...],
           tensors: dict[str, np.ndarray], params: Mapping[str, int]) -> None:
    # the sizes at hand decide which loops are worth threads: the code compile writes for them
    fn = load_kernel(emit_c(kernel, model, mappings, params=params), kernel)
    fn(tensors, params)


def numpy_mapping_arg(mappings: Sequence[LoopMapping]) -> LoopMapping | tuple[LoopMapping, ...] | None:
    """What ``emit_numpy`` takes: None, the one mapping, or the tuple when several nests are mapped."""
    if not mappings:
        return None
    return mappings[0] if len(mappings) == 1 else tuple(mappings)


def load_numpy_function(kernel: ir.Kernel, model: KernelModel,
                        mappings: Sequence[LoopMapping]) -> Callable[..., Any]:
    """Emit the NumPy module and return its kernel function."""
    source = emit_numpy(kernel, model, numpy_mapping_arg(mappings))
    namespace: dict[str, Any] = {"__name__": f"polymap_generated_{kernel.name}"}
    exec(compile(source, f"<{kernel.name}.py>", "exec"), namespace)
    return namespace[kernel.name]


def _run_numpy(kernel: ir.Kernel, model: KernelModel, mappings: tuple[LoopMapping, ...],
               tensors: dict[str, np.ndarray], params: Mapping[str, int]) -> None:
    fn = load_numpy_function(kernel, model, mappings)
    fn(**tensors, **{p: int(params[p]) for p in kernel.param_names})
