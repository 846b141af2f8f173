"""The model's threads, lanes and waste: against brute-force simulation, the batch form, and the C it describes."""
from __future__ import annotations

import re
from dataclasses import replace
from math import ceil
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

from gemm_text import GEMM_ACC as GEMM_ACC_TEXT
from polymap.codegen.c.emitter import emit_c
from polymap.driver import load_program, param_values, parse
from polymap.machine.arch import VectorUnit
from polymap.machine.presets import load_architecture
from polymap.mapping.files import mapping_from_dict
from polymap.mapping.model import LevelMapping, Mapping, loop_extents
from polymap.passes.counting.cost_model import evaluate, mapping_execution
from polymap.passes.counting.counting import count_mapping
from polymap.passes.counting import execution as execution_module
from polymap.passes.counting.execution import (
    LATENCY,
    MIN_WORK,
    batch_execution,
    chain_elements,
    effective_tiles,
    execution,
    issue_slots,
    vector_issues,
    pieces,
    static_share,
    tile_count,
)
from polymap.passes.search.choice import kernel_to_map, original_mapping
from polymap.islcheck import isl
from polymap.poly import build_model

# gemm with its initialisation; every test below gives its sizes
GEMM = load_program(Path(__file__).resolve().parent.parent / "examples" / "gemm.loop").kernels[0]
MODEL = build_model(GEMM)
# the same without its initialisation, whose own j loop would add pragmas of its own
GEMM_ACC = parse(GEMM_ACC_TEXT % {"n": 64}).kernels[0]


def host():
    """``host`` with this machine's levels but a fixed AVX2 vector unit and 2 cores x 8 lanes,
    so that the expected numbers do not depend on where the suite runs."""
    h = load_architecture("host")
    levels = tuple(replace(lv, instances=2) if k >= 2 else lv for k, lv in enumerate(h.levels))
    return replace(h, levels=levels, compute=replace(h.compute, instances=16), vector=VectorUnit("avx2", 32, 16, True))


ROOT = Path(__file__).resolve().parent.parent
HOST = host()


@pytest.fixture
def no_team_costs(monkeypatch):
    """The team's start and barriers cost nothing: tests of the other compute terms' formulas."""
    monkeypatch.setattr(execution_module, "FORK_CYCLES", 0.0)
    monkeypatch.setattr(execution_module, "BARRIER_CYCLES", 0.0)


@pytest.fixture
def no_pass_costs(monkeypatch):
    """A pass of a box of accumulators costs nothing beyond its steps: tests of the other terms' formulas."""
    monkeypatch.setattr(execution_module, "PASS_CYCLES", 0.0)


@pytest.fixture
def no_pack_costs(monkeypatch):
    """Copying a panel costs nothing: tests of the other compute terms' formulas (test_pack_cost.py
    checks the copies against the generated code)."""
    monkeypatch.setattr(execution_module, "PACK_CYCLES", 0.0)
    monkeypatch.setattr(execution_module, "PACK_UNIT_CYCLES", 0.0)


def gemm_mapping(order_rf, tiles_l1, tiles_rf, *, l2_order=("i", "j", "k"), spatial=(), tiles_l2=None, kernel=GEMM):
    names = [lv.name for lv in HOST.levels]
    levels = [{"level": names[0], "order": ["i", "j", "k"]},
              {"level": names[1], "order": list(l2_order), "spatial": list(spatial)},
              {"level": names[2], "tile": tiles_l2 or {}, "order": ["i", "j", "k"]},
              {"level": names[3], "tile": tiles_l1, "order": ["i", "j", "k"]},
              {"level": names[4], "tile": tiles_rf, "order": list(order_rf)}]
    return mapping_from_dict({"kernel": "gemm", "levels": levels}, kernel=kernel, arch=HOST)


# ---- the exact pieces, against simulation

@settings(max_examples=200, deadline=None)
@given(st.integers(0, 300), st.sampled_from([1, 4, 8, 16]))
def test_issue_slots_simulated(size, lanes):
    slots, i = 0, 0
    while i + lanes <= size:  # the vector body
        slots, i = slots + lanes, i + lanes
    while i < size:  # the scalar epilogue: one iteration per issue of a whole vector's time
        slots, i = slots + lanes, i + 1
    assert issue_slots(size, lanes) == slots


@settings(max_examples=200, deadline=None)
@given(st.integers(0, 300), st.sampled_from([1, 2, 4, 8, 16]))
def test_vector_issues_simulated(size, lanes):
    """The loop GCC builds: whole vectors, one vector of half the lanes (when that is 2 or more), scalars."""
    issues, i = 0, 0
    while i + lanes <= size:
        issues, i = issues + 1, i + lanes
    half = lanes // 2
    if half >= 2 and i + half <= size:
        issues, i = issues + 1, i + half
    while i < size:
        issues, i = issues + 1, i + 1
    assert vector_issues(size, lanes) == issues
    both = vector_issues(np.array([size, size + 1]), np.array([lanes, lanes]))
    assert list(both) == [vector_issues(size, lanes), vector_issues(size + 1, lanes)]


@settings(max_examples=200, deadline=None)
@given(st.integers(1, 400), st.integers(1, 64), st.integers(1, 8))
def test_static_share_simulated(extent, tile, threads):
    starts = list(range(0, extent, tile))
    chunk = ceil(len(starts) / threads)  # OpenMP schedule(static): contiguous chunks, the first ones full
    work = [sum(min(tile, extent - s) for s in starts[p * chunk:(p + 1) * chunk]) for p in range(threads)]
    assert static_share(extent, tile, threads) == max(work)


@settings(max_examples=200, deadline=None)
@given(st.integers(1, 300), st.lists(st.integers(1, 80), min_size=0, max_size=3))
def test_pieces_simulated(extent, tiles):
    runs = [(0, extent)]
    for t in tiles:  # each tile cut inside its parent, from the parent's start
        runs = [(a + s, min(t, n - s)) for a, n in runs for s in range(0, n, t)]
    sizes: dict[int, int] = {}
    for _, n in runs:
        sizes[n] = sizes.get(n, 0) + 1
    assert pieces(extent, tiles) == sizes


