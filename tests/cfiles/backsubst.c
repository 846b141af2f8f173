/* Back substitution U x = b with a loop that counts down (as ludcmp's second half). */
#define N 6

void kernel_backsubst(int n, double U[N][N], double b[N], double x[N])
{
  int i, j;
#pragma scop
  for (i = n - 1; i >= 0; i--) {
    x[i] = b[i];
    for (j = i + 1; j < n; j++)
      x[i] -= U[i][j] * x[j];
    x[i] = x[i] / U[i][i];
  }
#pragma endscop
}

int main(void)
{
  int n = N;
  return n > 0 ? 0 : 1;
}
