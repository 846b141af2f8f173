"""A few hundred seeded fuzz cases under CI (issue 14): mutated kernels, mappings, architectures and
``.npz`` arrays through every command; no traceback, exit 0, 1 or 2, an answer within the budget.

The long run is ``python tests/fuzz/run.py --cases 10000``. Compile cases are few here (each builds C).
"""
from __future__ import annotations

import pytest

from fuzz.harness import make_case, run_case

FAST = ("show", "deps", "check", "cost", "transform", "run", "arch")


@pytest.mark.parametrize("block", range(6))
def test_fuzz_fast_commands(tmp_path, block):
    problems = []
    for seed in range(block * 40, block * 40 + 40):
        outcome = run_case(make_case(seed, commands=FAST, budget=20), tmp_path / str(seed), budget=20)
        if outcome.problem:
            problems.append(f"seed {seed} ({' '.join(outcome.case.argv)}): {outcome.problem}")
    assert not problems, "\n\n".join(problems)


@pytest.mark.slow
@pytest.mark.parametrize("block", range(3))  # seeds 0-11 in three tests, so that both workers share them
def test_fuzz_compile(tmp_path, block):
    problems = []
    for seed in range(block * 4, block * 4 + 4):
        outcome = run_case(make_case(seed, commands=("compile",), budget=30), tmp_path / str(seed), budget=30)
        if outcome.problem:
            problems.append(f"seed {seed} ({' '.join(outcome.case.argv)}): {outcome.problem}")
    assert not problems, "\n\n".join(problems)
