"""Independent NumPy formulations of the example kernels.

Each function takes the kernel's input arrays (``in`` and ``inout``, by name)
and its parameter values, and returns the ``out``/``inout`` tensors it can
vouch for. They are written from the mathematics (matrix products, slices,
library solvers), not by transcribing the ``.loop`` nests, so that the
reference interpreter is checked against something it does not share.
Elements a kernel never defines (an ``out`` tensor's unwritten part) are NaN
in the expected result and are not compared.

``FORMULATIONS`` maps a file path (relative to the repository root) to its
function; ``INPUTS`` says how to make inputs a kernel can digest
(``well_conditioned`` for :func:`polymap.tensors.random_inputs`, and a
``prepare(arrays, params) -> arrays`` hook for the rest).
"""
from __future__ import annotations

from typing import Callable

import numpy as np

Arrays = dict[str, np.ndarray]
Params = dict[str, int]
Formulation = Callable[[Arrays, Params], Arrays]


def _f(a: np.ndarray) -> np.ndarray:
    """A float64 working copy (results are compared, not stored, so precision only helps)."""
    return np.array(a, dtype=np.float64, copy=True)


# --------------------------------------------------------------------------- products


def matmul_ab(a: Arrays, p: Params) -> Arrays:
    """C = A @ B (gemm, gemm_scalar_acc, gemm_tiled)."""
    return {"C": _f(a["A"]) @ _f(a["B"])}


def gemm_bias_relu(a: Arrays, p: Params) -> Arrays:
    return {"C": np.maximum(_f(a["A"]) @ _f(a["B"]) + _f(a["bias"])[None, :], 0.0)}


def two_mm_plain(a: Arrays, p: Params) -> Arrays:
    return {"D": (_f(a["A"]) @ _f(a["B"])) @ _f(a["C"])}


def trmv(a: Arrays, p: Params) -> Arrays:
    return {"y": np.tril(_f(a["L"])) @ _f(a["x"])}


def conv2d(a: Arrays, p: Params) -> Arrays:
    """O[n,k,p,q] += sum_{c,r,s} I[n,c,2p+r,2q+s] W[k,c,r,s], one strided window per (r, s)."""
    inp, w, out = _f(a["I"]), _f(a["W"]), _f(a["O"])
    P, Q = p["P"], p["Q"]
    for r in range(p["R"]):
        for s in range(p["S"]):
            window = inp[:, :, r:r + 2 * P:2, s:s + 2 * Q:2]
            out += np.einsum("ncpq,kc->nkpq", window, w[:, :, r, s])
    return {"O": out}


def conv1d(a: Arrays, p: Params) -> Arrays:
    """O[p] += sum_r W[r] I[p + r]: a 'valid' cross-correlation."""
    return {"O": _f(a["O"]) + np.correlate(_f(a["I"]), _f(a["W"]), mode="valid")}


def upsample2x(a: Arrays, p: Params) -> Arrays:
    y = np.repeat(np.repeat(_f(a["X"]), 2, axis=0), 2, axis=1)
    i, j = np.indices(y.shape)
    y[(i + j) % 2 == 1] = 0.0
    return {"Y": y}


# --------------------------------------------------------------------------- softmax family


def _softmax_rows(s: np.ndarray) -> np.ndarray:
    e = np.exp(s - s.max(axis=1, keepdims=True))
    return e / e.sum(axis=1, keepdims=True)


def softmax(a: Arrays, p: Params) -> Arrays:
    return {"Y": _softmax_rows(_f(a["X"]))}


def attention(a: Arrays, p: Params) -> Arrays:
    q, k, v = _f(a["Q"]), _f(a["K"]), _f(a["V"])
    return {"O": _softmax_rows(q @ k.T / np.sqrt(p["DK"])) @ v}


# --------------------------------------------------------------------------- factorisations


def lu_packed(a: Arrays, p: Params) -> Arrays:
    """Doolittle LU without pivoting, L (unit, strict lower) and U packed in A."""
    m = _f(a["A"])
    for k in range(m.shape[0]):
        m[k + 1:, k] /= m[k, k]
        m[k + 1:, k + 1:] -= np.outer(m[k + 1:, k], m[k, k + 1:])
    return {"A": m}


def cholesky(a: Arrays, p: Params) -> Arrays:
    """The lower triangle becomes L with A = L L^T; the strict upper triangle is kept."""
    m = _f(a["A"])
    low = np.tril_indices_from(m)
    m[low] = np.linalg.cholesky(m)[low]
    return {"A": m}


