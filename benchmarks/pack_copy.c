/* What one element of a panel copy costs (execution.PACK_CYCLES): the copy as polymap prints it for
   conv2d C = K = 32 (b13: W[k, c, r, s] -> [k/32][c][r][s][k%32] over a c tile of 16, R and S at run time,
   the buffer aligned_alloc'd and freed per copy). cc -O3 -march=native pack_copy.c && ./a.out: ns per element. */
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
static double now(void){struct timespec t;clock_gettime(CLOCK_MONOTONIC,&t);return t.tv_sec+1e-9*t.tv_nsec;}
float sink;
__attribute__((noinline)) void one(const float *restrict W, long K, long C, long R, long S, long c_L2) {
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
int main(int argc, char **argv) {
  long K = 32, C = 32, R = argc > 5 ? 3 : 3, S = 3;
  float *W = aligned_alloc(64, sizeof(float) * K * C * 9);
  for (long i = 0; i < K * C * 9; i++) W[i] = i * 0.5f;
  double best = 1e9, med[9];
  for (int round = 0; round < 9; round++) {
    double t = now(); for (int r = 0; r < 4000; r++) one(W, K, C, R, S, r & 1);
    t = (now() - t) / 4000 / (32 * 16 * R * S); med[round] = t; if (t < best) best = t;
  }
  printf("ns/element best %.3f  (rounds:", best * 1e9);
  for (int i = 0; i < 9; i++) printf(" %.3f", med[i] * 1e9);
  printf(")\n");
  return 0;
}
