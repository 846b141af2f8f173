"""The fast path (polymap.passes.counting.fastcount) equals the ISL path on every generated case."""
from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

from polymap.driver import parse
from polymap.mapping.files import mapping_from_dict
from polymap.passes.counting.counting import isl_count_mapping
from polymap.passes.counting.fastcount import Structure, evaluator_for, fast_counts, tiles_of
from polymap.passes.counting.fastcount_nest import NotSupported, analyse_nest
from polymap.poly import build_model
from fastcount_cases import arch_of, assert_fast_equals_isl, built, fast_of
from simulator import counts_as_dict, simulate

KERNELS = {
    "gemm": ("""
kernel gemm(M = 6, N = 5, K = 4) {
  in A[M, K]
  in B[K, N]
  inout C[M, N]
  for i in 0..M, j in 0..N, k in 0..K { C[i, j] += A[i, k] * B[k, j] }
}""", ("i", "j", "k")),
    "conv": ("""
kernel conv(K = 3, P = 5, R = 3) {
  in W[K, R]
  in I[2 * P + R]
  out O[K, P]
  for k in 0..K, p in 0..P, r in 0..R { O[k, p] += W[k, r] * I[2 * p + r] }
}""", ("k", "p", "r")),
    "conv2": ("""
kernel conv2(C = 2, P = 4, Q = 3, R = 2, S = 3) {
  in I[C, P + R, 2 * Q + S]
  in W[C, R, S]
  out O[P, Q]
  for c in 0..C, p in 0..P, q in 0..Q, r in 0..R, s in 0..S { O[p, q] += I[c, p + r, 2 * q + s] * W[c, r, s] }
}""", ("c", "p", "q", "r", "s")),
    "gemm_init": ("""
kernel gemm_init(M = 5, N = 3, K = 4) {
  in A[M, K]
  in B[K, N]
  out C[M, N]
  for i in 0..M, j in 0..N {
    init: C[i, j] = 0
    for k in 0..K { acc: C[i, j] += A[i, k] * B[k, j] }
  }
}""", ("i", "j", "k")),
    "conv_init": ("""
kernel conv_init(K = 3, P = 5, R = 3) {
  in W[K, R]
  in I[2 * P + R]
  out O[K, P]
  for k in 0..K, p in 0..P {
    init: O[k, p] = 0
    for r in 0..R { acc: O[k, p] += W[k, r] * I[2 * p + r] }
  }
}""", ("k", "p", "r")),
    "copy": ("""
kernel copy(N = 7, M = 3) {
  in A[N, M]
  out B[M, N]
  for i in 0..N, j in 0..M { B[j, i] = A[i, j] * 2 }
}""", ("i", "j")),
}

_PARSED: dict = {}


def kernel_model(name: str):
    if name not in _PARSED:
        kernel = parse(KERNELS[name][0], "<test>").kernels[0]
        _PARSED[name] = (kernel, build_model(kernel))
    return _PARSED[name]


@st.composite
def cases(draw):
    name = draw(st.sampled_from(sorted(KERNELS)))
    kernel, model = kernel_model(name)
    loops = KERNELS[name][1]
    tensors = [d.name for d in kernel.decls]
    n = draw(st.integers(2, 4))
    levels = []
    for l in range(n):
        lv = {"level": f"L{l}", "order": draw(st.permutations(loops))}
        if l > 0:
            lv["tile"] = {x: draw(st.integers(1, 7)) for x in loops if draw(st.booleans())}
            lv["keep"] = [t for t in tensors if draw(st.integers(0, 3)) > 0]  # bypass sometimes
        if draw(st.integers(0, 2)) == 0:
            lv["spatial"] = [draw(st.sampled_from(loops))]
        levels.append(lv)
    return name, n, levels


def build(name: str, n: int, levels):
    return built(*kernel_model(name), n, levels)


@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(cases())
def test_fast_equals_isl(case):
    assert_fast_equals_isl(build(*case))


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(cases())
def test_fast_equals_simulation(case):
    got = fast_of(build(*case))
    if got is not None:
        kernel, mapping, params, fast = got
        assert counts_as_dict(fast) == simulate(kernel, mapping, params)


