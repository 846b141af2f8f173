"""Code of schedule mappings: C and NumPy from ISL's AST verified against the reference, and
``transform``'s ``.loop`` text parses again and computes the same results."""
from __future__ import annotations

import numpy as np
import pytest

from polymap.codegen.loop_emitter import emit_loop
from polymap.codegen.verify import random_inputs, verify
from polymap.driver import parse
from polymap.poly import build_model
from polymap.reference import execute
from test_schedule_kernels import CASES, _case

LEGAL = [n for n in sorted(CASES) if CASES[n][5]]


def _with_params(kernel, params):
    import dataclasses

    return dataclasses.replace(kernel, params=tuple(
        dataclasses.replace(p, default=params.get(p.name, p.default)) for p in kernel.params))


@pytest.mark.parametrize("name", LEGAL)
def test_c_and_numpy_verify(name):
    k, m, params, _ = _case(name)
    result = verify(k, params, targets=("c", "numpy"), mapping=m, model=build_model(k))
    assert result.passed


@pytest.mark.parametrize("name", LEGAL)
def test_transform_parses_again_and_computes_the_same(name):
    k, m, params, _ = _case(name)
    shown = _with_params(k, params)
    text = emit_loop(shown, build_model(shown), m)
    again = parse(text, "transformed.loop").kernels[0]
    inputs = random_inputs(k, params, seed=1)
    want = execute(k, inputs, params)
    got = execute(again, inputs, params)
    for t in want:
        np.testing.assert_allclose(got[t], want[t], rtol=1e-12, atol=1e-12)
