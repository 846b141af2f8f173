"""The reference execution against NumPy formulations written by hand.

Kernels are built directly as IR (from Python-syntax expressions through
``ast``), so these tests do not depend on the parser; the parser-based
end-to-end path is covered in test_run_cli.py.
"""
from __future__ import annotations

import ast
import time

import numpy as np
import pytest

from polymap import ir
from polymap.errors import InputError, SemanticError
from polymap.reference import execute
from polymap.tensors import (
    load_npz,
    numpy_dtype,
    random_inputs,
    save_npz,
    shape_of,
    validate_inputs,
)

# --------------------------------------------------------------------------- building IR


def E(text: str) -> ir.Expr:
    """An IR expression from Python syntax: ``A[i, k] * B[k, j]``, ``select(c, a, b)``."""
    return _expr(ast.parse(text.strip(), mode="eval").body)


def _expr(n: ast.AST) -> ir.Expr:
    match n:
        case ast.Constant(value=v):
            return ir.Const(v)
        case ast.Name(id=name):
            return ir.Var(name)
        case ast.Subscript(value=ast.Name(id=name), slice=s):
            idx = s.elts if isinstance(s, ast.Tuple) else [s]
            return ir.Ref(name, tuple(_expr(x) for x in idx))
        case ast.BinOp(op=op, left=a, right=b):
            sym = {ast.Add: "+", ast.Sub: "-", ast.Mult: "*", ast.Div: "/", ast.Mod: "%"}[type(op)]
            return ir.BinOp(sym, _expr(a), _expr(b))
        case ast.UnaryOp(op=ast.USub(), operand=a):
            return ir.Neg(_expr(a))
        case ast.UnaryOp(op=ast.Not(), operand=a):
            return ir.Not(_expr(a))
        case ast.Compare(left=a, ops=[op], comparators=[b]):
            sym = {ast.Lt: "<", ast.LtE: "<=", ast.Gt: ">", ast.GtE: ">=", ast.Eq: "==",
                   ast.NotEq: "!="}[type(op)]
            return ir.Compare(sym, _expr(a), _expr(b))
        case ast.BoolOp(op=op, values=vals):
            return ir.BoolOp("and" if isinstance(op, ast.And) else "or", tuple(map(_expr, vals)))
        case ast.Call(func=ast.Name(id="select"), args=[c, a, b]):
            return ir.Select(_expr(c), _expr(a), _expr(b))
        case ast.Call(func=ast.Name(id=f), args=args):
            return ir.Call(f, tuple(map(_expr, args)))
    raise ValueError(ast.dump(n))


def scalar(name: str) -> ir.Ref:
    return ir.Ref(name, ())


def S(target: str, op: str, value: str, label: str = "S") -> ir.Assign:
    t = E(target)
    t = t if isinstance(t, ir.Ref) else scalar(t.name)
    return ir.Assign(label, t, op, _scalars(E(value)))


def _scalars(e: ir.Expr) -> ir.Expr:
    """Names starting with ``s_`` are scalar tensors, not iterators."""
    import dataclasses
    if isinstance(e, ir.Var) and e.name.startswith("s_"):
        return scalar(e.name)
    if not dataclasses.is_dataclass(e):
        return e
    changes = {}
    for f in dataclasses.fields(e):
        v = getattr(e, f.name)
        if isinstance(v, tuple):
            changes[f.name] = tuple(_scalars(x) for x in v)
        elif dataclasses.is_dataclass(v) and not isinstance(v, ir.Loc):
            changes[f.name] = _scalars(v)
    return dataclasses.replace(e, **changes)


def L(var: str, lo: str, hi: str, *body: ir.Node, step: int = 1) -> ir.Loop:
    return ir.Loop(var, (E(lo),), (E(hi),), step, tuple(body))


def D(name: str, role: str, shape: str = "", dtype: str = "f64") -> ir.Decl:
    return ir.Decl(name, role, tuple(E(x) for x in shape.split(",")) if shape else (), dtype)


def K(params: dict[str, int], decls, *body) -> ir.Kernel:
    return ir.Kernel("k", tuple(ir.Param(n, v) for n, v in params.items()), (), tuple(decls), body)


