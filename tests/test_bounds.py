"""Out-of-bounds errors and uninitialised-read warnings, with their witnesses.

The witnesses are worked out by hand from each kernel: the smallest
instance (at the defaults, else at the smallest parameters) that goes wrong.
"""
from __future__ import annotations

import pytest

from polymap.driver import parse, warnings_of
from polymap.errors import SemanticError
from polymap.passes.frontend.bounds import bounds_diagnostics


def diagnostics(text: str):
    kernel = parse(text, "b.loop", check=False).kernels[0]
    return bounds_diagnostics(kernel)


def errors(text: str) -> list[str]:
    return [d.message for d in diagnostics(text) if d.severity == "error"]


def warnings(text: str) -> list[str]:
    return [d.message for d in diagnostics(text) if d.severity == "warning"]


SHIFTED_READ = """kernel shift(N = 8) {
  in  A[N]
  out B[N]
  for i in 0..N { B[i] = A[i + 1] }
}
"""


def test_out_of_bounds_read_has_the_witness_of_the_spec():
    (d,) = diagnostics(SHIFTED_READ)
    assert d.severity == "error"
    assert d.message == "A[i + 1] reads A[8] when i = 7, but A has extent 8 in dimension 0"
    # the caret sits under the reference as written
    assert (d.loc.line, d.loc.col, d.loc.end_col) == (4, 26, 34)


def test_parse_with_check_raises_the_bounds_error():
    with pytest.raises(SemanticError) as info:
        parse(SHIFTED_READ, "b.loop")
    text = info.value.render()
    assert "b.loop:4:26: error: A[i + 1] reads A[8] when i = 7" in text
    assert "^^^^^^^^" in text


def test_out_of_bounds_write_below_zero_in_second_dimension():
    text = """kernel w() {
  in  X[4, 5]
  out Y[4, 5]
  for i in 0..4, j in 0..5 { Y[i, j - 2] = X[i, j] }
}
"""
    assert errors(text) == ["Y[i, j - 2] writes Y[0, -2] when i = 0, j = 0, but Y has extent 5 in dimension 1"]


def test_compound_target_is_reported_once_as_a_write():
    text = """kernel w(N = 3) {
  in    X[N]
  inout Y[N]
  for i in 0..N { Y[i + 1] += X[i] }
}
"""
    assert errors(text) == ["Y[i + 1] writes Y[3] when i = 2, but Y has extent 3 in dimension 0"]


def test_stencil_in_bounds_has_no_diagnostic():
    text = """kernel jacobi(N = 10, T = 3) {
  inout A[N, N]
  local B[N, N]
  for t in 0..T {
    for i in 1..N-1, j in 1..N-1 {
      B[i, j] = 0.2 * (A[i, j] + A[i - 1, j] + A[i + 1, j] + A[i, j - 1] + A[i, j + 1])
    }
    for i in 1..N-1, j in 1..N-1 { A[i, j] = B[i, j] }
  }
}
"""
    assert diagnostics(text) == []


def test_halo_of_a_strided_convolution_is_in_bounds():
    text = """kernel conv(P = 5, R = 3) {
  in  I[2*P + R - 1]
  in  W[R]
  out O[P]
  for p in 0..P { O[p] = 0 }
  for p in 0..P, r in 0..R { O[p] += I[2*p + r] * W[r] }
}
"""
    assert diagnostics(text) == []


def test_witness_needs_parameter_values_away_from_the_defaults():
    # in bounds at the defaults (N = 4 <= M = 8) but not when N > M; the smallest
    # such parameters, lexicographically in header order, are N = 2, M = 1
    text = """kernel k(N = 4, M = 8) {
  in  A[M]
  out B[N]
  for i in 0..N { B[i] = A[i] }
}
"""
    assert errors(text) == [
        "A[i] reads A[1] when i = 1, but A has extent 1 in dimension 0 (with N = 2, M = 1)"]


def test_where_clause_rules_the_witness_out():
    text = """kernel k(N = 4, M = 8) where M >= N {
  in  A[M]
  out B[N]
  for i in 0..N { B[i] = A[i] }
}
"""
    assert diagnostics(text) == []


def test_witness_at_the_defaults_is_preferred():
    # out of bounds for every N; at the default N = 5 the last i is 4
    text = """kernel k(N = 5) {
  in  A[N]
  out B[N]
  for i in 0..N { B[i] = A[N - i] }
}
"""
    assert errors(text) == ["A[N - i] reads A[5] when i = 0, but A has extent 5 in dimension 0"]


def test_parameter_without_default_is_named():
    text = """kernel k(N) {
  in  A[N]
  out B[N]
  for i in 0..N { B[i] = A[i + 2] }
}
"""
    assert errors(text) == ["A[i + 2] reads A[2] when i = 0, but A has extent 1 in dimension 0 (with N = 1)"]


# --------------------------------------------------------------------------- uninitialised reads


def test_local_scalar_read_before_written():
    text = """kernel k(N = 4) {
  in    A[N]
  out   B[N]
  local t
  for i in 0..N {
    use: B[i] = t + A[i]
    def: t = A[i]
  }
}
"""
    ds = diagnostics(text)
    assert [d.severity for d in ds] == ["warning"]
    # only i = 0 reads t before any write: later iterations read the previous one
    assert ds[0].message == "use reads t when i = 0, but no earlier statement instance writes t"
    assert (ds[0].loc.line, ds[0].loc.col) == (6, 17)


def test_out_tensor_read_before_written():
    text = """kernel k(N = 4) {
  in  A[N]
  out C[N]
  for i in 0..N { C[i] += A[i] }
}
"""
    assert warnings(text) == ["S0 reads C[0] when i = 0, but no earlier statement instance writes C[0]"]


def test_partial_initialisation_names_the_first_unwritten_element():
    text = """kernel k(N = 4) {
  in  A[N]
  out C[N]
  for i in 1..N { init: C[i] = 0 }
  for i in 0..N { acc: C[i] += A[i] }
}
"""
    assert warnings(text) == ["acc reads C[0] when i = 0, but no earlier statement instance writes C[0]"]


def test_gemm_with_init_has_no_warning():
    text = """kernel gemm(M = 4, N = 4, K = 4) {
  in  A[M, K]
  in  B[K, N]
  out C[M, N]
  for i in 0..M, j in 0..N {
    init: C[i, j] = 0
    for k in 0..K { acc: C[i, j] += A[i, k] * B[k, j] }
  }
}
"""
    assert diagnostics(text) == []
    program = parse(text, "g.loop")
    assert warnings_of(program) == []


def test_inout_and_in_reads_never_warn():
    text = """kernel k(N = 4) {
  in    A[N]
  inout C[N]
  for i in 0..N { C[i] += A[i] }
}
"""
    assert diagnostics(text) == []


def test_warnings_are_kept_by_parse():
    text = """kernel k(N = 4) {
  in  A[N]
  out C[N]
  for i in 0..N { C[i] += A[i] }
}
"""
    program = parse(text, "w.loop")
    (w,) = warnings_of(program)
    assert w.severity == "warning" and "C[0]" in w.message
    assert warnings_of(program, "k") == [w] and warnings_of(program, "other") == []
