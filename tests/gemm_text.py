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
