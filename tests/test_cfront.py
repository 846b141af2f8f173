"""C in: PolyBench-style C files read, run on the reference and compiled, against NumPy.

The C files under ``tests/cfiles/`` are written for these tests in PolyBench's
style (``polybench.h``'s macros, sizes in ``main``); PolyBench's own
``utilities/`` folder is passed with ``--cpp -I`` when it is on the machine,
else ``tests/cfiles/minimal-include/`` (our own stand-in for the few macros
used), so that CI reads the same files.
"""
from __future__ import annotations

import ctypes
import subprocess
from pathlib import Path

import numpy as np
import pytest

from numpy_formulations import _jacobi2d, _seidel2d, lu_packed, pb_gemm, pb_trmm
from shared_files import POLYBENCH
from polymap import api, pretty
from polymap.cli import main
from polymap.driver import load_program, param_values, parse
from polymap.poly import build_model
from polymap.reference import execute
from polymap.tensors import random_inputs

HERE = Path(__file__).parent / "cfiles"
UTILITIES = POLYBENCH / "utilities"
if not (UTILITIES / "polybench.h").exists():
    UTILITIES = HERE / "minimal-include"
CPP = f"-I {UTILITIES}"


def _backsubst(a, p):
    u = np.triu(np.array(a["U"], dtype=np.float64))
    return {"x": np.linalg.solve(u, np.array(a["b"], dtype=np.float64))}


#: file -> (NumPy formulation, inputs well conditioned?)
CASES = {
    "gemm.c": (pb_gemm, False),
    "jacobi-2d.c": (lambda a, p: _jacobi2d(a, p["tsteps"]), False),
    "lu.c": (lu_packed, True),
    "seidel-2d.c": (lambda a, p: _seidel2d(a, p["tsteps"]), False),
    "trmm.c": (lambda a, p: pb_trmm(a, {"M": p["m"]}), False),
    "backsubst.c": (_backsubst, True),
}


def _kernel(name: str):
    return load_program(HERE / name, cpp=CPP).kernels[0]


def _compare(got: dict, want: dict) -> None:
    for name, expected in want.items():
        np.testing.assert_allclose(got[name], expected, rtol=1e-10, atol=1e-12, err_msg=name)


@pytest.mark.parametrize("name", sorted(CASES))
def test_reference_matches_numpy(name):
    kernel = _kernel(name)
    params = param_values(kernel)
    formulation, conditioned = CASES[name]
    arrays = random_inputs(kernel, params, well_conditioned=conditioned)
    _compare(execute(kernel, arrays, params), formulation(arrays, params))


@pytest.mark.parametrize("name", sorted(CASES))
def test_generated_code_matches_numpy(name):
    kernel = _kernel(name)
    params = param_values(kernel)
    formulation, conditioned = CASES[name]
    arrays = random_inputs(kernel, params, well_conditioned=conditioned)
    want = formulation(arrays, params)
    for target in ("c", "numpy"):
        _compare(api.run(kernel, arrays, params=params, target=target, arch="toy"), want)


def test_gemm_as_read():
    kernel = _kernel("gemm.c")
    assert kernel.name == "kernel_gemm"
    assert [(p.name, p.default) for p in kernel.params] == [("ni", 6), ("nj", 7), ("nk", 5)]
    assert [(d.name, d.role, d.dtype) for d in kernel.decls] == [
        ("alpha", "in", "f64"), ("beta", "in", "f64"), ("C", "inout", "f64"), ("A", "in", "f64"),
        ("B", "in", "f64")]
    assert [pretty.expr(e) for e in kernel.decl("C").shape] == ["6", "7"]
    # PolyBench's arrays have constant extents and the loops run to arguments: the precondition is stated
    assert [pretty.expr(w) for w in kernel.where] == ["ni <= 6", "nj <= 7", "nk <= 5"]
    stmt = kernel.statements()[0].stmt
    assert (stmt.loc.filename, stmt.loc.line) == (str(HERE / "gemm.c"), 24)


