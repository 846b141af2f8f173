"""``polymap calibrate``: measure this machine and fit the cost model to it.

Three steps, each on generated C built like compile's code::

    1. bandwidth of every level      a streaming read (OpenMP threads, SIMD sum) over an array
                                     sized to half the level (DRAM: 4x the last cache), in
                                     elements per cycle across the level's inner boundary
    2. compute peak                  independent FMA chains in vector registers on every thread;
                                     the team's start (an empty parallel region, the threads
                                     asleep before it) and a barrier, measured, not fitted:
                                     the architecture's own (``compute.team_start_cycles``)
    3. derating, one factor a level  mapped kernels (gemm, jacobi-2d, conv2d at small sizes;
                                     compile's candidates for each) built and timed; the
                                     factors of :mod:`polymap.machine.derating` fitted to them

The result is an architecture (``host`` with measured bandwidths and
compute rate, each divided by its fitted factor) that ``--arch`` reads
back, and the model's error over the calibration kernels before and after.

The factors must generalise, not only fit: a handful of kernels and five
factors fit anything (a fit to a starved machine once lowered gemm's rho
from 0.82 to 0.71). So the strength of the fit's ridge is chosen by
leaving one calibration kernel out at a time (fit on the others, predict
it): the ridge whose held-out predictions rank each kernel's candidates
best (mean Spearman within a kernel), where one factor common to every
term (which corrects the bias and reorders nothing) is one of the choices
and is kept on a tie; the held-out numbers are reported next to the
in-sample ones.
The measurement functions take a ``probe`` (:class:`Probe`) so that the fit
can be tested on synthetic measurements.
"""
from __future__ import annotations

import ctypes
import math
import time
from dataclasses import dataclass, replace
from typing import Callable, Mapping as MappingT, Protocol, Sequence

from polymap.machine.arch import Architecture
from polymap.machine.derating import fit_derating, predict
from polymap.codegen.build import build_c
from polymap.passes.search.fidelity import log_error, spearman

#: the ridges (on ``log d``) the held-out check chooses from; None: one factor common to every term
#: (it corrects the bias and reorders nothing), kept unless a per-term fit ranks held-out kernels better
RIDGES: tuple[float | None, ...] = (None, 10.0, 1.0, 0.1, 1e-3)