# --------------------------------------------------------------------------- stencils


def _jacobi2d(a: Arrays, steps: int) -> Arrays:
    x, y = _f(a["A"]), _f(a["B"])

    def sweep(src, dst):
        dst[1:-1, 1:-1] = 0.2 * (src[1:-1, 1:-1] + src[1:-1, :-2] + src[1:-1, 2:]
                                 + src[2:, 1:-1] + src[:-2, 1:-1])

    for _ in range(steps):
        sweep(x, y)
        sweep(y, x)
    return {"A": x, "B": y}


def _seidel2d(a: Arrays, steps: int) -> Arrays:
    """In place; each row is a recurrence in j, so only the neighbour sums vectorise."""
    m = _f(a["A"])
    n = m.shape[0]
    for _ in range(steps):
        for i in range(1, n - 1):
            for j in range(1, n - 1):
                m[i, j] = m[i - 1:i + 2, j - 1:j + 2].sum() / 9.0
    return {"A": m}


def jacobi_1d(a: Arrays, p: Params) -> Arrays:
    x, y = _f(a["A"]), _f(a["B"])
    for _ in range(p["TSTEPS"]):
        y[1:-1] = 0.33333 * (x[:-2] + x[1:-1] + x[2:])
        x[1:-1] = 0.33333 * (y[:-2] + y[1:-1] + y[2:])
    return {"A": x, "B": y}


def heat_3d(a: Arrays, p: Params) -> Arrays:
    x, y = _f(a["A"]), _f(a["B"])
    c = (slice(1, -1),) * 3

    def sweep(s, d):
        lap = sum(np.roll(s, 1, ax) - 2.0 * s + np.roll(s, -1, ax) for ax in range(3))
        d[c] = 0.125 * lap[c] + s[c]

    for _ in range(p["TSTEPS"]):
        sweep(x, y)
        sweep(y, x)
    return {"A": x, "B": y}


def fdtd_2d(a: Arrays, p: Params) -> Arrays:
    ex, ey, hz, fict = _f(a["ex"]), _f(a["ey"]), _f(a["hz"]), _f(a["_fict_"])
    for t in range(p["TMAX"]):
        ey[0, :] = fict[t]
        ey[1:, :] -= 0.5 * (hz[1:, :] - hz[:-1, :])
        ex[:, 1:] -= 0.5 * (hz[:, 1:] - hz[:, :-1])
        hz[:-1, :-1] -= 0.7 * (ex[:-1, 1:] - ex[:-1, :-1] + ey[1:, :-1] - ey[:-1, :-1])
    return {"ex": ex, "ey": ey, "hz": hz}


def adi(a: Arrays, p: Params) -> Arrays:
    """Tridiagonal sweeps, vectorised across the independent lines, recurrences in j."""
    n, steps = p["N"], p["TSTEPS"]
    u = _f(a["u"])
    v, pp, qq = (np.full((n, n), np.nan) for _ in range(3))
    dx = dy = 1.0 / n
    dt = 1.0 / steps
    mul1, mul2 = 2.0 * dt / dx**2, 1.0 * dt / dy**2
    ca, cb, cc = -mul1 / 2, 1 + mul1, -mul1 / 2
    cd, ce, cf = -mul2 / 2, 1 + mul2, -mul2 / 2
    inner = slice(1, n - 1)
    for _ in range(steps):
        v[0, inner], pp[inner, 0] = 1.0, 0.0
        qq[inner, 0] = 1.0
        for j in range(1, n - 1):
            den = ca * pp[inner, j - 1] + cb
            pp[inner, j] = -cc / den
            qq[inner, j] = (-cd * u[j, 0:n - 2] + (1 + 2 * cd) * u[j, inner] - cf * u[j, 2:n]
                            - ca * qq[inner, j - 1]) / den
        v[n - 1, inner] = 1.0
        for j in range(n - 2, 0, -1):
            v[j, inner] = pp[inner, j] * v[j + 1, inner] + qq[inner, j]
        u[inner, 0], pp[inner, 0] = 1.0, 0.0
        qq[inner, 0] = 1.0
        for j in range(1, n - 1):
            den = cd * pp[inner, j - 1] + ce
            pp[inner, j] = -cf / den
            qq[inner, j] = (-ca * v[0:n - 2, j] + (1 + 2 * ca) * v[inner, j] - cc * v[2:n, j]
                            - cd * qq[inner, j - 1]) / den
        u[inner, n - 1] = 1.0
        for j in range(n - 2, 0, -1):
            u[inner, j] = pp[inner, j] * u[inner, j + 1] + qq[inner, j]
    return {"u": u, "v": v, "p": pp, "q": qq}


