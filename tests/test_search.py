"""Mapping search: legal, fitting, ranked by exact counts; checked against brute force over a small space."""
from __future__ import annotations

from itertools import product

from polymap.machine.arch import architecture_from_dict
from polymap.driver import parse
from polymap.mapping.model import LevelMapping, Mapping
from polymap.passes.counting.cost_model import Objective, active_compute_units, evaluate
from polymap.passes.counting.counting import isl_count_mapping
from polymap.passes.counting.fit import capacity_problems
from polymap.passes.legality.legality import check_mapping
from polymap.passes.search.search import best_mapping, explain, search_mappings
from polymap.poly import build_model

GEMM = """
kernel gemm(M = 8, N = 8, K = 8) {
  in A[M, K]
  in B[K, N]
  inout C[M, N]
  for i in 0..M, j in 0..N, k in 0..K { C[i, j] += A[i, k] * B[k, j] }
}"""

ARCH = architecture_from_dict({"levels": [
    {"name": "DRAM", "read_energy": 100, "write_energy": 100},
    {"name": "BUF", "capacity": 48, "read_energy": 2, "write_energy": 2}],
    "compute": {"instances": 1, "energy": 1}}, source_name="<test>")


def setup():
    kernel = parse(GEMM, "<test>").kernels[0]
    return kernel, build_model(kernel), {"M": 8, "N": 8, "K": 8}


def test_results_are_legal_fitting_and_sorted():
    kernel, model, params = setup()
    found = search_mappings(model, 0, ARCH, params, top=3, budget=300, objective=Objective.ENERGY)
    assert found
    energies = [r.energy_pj for _, r in found]
    assert energies == sorted(energies)
    for m, rep in found:
        assert check_mapping(model, m, params=params).legal
        assert capacity_problems(model, m, ARCH, params) == ()
        assert rep.counts == isl_count_mapping(model, m, ARCH, params=params)


def test_best_is_no_worse_than_brute_force_over_square_tiles():
    """Every single-order square tiling that fits, counted by the ISL path, costs at least the winner."""
    kernel, model, params = setup()
    best = search_mappings(model, 0, ARCH, params, top=1, budget=400, objective=Objective.ENERGY)[0][1]
    extents = dict(params.items())
    ext = {"i": 8, "j": 8, "k": 8}
    for order, side in product([("i", "j", "k"), ("k", "i", "j")], [1, 2, 4]):
        levels = (LevelMapping("DRAM", (None,) * 3, order, (), ("A", "B", "C")),
                  LevelMapping("BUF", (side,) * 3, order, (), ("A", "B", "C")))
        m = Mapping("gemm", 0, ("i", "j", "k"), levels)
        if capacity_problems(model, m, ARCH, params):
            continue
        energy = evaluate(isl_count_mapping(model, m, ARCH, params=params), ARCH,
                          active_units=active_compute_units(m, ARCH, ext)).energy_pj
        assert best.energy_pj <= energy
    assert extents


def test_energy_formula_by_hand():
    """One-level buffer, whole tiles: every element moves once each way (hand count)."""
    kernel, model, params = setup()
    levels = (LevelMapping("DRAM", (None,) * 3, ("i", "j", "k"), (), ("A", "B", "C")),
              LevelMapping("BUF", (1, 1, 8), ("i", "j", "k"), (), ("A", "B", "C")))
    m = Mapping("gemm", 0, ("i", "j", "k"), levels)
    counts = isl_count_mapping(model, m, ARCH, params=params)
    report = evaluate(counts, ARCH, active_units=active_compute_units(m, ARCH, {"i": 8, "j": 8, "k": 8}))
    energy, cycles = report.energy_pj, report.cycles
    # residencies walk (i, j) with k whole: A[i, :] stays across j (64 fills), B[:, j]
    # changes every step (512), C[i, j] once (64 fills, 64 writebacks)
    dram = (64 + 512 + 64 + 64) * 100
    # BUF: fills 640 and updates 512 at write energy; writebacks 64 and reads 3 * 512 at read energy
    buf = (640 + 512) * 2 + (64 + 3 * 512) * 2
    assert energy == dram + buf + 512
    assert cycles == 512


def test_nothing_fits_gives_none():
    kernel, model, params = setup()
    tiny = architecture_from_dict({"levels": [{"name": "DRAM"}, {"name": "R", "capacity": 2}]},
                                  source_name="<test>")
    assert best_mapping(model, 0, tiny, params) is None


def test_explain_names_every_level():
    kernel, model, params = setup()
    m, rep = search_mappings(model, 0, ARCH, params, top=1, budget=100)[0]
    text = explain(m, rep)
    assert "DRAM" in text and "BUF" in text and "intensity" in text


def test_is_legal_agrees_with_check_mapping():
    """The search's yes/no legality (cached) equals check's verdict, spatial loops included."""
    from polymap.passes.search.search import is_legal

    kernel, model, params = setup()
    loops = ("i", "j", "k")
    for order, tile, spatial in product([loops, ("k", "i", "j"), ("j", "k", "i")], [(4, 4, 4), (2, 8, 1)],
                                        [(), ("i",), ("k",)]):
        levels = (LevelMapping("DRAM", (None,) * 3, order, spatial, ("A", "B", "C")),
                  LevelMapping("BUF", tile, order, (), ("A", "B", "C")))
        m = Mapping("gemm", 0, loops, levels)
        assert is_legal(model, m) == check_mapping(model, m, params=params).legal, m
        assert is_legal(model, m) == is_legal(model, m)  # cached answer
    k_spatial = Mapping("gemm", 0, loops, (LevelMapping("DRAM", (None,) * 3, loops, ("k",), ("A", "B", "C")),
                                           LevelMapping("BUF", (4, 4, 4), loops, (), ("A", "B", "C"))))
    i_spatial = Mapping("gemm", 0, loops, (LevelMapping("DRAM", (None,) * 3, loops, ("i",), ("A", "B", "C")),
                                           LevelMapping("BUF", (4, 4, 4), loops, (), ("A", "B", "C"))))
    assert is_legal(model, k_spatial)  # k carries only the reduction: the code combines partial sums
    assert is_legal(model, i_spatial)


