"""Hand-written schedule mappings of stencils, lu and attention against brute force.

The schedules are the ones a Pluto-like scheduler finds (seidel-2d
``[t, t + i, 2t + i + j]``, jacobi's two sweeps fused and skewed with the
second shifted by one, fdtd-2d's four statements aligned, lu's two ``j``
loops fused, attention fused along ``i``), tiled in the new coordinates,
some with a wavefront. Each is checked at small sizes: ``check`` equals the
brute-force legality, each witness is a real conflict whose order flips,
and the counts equal the step-by-step simulation. Illegal variants (a skew
removed, a shift dropped) must be found illegal with real witnesses.
"""
from __future__ import annotations

from pathlib import Path

import pytest

from bruteforce import brute_legal, witness_is_real
from polymap.mapping.files import mapping_from_dict
from polymap.driver import parse
from polymap.machine.arch import architecture_from_dict
from polymap.passes.counting import footprint
from polymap.passes.counting.counting import count_mapping
from polymap.passes.counting.residency import residencies
from polymap.passes.legality.legality import check_mapping
from polymap.poly import build_model
from simulator import counts_as_dict, simulate

ROOT = Path(__file__).resolve().parent.parent
ARCH = architecture_from_dict({"levels": [{"name": "L0"}, {"name": "L1"}, {"name": "L2", "instances": 4}],
                               "compute": {"instances": 4}}, source_name="<arch>")


def kernel(path: str):
    return parse((ROOT / path).read_text(), path).kernels[0]


def levels(order, tile, inner=None, wavefront=None, keep=None):
    l1 = {"level": "L1", "tile": tile, "order": list(order)}
    if wavefront:
        l1["wavefront"] = list(wavefront)
    if keep is not None:
        l1["keep"] = keep
    return [{"level": "L0", "order": list(order)}, l1,
            {"level": "L2", "tile": {x: 1 for x in order}, "order": list(inner or order)}]


J1 = {"to_b": {"t": "t", "u": "2*t + i"}, "to_a": {"t": "t", "u": "2*t + i + 1"}}
J2 = {"to_b": {"t": "t", "u": "2*t + i", "v": "2*t + j"},
      "to_a": {"t": "t", "u": "2*t + i + 1", "v": "2*t + j + 1"}}
SEIDEL = {"relax": {"t": "t", "u": "t + i", "v": "2*t + i + j"}}
HEAT = {"to_b": {"t": "t", "u": "2*t + i", "v": "2*t + j", "w": "2*t + k"},
        "to_a": {"t": "t", "u": "2*t + i + 1", "v": "2*t + j + 1", "w": "2*t + k + 1"}}
FDTD = {"ey_edge": {"t": "t", "u": "t", "v": "t + j"}, "ey_upd": {"t": "t", "u": "t + i", "v": "t + j"},
        "ex_upd": {"t": "t", "u": "t + i", "v": "t + j"}, "hz_upd": {"t": "t", "u": "t + i + 1", "v": "t + j + 1"}}
LU = {"l_div": {"i": "i", "j": "j", "k": "j"}}
ATTENTION = {  # every statement in (i, p, j, k): p orders the phases of one row
    "s_init": {"i": "i", "p": "0", "j": "j", "k": "0"}, "s_acc": {"i": "i", "p": "0", "j": "j", "k": "d"},
    "s_scale": {"i": "i", "p": "0", "j": "j", "k": "DK"}, "m_init": {"i": "i", "p": "1", "j": "0", "k": "0"},
    "m_acc": {"i": "i", "p": "2", "j": "j", "k": "0"}, "z_init": {"i": "i", "p": "3", "j": "0", "k": "0"},
    "p_exp": {"i": "i", "p": "4", "j": "j", "k": "0"}, "z_acc": {"i": "i", "p": "4", "j": "j", "k": "0"},
    "p_norm": {"i": "i", "p": "5", "j": "j", "k": "0"}, "o_init": {"i": "i", "p": "6", "j": "e", "k": "0"},
    "o_acc": {"i": "i", "p": "6", "j": "e", "k": "j + 1"}}


def _drop(schedule, statement, loop, expr):
    out = {s: dict(e) for s, e in schedule.items()}
    out[statement][loop] = expr
    return out


