"""``nests``, ``schedule`` and ``wavefront`` in mapping files: reading, located errors, round trips."""
from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from polymap.driver import parse
from polymap.errors import MappingError
from polymap.machine.presets import load_architecture
from polymap.mapping.files import load_mapping, mapping_from_dict
from polymap.mapping.model import Mapping, mapping_loop_extents
from polymap.mapping.schedule import ExpressionProblem, expression_isl

EXAMPLES = Path(__file__).resolve().parent.parent / "examples"

SEIDEL = """
kernel seidel(T = 3, N = 8) {
  inout A[N, N] : f64
  for t in 0..T, i in 1..N-1, j in 1..N-1 {
    relax: A[i, j] = (A[i-1, j] + A[i, j-1] + A[i, j] + A[i, j+1] + A[i+1, j]) / 5.0
  }
}
"""

TWO = """
kernel two(N = 8) {
  in  X[N] : f64
  out Y[N] : f64
  out Z[N] : f64
  for i in 0..N { p: Y[i] = X[i] * 2.0 }
  for i in 0..N { q: Z[i] = Y[i] + 1.0 }
}
"""


@pytest.fixture(scope="module")
def toy():
    return load_architecture("toy")


def seidel():
    return parse(SEIDEL, "seidel.loop").kernels[0]


def load(tmp_path, text, kernel, arch) -> Mapping:
    path = tmp_path / "m.yaml"
    path.write_text(text)
    return load_mapping(path, kernel=kernel, arch=arch)


SKEW = """kernel: seidel
schedule:
  relax: {t: t, u: t + i, v: 2*t + i + j}
levels:
  - level: DRAM
    order: [t, u, v]
  - level: GLB
    tile: {t: 2, u: 4, v: 4}
    wavefront: [t, u]
    order: [t, u, v]
  - level: RF
    tile: {t: 1, u: 1, v: 1}
"""


def test_schedule_read_and_round_trip(tmp_path, toy):
    k = seidel()
    m = load(tmp_path, SKEW, k, toy)
    assert m.loops == ("t", "u", "v")
    assert m.schedule[0].statement == "relax" and m.schedule[0].exprs == ("t", "t + i", "2*t + i + j")
    assert m.levels[1].wavefront == ("t", "u")
    data = m.to_dict()
    assert data["schedule"] == {"relax": {"t": "t", "u": "t + i", "v": "2*t + i + j"}}
    back = mapping_from_dict(json.loads(json.dumps(data)), kernel=k, arch=toy)
    assert back == m
    again = mapping_from_dict(yaml.safe_load(yaml.safe_dump(data)), kernel=k, arch=toy)
    assert again == m


def test_extents_of_new_loops(tmp_path, toy):
    k = seidel()
    m = load(tmp_path, SKEW, k, toy)
    # t in 0..2, i, j in 1..6: u = t + i in 1..8, v = 2t + i + j in 2..16
    assert mapping_loop_extents(k, m, {"T": 3, "N": 8}) == {"t": 3, "u": 8, "v": 15}


def test_identity_entry_is_no_schedule(tmp_path, toy):
    k = seidel()
    plain = load(tmp_path, "levels: [{level: DRAM}, {level: GLB}, {level: RF}]\n", k, toy)
    ident = load(tmp_path, "schedule: {relax: {t: t, i: i, j: j}}\n"
                           "levels: [{level: DRAM}, {level: GLB}, {level: RF}]\n", k, toy)
    assert ident == plain and not ident.schedule


def test_fused_nests(tmp_path, toy):
    k = parse(TWO, "two.loop").kernels[0]
    m = load(tmp_path, "nests: [0, 1]\nlevels: [{level: DRAM}, {level: GLB}, {level: RF}]\n", k, toy)
    assert m.mapped_nests == (0, 1) and m.loops == ("i",) and m.levels[0].keep == ("X", "Y", "Z")
    assert mapping_from_dict(m.to_dict(), kernel=k, arch=toy) == m


@pytest.mark.parametrize("text, where, words", [
    ("schedule: {relax: {t: t, u: t * i, v: j}}", (2, 29), "product of two variables"),
    ("schedule: {relax: {t: t, u: t + k, v: j}}", (2, 33), "unknown name 'k'"),
    ("schedule: {relax: {t: t, u: i / 2, v: j}}", (2, 29), "floor(e / c)"),
    ("schedule: {relax: {t: t, u: t, v: i + j}}", (2, 12), "not injective"),
    ("schedule: {nope: {t: t}}", (2, 12), "no statement 'nope'"),
    ("schedule: {relax: {T: t, u: i, v: j}}", (2, 20), "cannot name a loop"),
])
def test_schedule_errors_are_located(tmp_path, toy, text, where, words):
    body = f"kernel: seidel\n{text}\nlevels: [{{level: DRAM}}, {{level: GLB}}, {{level: RF}}]\n"
    with pytest.raises(MappingError) as exc:
        load(tmp_path, body, seidel(), toy)
    rendered = exc.value.render()
    assert words in rendered
    assert f"m.yaml:{where[0]}:{where[1]}:" in rendered, rendered
    assert "^" in rendered


