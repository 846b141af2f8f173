"""Run generated C on random inputs beside the reference interpreter, for tests.

One helper for every test that checks a hand-emitted C source (``emit_c``)
against :func:`polymap.reference.execute`: the same inputs go to both, and the
caller compares ``{tensor: (got, want)}`` with the tolerance its code allows
(bit-identical for code that keeps every element's updates in order).
"""
from __future__ import annotations

import os

import numpy as np

from polymap.codegen.build import load_kernel
from polymap.reference import execute
from polymap.tensors import allocate, random_inputs


def run_c(kernel, source: str, params: dict, *, seed: int = 1, threads: int | None = None,
          well_conditioned: bool = False) -> dict[str, tuple[np.ndarray, np.ndarray]]:
    """``{tensor: (C's result, the reference's)}`` for every tensor the reference writes; ``threads``
    sets ``OMP_NUM_THREADS`` around the build and the call only."""
    inputs = random_inputs(kernel, params, seed=seed, well_conditioned=well_conditioned)
    store = allocate(kernel, params)
    arrays = {d.name: store[d.name] for d in kernel.decls if d.role != "local"}
    for n, a in inputs.items():
        if n in arrays:
            arrays[n] = np.ascontiguousarray(np.array(a, dtype=arrays[n].dtype))
    want = execute(kernel, inputs, params)
    old = os.environ.get("OMP_NUM_THREADS")
    if threads is not None:
        os.environ["OMP_NUM_THREADS"] = str(threads)
    try:
        load_kernel(source, kernel)(arrays, params)
    finally:
        if threads is not None:
            if old is None:
                del os.environ["OMP_NUM_THREADS"]
            else:
                os.environ["OMP_NUM_THREADS"] = old
    return {n: (arrays[n], want[n]) for n in want}
