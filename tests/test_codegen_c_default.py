"""``compile``'s default choice on every example and PolyBench kernel, and where OpenMP goes.

Every kernel: the mapping choice of :mod:`polymap.passes.search.choice` at small
sizes, then the C and NumPy code against the reference execution (an
independent interpreter of the IR). OpenMP placement is checked on the
printed C (one region per nest, hoisted out of time loops, none for small
work) and the hoisted regions are run against the reference with every
loop shared out (no sizes given: nothing pruned).
"""
from __future__ import annotations

import os
import re
from functools import lru_cache
from pathlib import Path

import numpy as np
import pytest

from polymap import ir
from polymap.machine.presets import load_architecture
from polymap.codegen.c.emitter import c_signature, emit_c
from polymap.passes.counting.execution import loop_coefficient
from polymap.codegen.verify import needs_well_conditioned, verify
from polymap.driver import load_program
from polymap.mapping.model import nest_loops
from polymap.passes.search.choice import ChoiceOptions, choose, choose_nest, original_mapping
from polymap.poly import build_model

from c_run import run_c

ROOT = Path(__file__).parent.parent
EXAMPLES = sorted((ROOT / "examples").glob("*.loop")) + sorted((ROOT / "examples" / "polybench").glob("*.loop"))
os.environ.setdefault("OMP_NUM_THREADS", "2")
HOST = load_architecture("host")


def _small(kernel) -> dict[str, int]:
    return {p.name: min(p.default or 7, 7) for p in kernel.params}


def _nest_cases():
    """(example, nest) pairs: one test per nest keeps each under a few seconds."""
    from polymap.passes.frontend.rename import distinct_loop_names

    for path in EXAMPLES:
        kernel = load_program(path).kernels[0]
        for nest in range(len(distinct_loop_names(kernel).nests())):
            yield pytest.param(path, nest, id=f"{path.relative_to(ROOT / 'examples')}-nest{nest}")


@lru_cache(maxsize=None)
def _renamed(path: Path):
    from polymap.passes.frontend.rename import distinct_loop_names

    kernel = distinct_loop_names(load_program(path).kernels[0])
    return kernel, build_model(kernel)


@pytest.mark.parametrize("path, nest", list(_nest_cases()))
def test_default_choice_matches_reference(path: Path, nest: int):
    """The nest's chosen mapping (the rest in original order): C and NumPy equal the reference."""
    kernel, model = _renamed(path)
    params = _small(kernel)
    if not nest_loops(kernel, nest):
        return
    nc = choose_nest(model, nest, HOST, params, options=ChoiceOptions(search_evaluations=0))
    assert nc.chosen.legal and nc.chosen is nc.candidates[0]
    assert any(c.source == "original order" for c in nc.candidates)
    mappings = () if nc.chosen.mapping is None else (nc.chosen.mapping,)
    result = verify(kernel, params, targets=("c", "numpy"), mapping=mappings, model=model,
                    raise_on_failure=False)
    assert result.passed, f"{nc.chosen.source}:\n{result.summary()}"


def test_choose_renames_shared_loop_names_and_keeps_the_signature():
    kernel = load_program(ROOT / "examples" / "polybench" / "jacobi-2d.loop").kernels[0]
    choice = choose(kernel, HOST, {"TSTEPS": 2, "N": 6}, options=ChoiceOptions(search_evaluations=0))
    assert dict(choice.renamed) == {0: ("i", "j")}
    assert c_signature(choice.kernel) == c_signature(kernel)
    assert len(set(nest_loops(choice.kernel, 0))) == 5


@pytest.mark.parametrize("name, params", [("jacobi-2d", {"TSTEPS": 4, "N": 23}),
                                          ("fdtd-2d", {"TMAX": 3, "NX": 17, "NY": 19}),
                                          ("heat-3d", {"TSTEPS": 3, "N": 9})])
def test_time_loop_gets_one_hoisted_region_and_matches(name, params):
    kernel = load_program(ROOT / "examples" / "polybench" / f"{name}.loop").kernels[0]
    src = emit_c(kernel, build_model(kernel), None)  # no sizes: every parallel loop shared out
    body = src[src.index("\nvoid"):]
    assert body.count("#pragma omp parallel") == 1 and "omp parallel for" not in body
    # the region opens on the time loop (named after the kernel's iterator), the sweeps are
    # worksharing loops inside it
    assert re.search(r"#pragma omp parallel\n\s*for \(long t = [01]; t <=? T", body)
    assert body.count("#pragma omp for") >= 2
    for tensor, (got, want) in run_c(kernel, src, params, well_conditioned=needs_well_conditioned(kernel)).items():
        np.testing.assert_allclose(got, want, rtol=1e-12, err_msg=tensor)


def test_small_work_gets_no_region_and_large_work_does():
    kernel = load_program(ROOT / "examples" / "polybench" / "jacobi-2d.loop").kernels[0]
    model = build_model(kernel)
    small = emit_c(kernel, model, None, params={"TSTEPS": 10, "N": 30})
    large = emit_c(kernel, model, None, params={"TSTEPS": 10, "N": 1300})
    assert "omp parallel" not in small and "omp for" not in small
    assert large.count("#pragma omp parallel") == 1


def test_atax_inner_loops_stay_sequential_at_large_sizes():
    # y[j] += ... inside the i loop: only the inner j loop is parallel, 2100 iterations per barrier
    kernel = load_program(ROOT / "examples" / "polybench" / "atax.loop").kernels[0]
    src = emit_c(kernel, build_model(kernel), None, params={"M": 1900, "N": 2100})
    assert "omp parallel" not in src


def test_gemm_register_tiles_one_region_per_nest():
    kernel = load_program(ROOT / "examples" / "gemm.loop").kernels[0]
    params = {"M": 600, "N": 512, "K": 300}
    choice = choose(kernel, HOST, params, options=ChoiceOptions(search_evaluations=0))
    assert choice.nests[0].chosen.source.startswith("register tiles")
    src = emit_c(choice.kernel, choice.model, choice.mappings, params=params)
    # one region: C = 0 is folded into the register tiles' first block of k (no pass of its own)
    assert src.count("#pragma omp parallel for") == 1 and "omp for" not in src.replace("omp parallel for", "")
    assert "polymap_acc_" in src and "polymap_first" in src


def test_original_mapping_counts_the_original_order():
    kernel = load_program(ROOT / "examples" / "gemm.loop").kernels[0]
    m = original_mapping(kernel, 0, HOST)
    assert all(t == 1 for lv in m.levels for t in lv.tile) and m.levels[0].order == m.loops


J, I, N = ir.Var("j"), ir.Var("i"), ir.Var("N")


@pytest.mark.parametrize("expr, coeff", [
    (J, 1), (ir.BinOp("-", J, ir.Const(1)), 1), (ir.BinOp("+", ir.Const(1), J), 1),
    (ir.BinOp("*", ir.Const(2), J), 2), (ir.BinOp("+", I, N), 0), (ir.BinOp("*", J, J), None),
    (ir.Neg(J), -1), (ir.BinOp("-", J, J), 0)])
def test_loop_coefficient(expr, coeff):
    assert loop_coefficient(expr, "j") == coeff