def test_injectivity_error_names_two_instances(tmp_path, toy):
    body = "schedule: {relax: {t: t, u: t, v: i + j}}\nlevels: [{level: DRAM}, {level: GLB}, {level: RF}]\n"
    with pytest.raises(MappingError, match=r"relax\(t=\d+, i=\d+, j=\d+\) and relax\(t=\d+, i=\d+, j=\d+\)"):
        load(tmp_path, body, seidel(), toy)


@pytest.mark.parametrize("wave, words", [
    ("[t, w]", "unknown loop 'w'"),
    ("[t, v]", "not at this level"),
    ("[u, t]", "must come before"),
    ("[t]", "names two loops"),
])
def test_wavefront_errors(tmp_path, toy, wave, words):
    body = SKEW.replace("wavefront: [t, u]", f"wavefront: {wave}").replace("order: [t, u, v]\n  - level: RF",
                                                                          "order: [t, u]\n  - level: RF")
    with pytest.raises(MappingError, match=words.replace("(", r"\(")):
        load(tmp_path, body, seidel(), toy)


def test_nests_errors(tmp_path, toy):
    k = parse(TWO, "two.loop").kernels[0]
    for text, words in [("nests: [1, 0]", "consecutive"), ("nests: [0, 2]", "has 2 top-level"),
                        ("nest: 0\nnests: [0, 1]", "not both")]:
        with pytest.raises(MappingError, match=words):
            load(tmp_path, f"{text}\nlevels: [{{level: DRAM}}, {{level: GLB}}, {{level: RF}}]\n", k, toy)


@pytest.mark.parametrize("text, isl_text", [
    ("2*t + i", "((2*t) + i)"), ("floor(i / 4)", "floor((i)/4)"), ("i % 3 - 1", "((i mod 3) - 1)"),
    ("max(i, t) + N", "(max(i, t) + N)"), ("-t", "(-t)"),
])
def test_expressions(text, isl_text):
    assert expression_isl(text, ("t", "i", "N")) == isl_text


def test_expression_problem_column():
    with pytest.raises(ExpressionProblem) as exc:
        expression_isl("t + i * i", ("t", "i"))
    assert exc.value.column == 4


def test_renamed_mapping_in_original_terms(toy):
    """compile maps the renamed kernel; its NAME.json speaks of the kernel as written."""
    from polymap.mapping.renamed import in_original_terms
    from polymap.passes.frontend.rename import distinct_loop_names
    from polymap.passes.schedule.tiling import mapped_schedule
    from polymap.poly import build_model

    original = parse((EXAMPLES / "attention.loop").read_text(), "attention.loop").kernels[0]
    renamed = distinct_loop_names(original)
    levels = [{"level": "DRAM", "order": ["i", "j_2", "j", "j_3"]}, {"level": "GLB", "tile": {"i": 2}},
              {"level": "RF", "tile": {"i": 1, "j": 1, "j_2": 1, "j_3": 1}}]
    m = mapping_from_dict({"nest": 1, "levels": levels}, kernel=renamed, arch=toy)
    data = json.loads(json.dumps(in_original_terms(original, renamed, m).to_dict()))
    assert data["schedule"] == {"p_exp": {"i": "i", "j_2": "j"}, "z_acc": {"i": "i", "j_2": "j"},
                                "p_norm": {"i": "i", "j_3": "j"}}
    back = mapping_from_dict(data, kernel=original, arch=toy)
    assert back.loops == m.loops and back.levels == m.levels
    a = mapped_schedule(build_model(renamed), m)
    b = mapped_schedule(build_model(original), back)
    assert a.dims == b.dims
    for (sa, ma), (sb, mb) in zip(a.maps, b.maps):
        assert sa == sb and str(ma).replace("_2", "").replace("_3", "") == str(mb).replace("_2", "").replace("_3", "")
    # no loop twice in any level's order
    for lv in data["levels"]:
        assert len(lv["order"]) == len(set(lv["order"]))


def test_isl_candidate_in_original_terms_is_legal_on_the_kernel_as_written():
    """An isl schedule of the renamed jacobi-2d, said of the file as written (i_2 -> i), reads back legal."""
    from polymap.machine.presets import load_architecture
    from polymap.mapping.renamed import in_original_terms
    from polymap.passes.frontend.rename import distinct_loop_names
    from polymap.passes.legality.legality import check_mapping
    from polymap.passes.search.isl_schedule import isl_mappings
    from polymap.poly import build_model

    host = load_architecture("host")
    original = parse((EXAMPLES / "polybench" / "jacobi-2d.loop").read_text(), "jacobi-2d.loop").kernels[0]
    renamed = distinct_loop_names(original)
    (_, m), *_ = isl_mappings(build_model(renamed), 0, host, {})
    data = json.loads(json.dumps(in_original_terms(original, renamed, m).to_dict()))
    # the two sweeps fused and skewed, distributed over the innermost loop (to_a after to_b)
    assert data["schedule"]["to_a"] == {"s0": "t", "s1": "2*t + i + 1", "s2": "1", "s3": "2*t + j + 1"}
    back = mapping_from_dict(data, kernel=original, arch=host, source_name="j.json")
    assert check_mapping(build_model(original), back).legal
