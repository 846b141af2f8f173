"""Dependences vs hand-written ISL relations and brute force; loop classes."""
from __future__ import annotations

from pathlib import Path

import islpy as isl
import pytest

from bruteforce import instances
from polymap.driver import load_program
from polymap.passes.dependences.dependences import group, memory_based, value_based
from polymap.passes.dependences.depgraph import components, dependence_graph, to_dot
from polymap.passes.dependences.loop_classes import carrying_loops, distance_vector, loop_classes
from polymap.poly import build_model

EX = Path(__file__).parent.parent / "examples"


def model_of(name):
    return build_model(load_program(EX / f"{name}.loop").kernels[0])


def _find(deps, kind, src, dst, tensor):
    return next(d for d in group(deps) if (d.kind, d.source, d.sink, d.tensor) == (kind, src, dst, tensor))


def test_gemm_value_based_relations_are_exact():
    m = model_of("gemm")
    deps = value_based(m)
    ctx = m.context
    raw = _find(deps, "RAW", "init", "acc", "C").relation
    want = isl.Map("[M, N, K] -> { init[i, j] -> acc[i, j, 0] : 0 <= i < M and 0 <= j < N and K >= 1 }")
    assert raw.intersect_params(ctx).is_equal(want.intersect_params(ctx))
    acc = _find(deps, "RAW", "acc", "acc", "C").relation
    want = isl.Map("[M, N, K] -> { acc[i, j, k] -> acc[i, j, k + 1] : 0 <= i < M and 0 <= j < N and 0 <= k < K - 1 }")
    assert acc.intersect_params(ctx).is_equal(want.intersect_params(ctx))
    kinds = {(d.kind, d.source, d.sink) for d in group(deps)}
    assert ("WAR", "init", "acc") not in kinds  # init reads nothing


@pytest.mark.parametrize("name,params", [("gemm_scalar_acc", {"M": 2, "N": 3, "K": 2}),
                                         ("lu", {"N": 4}), ("softmax", {"M": 2, "N": 3}),
                                         ("seidel2d", {"T": 2, "N": 5})])
def test_value_based_raw_equals_brute_force(name, params):
    m = model_of(name)
    kernel = m.kernel
    last, pairs = {}, set()
    for ctx, env, reads, write in instances(kernel, params, None):
        me = (ctx.name, tuple(env[v] for v in ctx.iterators))
        for el in reads:
            if el in last:
                pairs.add((last[el], me, el[0]))
        last[write] = me
    got = set()
    for d in value_based(m):
        if d.kind != "RAW":
            continue
        rel = d.relation.intersect_params(isl.Set(
            "[" + ", ".join(m.params) + "] -> { : " + " and ".join(f"{p} = {v}" for p, v in params.items()) + " }"))
        n_in = rel.dim(isl.dim_type.in_)

        def add(p, d=d, n_in=n_in):
            vals = [int(p.get_coordinate_val(isl.dim_type.set, k).to_python()) for k in range(p.get_space().dim(isl.dim_type.set))]
            got.add(((d.source, tuple(vals[:n_in])), (d.sink, tuple(vals[n_in:])), d.tensor))
        rel.wrap().foreach_point(add)
    assert got == pairs


def test_memory_based_contains_value_based():
    m = model_of("gemm_scalar_acc")
    mem = {(d.kind, d.source_tag, d.sink_tag): d.relation for d in memory_based(m)}
    for d in value_based(m):
        assert d.relation.is_subset(mem[(d.kind, d.source_tag, d.sink_tag)])


def test_loop_classes_gemm_seidel_jacobi():
    c = loop_classes(model_of("gemm"))
    assert (c["i"].parallel, c["j"].parallel, c["k"].parallel) == (True, True, False)
    assert c["k"].reduction and not c["i"].reduction
    c = loop_classes(model_of("seidel2d"))
    assert not any(c[x].parallel or c[x].reduction for x in "tij")
    c = loop_classes(model_of("jacobi2d"))
    assert not c["t"].parallel and not c["t"].reduction
    assert c["i"].parallel and c["j"].parallel and c["i"].occurrences == 2
    c = loop_classes(model_of("gemm_scalar_acc"))
    assert not c["i"].parallel and not c["j"].parallel and c["k"].reduction


def test_distances_and_carrying_loops():
    m = model_of("gemm")
    acc = _find(value_based(m), "RAW", "acc", "acc", "C")
    assert distance_vector(m, acc) == ("0", "0", "1")
    assert carrying_loops(m, acc) == ("k",)
    init = _find(value_based(m), "RAW", "init", "acc", "C")
    assert carrying_loops(m, init) == ("",)
    m = model_of("jacobi2d")
    waw = _find(value_based(m), "WAW", "to_b", "to_b", "B")
    assert distance_vector(m, waw) == ("1", "0", "0") and carrying_loops(m, waw) == ("t",)


def test_dependence_graph_sccs_and_dot():
    m = model_of("gemm_scalar_acc")
    g = dependence_graph(m, group(memory_based(m)))
    assert components(g) == [["zero", "acc", "store"]]
    m = model_of("gemm")
    g = dependence_graph(m, group(value_based(m)))
    assert components(g) == [["init"], ["acc"]]
    text = to_dot(g)
    assert text.startswith('digraph "gemm"') and '"init" -> "acc"' in text
