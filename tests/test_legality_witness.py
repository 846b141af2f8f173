"""Witnesses: taken from ISL whatever the parameters, the closest pair, real by brute force, fast."""
from __future__ import annotations

import itertools
import time
from pathlib import Path
from types import SimpleNamespace as NS

import islpy as isl

from bruteforce import brute_legal, witness_is_real
from polymap.driver import load_program, parse
from polymap.mapping.model import nest_loops
from polymap.passes.legality import witness as W
from polymap.passes.legality.legality import check_mapping
from polymap.passes.frontend.rename import distinct_loop_names
from polymap.passes.schedule.tiling import order_mapping
from polymap.poly import build_model

EX = Path(__file__).parent.parent / "examples"

LINE = """
kernel line(N = 3) {
  inout A[N] : f32
  for i in 0..N {
    s: A[i] = A[i] + 1.0
  }
}
"""


def _line_model():
    return build_model(parse(LINE, "line.loop").kernels[0])


def test_choose_moves_the_parameters_when_the_given_ones_are_too_small():
    """Only N >= 6 holds a pair: the given N = 3 gives none, the smallest N is taken."""
    rel = isl.Map("[N] -> { s[i] -> s[i2] : i2 = i + 5 and 0 <= i and i2 < N }")
    c = W.choose(_line_model(), [rel], {"N": 3}, tagged=False)
    assert c is not None and dict(c.params) == {"N": 6}
    assert [str(x) for x in c.instances] == ["s(i=0)", "s(i=5)"]
    assert W.choose(_line_model(), [isl.Map("[N] -> { s[i] -> s[i2] : 1 = 0 }")], {"N": 3}, tagged=False) is None


def test_choose_prefers_the_closest_pair_to_the_smallest():
    """(0, 9) is lexicographically first, (4, 5) is the pair one step apart."""
    rel = isl.Map("[N] -> { s[i] -> s[i2] : 0 <= i < N and 0 <= i2 < N and "
                  "((i = 0 and i2 = N - 1) or (i >= 4 and i2 = i + 1)) }")
    c = W.choose(_line_model(), [rel], {"N": 10}, tagged=False)
    assert [str(x) for x in c.instances] == ["s(i=4)", "s(i=5)"] and dict(c.params) == {"N": 10}


def test_scalar_accumulator_witness_is_the_neighbouring_pair():
    """gemm_scalar_acc in order k, i, j: acc(0, 0, 1) reads t, which acc(0, 1, 0) now overwrites
    before it (worked out by hand), not the far corner acc(63, 63, 0) of the default sizes."""
    kernel = load_program(EX / "gemm_scalar_acc.loop").kernels[0]
    m = order_mapping(kernel, 0, ("i", "j", "k"), ("k", "i", "j"))
    v = check_mapping(build_model(kernel), m, params={"M": 64, "N": 64, "K": 64})
    war = [x for x in v.violations if (x.kind, x.source, x.sink) == ("WAR", "acc", "acc")]
    assert len(war) == 1
    assert war[0].reason.startswith("acc(i=0, j=0, k=1) reads t before acc(i=0, j=1, k=0) overwrites it")
    assert war[0].witness.params == (("K", 64), ("M", 64), ("N", 64))


def test_witnesses_at_the_smallest_illegal_sizes():
    """At M = N = K = 1 the order k, i, j changes nothing, yet it is illegal for larger sizes:
    every witness names sizes where brute force confirms it, and the smallest of them are the
    smallest sizes (by sum) where brute force finds the order illegal."""
    kernel = load_program(EX / "gemm_scalar_acc.loop").kernels[0]
    m = order_mapping(kernel, 0, ("i", "j", "k"), ("k", "i", "j"))
    ones = {"M": 1, "N": 1, "K": 1}
    assert brute_legal(kernel, m, ones)[0]
    v = check_mapping(build_model(kernel), m, params=ones)
    assert not v.legal
    for x in v.violations:
        assert witness_is_real(kernel, m, ones, x.to_json()), x.reason
    sizes = sorted(itertools.product(range(1, 4), repeat=3), key=lambda p: (sum(p), p))
    smallest = next(p for p in sizes if not brute_legal(kernel, m, dict(zip("MNK", p)))[0])
    assert min(sum(dict(x.witness.params).values()) for x in v.violations) == sum(smallest)


def test_symm_reversed_has_a_witness_for_every_violation():
    kernel = distinct_loop_names(load_program(EX / "polybench" / "symm.loop").kernels[0])
    loops = nest_loops(kernel, 0)
    m = order_mapping(kernel, 0, loops, tuple(reversed(loops)))
    params = {"M": 3, "N": 3}
    v = check_mapping(build_model(kernel), m, params=params)
    assert not v.legal and not brute_legal(kernel, m, params)[0]
    assert any(x.tensor == "temp2" and {x.source, x.sink} == {"t_init", "c_set"} for x in v.violations)
    for x in v.violations:
        assert x.witness is not None and witness_is_real(kernel, m, params, x.to_json()), x.reason


def test_tiled_adi_witnesses_are_fast():
    """An illegal tiled mapping of PolyBench adi, with its 26 witnesses, took 11-13 s of CPU."""
    kernel = distinct_loop_names(load_program(EX / "polybench" / "adi.loop").kernels[0])
    loops = nest_loops(kernel, 0)
    tiles = tuple(2 if x == "t" else 4 for x in loops)
    m = NS(kernel="adi", nest=0, loops=loops, levels=(
        NS(level="L0", tile=(None,) * len(loops), order=loops, spatial=(), keep=()),
        NS(level="L1", tile=tiles, order=loops, spatial=(), keep=())))
    model = build_model(kernel)
    start = time.process_time()
    v = check_mapping(model, m, params={"TSTEPS": 20, "N": 20})
    assert time.process_time() - start < 6.0
    assert not v.legal and all(x.witness is not None for x in v.violations)
