"""Loops shared out in chunks of an inner loop (``polymap.codegen.c.parallel``): legality against
brute force, and the generated C against the reference execution, bit for bit.

A loop that carries a dependence (gramschmidt's ``R[k, j] += Q[i, k] * A[i, j]`` over ``i``) may be
shared out in one chunk of its inner parallel loop ``j`` per thread when every conflict among the
statements under it stays within one iteration of ``j``. The brute force enumerates the instances
(no ISL), pairs those that touch one element with one of them writing it, and asks whether a pair
in one iteration of the loops around the chunked loop ever differs in ``j``.
"""
from __future__ import annotations

import re
import subprocess
from itertools import combinations
from pathlib import Path

import numpy as np
import pytest

from polymap.codegen.ast_build import LoopAnalysis, build_ast, kernel_schedule, statements_under, walk
from polymap.codegen.c.emitter import emit_c
from polymap.codegen.c.parallel import Planner, child_paths
from polymap.driver import load_program, parse
from polymap.poly import build_model

from bruteforce import instances
from c_run import run_c

ROOT = Path(__file__).parent.parent

# (source, sizes for the brute force): each has a sequential loop around a parallel one
KERNELS = {
    "reduction_rows": ("""kernel k(M = 5, N = 6) {
  in A[M, N] : f64
  inout s[N] : f64
  for i in 0..M { for j in 0..N { s[j] += A[i, j] } }
}""", {"M": 4, "N": 5}),
    "carried_same_column": ("""kernel k(M = 5, N = 6) {
  inout A[M, N] : f64
  for i in 1..M { for j in 0..N { A[i, j] = A[i - 1, j] * 0.5 + A[i, j] } }
}""", {"M": 4, "N": 5}),
    "carried_next_column": ("""kernel k(M = 5, N = 6) {
  inout A[M, N] : f64
  for i in 1..M { for j in 0..N - 1 { A[i, j] = A[i - 1, j + 1] * 0.5 + A[i, j] } }
}""", {"M": 4, "N": 5}),
    "scalar_in_row": ("""kernel k(M = 5, N = 6) {
  in A[M, N] : f64
  inout s[M] : f64
  inout c[N] : f64
  for i in 0..M { for j in 0..N { c[j] = c[j] + A[i, j] * s[0] } }
  for i in 0..M { for j in 0..N { s[i] += A[i, j] } }
}""", {"M": 4, "N": 5}),
    "triangle": ("""kernel k(N = 6) {
  inout A[N, N] : f64
  for k in 0..N { for i in 0..N { for j in k+1..N { A[i, j] = A[i, j] - A[i, k] * A[k, j] } } }
}""", {"N": 5}),
    "three_deep": ("""kernel k(M = 4, N = 5, P = 6) {
  in A[M, N, P] : f64
  inout s[P] : f64
  for i in 0..M { for j in 0..N { for p in 0..P { s[p] += A[i, j, p] } } }
}""", {"M": 3, "N": 3, "P": 4}),
}


def _kernel(name: str):
    if name in KERNELS:
        return parse(KERNELS[name][0]).kernels[0]
    return load_program(ROOT / "examples" / "polybench" / f"{name}.loop").kernels[0]


def _loops_of(model, statement: str) -> tuple[str, ...]:
    return tuple(model.statement(statement).loops)


def _brute_chunkable(kernel, model, params, statements, outer: str, inner: str) -> bool:
    """No two instances of ``statements`` in one iteration of the loops around ``outer``, touching one
    element with one a write, lie in different iterations of ``inner``."""
    insts = [(ctx.name, env, reads, write) for ctx, env, reads, write in instances(kernel, params, None)
             if ctx.name in statements]
    around = {name: _loops_of(model, name)[:_loops_of(model, name).index(outer)] for name in statements}
    for (s1, e1, r1, w1), (s2, e2, r2, w2) in combinations(insts, 2):
        if not ({w1} & ({w2} | set(r2)) or {w2} & set(r1)):
            continue
        if tuple(e1[x] for x in around[s1]) != tuple(e2[x] for x in around[s2]):
            continue
        if e1[inner] != e2[inner]:
            return False
    return True


def _chains(model, root):
    """Every (loop S, loop L below it) where the loops from S to L form a chain: (node, info, info)."""
    ks = kernel_schedule(model, ())
    analysis = LoopAnalysis(ks)
    for n in walk(root):
        if n.get_type().value != 1:  # isl.ast_node_type.for_
            continue
        s = analysis.info(n)
        m = n
        while True:
            (m, _), = child_paths(m, ())
            if m.get_type().value != 1:
                break
            yield analysis, n, s, analysis.info(m)


