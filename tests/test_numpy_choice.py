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


#: gemm whose product feeds a division: no pure contraction, so folded in order by default
GEMM_THEN_DIVIDED = (ROOT / "examples" / "gemm.loop").read_text().replace(
    "out   C[M, N] : f32", "local C[M, N] : f32\n  out   D[M, N] : f32").replace(
    "      acc: C[i, j] += A[i, k] * B[k, j]\n    }", "      acc: C[i, j] += A[i, k] * B[k, j]\n    }\n    div: D[i, j] = 1 / C[i, j]")


def test_in_order_rounding_bounds_the_box():
    # without reassociation the products of a contraction that is not pure are folded in order over
    # the whole box: blocks keep it small
    from polymap.driver import parse

    kernel = parse(GEMM_THEN_DIVIDED, "g.loop").kernels[0]
    assert "div:" in GEMM_THEN_DIVIDED
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


def test_pure_gemm_is_one_matmul_by_default():
    """gemm's C += A @ B is a pure contraction (its result is the output, nothing reads it): the
    default NumPy module is one ``@`` (issue 10: within 1.5x of ``a @ b``), without Python loops."""
    kernel = load_program(ROOT / "examples" / "gemm.loop").kernels[0]
    model = build_model(kernel)
    params = {"M": 1024, "N": 1024, "K": 1024}
    maps = numpy_mappings(model, HOST, params)
    body = emit_numpy(kernel, model, maps[0]).split("def gemm(", 1)[1]
    assert body.count(" @ ") == 1 and "for " not in body and "accumulate" not in body


@pytest.mark.parametrize("dtype", ["f32", "f64"])
@pytest.mark.parametrize("sizes", [(1, 1, 1), (7, 7, 7), (17, 17, 17), (257, 33, 65), (100, 110, 120)])
def test_pure_gemm_folded_by_matmul_verifies(dtype, sizes):
    """The default NumPy module of gemm (one ``@``, another order of additions) against the reference
    execution, within verification's tolerance (scaled to the dtype and the reduction length)."""
    from polymap.driver import parse

    kernel = parse((ROOT / "examples" / "gemm.loop").read_text().replace(": f32", f": {dtype}"), "g.loop").kernels[0]
    model = build_model(kernel)
    params = dict(zip(("M", "N", "K"), sizes))
    maps = numpy_mappings(model, HOST, params)
    assert " @ " in emit_numpy(kernel, model, maps)
    assert verify(kernel, params, targets=("numpy",), mapping=maps, model=model).passed


@pytest.mark.parametrize("name", ["gramschmidt", "durbin"])
def test_reductions_that_feed_other_statements_keep_their_order(name):
    """gramschmidt's ``nrm`` (read by sqrt, then dividing) and durbin's sums feed other statements:
    not pure contractions, folded in order, and the module matches the reference bit for bit."""
    import numpy as np

    from polymap.codegen.numpy.emitter import run_numpy
    from polymap.reference import execute
    from polymap.tensors import random_inputs

    kernel = load_program(ROOT / "examples" / "polybench" / f"{name}.loop").kernels[0]
    model = build_model(kernel)
    params = {p.name: min(p.default or 20, 20) for p in kernel.params}
    maps = numpy_mappings(model, HOST, params)
    src = emit_numpy(kernel, model, maps)
    assert "accumulate" in src and " @ " not in src and "einsum" not in src
    inputs = random_inputs(kernel, params, seed=5)
    got, want = run_numpy(kernel, inputs, params, maps, model=model), execute(kernel, inputs, params)
    for t in got:
        assert np.array_equal(got[t], want[t]), t


def test_pure_contraction_rule():
    """Which statements are pure contractions, from the rule's own definition."""
    from polymap.driver import parse
    from polymap.passes.frontend.contraction import pure_contraction

    def pure(text, label):
        k = parse(text, "k.loop").kernels[0]
        return pure_contraction(k, next(c.stmt for c in k.statements() if c.stmt.label == label))

    gemm = (ROOT / "examples" / "gemm.loop").read_text()
    assert pure(gemm, "acc")
    assert not pure(GEMM_THEN_DIVIDED, "acc")  # a local read by a division
    assert not pure(gemm.replace("A[i, k] * B[k, j]", "A[i, k] + B[k, j]"), "acc")  # no product
    assert not pure(gemm.replace("out   C", "inout C").replace("init: C[i, j] = 0", "init: C[i, j] = C[i, j] * C[i, j]"),
                    "acc")  # another statement reads C
    assert pure(gemm.replace("out   C", "inout C").replace("init: C[i, j] = 0", "init: C[i, j] *= 2"), "acc")
    for name, want in (("gramschmidt", set()), ("durbin", set()), ("2mm", {"d_acc"}), ("gemm", {"acc"})):
        k = load_program(ROOT / "examples" / "polybench" / f"{name}.loop").kernels[0]
        assert {c.stmt.label for c in k.statements() if pure_contraction(k, c.stmt)} == want, name
