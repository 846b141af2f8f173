"""compile verifies what it writes, at sizes that cut every tile, and never writes failed code as good;
the C file keeps the original rounding (issue 14: gramschmidt, durbin)."""
from __future__ import annotations

import json
import threading
from pathlib import Path

import numpy as np
import pytest

import polymap.codegen.c.emitter as c_emitter
from polymap.cli import main
from polymap.codegen.build import CallThread, load_kernel
from polymap.codegen.c.emitter import emit_c
from polymap.codegen.verify_sizes import edge_values, loop_params, plan_sizes, verification_sizes, verify_written
from polymap.driver import load_program
from polymap.mapping.model import LevelMapping, Mapping, nest_loops, nest_tensors
from polymap.poly import build_model
from polymap.reference import execute

ROOT = Path(__file__).resolve().parent.parent
EXAMPLES = ROOT / "examples"


def kernel_of(name: str):
    return load_program(EXAMPLES / f"{name}.loop").kernels[0]


def tiled(kernel, tile: dict) -> Mapping:
    loops = nest_loops(kernel, 0)
    keep = nest_tensors(kernel, 0)
    return Mapping(kernel.name, 0, loops, (
        LevelMapping("DRAM", (None,) * len(loops), tuple(loops), (), keep),
        LevelMapping("GLB", tuple(tile.get(x) for x in loops), tuple(loops), (), keep)))


def test_sizes_cut_every_tile_of_every_parameter():
    k = kernel_of("gemm")
    m = tiled(k, {"i": 8, "j": 5, "k": 4})
    vecs = verification_sizes(k, build_model(k), (m,), {"M": 500, "N": 500, "K": 500})
    for p, t in (("M", 8), ("N", 5), ("K", 4)):
        seen = {v[p] for v in vecs}
        assert {t - 1, t, t + 1, 2 * t + 1, 1} <= seen, (p, seen)
    assert all(v["M"] <= 500 for v in vecs) and len(vecs) < 60


def test_every_edge_value_is_reached_in_few_vectors_within_the_instance_limit():
    """Edge values of different parameters share vectors; a large tile's edges are reached with the other
    parameters shrunk instead of being dropped for the instance limit."""
    k = kernel_of("gemm")
    m = tiled(k, {"i": 8, "j": 5, "k": 300})
    params = {"M": 500, "N": 500, "K": 700}
    plan = plan_sizes(k, build_model(k), (m,), params, max_instances=20_000)
    assert not plan.unreached
    seen = {p: {v[p] for v in plan.vectors} for p in params}
    assert {1, 2, 3, 7, 8, 9, 17, 5} <= seen["M"] and {4, 5, 6, 11, 3} <= seen["N"]
    assert {299, 300, 301, 601, 151} <= seen["K"]  # each alone over 20,000 instances at the base M = N = 19
    assert all(v["M"] * v["N"] * v["K"] + v["M"] * v["N"] <= 20_000 for v in plan.vectors)  # gemm: acc + init
    values = edge_values(k, (m,), params)
    assert len(plan.vectors) <= max(len(vs) for vs in values.values()) + 1 < sum(len(vs) for vs in values.values())


def test_a_remembered_mappings_sizes_end_every_tile_level_in_a_partial_tile():
    """The "partial" plan of a cache hit: no tile of a parameter's loops divides any of its values over 1, each
    tile under the parameter is run full then partial in some vector, 1 is run, and it takes fewer vectors
    than every edge. i's tiles 4 and 5: 4 + 1 = 5 is a multiple of 5, so the value after 4 is 6."""
    k = kernel_of("gemm")
    maps = (tiled(k, {"i": 4, "j": 7, "k": 300}), tiled(k, {"i": 5, "j": 7}))
    params = {"M": 500, "N": 500, "K": 700}
    tiles = {"M": (4, 5), "N": (7,), "K": (300,)}
    model = build_model(k)
    plan = plan_sizes(k, model, maps, params, edges="partial", max_instances=200_000)
    assert not plan.unreached
    for vec in plan.vectors:
        assert all(vec[p] == 1 or all(vec[p] % t for t in ts) for p, ts in tiles.items()), vec
        assert vec["M"] * vec["N"] * vec["K"] + vec["M"] * vec["N"] <= 200_000 and vec["K"] <= 700
    for p, ts in tiles.items():
        assert any(vec[p] == 1 for vec in plan.vectors), p
        assert all(any(vec[p] > t for vec in plan.vectors) for t in ts), p  # a full tile, then a partial one
    assert 6 in {vec["M"] for vec in plan.vectors} and 5 not in {vec["M"] for vec in plan.vectors}
    every = plan_sizes(k, model, maps, params, max_instances=200_000)
    assert len(plan.vectors) < len(every.vectors)
    with pytest.raises(ValueError):
        plan_sizes(k, model, maps, params, edges="some")


