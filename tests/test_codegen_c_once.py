"""Values computed once: a function of constants and input scalars leaves the loops (codegen/c/expr.py).

Against the reference execution (verify), and against the kernel's own text: what is hoisted reads
only constants and scalars no statement writes, what reads an iterator, an array or a written scalar
stays in the loop.
"""
from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from polymap.codegen.c.emitter import emit_c
from polymap.codegen.verify import verify
from polymap.driver import load_program, parse
from polymap.poly import build_model

ROOT = Path(__file__).parent.parent

PER_INSTANCE = """
kernel t(N = 9) {
  in    a        : f64
  in    b        : f32
  inout s        : f64
  inout x[N]     : f64
  out   y[N]     : f32
  for i in 0..N {
    bump: s += 1.0
    use: x[i] = x[i] / (sqrt(a) * sqrt(s)) + exp(a * 0.5) + sqrt(x[i])
    small: y[i] = y[i] + sqrt(b) + exp(a * 0.5)
  }
}
"""


@pytest.mark.skipif(shutil.which("cc") is None, reason="no C compiler")
def test_correlations_sqrt_of_the_sample_count_is_computed_once():
    # data[i, j] /= sqrt(float_n) * stddev[j]: sqrt per element (errno: neither hoisted nor vectorised
    # by GCC) made the loop scalar; computed once, the loop divides in vectors; the same values
    kernel = load_program(ROOT / "examples" / "polybench" / "correlation.loop").kernels[0]
    src = emit_c(kernel, build_model(kernel))
    assert "  const double polymap_once_0 = sqrt(float_n[0]);" in src.splitlines()
    reduce = next(ln for ln in src.splitlines() if ln.endswith("/* reduce */"))
    assert "polymap_once_0" in reduce and "sqrt" not in reduce
    assert verify(kernel, {"M": 13, "N": 17}, targets=("c",)).passed


@pytest.mark.skipif(shutil.which("cc") is None, reason="no C compiler")
def test_only_constants_and_unwritten_scalars_are_hoisted():
    kernel = parse(PER_INSTANCE, "t.loop").kernels[0]
    src = emit_c(kernel, build_model(kernel))
    lines = src.splitlines()
    once = [ln.strip() for ln in lines if ln.strip().startswith("const ") and "polymap_once_" in ln]
    # sqrt(a), exp(a * 0.5) once (the same text twice is one local), sqrt(b) in f32; never sqrt(s) (s is
    # written) nor sqrt(x[i]) (an array element)
    assert once == ["const double polymap_once_0 = sqrt(a[0]);",
                    "const double polymap_once_1 = exp((a[0] * 0.5));",
                    "const float polymap_once_2 = sqrtf(b[0]);"], once
    use = next(ln for ln in lines if ln.endswith("/* use */"))
    assert "sqrt(s[0])" in use and "sqrt(x[" in use and "polymap_once_0" in use and "polymap_once_1" in use
    assert verify(kernel, {"N": 9}, targets=("c",)).passed


def test_an_integer_operation_stays_where_the_program_evaluates_it():
    # sqrt(p / q) with p, q input integers: computed before the loops, the division would run (and trap
    # for q = 0) even where no instance of the statement does (N = 0); sqrt(p) alone may leave
    text = """
kernel t(N = 4) {
  in    p        : i32
  in    q        : i32
  inout x[N]     : f64
  for i in 0..N {
    s: x[i] = x[i] + sqrt(p / q) + sqrt(p)
  }
}
"""
    kernel = parse(text, "t.loop").kernels[0]
    lines = emit_c(kernel, build_model(kernel)).splitlines()
    once = [ln.strip() for ln in lines if ln.strip().startswith("const ") and "polymap_once_" in ln]
    assert len(once) == 1 and "/" not in once[0] and "p[0]" in once[0], once
    s = next(ln for ln in lines if ln.endswith("/* s */"))
    assert "q[0]" in s and "polymap_once_0" in s
