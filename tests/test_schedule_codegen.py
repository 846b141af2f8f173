"""Code of schedule mappings: C and NumPy from ISL's AST verified against the reference, and
``transform``'s ``.loop`` text parses again and computes the same results."""
from __future__ import annotations

import numpy as np
import pytest

from pathlib import Path

from polymap.codegen.ast_build import LoopAnalysis, build_ast, kernel_schedule, walk
from polymap.codegen.c.emitter import emit_c
from polymap.codegen.loop_emitter import emit_loop
from polymap.codegen.verify import random_inputs, verify
from polymap.driver import parse
from polymap.islcheck import isl
from polymap.machine.presets import load_architecture
from polymap.passes.frontend.rename import distinct_loop_names
from polymap.passes.legality.legality import check_mapping
from polymap.passes.search.isl_schedule import isl_mappings
from polymap.poly import build_model
from polymap.reference import execute
from test_schedule_kernels import CASES, _case

ROOT = Path(__file__).resolve().parent.parent
LEGAL = [n for n in sorted(CASES) if CASES[n][5]]


def _with_params(kernel, params):
    import dataclasses

    return dataclasses.replace(kernel, params=tuple(
        dataclasses.replace(p, default=params.get(p.name, p.default)) for p in kernel.params))


@pytest.mark.parametrize("name", LEGAL)
def test_c_and_numpy_verify(name):
    k, m, params, _ = _case(name)
    result = verify(k, params, targets=("c", "numpy"), mapping=m, model=build_model(k))
    assert result.passed


@pytest.mark.parametrize("name", LEGAL)
def test_transform_parses_again_and_computes_the_same(name):
    k, m, params, _ = _case(name)
    shown = _with_params(k, params)
    text = emit_loop(shown, build_model(shown), m)
    again = parse(text, "transformed.loop").kernels[0]
    inputs = random_inputs(k, params, seed=1)
    want = execute(k, inputs, params)
    got = execute(again, inputs, params)
    for t in want:
        np.testing.assert_allclose(got[t], want[t], rtol=1e-12, atol=1e-12)


# ---- isl's candidates: fused statements distributed over the innermost loop, lock-step SIMD

ISL_CASES = {  # sizes the 8 x 64 and 16 x 32 tiles do not divide, a few tiles and diagonals each way
    "jacobi-1d": {"TSTEPS": 11, "N": 37},
    "jacobi-2d": {"TSTEPS": 9, "N": 23},
    "seidel-2d": {"TSTEPS": 9, "N": 21},
    "heat-3d": {"TSTEPS": 5, "N": 9},
    "fdtd-2d": {"TMAX": 9, "NX": 13, "NY": 17},
    "lu": {"N": 71},  # its points walked j innermost (point_walks), 8 x 64 x 64 tiles, partial ones too
}


def _isl_candidates(name):
    k = distinct_loop_names(parse((ROOT / "examples" / "polybench" / f"{name}.loop").read_text(), f"{name}.loop").kernels[0])
    model = build_model(k)
    return k, model, isl_mappings(model, 0, load_architecture("host"), {})


@pytest.mark.parametrize("name", sorted(ISL_CASES))
def test_isl_candidates_verify_in_c(name):
    """Every isl candidate is legal (exact check) and its C, with ISL's separated innermost loops
    and ``omp simd`` where lock-step is legal, equals the reference."""
    k, model, found = _isl_candidates(name)
    assert found
    for source, m in found:
        assert check_mapping(model, m).legal, source
        assert verify(k, ISL_CASES[name], targets=("c",), mapping=m, model=model).passed, source


def test_fused_jacobi_is_distributed_and_vectorised():
    """jacobi-2d's sweeps, fused and skewed, run each in its own innermost loop under ``omp simd``
    (ISL separates the loop: no statement guard is left inside it)."""
    k, model, found = _isl_candidates("jacobi-2d")
    source, m = found[0]
    assert source.endswith("distributed")
    assert {e.exprs[2] for e in m.schedule} == {"0", "1"}
    code = emit_c(k, model, m)
    lines = code.splitlines()
    inner = [n for n, line in enumerate(lines) if line.strip().startswith("for (long s3 ")]
    assert inner
    for n in inner:
        assert lines[n - 1].strip() == "#pragma omp simd"
        body = lines[n + 1].strip()
        assert not body.startswith("if") and body.endswith(("/* to_b */", "/* to_a */"))


