"""Timing generated C code in a child process, on random inputs, until the median is stable.

``compile --tune K`` measures candidates with a :class:`Timer`: anything
callable as ``timer(job) -> Measurement``. The default, :class:`ProcessTimer`,
starts ``python -m polymap.codegen.timing`` per candidate, hands it the job
(pickled on stdin: the kernel, its C source, the sizes, the repeat policy)
and reads the samples back; a candidate that hangs past the time limit is
killed and one that crashes is reported by its signal, never taking the
compile with it::

    job = TimingJob("register tiles", kernel, c_source, {"M": 1024, ...})
    ProcessTimer()(job)   # Measurement(seconds=0.0213, samples=(0.0215, 0.0213, 0.0212), error=None)
    # or, for a hang:       Measurement(None, (), "timed out after 60 s")

Tests inject a fake timer (a function from the job's ``source`` to
seconds), so that no test depends on the machine's speed. The sampling
policy itself (:func:`sample_until_stable`) is pure over a ``run`` callback.
"""
from __future__ import annotations

import pickle
import os
import signal
import statistics
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field
from typing import Any, Callable, Mapping, Protocol, Sequence

import numpy as np

from polymap import ir
from polymap.errors import PolymapError
from polymap.codegen.build import CFunction, load_kernel
from polymap.codegen.verify import needs_well_conditioned
from polymap.tensors import allocate, random_inputs


@dataclass(frozen=True)
class SamplingPolicy:
    """How long to time one candidate: warm-up runs, then samples until the median is stable."""

    warmup: int = 1
    min_repeats: int = 3
    max_repeats: int = 25
    tolerance: float = 0.02  # relative change of the median by one more sample that counts as stable
    max_seconds: float = 3.0  # of sampling per candidate (the samples taken by then are kept)
    min_sample_seconds: float = 0.002  # shorter runs are repeated inside one sample


@dataclass(frozen=True)
class TimingJob:
    """One candidate to time: the whole kernel's C source with that candidate's mapping."""

    source: str  # the candidate's name ("register tiles", "search #2")
    kernel: ir.Kernel
    c_source: str
    params: Mapping[str, int]
    policy: SamplingPolicy = SamplingPolicy()
    seed: int = 0
    limit_seconds: float = 60.0  # building and timing together, then the child is killed
    mapping: Any = field(default=None, compare=False)  # for timers that look at the mapping (tests)


@dataclass(frozen=True)
class Measurement:
    """The median of the samples in seconds, or None with the reason the candidate was dropped."""

    seconds: float | None
    samples: tuple[float, ...] = ()
    error: str | None = None
    #: per sample, the CPU seconds of the process's busiest thread (:func:`team_cpu_seconds`), where the
    #: timer keeps them: the critical path of a static OpenMP team, which waiting for a core does not inflate
    cpu_samples: tuple[float, ...] = ()


class Timer(Protocol):
    def __call__(self, job: TimingJob) -> Measurement: ...


def sample_until_stable(run: Callable[[], float], policy: SamplingPolicy, *,
                        clock: Callable[[], float] = time.perf_counter) -> tuple[float, ...]:
    """Samples of ``run()`` (seconds each) after ``policy.warmup`` discarded ones.

    Stops when at least ``min_repeats`` samples are in and one more sample
    moved the median by at most ``tolerance`` (relative), or at
    ``max_repeats``, or once ``max_seconds`` have passed (with at least
    ``min_repeats`` samples).
    """
    for _ in range(policy.warmup):
        run()
    start = clock()
    samples: list[float] = []
    while len(samples) < policy.max_repeats:
        samples.append(run())
        if len(samples) < policy.min_repeats:
            continue
        before, now = statistics.median(samples[:-1]), statistics.median(samples)
        if abs(now - before) <= policy.tolerance * max(now, 1e-12):
            break
        if clock() - start > policy.max_seconds:
            break
    return tuple(samples)


def timing_environment(environ: Mapping[str, str]) -> dict[str, str]:
    """The child's environment: ``environ`` with OpenMP's idle threads sleeping unless told otherwise.

    On a shared machine (more runnable threads than cores) spinning OpenMP
    threads make the timings swing by 50x (gemm 512 on 2 shared cores: 1 ms
    to 60 ms with the default policy, 0.8 to 20 ms with ``passive``).
    """
    return {**environ, "OMP_WAIT_POLICY": environ.get("OMP_WAIT_POLICY", "passive")}


