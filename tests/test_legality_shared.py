"""The work legality shares or does in fewer steps gives the same relations as the step-by-step way.

- ``schedule_order._decisive_dims`` projects out runs of dims at once: the same maps as one dim
  at a time;
- ``legality.spatial_findings`` asks whether a spatial dim carries a dependence by intersecting
  the dependence's time pairs with one step map: the same answer as composing the instance
  relation per dim (``_carried_at``), on legal and illegal mappings;
- ``tiling.mapped_schedule`` is built once per model and mapping: the same maps as a fresh build.
"""
from __future__ import annotations

from types import SimpleNamespace as NS

from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from polymap.driver import parse
from polymap.islcheck import isl
from polymap.machine.arch import architecture_from_dict
from polymap.mapping.files import mapping_from_dict
from polymap.passes.dependences.dependences import memory_based
from polymap.passes.legality import legality as L
from polymap.passes.schedule import tiling
from polymap.passes.schedule.schedule_order import _decisive_dims, _fixed
from polymap.poly import build_model
from test_legality_properties import kernels


def _decisive_one_by_one(a: isl.Map, b: isl.Map) -> tuple[isl.Map, isl.Map]:
    """The rule of ``_decisive_dims`` with one ``project_out`` per dropped dim (the former code)."""
    n = a.dim(isl.dim_type.out)
    keep = []
    for d in range(n):
        ca, cb = _fixed(a, d), _fixed(b, d)
        if ca is not None and ca == cb:
            continue
        keep.append(d)
        if ca is not None and cb is not None:
            break
    for d in reversed([d for d in range(n) if d not in keep]):
        a = a.project_out(isl.dim_type.out, d, 1)
        b = b.project_out(isl.dim_type.out, d, 1)
    return a, b


@st.composite
def cases(draw):
    """Random small nests (``test_legality_properties``), an order and tiles, a spatial loop or none."""
    kernel, loops = draw(kernels())
    order = tuple(draw(st.permutations(loops)))
    tiles = tuple(draw(st.sampled_from([None, 1, 2])) for _ in loops)
    inner = tuple(draw(st.permutations(loops)))
    spatial = draw(st.sampled_from(((),) + tuple((x,) for x in loops)))
    at = draw(st.integers(0, 1))
    levels = (NS(level="L0", tile=(None,) * len(loops), order=order, spatial=spatial if at == 0 else (), keep=()),
              NS(level="L1", tile=tiles, order=inner, spatial=spatial if at == 1 else (), keep=()))
    return kernel, NS(kernel="rand", nest=0, loops=loops, levels=levels)


@settings(max_examples=40, deadline=None, suppress_health_check=list(HealthCheck))
@given(cases())
def test_decisive_dims_in_runs_equal_one_by_one(case):
    kernel, mapping = case
    model = build_model(kernel)
    maps = dict(L.compact_maps(tiling.mapped_schedule(model, mapping)))
    for s in maps:
        for t in maps:
            a, b = _decisive_dims(maps[s], maps[t])
            ra, rb = _decisive_one_by_one(maps[s], maps[t])
            assert a.is_equal(ra) and b.is_equal(rb), (s, t)


@settings(max_examples=40, deadline=None, suppress_health_check=list(HealthCheck))
@given(cases())
def test_spatial_carrying_by_time_pairs_equals_the_composition(case):
    kernel, mapping = case
    model = build_model(kernel)
    mapped = tiling.mapped_schedule(model, mapping)
    deps = memory_based(model, mapped.statements)
    for d, dim in enumerate(mapped.dims):
        if not dim.spatial:
            continue
        for dep in deps:
            pairs = L._time_pairs(mapped, dep)
            by_pairs = pairs.intersect(L._step_at(mapped, d, pairs)).is_empty()
            assert by_pairs == L._carried_at(mapped, dep, d).is_empty(), (dep.source, dep.sink, d)
            event(f"spatial dim carries a dependence: {not by_pairs}")


GEMM = """
kernel gemm(M = 6, N = 5, K = 4) {
  in A[M, K]
  in B[K, N]
  out C[M, N]
  for i in 0..M, j in 0..N {
    init: C[i, j] = 0
    for k in 0..K { acc: C[i, j] += A[i, k] * B[k, j] }
  }
}"""


def test_mapped_schedule_is_built_once_per_mapping():
    kernel = parse(GEMM, "<test>").kernels[0]
    model = build_model(kernel)
    arch = architecture_from_dict({"levels": [{"name": "L0"}, {"name": "L1"}]}, source_name="<test>")
    levels = [{"level": "L0", "order": ["i", "j", "k"]}, {"level": "L1", "tile": {"i": 2, "k": 3}, "order": ["k", "j", "i"]}]
    m = mapping_from_dict({"levels": levels}, kernel=kernel, arch=arch)
    same = mapping_from_dict({"levels": levels}, kernel=kernel, arch=arch)
    first = tiling.mapped_schedule(model, m)
    assert tiling.mapped_schedule(model, same) is first  # equal mappings share it
    fresh = tiling._build_mapped_schedule(model, m)
    assert first.dims == fresh.dims
    assert [n for n, _ in first.maps] == [n for n, _ in fresh.maps]
    assert all(a.is_equal(b) for (_, a), (_, b) in zip(first.maps, fresh.maps))
    other = mapping_from_dict({"levels": [levels[0], {**levels[1], "tile": {"i": 3}}]}, kernel=kernel, arch=arch)
    assert tiling.mapped_schedule(model, other) is not first
