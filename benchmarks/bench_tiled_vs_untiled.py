"""Tiled vs untiled C: conv2d, jacobi-2d and every PolyBench kernel, speedup per kernel and geometric mean.

    /tmp/venv/bin/python benchmarks/bench_tiled_vs_untiled.py [--kernels gemm syrk ...] [--threads 2]
                                                              [--scale 1.0] [--budget 20]

"original" is the same C emitter with ``mapping=None`` (the program's own
loop order, what PolyBench's C is) built sequential like the original
program, ``cc -O3 -march=native -shared -fPIC`` (no -fopenmp: its pragmas
are ignored); "polymap" what ``compile`` chooses on the ``host`` preset
(:func:`polymap.passes.search.choice.choose`, ``--search-evaluations`` per loop order),
emitted for the sizes at hand, built with ``-fopenmp`` too and run on
OMP_NUM_THREADS (2) threads. ``--repeat`` timed runs each, the median
reported. Sizes are
PolyBench/C 4.2.1's LARGE_DATASET (from the kernels' headers), times the
``--scale`` factor per dimension (time steps kept). Each version runs once
after a warm-up that is skipped for kernels whose original takes longer
than ``--budget`` seconds; the outputs of the two versions are compared.
A benchmark, not a test. Runtime is about 10 minutes at scale 1 on a
2-core machine.
"""
from __future__ import annotations

import argparse
import math
import os
import statistics
import time
from pathlib import Path

import numpy as np

from polymap.machine.presets import load_architecture
from polymap.codegen.build import load_kernel
from polymap.codegen.c.emitter import emit_c
from polymap.codegen.verify import needs_well_conditioned
from polymap.passes.search.choice import ChoiceOptions, choose
from polymap.driver import load_program
from polymap.poly import build_model
from polymap.tensors import allocate, random_inputs

ROOT = Path(__file__).resolve().parent.parent
POLYBENCH = ROOT / "examples" / "polybench"

#: PolyBench/C 4.2.1 LARGE_DATASET sizes (``<kernel>.h``); time-step parameters are not scaled.
LARGE = {
    "2mm": {"NI": 800, "NJ": 900, "NK": 1100, "NL": 1200},
    "3mm": {"NI": 800, "NJ": 900, "NK": 1000, "NL": 1100, "NM": 1200},
    "adi": {"TSTEPS": 500, "N": 1000},
    "atax": {"M": 1900, "N": 2100},
    "bicg": {"M": 1900, "N": 2100},
    "cholesky": {"N": 2000},
    "correlation": {"M": 1200, "N": 1400},
    "covariance": {"M": 1200, "N": 1400},
    "deriche": {"W": 4096, "H": 2160},
    "doitgen": {"NQ": 140, "NR": 150, "NP": 160},
    "durbin": {"N": 2000},
    "fdtd-2d": {"TMAX": 500, "NX": 1000, "NY": 1200},
    "floyd-warshall": {"N": 2800},
    "gemm": {"NI": 1000, "NJ": 1100, "NK": 1200},
    "gemver": {"N": 2000},
    "gesummv": {"N": 1300},
    "gramschmidt": {"M": 1000, "N": 1200},
    "heat-3d": {"TSTEPS": 500, "N": 120},
    "jacobi-1d": {"TSTEPS": 500, "N": 2000},
    "jacobi-2d": {"TSTEPS": 500, "N": 1300},
    "lu": {"N": 2000},
    "ludcmp": {"N": 2000},
    "mvt": {"N": 2000},
    "nussinov": {"N": 2500},
    "seidel-2d": {"TSTEPS": 500, "N": 2000},
    "symm": {"M": 1000, "N": 1200},
    "syr2k": {"M": 1000, "N": 1200},
    "syrk": {"M": 1000, "N": 1200},
    "trisolv": {"N": 2000},
    "trmm": {"M": 1000, "N": 1200},
}
#: the two non-PolyBench kernels, at sizes of a real layer / grid
EXTRA = {
    "conv2d": (ROOT / "examples" / "conv2d.loop", {"N": 1, "C": 64, "K": 64, "P": 56, "Q": 56, "R": 3, "S": 3}),
    "jacobi2d": (ROOT / "examples" / "jacobi2d.loop", {"T": 100, "N": 2000}),
}
TIME_PARAMS = ("TSTEPS", "TMAX", "T")
SEQUENTIAL = ("-O3", "-march=native", "-shared", "-fPIC", "-Wno-unknown-pragmas")


def cases(names: list[str] | None, scale: float):
    table = {name: (path, params) for name, (path, params) in EXTRA.items()}
    table.update({name: (POLYBENCH / f"{name}.loop", params) for name, params in LARGE.items()})
    for name in names or table:
        path, params = table[name]
        sized = {p: v if p in TIME_PARAMS else max(2, int(round(v * scale))) for p, v in params.items()}
        yield name, path, sized


def timed(fn, arrays, params, warm: bool) -> float:
    if warm:
        fn(arrays, params)
    t = time.perf_counter()
    fn(arrays, params)
    return time.perf_counter() - t


