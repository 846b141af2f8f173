"""The vectorised reference execution equals the statement-by-statement one, bit for bit.

Random small kernels (aliasing and non-aliasing subscripts, reductions,
f32/f64/i32, conditions, triangular bounds) run both ways:
``execute(..., vectorize=False)`` is the plain interpreter, the oracle here.
"""
from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from polymap import ir
import polymap.reference.vector as rv
from polymap.reference import execute
from polymap.tensors import random_inputs

from test_reference import D, E, K, L, S


@pytest.fixture(autouse=True)
def strict(monkeypatch):
    """Small loops take the vector path too (an unexpected exception in it always propagates)."""
    monkeypatch.setattr(rv, "MIN_INSTANCES", 2)


def both(kernel, arrays, params):
    """Results (or the error) of both paths."""
    out = []
    for vectorize in (True, False):
        try:
            out.append(execute(kernel, {k: v.copy() for k, v in arrays.items()}, params,
                               vectorize=vectorize))
        except Exception as exc:  # noqa: BLE001 - compared below
            out.append((type(exc), str(exc)))
    return out


def assert_same(kernel, arrays, params):
    fast, slow = both(kernel, arrays, params)
    if isinstance(slow, tuple) or isinstance(fast, tuple):
        assert fast == slow
        return
    assert fast.keys() == slow.keys()
    for name in slow:
        assert fast[name].dtype == slow[name].dtype
        assert fast[name].tobytes() == slow[name].tobytes(), name


def count_runs(monkeypatch):
    """How many loops ran vectorised."""
    hits = []
    real = rv.Region.run

    def run(self, env):
        ok = real(self, env)
        hits.append(ok)
        return ok
    monkeypatch.setattr(rv.Region, "run", run)
    return hits


# --------------------------------------------------------------------------- sequential folds


@pytest.mark.parametrize("dtype,big", [(np.float32, 2.0 ** 24), (np.float64, 2.0 ** 53)])
def test_accumulate_is_sequential_unlike_sum(dtype, big):
    terms = np.ones(1001, dtype)
    terms[0] = big
    assert np.add.accumulate(terms, dtype=dtype)[-1] == big  # every + 1 rounds back to big
    assert np.sum(terms, dtype=dtype) != big  # pairwise: the ones add up first
    rows = np.tile(terms, (3, 1))
    assert np.all(np.add.accumulate(rows, axis=1, dtype=dtype)[:, -1] == big)


@pytest.mark.parametrize("dtype", ["f32", "f64"])
@pytest.mark.parametrize("op", ["+=", "-=", "*=", "/=", "max=", "min="])
def test_row_reductions_fold_in_order(dtype, op, monkeypatch):
    # s[i] OP= A[i, j]: one group per row, folded over j; A[i, 0] is huge so
    # that any reassociation of += shows.
    p = {"M": 3, "N": 700}
    k = K(p, [D("A", "in", "M, N", dtype), D("s", "inout", "M", dtype)],
          L("i", "0", "M", L("j", "0", "N", S("s[i]", op, "A[i, j] * 0.75 + 0.5"))))
    x = random_inputs(k, p, seed=3)
    x["A"][:, 0] = 2.0 ** (24 if dtype == "f32" else 53)
    hits = count_runs(monkeypatch)
    assert_same(k, x, p)
    assert hits[0]  # the whole nest ran on arrays


def test_scalar_accumulator_and_column_reduction(monkeypatch):
    p = {"M": 40, "N": 50}
    k = K(p, [D("A", "in", "M, N", "f32"), D("s_t", "out", "", "f32"), D("c", "out", "N", "f32")],
          L("i", "0", "M", L("j", "0", "N", S("s_t", "+=", "A[i, j]"), S("c[j]", "+=", "A[i, j] * A[i, j]"))))
    hits = count_runs(monkeypatch)
    assert_same(k, random_inputs(k, p, seed=1), p)
    assert hits[0]


def test_recurrences_fall_back(monkeypatch):
    p = {"N": 60}
    k = K(p, [D("A", "inout", "N", "f32")],
          L("i", "1", "N", S("A[i]", "=", "A[i - 1] * 0.5 + A[i]")))
    hits = count_runs(monkeypatch)
    assert_same(k, random_inputs(k, p, seed=2), p)
    assert hits == [False]


def test_gemm_with_init_distributes(monkeypatch):
    p = {"M": 9, "N": 7, "K": 300}
    k = K(p, [D("A", "in", "M, K", "f32"), D("B", "in", "K, N", "f32"), D("C", "out", "M, N", "f32")],
          L("i", "0", "M", L("j", "0", "N", S("C[i, j]", "=", "0", "init"),
                             L("k", "0", "K", S("C[i, j]", "+=", "A[i, k] * B[k, j]", "acc")))))
    hits = count_runs(monkeypatch)
    assert_same(k, random_inputs(k, p, seed=4), p)
    assert hits[0]