# --------------------------------------------------------------------------- PolyBench BLAS and kernels


def pb_gemm(a: Arrays, p: Params) -> Arrays:
    return {"C": a["alpha"] * _f(a["A"]) @ _f(a["B"]) + a["beta"] * _f(a["C"])}


def pb_gemver(a: Arrays, p: Params) -> Arrays:
    m = _f(a["A"]) + np.outer(a["u1"], a["v1"]) + np.outer(a["u2"], a["v2"])
    x = _f(a["x"]) + a["beta"] * m.T @ _f(a["y"]) + _f(a["z"])
    w = _f(a["w"]) + a["alpha"] * m @ x
    return {"A": m, "x": x, "w": w}


def pb_gesummv(a: Arrays, p: Params) -> Arrays:
    tmp = _f(a["A"]) @ _f(a["x"])
    return {"tmp": tmp, "y": a["alpha"] * tmp + a["beta"] * (_f(a["B"]) @ _f(a["x"]))}


def pb_symm(a: Arrays, p: Params) -> Arrays:
    """C = alpha * S @ B + beta * C with S the symmetric matrix of A's lower triangle."""
    low = np.tril(_f(a["A"]))
    sym = low + np.tril(low, -1).T
    return {"C": a["alpha"] * sym @ _f(a["B"]) + a["beta"] * _f(a["C"])}


def _lower_update(c: np.ndarray, update: np.ndarray, beta) -> np.ndarray:
    low = np.tril_indices_from(c)
    c[low] = beta * c[low] + update[low]
    return c


def pb_syrk(a: Arrays, p: Params) -> Arrays:
    x = _f(a["A"])
    return {"C": _lower_update(_f(a["C"]), a["alpha"] * x @ x.T, a["beta"])}


def pb_syr2k(a: Arrays, p: Params) -> Arrays:
    x, y = _f(a["A"]), _f(a["B"])
    return {"C": _lower_update(_f(a["C"]), a["alpha"] * (x @ y.T + y @ x.T), a["beta"])}


def pb_trmm(a: Arrays, p: Params) -> Arrays:
    """B = alpha * (I + strict_lower(A))^T B (A unit lower triangular, transposed)."""
    unit = np.eye(p["M"]) + np.tril(_f(a["A"]), -1)
    return {"B": a["alpha"] * unit.T @ _f(a["B"])}


def pb_2mm(a: Arrays, p: Params) -> Arrays:
    tmp = a["alpha"] * _f(a["A"]) @ _f(a["B"])
    return {"tmp": tmp, "D": a["beta"] * _f(a["D"]) + tmp @ _f(a["C"])}


def pb_3mm(a: Arrays, p: Params) -> Arrays:
    e, f = _f(a["A"]) @ _f(a["B"]), _f(a["C"]) @ _f(a["D"])
    return {"E": e, "F": f, "G": e @ f}


def pb_atax(a: Arrays, p: Params) -> Arrays:
    m = _f(a["A"])
    tmp = m @ _f(a["x"])
    return {"tmp": tmp, "y": m.T @ tmp}


def pb_bicg(a: Arrays, p: Params) -> Arrays:
    m = _f(a["A"])
    return {"s": m.T @ _f(a["r"]), "q": m @ _f(a["p"])}


def pb_doitgen(a: Arrays, p: Params) -> Arrays:
    res = np.einsum("rqs,sp->rqp", _f(a["A"]), _f(a["C4"]))
    return {"A": res, "sum": res[-1, -1, :].copy()}  # sum keeps the last (r, q) row


def pb_mvt(a: Arrays, p: Params) -> Arrays:
    m = _f(a["A"])
    return {"x1": _f(a["x1"]) + m @ _f(a["y_1"]), "x2": _f(a["x2"]) + m.T @ _f(a["y_2"])}


# --------------------------------------------------------------------------- PolyBench datamining


def pb_covariance(a: Arrays, p: Params) -> Arrays:
    fn = float(a["float_n"])
    data = _f(a["data"])
    mean = data.sum(axis=0) / fn
    centred = data - mean
    return {"data": centred, "mean": mean, "cov": centred.T @ centred / (fn - 1.0)}


