"""The Python API: each command as one function, checked against independent results."""
from pathlib import Path

import numpy as np
import pytest

import polymap
from polymap.errors import IllegalTransformation, InvalidMapping, SemanticError

ROOT = Path(__file__).resolve().parents[1]
GEMM = ROOT / "examples" / "gemm.loop"
PARAMS = {"M": 13, "N": 11, "K": 7}
MAPPING = {"levels": [
    {"level": "DRAM", "order": ["i", "j", "k"]},
    {"level": "GLB", "tile": {"i": 5, "j": 4, "k": 3}, "order": ["k", "i", "j"]},
    {"level": "RF", "tile": {"i": 1, "j": 1, "k": 1}},
]}


@pytest.fixture(scope="module")
def gemm():
    return polymap.load(GEMM).kernels[0]


def test_parse_reports_located_errors():
    with pytest.raises(SemanticError) as exc:
        polymap.parse("kernel k(N = 4) {\n  in A[N]\n  for i in 0..N { A[i] = 0 }\n}\n", "bad.loop")
    d = exc.value.diagnostics[0]
    assert (d.loc.line, "in") == (3, "in") and "A" in d.message


def test_dependences_classify_gemm_loops(gemm):
    report = polymap.dependences(gemm)
    assert report.analysis == "value-based"
    assert report.loops["i"].parallel and report.loops["j"].parallel
    assert report.loops["k"].reduction and not report.loops["k"].parallel
    assert {(d.source, d.sink) for d in report.dependences if d.kind == "RAW"} == {("init", "acc"), ("acc", "acc")}


def test_check_order_and_mapping(gemm):
    assert polymap.check(gemm, order=("k", "i", "j")).legal
    assert polymap.check(gemm, mapping=MAPPING, arch="toy", params=PARAMS).legal
    scalar = polymap.load(ROOT / "examples" / "gemm_scalar_acc.loop").kernels[0]
    verdict = polymap.check(scalar, order=("k", "i", "j"))
    assert not verdict.legal and verdict.violations[0].witness is not None


def test_cost_counts_compulsory_traffic(gemm):
    report = polymap.cost(gemm, MAPPING, arch="toy", params=PARAMS)
    dram = report.counts.levels[0]
    # every element of A and B is read from DRAM at least once, C written back once
    assert dram.tensor("A").reads >= 13 * 7 and dram.tensor("B").reads >= 7 * 11
    assert dram.tensor("C").updates == 13 * 11
    assert report.counts.instances == 13 * 11 * (7 + 1)


def test_cost_refuses_an_overfull_mapping(gemm):
    big = {"levels": [{"level": "DRAM"}, {"level": "GLB", "tile": {"i": 13, "j": 11, "k": 7}},
                      {"level": "RF", "tile": {"i": 13, "j": 11, "k": 7}}]}
    with pytest.raises(InvalidMapping) as exc:
        polymap.cost(gemm, big, arch="toy", params=PARAMS)
    assert "RF" in str(exc.value) and "64" in str(exc.value)


def test_transform_compile_and_run_agree_with_numpy(gemm):
    text = polymap.transform(gemm, MAPPING, arch="toy")
    tiled = polymap.parse(text, "tiled.loop").kernels[0]
    rng = np.random.default_rng(0)
    arrays = {"A": rng.random((13, 7), dtype=np.float32), "B": rng.random((7, 11), dtype=np.float32)}
    want = arrays["A"] @ arrays["B"]
    for kernel, target in ((tiled, "reference"), (gemm, "c"), (gemm, "numpy")):
        out = polymap.run(kernel, arrays, params=PARAMS, target=target, mapping=None if target == "reference" else MAPPING,
                          arch="toy")
        np.testing.assert_allclose(out["C"], want, rtol=1e-5)
    result = polymap.compile(gemm, arch="toy", mapping=MAPPING, params=PARAMS,
                             options=polymap.CompileOptions(targets=("c",)))
    assert "void gemm(" in result.c_source and result.verification is not None


def test_compile_refuses_an_illegal_mapping():
    seidel = polymap.load(ROOT / "examples" / "seidel2d.loop").kernels[0]
    with pytest.raises(IllegalTransformation):
        polymap.compile(seidel, arch="toy", params={"T": 2, "N": 6}, options=polymap.CompileOptions(verify=False),
                        mapping={"levels": [
            {"level": "DRAM"}, {"level": "GLB"}, {"level": "RF", "order": ["t", "j", "i"]}]})
