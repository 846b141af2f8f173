"""The original order against the candidates that only add threads (``choice.gains_on_original``, slow5).

PolyBench atax at LARGE: compile chose 'default' tiles for ``tmp = A x; y = A^T tmp`` because the model
saw the original order with no reuse at all (tile 1 below DRAM: 20 M elements from DRAM where A, 4 M,
is read once) and the tiles on 2 threads; the tiles' code was 4x slower than the original on one
thread and 0.09x at 2 (its reduction runs in ``omp single``). The rule: the original is counted with
the reuse its own order has (:func:`natural_original_mapping`), and a candidate that moves no less
through its slowest memory level and computes no faster per thread does not beat it.

Checked here without the cost model: the natural mapping walks the instances in the original order
(brute force, ``mapping.md``'s time keys in Python), and each of its levels fits (ISL footprints).
"""
from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from bruteforce import instances, time_key
from polymap.driver import parse
from polymap.machine.presets import load_architecture
from polymap.passes.counting.fit import capacity_problems
from polymap.passes.frontend.rename import distinct_loop_names
from polymap.passes.search.choice import ChoiceOptions, choose, natural_original_mapping
from polymap.poly import build_model

ROOT = Path(__file__).resolve().parent.parent
HOST = load_architecture("host")


def _kernel(name: str):
    return distinct_loop_names(parse((ROOT / "examples" / "polybench" / f"{name}.loop").read_text(),
                                     f"{name}.loop").kernels[0])


@pytest.mark.parametrize("name, nest, params", [
    ("atax", 1, {"M": 9, "N": 11}), ("doitgen", 0, {"NR": 3, "NQ": 2, "NP": 5}), ("gemver", 1, {"N": 7}),
    ("trmm", 0, {"M": 6, "N": 5})])
def test_the_natural_original_walks_the_original_order_and_fits(name, nest, params):
    kernel = _kernel(name)
    model = build_model(kernel)
    small = HOST.__class__(**{**HOST.__dict__, "levels": tuple(
        lv.__class__(**{**lv.__dict__, "capacity_bytes": 8 * 48 >> k if lv.bounded else None})
        for k, lv in enumerate(HOST.levels))})  # tiny levels: partial tiles at every level
    m = natural_original_mapping(model, nest, small, params)
    assert any(t not in (1, None) for lv in m.levels[1:-1] for t in lv.tile)
    inst = instances(kernel, params, nest)
    keys = [time_key(kernel, m, ctx, env, params) for ctx, env, _, _ in inst]
    assert keys == sorted(keys) and len(set(keys)) == len(keys)  # the original order, strip-mined only
    # every level it tiles beyond single iterations fits (tile 1 claims no reuse, as the original mapping)
    tiled = {k for k, lv in enumerate(m.levels[:-1]) if k and any(t != 1 for t in lv.tile)}
    assert tiled and not [p for p in capacity_problems(model, m, small, params) if p.level_index in tiled]


def test_gemver_keeps_the_original_order_where_its_search_mapping_only_adds_threads():
    """gemver's first nest at LARGE: 'search #1' is no faster per thread and moves no less than the
    original holding what fits (gemver 0.60x -> 0.83x with it, load 8)."""
    chosen = choose(_kernel("gemver"), HOST, {"N": 4000}).nests[0].chosen
    assert chosen.mapping is None
    assert any("only gain was threads" in p for p in chosen.problems)


def test_atax_keeps_the_original_order_at_large():
    """atax's second nest at LARGE: its 'default' tiles ran 0.27-0.51x of the original (the reduction
    ``tmp[i] += A[i, j] x[j]`` in ``omp single``, one thread, one accumulator). The original order's
    ``j_2`` loop covers 2100 instances per execution, below MIN_WORK: its code is one thread, and
    counted so (no barriers) the tiles gain only threads; ranked first or not, they do not win."""
    from polymap.passes.search.choice import gains_on_original
    params = {"M": 1900, "N": 2100}
    choice = choose(_kernel("atax"), HOST, params, options=ChoiceOptions(search_evaluations=0))
    nest = choice.nests[1]
    assert nest.chosen.mapping is None
    tiles = next(c for c in nest.candidates if c.source == "default")
    original = next(c for c in nest.candidates if c.mapping is None)
    assert original.report.execution.threads == 1 and original.report.execution.syncs == 0
    assert not gains_on_original(choice.model, 1, HOST, params, tiles, original)


def test_bicg_default_tiles_gain_only_threads():
    """bicg's second nest at LARGE: the 'default' tiles against the original, asked directly (whether
    they win the ranking at all depends on the rest of the model)."""
    from polymap.passes.search.choice import gains_on_original
    choice = choose(_kernel("bicg"), HOST, {"M": 1900, "N": 2100}, options=ChoiceOptions(search_evaluations=0))
    nest = choice.nests[1]
    tiles = next(c for c in nest.candidates if c.source == "default")
    original = next(c for c in nest.candidates if c.mapping is None)
    assert tiles.report is not None and original.report is not None
    assert not gains_on_original(choice.model, 1, HOST, {"M": 1900, "N": 2100}, tiles, original)


def test_a_deep_nest_outside_the_fast_class_is_not_counted_and_keeps_the_candidate(monkeypatch):
    """heat-3d's natural original took ISL over 100 s: beyond NATURAL_ISL_DEPTH the gate refuses
    (the answer is 'it gains') without counting anything."""
    from polymap.passes.search import choice as choice_module
    kernel = _kernel("heat-3d")
    model = build_model(kernel)
    params = {"TSTEPS": 2, "N": 5}
    base = choice_module.original_mapping(kernel, 0, HOST)
    orig = choice_module._evaluate(model, "original order", None, base, HOST, params)
    same = dataclasses.replace(orig, source="same as the original", mapping=base)  # gains nothing per thread
    calls = []
    monkeypatch.setattr(choice_module, "count_mapping", lambda *a, **k: calls.append(a))
    assert max(len(s.loops) for s in model.nest_statements(0)) > choice_module.NATURAL_ISL_DEPTH
    assert choice_module.gains_on_original(model, 0, HOST, params, same, orig)
    assert not calls


def test_register_tiles_still_beat_the_original():
    """gemm's register tiles compute faster per thread (many accumulators in flight): a real gain."""
    kernel = parse((ROOT / "examples" / "gemm.loop").read_text(), "gemm.loop").kernels[0]
    choice = choose(kernel, HOST, {"M": 600, "N": 512, "K": 300}, options=ChoiceOptions(search_evaluations=0))
    assert choice.nests[0].chosen.source.startswith("register tiles")
