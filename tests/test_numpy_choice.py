"""The NumPy target's own choice: every innermost tile one whole-array expression, results right."""
from __future__ import annotations

from pathlib import Path

import pytest

from polymap.codegen.numpy.emitter import emit_numpy
from polymap.codegen.verify import verify
from polymap.driver import load_program
from polymap.machine.presets import load_architecture
from polymap.passes.search.numpy_choice import MAX_ELEMENTS, numpy_blocks, numpy_mappings
from polymap.poly import build_model

ROOT = Path(__file__).parent.parent
HOST = load_architecture("host")


def test_gemm_is_one_matmul_without_python_loops():
    kernel = load_program(ROOT / "examples" / "gemm.loop").kernels[0]
    model = build_model(kernel)
    params = {"M": 1024, "N": 1024, "K": 1024}
    maps = numpy_mappings(model, HOST, params, reassociate=True)
    src = emit_numpy(kernel, model, maps[0], reassociate=True)
    body = src.split("def gemm(", 1)[1]
    assert body.count(" @ ") == 1 and "for " not in body


def test_in_order_rounding_bounds_the_box():
    # without reassociation the products are folded in order over the whole box: blocks keep it small
    kernel = load_program(ROOT / "examples" / "gemm.loop").kernels[0]
    model = build_model(kernel)
    params = {"M": 1024, "N": 1024, "K": 1024}
    blocks = numpy_blocks(model, 0, params)
    assert (blocks["i"] or 1024) * (blocks["j"] or 1024) * (blocks["k"] or 1024) <= MAX_ELEMENTS


def test_broadcasting_statement_is_blocked():
    # C[i, j] += A[i, k] + B[k, j] is no product: its whole i x j x k box would be broadcast
    text = (ROOT / "examples" / "gemm.loop").read_text().replace("A[i, k] * B[k, j]", "A[i, k] + B[k, j]")
    from polymap.driver import parse

    kernel = parse(text, "g.loop").kernels[0]
    model = build_model(kernel)
    params = {"M": 512, "N": 512, "K": 512}
    blocks = numpy_blocks(model, 0, params)
    box = 1
    for x in ("i", "j", "k"):
        box *= blocks[x] or params[{"i": "M", "j": "N", "k": "K"}[x]]
    assert box <= MAX_ELEMENTS


@pytest.mark.parametrize("name", ["2mm", "syrk", "trmm", "doitgen", "symm", "lu"])
def test_numpy_choice_verifies(name):
    from polymap.passes.frontend.rename import distinct_loop_names

    kernel = distinct_loop_names(load_program(ROOT / "examples" / "polybench" / f"{name}.loop").kernels[0])
    model = build_model(kernel)
    params = {p.name: min(p.default or 9, 9) for p in kernel.params}
    maps = numpy_mappings(model, HOST, params)
    assert verify(kernel, params, targets=("numpy",), mapping=maps, model=model).passed
