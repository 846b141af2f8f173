"""The team's start and barriers in the cycles: a time no term hides (cost_model.level_term).

Counts from the brute-force simulator (tests/simulator.py), the team's costs set in the architecture
file, so the expected cycles are written from those two alone, not read off the model."""
from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest

from simulator import simulate

from gemm_text import GEMM_ACC as GEMM_ACC_TEXT
from polymap.driver import param_values, parse
from polymap.machine.arch import VectorUnit
from polymap.machine.presets import load_architecture
from polymap.mapping.files import mapping_from_dict
from polymap.mapping.model import loop_extents
from polymap.passes.counting.cost_model import array_cost, evaluate, mapping_execution
from polymap.passes.counting.counting import count_mapping
from polymap.passes.counting.execution import batch_execution, effective_tiles
from polymap.poly import build_model

# correlation's mean nest without its initialisation: every element of data read once, whatever the order
COLSUM = parse("""
kernel colsum(M = 96, N = 40) {
  in    data[N, M] : f64
  inout mean[M]    : f64
  for j in 0..M, i in 0..N {
    acc: mean[j] += data[i, j]
  }
}
""").kernels[0]
MODEL = build_model(COLSUM)
START, BARRIER = 12_345.0, 678.0


def arch(dram_bandwidth: float):
    """``host`` fixed to 2 cores x AVX2 (as test_execution's), the team's costs given, DRAM's bandwidth
    ``dram_bandwidth`` elements a cycle."""
    h = load_architecture("host")
    levels = tuple(replace(lv, instances=2) if k >= 2 else lv for k, lv in enumerate(h.levels))
    levels = (replace(levels[0], bandwidth=dram_bandwidth),) + levels[1:]
    compute = replace(h.compute, instances=16, team_start_cycles=START, barrier_cycles=BARRIER)
    return replace(h, levels=levels, compute=compute, vector=VectorUnit("avx2", 32, 16, True))


def mapping(a, *, spatial: bool):
    names = [lv.name for lv in a.levels]
    levels = [{"level": names[0], "order": ["j", "i"]},
              {"level": names[1], "order": ["j", "i"], "spatial": ["j"] if spatial else []},
              {"level": names[2], "tile": {"j": 48}, "order": ["j", "i"]},
              {"level": names[3], "tile": {"j": 16}, "order": ["j", "i"]},
              {"level": names[4], "tile": {"j": 16, "i": 1}, "order": ["i", "j"]}]
    return mapping_from_dict({"kernel": "colsum", "levels": levels}, kernel=COLSUM, arch=a)


def dram_crossing(sim: dict) -> int:
    return sum(t["reads"] + t["updates"] for t in sim["levels"][0]["tensors"].values())


@pytest.mark.parametrize("bandwidth", [1e-3, 1e3])
def test_the_team_start_is_paid_on_top_of_whatever_binds(bandwidth):
    """Memory-bound (DRAM at a thousandth of an element a cycle) and compute-bound: the two-thread
    mapping's cycles are the binding term's plus the team's start (one execution: no barrier), the
    one-thread mapping's the binding term alone. Before session 29 the start sat inside the compute
    term only, so a memory-bound two-thread nest had it for free and won on energy (correlation and
    covariance's mean nests at PolyBench LARGE, measured slower on two threads)."""
    a = arch(bandwidth)
    values = param_values(COLSUM, {})
    ext = loop_extents(COLSUM, 0, values)
    for spatial, threads in ((True, 2), (False, 1)):
        mp = mapping(a, spatial=spatial)
        ex = mapping_execution(MODEL, mp, a, ext)
        assert (ex.threads, ex.syncs) == (threads, 1 if threads > 1 else 0)
        sim = simulate(COLSUM, mp, values)
        report = evaluate(count_mapping(MODEL, mp, a, params=values), a, execution=ex)
        team = START if threads > 1 else 0.0
        memory = dram_crossing(sim) / bandwidth
        work = dict(report.cycle_terms)["compute"] - team
        assert work > 0
        assert report.cycles == pytest.approx(max(memory, work) + team, rel=1e-12)
        assert report.bottleneck == ("DRAM" if memory > work else "compute")


def test_batch_form_equals_one_by_one():
    """The search's batch ranking (batch_execution's team array into array_cost) gives evaluate's cycles."""
    values = param_values(COLSUM, {})
    ext = loop_extents(COLSUM, 0, values)
    for bandwidth in (1e-3, 1e3):
        a = arch(bandwidth)
        for spatial in (True, False):
            mp = mapping(a, spatial=spatial)
            counts = count_mapping(MODEL, mp, a, params=values)
            one = evaluate(counts, a, execution=mapping_execution(MODEL, mp, a, ext))
            eff = np.array([[[e[x] for x in mp.loops] for e in effective_tiles(mp, ext)]], dtype=np.int64)
            units, waste, team = batch_execution(MODEL, mp, a, ext, eff, team=True)
            sim = simulate(COLSUM, mp, values)
            _, cycles = array_cost(a, sim["instances"], [lv["tensors"] for lv in sim["levels"]], units, waste,
                                   team=team)
            assert float(np.asarray(cycles).ravel()[0]) == pytest.approx(one.cycles, rel=1e-12)
            assert float(team[0]) == (START if spatial else 0.0)


GEMM_ACC = parse(GEMM_ACC_TEXT % {"n": 256}).kernels[0]


def gemm_mapping(a, l2_order, tiles_l2):
    names = [lv.name for lv in a.levels]
    levels = [{"level": names[0], "order": ["i", "j", "k"]},
              {"level": names[1], "order": list(l2_order)},
              {"level": names[2], "tile": tiles_l2, "order": ["i", "j", "k"]},
              {"level": names[3], "tile": {"i": 48, "j": 16, "k": 64}, "order": ["i", "j", "k"]},
              {"level": names[4], "tile": {"i": 6, "j": 16, "k": 1}, "order": ["i", "j"]}]
    return mapping_from_dict({"kernel": "gemm", "levels": levels}, kernel=GEMM_ACC, arch=a)


