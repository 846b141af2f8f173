"""The polyhedral model (through ``show``'s JSON) against sets written by hand.

Every set and map of the JSON document is parsed back with islpy and
compared with ``is_equal`` to a hand-written one (both under the kernel's
context), never as strings. The schedule is also checked against the
textual execution order: sorting the instances by their ISL time vectors
must give the enumeration of :func:`iterate_statement_instances`.
"""
from __future__ import annotations

from pathlib import Path

import islpy as isl
import pytest

from polymap.driver import parse
from polymap.reports.model import kernel_json
from polymap.evaluate import iterate_statement_instances
from polymap.poly import build_model, fix_params

EXAMPLES = Path(__file__).resolve().parent.parent / "examples"

GEMM = """
kernel gemm(M = 4, N = 3, K = 2) {
  in    A[M, K] : f32
  in    B[K, N] : f32
  out   C[M, N] : f32
  for i in 0..M, j in 0..N {
    init: C[i, j] = 0
    for k in 0..K {
      acc: C[i, j] += A[i, k] * B[k, j]
    }
  }
}
"""

LU = """
kernel lu(N = 5) {
  inout A[N, N] : f64
  for k in 0..N {
    for i in k+1..N {
      div: A[i, k] /= A[k, k]
    }
    for i in k+1..N, j in k+1..N {
      upd: A[i, j] -= A[i, k] * A[k, j]
    }
  }
}
"""

STEP = """
kernel strided(N = 10) {
  out A[N]
  for i in 1..N step 3 { S: A[i] = 0 }
}
"""

QUASI = """
kernel quasi(N = 7) {
  out A[N]
  out B[N, N]
  for i in 0..N {
    if i % 2 == 0 { even: A[i] = 0 } else { odd: A[i] = 1 }
    for j in floor(i / 2)..N { T: B[i, j] = A[i] }
  }
}
"""

MINMAX = """
kernel band(N = 6) {
  out A[N, N]
  for i in 0..N, j in max(0, i - 2)..min(N, i + 3) { S: A[i, j] = 1 }
}
"""

WHERE = """
kernel rect(M = 6, N = 3) where M >= N and N >= 2 {
  in  X[M]
  out Y[N, M]
  for i in 0..N, j in i..M { S: Y[i, j] = X[j] }
}
"""

SCALARS = """
kernel total(N = 4) {
  in    A[N]
  out   s
  local t
  zero: s = 0
  for i in 0..N {
    scale: t = A[i] * 2
    add: s += t
  }
}
"""

NESTS = """
kernel two(M = 3, N = 4) {
  in  X[N]
  out A[N]
  out B[M, N]
  for i in 0..N { first: A[i] = X[i] }
  for j in 0..M, k in 0..N { second: B[j, k] = A[k] }
}
"""


def model_json(text: str) -> tuple[dict, isl.Set]:
    """The ``show`` JSON of the only kernel of ``text``, and its context parsed back."""
    kernel = parse(text, "t.loop").kernels[0]
    doc = kernel_json(build_model(kernel), {p.name: p.default for p in kernel.params})
    return doc, isl.Set(doc["context"])


def statement(doc: dict, name: str) -> dict:
    return next(s for s in doc["statements"] if s["name"] == name)


def same_set(text: str, expected: str, context: isl.Set) -> bool:
    return isl.Set(text).intersect_params(context).is_equal(isl.Set(expected).intersect_params(context))


def same_map(text: str, expected: str, context: isl.Set) -> bool:
    return isl.Map(text).intersect_params(context).is_equal(isl.Map(expected).intersect_params(context))


def check_statement(doc, context, name, loops, domain, schedule, accesses):
    """Compare one statement; ``schedule`` and ``accesses`` are written without the domain."""
    s = statement(doc, name)
    assert s["loops"] == loops
    assert same_set(s["domain"], domain, context), s["domain"]
    dom = isl.Set(domain)
    assert same_map(s["schedule"], str(isl.Map(schedule).intersect_domain(dom)), context), s["schedule"]
    got = [(a["kind"], a["tensor"]) for a in s["accesses"]]
    assert sorted(got) == sorted((k, t) for k, t, _ in accesses)
    for kind, tensor, rel in accesses:
        want = isl.Map(rel).intersect_domain(dom)
        assert any(a["kind"] == kind and a["tensor"] == tensor and same_map(a["relation"], str(want), context)
                   for a in s["accesses"]), (kind, tensor, rel)