@pytest.mark.parametrize("name", sorted(KERNELS))
def test_chunkable_agrees_with_brute_force(name):
    kernel = _kernel(name)
    params = KERNELS[name][1]
    model = build_model(kernel)
    root = build_ast(model, kernel_schedule(model, ()).union)
    seen = 0
    for analysis, node, s, inner in _chains(model, root):
        statements = statements_under(node)
        got = analysis.chunkable(s.rank, s.dim, inner.dim, statements)
        want = _brute_chunkable(kernel, model, params, statements, s.loop, inner.loop)
        assert got == want, (name, s.loop, inner.loop)
        seen += 1
    assert seen


def test_the_brute_force_tells_both_cases():
    """The kernels above exercise both answers (a test that always said yes would pass otherwise)."""
    answers = {}
    for name in ("carried_same_column", "carried_next_column"):
        kernel = _kernel(name)
        model = build_model(kernel)
        answers[name] = _brute_chunkable(kernel, model, KERNELS[name][1], statements_under(
            build_ast(model, kernel_schedule(model, ()).union)), "i", "j")
    assert answers == {"carried_same_column": True, "carried_next_column": False}


JOINS = {
    "join_same_column": """kernel k(T = 2, M = 5, N = 6) {
  inout A[M, N] : f64
  inout s[N] : f64
  for t in 0..T {
    for i in 0..M { for j in 0..N { s[j] += A[i, j] } }
    for i in 0..M { for j in 0..N { A[i, j] = A[i, j] - s[j] * 0.001 } }
  }
}""",
    "join_other_column": """kernel k(T = 2, M = 5, N = 6) {
  inout A[M, N] : f64
  inout s[N] : f64
  for t in 0..T {
    for i in 0..M { for j in 0..N { s[j] += A[i, j] } }
    for i in 0..M { for j in 0..N { A[i, j] = A[i, j] - s[N - 1 - j] * 0.001 } }
  }
}""",
}


def _gramschmidt_mapped():
    """compile's choice at LARGE, 'interchange k,i,i_2,i_3,i_4,j' (the loops renamed apart)."""
    from polymap.machine.presets import load_architecture
    from polymap.passes.frontend.rename import distinct_loop_names
    from polymap.passes.search.interchange import interchange_mapping

    kernel = distinct_loop_names(_kernel("gramschmidt"))
    model = build_model(kernel)
    mapping = interchange_mapping(model, 0, load_architecture("host"), ("k", "i", "i_2", "i_3", "i_4", "j"))
    return kernel, model, mapping


def test_gramschmidt_shares_its_reduction_in_column_chunks():
    """r_acc (a reduction over i around j) and a_upd join in one loop over chunks of j: per k one
    barrier for the single part and one for the chunks, nothing of r_acc in omp single."""
    kernel, model, mapping = _gramschmidt_mapped()
    src = emit_c(kernel, model, (mapping,), params={"M": 1000, "N": 1200})
    body = src[src.index("\nvoid"):]
    single = body[body.index("#pragma omp single"):body.index("polymap_parts = ")]
    assert "r_acc" not in single and "a_upd" not in single
    loop = body[body.index("polymap_parts = "):]
    assert loop.index("r_acc") < loop.index("a_upd")
    assert body.count("#pragma omp single") == 1 and body.count("#pragma omp for") == 1
    # each thread's chunk of j, both statements walk it (r_acc twice: unrolled by 4, then the rest)
    assert len(re.findall(r"for \(long j\w* = polymap_b; j\w* < polymap_e;", loop)) == 3
    # r_acc's element in a local for 4 updates of i, in their order
    assert re.search(r"double polymap_acc = R\[\(k \* N \+ j\)\];\n(\s*polymap_acc \+= .*r_acc \*/\n){4}"
                     r"\s*R\[\(k \* N \+ j\)\] = polymap_acc;", loop)


@pytest.mark.parametrize("threads", [2, 3])
def test_gramschmidt_mapped_equals_the_reference_exactly(threads):
    kernel, model, mapping = _gramschmidt_mapped()
    src = emit_c(kernel, model, (mapping,))
    assert "polymap_parts" in src
    for tensor, (got, want) in run_c(kernel, src, {"M": 7, "N": 10}, seed=3, threads=threads).items():
        np.testing.assert_array_equal(got, want, err_msg=tensor)