@pytest.mark.parametrize("name", sorted(CASES))
def test_emit_loop_parses_to_the_same_model(name, capsys):
    assert main(["show", str(HERE / name), "--cpp", CPP, "--emit", "loop"]) == 0
    text = capsys.readouterr().out
    again = parse(text, "emitted.loop").kernels[0]
    original = _kernel(name)
    a, b = build_model(original), build_model(again)
    assert a.domains.is_equal(b.domains) and a.schedule.is_equal(b.schedule)
    assert a.reads.is_equal(b.reads) and a.writes.is_equal(b.writes)


def test_compile_keeps_the_original_argument_order(tmp_path, capsys):
    rc = main(["compile", str(HERE / "gemm.c"), "--cpp", CPP, "--arch", "toy", "-o", str(tmp_path),
               "--target", "c"])
    assert rc == 0, capsys.readouterr()
    src = (tmp_path / "kernel_gemm.c").read_text()
    assert ("void kernel_gemm(int ni, int nj, int nk, double polymap_arg_alpha, double polymap_arg_beta, "
            "double polymap_arg_C[6][7], double polymap_arg_A[6][5], double polymap_arg_B[5][7])") in src
    # drop it into a program that calls it as PolyBench's main does
    (tmp_path / "main.c").write_text(
        "#include <stdio.h>\n"
        "void kernel_gemm(int ni, int nj, int nk, double alpha, double beta,\n"
        "                 double C[6][7], double A[6][5], double B[5][7]);\n"
        "int main(void) {\n"
        "  double A[6][5], B[5][7], C[6][7];\n"
        "  for (int i = 0; i < 6; i++) for (int k = 0; k < 5; k++) A[i][k] = (i * 5 + k) % 7 / 7.0;\n"
        "  for (int k = 0; k < 5; k++) for (int j = 0; j < 7; j++) B[k][j] = (k * 7 + j) % 5 / 5.0;\n"
        "  for (int i = 0; i < 6; i++) for (int j = 0; j < 7; j++) C[i][j] = (i + j) % 3;\n"
        "  kernel_gemm(6, 7, 5, 1.5, 0.5, C, A, B);\n"
        "  for (int i = 0; i < 6; i++) for (int j = 0; j < 7; j++) printf(\"%.17g\\n\", C[i][j]);\n"
        "  return 0;\n}\n")
    exe = tmp_path / "prog"
    subprocess.run(["cc", "-O1", "-fopenmp", str(tmp_path / "main.c"), str(tmp_path / "kernel_gemm.c"),
                    "-o", str(exe), "-lm"], check=True, capture_output=True)
    got = np.array([float(x) for x in subprocess.run([str(exe)], capture_output=True, text=True,
                                                       check=True).stdout.split()]).reshape(6, 7)
    i, k, j = np.arange(6)[:, None], np.arange(5)[None, :], np.arange(7)[None, :]
    a = (i * 5 + k) % 7 / 7.0
    b = (np.arange(5)[:, None] * 7 + j) % 5 / 5.0
    c = ((i + j) % 3).astype(float)
    np.testing.assert_allclose(got, 1.5 * a @ b + 0.5 * c, rtol=1e-12)


# --------------------------------------------------------------------------- bad C

BAD = {
    "while": ("  while (i < n) { x[i] = 0; i++; }\n", "'while' loop is outside the language"),
    "pointer": ("  for (i = 0; i < n; i++) *(x + i) = 0;\n", "pointer"),
    "call in subscript": ("  for (i = 0; i < n; i++) x[f(i)] = 0;\n", "function call in a subscript"),
    "non-affine": ("  for (i = 0; i < n; i++) x[i * i] = 0;\n", "i * i"),
}


@pytest.mark.parametrize("case", sorted(BAD))
def test_bad_c_is_located(case, tmp_path, capsys):
    line, message = BAD[case]
    src = ("#define N 8\nint f(int);\nvoid kernel_bad(int n, double x[N]) {\n  int i = 0;\n"
           "#pragma scop\n" + line + "#pragma endscop\n}\n")
    path = tmp_path / "bad.c"
    path.write_text(src)
    rc = main(["show", str(path)])
    err = capsys.readouterr().err
    assert rc == 2
    assert err.startswith(f"{path}:6:"), err
    assert message in err
    assert line.rstrip("\n") in err and "^" in err


