"""Hypothesis: the ISL counts equal the step-by-step simulation on random mappings.

Random kernels (several statements, triangular bounds, strided loops,
dilated halos, plain writes), random tiles that divide nothing, random
orders, spatial loops (multicast), bypass, two to four levels.
"""
from __future__ import annotations

import islpy as isl
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from polymap.machine.arch import architecture_from_dict
from polymap.driver import parse
from polymap.mapping.files import load_mapping, mapping_from_dict
from polymap.mapping.model import Mapping, nest_loops, nest_tensors
from polymap.passes.counting.counting import count_mapping, isl_count_mapping
from polymap.poly import build_model, to_int
from simulator import counts_as_dict, simulate
from test_counting import COPY, DILATED, GEMM, TRIANGULAR

STRIDED = """
kernel strided(N = 7, M = 3) {
  in  A[N + 2, M]
  out C[N, M]
  for i in 1..N step 2, j in 0..M { S: C[i, j] += A[i - 1, j] + A[i + 1, j] }
}
"""

KERNELS = {k.name: k for k in (parse(src, "<prop>").kernels[0] for src in (GEMM, TRIANGULAR, DILATED, COPY, STRIDED))}
MODELS = {name: build_model(k) for name, k in KERNELS.items()}
SIZES = {"gemm": {"M": (1, 5), "N": (1, 4), "K": (1, 4)}, "trmv": {"N": (1, 7)},
         "dconv": {"P": (1, 6), "R": (1, 3)}, "copy2": {"N": (1, 5), "M": (1, 4)},
         "strided": {"N": (1, 8), "M": (1, 3)}}
FANOUT = 8


def arch_of(n: int):
    levels = [{"name": "L0"}] + [{"name": f"L{k}", "instances": FANOUT ** (k - 1)} for k in range(1, n)]
    return architecture_from_dict({"levels": levels, "compute": {"instances": FANOUT ** (n - 1)}},
                                  source_name="<prop>")


@st.composite
def cases(draw, max_levels: int = 4):
    name = draw(st.sampled_from(sorted(KERNELS)))
    kernel = KERNELS[name]
    params = {p: draw(st.integers(lo, hi)) for p, (lo, hi) in SIZES[kernel.name].items()}
    loops = nest_loops(kernel, 0)
    tensors = nest_tensors(kernel, 0)
    n = draw(st.integers(2, max_levels))
    levels = [{"level": "L0", "order": draw(st.permutations(loops))}]
    current = {x: 9 for x in loops}
    for k in range(1, n):
        tile = {x: draw(st.integers(1, current[x])) for x in loops}
        current = tile
        levels.append({"level": f"L{k}", "tile": tile, "order": draw(st.permutations(loops)),
                       "keep": draw(st.lists(st.sampled_from(tensors), unique=True))})
    # spatial loops: at most one level, one loop, small trip counts (fan-out fits FANOUT)
    spatial_level = draw(st.integers(-1, n - 2))
    if spatial_level >= 0:
        x = draw(st.sampled_from(loops))
        outer = levels[spatial_level].get("tile", {}).get(x, 9)
        inner = levels[spatial_level + 1]["tile"][x]
        if -(-outer // inner) <= FANOUT:
            levels[spatial_level]["spatial"] = [x]
    return name, params, levels


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(cases())
def test_counts_equal_simulation(case):
    name, params, levels = case
    kernel = KERNELS[name]
    arch = arch_of(len(levels))
    mapping = mapping_from_dict({"levels": levels}, kernel=kernel, arch=arch)
    expected = simulate(kernel, mapping, params)
    # count_mapping (the fast path where it applies) and the ISL path alone
    assert counts_as_dict(count_mapping(MODELS[kernel.name], mapping, arch, params=params)) == expected
    assert counts_as_dict(isl_count_mapping(MODELS[kernel.name], mapping, arch, params=params)) == expected


# parametric barvinok counts of deep tilings (3+ levels, triangular) can take minutes: two levels here
@settings(max_examples=8, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(cases(max_levels=2))
def test_symbolic_counts_evaluate_to_the_numeric_ones(case):
    name, params, levels = case
    kernel = KERNELS[name]
    arch = arch_of(len(levels))
    mapping = mapping_from_dict({"levels": levels}, kernel=kernel, arch=arch)
    model = MODELS[kernel.name]
    numeric = count_mapping(model, mapping, arch, params=params)
    symbolic = count_mapping(model, mapping, arch, params=params, symbolic=True)
    assert counts_as_dict(symbolic) == counts_as_dict(numeric)
    assert to_int(isl.PwQPolynomial(symbolic.instances_formula), params) == numeric.instances
    for lv in symbolic.levels:
        for t in lv.tensors:
            for name, text in t.formulas:
                assert to_int(isl.PwQPolynomial(text), params) == getattr(t, name), (lv.name, t.tensor, name)


@st.composite
def point_sets(draw):
    """Unions of up to three 3-d pieces: boxes, triangles, strides, phase-like fixed dims."""
    pieces = []
    for _ in range(draw(st.integers(1, 3))):
        conds = []
        for j in range(3):
            lo = draw(st.integers(0, 2))
            conds.append(f"{lo} <= x{j} <= {lo + draw(st.integers(0, 3))}")
        extra = draw(st.sampled_from(["", "x2 <= x1", "x1 + x2 <= 4", "x2 mod 2 = 0", "x0 = 1", "x1 = 0"]))
        pieces.append(" and ".join(conds + ([extra] if extra else [])))
    return "{ [x0, x1, x2] : " + " ; [x0, x1, x2] : ".join(pieces) + " }"


def _brute_successor(points: isl.Set, spatial: tuple[int, ...]) -> set:
    pts: list = []
    points.foreach_point(lambda p: pts.append(tuple(p.get_coordinate_val(isl.dim_type.set, j).to_python()
                                                    for j in range(3))))
    pairs = set()
    for inst in {tuple(p[j] for j in spatial) for p in pts}:
        mine = sorted(p for p in pts if tuple(p[j] for j in spatial) == inst)
        pairs.update(zip(mine, mine[1:]))
    return pairs


@settings(max_examples=60, deadline=None)
@given(point_sets(), st.sampled_from([(), (0,), (1,), (2,), (0, 2)]))
def test_next_residency_is_the_enumerated_successor(text, spatial):
    from polymap.passes.counting.residency_order import successor

    points = isl.Set(text)
    got: set = set()
    successor(points, spatial).wrap().foreach_point(
        lambda p: got.add(tuple(p.get_coordinate_val(isl.dim_type.set, j).to_python() for j in range(6))))
    assert {a + b for a, b in _brute_successor(points, spatial)} == got
