"""Mapping files: resolution, validation with located errors, round trips and the numbers."""
from __future__ import annotations

import json
from itertools import product
from math import prod

import pytest
import yaml

from polymap import ir
from polymap.machine.presets import load_architecture
from polymap.driver import parse
from polymap.errors import MappingError
from polymap.mapping.files import load_mapping, mapping_from_dict
from polymap.mapping.model import (
    Mapping,
    loop_extents,
    nest_loops,
    nest_tensors,
    trip_counts,
)
from polymap.evaluate import iterate_statement_instances
from polymap.passes.counting.fit import fanout_problems

GEMM = """
kernel gemm(M = 64, N = 64, K = 64) {
  in    A[M, K] : f32
  in    B[K, N] : f32
  out   C[M, N] : f32
  for i in 0..M, j in 0..N {
    init: C[i, j] = 0
    for k in 0..K {
      acc: C[i, j] += A[i, k] * B[k, j]
    }
  }
}
"""

LU = """
kernel lu(N = 9) {
  inout A[N, N] : f64
  for k in 0..N {
    for i in k+1..N {
      A[i, k] /= A[k, k]
    }
    for i in k+1..N, j in k+1..N {
      A[i, j] -= A[i, k] * A[k, j]
    }
  }
}
"""

TWO = """
kernel first(N = 8) {
  in X[N]
  out Y[N]
  out Z[N]
  for i in 0..N { Y[i] = X[i] }
  for j in 0..N { if j > 2 { Z[j] = X[j] } }
}
kernel second(N = 8) {
  inout X[N]
  for i in 0..N { X[i] = 0 }
}
"""

SPEC_MAPPING = """\
kernel: gemm
nest: 0
levels:
  - level: DRAM
    order: [i, j, k]
  - level: GLB
    tile: {i: 32, j: 32, k: 16}
    order: [k, i, j]
    keep: [A, B, C]
  - level: RF
    tile: {i: 1, j: 16, k: 1}
    order: [j]
    spatial: [j]
"""


@pytest.fixture(scope="module")
def gemm() -> ir.Kernel:
    return parse(GEMM, "gemm.loop").kernels[0]


@pytest.fixture(scope="module")
def lu() -> ir.Kernel:
    return parse(LU, "lu.loop").kernels[0]


@pytest.fixture(scope="module")
def toy():
    return load_architecture("toy")


def load_text(tmp_path, text, kernel, arch, name="m.yaml") -> Mapping:
    p = tmp_path / name
    p.write_text(text)
    return load_mapping(p, kernel=kernel, arch=arch)


# --------------------------------------------------------------------------- the nest


def test_nest_loops(gemm, lu):
    assert nest_loops(gemm, 0) == ("i", "j", "k")
    assert nest_loops(lu, 0) == ("k", "i", "j")
    two = parse(TWO, "two.loop")
    assert nest_loops(two.kernels[0], 1) == ("j",)
    assert nest_tensors(two.kernels[0], 1) == ("X", "Z")
    assert nest_tensors(gemm, 0) == ("A", "B", "C")


def brute_extents(kernel, params):
    lo: dict[str, int] = {}
    hi: dict[str, int] = {}
    for ctx, env in iterate_statement_instances(kernel, params):
        for x in ctx.iterators:
            lo[x] = min(lo.get(x, env[x]), env[x])
            hi[x] = max(hi.get(x, env[x]), env[x])
    return {x: hi[x] - lo[x] + 1 for x in lo}


@pytest.mark.parametrize("n", [1, 2, 5])
def test_loop_extents_lu_brute_force(lu, n):
    expected = brute_extents(lu, {"N": n})
    got = loop_extents(lu, 0, {"N": n})
    assert {x: v for x, v in got.items() if v} == expected
    assert set(got) == {"k", "i", "j"}


def test_loop_extents_gemm(gemm):
    assert loop_extents(gemm, 0, {"M": 3, "N": 5, "K": 7}) == brute_extents(gemm, {"M": 3, "N": 5, "K": 7})


