"""``--tune K``: ranks and statistics, the sampling policy, tuning with an injected timer, the child timer.

No test depends on the machine's speed: every choice is made with a fake
timer (seconds looked up by candidate); the real child timer is only
checked for what it reports (samples, crashes, hangs), not for numbers.
"""
from __future__ import annotations

import statistics
from pathlib import Path

import pytest
from hypothesis import given, settings, strategies as st
from scipy import stats

from polymap.mapping.files import mapping_from_dict
from polymap import api
from polymap.codegen.timing import (InterleavedPolicy, Measurement, ProcessTimer, SamplingPolicy, TimingJob,
                                   interleaved_samples, paired_ratio, sample_until_stable)
from polymap.driver import load_program, param_values, parse
from polymap.machine.presets import load_architecture
from polymap.passes.search.choice import ChoiceOptions, choose
from polymap.passes.search.fidelity import bias, log_error, ranks, spearman
from polymap.passes.search.tune import TuneCandidate, TuneOptions, rank_measurements, tune, tune_choice

EXAMPLES = Path(__file__).parent.parent / "examples"
SIZES = {"M": 16, "N": 16, "K": 16}


@pytest.fixture(scope="module")
def gemm():
    return load_program(EXAMPLES / "gemm.loop").kernels[0]


@pytest.fixture(scope="module")
def host():
    return load_architecture("host")


@pytest.fixture(scope="module")
def gemm_choice(gemm, host):
    # as tuned_choice asks for --tune 4: the losers counted too
    return choose(gemm, host, param_values(gemm, SIZES), options=ChoiceOptions(search_top=4, count_losers=True))


class FakeTimer:
    """Seconds by candidate source; records the jobs it was given."""

    def __init__(self, seconds: dict, default: float = 1.0):
        self.seconds, self.default, self.jobs = seconds, default, []

    def __call__(self, job: TimingJob) -> Measurement:
        self.jobs.append(job)
        s = self.seconds.get(job.source, self.default)
        if isinstance(s, str):
            return Measurement(None, (), s)
        return Measurement(s, (s, s, s))


def tuning_jobs(timer: FakeTimer) -> list[TimingJob]:
    """The jobs of the per-nest tuning, without the confirmation's (whole kernels: their ``mapping`` is
    every nest's, a tuple)."""
    return [j for j in timer.jobs if not isinstance(j.mapping, tuple)]


# --------------------------------------------------------------------------- statistics


@pytest.mark.parametrize("a, b", [
    ([1, 2, 3, 4, 5], [2, 1, 4, 3, 5]),
    ([1, 2, 3, 4], [4, 3, 2, 1]),
    ([1, 1, 2, 3, 3, 5], [0.1, 0.3, 0.2, 0.9, 0.5, 0.4]),
    ([3.2, 1.0, 7.5, 7.5, 2.2], [10, 30, 20, 20, 5]),
])
def test_spearman_agrees_with_scipy(a, b):
    assert spearman(a, b) == pytest.approx(stats.spearmanr(a, b).statistic)


def test_ranks_share_ties_and_degenerate_spearman():
    assert ranks([3, 1, 3]) == [2.5, 1.0, 2.5]
    assert spearman([1], [2]) is None
    assert spearman([1, 2, 3], [5, 5, 5]) is None


def test_bias_and_log_error_are_medians():
    predicted, measured = [1.0, 2.0, 4.0], [3.0, 2.0, 2.0]
    assert bias(predicted, measured) == 1.0  # ratios 3, 1, 0.5
    assert log_error(predicted, measured) == pytest.approx(statistics.median([abs(__import__("math").log(r))
                                                                             for r in (3, 1, 0.5)]))
    assert bias([None, 1.0], [2.0, None]) is None


# --------------------------------------------------------------------------- sampling


def _runs(values):
    it = iter(values)
    return lambda: next(it)


def test_sampling_discards_warmup_and_stops_when_the_median_is_stable():
    policy = SamplingPolicy(warmup=2, min_repeats=3, max_repeats=10, tolerance=0.01, max_seconds=1e9)
    # warm-up 9, 9 (dropped); then 5, 1, 1: the median moves 5 -> 3 -> 1; 1 more keeps it at 1
    samples = sample_until_stable(_runs([9, 9, 5, 1, 1, 1, 1, 1]), policy, clock=lambda: 0.0)
    assert samples == (5, 1, 1, 1)


def test_sampling_takes_at_least_three_and_at_most_max_repeats():
    policy = SamplingPolicy(warmup=0, min_repeats=3, max_repeats=6, tolerance=0.0, max_seconds=1e9)
    assert len(sample_until_stable(_runs([1] * 10), policy, clock=lambda: 0.0)) == 3
    growing = sample_until_stable(_runs(range(1, 20)), policy, clock=lambda: 0.0)
    assert growing == (1, 2, 3, 4, 5, 6)


