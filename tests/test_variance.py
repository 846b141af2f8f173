"""Pessimistic cycles: each bound against a brute-force simulation, and the cost report's fields."""
from __future__ import annotations

import json
from math import ceil
from pathlib import Path

from hypothesis import given, settings, strategies as st

from polymap.cli import main
from polymap.driver import param_values, parse
from polymap.machine.presets import load_architecture
from polymap.mapping.files import mapping_from_dict
from polymap.mapping.model import loop_extents
from polymap.passes.counting.variance import largest_share, row_sets, variance, vector_slots

EXAMPLES = Path(__file__).parent.parent / "examples"


@settings(max_examples=200, deadline=None)
@given(st.integers(1, 500), st.integers(1, 64), st.sampled_from([1, 4, 8, 16]))
def test_vector_slots_simulated(extent, tile, lanes):
    slots = 0
    for start in range(0, extent, tile):  # every tile, the last one partial, in vectors of `lanes`
        n = min(tile, extent - start)
        slots += ceil(n / lanes) * lanes
    assert vector_slots(extent, tile, lanes) == slots


@settings(max_examples=200, deadline=None)
@given(st.integers(1, 500), st.integers(1, 64))
def test_largest_share_simulated(extent, tile):
    shares = [min(tile, extent - start) for start in range(0, extent, tile)]  # one tile per unit
    assert largest_share(extent, tile) == max(shares)


@settings(max_examples=200, deadline=None)
@given(st.integers(1, 64).map(lambda k: 64 * k), st.sampled_from([16, 64, 96, 128]))
def test_row_sets_simulated(stride, sets):
    line = 64
    hit = {(r * stride // line) % sets for r in range(4 * sets)}
    assert row_sets(stride, sets, line) == len(hit)


ROW = parse("""
kernel rowsum(M = 100, N = 100) {
  in  A[M, N] : f32
  out s[M] : f32
  for i in 0..M {
    init: s[i] = 0
    for j in 0..N { acc: s[i] += A[i, j] }
  }
}
""").kernels[0]


def test_variance_names_the_binding_bound():
    host = load_architecture("host")
    values = param_values(ROW, {"M": 100, "N": 100})
    levels = [{"level": "DRAM", "order": ["i", "j"]},
              {"level": host.levels[1].name, "order": ["i", "j"], "spatial": ["i"]},
              {"level": host.levels[2].name, "tile": {"i": 64}}]
    levels += [{"level": lv.name} for lv in host.levels[3:-1]]
    levels += [{"level": "RF", "tile": {"i": 1, "j": 32}}]
    mapping = mapping_from_dict({"kernel": "rowsum", "levels": levels}, kernel=ROW, arch=host)
    extents = loop_extents(ROW, 0, values)
    terms = (("compute", 1000.0), ("DRAM", 10.0))
    v = variance(ROW, mapping, host, terms, extents, values)
    lanes = host.compute.instances // host.levels[-1].instances
    vec = vector_slots(100, 32, lanes) / 100  # j: 100 in tiles of 32
    share = 64 * 2 / 100  # i: 100 over 2 units in tiles of 64
    assert v.binding == "compute"
    assert abs(v.pessimistic_cycles - 1000.0 * vec * share) < 1e-9
    assert abs(v.derating - vec * share) < 1e-12
    kinds = {b.kind for b in v.bounds}
    assert {"partial vectors", "thread share"} <= kinds
    # a term that needs no factor never binds over a larger derated one
    assert variance(ROW, mapping, host, (("compute", 1.0), ("DRAM", 10.0)), extents, values).binding == "DRAM"


def test_cost_report_has_nominal_and_pessimistic_cycles(capsys):
    status = main(["cost", str(EXAMPLES / "gemm.loop"), "--arch", "toy", "--mapping", str(EXAMPLES / "gemm_toy.yaml"),
                   "-D", "M=60", "-D", "N=60", "-D", "K=64", "--json"])
    assert status == 0
    doc = json.loads(capsys.readouterr().out)
    p = doc["pessimistic"]
    assert p["cycles_nominal"] == doc["cycles"]
    assert doc["cycles_pessimistic"] == p["cycles_pessimistic"] >= doc["cycles"]
    assert p["binds"] in {"compute", "DRAM", "GLB"} and p["derating"] >= 1
