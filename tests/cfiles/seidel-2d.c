/* Gauss-Seidel 9-point sweeps in place (PolyBench's seidel-2d, tiny sizes). */
#include <polybench.h>

#ifndef N
# define N 7
# define TSTEPS 2
#endif
#define DATA_TYPE double
#define SCALAR_VAL(x) x

static void kernel_seidel_2d(int tsteps, int n, DATA_TYPE POLYBENCH_2D(A, N, N, n, n))
{
  int t, i, j;
#pragma scop
  for (t = 0; t <= tsteps - 1; t++)
    for (i = 1; i <= n - 2; i++)
      for (j = 1; j <= n - 2; j++)
        A[i][j] = (A[i-1][j-1] + A[i-1][j] + A[i-1][j+1]
                   + A[i][j-1] + A[i][j] + A[i][j+1]
                   + A[i+1][j-1] + A[i+1][j] + A[i+1][j+1]) / SCALAR_VAL(9.0);
#pragma endscop
}

int main(void)
{
  int n = N;
  int tsteps = TSTEPS;
  return n + tsteps > 0 ? 0 : 1;
}
