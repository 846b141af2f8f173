"""A cache hit's re-check: fit decided on the footprints alone, counts only for what fits, the exact report
counted in a child while the code is generated (``docs/design.md``, "A hit's cost").

The footprints a hit decides fit on (:func:`polymap.passes.counting.fit.level_footprints`: the fast path's
closed forms where it applies, else ISL's residencies) are checked against the independent ISL count
(:func:`~polymap.passes.counting.counting.isl_count_mapping`) on the mappings compile's rules make for the
examples, at sizes their tiles do not divide; the report a hit writes, counted in a child of the budget,
against a fresh count of the same mapping.
"""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from polymap import api
from polymap.budget import Budget, BudgetExceeded, ChildFailed
from polymap.driver import param_values, parse
from polymap.machine.presets import load_architecture
from polymap.passes.counting import fit
from polymap.passes.counting.counting import isl_count_mapping
from polymap.passes.counting.fastcount import fast_footprints
from polymap.passes.search import remember as remember_module
from polymap.passes.search.cache import TuningCache, cache_key
from polymap.passes.search.choice import RULES, kernel_to_map, original_mapping
from polymap.passes.search.isl_schedule import isl_mappings
from polymap.passes.search.remember import exact_form, recall
from polymap.poly import build_model

ROOT = Path(__file__).resolve().parent.parent
HOST = load_architecture("host")

#: the examples of bench_tune_cache, at sizes no tile of theirs divides (small enough for ISL's counts)
EXAMPLES = {
    "examples/gemm.loop": {"M": 37, "N": 45, "K": 29},
    "examples/conv2d.loop": {"C": 5, "K": 7, "P": 9, "Q": 11},
    "examples/jacobi2d.loop": {"T": 3, "N": 21},
    "examples/2mm.loop": {"NI": 19, "NJ": 23, "NK": 17, "NL": 13},
    "examples/polybench/syrk.loop": {"M": 23, "N": 41},
}


def _model(path: str):
    kernel = parse((ROOT / path).read_text(), path).kernels[0]
    mapped, _ = kernel_to_map(kernel)
    return kernel, build_model(mapped)


def _mappings(model, nest: int, params: dict[str, int]):
    """What a hit re-checks: the rules' mappings (what it re-blocks with), isl's schedules, the original."""
    found = [m for rule in RULES.values() for _, m in rule(model, nest, HOST, params) if m is not None]
    found += [m for _, m in isl_mappings(model, nest, HOST, params)]
    return found + [original_mapping(model.kernel, nest, HOST)]


@pytest.mark.parametrize("path", list(EXAMPLES))
def test_the_fit_footprints_are_the_isl_counts_on_the_examples_mappings(path: str):
    """Both routes of ``level_footprints`` (gemm's register tiles by the fast path, syrk's triangle and
    jacobi-2d's schedules by ISL's residencies) give the footprints of the whole ISL count, so the one
    capacity rule decides the same on them."""
    kernel, model = _model(path)
    params = param_values(model.kernel, EXAMPLES[path])
    seen = fast = 0
    for nest in range(len(model.kernel.nests())):
        for mp in _mappings(model, nest, params):
            footprints = fit.level_footprints(model, mp, params)
            counts = isl_count_mapping(model, mp, HOST, params=params)
            assert footprints == (None,) + tuple((lv.footprint, lv.footprint_bytes) for lv in counts.levels[1:]), mp
            assert fit.footprint_problems(footprints, HOST) == fit.capacity_problems_of(counts, HOST)
            seen += 1
            fast += fast_footprints(model, mp, params=params) is not None
    assert seen >= 2
    if path in ("examples/gemm.loop", "examples/2mm.loop"):
        assert fast, "the fast route was never taken: the test compares ISL with itself"
    if path in ("examples/polybench/syrk.loop", "examples/jacobi2d.loop"):
        assert fast < seen, "the ISL route was never taken"


def test_the_fit_rule_is_the_same_on_both_routes_where_a_level_overflows():
    """A capacity just under a mapping's footprint is refused on the footprints exactly as on the counts."""
    _, model = _model("examples/polybench/syrk.loop")
    params = param_values(model.kernel, EXAMPLES["examples/polybench/syrk.loop"])
    mp = next(m for _, m in RULES["register tiles"](model, 0, HOST, params))
    counts = isl_count_mapping(model, mp, HOST, params=params)
    k = max(range(1, len(counts.levels)), key=lambda j: counts.levels[j].footprint_bytes)
    from polymap.machine.arch import architecture_from_dict

    for room in (counts.levels[k].footprint_bytes - 1, counts.levels[k].footprint_bytes):
        levels = [{"name": lv.name} if j != k else {"name": lv.name, "capacity": f"{room}B"}
                  for j, lv in enumerate(HOST.levels)]
        tight = architecture_from_dict({"levels": levels, "compute": {"instances": 1}}, source_name="<t>")
        problems = fit.footprint_problems(fit.level_footprints(model, mp, params), tight)
        assert problems == fit.capacity_problems_of(counts, tight)
        assert bool(problems) == (room < counts.levels[k].footprint_bytes)


def _store(tmp_path: Path, kernel, mapping, sizes: dict, source: str = "register tiles"):
    key = cache_key(kernel, "arch", sizes)
    TuningCache(tmp_path).store(key, {"kernel": kernel.name, "k": 0, "params": sizes, "tuning": [],
                                      "nests": [{"nest": mapping.nest, "source": source,
                                                 "mapping": mapping.to_dict(), "exact": exact_form(mapping),
                                                 "measured_s": 1e-3}]})
    return key


