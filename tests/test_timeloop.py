"""Timeloop in and out: our own Timeloop-format files import, count exactly, and under
``--convention timeloop`` give the numbers Timeloop's convention defines (derived by hand below).

The files under ``tests/timeloop/`` were written for these tests (not taken from
Timeloop's tutorial): a 1-D convolution without and with output channels (and a
stride of 2), two and three levels (the v0.4 tree and the older subtree form), a
bypass, a spatial level that splits a loop both ways, and a spatial reduction.
"""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from polymap.cli import main
from polymap.driver import load_program
from polymap.errors import PolymapError
from polymap.machine.presets import load_architecture
from polymap.mapping.files import load_mapping
from polymap.passes.counting.convention import count_mapping_timeloop
from polymap.passes.counting.counting import count_mapping
from polymap.poly import build_model
from polymap.reference import execute
from polymap.tensors import random_inputs
from polymap.timeloop import import_timeloop
from simulator import counts_as_dict, simulate

HERE = Path(__file__).parent / "timeloop"

#: case -> (problem, architecture, mapping)
CASES = {
    "conv1d, two levels": ("conv1d", "two_level", "conv1d_ws"),
    "conv1d_oc, three levels, bypass": ("conv1d_oc", "three_level", "conv1d_oc_bypass"),
    "conv1d_oc, spatial split": ("conv1d_oc", "spatial", "conv1d_oc_spatial"),
    "conv1d, spatial reduction": ("conv1d", "spatial", "conv1d_r_spatial"),
}


def _import(case: str, out: Path):
    problem, arch, mapping = CASES[case]
    result = import_timeloop(HERE / f"{problem}.problem.yaml", HERE / f"{arch}.arch.yaml",
                             HERE / f"{mapping}.mapping.yaml", out)
    kernel = load_program(out / f"{result.kernel}.loop").kernels[0]
    a = load_architecture(str(out / "arch.yaml"))
    return result, kernel, a, load_mapping(out / "mapping.yaml", kernel=kernel, arch=a)


def _outputs(counts) -> dict[str, tuple]:
    return {lv.name: (t.fills, t.writebacks, t.reads, t.updates)
            for lv in counts.levels for t in lv.tensors if t.tensor == "Outputs"}


@pytest.mark.parametrize("case", sorted(CASES))
def test_imports_and_counts_exactly(case, tmp_path):
    _, kernel, arch, mapping = _import(case, tmp_path)
    params = {p.name: p.default for p in kernel.params}
    counts = count_mapping(build_model(kernel), mapping, arch, params=params)
    assert counts_as_dict(counts) == simulate(kernel, mapping, params)


def test_the_kernels_compute_the_convolutions(tmp_path):
    _, k1, _, _ = _import("conv1d, two levels", tmp_path / "a")
    _, k2, _, _ = _import("conv1d_oc, three levels, bypass", tmp_path / "b")
    for kernel in (k1, k2):
        params = {p.name: p.default for p in kernel.params}
        arrays = random_inputs(kernel, params)
        got = execute(kernel, arrays, params)["Outputs"]
        w, x, o = (np.asarray(arrays[n], dtype=np.float64) for n in ("Weights", "Inputs", "Outputs"))
        if kernel.name == "conv1d":  # O[p] += W[r] I[p + r], P = 8, R = 3
            want = o + np.array([sum(w[r] * x[p + r] for r in range(3)) for p in range(8)])
        else:  # O[k][p] += W[k][r] I[2p + r], K = 4, P = 6, R = 3
            want = o + np.array([[sum(w[k, r] * x[2 * p + r] for r in range(3)) for p in range(6)]
                                 for k in range(4)])
        np.testing.assert_allclose(got, want, rtol=1e-5)


