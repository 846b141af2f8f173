"""GEMM f32 and f64: polymap's C (compile's choice) and NumPy module vs NumPy's matmul, one run.

    python benchmarks/bench_gemm_c.py [--sizes 1024 2048] [--dtypes f32 f64] [--threads 2]
                                      [--blocking MR,NR,KC,MC,NC | --register] [--repeat 5]
                                      [--reassociate] [--no-module]

The benchmark re-executes itself without ``OPENBLAS_CORETYPE`` and
``OPENBLAS_L2_SIZE`` (only its own process: OpenBLAS reads them when NumPy
is imported) so that NumPy runs the BLAS kernel it would pick for this
processor; it prints which (threadpoolctl). Then per dtype and size:
GFLOP/s (2 N^3 / steady median time) of NumPy's matmul and of the C that
``compile`` chooses (register tiles shaped by the host's vector unit,
packed panels), and for f32 at the first size the NumPy module ``compile``
writes (its own choice) against ``a @ b``, timed in a rotation of its own
after the C's. By default the code keeps the
original order of every element's updates as compile does (one fused
multiply-add per update in the register tiles, as GCC contracts the original
statement, nothing else contracted; the NumPy module's C += A @ B is a pure
contraction, one ``@``, as compile writes it: ``docs/design.md``, "Pure
contractions"); ``--reassociate`` measures ``compile --reassociate``. Goals (issue 10): f32 >= 1.0x,
f64 >= 0.9x of matmul, the NumPy module within 1.5x. All C is built with
``cc -O3 -march=native -fopenmp -shared -fPIC`` and run on OMP_NUM_THREADS
threads. A benchmark, not a test: numbers depend on the machine and on who
else is using it (versions alternate block by block, so that load hits
both alike; ``medians`` says why blocks). Runtime at 1024 and 2048, both dtypes: a few minutes.
"""
from __future__ import annotations

import os
import sys

_CLEARED = ("OPENBLAS_CORETYPE", "OPENBLAS_L2_SIZE")
if any(v in os.environ for v in _CLEARED):  # before NumPy loads OpenBLAS: this process only
    os.execve(sys.executable, [sys.executable, *sys.argv],
              {k: v for k, v in os.environ.items() if k not in _CLEARED})

import argparse  # noqa: E402
import statistics  # noqa: E402
import time  # noqa: E402

import numpy as np  # noqa: E402

from polymap.codegen.build import load_kernel  # noqa: E402
from polymap.codegen.c.emitter import emit_c  # noqa: E402
from polymap.codegen.numpy.emitter import emit_numpy  # noqa: E402
from polymap.driver import parse  # noqa: E402
from polymap.machine.presets import load_architecture  # noqa: E402
from polymap.passes.search.choice import ChoiceOptions, choose, evaluate_candidate, fit_keeps  # noqa: E402
from polymap.passes.search.numpy_choice import numpy_mappings  # noqa: E402
from polymap.passes.search.register_mapping import Blocking, register_mapping, register_mappings  # noqa: E402
from polymap.poly import build_model  # noqa: E402

GEMM = """
kernel gemm(M, N, K) {
  in A[M, K] : %(t)s
  in B[K, N] : %(t)s
  out C[M, N] : %(t)s
  for i in 0..M, j in 0..N {
    init: C[i, j] = 0
    for k in 0..K {
      acc: C[i, j] += A[i, k] * B[k, j]
    }
  }
}
"""

#: seconds of rest before each block of calls: the other library's worker threads stop spinning first
PAUSE = 0.2
#: calls per block; the first of each block is the cold call (threads woken after the pause)
BLOCK = 4