# --------------------------------------------------------------------------- kernels vs NumPy


def gemm(dtype="f64"):
    return K({"M": 5, "N": 4, "K": 6},
             [D("A", "in", "M, K", dtype), D("B", "in", "K, N", dtype), D("C", "out", "M, N", dtype)],
             L("i", "0", "M", L("j", "0", "N", S("C[i, j]", "=", "0", "init"),
                                L("k", "0", "K", S("C[i, j]", "+=", "A[i, k] * B[k, j]", "acc")))))


def test_gemm_matches_matmul():
    k, p = gemm(), {"M": 5, "N": 4, "K": 6}
    x = random_inputs(k, p, seed=1)
    out = execute(k, x, p)
    assert set(out) == {"C"} and out["C"].dtype == np.float64
    np.testing.assert_allclose(out["C"], x["A"] @ x["B"], rtol=1e-12)


def test_lu_triangular_bounds_reconstruct_the_matrix():
    n = 7
    k = K({"N": n}, [D("A", "inout", "N, N")],
          L("k", "0", "N",
            L("i", "k + 1", "N", S("A[i, k]", "/=", "A[k, k]", "div")),
            L("i", "k + 1", "N", L("j", "k + 1", "N", S("A[i, j]", "-=", "A[i, k] * A[k, j]", "upd")))))
    x = random_inputs(k, {"N": n}, seed=3, well_conditioned=True)
    lu = execute(k, x, {"N": n})["A"]
    low = np.tril(lu, -1) + np.eye(n)
    np.testing.assert_allclose(low @ np.triu(lu), x["A"], rtol=1e-12)


def test_conv1d_with_halo():
    p = {"N": 9, "R": 3}
    k = K(p, [D("X", "in", "N + R - 1"), D("W", "in", "R"), D("Y", "out", "N")],
          L("i", "0", "N", S("Y[i]", "=", "0"), L("r", "0", "R", S("Y[i]", "+=", "X[i + r] * W[r]"))))
    x = random_inputs(k, p, seed=2)
    assert x["X"].shape == (11,)
    np.testing.assert_allclose(execute(k, x, p)["Y"], np.correlate(x["X"], x["W"], "valid"))


def test_scalar_accumulator_dot_product():
    p = {"N": 10}
    k = K(p, [D("A", "in", "N"), D("B", "in", "N"), D("s_dot", "out")],
          S("s_dot", "=", "0"), L("i", "0", "N", S("s_dot", "+=", "A[i] * B[i]")))
    x = random_inputs(k, p, seed=4)
    out = execute(k, x, p)["s_dot"]
    assert out.shape == ()
    np.testing.assert_allclose(out, np.dot(x["A"], x["B"]))


def test_if_else_on_a_quasi_affine_condition():
    p = {"N": 11}
    k = K(p, [D("B", "in", "N"), D("A", "out", "N")],
          L("i", "0", "N", ir.If(E("i % 2 == 0"), (S("A[i]", "=", "B[i] * 2"),),
                                 (S("A[i]", "=", "B[i] + 1"),))))
    x = random_inputs(k, p)
    even = np.arange(11) % 2 == 0
    np.testing.assert_array_equal(execute(k, x, p)["A"], np.where(even, x["B"] * 2, x["B"] + 1))


def test_step_loops_and_min_max_bounds():
    p = {"N": 20}
    k = K(p, [D("A", "out", "N", "i64")],
          L("i", "1", "N", S("A[i]", "=", "i"), step=3),
          ir.Loop("j", (E("2"), E("N - 5")), (E("N"), E("9")), 2, (S("A[j]", "+=", "100"),)))
    want = np.zeros(20, np.int64)
    want[1:20:3] = np.arange(1, 20, 3)
    want[15:9] += 100  # empty: max(2, 15)..min(20, 9)
    np.testing.assert_array_equal(execute(k, {}, p)["A"], want)
    k2 = K(p, [D("A", "out", "N", "i64")],
           ir.Loop("j", (E("2"), E("N - 15")), (E("N"), E("9")), 2, (S("A[j]", "=", "j"),)))
    want = np.zeros(20, np.int64)
    want[5:9:2] = [5, 7]
    np.testing.assert_array_equal(execute(k2, {}, p)["A"], want)


