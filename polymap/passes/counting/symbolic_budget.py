"""Symbolic counts under the time budget.

Parametric barvinok counts of deep tilings (three or four levels, halos,
triangular domains) can take minutes, and a call into ISL cannot be
interrupted from Python. :func:`count_symbolic_within` therefore computes
the formulas in a forked child (:meth:`polymap.budget.Budget.run`) that is
killed when the budget runs out::

    count_symbolic_within(model, mapping, arch, params=p, budget=Budget(seconds=60))
      -> Counts with formulas                                  (finished in time)
      -> BudgetExceeded "... ran out during the symbolic counts" (exit 2)
"""
from __future__ import annotations

import dataclasses
from typing import Mapping as MappingT

from polymap.budget import Budget, ChildFailed
from polymap.machine.arch import Architecture
from polymap.mapping.model import Mapping
from polymap.passes.counting.counting import Counts, count_mapping
from polymap.poly import KernelModel


def _symbolic(model: KernelModel, mapping: Mapping, arch: Architecture, params: MappingT[str, int]) -> Counts:
    counts = count_mapping(model, mapping, arch, params=params, symbolic=True)
    return dataclasses.replace(counts, mapping=None)


def count_symbolic_within(model: KernelModel, mapping: Mapping, arch: Architecture, *, params: dict,
                          budget: Budget | None = None) -> Counts:
    """``count_mapping(..., symbolic=True)``, refused (exit 2) when the budget runs out."""
    budget = budget if budget is not None else Budget()
    what = ("the symbolic counts (parametric barvinok counts of deep tilings can take minutes; "
            "without --symbolic the numbers are exact and fast)")
    try:
        counts = budget.run(_symbolic, (model, mapping, arch, params), limit=budget.remaining(),
                            timed_out=None, what=what)
    except ChildFailed:  # the child failed: the same call here raises the same error
        return count_mapping(model, mapping, arch, params=params, symbolic=True)
    if counts is None:
        raise budget.refusal(what)
    return dataclasses.replace(counts, mapping=mapping)
