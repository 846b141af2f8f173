/* Two Jacobi sweeps per time step between A and B (PolyBench style, tiny sizes). */
#include <polybench.h>

#ifndef N
# define N 8
# define TSTEPS 3
#endif
#define DATA_TYPE double
#define SCALAR_VAL(x) x

void kernel_jacobi_2d(int tsteps, int n,
                      DATA_TYPE POLYBENCH_2D(A, N, N, n, n),
                      DATA_TYPE POLYBENCH_2D(B, N, N, n, n))
{
  int t, i, j;
#pragma scop
  for (t = 0; t < tsteps; t++) {
    for (i = 1; i < n - 1; i++)
      for (j = 1; j < n - 1; j++)
        B[i][j] = SCALAR_VAL(0.2) * (A[i][j] + A[i][j-1] + A[i][1+j] + A[1+i][j] + A[i-1][j]);
    for (i = 1; i < n - 1; i++)
      for (j = 1; j < n - 1; j++)
        A[i][j] = SCALAR_VAL(0.2) * (B[i][j] + B[i][j-1] + B[i][1+j] + B[1+i][j] + B[i-1][j]);
  }
#pragma endscop
}

int main(void)
{
  int n = N;
  int tsteps = TSTEPS;
  return n + tsteps > 0 ? 0 : 1;
}
