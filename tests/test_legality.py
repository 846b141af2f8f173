"""check vs brute force on the example kernels: every order, tiles, witnesses."""
from __future__ import annotations

import itertools
import time
from pathlib import Path
from types import SimpleNamespace as NS

import pytest

from bruteforce import brute_legal, witness_is_real
from polymap.driver import load_program
from polymap.mapping.model import nest_loops
from polymap.passes.legality.legality import check_mapping
from polymap.passes.schedule.tiling import order_mapping
from polymap.poly import build_model

EX = Path(__file__).parent.parent / "examples"


def kernel_of(name: str):
    return load_program(EX / f"{name}.loop").kernels[0]


def mapping(loops, levels):
    return NS(kernel="k", nest=0, loops=tuple(loops),
              levels=tuple(NS(level=f"L{k}", tile=t, order=o, spatial=s, keep=()) for k, (t, o, s) in enumerate(levels)))


SMALL = {
    "gemm": {"M": 3, "N": 3, "K": 3},
    "gemm_scalar_acc": {"M": 3, "N": 3, "K": 3},
    "seidel2d": {"T": 3, "N": 5},
    "jacobi2d": {"T": 2, "N": 5},
    "lu": {"N": 4},
    "cholesky": None,
    "softmax": {"M": 2, "N": 3},
    "conv1d_timeloop": {"P": 4, "R": 3},
    "trmv": None,
    "polybench/syrk": None,
    "polybench/trmm": None,
    "polybench/atax": None,
}


def _small(kernel, given):
    return given or {p.name: 4 for p in kernel.params}


def _agree(kernel, m, params):
    model = build_model(kernel)
    verdict = check_mapping(model, m, params=params)
    legal, *_ = brute_legal(kernel, m, params)
    assert verdict.legal == legal, (m, verdict.violations[:2])
    for v in verdict.violations:
        assert witness_is_real(kernel, m, params, v.to_json()), v.reason
    return verdict


@pytest.mark.parametrize("name", sorted(SMALL))
def test_every_order_agrees_with_brute_force(name):
    kernel = kernel_of(name)
    params = _small(kernel, SMALL[name])
    loops = nest_loops(kernel, 0)
    for order in itertools.permutations(loops):
        _agree(kernel, order_mapping(kernel, 0, loops, order), params)


def test_gemm_all_orders_legal_and_fast():
    kernel = kernel_of("gemm")
    model = build_model(kernel)
    t = time.perf_counter()
    v = check_mapping(model, order_mapping(kernel, 0, ("i", "j", "k"), ("k", "i", "j")))
    assert time.perf_counter() - t < 1.0
    assert v.legal
    assert any("partial sums of C" in n for n in v.notes)


def test_scalar_accumulator_blocks_reduction_outward():
    kernel = kernel_of("gemm_scalar_acc")
    v = _agree(kernel, order_mapping(kernel, 0, ("i", "j", "k"), ("k", "i", "j")), {"M": 3, "N": 3, "K": 3})
    assert not v.legal
    assert all(v_.tensor == "t" for v_ in v.violations)


def test_seidel_interchange_illegal_with_skew_hint():
    kernel = kernel_of("seidel2d")
    v = _agree(kernel, order_mapping(kernel, 0, ("t", "i", "j"), ("i", "t", "j")), {"T": 3, "N": 5})
    assert not v.legal
    assert v.hints and "i -> i + t" in v.hints[0]


@pytest.mark.parametrize("tiles", [(2, 2, 2), (1, 3, 2), (3, None, 1)])
def test_gemm_tiles_agree(tiles):
    kernel = kernel_of("gemm_scalar_acc")
    loops = ("i", "j", "k")
    for order in [("k", "i", "j"), ("i", "j", "k"), ("j", "i", "k")]:
        m = mapping(loops, [((None,) * 3, loops, ()), (tiles, order, ())])
        _agree(kernel, m, {"M": 4, "N": 3, "K": 4})


def test_tiled_seidel_illegal_and_lu_tiles():
    kernel = kernel_of("seidel2d")
    m = mapping(("t", "i", "j"), [((None,) * 3, ("t", "i", "j"), ()), ((2, 2, 2), ("t", "i", "j"), ())])
    assert not _agree(kernel, m, {"T": 3, "N": 6}).legal
    kernel = kernel_of("lu")
    m = mapping(("k", "i", "j"), [((None,) * 3, ("k", "i", "j"), ()), ((2, 2, 2), ("k", "i", "j"), ())])
    _agree(kernel, m, {"N": 5})


def test_spatial_loops():
    kernel = kernel_of("gemm")
    model = build_model(kernel)
    loops = ("i", "j", "k")
    ok = mapping(loops, [((None,) * 3, loops, ()), ((1, 4, 4), ("k", "j", "i"), ("j",))])
    assert check_mapping(model, ok, params={"M": 4, "N": 4, "K": 4}).legal
    red = mapping(loops, [((None,) * 3, loops, ()), ((1, 4, 4), ("k", "j", "i"), ("k",))])
    v = check_mapping(model, red, params={"M": 4, "N": 4, "K": 4})
    assert v.legal and any("reduction" in n for n in v.notes)
    kernel = kernel_of("seidel2d")
    model = build_model(kernel)
    bad = mapping(("t", "i", "j"), [((None,) * 3, ("t", "i", "j"), ()), ((1, 1, 4), ("t", "i", "j"), ("j",))])
    v = check_mapping(model, bad, params={"T": 2, "N": 6})
    assert not v.legal
    for x in v.violations:
        w = x.witness
        assert w.source.values[:2] == w.sink.values[:2]  # same t, i: only j differs, run in parallel
