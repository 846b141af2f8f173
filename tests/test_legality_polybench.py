"""check vs brute force on every PolyBench kernel: the original order and its reverse.

Each kernel is first given distinct loop names (``passes.rename``), so that
its original order is a mapping at all; the original order must then be
legal, and for the reversed order check's verdict and every witness must
agree with the brute-force comparison of reaching and final writers.
"""
from __future__ import annotations

from pathlib import Path

import pytest

from bruteforce import brute_legal, witness_is_real
from polymap.driver import load_program
from polymap.mapping.model import nest_loops
from polymap.passes.legality.legality import check_mapping
from polymap.passes.frontend.rename import distinct_loop_names
from polymap.passes.schedule.tiling import order_mapping
from polymap.poly import build_model

POLYBENCH = sorted((Path(__file__).parent.parent / "examples" / "polybench").glob("*.loop"))


def _small(kernel) -> dict[str, int]:
    return {p.name: min(p.default or 3, 3) for p in kernel.params}


@pytest.mark.parametrize("path", POLYBENCH, ids=lambda p: p.stem)
def test_original_and_reversed_orders_agree_with_brute_force(path):
    kernel = distinct_loop_names(load_program(path).kernels[0])
    params = _small(kernel)
    model = build_model(kernel)
    loops = nest_loops(kernel, 0)
    original = order_mapping(kernel, 0, loops, loops)
    assert check_mapping(model, original, params=params).legal
    assert brute_legal(kernel, original, params)[0]
    reverse = order_mapping(kernel, 0, loops, tuple(reversed(loops)))
    verdict = check_mapping(model, reverse, params=params)
    if verdict.legal:  # legal for every size, so in particular for these
        assert brute_legal(kernel, reverse, params)[0]
    # Illegal: check decides for all sizes, so each witness names the sizes
    # where its pair flips, and brute force at those sizes must agree.
    for v in verdict.violations:
        doc = v.to_json()
        assert "witness" in doc, f"no witness: {v.reason}"
        assert witness_is_real(kernel, reverse, params, doc), v.reason