def test_no_scop_is_bad_input(tmp_path, capsys):
    path = tmp_path / "none.c"
    path.write_text("void f(int n, double x[4]) { x[0] = n; }\n")
    assert main(["deps", str(path)]) == 2
    assert "no '#pragma scop'" in capsys.readouterr().err


def test_c_syntax_error_is_located(tmp_path, capsys):
    path = tmp_path / "syntax.c"
    path.write_text("void f(int n, double x[4]) {\n#pragma scop\n  x[0] = = n;\n#pragma endscop\n}\n")
    assert main(["show", str(path)]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"{path}:3:"), err


def test_if_else_and_c99_loop_declarations(tmp_path, capsys):
    path = tmp_path / "band.c"
    path.write_text("#define N 8\n"
                    "void kernel_band(int n, double A[N][N], double x[N])\n{\n#pragma scop\n"
                    "  for (int i = 0; i < n; i++)\n"
                    "    for (int j = 0; j < n; j += 1)\n"
                    "      if (j <= i && i - j < 3)\n        x[i] += A[i][j];\n"
                    "      else\n        A[i][j] = 0.0;\n#pragma endscop\n}\n")
    assert main(["show", str(path), "--emit", "loop"]) == 0
    text = capsys.readouterr().out
    assert "if j <= i and i - j < 3 {" in text and "} else {" in text
    kernel = load_program(path).kernels[0]
    assert [pretty.expr(w) for w in kernel.where] == ["n <= 8"] and kernel.params[0].default is None
    params = {"n": 8}
    arrays = random_inputs(kernel, params)
    got = execute(kernel, arrays, params)
    a, x = np.array(arrays["A"]), np.array(arrays["x"])
    i, j = np.indices((8, 8))
    band = (j <= i) & (i - j < 3)
    np.testing.assert_allclose(got["x"], x + np.where(band, a, 0).sum(axis=1))
    np.testing.assert_allclose(got["A"], np.where(band, a, 0))


#: file -> the original function's arguments, in order
ARGUMENTS = {
    "gemm.c": "int ni, int nj, int nk, double polymap_arg_alpha, double polymap_arg_beta, double polymap_arg_C[6][7], "
              "double polymap_arg_A[6][5], double polymap_arg_B[5][7]",
    "jacobi-2d.c": "int tsteps, int n, double polymap_arg_A[8][8], double polymap_arg_B[8][8]",
    "lu.c": "int n, double polymap_arg_A[7][7]",
    "seidel-2d.c": "int tsteps, int n, double polymap_arg_A[7][7]",
    "trmm.c": "int m, int n, double polymap_arg_alpha, double polymap_arg_A[6][6], double polymap_arg_B[6][5]",
    "backsubst.c": "int n, double polymap_arg_U[6][6], double polymap_arg_b[6], double polymap_arg_x[6]",
}


@pytest.mark.parametrize("name", sorted(ARGUMENTS))
def test_compile_verifies_and_keeps_the_signature(name, tmp_path, capsys):
    rc = main(["compile", str(HERE / name), "--cpp", CPP, "--arch", "toy", "-o", str(tmp_path)])
    out = capsys.readouterr().out
    assert rc == 0 and "verified against the reference (c, numpy)" in out, out
    kernel = _kernel(name)
    assert f"void {kernel.name}({ARGUMENTS[name]})" in (tmp_path / f"{kernel.name}.c").read_text()


def test_the_c_example_reads_and_runs():
    kernel = load_program(Path(__file__).parent.parent / "examples" / "c" / "gemm.c").kernels[0]
    params = param_values(kernel)
    assert params == {"ni": 64, "nj": 48, "nk": 32}
    arrays = random_inputs(kernel, params)
    _compare(execute(kernel, arrays, params), pb_gemm(arrays, params))