@dataclass(frozen=True)
class ProcessTimer:
    """Times each job in a fresh ``python -m polymap.codegen.timing`` child (see the module docstring).

    ``environment`` is the child's (None: this process's); the command line
    fills it with :func:`timing_environment`.
    """

    environment: Mapping[str, str] | None = None

    def __call__(self, job: TimingJob) -> Measurement:
        data = pickle.dumps({"kernel": job.kernel, "c_source": job.c_source, "params": dict(job.params),
                             "policy": job.policy, "seed": job.seed})
        try:
            proc = subprocess.run([sys.executable, "-m", "polymap.codegen.timing"], input=data,
                                  capture_output=True, timeout=job.limit_seconds,
                                  env=None if self.environment is None else dict(self.environment))
        except subprocess.TimeoutExpired:
            return Measurement(None, (), f"timed out after {job.limit_seconds:g} s")
        if proc.returncode < 0:
            return Measurement(None, (), f"crashed ({_signal_name(-proc.returncode)})")
        try:
            result = pickle.loads(proc.stdout)
        except (pickle.UnpicklingError, EOFError, ValueError):
            tail = proc.stderr.decode(errors="replace").strip().splitlines()[-1:] or ["no output"]
            return Measurement(None, (), f"the timing child failed (exit {proc.returncode}): {tail[0]}")
        if result.get("error"):
            return Measurement(None, (), result["error"])
        samples = tuple(result["samples"])
        return Measurement(statistics.median(samples), samples, None)


    def interleaved(self, jobs: Sequence[TimingJob], policy: InterleavedPolicy) -> tuple[Measurement, ...]:
        """``jobs`` timed round-robin in one child (:func:`interleaved_samples`): every sample of every
        job, in round order (sample ``r`` of each job was taken in round ``r``, side by side)."""
        data = pickle.dumps({"interleave": [(j.kernel, j.c_source, dict(j.params), j.seed) for j in jobs],
                             "policy": policy})
        limit = sum(j.limit_seconds for j in jobs)
        try:
            proc = subprocess.run([sys.executable, "-m", "polymap.codegen.timing"], input=data,
                                  capture_output=True, timeout=limit,
                                  env=None if self.environment is None else dict(self.environment))
        except subprocess.TimeoutExpired:
            return tuple(Measurement(None, (), f"timed out after {limit:g} s") for _ in jobs)
        if proc.returncode < 0:
            return tuple(Measurement(None, (), f"crashed ({_signal_name(-proc.returncode)})") for _ in jobs)
        try:
            result = pickle.loads(proc.stdout)
        except (pickle.UnpicklingError, EOFError, ValueError):
            tail = proc.stderr.decode(errors="replace").strip().splitlines()[-1:] or ["no output"]
            return tuple(Measurement(None, (), f"the timing child failed (exit {proc.returncode}): {tail[0]}")
                         for _ in jobs)
        if result.get("error"):
            return tuple(Measurement(None, (), result["error"]) for _ in jobs)
        return tuple(Measurement(statistics.median(w for w, _ in s), tuple(w for w, _ in s), None,
                                 tuple(c for _, c in s)) for s in result["samples"])


@dataclass(frozen=True)
class InterleavedPolicy:
    """How whole kernels are compared side by side (:func:`interleaved_samples`): rounds over every job,
    forward then backward, until every median is stable.

    Each sample is a *steady-state block*: the inputs restored, one untimed call (it wakes the OpenMP
    team and brings the data into the caches: the cold call of a block is bimodal on a shared machine,
    the woken team sometimes running on one vCPU for the whole call), then back-to-back calls for at
    least ``min_sample_seconds``, their mean. Side by side, a drift of the machine's load hits every job
    of a round alike, so rounds are compared pairwise (:func:`paired_ratio`).
    """

    rounds: int = 9
    max_rounds: int = 27
    stable: float = 0.02  # each median moved by at most this fraction with the last forward-backward pair
    min_sample_seconds: float = 0.002
    max_seconds: float = 20.0  # of sampling in all (the rounds taken by then are kept, at least 3)


def team_cpu_seconds() -> dict[int, float]:
    """CPU seconds so far of each thread of this process, by thread id (Linux; elsewhere the calling
    thread's only).

    The calling thread's from ``time.thread_time`` (exact while it runs); the others' (the OpenMP team's
    workers, asleep between calls under the passive wait policy, :func:`timing_environment`) from
    ``/proc/self/task/<id>/schedstat``, whose first field is the thread's time on a CPU in nanoseconds,
    brought up to date when the thread sleeps.
    """
    me = threading.get_native_id()
    out = {me: time.thread_time()}
    try:
        tasks = os.listdir("/proc/self/task")
    except OSError:
        return out
    for t in tasks:
        if t.isdigit() and int(t) != me:
            try:
                with open(f"/proc/self/task/{t}/schedstat") as f:
                    out[int(t)] = int(f.read().split()[0]) * 1e-9
            except (OSError, ValueError, IndexError):  # the thread ended meanwhile, or no schedstat
                continue
    return out