def medians(fns: dict, repeat: int, pause: float = PAUSE, block: int = BLOCK,
            clock=time.perf_counter) -> tuple[dict, dict]:
    """Median seconds of each function in steady state, and of its cold call (``clock``: wall time;
    ``time.process_time`` gives the CPU time of all the process's threads).

    The versions alternate block by block (``repeat`` rounds, so load hits both alike); each block
    starts after ``pause`` seconds of rest and makes ``block`` calls back to back. The steady median
    is over the calls after the first of each block: each library's worker threads are warm from its
    own previous call, as in a program that calls the kernel in a loop, and no other library's
    thread is spinning beside them (OpenBLAS's idle workers spin, yielding, for about 2^28 cycles
    after a call and GNU OpenMP's for a while too: timed right after the other library's call, a
    kernel shared the 2 cores with a spinning thread, 11.4 against 13.4-15.3 GFLOP/s on the loaded
    Zen 3). The cold median is over the first call of each block: threads woken from sleep, which on
    this 2-vCPU machine sometimes run both on one core for the whole call (polymap's f32 1024: 12 ms
    or 21 ms after a 0.2 s rest, 10.3-12.2 ms back to back; NumPy's calls showed the same 2x at
    times). Until session 23 every timed call was a cold one and the median of 5 swung from 0.53x to
    0.96x between quiet runs of the same code.
    """
    for fn in fns.values():
        fn()  # warm-up: page faults, thread pool start
    steady = {name: [] for name in fns}
    cold = {name: [] for name in fns}
    for _ in range(repeat):
        for name, fn in fns.items():
            time.sleep(pause)
            for call in range(max(block, 2)):
                t = clock()
                fn()
                (cold if call == 0 else steady)[name].append(clock() - t)
    return ({name: statistics.median(ts) for name, ts in steady.items()},
            {name: statistics.median(ts) for name, ts in cold.items()})


