"""``polymap run`` end to end, in-process through ``polymap.cli.main``."""
from __future__ import annotations

import json
import sys
import types

import numpy as np
import pytest

from polymap.cli import main

GEMM = """\
kernel gemm(M = 4, N = 3, K = 5) {
  in  A[M, K] : f32
  in  B[K, N] : f32
  out C[M, N] : f32
  for i in 0..M, j in 0..N {
    init: C[i, j] = 0
    for k in 0..K {
      acc: C[i, j] += A[i, k] * B[k, j]
    }
  }
}
"""

TWO = """\
kernel fill(N = 6) {
  out Y[N] : i64
  for i in 0..N step 2 { Y[i] = i * i }
}
kernel parity(N = 7) {
  in  X[N] : f64
  out Y[N] : f64
  out m : f64
  m = X[0]
  for i in 0..N {
    if i % 2 == 0 { Y[i] = select(X[i] > 1, X[i], -X[i]) } else { Y[i] = X[i] / 4 }
    m max= X[i]
  }
}
"""


@pytest.fixture
def files(tmp_path):
    (tmp_path / "gemm.loop").write_text(GEMM)
    (tmp_path / "two.loop").write_text(TWO)
    rng = np.random.default_rng(0)
    a = rng.uniform(-1, 1, (4, 5)).astype(np.float32)
    b = rng.uniform(-1, 1, (5, 3)).astype(np.float32)
    np.savez(tmp_path / "in.npz", A=a, B=b)
    return tmp_path, a, b


def run(*argv: str) -> int:
    return main(["run", *map(str, argv)])


def test_run_writes_every_output(files, capsys):
    d, a, b = files
    assert run(d / "gemm.loop", "--inputs", d / "in.npz", "-o", d / "out.npz") == 0
    with np.load(d / "out.npz") as out:
        assert out.files == ["C"] and out["C"].dtype == np.float32
        np.testing.assert_allclose(out["C"], a @ b, rtol=1e-5, atol=1e-6)
    report = capsys.readouterr().out
    assert "gemm" in report and "C" in report and "4x3" in report and "f32" in report


def test_run_json(files, capsys):
    d, _, _ = files
    assert run(d / "gemm.loop", "--inputs", d / "in.npz", "-o", d / "o.npz", "--json") == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["kernel"] == "gemm" and doc["target"] == "reference"
    assert doc["outputs"]["C"]["shape"] == [4, 3] and doc["outputs"]["C"]["dtype"] == "f32"


@pytest.mark.parametrize("arrays, words", [
    ({"A": np.zeros((4, 5), np.float32)}, ["'B'", "(5, 3)"]),
    ({"A": np.zeros((4, 4), np.float32), "B": np.zeros((5, 3), np.float32)}, ["'A'", "(4, 5)", "(4, 4)"]),
    ({"A": np.zeros((4, 5), np.float64), "B": np.zeros((5, 3), np.float32)}, ["'A'", "f32", "f64"]),
    ({"A": np.zeros((4, 5), np.float32), "B": np.zeros((5, 3), np.float32), "Q": np.zeros(2)}, ["'Q'"]),
])
def test_bad_arrays_exit_2_naming_the_tensor(files, capsys, arrays, words):
    d, _, _ = files
    np.savez(d / "bad.npz", **arrays)
    assert run(d / "gemm.loop", "--inputs", d / "bad.npz", "-o", d / "o.npz") == 2
    err = capsys.readouterr().err
    assert "error" in err and "Traceback" not in err
    for w in words:
        assert w in err
    assert not (d / "o.npz").exists()


def test_missing_inputs_and_unreadable_files(files, capsys):
    d, _, _ = files
    assert run(d / "gemm.loop", "-o", d / "o.npz") == 2
    assert "--inputs" in capsys.readouterr().err
    (d / "junk.npz").write_text("junk")
    assert run(d / "gemm.loop", "--inputs", d / "junk.npz") == 2
    assert "junk.npz" in capsys.readouterr().err
    assert run(d / "nope.loop", "--inputs", d / "in.npz") == 2
    assert run(d / "gemm.loop", "--inputs", d / "in.npz", "-D", "Z=3") == 2
    assert "'Z'" in capsys.readouterr().err


def test_several_kernels_need_kernel(files, capsys):
    d, _, _ = files
    assert run(d / "two.loop", "-o", d / "o.npz") == 2
    err = capsys.readouterr().err
    assert "fill" in err and "parity" in err and "--kernel" in err
    assert run(d / "two.loop", "--kernel", "fill", "-D", "N=7", "-o", d / "o.npz") == 0
    want = np.zeros(7, np.int64)
    want[::2] = np.arange(0, 7, 2) ** 2
    np.testing.assert_array_equal(np.load(d / "o.npz")["Y"], want)


def test_parsed_kernel_with_if_select_and_max(files, capsys):
    d, _, _ = files
    x = np.random.default_rng(1).uniform(0.5, 1.5, 7)
    np.savez(d / "x.npz", X=x)
    assert run(d / "two.loop", "--kernel", "parity", "--inputs", d / "x.npz", "-o", d / "o.npz") == 0
    with np.load(d / "o.npz") as out:
        even = np.arange(7) % 2 == 0
        np.testing.assert_array_equal(out["Y"], np.where(even, np.where(x > 1, x, -x), x / 4))
        assert out["m"].shape == () and out["m"] == x.max()