def test_gemm():
    doc, ctx = model_json(GEMM)
    assert doc["name"] == "gemm" and doc["params"] == {"M": 4, "N": 3, "K": 2}
    assert ctx.is_equal(isl.Set("[M, N, K] -> { : M >= 1 and N >= 1 and K >= 1 }"))
    assert doc["tensors"][0] == {"name": "A", "role": "in", "dtype": "f32", "shape": ["M", "K"]}
    check_statement(doc, ctx, "init", ["i", "j"],
                    "[M, N, K] -> { init[i, j] : 0 <= i < M and 0 <= j < N }",
                    "[M, N, K] -> { init[i, j] -> [0, i, 0, j, 0, 0, 0] }",
                    [("write", "C", "[M, N, K] -> { init[i, j] -> C[i, j] }")])
    check_statement(doc, ctx, "acc", ["i", "j", "k"],
                    "[M, N, K] -> { acc[i, j, k] : 0 <= i < M and 0 <= j < N and 0 <= k < K }",
                    "[M, N, K] -> { acc[i, j, k] -> [0, i, 0, j, 1, k, 0] }",
                    [("read", "A", "[M, N, K] -> { acc[i, j, k] -> A[i, k] }"),
                     ("read", "B", "[M, N, K] -> { acc[i, j, k] -> B[k, j] }"),
                     ("read", "C", "[M, N, K] -> { acc[i, j, k] -> C[i, j] }"),
                     ("write", "C", "[M, N, K] -> { acc[i, j, k] -> C[i, j] }")])


def test_gemm_init_runs_before_every_acc_of_its_element():
    doc, ctx = model_json(GEMM)
    init = isl.Map(statement(doc, "init")["schedule"])
    acc = isl.Map(statement(doc, "acc")["schedule"])
    # pairs (init[i, j], acc[i, j, k]) whose init time is NOT strictly before the acc time
    late = init.lex_ge_map(acc).intersect(isl.Map("[M, N, K] -> { init[i, j] -> acc[i, j, k] }"))
    assert late.intersect_params(ctx).is_empty()
    assert not init.lex_lt_map(acc).intersect_params(ctx).is_empty()


def test_lu_triangular():
    doc, ctx = model_json(LU)
    check_statement(doc, ctx, "div", ["k", "i"],
                    "[N] -> { div[k, i] : 0 <= k < N and k < i < N }",
                    "[N] -> { div[k, i] -> [0, k, 0, i, 0, 0, 0] }",
                    [("read", "A", "[N] -> { div[k, i] -> A[k, k] }"),
                     ("read", "A", "[N] -> { div[k, i] -> A[i, k] }"),
                     ("write", "A", "[N] -> { div[k, i] -> A[i, k] }")])
    check_statement(doc, ctx, "upd", ["k", "i", "j"],
                    "[N] -> { upd[k, i, j] : 0 <= k < N and k < i < N and k < j < N }",
                    "[N] -> { upd[k, i, j] -> [0, k, 1, i, 0, j, 0] }",
                    [("read", "A", "[N] -> { upd[k, i, j] -> A[i, k] }"),
                     ("read", "A", "[N] -> { upd[k, i, j] -> A[k, j] }"),
                     ("read", "A", "[N] -> { upd[k, i, j] -> A[i, j] }"),
                     ("write", "A", "[N] -> { upd[k, i, j] -> A[i, j] }")])


def test_step_loop():
    doc, ctx = model_json(STEP)
    check_statement(doc, ctx, "S", ["i"],
                    "[N] -> { S[i] : 1 <= i < N and exists (q : i = 1 + 3q) }",
                    "[N] -> { S[i] -> [0, i, 0] }",
                    [("write", "A", "[N] -> { S[i] -> A[i] }")])