def test_verification_calls_the_c_code_on_one_thread_that_ends_after(monkeypatch):
    """Every size's C call runs on one thread (one OpenMP team, not one per call), not the main one, and
    the thread is gone when verification returns; a failing call raises in the caller."""
    seen = []

    class Spy:
        def call_here(self, arrays, params):
            seen.append(threading.get_ident())
            if params.get("fail"):
                raise ValueError("the kernel failed")

    with CallThread() as thread:
        for n in range(3):
            thread.call(Spy(), {}, {"N": n})
        with pytest.raises(ValueError):
            thread.call(Spy(), {}, {"fail": 1})
    assert len(set(seen)) == 1 and seen[0] != threading.get_ident()
    assert not [t for t in threading.enumerate() if t.name.startswith("polymap kernel")]
    k = kernel_of("gemm")
    m = tiled(k, {"i": 8, "j": 5, "k": 4})
    model = build_model(k)
    result = verify_written(k, {"M": 40, "N": 30, "K": 20}, {"c": emit_c(k, model, (m,))}, model=model,
                            mappings=(m,), edges="partial")
    assert result.passed and result.edges == "partial" and len(result.results) >= 2
    assert not [t for t in threading.enumerate() if t.name.startswith("polymap kernel")]


def test_sizes_stay_in_the_context_and_below_the_compiled_sizes():
    k = kernel_of("trmv")
    m = tiled(k, {"i": 16, "j": 16})
    vecs = verification_sizes(k, build_model(k), (m,), {"N": 20})
    assert vecs and all(1 <= v["N"] <= 20 for v in vecs)
    assert loop_params(k)["j"] == {"N"}  # through i


def test_gramschmidt_c_rounds_as_the_original_program():
    # M < N: the columns past M are round-off, amplified to O(1); FMA contraction showed as 1.01 relative
    k = kernel_of("polybench/gramschmidt")
    fn = load_kernel(emit_c(k, build_model(k)), k)
    rng = np.random.default_rng(0)
    params = {"M": 20, "N": 30}
    a = rng.random((20, 30))
    want = execute(k, {"A": a}, params)
    got = {"A": a.copy(), "R": np.zeros((30, 30)), "Q": np.zeros((20, 30))}
    fn(got, params)
    for name in ("A", "R", "Q"):
        assert np.array_equal(got[name], want[name]), name


def test_reassociation_is_the_users_choice():
    k = kernel_of("gemm")
    assert "fp-contract=off" in emit_c(k, build_model(k))
    assert "fp-contract" not in emit_c(k, build_model(k), reassociate=True)


def test_compile_reports_what_it_checked(tmp_path, capsys):
    rc = main(["compile", str(EXAMPLES / "gemm.loop"), "-D", "M=40", "-D", "N=30", "-D", "K=20",
               "-o", str(tmp_path)])
    out, err = capsys.readouterr()
    assert rc == 0, err
    assert "size vectors exercising every tile edge" in out
    doc = json.loads((tmp_path / "gemm.json").read_text())["verification"]
    assert doc["passed"] and doc["sizes_checked"] and not doc["full_size"]


def test_code_that_fails_verification_is_not_written_as_good(tmp_path, capsys, monkeypatch):
    real = c_emitter.emit_c

    def broken(*args, **kwargs):  # a miscompile: C starts at 1, not 0
        return real(*args, **kwargs).replace("= 0.0f;  /* init */", "= 1.0f;  /* init */")

    monkeypatch.setattr(c_emitter, "emit_c", broken)
    rc = main(["compile", str(EXAMPLES / "gemm.loop"), "-D", "M=16", "-D", "N=16", "-D", "K=16",
               "-o", str(tmp_path), "--target", "c"])
    out, err = capsys.readouterr()
    assert rc == 1
    assert "differs from the reference" in out and "gemm.unverified.c" in out
    assert not (tmp_path / "gemm.c").exists() and (tmp_path / "gemm.unverified.c").exists()
