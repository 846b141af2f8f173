"""Pessimistic cycles: each bound against a brute-force simulation, and the cost report's fields."""
from __future__ import annotations

import json
from pathlib import Path

from hypothesis import given, settings, strategies as st

from polymap.cli import main
from polymap.driver import param_values, parse
from polymap.machine.presets import load_architecture
from polymap.mapping.files import mapping_from_dict
from polymap.mapping.model import loop_extents
from polymap.passes.counting.execution import execution, issue_slots, largest_share
from polymap.passes.counting.variance import row_sets, variance
from polymap.poly import build_model

EXAMPLES = Path(__file__).parent.parent / "examples"


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


def test_partial_vectors_and_thread_share_are_nominal_not_pessimistic():
    """They moved into the nominal compute term (exact, passes/counting/execution.py): the
    pessimistic side must not charge them again."""
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
    assert v.pessimistic_cycles == 1000.0 and v.binding == "compute" and v.derating == 1.0
    assert not {b.kind for b in v.bounds} & {"partial vectors", "thread share"}
    ex = execution(build_model(ROW), mapping, host, extents)
    # j is the reduction loop of s[i] += A[i, j]: not vectorised; i: 100 over 2 units in tiles of 64
    share = 64 * 2 / 100
    assert ex.lanes == 1 and ex.threads == min(2, host.levels[-1].instances) and ex.waste == share
    assert issue_slots(100, 8) == 12 * 8 + 4 * 8  # what a vector loop over j would have cost: 100 -> 128


def test_cost_report_has_nominal_and_pessimistic_cycles(capsys):
    status = main(["cost", str(EXAMPLES / "gemm.loop"), "--arch", "toy", "--mapping", str(EXAMPLES / "gemm_toy.yaml"),
                   "-D", "M=60", "-D", "N=60", "-D", "K=64", "--json"])
    assert status == 0
    doc = json.loads(capsys.readouterr().out)
    p = doc["pessimistic"]
    assert p["cycles_nominal"] == doc["cycles"]
    assert doc["cycles_pessimistic"] == p["cycles_pessimistic"] >= doc["cycles"]
    assert p["binds"] in {"compute", "DRAM", "GLB"} and p["derating"] >= 1
