"""``polymap show`` in-process: JSON shape, human report, exit statuses."""
from __future__ import annotations

import json

import islpy as isl
import pytest

from polymap.cli import main

GEMM = """# gemm
kernel gemm(M = 8, N = 6, K = 4) {
  in    A[M, K] : f32
  in    B[K, N] : f32
  out   C[M, N] : f64
  for i in 0..M, j in 0..N {
    init: C[i, j] = 0
    for k in 0..K {
      acc: C[i, j] += A[i, k] * B[k, j]
    }
  }
}
"""

TWO = """kernel first(N = 4) {
  out X[N]
  for i in 0..N { X[i] = i }
}
kernel second(N, M = 2) {
  out Y[N, M]
  for i in 0..N, j in 0..M { fill: Y[i, j] = 1 }
}
"""

OOB = """kernel k(N = 8) {
  in  A[N]
  out B[N]
  for i in 0..N { B[i] = A[i + 1] }
}
"""

UNINIT = """kernel k(N = 4) {
  in  A[N]
  out C[N]
  for i in 0..N { red: C[i] += A[i] }
}
"""


@pytest.fixture
def loop_file(tmp_path):
    def write(text: str, name: str = "k.loop"):
        path = tmp_path / name
        path.write_text(text)
        return str(path)
    return write


def run(capsys, argv):
    status = main(argv)
    out, err = capsys.readouterr()
    return status, out, err


def test_json_document(capsys, loop_file):
    status, out, err = run(capsys, ["show", loop_file(GEMM), "--json"])
    assert status == 0 and err == ""
    doc = json.loads(out)
    (k,) = doc["kernels"]
    assert list(k) == ["name", "params", "context", "tensors", "statements"]
    assert k["name"] == "gemm" and k["params"] == {"M": 8, "N": 6, "K": 4}
    assert isl.Set(k["context"]).is_equal(isl.Set("[M, N, K] -> { : M > 0 and N > 0 and K > 0 }"))
    assert k["tensors"] == [
        {"name": "A", "role": "in", "dtype": "f32", "shape": ["M", "K"]},
        {"name": "B", "role": "in", "dtype": "f32", "shape": ["K", "N"]},
        {"name": "C", "role": "out", "dtype": "f64", "shape": ["M", "N"]},
    ]
    assert [s["name"] for s in k["statements"]] == ["init", "acc"]
    acc = k["statements"][1]
    assert acc["loops"] == ["i", "j", "k"]
    assert isl.Set(acc["domain"]).is_equal(
        isl.Set("[M, N, K] -> { acc[i, j, k] : 0 <= i < M and 0 <= j < N and 0 <= k < K }"))
    assert isl.Map(acc["schedule"]).is_equal(isl.Map(
        "[M, N, K] -> { acc[i, j, k] -> [0, i, 0, j, 1, k, 0] : 0 <= i < M and 0 <= j < N and 0 <= k < K }"))
    for a in acc["accesses"]:
        assert set(a) == {"tensor", "kind", "relation"}
        assert isl.Map(a["relation"]).domain().is_equal(isl.Set(acc["domain"]))


def test_defines_override_defaults(capsys, loop_file):
    status, out, _ = run(capsys, ["show", loop_file(GEMM), "--json", "-D", "M=3", "-D", "K=2"])
    assert status == 0
    assert json.loads(out)["kernels"][0]["params"] == {"M": 3, "N": 6, "K": 2}


def test_several_kernels_and_missing_default(capsys, loop_file):
    path = loop_file(TWO)
    status, out, _ = run(capsys, ["show", path, "--json"])
    assert status == 0
    doc = json.loads(out)
    assert [k["name"] for k in doc["kernels"]] == ["first", "second"]
    assert doc["kernels"][1]["params"] == {"N": None, "M": 2}
    assert doc["kernels"][0]["statements"][0]["name"] == "S0"
    status, out, _ = run(capsys, ["show", path, "--json", "--kernel", "second", "-D", "N=5"])
    assert status == 0
    (k,) = json.loads(out)["kernels"]
    assert k["name"] == "second" and k["params"] == {"N": 5, "M": 2}


def test_human_report_lists_every_statement(capsys, loop_file):
    status, out, _ = run(capsys, ["show", loop_file(GEMM)])
    assert status == 0
    assert "kernel gemm(M = 8, N = 6, K = 4)" in out
    assert "statement init: C[i, j] = 0" in out
    assert "statement acc: C[i, j] += A[i, k] * B[k, j]" in out
    # the parameter prefix and the context constraints are dropped for people
    assert "{ acc[i, j, k] : 0 <= i < M and 0 <= j < N and 0 <= k < K }" in out
    assert "{ acc[i, j, k] -> A[i, k] }" in out
    assert "[M, N, K] ->" not in out


def test_warnings_go_to_the_report_and_to_stderr_with_json(capsys, loop_file):
    path = loop_file(UNINIT)
    status, out, err = run(capsys, ["show", path])
    assert status == 0
    assert "warning: red reads C[0] when i = 0, but no earlier statement instance writes C[0]" in out
    status, out, err = run(capsys, ["show", path, "--json"])
    assert status == 0 and json.loads(out)["kernels"][0]["name"] == "k"
    assert f"{path}:4:24: warning: red reads C[0]" in err


@pytest.mark.parametrize("argv_tail, text, needle", [
    ([], OOB, "error: A[i + 1] reads A[8] when i = 7, but A has extent 8 in dimension 0"),
    ([], "kernel k( {", "error"),
    (["--kernel", "nope"], GEMM, "no kernel named 'nope'"),
    (["-D", "Q=3"], GEMM, "-D Q"),
    (["-D", "M=0"], GEMM, "must be >= 1"),
    (["-D", "M"], GEMM, "expected NAME=VALUE"),
])
def test_bad_input_exits_2(capsys, loop_file, argv_tail, text, needle):
    status, out, err = run(capsys, ["show", loop_file(text), *argv_tail])
    assert status == 2
    assert out == ""
    assert needle in err
    assert "Traceback" not in err


def test_unreadable_file_exits_2(capsys, tmp_path):
    status, _, err = run(capsys, ["show", str(tmp_path / "absent.loop")])
    assert status == 2 and "cannot read" in err
