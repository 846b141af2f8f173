/* LU decomposition without pivoting, in place (PolyBench's lu, tiny sizes). */
#include <polybench.h>

#ifndef N
# define N 7
#endif
#define DATA_TYPE double

static void kernel_lu(int n, DATA_TYPE POLYBENCH_2D(A, N, N, n, n))
{
  int i, j, k;
#pragma scop
  for (i = 0; i < n; i++) {
    for (j = 0; j < i; j++) {
      for (k = 0; k < j; k++)
        A[i][j] -= A[i][k] * A[k][j];
      A[i][j] /= A[j][j];
    }
    for (j = i; j < n; j++)
      for (k = 0; k < i; k++)
        A[i][j] -= A[i][k] * A[k][j];
  }
#pragma endscop
}

int main(void)
{
  int n = N;
  return n > 0 ? 0 : 1;
}
