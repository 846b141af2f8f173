"""``polymap transform``: the mapped kernel in ``.loop`` parses again and computes the same results.

The printed kernel is re-parsed (with all semantic and ISL checks) and run by
the reference interpreter; its outputs must equal those of the original.
"""
from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from polymap.cli import main
from polymap.codegen.loop_emitter import emit_loop
from polymap.driver import load_program, parse
from polymap.mapping.model import nest_loops
from polymap.passes.schedule.tiling import order_mapping
from polymap.poly import build_model
from polymap.reference import execute
from polymap.tensors import random_inputs

from test_codegen_numpy import CASES, kernel_of, two_level

EXAMPLES = Path(__file__).parent.parent / "examples"


def assert_equivalent(kernel, params, mapping):
    text = emit_loop(kernel, build_model(kernel), mapping)
    again = parse(text, "<transformed>").kernels[0]
    assert [(d.name, d.role, d.dtype) for d in again.decls] == [(d.name, d.role, d.dtype) for d in kernel.decls]
    assert again.param_names == kernel.param_names
    inputs = random_inputs(kernel, params, seed=5, well_conditioned=True)
    want = execute(kernel, inputs, params)
    got = execute(again, inputs, params)
    for name, w in want.items():
        # same operations in the same order per element: equal up to summation order only
        tol = 2e-4 if w.dtype == np.float32 else 1e-9
        np.testing.assert_allclose(got[name], w, rtol=tol, atol=tol, err_msg=name)
    return text


@pytest.mark.parametrize("name,params,mapping", CASES, ids=[f"{c[0]}-{k}" for k, c in enumerate(CASES)])
def test_transform_round_trip(name, params, mapping):
    k = kernel_of(name)
    if params is None:
        params = {p.name: min(p.default or 6, 8) for p in k.params}
    assert_equivalent(k, params, mapping(k) if mapping else None)


def test_tile_loops_have_fresh_names_and_point_loops_keep_theirs():
    k = kernel_of("gemm")
    text = assert_equivalent(k, {"M": 9, "N": 7, "K": 11},
                             two_level(k, {"i": 3, "j": 5, "k": 4}, "ijk", "kij"))
    assert "for i0 in 0..floor((M + 2) / 3)" in text
    assert "for i in 3 * i0..min(M, 3 * i0 + 3)" in text
    assert "acc: C[i, j] += A[i, k] * B[k, j]" in text


def test_fresh_names_avoid_kernel_names():
    k = parse("""kernel g(M = 5, i0 = 2) {
      in A[M] : f32
      out B[M] : f32
      for i in 0..M { B[i] = A[i] * i0 }
    }""").kernels[0]
    mp = two_level(k, {"i": 2}, ("i",), ("i",))
    text = assert_equivalent(k, {"M": 5, "i0": 2}, mp)
    assert "for i0_1 in" in text


def test_iterator_used_as_value_is_bound_by_name():
    k = parse("""kernel g(N = 7) {
      out B[N] : f64
      for i in 0..N { B[i] = i / 2 }
    }""").kernels[0]
    assert_equivalent(k, {"N": 7}, two_level(k, {"i": 3}, ("i",), ("i",)))


@pytest.mark.parametrize("order", [("k", "j", "i"), ("j", "k", "i")])
def test_loop_orders(order):
    k = kernel_of("gemm")
    assert_equivalent(k, {"M": 4, "N": 5, "K": 3}, order_mapping(k, 0, nest_loops(k, 0), order))


GEMM_MAPPING = """levels:
  - level: DRAM
    order: [i, j, k]
  - level: GLB
    tile: {i: 4, j: 3, k: 5}
    order: [k, i, j]
  - level: RF
    tile: {i: 1, j: 1, k: 1}
"""


def test_cli_prints_source_and_json(tmp_path, capsys, golden):
    m = tmp_path / "m.yaml"
    m.write_text(GEMM_MAPPING)
    assert main(["transform", str(EXAMPLES / "gemm.loop"), "--mapping", str(m)]) == 0
    text = capsys.readouterr().out
    golden.check("gemm_tiled.transform.loop", text)
    parse(text)
    assert main(["transform", str(EXAMPLES / "gemm.loop"), "--mapping", str(m), "--json", "--arch", "toy"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["kernel"] == "gemm" and doc["source"] == text


def test_cli_refuses_an_illegal_mapping(tmp_path, capsys):
    m = tmp_path / "m.yaml"
    m.write_text("""levels:
  - level: DRAM
    order: [i, j, k]
  - level: GLB
    tile: {i: 2, j: 2, k: 2}
  - level: RF
    tile: {i: 1, j: 1, k: 1}
""")
    assert main(["transform", str(EXAMPLES / "lu.loop"), "--mapping", str(m), "-D", "N=6"]) == 1
    out = capsys.readouterr().out  # "no" is the answer, on standard output
    assert "illegal" in out


def test_cli_bad_mapping_is_bad_input(tmp_path):
    m = tmp_path / "m.yaml"
    m.write_text("levels:\n  - level: NOPE\n")
    assert main(["transform", str(EXAMPLES / "gemm.loop"), "--mapping", str(m)]) == 2