def test_loop_extents_cached_and_model_reused(gemm, lu, monkeypatch):
    """Once per (kernel, nest, params); a passed model is not rebuilt; a copy is returned."""
    import polymap.poly as poly

    model = poly.build_model(lu)
    built = []
    real = poly.build_model
    # loop_extents asks poly.kernel_model, which builds through poly.build_model once per kernel object
    monkeypatch.setattr(poly, "build_model", lambda k: built.append(k) or real(k))
    gemm = parse(GEMM, "gemm.loop").kernels[0]  # a fresh kernel object: the fixture's may hold its model
    first = loop_extents(lu, 0, {"N": 6}, model=model)
    assert first == brute_extents(lu, {"N": 6}) and not built
    first["k"] = -1  # callers may mutate their copy
    assert loop_extents(lu, 0, {"N": 6}) == brute_extents(lu, {"N": 6}) and not built
    assert loop_extents(gemm, 0, {"M": 2, "N": 3, "K": 4}) == brute_extents(gemm, {"M": 2, "N": 3, "K": 4})
    assert len(built) == 1  # no model passed: built once, then cached
    loop_extents(gemm, 0, {"M": 2, "N": 3, "K": 4})
    assert len(built) == 1


# --------------------------------------------------------------------------- resolution


def test_spec_mapping_resolves(tmp_path, gemm, toy):
    m = load_text(tmp_path, SPEC_MAPPING, gemm, toy)
    assert m.kernel == "gemm" and m.nest == 0 and m.loops == ("i", "j", "k")
    assert [lm.level for lm in m.levels] == ["DRAM", "GLB", "RF"]
    assert m.levels[0].tile == (None, None, None)
    assert m.levels[1].tile == (32, 32, 16)
    assert m.levels[2].tile == (1, 16, 1)
    assert m.levels[2].order == ("j", "i", "k")
    assert m.levels[2].spatial == ("j",)
    assert all(lm.keep == ("A", "B", "C") for lm in m.levels)


def test_inheritance_and_defaults(gemm, toy):
    data = {"levels": [{"level": "DRAM"}, {"level": "GLB", "tile": {"k": 8}, "order": ["k"], "keep": ["C", "A"]},
                       {"level": "RF", "tile": {"i": 4}}]}
    m = mapping_from_dict(data, kernel=gemm, arch=toy)
    assert m.levels[1].tile == (None, None, 8)
    assert m.levels[2].tile == (4, None, 8)  # k inherited from GLB, j still the whole loop
    assert m.levels[1].order == ("k", "i", "j")
    assert m.levels[0].order == ("i", "j", "k")
    assert m.levels[1].keep == ("A", "C")  # declaration order
    assert m.levels[2].keep == ("A", "B", "C")


@pytest.mark.parametrize("codec", ["yaml", "json"])
def test_round_trip(tmp_path, gemm, toy, codec):
    m = load_text(tmp_path, SPEC_MAPPING.replace("keep: [A, B, C]", "keep: [C]"), gemm, toy)
    d = m.to_dict()
    again = yaml.safe_load(yaml.safe_dump(d)) if codec == "yaml" else json.loads(json.dumps(d))
    assert mapping_from_dict(again, kernel=gemm, arch=toy) == m
    assert again["levels"][1]["keep"] == ["C"]


def test_program_with_several_kernels(tmp_path, toy):
    prog = parse(TWO, "two.loop")
    m = mapping_from_dict({"kernel": "first", "nest": 1, "levels": [{"level": "DRAM"}, {"level": "GLB"},
                                                                     {"level": "RF"}]}, kernel=prog, arch=toy)
    assert (m.kernel, m.nest, m.loops, m.levels[2].keep) == ("first", 1, ("j",), ("X", "Z"))
    m2 = mapping_from_dict({"kernel": "second", "levels": [{"level": n} for n in ("DRAM", "GLB", "RF")]},
                           kernel=prog.kernels, arch=toy)
    assert m2.kernel == "second"


# --------------------------------------------------------------------------- errors


def _edit(old: str, new: str) -> str:
    assert old in SPEC_MAPPING
    return SPEC_MAPPING.replace(old, new)