def _own_walk(m):
    """``m`` with the points of a tile walked in the schedule's own order (no wavefront at the
    level above the last, where :func:`point_walks` puts the diagonals)."""
    import dataclasses

    levels = list(m.levels)
    levels[-2] = dataclasses.replace(levels[-2], order=m.loops, wavefront=())
    return dataclasses.replace(m, levels=tuple(levels))


def _innermost_loops(model, m):
    ks = kernel_schedule(model, [m])
    root = build_ast(model, ks.union, separate=ks.separate)
    analysis = LoopAnalysis(ks)
    inner = [analysis.info(n) for n in walk(root) if n.get_type() == isl.ast_node_type.for_]
    return analysis, [i for i in inner if i.innermost and i.rank >= 0]


def test_lockstep_refuses_a_carried_dependence_inside_one_statement():
    """seidel-2d's innermost point loop, in the schedule's own order, reads what the previous
    iteration of the same statement wrote: lock-step would read the old value, so it gets no
    ``omp simd``; jacobi-2d's distributed loops carry nothing and get it."""

    for name, want in (("seidel-2d", False), ("jacobi-2d", True)):
        k, model, found = _isl_candidates(name)
        analysis, inner = _innermost_loops(model, _own_walk(found[0][1]))
        assert inner
        assert all((i.parallel or analysis.lockstep(i.rank, i.dim)) == want for i in inner), name


def test_seidel_points_are_walked_by_diagonals_and_vectorised():
    """isl's seidel-2d candidates walk each tile's points by diagonals of the last two band loops:
    their innermost loop then carries no conflict (ISL's own parallelism test on the AST, not the
    rule that chose the walk), gets ``omp simd``, and the C still equals the reference."""
    k, model, found = _isl_candidates("seidel-2d")
    for source, m in found:
        assert source.endswith("points by diagonals s1 + s2"), source
        assert m.levels[-2].wavefront == ("s1", "s2")
        analysis, inner = _innermost_loops(model, m)
        assert inner and all(i.parallel for i in inner)
        lines = emit_c(k, model, m).splitlines()
        loops = [n for n, line in enumerate(lines) if line.strip().startswith("for (long s2 ")]
        assert loops and all(lines[n - 1].strip() == "#pragma omp simd" for n in loops)
        # the tiles of one diagonal are dealt round-robin (the edges' partial tiles spread out)
        diagonal = [n for n, line in enumerate(lines) if line.strip().startswith("for (long s1_LLC ")]
        assert diagonal and all(lines[n - 1].strip() == "#pragma omp for schedule(static, 1)" for n in diagonal)
        assert verify(k, {"TSTEPS": 7, "N": 19}, targets=("c",), mapping=m, model=model).passed
    # single points on a diagonal, if ever shared out, go in chunks (one point per turn would share lines)
    k, m, params, _ = _case("seidel-2d points by diagonals")
    code = emit_c(k, build_model(k), m)
    assert "#pragma omp for" in code and "static, 1" not in code


# ---- the AST build spared the time dimensions every instance shares (issue 9: compile's time)

def _full_ast(model, schedule, separate=(), params=None):
    """ISL's AST of the whole time vector, every dimension given to ISL (what :func:`build_ast` built
    before it dropped the dimensions fixed for every instance)."""
    from polymap.poly import param_set

    context = model.context
    if params is not None:
        context = context.intersect(param_set(model, params))
        schedule = schedule.intersect_params(param_set(model, params))
    build = isl.AstBuild.from_context(context)
    if separate:
        maps = []
        schedule.foreach_map(maps.append)
        t = ", ".join(f"t{k}" for k in range(maps[0].dim(isl.dim_type.out)))
        options = "; ".join(f"[{t}] -> separate[{dim}] : t0 = {rank}" for rank, dim in separate)
        build = build.set_options(isl.UnionMap(f"{{ {options} }}"))
    return build.node_from_schedule_map(schedule)


