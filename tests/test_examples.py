"""The example kernels: they parse, have a polyhedral model, and compute what NumPy computes.

Each ``.loop`` file under ``examples/`` is run on the reference interpreter
at small sizes (``SMALL``) and compared with an independent NumPy
formulation from ``numpy_formulations.py``.
"""
from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pytest

from numpy_formulations import FORMULATIONS, INPUTS

from polymap import poly, reference
from polymap.driver import load_program

ROOT = Path(__file__).resolve().parent.parent
# examples/networks/ holds files of many kernels (whole networks): tests/test_networks.py
EXAMPLES = sorted(p.relative_to(ROOT).as_posix() for p in (ROOT / "examples").rglob("*.loop")
                  if "networks" not in p.parts)

POLYBENCH = (
    "correlation covariance gemm gemver gesummv symm syr2k syrk trmm 2mm 3mm atax bicg doitgen mvt "
    "cholesky durbin gramschmidt lu ludcmp trisolv deriche floyd-warshall nussinov adi fdtd-2d "
    "heat-3d jacobi-1d jacobi-2d seidel-2d"
).split()

#: Sizes at which the pure-Python reference runs in well under a second.
SMALL: dict[str, dict[str, int]] = {
    "examples/gemm.loop": {"M": 5, "N": 6, "K": 7},
    "examples/gemm_scalar_acc.loop": {"M": 5, "N": 6, "K": 7},
    "examples/gemm_bias_relu.loop": {"M": 5, "N": 6, "K": 7},
    "examples/gemm_tiled.loop": {"M": 19, "N": 17, "K": 10},
    "examples/2mm.loop": {"NI": 4, "NJ": 5, "NK": 6, "NL": 3},
    "examples/trmv.loop": {"N": 9},
    "examples/conv2d.loop": {"N": 2, "C": 2, "K": 3, "P": 3, "Q": 4, "R": 3, "S": 2},
    "examples/conv1d_timeloop.loop": {},  # the Timeloop sizes P=16, R=3
    "examples/upsample2x.loop": {"H": 3, "W": 4},
    "examples/softmax.loop": {"M": 4, "N": 7},
    "examples/attention.loop": {"N": 6, "DK": 4, "DV": 3},
    "examples/lu.loop": {"N": 7},
    "examples/cholesky.loop": {"N": 7},
    "examples/jacobi2d.loop": {"T": 3, "N": 7},
    "examples/seidel2d.loop": {"T": 2, "N": 7},
    "examples/polybench/correlation.loop": {"M": 5, "N": 7},
    "examples/polybench/covariance.loop": {"M": 5, "N": 7},
    "examples/polybench/gemm.loop": {"NI": 4, "NJ": 5, "NK": 6},
    "examples/polybench/gemver.loop": {"N": 7},
    "examples/polybench/gesummv.loop": {"N": 7},
    "examples/polybench/symm.loop": {"M": 6, "N": 5},
    "examples/polybench/syr2k.loop": {"M": 5, "N": 6},
    "examples/polybench/syrk.loop": {"M": 5, "N": 6},
    "examples/polybench/trmm.loop": {"M": 6, "N": 5},
    "examples/polybench/2mm.loop": {"NI": 4, "NJ": 5, "NK": 6, "NL": 3},
    "examples/polybench/3mm.loop": {"NI": 4, "NJ": 5, "NK": 6, "NL": 3, "NM": 4},
    "examples/polybench/atax.loop": {"M": 5, "N": 6},
    "examples/polybench/bicg.loop": {"M": 5, "N": 6},
    "examples/polybench/doitgen.loop": {"NR": 3, "NQ": 2, "NP": 4},
    "examples/polybench/mvt.loop": {"N": 7},
    "examples/polybench/cholesky.loop": {"N": 7},
    "examples/polybench/durbin.loop": {"N": 8},
    "examples/polybench/gramschmidt.loop": {"M": 7, "N": 5},
    "examples/polybench/lu.loop": {"N": 7},
    "examples/polybench/ludcmp.loop": {"N": 7},
    "examples/polybench/trisolv.loop": {"N": 7},
    "examples/polybench/deriche.loop": {"W": 5, "H": 6},
    "examples/polybench/floyd-warshall.loop": {"N": 6},
    "examples/polybench/nussinov.loop": {"N": 8},
    "examples/polybench/adi.loop": {"TSTEPS": 2, "N": 6},
    "examples/polybench/fdtd-2d.loop": {"TMAX": 3, "NX": 4, "NY": 5},
    "examples/polybench/heat-3d.loop": {"TSTEPS": 2, "N": 5},
    "examples/polybench/jacobi-1d.loop": {"TSTEPS": 3, "N": 9},
    "examples/polybench/jacobi-2d.loop": {"TSTEPS": 3, "N": 7},
    "examples/polybench/seidel-2d.loop": {"TSTEPS": 2, "N": 7},
}

