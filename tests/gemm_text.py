"""The plain GEMM kernel (``C = A @ B`` with its initialisation) as ``.loop`` text, ``%(t)s`` the dtype:
the one source for the tests that build it at several dtypes and shapes."""
from __future__ import annotations

GEMM = """
kernel g(M, N, K) {
  in A[M, K] : %(t)s
  in B[K, N] : %(t)s
  out C[M, N] : %(t)s
  for i in 0..M, j in 0..N {
    init: C[i, j] = 0
    for k in 0..K {
      acc: C[i, j] += A[i, k] * B[k, j]
    }
  }
}
"""

#: the start of a C ``main`` that runs :data:`GEMM`'s ``g``: ``argv`` is the input file (A then B,
#: raw), the output file and M N K; ``T`` is the element type, defined by the test
DRIVER_INPUTS = r"""
#include <stdio.h>
#include <stdlib.h>
int main(int argc, char **argv) {
  long M = atol(argv[3]), N = atol(argv[4]), K = atol(argv[5]);
  T *A = malloc(sizeof(T) * M * K), *B = malloc(sizeof(T) * K * N), *C = malloc(sizeof(T) * M * N);
  FILE *in = fopen(argv[1], "rb");
  if (fread(A, sizeof(T), M * K, in) != (size_t)(M * K) || fread(B, sizeof(T), K * N, in) != (size_t)(K * N)) return 2;
  fclose(in);
"""

#: GEMM without its initialisation (only ``C += A @ B``: no ``j`` loop of its own to add pragmas), named
#: ``gemm`` with square default sizes ``%(n)d``: the tests of the model's threads and team
GEMM_ACC = """
kernel gemm(M = %(n)d, N = %(n)d, K = %(n)d) {
  in    A[M, K] : f32
  in    B[K, N] : f32
  inout C[M, N] : f32
  for i in 0..M, j in 0..N, k in 0..K {
    acc: C[i, j] += A[i, k] * B[k, j]
  }
}
"""