def critical_cpu(before: Mapping[int, float], after: Mapping[int, float]) -> float:
    """The largest CPU time any one thread spent between two :func:`team_cpu_seconds` readings (a thread
    born in between counts from zero): the work on a static team's critical path, without the time its
    threads waited for a core. On a loaded machine this, not the wall time, is what one code timed twice
    repeats (docs/design.md, "Timing")."""
    return max((t - before.get(k, 0.0) for k, t in after.items()), default=0.0)


def interleaved_samples(runs: Sequence[Callable[[], None]], restore: Sequence[Callable[[], None]],
                        policy: InterleavedPolicy, *, clock: Callable[[], float] = time.perf_counter,
                        cpu_clock: Callable[[], Mapping[int, float]] = team_cpu_seconds,
                        ) -> list[list[tuple[float, float]]]:
    """``(wall, critical CPU)`` seconds per call, one steady-state block per job per round (see
    :class:`InterleavedPolicy`; :func:`critical_cpu` of ``cpu_clock``'s readings); ``restore[k]()``
    puts job ``k``'s inputs back before its block."""

    def block(k: int, number: int) -> tuple[float, float]:
        restore[k]()
        runs[k]()  # untimed: the team's wake, the data into the caches
        c0, t0 = cpu_clock(), clock()
        for _ in range(number):
            runs[k]()
        wall = clock() - t0
        return wall / number, critical_cpu(c0, cpu_clock()) / number

    numbers = []
    for k in range(len(runs)):  # warm-up, and how many calls make one block of at least min_sample_seconds
        first, _ = block(k, 1)
        numbers.append(max(1, int(policy.min_sample_seconds / max(first, 1e-9)) + 1)
                       if first < policy.min_sample_seconds else 1)
    samples: list[list[tuple[float, float]]] = [[] for _ in runs]
    start, r = clock(), 0
    while True:
        order = range(len(runs)) if r % 2 == 0 else reversed(range(len(runs)))
        for k in order:
            samples[k].append(block(k, numbers[k]))
        r += 1
        if r >= policy.max_rounds or (r >= 3 and clock() - start > policy.max_seconds):
            break
        if r >= policy.rounds and r % 2 == 0 and _stable(samples, policy.stable):
            break
    return samples


def _stable(samples: list[list[tuple[float, float]]], tolerance: float) -> bool:
    """Every job's median wall time moved by at most ``tolerance`` with its last two samples (one
    forward and one backward round)."""
    for smp in samples:
        walls = [w for w, _ in smp]
        if len(walls) < 3:
            return False
        now, before = statistics.median(walls), statistics.median(walls[:-2] or walls)
        if abs(now - before) > tolerance * before:
            return False
    return True


def paired_ratio(a: Measurement, b: Measurement) -> float | None:
    """The median over rounds of ``a``'s sample over ``b``'s taken in the same round (None when either
    was not measured): side by side, a drift of the load cancels out of each ratio."""
    pairs = [(x, y) for x, y in zip(a.samples, b.samples) if y > 0]
    if a.seconds is None or b.seconds is None or not pairs:
        return None
    return statistics.median(x / y for x, y in pairs)


def compare(timer: Timer, jobs: Sequence[TimingJob], policy: InterleavedPolicy) -> tuple[Measurement, ...]:
    """``jobs`` timed side by side: in one child (:meth:`ProcessTimer.interleaved`) when ``timer`` can,
    else (an injected timer) by calling it once per job per round, in alternating order."""
    if isinstance(timer, ProcessTimer):
        return timer.interleaved(jobs, policy)
    seconds: list[list[float]] = [[] for _ in jobs]
    errors: list[str | None] = [None] * len(jobs)
    for r in range(max(3, policy.rounds)):
        for k in (range(len(jobs)) if r % 2 == 0 else reversed(range(len(jobs)))):
            if errors[k] is None:
                m = timer(jobs[k])
                if m.seconds is None:
                    errors[k] = m.error or "not measured"
                else:
                    seconds[k].append(m.seconds)
    return tuple(Measurement(None, (), e) if e is not None else Measurement(statistics.median(s), tuple(s), None)
                 for s, e in zip(seconds, errors))