def test_errors_are_the_scalar_paths():
    p = {"N": 60}
    k = K(p, [D("A", "in", "N", "i32"), D("Q", "out", "N", "i32")],
          L("i", "0", "N", S("Q[i]", "=", "7 / (A[i] - 2)")))
    x = {"A": np.arange(60, dtype=np.int32) % 5}
    fast, slow = both(k, x, p)
    assert fast == slow and "division by zero" in slow[1]
    k = K(p, [D("A", "in", "N"), D("Y", "out", "N")], L("i", "0", "N", S("Y[i]", "=", "A[i + 1]")))
    fast, slow = both(k, {"A": np.zeros(60)}, p)
    assert fast == slow and "when i=59" in slow[1]


def test_a_select_divides_only_on_its_branch():
    """select(i == 0, 2, 2 / i) never divides by zero in the program; the vector path evaluates both
    branches, and with one iteration (i a scalar) its integer division raised the scalar path's error
    (found by hypothesis: a saved example of test_random_kernels_vector_equals_scalar)."""
    for n in (1, 2, 5):
        p = {"N": n, "M": 4}
        k = K(p, [D("Q", "out", "N, M", "i32")],
              L("i", "0", "N", L("j", "0", "M", S("Q[i, j]", "=", "select(i == 0, 2, 2 / i)"))))
        fast, slow = both(k, {}, p)
        assert not isinstance(slow, tuple) and not isinstance(fast, tuple)
        want = np.repeat(np.array([2] + [2 // i for i in range(1, n)], dtype=np.int32), 4)
        assert slow["Q"].ravel().tobytes() == want.tobytes() == fast["Q"].ravel().tobytes()


# --------------------------------------------------------------------------- random kernels

DTYPES = ("f32", "f64", "i32")


@st.composite
def kernels(draw):
    dtype = draw(st.sampled_from(DTYPES))
    n, m = draw(st.integers(1, 9)), draw(st.integers(1, 7))
    triangular = draw(st.booleans())
    # Subscripts a*i + b*j + c over i < N, j < M (or j <= i): arrays sized to hold them all.
    size = 4 * (n + m) + 8

    inner_vars = [True]

    def sub():
        a = draw(st.integers(-2, 2))
        c = 2 * (n + m) + 4 + draw(st.integers(-2, 2))
        if not inner_vars[0]:  # outside the j loop, j is not a name at all
            return f"{a} * i + {c}"
        return f"{a} * i + {draw(st.integers(-2, 2))} * j + {c}"

    def ref(name):
        return f"{name}[{sub()}]"

    def rhs(depth=0):
        kind = draw(st.sampled_from(["ref", "ref", "const", "iter", "bin", "bin", "max", "select"]
                                    if depth < 2 else ["ref", "const", "iter"]))
        if kind == "ref":
            return ref(draw(st.sampled_from("XYZ")))
        if kind == "const":
            return draw(st.sampled_from(["2", "0.5", "3", "1.25"]))
        if kind == "iter":
            return draw(st.sampled_from(["i", "j", "(i - j)"] if inner_vars[0] else ["i"]))
        if kind == "max":
            return f"max({rhs(depth + 1)}, {rhs(depth + 1)})"
        if kind == "select":
            return f"select({rhs(depth + 1)} > {rhs(depth + 1)}, {rhs(depth + 1)}, {rhs(depth + 1)})"
        op = draw(st.sampled_from("+-*/" if dtype != "i32" else "+-*"))
        return f"({rhs(depth + 1)} {op} {rhs(depth + 1)})"

    ops = ["=", "+=", "-=", "*=", "max=", "min="] + (["/="] if dtype != "i32" else [])
    stmts = []
    count = draw(st.integers(1, 3))
    split = draw(st.integers(0, count))  # statements before the inner loop
    for s in range(count):
        inner_vars[0] = s >= split
        scalar_target = draw(st.integers(0, 5)) == 0
        target = "s_acc" if scalar_target else ref(draw(st.sampled_from("XY")))
        stmts.append(S(target, draw(st.sampled_from(ops)), rhs(), f"S{s}"))
    if draw(st.booleans()):
        stmts[-1] = ir.If(E("(i + j) % 3 != 1" if split < count else "i % 3 != 1"), (stmts[-1],))
    inner = L("j", "0", "i + 1" if triangular else "M", *stmts[split:]) if stmts[split:] else None
    body = stmts[:split] + ([inner] if inner else [])
    decls = [D("X", "inout", str(size), dtype), D("Y", "inout", str(size), dtype),
             D("Z", "in", str(size), dtype), D("s_acc", "inout", "", dtype)]
    params = {"N": n, "M": m}
    kernel = K(params, decls, L("i", "0", "N", *body))
    return kernel, params, draw(st.integers(0, 2 ** 16))


@settings(max_examples=250, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(kernels())
def test_random_kernels_vector_equals_scalar(case):
    kernel, params, seed = case
    arrays = random_inputs(kernel, params, seed=seed)
    assert_same(kernel, arrays, params)


def test_random_kernels_mostly_vectorise(monkeypatch):
    """The property test above is worth something only if the fast path often runs."""
    hits = count_runs(monkeypatch)
    examples = []

    @settings(max_examples=60, deadline=None, database=None, derandomize=True)
    @given(kernels())
    def collect(case):
        examples.append(case)
    collect()
    for kernel, params, seed in examples:
        both(kernel, random_inputs(kernel, params, seed=seed), params)
    assert sum(hits) >= len(hits) // 4, (sum(hits), len(hits))
