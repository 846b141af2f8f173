"""Scalar expansion (polymap/passes/frontend/expansion.py): exact, general, refused when a value crosses the loop.

The expanded kernel must compute what the original computes, bit for bit (checked by running both in the
reference interpreter, one statement instance at a time, and by brute force over the execution trace: every
read of an expanded scalar, in the original program, reads a value written at the same iteration of the loop).
"""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

from polymap import ir
from polymap.driver import load_program, parse
from polymap.machine.presets import load_architecture
from polymap.passes.frontend.expansion import expand_scalars, expanded, expansions
from polymap.passes.legality.legality import check_mapping
from polymap.passes.search.interchange import interchange_mapping
from polymap.poly import build_model
from polymap.reference import execute
from polymap.tensors import random_inputs

ROOT = Path(__file__).parent.parent
POLYBENCH = sorted((ROOT / "examples" / "polybench").glob("*.loop"))


def _kernel(src: str) -> ir.Kernel:
    return parse(src, "t.loop").kernels[0]


def _same_results(k: ir.Kernel, params: dict[str, int], seed: int = 0) -> None:
    e, _, _ = expanded(k)
    ins = random_inputs(k, params, seed=seed)
    want = execute(k, ins, params, vectorize=False)
    got = execute(e, ins, params, vectorize=False)
    for name, arr in want.items():
        assert np.array_equal(arr, got[name], equal_nan=True), name