def test_sampling_stops_at_the_time_limit_after_the_minimum():
    ticks = iter(range(100))
    policy = SamplingPolicy(warmup=0, min_repeats=3, max_repeats=50, tolerance=0.0, max_seconds=4)
    samples = sample_until_stable(_runs(range(1, 100)), policy, clock=lambda: next(ticks))
    # the clock starts at 0 and is read once per sample from the third on: 1, 2, 3, 4, 5 > 4 at the 7th
    assert len(samples) == 7


# --------------------------------------------------------------------------- tuning with a fake timer


def test_tune_keeps_the_fastest_and_reports_ranks(gemm, host):
    model = api.model(gemm)
    values = param_values(gemm, SIZES)
    cands = [TuneCandidate("a", None, 1e-3), TuneCandidate("b", None, 2e-3),
             TuneCandidate("c", None, 3e-3), TuneCandidate("d", None, 4e-3)]
    timer = FakeTimer({"a": 5e-3, "b": 2e-3, "c": "crashed (SIGSEGV)", "d": 8e-3})
    t = tune(cands, kernel=gemm, model=model, nest=0, arch=host, params=values, timer=timer)
    assert [j.source for j in timer.jobs] == ["a", "b", "c", "d"]
    assert [c.rank_model for c in t.candidates] == [1, 2, 3, 4]
    assert [c.rank_measured for c in t.candidates] == [2, 1, None, 3]
    assert t.chosen.candidate.source == "b"
    assert t.spearman == pytest.approx(stats.spearmanr([1, 2, 4], [5e-3, 2e-3, 8e-3]).statistic)
    assert t.bias == pytest.approx(statistics.median([5.0, 1.0, 2.0]))
    doc = t.to_json()
    assert set(doc) == {"nest", "spearman", "bias", "candidates"}
    assert doc["candidates"][2]["dropped"] == "crashed (SIGSEGV)"
    assert doc["candidates"][2]["measured_s"] is None and not doc["candidates"][2]["chosen"]
    keys = {"source", "mapping", "predicted_s", "measured_s", "rank_model", "rank_measured", "chosen"}
    assert all(keys <= set(c) for c in doc["candidates"])


def test_nothing_measured_chooses_nothing():
    t = rank_measurements(0, [(TuneCandidate("a", None, 1.0), Measurement(None, (), "timed out after 1 s"))])
    assert t.chosen is None and t.spearman is None and t.bias is None


def test_tune_choice_replaces_the_models_pick(gemm_choice, host, gemm):
    from polymap.passes.search.tune import distinct, usable_candidates

    nc = gemm_choice.nests[0]
    # the pool: the model's best 3 of distinct code (cli.md: "the model's best K"), in its order
    usable = distinct(gemm_choice.model, usable_candidates(nc), param_values(gemm, SIZES), limit=3)
    assert len(usable) == 3, [c.source for c in nc.candidates]
    assert usable[0].source == nc.chosen.source
    last = usable[2].source
    timer = FakeTimer({last: 1e-6}, default=1.0)
    tuned = tune_choice(gemm_choice, arch=host, params=param_values(gemm, SIZES),
                        options=TuneOptions(k=3), timer=timer)
    assert len(tuning_jobs(timer)) == 3
    # exactly those three, each once: not a spread over the model's predictions reaching further down
    assert sorted(j.source for j in tuning_jobs(timer)) == sorted(c.source for c in usable)
    assert tuned.confirmation is not None and tuned.confirmation.kept == "tuned"
    assert tuned.choice.nests[0].chosen.source == last
    assert tuned.choice.nests[0].chosen.mapping == usable[2].mapping
    assert tuned.tuning[0].chosen.rank_model == 3
    # the job is the whole kernel with that candidate's mapping (its C source differs per candidate)
    assert len({j.c_source for j in tuning_jobs(timer)}) == 3
    # only the pick changes: what the choice reported about the nest stays
    for field in ("objective", "stopped", "skipped", "scheduler_seconds"):
        assert getattr(tuned.choice.nests[0], field) == getattr(nc, field), field
    assert nc.scheduler_seconds is not None


class SecondFastest(FakeTimer):
    """The second candidate asked about is the fastest."""

    def __call__(self, job: TimingJob) -> Measurement:
        self.jobs.append(job)
        s = 1e-6 if job.source == self.jobs[min(1, len(self.jobs) - 1)].source and len(self.jobs) >= 2 else 1.0
        return Measurement(s, (s, s, s))