def test_max_and_min_reductions_per_row():
    p = {"M": 4, "N": 6}
    k = K(p, [D("A", "in", "M, N"), D("hi", "out", "M"), D("lo", "out", "M")],
          L("i", "0", "M", S("hi[i]", "=", "A[i, 0]"), S("lo[i]", "=", "A[i, 0]"),
            L("j", "1", "N", S("hi[i]", "max=", "A[i, j]"), S("lo[i]", "min=", "A[i, j]"))))
    x = random_inputs(k, p, seed=5)
    out = execute(k, x, p)
    np.testing.assert_array_equal(out["hi"], x["A"].max(axis=1))
    np.testing.assert_array_equal(out["lo"], x["A"].min(axis=1))


def test_select_comparisons_and_functions():
    p = {"N": 8}
    k = K(p, [D("A", "in", "N"), D("Y", "out", "N"), D("Z", "out", "N"), D("F", "out", "N")],
          L("i", "0", "N",
            S("Y[i]", "=", "select(A[i] > 1.0, A[i], 0 - A[i])"),
            S("Z[i]", "=", "(A[i] >= 1.0) + 10 * (i < 3 and not i == 1)"),
            S("F[i]", "=", "sqrt(A[i]) + exp(A[i]) - log(A[i]) + abs(1 - 2 * A[i])"
                           " + pow(A[i], 3) + floor(4 * A[i]) + max(A[i], 1.2, 0.7) + min(i, 2)")))
    x = random_inputs(k, p, seed=6)
    a, i = x["A"], np.arange(8)
    out = execute(k, x, p)
    np.testing.assert_array_equal(out["Y"], np.where(a > 1.0, a, -a))
    np.testing.assert_array_equal(out["Z"], (a >= 1.0) + 10 * ((i < 3) & (i != 1)))
    want = (np.sqrt(a) + np.exp(a) - np.log(a) + np.abs(1 - 2 * a) + a ** 3 + np.floor(4 * a)
            + np.maximum(np.maximum(a, 1.2), 0.7) + np.minimum(i, 2))
    np.testing.assert_allclose(out["F"], want, rtol=1e-14)


def test_integer_tensors_use_c_division_and_remainder():
    p = {"N": 6}
    k = K(p, [D("A", "in", "N", "i32"), D("B", "in", "N", "i32"), D("Q", "out", "N", "i32"),
              D("R", "out", "N", "i32"), D("T", "out", "N", "i64"), D("H", "out", "N", "i32")],
          L("i", "0", "N", S("Q[i]", "=", "A[i] / B[i]"), S("R[i]", "=", "A[i] % B[i]"),
            S("T[i]", "=", "(i - 3) / 2"), S("H[i]", "=", "A[i] * 0.5")))
    a = np.array([7, -7, 7, -7, 0, -1], np.int32)
    b = np.array([2, 2, -2, -2, 3, 5], np.int32)
    out = execute(k, {"A": a, "B": b}, p)
    assert out["Q"].dtype == np.int32 and out["T"].dtype == np.int64
    np.testing.assert_array_equal(out["Q"], np.trunc(a / b).astype(np.int32))
    np.testing.assert_array_equal(out["R"], np.fmod(a, b))
    np.testing.assert_array_equal(out["T"], [int(np.trunc((i - 3) / 2)) for i in range(6)])
    # int * float literal is a double, truncated toward zero when stored
    np.testing.assert_array_equal(out["H"], np.trunc(a * 0.5).astype(np.int32))


def test_integer_division_by_zero_is_an_error():
    k = K({"N": 2}, [D("A", "in", "N", "i64"), D("Q", "out", "N", "i64")],
          L("i", "0", "N", S("Q[i]", "=", "1 / A[i]")))
    with pytest.raises(InputError, match="division by zero"):
        execute(k, {"A": np.array([1, 0], np.int64)}, {"N": 2})