def test_if_else_and_quasi_affine_bounds():
    doc, ctx = model_json(QUASI)
    check_statement(doc, ctx, "even", ["i"],
                    "[N] -> { even[i] : 0 <= i < N and exists (h : i = 2h) }",
                    "[N] -> { even[i] -> [0, i, 0, 0, 0] }",
                    [("write", "A", "[N] -> { even[i] -> A[i] }")])
    check_statement(doc, ctx, "odd", ["i"],
                    "[N] -> { odd[i] : 0 <= i < N and exists (h : i = 2h + 1) }",
                    "[N] -> { odd[i] -> [0, i, 1, 0, 0] }",
                    [("write", "A", "[N] -> { odd[i] -> A[i] }")])
    # floor(i / 2) <= j  <=>  i <= 2j + 1
    check_statement(doc, ctx, "T", ["i", "j"],
                    "[N] -> { T[i, j] : 0 <= i < N and i <= 2j + 1 and j < N }",
                    "[N] -> { T[i, j] -> [0, i, 2, j, 0] }",
                    [("read", "A", "[N] -> { T[i, j] -> A[i] }"),
                     ("write", "B", "[N] -> { T[i, j] -> B[i, j] }")])


def test_max_min_bounds():
    doc, ctx = model_json(MINMAX)
    check_statement(doc, ctx, "S", ["i", "j"],
                    "[N] -> { S[i, j] : 0 <= i < N and j >= 0 and j >= i - 2 and j < N and j <= i + 2 }",
                    "[N] -> { S[i, j] -> [0, i, 0, j, 0] }",
                    [("write", "A", "[N] -> { S[i, j] -> A[i, j] }")])


def test_where_clause_is_the_context():
    doc, ctx = model_json(WHERE)
    assert ctx.is_equal(isl.Set("[M, N] -> { : N >= 2 and M >= N }"))
    check_statement(doc, ctx, "S", ["i", "j"],
                    "[M, N] -> { S[i, j] : 0 <= i < N and i <= j < M }",
                    "[M, N] -> { S[i, j] -> [0, i, 0, j, 0] }",
                    [("read", "X", "[M, N] -> { S[i, j] -> X[j] }"),
                     ("write", "Y", "[M, N] -> { S[i, j] -> Y[i, j] }")])
    # domains carry the context constraints (cli.md): the where clause holds wherever S runs
    assert isl.Set(statement(doc, "S")["domain"]).params().is_subset(ctx)


def test_scalars():
    doc, ctx = model_json(SCALARS)
    assert [t["shape"] for t in doc["tensors"]] == [["N"], [], []]
    check_statement(doc, ctx, "zero", [], "[N] -> { zero[] }", "[N] -> { zero[] -> [0, 0, 0] }",
                    [("write", "s", "[N] -> { zero[] -> s[] }")])
    check_statement(doc, ctx, "scale", ["i"], "[N] -> { scale[i] : 0 <= i < N }",
                    "[N] -> { scale[i] -> [1, i, 0] }",
                    [("read", "A", "[N] -> { scale[i] -> A[i] }"),
                     ("write", "t", "[N] -> { scale[i] -> t[] }")])
    check_statement(doc, ctx, "add", ["i"], "[N] -> { add[i] : 0 <= i < N }",
                    "[N] -> { add[i] -> [1, i, 1] }",
                    [("read", "t", "[N] -> { add[i] -> t[] }"),
                     ("read", "s", "[N] -> { add[i] -> s[] }"),
                     ("write", "s", "[N] -> { add[i] -> s[] }")])