def test_tuned_choice_remembers_and_recalls(gemm, tmp_path):
    timer = SecondFastest({})
    first = api.tuned_choice(gemm, arch="host", params=SIZES, tune=2, cache_dir=tmp_path, timer=timer,
                             verify_hit=False)
    assert first.cache == "miss" and first.tuning
    second = timer.jobs[1]
    assert first.choice.nests[0].chosen.source == second.source
    # another size in the same bucket (16): the remembered mapping, re-checked and verified
    again = api.tuned_choice(gemm, arch="host", params={"M": 13, "N": 9, "K": 16}, tune=2,
                             cache_dir=tmp_path, timer=FakeTimer({}), verify_hit=True)
    assert again.cache == "hit" and not again.tuning, again.warnings
    assert again.choice.nests[0].chosen.source == f"cache ({second.source})"
    assert again.choice.nests[0].chosen.mapping == second.mapping
    # asking for more candidates than were measured is a miss (compile tunes again)
    from polymap.passes.search.cache import TuningCache, architecture_fingerprint, cache_key
    from polymap.passes.search.remember import recall

    arch = load_architecture("host")
    key = cache_key(gemm, architecture_fingerprint(arch), SIZES)
    assert recall(TuningCache(tmp_path), key, gemm, arch, SIZES, k=2, verify=False).status == "hit"
    assert recall(TuningCache(tmp_path), key, gemm, arch, SIZES, k=3, verify=False).status == "miss"


# --------------------------------------------------------------------------- the child timer


SMALL = parse("""
kernel axpy(N = 64) {
  in  x[N] : f32
  inout y[N] : f32
  for i in 0..N {
    s: y[i] += 2.0 * x[i]
  }
}
""").kernels[0]

FAST = SamplingPolicy(warmup=1, min_repeats=3, max_repeats=5, max_seconds=0.5)


def _job(body: str, *, limit: float = 30.0) -> TimingJob:
    source = "#include <stdint.h>\nvoid axpy(float *restrict x, float *restrict y, long N) {" + body + "}\n"
    return TimingJob("test", SMALL, source, {"N": 64}, FAST, 0, limit)


def test_process_timer_times_generated_code():
    from polymap.codegen.c.emitter import emit_c

    job = TimingJob("original", SMALL, emit_c(SMALL, params={"N": 64}), {"N": 64}, FAST)
    m = ProcessTimer()(job)
    assert m.error is None and m.seconds is not None and m.seconds > 0
    assert 3 <= len(m.samples) <= 5 and m.seconds == statistics.median(m.samples)


def test_process_timer_drops_a_crash_and_a_hang():
    crashed = ProcessTimer()(_job("*(volatile int *)0 = 1;"))
    assert crashed.seconds is None and "crashed" in crashed.error and "SIG" in crashed.error
    hung = ProcessTimer()(_job("for (volatile long k = 0; ; k++) ;", limit=3.0))
    assert hung.seconds is None and hung.error == "timed out after 3 s"


def test_compile_tune_json_has_the_shape_of_cli_md(tmp_path, capsys):
    """A real tuned compile (the child timer, tiny sizes): the document's shape, not its numbers."""
    import json

    from polymap.cli import main

    status = main(["compile", str(EXAMPLES / "gemm.loop"), "-D", "M=16", "-D", "N=16", "-D", "K=16",
                   "--tune", "2", "--no-cache", "--json", "--target", "c", "-o", str(tmp_path)])
    assert status == 0
    doc = json.loads(capsys.readouterr().out)["kernels"][0]
    assert doc["cache"] == "off"
    (nest,) = doc["tuning"]
    assert set(nest) == {"nest", "spearman", "bias", "candidates"}
    assert len(nest["candidates"]) == 2
    assert sorted(c["rank_model"] for c in nest["candidates"]) == [1, 2]
    assert sum(c["chosen"] for c in nest["candidates"]) == 1
    for c in nest["candidates"]:
        assert c["measured_s"] > 0 and c["predicted_s"] > 0 and c["rank_measured"] in (1, 2)
    chosen = next(c for c in nest["candidates"] if c["chosen"])
    fastest = next(c for c in nest["candidates"] if c["rank_measured"] == 1)
    confirmed = doc.get("tuning_confirmed")
    if fastest["rank_model"] == 1:  # the model's pick was the fastest: nothing to confirm
        assert confirmed is None and chosen is fastest
    else:  # the whole kernels timed side by side decided (which, is the machine's business)
        assert set(confirmed) >= {"untuned_s", "tuned_s", "ratio", "kept", "margin"}
        assert chosen is (fastest if confirmed["kept"] == "tuned" else
                          next(c for c in nest["candidates"] if c["rank_model"] == 1))
    assert doc["choice"]["nests"][0]["chosen"] == chosen["source"]
    assert json.loads((tmp_path / "gemm.json").read_text())["tuning"] == doc["tuning"]


# --------------------------------------------------------------------------- more candidates than compile's


