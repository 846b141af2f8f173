"""Distinct loop names: the renamed kernel computes the same, and its original order is legal."""
from pathlib import Path

import numpy as np
import pytest

import polymap
from polymap.mapping.model import nest_loops
from polymap.passes.frontend.rename import distinct_loop_names, repeated_loop_names
from polymap.pretty import kernel as print_kernel
from polymap.reference import execute
from polymap.tensors import random_inputs

ROOT = Path(__file__).resolve().parents[1]
CASES = {  # file -> small sizes
    "examples/jacobi2d.loop": {"T": 3, "N": 7},
    "examples/softmax.loop": None,
    "examples/polybench/fdtd-2d.loop": {"TMAX": 3, "NX": 5, "NY": 6},
    "examples/polybench/adi.loop": {"TSTEPS": 2, "N": 6},
}


def _small(kernel, sizes):
    return sizes or {p.name: min(p.default or 4, 6) for p in kernel.params}


@pytest.mark.parametrize("path", sorted(CASES))
def test_renamed_kernel_reparses_and_computes_the_same(path):
    kernel = polymap.load(ROOT / path).kernels[0]
    assert repeated_loop_names(kernel), "the case must have repeated loop names"
    renamed = distinct_loop_names(kernel)
    assert not repeated_loop_names(renamed)
    again = polymap.parse(print_kernel(renamed), "renamed.loop").kernels[0]
    params = _small(kernel, CASES[path])
    arrays = random_inputs(kernel, params, seed=3)
    want, got = execute(kernel, arrays, params), execute(again, arrays, params)
    for name in want:
        np.testing.assert_array_equal(got[name], want[name])


@pytest.mark.parametrize("path", sorted(CASES))
def test_original_order_of_renamed_kernel_is_legal(path):
    kernel = polymap.load(ROOT / path).kernels[0]
    renamed = distinct_loop_names(kernel)
    loops = nest_loops(renamed, 0)
    assert polymap.check(renamed, order=loops).legal
    if path == "examples/jacobi2d.loop":  # as written, the one order fuses the sweeps: illegal
        assert not polymap.check(kernel, order=nest_loops(kernel, 0)).legal


def test_kernel_without_repeats_is_unchanged():
    gemm = polymap.load(ROOT / "examples/gemm.loop").kernels[0]
    assert distinct_loop_names(gemm) is gemm
