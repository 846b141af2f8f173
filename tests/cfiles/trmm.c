/* B := alpha * A^T B with A unit lower triangular (PolyBench's trmm, tiny sizes). */
#include <polybench.h>

#ifndef M
# define M 6
# define N 5
#endif
#define DATA_TYPE double

static void kernel_trmm(int m, int n, DATA_TYPE alpha,
                        DATA_TYPE POLYBENCH_2D(A, M, M, m, m),
                        DATA_TYPE POLYBENCH_2D(B, M, N, m, n))
{
  int i, j, k;
#pragma scop
  for (i = 0; i < m; i++)
    for (j = 0; j < n; j++) {
      for (k = i + 1; k < m; k++)
        B[i][j] += A[k][i] * B[k][j];
      B[i][j] = alpha * B[i][j];
    }
#pragma endscop
}

int main(void)
{
  int m = M;
  int n = N;
  return m + n > 0 ? 0 : 1;
}