STREAM_C = r"""
#include <stddef.h>
#include <omp.h>
typedef float vec __attribute__((vector_size(VBYTES)));
typedef float uvec __attribute__((vector_size(VBYTES), aligned(4)));  /* NumPy aligns less than a vector */
#define LANES ((long)(VBYTES / sizeof(float)))
double polymap_stream(const float *restrict a, long n, long reps) {
  double total = 0;
  #pragma omp parallel reduction(+:total)
  {
    long t = omp_get_thread_num(), nt = omp_get_num_threads();
    long blocks = n / (8 * LANES);  /* each thread rereads its own part, 8 vector sums deep */
    const uvec *v = (const uvec *)a + 8 * (blocks * t / nt);
    long mine = blocks * (t + 1) / nt - blocks * t / nt;
    vec s0 = {0}, s1 = {0}, s2 = {0}, s3 = {0}, s4 = {0}, s5 = {0}, s6 = {0}, s7 = {0};
    for (long r = 0; r < reps; r++) {
      for (long b = 0; b < mine; b++) {
        const uvec *p = v + 8 * b;
        s0 += p[0]; s1 += p[1]; s2 += p[2]; s3 += p[3]; s4 += p[4]; s5 += p[5]; s6 += p[6]; s7 += p[7];
      }
      __asm__ volatile("" ::: "memory");  /* one pass per repetition, not folded */
    }
    vec s = s0 + s1 + s2 + s3 + s4 + s5 + s6 + s7;
    for (long l = 0; l < LANES; l++) total += s[l];
  }
  return total;
}
double polymap_fma(long iters, float bv, float cv, float start) {
  double total = 0;
  #pragma omp parallel reduction(+:total)
  {
    vec z = {0};  /* distinct starting values from the caller: nothing to merge or fold */
    vec x0 = z + start, x1 = x0 + 0.1f, x2 = x1 + 0.1f, x3 = x2 + 0.1f, x4 = x3 + 0.1f, x5 = x4 + 0.1f;
    vec x6 = x5 + 0.1f, x7 = x6 + 0.1f, x8 = x7 + 0.1f, x9 = x8 + 0.1f, x10 = x9 + 0.1f, x11 = x10 + 0.1f;
    vec b = z + bv, c = z + cv;
    for (long k = 0; k < iters; k++) {
      x0 = x0 * b + c; x1 = x1 * b + c; x2 = x2 * b + c; x3 = x3 * b + c;
      x4 = x4 * b + c; x5 = x5 * b + c; x6 = x6 * b + c; x7 = x7 * b + c;
      x8 = x8 * b + c; x9 = x9 * b + c; x10 = x10 * b + c; x11 = x11 * b + c;
    }
    vec s = x0 + x1 + x2 + x3 + x4 + x5 + x6 + x7 + x8 + x9 + x10 + x11;
    for (int l = 0; l < (int)(VBYTES / sizeof(float)); l++) total += s[l];
  }
  return total;
}
/* the team's start: each call's parallel region wakes the sleeping threads (OMP_WAIT_POLICY=passive)
   and joins them, timed alone into seconds[c]; ``gap`` steps of the caller alone between calls, so that
   the threads are asleep again, as between a kernel's calls */
double polymap_team(long calls, long gap, double *seconds) {
  double total = 0;
  volatile double spin = 0;
  for (long c = 0; c < calls; c++) {
    double t0 = omp_get_wtime();
    #pragma omp parallel reduction(+:total)
    { total += omp_get_thread_num(); }
    seconds[c] = omp_get_wtime() - t0;
    for (long g = 0; g < gap; g++) spin += 1.0;
  }
  return total + spin;
}
/* one team, ``executions`` worksharing loops of one iteration per thread: a barrier each */
double polymap_barriers(long executions) {
  double total = 0;
  #pragma omp parallel reduction(+:total)
  {
    for (long e = 0; e < executions; e++) {
      #pragma omp for schedule(static)
      for (int t = 0; t < omp_get_num_threads(); t++) total += t;
    }
  }
  return total;
}
int polymap_threads(void) {
  int t = 1;
  #pragma omp parallel
  {
    #pragma omp single
    t = omp_get_num_threads();
  }
  return t;
}
"""

FMA_CHAINS = 12
#: calls of the team's start (and further barriers) timed: 200 x ~0.1 ms
TEAM_CALLS = 200


class Probe(Protocol):
    """What calibration measures: seconds of a streaming read and of the FMA loop."""

    def stream(self, elements: int, reps: int) -> float: ...

    def fma(self, iterations: int) -> float: ...

    def threads(self) -> int: ...


