"""A register tile's rows count lanes only where the code reads them from a panel (issue 10, issue 11).

The model counts a register tile's statement in vectors along its row loop when every read moving
along it is unit stride or read from a panel whose last dimension is that loop
(``execution.scalar_share`` with the mapping's panels, ``packs.reads_panel``). Which reads have a
panel is :func:`~polymap.passes.counting.packs.plan_packs`' answer for the mapping, not
``packable``'s wish: syrk and syr2k at PolyBench MINI (M = 20, N = 30), whose register tile leaves
``j`` whole above the registers with a triangle's bound (no one extent, no panel of ``A[j, k]``),
print scalar loops (regtile: 6 x 32 scalar accumulators are too many), which measured 1.18x and
1.58x slower than isl's schedule where the model had counted 8 lanes and picked them (design.md,
"The panels' lanes"). Checked against the code itself: the C the emitter prints for the mapping has
the tile's vector FMAs exactly where the model counts the statement in vectors, at MINI, with ``j``
tiled at the cache levels (a panel, vectors) and at larger sizes; the batch form equals the
one-by-one form on rows with and without the panel.
"""
from __future__ import annotations

import dataclasses
from pathlib import Path

import numpy as np
import pytest

from polymap import ir
from batch_rows import batch_arrays
from polymap.codegen.c.emitter import emit_c
from polymap.driver import load_program, param_values
from polymap.machine.presets import load_architecture
from polymap.mapping.files import mapping_from_dict
from polymap.mapping.model import Mapping, mapping_loop_extents
from polymap.passes.counting.execution import (
    _statements, batch_execution, code_packs, execution, packable, panels_along, scalar_share,
)
from polymap.passes.search.register_mapping import register_mapping
from polymap.poly import build_model

ROOT = Path(__file__).resolve().parent.parent
HOST = load_architecture("host")
KERNELS = {name: load_program(ROOT / "examples" / "polybench" / f"{name}.loop").kernels[0] for name in ("syrk", "syr2k")}
MODELS = {name: build_model(k) for name, k in KERNELS.items()}
#: PolyBench MINI (the examples' own sizes), and sizes whose register tile cuts j at the cache levels
SIZES = [{}, {"M": 200, "N": 240}, {"M": 24, "N": 100}]


def _tiled_j(mapping: Mapping, tile: int) -> Mapping:
    """``mapping`` with ``j`` cut into tiles of ``tile`` at the levels between the backing store and the
    registers: the row rule's panel then has a constant box."""
    j = mapping.loops.index("j")
    levels = list(mapping.levels)
    for k in range(1, len(levels) - 1):
        t = list(levels[k].tile)
        t[j] = tile
        levels[k] = dataclasses.replace(levels[k], tile=tuple(t))
    return dataclasses.replace(mapping, levels=tuple(levels))


def _rows(name: str, sizes: dict) -> tuple[list[Mapping], dict]:
    kernel, model = KERNELS[name], MODELS[name]
    params = param_values(kernel, sizes)
    mapping = register_mapping(model, 0, HOST, params)
    assert mapping is not None
    row = mapping.tile(len(mapping.levels) - 1)["j"]  # (a tile above may not be smaller: checked below)
    rows = [mapping] + [_tiled_j(mapping, t * row) for t in (1, 2, 3)]
    for mp in rows:
        mapping_from_dict(mp.to_dict(), kernel=kernel, arch=HOST)  # a valid mapping, as a file would give
    return rows, params


def _in_vectors(name: str, mapping: Mapping, params: dict) -> bool:
    """Does the model count the register tile's update in vectors along its row loop (no statement
    of it left to one lane)?"""
    model = MODELS[name]
    extents = mapping_loop_extents(KERNELS[name], mapping, params)
    row = mapping.levels[-1].order[-1]
    share = scalar_share(_statements(model, mapping), row, extents, HOST.vector.lanes("f64"), tile=True,
                         panel=panels_along(code_packs(model, mapping, extents), row))
    return share == 1.0


@pytest.mark.parametrize("sizes", SIZES)
@pytest.mark.parametrize("name", sorted(KERNELS))
def test_the_model_counts_vectors_where_the_code_prints_them(name, sizes):
    seen = set()
    for mapping in _rows(name, sizes)[0]:
        params = param_values(KERNELS[name], sizes)
        printed = "polymap_fma_f64x" in emit_c(KERNELS[name], MODELS[name], (mapping,))
        assert _in_vectors(name, mapping, params) == printed, (name, sizes, mapping.levels)
        seen.add(printed)
    if not sizes:  # MINI: the register tile's own mapping has no panel, its j-tiled variants have one
        assert seen == {False, True}