def _signal_name(number: int) -> str:
    try:
        return signal.Signals(number).name
    except ValueError:
        return f"signal {number}"


def prepared_run(kernel: ir.Kernel, c_source: str, params: Mapping[str, int],
                 seed: int) -> tuple[CFunction, dict[str, np.ndarray], dict[str, np.ndarray]]:
    """Build ``c_source`` and give its function, the pristine random inputs and the arrays it runs on.

    Every timed run first copies ``pristine`` into the arrays (``np.copyto``), so that it starts from
    the same data (accumulating kernels never grow to inf). The arrays are placed alike for every
    candidate and every run (:func:`polymap.tensors.allocate`'s ``staggered``): NumPy's placement
    varies with the allocator's history, and the same code ran 15% apart on two placements.
    """
    fn = load_kernel(c_source, kernel)
    pristine = random_inputs(kernel, params, seed=seed, well_conditioned=needs_well_conditioned(kernel))
    store = allocate(kernel, params, staggered=True)
    for name, a in pristine.items():
        np.copyto(store[name], a)  # into the placed arrays (a copy would be placed by NumPy again)
    tensors = {d.name: store[d.name] for d in kernel.decls if d.role != "local"}
    return fn, pristine, tensors


def _time_in_this_process(kernel: ir.Kernel, c_source: str, params: Mapping[str, int],
                          policy: SamplingPolicy, seed: int) -> tuple[float, ...]:
    """Build, then sample the kernel on fresh copies of random inputs (the child's work)."""
    built, pristine, tensors = prepared_run(kernel, c_source, params, seed)
    fn = built.call_here  # this child never forks: no thread per call inside the timed region

    def once() -> float:
        for name, a in pristine.items():
            np.copyto(tensors[name], a)  # every run starts from the same data (no growth to inf)
        t0 = time.perf_counter()
        fn(tensors, params)
        return time.perf_counter() - t0

    first = once()
    number = max(1, int(policy.min_sample_seconds / max(first, 1e-9)) + 1) if first < policy.min_sample_seconds else 1

    def sample() -> float:
        if number == 1:
            return once()
        for name, a in pristine.items():
            np.copyto(tensors[name], a)
        t0 = time.perf_counter()
        for _ in range(number):
            fn(tensors, params)
        return (time.perf_counter() - t0) / number

    return sample_until_stable(sample, policy)


def _interleave_in_this_process(jobs: Sequence[tuple[ir.Kernel, str, Mapping[str, int], int]],
                                policy: InterleavedPolicy) -> list[list[tuple[float, float]]]:
    """Build every job, then :func:`interleaved_samples` (the child's work for :meth:`ProcessTimer.interleaved`)."""
    runs, restore = [], []
    for kernel, c_source, params, seed in jobs:
        built, pristine, tensors = prepared_run(kernel, c_source, params, seed)
        fn = built.call_here  # no thread start per call inside the timed region

        def run(fn: Callable[..., Any] = fn, tensors: dict[str, np.ndarray] = tensors,
                params: dict[str, int] = dict(params)) -> None:
            fn(tensors, params)

        def put_back(pristine: dict[str, np.ndarray] = pristine, tensors: dict[str, np.ndarray] = tensors) -> None:
            for name, a in pristine.items():
                np.copyto(tensors[name], a)  # every block starts from the same data (no growth to inf)

        runs.append(run)
        restore.append(put_back)
    return interleaved_samples(runs, restore, policy)


def _child_main() -> int:
    job = pickle.loads(sys.stdin.buffer.read())
    if "interleave" in job:
        try:
            out = {"samples": _interleave_in_this_process(job["interleave"], job["policy"])}
        except (PolymapError, OSError, ValueError, MemoryError) as exc:
            out = {"error": f"{type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}"}
        sys.stdout.buffer.write(pickle.dumps(out))
        sys.stdout.buffer.flush()
        return 0
    try:
        samples = _time_in_this_process(job["kernel"], job["c_source"], job["params"], job["policy"], job["seed"])
        out = {"samples": list(samples)}
    except (PolymapError, OSError, ValueError, MemoryError) as exc:  # the parent drops the candidate, with this
        out = {"error": f"{type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}"}
    sys.stdout.buffer.write(pickle.dumps(out))
    sys.stdout.buffer.flush()
    return 0


if __name__ == "__main__":
    sys.exit(_child_main())