# Hand-derived Timeloop-convention counts of Outputs, (fills, writebacks, reads, updates) per level.
# The other tensors count as in the exact convention.
TIMELOOP = {
    # P=8, R=3; Buffer tile r=3, p=1 under MainMemory's p: each O[p] enters the Buffer once and,
    # being zero, is not filled (exact: 8); the MAC's first of its 3 updates reads nothing:
    # 24 - 8 = 16 reads; MainMemory serves no output read (exact: 8).
    "conv1d, two levels": {"MainMemory": (None, None, 0, 8), "Buffer": (0, 8, 16, 24)},
    # K=4, P=6, R=3 (72 MACs, 24 outputs): each output enters the global buffer once (tile k2 p2 over
    # DRAM's k2 x p3) and the register file once (tile k1 p1 r3): no fills anywhere; the register
    # file reads 72 - 24 = 48 partial sums; writebacks and updates as exact (24 each).
    "conv1d_oc, three levels, bypass": {"DRAM": (None, None, 0, 24), "GlobalBuffer": (0, 24, 0, 24),
                                        "RegFile": (0, 24, 48, 72)},
    # K split 2 x 2 over time and PEs: each PE's outputs are its own (no two PEs share an element),
    # so the adder tree combines nothing: Shared's updates stay 24; no fills; RegFile reads 48.
    "conv1d_oc, spatial split": {"MainMemory": (None, None, 0, 24), "Shared": (0, 24, 0, 24),
                                 "RegFile": (0, 24, 48, 72)},
    # the three taps of O[p] on three PEs at one step: each PE updates O[p] once, from zero (no fill,
    # no read: 24 - 24 = 0); Shared receives the three partial sums combined: 8 updates (exact: 24),
    # and holds each O[p] once (tile p4 under MainMemory's p2): no fills, 8 writebacks.
    "conv1d, spatial reduction": {"MainMemory": (None, None, 0, 8), "Shared": (0, 8, 0, 8),
                                  "RegFile": (0, 24, 0, 24)},
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_timeloop_convention(case, tmp_path):
    _, kernel, arch, mapping = _import(case, tmp_path)
    model = build_model(kernel)
    tl = count_mapping_timeloop(model, mapping, arch)
    exact = count_mapping(model, mapping, arch)
    assert {k: v for k, v in _outputs(tl).items() if k in TIMELOOP[case]} == TIMELOOP[case]
    for a, b in zip(tl.levels, exact.levels):  # inputs and weights: the same either way
        assert [t for t in a.tensors if t.tensor != "Outputs"] == [t for t in b.tensors if t.tensor != "Outputs"]


def test_spatial_split_becomes_two_levels(tmp_path):
    result, _, arch, mapping = _import("conv1d_oc, spatial split", tmp_path)
    assert [lv.name for lv in arch.levels] == ["MainMemory", "Shared", "Shared_spatial", "RegFile"]
    assert result.notes and "splits K into a temporal and a spatial part" in result.notes[0]
    assert "Shared_spatial" in (tmp_path / "mapping.yaml").read_text().split("levels:")[0]  # said in the file
    shared, split = mapping.levels[1], mapping.levels[2]
    assert split.spatial == ("k",) and split.keep == () and "k" not in shared.spatial
    assert arch.levels[1].spatial_reduction and arch.levels[3].instances == 4


@pytest.mark.parametrize("case", sorted(CASES))
def test_export_then_import_is_the_identity(case, tmp_path, capsys):
    problem, arch_name, _ = CASES[case]
    result, kernel, arch, mapping = _import(case, tmp_path / "a")
    exported = tmp_path / "exported.yaml"
    rc = main(["cost", result.files[0], "--arch", str(tmp_path / "a" / "arch.yaml"), "--mapping",
               str(tmp_path / "a" / "mapping.yaml"), "--export", "timeloop", str(exported)])
    assert rc == 0, capsys.readouterr().err
    again = import_timeloop(HERE / f"{problem}.problem.yaml", HERE / f"{arch_name}.arch.yaml", exported,
                            tmp_path / "b")
    mapping2 = load_mapping(tmp_path / "b" / "mapping.yaml", kernel=kernel, arch=arch)
    assert mapping2 == mapping
    strip = lambda p: [line for line in p.read_text().splitlines() if not line.startswith("#")]  # noqa: E731
    assert strip(tmp_path / "b" / "mapping.yaml") == strip(tmp_path / "a" / "mapping.yaml")


def test_import_command_and_cost_convention(tmp_path, capsys):
    out = tmp_path / "out"
    assert main(["import", "timeloop", str(HERE / "conv1d.problem.yaml"), str(HERE / "two_level.arch.yaml"),
                 str(HERE / "conv1d_ws.mapping.yaml"), "-o", str(out)]) == 0
    assert "wrote" in capsys.readouterr().out
    args = ["cost", str(out / "conv1d.loop"), "--arch", str(out / "arch.yaml"), "--mapping",
            str(out / "mapping.yaml"), "--json"]
    import json

    assert main(args) == 0
    exact = json.loads(capsys.readouterr().out)
    assert main(args + ["--convention", "timeloop"]) == 0
    tl = json.loads(capsys.readouterr().out)
    assert exact["levels"][1]["tensors"]["Outputs"]["fills"] == 8
    assert tl["levels"][1]["tensors"]["Outputs"]["fills"] == 0 and tl["convention"] == "timeloop"


def test_bad_timeloop_files_are_located(tmp_path):
    bad = tmp_path / "m.yaml"
    bad.write_text("mapping:\n  - target: MainMemory\n    type: temporal\n    factors: R=1 P=4\n"
                   "  - target: Buffer\n    factors: R=3 P=1\n")
    with pytest.raises(PolymapError) as err:
        import_timeloop(HERE / "conv1d.problem.yaml", HERE / "two_level.arch.yaml", bad, tmp_path / "o")
    assert "the factors of P multiply to 4, but the problem's P is 8" in err.value.render()
    tagged = tmp_path / "a.yaml"
    tagged.write_text("architecture:\n  nodes:\n    - !python/object:os.system {name: x}\n")
    with pytest.raises(PolymapError) as err:
        import_timeloop(HERE / "conv1d.problem.yaml", tagged, None, tmp_path / "o")
    assert f"{tagged}:3:" in err.value.render()
    wrong = tmp_path / "p.yaml"
    wrong.write_text("problem:\n  shape:\n    dimensions: [P]\n    data-spaces:\n"
                     "      - {name: O, projection: [[[Q]]], read-write: true}\n  instance: {P: 4}\n")
    with pytest.raises(PolymapError) as err:
        import_timeloop(wrong, HERE / "two_level.arch.yaml", None, tmp_path / "o")
    assert f"{wrong}:5:" in err.value.render() and "DIM one of P" in err.value.render()


def test_api_cost_takes_the_convention(tmp_path):
    from polymap import api

    _, kernel, arch, mapping = _import("conv1d, spatial reduction", tmp_path)
    exact = api.cost(kernel, mapping, arch=arch)
    tl = api.cost(kernel, mapping, arch=arch, options=api.CostOptions(convention="timeloop"))
    assert exact.counts.level("Shared").tensor("Outputs").updates == 24
    assert tl.counts.level("Shared").tensor("Outputs").updates == 8