CASES = {
    # name: (file, params, nests, schedule, levels, legal)
    "jacobi-1d": ("examples/polybench/jacobi-1d.loop", {"TSTEPS": 3, "N": 7}, [0], J1,
                  levels("tu", {"t": 2, "u": 3}, wavefront="tu"), True),
    "jacobi-1d unshifted": ("examples/polybench/jacobi-1d.loop", {"TSTEPS": 3, "N": 7}, [0],
                            _drop(J1, "to_a", "u", "2*t + i"), levels("tu", {"t": 2, "u": 3}), False),
    "jacobi-2d": ("examples/polybench/jacobi-2d.loop", {"TSTEPS": 2, "N": 6}, [0], J2,
                  levels("tuv", {"t": 2, "u": 3, "v": 4}, inner="tvu"), True),
    "jacobi-2d unskewed": ("examples/polybench/jacobi-2d.loop", {"TSTEPS": 2, "N": 6}, [0],
                           _drop(J2, "to_a", "v", "j + 1"), levels("tuv", {"t": 2, "u": 3, "v": 4}), False),
    "seidel-2d": ("examples/polybench/seidel-2d.loop", {"TSTEPS": 2, "N": 6}, [0], SEIDEL,
                  levels("tuv", {"t": 2, "u": 2, "v": 3}, wavefront="tu"), True),
    # the points of a tile walked by diagonals u + v (isl_schedule.point_walks): legal for any tiles
    "seidel-2d points by diagonals": ("examples/polybench/seidel-2d.loop", {"TSTEPS": 3, "N": 7}, [0], SEIDEL,
                                      levels("tuv", {"t": 2, "u": 3, "v": 4}, wavefront="uv"), True),
    "seidel-2d half skew": ("examples/polybench/seidel-2d.loop", {"TSTEPS": 2, "N": 6}, [0],
                            _drop(SEIDEL, "relax", "v", "t + j"), levels("tuv", {"t": 2, "u": 2, "v": 3}), False),
    "heat-3d": ("examples/polybench/heat-3d.loop", {"TSTEPS": 2, "N": 4}, [0], HEAT,
                levels("tuvw", {"t": 1, "u": 2, "v": 3}, wavefront="tu"), True),
    "fdtd-2d": ("examples/polybench/fdtd-2d.loop", {"TMAX": 2, "NX": 4, "NY": 5}, [0], FDTD,
                levels("tuv", {"t": 2, "u": 3, "v": 2}, wavefront="uv"), True),
    "fdtd-2d hz unshifted": ("examples/polybench/fdtd-2d.loop", {"TMAX": 2, "NX": 4, "NY": 5}, [0],
                             _drop(FDTD, "hz_upd", "u", "t + i"), levels("tuv", {"t": 2, "u": 3, "v": 2}), False),
    "lu": ("examples/polybench/lu.loop", {"N": 6}, [0], LU, levels("ijk", {"i": 2, "j": 4, "k": 3}), True),
    "lu k outside j": ("examples/polybench/lu.loop", {"N": 6}, [0], LU,
                       levels("kji", {"i": 2, "j": 4, "k": 3}), True),  # every distance is >= 0
    "lu division first": ("examples/polybench/lu.loop", {"N": 6}, [0], _drop(LU, "l_div", "k", "0"),
                          levels("ijk", {"i": 2, "j": 4, "k": 3}), False),
    "attention": ("examples/attention.loop", {"N": 4, "DK": 2, "DV": 3}, [0, 1, 2], ATTENTION,
                  levels("ipjk", {"i": 1}, keep=["S", "mx", "den"]), True),
    "attention softmax early": ("examples/attention.loop", {"N": 4, "DK": 2, "DV": 3}, [0, 1, 2],
                                _drop(ATTENTION, "m_acc", "p", "0"),
                                levels("ipjk", {"i": 1}), False),
}


def _case(name):
    path, params, nests, schedule, lv, legal = CASES[name]
    k = kernel(path)
    m = mapping_from_dict({"nests": nests, "schedule": schedule, "levels": lv}, kernel=k, arch=ARCH)
    return k, m, params, legal


@pytest.mark.parametrize("name", sorted(CASES))
def test_check_equals_brute_force(name):
    k, m, params, expected = _case(name)
    verdict = check_mapping(build_model(k), m, params=params)
    legal, *_ = brute_legal(k, m, params)
    assert legal == expected
    assert verdict.legal == legal, [v.reason for v in verdict.violations]
    for v in verdict.violations:
        assert witness_is_real(k, m, params, v.to_json()), v.reason
        assert v.reason and "(" in v.reason  # a sentence naming instances in the original iterators


