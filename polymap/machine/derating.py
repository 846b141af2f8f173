"""Per-level derating factors fitted to measurements, by least squares in log space.

The cost model predicts ``cycles = max over terms t of T[k, t]`` for kernel
``k`` (the compute term and one term per level with a bandwidth:
traffic / bandwidth). Derating multiplies each term by a factor ``d_t``
(equivalently divides the level's bandwidth, or the compute rate, by it)::

    predicted[k] = max_t d_t * T[k, t]
    minimise  sum_k (log predicted[k] - log measured[k])^2  +  ridge * sum_t (log d_t)^2

in ``theta = log d`` by Gauss-Newton with step halving: the derivative of
the max is the indicator of the binding term, so each step is a small
linear least-squares problem. The ridge keeps factors of terms that never
bind (no information) at 1. Before -> after on synthetic data where L1's
bandwidth is 3x optimistic and compute 2x::

    T = [[10, 2], [10, 40], [1, 50]]   (columns: compute, L1), measured = [20, 120, 150]
    fit_derating(T, measured) -> (2.0, 3.0)

A kernel may carry an offset that no factor scales (the team's start and
barriers: cycles of waiting, not of work or traffic, which no term hides:
``cost_model.level_term``)::

    predicted[k] = max_t d_t * T[k, t] + offset[k]

its derivative in ``log d_t`` of the binding term is then that term's share
of the prediction, so a kernel whose time is mostly the team's start barely
moves the factor. An offset may also have a part that only the compute term
carries (the panels' copies: copy loops, not traffic), given as a second
column, ``offsets[k] = (after the max, on the compute term)``::

    predicted[k] = max(d_compute * T[k, compute] + inside[k], max over levels d_t * T[k, t]) + after[k]
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

import numpy as np


@dataclass(frozen=True)
class DeratingFit:
    factors: tuple[float, ...]  # one per term (column), >= 0
    error_before: float  # median |log(measured / predicted)| with every factor 1
    error_after: float
    iterations: int


def predict(terms: np.ndarray, factors: Sequence[float], offsets: Sequence[float] | None = None) -> np.ndarray:
    """``max_t factors[t] * terms[k, t]`` per row (zero terms never bind), plus ``offsets[k]`` when
    given: cycles no factor scales (the team's start and barriers, which no term hides); a pair per
    row puts its second part on the compute term, inside the max (:func:`_split`)."""
    scaled = np.asarray(terms, dtype=float) * np.asarray(factors, dtype=float)[None, :]
    after, inside = _split(offsets, scaled.shape[0])
    scaled[:, 0] += inside
    return np.max(scaled, axis=1) + after


def _split(offsets: Sequence[float] | Sequence[Sequence[float]] | np.ndarray | None, n: int
           ) -> tuple[np.ndarray, np.ndarray]:
    """``(after the max, on the compute term)`` from ``offsets``: none, one number a row (after), or a
    pair a row."""
    if offsets is None:
        return np.zeros(n), np.zeros(n)
    off = np.asarray(offsets, dtype=float)
    if off.ndim == 2:
        return off[:, 0], off[:, 1]
    return off, np.zeros(n)


def _residuals(logt: np.ndarray, logm: np.ndarray, theta: np.ndarray, after: np.ndarray, inside: np.ndarray
               ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Residuals, the binding term of each row, and d log(predicted) / d theta of that term (its
    scaled share of the prediction: 1 without offsets)."""
    scored = logt + theta[None, :]
    scaled0 = np.exp(scored[:, 0])
    scored[:, 0] = np.log(scaled0 + inside)
    binding = np.argmax(scored, axis=1)
    top = np.exp(scored[np.arange(len(logm)), binding])
    slope = np.where(binding == 0, scaled0, top) / np.maximum(top + after, 1e-300)
    return np.log(top + after) - logm, binding, slope


def fit_derating(terms: Sequence[Sequence[float]], measured: Sequence[float], *, ridge: float = 1e-3,
                 iterations: int = 100, offsets: Sequence[float] | None = None, common: bool = False) -> DeratingFit:
    """Factors ``d`` minimising the log-space error of ``max_t d_t * terms[k, t] + offsets[k]`` (cycles
    no factor scales) against ``measured``; ``common``: one factor for every
    term (it corrects the bias and, without offsets, reorders nothing), no ridge."""
    t = np.asarray(terms, dtype=float)
    m = np.asarray(measured, dtype=float)
    if t.ndim != 2 or t.shape[0] != m.shape[0] or t.shape[0] == 0:
        raise ValueError("fit_derating: one row of terms per measurement")
    if np.any(m <= 0) or np.any(t < 0):
        raise ValueError("fit_derating: measurements must be positive and terms non-negative")
    off = np.zeros(len(m)) if offsets is None else np.asarray(offsets, dtype=float)
    if off.shape[:1] != m.shape or off.ndim > 2 or (off.ndim == 2 and off.shape[1] != 2) or np.any(off < 0):
        raise ValueError("fit_derating: one non-negative offset (or pair) per measurement")
    after, inside = _split(off, len(m))
    with np.errstate(divide="ignore"):
        logt = np.where(t > 0, np.log(np.where(t > 0, t, 1.0)), -np.inf)
    logm = np.log(m)
    theta = np.zeros(t.shape[1])
    if common:
        ridge = 0.0

    def objective(th: np.ndarray) -> float:
        r, _, _ = _residuals(logt, logm, th, after, inside)
        return float(r @ r + ridge * th @ th)

    done = 0
    for done in range(1, iterations + 1):
        r, binding, slope = _residuals(logt, logm, theta, after, inside)
        if common:  # one parameter, every term's log factor
            g = float(slope @ slope)
            step = np.full(t.shape[1], -float(slope @ r) / g if g > 0 else 0.0)
        else:
            jac = np.zeros((len(m), t.shape[1]))
            jac[np.arange(len(m)), binding] = slope
            # [J; sqrt(ridge) I] step = -[r; sqrt(ridge) theta], minimum norm when a term never binds
            lhs = np.vstack([jac, np.sqrt(ridge) * np.eye(t.shape[1])])
            rhs = -np.concatenate([r, np.sqrt(ridge) * theta])
            step = np.linalg.lstsq(lhs, rhs, rcond=None)[0]
        now, scale = objective(theta), 1.0
        while scale > 1e-6 and objective(theta + scale * step) > now - 1e-15:
            scale /= 2
        if scale <= 1e-6:
            break
        theta = theta + scale * step
        if np.max(np.abs(scale * step)) < 1e-10:
            break
    before = float(np.median(np.abs(np.log(predict(t, np.ones(t.shape[1]), off) / m))))
    after = float(np.median(np.abs(np.log(predict(t, np.exp(theta), off) / m))))
    return DeratingFit(tuple(float(x) for x in np.exp(theta)), before, after, done)