def test_batch_matches_one_by_one():
    """A batch of random tiles (non-dividing included) gives the counts of each mapping alone."""
    kernel, model = kernel_model("conv2")
    arch = arch_of(3)
    base = {"levels": [{"level": "L0", "order": ["c", "p", "q", "r", "s"]},
                       {"level": "L1", "tile": {"p": 2}, "order": ["q", "c", "p", "r", "s"], "spatial": ["c"]},
                       {"level": "L2", "tile": {"p": 1, "s": 1}, "order": ["s", "r", "q", "p", "c"]}]}
    rng = np.random.default_rng(1)
    mappings = []
    for _ in range(5):
        lv = [dict(x) for x in base["levels"]]
        lv[1]["tile"] = {"c": 1, "p": int(rng.integers(1, 5)), "q": int(rng.integers(2, 4)), "s": int(rng.integers(1, 4))}
        lv[2]["tile"] = {"c": 1, "p": 1, "q": int(rng.integers(1, 3)), "r": int(rng.integers(1, 3)), "s": 1}
        mappings.append(mapping_from_dict({"levels": lv}, kernel=kernel, arch=arch))
    params = {p.name: p.default for p in kernel.params}
    ev = evaluator_for(model, mappings[0], params)
    batch = ev.evaluate(tiles_of(mappings, ev.nest))
    names = tuple(lv.name for lv in arch.levels)
    for b, m in enumerate(mappings):
        assert batch.exact[b]
        assert batch.as_counts(b, ev.nest, names) == isl_count_mapping(model, m, arch, params=params)


@pytest.mark.parametrize("src", [
    # an initialisation lacking two loops (a convolution's bias: c and r)
    "kernel b(K = 2, C = 2, R = 2) { in W[K, C, R]; in bias[K]; out O[K]; "
    "for k in 0..K { O[k] = bias[k]; for c in 0..C, r in 0..R { O[k] += W[k, c, r] } } }",
    # a statement after the loop it lacks
    "kernel p(N = 3) { in A[N, N]; inout C[N]; for i in 0..N { for k in 0..N { C[i] += A[i, k] }; C[i] *= 2 } }",
    # a tensor the initialisation does not touch has the loop it lacks only as the u of a*u + w
    # (its image over the initialisation's empty interval is not empty)
    "kernel r(N = 3) { in A[3 * N]; out C[N]; for i in 0..N { C[i] = 0; for k in 0..N { C[i] += A[2 * k + i] } } }",
    # the initialisation writes a tensor the body only reads
    "kernel w(N = 3) { in A[N, N]; out C[N]; inout D[N]; for i in 0..N { C[i] = 0; "
    "for k in 0..N { D[i] += A[i, k] * C[i] } } }",
    # triangular bounds
    "kernel t(N = 4) { in L[N, N]; inout y[N]; for i in 0..N, j in 0..i + 1 { y[i] += L[i, j] } }",
    # two subscripts of one tensor use i
    "kernel d(N = 4) { in A[N, N]; inout s[1]; for i in 0..N { s[0] += A[i, i] } }",
    # differently subscripted references of one tensor
    "kernel j(N = 5) { inout A[N + 2]; for i in 0..N { A[i + 1] += A[i] } }",
])
def test_refuses_outside_the_class(src):
    kernel = parse(src, "<test>").kernels[0]
    model = build_model(kernel)
    with pytest.raises(NotSupported):
        analyse_nest(model, 0, {p.name: p.default for p in kernel.params})


ONE_STATEMENT_ONLY = {
    # the initialisation reads a tensor the body does not access (held by its residencies only)
    "copy_init": "kernel q(N = 3, K = 4) { in A[N, K]; in b[N]; out C[N]; "
                 "for i in 0..N { C[i] = b[i]; for k in 0..K { C[i] += A[i, k] } } }",
    # a tensor the initialisation does not touch lacks the loop it lacks (held by the body's only)
    "body_only": "kernel r(N = 3, K = 4) { in A[N, K]; in d[N]; out C[N]; "
                 "for i in 0..N { C[i] = 0; for k in 0..K { C[i] += A[i, k] * d[i] } } }",
    # PolyBench's 2mm, both nests' shapes: scalars read by one statement each
    "scalars": "kernel s(N = 4, M = 3, K = 5) { in alpha : f64; in beta : f64; in A[N, K]; in B[K, M]; "
               "inout D[N, M]; for i in 0..N, j in 0..M { D[i, j] *= beta; "
               "for k in 0..K { D[i, j] += alpha * A[i, k] * B[k, j] } } }",
}


