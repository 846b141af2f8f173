"""Hypothesis: schedule mappings (skews, shifts, fusions, wavefronts, tiles that divide nothing).

``check`` agrees with the brute-force legality (reaching and final writers of
the enumerated instances sorted by their mapped time, :mod:`bruteforce`),
every witness is a real conflict whose order flips, and the exact counts
equal the step-by-step simulation (:mod:`simulator`). The mapped time of the
tests is computed from ``mapping.md`` in plain Python (:mod:`mapped_time`).
"""
from __future__ import annotations

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from bruteforce import brute_legal, witness_is_real
from polymap.mapping.files import mapping_from_dict
from polymap.driver import parse
from polymap.errors import MappingError
from polymap.machine.arch import architecture_from_dict
from polymap.mapping.model import Mapping
from polymap.passes.counting.counting import count_mapping
from polymap.passes.legality.legality import check_mapping
from polymap.poly import build_model
from simulator import counts_as_dict, simulate

SOURCES = {
    "seidel1": """kernel seidel1(T = 2, N = 5) {
  inout A[N] : f64
  for t in 0..T, i in 1..N-1 { S: A[i] = A[i-1] + A[i] + A[i+1] }
}""",
    "jacobi1": """kernel jacobi1(T = 2, N = 5) {
  inout A[N] : f64
  inout B[N] : f64
  for t in 0..T {
    for i in 1..N-1 { s1: B[i] = A[i-1] + A[i] + A[i+1] }
    for i in 1..N-1 { s2: A[i] = B[i] }
  }
}""",
    "chain": """kernel chain(N = 5) {
  in  A[N] : f64
  inout B[N] : f64
  out C[N] : f64
  for i in 0..N { p: B[i] = A[i] + 1.0 }
  for i in 0..N-1 { q: C[i] = B[i] + B[i+1] }
}""",
    "rowsum": """kernel rowsum(N = 4, M = 3) {
  in  A[N, M] : f64
  out s[N] : f64
  out y[N] : f64
  for i in 0..N {
    init: s[i] = 0
    for j in 0..M { acc: s[i] += A[i, j] }
  }
  for i in 0..N { fin: y[i] = s[i] * 2.0 }
}""",
}
KERNELS = {name: parse(src, f"{name}.loop").kernels[0] for name, src in SOURCES.items()}
MODELS = {name: build_model(k) for name, k in KERNELS.items()}
SIZES = {"seidel1": {"T": (1, 3), "N": (3, 6)}, "jacobi1": {"T": (1, 2), "N": (3, 5)},
         "chain": {"N": (1, 5)}, "rowsum": {"N": (1, 3), "M": (1, 3)}}
NESTS = {"seidel1": (1,), "jacobi1": (1,), "chain": (1, 2), "rowsum": (1, 2)}
FANOUT = 8


def arch_of(n: int):
    levels = [{"name": "L0"}] + [{"name": f"L{k}", "instances": FANOUT ** (k - 1)} for k in range(1, n)]
    return architecture_from_dict({"levels": levels, "compute": {"instances": FANOUT ** (n - 1)}},
                                  source_name="<prop>")


@st.composite
def entries(draw, kernel, nests: int):
    """A schedule for every statement: lower-triangular skews with unit diagonal (injective)
    of a permutation of its iterators, plus shifts; new loops shared by position (fusion)."""
    out = {}
    for ctx in kernel.statements():
        if ctx.nest >= nests or not draw(st.booleans()):
            continue
        its = list(draw(st.permutations(ctx.iterators)))
        exprs = {}
        for k, x in enumerate(its):
            terms = [x]
            for y in its[:k]:
                c = draw(st.sampled_from([0, 0, 1, 2, -1]))
                if c:
                    terms.append(f"{c}*{y}")
            shift = draw(st.integers(-1, 2))
            if shift:
                terms.append(str(shift))
            exprs[f"u{k}"] = " + ".join(terms)
        out[ctx.name] = exprs
    return out