def test_neighbours_change_one_decision_at_a_middle_level(gemm, host):
    from polymap.mapping.model import loop_extents, resolved_tile
    from polymap.passes.search.register_mapping import register_mapping
    from polymap.passes.search.variants import neighbours

    values = param_values(gemm, {"M": 256, "N": 256, "K": 256})
    model = api.model(gemm)

    made = register_mapping(model, 0, host, values)
    # read back as a file reads (a tile left out inherits the enclosing level's), as neighbours are
    base = mapping_from_dict(made.to_dict(), kernel=gemm, arch=host)
    extents = loop_extents(gemm, 0, values)
    found = list(neighbours(made, gemm, host, extents))
    assert len(found) >= 4
    assert len({repr(m.to_dict()) for _, m in found}) == len(found)
    last = len(base.levels) - 1
    for label, m in found:
        changed = [k for k in range(len(base.levels)) if m.levels[k] != base.levels[k]
                   or resolved_tile(m, k, extents) != resolved_tile(base, k, extents)]
        # one decision at a middle level (inner levels that leave the loop out inherit it);
        # the backing store and the register tile stay
        assert changed and 0 < min(changed) and max(changed) < last, label
        k = changed[0]
        inner, own = resolved_tile(m, k + 1, extents), resolved_tile(m, k, extents)
        assert all(own[x] % inner[x] == 0 or own[x] == extents[x] for x in m.loops), label


def test_widen_adds_counted_legal_candidates_in_the_models_order(gemm_choice, host, gemm):
    from polymap.passes.search.tune import usable_candidates, widen

    from polymap.passes.search.tune import code_key, distinct

    nc = gemm_choice.nests[0]
    values = param_values(gemm, SIZES)
    before = usable_candidates(nc)
    codes_before = len(distinct(gemm_choice.model, before, values))
    # k counts distinct code (seconds: generous, a loaded machine prints and counts slowly; the
    # evaluations bound the walk, which on gemm improves for minutes)
    order: list[str] = []
    wide = widen(gemm_choice.model, nc, host, values, k=codes_before + 3, seconds=300, evaluations=6,
                 progress=lambda line: order.append(line.split("(", 1)[1][:-1]))
    usable = usable_candidates(wide)
    added = [c for c in usable if " / " in c.source]
    assert 3 <= len(added) <= 6 and len(usable) == len(before) + len(added)
    assert len(distinct(gemm_choice.model, usable, values)) == codes_before + len(added)
    old = {code_key(gemm_choice.model, c, values) for c in usable if " / " not in c.source}
    assert not old & {code_key(gemm_choice.model, c, values) for c in added}
    assert [c.key() for c in usable if c.report is not None] == sorted(c.key() for c in usable if c.report is not None)
    assert all(c.legal and c.report is not None for c in added)
    # best-first: the first neighbour is one of the model's best expandable candidate
    best = min((c for c in before if c.mapping is not None and c.report is not None and not c.ranked_at),
               key=lambda c: c.key())
    assert order[0].startswith(best.source + " / ")


class _Point:
    """A fake mapping on a line: ``widen``'s walk over a landscape whose best point is 10."""

    def __init__(self, n: int):
        self.n = n

    def to_dict(self) -> dict:
        return {"n": self.n}


def _fake_landscape(monkeypatch):
    """``widen``'s collaborators replaced: neighbours n - 1 and n + 1, legal when n >= 0, cycles |n - 10| + 1
    (energy n: no ties), one code per point; what was counted, in order, is returned."""
    from types import SimpleNamespace

    import polymap.passes.search.tune as tune_mod
    from polymap.passes.search.choice import Candidate

    counted: list[int] = []

    def evaluate(model, source, m, arch, params, **_):
        counted.append(m.n)
        report = SimpleNamespace(cycles=abs(m.n - 10) + 1.0, energy_pj=float(m.n))
        return Candidate(source, m, m, m.n >= 0, report=report if m.n >= 0 else None)

    monkeypatch.setattr(tune_mod, "neighbours", lambda m, *a: iter([(f"n={m.n - 1}", _Point(m.n - 1)),
                                                                       (f"n={m.n + 1}", _Point(m.n + 1))]))
    monkeypatch.setattr(tune_mod, "mapping_loop_extents", lambda *a, **kw: {})
    monkeypatch.setattr(tune_mod, "emit_c", lambda kernel, model, mappings, **kw: str([m.n for m in mappings]))
    monkeypatch.setattr(tune_mod, "canonical_source", lambda text: text)
    monkeypatch.setattr(tune_mod, "evaluate_candidate", evaluate)
    start = evaluate(None, "start", _Point(0), None, {})
    counted.clear()
    return tune_mod, SimpleNamespace(kernel=None), tune_mod.NestChoice(0, start, (start,)), counted


