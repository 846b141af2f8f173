"""Stays walked by points equal the ISL relations' counts (issue 9: heat-3d's counts by points).

:func:`~polymap.passes.counting.counting._stays_by_points` gives the counts by points
(``entering_count``, ``fill_count``, ``writebacks``) from the ``(residency, element)`` pairs; the
relations (``|held| - |held & prev|``, ``|write_first| - |write_first & prev|``,
``|_writeback_ends|``) counted by barvinok give the same numbers, level by level and tensor by
tensor, on hypothesis-generated schedule mappings (skews, shifts, fusions, wavefronts, spatial
loops, tiles that divide nothing), and the whole counts equal the step-by-step simulation.
"""
from __future__ import annotations

from hypothesis import HealthCheck, assume, given, settings

from polymap.passes.counting import counting
from polymap.passes.counting.counting import _card, _card_by_points, _Counter, count_mapping
from polymap.passes.counting.residency import residencies
from polymap.errors import MappingError
from polymap.poly import to_int
from simulator import counts_as_dict, simulate
from test_schedule_properties import KERNELS, MODELS, _mapping, arch_of, cases


def _numbers(counter: _Counter, res, params) -> dict:
    out = {}
    for lr in res.levels[1:]:
        for t in lr.tensors:
            key = (lr.level, t.tensor)
            wb = counter.writebacks(lr.level, t.tensor)
            out[key] = (to_int(counter.entering_count(lr.level, t.tensor), params),
                        to_int(counter.fill_count(lr.level, t.tensor), params),
                        None if wb is None else to_int(wb, params))
    return out


def _drawn(name, data):
    """The drawn mapping; one the format refuses (MappingError) is no case (any other error fails)."""
    try:
        return _mapping(name, data)
    except MappingError:
        assume(False)


@settings(max_examples=60, deadline=None, suppress_health_check=list(HealthCheck))
@given(cases(spatial=True))
def test_stays_by_points_equal_the_relations_counts(case):
    name, params, data = case
    mapping = _drawn(name, data)
    model = MODELS[name]
    res = residencies(model, mapping, params=params)
    by_points = _Counter(model, mapping, res, params, False)
    by_points.card = _card_by_points
    by_relations = _Counter(model, mapping, res, params, False)
    by_relations.card = _card
    assert _numbers(by_points, res, params) == _numbers(by_relations, res, params), data


@settings(max_examples=20, deadline=None, suppress_health_check=list(HealthCheck))
@given(cases(spatial=True))
def test_counts_by_points_equal_the_simulation(case):
    """Every mapping counted by points (not only those that move statements), against brute force."""
    name, params, data = case
    mapping = _drawn(name, data)
    original = counting.enumerable
    counting.enumerable = lambda *_: True
    try:
        counts = counting.isl_count_mapping(MODELS[name], mapping, arch_of(len(data["levels"])), params=params)
    finally:
        counting.enumerable = original
    assert counts_as_dict(counts) == simulate(KERNELS[name], mapping, params), data
    assert counts_as_dict(counts) == counts_as_dict(count_mapping(MODELS[name], mapping,
                                                                  arch_of(len(data["levels"])), params=params))


@settings(max_examples=60, deadline=None, suppress_health_check=list(HealthCheck))
@given(cases(spatial=True))
def test_levels_with_the_same_residencies_count_the_same(case):
    """A level whose residencies are the outer level's (``_same_residencies_as``) takes its stays, fills
    and writebacks from there: the same numbers as counting each level on its own, by both routes."""
    name, params, data = case
    mapping = _drawn(name, data)
    model = MODELS[name]
    res = residencies(model, mapping, params=params)
    for card in (_card_by_points, _card):
        shared = _Counter(model, mapping, res, params, False)
        shared.card = card
        alone = _Counter(model, mapping, res, params, False)
        alone.card = card
        alone._group = list(range(len(res.levels)))
        assert _numbers(shared, res, params) == _numbers(alone, res, params), data


def test_original_order_levels_are_one_and_counted_once():
    """heat-3d's original order: tiles of 1 below the backing store, every inner level the same
    residencies (each adds the phases of the loops one sweep lacks); counted once, the counts are
    the simulation's."""
    from pathlib import Path

    import polymap
    from polymap.machine.presets import load_architecture
    from polymap.passes.search import choice

    kernel = polymap.load(Path(__file__).resolve().parent.parent / "examples/polybench/heat-3d.loop").kernels[0]
    kernel, _ = choice.kernel_to_map(kernel)
    model = choice.build_model(kernel)
    arch = load_architecture("host")
    mapping = choice.original_mapping(kernel, 0, arch)
    params = {"TSTEPS": 2, "N": 5}
    res = residencies(model, mapping, params=params)
    counter = _Counter(model, mapping, res, params, False)
    assert len({lr.depth for lr in res.levels[1:]}) > 1  # the relations differ in their dimensions
    assert counter._group[1:] == [1] * (len(res.levels) - 1)
    counts = counting.isl_count_mapping(model, mapping, arch, params=params)
    assert counts_as_dict(counts) == simulate(kernel, mapping, params)


def points(s) -> list[tuple[int, ...]]:
    """The integer points of a bounded set, as tuples (walked by isl, one at a time)."""
    from polymap.islcheck import isl

    n = s.dim(isl.dim_type.set)
    out: list[tuple[int, ...]] = []
    s.foreach_point(lambda p: out.append(tuple(p.get_coordinate_val(isl.dim_type.set, j).to_python()
                                               for j in range(n))))
    return out


def test_same_residencies_as_is_an_injective_projection_by_brute_force():
    """``_same_residencies_as`` against its definition, walked point by point: level ``l``'s residency
    points projected onto level ``l - 1``'s dimensions are all distinct (and no spatial dimension lies
    between). Equal depth is the case with nothing to project, which the function answers from the
    depths alone. heat-3d's isl candidate: L1 and L2 both 2 x 16 x 16, and LLC and L2 of different
    depths; its original order: every level deeper than the one outside it, the same residencies
    below DRAM."""
    from pathlib import Path

    import polymap
    from polymap.machine.presets import load_architecture
    from polymap.passes.search import choice
    from polymap.passes.search.isl_schedule import isl_proposals

    kernel = polymap.load(Path(__file__).resolve().parent.parent / "examples/polybench/heat-3d.loop").kernels[0]
    kernel, _ = choice.kernel_to_map(kernel)
    model = choice.build_model(kernel)
    arch = load_architecture("host")
    params = {"TSTEPS": 3, "N": 6}
    (_, tiled), *_ = isl_proposals(model, 0, arch, params, to_count=False)[0]
    seen_equal = seen_unequal = False
    for mapping in (tiled, choice.original_mapping(kernel, 0, arch)):
        res = residencies(model, mapping, params=params)
        for l in range(1, len(res.levels)):
            a, b = res.levels[l - 1], res.levels[l]
            pts = points(b.points)
            expected = (a.depth <= b.depth and not any(d.spatial for d in res.dims[a.depth:b.depth])
                        and len({p[:a.depth] for p in pts}) == len(pts))
            assert counting._same_residencies_as(res, l - 1, l) == expected, (l, a.depth, b.depth)
            seen_equal |= a.depth == b.depth
            seen_unequal |= a.depth < b.depth
    assert seen_equal and seen_unequal  # both cases were walked
    depths = [lr.depth for lr in residencies(model, tiled, params=params).levels]
    assert any(depths[l] == depths[l - 1] for l in range(2, len(depths)))  # a shared pair is there to check