def isl_choice(kernel, params: dict):
    """``(kernel, model, mappings, what)``: isl's schedule candidate of every nest that has one
    (``--isl``: the code of the scheduler's skewed, fused mappings, not ranked)."""
    from polymap.passes.frontend.rename import distinct_loop_names
    from polymap.passes.legality.legality import check_mapping
    from polymap.passes.search.isl_schedule import isl_mappings

    renamed = distinct_loop_names(kernel)
    model = build_model(renamed)
    mappings, what = [], []
    for nest in range(len(renamed.nests())):
        found = [(s, m) for s, m in isl_mappings(model, nest, load_architecture("host"), params, to_count=False)
                 if check_mapping(model, m, params=params).legal][:1]
        mappings += [m for _, m in found]
        what += [s for s, _ in found] or ["original"]
    return renamed, model, tuple(mappings), ", ".join(what)


def run_one(name: str, path: Path, params: dict, budget: float, *, search_evaluations: int,
            repeat: int, isl: bool = False) -> tuple[float, float, str, str]:
    kernel = load_program(path).kernels[0]
    params = {p.name: params.get(p.name, p.default) for p in kernel.params}
    model = build_model(kernel)
    if isl:
        chosen_kernel, chosen_model, mappings, isl_what = isl_choice(kernel, params)
    else:
        choice = choose(kernel, load_architecture("host"), params,
                        options=ChoiceOptions(search_evaluations=search_evaluations))
        chosen_kernel, chosen_model, mappings = choice.kernel, choice.model, choice.mappings
    original = load_kernel(emit_c(kernel, model, None), kernel, flags=SEQUENTIAL)
    chosen_src = emit_c(chosen_kernel, chosen_model, mappings, params=params)
    tiled = load_kernel(chosen_src, kernel)
    inputs = random_inputs(kernel, params, seed=0, well_conditioned=needs_well_conditioned(kernel))
    results, times = [], []
    for fn in (original.call_here, tiled.call_here):  # on this thread: no thread start in the timing
        store = allocate(kernel, params)
        arrays = {d.name: store[d.name] for d in kernel.decls if d.role != "local"}
        fresh = {n: np.ascontiguousarray(np.array(a, dtype=arrays[n].dtype)) for n, a in inputs.items() if n in arrays}
        arrays.update(fresh)
        # a warm-up run changes inout tensors: warm up on a copy, time on fresh copies
        scratch = {n: a.copy() for n, a in arrays.items()}
        first = timed(fn, scratch, params, warm=False)
        if first * repeat > budget:  # too slow for more runs: the warm-up is the measurement
            times.append(first)
            results.append(scratch)
            continue
        runs = []
        for r in range(repeat):
            trial = arrays if r == repeat - 1 else {n: a.copy() for n, a in arrays.items()}
            runs.append(timed(fn, trial, params, warm=False))
        times.append(statistics.median(runs))
        results.append(arrays)
    same = all(np.allclose(results[0][d.name], results[1][d.name], rtol=1e-3, atol=1e-3, equal_nan=True)
               for d in kernel.decls if d.role in ("out", "inout"))
    what = isl_what if isl else (", ".join(n.chosen.source if n.chosen.mapping is not None else "original"
                                           for n in choice.nests) or "original")
    if "omp parallel" in chosen_src:
        what += " | omp"
    return times[0], times[1], "ok" if same else "DIFFERENT", what


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--kernels", nargs="*")
    ap.add_argument("--threads", default="2")
    ap.add_argument("--scale", type=float, default=1.0)
    ap.add_argument("--budget", type=float, default=20.0, help="seconds above which a version runs once")
    ap.add_argument("--wait-policy", default="passive",
                    help="OMP_WAIT_POLICY: passive (default) keeps a thread waiting at a barrier from "
                         "spinning on a core that another process needs (the machine is shared)")
    ap.add_argument("--repeat", type=int, default=3, help="timed runs per version (median)")
    ap.add_argument("--search-evaluations", type=int, default=ChoiceOptions().search_evaluations,
                    help="tile vectors the search evaluates per loop order")
    ap.add_argument("--isl", action="store_true",
                    help="time isl's schedule candidate (skewed, fused, wavefront) of each nest instead of compile's choice")
    args = ap.parse_args()
    os.environ["OMP_NUM_THREADS"] = args.threads
    os.environ["OMP_WAIT_POLICY"] = args.wait_policy  # read when libgomp loads (with the first kernel)
    print(f"OMP_NUM_THREADS={args.threads}, OMP_WAIT_POLICY={args.wait_policy}, scale {args.scale}, median of {args.repeat}; times in seconds; "
          f"load average {os.getloadavg()[0]:.1f}")
    print(f"{'kernel':16s} {'original':>9s} {'polymap':>9s} {'speedup':>8s}  check  mapping")
    speedups = []
    start = time.perf_counter()
    for name, path, params in cases(args.kernels, args.scale):
        try:
            t0, t1, check, what = run_one(name, path, params, args.budget,
                                          search_evaluations=args.search_evaluations, repeat=args.repeat, isl=args.isl)
        except Exception as exc:  # report and go on: one kernel must not hide the others
            print(f"{name:16s} failed: {type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}")
            continue
        speedups.append(t0 / t1)
        print(f"{name:16s} {t0:>9.3f} {t1:>9.3f} {t0 / t1:>7.2f}x  {check:5s}  {what}", flush=True)
    if speedups:
        geo = math.exp(sum(map(math.log, speedups)) / len(speedups))
        slower = sum(s < 1 for s in speedups)
        print(f"geometric mean speedup {geo:.2f}x over {len(speedups)} kernels; slower than the original on "
              f"{slower}; total {time.perf_counter() - start:.0f} s; load average {os.getloadavg()[0]:.1f}")


if __name__ == "__main__":
    main()
