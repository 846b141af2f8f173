"""The register tile alone: a 6 x 16 f32 multiply-accumulate with its operands in L1, fused vs unfused.

    python benchmarks/bench_microkernel.py [--runs 3] [--reps 200000]

Builds one small C program twice with ``cc -O3 -march=native``: once as the
register tiles are printed now (one fused multiply-add per update where the
build has FMA) and once with ``#pragma GCC optimize ("fp-contract=off")``
(separate multiply and add, the default rounding before issue 10's work).
Both run the same 6 x 16 tile (AVX2's shape: 12 accumulators of 8 floats)
over a 256-long reduction whose operands stay in L1, so the number is the
tile's own throughput, single thread, in GFLOP/s of process CPU time (not
inflated by waiting for a core on a shared machine). The two builds
alternate ``--runs`` times. A benchmark, not a test; about 10 s.

    python benchmarks/bench_microkernel.py --shapes 14x2 6x4 8x3 [--dtype f32] [--bytes 64] [--kc 256]

compares register tile shapes instead (MR rows x V vectors of ``--bytes``
bytes, B's V vectors loaded and A's element broadcast per step, fused
multiply-adds, operands in L1): whether a shape's own throughput explains a
difference between shapes in the whole GEMM. On the Zen 4 host every shape
from 6 x 4 to 24 x 1 zmm ran at the same 107-111 GFLOP/s f32 (blas5).
"""
from __future__ import annotations

import argparse
import os
import subprocess
import tempfile
from pathlib import Path

SOURCE = r"""
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#ifdef UNFUSED
#pragma GCC optimize ("fp-contract=off")
#endif
typedef float v8 __attribute__((vector_size(32)));
__attribute__((noinline)) static void tile(const float *restrict a, const float *restrict b, float *restrict c, long kc) {
  v8 c00 = *(v8 *)&c[0], c01 = *(v8 *)&c[8], c10 = *(v8 *)&c[16], c11 = *(v8 *)&c[24];
  v8 c20 = *(v8 *)&c[32], c21 = *(v8 *)&c[40], c30 = *(v8 *)&c[48], c31 = *(v8 *)&c[56];
  v8 c40 = *(v8 *)&c[64], c41 = *(v8 *)&c[72], c50 = *(v8 *)&c[80], c51 = *(v8 *)&c[88];
  for (long k = 0; k < kc; k++) {
    v8 b0 = *(v8 *)&b[16 * k], b1 = *(v8 *)&b[16 * k + 8];
    c00 += a[6 * k + 0] * b0; c01 += a[6 * k + 0] * b1;
    c10 += a[6 * k + 1] * b0; c11 += a[6 * k + 1] * b1;
    c20 += a[6 * k + 2] * b0; c21 += a[6 * k + 2] * b1;
    c30 += a[6 * k + 3] * b0; c31 += a[6 * k + 3] * b1;
    c40 += a[6 * k + 4] * b0; c41 += a[6 * k + 4] * b1;
    c50 += a[6 * k + 5] * b0; c51 += a[6 * k + 5] * b1;
  }
  *(v8 *)&c[0] = c00; *(v8 *)&c[8] = c01; *(v8 *)&c[16] = c10; *(v8 *)&c[24] = c11;
  *(v8 *)&c[32] = c20; *(v8 *)&c[40] = c21; *(v8 *)&c[48] = c30; *(v8 *)&c[56] = c31;
  *(v8 *)&c[64] = c40; *(v8 *)&c[72] = c41; *(v8 *)&c[80] = c50; *(v8 *)&c[88] = c51;
}
static float A[6 * 256] __attribute__((aligned(64))), B[16 * 256] __attribute__((aligned(64)));
static float C[96] __attribute__((aligned(64)));
int main(int argc, char **argv) {
  long reps = atol(argv[1]);
  for (int i = 0; i < 6 * 256; i++) A[i] = 1e-3f * (i % 7);
  for (int i = 0; i < 16 * 256; i++) B[i] = 1e-3f * (i % 5);
  struct timespec t0, t1;
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t0);
  for (long r = 0; r < reps; r++) tile(A, B, C, 256);
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t1);
  double s = (t1.tv_sec - t0.tv_sec) + 1e-9 * (t1.tv_nsec - t0.tv_nsec);
  printf("%.1f %g\n", reps * 256.0 * 192 / s / 1e9, C[0]);  /* C[0] keeps the work observable */
  return 0;
}
"""


