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


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--reps", type=int, default=200000)
    args = ap.parse_args()
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