def test_float32_accumulates_in_float32():
    # 2**24 + 1 is not a float32: a float32 running sum never moves; a double one does.
    p = {"N": 9}
    for dtype, want in (("f32", 2.0 ** 24), ("f64", 2.0 ** 24 + 8)):
        k = K(p, [D("A", "in", "N", dtype), D("s_sum", "out", "", dtype)],
              S("s_sum", "=", "A[0]"), L("i", "1", "N", S("s_sum", "+=", "A[i]")))
        a = np.ones(9, numpy_dtype(dtype))
        a[0] = 2.0 ** 24
        out = execute(k, {"A": a}, p)["s_sum"]
        assert out.dtype == numpy_dtype(dtype) and float(out) == want


def test_float32_products_round_per_operation():
    p = {"N": 50}
    k = K(p, [D("A", "in", "N", "f32"), D("B", "in", "N", "f32"), D("Y", "out", "N", "f32")],
          L("i", "0", "N", S("Y[i]", "=", "A[i] * B[i] * 0.1 + A[i] / 3")))
    x = random_inputs(k, p, seed=7)
    a, b = x["A"], x["B"]
    f = np.float32
    want = np.array([a[i] * b[i] * f(0.1) + a[i] / f(3) for i in range(50)], np.float32)
    via_double = (a.astype(np.float64) * b * 0.1 + a.astype(np.float64) / 3).astype(np.float32)
    got = execute(k, x, p)["Y"]
    np.testing.assert_array_equal(got, want)
    assert not np.array_equal(got, via_double)  # the test can tell the two apart


# --------------------------------------------------------------------------- inputs and errors


def test_inputs_are_not_modified_and_locals_are_private():
    p = {"N": 4}
    k = K(p, [D("A", "inout", "N"), D("t", "local", "N")],
          L("i", "0", "N", S("t[i]", "=", "A[i] * 3"), S("A[i]", "+=", "t[i]")))
    a = np.arange(4.0)
    out = execute(k, {"A": a}, p)
    np.testing.assert_array_equal(a, np.arange(4.0))
    np.testing.assert_array_equal(out["A"], 4 * np.arange(4.0))
    assert set(out) == {"A"}


def test_validation_names_tensor_and_shapes():
    k, p = gemm("f32"), {"M": 5, "N": 4, "K": 6}
    good = random_inputs(k, p)
    with pytest.raises(InputError, match=r"'B'.*expected shape \(6, 4\)"):
        validate_inputs(k, {"A": good["A"]}, p, source_name="in.npz")
    with pytest.raises(InputError) as e:
        validate_inputs(k, {**good, "A": np.zeros((5, 5), np.float32)}, p, source_name="in.npz")
    assert "'A'" in str(e.value) and "(5, 6)" in str(e.value) and "(5, 5)" in str(e.value)
    with pytest.raises(InputError, match=r"'A'.*dtype.*f32.*given.*f64"):
        validate_inputs(k, {**good, "A": good["A"].astype(np.float64)}, p, source_name="in.npz")
    with pytest.raises(InputError, match="unexpected.*'Z'"):
        validate_inputs(k, {**good, "Z": np.zeros(1)}, p, source_name="in.npz")
    with pytest.raises(InputError, match="'B'"):
        execute(k, {"A": good["A"]}, p)


def test_out_of_bounds_access_is_reported_not_wrapped():
    k = K({"N": 4}, [D("A", "in", "N"), D("Y", "out", "N")],
          L("i", "0", "N", S("Y[i]", "=", "A[i - 1]")))
    with pytest.raises(SemanticError, match=r"\[-1\] when i=0"):
        execute(k, {"A": np.zeros(4)}, {"N": 4})


def test_random_inputs_well_conditioned_is_spd_and_diagonally_dominant():
    k = K({"N": 6}, [D("A", "in", "N, N"), D("I", "in", "N, N", "i32"), D("v", "in", "N", "f32")])
    x = random_inputs(k, {"N": 6}, seed=9, well_conditioned=True)
    assert x["I"].dtype == np.int32 and x["v"].dtype == np.float32
    for a in (x["A"], x["I"].astype(np.float64)):
        np.testing.assert_array_equal(a, a.T)
        off = np.abs(a).sum(axis=1) - np.abs(np.diag(a))
        assert np.all(np.diag(a) > off)
        assert np.all(np.linalg.eigvalsh(a) > 0)
    again = random_inputs(k, {"N": 6}, seed=9, well_conditioned=True)
    assert all(np.array_equal(x[n], again[n]) for n in x)
    plain = random_inputs(k, {"N": 6}, seed=9)
    assert 0.5 <= plain["A"].min() and plain["A"].max() < 1.5