def test_at_mini_packable_alone_would_count_vectors_the_code_lacks():
    """The case the rule is for: ``A[j, k]`` is packable (a tensor only read, bare subscripts), but the
    register tile's mapping at MINI has no panel of it, and the code prints no vector."""
    kernel, model = KERNELS["syrk"], MODELS["syrk"]
    params = param_values(kernel, {})
    mapping = register_mapping(model, 0, HOST, params)
    extents = mapping_loop_extents(kernel, mapping, params)
    reads = [r for c in _statements(model, mapping) for r in ir.subexpressions(c.stmt.value)
             if isinstance(r, ir.Ref) and r.tensor == "A"]
    assert any(packable(r, {"C"}) for r in reads)
    assert code_packs(model, mapping, extents) == {}
    assert "polymap_fma_f64x" not in emit_c(kernel, model, (mapping,))
    ex = execution(model, mapping, HOST, extents)
    assert ex.waste > 7  # the update in one lane of 8 (with the edge's slots)
    assert "strides run one lane" in ex.why


@pytest.mark.parametrize("sizes", SIZES)
@pytest.mark.parametrize("name", sorted(KERNELS))
def test_batch_equals_one_by_one_with_and_without_panels(name, sizes):
    rows, params = _rows(name, sizes)
    kernel, model = KERNELS[name], MODELS[name]
    template = rows[0]
    extents = mapping_loop_extents(kernel, template, params)
    eff, declared = batch_arrays(rows, extents)
    units, slowdown = batch_execution(model, template, HOST, extents, eff, declared)
    for b, mp in enumerate(rows):
        ex = execution(model, mp, HOST, extents)
        assert int(units[b]) == ex.units
        assert float(slowdown[b]) == pytest.approx(ex.slowdown, rel=1e-12), (b, ex.why)


def _every_row_counted(model, space, budget, objective, copies=True):
    """The ranking with every row's copies counted (what ``_rank_fast`` gave before it counted them
    lazily; none with ``copies`` False): the candidates sorted by (key, tie-breaker, order found)."""
    from polymap.passes.counting.cost_model import rank_key
    from polymap.passes.counting.fastcount import evaluator_for
    from polymap.passes.search.space import candidate_tiles

    scored = []
    for template in space.structures():
        tiles = candidate_tiles(space, template, budget)
        if not len(tiles):
            continue
        batch = evaluator_for(model, template, space.params).evaluate(tiles)
        energy, cycles, ok = space.batch_objective(batch, template, tiles, copies=copies)
        for b in np.flatnonzero(ok):
            scored.append((*rank_key(objective, float(energy[b]), float(cycles[b])), len(scored), template, tiles[b]))
    scored.sort(key=lambda s: s[:3])
    return [space.with_tiles(t, row) for *_, t, row in scored]


@pytest.mark.parametrize("path, sizes", [
    ("examples/gemm.loop", {}),  # gemm's panels: A's and B's, copied per tile
    ("examples/gemm.loop", {"M": 101, "N": 67, "K": 203}),  # sizes no tile divides
    ("examples/gemm_tiled.loop", {}),  # where the copies moved the pick (design.md)
])
@pytest.mark.parametrize("objective", ["CYCLES", "ENERGY"])
def test_the_lazy_count_of_the_copies_ranks_as_counting_every_row(path, sizes, objective, monkeypatch):
    """``_rank_fast`` counts the panels' copies only for rows whose lower bound may put them first: the
    whole order it gives is the one every row counted gives, with small chunks (many rounds of the
    bound against the counted keys) and the search's own."""
    from polymap.passes.counting.cost_model import Objective
    from polymap.passes.search import search as search_module
    from polymap.passes.search.space import SearchSpace

    kernel = load_program(ROOT / path).kernels[0]
    model = build_model(kernel)
    params = param_values(kernel, sizes)
    space = SearchSpace.build(model, 0, HOST, params)
    want = _every_row_counted(model, space, 200, Objective[objective])
    if objective == "CYCLES" and path == "examples/gemm.loop":  # the copies move rows (else the test shows nothing)
        assert _every_row_counted(model, space, 200, Objective[objective], copies=False) != want
    for chunk in (search_module.COPY_CHUNK, 5):
        monkeypatch.setattr(search_module, "COPY_CHUNK", chunk)
        got = list(search_module._rank_fast(model, space, 200, Objective[objective]))
        assert got == want
