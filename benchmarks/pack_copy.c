/* What one element of a panel copy costs (execution.PACK_CYCLES, PACK_UNIT_CYCLES): copies as polymap
   prints them (packing._copy: the source read in its memory order, the writes strided or not), ns per
   element, the best of 9 rounds.  cc -O3 -march=native benchmarks/pack_copy.c && ./a.out
   - conv2d C = K = 32 (bench_fidelity's b13): W[k, c, r, s] -> [k/32][c][r][s][k%32] over a c tile of 16,
     R and S at run time, the buffer aligned_alloc'd and freed per copy: every write 128 bytes apart;
   - gemm's A panel [i/MR][k][i%MR] (writes MR apart), MR 6 and 8, from a 64-column A;
   - gemm's B panel [j/16][k][j%16] (runs of 16 consecutive writes: vectors), a hot 16 x 64 one and a
     256 x 128 one from a 1024 x 1024 B (L2 and memory). */
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
static double now(void) { struct timespec t; clock_gettime(CLOCK_MONOTONIC, &t); return t.tv_sec + 1e-9 * t.tv_nsec; }
float sink;
__attribute__((noinline)) void conv_w(const float *restrict W, long K, long C, long R, long S, long c_L2) {
  const long o0 = 0, o1 = 16 * c_L2;
  float *restrict pk = aligned_alloc(64, (sizeof(float) * (((K + 31) / 32) * 16 * R * S * 32) + 63) / 64 * 64);
  if (o1 >= 0 && o1 + 16 <= C) {
    for (long d0 = 0; d0 < (K + 31) / 32; d0 += 1)
      for (long d4 = 0; d4 < 32; d4 += 1)
        for (long d1 = 0; d1 < 16; d1 += 1)
          for (long d2 = 0; d2 < R; d2 += 1)
            for (long d3 = 0; d3 < S; d3 += 1)
              pk[d0 * (32 * S * R * 16) + d1 * (32 * S * R) + d2 * (32 * S) + d3 * 32 + d4] =
                W[(((o0 + d0 * 32 + d4) * C + (o1 + d1)) * R + d2) * S + d3];
  }
  sink += pk[7];
  free(pk);
}
__attribute__((noinline)) void a_panel(const float *restrict A, float *restrict pk, long ld, long MC, long KC, long MR) {
  for (long d0 = 0; d0 < MC / MR; d0++)
    for (long d2 = 0; d2 < MR; d2++)
      for (long d1 = 0; d1 < KC; d1++)
        pk[d0 * KC * MR + d1 * MR + d2] = A[(d0 * MR + d2) * ld + d1];
}
__attribute__((noinline)) void b_panel(const float *restrict B, float *restrict pk, long ld, long KC, long NC, long k0, long j0) {
  for (long d1 = 0; d1 < KC; d1++)
    for (long d0 = 0; d0 < NC / 16; d0++)
      for (long d2 = 0; d2 < 16; d2++)
        pk[d0 * KC * 16 + d1 * 16 + d2] = B[(k0 + d1) * ld + j0 + d0 * 16 + d2];
}
#define BEST(label, reps, elements, call) do { double best = 1e9; \
    for (int round = 0; round < 9; round++) { double t = now(); \
      for (int r = 0; r < (reps); r++) { call; __asm__ volatile("" ::: "memory"); } \
      t = (now() - t) / (reps) / (double)(elements); if (t < best) best = t; } \
    printf("%-44s %.3f ns/element\n", label, best * 1e9); } while (0)
int main(void) {
  float *W = aligned_alloc(64, sizeof(float) * 32 * 32 * 9), *B = aligned_alloc(64, sizeof(float) << 20);
  float *pk = aligned_alloc(64, sizeof(float) << 20);
  for (long i = 0; i < 32 * 32 * 9; i++) W[i] = i * 0.5f;
  for (long i = 0; i < (1 << 20); i++) B[i] = i * 0.25f;
  BEST("conv2d W panel (strided writes, alloc/free)", 4000, 32 * 16 * 9, conv_w(W, 32, 32, 3, 3, r & 1));
  BEST("gemm A panel, MR 6 (writes 6 apart)", 4000, 96 * 16, a_panel(B, pk, 64, 96, 16, 6));
  BEST("gemm A panel, MR 8 (writes 8 apart)", 4000, 96 * 16, a_panel(B, pk, 64, 96, 16, 8));
  BEST("gemm B panel 16 x 64, hot (consecutive)", 4000, 16 * 64, b_panel(B, pk, 64, 16, 64, 0, 0));
  BEST("gemm B panel 256 x 128 of 1024^2 (consecutive)", 200, 256 * 128, b_panel(B, pk, 1024, 256, 128, (r % 4) * 256, (r % 8) * 128));
  printf("(%g)\n", sink + pk[5]);
  return 0;
}
