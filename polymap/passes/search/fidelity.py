"""How well the model's numbers match measured ones: ranks, Spearman's rho, bias, log error.

Shared by ``compile --tune`` (per nest), ``polymap calibrate`` (over its
calibration kernels) and ``benchmarks/bench_fidelity.py``::

    predicted = [1.0, 2.0, 3.0, 4.0]; measured = [2.1, 3.9, 6.2, 8.0]
    spearman(predicted, measured)     # 1.0: the same order
    bias(predicted, measured)         # 2.0: median measured / predicted (> 1: the model is optimistic)
    log_error(predicted, measured)    # 0.69: median |log(measured / predicted)|
"""
from __future__ import annotations

import math
import statistics
from typing import Sequence


def ranks(values: Sequence[float]) -> list[float]:
    """1-based ranks, ties sharing the mean of their positions: ``[3, 1, 3] -> [2.5, 1, 2.5]``."""
    order = sorted(range(len(values)), key=lambda k: values[k])
    out = [0.0] * len(values)
    start = 0
    while start < len(order):
        end = start
        while end + 1 < len(order) and values[order[end + 1]] == values[order[start]]:
            end += 1
        for pos in range(start, end + 1):
            out[order[pos]] = (start + end) / 2 + 1
        start = end + 1
    return out


def spearman(a: Sequence[float], b: Sequence[float]) -> float | None:
    """Spearman's rank correlation (Pearson's on the ranks); None for fewer than 2 points or a constant side."""
    if len(a) != len(b):
        raise ValueError("spearman: sequences of different lengths")
    if len(a) < 2:
        return None
    ra, rb = ranks(a), ranks(b)
    ma, mb = statistics.fmean(ra), statistics.fmean(rb)
    cov = sum((x - ma) * (y - mb) for x, y in zip(ra, rb))
    va = sum((x - ma) ** 2 for x in ra)
    vb = sum((y - mb) ** 2 for y in rb)
    if va == 0 or vb == 0:
        return None
    return cov / math.sqrt(va * vb)


def _pairs(predicted: Sequence[float | None], measured: Sequence[float | None]) -> list[tuple[float, float]]:
    return [(p, m) for p, m in zip(predicted, measured) if p is not None and m is not None and p > 0 and m > 0]


def bias(predicted: Sequence[float | None], measured: Sequence[float | None]) -> float | None:
    """Median of measured / predicted over the pairs both known (> 1: the model is optimistic)."""
    pairs = _pairs(predicted, measured)
    return statistics.median(m / p for p, m in pairs) if pairs else None


def log_error(predicted: Sequence[float | None], measured: Sequence[float | None]) -> float | None:
    """Median of |log(measured / predicted)| (0: exact; log 2 = 0.69: off by a factor of two)."""
    pairs = _pairs(predicted, measured)
    return statistics.median(abs(math.log(m / p)) for p, m in pairs) if pairs else None
