"""The cost of running every command in a supervised child (``Budget.supervise``, issue 14).

    python benchmarks/bench_supervise.py [--repeat 15]

Runs ``main(["show", "examples/gemm.loop"])`` alternately supervised (the
fork) and in process (``supervise`` replaced by a direct call), and prints
the median CPU seconds (this process and its children) and wall seconds of
each. Takes a few seconds on a quiet machine.
"""
from __future__ import annotations

import argparse
import contextlib
import io
import resource
import statistics
import time
from pathlib import Path

from polymap import budget
from polymap.cli import main

GEMM = str(Path(__file__).resolve().parent.parent / "examples" / "gemm.loop")


def _cpu() -> float:
    s, c = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return s.ru_utime + s.ru_stime + c.ru_utime + c.ru_stime


def _in_process(self: budget.Budget, fn, args: tuple = (), *, what: str) -> int:
    return fn(*args)


def _once() -> tuple[float, float]:
    with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
        cpu, wall = _cpu(), time.perf_counter()
        assert main(["show", GEMM]) == 0
        return _cpu() - cpu, time.perf_counter() - wall


def run(repeat: int) -> None:
    supervised = budget.Budget.supervise
    _once()
    got: dict[str, list[tuple[float, float]]] = {"supervised": [], "in process": []}
    try:
        for _ in range(repeat):  # interleaved, so that the load hits both alike
            budget.Budget.supervise = supervised
            got["supervised"].append(_once())
            budget.Budget.supervise = _in_process
            got["in process"].append(_once())
    finally:
        budget.Budget.supervise = supervised
    for name, xs in got.items():
        print(f"{name:11s} show gemm: CPU median {1e3 * statistics.median(c for c, _ in xs):7.1f} ms, "
              f"wall median {1e3 * statistics.median(w for _, w in xs):7.1f} ms")


if __name__ == "__main__":
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--repeat", type=int, default=15)
    run(p.parse_args().repeat)