def test_widen_walks_downhill_from_the_models_best_and_stops_when_its_best_k_are_expanded(monkeypatch):
    """Best-first: each neighbour better than its parent is expanded next (before, the parent's
    neighbours were added in the order generated, so that conv2d's pool was all single steps of
    ``default``); the walk ends when the best k have had their neighbours counted, the rest ranking below."""
    tune_mod, model, nc, counted = _fake_landscape(monkeypatch)
    lines: list[str] = []
    wide = tune_mod.widen(model, nc, None, {}, k=3, seconds=300, evaluations=100, progress=lines.append)
    # 0's neighbour -1 is illegal, 1 is better: 1 is expanded next, and so on down to 10; then the
    # candidates tied with the third best (9, 11) are expanded: 11 finds 12, which ranks below the best 3
    assert counted == [-1] + list(range(1, 13))
    assert [c.mapping.n for c in wide.candidates][:3] == [10, 9, 11]
    assert [c.key() for c in wide.candidates] == sorted(c.key() for c in wide.candidates)
    assert wide.candidates[0].source == "start / n=1 / n=2 / n=3 / n=4 / n=5 / n=6 / n=7 / n=8 / n=9 / n=10"
    assert len(lines) == 12 and lines[0].endswith("(start / n=1)")


def test_widen_stops_at_its_evaluations_once_it_has_k_codes(monkeypatch):
    tune_mod, model, nc, counted = _fake_landscape(monkeypatch)
    wide = tune_mod.widen(model, nc, None, {}, k=3, seconds=300, evaluations=5)
    assert counted == [-1, 1, 2, 3, 4]
    assert [c.mapping.n for c in wide.candidates] == [4, 3, 2, 1, 0]
    # fewer than k codes: the evaluations do not stop it (the time does)
    tune_mod, model, nc, counted = _fake_landscape(monkeypatch)
    tune_mod.widen(model, nc, None, {}, k=8, seconds=300, evaluations=2)
    assert counted[:8] == [-1, 1, 2, 3, 4, 5, 6, 7]


def test_widen_takes_an_isl_candidates_loops_from_its_schedule(host):
    """jacobi-2d's choice is isl's wavefronts, whose loops are their schedule's (s0, s1, ...): their
    neighbours are tiled over those loops' extents (before, the nest's ``t, i, j`` were looked up:
    KeyError 's0', the first bench_fidelity run that got past jacobi-2d's choice stopped there)."""
    from polymap.mapping.model import mapping_loop_extents
    from polymap.passes.search.tune import usable_candidates, widen

    kernel = load_program(EXAMPLES / "jacobi2d.loop").kernels[0]
    values = param_values(kernel, {"T": 2, "N": 12})
    choice = choose(kernel, host, values, options=ChoiceOptions(search_evaluations=0))
    nc = choice.nests[0]
    scheduled = [c for c in usable_candidates(nc) if c.mapping is not None and c.mapping.schedule]
    assert scheduled, "the test needs an isl candidate"
    wide = widen(choice.model, nc, host, values, k=len(usable_candidates(nc)) + 2, seconds=300, evaluations=4)
    added = [c for c in usable_candidates(wide) if " / " in c.source]
    assert added and all(c.legal and c.report is not None for c in added)
    for c in added:  # tiles within their own loops' extents
        extents = mapping_loop_extents(choice.model.kernel, c.mapping, values, model=choice.model)
        assert set(c.mapping.loops) <= set(extents)


def test_distinct_keeps_the_first_of_each_code(gemm_choice, host, gemm):
    """Mappings that differ where the code does not (the order of a level whose loops walk one
    tile) print one code up to loop names, and are one candidate; a different tile is another."""
    from dataclasses import replace as dc_replace

    from polymap.codegen.c.emitter import emit_c
    from polymap.codegen.c.names import canonical_source
    from polymap.passes.search.tune import distinct, usable_candidates

    values = param_values(gemm, SIZES)
    model = gemm_choice.model
    # the register tiles (the model's first before it priced the team's start: at 16^3 a search
    # mapping on one thread now ranks first, whose code prints loops of one trip at every level)
    base = next(c for c in usable_candidates(gemm_choice.nests[0]) if c.source == "register tiles")
    m = base.mapping
    # a level where at most one loop walks more than one tile: its order is not in the code
    from polymap.mapping.model import loop_extents
    from polymap.passes.counting.execution import _walk, effective_tiles

    walking = [lv for lv, _, _ in _walk(m, effective_tiles(m, loop_extents(gemm, 0, values)))]
    k = next(n for n, lv in enumerate(m.levels) if walking.count(n) <= 1 and len(lv.order) > 1)
    swapped = dc_replace(m, levels=tuple(dc_replace(lv, order=tuple(reversed(lv.order))) if n == k else lv
                                         for n, lv in enumerate(m.levels)))
    a, b = (emit_c(gemm, model, (x,), params=dict(values)) for x in (m, swapped))
    assert canonical_source(a) == canonical_source(b)
    twin = dc_replace(base, source="twin", mapping=swapped)
    other = next(c for c in usable_candidates(gemm_choice.nests[0]) if c.mapping is None)  # the original order
    assert canonical_source(emit_c(gemm, model, (), params=dict(values))) != canonical_source(a)
    assert [c.source for c in distinct(model, [base, twin, other], values)] == [base.source, other.source]
    assert [c.source for c in distinct(model, [twin, base], values)] == ["twin"]