@pytest.mark.parametrize("name", [n for n in sorted(CASES) if CASES[n][5]])
def test_counts_equal_simulation(name):
    k, m, params, _ = _case(name)
    counts = count_mapping(build_model(k), m, ARCH, params=params)
    assert counts_as_dict(counts) == simulate(k, m, params)


@pytest.mark.parametrize("name", ["jacobi-1d", "seidel-2d", "fdtd-2d", "attention"])
def test_footprints_by_points_equal_barvinok(name):
    """The two ways of maximising a level's footprint (walking the pairs at small sizes, barvinok's
    count and bound beyond) give the same numbers, level by level."""
    k, m, params, _ = _case(name)
    model = build_model(k)
    assert footprint.enumerable(model, m, params)
    res = residencies(model, m, params=params)
    for lr in res.levels[1:]:
        assert footprint.level_footprint(model, lr, params, by_points=True) == \
            footprint.level_footprint(model, lr, params)


@pytest.mark.parametrize("name", ["jacobi-1d", "seidel-2d", "fdtd-2d"])
def test_the_walk_by_points_is_bounded_by_its_pairs_not_its_instances(name, monkeypatch):
    """What enumeration walks is the ``(residency, element)`` pairs: at the innermost level at least as
    many as the instances (one residency each) and up to their accesses. With the limit between the
    instances and the innermost level's pairs (counted by barvinok), the walk is refused; before,
    only the instances were held to it (jacobi-2d's wavefronts walked minutes per candidate)."""
    k, m, params, _ = _case(name)
    model = build_model(k)
    res = residencies(model, m, params=params)
    inner = res.levels[-1]
    pairs = sum(footprint.to_int(t.held.wrap().card(), params) if t.held.dim(footprint.isl.dim_type.param)
                else footprint.to_int(t.held.wrap().card()) for t in inner.tensors)
    instances = sum(footprint.to_int(footprint.count(st.domain), params) for st in model.statements)
    assert instances < pairs
    monkeypatch.setattr(footprint, "ENUMERATION_LIMIT", (instances + pairs) // 2)
    assert not footprint.enumerable(model, m, params)
    monkeypatch.setattr(footprint, "ENUMERATION_LIMIT", 10 * pairs)
    assert footprint.enumerable(model, m, params)


def test_fused_attention_keeps_score_rows_in_the_buffer():
    """Fused along i, S is born and consumed inside one residency of L1: it is never read from L0."""
    k, m, params, _ = _case("attention")
    counts = count_mapping(build_model(k), m, ARCH, params=params)
    s0 = counts.level("L0").tensor("S")
    s1 = counts.level("L1").tensor("S")
    assert s0.reads == 0 and s1.fills == 0
    assert counts.level("L1").footprint >= params["N"]  # one row of S at once


@pytest.mark.parametrize("name", ["jacobi-1d", "fdtd-2d"])
def test_barvinok_counts_of_schedules_equal_simulation(name, monkeypatch):
    """Above the enumeration limit the same relations are counted by barvinok: same numbers."""
    monkeypatch.setattr(footprint, "ENUMERATION_LIMIT", 0)
    k, m, params, _ = _case(name)
    counts = count_mapping(build_model(k), m, ARCH, params=params)
    assert counts_as_dict(counts) == simulate(k, m, params)


@pytest.mark.parametrize("name", ["jacobi-1d", "seidel-2d", "fdtd-2d", "attention"])
def test_counts_with_the_fit_checks_walks_equal_a_fresh_count(name):
    """compile counts a candidate with the footprints and residencies its fit check walked (issue 9):
    the same counts as a count of its own, and the simulation's."""
    from polymap.passes.counting.fit import fit_check

    k, m, params, _ = _case(name)
    model = build_model(k)
    checked = fit_check(model, m, ARCH, params)
    assert checked.res is not None  # walked by the ISL path, not the fast one: the case is exercised
    reused = count_mapping(model, m, ARCH, params=params, footprints=checked.footprints, res=checked.res)
    assert reused == count_mapping(model, m, ARCH, params=params)
    assert counts_as_dict(reused) == simulate(k, m, params)
