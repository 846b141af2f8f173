"""An isl candidate ranked at reduced sizes replaces the choice only when it wins there by
``choice.REDUCED_MARGIN`` (gate6). PolyBench jacobi-1d at LARGE: its wavefront won by 0.8% at
TSTEPS=62, N=125, and its code (one thread: both arrays fit in L1, tiles gain nothing) ran 0.60x of
the original. The gain is computed here from the exact counts at the reduced sizes (``count_mapping``
and ``evaluate`` on both mappings, as a user's ``cost`` would), not read off the choice; a margin just
above it keeps the original order, one just below it takes the isl candidate."""
from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from polymap.driver import parse
from polymap.machine.presets import load_architecture
from polymap.mapping.model import mapping_loop_extents
from polymap.passes.counting.cost_model import evaluate, mapping_execution
from polymap.passes.counting.counting import count_mapping
from polymap.passes.search import choice as choice_module
from polymap.passes.search import isl_schedule
from polymap.passes.search.choice import ChoiceOptions, choose, original_mapping

ROOT = Path(__file__).resolve().parent.parent
FAST = ChoiceOptions(search_evaluations=0)
SIZES = {"TSTEPS": 6, "N": 40}  # beyond the budgets below, reduced to N=10
HOST = load_architecture("host")


@pytest.fixture
def small_budgets(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(isl_schedule, "ENUMERATION_LIMIT", 200)
    monkeypatch.setattr(isl_schedule, "RANKING_LIMIT", 120)


def _kernel():
    return parse((ROOT / "examples/polybench/jacobi-1d.loop").read_text(), "jacobi-1d.loop").kernels[0]


def _cycles(model, mapping, params) -> float:
    run = mapping_execution(model, mapping, HOST, mapping_loop_extents(model.kernel, mapping, params, model=model))
    return evaluate(count_mapping(model, mapping, HOST, params=params), HOST,
                    execution=dataclasses.replace(run, sync=1.0)).cycles


def test_a_reduced_size_win_within_the_margin_keeps_the_choice(small_budgets: None, monkeypatch: pytest.MonkeyPatch):
    first = choose(_kernel(), HOST, SIZES, options=FAST).nests[0]
    assert first.chosen.ranked_at and first.chosen.source.startswith("isl schedule")
    model = choose(_kernel(), HOST, SIZES, options=FAST).model
    small = dict(first.chosen.ranked_at)
    winner = _cycles(model, first.chosen.counted, small)
    original = _cycles(model, original_mapping(model.kernel, 0, HOST), small)
    gain = 1 - winner / original
    assert gain > 0
    monkeypatch.setattr(choice_module, "REDUCED_MARGIN", gain * 1.01)
    kept = choose(_kernel(), HOST, SIZES, options=FAST).nests[0]
    assert kept.chosen.mapping is None and not kept.chosen.ranked_at
    assert not any(c.ranked_at for c in kept.candidates)
    monkeypatch.setattr(choice_module, "REDUCED_MARGIN", gain * 0.99)
    assert choose(_kernel(), HOST, SIZES, options=FAST).nests[0].chosen.source == first.chosen.source
