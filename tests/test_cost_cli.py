"""``polymap cost`` end to end: JSON shape, numbers from independent formulas, refusals, plot."""
from __future__ import annotations

import json
from pathlib import Path

import islpy as isl

from polymap.cli import main
from polymap.poly import to_int

ROOT = Path(__file__).parent.parent
GEMM = str(ROOT / "examples" / "gemm.loop")

TOY_MAPPING = """
levels:
  - level: DRAM
    order: [i, j, k]
  - level: GLB
    tile: {i: 16, j: 16, k: 16}
    order: [k, i, j]
    spatial: [j]
  - level: RF
    tile: {i: 1, j: 1, k: 16}
    order: [k]
"""

TWO_LEVEL_ARCH = """
name: two
levels:
  - {name: MainMemory, read_energy: 10, write_energy: 20, bandwidth: 2}
  - {name: Buffer, capacity: 64, read_energy: 1, write_energy: 2}
compute: {instances: 1, energy: 0.5}
"""

WHOLE = """
levels:
  - {level: MainMemory, order: [i, j, k]}
  - {level: Buffer, order: [i, j, k]}
"""


def run(capsys, *argv) -> tuple[int, str, str]:
    rc = main(list(argv))
    out, err = capsys.readouterr()
    return rc, out, err


def test_json_shape_and_hand_numbers(tmp_path, capsys):
    arch = tmp_path / "two.yaml"
    arch.write_text(TWO_LEVEL_ARCH)
    m = tmp_path / "m.yaml"
    m.write_text(WHOLE)
    rc, out, _ = run(capsys, "cost", GEMM, "--arch", str(arch), "--mapping", str(m),
                     "-D", "M=4", "-D", "N=3", "-D", "K=2", "--json")
    assert rc == 0
    doc = json.loads(out)
    M, N, K = 4, 3, 2
    assert doc["kernel"] == "gemm" and doc["params"] == {"M": 4, "N": 3, "K": 2}
    assert doc["instances"] == M * N * K + M * N
    mem, buf = doc["levels"]
    assert "footprint" not in mem and set(mem["tensors"]["A"]) == {"reads", "updates"}
    assert mem["tensors"] == {"A": {"reads": M * K, "updates": 0}, "B": {"reads": K * N, "updates": 0},
                              "C": {"reads": 0, "updates": M * N}}
    assert buf["footprint"] == M * K + K * N + M * N
    assert buf["tensors"]["C"] == {"fills": 0, "writebacks": M * N, "reads": M * N * K,
                                   "updates": M * N * K + M * N}
    # energy from mapping.md's formula, by hand
    mem_e = (M * K + K * N) * 10 + (M * N) * 20
    buf_e = (3 * M * N * K + M * N) * 1 + (M * K + K * N + M * N * K + M * N) * 2
    assert doc["energy_pj"] == mem_e + buf_e + 0.5 * doc["instances"]
    traffic = M * K + K * N + M * N
    assert doc["cycles"] == max(doc["instances"], traffic / 2)
    assert doc["intensity"]["MainMemory"] == doc["instances"] / traffic
    assert doc["bottleneck"] == "compute" and doc["utilization"] == 1.0


def test_symbolic_formulas_in_json(tmp_path, capsys):
    m = tmp_path / "m.yaml"
    m.write_text(TOY_MAPPING)
    rc, out, _ = run(capsys, "cost", GEMM, "--arch", "toy", "--mapping", str(m),
                     "-D", "M=32", "-D", "N=32", "-D", "K=32", "--json", "--symbolic")
    assert rc == 0
    doc = json.loads(out)
    for level in doc["levels"]:
        for counts in level["tensors"].values():
            for key in [k for k in counts if not k.endswith("_formula")]:
                value = to_int(isl.PwQPolynomial(counts[f"{key}_formula"]), doc["params"])
                assert value == counts[key]
    assert doc["utilization"] == 1.0  # 16 spatial j tiles feed the 16 compute units


def test_human_report_has_units_and_bottleneck(tmp_path, capsys):
    m = tmp_path / "m.yaml"
    m.write_text(TOY_MAPPING)
    png = tmp_path / "roof.png"
    rc, out, _ = run(capsys, "cost", GEMM, "--arch", "toy", "--mapping", str(m),
                     "-D", "M=32", "-D", "N=32", "-D", "K=32", "--plot", str(png))
    assert rc == 0
    assert "bottleneck" in out and "pJ" in out and "elements" in out and "cycles" in out
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_overfull_mapping_is_refused(tmp_path, capsys):
    arch = tmp_path / "two.yaml"
    arch.write_text(TWO_LEVEL_ARCH)
    m = tmp_path / "m.yaml"
    m.write_text(WHOLE)
    rc, out, _ = run(capsys, "cost", GEMM, "--arch", str(arch), "--mapping", str(m),
                     "-D", "M=8", "-D", "N=8", "-D", "K=8")
    assert rc == 1
    # footprint: A, B and C whole: 3 * 64 elements
    assert "Buffer" in out and "64 elements" in out and "192" in out


def test_fanout_beyond_instances_is_refused(tmp_path, capsys):
    m = tmp_path / "m.yaml"
    m.write_text(TOY_MAPPING.replace("tile: {i: 1, j: 1, k: 16}", "tile: {i: 1, j: 1, k: 16}\n    spatial: [k]"))
    rc, out, _ = run(capsys, "cost", GEMM, "--arch", "toy", "--mapping", str(m),
                     "-D", "M=32", "-D", "N=32", "-D", "K=32")
    assert rc == 1 and "instances" in out


def test_symbolic_over_its_time_budget_is_refused(tmp_path, capsys):
    m = tmp_path / "m.yaml"
    m.write_text(TOY_MAPPING)
    rc, out, err = run(capsys, "cost", GEMM, "--arch", "toy", "--mapping", str(m),
                       "-D", "M=32", "-D", "N=32", "-D", "K=32", "--symbolic", "--budget", "0")
    assert rc == 2
    assert "time budget of 0 s ran out" in err and "--budget SECONDS" in err