def pb_correlation(a: Arrays, p: Params) -> Arrays:
    fn = float(a["float_n"])
    data = _f(a["data"])
    mean = data.sum(axis=0) / fn
    std = np.sqrt(((data - mean) ** 2).sum(axis=0) / fn)
    std = np.where(std <= 0.1, 1.0, std)
    z = (data - mean) / (np.sqrt(fn) * std)
    corr = z.T @ z
    np.fill_diagonal(corr, 1.0)
    return {"data": z, "mean": mean, "stddev": std, "corr": corr}


# --------------------------------------------------------------------------- PolyBench solvers


def pb_durbin(a: Arrays, p: Params) -> Arrays:
    """Levinson-Durbin solves T y = -r, T symmetric Toeplitz with first column (1, r0, .., r[n-2])."""
    r = _f(a["r"])
    n = r.shape[0]
    col = np.concatenate(([1.0], r[:-1]))
    i, j = np.indices((n, n))
    return {"y": np.linalg.solve(col[np.abs(i - j)], -r)}


def pb_gramschmidt(a: Arrays, p: Params) -> Arrays:
    """A = Q R with positive diag(R); A ends as Q scaled by diag(R) (each column's residual)."""
    q, r = np.linalg.qr(_f(a["A"]))
    sign = np.sign(np.diag(r))
    q, r = q * sign, r * sign[:, None]
    r[np.tril_indices_from(r, -1)] = np.nan  # never written
    return {"Q": q, "R": r, "A": q * np.diag(r)}


def pb_ludcmp(a: Arrays, p: Params) -> Arrays:
    m = _f(a["A"])
    packed = lu_packed(a, p)["A"]
    unit_lower = np.tril(packed, -1) + np.eye(m.shape[0])
    return {"A": packed, "y": np.linalg.solve(unit_lower, _f(a["b"])),
            "x": np.linalg.solve(m, _f(a["b"]))}


def pb_trisolv(a: Arrays, p: Params) -> Arrays:
    return {"x": np.linalg.solve(np.tril(_f(a["L"])), _f(a["b"]))}


# --------------------------------------------------------------------------- PolyBench medley


def pb_floyd_warshall(a: Arrays, p: Params) -> Arrays:
    d = np.array(a["path"], dtype=np.int64)
    for k in range(d.shape[0]):
        d = np.minimum(d, d[:, k:k + 1] + d[k:k + 1, :])
    return {"path": d}


def pb_nussinov(a: Arrays, p: Params) -> Arrays:
    """The Nussinov DP: each cell is the max of its neighbours, a pairing and all splits."""
    seq, t = np.array(a["seq"], dtype=np.int64), np.array(a["table"], dtype=np.int64)
    n = seq.shape[0]
    for i in range(n - 1, -1, -1):
        for j in range(i + 1, n):
            cands = [t[i, j], t[i, j - 1]]
            if i + 1 < n:
                bond = int(seq[i] + seq[j] == 3) if i < j - 1 else 0
                cands += [t[i + 1, j], t[i + 1, j - 1] + bond]
            splits = t[i, i + 1:j] + t[i + 2:j + 1, j]
            t[i, j] = max(cands + ([splits.max()] if splits.size else []))
    return {"table": t}


def pb_deriche(a: Arrays, p: Params) -> Arrays:
    """Recursive (IIR) Gaussian-like filter: causal + anti-causal passes along rows, then columns."""
    al = float(a["alpha"])
    img = _f(a["imgIn"])
    k = (1 - np.exp(-al)) ** 2 / (1 + 2 * al * np.exp(-al) - np.exp(2 * al))
    a1 = k
    a2 = k * np.exp(-al) * (al - 1)
    a3 = k * np.exp(-al) * (al + 1)
    a4 = -k * np.exp(-2 * al)
    b1, b2 = 2.0 ** -al, -np.exp(-2 * al)

    def passes(x):  # filters along axis 1, every row at once
        h = x.shape[1]
        y1, y2 = np.zeros_like(x), np.zeros_like(x)
        xm1 = ym1 = ym2 = np.zeros(x.shape[0])
        for j in range(h):
            y1[:, j] = a1 * x[:, j] + a2 * xm1 + b1 * ym1 + b2 * ym2
            xm1, ym2, ym1 = x[:, j], ym1, y1[:, j]
        xp1 = xp2 = yp1 = yp2 = np.zeros(x.shape[0])
        for j in range(h - 1, -1, -1):
            y2[:, j] = a3 * xp1 + a4 * xp2 + b1 * yp1 + b2 * yp2
            xp2, xp1, yp2, yp1 = xp1, x[:, j], yp1, y2[:, j]
        return y1, y2

    r1, r2 = passes(img)
    c1, c2 = passes((r1 + r2).T)
    return {"imgOut": (c1 + c2).T, "y1": c1.T, "y2": c2.T}