class NativeProbe:
    """The C kernels above, built once, best of a few runs each."""

    def __init__(self, vector_bytes: int, *, runs: int = 7) -> None:
        import numpy as np


        self.np = np
        self.lanes = vector_bytes // 4
        source = STREAM_C.replace("VBYTES", str(vector_bytes))
        self.lib = ctypes.CDLL(str(build_c(source, name="polymap_calibrate")))
        self.lib.polymap_stream.argtypes = [ctypes.POINTER(ctypes.c_float), ctypes.c_long, ctypes.c_long]
        self.lib.polymap_stream.restype = ctypes.c_double
        self.lib.polymap_fma.argtypes = [ctypes.c_long, ctypes.c_float, ctypes.c_float, ctypes.c_float]
        self.lib.polymap_fma.restype = ctypes.c_double
        self.lib.polymap_threads.restype = ctypes.c_int
        self.lib.polymap_team.argtypes = [ctypes.c_long, ctypes.c_long, ctypes.POINTER(ctypes.c_double)]
        self.lib.polymap_team.restype = ctypes.c_double
        self.lib.polymap_barriers.argtypes = [ctypes.c_long]
        self.lib.polymap_barriers.restype = ctypes.c_double
        self.runs = runs

    def stream(self, elements: int, reps: int) -> float:
        a = self.np.full(elements, 1.0, dtype=self.np.float32)
        ptr = a.ctypes.data_as(ctypes.POINTER(ctypes.c_float))
        self.lib.polymap_stream(ptr, elements, 1)  # warm-up: pages touched, caches filled
        return min(_timed(lambda: self.lib.polymap_stream(ptr, elements, reps)) for _ in range(self.runs))

    def fma(self, iterations: int) -> float:
        self.lib.polymap_fma(1000, 0.999, 0.001, 0.1)
        return min(_timed(lambda: self.lib.polymap_fma(iterations, 0.999, 0.001, 0.1)) for _ in range(self.runs))

    def threads(self) -> int:
        return int(self.lib.polymap_threads())

    def team(self, calls: int) -> float:
        """Median seconds of a call's empty parallel region, the caller alone for ~0.1 ms between calls."""
        seconds = (ctypes.c_double * calls)()
        self.lib.polymap_team(calls, 100_000, seconds)
        return sorted(seconds)[calls // 2]

    def barrier(self, executions: int) -> float:
        """Seconds per further worksharing loop (its barrier) inside one team."""
        one = min(_timed(lambda: self.lib.polymap_barriers(1)) for _ in range(self.runs))
        many = min(_timed(lambda: self.lib.polymap_barriers(executions + 1)) for _ in range(self.runs))
        return max(many - one, 0.0) / executions


def _timed(fn: Callable[[], object]) -> float:
    t0 = time.perf_counter()
    fn()
    return time.perf_counter() - t0


@dataclass(frozen=True)
class Bandwidths:
    """Measured elements per cycle (all instances together) per level, and FMAs per cycle in all."""

    per_level: tuple[tuple[str, float], ...]
    fma_per_cycle: float
    # cycles of an empty parallel region's start and of a further barrier, measured bare (None: the probe
    # has no threads); the measured architecture's (measured_architecture), not fitted (design.md)
    team_cycles: float | None = None
    barrier_cycles: float | None = None


def stream_sizes(arch: Architecture) -> list[tuple[str, int]]:
    """(level, f32 elements) to stream for each bounded level and the backing store."""
    out = []
    caches = [lv for lv in arch.levels[1:] if lv.capacity_bytes is not None and lv.name != "RF"]
    for lv in caches:
        out.append((lv.name, lv.capacity_bytes * lv.instances // 2 // 4))
    last = max((lv.capacity_bytes * lv.instances for lv in caches), default=8 << 20)
    out.insert(0, (arch.levels[0].name, 4 * last // 4))
    return out


def measure_bandwidths(arch: Architecture, probe: Probe, *, bytes_per_level: float = 2e9,
                       fma_iterations: int = 2_000_000) -> Bandwidths:
    """Each level's read bandwidth (elements per cycle) and the FMA rate, at ``arch``'s clock."""
    f = arch.compute.frequency
    levels = []
    for name, n in stream_sizes(arch):
        reps = max(1, int(bytes_per_level / (4 * n)))
        seconds = probe.stream(n, reps)
        levels.append((name, n * reps / seconds / f))
    seconds = probe.fma(fma_iterations)
    lanes = getattr(probe, "lanes", 16)
    fmas = probe.threads() * fma_iterations * FMA_CHAINS * lanes
    team = barrier = None
    if hasattr(probe, "team") and probe.threads() > 1:
        team, barrier = probe.team(TEAM_CALLS) * f, probe.barrier(TEAM_CALLS) * f
    return Bandwidths(tuple(levels), fmas / seconds / f, team, barrier)


def measured_architecture(arch: Architecture, bw: Bandwidths) -> Architecture:
    """``arch`` with the measured bandwidths and compute rate (ops per unit per cycle)."""
    measured = dict(bw.per_level)
    levels = tuple(replace(lv, bandwidth=measured[lv.name]) if lv.name in measured else lv for lv in arch.levels)
    compute = replace(arch.compute, ops_per_cycle=bw.fma_per_cycle / arch.compute.instances)
    if bw.team_cycles is not None:
        # the team's start and barrier as measured, not the assumed 5-10x (design.md): a factor fitted over
        # them would otherwise carry their error into the work of every kernel, and reorder candidates
        compute = replace(compute, team_start_cycles=bw.team_cycles, barrier_cycles=bw.barrier_cycles)
    # replace, not a new Architecture: the vector unit (and whatever else describes the machine) stays;
    # without it the model takes the CPU for an accelerator (no threads, no lanes), so the factors
    # were fitted to terms 16-32x too slow and applied to terms with lanes: the bias moved the wrong way
    return replace(arch, levels=levels, compute=compute)


def term_names(arch: Architecture) -> tuple[str, ...]:
    """The cost model's cycle terms: compute, then every level with a bandwidth."""
    return ("compute",) + tuple(lv.name for lv in arch.levels if lv.bandwidth is not None)


def derated_architecture(arch: Architecture, factors: MappingT[str, float], *, name: str) -> Architecture:
    """Divide each level's bandwidth (and the compute rate) by its factor: each term times the factor."""
    levels = tuple(replace(lv, bandwidth=lv.bandwidth / factors[lv.name])
                   if lv.bandwidth is not None and lv.name in factors else lv for lv in arch.levels)
    compute = replace(arch.compute, ops_per_cycle=arch.compute.ops_per_cycle / factors.get("compute", 1.0))
    return replace(arch, name=name, levels=levels, compute=compute)


@dataclass(frozen=True)
class Sample:
    """One calibration kernel: its cycle terms under the measured architecture, and its time."""

    label: str
    terms: tuple[tuple[str, float], ...]  # (term name, cycles)
    measured_s: float
    predicted_before_s: float  # under the architecture calibration started from
    group: str = ""  # the kernel and sizes whose candidates these are ("": a group of its own)
    # cycles of the compute term no factor scales (the team's start and barriers, Execution.sync_cycles;
    # the panels' copies, Execution.pack_cycles)
    fixed: float = 0.0
    # the cycle terms under the architecture calibration started from (its assumed rates; empty: unknown)
    terms_before: tuple[tuple[str, float], ...] = ()
    # the part of ``fixed`` every term carries (the team's, cost_model.level_term); the rest (the panels'
    # copies) the compute term alone
    team: float = 0.0

    @property
    def kernel(self) -> str:
        return self.group or self.label


@dataclass(frozen=True)
class Calibration:
    bandwidths: Bandwidths
    architecture: Architecture  # the fitted one, to be written
    factors: tuple[tuple[str, float], ...]
    samples: tuple[Sample, ...]
    error_before: float | None
    error_after: float | None
    spearman_before: float | None
    spearman_after: float | None
    ridge: float | None = 1e-3  # what the held-out check chose (None: one common factor)
    # mean Spearman within a kernel, in sample (before: the starting architecture, after: the fit)
    ranking_before: float | None = None
    ranking_after: float | None = None
    # each kernel predicted by a fit to the others: (median |log error|, mean Spearman within a kernel)
    held_out: tuple[float | None, float | None] = (None, None)
    held_out_without: tuple[float | None, float | None] = (None, None)  # one common factor
    # whose rates the factors derate: "measured" (the probes') or "assumed" (the starting architecture's,
    # kept when they predict the held-out calibration kernels better: a loaded machine's probes)
    rates: str = "measured"
    held_out_measured: tuple[float | None, float | None] = (None, None)  # the measured rates' held-out numbers


def within_kernels(samples: Sequence[Sample], predicted: Sequence[float]) -> float | None:
    """Mean over kernels with at least two samples of Spearman's rho between ``predicted`` and the
    measured times: how well a prediction ranks one kernel's candidates (what tuning needs)."""
    groups: dict[str, list[int]] = {}
    for k, smp in enumerate(samples):
        groups.setdefault(smp.kernel, []).append(k)
    rhos = [r for ks in groups.values() if len(ks) >= 2
            if (r := spearman([predicted[k] for k in ks], [samples[k].measured_s for k in ks])) is not None]
    return sum(rhos) / len(rhos) if rhos else None


def _factors(rows: Sequence[Sequence[float]], measured: Sequence[float], ridge: float | None,
             offsets: Sequence[float]) -> tuple[float, ...]:
    """Per-term factors fitted with ``ridge``; None: one common factor (least squares in log space
    of a single scale; without offsets the geometric mean of measured over predicted). ``offsets``:
    seconds of each row's compute term that no factor scales."""
    if not rows:
        return ()
    return fit_derating(rows, measured, ridge=ridge or 0.0, offsets=offsets, common=ridge is None).factors


def held_out(samples: Sequence[Sample], rows: Sequence[Sequence[float]], ridge: float | None,
             offsets: Sequence[float] | None = None) -> tuple[float | None, float | None]:
    """Leave one kernel out: each kernel's samples predicted by factors fitted (with ``ridge``) to
    the other kernels'; (median |log error|, mean Spearman within a kernel) of those predictions.
    ``offsets``: seconds of each row's compute term that no factor scales (none: 0)."""
    kernels = sorted({s.kernel for s in samples})
    if len(kernels) < 2:
        return None, None
    offsets = [0.0] * len(samples) if offsets is None else offsets
    predicted = [0.0] * len(samples)
    for name in kernels:
        train = [k for k, s in enumerate(samples) if s.kernel != name]
        factors = _factors([rows[k] for k in train], [samples[k].measured_s for k in train], ridge,
                           [offsets[k] for k in train])
        test = [k for k, s in enumerate(samples) if s.kernel == name]
        for k, p in zip(test, predict([rows[k] for k in test], factors, [offsets[k] for k in test])):
            predicted[k] = float(p)
    measured = [s.measured_s for s in samples]
    return log_error(predicted, measured), within_kernels(samples, predicted)


def choose_ridge(samples: Sequence[Sample], rows: Sequence[Sequence[float]],
                 offsets: Sequence[float] | None = None) -> tuple[float | None, dict]:
    """The ridge of :data:`RIDGES` whose held-out predictions rank best (then err least), and the
    held-out numbers of each; with fewer than two kernels, the smallest ridge (nothing to hold out)."""
    scores = {r: held_out(samples, rows, r, offsets) for r in RIDGES}
    if all(v == (None, None) for v in scores.values()):
        return RIDGES[-1], scores

    ranked = any(rho is not None for _, rho in scores.values())

    def key(r: float | None) -> tuple[float, int]:
        err, rho = scores[r]
        if not ranked:  # no kernel with two candidates: nothing to rank, the held-out error decides
            return (err if err is not None else math.inf, RIDGES.index(r))
        # rounded: a difference of rank correlation below 0.01 over a few kernels is noise; on a tie
        # the common factor (first), which reorders nothing, then the stronger ridge
        return (-round(rho, 2) if rho is not None else 0.0, RIDGES.index(r))
    return min(RIDGES, key=key), scores


def fit(samples: Sequence[Sample], measured_arch: Architecture, bw: Bandwidths, *,
        name: str = "host-calibrated") -> Calibration:
    """Fit one factor per term to ``samples``, with the ridge the held-out check chooses
    (:func:`choose_ridge`), and report the error before and after, in sample and held out."""
    names = term_names(measured_arch)
    f = measured_arch.compute.frequency
    # each term's work or traffic only: the team's start and barriers (Sample.team), which every term
    # carries (cost_model.level_term), are a time no factor scales, added after the max, the panels'
    # copies (the rest of Sample.fixed) likewise on the compute term alone (derating.predict's pairs)
    rows = [[max(dict(s.terms).get(t, 0.0) - (s.fixed if t == "compute" else s.team), 0.0) / f for t in names]
            for s in samples]
    offsets = [(s.team / f, (s.fixed - s.team) / f) for s in samples]
    measured = [s.measured_s for s in samples]
    ridge, scores = choose_ridge(samples, rows, offsets)
    factors = dict(zip(names, _factors(rows, measured, ridge, offsets)))
    after = [float(p) for p in predict(rows, [factors[t] for t in names], offsets)]
    before = [s.predicted_before_s for s in samples]
    return Calibration(bw, derated_architecture(measured_arch, factors, name=name), tuple(factors.items()),
                       tuple(samples), log_error(before, measured), log_error(after, measured),
                       spearman(before, measured), spearman(after, measured), ridge,
                       within_kernels(samples, before), within_kernels(samples, after),
                       scores[ridge], scores[None])


def fit_rates(samples: Sequence[Sample], before: Architecture, measured_arch: Architecture, bw: Bandwidths, *,
              name: str = "host-calibrated") -> Calibration:
    """:func:`fit` to the measured rates, unless a fit to the rates ``before`` assumed (the samples'
    ``terms_before``) predicts the held-out calibration kernels with a smaller error: the probes run
    on whatever else the machine is doing (under load 6 they measured 11.6 FMA/cycle where the quiet
    machine does 40, and the calibrated model's error rose from 0.81 to 0.93), the kernels' fastest
    samples much less so."""
    on_measured = fit(samples, measured_arch, bw, name=name)
    if not samples or any(not s.terms_before for s in samples):
        return on_measured
    assumed = fit([replace(s, terms=s.terms_before) for s in samples], before, bw, name=name)
    worse = on_measured.held_out[0] is not None and assumed.held_out[0] is not None \
        and assumed.held_out[0] < on_measured.held_out[0]
    chosen = assumed if worse else on_measured
    return replace(chosen, rates="assumed" if worse else "measured", held_out_measured=on_measured.held_out)