def test_npz_round_trip_and_unreadable_file(tmp_path):
    path = tmp_path / "x.data"  # no .npz suffix: written exactly there
    save_npz(path, {"A": np.arange(3, dtype=np.int32)})
    assert path.exists()
    np.testing.assert_array_equal(load_npz(path)["A"], np.arange(3))
    (tmp_path / "bad.npz").write_text("not a zip")
    with pytest.raises(InputError, match="bad.npz"):
        load_npz(tmp_path / "bad.npz")
    with pytest.raises(InputError, match="missing.npz"):
        load_npz(tmp_path / "missing.npz")


def test_shape_of_evaluates_extents():
    assert shape_of(D("I", "in", "2 * P + R - 1, C"), {"P": 3, "R": 2, "C": 4}) == (7, 4)
    assert shape_of(D("s", "in"), {}) == ()


def test_small_polybench_gemm_runs_fast():
    p = {"M": 30, "N": 30, "K": 30}
    k = gemm("f32")
    x = random_inputs(k, p)
    t = time.perf_counter()
    out = execute(k, x, p)
    assert time.perf_counter() - t < 2.0  # ~28k instances; well under a second unloaded
    np.testing.assert_allclose(out["C"], x["A"] @ x["B"], rtol=1e-5)


def test_instances_run_in_the_original_order_of_evaluate():
    # Each instance stamps a running counter into its own cell: the stamps give
    # the execution order, compared with passes.evaluate's independent walker.
    from polymap.evaluate import iterate_statement_instances

    p = {"N": 10}
    k = K(p, [D("s_c", "local", "", "i64"), D("T", "out", "N, N", "i64"), D("U", "out", "N", "i64")],
          S("s_c", "=", "0", "zero"),
          L("ii", "0", "N",
            ir.Loop("i", (E("ii"),), (E("ii + 4"), E("N")), 1, (
                ir.If(E("i % 3 != 0 or i == 9"),
                      (S("s_c", "+=", "1", "a"), S("U[i]", "=", "s_c", "b")),
                      (L("j", "floor(i / 2)", "i + 1",
                         S("s_c", "+=", "1", "c"), S("T[i, j]", "=", "s_c", "d")),)),)),
            step=4))
    out = execute(k, {}, p)
    t, u = np.zeros((10, 10), np.int64), np.zeros(10, np.int64)
    count = 0
    for ctx, env in iterate_statement_instances(k, p):
        if ctx.name in ("a", "c"):
            count += 1
        elif ctx.name == "b":
            u[env["i"]] = count
        elif ctx.name == "d":
            t[env["i"], env["j"]] = count
    assert count > 10
    np.testing.assert_array_equal(out["T"], t)
    np.testing.assert_array_equal(out["U"], u)


def test_cholesky_on_well_conditioned_inputs_matches_numpy():
    n = 8
    k = K({"N": n}, [D("A", "inout", "N, N")],
          L("i", "0", "N",
            L("j", "0", "i",
              L("k", "0", "j", S("A[i, j]", "-=", "A[i, k] * A[j, k]")),
              S("A[i, j]", "/=", "A[j, j]")),
            L("k", "0", "i", S("A[i, i]", "-=", "A[i, k] * A[i, k]")),
            S("A[i, i]", "=", "sqrt(A[i, i])")))
    x = random_inputs(k, {"N": n}, seed=11, well_conditioned=True)
    got = execute(k, x, {"N": n})["A"]
    np.testing.assert_allclose(np.tril(got), np.linalg.cholesky(x["A"]), rtol=1e-12)


def test_nan_into_an_integer_tensor_is_reported():
    k = K({"N": 2}, [D("A", "in", "N"), D("Q", "out", "N", "i32")],
          L("i", "0", "N", S("Q[i]", "=", "log(A[i])", "bad")))
    with pytest.raises(InputError, match="statement bad at i=1.*i32 tensor 'Q'"):
        execute(k, {"A": np.array([1.0, -1.0])}, {"N": 2})
