/* Session 29 (team29): what a region costs beyond `omp parallel for` on this machine.
   Build: gcc -O2 -fopenmp benchmarks/omp_barriers.c -o /tmp/omp_barriers
   Run:   OMP_WAIT_POLICY=passive /tmp/omp_barriers [gap_us=500] [work=20000]
   (design.md, "The team's start on top of every term ... a region's barriers"; execution.region_barriers) */
#include <stdio.h>
#include <stdlib.h>
#include <omp.h>
/* The region's extra barrier: the same shared-out loop of 2 x threads iterations as
   (A) one `omp parallel for`, (B) `omp parallel` around a loop of E trips with `omp for` inside,
   each call after `gap` us of the caller alone (the threads asleep, as between kernel calls).
   Medians over calls, interleaved A, B1, B2, B4. */
static volatile double sink;
static void work(long i, long n) { double s = 0; for (long k = 0; k < n; k++) s += k * 1e-9 + i; sink = s; }
static void A(long n) {
  #pragma omp parallel for schedule(static)
  for (long i = 0; i < 4; i++) work(i, n);
}
static void B(long e, long n) {
  #pragma omp parallel
  for (long t = 0; t < e; t++) {
    #pragma omp for schedule(static)
    for (long i = 0; i < 4; i++) work(i, n / e);
  }
}
static int cmp(const void *a, const void *b) { double x = *(double *)a, y = *(double *)b; return x < y ? -1 : x > y; }
int main(int argc, char **argv) {
  long calls = 301, gap = argc > 1 ? atol(argv[1]) : 500, n = argc > 2 ? atol(argv[2]) : 20000;
  double *t[4]; for (int v = 0; v < 4; v++) t[v] = malloc(sizeof(double) * calls);
  long es[4] = {0, 1, 2, 4};
  for (long c = 0; c < calls; c++)
    for (int v = 0; v < 4; v++) {
      double g0 = omp_get_wtime(); while (omp_get_wtime() - g0 < gap * 1e-6) ;
      double t0 = omp_get_wtime();
      if (v == 0) A(n); else B(es[v], n);
      t[v][c] = omp_get_wtime() - t0;
    }
  const char *name[4] = {"parallel for", "parallel{for} E=1", "parallel{for} E=2", "parallel{for} E=4"};
  for (int v = 0; v < 4; v++) { qsort(t[v], calls, sizeof(double), cmp); printf("%-20s median %.1f us  p25 %.1f  p75 %.1f\n", name[v], t[v][calls / 2] * 1e6, t[v][calls / 4] * 1e6, t[v][3 * calls / 4] * 1e6); }
  return 0;
}