def shape_source(dtype: str, rows: int, vectors: int, nbytes: int, kc: int) -> str:
    """A ``rows`` x ``vectors`` tile of ``nbytes``-byte vectors over a ``kc``-long reduction in L1, timed."""
    ctype, size = {"f32": ("float", 4), "f64": ("double", 8)}[dtype]
    lanes = nbytes // size
    nr = vectors * lanes
    acc = [(r, q) for r in range(rows) for q in range(vectors)]
    lines = ["#include <stdio.h>", "#include <stdlib.h>", "#include <time.h>",
             f"typedef {ctype} v __attribute__((vector_size({nbytes})));",
             f"__attribute__((noinline)) static void tile(const {ctype} *restrict a, const {ctype} *restrict b, "
             f"{ctype} *restrict c, long kc) {{"]
    lines += [f"  v c{r}_{q} = *(v *)&c[{r * nr + q * lanes}];" for r, q in acc]
    lines.append("  for (long k = 0; k < kc; k++) {")
    lines += [f"    v b{q} = *(v *)&b[{nr} * k + {q * lanes}];" for q in range(vectors)]
    lines += [f"    c{r}_{q} += a[{rows} * k + {r}] * b{q};" for r, q in acc]
    lines.append("  }")
    lines += [f"  *(v *)&c[{r * nr + q * lanes}] = c{r}_{q};" for r, q in acc]
    lines.append("}")
    lines.append(f"static {ctype} A[{rows * kc}] __attribute__((aligned(64))), B[{nr * kc}] "
                 f"__attribute__((aligned(64))), C[{rows * nr}] __attribute__((aligned(64)));")
    lines.append(f"""int main(int argc, char **argv) {{
  long reps = atol(argv[1]);
  for (int i = 0; i < {rows * kc}; i++) A[i] = 1e-3 * (i % 7);
  for (int i = 0; i < {nr * kc}; i++) B[i] = 1e-3 * (i % 5);
  struct timespec t0, t1;
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t0);
  for (long r = 0; r < reps; r++) tile(A, B, C, {kc});
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t1);
  double s = (t1.tv_sec - t0.tv_sec) + 1e-9 * (t1.tv_nsec - t0.tv_nsec);
  printf("%.1f %g\\n", reps * {kc}.0 * {2 * rows * nr} / s / 1e9, (double)C[0]);
  return 0;
}}""")
    return "\n".join(lines) + "\n"


def compare_shapes(args: argparse.Namespace) -> None:
    """``--shapes``: each shape built with ``-ffp-contract=fast`` (fused), the shapes alternating per run."""
    with tempfile.TemporaryDirectory() as tmp:
        exes = {}
        for spec in args.shapes:
            rows, vectors = (int(x) for x in spec.lower().split("x"))
            src = Path(tmp) / f"t{rows}x{vectors}.c"
            src.write_text(shape_source(args.dtype, rows, vectors, args.bytes, args.kc))
            exes[spec] = (Path(tmp) / src.stem, rows * vectors * args.bytes // {"f32": 4, "f64": 8}[args.dtype])
            subprocess.run(["cc", "-O3", "-march=native", "-ffp-contract=fast", str(src), "-o", str(exes[spec][0])],
                           check=True)
        print(f"{args.dtype} tiles of {args.bytes}-byte vectors in L1 (KC {args.kc}), single thread, GFLOP/s of "
              f"CPU time; load average {os.getloadavg()[0]:.1f}")
        for run in range(args.runs):
            out = []
            for spec, (exe, points) in exes.items():
                reps = max(1, int(3e9 / (2 * points * args.kc)))
                out.append(f"{spec} {subprocess.run([str(exe), str(reps)], capture_output=True, text=True, check=True).stdout.split()[0]}")
            print(f"run {run + 1}: " + "  ".join(out), flush=True)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--reps", type=int, default=200000)
    ap.add_argument("--shapes", nargs="*", help="MRxV tiles to compare (rows x vectors), e.g. 14x2 6x4")
    ap.add_argument("--dtype", choices=("f32", "f64"), default="f32")
    ap.add_argument("--bytes", type=int, default=64, help="vector bytes of --shapes (64: AVX-512, 32: AVX2)")
    ap.add_argument("--kc", type=int, default=256)
    args = ap.parse_args()
    if args.shapes:
        compare_shapes(args)
        return
    with tempfile.TemporaryDirectory() as tmp:
        src = Path(tmp) / "tile.c"
        src.write_text(SOURCE)
        exes = {}
        for name, extra in (("fused", []), ("unfused", ["-DUNFUSED"])):
            exes[name] = Path(tmp) / name
            subprocess.run(["cc", "-O3", "-march=native", *extra, str(src), "-o", str(exes[name])], check=True)
        print(f"6 x 16 f32 tile in L1, single thread, GFLOP/s of CPU time; load average {os.getloadavg()[0]:.1f}")
        for run in range(args.runs):
            out = {name: subprocess.run([str(exe), str(args.reps)], capture_output=True, text=True,
                                        check=True).stdout.split()[0] for name, exe in exes.items()}
            print(f"run {run + 1}: " + "  ".join(f"{name} {v}" for name, v in out.items()), flush=True)


if __name__ == "__main__":
    main()
