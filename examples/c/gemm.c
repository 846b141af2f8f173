/* C := alpha * A * B + beta * C, written as PolyBench and Pluto write their kernels:
 * every polymap command reads the #pragma scop region.
 *
 *   polymap show examples/c/gemm.c --emit loop       # the kernel in the .loop language
 *   polymap deps examples/c/gemm.c                   # its dependences
 *   polymap compile examples/c/gemm.c -o out         # out/kernel_gemm.c keeps this signature
 */
#include <stdio.h>

#define NI 64
#define NJ 48
#define NK 32

void kernel_gemm(int ni, int nj, int nk, double alpha, double beta,
                 double C[NI][NJ], double A[NI][NK], double B[NK][NJ])
{
  int i, j, k;
#pragma scop
  for (i = 0; i < ni; i++) {
    for (j = 0; j < nj; j++)
      C[i][j] *= beta;
    for (k = 0; k < nk; k++)
      for (j = 0; j < nj; j++)
        C[i][j] += alpha * A[i][k] * B[k][j];
  }
#pragma endscop
}

int main(void)
{
  static double A[NI][NK], B[NK][NJ], C[NI][NJ];
  int ni = NI, nj = NJ, nk = NK;
  kernel_gemm(ni, nj, nk, 1.5, 1.2, C, A, B);
  printf("%f\n", C[0][0]);
  return 0;
}