def blas_info() -> str:
    try:
        from threadpoolctl import threadpool_info
    except ImportError:
        return "threadpoolctl not installed: BLAS kernel unknown"
    infos = [i for i in threadpool_info() if i.get("user_api") == "blas"]
    return "; ".join(f"{i.get('internal_api')} {i.get('version')} kernel {i.get('architecture')} "
                     f"threads {i.get('num_threads')}" for i in infos) or "no BLAS found"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", type=int, nargs="*", default=[1024, 2048])
    ap.add_argument("--dtypes", nargs="*", default=["f32", "f64"])
    ap.add_argument("--blocking", help="MR,NR,KC,MC,NC instead of compile's choice")
    ap.add_argument("--no-module", action="store_true",
                    help="skip the NumPy module (in-order folding takes seconds per call at 1024)")
    ap.add_argument("--register", action="store_true",
                    help="compile's best register-tile candidate (the capacity blocking and its KC neighbours, "
                         "ranked by the counts as compile ranks them) without the search, which may run out of "
                         "its time budget on a loaded machine")
    ap.add_argument("--threads", default=os.environ.get("OMP_NUM_THREADS", "2"))
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--pause", type=float, default=PAUSE,
                    help="seconds of rest before each block of calls")
    ap.add_argument("--reassociate", action="store_true",
                    help="as compile --reassociate: FMA contraction in the C, one @ in the NumPy module")
    ap.add_argument("--search-evaluations", type=int, default=ChoiceOptions().search_evaluations,
                    help="tile vectors the search evaluates per loop order (compile's default)")
    args = ap.parse_args()
    os.environ["OMP_NUM_THREADS"] = str(args.threads)
    arch = load_architecture("host")
    print(f"numpy {np.__version__}: {blas_info()}")
    print(f"OPENBLAS_CORETYPE={os.environ.get('OPENBLAS_CORETYPE', '(unset)')}, OMP_NUM_THREADS={args.threads}, "
          f"vector unit {arch.vector}")
    print(f"load average {os.getloadavg()[0]:.1f}; GFLOP/s from steady medians, {args.repeat} alternating blocks of "
          f"{BLOCK} calls (cold: the ratio of the blocks' first calls); "
          f"{'--reassociate (FMA, @)' if args.reassociate else 'original order (C: FMA in register tiles; NumPy: a pure contraction, one @)'}")
    print(f"{'dtype':>5} {'N':>6} {'numpy':>8} {'polymap':>8}   poly/numpy   cold   choice")
    for dtype in args.dtypes:
        kernel = parse(GEMM % {"t": dtype}, "gemm.loop").kernels[0]
        model = build_model(kernel)
        nt = np.float32 if dtype == "f32" else np.float64
        for n in args.sizes:
            params = {"M": n, "N": n, "K": n}
            if args.blocking:
                b = Blocking(*(int(x) for x in args.blocking.split(",")))
                mappings = (fit_keeps(model, register_mapping(model, 0, arch, params, blocking=b), arch, params),)
                what = f"blocking {args.blocking}"
            elif args.register:
                # ranked as compile ranks them (cycles, then energy); before blas4 the capacity blocking
                # alone, which compile passed over for KC 256 at three of the four cases on the AVX-512 host
                best = min((evaluate_candidate(model, src, m, arch, params) for src, m in
                            register_mappings(model, 0, arch, params) if m is not None),
                           key=lambda c: c.key() if c.legal else (float("inf"),) * 2)
                mappings = (best.mapping,)
                kc = dict(zip(best.mapping.loops, best.mapping.levels[-2].tile)).get("k")
                what = f"{best.source} (KC {kc})"
            else:  # what `polymap compile` chooses (gemm has no shared loop names: the kernel is unchanged)
                choice = choose(kernel, arch, params, options=ChoiceOptions(search_evaluations=args.search_evaluations))
                mappings = choice.mappings
                what = ", ".join(nc.chosen.source for nc in choice.nests)
                if mappings:
                    rf, l1, l2 = (dict(zip(mappings[0].loops, mappings[0].levels[k].tile)) for k in (-1, -2, -3))
                    what += f" (RF {rf['i']}x{rf['j']}, KC {l1['k']}, L1 i {l1['i']}, L2 i {l2['i']} j {l2['j']})"
            tiled = load_kernel(emit_c(kernel, model, mappings, params=params, reassociate=args.reassociate), kernel)
            rng = np.random.default_rng(0)
            a = rng.random((n, n)).astype(nt)
            b = rng.random((n, n)).astype(nt)
            c = np.zeros((n, n), dtype=nt)
            arrays = {"A": a, "B": b, "C": c}
            # two rotations, each of NumPy and one contender: the C's result is checked before the module
            # overwrites C (the module ran last in a shared rotation, so its C was the one checked), and
            # the C is timed beside NumPy alone, as at every other size and dtype (RESULTS.md, session 22)
            t, t_cold = medians({"numpy": lambda: np.matmul(a, b),
                                 "polymap": lambda: tiled.call_here(arrays, params)}, args.repeat, args.pause)
            np.testing.assert_allclose(c, a @ b, rtol=1e-3 if dtype == "f32" else 1e-9)
            flops = 2.0 * n ** 3
            g = {k: flops / v / 1e9 for k, v in t.items()}
            cold_ratio = t_cold["numpy"] / t_cold["polymap"]
            print(f"{dtype:>5} {n:>6} {g['numpy']:>8.1f} {g['polymap']:>8.1f}   {g['polymap'] / g['numpy']:>10.2f}   "
                  f"{cold_ratio:>6.2f}   {what}", flush=True)
            if dtype == "f32" and n == args.sizes[0] and not args.no_module:
                np_maps = numpy_mappings(model, arch, params, reassociate=args.reassociate)
                namespace: dict = {}
                exec(emit_numpy(kernel, model, np_maps[0] if np_maps else None, reassociate=args.reassociate),
                     namespace)
                module = namespace["gemm"]
                c[...] = 0
                t, _ = medians({"numpy": lambda: np.matmul(a, b),
                                "module": lambda: module(A=a, B=b, C=c, M=n, N=n, K=n)}, args.repeat, args.pause)
                np.testing.assert_allclose(c, a @ b, rtol=1e-3)
                print(f"{'':>5} {n:>6} NumPy module compile writes: {t['module'] * 1e3:.1f} ms vs a @ b "
                      f"{t['numpy'] * 1e3:.1f} ms: {t['module'] / t['numpy']:.2f}x the time (goal <= 1.5)", flush=True)


if __name__ == "__main__":
    main()