def test_several_nests_are_ordered():
    doc, ctx = model_json(NESTS)
    check_statement(doc, ctx, "first", ["i"], "[M, N] -> { first[i] : 0 <= i < N }",
                    "[M, N] -> { first[i] -> [0, i, 0, 0, 0] }",
                    [("read", "X", "[M, N] -> { first[i] -> X[i] }"),
                     ("write", "A", "[M, N] -> { first[i] -> A[i] }")])
    check_statement(doc, ctx, "second", ["j", "k"],
                    "[M, N] -> { second[j, k] : 0 <= j < M and 0 <= k < N }",
                    "[M, N] -> { second[j, k] -> [1, j, 0, k, 0] }",
                    [("read", "A", "[M, N] -> { second[j, k] -> A[k] }"),
                     ("write", "B", "[M, N] -> { second[j, k] -> B[j, k] }")])
    first = isl.Map(statement(doc, "first")["schedule"])
    second = isl.Map(statement(doc, "second")["schedule"])
    assert first.lex_ge_map(second).intersect_params(ctx).is_empty()


# --------------------------------------------------------------------------- schedule = textual order


def _isl_order(model, values) -> list[tuple[str, tuple[int, ...]]]:
    """Every instance with its time vector, from ISL alone, sorted by time."""
    timed = []
    for stmt in model.statements:
        n = len(stmt.loops)
        points = []
        fix_params(stmt.schedule, model, values).wrap().foreach_point(points.append)
        for p in points:
            coords = [int(p.get_coordinate_val(isl.dim_type.set, k).to_python())
                      for k in range(p.get_space().dim(isl.dim_type.set))]
            timed.append((tuple(coords[n:]), stmt.name, tuple(coords[:n])))
    timed.sort()
    times = [t for t, _, _ in timed]
    assert len(set(times)) == len(times), "two instances share a time"
    return [(name, it) for _, name, it in timed]


def _textual_order(kernel, values) -> list[tuple[str, tuple[int, ...]]]:
    return [(ctx.name, tuple(env[v] for v in ctx.iterators))
            for ctx, env in iterate_statement_instances(kernel, values)]


SMALL_KERNELS = {"gemm": GEMM, "lu": LU, "step": STEP, "quasi": QUASI, "minmax": MINMAX,
                 "where": WHERE, "scalars": SCALARS, "nests": NESTS}
SMALL_FILES = ["lu.loop", "cholesky.loop", "polybench/nussinov.loop", "polybench/durbin.loop",
               "polybench/trisolv.loop", "polybench/correlation.loop"]


def _kernel_of(key: str):
    if key in SMALL_KERNELS:
        return parse(SMALL_KERNELS[key], "t.loop").kernels[0]
    path = EXAMPLES / key
    if not path.exists():
        pytest.skip(f"{key} is not in examples/ yet")
    return parse(path.read_text(), str(path)).kernels[0]


@pytest.mark.parametrize("key", list(SMALL_KERNELS) + SMALL_FILES)
@pytest.mark.parametrize("size", [2, 3])
def test_schedule_order_is_textual_order(key, size):
    kernel = _kernel_of(key)
    values = {p.name: size for p in kernel.params}
    if key == "where":
        values = {"M": size + 1, "N": size}
    model = build_model(kernel)
    expected = _textual_order(kernel, values)
    assert expected, "nothing to compare"
    assert _isl_order(model, values) == expected


# --------------------------------------------------------------------------- JSON round trip

ALL_FILES = sorted(p.relative_to(EXAMPLES).as_posix() for p in EXAMPLES.rglob("*.loop"))


@pytest.mark.parametrize("key", ALL_FILES)
def test_json_strings_parse_back_to_the_model(key):
    program = parse((EXAMPLES / key).read_text(), key)
    for kernel in program.kernels:
        model = build_model(kernel)
        doc = kernel_json(model, {p.name: p.default for p in kernel.params})
        assert isl.Set(doc["context"]).is_equal(model.context)
        for s, stmt in zip(doc["statements"], model.statements, strict=True):
            assert isl.Set(s["domain"]).is_equal(stmt.domain)
            assert isl.Map(s["schedule"]).is_equal(stmt.schedule)
            for a, acc in zip(s["accesses"], stmt.accesses, strict=True):
                assert isl.Map(a["relation"]).is_equal(acc.relation)
