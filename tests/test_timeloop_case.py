"""The Timeloop tutorial's 1-D convolution, counted exactly.

Setup (timeloop-accelergy-exercises, 2020.ispass timeloop exercises 01 and 02):
a two-level architecture, ``MainMemory`` (backing store) over a 64-entry
``Buffer`` register file over one MAC. Exercise 01 is ``O[p] += W[r] * I[p+r]``
with P=16, R=3; exercise 02 adds output channels, ``O[k][p] += W[k][r] * I[p+r]``
with K=32, and maps ``R=1 P=16 K=32`` at MainMemory (permutation ``PRK``,
listed innermost first: the nest runs R, K, P outer -> inner) and ``R=3`` at
the Buffer. The Buffer holds I[p .. p+2] per (k, p) step:

* order R, K, P (P innermost at MainMemory): the window slides along p and
  starts over for every k: 32 x (3 + 15) = 576 input reads from MainMemory;
* order R, P, K (K innermost): the window stays put while k runs: 3 + 15 = 18.

Timeloop's reference output for the first order also says 576; the 48 of
exercise 01 are the Buffer's reads towards the MAC (16 x 3), not MainMemory's
(18 for both of its mappings). The simulator confirms every count.
"""
from __future__ import annotations

from pathlib import Path

import pytest

from polymap.machine.arch import architecture_from_dict
from polymap.driver import parse
from polymap.mapping.files import load_mapping, mapping_from_dict
from polymap.mapping.model import Mapping
from polymap.passes.counting.counting import count_mapping
from polymap.poly import build_model
from simulator import counts_as_dict, simulate

CONV1D_OC = """
kernel conv1d_oc(K = 32, P = 16, R = 3) {
  in    W[K, R]
  in    I[P + R - 1]
  inout O[K, P]
  for k in 0..K, p in 0..P, r in 0..R {
    O[k, p] += W[k, r] * I[p + r]
  }
}
"""

ARCH = {"name": "timeloop-2level",
        "levels": [{"name": "MainMemory"}, {"name": "Buffer", "capacity": 64}],
        "compute": {"instances": 1}}


def _count(src: str, levels: list[dict]):
    kernel = parse(src, "<timeloop>").kernels[0]
    arch = architecture_from_dict(ARCH, source_name="<timeloop>")
    mapping = mapping_from_dict({"levels": levels}, kernel=kernel, arch=arch)
    params = {p.name: p.default for p in kernel.params}
    counts = count_mapping(build_model(kernel), mapping, arch, params=params)
    assert counts_as_dict(counts) == simulate(kernel, mapping, params)
    return counts


@pytest.mark.parametrize("order, expected", [(["r", "k", "p"], 576), (["r", "p", "k"], 18)])
def test_conv1d_oc_input_reads_from_main_memory(order, expected):
    c = _count(CONV1D_OC, [{"level": "MainMemory", "order": order},
                           {"level": "Buffer", "tile": {"k": 1, "p": 1, "r": 3}, "order": ["r"]}])
    assert c.level("MainMemory").tensor("I").reads == expected
    assert c.level("Buffer").tensor("I").fills == expected
    # one MAC operand per instance whatever the order
    assert c.level("Buffer").tensor("I").reads == 32 * 16 * 3
    assert c.level("Buffer").footprint == 3 + 3 + 1


def test_conv1d_exercise_01_both_mappings_read_18_inputs():
    src = (Path(__file__).parent.parent / "examples" / "conv1d_timeloop.loop").read_text()
    ws = _count(src, [{"level": "MainMemory", "order": ["r", "p"]},
                      {"level": "Buffer", "tile": {"r": 1, "p": 16}, "order": ["p", "r"]}])
    os_ = _count(src, [{"level": "MainMemory", "order": ["p", "r"]},
                       {"level": "Buffer", "tile": {"r": 3, "p": 1}, "order": ["r", "p"]}])
    for c in (ws, os_):
        assert c.level("MainMemory").tensor("I").reads == 18
        assert c.level("Buffer").tensor("I").reads == 48
    assert ws.level("Buffer").footprint == 1 + 16 + 16
    assert os_.level("Buffer").footprint == 3 + 3 + 1
