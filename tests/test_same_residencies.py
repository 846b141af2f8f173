"""Mappings with the same residencies count the same (issue 9: heat-3d's isl candidates counted once).

:func:`~polymap.passes.counting.residency.same_residencies` lets compile's ranking at reduced sizes
count one of two isl candidates and give the other its counts
(``choice._rank_beyond_budget``). Checked here: when it says yes, both mappings' own exact counts
are equal and equal the step-by-step simulation (hypothesis-generated schedule mappings with one
tile changed), it says no where the tiles cut the loops differently, and a candidate checked and
costed with another's counts (``_evaluate(alike=...)``) gets the report its own counts give.
"""
from __future__ import annotations

import dataclasses
from pathlib import Path

from hypothesis import HealthCheck, assume, event, given, settings
from hypothesis import strategies as st

import polymap
from polymap.errors import MappingError
from polymap.machine.presets import load_architecture
from polymap.mapping.model import Mapping
from polymap.passes.counting.counting import count_mapping
from polymap.passes.counting.residency import residency_maps, same_residencies
from polymap.passes.search import choice
from polymap.passes.search.isl_schedule import isl_proposals
from simulator import counts_as_dict, simulate
from test_schedule_properties import KERNELS, MODELS, _mapping, arch_of, cases

ROOT = Path(__file__).resolve().parent.parent


def _retiled(mapping: Mapping, level: int, loop: int, tile: int | None) -> Mapping:
    levels = list(mapping.levels)
    tiles = list(levels[level].tile)
    tiles[loop] = tile
    levels[level] = dataclasses.replace(levels[level], tile=tuple(tiles))
    return dataclasses.replace(mapping, levels=tuple(levels))


@settings(max_examples=60, deadline=None, suppress_health_check=list(HealthCheck))
@given(cases(spatial=True), st.data())
def test_same_residencies_count_the_same(case, data):
    """Whenever two mappings have the same residencies, their exact counts are equal, and equal the
    simulation of either (a tile made larger than the loop, whole, or another size)."""
    name, params, raw = case
    try:
        a = _mapping(name, raw)
    except MappingError:  # a drawn mapping the format refuses: no case (any other error fails)
        assume(False)
    level = data.draw(st.integers(0, len(a.levels) - 1))
    loop = data.draw(st.integers(0, len(a.loops) - 1))
    tile = data.draw(st.sampled_from([None, 1, 2, 3, 64]))
    try:
        b = _retiled(a, level, loop, tile)
    except ValueError:  # a tile the mapping's invariants refuse: no case (any other error fails)
        assume(False)
    model, kernel, arch = MODELS[name], KERNELS[name], arch_of(len(a.levels))
    same = same_residencies(model, a, b, params)
    # as compile's ranking asks it (choice._rank_beyond_budget): each mapping's maps built once, then compared
    built = {m: residency_maps(model, m, params) for m in (a, b)}
    assert same_residencies(model, a, b, params, maps_of=built.__getitem__) == same
    event(f"same residencies: {same}" + (" (other mappings)" if a != b else ""))
    assert same_residencies(model, a, a, params)
    if same:
        counted = counts_as_dict(count_mapping(model, b, arch, params=params))
        assert counted == counts_as_dict(count_mapping(model, a, arch, params=params)), raw
        assert counted == simulate(kernel, b, params), raw


def _heat(params: dict[str, int]):
    kernel = polymap.load(ROOT / "examples" / "polybench" / "heat-3d.loop").kernels[0]
    kernel, _ = choice.kernel_to_map(kernel)
    model = choice.build_model(kernel)
    arch = load_architecture("host")
    scheduled, gave_up, _ = isl_proposals(model, 0, arch, params, to_count=False)
    assert gave_up is None and len(scheduled) == 2
    return kernel, model, arch, scheduled


def test_heat3d_candidates_alike_where_the_skewed_row_is_shorter_than_a_tile():
    """heat-3d's 2x16x16xall and 2x16x16x128: at N=6 the skewed ``2t + k`` spans less than 128, the
    residencies are the same, and a candidate costed with the other's counts gets its own report."""
    params = {"TSTEPS": 3, "N": 6}
    kernel, model, arch, ((s0, m0), (s1, m1)) = _heat(params)
    assert s0.startswith("isl schedule 2x16x16xall") and s1.startswith("isl schedule 2x16x16x128")
    assert m0 != m1
    assert same_residencies(model, m0, m1, params)
    first = choice._evaluate(model, s0, m0, m0, arch, params, fit=True, per_call=False)
    assert first.legal and first.report is not None
    alike = choice._evaluate(model, s1, m1, m1, arch, params, fit=True, per_call=False,
                             alike=choice._counts_of(first, m0))
    own = choice._evaluate(model, s1, m1, m1, arch, params, fit=True, per_call=False)
    assert alike == own
    assert alike.report.counts.mapping == m1  # its own mapping, not the one counted first
    assert counts_as_dict(own.report.counts) == simulate(kernel, m1, params)


def test_heat3d_tiles_that_cut_a_row_differ():
    """A tile of 4 cuts the skewed row at N=6, a whole row does not: not the same residencies (and
    not the same counts: a level holds less at once)."""
    params = {"TSTEPS": 2, "N": 6}
    kernel, model, arch, ((_, m0), _) = _heat(params)
    inner = len(m0.loops) - 1  # the skewed innermost loop (2t + k), whole in L2 and L1
    cut = m0
    for level in (2, 3):
        assert m0.levels[level].tile[inner] is None
        cut = _retiled(cut, level, inner, 4)
    assert not same_residencies(model, m0, cut, params)
    whole = counts_as_dict(count_mapping(model, m0, arch, params=params))
    assert whole != counts_as_dict(count_mapping(model, cut, arch, params=params))
    assert whole == simulate(kernel, m0, params)


def test_counts_of_a_candidate_that_was_bypassed_are_not_shared():
    """Counts of a mapping whose levels ``fit_keeps`` bypassed are another mapping's: not passed on."""
    params = {"TSTEPS": 2, "N": 4}
    _, model, arch, ((s0, m0), _) = _heat(params)
    first = choice._evaluate(model, s0, m0, m0, arch, params, fit=True, per_call=False)
    assert choice._counts_of(first, m0) is first.report.counts
    kept = dataclasses.replace(first, mapping=dataclasses.replace(m0, levels=tuple(
        dataclasses.replace(lv, keep=()) for lv in m0.levels)))
    assert choice._counts_of(kept, m0) is None