#: Relative tolerance by dtype: float32 kernels round every operation.
RTOL = {"f32": 2e-4, "f64": 1e-9, "i32": 0, "i64": 0}


def _load(path: str, *, check: bool):
    return load_program(ROOT / path, check=check)


# --------------------------------------------------------------------------- inventory


def test_all_polybench_kernels_present():
    have = {Path(p).stem for p in EXAMPLES if p.startswith("examples/polybench/")}
    assert have == set(POLYBENCH)


def test_readme_maps_every_polybench_kernel():
    """The README table names each file's kernel, and the kernel in the file has that name."""
    text = (ROOT / "examples" / "README.md").read_text()
    table = dict(re.findall(r"\| `([\w-]+\.loop)` \| `(\w+)` \| [A-Z]", text))
    for name in POLYBENCH:
        file = f"{name}.loop"
        assert file in table, file
        program = _load(f"examples/polybench/{file}", check=False)
        assert [k.name for k in program.kernels] == [table[file]]


def test_every_example_has_a_formulation_and_sizes():
    assert set(EXAMPLES) == set(FORMULATIONS) == set(SMALL)


# --------------------------------------------------------------------------- front end and model


@pytest.mark.parametrize("path", EXAMPLES)
def test_parses(path):
    program = _load(path, check=False)
    assert program.kernels


@pytest.mark.parametrize("path", EXAMPLES)
def test_passes_semantic_checks_without_warnings(path):
    program = _load(path, check=True)
    warnings = getattr(program, "program_warnings", ())
    assert not warnings, "\n".join(getattr(w, "render", lambda: str(w))() for w in warnings)


@pytest.mark.parametrize("path", EXAMPLES)
def test_has_a_polyhedral_model(path):
    for kernel in _load(path, check=False).kernels:
        assert poly.build_model(kernel) is not None


# --------------------------------------------------------------------------- reference vs NumPy


def _inputs(kernel, path: str, params: dict[str, int]):
    from polymap.tensors import random_inputs

    hint = INPUTS.get(path, {})
    arrays = random_inputs(kernel, params, seed=7, well_conditioned=hint.get("well_conditioned", False))
    prepare = hint.get("prepare")
    return prepare(arrays, params) if prepare else arrays


@pytest.mark.parametrize("path", sorted(FORMULATIONS))
def test_reference_matches_numpy(path):
    (kernel,) = _load(path, check=False).kernels
    params = {p.name: p.default for p in kernel.params} | SMALL[path]
    arrays = _inputs(kernel, path, params)
    got = reference.execute(kernel, {k: v.copy() for k, v in arrays.items()}, params)
    want = FORMULATIONS[path]({k: v.copy() for k, v in arrays.items()}, params)

    assert set(want) <= set(got), f"formulation returns tensors the kernel does not: {set(want) - set(got)}"
    for name, expected in want.items():
        decl = kernel.decl(name)
        actual = np.asarray(got[name], dtype=np.float64)
        expected = np.asarray(expected, dtype=np.float64)
        assert actual.shape == expected.shape, name
        defined = ~np.isnan(expected)  # NaN: an element the kernel never writes
        assert defined.any(), name
        rtol = RTOL[decl.dtype]
        scale = float(np.abs(expected[defined]).max()) or 1.0
        np.testing.assert_allclose(actual[defined], expected[defined], rtol=rtol, atol=rtol * scale,
                                   err_msg=f"{path}: tensor {name}")


def test_formulations_can_fail():
    """A wrong kernel must be caught: gemm against the transpose of its product."""
    from polymap.driver import parse

    src = (ROOT / "examples" / "gemm.loop").read_text().replace("B[k, j]", "B[j, k]")
    (kernel,) = parse(src, "gemm_wrong.loop", check=False).kernels
    params = {"M": 4, "N": 4, "K": 4}
    arrays = _inputs(kernel, "examples/gemm.loop", params)
    got = reference.execute(kernel, arrays, params)["C"]
    want = FORMULATIONS["examples/gemm.loop"](arrays, params)["C"]
    assert not np.allclose(got, want, rtol=1e-3)