def test_time_budget_still_returns_a_legal_mapping():
    """With no time left the search tests only the original order, and still confirms one mapping."""
    import time

    kernel, model, params = setup()
    start = time.monotonic()
    found = search_mappings(model, 0, ARCH, params, top=3, budget=100, seconds=0.0)
    assert time.monotonic() - start < 10
    assert found and all(m.levels[0].order == ("i", "j", "k") for m, _ in found)
    for m, rep in found:
        assert check_mapping(model, m, params=params).legal
        assert rep.counts == isl_count_mapping(model, m, ARCH, params=params)


MM_INIT = """
kernel mm(M = 6, N = 7, K = 5) {
  in A[M, K]
  in B[K, N]
  out C[M, N]
  for i in 0..M {
    for j in 0..N { init: C[i, j] = 0 }
    for k in 0..K, j2 in 0..N { acc: C[i, j2] += A[i, k] * B[k, j2] }
  }
}"""


def test_outside_the_fast_class_only_the_orders_ranked_are_checked(monkeypatch):
    """Outside the fast path's class the search ranks the first few legal orders' candidates only: it asks
    the legality of no further order, and finds what it found when every order was checked."""
    from polymap.passes.search import search as search_module, space as space_module

    kernel = parse(MM_INIT, "<test>").kernels[0]
    model, params = build_model(kernel), {"M": 6, "N": 7, "K": 5}
    assert not search_module.in_fast_class(model, 0, params)
    every = space_module.SearchSpace.build(model, 0, ARCH, params)
    assert len(every.orders) > space_module.FEW_ORDERS  # else the test shows nothing
    asked = []
    legal = space_module.is_legal
    monkeypatch.setattr(space_module, "is_legal", lambda m, mp: asked.append(mp) or legal(m, mp))
    found = search_mappings(model, 0, ARCH, params, top=3, budget=50, seconds=None)
    n_orders = len(list(space_module._orders(every.loops)))
    assert len(asked) < n_orders
    monkeypatch.setattr(search_module, "in_fast_class", lambda *a: True)  # every order checked, as before
    again = search_mappings(build_model(kernel), 0, ARCH, params, top=3, budget=50, seconds=None)
    assert found and [m for m, _ in found] == [m for m, _ in again]
    assert [r for _, r in found] == [r for _, r in again]


def test_outside_the_fast_class_the_search_counts_at_most_its_work_bound(monkeypatch):
    """The ISL-path search counts no more candidates than ``isl_counts`` allows (a work count, the same on
    any machine), and the ones it counts are ranked as with a larger bound: its first ones."""
    from polymap.passes.search import search as search_module

    kernel = parse(MM_INIT, "<test>").kernels[0]
    model, params = build_model(kernel), {"M": 6, "N": 7, "K": 5}
    counted = []
    real = search_module.isl_count_mapping
    monkeypatch.setattr(search_module, "isl_count_mapping", lambda m, mp, *a, **k: counted.append(mp) or real(m, mp, *a, **k))
    every = search_mappings(model, 0, ARCH, params, top=6, budget=50, seconds=None)
    assert len(counted) > 2  # else the bound below shows nothing
    first = list(counted)
    counted.clear()
    two = search_mappings(model, 0, ARCH, params, top=6, budget=50, seconds=None, isl_counts=2)
    assert 0 < len(counted) <= 2 and counted == first[:len(counted)]
    assert {repr(m.to_dict()) for m, _ in two} <= {repr(m.to_dict()) for m, _ in every}


def test_compile_leaves_the_search_out_where_only_isl_would_count_it(budget_runs):
    """By default compile's choice runs no search on a nest outside the fast class (its ISL counts take
    minutes at real sizes) and says so; the other candidates are ranked exactly as without the search,
    and with ISL counts allowed the search runs again."""
    from polymap.passes.search.choice import ChoiceOptions, choose

    kernel = parse(MM_INIT, "<test>").kernels[0]
    params = {"M": 6, "N": 7, "K": 5}
    pieces = budget_runs
    default = choose(kernel, ARCH, params)
    assert not [w for w in pieces if w.startswith("the search of nest")]
    assert any("outside the fast counter's class" in s for s in default.nests[0].skipped)
    assert not any(c.source.startswith("search #") for c in default.nests[0].candidates)
    without = choose(kernel, ARCH, params, options=ChoiceOptions(search_evaluations=0))
    assert [(c.source, c.report) for c in default.nests[0].candidates] == \
        [(c.source, c.report) for c in without.nests[0].candidates]
    pieces.clear()
    searched = choose(kernel, ARCH, params, options=ChoiceOptions(search_isl_counts=6))
    assert [w for w in pieces if w.startswith("the search of nest")]
    assert not any("outside the fast counter's class" in s for s in searched.nests[0].skipped)