ERRORS = [
    (_edit("kernel: gemm", "kernel: gemv"), "no kernel named 'gemv'", 1, "kernel"),
    (_edit("nest: 0", "nest: 3"), "no nest 3", 2, "nest"),
    (_edit("nest: 0", "nest: zero"), "index of a loop nest", 2, "nest"),
    (_edit("level: GLB", "level: L2"), "unknown level 'L2'", 6, "levels[1]"),
    (_edit("level: GLB", "level: RF"), "expected level 'GLB' here", 6, "levels[1]"),
    (SPEC_MAPPING.split("  - level: RF")[0], "no entry for RF", 4, "levels"),
    (SPEC_MAPPING + "  - level: RF\n", "listed twice", 14, "levels[3]"),
    (_edit("order: [k, i, j]", "order: [k, i, q]"), "unknown loop 'q'", 8, "levels[1] (GLB): order"),
    (_edit("order: [k, i, j]", "order: [k, i, k]"), "'k' is listed twice", 8, "levels[1] (GLB): order"),
    (_edit("order: [j]", "order: j"), "must be a list", 12, "levels[2] (RF): order"),
    (_edit("spatial: [j]", "spatial: [z]"), "unknown loop 'z'", 13, "levels[2] (RF): spatial"),
    (_edit("{i: 1, j: 16, k: 1}", "{i: 1, j: 0, k: 1}"), "positive integers", 11, "levels[2] (RF)"),
    (_edit("{i: 1, j: 16, k: 1}", "{i: 1, j: 2.5, k: 1}"), "positive integers", 11, "levels[2] (RF)"),
    (_edit("{i: 1, j: 16, k: 1}", "{i: 1, j: 64, k: 1}"), "cannot grow inward", 11, "levels[2] (RF)"),
    (_edit("{i: 1, j: 16, k: 1}", "{i: 1, x: 2, k: 1}"), "unknown loop 'x'", 11, "levels[2] (RF)"),
    (_edit("order: [i, j, k]", "order: [i, j, k]\n    tile: {i: 8}"), "backing store's tile", 6, "levels[0] (DRAM)"),
    (_edit("keep: [A, B, C]", "keep: [A, D]"), "unknown tensor 'D'", 9, "levels[1] (GLB)"),
    (_edit("keep: [A, B, C]", "keep: [A, A]"), "twice", 9, "levels[1] (GLB)"),
    (_edit("order: [i, j, k]", "order: [i, j, k]\n    keep: [A, B]"), "keeps every tensor", 6, "levels[0] (DRAM)"),
    (_edit("    spatial: [j]", "    spatial: [j]\n    colour: red"), "unknown key 'colour'", 14, "levels[2]"),
    (_edit("nest: 0", "nest: 0\nwho: me"), "unknown key 'who'", 3, ""),
    ("kernel: gemm\nlevels: 3\n", "expected a list", 2, "levels"),
]


@pytest.mark.parametrize("text,what,line,entry", ERRORS)
def test_errors_point_at_the_entry(tmp_path, gemm, toy, text, what, line, entry):
    with pytest.raises(MappingError) as info:
        load_text(tmp_path, text, gemm, toy)
    d = info.value.diagnostics[0]
    assert what in d.message and entry in d.message, d.message
    assert d.loc.filename.endswith("m.yaml") and d.loc.line == line, info.value.render()
    rendered = info.value.render()
    assert rendered.startswith(f"{tmp_path / 'm.yaml'}:{line}:") and "^" in rendered


def test_bad_yaml_and_unreadable(tmp_path, gemm, toy):
    with pytest.raises(MappingError, match="not valid YAML"):
        load_text(tmp_path, "levels: [\n  {level: DRAM\n", gemm, toy)
    with pytest.raises(MappingError, match="cannot read"):
        load_mapping(tmp_path / "absent.yaml", kernel=gemm, arch=toy)


def test_kernel_missing_when_several(toy):
    prog = parse(TWO, "two.loop")
    with pytest.raises(MappingError, match="several kernels") as info:
        mapping_from_dict({"levels": [{"level": "DRAM"}]}, kernel=prog, arch=toy, source_name="x.yaml")
    assert info.value.render().startswith("x.yaml: error:")


def test_keep_of_tensor_outside_nest(toy):
    k = parse(TWO, "two.loop").kernels[0]
    data = {"nest": 0, "levels": [{"level": "DRAM"}, {"level": "GLB", "keep": ["Z"]}, {"level": "RF"}]}
    with pytest.raises(MappingError, match="does not access"):
        mapping_from_dict(data, kernel=k, arch=toy)


# --------------------------------------------------------------------------- numbers


