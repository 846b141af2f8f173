"""The shortcuts of legality: fast path (memory-based) and keeps_writers vs the dataflow comparison and brute force."""
from __future__ import annotations

import time
from types import SimpleNamespace as NS

from hypothesis import HealthCheck, given, settings

from bruteforce import brute_legal
from polymap import ir
from polymap.passes.legality.legality import check_mapping
from polymap.passes.legality.reaching_writers import (
    keeps_writers,
    violated_relations,
    writer_changes,
)
from polymap.passes.schedule.schedule_order import ScheduleOrder, keeps_conflicts
from polymap.passes.schedule.tiling import mapped_schedule
from polymap.poly import build_model
from test_legality_properties import cases


def _answers(kernel, mapping):
    model = build_model(kernel)
    mapped = mapped_schedule(model, mapping)
    stmts, maps = mapped.statements, dict(mapped.maps)
    rels = violated_relations(model, stmts, lambda s: maps[s.name])
    dataflow_legal = all(rels[k].is_empty() for k in "ABCD")
    ch = writer_changes(model, stmts, ScheduleOrder(maps))
    changes = (ch.read_first, ch.input_overwritten, ch.between, ch.final_swaps)
    assert all(c.is_empty() for c in changes) == dataflow_legal  # the witnesses' relations
    return keeps_conflicts(model, stmts, maps), keeps_writers(model, stmts, maps), dataflow_legal


@settings(max_examples=40, deadline=None, suppress_health_check=list(HealthCheck))
@given(cases())
def test_shortcuts_agree_with_dataflow_and_brute_force(case):
    kernel, mapping = case
    fast, writers, dataflow_legal = _answers(kernel, mapping)
    legal, *_ = brute_legal(kernel, mapping, {})
    assert dataflow_legal == legal
    assert writers == legal  # exact: the yes/no answer of reaching_writers
    if fast:  # sufficient: fast-path-legal implies legal
        assert legal


def _loop(var, body, hi=3):
    return ir.Loop(var, (ir.Const(0),), (ir.Const(hi),), 1, tuple(body))


def _swap(loops, order):
    return NS(kernel="k", nest=0, loops=loops,
              levels=(NS(level="L0", tile=(None,) * len(loops), order=order, spatial=(), keep=()),))


def test_dead_writes_flip_but_stay_legal():
    """``s = A[i, j]`` on a scalar nobody reads: every pair of writes conflicts, and interchange
    flips them, but the last write (i = j = 2) stays last: only the exact path says legal."""
    body = ir.Assign("S", ir.Ref("s", ()), "=", ir.Ref("A", (ir.Var("i"), ir.Var("j"))))
    kernel = ir.Kernel("k", (), (), (), (_loop("i", [_loop("j", [body])]),))
    fast, writers, dataflow_legal = _answers(kernel, _swap(("i", "j"), ("j", "i")))
    assert (fast, writers, dataflow_legal) == (False, True, True)
    assert brute_legal(kernel, _swap(("i", "j"), ("j", "i")), {})[0]
    assert check_mapping(build_model(kernel), _swap(("i", "j"), ("j", "i")), params={}).legal


def test_schedule_order_matches_lex_lt_union_map():
    """Pairwise ordering equals ISL's all-pairs ``lex_lt_union_map`` on a tagged relation."""
    from polymap.passes.dependences.dependences import tag_program

    a = ir.Assign("S", ir.Ref("A", (ir.Var("i"),)), "=", ir.Ref("A", (ir.BinOp("-", ir.Const(2), ir.Var("i")),)))
    b = ir.Assign("T", ir.Ref("A", (ir.Var("i"),)), "+=", ir.Ref("B", (ir.Var("i"),)))
    kernel = ir.Kernel("k", (), (), (), (_loop("i", [a, b]),))
    model = build_model(kernel)
    prog = tag_program(model, model.statements, lambda s: s.schedule)
    conflicts = prog.writes.apply_range(prog.reads.reverse())
    order = ScheduleOrder({s.name: s.schedule for s in model.statements})
    assert order.keep(conflicts).is_equal(conflicts.intersect(prog.before))
    assert order.keep(conflicts, flip=True).is_equal(conflicts.intersect(prog.before.reverse()))


def test_caches_are_per_model_and_freed():
    """The analyses live in the model's own ``cache``: another model starts empty, and the
    cached values go when the model goes (nothing global keyed by ``id``)."""
    import gc
    import weakref

    body = ir.Assign("S", ir.Ref("s", ()), "+=", ir.Ref("A", (ir.Var("i"),)))
    kernel = ir.Kernel("k", (), (), (), (_loop("i", [body]),))
    model = build_model(kernel)
    check_mapping(model, _swap(("i",), ("i",)), params={})
    assert model.cache
    assert not build_model(kernel).cache
    gone = weakref.ref(model)
    del model
    gc.collect()
    assert gone() is None


def test_tiled_gemm_check_is_fast():
    """The fast path answers a 3-level tiled gemm without any dataflow (was ~1 s)."""
    from polymap.driver import load_program
    from pathlib import Path

    kernel = load_program(Path(__file__).parent.parent / "examples" / "gemm.loop").kernels[0]
    model = build_model(kernel)
    loops = ("i", "j", "k")
    m = NS(kernel="gemm", nest=0, loops=loops, levels=(
        NS(level="DRAM", tile=(None,) * 3, order=loops, spatial=(), keep=()),
        NS(level="GLB", tile=(32, 32, 32), order=("k", "i", "j"), spatial=(), keep=()),
        NS(level="RF", tile=(8, 8, 8), order=loops, spatial=(), keep=())))
    check_mapping(model, m, params={"M": 64, "N": 64, "K": 64})  # warm the per-model caches
    start = time.perf_counter()
    assert check_mapping(model, m, params={"M": 64, "N": 64, "K": 64}).legal
    assert time.perf_counter() - start < 0.5