@settings(max_examples=200, deadline=None)
@given(st.lists(st.integers(1, 300), min_size=1, max_size=4),
       st.lists(st.lists(st.integers(1, 80), min_size=4, max_size=4), min_size=0, max_size=3))
def test_tile_count_counts_distinct_tile_indices(extents, raw):
    """The tiles of nested loops over one dimension: the distinct tuples of tile indices the points take
    (counted point by point), for numbers and, row by row, for arrays (the batch form)."""
    tiles_of = [[t[r] for t in raw] for r in range(len(extents))]
    for extent, tiles in zip(extents, tiles_of):
        seen = set()
        for v in range(extent):
            key, off, outer = [], v, extent
            for t in tiles:  # the index within the enclosing tile, then the offset inside this one
                t = min(t, outer)
                key.append(off // t)
                outer = min(t, outer - (off // t) * t)
                off %= t
            seen.add(tuple(key))
        assert tile_count(extent, [min(t, extent) for t in tiles]) == len(seen) == sum(pieces(extent, tiles).values())
    got = tile_count(np.array(extents), [np.array([t[r] for r in range(len(extents))]) for t in raw])
    assert list(got) == [tile_count(e, tiles) for e, tiles in zip(extents, tiles_of)]


# ---- the rules on mappings

def test_unit_stride_innermost_runs_in_lanes_and_reduction_innermost_in_one():
    values = param_values(GEMM, {"M": 64, "N": 100, "K": 64})
    ext = loop_extents(GEMM, 0, values)
    j_inner = execution(MODEL, gemm_mapping(("i", "k", "j"), {"i": 8, "j": 32, "k": 64}, {"i": 1, "j": 32, "k": 1}),
                        HOST, ext)
    k_inner = execution(MODEL, gemm_mapping(("i", "j", "k"), {"i": 8, "j": 32, "k": 64}, {"i": 1, "j": 1, "k": 64}),
                        HOST, ext)
    assert (j_inner.lanes, j_inner.vector_loop) == (8, "j")
    # j: 100 in tiles of 32 -> 3 x 32 (4 vectors each) + 4: a register tile (its accumulators in
    # registers, chains), whose edge is one masked vector of 8 lanes
    assert j_inner.waste == (3 * 32 + 1 * 8) / 100
    assert (k_inner.lanes, k_inner.vector_loop) == (1, None)  # k carries the reduction


def test_threads_from_the_spatial_loop_or_openmp_loop():
    values = param_values(GEMM, {"M": 256, "N": 256, "K": 256})
    ext = loop_extents(GEMM, 0, values)
    spatial = execution(MODEL, gemm_mapping(("i", "j"), {"i": 96, "j": 16, "k": 256}, {"i": 6, "j": 16, "k": 1},
                                            spatial=("i",), tiles_l2={"i": 128}), HOST, ext)
    assert spatial.threads == 2 and spatial.thread_loop == "i"
    openmp = execution(MODEL, gemm_mapping(("i", "j"), {"i": 96, "j": 16, "k": 256}, {"i": 6, "j": 16, "k": 1}),
                       HOST, ext)
    # no spatial loop: OpenMP shares the outermost parallel loop with >= 2 x cores tiles and MIN_WORK:
    # i walks 3 tiles of 96 at L2 (fewer than 4), so j's 16 tiles of 16 go to the 2 threads, 8 each
    assert (openmp.threads, openmp.thread_loop, openmp.waste) == (2, "j", 1.0)
    uneven = execution(MODEL, gemm_mapping(("i", "j"), {"i": 48, "j": 16, "k": 256}, {"i": 6, "j": 16, "k": 1}),
                       HOST, ext)
    # i: 6 tiles of 48 (the last 16) over 2 threads: the first gets 3 x 48 = 144 of 256
    assert (uneven.thread_loop, uneven.waste) == ("i", 144 * 2 / 256)


def test_accelerator_keeps_spatial_units():
    toy = load_architecture("toy")
    mp = mapping_from_dict({"kernel": "gemm", "levels": [
        {"level": "DRAM", "order": ["i", "j", "k"]},
        {"level": "GLB", "tile": {"i": 32, "j": 32, "k": 16}, "order": ["k", "i", "j"]},
        {"level": "RF", "tile": {"i": 1, "j": 16, "k": 1}, "order": ["j"], "spatial": ["j"]}]}, kernel=GEMM, arch=toy)
    ext = loop_extents(GEMM, 0, param_values(GEMM, {"M": 64, "N": 64, "K": 64}))
    ex = execution(MODEL, mp, toy, ext)
    assert (ex.threads, ex.lanes, ex.waste) == (16, 1, 1.0)


def test_compute_term_sees_the_lanes(no_team_costs, no_pass_costs, no_pack_costs):
    """Same tiles, j or k innermost: the compute terms differ by the lanes and the waste, exactly."""
    values = param_values(GEMM, {"M": 64, "N": 64, "K": 64})
    ext = loop_extents(GEMM, 0, values)
    reports = []
    for order, rf in ((("i", "k", "j"), {"i": 1, "j": 32, "k": 1}), (("i", "j", "k"), {"i": 1, "j": 1, "k": 64})):
        mp = gemm_mapping(order, {"i": 8, "j": 32, "k": 64}, rf)
        ex = mapping_execution(MODEL, mp, HOST, ext)
        r = evaluate(count_mapping(MODEL, mp, HOST, params=values), HOST, execution=ex)
        compute = dict(r.cycle_terms)["compute"]
        assert compute == r.counts.instances * ex.waste * ex.latency / (ex.units * HOST.compute.ops_per_cycle)
        reports.append(r)
    assert reports[0].active_units == 8 * reports[1].active_units


# ---- the batch form is the same rule

@settings(max_examples=60, deadline=None)
@given(st.lists(st.integers(0, 80), min_size=9, max_size=9), st.sampled_from([("i", "k", "j"), ("j", "i", "k")]),
       st.sampled_from([(), ("i",), ("j",)]), st.sampled_from([(40, 72, 50), (256, 256, 256), (200, 8, 300)]))
def test_batch_equals_one_by_one(raw, order, spatial, sizes):
    values = param_values(GEMM, dict(zip(("M", "N", "K"), sizes)))
    ext = loop_extents(GEMM, 0, values)
    # tiles as a search builds them (LevelMapping directly: any tile, None = whole, an inner one may exceed
    # its parent's and is clipped to it, as effective_tiles does)
    keep = tuple(t.name for t in GEMM.decls if t.role != "local")
    tiles = [tuple(t or None for t in raw[0:3]), tuple(t or None for t in raw[3:6]),
             tuple(max(1, t % 17) for t in raw[6:9])]
    levels = [LevelMapping(HOST.levels[0].name, (None,) * 3, ("i", "j", "k"), (), keep),
              LevelMapping(HOST.levels[1].name, (None,) * 3, ("i", "j", "k"), (), keep),
              LevelMapping(HOST.levels[2].name, tiles[0], order, spatial, keep),
              LevelMapping(HOST.levels[3].name, tiles[1], ("i", "j", "k"), (), keep),
              LevelMapping(HOST.levels[4].name, tiles[2], order, (), keep)]
    mp = Mapping("gemm", 0, ("i", "j", "k"), tuple(levels))
    one = execution(MODEL, mp, HOST, ext)
    eff = np.array([[[e[x] for x in mp.loops] for e in effective_tiles(mp, ext)]], dtype=np.int64)
    units, waste = batch_execution(MODEL, mp, HOST, ext, eff)
    assert int(units[0]) == one.units
    assert abs(float(waste[0]) - one.slowdown) < 1e-12 * one.slowdown  # the batch returns the slowdown


# ---- the model describes the C that is generated

def _pragmas(code: str) -> list[str]:
    return re.findall(r"#pragma omp [^\n]*", code)


def test_model_and_c_agree_on_threads_and_simd():
    model = build_model(GEMM_ACC)
    values = param_values(GEMM_ACC, {"M": 256, "N": 256, "K": 256})
    ext = loop_extents(GEMM_ACC, 0, values)
    cases = [gemm_mapping(("i", "k", "j"), {"i": 8, "j": 64, "k": 64}, {"i": 1, "j": 64, "k": 1}, kernel=GEMM_ACC),
             gemm_mapping(("i", "j", "k"), {"i": 8, "j": 64, "k": 64}, {"i": 1, "j": 1, "k": 64}, kernel=GEMM_ACC),
             gemm_mapping(("i", "k", "j"), {"i": 256, "j": 256, "k": 256}, {"i": 1, "j": 256, "k": 1},
                          kernel=GEMM_ACC)]
    seen = set()
    for mp in cases:
        ex = execution(model, mp, HOST, ext)
        code = emit_c(GEMM_ACC, model, (mp,), params=values, threads=2, register_tiles=False)
        pragmas = _pragmas(code)
        assert any("simd" in p for p in pragmas) == (ex.lanes > 1), (ex, pragmas)
        assert any("parallel" in p for p in pragmas) == (ex.threads > 1), (ex, pragmas)
        seen.add((ex.threads, ex.lanes))
    assert seen == {(2, 8), (2, 1)}  # the cases cover both answers
    # the original order, as compile counts it (every loop at the backing store, tile 1 below):
    # OpenMP on i, and k innermost is a reduction: 2 threads, 1 lane, as the original C
    ex = execution(model, original_mapping(GEMM_ACC, 0, HOST), HOST, ext)
    assert (ex.threads, ex.thread_loop, ex.lanes) == (2, "i", 1)
    pragmas = _pragmas(emit_c(GEMM_ACC, model, (), params=values, threads=2))
    assert any("parallel" in p for p in pragmas) and not any("simd" in p for p in pragmas)
    # small: no loop covers MIN_WORK instances per execution: one thread in both
    small = param_values(GEMM_ACC, {"M": 8, "N": 8, "K": 8})
    assert 8 * 8 * 8 < MIN_WORK
    mp = gemm_mapping(("i", "k", "j"), {"i": 8, "j": 8, "k": 8}, {"i": 1, "j": 8, "k": 1}, kernel=GEMM_ACC)
    ex = execution(model, mp, HOST, loop_extents(GEMM_ACC, 0, small))
    assert (ex.threads, ex.lanes) == (1, 8)
    pragmas = _pragmas(emit_c(GEMM_ACC, model, (mp,), params=small, threads=2, register_tiles=False))
    assert not any("parallel" in p for p in pragmas) and any("simd" in p for p in pragmas)


# ---- accumulation chains: the count against simulation, the factor on the compute term

def _in_flight(kernel, mapping, params) -> tuple[int, int]:
    """(fewest, most) distinct target elements updated from one update of an element to its next,
    over the instances in mapped order (the simulator's, not the model's)."""
    import sys
    sys.path.insert(0, str(Path(__file__).parent))
    from simulator import events

    _, evs = events(kernel, mapping, params)
    last: dict = {}
    written = [next(e for t, kind, e in ev.accesses if kind == "write") for ev in evs]
    spans = []
    for pos, el in enumerate(written):
        if el in last:
            spans.append(len(set(written[last[el] + 1:pos + 1])))
        last[el] = pos
    return min(spans), max(spans)


@settings(max_examples=40, deadline=None)
@given(st.sampled_from([("i", "k", "j"), ("i", "j", "k"), ("k", "i", "j"), ("j", "k", "i")]),
       st.sampled_from([1, 2, 4]), st.sampled_from([1, 2, 4]), st.sampled_from([1, 2, 4]),
       st.sampled_from([(4, 8, 4), (8, 4, 8), (6, 5, 7)]))
def test_chain_elements_simulated(order_rf, ti, tj, tk, sizes):
    """The elements in flight are the fewest distinct targets updated from one link of a chain to the
    next in the code's order, exactly when the tiles divide the extents (the steady state: the
    innermost reduction loop's consecutive iterations); edge tiles only shorten some links."""
    values = param_values(GEMM_ACC, dict(zip(("M", "N", "K"), sizes)))
    model = build_model(GEMM_ACC)
    ext = loop_extents(GEMM_ACC, 0, values)
    l1 = {"i": 2 * ti, "j": 2 * tj, "k": 2 * tk}
    mp = gemm_mapping(order_rf, l1, {"i": ti, "j": tj, "k": tk}, kernel=GEMM_ACC)
    from polymap.passes.counting.execution import _statements, _walk
    n = chain_elements(_statements(model, mp), _walk(mp, effective_tiles(mp, ext)))
    assert n is not None  # k walks at some level in every case
    fewest, most = _in_flight(GEMM_ACC, mp, values)
    assert fewest <= n <= most
    if all(ext[x] % min(l1[x], ext[x]) == 0 and min(l1[x], ext[x]) % t == 0
           for x, t in (("i", ti), ("j", tj), ("k", tk))):
        assert fewest == n


def test_latency_stretches_short_chains_only(no_team_costs, no_pass_costs, no_pack_costs):
    values = param_values(GEMM_ACC, {"M": 256, "N": 256, "K": 256})
    model = build_model(GEMM_ACC)
    ext = loop_extents(GEMM_ACC, 0, values)
    ops = HOST.compute.ops_per_cycle
    # k innermost: one chain per C element, one link per k: ops x LATENCY slots per issue
    k_inner = execution(model, gemm_mapping(("i", "j", "k"), {"i": 8, "j": 64, "k": 64},
                                            {"i": 1, "j": 1, "k": 64}, kernel=GEMM_ACC), HOST, ext)
    assert (k_inner.chains, k_inner.lanes, k_inner.latency) == (1, 1, ops * LATENCY)
    # j innermost, 64 wide: 8 vectors in flight, enough for 2 x 4 (but 1 broadcast of A and 8 vectors
    # of B per step for 8 FMAs: 9 loads, x1.125, see test_loads_per_step_separate_register_tiles)
    j_inner = execution(model, gemm_mapping(("i", "k", "j"), {"i": 8, "j": 64, "k": 64},
                                            {"i": 1, "j": 64, "k": 1}, kernel=GEMM_ACC), HOST, ext)
    assert (j_inner.chains, j_inner.lanes, j_inner.latency) == (64, 8, 9 * 2 / (2 * 8))
    # j innermost but 16 wide: 2 vectors for 8 slots -> x4
    narrow = execution(model, gemm_mapping(("i", "k", "j"), {"i": 8, "j": 16, "k": 64},
                                           {"i": 1, "j": 16, "k": 1}, kernel=GEMM_ACC), HOST, ext)
    assert (narrow.chains, narrow.latency) == (16, ops * LATENCY / 2)
    # a register tile 6 x 16 (i, j inside k): 96 elements, 12 vectors: no stretch
    regtile = execution(model, gemm_mapping(("k", "i", "j"), {"i": 96, "j": 16, "k": 256},
                                            {"i": 6, "j": 16, "k": 1}, kernel=GEMM_ACC), HOST, ext)
    assert (regtile.chains, regtile.latency) == (96, 1.0)
    # the compute term carries it: k innermost costs ops x LATENCY times the same tiles' issue
    r = evaluate(count_mapping(model, gemm_mapping(("i", "j", "k"), {"i": 8, "j": 64, "k": 64},
                                                   {"i": 1, "j": 1, "k": 64}, kernel=GEMM_ACC), HOST, params=values),
                 HOST, execution=k_inner)
    assert dict(r.cycle_terms)["compute"] == r.counts.instances * k_inner.waste * ops * LATENCY / (
        k_inner.units * ops)


def test_no_chain_without_accumulation():
    k = parse("""
kernel copy(N = 64, M = 64) {
  in A[N, M] : f32
  out B[N, M] : f32
  for i in 0..N, j in 0..M { B[i, j] = 2 * A[i, j] }
}""").kernels[0]
    model = build_model(k)
    ext = loop_extents(k, 0, param_values(k, {}))
    ex = execution(model, original_mapping(k, 0, HOST), HOST, ext)
    assert (ex.chains, ex.latency) == (None, 1.0)


def test_accumulators_in_registers_are_the_register_tiles_of_the_c():
    """The model keeps accumulators in registers exactly where the C has a register tile's vector
    accumulators (or one accumulator, invariant along the innermost loop); elsewhere a link loads
    and stores its element and waits STORE_FORWARD cycles more."""
    from polymap.passes.counting.execution import STORE_FORWARD, _statements, _walk, chains

    model = build_model(GEMM_ACC)
    values = param_values(GEMM_ACC, {"M": 64, "N": 64, "K": 64})
    ext = loop_extents(GEMM_ACC, 0, values)
    names = [lv.name for lv in HOST.levels]

    def mapping(l1_order, l1, rf_order, rf):
        return mapping_from_dict({"kernel": "gemm", "levels": [
            {"level": names[0], "order": ["i", "j", "k"]}, {"level": names[1], "order": ["i", "j", "k"]},
            {"level": names[2], "order": ["i", "j", "k"]},
            {"level": names[3], "tile": l1, "order": list(l1_order)},
            {"level": names[4], "tile": rf, "order": list(rf_order)}]}, kernel=GEMM_ACC, arch=HOST)

    cases = {  # name: mapping, expected (elements, in registers)
        "register tile 4 x 16": (mapping("ijk", {"i": 8, "j": 32, "k": 64}, "kij", {"i": 4, "j": 16, "k": 1}), (64, True)),
        "k innermost": (mapping("ijk", {"i": 8, "j": 32, "k": 64}, "ijk", {"i": 1, "j": 1, "k": 64}), (1, True)),
        "j innermost at L1": (mapping("ikj", {"i": 8, "j": 16, "k": 64}, "ijk", {"i": 1, "j": 1, "k": 1}), (16, False)),
        # the search's shape on an AVX-512 host (fid4, session 19: measured 5-10x slower than the
        # register tile while the model tied them): the box at RF, but the reduction loop too
        "reduction loop inside RF": (mapping("ijk", {"i": 8, "j": 32, "k": 64}, "kij", {"i": 4, "j": 16, "k": 4}),
                                     (64, False)),
    }
    for name, (mp, expected) in cases.items():
        eff = effective_tiles(mp, ext)
        found = chains(_statements(model, mp), _walk(mp, eff), len(mp.levels) - 1)
        assert found == expected, name
        code = emit_c(GEMM_ACC, model, (mp,), params=values, threads=2)
        assert ("-byte vectors:" in code) == (expected[1] and expected[0] > 1), name
        ex = execution(model, mp, HOST, ext)
        wait = LATENCY + (0 if expected[1] else STORE_FORWARD)
        vectors = -(-expected[0] // ex.lanes)
        assert ex.latency == max(1.0, HOST.compute.ops_per_cycle * wait / vectors), name


def test_loads_per_step_separate_register_tiles(no_team_costs):
    """gemm's 8 x 8 register tile loads 8 broadcasts of A and 1 vector of B per step of k for 8 FMAs
    (2 loads per cycle: 4.5 cycles for 4 of FMAs), its 6 x 16 tile 6 + 2 for 12: measured at gemm
    256^3 (load 3) 0.95-1.3 ms against 0.54-0.60 ms, while the chains alone tied them."""
    from polymap.passes.counting.execution import LOADS_PER_CYCLE, _statements, _walk, load_factor

    model = build_model(GEMM_ACC)
    values = param_values(GEMM_ACC, {"M": 256, "N": 256, "K": 256})
    ext = loop_extents(GEMM_ACC, 0, values)
    ops = HOST.compute.ops_per_cycle
    eight = gemm_mapping(("k", "i", "j"), {"i": 16, "j": 64, "k": 32}, {"i": 8, "j": 8, "k": 1}, kernel=GEMM_ACC)
    six = gemm_mapping(("k", "i", "j"), {"i": 96, "j": 16, "k": 256}, {"i": 6, "j": 16, "k": 1}, kernel=GEMM_ACC)
    a, b = execution(model, eight, HOST, ext), execution(model, six, HOST, ext)
    assert a.latency == (8 + 1) * ops / (LOADS_PER_CYCLE * 8) and b.latency == 1.0
    ra = evaluate(count_mapping(model, eight, HOST, params=values), HOST, execution=a)
    rb = evaluate(count_mapping(model, six, HOST, params=values), HOST, execution=b)
    assert rb.cycles < ra.cycles
    # a read that walks no loop of the step is hoisted: copying a row into an accumulator loads once
    k = parse("""
kernel rowsum(N = 64, M = 64) {
  in A[N, M] : f32
  in s[N] : f32
  inout y[N] : f32
  for i in 0..N, j in 0..M { y[i] += A[i, j] * s[i] }
}""").kernels[0]
    m2 = build_model(k)
    ex2 = loop_extents(k, 0, param_values(k, {}))
    from polymap.passes.search.choice import original_mapping as om
    mp = om(k, 0, HOST)
    walk = _walk(mp, effective_tiles(mp, ex2))
    # j innermost is the reduction: A[i, j] walks it (one load a step), s[i] walks neither: hoisted
    assert load_factor(_statements(m2, mp), walk, None, 1, ops, True) == max(1.0, 1 * ops / (LOADS_PER_CYCLE * 1))


# ---- loops of one nest; statements that stride run in one lane

# covariance's shape: ``i`` is a reduction loop in the first nest and a parallel one in the second; in
# the second, the copy's ``j`` loop strides (``T[j, i]``) while the update's is unit stride
TWO_NESTS = parse("""
kernel cv(M = 16, N = 24) {
  in    data[N, M] : f64
  out   mean[M]    : f64
  out   C[M, M]    : f64
  out   T[M, M]    : f64
  for j in 0..M {
    mean_init: mean[j] = 0.0
    for i in 0..N {
      mean_acc: mean[j] += data[i, j]
    }
  }
  for i in 0..M, j in 0..M {
    init: C[i, j] = 0.0
    for k in 0..N {
      acc: C[i, j] += data[k, i] * data[k, j]
    }
    copy: T[j, i] = C[i, j]
  }
}
""").kernels[0]


def _brute_parallel(kernel, params, nest) -> dict[str, bool]:
    """Per loop of the nest: no two instances that differ in it (equal in the loops around it) touch
    one element with at least one write, by enumerating the instances."""
    import sys
    sys.path.insert(0, str(Path(__file__).parent))
    from bruteforce import instances

    insts = instances(kernel, params, nest)
    out: dict[str, bool] = {}
    for x in {lp.var for ctx, *_ in insts for lp in ctx.loops}:
        seen: dict = {}
        ok = True
        for ctx, env, reads, write in insts:
            names = [lp.var for lp in ctx.loops]
            if x not in names:
                continue
            outer = tuple(env[v] for v in names[:names.index(x)])
            for el, w in [(r, False) for r in reads] + [(write, True)]:
                for xv, ww in seen.get((outer, el), ()):
                    ok = ok and not (xv != env[x] and (w or ww))
                seen.setdefault((outer, el), set()).add((env[x], w))
        out[x] = ok
    return out


def test_parallel_loops_are_those_of_the_mapped_nest():
    from polymap.passes.dependences.loop_classes import loop_classes
    from polymap.passes.search.interchange import interchange_mapping

    model = build_model(TWO_NESTS)
    small = {"M": 5, "N": 4}
    for nest in (0, 1):
        brute = _brute_parallel(TWO_NESTS, small, nest)
        assert {x: c.parallel for x, c in loop_classes(model, nests=(nest,)).items()} == brute
    assert not _brute_parallel(TWO_NESTS, small, 0)["i"] and _brute_parallel(TWO_NESTS, small, 1)["i"]
    # the second nest walked i, k, j: OpenMP on its i (the C shares it out too), not one thread
    values = param_values(TWO_NESTS, {"M": 256, "N": 256})
    mp = interchange_mapping(model, 1, HOST, ("i", "k", "j"))
    ex = execution(model, mp, HOST, loop_extents(TWO_NESTS, 1, values))
    assert (ex.threads, ex.thread_loop) == (2, "i")
    code = emit_c(TWO_NESTS, model, (mp,), params=values, threads=2, register_tiles=False)
    assert re.search(r"#pragma omp parallel for[^\n]*\n\s*for \(long i = ", code)


def test_lanes_weigh_the_statements_that_stride(no_pass_costs):
    # which statements the C runs in an ``omp simd`` loop, and their instances counted by enumeration,
    # give the share of the compute term the scalar ones add (sizes: whole vectors, even thread shares)
    import sys
    sys.path.insert(0, str(Path(__file__).parent))
    from bruteforce import instances
    from polymap.passes.search.interchange import interchange_mapping

    model = build_model(TWO_NESTS)
    values = param_values(TWO_NESTS, {"M": 16, "N": 24})
    mp = interchange_mapping(model, 1, HOST, ("i", "k", "j"))
    code = emit_c(TWO_NESTS, model, (mp,), params=values, threads=2, register_tiles=False)
    vector = set(re.findall(r"#pragma omp simd\n\s*for [^\n]*\n[^\n]*/\* (\w+) \*/", code))
    assert vector == {"init", "acc"}  # the copy's j loop strides: no simd there
    per = {}
    for ctx, *_ in instances(TWO_NESTS, values, 1):
        per[ctx.stmt.label] = per.get(ctx.stmt.label, 0) + 1
    fast = sum(n for s, n in per.items() if s in vector)
    slow = sum(n for s, n in per.items() if s not in vector)
    ex = execution(model, mp, HOST, loop_extents(TWO_NESTS, 1, values))
    width = HOST.vector.lanes("f64")  # 4: AVX2's 32 bytes
    assert ex.lanes == width and ex.vector_loop == "j"
    assert ex.waste == pytest.approx((fast + width * slow) / (fast + slow))
    # the batch form agrees
    ext = loop_extents(TWO_NESTS, 1, values)
    eff = np.array([[[e[x] for x in mp.loops] for e in effective_tiles(mp, ext)]], dtype=np.int64)
    units, slowdown = batch_execution(model, mp, HOST, ext, eff)
    assert int(units[0]) == ex.units and float(slowdown[0]) == pytest.approx(ex.waste * ex.latency)


# ---- passes of a box of accumulators (pass_factor), against a walk of the tiled loops

def _walk_points(extents, tiles, orders):
    """The instances (i, j, k) in the order the tiled loops run them: level ``k`` walks the tiles of
    level ``k + 1`` (``tiles[k + 1]``, None: the whole extent; the last level's points are ones) inside
    its own tile, in ``orders[k]``; edge tiles are clipped."""
    loops = ("i", "j", "k")
    sizes = [{x: (t or {}).get(x) or extents[x] for x in loops} for t in tiles] + [{x: 1 for x in loops}]
    for k in range(1, len(sizes)):
        sizes[k] = {x: min(sizes[k][x], sizes[k - 1][x]) for x in loops}

    def walk(level, lo, hi):
        if level == len(orders):
            yield lo["i"], lo["j"], lo["k"]
            return
        step = sizes[level + 1]
        ranges = {x: range(lo[x], hi[x], step[x]) for x in loops}

        def nest(d, at):
            if d == 3:
                yield from walk(level + 1, at, {x: min(at[x] + step[x], hi[x]) for x in loops})
                return
            x = orders[level][d]
            for v in ranges[x]:
                yield from nest(d + 1, {**at, x: v})
        yield from nest(0, dict(lo))
    yield from walk(0, {x: 0 for x in loops}, dict(extents))


def _passes_walked(points):
    """(passes, elements a step): a step is a run of instances at one k; consecutive steps over the same
    C elements at k + 1 continue a pass (the box stays in registers), anything else starts one."""
    steps, last = [], None
    for i, j, k in points:
        if last is None or k != last[0]:
            steps.append((k, set()))
            last = steps[-1]
        last[1].add((i, j))
    passes = sum(1 for a, b in zip([None] + steps, steps) if a is None or b[0] != a[0] + 1 or b[1] != a[1])
    sizes = {len(s) for _, s in steps}
    assert len(sizes) == 1  # tiles that divide the extents: every step the same box
    return passes, sizes.pop()


@pytest.mark.parametrize("l1, rf_order, rf", [
    ({"i": 8, "j": 32, "k": 16}, "kij", {"i": 4, "j": 16, "k": 1}),   # the search's 4 x 16 box, KC 16
    ({"i": 8, "j": 32, "k": 64}, "kij", {"i": 4, "j": 16, "k": 1}),   # the same, KC 64: a quarter of the passes
    ({"i": 16, "j": 32, "k": 32}, "kij", {"i": 8, "j": 32, "k": 1}),  # 8 x 32
    ({"i": 8, "j": 16, "k": 64}, "ijk", {"i": 1, "j": 1, "k": 64}),   # k innermost: one accumulator a pass
])
def test_accumulator_passes_walked(l1, rf_order, rf, no_team_costs):
    """The pass factor's passes are the tiled loops' own: instances / (box elements x steps a pass)
    equals the passes a walk of the loops finds (:func:`_passes_walked`), and the factor is
    ``1 + PASS_CYCLES x ops / (vector operations a step x steps a pass)`` with the walk's box."""
    from polymap.passes.counting.execution import PASS_CYCLES
    ext = {"i": 16, "j": 64, "k": 128}
    names = [lv.name for lv in HOST.levels]
    mp = mapping_from_dict({"kernel": "gemm", "levels": [
        {"level": names[0], "order": ["i", "j", "k"]}, {"level": names[1], "order": ["i", "j", "k"]},
        {"level": names[2], "order": ["i", "j", "k"]},
        {"level": names[3], "tile": l1, "order": ["i", "j", "k"]},
        {"level": names[4], "tile": rf, "order": list(rf_order)}]}, kernel=GEMM_ACC, arch=HOST)
    points = list(_walk_points(ext, [None, None, None, l1, rf], ["ijk", "ijk", "ijk", "ijk", rf_order]))
    assert sorted(points) == [(i, j, k) for i in range(16) for j in range(64) for k in range(128)]
    passes, elements = _passes_walked(points)
    model = build_model(GEMM_ACC)
    ex = execution(model, mp, HOST, ext)
    steps = len(points) / (passes * elements)
    rows = rf["i"] if rf["j"] > 1 else 1
    vectors = rows * ceil(rf["j"] / ex.lanes) if rf["j"] > 1 else elements
    assert ex.passes == pytest.approx(1 + PASS_CYCLES * HOST.compute.ops_per_cycle / (vectors * steps * ex.latency))
    # the batch form agrees
    eff = np.array([[[t[x] for x in mp.loops] for t in effective_tiles(mp, ext)]])
    _, slowdown = batch_execution(model, mp, HOST, ext, eff)
    assert slowdown[0] == pytest.approx(ex.slowdown)


def test_search_box_at_kc_32_behind_register_tiles():
    """gemm f32 1024 on an AVX-512 host: the search's 4 x 16 box with KC 32 ran 0.53-0.69x of the
    6 x 64 register tiles (RESULTS.md "session 20, end", "session 21 (blas6)") while the model put it
    0.6% ahead; its passes (1024 FMAs of 8 lanes a pass, against 16,896) now cost it more than the
    register tiles' thread imbalance (516 + 508 rows)."""
    h = load_architecture("host")
    avx512 = replace(h, compute=replace(h.compute, instances=16, ops_per_cycle=2),
                     levels=tuple(replace(lv, instances=2) if k >= 2 else lv for k, lv in enumerate(h.levels)),
                     vector=VectorUnit("avx512", 64, 32, True))
    ext = {"i": 1024, "j": 1024, "k": 1024}
    names = [lv.name for lv in avx512.levels]

    def mp(l1, rf, l1_order="ikj"):
        return mapping_from_dict({"kernel": "gemm", "levels": [
            {"level": names[0], "order": ["i", "k", "j"]},
            {"level": names[1], "order": ["i", "k", "j"], "spatial": ["i"], "tile": {"i": 512}},
            {"level": names[2], "order": ["i", "k", "j"], "tile": {"i": 64, "j": 256, "k": 256}},
            {"level": names[3], "tile": l1, "order": list(l1_order)},
            {"level": names[4], "tile": rf, "order": ["k", "i", "j"]}]}, kernel=GEMM_ACC, arch=avx512)
    model = build_model(GEMM_ACC)
    small = execution(model, mp({"i": 64, "j": 16, "k": 32}, {"i": 4, "j": 16, "k": 1}), avx512, ext)
    large = execution(model, mp({"i": 64, "j": 64, "k": 256}, {"i": 4, "j": 64, "k": 1}), avx512, ext)
    assert small.passes > 1.15 and large.passes < 1.01
    assert small.slowdown > 1.008 * large.slowdown  # the register tiles' 516 / 512 rows


# ---- the shared-out loop starts once per iteration of the loops around it, not of its siblings

def test_barriers_count_the_loops_around_the_shared_loop_only():
    """gramschmidt's original order shares out ``i_2`` (Q's column, after the sibling ``i`` that sums
    ``nrm``): it starts once per ``k``. The count, brute force: distinct values of the loops walked
    before it among the instances of the statements that have it (isl's points of their domains).
    Before, the sibling loops' trips were multiplied in too (``M`` times more barriers). ``M`` is large
    enough that one execution of ``i_2`` (M instances of ``q_set``) covers MIN_WORK: below it neither
    the C nor the model shares ``i_2`` out (:func:`test_model_and_c_agree_on_threads_in_an_imperfect_nest`)."""
    kernel, _ = kernel_to_map(parse((ROOT / "examples" / "polybench" / "gramschmidt.loop").read_text(),
                                    "gramschmidt.loop").kernels[0])
    model = build_model(kernel)
    values = param_values(kernel, {"M": MIN_WORK + 100, "N": 5})
    mp = original_mapping(kernel, 0, HOST)
    ex = execution(model, mp, HOST, loop_extents(kernel, 0, values))
    assert ex.threads == 2 and ex.thread_loop == "i_2"
    before = mp.loops[:mp.loops.index(ex.thread_loop)]  # the original order walks the loops as listed
    starts = set()
    for s in model.statements:
        if ex.thread_loop not in s.loops:
            continue
        dom = s.domain
        for p, v in values.items():
            if p in dom.get_var_names(isl.dim_type.param):
                dom = dom.fix_val(isl.dim_type.param, dom.find_dim_by_name(isl.dim_type.param, p), v)
        names = dom.get_var_names(isl.dim_type.set)
        pts = []
        dom.foreach_point(lambda pt: pts.append({n: pt.get_coordinate_val(isl.dim_type.set, j).to_python()
                                                 for j, n in enumerate(names)}))
        starts |= {tuple(pt[x] for x in before if x in pt) for pt in pts}
    assert ex.syncs == len(starts) == 5


def test_an_architectures_team_costs_are_the_ones_charged():
    """An architecture that gives ``team_start_cycles`` and ``barrier_cycles`` (a calibrated file) is
    charged those for the team: the execution found on it (one by one and in the batch) and
    :func:`evaluate` of an execution found on another architecture (how ``--tune`` and bench_fidelity
    re-rank with a calibrated file) add ``start + syncs x barrier`` to the work (in a region: an omp for
    and its barrier each execution, then the region's join; region_barriers). Without them,
    the assumed FORK_CYCLES and BARRIER_CYCLES."""
    values = param_values(GEMM, {"M": 256, "N": 256, "K": 256})
    ext = loop_extents(GEMM, 0, values)
    # k tiled at L2 outside the shared loop: several executions of it, so barriers too
    mp = gemm_mapping(("i", "j"), {"i": 96, "j": 16, "k": 64}, {"i": 6, "j": 16, "k": 1}, l2_order=("k", "i", "j"),
                      tiles_l2={"k": 64})
    on_host = execution(MODEL, mp, HOST, ext)
    assert on_host.threads == 2 and on_host.syncs > 1 and on_host.region
    assert on_host.sync_cycles == execution_module.FORK_CYCLES + on_host.syncs * execution_module.BARRIER_CYCLES
    cal = replace(HOST, compute=replace(HOST.compute, team_start_cycles=1000.0, barrier_cycles=10.0))
    on_cal = execution(MODEL, mp, cal, ext)
    assert on_cal.syncs == on_host.syncs and on_cal.sync_cycles == 1000.0 + on_cal.syncs * 10.0
    eff = np.array([[[e[x] for x in mp.loops] for e in effective_tiles(mp, ext)]], dtype=np.int64)
    _, slowdown = batch_execution(MODEL, mp, cal, ext, eff)
    assert abs(float(slowdown[0]) - on_cal.slowdown) < 1e-12 * on_cal.slowdown
    counts = count_mapping(MODEL, mp, HOST, params=values)
    work = dict(evaluate(counts, HOST, execution=replace(on_host, sync=1.0)).cycle_terms)["compute"]
    for arch, team in ((HOST, on_host.sync_cycles), (cal, on_cal.sync_cycles)):
        got = dict(evaluate(counts, arch, execution=on_host).cycle_terms)["compute"]
        assert got == pytest.approx(work + team, rel=1e-12)


def test_model_and_c_agree_on_threads_in_an_imperfect_nest():
    """atax's ``for i { tmp[i] = 0; for j: tmp[i] += A[i, j] x[j]; for j_2: y[j_2] += A[i, j_2] tmp[i] }``
    at LARGE: one execution of ``j_2`` covers 2100 instances, below MIN_WORK, so the C forks no team.
    The model had taken the product of all three loops (N^2 M, sibling ``j`` and ``j_2`` multiplied) as
    the instances under ``j_2`` and charged the original order 2 threads and 1900 barriers (1.2e8
    cycles, 25x its own compute), which made atax's 'default' tiles (0.27x of the original) win."""
    kernel, _ = kernel_to_map(load_program(ROOT / "examples" / "polybench" / "atax.loop").kernels[0])
    model = build_model(kernel)
    params = {"M": 1900, "N": 2100}
    ext = loop_extents(kernel, 1, params)
    ex = execution(model, original_mapping(kernel, 1, HOST), HOST, ext)
    assert (ex.threads, ex.syncs, ex.sync_cycles) == (1, 0, 0.0)
    assert "omp parallel" not in emit_c(kernel, model, (), params=params, threads=2)
    stmts = [s.context for s in model.nest_statements(1)]
    assert execution_module.statement_instances(stmts, ext) == 1900 + 2 * 1900 * 2100  # the counts' instances
    assert execution_module.statement_instances(stmts, ext, "j_2") == 1900 * 2100
    assert execution_module.statement_instances(stmts, ext, "j_2") < MIN_WORK * 1900 <= 1900 * 2100 * 2100


def _shared_loop(code: str) -> str | None:
    """The loop under the C's ``omp parallel for`` / ``omp for``, its level suffix dropped (None: no team)."""
    found = re.search(r"#pragma omp (?:parallel )?for[^\n]*\n\s*for \(long (\w+?)(?:_[A-Z]\w*)? =", code)
    return found.group(1) if found else None


@settings(max_examples=40, deadline=None)
@given(st.sampled_from([(14, 96, 64), (30, 80, 48), (22, 96, 40)]), st.sampled_from([None, 4, 6, 8, 12]),
       st.sampled_from([None, 2, 3, 4]), st.sampled_from([None, 8, 32]), st.sampled_from([("i", "j", "k"), ("j", "i", "k")]))
def test_model_and_c_agree_on_the_shared_loop_at_edge_tiles(sizes, ti2, ti1, tj1, l2_order):
    """Whether a loop is shared out depends on its trips per execution; where a tile does not divide its
    parent's (an 8-row tile in 14 rows cut into tiles of 2: 4 trips, then 3) the C takes the mean (3.5,
    fewer than 2 per thread), and so must the model. It took the full tile's trips (4), charged a team
    to conv2d 14 x 14's ``LLC p=8, L2 p=2`` code, which has none, and ranked it last of sixteen: it ran
    fastest, 2x faster than the rest (bench_fidelity, session 30)."""
    values = dict(zip(("M", "N", "K"), sizes))
    model = build_model(GEMM_ACC)
    ext = loop_extents(GEMM_ACC, 0, values)
    tiles_l2 = {} if ti2 is None else {"i": ti2}
    tiles_l1 = {k: v for k, v in (("i", ti1), ("j", tj1)) if v is not None}
    mp = gemm_mapping(("i", "k", "j"), tiles_l1, {"i": 1, "j": 8, "k": 1}, l2_order=l2_order, tiles_l2=tiles_l2,
                      kernel=GEMM_ACC)
    ex = execution(model, mp, HOST, ext)
    code = emit_c(GEMM_ACC, model, (mp,), params=values, threads=2, register_tiles=False)
    assert _shared_loop(code) == (ex.thread_loop if ex.threads > 1 else None), (ex.why, _pragmas(code))
    eff = np.array([[[e[x] for x in mp.loops] for e in effective_tiles(mp, ext)]], dtype=np.int64)
    units, _ = batch_execution(model, mp, HOST, ext, eff)
    assert int(units[0]) == ex.units