def test_canonical_source_is_the_code_up_to_comments_and_loop_names():
    from polymap.codegen.c.names import canonical_source

    a = "/* header A */\nfor (long k_LLC = 0; k_LLC < 4; k_LLC += 1) {\n  x[k_LLC] += 1;  /* S0 */\n}\n"
    b = "/* header B */\nfor (long k_L2 = 0; k_L2 < 4; k_L2 += 1) {\n    x[k_L2] += 1;\n}\n"
    assert canonical_source(a) == canonical_source(b)
    assert "k_L" not in canonical_source(a) and "__v0" in canonical_source(a)
    # a different bound, or two loops whose roles are exchanged, is other code
    assert canonical_source(a) != canonical_source(b.replace("< 4", "< 5"))
    two = "for (long i = 0; i < N; i += 1) {\n for (long j = 0; j < M; j += 1) {\n y[i] += x[j];\n}\n}\n"
    swapped = "for (long j = 0; j < N; j += 1) {\n for (long i = 0; i < M; i += 1) {\n y[i] += x[j];\n}\n}\n"
    renamed = two.replace("i", "p").replace("j", "q")
    assert canonical_source(two) != canonical_source(swapped)
    assert canonical_source(two) == canonical_source(renamed)


def test_measure_is_what_search_tune_calls(gemm, host, gemm_choice):
    """``api.measure``: mappings in the model's order, sources and predictions passed through."""
    mps = [c.mapping for c in gemm_choice.nests[0].candidates if c.mapping is not None][:3]
    timer = FakeTimer({"search #1": 3.0, "search #2": 1.0, "search #3": 2.0})
    t = api.measure(gemm, mps, arch=host, params=SIZES, predicted_s=[1.0, 1.5, 2.0],
                    sources=["search #1", "search #2", "search #3"], timer=timer)
    assert [c.rank_measured for c in t.candidates] == [3, 1, 2]
    assert t.chosen.candidate.mapping == mps[1]
    assert t.bias == pytest.approx(statistics.median([3.0, 1 / 1.5, 1.0]))
    assert t.spearman == pytest.approx(-0.5)


def test_a_mapping_no_file_can_say_has_no_neighbours(gemm, host):
    """Built in code, an inner tile may exceed its parent's (a file may not): no neighbours, no error."""
    import dataclasses

    from polymap.mapping.model import loop_extents
    from polymap.passes.search.register_mapping import register_mapping
    from polymap.passes.search.variants import neighbours

    values = param_values(gemm, {"M": 512, "N": 512, "K": 512})
    made = register_mapping(api.model(gemm), 0, host, values)
    k = len(made.levels) - 2
    grown = tuple(t if x != "i" else 500 for x, t in zip(made.loops, made.levels[k].tile))
    outer = tuple(t if x != "i" else 250 for x, t in zip(made.loops, made.levels[k - 1].tile))
    levels = list(made.levels)
    levels[k] = dataclasses.replace(levels[k], tile=grown)
    levels[k - 1] = dataclasses.replace(levels[k - 1], tile=outer)
    odd = dataclasses.replace(made, levels=tuple(levels))
    assert list(neighbours(odd, gemm, host, loop_extents(gemm, 0, values))) == []


# --------------------------------------------------------------------------- never slower, and the cache answers


class RandomTimer(FakeTimer):
    """Seconds per candidate drawn in advance (by the order the jobs arrive)."""

    def __init__(self, draws: list):
        super().__init__({})
        self.draws = draws

    def __call__(self, job: TimingJob) -> Measurement:
        self.jobs.append(job)
        s = self.draws[(len(self.jobs) - 1) % len(self.draws)]
        if s is None:
            return Measurement(None, (), "crashed (SIGSEGV)")
        return Measurement(s, (s, s, s))


# each example emits the three candidates' C again (isl's AST, about a second each): few examples,
# which still reach every pattern of failed and timed candidates among three, and of the confirmation
@settings(max_examples=8, deadline=None)
@given(st.lists(st.one_of(st.none(), st.floats(1e-6, 10.0)), min_size=3, max_size=3),
       st.lists(st.floats(1e-6, 10.0), min_size=2, max_size=2))
