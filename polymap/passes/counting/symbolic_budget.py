"""Symbolic counts under a time budget.

Parametric barvinok counts of deep tilings (three or four levels, halos,
triangular domains) can take minutes, and a call into ISL cannot be
interrupted from Python. :func:`count_symbolic_within` therefore computes
the formulas in a forked child process and gives up after ``seconds``::

    count_symbolic_within(model, mapping, arch, params=p, seconds=60)
      -> Counts with formulas                      (finished in time)
      -> Refusal "... did not finish within 60 s"  (child killed)

The budget comes from ``POLYMAP_SYMBOLIC_SECONDS`` (default 60) when not given.
"""
from __future__ import annotations

import dataclasses
import multiprocessing
import os

from polymap.errors import Refusal
from polymap.poly import KernelModel
from polymap.passes.counting.counting import Counts, count_mapping
from polymap.machine.arch import Architecture
from polymap.mapping.model import Mapping
from typing import Mapping as MappingT

DEFAULT_SECONDS = 60.0
ENV_VAR = "POLYMAP_SYMBOLIC_SECONDS"


def symbolic_budget() -> float:
    """Seconds allowed for symbolic counts: ``$POLYMAP_SYMBOLIC_SECONDS`` or 60."""
    try:
        return max(float(os.environ.get(ENV_VAR, DEFAULT_SECONDS)), 0.0)
    except ValueError:
        return DEFAULT_SECONDS


def _child(conn, model: KernelModel, mapping: Mapping, arch: Architecture, params: MappingT[str, int]) -> None:
    try:
        counts = count_mapping(model, mapping, arch, params=params, symbolic=True)
        conn.send(dataclasses.replace(counts, mapping=None))
    except BaseException:  # the parent recomputes to raise the real error
        conn.send(None)
    finally:
        conn.close()


def count_symbolic_within(model: KernelModel, mapping: Mapping, arch: Architecture, *, params: dict,
                          seconds: float | None = None) -> Counts:
    """``count_mapping(..., symbolic=True)``, refused when it takes more than ``seconds``."""
    seconds = symbolic_budget() if seconds is None else seconds
    try:
        ctx = multiprocessing.get_context("fork")
    except ValueError:  # no fork on this platform: no budget either
        return count_mapping(model, mapping, arch, params=params, symbolic=True)
    receive, send = ctx.Pipe(duplex=False)
    proc = ctx.Process(target=_child, args=(send, model, mapping, arch, params), daemon=True)
    proc.start()
    send.close()
    try:
        if not receive.poll(seconds):
            raise Refusal(
                f"the symbolic counts did not finish within {seconds:g} s (parametric barvinok counts of "
                f"deep tilings can take minutes); run without --symbolic for the exact numbers, or allow "
                f"more time with {ENV_VAR}=SECONDS",
                {"kernel": model.kernel.name, "symbolic": False, "budget_seconds": seconds})
        counts = receive.recv()
    except EOFError:
        counts = None
    finally:
        receive.close()
        if proc.is_alive():
            proc.kill()
        proc.join()
    if counts is None:  # the child failed: the same call here raises the same error
        return count_mapping(model, mapping, arch, params=params, symbolic=True)
    return dataclasses.replace(counts, mapping=mapping)