@pytest.mark.parametrize("name", sorted(ONE_STATEMENT_ONLY))
def test_tensors_of_one_statement_are_counted_exactly(name):
    """Tensors without the initialisation's loop that one statement alone accesses are held by that
    statement's residencies only: the fast path equals the ISL path on random mappings, and the
    simulator on some (they were outside the class before)."""
    kernel = parse(ONE_STATEMENT_ONLY[name], "<test>").kernels[0]
    model = build_model(kernel)
    params = {p.name: p.default for p in kernel.params}
    analyse_nest(model, 0, params)  # in the class
    loops = ("i", "j", "k") if name == "scalars" else ("i", "k")
    tensors = [d.name for d in kernel.decls]
    rng = np.random.default_rng(11)
    taken = 0
    for _ in range(12):
        n = int(rng.integers(2, 4))
        levels, outer = [], {x: 5 for x in loops}
        for l in range(n):
            lv = {"level": f"L{l}", "order": [str(x) for x in rng.permutation(loops)]}
            if l > 0:
                lv["tile"] = {x: int(rng.integers(1, outer[x] + 1)) for x in loops if rng.random() < 0.7}
                outer.update(lv["tile"])
                lv["keep"] = [t for t in tensors if rng.random() < 0.8]
            levels.append(lv)
        arch = arch_of(n)
        mapping = mapping_from_dict({"levels": levels}, kernel=kernel, arch=arch)
        fast = fast_counts(model, mapping, arch, params=params)
        assert fast is not None
        taken += 1
        assert fast == isl_count_mapping(model, mapping, arch, params=params)
        if taken <= 3:
            assert counts_as_dict(fast) == simulate(kernel, mapping, params)


@pytest.mark.parametrize("name,least", [("gemm_init", 24), ("conv_init", 16)])
def test_initialisations_are_counted_exactly(name, least):
    """Nests with an initialisation (``init`` lacks one loop): the fast path takes most random
    mappings (all but those that spread the lacked loop over instances or idle one) and equals the
    ISL path on every one, and the simulator on some."""
    kernel, model = kernel_model(name)
    loops = KERNELS[name][1]
    params = {p.name: p.default for p in kernel.params}
    tensors = [d.name for d in kernel.decls]
    rng = np.random.default_rng(7)
    taken = tried = 0
    while tried < 40:
        n = int(rng.integers(2, 5))
        levels = []
        for l in range(n):
            lv = {"level": f"L{l}", "order": [str(x) for x in rng.permutation(loops)]}
            if l > 0:
                lv["tile"] = {x: int(rng.integers(1, 6)) for x in loops if rng.random() < 0.7}
                lv["keep"] = [t for t in tensors if rng.random() < 0.8]
            if rng.random() < 0.3:
                lv["spatial"] = [str(rng.choice(loops))]
            levels.append(lv)
        drawn = build(name, n, levels)
        if drawn is None:
            continue
        tried += 1
        kernel, model, arch, mapping = drawn
        fast = fast_counts(model, mapping, arch, params=params)
        if fast is None:
            continue
        taken += 1
        assert fast == isl_count_mapping(model, mapping, arch, params=params)
        if taken <= 4:
            assert counts_as_dict(fast) == simulate(kernel, mapping, params)
    assert taken >= least  # (the halo's multicast and idle edge instances refuse more of conv's)


def test_refused_mapping_is_none():
    """An idle instance at an edge tile (spatial over uneven tiles) is left to the ISL path."""
    kernel, model = kernel_model("gemm")
    arch = arch_of(3)
    m = mapping_from_dict({"levels": [{"level": "L0", "order": ["i", "j", "k"]},
                                      {"level": "L1", "tile": {"i": 4}, "order": ["i", "j", "k"], "spatial": ["i"]},
                                      {"level": "L2", "tile": {"i": 1}, "order": ["i", "j", "k"]}]},
                          kernel=kernel, arch=arch)
    # M = 6: i tiles of 4 are {0-3, 4-5}; instances 2 and 3 of L2 idle in the second one
    assert fast_counts(model, m, arch) is None
    assert Structure.of(m).levels == 3