def test_a_tuned_choice_is_never_slower_than_the_untuned_one(gemm_choice, host, gemm, draws, whole):
    """The untuned pick is the model's first candidate; tuning measures it among the K and the fastest
    measured is then timed as a whole kernel side by side with the untuned one: it is kept only when
    that comparison finds it faster by the margin, so by the measurements that decide, a tuned compile
    is never slower than the untuned one."""
    timer = WholeKernelTimer(draws, whole)
    tuned = tune_choice(gemm_choice, arch=host, params=param_values(gemm, SIZES), options=TuneOptions(k=3),
                        timer=timer)
    t = tuned.tuning[0]
    untuned = next(r for r in t.candidates if r.rank_model == 1)
    assert untuned.candidate.source == gemm_choice.nests[0].chosen.source
    final = tuned.choice.nests[0].chosen
    fastest = min((r for r in t.candidates if r.measurement.seconds is not None),
                  key=lambda r: (r.measurement.seconds, r.rank_model), default=None)
    if fastest is None or fastest.rank_model == 1:  # nothing to confirm: the model's pick stays
        assert tuned.confirmation is None and final.source == gemm_choice.nests[0].chosen.source
        return
    c = tuned.confirmation
    assert c is not None and c.ratio == pytest.approx(whole[1] / whole[0])
    if whole[1] <= whole[0] * (1 - TuneOptions().margin):
        assert c.kept == "tuned" and final.source == fastest.candidate.source and t.chosen is fastest
    else:  # not measurably faster side by side: the untuned pick, and the tuning report says so
        assert c.kept == "untuned" and final.source == gemm_choice.nests[0].chosen.source
        assert t.chosen is not None and t.chosen.rank_model == 1


class WholeKernelTimer(RandomTimer):
    """Per-candidate seconds drawn in advance; the confirmation's two whole kernels (untuned, tuned) take
    ``whole``'s seconds in every round."""

    def __init__(self, draws: list, whole: list):
        super().__init__(draws)
        self.whole = whole
        self.confirming = []

    def __call__(self, job: TimingJob) -> Measurement:
        if not isinstance(job.mapping, tuple):
            return super().__call__(job)
        self.confirming.append(job)
        s = self.whole[0 if job.source == self.confirming[0].source else 1]
        return Measurement(s, (s, s, s))


def test_confirmation_keeps_the_untuned_pick_when_the_whole_kernel_is_not_faster(gemm_choice, host, gemm):
    """2mm's case: each candidate timed alone looked faster, the whole kernel side by side did not."""
    from polymap.passes.search.tune import distinct, usable_candidates

    nc = gemm_choice.nests[0]
    last = distinct(gemm_choice.model, usable_candidates(nc), param_values(gemm, SIZES), limit=3)[2].source
    timer = WholeKernelTimer([1.0, 1.0, 0.5], [1.0, 0.99])  # 1 % faster side by side: noise
    tuned = tune_choice(gemm_choice, arch=host, params=param_values(gemm, SIZES), options=TuneOptions(k=3),
                        timer=timer)
    assert tuned.confirmation.kept == "untuned" and tuned.confirmation.ratio == pytest.approx(0.99)
    assert tuned.choice.nests[0].chosen.source == nc.chosen.source != last
    assert tuned.tuning[0].chosen.rank_model == 1
    # both whole kernels were timed in alternating order, round after round, each the whole kernel's C
    sources = [j.source for j in timer.confirming]
    assert sources[:4] == [nc.chosen.source, last, last, nc.chosen.source]
    assert len(sources) == 2 * TuneOptions().confirm.rounds
    assert tuned.confirmation.to_json()["kept"] == "untuned"


class RoundsTimer(WholeKernelTimer):
    """The confirmation's untuned kernel takes ``untuned[r]`` seconds in round r, the tuned one ``tuned``."""

    def __init__(self, draws: list, untuned: list, tuned: float):
        super().__init__(draws, [])
        self.untuned, self.tuned = untuned, tuned

    def __call__(self, job: TimingJob) -> Measurement:
        if not isinstance(job.mapping, tuple):
            return RandomTimer.__call__(self, job)
        self.confirming.append(job)
        if job.source == self.confirming[0].source:
            s = self.untuned[sum(j.source == job.source for j in self.confirming) - 1]
        else:
            s = self.tuned
        return Measurement(s, (s,))


def test_confirmation_needs_the_best_samples_to_agree(gemm_choice, host, gemm):
    """Faster in most rounds but not at its best: the untuned kernel's one unloaded round (0.5 s against
    the tuned 0.9 s) shows the rounds' ratio was the load's; the model's pick stays."""
    untuned = [0.5] + [1.0] * (TuneOptions().confirm.rounds - 1)
    timer = RoundsTimer([1.0, 1.0, 0.5], untuned, 0.9)
    tuned = tune_choice(gemm_choice, arch=host, params=param_values(gemm, SIZES), options=TuneOptions(k=3),
                        timer=timer)
    assert tuned.confirmation.ratio == pytest.approx(0.9) and tuned.confirmation.kept == "untuned"
    assert tuned.choice.nests[0].chosen.source == gemm_choice.nests[0].chosen.source


