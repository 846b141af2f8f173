"""conv2d: compile's pick against the original order's code and the plain loop nest, interleaved.

    python benchmarks/bench_conv_c.py [--layers default big] [--dtypes f32] [--weights kcrs crsk]
                                      [--repeat 15] [--threads 2] [--today CHECKOUT]

The versions of ``O[n, k, p, q] += I[n, c, 2p + r, 2q + s] * W[k, c, r, s]`` per layer:

* ``pick``: the C of compile's choice (``choose``, as ``polymap compile``; since conv17 a register
  tile with ``c, r, s`` inside its box, docs/design.md "conv2d as an implicit GEMM");
* ``today`` (with ``--today CHECKOUT``): the C that ``polymap compile`` of another checkout (e.g. a
  worktree of main before a change) writes for the layer, run in a subprocess with that checkout
  on ``PYTHONPATH``: its own pick. Before conv17 it was the original order at the default layer and
  the tiled "default" candidate at the big one (``compile --json``, 2026-12-03);
* ``original``: the C of the candidate "original order", emitted by polymap from the same choice;
* ``nest``: the loop nest as written, in plain C, one thread (``-O3 -march=native``, as a user
  would build it; the polymap versions run on ``--threads`` OpenMP threads).

Weights: ``kcrs`` is ``W[k, c, r, s]`` as in examples/conv2d.loop, ``crsk`` is ``W[c, r, s, k]``
(TensorFlow's HWIO order). Compile's pick for both (conv17): vectors along the output channels ``k``,
rows along ``q``; ``kcrs`` reads ``W`` from a ``[k / 16][c][r][s][k % 16]`` panel, copied once per
row ``p`` (docs/design.md, "conv2d as an implicit GEMM", step 3), ``crsk`` in place.
Layers: ``default`` is examples/conv2d.loop (N 1, C = K = 16, P = Q = 14, 3 x 3, stride 2); ``big``
a larger layer (C = K = 64, P = Q = 28). All C is built with the project's flags (``-O3
-march=native -fopenmp``). The versions alternate block by block (:func:`interleaved`), so load
hits them alike; printed: median and best microseconds, and the ratios of the others
to ``pick`` (> 1: the pick is faster). Every version's result is checked against NumPy first.
The versions update ``O`` in place again and again while timed (the work does not depend on its values). A
benchmark, not a test: say the load (``uptime``) with every number.
"""
from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

from polymap.codegen.build import load_kernel  # noqa: E402
from polymap.codegen.c.emitter import emit_c  # noqa: E402
from polymap.driver import parse  # noqa: E402
from polymap.machine.presets import load_architecture  # noqa: E402
from polymap.passes.search.choice import choose  # noqa: E402

CONV = """
kernel conv2d(N = 1, C = %(C)d, K = %(K)d, P = %(P)d, Q = %(Q)d, R = 3, S = 3) {
  in    I[N, C, 2*P + R - 1, 2*Q + S - 1] : %(t)s
  in    W[%(wd)s] : %(t)s
  inout O[N, K, P, Q] : %(t)s
  for n in 0..N, k in 0..K, p in 0..P, q in 0..Q, c in 0..C, r in 0..R, s in 0..S {
    O[n, k, p, q] += I[n, c, 2*p + r, 2*q + s] * W[%(wr)s]
  }
}
"""
WEIGHTS = {"kcrs": ("K, C, R, S", "k, c, r, s", "((k * C + c) * R + r) * S + s"),
           "crsk": ("C, R, S, K", "c, r, s, k", "((c * R + r) * S + s) * K + k")}
LAYERS = {"default": {"C": 16, "K": 16, "P": 14, "Q": 14}, "big": {"C": 64, "K": 64, "P": 28, "Q": 28}}

#: the loop nest as written (the same signature as polymap's C, so that one loader calls all three)
NEST = """
void conv2d(T *restrict I, T *restrict W, T *restrict O, long N, long C, long K, long P, long Q, long R, long S)
{
  for (long n = 0; n < N; n++)
    for (long k = 0; k < K; k++)
      for (long p = 0; p < P; p++)
        for (long q = 0; q < Q; q++)
          for (long c = 0; c < C; c++)
            for (long r = 0; r < R; r++)
              for (long s = 0; s < S; s++)
                O[((n * K + k) * P + p) * Q + q] += I[((n * C + c) * (2 * P + R - 1) + 2 * p + r) * (2 * Q + S - 1)
                                                      + 2 * q + s] * W[WINDEX];
}
"""


def today(checkout: str, text: str):
    """The C source that ``polymap compile`` of ``checkout`` writes for the kernel ``text``."""
    with tempfile.TemporaryDirectory() as tmp:
        (Path(tmp) / "conv2d.loop").write_text(text)
        subprocess.run([sys.executable, "-m", "polymap", "compile", str(Path(tmp) / "conv2d.loop"), "-o",
                        str(Path(tmp) / "out")], check=True, capture_output=True, cwd=checkout,
                       env={**os.environ, "PYTHONPATH": checkout})
        return (Path(tmp) / "out" / "conv2d.c").read_text()