def brute_trips(outer_tile: int, inner_tile: int, extent: int) -> int:
    """Most inner tiles any outer tile of a loop of ``extent`` contains, by enumeration."""
    most = 0
    for start in range(0, extent, outer_tile):
        points = range(start, min(start + outer_tile, extent))
        most = max(most, len({(x - start) // inner_tile for x in points}))
    return most


def test_trip_counts_non_dividing(gemm, toy):
    data = {"levels": [{"level": "DRAM"}, {"level": "GLB", "tile": {"i": 7, "j": 5, "k": 30}},
                       {"level": "RF", "tile": {"i": 3, "j": 5, "k": 4}}]}
    m = mapping_from_dict(data, kernel=gemm, arch=toy)
    ext = {"i": 20, "j": 13, "k": 9}
    full = {x: ext[x] for x in m.loops}
    glb = {"i": 7, "j": 5, "k": 30}
    rf = {"i": 3, "j": 5, "k": 4}
    assert trip_counts(m, 0, ext) == {x: brute_trips(full[x], glb[x], ext[x]) for x in ("i", "j", "k")}
    assert trip_counts(m, 1, ext) == {x: brute_trips(glb[x], rf[x], ext[x]) for x in ("i", "j", "k")}
    assert trip_counts(m, 2, ext) == {x: brute_trips(rf[x], 1, ext[x]) for x in ("i", "j", "k")}
    assert list(trip_counts(m, 1, ext)) == list(m.levels[1].order)


def test_fanout(gemm, toy):
    ext = {"i": 64, "j": 64, "k": 64}
    # mapping.md's example sends 16 j iterations to the single compute unit under each RF.
    spec = mapping_from_dict(yaml.safe_load(SPEC_MAPPING), kernel=gemm, arch=toy)
    problems = fanout_problems(spec, toy, ext)
    assert len(problems) == 1 and (problems[0].level, problems[0].level_index) == ("RF", 2)
    assert (problems[0].footprint, problems[0].capacity, problems[0].loops) == (16, 1, (("j", 16),))
    # 16 j-tiles of one column each across the 16 RFs fit exactly; 17 would not.
    ok = {"levels": [{"level": "DRAM"}, {"level": "GLB", "tile": {"i": 8, "j": 16, "k": 8}, "spatial": ["j"]},
                     {"level": "RF", "tile": {"j": 1}}]}
    assert fanout_problems(mapping_from_dict(ok, kernel=gemm, arch=toy), toy, ext) == ()
    ok["levels"][1]["tile"]["j"] = 17
    assert len(fanout_problems(mapping_from_dict(ok, kernel=gemm, arch=toy), toy, ext)) == 1


def test_fanout_two_loops_on_eyeriss(gemm):
    eyeriss = load_architecture("eyeriss")
    ext = {"i": 64, "j": 64, "k": 64}
    for ti, tj, fits in ((12, 14, True), (13, 14, False), (12, 15, False), (168, 1, True)):
        data = {"levels": [{"level": "DRAM"}, {"level": "GLB", "tile": {"i": ti, "j": tj}, "spatial": ["i", "j"]},
                           {"level": "RF", "tile": {"i": 1, "j": 1}}]}
        m = mapping_from_dict(data, kernel=gemm, arch=eyeriss)
        ext_i = {**ext, "i": 200}
        assert (fanout_problems(m, eyeriss, ext_i) == ()) == fits
        assert prod(trip_counts(m, 1, ext_i)[x] for x in ("i", "j")) == min(ti, 200) * tj


# --------------------------------------------------------------------------- property: round trip

from hypothesis import given, settings, strategies as st  # noqa: E402


@st.composite
def gemm_mappings(draw):
    """Random valid mapping data for gemm on toy: tiles shrink inward, any orders/spatial/keep."""
    loops = ["i", "j", "k"]
    levels = [{"level": "DRAM", "order": draw(st.permutations(loops))[:draw(st.integers(0, 3))]}]
    bound = {x: 100 for x in loops}
    for name in ("GLB", "RF"):
        tile = {}
        for x in draw(st.lists(st.sampled_from(loops), unique=True)):
            tile[x] = bound[x] = draw(st.integers(1, bound[x]))
        entry = {"level": name, "tile": tile, "order": list(draw(st.permutations(loops)))[:draw(st.integers(0, 3))],
                 "spatial": draw(st.lists(st.sampled_from(loops), unique=True, max_size=2))}
        if draw(st.booleans()):
            entry["keep"] = draw(st.lists(st.sampled_from(["A", "B", "C"]), unique=True))
        levels.append(entry)
    return {"kernel": "gemm", "levels": levels}


_GEMM_TOY = (parse(GEMM, "gemm.loop").kernels[0], load_architecture("toy"))


@settings(max_examples=60, deadline=None)
@given(data=gemm_mappings())
def test_round_trip_property(data):
    kernel, toy = _GEMM_TOY
    m = mapping_from_dict(data, kernel=kernel, arch=toy)
    assert mapping_from_dict(yaml.safe_load(yaml.safe_dump(m.to_dict())), kernel=kernel, arch=toy) == m
    for k, lm in enumerate(m.levels):
        assert sorted(lm.order) == ["i", "j", "k"]
        given_order = data["levels"][k].get("order", [])
        assert list(lm.order[:len(given_order)]) == list(given_order)
        if k:
            # a loop's tile is the innermost number given for it at or outside this level
            for x, t in zip(m.loops, lm.tile):
                named = [e["tile"][x] for e in data["levels"][1:k + 1] if x in e.get("tile", {})]
                assert t == (named[-1] if named else None)