def test_paired_ratio_compares_rounds_side_by_side():
    """A load that doubles half-way hits both jobs of a round: the pairs' ratio sees through it."""
    a = Measurement(3.0, (0.9, 0.9, 1.8, 1.8, 1.8))
    b = Measurement(1.0, (1.0, 1.0, 2.0, 2.0, 2.0))
    assert paired_ratio(a, b) == pytest.approx(0.9)
    assert paired_ratio(Measurement(None, (), "crashed (SIGSEGV)"), b) is None


def test_interleaved_samples_alternate_and_take_steady_blocks():
    """Rounds run forward then backward; each block restores, makes one untimed call, then times
    back-to-back calls (a fake clock: each call of job k advances it by k + 1 ms)."""
    now = [0.0]
    calls: list[str] = []

    def run(k):
        def go():
            calls.append(f"run{k}")
            now[0] += (k + 1) * 1e-3
        return go

    def restore(k):
        return lambda: calls.append(f"restore{k}")

    policy = InterleavedPolicy(rounds=4, max_rounds=4, min_sample_seconds=0.0025)
    # two threads: the caller's CPU clock runs with the fake clock, a worker's at half its pace
    samples = interleaved_samples([run(0), run(1)], [restore(0), restore(1)], policy, clock=lambda: now[0],
                                  cpu_clock=lambda: {1: now[0], 2: now[0] / 2})
    assert [len(s) for s in samples] == [4, 4]
    assert all(w == pytest.approx(1e-3) and c == pytest.approx(1e-3) for w, c in samples[0])
    assert all(w == pytest.approx(2e-3) and c == pytest.approx(2e-3) for w, c in samples[1])
    # the warm-up blocks (one call each), then the rounds: 0 1, 1 0, 0 1, 1 0
    starts = [c for c in calls if c.startswith("restore")]
    assert starts == ["restore0", "restore1"] + ["restore0", "restore1", "restore1", "restore0"] * 2
    # job 0's blocks: one untimed call and 3 timed (>= 2.5 ms); job 1's: one untimed and 2 timed
    first_block = calls[calls.index("restore0", 4) + 1:]
    assert first_block[:first_block.index("restore1")] == ["run0"] * 4


def test_a_hit_neither_chooses_nor_times(gemm, tmp_path, monkeypatch):
    """The second compile in a bucket answers from the cache: no search, no timing (what makes it
    a small fraction of the first; bench_tune_cache.py measures the fraction)."""
    timer = SecondFastest({})
    first = api.tuned_choice(gemm, arch="host", params=SIZES, tune=2, cache_dir=tmp_path, timer=timer,
                             verify_hit=False)
    assert first.cache == "miss" and len(tuning_jobs(timer)) == 2

    def no_choice(*args, **kwargs):
        raise AssertionError("a cache hit ran compile's choice")

    monkeypatch.setattr(api, "choose", no_choice)
    again_timer = FakeTimer({})
    again = api.tuned_choice(gemm, arch="host", params={"M": 12, "N": 16, "K": 9}, tune=2, cache_dir=tmp_path,
                             timer=again_timer, verify_hit=False)
    assert again.cache == "hit" and again_timer.jobs == []
    assert again.choice.nests[0].chosen.mapping == first.choice.nests[0].chosen.mapping
    # the hit counted each remembered mapping once, at its sizes (the fit check's footprints): compile
    # writes that report, the same an independent count gives, instead of counting it again
    from polymap.passes.counting.cost_model import evaluate, mapping_execution
    from polymap.passes.counting.counting import isl_count_mapping
    from polymap.passes.counting.fit import fit_problems
    from polymap.mapping.model import mapping_loop_extents
    arch, values = load_architecture("host"), {"M": 12, "N": 16, "K": 9}
    mp, model = again.choice.nests[0].chosen.mapping, again.choice.model
    report = again.choice.report_of(mp, arch, values)
    assert report is not None
    independent = evaluate(isl_count_mapping(model, mp, arch, params=values), arch,
                           execution=mapping_execution(model, mp, arch, mapping_loop_extents(model.kernel, mp, values)))
    assert report == independent and fit_problems(model, mp, arch, values) == ()


def test_a_candidate_chosen_at_reduced_sizes_is_timed(gemm, host):
    """An isl schedule beyond the counting budget is chosen by its counts at reduced sizes and has no
    report at the given ones (``ranked_at``): ``--tune`` times it with the others (it had been left out,
    so jacobi-2d's first tuned compile timed nothing); one ranked there that lost stays out."""
    from polymap.passes.search.choice import Candidate, NestChoice
    from polymap.passes.search.tune import usable_candidates

    from polymap.passes.search.choice import original_mapping

    m = original_mapping(gemm, 0, host)
    winner = Candidate("isl schedule", m, m, True, ("ranked at reduced sizes",), ranked_at=(("M", 31),))
    loser = Candidate("isl schedule 2", m, m, True, ("ranked at reduced sizes",))
    original = Candidate("original order", None, m, True)
    nc = NestChoice(0, winner, (winner, original, loser))
    assert usable_candidates(nc) == [winner, original]