@pytest.mark.slow  # ISL builds gramschmidt's whole vector: 5 s, more under load
def test_a_cut_vector_prints_the_whole_vectors_ast():
    """:func:`build_ast` cuts each run of time dimensions with one value for every instance (padding,
    shared text ranks) to one in a vector longer than ``CUT_DIMS``: gramschmidt's isl candidates (42
    dimensions, 11 varying: 5 s of ISL whole, 0.4 s cut) print the whole vector's AST, loop names
    ``c<k>`` of the full vector and separated loops included (symbolic sizes, as the printers ask)."""
    from polymap.codegen.ast_build import CUT_DIMS

    k = distinct_loop_names(parse((ROOT / "examples" / "polybench" / "gramschmidt.loop").read_text(),
                                  "gramschmidt.loop").kernels[0])
    model = build_model(k)
    source, m = isl_mappings(model, 0, load_architecture("host"), {})[0]
    ks = kernel_schedule(model, [m])
    assert ks.length > CUT_DIMS and ks.separate, "not cut: the test would check nothing"
    cut = build_ast(model, ks.union, separate=ks.separate).to_C_str()
    assert cut == _full_ast(model, ks.union, ks.separate).to_C_str(), source


@pytest.mark.parametrize("name", sorted(ISL_CASES))
def test_cut_vectors_compute_what_the_whole_ones_do(name, monkeypatch):
    """Cutting every vector (CUT_DIMS = 0, as for gramschmidt's long one): where ISL's code then
    differs from the whole vector's (heat-3d's bounds, lu's guards), it still computes the
    reference's results, and the AST walks the same statement instances."""
    from polymap.codegen import ast_build

    k, model, found = _isl_candidates(name)
    source, m = found[0]
    ks = kernel_schedule(model, [m])
    whole = build_ast(model, ks.union, separate=ks.separate)
    monkeypatch.setattr(ast_build, "CUT_DIMS", 0)
    cut = build_ast(model, ks.union, separate=ks.separate)
    users = lambda root: sorted(ast_build.user_statement(n)[0] for n in walk(root)  # noqa: E731
                                if n.get_type() == isl.ast_node_type.user)
    assert users(cut) == users(whole)
    assert verify(k, ISL_CASES[name], targets=("c", "numpy"), mapping=m, model=model).passed, source


@pytest.mark.parametrize("name", ["heat-3d", "fdtd-2d", "seidel-2d"])
def test_the_planners_walked_time_points_are_barvinoks_counts(name, monkeypatch):
    """The C planner counts a rescheduled nest's distinct time points (per statement set, on the first
    ``d`` dimensions) by walking them once at few instances: the same numbers as barvinok's count of
    each projection, and so the same plan and the same C."""
    from polymap.codegen.c import parallel

    k, model, found = _isl_candidates(name)
    params = ISL_CASES[name]
    source, m = found[0]
    ks = kernel_schedule(model, [m])
    assert ks.separate, "not rescheduled: nothing walked"
    root = build_ast(model, ks.union, separate=ks.separate)
    statements = tuple(s.name for s in model.statements)
    subsets = [statements] + [(s,) for s in statements]
    questions = [(sub, d) for sub in subsets for d in list(range(ks.length + 1)) + [None]]

    def answers():
        planner = parallel.Planner(LoopAnalysis(ks), params=params, opaque=lambda n, i: False)
        return [planner._points(sub, d) for sub, d in questions], planner

    walked, planner = answers()
    assert bool(planner._walked) == (name == "heat-3d")  # 7 varying dimensions; the others' 6 are counted
    monkeypatch.setattr(parallel, "WALK_DIMS", 0)
    walked, planner = answers()
    assert planner._walked, "not walked: the test would compare barvinok with itself"
    monkeypatch.setattr(parallel, "ENUMERATE_POINTS", -1)
    counted, planner = answers()
    assert not planner._walked
    assert walked == counted
    # a schedule is one-to-one: on every dimension, as many time points as instances
    full = questions.index((statements, ks.length))
    assert walked[full] == walked[full + 1] > 0