def _jacobi2d_steps(name: str) -> Formulation:
    return lambda a, p: _jacobi2d(a, p[name])


def _seidel2d_steps(name: str) -> Formulation:
    return lambda a, p: _seidel2d(a, p[name])


FORMULATIONS: dict[str, Formulation] = {
    "examples/gemm.loop": matmul_ab,
    "examples/gemm_scalar_acc.loop": matmul_ab,
    "examples/gemm_tiled.loop": matmul_ab,
    "examples/gemm_bias_relu.loop": gemm_bias_relu,
    "examples/2mm.loop": two_mm_plain,
    "examples/trmv.loop": trmv,
    "examples/conv2d.loop": conv2d,
    "examples/conv1d_timeloop.loop": conv1d,
    "examples/upsample2x.loop": upsample2x,
    "examples/softmax.loop": softmax,
    "examples/attention.loop": attention,
    "examples/lu.loop": lu_packed,
    "examples/cholesky.loop": cholesky,
    "examples/jacobi2d.loop": _jacobi2d_steps("T"),
    "examples/seidel2d.loop": _seidel2d_steps("T"),
    "examples/polybench/correlation.loop": pb_correlation,
    "examples/polybench/covariance.loop": pb_covariance,
    "examples/polybench/gemm.loop": pb_gemm,
    "examples/polybench/gemver.loop": pb_gemver,
    "examples/polybench/gesummv.loop": pb_gesummv,
    "examples/polybench/symm.loop": pb_symm,
    "examples/polybench/syr2k.loop": pb_syr2k,
    "examples/polybench/syrk.loop": pb_syrk,
    "examples/polybench/trmm.loop": pb_trmm,
    "examples/polybench/2mm.loop": pb_2mm,
    "examples/polybench/3mm.loop": pb_3mm,
    "examples/polybench/atax.loop": pb_atax,
    "examples/polybench/bicg.loop": pb_bicg,
    "examples/polybench/doitgen.loop": pb_doitgen,
    "examples/polybench/mvt.loop": pb_mvt,
    "examples/polybench/cholesky.loop": cholesky,
    "examples/polybench/durbin.loop": pb_durbin,
    "examples/polybench/gramschmidt.loop": pb_gramschmidt,
    "examples/polybench/lu.loop": lu_packed,
    "examples/polybench/ludcmp.loop": pb_ludcmp,
    "examples/polybench/trisolv.loop": pb_trisolv,
    "examples/polybench/deriche.loop": pb_deriche,
    "examples/polybench/floyd-warshall.loop": pb_floyd_warshall,
    "examples/polybench/nussinov.loop": pb_nussinov,
    "examples/polybench/adi.loop": adi,
    "examples/polybench/fdtd-2d.loop": fdtd_2d,
    "examples/polybench/heat-3d.loop": heat_3d,
    "examples/polybench/jacobi-1d.loop": jacobi_1d,
    "examples/polybench/jacobi-2d.loop": _jacobi2d_steps("TSTEPS"),
    "examples/polybench/seidel-2d.loop": _seidel2d_steps("TSTEPS"),
}


def _float_n_is_n(a: Arrays, p: Params) -> Arrays:
    """PolyBench's init sets float_n = N."""
    return {**a, "float_n": np.asarray(float(p["N"]), dtype=a["float_n"].dtype)}


def _small_toeplitz(a: Arrays, p: Params) -> Arrays:
    """Row sums of |r| below 1 make the Toeplitz matrix diagonally dominant (Durbin never divides by ~0)."""
    r = a["r"]
    return {**a, "r": (r * (0.3 / r.shape[0])).astype(r.dtype)}


#: How to make inputs per file: ``well_conditioned`` for random_inputs, ``prepare`` afterwards.
INPUTS: dict[str, dict] = {
    "examples/lu.loop": {"well_conditioned": True},
    "examples/cholesky.loop": {"well_conditioned": True},
    "examples/polybench/lu.loop": {"well_conditioned": True},
    "examples/polybench/cholesky.loop": {"well_conditioned": True},
    "examples/polybench/ludcmp.loop": {"well_conditioned": True},
    "examples/polybench/trisolv.loop": {"well_conditioned": True},
    "examples/polybench/durbin.loop": {"prepare": _small_toeplitz},
    "examples/polybench/correlation.loop": {"prepare": _float_n_is_n},
    "examples/polybench/covariance.loop": {"prepare": _float_n_is_n},
}