def versions(layer: str, dtype: str, weights: str, checkout: str | None) -> tuple[dict, object, dict]:
    """``{name: callable}`` of the versions, the kernel, its sizes."""
    wd, wr, windex = WEIGHTS[weights]
    text = CONV % {**LAYERS[layer], "t": dtype, "wd": wd, "wr": wr}
    kernel = parse(text, "conv2d.loop").kernels[0]
    params = {x.name: x.default for x in kernel.params}
    choice = choose(kernel, load_architecture("host"), params)
    (nest,) = choice.nests
    original = next(c for c in nest.candidates if c.source == "original order")
    print(f"  {layer} {dtype} {weights}: pick '{nest.chosen.source}'; candidates "
          + ", ".join(f"{c.source}: {c.report.cycles:.3g} cycles" for c in nest.candidates
                      if c.legal and c.report is not None))
    out = {"pick": load_kernel(emit_c(choice.kernel, choice.model, (nest.chosen.mapping,), params=params),
                               choice.kernel)}
    if checkout:
        out["today"] = load_kernel(today(checkout, text), kernel)
    # the original order's mapping walks every loop at the backing store: polymap prints the nest with
    # its OpenMP loop, as compile did on main
    out["original"] = load_kernel(emit_c(choice.kernel, choice.model, tuple(m for m in (original.mapping,) if m),
                                         params=params), choice.kernel)
    ctype = "float" if dtype == "f32" else "double"
    out["nest"] = load_kernel(f"#define T {ctype}\n#define WINDEX ({windex})\n" + NEST, kernel)
    return out, kernel, params


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--layers", nargs="+", default=["default", "big"], choices=sorted(LAYERS))
    ap.add_argument("--dtypes", nargs="+", default=["f32"], choices=["f32", "f64"])
    ap.add_argument("--weights", nargs="+", default=["kcrs", "crsk"], choices=sorted(WEIGHTS))
    ap.add_argument("--repeat", type=int, default=15)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--today", metavar="CHECKOUT", help="a checkout whose compile's pick to run too")
    args = ap.parse_args()
    os.environ["OMP_NUM_THREADS"] = str(args.threads)
    print(f"load: {os.getloadavg()[0]:.2f} {os.getloadavg()[1]:.2f} {os.getloadavg()[2]:.2f}; "
          f"OMP_NUM_THREADS={args.threads}")
    for layer, dtype, weights in [(a, b, c) for a in args.layers for b in args.dtypes for c in args.weights]:
        fns, kernel, p = versions(layer, dtype, weights, args.today)
        nt = np.float32 if dtype == "f32" else np.float64
        rng = np.random.default_rng(1)
        i = rng.standard_normal((p["N"], p["C"], 2 * p["P"] + 2, 2 * p["Q"] + 2)).astype(nt)
        w = rng.standard_normal((p["K"], p["C"], 3, 3)).astype(nt)
        laid = np.ascontiguousarray(w if weights == "kcrs" else w.transpose(1, 2, 3, 0))
        o0 = rng.standard_normal((p["N"], p["K"], p["P"], p["Q"])).astype(nt)
        want = o0.astype(np.float64).copy()
        for r in range(3):
            for s in range(3):
                want += np.einsum("ncpq,kc->nkpq", i[:, :, r:r + 2 * p["P"]:2, s:s + 2 * p["Q"]:2].astype(np.float64),
                                  w[:, :, r, s].astype(np.float64))
        tol = 1e-3 if dtype == "f32" else 1e-10
        for name, fn in fns.items():
            o = o0.copy()
            fn({"I": i, "W": laid, "O": o}, p)
            np.testing.assert_allclose(o, want, rtol=tol, atol=tol, err_msg=name)
        o = o0.copy()
        calls = {name: (lambda fn=fn: fn({"I": i, "W": laid, "O": o}, p)) for name, fn in fns.items()}
        samples = interleaved(calls, args.repeat)
        steady = {name: statistics.median(x) for name, x in samples.items()}
        best = {name: min(x) for name, x in samples.items()}
        flops = 2 * p["N"] * p["K"] * p["P"] * p["Q"] * p["C"] * 9
        for name in fns:
            print(f"{layer:8s} {dtype} {weights} {name:9s} median {steady[name] * 1e6:9.1f} us, best {best[name] * 1e6:9.1f} us "
                  f"({flops / steady[name] / 1e9:.2f} GFLOP/s median)")
        others = [name for name in fns if name != "pick"]
        print(f"{'':8s}      time / pick's (> 1: the pick is faster): median "
              + ", ".join(f"{name} {steady[name] / steady['pick']:.2f}x" for name in others)
              + "; best " + ", ".join(f"{name} {best[name] / best['pick']:.2f}x" for name in others)
              + f"; load {os.getloadavg()[0]:.2f}")


#: calls per block (each timed); the first of a block is a warm-up, not kept
BLOCK = 6


def interleaved(calls: dict, rounds: int) -> dict[str, list[float]]:
    """Seconds per call of each version: ``rounds`` rounds, each a block of every version in turn (the
    order rotating round by round), so that load hits them alike; the first call of a block dropped."""
    names = list(calls)
    out = {name: [] for name in names}
    for k in range(rounds):
        for name in names[k % len(names):] + names[:k % len(names)]:
            for b in range(BLOCK):
                t = time.perf_counter()
                calls[name]()
                if b:
                    out[name].append(time.perf_counter() - t)
    return out


if __name__ == "__main__":
    main()