def _brute_joinable(kernel, params) -> bool:
    """No two instances of the two nests in one iteration of ``t``, touching one element with one a
    write, differ in ``j`` (the chunks of both are the same columns)."""
    insts = instances(kernel, params, None)
    for (_, e1, r1, w1), (_, e2, r2, w2) in combinations(insts, 2):
        if (w1 == w2 or w1 in r2 or w2 in r1) and e1["t"] == e2["t"] and e1["j"] != e2["j"]:
            return False
    return True


@pytest.mark.parametrize("name", sorted(JOINS))
def test_join_agrees_with_brute_force_and_matches_the_reference(name):
    kernel = parse(JOINS[name]).kernels[0]
    model = build_model(kernel)
    ks = kernel_schedule(model, ())
    root = build_ast(model, ks.union)
    plan = Planner(LoopAnalysis(ks), params=None, opaque=lambda n, i: False).plan(root)
    assert len(plan.chunks) == 2  # both nests chunked in j, the second joined to the first or not
    assert bool(plan.joined) == _brute_joinable(kernel, {"T": 2, "M": 3, "N": 4})
    src = emit_c(kernel, model, None)
    assert src.count("polymap_parts = ") == 1 + (not plan.joined)
    for threads in (2, 3):
        for tensor, (got, want) in run_c(kernel, src, {"T": 3, "M": 5, "N": 7}, seed=3, threads=threads).items():
            np.testing.assert_array_equal(got, want, err_msg=tensor)


@pytest.mark.parametrize("name, params", [
                                          ("reduction_rows", {"M": 5, "N": 7}), ("three_deep", {"M": 3, "N": 2, "P": 9}),
                                          ("carried_same_column", {"M": 6, "N": 11})])
@pytest.mark.parametrize("threads", [2, 3])
def test_chunked_code_equals_the_reference_exactly(name, params, threads):
    """No sizes given: every chunkable loop is chunked; chunks of 0 and 1 columns at the edges (j's
    range shrinks with k); each element's updates in their order, so equal bit for bit."""
    kernel = _kernel(name)
    src = emit_c(kernel, build_model(kernel), None)
    assert "polymap_parts" in src
    for tensor, (got, want) in run_c(kernel, src, params, seed=3, threads=threads).items():
        np.testing.assert_array_equal(got, want, err_msg=tensor)


def test_chunked_code_builds_without_openmp(tmp_path):
    """Without -fopenmp the pragmas are ignored and one chunk is the whole range."""
    kernel = _kernel("gramschmidt")
    src = emit_c(kernel, build_model(kernel), None)
    (tmp_path / "g.c").write_text(src)
    subprocess.run(["cc", "-c", "-Wall", "-Werror", "-Wno-unknown-pragmas", "-O1", str(tmp_path / "g.c"),
                    "-o", str(tmp_path / "g.o")], check=True)


def test_unrolled_only_where_the_element_stays():
    """The accumulation is unrolled along the chunked loop only when its element does not depend on it
    and its value does not read the target (it would read the element before the local's updates)."""
    unrolled = parse(KERNELS["reduction_rows"][0]).kernels[0]
    assert "polymap_acc" in emit_c(unrolled, build_model(unrolled), None)
    reads_target = parse("""kernel k(M = 5, N = 6) {
  in A[M, N] : f64
  inout s[N] : f64
  for i in 0..M { for j in 0..N { s[j] += A[i, j] * s[j] } }
}""").kernels[0]
    src = emit_c(reads_target, build_model(reads_target), None)
    assert "polymap_parts" in src and "polymap_acc" not in src
    for threads in (2, 3):
        for tensor, (got, want) in run_c(reads_target, src, {"M": 6, "N": 7}, seed=3, threads=threads).items():
            np.testing.assert_array_equal(got, want, err_msg=tensor)


def test_no_chunks_in_a_nest_that_stays_on_one_thread():
    """At sizes where the plain rule shares nothing of a nest (j's 1200 iterations per barrier are
    under MIN_WORK, i carries the reduction), the nest is not chunked either: the cost model charges
    it one thread. Without sizes (every loop worth sharing) it is."""
    kernel = parse(KERNELS["reduction_rows"][0]).kernels[0]
    model = build_model(kernel)
    assert "polymap_parts" not in emit_c(kernel, model, None, params={"M": 1000, "N": 1200})
    assert "polymap_parts" in emit_c(kernel, model, None)


def test_not_chunked_where_a_conflict_crosses_columns():
    kernel = _kernel("carried_next_column")
    assert "polymap_parts" not in emit_c(kernel, build_model(kernel), None)