def test_a_hit_counts_a_remembered_mapping_once_with_the_fit_checks_footprints(tmp_path, monkeypatch):
    """A remembered mapping that fits is counted once, with the footprints the fit check made (not counted
    again); asked not to count (compile counts it beside the code), it is not counted at all."""
    counted = []
    real = remember_module.count_mapping

    def recorded(*args, **kwargs):
        counted.append(kwargs.get("footprints"))
        return real(*args, **kwargs)

    monkeypatch.setattr(remember_module, "count_mapping", recorded)
    kernel, model = _model("examples/polybench/syrk.loop")
    small = {"M": 23, "N": 41}
    mp = next(m for _, m in RULES["register tiles"](model, 0, HOST, param_values(model.kernel, small)))
    key = _store(tmp_path, kernel, mp, small)
    found = recall(TuningCache(tmp_path), key, kernel, HOST, small, verify=False)
    assert found.status == "hit", found.warnings
    assert len(counted) == 1 and counted[0] == fit.level_footprints(model, mp, param_values(model.kernel, small))
    counted.clear()
    found = recall(TuningCache(tmp_path), key, kernel, HOST, small, verify=False, count=False)
    assert found.status == "hit" and not counted and found.choice.nests[0].chosen.report is None


def test_a_remembered_mapping_that_overflows_is_refused_uncounted(tmp_path, monkeypatch):
    """The seidel of test_tuning_cache: every level holding all of A at N = 2048 is refused on its
    footprints (``does not fit``), and count_mapping is never called."""
    monkeypatch.setattr(remember_module, "count_mapping", lambda *a, **k: pytest.fail("counted"))
    kernel = parse("""
kernel seidel(T = 4, N = 16) {
  inout A[N, N] : f64
  for t in 0..T, i in 1..N - 1, j in 1..N - 1 {
    relax: A[i, j] = (A[i - 1, j] + A[i, j - 1] + A[i, j] + A[i + 1, j] + A[i, j + 1]) / 5.0
  }
}""").kernels[0]
    whole = {"kernel": "seidel", "nest": 0, "levels": [{"level": lv.name, "order": ["t", "i", "j"]}
                                                       for lv in HOST.levels]}
    big = {"T": 4, "N": 2048}
    key = cache_key(kernel, "arch", big)
    TuningCache(tmp_path).store(key, {"kernel": "seidel", "k": 0, "params": big, "tuning": [],
                                      "nests": [{"nest": 0, "source": "search #1", "mapping": whole,
                                                 "measured_s": 1e-3}]})
    found = recall(TuningCache(tmp_path), key, kernel, HOST, big, verify=False)
    assert found.status == "miss" and "does not fit" in found.warnings[0]


def test_a_hits_report_counted_beside_the_code_is_the_exact_count(tmp_path, monkeypatch):
    """compile's hit on syrk (outside the fast path's class) counts its report in a child of the budget
    while it generates and verifies the code: ``NAME.json``'s cost and the choice's ranking carry the same
    report as a fresh count of the same mapping at the same sizes."""
    kernel, model = _model("examples/polybench/syrk.loop")
    sizes, other = {"M": 23, "N": 41}, {"M": 20, "N": 35}  # one bucket: 32 x 64
    mp = next(m for _, m in RULES["register tiles"](model, 0, HOST, param_values(model.kernel, other)))
    assert fast_footprints(model, mp, params=param_values(model.kernel, other)) is None, "premise: ISL counts it"
    cache_dir = tmp_path / "cache"
    _store(cache_dir, kernel, mp, sizes)
    started = []
    start = Budget.start

    def recorded(self, fn, args=(), kwargs=None, *, what):
        started.append(what)
        return start(self, fn, args, kwargs, what=what)

    monkeypatch.setattr(Budget, "start", recorded)
    result = api.compile(kernel, arch=HOST, params=other, out_dir=tmp_path / "out", cache_dir=cache_dir,
                         arch_fingerprint="arch", budget=Budget(seconds=600),
                         options=api.CompileOptions(targets=("c",)))
    assert result.extra["cache"] == "hit" and result.verification.passed
    assert started == ["the exact counts of kernel 'syrk'"]  # in a child, beside the code
    values = param_values(result.kernel, other)
    (written,) = result.mappings
    fresh = api._report(result.choice.model, written, HOST, values, api.CostOptions())
    assert result.costs == (fresh,)
    assert result.choice.nests[0].chosen.report == fresh
    doc = json.loads((tmp_path / "out" / "syrk.json").read_text())
    assert doc["cost"][0] is not None and doc["choice"]["nests"][0]["candidates"][0]["cycles"] == fresh.cycles


def _double(x: int) -> int:
    return 2 * x


def _fail(x: int) -> int:
    raise ValueError(f"no {x}")


def _sleep(x: float) -> float:
    import time

    time.sleep(x)
    return x


def test_started_work_gives_its_value_its_error_and_stops_at_the_deadline():
    budget = Budget(seconds=60)
    assert budget.start(_double, (21,), what="doubling").result() == 42
    with pytest.raises(ChildFailed, match="no 3"):
        budget.start(_fail, (3,), what="failing").result()
    late = Budget(seconds=0.5).start(_sleep, (30.0,), what="sleeping")
    with pytest.raises(BudgetExceeded, match="sleeping"):
        late.result()
    pending = budget.start(_sleep, (30.0,), what="sleeping")
    pending.cancel()  # ends the child at once
    assert not pending._child.is_alive()