def _trace_flows(k: ir.Kernel, params: dict[str, int], scalar: str) -> list[tuple[dict, dict]]:
    """Brute force: run the loops in Python; per read of ``scalar``, (writer's iterators, reader's iterators)."""
    flows = []
    last: list[dict | None] = [None]

    def ev(e: ir.Expr, env: dict) -> int:
        if isinstance(e, ir.Const):
            return int(e.value)
        if isinstance(e, ir.Var):
            return env[e.name]
        if isinstance(e, ir.BinOp):
            a, b = ev(e.lhs, env), ev(e.rhs, env)
            return {"+": a + b, "-": a - b, "*": a * b, "/": a // b, "%": a % b}[e.op]
        if isinstance(e, ir.Neg):
            return -ev(e.operand, env)
        raise AssertionError(e)

    def walk(nodes: tuple, env: dict) -> None:
        for n in nodes:
            if isinstance(n, ir.Loop):
                lo = max(ev(x, env) for x in n.lower)
                hi = min(ev(x, env) for x in n.upper)
                for v in range(lo, hi, n.step):
                    walk(n.body, {**env, n.var: v})
            elif isinstance(n, ir.Assign):
                reads = [r for r in ir.subexpressions(n.value) if isinstance(r, ir.Ref) and r.tensor == scalar]
                if reads or (n.target.tensor == scalar and n.is_reduction):
                    flows.append((last[0], dict(env)))
                if n.target.tensor == scalar:
                    last[0] = dict(env)
            else:
                raise AssertionError("no conditions in these kernels")

    walk(k.body, dict(params))
    return flows


def test_symm_temp2_is_expanded_along_j_and_frees_the_interchange():
    k = load_program(ROOT / "examples" / "polybench" / "symm.loop").kernels[0]
    e, model, done = expanded(k)
    assert done == (("temp2", "j"),)
    assert e.decl("temp2").shape == (ir.Var("N", e.decl("temp2").shape[0].loc),)
    # the order i, k, j (every reference unit stride in j) is illegal while temp2 is one scalar
    arch = load_architecture("host")
    order = ("i", "k", "j")
    assert not check_mapping(build_model(k), interchange_mapping(build_model(k), 0, arch, order)).legal
    assert check_mapping(model, interchange_mapping(model, 0, arch, order)).legal
    # brute force: every read of temp2 reads a value written at the same (i, j)
    params = {"M": 5, "N": 4}
    flows = _trace_flows(k, params, "temp2")
    assert flows and all(w is not None and (w["i"], w["j"]) == (r["i"], r["j"]) for w, r in flows)
    _same_results(k, {"M": 9, "N": 7})


@pytest.mark.parametrize("path", POLYBENCH, ids=lambda p: p.stem)
def test_every_polybench_kernel_computes_the_same_after_expansion(path):
    k = load_program(path).kernels[0]
    params = {p.name: p.default for p in k.params}
    _same_results(k, params)


CARRIED = """
kernel t(M, N) {
  in A[M, N] : f64
  out B[M, N] : f64
  local s : f64
  for i in 0..M {
    s = 0.0
    for j in 0..N {
      s += A[i, j]
      B[i, j] = s
    }
  }
}
"""


def test_a_value_carried_across_a_loop_is_not_expanded_along_it():
    # s's running sum passes from j to j + 1: only i (where s restarts) may index it
    k = _kernel(CARRIED)
    assert expansions(build_model(k)) == {"s": "i"}
    _same_results(k, {"M": 4, "N": 6})
    # with the restart outside i, the sum crosses i too: nothing to expand
    k2 = _kernel(CARRIED.replace("  for i in 0..M {\n    s = 0.0\n", "  s = 0.0\n  for i in 0..M {\n"))
    assert expansions(build_model(k2)) == {}


def test_a_read_of_the_undefined_initial_value_blocks_expansion():
    # the first read of s (i = 0) has no writer: expanding would change which undefined value it reads
    k = _kernel("""
kernel t(N) {
  in A[N] : f64
  out B[N] : f64
  local s : f64
  for i in 0..N {
    B[i] = s
    s = A[i]
  }
}
""")
    assert expansions(build_model(k)) == {}


def test_loops_not_from_zero_or_triangular_are_not_used():
    src = """
kernel t(N) {
  in A[N, N] : f64
  out B[N, N] : f64
  local s : f64
  for i in %s {
    for j in %s {
      s = A[i, j] * 2.0
      B[i, j] = s + 1.0
    }
  }
}
"""
    assert expansions(build_model(_kernel(src % ("0..N", "0..N")))) == {"s": "j"}
    assert expansions(build_model(_kernel(src % ("0..N", "0..i")))) == {"s": "i"}  # j's extent depends on i
    assert expansions(build_model(_kernel(src % ("1..N", "0..i")))) == {}
    k = _kernel(src % ("0..N", "0..i"))
    _same_results(k, {"N": 6})


@settings(max_examples=25, deadline=None)
@given(init_at=st.sampled_from(["outer", "middle", "none"]), carry=st.booleans(), m=st.integers(1, 4),
       n=st.integers(1, 4))
def test_expansion_matches_brute_force_dataflow(init_at, carry, m, n):
    # a family of kernels where s is (re)initialised at different depths and may or may not carry a value
    # across j; the expansion (if any) must be along a loop no traced value crosses, and results equal
    init = "s = A[0, 0]\n"
    body = ("s = s + A[i, j]\n" if carry else "s = A[i, j] * 3.0\n") + "B[i, j] = s\n"
    src = "kernel t(M, N) {\n in A[M, N] : f64\n out B[M, N] : f64\n local s : f64\n"
    src += init if init_at == "outer" else ""
    src += "for i in 0..M {\n" + (init if init_at == "middle" else "") + "for j in 0..N {\n" + body + "}\n}\n}\n"
    k = _kernel(src)
    params = {"M": m, "N": n}
    along = expansions(build_model(k))
    flows = _trace_flows(k, params, "s")
    if any(w is None for w, _ in flows):
        assert along == {}
    if "s" in along:
        x = along["s"]
        assert all(w[x] == r[x] for w, r in flows)
        assert expand_scalars(k, along).decl("s").shape
    _same_results(k, params)


# --------------------------------------------------------------------------- the mapping records the expansion

def _cli(capsys: pytest.CaptureFixture, *argv: object) -> tuple[int, str, str]:
    from polymap.cli import main

    rc = main([str(a) for a in argv])
    out = capsys.readouterr()
    return rc, out.out, out.err


def test_a_mapping_that_expands_means_the_same_to_check_cost_transform_and_compile(
        tmp_path: Path, capsys: pytest.CaptureFixture):
    """symm's order i, k, j is legal only with temp2[j]: a mapping file saying ``expand: {temp2: j}`` is
    legal for check, counted by cost, printed by transform and compiled by compile --mapping (whose code
    the reference execution of the kernel as written checks); without ``expand`` check refuses it."""
    import json

    path = ROOT / "examples" / "polybench" / "symm.loop"
    k = load_program(path).kernels[0]
    arch = load_architecture("host")
    expanded_kernel, model, done = expanded(k)
    mp = interchange_mapping(model, 0, arch, ("i", "k", "j"))
    data = mp.to_dict()
    data["expand"] = dict(done)
    with_expand, without = tmp_path / "with.json", tmp_path / "without.json"
    with_expand.write_text(json.dumps(data))
    without.write_text(json.dumps(mp.to_dict()))
    sizes = ["-D", "M=7", "-D", "N=9"]
    rc, out, err = _cli(capsys, "check", path, "--mapping", with_expand, *sizes)
    assert rc == 0, out + err
    rc, out, err = _cli(capsys, "check", path, "--mapping", without, *sizes)
    assert rc == 1, out + err  # the kernel as written: temp2 is one scalar
    rc, out, err = _cli(capsys, "cost", path, "--arch", "host", "--mapping", with_expand, *sizes, "--json")
    assert rc == 0, err
    counted = json.loads(out)
    # the counts of temp2[j], as a step-by-step simulation of the expanded kernel under the mapping counts them
    from simulator import simulate

    sim = simulate(expanded_kernel, mp, {"M": 7, "N": 9})
    for level, want in zip(counted["levels"], sim["levels"]):
        for tensor, counts in level["tensors"].items():
            assert counts == want["tensors"][tensor], (level["name"], tensor)
    assert any(lv["tensors"].get("temp2", {}).get("writebacks") == 9 for lv in counted["levels"])  # 9, not 1
    rc, out, err = _cli(capsys, "transform", path, "--mapping", with_expand, *sizes)
    assert rc == 0, err
    printed = parse(out, "t.loop").kernels[0]
    assert printed.decl("temp2").shape  # the printed kernel holds the array it maps
    ins = random_inputs(k, {"M": 7, "N": 9}, seed=3)
    want = execute(k, ins, {"M": 7, "N": 9}, vectorize=False)
    got = execute(printed, ins, {"M": 7, "N": 9}, vectorize=False)
    assert np.array_equal(want["C"], got["C"])
    rc, out, err = _cli(capsys, "compile", path, "--mapping", with_expand, "-o", tmp_path / "out", *sizes)
    assert rc == 0, err  # verified against the reference execution of the kernel as written
    assert json.loads((tmp_path / "out" / "symm.json").read_text())["mappings"][0]["expand"] == {"temp2": "j"}


def test_compile_records_the_expansion_it_mapped(tmp_path: Path, capsys: pytest.CaptureFixture):
    """NAME.json's mappings say ``expand`` when the choice expanded a scalar (gemm_scalar_acc's t[j]), and
    every command reading it accepts the chosen mapping (before, transform refused it as illegal)."""
    import json

    path = ROOT / "examples" / "gemm_scalar_acc.loop"
    sizes = ["-D", "M=9", "-D", "N=20", "-D", "K=5"]
    rc, out, err = _cli(capsys, "compile", path, "-o", tmp_path, "--target", "c", "--search-evaluations", "0",
                        *sizes)
    assert rc == 0, err
    doc = json.loads((tmp_path / "gemm_scalar_acc.json").read_text())
    assert doc["choice"]["expanded"] == {"t": "j"}
    assert all(m["expand"] == {"t": "j"} for m in doc["mappings"])
    name_json = tmp_path / "gemm_scalar_acc.json"
    for argv in (("check",), ("transform",), ("cost", "--arch", "host")):
        rc, out, err = _cli(capsys, *argv[:1], path, *argv[1:], "--mapping", name_json, *sizes)
        assert rc == 0, (argv, out, err)


@pytest.mark.parametrize("expand,says", [({"temp2": "i"}, "along loop 'j'"),
                                         ({"C": "j"}, "not a local scalar"),
                                         (["temp2"], "SCALAR: LOOP")])
def test_an_expansion_that_could_change_the_results_is_a_located_refusal(
        tmp_path: Path, capsys: pytest.CaptureFixture, expand: object, says: str):
    import json

    path = ROOT / "examples" / "polybench" / "symm.loop"
    k = load_program(path).kernels[0]
    model = build_model(k)
    data = interchange_mapping(model, 0, load_architecture("host"), ("i", "j", "k")).to_dict()
    data["expand"] = expand
    f = tmp_path / "m.json"
    f.write_text(json.dumps(data))
    rc, out, err = _cli(capsys, "check", path, "--mapping", f, "-D", "M=4", "-D", "N=5")
    assert rc == 2 and says in err and "m.json" in err, err
    assert "Traceback" not in err