@st.composite
def cases(draw, spatial: bool = False):
    name = draw(st.sampled_from(sorted(KERNELS)))
    kernel = KERNELS[name]
    params = {p: draw(st.integers(lo, hi)) for p, (lo, hi) in SIZES[name].items()}
    nests = draw(st.sampled_from(NESTS[name]))
    data = {"nests": list(range(nests))}
    schedule = draw(entries(kernel, nests))
    if schedule:
        data["schedule"] = schedule
    probe = mapping_from_dict({**data, "levels": [{"level": "L0"}]}, kernel=kernel, arch=arch_of(1))
    loops = probe.loops
    n = draw(st.integers(1, 3))
    levels = [{"level": "L0", "order": list(draw(st.permutations(loops)))}]
    for k in range(1, n):
        tile = {x: draw(st.integers(1, 4)) for x in loops if draw(st.booleans()) or k == n - 1}
        if k == n - 1:
            tile = {x: 1 for x in loops}
        levels.append({"level": f"L{k}", "tile": tile, "order": list(draw(st.permutations(loops)))})
    # a wavefront over two loops every statement has, at a level above the last
    common = [x for x in loops if all(x in probe_loops for probe_loops in _stmt_loops(probe, kernel))]
    if n >= 2 and len(common) >= 2 and draw(st.booleans()):
        l = draw(st.integers(0, n - 2))
        a, b = draw(st.permutations(common))[:2]
        order = levels[l]["order"]
        if order.index(a) > order.index(b):
            a, b = b, a
        levels[l]["wavefront"] = [a, b]
    if spatial and n >= 2 and draw(st.booleans()):
        l = draw(st.integers(0, n - 2))
        x = draw(st.sampled_from(loops))
        levels[l]["spatial"] = [x]
    return name, params, {**data, "levels": levels}


def _stmt_loops(mapping, kernel):
    entries = {e.statement: e.loops for e in mapping.schedule}
    return [entries.get(c.name, c.iterators) for c in kernel.statements() if c.nest in mapping.mapped_nests]


def _mapping(name, data):
    kernel = KERNELS[name]
    return mapping_from_dict(data, kernel=kernel, arch=arch_of(len(data["levels"])))


@settings(max_examples=60, deadline=None, suppress_health_check=list(HealthCheck))
@given(cases())
def test_check_equals_brute_force(case):
    name, params, data = case
    kernel = KERNELS[name]
    mapping = _mapping(name, data)
    verdict = check_mapping(MODELS[name], mapping, params=params)
    legal, *_ = brute_legal(kernel, mapping, params)
    # the verdict holds for every size; a witness is given at these sizes when one exists there
    if not legal:
        assert not verdict.legal, data
    if verdict.legal:
        assert legal, data
    at = []
    for v in verdict.violations:
        assert witness_is_real(kernel, mapping, params, v.to_json()), (data, v.reason)
        at.append(dict(v.to_json()["witness"].get("params", {})))
    if not legal:  # some violation is shown at the sizes where brute force finds one
        assert any(p in ({}, params) for p in at), (data, at)


@settings(max_examples=25, deadline=None, suppress_health_check=list(HealthCheck))
@given(cases(spatial=True))
def test_counts_equal_simulation(case):
    name, params, data = case
    kernel = KERNELS[name]
    try:
        mapping = _mapping(name, data)
    except MappingError:
        return
    arch = arch_of(len(data["levels"]))
    counts = count_mapping(MODELS[name], mapping, arch, params=params)
    assert counts_as_dict(counts) == simulate(kernel, mapping, params), data


@settings(max_examples=12, deadline=None, suppress_health_check=list(HealthCheck))
@given(cases())
def test_code_of_legal_mappings_verifies(case):
    """C and NumPy of random legal schedule mappings agree with the reference."""
    from polymap.codegen.verify import verify

    name, params, data = case
    kernel = KERNELS[name]
    mapping = _mapping(name, data)
    if not check_mapping(MODELS[name], mapping, params=params).legal:
        return
    assert verify(kernel, params, targets=("c", "numpy"), mapping=mapping, model=MODELS[name]).passed