def test_the_barriers_charged_are_the_ones_the_c_has():
    """Nothing the code prints around the shared-out loop: one ``omp parallel for`` (its join is the
    start's: no barrier charged). A printed k loop outside i, of 4 trips or of one (a tile of 256 in a
    loop of 256: the code prints it, the sizes being its parameters): an ``omp parallel`` around it
    with an ``omp for`` inside, without ``nowait``, so each execution ends in a barrier and the
    region's join follows the last: ``executions`` barriers charged (region_barriers), in the batch
    as one by one."""
    import re

    from polymap.codegen.c.emitter import emit_c

    a = arch(1e3)
    values = param_values(GEMM_ACC, {})
    ext = loop_extents(GEMM_ACC, 0, values)
    model = build_model(GEMM_ACC)
    cases = ((("i", "j", "k"), {}, 1, False), (("k", "i", "j"), {"k": 64}, 4, True),
             (("k", "i", "j"), {"k": 256}, 1, True))
    for l2_order, tiles_l2, executions, region in cases:
        mp = gemm_mapping(a, l2_order, tiles_l2)
        ex = mapping_execution(model, mp, a, ext)
        assert (ex.threads, ex.syncs, ex.region) == (2, executions, region)
        assert ex.sync_cycles == START + (executions if region else 0) * BARRIER
        eff = np.array([[[e[x] for x in mp.loops] for e in effective_tiles(mp, ext)]], dtype=np.int64)
        _, _, team = batch_execution(model, mp, a, ext, eff, team=True)
        assert float(team[0]) == ex.sync_cycles
        pragmas = re.findall(r"#pragma omp [^\n]*", emit_c(GEMM_ACC, model, (mp,), params=values, threads=2))
        parallel = [p for p in pragmas if "simd" not in p]
        assert not any("nowait" in p for p in parallel)
        if not region:
            assert len(parallel) == 1 and parallel[0].startswith("#pragma omp parallel for"), parallel
        else:
            assert parallel[0].strip() == "#pragma omp parallel", parallel
            assert sum(p.startswith("#pragma omp for") for p in parallel) == 1, parallel
        assert f"{executions} execution(s)" in ex.why and ("omp for in a region" in ex.why) == region


def test_no_team_without_openmp():
    """An architecture without a vector unit (an accelerator: spatial units, no OpenMP threads) charges
    no team, in the batch as one by one."""
    a = replace(arch(1e-3), vector=None)
    values = param_values(COLSUM, {})
    ext = loop_extents(COLSUM, 0, values)
    mp = mapping(a, spatial=True)
    ex = mapping_execution(MODEL, mp, a, ext)
    assert ex.sync_cycles == 0.0
    eff = np.array([[[e[x] for x in mp.loops] for e in effective_tiles(mp, ext)]], dtype=np.int64)
    units, _, team = batch_execution(MODEL, mp, a, ext, eff, team=True)
    assert int(units[0]) == ex.units and float(team[0]) == 0.0


def test_calibration_takes_the_team_after_the_max():
    """Kernels whose memory term binds and that start a team: a machine whose memory is 3x slower than
    the model says and whose team costs what it is charged. The team is added after the max (no term
    hides it), so the fit finds 3 for that level and predicts every time exactly; a fit that puts the
    team in the compute term alone (until session 29) cannot, since there it never binds."""
    from polymap.machine.derating import fit_derating, predict

    work = np.array([1.0, 0.5, 2.0, 0.2, 0.4])
    memory = np.array([2.0, 3.0, 1.0, 4.0, 0.5])
    team = np.array([0.0, 1.0, 0.5, 2.0, 0.0])
    terms = np.stack([work, memory], axis=1)
    measured = np.maximum(work, 3 * memory) + team
    fitted = fit_derating(terms, measured, offsets=team, ridge=0.0)
    assert fitted.factors[1] == pytest.approx(3.0, rel=1e-6)
    assert predict(terms, fitted.factors, team) == pytest.approx(measured, rel=1e-6)
    inside = fit_derating(np.stack([work + team, memory], axis=1), measured, ridge=0.0)
    assert inside.error_after > 0.05


def test_the_copies_stay_on_the_compute_term_and_the_team_after_the_max():
    """Offsets in pairs (after the max, on the compute term): the team's cycles every term carries, the
    panels' copies the compute term alone. A machine whose memory is 2x slower than modelled: the fit
    finds 2 and predicts every time; the copies, had they gone after the max too, would have been
    added to memory-bound rows that do not pay them."""
    from polymap.machine.derating import fit_derating, predict

    work = np.array([1.0, 0.5, 2.0, 0.2, 0.4, 3.0])
    memory = np.array([2.0, 3.0, 0.5, 4.0, 0.5, 0.2])
    team = np.array([0.0, 1.0, 0.5, 2.0, 0.0, 0.3])
    copies = np.array([0.5, 0.0, 1.0, 0.3, 0.2, 0.4])
    terms = np.stack([work, memory], axis=1)
    measured = np.maximum(work + copies, 2 * memory) + team
    offsets = np.stack([team, copies], axis=1)
    fitted = fit_derating(terms, measured, offsets=offsets, ridge=0.0)
    assert fitted.factors == pytest.approx((1.0, 2.0), rel=1e-6)
    assert predict(terms, fitted.factors, offsets) == pytest.approx(measured, rel=1e-6)
    lumped = predict(terms, fitted.factors, team + copies)
    assert not np.allclose(lumped, measured)
